//! The run store: the PostgreSQL implementation of the service's
//! [`RunStore`] port (docs/service.md), the only production store.
//!
//! A [`Store`] is opened at service startup with the runtime credential
//! ([`Store::open`] verifies everything `deployment-status` verifies). Each
//! port method is one transaction (most are one statement):
//!
//! - `admit`: the run row, its spent start identity and its first jobs; a
//!   repeat with the same request fingerprint returns the stored run,
//!   another is a conflict; refused while the admission hold is in place or
//!   when the revision is not the active one.
//! - `lease`: due jobs with no lease or an expired one, oldest due first,
//!   `FOR UPDATE SKIP LOCKED` (several processes share a database); an
//!   expired lease comes back with its state (`sending`). Nothing is leased
//!   while the restore hold is in place.
//! - `commit`: optimistic on the run's version; the completed job is
//!   deleted only if the caller holds its lease; an ended run loses every
//!   job; an erased run is refused (`run.payload-erased`).
//! - `erase_payloads` (retention): ended, unheld runs without an unknown
//!   effect or a job, ended before the cutoff, oldest ended first,
//!   `FOR UPDATE SKIP LOCKED`: sealed input, state and output set NULL, the
//!   owner re-sealed under the active version, `payload_erased_at` stamped.
//!
//! Times are parameters (the engine's clock), never SQL `now()`: due times
//! and leases are the caller's Unix seconds, and a run's `created_at`,
//! `updated_at` and `ended_at` come from its VM state. Payloads are sealed
//! with the active state key version bound to (database id, run id,
//! purpose, step): purposes `input`, `state`, `output`, `owner` (the
//! starter's `iss`/`sub`) and `command` (step = the job's step).

mod batch;
mod counts;

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use coordinator_ir::Definition;
use coordinator_vm::{EffectState, RunState, RunStatus};
use serde_json::Value;
use sqlx::postgres::PgRow;
use sqlx::{PgPool, Row};
use time::OffsetDateTime;

use super::deploy::{check_activation, live_bindings, verify_runtime, WorkflowStatus};
use super::servers::Access;
use super::session::{Database, Transaction};
use super::{connect, db_error, namespace_of, StoreError, MAX_POOL_CONNECTIONS};
use coordinator_ports::clock::rfc3339_to_unix;
use coordinator_ports::store::{
    erased_state, Admitted, Commit, Committed, Definitions, Erasure, Holds as EngineHolds,
    HoldsAndReviews, Job, JobKind, JobQueue, JobState, Lease, LeaseOnInsert, LeaseRequest,
    Maintenance, NewJob, NewRun, Owner, Review, ReviewSurvey, RunAdmission, RunFilter, RunPage,
    RunReads, RunRecord, StepLedger, StoreError as PortError, MAX_ERASE_LIMIT,
};
use coordinator_runtime::binding::LiveBinding;
use coordinator_runtime::config::RuntimeConfig;
use coordinator_runtime::keys::{AdmissionKey, Binding, StateKeyring};
use coordinator_runtime::package::LoadedPackage;
use coordinator_runtime::secrets::{DeploymentKeys, SecretResolver};

/// How long `ping` waits for the database before `/ready` says 503.
pub const PING_TIMEOUT: Duration = Duration::from_secs(2);

/// The run store: a pool of runtime connections, the namespace, the
/// database id, the state keyring and the admission key (for owner
/// references).
#[derive(Clone, Debug)]
pub struct Store {
    db: Database,
    ns: String,
    database_id: String,
    keyring: StateKeyring,
    admission: AdmissionKey,
    /// `deployment.activation_generation` when the store was opened (read
    /// before the activation was checked): an admission finding another
    /// one answers `deployment.activation-changed`.
    activation_generation: i64,
}

/// A store error as the port's: unavailable stays unavailable (retry),
/// refusals (custody, tampering, erased payloads) keep their code.
fn port(e: StoreError) -> PortError {
    match e.kind {
        super::ErrorKind::Unavailable => PortError::Unavailable(e.message),
        super::ErrorKind::Refused => PortError::Refused {
            code: e.code,
            message: e.message,
        },
    }
}

fn pdb(e: sqlx::Error) -> PortError {
    port(db_error(e))
}

/// Unix seconds (the engine's clock) as a `timestamptz` value, capped to
/// years 0001–9999 as every instant we write is
/// ([`coordinator_ir::instant::format_unix_seconds`]).
fn at(unix: i64) -> OffsetDateTime {
    use coordinator_ir::instant::{MAX_UNIX_SECONDS, MIN_UNIX_SECONDS};
    let capped = unix.clamp(MIN_UNIX_SECONDS, MAX_UNIX_SECONDS);
    match OffsetDateTime::from_unix_timestamp(capped) {
        Ok(t) => t,
        // `time` covers years ±9999: every capped second is inside.
        Err(e) => unreachable!("{capped} s is inside 0001-9999: {e}"),
    }
}

/// An instant of a run's VM state as a `timestamptz` value. The VM writes
/// every instant of its state in RFC 3339, so it always reads back.
#[allow(clippy::expect_used)]
fn at_text(text: &str) -> OffsetDateTime {
    at(rfc3339_to_unix(text).expect("the VM writes its state's instants in RFC 3339"))
}

