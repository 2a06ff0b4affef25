//! The run store port: its data (this file) and its narrow traits
//! (`ports.rs`: [`RunAdmission`], [`JobQueue`], [`RunReads`],
//! [`HoldsAndReviews`], [`Definitions`], [`Maintenance`]; [`RunStore`] is
//! all of them, what a store implements).
//!
//! The port is the whole contract between the engine and durable storage:
//! a PostgreSQL implementation (the only production store, DESIGN.md "The
//! service") and the in-memory one ([`crate::MemoryRunStore`]) implement
//! exactly these methods. Each method is one atomic
//! step (one transaction). The port carries plain data; a PostgreSQL store
//! seals `RunRecord::state` and every job's prepared command with
//! [`coordinator_runtime::keys::StateKeyring`] (binding: database id, run id, purpose
//! `state` / `command`, step) before writing, and opens them on reading.
//!
//! Jobs are the only way work and waits exist: a wait is a job row with a
//! due time, never a sleeping task (DESIGN.md "The service").

use std::collections::BTreeMap;

use coordinator_ir::instant::Instant;
use coordinator_vm::{DispatchCommand, RunState, RunStatus, WakeKind};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use coordinator_runtime::binding::LiveBinding;

mod moves;
mod ports;

pub use moves::{moves_of, MoveRecord, RunMove, RunMoves};
pub use ports::{
    Definitions, HoldsAndReviews, JobQueue, Maintenance, RunAdmission, RunReads, RunStore,
};

/// The deployment-wide holds of seed 000 "Restore from a backup", as every
/// process on the store sees them (the PostgreSQL store keeps them in the
/// deployment row). Changed only by [`HoldsAndReviews::swap_holds`].
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

impl Holds {
    /// The two holds by their names (`restore`, `admission`), each with
    /// whether it is in place: the `coordinator_hold` gauge's `hold` label
    /// and the holds `/ready` names.
    pub fn named(&self) -> [(&'static str, bool); 2] {
        [("restore", self.restore), ("admission", self.admission)]
    }
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
    /// The step's next call waits for its connection's flow control
    /// (`limits`, a product's `Retry-After`); `None` once it went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<crate::waiting::CallWait>,
    /// When the run entered the step, the engine clock's reading (to the
    /// nanosecond; stored as Unix nanoseconds, `entered_unix_nanos`); kept
    /// only for a run with a trace context (the start of the step's span,
    /// exported when the step ends; docs/operations.md "Traces").
    #[serde(
        rename = "entered_unix_nanos",
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::clock::unix_seconds::nanos_option"
    )]
    pub entered_at: Option<Instant>,
    /// When the run reached the step, a whole second of the engine's clock
    /// (the commit that visited it; stored as Unix seconds,
    /// `started_unix`); `None` in a ledger written before step times were
    /// kept.
    #[serde(
        rename = "started_unix",
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::clock::unix_seconds::option"
    )]
    pub started_at: Option<Instant>,
    /// When the run left the step (or ended there), a whole second of the
    /// engine's clock (stored as `ended_unix`); `None` while the run is at
    /// it.
    #[serde(
        rename = "ended_unix",
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::clock::unix_seconds::option"
    )]
    pub ended_at: Option<Instant>,
    /// Wait steps: when the wait was due (a wait-until's instant, a
    /// wait-for's timeout), its whole second (stored as `due_unix`).
    #[serde(
        rename = "due_unix",
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::clock::unix_seconds::option"
    )]
    pub due_at: Option<Instant>,
    /// Wait steps: how the wait ended ([`WaitEnd`]); `None` while it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_end: Option<WaitEnd>,
    /// Call steps: the latest answers (dispatches and receipt lookups),
    /// oldest first, at most [`ANSWERS_KEPT`] (`attempts` counts them all).
    /// Kinds and codes only: never a body.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answers: Vec<AnswerRecord>,
    /// Wait steps: the moves to another revision made while the run
    /// waited here ([`RunMoves::commit_move`]), oldest first; on the entry
    /// of the step the run left (A's name).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moves: Vec<MoveRecord>,
}

/// How many answers a [`StepLedger`] keeps per step (the latest).
pub const ANSWERS_KEPT: usize = 8;

/// How a wait step's wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WaitEnd {
    /// A wait-until's instant came.
    Woke,
    /// A wait-for's completion was observed.
    Completed,
    /// A wait-for's timeout came first.
    TimedOut,
    /// A cancel request ended it.
    Cancelled,
    /// The run's deadline ended it.
    Deadline,
}

