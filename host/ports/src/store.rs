//! The run store port ([`RunStore`]) and its in-memory implementation
//! ([`MemoryRunStore`]).
//!
//! The port is the whole contract between the engine and durable storage:
//! a PostgreSQL implementation (the only production store, DESIGN.md "The
//! service") implements exactly these methods. Each method is one atomic
//! step (one transaction). The port carries plain data; a PostgreSQL store
//! seals `RunRecord::state` and every job's prepared command with
//! [`coordinator_runtime::keys::StateKeyring`] (binding: database id, run id, purpose
//! `state` / `command`, step) before writing, and opens them on reading.
//!
//! Jobs are the only way work and waits exist: a wait is a job row with a
//! due time, never a sleeping task (DESIGN.md "The service").

use std::collections::BTreeMap;

use async_trait::async_trait;
use coordinator_ir::Definition;
use coordinator_vm::{RunState, RunStatus, WakeKind};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use coordinator_runtime::binding::LiveBinding;

/// The deployment-wide holds of seed 000 "Restore from a backup", as every
/// process on the store sees them (the PostgreSQL store keeps them in the
/// deployment row). Changed only by [`RunStore::swap_holds`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Holds {
    /// The restore hold: nothing is dispatched (only receipt lookups are
    /// leased), `retry-same` is refused (`execution.held`).
    pub restore: bool,
    /// The admission hold: starts are refused (`admission.held`).
    pub admission: bool,
    /// `complete-execution-recovery` was attested while the restore hold
    /// was in place: releasing it no longer waits for reviews or unknown
    /// effects.
    pub execution_recovery_completed: bool,
    /// The restore epoch: moves (+1) each time the restore hold is placed.
    /// A process works under the epoch it read when it started; a lease
    /// under an older one is refused ([`StoreError::LeaseIncompatible`]),
    /// so no process that predates a restore hold dispatches again.
    pub restore_epoch: u64,
}

/// Who started a run: the starting token's `iss` and `sub` (SPEC §8).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    /// The token's `iss`.
    pub iss: String,
    /// The token's `sub`.
    pub sub: String,
}

/// Per-step counters the engine keeps beside the VM state, for inspection.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepLedger {
    /// Dispatch attempts actually started (a job reached `sending`).
    pub attempts: u32,
    /// Wait-for observations made (reads of the source).
    pub observations: u32,
    /// The step's prepared command was found `ready` or `sending` when the
    /// restore hold was placed (it may have been sent by the deployment the
    /// backup came from) and was held as an `unknown` effect for review
    /// (docs/operations.md "Restore from a backup").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub restored: bool,
}

/// Where a run stands in the review that the restore hold asks for
/// (docs/operations.md "Restore from a backup"). `None` on a run the
/// restore hold never held back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Review {
    /// A prepared command of the run was restored (committed before the
    /// backup, not known to be answered): it is held as an `unknown`
    /// effect and `release-restore-hold` is refused
    /// (`restore.review-required`) until an operator reviews it.
    Required,
    /// An operator reconciled it (a receipt lookup was queued).
    Reconciled,
    /// An operator cancelled the run.
    Cancelled,
    /// `complete-execution-recovery` attested the execution history before
    /// the hold was released.
    Attested,
}

impl Review {
    /// `required`, `reconciled`, `cancelled` or `attested` (the
    /// `runs.review` column and the API's `review`).
    pub fn as_str(self) -> &'static str {
        match self {
            Review::Required => "required",
            Review::Reconciled => "reconciled",
            Review::Cancelled => "cancelled",
            Review::Attested => "attested",
        }
    }

    /// The review named `text` ([`Review::as_str`]'s words), if any.
    pub fn parse(text: &str) -> Option<Review> {
        [
            Review::Required,
            Review::Reconciled,
            Review::Cancelled,
            Review::Attested,
        ]
        .into_iter()
        .find(|r| r.as_str() == text)
    }

    /// The review after `next` is recorded on a run whose review is
    /// `current`: `Required` is always recorded; any other outcome only
    /// replaces `Required` (an action on a run that needed no review
    /// records nothing). Both stores apply this rule.
    pub fn after(current: Option<Review>, next: Option<Review>) -> Option<Review> {
        match (current, next) {
            (_, Some(Review::Required)) => Some(Review::Required),
            (Some(Review::Required), Some(done)) => Some(done),
            (current, _) => current,
        }
    }
}