fn encode_cursor(seq: i64) -> String {
    hex::encode(format!("runs-before:{seq}"))
}

fn decode_cursor(cursor: &str) -> Result<i64, PortError> {
    hex::decode(cursor)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| s.strip_prefix("runs-before:").and_then(|n| n.parse().ok()))
        .ok_or(PortError::BadCursor)
}

fn tampered(what: impl std::fmt::Display) -> PortError {
    PortError::Refused {
        code: "state-tampered",
        message: what.to_string(),
    }
}

const RUN_COLUMNS: &str = "run_id, seq, workflow, revision, start_identity, request_fingerprint, \
     version, ledger::text AS ledger, bindings::text AS bindings, sealed_state, sealed_owner, \
     state, created_at, deadline_at, updated_at, ended_at, payload_erased_at, review";

const JOB_COLUMNS: &str = "job_id, run_id, kind, step, state, due_at, lease_owner, \
     lease_expires_at, detail::text AS detail, sealed_command";

/// A job's columns: what is stored in the clear and the sealed command.
struct JobRow {
    kind: &'static str,
    step: String,
    detail: String,
    review_request_id: Option<String>,
    idempotency_key: Option<String>,
    command: Option<Value>,
}

fn job_row(kind: &JobKind) -> JobRow {
    let mut detail = serde_json::to_value(kind).unwrap_or(Value::Null);
    let mut command = None;
    if let Some(o) = detail.as_object_mut() {
        command = o.remove("command");
    }
    let (name, step, review, key) = match kind {
        JobKind::Dispatch {
            step,
            idempotency_key,
            ..
        } => ("dispatch", step.clone(), None, idempotency_key.clone()),
        JobKind::LookupReceipt { step, .. } => ("lookup-receipt", step.clone(), None, None),
        JobKind::Timer { .. } => ("timer", String::new(), None, None),
        JobKind::Observe {
            step,
            review_request_id,
            ..
        } => (
            "observe",
            step.clone(),
            Some(review_request_id.clone()),
            None,
        ),
    };
    JobRow {
        kind: name,
        step,
        detail: detail.to_string(),
        review_request_id: review,
        idempotency_key: key,
        command,
    }
}

/// A job's values as bound (`runs/batch.rs`: a new job's columns in the
/// group statements' arrays).
struct JobValues<'a> {
    row: JobRow,
    sealed: Option<Vec<u8>>,
    key_version: Option<i32>,
    due_at: OffsetDateTime,
    lease: Option<&'a LeaseOnInsert>,
}

/// The job `job_id` as leased on insert (`owner` set), for the lane that
/// inserted it; `None` when it was inserted unleased.
fn leased_job(
    run_id: &str,
    job: &NewJob,
    lease: Option<&LeaseOnInsert>,
    job_id: i64,
    owner: Option<String>,
) -> Option<Job> {
    owner.zip(lease).map(|(owner, l)| Job {
        id: u64::try_from(job_id).unwrap_or(0),
        run_id: run_id.to_owned(),
        kind: job.kind.clone(),
        due_unix: job.due_unix,
        state: JobState::Ready,
        lease: Some(Lease {
            owner,
            expires_unix: l.lease_until,
        }),
    })
}

/// The session settings of the service's connections.
///
/// `enable_seqscan = off`: the `jobs` table is a queue (each run inserts
/// and deletes its jobs), so it holds few live rows in many pages between
/// vacuums. A pooled connection keeps the generic plan of each group
/// statement (the group commit, the `sending` mark, the lease)
/// from the statistics of the moment it first planned it; planned while
/// the table was a dozen pages, the plan reads `jobs` sequentially for
/// its job ids, and keeps doing so when the table has grown to hundreds of
/// pages (measured with `scripts/bench.sh` and `auto_explain`: 0.33 ms per
/// such scan on average, up to 2.6 ms, three of them in a group commit).
/// With the setting off, the hot statements reach their rows by key or
/// through the due-time and deadline indexes whatever the statistics said
/// when they were planned (docs/decisions.md); a table without a usable
/// index is still read sequentially.
pub(crate) const SERVICE_SESSION_SETTINGS: &[(&str, &str)] = &[("enable_seqscan", "off")];

