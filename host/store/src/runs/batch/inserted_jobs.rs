//! The new jobs of a group statement: their arrays as bound
//! ([`JobArrays`]), the CTEs that insert them for the items that went ahead
//! ([`new_jobs_sql`]), and the jobs leased on insert as they come back
//! ([`LeasedRows`]).

use std::collections::HashMap;

use coordinator_ports::store::{Job, JobState, NewJob};
use serde_json::Value;
use sqlx::Row;
use time::OffsetDateTime;

use super::GroupQuery;
use crate::runs::columns::{at_instant, epoch_column};
use crate::runs::new_jobs::{leased_job, JobValues};

/// The new jobs of a batch as bound: one array element per job, with the
/// ordinal `k` (from 1) of the commit or admission it belongs to.
#[derive(Default)]
pub(super) struct JobArrays<'a> {
    k: Vec<i32>,
    kinds: Vec<&'static str>,
    steps: Vec<&'a str>,
    dues: Vec<OffsetDateTime>,
    details: Vec<&'a str>,
    review_requests: Vec<Option<&'a str>>,
    keys: Vec<Option<&'a str>>,
    key_versions: Vec<Option<i32>>,
    sealed_commands: Vec<Option<&'a [u8]>>,
    owners: Vec<Option<&'a str>>,
    untils: Vec<Option<OffsetDateTime>>,
    epochs: Vec<Option<i64>>,
    sendings: Vec<bool>,
}

impl<'a> JobArrays<'a> {
    /// Adds the jobs of the batch's item `index` (0-based; `k` is
    /// `index + 1`).
    pub(super) fn push(&mut self, index: usize, values: &'a [JobValues<'a>]) {
        let k = i32::try_from(index + 1).unwrap_or(i32::MAX);
        for v in values {
            self.k.push(k);
            self.kinds.push(v.row.kind);
            self.steps.push(v.row.step.as_str());
            self.dues.push(v.due_at);
            self.details.push(v.row.detail.as_str());
            self.review_requests
                .push(v.row.review_request_id.as_deref());
            self.keys.push(v.row.idempotency_key.as_deref());
            self.key_versions.push(v.key_version);
            self.sealed_commands.push(v.sealed.as_deref());
            self.owners.push(v.lease.map(|l| l.owner.as_str()));
            self.untils
                .push(v.lease.map(|l| at_instant(&l.lease_until)));
            self.epochs.push(v.lease.map(|l| epoch_column(l.epoch)));
            self.sendings.push(v.lease.is_some() && v.sending);
        }
    }

    /// Binds the thirteen arrays, in [`new_jobs_sql`]'s order, after the
    /// parameters bound before.
    pub(super) fn bind<'q>(&'q self, query: GroupQuery<'q>) -> GroupQuery<'q> {
        bind_in_order!(query;
            &self.k, &self.kinds, &self.steps, &self.dues, &self.details, &self.review_requests,
            &self.keys, &self.key_versions, &self.sealed_commands, &self.owners, &self.untils,
            &self.epochs, &self.sendings)
    }
}

/// The CTEs (each with a leading comma) that insert a batch's new jobs
/// ([`JobArrays`], parameters `$first`..`$first+12`) for the items that
/// went ahead: `made` is a CTE with columns `k` and `run_id`, one row per
/// item whose run was inserted or updated. Each job is leased on insert to
/// its owner until its expiry when the deployment is under the job's
/// restore epoch and no restore hold (`ins` returns what
/// [`LEASED_COLUMNS`] reads), inserted `sending` when leased and marked
/// ([`JobValues::sending`]), and its idempotency key is recorded spent.
pub(super) fn new_jobs_sql(ns: &str, first: usize, made: &str) -> String {
    let [k, kind, step, due, detail, review, key, kv, sealed, owner, until, epoch, sending] =
        std::array::from_fn(|i| format!("${}", first + i));
    format!(
        ", nj AS (
               SELECT * FROM unnest((SELECT {k}::integer[]), {kind}::text[], {step}::text[],
                   {due}::timestamptz[], {detail}::text[], {review}::text[], {key}::text[],
                   {kv}::integer[], {sealed}::bytea[], {owner}::text[], {until}::timestamptz[],
                   {epoch}::bigint[], {sending}::boolean[])
                 WITH ORDINALITY AS nj(k, kind, step, due_at, detail, review_request_id,
                   idempotency_key, key_version, sealed_command, owner, lease_until, epoch,
                   sending, n)),
             ins AS (
               INSERT INTO {ns}.jobs (run_id, kind, step, state, due_at, detail, review_request_id,
                   idempotency_key, key_version, sealed_command, lease_owner, lease_expires_at)
               SELECT m.run_id, nj.kind, nj.step,
                      CASE WHEN o.owner IS NOT NULL AND nj.sending THEN 'sending' ELSE 'ready' END,
                      nj.due_at, nj.detail::jsonb,
                      nj.review_request_id, nj.idempotency_key, nj.key_version, nj.sealed_command,
                      o.owner, CASE WHEN o.owner IS NOT NULL THEN nj.lease_until END
                 FROM nj JOIN {made} m ON m.k = nj.k
                CROSS JOIN {ns}.deployment d
                CROSS JOIN LATERAL (SELECT CASE WHEN NOT d.restore_hold
                                                 AND d.restore_epoch = nj.epoch
                                                THEN nj.owner END AS owner) o
                ORDER BY nj.n
             RETURNING job_id, run_id, kind, step, due_at, idempotency_key, detail, lease_owner),
             spent_commands AS (
               INSERT INTO {ns}.spent_keys (kind, identity, run_id, spent_at)
               SELECT 'command', nj.idempotency_key, m.run_id, nj.due_at
                 FROM nj JOIN {made} m ON m.k = nj.k
                WHERE nj.idempotency_key IS NOT NULL
               ON CONFLICT DO NOTHING)",
    )
}