/// A run as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run id (a UUID v4 string).
    pub id: String,
    /// Admission order, assigned by the store; larger is newer.
    pub sequence: u64,
    /// The workflow name.
    pub workflow: String,
    /// The revision the run is bound to forever (`sha256:<hex>`).
    pub revision: String,
    /// The starter.
    pub owner: Owner,
    /// `AdmissionKey::start_identity(iss, sub, workflow, key)` (hex).
    pub start_identity: String,
    /// SHA-256 (hex) of the admission request's revision and canonical input:
    /// a repeat with another digest is a conflict.
    pub request_digest: String,
    /// The VM state (sealed at rest by a durable store).
    pub state: RunState,
    /// Per-step counters, by step name.
    pub ledger: BTreeMap<String, StepLedger>,
    /// Optimistic concurrency version; starts at 1, +1 on every commit.
    pub version: u64,
    /// The binding digest (`sha256:<hex>`, [`coordinator_runtime::binding`]) of
    /// each connection the run's Program uses, by connection name, as the
    /// runtime file had them at admission. Never changes afterwards.
    #[serde(default)]
    pub bindings: BTreeMap<String, String>,
    /// Retention erased the run's payloads ([`RunStore::erase_payloads`]):
    /// `state` is then [`erased_state`]'s skeleton (state name and
    /// timestamps only), and the run can no longer be retried or reconciled
    /// (seed 000 `run.payload-erased`).
    #[serde(default)]
    pub payload_erased: bool,
    /// The restore review of the run, if the restore hold ever held one of
    /// its prepared commands back ([`Review`]).
    #[serde(default)]
    pub review: Option<Review>,
    /// When the run ended, Unix seconds of the engine's clock at the commit
    /// that ended it ([`Commit::at_unix`]; at admission, its admission
    /// instant); `None` while it has not ended. What the API shows as
    /// `endedAt` and what retention compares.
    #[serde(default)]
    pub ended_unix: Option<i64>,
}

impl RunRecord {
    /// The record of `run` as just admitted with `sequence`: version 1,
    /// an empty ledger, nothing erased or reviewed (every store's
    /// [`Admitted::Created`]).
    pub fn admitted(run: NewRun, sequence: u64) -> RunRecord {
        let ended_unix = if run.state.status.is_terminal() {
            crate::clock::rfc3339_to_unix(&run.state.admitted_at)
        } else {
            None
        };
        RunRecord {
            ended_unix,
            id: run.id,
            sequence,
            workflow: run.workflow,
            revision: run.revision,
            owner: run.owner,
            start_identity: run.start_identity,
            request_digest: run.request_digest,
            state: run.state,
            ledger: BTreeMap::new(),
            version: 1,
            bindings: run.bindings,
            payload_erased: false,
            review: None,
        }
    }

    /// The run's state (`running`, `attention`, ...).
    pub fn status(&self) -> RunStatus {
        self.state.status
    }
}