impl Store {
    /// Service startup: connects with the runtime credential (a pool of at
    /// most `max_connections`, capped at 32), and verifies the server
    /// version, the schema version, the database id, the runtime role's
    /// identity and safety ([`super::verify_runtime_role`]), key custody,
    /// and that `packages` (verified by the runtime check) are exactly the
    /// active packages. Never migrates.
    ///
    /// # Errors
    /// The codes of `deployment-status` ([`super::deployment_status`]).
    pub async fn open(
        config: &RuntimeConfig,
        resolver: &SecretResolver,
        keys: &DeploymentKeys,
        packages: &[LoadedPackage],
        max_connections: u32,
    ) -> Result<Store, StoreError> {
        let ns = namespace_of(config)?.to_owned();
        let deployment = config.deployment.as_ref().ok_or_else(|| {
            StoreError::refused(
                "deployment.not-applied",
                "the runtime file has no `deployment` section",
                "complete the deployment section",
            )
        })?;
        let db = connect(
            config,
            resolver,
            &config.database.runtime_url_ref,
            max_connections.min(MAX_POOL_CONNECTIONS),
            SERVICE_SESSION_SETTINGS,
            Access::Write,
        )
        .await?;
        let activation_generation = {
            let mut conn = db.begin().await?;
            verify_runtime(&mut conn, &ns, deployment, &keys.state, &keys.admission).await?;
            // Read before the check: an apply in between leaves this
            // process with the older generation, so it refuses admissions
            // (activation-changed) rather than serving a stale activation.
            let generation: i64 = sqlx::query(&format!(
                "SELECT activation_generation FROM {ns}.deployment"
            ))
            .fetch_one(conn.on())
            .await
            .map_err(db_error)?
            .try_get(0)
            .map_err(db_error)?;
            check_activation(&mut conn, &ns, packages).await?;
            conn.commit().await?;
            generation
        };
        Ok(Store {
            db,
            ns,
            database_id: deployment.database_id.clone(),
            keyring: keys.state.clone(),
            admission: keys.admission.clone(),
            activation_generation,
        })
    }

    /// Runs `sql` (with `{ns}` for the namespace, `$1` the job id, `$2` the
    /// lease owner) on one job this worker holds.
    ///
    /// # Errors
    /// [`PortError::LeaseLost`] unless exactly one row was touched (the
    /// lease passed to another worker, or the job is gone); database errors.
    async fn on_leased_job(&self, sql: &str, job_id: u64, owner: &str) -> Result<(), PortError> {
        let done = sqlx::query(&super::schema::in_namespace(sql, &self.ns))
            .bind(i64::try_from(job_id).unwrap_or(-1))
            .bind(owner)
            .execute(&self.db)
            .await
            .map_err(pdb)?;
        if done.rows_affected() == 1 {
            Ok(())
        } else {
            Err(PortError::LeaseLost)
        }
    }

    /// The connection pool (for health probes and tests).
    pub fn pool(&self) -> &PgPool {
        self.db.pool()
    }

    /// The store's connections ([`Database`]).
    pub fn database(&self) -> &Database {
        &self.db
    }

    /// Closes the pool, waiting for connections in use.
    pub async fn close(&self) {
        self.db.close().await;
    }

    fn bind<'a>(&'a self, run_id: &'a str, purpose: &'a str, step: &'a str) -> Binding<'a> {
        Binding {
            database_id: &self.database_id,
            run_id,
            purpose,
            step,
        }
    }

    fn seal_json(
        &self,
        run_id: &str,
        purpose: &str,
        step: &str,
        value: &impl serde::Serialize,
    ) -> Vec<u8> {
        // The sealed values are plain data (JSON values, the VM state, an
        // owner) whose maps have string keys: serialising them cannot fail,
        // and sealing empty bytes instead would lose the value.
        #[allow(clippy::expect_used)]
        let bytes = serde_json::to_vec(value).expect("plain data always serialises");
        self.keyring.seal(&self.bind(run_id, purpose, step), &bytes)
    }

    fn open_json<T: serde::de::DeserializeOwned>(
        &self,
        run_id: &str,
        purpose: &str,
        step: &str,
        sealed: &[u8],
    ) -> Result<T, StoreError> {
        let bytes = self
            .keyring
            .open(&self.bind(run_id, purpose, step), sealed)?;
        serde_json::from_slice(&bytes).map_err(|e| {
            StoreError::refused(
                "state-tampered",
                format!("a sealed {purpose} of run {run_id} does not read back: {e}"),
                "investigate the database",
            )
        })
    }

