//! The run store's narrow traits, one by what it serves (STYLE.md
//! "host/": a small port): admission ([`RunAdmission`]), the worker's job
//! queue ([`JobQueue`]), operators' reads ([`RunReads`]), the
//! deployment-wide holds and reviews ([`HoldsAndReviews`]), definitions
//! ([`Definitions`]) and upkeep ([`Maintenance`]).
//!
//! Every method is atomic. Instants come from the engine's clock, never
//! from the store's, so a manual clock drives leases and due times too; a
//! store keeps their whole seconds (truncated), and compares those.
//! The narrow traits are what the engine's roles take: each role's
//! constructor lists the ones it may touch (ARCHITECTURE.md).
//! [`RunStore`] is all of them: what a store implements, and what the
//! engine holds only where it is assembled.
//! Where a batch form exists, only it is required: the single forms are
//! batches of one.

use async_trait::async_trait;
use coordinator_ir::instant::Instant;
use coordinator_ir::Definition;
use coordinator_runtime::clock::{Clock, ClockSample};

use super::{
    moves::RunMoves, Admitted, Commit, Committed, Erasure, Holds, Job, JobKind, LeaseOnInsert,
    LeaseRequest, LiveBinding, NewRun, ReviewSurvey, RunFilter, RunPage, RunRecord, StoreError,
};

/// The one answer of a batch of one; a store that answered none broke the
/// batch contract, taken as unavailable (retried, never a panic).
fn only_answer<T>(mut answers: Vec<Result<T, StoreError>>) -> Result<T, StoreError> {
    match (answers.pop(), answers.is_empty()) {
        (Some(answer), true) => answer,
        _ => Err(StoreError::Unavailable(
            "the store did not answer a batch of one with one answer".into(),
        )),
    }
}

/// Admission: starts become runs (the producers' path).
#[async_trait]
pub trait RunAdmission: Send + Sync {
    /// Admits several starts at once (group commit), each answered in the
    /// same order exactly as [`RunAdmission::admit_leasing`] describes, one
    /// start's refusal never failing another; of two starts of one identity
    /// in a batch, one is admitted and the other answered as a repeat. The
    /// in-memory store admits them one after another; the PostgreSQL store
    /// in one statement.
    async fn admit_batch(
        &self,
        runs: Vec<(NewRun, Option<LeaseOnInsert>)>,
    ) -> Vec<Result<(Admitted, Vec<Job>), StoreError>>;

    /// Admits a run and its first jobs in one step (see
    /// [`RunAdmission::admit`]), inserting the first jobs due by
    /// `lease.now` leased to `lease.owner` (see [`LeaseOnInsert`]) and
    /// returning them beside a [`Admitted::Created`] (none otherwise). A
    /// batch of one.
    async fn admit_leasing(
        &self,
        run: NewRun,
        lease: Option<&LeaseOnInsert>,
    ) -> Result<(Admitted, Vec<Job>), StoreError> {
        only_answer(self.admit_batch(vec![(run, lease.cloned())]).await)
    }

    /// Admits a run and its first jobs in one step, unless its start
    /// identity exists: then [`Admitted::Existing`] when the request digest
    /// matches, else [`Admitted::Conflict`] (SPEC §8 `idempotency.key-reused`).
    async fn admit(&self, run: NewRun) -> Result<Admitted, StoreError> {
        self.admit_leasing(run, None)
            .await
            .map(|(admitted, _)| admitted)
    }

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
}

/// The job queue: what the worker leases, marks, commits and gives back.
#[async_trait]
pub trait JobQueue: Send + Sync {
    /// Leases up to `request.limit` jobs with `due_at <= now` that have
    /// no lease or an expired one (`expires_at <= now`), oldest due
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

    /// The earliest due instant (a whole second) of a job no lease holds
    /// or of a run deadline not yet a job ([`JobQueue::lease`]), or `None`
    /// when there is none: an idle worker sleeps until then rather than
    /// polling. (A job whose lease ran out is found by the
    /// worker's safety poll, which leases it.)
    async fn next_due(&self) -> Result<Option<Instant>, StoreError>;