/// What a job does when it is due.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum JobKind {
    /// Send one attempt of call step `step` (the VM's `Command::Dispatch`):
    /// the prepared command, persisted before it is sent.
    #[serde(rename_all = "camelCase")]
    Dispatch {
        /// The call step's name.
        step: String,
        /// The catalogue operation id.
        operation_id: String,
        /// The logical connection name.
        connection: String,
        /// The BReg action (invoke-action only).
        action: Option<String>,
        /// The frozen operation input (sealed at rest).
        command: Value,
        /// SPEC §5's key, for operations that carry one.
        idempotency_key: Option<String>,
        /// The VM's attempt number (from 1).
        attempt: u32,
        /// Whether a resend after an interrupted attempt is safe (reads).
        resend_safe: bool,
    },
    /// Look up the receipt of step `step`'s idempotency key.
    #[serde(rename_all = "camelCase")]
    LookupReceipt {
        /// The call step's name.
        step: String,
        /// The catalogue operation id.
        operation_id: String,
        /// The logical connection name.
        connection: String,
        /// The key of the original command.
        idempotency_key: String,
        /// The VM's lookup number (from 1).
        lookup: u32,
    },
    /// Deliver `TimerFired { at }` (a wake, a wait-for timeout or the
    /// deadline).
    Timer {
        /// The instant (RFC 3339).
        at: String,
        /// Why the timer exists.
        wake: WakeKind,
    },
    /// Observe completion `completion` for wait-for step `step` (a
    /// Casework review, SPEC §6 "Completion of a review").
    #[serde(rename_all = "camelCase")]
    Observe {
        /// The wait-for step's name.
        step: String,
        /// The connection the source is observed through.
        connection: String,
        /// The completion's name (`result`).
        completion: String,
        /// The product's handle of the observed thing, as the VM's
        /// `ObserveCompletion` names it (a Casework review request id;
        /// completion events bring reads forward by it).
        review_request_id: String,
        /// Unix seconds of the last observation, if any (the floor counts
        /// from it when a completion event brings the read forward).
        last_observed_unix: Option<i64>,
    },
}

/// Where a job stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JobState {
    /// Waiting for its due time (or for a worker).
    Ready,
    /// A dispatch attempt was started: the request may have been sent. A
    /// `sending` job whose lease expired is never resent blindly: a read is
    /// sent again, a mutation or evaluation is answered `uncertain`.
    Sending,
}

/// A job's lease: who works on it, until when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The worker's id (unique per process).
    pub owner: String,
    /// Unix seconds; after it, another worker may lease the job.
    pub expires_unix: i64,
}

/// A stored job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// Store-assigned id, unique in the deployment.
    pub id: u64,
    /// The run the job belongs to.
    pub run_id: String,
    /// What to do.
    pub kind: JobKind,
    /// Unix seconds; the job is not leased before.
    pub due_unix: i64,
    /// Where it stands.
    pub state: JobState,
    /// The current lease, if any.
    pub lease: Option<Lease>,
}

/// A job to create.
#[derive(Clone, Debug, PartialEq)]
pub struct NewJob {
    /// What to do.
    pub kind: JobKind,
    /// Unix seconds.
    pub due_unix: i64,
}

/// A run to admit with its first jobs.
#[derive(Clone, Debug, PartialEq)]
pub struct NewRun {
    /// The run id the engine chose.
    pub id: String,
    /// The workflow name.
    pub workflow: String,
    /// The active revision at admission.
    pub revision: String,
    /// The starter.
    pub owner: Owner,
    /// The start identity (unique per deployment).
    pub start_identity: String,
    /// See [`RunRecord::request_digest`].
    pub request_digest: String,
    /// The state `Vm::admit` returned.
    pub state: RunState,
    /// The jobs of the admission's commands (the deadline is not one: the
    /// store keeps `state.deadline_at` and makes it a job when it is due).
    pub jobs: Vec<NewJob>,
    /// See [`RunRecord::bindings`].
    pub bindings: BTreeMap<String, String>,
}

/// The result of [`RunStore::admit`].
#[derive(Clone, Debug, PartialEq)]
pub enum Admitted {
    /// A new run was stored with its jobs.
    Created(RunRecord),
    /// The start identity exists with the same request digest: that run.
    Existing(RunRecord),
    /// The start identity exists with another revision or input.
    Conflict,
    /// The store's record of the active revision differs (an `apply`
    /// changed it after this process started): `active` is the active one,
    /// if the workflow is active at all. Nothing was stored.
    RevisionNotActive {
        /// The active revision.
        active: Option<String>,
    },
    /// The admission hold is in place (seed 000 `admission.held`).
    AdmissionHeld,
    /// The run would record, for `connection`, another binding than the
    /// runtime file the last `apply` used (seed 000 `binding.conflict`):
    /// this process serves another runtime file. Nothing was stored.
    BindingConflict {
        /// The first such connection, by name.
        connection: String,
    },
    /// An `apply` changed the active packages after this store was opened
    /// (seed 000 `deployment.activation-changed`): the process serves the
    /// activation it started with and must be restarted. Nothing was
    /// stored.
    ActivationChanged,
}

