//! The reads of runs and jobs ([`RunReads`]: one run, a page of runs, a
//! run's jobs, the live bindings), the admitted input, and the decoding of
//! a run's and a job's row that every read and lease shares.

use std::collections::BTreeMap;

use async_trait::async_trait;
use coordinator_ir::instant::Instant;
use coordinator_ports::store::{
    erased_state, Job, JobKind, JobState, Lease, Owner, Review, RunFilter, RunPage, RunReads,
    RunRecord, StepLedger, StoreError as PortError,
};
use coordinator_ports::TraceParent;
use coordinator_runtime::binding::LiveBinding;
use coordinator_vm::{EffectState, RunState, RunStatus};
use serde_json::Value;
use sqlx::postgres::PgRow;
use sqlx::Row;
use time::OffsetDateTime;

use super::columns::{at_instant, instant_of, JOB_COLUMNS, RUN_COLUMNS};
use super::errors::{erased, pdb, port, tampered};
use super::Store;
use crate::deploy::live_bindings;
use crate::{db_error, DatabaseError};

/// The cursor of a page of runs that ends at sequence `seq`.
fn encode_cursor(seq: i64) -> String {
    hex::encode(format!("runs-before:{seq}"))
}

/// The sequence a page's cursor names.
///
/// # Errors
/// [`PortError::BadCursor`] for anything [`encode_cursor`] did not write.
fn decode_cursor(cursor: &str) -> Result<i64, PortError> {
    hex::decode(cursor)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| s.strip_prefix("runs-before:").and_then(|n| n.parse().ok()))
        .ok_or(PortError::BadCursor)
}

impl Store {
    /// The admitted input of a run (sealed apart from the state).
    ///
    /// # Errors
    /// `run.payload-erased` after retention, `state-key-custody`,
    /// `state-tampered`, `store-unavailable`.
    pub async fn load_input(&self, run_id: &str) -> Result<Option<Value>, DatabaseError> {
        let row = sqlx::query(&format!(
            "SELECT sealed_input FROM {}.runs WHERE run_id = $1",
            self.ns
        ))
        .bind(run_id)
        .fetch_optional(&self.db)
        .await
        .map_err(db_error)?;
        let Some(row) = row else { return Ok(None) };
        let sealed: Option<Vec<u8>> = row.try_get(0).map_err(db_error)?;
        match sealed {
            Some(s) => self.open_json(run_id, "input", "", &s).map(Some),
            None => Err(erased(run_id)),
        }
    }

    /// A run's row ([`RUN_COLUMNS`]) as the port's record, its state and
    /// owner opened (an erased run's state rebuilt from its clear columns).
    pub(super) fn record(&self, row: &PgRow) -> Result<RunRecord, PortError> {
        let id: String = row.try_get("run_id").map_err(pdb)?;
        let sealed_state: Option<Vec<u8>> = row.try_get("sealed_state").map_err(pdb)?;
        let sealed_owner: Option<Vec<u8>> = row.try_get("sealed_owner").map_err(pdb)?;
        let erased_at: Option<OffsetDateTime> = row.try_get("payload_erased_at").map_err(pdb)?;
        let Some(sealed_owner) = sealed_owner else {
            return Err(tampered(format!("run {id} has no sealed owner")));
        };
        let state = match (sealed_state, erased_at) {
            (_, Some(_)) => self.erased_state(row, &id)?,
            (Some(sealed), None) => self.open_json(&id, "state", "", &sealed).map_err(port)?,
            (None, None) => return Err(tampered(format!("run {id} has no sealed state"))),
        };
        let ledger: String = row.try_get("ledger").map_err(pdb)?;
        let ledger: BTreeMap<String, StepLedger> =
            serde_json::from_str(&ledger).map_err(|e| tampered(format!("run {id} ledger: {e}")))?;
        let bindings: String = row.try_get("bindings").map_err(pdb)?;
        let bindings: BTreeMap<String, String> = serde_json::from_str(&bindings)
            .map_err(|e| tampered(format!("run {id} bindings: {e}")))?;
        let seq: i64 = row.try_get("seq").map_err(pdb)?;
        let version: i64 = row.try_get("version").map_err(pdb)?;
        let review: Option<String> = row.try_get("review").map_err(pdb)?;
        let review = review
            .map(|r| Review::parse(&r).ok_or_else(|| tampered(format!("run {id} review `{r}`"))))
            .transpose()?;
        Ok(RunRecord {
            sequence: u64::try_from(seq).unwrap_or(0),
            workflow: row.try_get("workflow").map_err(pdb)?,
            revision: row.try_get("revision").map_err(pdb)?,
            owner: self
                .open_json::<Owner>(&id, "owner", "", &sealed_owner)
                .map_err(port)?,
            start_identity: row.try_get("start_identity").map_err(pdb)?,
            request_digest: row.try_get("request_fingerprint").map_err(pdb)?,
            state,
            ledger,
            version: u64::try_from(version).unwrap_or(0),
            bindings,
            payload_erased: erased_at.is_some(),
            review,
            ended_at: row
                .try_get::<Option<OffsetDateTime>, _>("ended_at")
                .map_err(pdb)?
                .map(instant_of),
            trace_parent: row
                .try_get::<Option<String>, _>("trace_parent")
                .map_err(pdb)?
                .map(|t| {
                    TraceParent::parse(&t)
                        .ok_or_else(|| tampered(format!("run {id} trace_parent `{t}`")))
                })
                .transpose()?,
            id,
        })
    }