    /// Marks leased jobs `sending` (committed before their requests leave),
    /// each `(job_id, owner, epoch)` fenced on its own and answered in the
    /// same order, one job's refusal never failing another's: a job is
    /// marked only while the restore hold is not in place, the store's
    /// restore epoch is `epoch` and `owner` holds its lease;
    /// [`StoreError::LeaseLost`] otherwise (the request must not leave).
    /// The PostgreSQL store marks them in one statement (one commit).
    async fn mark_sending_batch(
        &self,
        jobs: Vec<(u64, String, u64)>,
    ) -> Vec<Result<(), StoreError>>;

    /// [`JobQueue::mark_sending_batch`] of one job.
    async fn mark_sending(&self, job_id: u64, owner: &str, epoch: u64) -> Result<(), StoreError> {
        only_answer(
            self.mark_sending_batch(vec![(job_id, owner.to_owned(), epoch)])
                .await,
        )
    }

    /// Commits several runs at once (group commit). Each commit saves a
    /// run's new state and ledger, completes the leased job and adds new
    /// jobs, atomically, if the version still equals `expected_version`
    /// ([`StoreError::Conflict`] otherwise; nothing changes); when the new
    /// state has ended, every other job of the run is deleted too; the new
    /// jobs due by `lease.now` are inserted leased to `lease.owner` (see
    /// [`LeaseOnInsert`]) and returned. Each commit is fenced by its own
    /// version and lease and answered in the same order; one commit's
    /// refusal ([`StoreError::Conflict`], [`StoreError::LeaseLost`], ...)
    /// never fails another. Two commits of one run in a batch are taken as
    /// if one came after the other (the second then sees a moved version).
    /// The PostgreSQL store commits them in one statement.
    async fn commit_batch(
        &self,
        commits: Vec<(Commit, Option<LeaseOnInsert>)>,
    ) -> Vec<Result<Committed, StoreError>>;

    /// [`JobQueue::commit_batch`] of one commit.
    async fn commit_leasing(
        &self,
        commit: Commit,
        lease: Option<&LeaseOnInsert>,
    ) -> Result<Committed, StoreError> {
        only_answer(self.commit_batch(vec![(commit, lease.cloned())]).await)
    }

    /// [`JobQueue::commit_leasing`] without leasing; returns the new
    /// version.
    async fn commit(&self, commit: Commit) -> Result<u64, StoreError> {
        self.commit_leasing(commit, None).await.map(|c| c.version)
    }

    /// Gives a leased job back: ready again, due at `due`, lease cleared (a
    /// host fault, a conflict to retry, a pending observation). `kind`,
    /// when given, replaces the job's kind.
    async fn release(
        &self,
        job_id: u64,
        owner: &str,
        due: Instant,
        kind: Option<JobKind>,
    ) -> Result<(), StoreError>;

    /// Deletes a leased job that no longer applies (a stale timer, an
    /// answer for a step that moved on).
    async fn discard(&self, job_id: u64, owner: &str) -> Result<(), StoreError>;

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
        lease_until: Instant,
        limit: usize,
    ) -> Result<Vec<Job>, StoreError>;

    /// Brings the next observation of review request `review_request_id`
    /// forward: every `Observe` job for it gets
    /// `due = min(due, max(now, last_observed + floor_seconds))`. Returns
    /// how many jobs it moved.
    async fn bring_forward(
        &self,
        review_request_id: &str,
        now: Instant,
        floor_seconds: i64,
    ) -> Result<usize, StoreError>;

    /// Makes run `run_id`'s dispatch jobs that wait (ready, unleased, due
    /// after `now`) due at `now`: a cancel reaches a call its connection's
    /// flow control holds back at once. Returns how many it moved.
    async fn bring_run_forward(&self, run_id: &str, now: Instant) -> Result<usize, StoreError>;
}

/// What operators, the console and startup read about runs.
#[async_trait]
pub trait RunReads: Send + Sync {
    /// The run with this id.
    async fn get(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError>;

    /// Runs matching `filter`, newest first (by `sequence`), at most
    /// `filter.limit` (clamped to 1..=100), continuing after `cursor`.
    async fn list(&self, filter: &RunFilter) -> Result<RunPage, StoreError>;

    /// The run's jobs (for inspection), in id order.
    async fn jobs(&self, run_id: &str) -> Result<Vec<Job>, StoreError>;

    /// The binding digests recorded by runs that have not ended: one entry
    /// per (connection, digest) with its run count, sorted by connection
    /// and digest (startup's `live-binding-conflict` check).
    async fn live_bindings(&self) -> Result<Vec<LiveBinding>, StoreError>;
}

/// The deployment-wide holds (seed 000 "Restore from a backup") and the
/// reviews they wait for.
#[async_trait]
pub trait HoldsAndReviews: Send + Sync {
    /// The deployment-wide holds, as every process on the store sees them.
    async fn holds(&self) -> Result<Holds, StoreError>;