/// One atomic step of a run: its new state, the leased job it completes,
/// and the jobs its commands create.
#[derive(Clone, Debug, PartialEq)]
pub struct Commit {
    /// The run.
    pub run_id: String,
    /// When the engine commits, Unix seconds of its clock: a commit that
    /// ends the run records it as the run's end ([`RunRecord::ended_unix`];
    /// the VM's `state.ended_at` is its logical time, the instant of the
    /// event that ended it, which may be long before).
    pub at_unix: i64,
    /// The version read; the commit fails with [`StoreError::Conflict`] if
    /// the stored version differs.
    pub expected_version: u64,
    /// The new state.
    pub state: RunState,
    /// The new ledger.
    pub ledger: BTreeMap<String, StepLedger>,
    /// The leased job this commit completes (deleted), with its lease owner.
    pub complete: Option<(u64, String)>,
    /// Jobs to create.
    pub jobs: Vec<NewJob>,
    /// The restore review to record, by [`Review::after`]'s rule (`None`
    /// leaves the run's review as it is).
    pub review: Option<Review>,
}

/// Leases the jobs a commit creates to the process that commits, as they
/// are inserted ([`RunStore::commit_leasing`]), so that it carries them out
/// at once without leasing them again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseOnInsert {
    /// The lease owner (this process's worker id).
    pub owner: String,
    /// Now, Unix seconds: only jobs due by then are leased.
    pub now: i64,
    /// Unix seconds the leases run until.
    pub lease_until: i64,
    /// This process's restore epoch: nothing is leased unless the
    /// deployment is under it and no restore hold is in place (the jobs are
    /// then inserted unleased, for whoever may lease them).
    pub epoch: u64,
}

/// What [`RunStore::commit_leasing`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct Committed {
    /// The run's new version.
    pub version: u64,
    /// The new jobs that were inserted leased to the committing process
    /// ([`LeaseOnInsert`]), in insertion order.
    pub leased: Vec<Job>,
}

/// What a worker asks [`RunStore::lease`] for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseRequest<'a> {
    /// The lease owner (this process's worker id).
    pub owner: &'a str,
    /// Unix seconds (engine clock): jobs due at or before it, with no lease
    /// or an expired one.
    pub now: i64,
    /// Unix seconds: when the lease expires.
    pub lease_until: i64,
    /// At most this many jobs (clamped to 1..=1000).
    pub limit: usize,
    /// The restore epoch ([`Holds::restore_epoch`]) this process read when
    /// it started: a store whose epoch moved since refuses the lease with
    /// [`StoreError::LeaseIncompatible`] (the process predates a restore
    /// hold). `None` for a `--recovery-only` instance, which dispatches
    /// nothing: it is given receipt lookups only, whatever the epoch.
    pub epoch: Option<u64>,
    /// Only jobs of this run (an operator's reconcile carried out at once).
    pub run_id: Option<&'a str>,
    /// Only receipt lookups (also implied by `epoch: None` and by the
    /// restore hold).
    pub receipt_lookups_only: bool,
}

/// The counts `release-restore-hold` checks (and the doctor shows).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReviewSurvey {
    /// Runs that have not ended whose review is [`Review::Required`].
    pub review_required: u64,
    /// Runs that have not ended and hold an `unknown` effect.
    pub unknown_effects: u64,
    /// Runs that ended still holding an `unknown` effect (a run cancelled,
    /// expired or failed during an uncertain call): an operator may still
    /// have to find out what happened.
    pub ended_unknown_effects: u64,
}

