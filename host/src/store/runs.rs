//! The run store: what the service host builds on.
//!
//! A [`Store`] is opened at service startup with the runtime credential
//! ([`Store::open`] verifies everything `deployment-status` verifies). Its
//! operations are async, each one transaction:
//!
//! - [`Store::admit`]: the run and its first jobs, in one transaction, keyed
//!   by start identity (a repeat with the same request fingerprint returns
//!   the same run; another fingerprint is `idempotency.key-reused`).
//! - [`Store::load_run`]: a run with its unsealed [`RunState`].
//! - [`Store::commit`]: a new state plus job changes, with optimistic
//!   concurrency on the run's version and lease ownership of completed jobs.
//! - [`Store::lease_due`]: due jobs for one worker, `FOR UPDATE SKIP LOCKED`
//!   (several processes may share a database); expired leases come back.
//! - [`Store::list_runs`]: newest first, filtered, opaque cursor.
//!
//! Time is a parameter (`now`), never read here, so a manual clock drives
//! tests. Payloads (input, state, output, prepared commands) are sealed with
//! the active state key version bound to (database id, run id, purpose,
//! step): purposes `input`, `state`, `output`, `command` (step = the job's
//! step).

use std::time::Duration;

use coordinator_ir::Definition;
use coordinator_vm::{RunState, RunStatus};
use serde_json::Value;
use sqlx::postgres::PgRow;
use sqlx::{Connection, PgPool, Row};
use time::OffsetDateTime;

use super::deploy::{check_activation, verify_runtime, WorkflowStatus};
use super::{connect, db_error, namespace_of, StoreError, MAX_POOL_CONNECTIONS};
use crate::keys::{Binding, StateKeyring};
use crate::package::LoadedPackage;
use crate::runtime::config::RuntimeConfig;
use crate::secrets::SecretResolver;

/// Most runs one [`Store::list_runs`] page holds.
pub const MAX_LIST_LIMIT: u32 = 100;
/// Runs per page when no limit is given.
pub const DEFAULT_LIST_LIMIT: u32 = 20;

/// What a job does when it is due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobKind {
    /// Run the VM for the run (admission start, or after an answer).
    Advance,
    /// Send the job's sealed prepared command for call step `step`.
    Dispatch,
    /// Look up the receipt of call step `step`'s idempotency key.
    LookupReceipt,
    /// A `wait-until` instant.
    Wake,
    /// Observe a `wait-for` completion (due at the next observation).
    Observe,
    /// The run deadline, or a `wait-for` timeout.
    Deadline,
}

impl JobKind {
    /// The stored name (`advance`, `dispatch`, `lookup-receipt`, `wake`,
    /// `observe`, `deadline`).
    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::Advance => "advance",
            JobKind::Dispatch => "dispatch",
            JobKind::LookupReceipt => "lookup-receipt",
            JobKind::Wake => "wake",
            JobKind::Observe => "observe",
            JobKind::Deadline => "deadline",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "advance" => JobKind::Advance,
            "dispatch" => JobKind::Dispatch,
            "lookup-receipt" => JobKind::LookupReceipt,
            "wake" => JobKind::Wake,
            "observe" => JobKind::Observe,
            "deadline" => JobKind::Deadline,
            _ => return None,
        })
    }
}

/// What a dispatched call did to the product, as far as the run knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// The product accepted it.
    Accepted,
    /// It may or may not have been processed.
    Unknown,
}

impl Effect {
    /// `accepted` or `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Accepted => "accepted",
            Effect::Unknown => "unknown",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "accepted" => Some(Effect::Accepted),
            "unknown" => Some(Effect::Unknown),
            _ => None,
        }
    }
}

/// A job to insert (at admission or in a commit). It starts `ready`.
#[derive(Clone, Debug, PartialEq)]
pub struct NewJob {
    /// What it does.
    pub kind: JobKind,
    /// The step it belongs to, or `""`.
    pub step: String,
    /// When it becomes due (UTC).
    pub due_at: OffsetDateTime,
    /// The prepared command (exact request), sealed before it is stored.
    pub command: Option<Value>,
    /// The call's idempotency key ([`crate::keys::AdmissionKey::idempotency_key`]);
    /// recorded as spent.
    pub idempotency_key: Option<String>,
}