impl WaitEnd {
    /// `woke`, `completed`, `timed-out`, `cancelled` or `deadline` (the
    /// API's `waitEnded`).
    pub fn as_str(self) -> &'static str {
        match self {
            WaitEnd::Woke => "woke",
            WaitEnd::Completed => "completed",
            WaitEnd::TimedOut => "timed-out",
            WaitEnd::Cancelled => "cancelled",
            WaitEnd::Deadline => "deadline",
        }
    }
}

/// One answer a call step received, as its [`StepLedger`] keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnswerRecord {
    /// When it was answered, a whole second of the engine's clock (stored
    /// as Unix seconds, `at_unix`).
    #[serde(rename = "at_unix", with = "crate::clock::unix_seconds")]
    pub at: Instant,
    /// The dispatch attempt it answered (from 1); `0` for a receipt lookup.
    pub attempt: u32,
    /// The answer's kind (`success`, `retryable`, `uncertain`, ...: the
    /// VM's `Answer::kind`).
    pub kind: String,
    /// The answer's code (HTTP status, product or refusal code), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

impl StepLedger {
    /// Keeps `answer`, dropping the oldest beyond [`ANSWERS_KEPT`].
    pub fn keep_answer(&mut self, answer: AnswerRecord) {
        self.answers.push(answer);
        if self.answers.len() > ANSWERS_KEPT {
            let extra = self.answers.len() - ANSWERS_KEPT;
            self.answers.drain(..extra);
        }
    }
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
    /// Retention erased the run's payloads ([`Maintenance::erase_payloads`]):
    /// `state` is then [`erased_state`]'s skeleton (state name and
    /// timestamps only), and the run can no longer be retried or reconciled
    /// (seed 000 `run.payload-erased`).
    #[serde(default)]
    pub payload_erased: bool,
    /// The restore review of the run, if the restore hold ever held one of
    /// its prepared commands back ([`Review`]).
    #[serde(default)]
    pub review: Option<Review>,
    /// When the run ended, the whole second of the engine's clock at the
    /// commit that ended it ([`Commit::at`]; at admission, its admission
    /// instant); `None` while it has not ended. What the API shows as
    /// `endedAt` and what retention compares.
    #[serde(
        rename = "ended_unix",
        default,
        with = "crate::clock::unix_seconds::option"
    )]
    pub ended_at: Option<Instant>,
    /// The run's trace context: the W3C `traceparent` of its admission
    /// span, which every later span of the run descends from, whichever
    /// process exports it; `None` when traces were off at admission
    /// (docs/operations.md "Traces").
    #[serde(default)]
    pub trace_parent: Option<crate::trace::TraceParent>,
}

impl RunRecord {
    /// The record of `run` as just admitted with `sequence`: version 1,
    /// an empty ledger, nothing erased or reviewed (every store's
    /// [`Admitted::Created`]).
    pub fn admitted(run: NewRun, sequence: u64) -> RunRecord {
        let ended_at = run
            .state
            .status
            .is_terminal()
            .then(|| crate::clock::whole_second(&run.state.admitted_at));
        RunRecord {
            ended_at,
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
            trace_parent: run.trace_parent,
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
    /// Send one attempt of a call step: the VM's prepared command
    /// ([`DispatchCommand`], carried as the VM made it), persisted before
    /// it is sent, with the step's idempotency key. Serialised flat (the
    /// command's members and `idempotencyKey` side by side), as dispatch
    /// jobs were always stored.
    #[serde(rename_all = "camelCase")]
    Dispatch {
        /// What to send, where, which attempt (the frozen operation input
        /// is sealed at rest).
        #[serde(flatten)]
        dispatch: DispatchCommand,
        /// SPEC §5's key, for operations that carry one.
        idempotency_key: Option<String>,
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
        /// The instant (serialized as its RFC 3339 text).
        at: Instant,
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
        /// The last observation, if any (the floor counts from it when a
        /// completion event brings the read forward; stored as Unix
        /// seconds, `lastObservedUnix`).
        #[serde(
            rename = "lastObservedUnix",
            with = "crate::clock::unix_seconds::option"
        )]
        last_observed_at: Option<Instant>,
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
    /// When it runs out (a whole second as stored); after it, another
    /// worker may lease the job.
    #[serde(rename = "expires_unix", with = "crate::clock::unix_seconds")]
    pub expires_at: Instant,
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
    /// When it is due (a whole second as stored); the job is not leased
    /// before.
    #[serde(rename = "due_unix", with = "crate::clock::unix_seconds")]
    pub due_at: Instant,
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
    /// When it is due; a store keeps its whole second (truncated).
    pub due_at: Instant,
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
    /// See [`RunRecord::trace_parent`].
    pub trace_parent: Option<crate::trace::TraceParent>,
}

/// The result of [`RunAdmission::admit`].
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
    /// When the engine commits, its clock's reading (a store keeps its
    /// whole second): a commit that ends the run records it as the run's
    /// end ([`RunRecord::ended_at`]; the VM's `state.ended_at` is its
    /// logical time, the instant of the event that ended it, which may be
    /// long before).
    pub at: Instant,
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
/// are inserted ([`JobQueue::commit_leasing`]), so that it carries them out
/// at once without leasing them again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseOnInsert {
    /// The lease owner (this process's worker id).
    pub owner: String,
    /// Now (engine clock): only jobs due by then are leased.
    pub now: Instant,
    /// When the leases run out.
    pub lease_until: Instant,
    /// This process's restore epoch: nothing is leased unless the
    /// deployment is under it and no restore hold is in place (the jobs are
    /// then inserted unleased, for whoever may lease them).
    pub epoch: u64,
    /// The index, in the commit's `jobs`, of a dispatch job the committing
    /// lane writes next: inserted already marked `sending` when it is
    /// leased on insert (the commit is its `sending` mark; unleased it is
    /// inserted `ready`), and returned in [`Committed::leased`] with state
    /// [`JobState::Sending`]. `None` for every other commit
    /// (docs/decisions.md, "The commit of a read's answer marks the next
    /// command").
    pub mark_sending: Option<usize>,
}