    /// The active workflows (workflow, package digest, revision).
    ///
    /// # Errors
    /// `store-unavailable`.
    pub async fn active_workflows(&self) -> Result<Vec<WorkflowStatus>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT workflow, package_digest, revision FROM {}.active_workflows ORDER BY workflow",
            self.ns
        ))
        .fetch_all(&self.db)
        .await
        .map_err(db_error)?;
        rows.iter()
            .map(|r| {
                Ok(WorkflowStatus {
                    workflow: r.try_get(0).map_err(db_error)?,
                    package_digest: r.try_get(1).map_err(db_error)?,
                    revision: r.try_get(2).map_err(db_error)?,
                })
            })
            .collect()
    }

    /// The definition (Program) of `revision`, kept forever by apply.
    ///
    /// # Errors
    /// `store-unavailable`; `state-tampered` when the stored bytes do not
    /// read back.
    pub async fn definition(&self, revision: &str) -> Result<Option<Definition>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT definition FROM {}.definitions WHERE revision = $1",
            self.ns
        ))
        .bind(revision)
        .fetch_optional(&self.db)
        .await
        .map_err(db_error)?;
        let Some(row) = row else { return Ok(None) };
        let bytes: Vec<u8> = row.try_get(0).map_err(db_error)?;
        Definition::from_slice(&bytes).map(Some).map_err(|e| {
            StoreError::refused(
                "state-tampered",
                format!("stored definition {revision}: {e}"),
                "investigate the database",
            )
        })
    }

    /// Apply's activation counter; a service compares it with the value at
    /// startup (`deployment.activation-changed`).
    ///
    /// # Errors
    /// `store-unavailable`.
    pub async fn activation_generation(&self) -> Result<i64, StoreError> {
        sqlx::query(&format!(
            "SELECT activation_generation FROM {}.deployment",
            self.ns
        ))
        .fetch_one(&self.db)
        .await
        .map_err(db_error)?
        .try_get(0)
        .map_err(db_error)
    }

    /// The admitted input of a run (sealed apart from the state).
    ///
    /// # Errors
    /// `run.payload-erased` after retention, `state-key-custody`,
    /// `state-tampered`, `store-unavailable`.
    pub async fn load_input(&self, run_id: &str) -> Result<Option<Value>, StoreError> {
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

    fn record(&self, row: &PgRow) -> Result<RunRecord, PortError> {
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
            ended_unix: row
                .try_get::<Option<OffsetDateTime>, _>("ended_at")
                .map_err(pdb)?
                .map(OffsetDateTime::unix_timestamp),
            id,
        })
    }

    /// An erased run's state, from its clear columns (state name and
    /// timestamps): [`erased_state`].
    fn erased_state(&self, row: &PgRow, id: &str) -> Result<RunState, PortError> {
        let name: String = row.try_get("state").map_err(pdb)?;
        let status: RunStatus = serde_json::from_value(Value::String(name))
            .map_err(|e| tampered(format!("run {id} state: {e}")))?;
        let unix = |column: &str| -> Result<i64, PortError> {
            let t: OffsetDateTime = row.try_get(column).map_err(pdb)?;
            Ok(t.unix_timestamp())
        };
        let ended: Option<OffsetDateTime> = row.try_get("ended_at").map_err(pdb)?;
        Ok(erased_state(
            status,
            unix("created_at")?,
            unix("deadline_at")?,
            unix("updated_at")?,
            ended.map(|t| t.unix_timestamp()),
        ))
    }

    fn job(&self, row: &PgRow) -> Result<Job, PortError> {
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
            due_unix: due.unix_timestamp(),
            state: if state == "sending" {
                JobState::Sending
            } else {
                JobState::Ready
            },
            lease: owner.zip(expires).map(|(owner, e)| Lease {
                owner,
                expires_unix: e.unix_timestamp(),
            }),
        })
    }

    /// A job's values as bound: its columns, its command sealed (with the
    /// active key version), and the lease to take on insert when the job is
    /// due by `lease.now`.
    fn job_values<'a>(
        &self,
        run_id: &str,
        job: &NewJob,
        lease: Option<&'a LeaseOnInsert>,
    ) -> JobValues<'a> {
        let row = job_row(&job.kind);
        let sealed = row
            .command
            .as_ref()
            .map(|c| self.seal_json(run_id, "command", &row.step, c));
        let key_version = sealed
            .as_ref()
            .map(|_| self.keyring.active_version() as i32);
        JobValues {
            row,
            sealed,
            key_version,
            due_at: at(job.due_unix),
            lease: lease.filter(|l| job.due_unix <= l.now),
        }
    }

    async fn existing(
        &self,
        conn: &mut Transaction,
        start_identity: &str,
        fingerprint: &str,
    ) -> Result<Option<Admitted>, PortError> {
        let ns = &self.ns;
        // The spent key first, then the run: each statement reads its own
        // snapshot, and a run never exists without its spent key, so a
        // concurrent admission that commits between the two statements is
        // seen whole (the other order could see the key without the run).
        let spent: bool = sqlx::query(&format!(
            "SELECT EXISTS (SELECT 1 FROM {ns}.spent_keys WHERE kind = 'start' AND identity = $1)"
        ))
        .bind(start_identity)
        .fetch_one(conn.on())
        .await
        .map_err(pdb)?
        .try_get(0)
        .map_err(pdb)?;
        if !spent {
            return Ok(None);
        }
        let row = sqlx::query(&format!(
            "SELECT {RUN_COLUMNS} FROM {ns}.runs WHERE start_identity = $1"
        ))
        .bind(start_identity)
        .fetch_optional(conn.on())
        .await
        .map_err(pdb)?;
        Ok(Some(match row {
            Some(row) => {
                let stored: String = row.try_get("request_fingerprint").map_err(pdb)?;
                if stored == fingerprint {
                    Admitted::Existing(self.record(&row)?)
                } else {
                    Admitted::Conflict
                }
            }
            // A spent identity without its run row (retention keeps the row,
            // so only a damaged database) is never admitted again.
            None => Admitted::Conflict,
        }))
    }
}

/// What an admission statement read before it inserted anything.
struct AdmissionChecks {
    /// The start identity was spent already.
    spent: bool,
    /// The admission hold is in place.
    held: bool,
    /// The first connection whose binding differs from the last apply's.
    conflict: Option<String>,
    /// The activation generation is the one this store was opened under.
    current: bool,
    /// The workflow's active revision.
    active: Option<String>,
}