impl NewJob {
    /// A job without command or key.
    pub fn new(kind: JobKind, step: &str, due_at: OffsetDateTime) -> Self {
        NewJob {
            kind,
            step: step.to_owned(),
            due_at,
            command: None,
            idempotency_key: None,
        }
    }
}

/// A run to admit.
#[derive(Clone, Debug)]
pub struct NewRun<'a> {
    /// The workflow id.
    pub workflow: &'a str,
    /// The revision the caller expects; it must be the active one.
    pub revision: &'a str,
    /// [`crate::keys::AdmissionKey::owner_reference`] of the token's `iss`/`sub`.
    pub owner_ref: &'a str,
    /// [`crate::keys::AdmissionKey::start_identity`].
    pub start_identity: &'a str,
    /// [`crate::keys::AdmissionKey::request_fingerprint`] of (revision, input).
    pub request_fingerprint: &'a str,
    /// The VM's state after admission (its `input` is sealed separately too).
    pub state: &'a RunState,
    /// The run deadline (UTC).
    pub deadline_at: OffsetDateTime,
    /// The first jobs (typically an `advance` or the first dispatch, and the
    /// `deadline`).
    pub first_jobs: Vec<NewJob>,
}

/// A run as listed: no payload.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSummary {
    /// The run id (a UUID, lowercase hyphenated).
    pub run_id: String,
    /// The workflow id.
    pub workflow: String,
    /// The revision it was admitted under (its Program, forever).
    pub revision: String,
    /// The run state.
    pub state: RunStatus,
    /// Held for an operator (state `attention`).
    pub attention: bool,
    /// Admission time.
    pub created_at: OffsetDateTime,
    /// Last commit time.
    pub updated_at: OffsetDateTime,
    /// The run deadline.
    pub deadline_at: OffsetDateTime,
    /// When it ended, if it has.
    pub ended_at: Option<OffsetDateTime>,
}

/// The answer to [`Store::admit`].
#[derive(Clone, Debug, PartialEq)]
pub enum AdmitOutcome {
    /// A new run (HTTP 201); its version is 1.
    Created(RunSummary),
    /// The same start identity and request fingerprint: the same run (200).
    Existing(RunSummary),
    /// The same start identity with another request (or a spent key whose
    /// run was erased): `idempotency.key-reused` (409).
    KeyReused,
    /// `revision` is not the workflow's active revision (409); `active` is
    /// the active one, if the workflow is active at all.
    RevisionNotActive {
        /// The active revision.
        active: Option<String>,
    },
    /// The admission hold is in place: `admission.held` (409).
    AdmissionHeld,
}

/// A run with its unsealed state.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadedRun {
    /// The listing fields.
    pub summary: RunSummary,
    /// The optimistic-concurrency version (1 at admission, +1 per commit).
    pub version: i64,
    /// The owner reference, for authorization.
    pub owner_ref: String,
    /// The state (holds the input).
    pub state: RunState,
}

/// A state change of one run, committed by [`Store::commit`].
#[derive(Clone, Debug)]
pub struct RunCommit<'a> {
    /// The run.
    pub run_id: &'a str,
    /// The version the state was loaded at; another is a lost race.
    pub expected_version: i64,
    /// The new state (status, attention, ended follow from it).
    pub state: &'a RunState,
    /// The lease owner completing `complete`.
    pub lease_owner: &'a str,
    /// Jobs of this run leased by `lease_owner` that are now done.
    pub complete: Vec<i64>,
    /// Jobs of this run to drop (ready, held, or leased by `lease_owner`).
    pub cancel: Vec<i64>,
    /// Effect updates of this run's jobs.
    pub effects: Vec<(i64, Effect)>,
    /// Jobs to add. When the new state has ended, every remaining `ready`
    /// job of the run is dropped first.
    pub insert: Vec<NewJob>,
}

/// The answer to [`Store::commit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitOutcome {
    /// Committed; the run's new version.
    Committed {
        /// The new version.
        version: i64,
    },
    /// The run moved on meanwhile (or does not exist: `current` is `None`);
    /// nothing was written. Reload and decide again.
    Stale {
        /// The run's current version.
        current: Option<i64>,
    },
    /// A job in `complete` is no longer leased by this owner (its lease
    /// expired and another worker took it); nothing was written.
    LeaseLost {
        /// The job.
        job_id: i64,
    },
}