/// What one [`RunStore::erase_payloads`] call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Erasure {
    /// Runs whose payloads were erased by this call.
    pub erased: u32,
    /// Whether further runs qualify (call again).
    pub more: bool,
}

/// Whether retention may erase this run's payloads: it has ended, is not
/// held, holds no `unknown` effect and has no job left (seed 000 "Erase
/// ended payloads": never live or uncertain work). Ended before the cutoff
/// is checked apart.
pub fn erasable(state: &RunState) -> bool {
    state.status.is_terminal()
        && state.status != RunStatus::Attention
        && !state
            .effects
            .values()
            .any(|e| *e == coordinator_vm::EffectState::Unknown)
}

/// What an erased run's state reads as: its state name and timestamps
/// (Unix seconds, rendered RFC 3339), nothing else. No input, path, step
/// outputs, effects, outcome, output or failure: those were payload. Both
/// stores build it the same way, so an erased run reads the same from
/// either.
pub fn erased_state(
    status: RunStatus,
    admitted_unix: i64,
    deadline_unix: i64,
    now_unix: i64,
    ended_unix: Option<i64>,
) -> RunState {
    use super::clock::unix_to_rfc3339;
    RunState {
        status,
        input: Value::Null,
        admitted_at: unix_to_rfc3339(admitted_unix),
        deadline_at: unix_to_rfc3339(deadline_unix),
        now: unix_to_rfc3339(now_unix),
        elapsed_seconds: u64::try_from(now_unix.saturating_sub(admitted_unix)).unwrap_or(0),
        path: Vec::new(),
        outputs: BTreeMap::new(),
        effects: BTreeMap::new(),
        pending: None,
        cancel: None,
        outcome: None,
        output: None,
        failure: None,
        ended_at: ended_unix.map(unix_to_rfc3339),
    }
}

/// Largest `limit` of one [`RunStore::erase_payloads`] call (seed 000: at
/// most 100 runs per call).
pub const MAX_ERASE_LIMIT: u32 = 100;

/// `list` filters (SPEC §8 `GET /v1/runs`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunFilter {
    /// Only runs of this owner (non-operators).
    pub owner: Option<Owner>,
    /// Only runs of these workflows (`None`: all).
    pub workflows: Option<Vec<String>>,
    /// Only runs in this state.
    pub state: Option<RunStatus>,
    /// `Some(true)`: only `attention`; `Some(false)`: all but `attention`.
    pub attention: Option<bool>,
    /// Page size, 1..=100 (clamped).
    pub limit: u32,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// One page of runs, newest first.
#[derive(Clone, Debug, PartialEq)]
pub struct RunPage {
    /// The runs.
    pub runs: Vec<RunRecord>,
    /// Opaque; `None` on the last page.
    pub next_cursor: Option<String>,
}

/// Why a store operation failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreError {
    /// The store cannot be reached (seed 000 `store-unavailable`); retry.
    Unavailable(String),
    /// The run's version moved since it was read (optimistic concurrency).
    Conflict,
    /// The job is gone or leased by another worker.
    LeaseLost,
    /// No such run.
    NotFound,
    /// A cursor the store did not write.
    BadCursor,
    /// The lease asked under restore epoch `process`, but the store's
    /// restore epoch is `store`: the restore hold was placed after this
    /// process started (seed 000 `restore.lease-incompatible`). The
    /// process must not work any more; a restarted one may.
    LeaseIncompatible {
        /// The epoch the process started under.
        process: u64,
        /// The store's epoch.
        store: u64,
    },
    /// A stored value does not open (seed 000 `state-key-custody`: its key
    /// version is not configured; `state-tampered`: it does not open under
    /// its binding) or the store refused otherwise; not retried.
    Refused {
        /// The raw code.
        code: &'static str,
        /// What happened (no payload, no secret).
        message: String,
    },
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Unavailable(m) => write!(f, "store-unavailable: {m}"),
            StoreError::Conflict => f.write_str("the run changed meanwhile"),
            StoreError::LeaseLost => f.write_str("the job's lease was lost"),
            StoreError::NotFound => f.write_str("no such run"),
            StoreError::BadCursor => f.write_str("malformed cursor"),
            StoreError::LeaseIncompatible { process, store } => write!(
                f,
                "restore.lease-incompatible: this process started under restore epoch {process}, the store is at {store} (a restore hold was placed since)"
            ),
            StoreError::Refused { code, message } => write!(f, "{code}: {message}"),
        }
    }
}