impl AdmissionChecks {
    /// The refusal of a start of `revision` that inserted nothing, in this
    /// order: admission hold, binding conflict, activation changed,
    /// revision not active; `None` when the identity was spent (or a
    /// concurrent admission of it won): its run is the answer.
    fn refusal(self, revision: &str) -> Option<Admitted> {
        if self.spent {
            None
        } else if self.held {
            Some(Admitted::AdmissionHeld)
        } else if let Some(connection) = self.conflict {
            // A binding the last apply did not record: this process
            // serves another runtime file than the one applied.
            Some(Admitted::BindingConflict { connection })
        } else if !self.current {
            Some(Admitted::ActivationChanged)
        } else if self.active.as_deref() != Some(revision) {
            Some(Admitted::RevisionNotActive {
                active: self.active,
            })
        } else {
            None
        }
    }
}

/// A restore epoch as stored (`bigint`, never negative).
fn epoch_column(epoch: u64) -> i64 {
    i64::try_from(epoch).unwrap_or(i64::MAX)
}

/// A stored restore epoch; a negative one (the column's CHECK forbids it)
/// is a damaged row.
fn epoch_of(stored: i64) -> Result<u64, PortError> {
    u64::try_from(stored).map_err(|_| tampered(format!("restore epoch {stored}")))
}

/// Whether a state holds an `unknown` effect (the `effect_unknown` column).
fn effect_unknown(state: &RunState) -> bool {
    state.effects.values().any(|e| *e == EffectState::Unknown)
}

/// The `wait` column of a run in `state`: the VM's wait kind, `None`
/// outside a wait and once the run has ended.
fn wait_column(state: &RunState) -> Option<&'static str> {
    if state.status.is_terminal() {
        return None;
    }
    coordinator_vm::wait_kind(state).map(coordinator_vm::WaitKind::as_str)
}

fn erased(run_id: &str) -> StoreError {
    StoreError::refused(
        "run.payload-erased",
        format!("retention erased the payloads of run {run_id}"),
        "an erased run can no longer be retried or reconciled",
    )
}

#[async_trait]
impl RunAdmission for Store {
    async fn admit_batch(
        &self,
        runs: Vec<(NewRun, Option<LeaseOnInsert>)>,
    ) -> Vec<Result<(Admitted, Vec<Job>), PortError>> {
        batch::in_one_statement(&runs, |group| self.try_admit_batch(group)).await
    }

    async fn find_start(
        &self,
        start_identity: &str,
        request_digest: &str,
    ) -> Result<Option<Admitted>, PortError> {
        let mut conn = self.db.begin().await.map_err(port)?;
        self.existing(&mut conn, start_identity, request_digest)
            .await
    }
}

