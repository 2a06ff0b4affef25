//! The one commit path of the engine: [`Committer::feed`] gives the VM an
//! event, turns its commands into jobs and commits the new state, the
//! completed job and the new jobs through the group commit; every role
//! (the worker's answers, an operator's action, the restore sweep) goes
//! through it. A version conflict re-reads the run and applies the event
//! anew; a store outage with an answer in hand is waited out.

use std::collections::BTreeMap;

use coordinator_ir::instant::Instant;
use coordinator_ports::store::{
    Commit, Committed, Job, JobKind, JobState, Review, RunRecord, StepLedger, StoreError,
};
use coordinator_vm::{Command, Event, RejectCode, Rejected, Resumed};

use super::Committer;

/// A change to a run's ledger, made in the commit of an event.
pub(crate) type LedgerUpdate<'a> = dyn Fn(&mut BTreeMap<String, StepLedger>) + Sync + 'a;

/// How [`Committer::feed`] commits an event.
pub(crate) struct Feeding<'a> {
    /// The leased job the event answers: completed (deleted) by the commit,
    /// discarded when the VM refuses the event; an outage is waited out
    /// (an answer in hand is never dropped).
    pub(crate) complete: Option<u64>,
    /// Changes the run's ledger in the same commit.
    pub(crate) ledger: Option<&'a LedgerUpdate<'a>>,
    /// The restore review to record ([`Review::after`]).
    pub(crate) review: Option<Review>,
    /// Commit nothing (answer [`Fed::Held`]) if the VM's commands would
    /// dispatch (the restore hold is in place).
    pub(crate) refuse_dispatch: bool,
    /// On a version conflict, read the run again and apply the event anew
    /// (a worker's answer is never dropped); `false` answers the conflict.
    pub(crate) retry_conflicts: bool,
    /// The VM's answer to the event on the run as given, when the caller
    /// computed it already: used on the first try (a conflict's retry
    /// resumes the run read again).
    pub(crate) resumed: Option<Resumed>,
    /// A dispatch the caller writes next, marked `sending` by this commit
    /// ([`MarkOnInsert`]).
    pub(crate) mark: Option<&'a MarkOnInsert>,
}

/// A dispatch job a lane writes as soon as the commit that makes it is
/// durable: the commit inserts it already marked `sending` and leased to
/// this process ([`LeaseOnInsert::mark_sending`]), so its request needs
/// no `sending` mark of its own, and puts it here instead of handing it
/// to another lane. Used by the lane that answers a read whose next
/// command is a call not safe to resend (docs/decisions.md, "The commit
/// of a read's answer marks the next command").
///
/// [`LeaseOnInsert::mark_sending`]: coordinator_ports::store::LeaseOnInsert::mark_sending
pub(crate) struct MarkOnInsert {
    /// The job's kind as the lane prepared it (its command and its
    /// idempotency key): the new job of the commit with this kind, due by
    /// the commit's now, is the one marked. When a conflict's retry makes
    /// other commands, none is marked.
    pub(crate) kind: JobKind,
    /// The job as inserted, marked and leased to this process; `None`
    /// until a commit marks it (an unleased insert marks nothing).
    pub(crate) marked: std::sync::Mutex<Option<Job>>,
}

impl MarkOnInsert {
    /// A mark of the job of `kind`, not yet made.
    pub(crate) fn new(kind: JobKind) -> Self {
        MarkOnInsert {
            kind,
            marked: std::sync::Mutex::new(None),
        }
    }

    /// The job the commit marked, if it did.
    pub(crate) fn marked(&self) -> Option<Job> {
        self.marked.lock().ok().and_then(|m| m.clone())
    }

    /// Takes the marked job (the one `sending`) out of a commit's `leased`
    /// jobs: it is the caller's to write, not a lane's.
    fn take_from(&self, leased: &mut Vec<Job>) {
        if let Some(i) = leased.iter().position(|j| j.state == JobState::Sending) {
            let job = leased.remove(i);
            if let Ok(mut slot) = self.marked.lock() {
                *slot = Some(job);
            }
        }
    }
}

impl Default for Feeding<'_> {
    fn default() -> Self {
        Feeding {
            complete: None,
            ledger: None,
            review: None,
            refuse_dispatch: false,
            retry_conflicts: true,
            resumed: None,
            mark: None,
        }
    }
}

impl Feeding<'_> {
    /// Completing leased job `job`, nothing else.
    pub(crate) fn completing(job: u64) -> Self {
        Feeding {
            complete: Some(job),
            ..Feeding::default()
        }
    }
}