/// What [`JobQueue::commit_leasing`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct Committed {
    /// The run's new version.
    pub version: u64,
    /// The new jobs that were inserted leased to the committing process
    /// ([`LeaseOnInsert`]), in insertion order.
    pub leased: Vec<Job>,
}

/// What a worker asks [`JobQueue::lease`] for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseRequest<'a> {
    /// The lease owner (this process's worker id).
    pub owner: &'a str,
    /// Now (engine clock): jobs due at or before it, with no lease or an
    /// expired one.
    pub now: Instant,
    /// When the lease expires.
    pub lease_until: Instant,
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

/// What one [`Maintenance::erase_payloads`] call did.
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
/// (whole seconds, as a store keeps them), nothing else. No input, path,
/// step outputs, effects, outcome, output or failure: those were payload.
/// Both stores build it the same way, so an erased run reads the same
/// from either.
pub fn erased_state(
    status: RunStatus,
    admitted: &Instant,
    deadline: &Instant,
    now: &Instant,
    ended: Option<&Instant>,
) -> RunState {
    let whole = crate::clock::whole_second;
    let (admitted, now) = (whole(admitted), whole(now));
    let mut state = RunState::new(status, Value::Null, admitted, whole(deadline), now);
    state.elapsed_seconds = u64::try_from(admitted.seconds_until(&now)).unwrap_or(0);
    state.ended_at = ended.map(whole);
    state
}

/// Largest `limit` of one [`Maintenance::erase_payloads`] call (seed 000: at
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
    /// Only runs admitted before this instant (exclusive; a store compares
    /// whole seconds).
    pub admitted_before: Option<Instant>,
    /// Only runs whose current step (the last they visited,
    /// [`current_step`]) is this one.
    pub step: Option<String>,
    /// Only runs whose current step's effect is this one (a mutation or
    /// evaluation call that is `accepted` or `unknown`).
    pub effect: Option<coordinator_vm::EffectState>,
    /// Page size, 1..=100 (clamped). With `step` or `effect`, a page holds
    /// the runs of the `limit` runs it scanned that pass them, so it may
    /// be short, or empty, while `next_cursor` is set.
    pub limit: u32,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

impl RunFilter {
    /// Whether `run` passes `step` and `effect`, the filters a store
    /// decides on the opened state rather than on its columns (both stores
    /// apply them to the page they scanned, so a page may be short). An
    /// erased run has no path, so it passes neither.
    pub fn passes_current_step(&self, run: &RunRecord) -> bool {
        let step = current_step(&run.state);
        if self.step.as_ref().is_some_and(|s| step != Some(s.as_str())) {
            return false;
        }
        let effect = step.and_then(|s| run.state.effects.get(s));
        self.effect.is_none_or(|e| effect == Some(&e))
    }
}

/// The step a run is at: the last it visited (`None` before its first
/// step, and for an erased run, whose path retention erased).
pub fn current_step(state: &RunState) -> Option<&str> {
    state.path.last().map(String::as_str)
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