    /// An erased run's state, from its clear columns (state name and
    /// timestamps): [`erased_state`].
    fn erased_state(&self, row: &PgRow, id: &str) -> Result<RunState, PortError> {
        let name: String = row.try_get("state").map_err(pdb)?;
        let status: RunStatus = serde_json::from_value(Value::String(name))
            .map_err(|e| tampered(format!("run {id} state: {e}")))?;
        let instant = |column: &str| -> Result<Instant, PortError> {
            let t: OffsetDateTime = row.try_get(column).map_err(pdb)?;
            Ok(instant_of(t))
        };
        let ended: Option<OffsetDateTime> = row.try_get("ended_at").map_err(pdb)?;
        Ok(erased_state(
            status,
            &instant("created_at")?,
            &instant("deadline_at")?,
            &instant("updated_at")?,
            ended.map(instant_of).as_ref(),
        ))
    }

    /// A job's row ([`JOB_COLUMNS`]) as the port's job, its command opened.
    pub(super) fn job(&self, row: &PgRow) -> Result<Job, PortError> {
        let id: i64 = row.try_get("job_id").map_err(pdb)?;
        let run_id: String = row.try_get("run_id").map_err(pdb)?;
        let step: String = row.try_get("step").map_err(pdb)?;
        let detail: String = row.try_get("detail").map_err(pdb)?;
        let mut detail: Value =
            serde_json::from_str(&detail).map_err(|e| tampered(format!("job {id}: {e}")))?;
        let sealed: Option<Vec<u8>> = row.try_get("sealed_command").map_err(pdb)?;
        if let (Some(sealed), Some(o)) = (sealed, detail.as_object_mut()) {
            let command: Value = self
                .open_json(&run_id, "command", &step, &sealed)
                .map_err(port)?;
            o.insert("command".into(), command);
        }
        let kind: JobKind =
            serde_json::from_value(detail).map_err(|e| tampered(format!("job {id}: {e}")))?;
        let state: String = row.try_get("state").map_err(pdb)?;
        let owner: Option<String> = row.try_get("lease_owner").map_err(pdb)?;
        let expires: Option<OffsetDateTime> = row.try_get("lease_expires_at").map_err(pdb)?;
        let due: OffsetDateTime = row.try_get("due_at").map_err(pdb)?;
        Ok(Job {
            id: u64::try_from(id).unwrap_or(0),
            run_id,
            kind,
            due_at: instant_of(due),
            state: if state == "sending" {
                JobState::Sending
            } else {
                JobState::Ready
            },
            lease: owner.zip(expires).map(|(owner, e)| Lease {
                owner,
                expires_at: instant_of(e),
            }),
        })
    }
}

#[async_trait]
impl RunReads for Store {
    async fn get(&self, run_id: &str) -> Result<Option<RunRecord>, PortError> {
        let row = sqlx::query(&format!(
            "SELECT {RUN_COLUMNS} FROM {}.runs WHERE run_id = $1",
            self.ns
        ))
        .bind(run_id)
        .fetch_optional(&self.db)
        .await
        .map_err(pdb)?;
        row.map(|r| self.record(&r)).transpose()
    }

    async fn list(&self, filter: &RunFilter) -> Result<RunPage, PortError> {
        let limit = filter.limit.clamp(1, 100);
        let before = filter.cursor.as_deref().map(decode_cursor).transpose()?;
        let owner_ref = filter
            .owner
            .as_ref()
            .map(|o| self.admission.owner_reference(&o.iss, &o.sub));
        let rows = sqlx::query(&format!(
            "SELECT {RUN_COLUMNS} FROM {}.runs
              WHERE ($1::text IS NULL OR owner_ref = $1)
                AND ($2::text[] IS NULL OR workflow = ANY($2))
                AND ($3::text IS NULL OR state = $3)
                AND ($4::boolean IS NULL OR attention = $4)
                AND ($5::bigint IS NULL OR seq < $5)
                AND ($7::timestamptz IS NULL OR created_at < $7)
                AND (NOT $8 OR effect_unknown)
              ORDER BY seq DESC LIMIT $6",
            self.ns
        ))
        .bind(owner_ref)
        .bind(filter.workflows.clone())
        .bind(filter.state.map(RunStatus::as_str))
        .bind(filter.attention)
        .bind(before)
        .bind(i64::from(limit) + 1)
        .bind(filter.admitted_before.as_ref().map(at_instant))
        // A run whose current step's effect is `unknown` holds an
        // `unknown` effect: the column narrows the scan.
        .bind(filter.effect == Some(EffectState::Unknown))
        .fetch_all(&self.db)
        .await
        .map_err(pdb)?;
        let more = rows.len() > limit as usize;
        let runs = rows
            .iter()
            .take(limit as usize)
            .map(|r| self.record(r))
            .collect::<Result<Vec<_>, _>>()?;
        // The cursor follows the last run scanned; step and effect are
        // decided on the opened states of the page (RunFilter::limit).
        let next_cursor = if more {
            runs.last()
                .map(|r| encode_cursor(i64::try_from(r.sequence).unwrap_or(i64::MAX)))
        } else {
            None
        };
        let runs = runs
            .into_iter()
            .filter(|r| filter.passes_current_step(r))
            .collect();
        Ok(RunPage { runs, next_cursor })
    }

    async fn jobs(&self, run_id: &str) -> Result<Vec<Job>, PortError> {
        let rows = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM {}.jobs WHERE run_id = $1 ORDER BY job_id",
            self.ns
        ))
        .bind(run_id)
        .fetch_all(&self.db)
        .await
        .map_err(pdb)?;
        rows.iter().map(|r| self.job(r)).collect()
    }

    async fn live_bindings(&self) -> Result<Vec<LiveBinding>, PortError> {
        let mut conn = self.db.begin().await.map_err(port)?;
        live_bindings(&mut conn, &self.ns).await.map_err(port)
    }
}