    /// Sets the holds to `next` if they are still `expected`, in one
    /// statement; whether they were (a concurrent change makes it false).
    async fn swap_holds(&self, expected: &Holds, next: &Holds) -> Result<bool, StoreError>;

    /// How many runs need review and how many live runs hold an `unknown`
    /// effect ([`ReviewSurvey`]).
    async fn review_survey(&self) -> Result<ReviewSurvey, StoreError>;

    /// Records [`Review::Attested`](super::Review::Attested) on every run whose review is
    /// [`Review::Required`](super::Review::Required) (`release-restore-hold` after
    /// `complete-execution-recovery`). Returns how many.
    async fn attest_reviews(&self) -> Result<u64, StoreError>;
}

/// The workflow definitions a run is driven by, and whether the active
/// ones are still those the store was opened with.
#[async_trait]
pub trait Definitions: Send + Sync {
    /// The definition (Program) of `revision`, if this store keeps it. The
    /// PostgreSQL store keeps every revision ever applied, so a run finds
    /// its Program after its workflow moved on.
    async fn definition(&self, revision: &str) -> Result<Option<Definition>, StoreError>;

    /// Whether the active packages are still the ones this store was
    /// opened with (no `apply` changed them since); the doctor's
    /// `activationReady`. A store without activations answers `true`.
    async fn activation_current(&self) -> Result<bool, StoreError>;
}

/// Upkeep: retention and the readiness probe.
#[async_trait]
pub trait Maintenance: Send + Sync {
    /// Retention (seed 000 "Erase ended payloads"), one atomic step:
    /// erases the payloads (sealed input, state, output; a job's prepared
    /// command cannot remain, as an erasable run has no job) of at most
    /// `limit` (clamped to 1..=[`MAX_ERASE_LIMIT`](super::MAX_ERASE_LIMIT)) runs that ended before
    /// `before` and are [`erasable`](super::erasable), oldest ended first (then by
    /// admission order), stamping them erased at `now`. Keeps the run
    /// row (id, workflow, revision, owner, state name, timestamps, start
    /// identity, request digest) and every spent start and command
    /// identity, so a repeated start key still finds its run. Returns how
    /// many were erased and whether more qualify. An erased run is never
    /// erased again.
    async fn erase_payloads(
        &self,
        before: Instant,
        limit: u32,
        now: Instant,
    ) -> Result<Erasure, StoreError>;

    /// Whether the store answers and can be written to (for `/ready`):
    /// `Unavailable` when it cannot be reached, `Refused` with the code
    /// `database.read-only` when it answers but cannot be written (its
    /// server is a standby or read-only). Callers wait both out.
    async fn ping(&self) -> Result<(), StoreError>;

    /// `count` readings of the database server's own clock (PostgreSQL's
    /// `clock_timestamp()`), one after another on one connection, each
    /// with `local`'s reading and the monotonic instant when it was sent
    /// and its round trip, for the process's clock offset
    /// ([`ClockOffset::best_of`](coordinator_runtime::clock::ClockOffset::best_of)).
    /// Empty for a store without a clock of its own (the in-memory store).
    ///
    /// # Errors
    /// `Unavailable` when the database cannot be reached.
    async fn sample_database_clock(
        &self,
        local: &dyn Clock,
        count: usize,
    ) -> Result<Vec<ClockSample>, StoreError>;
}

/// The whole run store: every narrow trait. A store implements the narrow
/// traits; this is implemented for any type that has them all.
pub trait RunStore:
    RunAdmission + JobQueue + RunReads + HoldsAndReviews + Definitions + Maintenance + RunMoves
{
}

impl<T> RunStore for T where
    T: RunAdmission
        + JobQueue
        + RunReads
        + HoldsAndReviews
        + Definitions
        + Maintenance
        + RunMoves
        + ?Sized
{
}