#[async_trait]
impl JobQueue for Store {
    async fn lease(&self, request: &LeaseRequest<'_>) -> Result<Vec<Job>, PortError> {
        let ns = &self.ns;
        let limit = i64::try_from(request.limit.clamp(1, 1000)).unwrap_or(1000);
        // One statement: the deployment row (holds, epoch), the deadlines
        // that came due (each run's timer job created once, from
        // `runs.deadline_at`, leased at once when timers may be leased) and
        // the leased jobs, at most `limit` in all. The LEFT JOIN keeps the
        // deployment row when no job is leased, so a stale epoch is always
        // seen; a stale epoch creates and leases nothing. Under the restore
        // hold, without an epoch, or when asked, only receipt lookups
        // (reads) are leased. `deadline_at` holds whole seconds rounded up
        // (`coordinator_ports::clock::due_unix`), so the timer never fires before the
        // deadline.
        let rows = sqlx::query(&format!(
            "WITH d AS (SELECT restore_hold, restore_epoch,
                               NOT ($7 OR $5::bigint IS NULL OR restore_hold) AS timers
                          FROM {ns}.deployment),
             due_deadlines AS (
               UPDATE {ns}.runs r SET deadline_job_created = true
                 FROM (SELECT run_id FROM {ns}.runs
                        WHERE NOT ended AND NOT deadline_job_created AND deadline_at <= $1
                          AND ($5::bigint IS NULL OR $5 = (SELECT restore_epoch FROM d))
                          AND ($6::text IS NULL OR run_id = $6)
                        ORDER BY deadline_at LIMIT $4 FOR UPDATE SKIP LOCKED) s
                WHERE r.run_id = s.run_id
            RETURNING r.run_id, r.deadline_at),
             deadline_jobs AS (
               INSERT INTO {ns}.jobs (run_id, kind, state, due_at, detail, lease_owner,
                                      lease_expires_at)
               SELECT x.run_id, 'timer', 'ready', x.deadline_at,
                      jsonb_build_object('kind', 'timer', 'wake', 'deadline', 'at',
                        to_char(x.deadline_at AT TIME ZONE 'UTC',
                                'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')),
                      CASE WHEN d.timers THEN $2 END,
                      CASE WHEN d.timers THEN $3::timestamptz END
                 FROM due_deadlines x, d
            RETURNING job_id, run_id, kind, step, state, due_at, lease_owner,
                      lease_expires_at, detail::text AS detail, sealed_command),
             leased AS (
               UPDATE {ns}.jobs j SET lease_owner = $2, lease_expires_at = $3
                 FROM (SELECT job_id FROM {ns}.jobs
                        WHERE due_at <= $1 AND (lease_expires_at IS NULL OR lease_expires_at <= $1)
                          AND ($5::bigint IS NULL OR $5 = (SELECT restore_epoch FROM d))
                          AND (kind = 'lookup-receipt' OR (SELECT timers FROM d))
                          AND ($6::text IS NULL OR run_id = $6)
                        ORDER BY due_at, job_id
                        LIMIT greatest($4 - (SELECT count(*) FROM deadline_jobs
                                              WHERE lease_owner IS NOT NULL), 0)
                        FOR UPDATE SKIP LOCKED) s
                WHERE j.job_id = s.job_id
            RETURNING j.job_id, j.run_id, j.kind, j.step, j.state, j.due_at, j.lease_owner,
                      j.lease_expires_at, j.detail::text AS detail, j.sealed_command)
             SELECT d.restore_epoch AS store_epoch, l.* FROM d LEFT JOIN (
               SELECT * FROM leased
               UNION ALL SELECT * FROM deadline_jobs WHERE lease_owner IS NOT NULL) l ON true"
        ))
        .bind(at(request.now))
        .bind(request.owner)
        .bind(at(request.lease_until))
        .bind(limit)
        .bind(request.epoch.map(epoch_column))
        .bind(request.run_id)
        .bind(request.receipt_lookups_only)
        .fetch_all(&self.db)
        .await
        .map_err(pdb)?;
        let Some(first) = rows.first() else {
            return Err(tampered("the deployment row is missing"));
        };
        let store = epoch_of(first.try_get("store_epoch").map_err(pdb)?)?;
        if let Some(process) = request.epoch {
            if process != store {
                return Err(PortError::LeaseIncompatible { process, store });
            }
        }
        let mut jobs = Vec::with_capacity(rows.len());
        for row in &rows {
            let id: Option<i64> = row.try_get("job_id").map_err(pdb)?;
            if id.is_some() {
                jobs.push(self.job(row)?);
            }
        }
        jobs.sort_by_key(|j| (j.due_unix, j.id));
        Ok(jobs)
    }

    async fn next_due(&self) -> Result<Option<i64>, PortError> {
        // The due-time index in order, skipping the (few) leased jobs, and
        // the earliest deadline not yet a job (`runs_deadline_due`).
        let due: Option<OffsetDateTime> = sqlx::query_scalar(&format!(
            "SELECT least(
               (SELECT due_at FROM {ns}.jobs WHERE lease_expires_at IS NULL
                 ORDER BY due_at, job_id LIMIT 1),
               (SELECT deadline_at FROM {ns}.runs WHERE NOT ended AND NOT deadline_job_created
                 ORDER BY deadline_at LIMIT 1))",
            ns = self.ns
        ))
        .fetch_one(&self.db)
        .await
        .map_err(pdb)?;
        Ok(due.map(OffsetDateTime::unix_timestamp))
    }

    async fn mark_sending_batch(
        &self,
        jobs: Vec<(u64, String, u64)>,
    ) -> Vec<Result<(), PortError>> {
        self.mark_sending_in_one_statement(jobs).await
    }

    async fn commit_batch(
        &self,
        commits: Vec<(Commit, Option<LeaseOnInsert>)>,
    ) -> Vec<Result<Committed, PortError>> {
        batch::in_one_statement(&commits, |group| self.try_commit_batch(group)).await
    }

    async fn release(
        &self,
        job_id: u64,
        owner: &str,
        due_unix: i64,
        kind: Option<JobKind>,
    ) -> Result<(), PortError> {
        let ns = &self.ns;
        let job_id = i64::try_from(job_id).unwrap_or(-1);
        let mut tx = self.db.begin().await.map_err(port)?;
        let run_id: Option<String> = sqlx::query(&format!(
            "SELECT run_id FROM {ns}.jobs WHERE job_id = $1 AND lease_owner = $2 FOR UPDATE"
        ))
        .bind(job_id)
        .bind(owner)
        .fetch_optional(tx.on())
        .await
        .map_err(pdb)?
        .map(|r| r.try_get(0))
        .transpose()
        .map_err(pdb)?;
        let Some(run_id) = run_id else {
            return Err(PortError::LeaseLost);
        };
        sqlx::query(&format!(
            "UPDATE {ns}.jobs SET state = 'ready', lease_owner = NULL, lease_expires_at = NULL,
                due_at = $2 WHERE job_id = $1"
        ))
        .bind(job_id)
        .bind(at(due_unix))
        .execute(tx.on())
        .await
        .map_err(pdb)?;
        if let Some(kind) = kind {
            let row = job_row(&kind);
            let sealed = row
                .command
                .as_ref()
                .map(|c| self.seal_json(&run_id, "command", &row.step, c));
            let key_version = sealed
                .as_ref()
                .map(|_| self.keyring.active_version() as i32);
            sqlx::query(&format!(
                "UPDATE {ns}.jobs SET kind = $2, step = $3, detail = $4::jsonb,
                    review_request_id = $5, idempotency_key = $6, key_version = $7,
                    sealed_command = $8
                  WHERE job_id = $1"
            ))
            .bind(job_id)
            .bind(row.kind)
            .bind(&row.step)
            .bind(&row.detail)
            .bind(&row.review_request_id)
            .bind(&row.idempotency_key)
            .bind(key_version)
            .bind(sealed)
            .execute(tx.on())
            .await
            .map_err(pdb)?;
        }
        tx.commit().await.map_err(port)
    }

    async fn discard(&self, job_id: u64, owner: &str) -> Result<(), PortError> {
        self.on_leased_job(
            "DELETE FROM {ns}.jobs WHERE job_id = $1 AND lease_owner = $2",
            job_id,
            owner,
        )
        .await
    }

    async fn claim_restored_commands(
        &self,
        owner: &str,
        lease_until: i64,
        limit: usize,
    ) -> Result<Vec<Job>, PortError> {
        let ns = &self.ns;
        let limit = i64::try_from(limit.clamp(1, 1000)).unwrap_or(1000);
        // Waits for a worker that is marking one `sending` (no SKIP
        // LOCKED): every such job is taken, whoever leased it.
        let rows = sqlx::query(&format!(
            "UPDATE {ns}.jobs j SET lease_owner = $1, lease_expires_at = $2
               FROM (SELECT job_id FROM {ns}.jobs
                      WHERE kind = 'dispatch' AND NOT (detail->>'resendSafe')::boolean
                      ORDER BY job_id LIMIT $3 FOR UPDATE) s
              WHERE j.job_id = s.job_id
          RETURNING j.job_id, j.run_id, j.kind, j.step, j.state, j.due_at, j.lease_owner,
                    j.lease_expires_at, j.detail::text AS detail, j.sealed_command"
        ))
        .bind(owner)
        .bind(at(lease_until))
        .bind(limit)
        .fetch_all(&self.db)
        .await
        .map_err(pdb)?;
        let mut jobs = rows
            .iter()
            .map(|r| self.job(r))
            .collect::<Result<Vec<_>, _>>()?;
        jobs.sort_by_key(|j| j.id);
        Ok(jobs)
    }

    async fn bring_forward(
        &self,
        review_request_id: &str,
        now: i64,
        floor_seconds: i64,
    ) -> Result<usize, PortError> {
        let done = sqlx::query(&format!(
            "WITH t AS (
               SELECT job_id, GREATEST($2::timestamptz,
                        COALESCE(to_timestamp((detail->>'lastObservedUnix')::bigint + $3),
                                 $2::timestamptz)) AS earliest
                 FROM {ns}.jobs WHERE kind = 'observe' AND review_request_id = $1)
             UPDATE {ns}.jobs j SET due_at = t.earliest FROM t
              WHERE j.job_id = t.job_id AND j.due_at > t.earliest",
            ns = self.ns
        ))
        .bind(review_request_id)
        .bind(at(now))
        .bind(floor_seconds)
        .execute(&self.db)
        .await
        .map_err(pdb)?;
        Ok(usize::try_from(done.rows_affected()).unwrap_or(0))
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
              ORDER BY seq DESC LIMIT $6",
            self.ns
        ))
        .bind(owner_ref)
        .bind(filter.workflows.clone())
        .bind(filter.state.map(RunStatus::as_str))
        .bind(filter.attention)
        .bind(before)
        .bind(i64::from(limit) + 1)
        .fetch_all(&self.db)
        .await
        .map_err(pdb)?;
        let more = rows.len() > limit as usize;
        let runs = rows
            .iter()
            .take(limit as usize)
            .map(|r| self.record(r))
            .collect::<Result<Vec<_>, _>>()?;
        let next_cursor = if more {
            runs.last()
                .map(|r| encode_cursor(i64::try_from(r.sequence).unwrap_or(i64::MAX)))
        } else {
            None
        };
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