/// A job leased by [`Store::lease_due`].
#[derive(Clone, Debug, PartialEq)]
pub struct LeasedJob {
    /// The job id.
    pub job_id: i64,
    /// Its run.
    pub run_id: String,
    /// What it does.
    pub kind: JobKind,
    /// Its step, or `""`.
    pub step: String,
    /// When it was due.
    pub due_at: OffsetDateTime,
    /// Leases taken so far, this one included: above 1, an earlier lease
    /// expired or was released (for a dispatch, the command may have been
    /// sent: the service treats the effect as uncertain unless it knows).
    pub attempt: i32,
    /// When this lease expires; commit before then.
    pub lease_expires_at: OffsetDateTime,
    /// The call's idempotency key, if any.
    pub idempotency_key: Option<String>,
    /// The recorded effect, if any.
    pub effect: Option<Effect>,
    sealed_command: Option<Vec<u8>>,
}

/// [`Store::list_runs`] filters. `None` matches everything.
#[derive(Clone, Debug, Default)]
pub struct RunFilter<'a> {
    /// Only runs of this owner reference (callers without the operator
    /// role see only their own runs).
    pub owner_ref: Option<&'a str>,
    /// Only this workflow.
    pub workflow: Option<&'a str>,
    /// Only this state.
    pub state: Option<RunStatus>,
    /// Only runs held (`true`) or not held (`false`) for an operator.
    pub attention: Option<bool>,
    /// Page size, 1 ..= [`MAX_LIST_LIMIT`]; `None`: [`DEFAULT_LIST_LIMIT`].
    pub limit: Option<u32>,
    /// The previous page's [`RunPage::next_cursor`].
    pub cursor: Option<&'a str>,
}

/// One page of runs, newest first.
#[derive(Clone, Debug, PartialEq)]
pub struct RunPage {
    /// The runs.
    pub runs: Vec<RunSummary>,
    /// Pass as [`RunFilter::cursor`] for the next page; `None` on the last.
    pub next_cursor: Option<String>,
}

/// Whether the restore and admission holds are in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holds {
    /// The restore hold (execution held: [`Store::lease_due`] leases nothing).
    pub restore: bool,
    /// The admission hold ([`Store::admit`] answers `AdmissionHeld`).
    pub admission: bool,
}

/// The run store: a pool of runtime connections, the namespace, the
/// database id and the state keyring.
#[derive(Clone, Debug)]
pub struct Store {
    pool: PgPool,
    ns: String,
    database_id: String,
    keyring: StateKeyring,
}

const SUMMARY_COLUMNS: &str =
    "run_id, workflow, revision, state, attention, created_at, updated_at, deadline_at, ended_at";

fn summary(row: &PgRow) -> Result<RunSummary, StoreError> {
    let state: String = row.try_get("state").map_err(db_error)?;
    let state: RunStatus = serde_json::from_value(Value::String(state.clone())).map_err(|_| {
        StoreError::refused(
            "coordinator.command.state-tampered",
            format!("a run row holds the unknown state `{state}`"),
            "investigate the database",
        )
    })?;
    Ok(RunSummary {
        run_id: row.try_get("run_id").map_err(db_error)?,
        workflow: row.try_get("workflow").map_err(db_error)?,
        revision: row.try_get("revision").map_err(db_error)?,
        state,
        attention: row.try_get("attention").map_err(db_error)?,
        created_at: row.try_get("created_at").map_err(db_error)?,
        updated_at: row.try_get("updated_at").map_err(db_error)?,
        deadline_at: row.try_get("deadline_at").map_err(db_error)?,
        ended_at: row.try_get("ended_at").map_err(db_error)?,
    })
}

fn encode_cursor(seq: i64) -> String {
    hex::encode(format!("runs-before:{seq}"))
}