/// Real-time backoff while the store is unavailable: 250 ms doubling to
/// 2 s; logs `store-unavailable` on the first wait and every 10th.
pub(crate) struct StoreWait {
    waits: u32,
}

impl StoreWait {
    /// No wait yet.
    pub(crate) fn new() -> Self {
        StoreWait { waits: 0 }
    }

    /// Waits the next backoff (run `run` is the one waiting; `error` the
    /// outage's).
    pub(crate) async fn wait(&mut self, run: &str, error: &str) {
        if self.waits.is_multiple_of(10) {
            tracing::error!(
                code = "store-unavailable",
                run,
                error,
                "store unavailable; waiting for it"
            );
        }
        let ms = 250u64 << self.waits.min(3);
        self.waits = self.waits.saturating_add(1);
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
}

/// What [`Committer::feed`] did.
pub(crate) enum Fed {
    /// The event was committed: the run after it.
    Applied(Box<RunRecord>),
    /// The VM refused the event; nothing was committed (a completed job
    /// was discarded).
    Rejected(Rejected),
    /// The event would dispatch while the restore hold is in place; nothing
    /// was committed.
    Held,
}

impl Committer {
    /// Feeds `event` to the run at `now` (the engine clock's reading for
    /// this step of work), commits the new state, the completed job and the
    /// new jobs; on a version conflict re-reads the run and applies the
    /// event again at the clock's new reading (an answer is never dropped
    /// because an operator acted meanwhile). See [`Feeding`] for the
    /// options.
    pub(crate) async fn feed(
        &self,
        mut run: RunRecord,
        event: &Event,
        mut now: Instant,
        feeding: Feeding<'_>,
    ) -> Result<Fed, StoreError> {
        let Feeding {
            complete,
            ledger: ledger_update,
            review,
            refuse_dispatch,
            retry_conflicts,
            resumed: mut computed,
            mark,
        } = feeding;
        let owner = self.leases.owner().to_owned();
        let Some(mut vm) = self.programs.load(&run.revision).await? else {
            return Err(StoreError::NotFound);
        };
        let answered = matches!(event, Event::CallAnswered { .. });
        let mut conflicts = 0;
        let mut outage = StoreWait::new();
        loop {
            let resumed = match computed.take() {
                Some(r) => r,
                None => match vm.resume(&run.state, event) {
                    Ok(r) => crate::jobs::take_due_waits(&vm, r, &now, false),
                    Err(rejected) => return self.refused(&run.id, complete, rejected).await,
                },
            };
            if refuse_dispatch
                && resumed
                    .commands
                    .iter()
                    .any(|c| matches!(c, Command::Dispatch { .. }))
            {
                return Ok(Fed::Held);
            }
            // An ended run keeps no job: the commands that led to its end
            // (a call reached on the way to the deadline) make none.
            let jobs = if resumed.status.is_terminal() {
                Vec::new()
            } else {
                self.jobs
                    .jobs_for(&run.start_identity, &resumed.commands, &now, answered)
            };
            let (ledger, traced) =
                self.ledger_after(&vm, &run, (&resumed, event, &now), ledger_update);
            let commit = Commit {
                run_id: run.id.clone(),
                expected_version: run.version,
                at: now,
                state: resumed.state.clone(),
                ledger: ledger.clone(),
                complete: complete.map(|j| (j, owner.clone())),
                jobs,
                review,
            };
            let scheduled_due_now = commit.jobs.iter().any(|j| j.due_at <= now);
            let lease = self.lease_marking(&now, mark, &commit.jobs);
            let failed = match self.commit(commit, lease.clone()).await {
                Ok(Committed {
                    version,
                    mut leased,
                }) => {
                    if scheduled_due_now && leased.is_empty() {
                        self.hand_off.wake_one();
                    }
                    if let Some(mark) = mark {
                        mark.take_from(&mut leased);
                    }
                    if resumed.status.is_terminal() {
                        tracing::info!(run = %run.id, state = resumed.status.as_str(), "run ended");
                        self.counters.run_ended(resumed.status.as_str());
                        self.run_ends.run_ended(&run.id);
                    }
                    run.state = resumed.state;
                    run.ledger = ledger;
                    run.version = version;
                    run.review = Review::after(run.review, review);
                    self.spans.trace_fed(traced, &run, event);
                    if let Some(lease) = lease.filter(|_| !leased.is_empty()) {
                        self.hand_off.hand_off(leased, &run, lease.lease_until);
                    }
                    return Ok(Fed::Applied(Box::new(run)));
                }
                Err(e) => e,
            };
            match failed {
                StoreError::Conflict if retry_conflicts && conflicts < 8 => {
                    conflicts += 1;
                    let was = std::mem::take(&mut run.revision);
                    run = self
                        .read_again(&run.id, complete.is_some(), &mut outage)
                        .await?;
                    self.reload_if_moved(&was, &run, &mut vm).await?;
                }
                // A worker holds an answer (a request may have left): it is
                // never dropped for an outage; the commit is tried again
                // until the store is back. An operator action fails fast.
                StoreError::Unavailable(e) if complete.is_some() => {
                    outage.wait(&run.id, &e).await;
                }
                e => return Err(e),
            }
            // Tried anew: a new step of work, at the clock's new reading.
            now = self.clock.now();
        }
    }