#[async_trait]
impl HoldsAndReviews for Store {
    async fn holds(&self) -> Result<EngineHolds, PortError> {
        let row = sqlx::query(&format!(
            "SELECT restore_hold, admission_hold, execution_recovery_completed, restore_epoch
               FROM {}.deployment",
            self.ns
        ))
        .fetch_one(&self.db)
        .await
        .map_err(pdb)?;
        Ok(EngineHolds {
            restore: row.try_get(0).map_err(pdb)?,
            admission: row.try_get(1).map_err(pdb)?,
            execution_recovery_completed: row.try_get(2).map_err(pdb)?,
            restore_epoch: epoch_of(row.try_get(3).map_err(pdb)?)?,
        })
    }

    async fn swap_holds(
        &self,
        expected: &EngineHolds,
        next: &EngineHolds,
    ) -> Result<bool, PortError> {
        let done = sqlx::query(&format!(
            "UPDATE {}.deployment
                SET restore_hold = $4, admission_hold = $5,
                    execution_recovery_completed = $6, restore_epoch = $8
              WHERE restore_hold = $1 AND admission_hold = $2
                AND execution_recovery_completed = $3 AND restore_epoch = $7",
            self.ns
        ))
        .bind(expected.restore)
        .bind(expected.admission)
        .bind(expected.execution_recovery_completed)
        .bind(next.restore)
        .bind(next.admission)
        .bind(next.execution_recovery_completed)
        .bind(epoch_column(expected.restore_epoch))
        .bind(epoch_column(next.restore_epoch))
        .execute(&self.db)
        .await
        .map_err(pdb)?;
        Ok(done.rows_affected() == 1)
    }