fn decode_cursor(cursor: &str) -> Result<i64, StoreError> {
    hex::decode(cursor)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| s.strip_prefix("runs-before:").and_then(|n| n.parse().ok()))
        .ok_or_else(|| {
            StoreError::refused(
                "coordinator.list.cursor",
                "the cursor is not one this service returned",
                "start again without a cursor",
            )
        })
}

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
        keyring: StateKeyring,
        packages: &[LoadedPackage],
        max_connections: u32,
    ) -> Result<Store, StoreError> {
        let ns = namespace_of(config)?.to_owned();
        let deployment = config.deployment.as_ref().ok_or_else(|| {
            StoreError::refused(
                "coordinator.deployment.not-applied",
                "the runtime file has no `deployment` section",
                "complete the deployment section",
            )
        })?;
        let pool = connect(
            config,
            resolver,
            &config.database.runtime_url_ref,
            max_connections.min(MAX_POOL_CONNECTIONS),
        )
        .await?;
        {
            let mut conn = pool.acquire().await.map_err(db_error)?;
            verify_runtime(&mut conn, &ns, deployment, &keyring).await?;
            check_activation(&mut conn, &ns, packages).await?;
        }
        Ok(Store {
            pool,
            ns,
            database_id: deployment.database_id.clone(),
            keyring,
        })
    }

    /// The connection pool (for health probes).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Closes the pool, waiting for connections in use.
    pub async fn close(&self) {
        self.pool.close().await;
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
        let bytes = serde_json::to_vec(value).unwrap_or_default();
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
                "coordinator.command.state-tampered",
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
        .fetch_all(&self.pool)
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
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)?;
        let Some(row) = row else { return Ok(None) };
        let bytes: Vec<u8> = row.try_get(0).map_err(db_error)?;
        Definition::from_slice(&bytes).map(Some).map_err(|e| {
            StoreError::refused(
                "coordinator.command.state-tampered",
                format!("stored definition {revision}: {e}"),
                "investigate the database",
            )
        })
    }

    /// The restore and admission holds.
    ///
    /// # Errors
    /// `store-unavailable`.
    pub async fn holds(&self) -> Result<Holds, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT restore_hold, admission_hold FROM {}.deployment",
            self.ns
        ))
        .fetch_one(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(Holds {
            restore: row.try_get(0).map_err(db_error)?,
            admission: row.try_get(1).map_err(db_error)?,
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
        .fetch_one(&self.pool)
        .await
        .map_err(db_error)?
        .try_get(0)
        .map_err(db_error)
    }

    async fn existing(
        &self,
        conn: &mut sqlx::PgConnection,
        start_identity: &str,
        fingerprint: &str,
    ) -> Result<Option<AdmitOutcome>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {SUMMARY_COLUMNS}, request_fingerprint FROM {}.runs WHERE start_identity = $1",
            self.ns
        ))
        .bind(start_identity)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db_error)?;
        let Some(row) = row else { return Ok(None) };
        let stored: String = row.try_get("request_fingerprint").map_err(db_error)?;
        Ok(Some(if stored == fingerprint {
            AdmitOutcome::Existing(summary(&row)?)
        } else {
            AdmitOutcome::KeyReused
        }))
    }

    /// Admits a run: in ONE transaction, the run row (sealed input and
    /// state, owner reference, start identity, request fingerprint,
    /// deadline), its start identity recorded as spent, and `first_jobs`.
    /// A repeat (same start identity) returns `Existing` for the same
    /// fingerprint and `KeyReused` for another, before the holds and the
    /// revision are looked at; a new admission is refused while the
    /// admission hold is in place or when `revision` is not active.
    /// Concurrent admissions of one start identity yield one run.
    ///
    /// # Errors
    /// `store-unavailable`.
    pub async fn admit(
        &self,
        run: NewRun<'_>,
        now: OffsetDateTime,
    ) -> Result<AdmitOutcome, StoreError> {
        let ns = &self.ns;
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        let mut tx = conn.begin().await.map_err(db_error)?;
        if let Some(found) = self
            .existing(&mut tx, run.start_identity, run.request_fingerprint)
            .await?
        {
            return Ok(found);
        }
        let row = sqlx::query(&format!(
            "SELECT d.admission_hold,
                    (SELECT revision FROM {ns}.active_workflows WHERE workflow = $1)
               FROM {ns}.deployment d"
        ))
        .bind(run.workflow)
        .fetch_one(&mut *tx)
        .await
        .map_err(db_error)?;
        let held: bool = row.try_get(0).map_err(db_error)?;
        let active: Option<String> = row.try_get(1).map_err(db_error)?;
        if held {
            return Ok(AdmitOutcome::AdmissionHeld);
        }
        if active.as_deref() != Some(run.revision) {
            return Ok(AdmitOutcome::RevisionNotActive { active });
        }
        let run_id = uuid::Uuid::new_v4().to_string();
        // Waits for a concurrent admission of the same identity to settle.
        let spent = sqlx::query(&format!(
            "INSERT INTO {ns}.spent_keys (kind, identity, run_id, spent_at)
             VALUES ('start', $1, $2, $3) ON CONFLICT DO NOTHING"
        ))
        .bind(run.start_identity)
        .bind(&run_id)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        if spent.rows_affected() == 0 {
            drop(tx);
            let mut conn = self.pool.acquire().await.map_err(db_error)?;
            return Ok(self
                .existing(&mut conn, run.start_identity, run.request_fingerprint)
                .await?
                .unwrap_or(AdmitOutcome::KeyReused));
        }
        let status = run.state.status;
        let sealed_input = self.seal_json(&run_id, "input", "", &run.state.input);
        let sealed_state = self.seal_json(&run_id, "state", "", run.state);
        let sealed_output = run
            .state
            .output
            .as_ref()
            .map(|o| self.seal_json(&run_id, "output", "", o));
        let version = self.keyring.active_version() as i32;
        let row = sqlx::query(&format!(
            "INSERT INTO {ns}.runs (run_id, workflow, revision, owner_ref, start_identity,
                request_fingerprint, state, attention, ended, deadline_at, created_at, updated_at,
                ended_at, key_version, input_key_version, sealed_input, sealed_state, sealed_output)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, $12, $13, $13, $14, $15, $16)
             RETURNING {SUMMARY_COLUMNS}"
        ))
        .bind(&run_id)
        .bind(run.workflow)
        .bind(run.revision)
        .bind(run.owner_ref)
        .bind(run.start_identity)
        .bind(run.request_fingerprint)
        .bind(status.as_str())
        .bind(status == RunStatus::Attention)
        .bind(status.is_terminal())
        .bind(run.deadline_at)
        .bind(now)
        .bind(status.is_terminal().then_some(now))
        .bind(version)
        .bind(sealed_input)
        .bind(sealed_state)
        .bind(sealed_output)
        .fetch_one(&mut *tx)
        .await
        .map_err(db_error)?;
        let created = summary(&row)?;
        for job in &run.first_jobs {
            self.insert_job(&mut tx, &run_id, job, now).await?;
        }
        tx.commit().await.map_err(db_error)?;
        Ok(AdmitOutcome::Created(created))
    }

    async fn insert_job(
        &self,
        conn: &mut sqlx::PgConnection,
        run_id: &str,
        job: &NewJob,
        now: OffsetDateTime,
    ) -> Result<i64, StoreError> {
        let ns = &self.ns;
        let sealed = job
            .command
            .as_ref()
            .map(|c| self.seal_json(run_id, "command", &job.step, c));
        let key_version = sealed
            .as_ref()
            .map(|_| self.keyring.active_version() as i32);
        let id: i64 = sqlx::query(&format!(
            "INSERT INTO {ns}.jobs (run_id, kind, step, status, due_at, idempotency_key,
                key_version, sealed_command, created_at, updated_at)
             VALUES ($1, $2, $3, 'ready', $4, $5, $6, $7, $8, $8) RETURNING job_id"
        ))
        .bind(run_id)
        .bind(job.kind.as_str())
        .bind(&job.step)
        .bind(job.due_at)
        .bind(&job.idempotency_key)
        .bind(key_version)
        .bind(sealed)
        .bind(now)
        .fetch_one(&mut *conn)
        .await
        .map_err(db_error)?
        .try_get(0)
        .map_err(db_error)?;
        if let Some(key) = &job.idempotency_key {
            sqlx::query(&format!(
                "INSERT INTO {ns}.spent_keys (kind, identity, run_id, spent_at)
                 VALUES ('command', $1, $2, $3) ON CONFLICT DO NOTHING"
            ))
            .bind(key)
            .bind(run_id)
            .bind(now)
            .execute(&mut *conn)
            .await
            .map_err(db_error)?;
        }
        Ok(id)
    }

    /// Loads a run and opens its state. `None` when there is no such run.
    ///
    /// # Errors
    /// `state-key-custody` when the state was sealed under a version that is
    /// not configured; `state-tampered` when it does not open under its
    /// binding; `run.payload-erased` after retention; `store-unavailable`.
    pub async fn load_run(&self, run_id: &str) -> Result<Option<LoadedRun>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {SUMMARY_COLUMNS}, version, owner_ref, sealed_state FROM {}.runs WHERE run_id = $1",
            self.ns
        ))
        .bind(run_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)?;
        let Some(row) = row else { return Ok(None) };
        let sealed: Option<Vec<u8>> = row.try_get("sealed_state").map_err(db_error)?;
        let sealed = sealed.ok_or_else(|| {
            StoreError::refused(
                "coordinator.run.payload-erased",
                format!("retention erased the payloads of run {run_id}"),
                "an erased run can no longer be retried or reconciled",
            )
        })?;
        Ok(Some(LoadedRun {
            summary: summary(&row)?,
            version: row.try_get("version").map_err(db_error)?,
            owner_ref: row.try_get("owner_ref").map_err(db_error)?,
            state: self.open_json(run_id, "state", "", &sealed)?,
        }))
    }

    /// The admitted input of a run (sealed apart from the state).
    ///
    /// # Errors
    /// As [`Store::load_run`].
    pub async fn load_input(&self, run_id: &str) -> Result<Option<Value>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT sealed_input FROM {}.runs WHERE run_id = $1",
            self.ns
        ))
        .bind(run_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)?;
        let Some(row) = row else { return Ok(None) };
        let sealed: Option<Vec<u8>> = row.try_get(0).map_err(db_error)?;
        match sealed {
            Some(s) => self.open_json(run_id, "input", "", &s).map(Some),
            None => Err(StoreError::refused(
                "coordinator.run.payload-erased",
                format!("retention erased the payloads of run {run_id}"),
                "an erased run can no longer be retried or reconciled",
            )),
        }
    }

    /// Commits a new state of one run with its job changes, in one
    /// transaction: the run row only if its version is still
    /// `expected_version` (then +1), `complete` only if each is leased by
    /// `lease_owner`; on either failure nothing is written and the outcome
    /// says why. The state (and output) are sealed under the active key
    /// version.
    ///
    /// # Errors
    /// `store-unavailable`.
    pub async fn commit(
        &self,
        c: RunCommit<'_>,
        now: OffsetDateTime,
    ) -> Result<CommitOutcome, StoreError> {
        let ns = &self.ns;
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        let mut tx = conn.begin().await.map_err(db_error)?;
        let status = c.state.status;
        let sealed_state = self.seal_json(c.run_id, "state", "", c.state);
        let sealed_output = c
            .state
            .output
            .as_ref()
            .map(|o| self.seal_json(c.run_id, "output", "", o));
        let updated = sqlx::query(&format!(
            "UPDATE {ns}.runs SET state = $3, attention = $4, ended = $5, version = version + 1,
                updated_at = $6, ended_at = CASE WHEN $5 THEN COALESCE(ended_at, $6) END,
                key_version = $7, sealed_state = $8, sealed_output = $9
              WHERE run_id = $1 AND version = $2 RETURNING version"
        ))
        .bind(c.run_id)
        .bind(c.expected_version)
        .bind(status.as_str())
        .bind(status == RunStatus::Attention)
        .bind(status.is_terminal())
        .bind(now)
        .bind(self.keyring.active_version() as i32)
        .bind(sealed_state)
        .bind(sealed_output)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error)?;
        let Some(updated) = updated else {
            let current: Option<i64> =
                sqlx::query(&format!("SELECT version FROM {ns}.runs WHERE run_id = $1"))
                    .bind(c.run_id)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(db_error)?
                    .map(|r| r.try_get(0))
                    .transpose()
                    .map_err(db_error)?;
            return Ok(CommitOutcome::Stale { current });
        };
        let version: i64 = updated.try_get(0).map_err(db_error)?;
        for job_id in &c.complete {
            let done = sqlx::query(&format!(
                "UPDATE {ns}.jobs SET status = 'done', lease_owner = NULL, lease_expires_at = NULL,
                    updated_at = $4
                  WHERE job_id = $1 AND run_id = $2 AND status = 'leased' AND lease_owner = $3"
            ))
            .bind(job_id)
            .bind(c.run_id)
            .bind(c.lease_owner)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
            if done.rows_affected() != 1 {
                return Ok(CommitOutcome::LeaseLost { job_id: *job_id });
            }
        }
        if !c.cancel.is_empty() {
            sqlx::query(&format!(
                "UPDATE {ns}.jobs SET status = 'done', lease_owner = NULL, lease_expires_at = NULL,
                    updated_at = $4
                  WHERE job_id = ANY($1) AND run_id = $2 AND status <> 'done'
                    AND (status <> 'leased' OR lease_owner = $3)"
            ))
            .bind(&c.cancel)
            .bind(c.run_id)
            .bind(c.lease_owner)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
        }
        for (job_id, effect) in &c.effects {
            sqlx::query(&format!(
                "UPDATE {ns}.jobs SET effect = $3, updated_at = $4 WHERE job_id = $1 AND run_id = $2"
            ))
            .bind(job_id)
            .bind(c.run_id)
            .bind(effect.as_str())
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
        }
        if status.is_terminal() {
            sqlx::query(&format!(
                "UPDATE {ns}.jobs SET status = 'done', updated_at = $2
                  WHERE run_id = $1 AND status = 'ready'"
            ))
            .bind(c.run_id)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
        }
        for job in &c.insert {
            self.insert_job(&mut tx, c.run_id, job, now).await?;
        }
        tx.commit().await.map_err(db_error)?;
        Ok(CommitOutcome::Committed { version })
    }

    /// Leases up to `limit` due jobs to `owner` until `now + lease`: first
    /// every lease that expired by `now` is returned to `ready`, then the
    /// ready jobs due by `now` are taken oldest due first, each with
    /// `FOR UPDATE SKIP LOCKED` so concurrent workers never take the same
    /// job. Reads the partial index of ready jobs by due time: O(due). Leases
    /// nothing while the restore hold is in place.
    ///
    /// # Errors
    /// `store-unavailable`.
    pub async fn lease_due(
        &self,
        owner: &str,
        now: OffsetDateTime,
        lease: Duration,
        limit: u32,
    ) -> Result<Vec<LeasedJob>, StoreError> {
        let ns = &self.ns;
        let limit = i64::from(limit.clamp(1, 1000));
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        let mut tx = conn.begin().await.map_err(db_error)?;
        let held: bool = sqlx::query(&format!("SELECT restore_hold FROM {ns}.deployment"))
            .fetch_one(&mut *tx)
            .await
            .map_err(db_error)?
            .try_get(0)
            .map_err(db_error)?;
        if held {
            return Ok(Vec::new());
        }
        sqlx::query(&format!(
            "UPDATE {ns}.jobs SET status = 'ready', lease_owner = NULL, lease_expires_at = NULL,
                updated_at = $1
              WHERE job_id IN (SELECT job_id FROM {ns}.jobs
                                WHERE status = 'leased' AND lease_expires_at <= $1
                                ORDER BY lease_expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)"
        ))
        .bind(now)
        .bind(limit)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        let expires = now + lease;
        let rows = sqlx::query(&format!(
            "UPDATE {ns}.jobs j SET status = 'leased', lease_owner = $2, lease_expires_at = $3,
                attempt = j.attempt + 1, updated_at = $1
               FROM (SELECT job_id FROM {ns}.jobs
                      WHERE status = 'ready' AND due_at <= $1
                      ORDER BY due_at, job_id LIMIT $4 FOR UPDATE SKIP LOCKED) d
              WHERE j.job_id = d.job_id
          RETURNING j.job_id, j.run_id, j.kind, j.step, j.due_at, j.attempt, j.lease_expires_at,
                    j.idempotency_key, j.effect, j.sealed_command"
        ))
        .bind(now)
        .bind(owner)
        .bind(expires)
        .bind(limit)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        let mut jobs = Vec::with_capacity(rows.len());
        for row in rows {
            let kind: String = row.try_get("kind").map_err(db_error)?;
            let effect: Option<String> = row.try_get("effect").map_err(db_error)?;
            jobs.push(LeasedJob {
                job_id: row.try_get("job_id").map_err(db_error)?,
                run_id: row.try_get("run_id").map_err(db_error)?,
                kind: JobKind::parse(&kind).unwrap_or(JobKind::Advance),
                step: row.try_get("step").map_err(db_error)?,
                due_at: row.try_get("due_at").map_err(db_error)?,
                attempt: row.try_get("attempt").map_err(db_error)?,
                lease_expires_at: row.try_get("lease_expires_at").map_err(db_error)?,
                idempotency_key: row.try_get("idempotency_key").map_err(db_error)?,
                effect: effect.as_deref().and_then(Effect::parse),
                sealed_command: row.try_get("sealed_command").map_err(db_error)?,
            });
        }
        jobs.sort_by_key(|j| (j.due_at, j.job_id));
        Ok(jobs)
    }

    /// Gives a leased job back without completing it, due again at
    /// `due_at` (a definite retryable answer, or a worker shutting down).
    /// `false` when `owner` no longer holds the lease.
    ///
    /// # Errors
    /// `store-unavailable`.
    pub async fn release_job(
        &self,
        job_id: i64,
        owner: &str,
        due_at: OffsetDateTime,
        now: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(&format!(
            "UPDATE {}.jobs SET status = 'ready', lease_owner = NULL, lease_expires_at = NULL,
                due_at = $3, updated_at = $4
              WHERE job_id = $1 AND status = 'leased' AND lease_owner = $2",
            self.ns
        ))
        .bind(job_id)
        .bind(owner)
        .bind(due_at)
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(done.rows_affected() == 1)
    }

    /// Opens a leased job's prepared command (`None` when it has none).
    ///
    /// # Errors
    /// `state-key-custody`, `state-tampered`.
    pub fn open_command(&self, job: &LeasedJob) -> Result<Option<Value>, StoreError> {
        match &job.sealed_command {
            Some(s) => self
                .open_json(&job.run_id, "command", &job.step, s)
                .map(Some),
            None => Ok(None),
        }
    }

    /// Lists runs, newest admission first, with `filter`; at most
    /// [`MAX_LIST_LIMIT`] per page.
    ///
    /// # Errors
    /// `list.limit` for a limit outside 1 ..= 100, `list.cursor` for a cursor
    /// this store did not return, `store-unavailable`.
    pub async fn list_runs(&self, filter: &RunFilter<'_>) -> Result<RunPage, StoreError> {
        let limit = filter.limit.unwrap_or(DEFAULT_LIST_LIMIT);
        if !(1..=MAX_LIST_LIMIT).contains(&limit) {
            return Err(StoreError::refused(
                "coordinator.list.limit",
                format!("limit {limit} is outside 1..={MAX_LIST_LIMIT}"),
                "ask for at most 100 runs per page",
            ));
        }
        let before = filter.cursor.map(decode_cursor).transpose()?;
        let rows = sqlx::query(&format!(
            "SELECT {SUMMARY_COLUMNS}, seq FROM {}.runs
              WHERE ($1::text IS NULL OR owner_ref = $1)
                AND ($2::text IS NULL OR workflow = $2)
                AND ($3::text IS NULL OR state = $3)
                AND ($4::boolean IS NULL OR attention = $4)
                AND ($5::bigint IS NULL OR seq < $5)
              ORDER BY seq DESC LIMIT $6",
            self.ns
        ))
        .bind(filter.owner_ref)
        .bind(filter.workflow)
        .bind(filter.state.map(RunStatus::as_str))
        .bind(filter.attention)
        .bind(before)
        .bind(i64::from(limit) + 1)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        let mut runs = Vec::new();
        let mut last_seq = None;
        for row in rows.iter().take(limit as usize) {
            runs.push(summary(row)?);
            last_seq = Some(row.try_get::<i64, _>("seq").map_err(db_error)?);
        }
        let next_cursor = if rows.len() > limit as usize {
            last_seq.map(encode_cursor)
        } else {
            None
        };
        Ok(RunPage { runs, next_cursor })
    }
}