/// The columns of a leased job's row in a batch's answer (from `ins`).
pub(super) const LEASED_COLUMNS: &str =
    "ins.job_id, ins.kind, ins.step, ins.due_at, ins.idempotency_key, \
     ins.detail::text AS detail";

/// [`LEASED_COLUMNS`] as NULLs, for the rows of the answer that are not jobs.
pub(super) const LEASED_NONE: &str =
    "NULL::bigint AS job_id, NULL::text AS kind, NULL::text AS step, \
     NULL::timestamptz AS due_at, NULL::text AS idempotency_key, NULL::text AS detail";

/// The jobs a batch statement inserted leased, by run.
#[derive(Default)]
pub(super) struct LeasedRows(HashMap<String, Vec<LeasedRow>>);

impl LeasedRows {
    /// Reads a leased job's row ([`LEASED_COLUMNS`] and `run_id`).
    pub(super) fn read(&mut self, row: &sqlx::postgres::PgRow) -> Result<(), sqlx::Error> {
        let run_id: String = row.try_get("run_id")?;
        self.0.entry(run_id).or_default().push(LeasedRow {
            job_id: row.try_get("job_id")?,
            kind: row.try_get("kind")?,
            step: row.try_get("step")?,
            due_at: row.try_get("due_at")?,
            idempotency_key: row.try_get("idempotency_key")?,
            detail: row.try_get("detail")?,
            taken: false,
        });
        Ok(())
    }

    /// The jobs of `run_id` (its new `jobs`, `values` as bound) that were
    /// leased on insert, in the order of `jobs`.
    pub(super) fn take(
        &mut self,
        run_id: &str,
        jobs: &[NewJob],
        values: &[JobValues<'_>],
    ) -> Vec<Job> {
        let mut leased = Vec::new();
        let Some(rows) = self.0.get_mut(run_id) else {
            return leased;
        };
        for (job, v) in jobs.iter().zip(values) {
            let Some(lease) = v.lease else { continue };
            if let Some(row) = rows.iter_mut().find(|r| !r.taken && r.is(v)) {
                row.taken = true;
                let state = if v.sending {
                    JobState::Sending
                } else {
                    JobState::Ready
                };
                leased.extend(leased_job(
                    run_id,
                    job,
                    Some(lease),
                    row.job_id,
                    Some(lease.owner.clone()),
                    state,
                ));
            }
        }
        leased
    }
}

/// A job the batch statement inserted leased, as it came back.
struct LeasedRow {
    job_id: i64,
    kind: String,
    step: String,
    due_at: OffsetDateTime,
    idempotency_key: Option<String>,
    detail: String,
    taken: bool,
}

impl LeasedRow {
    /// Whether this row is the insert of the new job `values` binds: the
    /// same kind, step, due time, idempotency key and detail (compared as
    /// JSON values: `jsonb` orders keys its own way). Two new jobs of one
    /// run alike in all of these are interchangeable.
    fn is(&self, values: &JobValues<'_>) -> bool {
        self.kind == values.row.kind
            && self.step == values.row.step
            && self.due_at == values.due_at
            && self.idempotency_key == values.row.idempotency_key
            && serde_json::from_str::<Value>(&self.detail).ok()
                == serde_json::from_str::<Value>(&values.row.detail).ok()
    }
}