    /// The ledger of `run` after the VM's answer `resumed` to `event` at
    /// `now`: the admission and steps recorded, `update` applied, the
    /// steps entered traced (with what the trace of the event needs).
    fn ledger_after(
        &self,
        vm: &coordinator_vm::Vm,
        run: &RunRecord,
        (resumed, event, now): (&Resumed, &Event, &Instant),
        update: Option<&LedgerUpdate<'_>>,
    ) -> (BTreeMap<String, StepLedger>, Option<crate::trace::Before>) {
        let mut ledger = run.ledger.clone();
        crate::timeline::record_admission(vm, &run.state, &mut ledger);
        if let Some(update) = update {
            update(&mut ledger);
        }
        let traced = self.spans.trace_before(vm, run);
        self.spans
            .trace_entered(traced.as_ref(), &resumed.state.path, &mut ledger);
        crate::timeline::record_steps(vm, &run.state, &resumed.state, event, now, &mut ledger);
        (ledger, traced)
    }

    /// The lease on insert of a commit at `now` (none outside this
    /// process's restore epoch), marking the job of `jobs` that `mark`
    /// names, if any.
    fn lease_marking(
        &self,
        now: &Instant,
        mark: Option<&MarkOnInsert>,
        jobs: &[coordinator_ports::store::NewJob],
    ) -> Option<coordinator_ports::store::LeaseOnInsert> {
        let mut lease = self.leases.on_insert(now);
        if let (Some(lease), Some(mark)) = (lease.as_mut(), mark) {
            lease.mark_sending = jobs
                .iter()
                .position(|j| j.kind == mark.kind && j.due_at <= *now);
        }
        lease
    }

    /// The VM refused the event on run `run_id`: the leased job it answers
    /// (`complete`), if any, is discarded.
    async fn refused(
        &self,
        run_id: &str,
        complete: Option<u64>,
        rejected: Rejected,
    ) -> Result<Fed, StoreError> {
        if let Some(job) = complete {
            // A run that ended meanwhile (its deadline and a wake taken by
            // two lanes) is the common, harmless case.
            if rejected.code == RejectCode::RunEnded {
                tracing::info!(run = %run_id, "the run has ended meanwhile; job discarded");
            } else {
                tracing::warn!(run = %run_id, error = %rejected, "event refused by the VM; job discarded");
            }
            self.queue.discard(job, self.leases.owner()).await?;
        }
        Ok(Fed::Rejected(rejected))
    }

    /// Run `run_id` read again after a conflict; an outage is waited out
    /// when `wait_out` (a worker holding an answer), else answered.
    async fn read_again(
        &self,
        run_id: &str,
        wait_out: bool,
        outage: &mut StoreWait,
    ) -> Result<RunRecord, StoreError> {
        loop {
            match self.runs.get(run_id).await {
                Ok(Some(r)) => return Ok(r),
                Ok(None) => return Err(StoreError::NotFound),
                Err(StoreError::Unavailable(e)) if wait_out => outage.wait(run_id, &e).await,
                Err(e) => return Err(e),
            }
        }
    }

    /// `vm` made the Program of `run`'s revision when an operator moved
    /// the run from revision `was` (`vm`'s) to another one (`POST
    /// /v1/runs/{run}/move` won the race with this commit): an event is
    /// always fed to the Program of the revision the run is on.
    async fn reload_if_moved(
        &self,
        was: &str,
        run: &RunRecord,
        vm: &mut std::sync::Arc<coordinator_vm::Vm>,
    ) -> Result<(), StoreError> {
        if run.revision != was {
            *vm = self
                .programs
                .load(&run.revision)
                .await?
                .ok_or(StoreError::NotFound)?;
        }
        Ok(())
    }
}