impl std::error::Error for StoreError {}

/// The durable run store (STYLE.md "host/": a small port).
///
/// Every method is atomic. Unix seconds come from the engine's clock, never
/// from the store's, so a manual clock drives leases and due times too.
#[async_trait]
pub trait RunStore: Send + Sync {
    /// Admits a run and its first jobs in one step, unless its start
    /// identity exists: then [`Admitted::Existing`] when the request digest
    /// matches, else [`Admitted::Conflict`] (SPEC §8 `idempotency.key-reused`).
    async fn admit(&self, run: NewRun) -> Result<Admitted, StoreError> {
        self.admit_leasing(run, None)
            .await
            .map(|(admitted, _)| admitted)
    }

    /// [`RunStore::admit`], inserting the first jobs due by `lease.now`
    /// leased to `lease.owner` (see [`LeaseOnInsert`]) and returning them
    /// beside a [`Admitted::Created`] (none otherwise).
    async fn admit_leasing(
        &self,
        run: NewRun,
        lease: Option<&LeaseOnInsert>,
    ) -> Result<(Admitted, Vec<Job>), StoreError>;

    /// [`RunStore::admit_leasing`] for several starts at once (group
    /// commit): each answered in the same order exactly as
    /// `admit_leasing` would answer it, one start's refusal never failing
    /// another; of two starts of one identity in a batch, one is admitted
    /// and the other answered as a repeat. The default admits them one
    /// after another; the PostgreSQL store admits them in one statement.
    async fn admit_batch(
        &self,
        runs: Vec<(NewRun, Option<LeaseOnInsert>)>,
    ) -> Vec<Result<(Admitted, Vec<Job>), StoreError>> {
        let mut answers = Vec::with_capacity(runs.len());
        for (run, lease) in runs {
            answers.push(self.admit_leasing(run, lease.as_ref()).await);
        }
        answers
    }