    async fn review_survey(&self) -> Result<ReviewSurvey, PortError> {
        use coordinator_ports::counts::RunCounts;
        let counts = self.live_counts().await?;
        Ok(ReviewSurvey {
            review_required: counts.review_required,
            unknown_effects: counts.unknown_effects,
            ended_unknown_effects: counts.ended_unknown_effects,
        })
    }

    async fn attest_reviews(&self) -> Result<u64, PortError> {
        let done = sqlx::query(&format!(
            "UPDATE {}.runs SET review = 'attested' WHERE review = 'required'",
            self.ns
        ))
        .execute(&self.db)
        .await
        .map_err(pdb)?;
        Ok(done.rows_affected())
    }
}

#[async_trait]
impl Definitions for Store {
    async fn definition(&self, revision: &str) -> Result<Option<Definition>, PortError> {
        Store::definition(self, revision).await.map_err(port)
    }

    async fn activation_current(&self) -> Result<bool, PortError> {
        let generation = self.activation_generation().await.map_err(port)?;
        Ok(generation == self.activation_generation)
    }
}

#[async_trait]
impl Maintenance for Store {
    async fn erase_payloads(
        &self,
        before_unix: i64,
        limit: u32,
        now_unix: i64,
    ) -> Result<Erasure, PortError> {
        let ns = &self.ns;
        // Ended, not held, no unknown effect, no job left, not yet erased.
        let qualifies = format!(
            "r.ended AND NOT r.attention AND NOT r.effect_unknown AND r.payload_erased_at IS NULL
             AND r.ended_at IS NOT NULL AND r.ended_at < $1
             AND NOT EXISTS (SELECT 1 FROM {ns}.jobs j WHERE j.run_id = r.run_id)"
        );
        let limit = i64::from(limit.clamp(1, MAX_ERASE_LIMIT));
        let mut tx = self.db.begin().await.map_err(port)?;
        let rows = sqlx::query(&format!(
            "SELECT r.run_id, r.sealed_owner FROM {ns}.runs r WHERE {qualifies}
              ORDER BY r.ended_at, r.seq LIMIT $2 FOR UPDATE SKIP LOCKED"
        ))
        .bind(at(before_unix))
        .bind(limit)
        .fetch_all(tx.on())
        .await
        .map_err(pdb)?;
        let active = self.keyring.active_version() as i32;
        for row in &rows {
            let id: String = row.try_get(0).map_err(pdb)?;
            let sealed: Option<Vec<u8>> = row.try_get(1).map_err(pdb)?;
            let sealed = sealed.ok_or_else(|| tampered(format!("run {id} has no sealed owner")))?;
            // The owner stays (status and list answer its owner), re-sealed
            // under the active version, so the version the run was admitted
            // under holds nothing of it any more.
            let owner: Owner = self.open_json(&id, "owner", "", &sealed).map_err(port)?;
            sqlx::query(&format!(
                "UPDATE {ns}.runs SET sealed_input = NULL, sealed_state = NULL,
                    sealed_output = NULL, sealed_owner = $2, key_version = $3,
                    input_key_version = $3, payload_erased_at = $4, version = version + 1
                  WHERE run_id = $1"
            ))
            .bind(&id)
            .bind(self.seal_json(&id, "owner", "", &owner))
            .bind(active)
            .bind(at(now_unix))
            .execute(tx.on())
            .await
            .map_err(pdb)?;
        }
        let more: bool = sqlx::query(&format!(
            "SELECT EXISTS (SELECT 1 FROM {ns}.runs r WHERE {qualifies})"
        ))
        .bind(at(before_unix))
        .fetch_one(tx.on())
        .await
        .map_err(pdb)?
        .try_get(0)
        .map_err(pdb)?;
        tx.commit().await.map_err(port)?;
        Ok(Erasure {
            erased: u32::try_from(rows.len()).unwrap_or(u32::MAX),
            more,
        })
    }

    /// Asks one pooled connection's server whether it may be written to:
    /// a server in recovery or read-only is refused as `database.read-only`
    /// (and, with several servers in the URL, the list is walked again).
    async fn ping(&self) -> Result<(), PortError> {
        let probe = self.db.check_usable();
        let failed = match tokio::time::timeout(PING_TIMEOUT, probe).await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(e)) if e.code == "database.read-only" => e,
            // No connection in time: the servers are asked directly why
            // (gone, or answering but read-only, as when an address moved
            // to a standby before its promotion).
            Ok(Err(_)) | Err(_) => {
                match tokio::time::timeout(PING_TIMEOUT, self.db.diagnose()).await {
                    Ok(e) => e,
                    Err(_) => {
                        return Err(PortError::Unavailable(
                            "store-unavailable: the database did not answer in time".into(),
                        ))
                    }
                }
            }
        };
        if failed.code == "database.read-only" {
            Err(PortError::Refused {
                code: failed.code,
                message: failed.message,
            })
        } else {
            Err(port(failed))
        }
    }
}