    /// The run with this id.
    async fn get(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError>;

    /// Runs matching `filter`, newest first (by `sequence`), at most
    /// `filter.limit` (clamped to 1..=100), continuing after `cursor`.
    async fn list(&self, filter: &RunFilter) -> Result<RunPage, StoreError>;

    /// The run's jobs (for inspection), in id order.
    async fn jobs(&self, run_id: &str) -> Result<Vec<Job>, StoreError>;

    /// Leases up to `request.limit` jobs with `due_unix <= now` that have
    /// no lease or an expired one (`expires_unix <= now`), oldest due
    /// first, for `request.owner` until `request.lease_until`. A job is
    /// never leased by two workers at once (PostgreSQL: `FOR UPDATE SKIP
    /// LOCKED`). While the restore hold is in place, and for a request
    /// without an epoch (`--recovery-only`), only `LookupReceipt` jobs are
    /// leased: a receipt lookup is a read, never a dispatch.
    ///
    /// The run deadline is kept on the run, not as a job: first, for each
    /// run that has not ended whose deadline
    /// ([`crate::clock::due_unix`]) is due
    /// by `now` and has no timer job yet (of `request.run_id` only, when
    /// given), the store inserts its timer job (`Timer { at, wake:
    /// Deadline }`, `at` in whole seconds), once per run; it is leased in
    /// the same call when timers may be leased (counted in
    /// `request.limit`) and inserted unleased otherwise.
    ///
    /// # Errors
    /// [`StoreError::LeaseIncompatible`] when `request.epoch` is not the
    /// store's restore epoch (nothing is leased or inserted).
    async fn lease(&self, request: &LeaseRequest<'_>) -> Result<Vec<Job>, StoreError>;

    /// Marks a leased job `sending` (committed before the request leaves),
    /// only while the restore hold is not in place and the store's restore
    /// epoch is `epoch`. [`StoreError::LeaseLost`] otherwise, or unless
    /// `owner` holds its lease: the request must not leave.
    async fn mark_sending(&self, job_id: u64, owner: &str, epoch: u64) -> Result<(), StoreError>;

    /// [`RunStore::mark_sending`] for several jobs at once (group commit):
    /// each `(job_id, owner, epoch)` is fenced on its own and answered in
    /// the same order, one job's refusal never failing another's. The
    /// default marks them one after another; the PostgreSQL store marks
    /// them in one statement (one commit).
    async fn mark_sending_batch(
        &self,
        jobs: Vec<(u64, String, u64)>,
    ) -> Vec<Result<(), StoreError>> {
        let mut answers = Vec::with_capacity(jobs.len());
        for (job_id, owner, epoch) in jobs {
            answers.push(self.mark_sending(job_id, &owner, epoch).await);
        }
        answers
    }

    /// Takes over, for `owner` until `lease_until`, up to `limit` dispatch
    /// jobs whose prepared command is not safe to resend (mutations and
    /// evaluations: [`JobKind::Dispatch`] with `resend_safe == false`),
    /// whatever their state or lease: the restore hold's sweep
    /// (docs/operations.md "Restore from a backup"), which answers each as
    /// `uncertain` and commits with it as the completed job. Only called
    /// while the restore hold is in place.
    async fn claim_restored_commands(
        &self,
        owner: &str,
        lease_until: i64,
        limit: usize,
    ) -> Result<Vec<Job>, StoreError>;

    /// How many runs need review and how many live runs hold an `unknown`
    /// effect ([`ReviewSurvey`]).
    async fn review_survey(&self) -> Result<ReviewSurvey, StoreError>;

    /// Records [`Review::Attested`] on every run whose review is
    /// [`Review::Required`] (`release-restore-hold` after
    /// `complete-execution-recovery`). Returns how many.
    async fn attest_reviews(&self) -> Result<u64, StoreError>;

    /// The run a start identity already names, without admitting anything:
    /// [`Admitted::Existing`] when its request digest is `request_digest`,
    /// [`Admitted::Conflict`] when not, `None` when the identity is new.
    /// The engine asks it before it refuses a start, so a repeated start
    /// finds its run whatever refuses new ones (an upgrade, a hold,
    /// `--recovery-only`).
    async fn find_start(
        &self,
        start_identity: &str,
        request_digest: &str,
    ) -> Result<Option<Admitted>, StoreError>;

    /// Whether the active packages are still the ones this store was
    /// opened with (no `apply` changed them since); the doctor's
    /// `activationReady`. A store without activations answers `true`.
    async fn activation_current(&self) -> Result<bool, StoreError>;

    /// Gives a leased job back: ready again, due at `due_unix`, lease
    /// cleared (a host fault, a conflict to retry, a pending observation).
    /// `kind`, when given, replaces the job's kind.
    async fn release(
        &self,
        job_id: u64,
        owner: &str,
        due_unix: i64,
        kind: Option<JobKind>,
    ) -> Result<(), StoreError>;

    /// Deletes a leased job that no longer applies (a stale timer, an
    /// answer for a step that moved on).
    async fn discard(&self, job_id: u64, owner: &str) -> Result<(), StoreError>;

    /// Saves a run's new state and ledger, completes the leased job and adds
    /// new jobs, atomically, if the version still equals
    /// `expected_version` ([`StoreError::Conflict`] otherwise; nothing
    /// changes). When the new state has ended, every other job of the run is
    /// deleted too. Returns the new version.
    async fn commit(&self, commit: Commit) -> Result<u64, StoreError> {
        self.commit_leasing(commit, None).await.map(|c| c.version)
    }

    /// [`RunStore::commit`], inserting the new jobs due by `lease.now`
    /// leased to `lease.owner` (see [`LeaseOnInsert`]) and returning them.
    async fn commit_leasing(
        &self,
        commit: Commit,
        lease: Option<&LeaseOnInsert>,
    ) -> Result<Committed, StoreError>;

    /// [`RunStore::commit_leasing`] for the commits of several runs at once
    /// (group commit): each commit is fenced by its own version and lease
    /// and answered in the same order, exactly as `commit_leasing` would
    /// answer it; one commit's refusal ([`StoreError::Conflict`],
    /// [`StoreError::LeaseLost`], ...) never fails another. Two commits of
    /// one run in a batch are taken as if one came after the other (the
    /// second then sees a moved version). The default commits them one
    /// after another; the PostgreSQL store commits them in one statement.
    async fn commit_batch(
        &self,
        commits: Vec<(Commit, Option<LeaseOnInsert>)>,
    ) -> Vec<Result<Committed, StoreError>> {
        let mut answers = Vec::with_capacity(commits.len());
        for (commit, lease) in commits {
            answers.push(self.commit_leasing(commit, lease.as_ref()).await);
        }
        answers
    }

    /// Brings the next observation of review request `review_request_id`
    /// forward: every `Observe` job for it gets
    /// `due = min(due, max(now, last_observed + floor_seconds))`. Returns
    /// how many jobs it moved.
    async fn bring_forward(
        &self,
        review_request_id: &str,
        now: i64,
        floor_seconds: i64,
    ) -> Result<usize, StoreError>;

    /// The definition (Program) of `revision`, if this store keeps it. The
    /// PostgreSQL store keeps every revision ever applied, so a run finds
    /// its Program after its workflow moved on.
    async fn definition(&self, revision: &str) -> Result<Option<Definition>, StoreError>;

    /// Retention (seed 000 "Erase ended payloads"), one atomic step:
    /// erases the payloads (sealed input, state, output; a job's prepared
    /// command cannot remain, as an erasable run has no job) of at most
    /// `limit` (clamped to 1..=[`MAX_ERASE_LIMIT`]) runs that ended before
    /// `before_unix` and are [`erasable`], oldest ended first (then by
    /// admission order), stamping them erased at `now_unix`. Keeps the run
    /// row (id, workflow, revision, owner, state name, timestamps, start
    /// identity, request digest) and every spent start and command
    /// identity, so a repeated start key still finds its run. Returns how
    /// many were erased and whether more qualify. An erased run is never
    /// erased again.
    async fn erase_payloads(
        &self,
        before_unix: i64,
        limit: u32,
        now_unix: i64,
    ) -> Result<Erasure, StoreError>;

    /// Whether the store answers and can be written to (for `/ready`):
    /// `Unavailable` when it cannot be reached, `Refused` with the code
    /// `database.read-only` when it answers but cannot be written (its
    /// server is a standby or read-only). Callers wait both out.
    async fn ping(&self) -> Result<(), StoreError>;

    /// The earliest due instant (Unix seconds) of a job no lease holds
    /// or of a run deadline not yet a job ([`RunStore::lease`]), or `None`
    /// when there is none: an idle worker sleeps until then rather than
    /// polling. (A job whose lease ran out is found by the
    /// worker's safety poll, which leases it.)
    async fn next_due(&self) -> Result<Option<i64>, StoreError>;

    /// The deployment-wide holds, as every process on the store sees them.
    async fn holds(&self) -> Result<Holds, StoreError>;

    /// Sets the holds to `next` if they are still `expected`, in one
    /// statement; whether they were (a concurrent change makes it false).
    async fn swap_holds(&self, expected: &Holds, next: &Holds) -> Result<bool, StoreError>;

    /// The binding digests recorded by runs that have not ended: one entry
    /// per (connection, digest) with its run count, sorted by connection
    /// and digest (startup's `live-binding-conflict` check).
    async fn live_bindings(&self) -> Result<Vec<LiveBinding>, StoreError>;
}
