//! [`JobRunner`]: carries out one leased job (a dispatch, a receipt
//! lookup, a timer, an observation), feeding the VM the answer and
//! committing the result through the one commit path
//! ([`Committer::feed`]). Store outages with an answer in hand are waited
//! out; nothing not yet sent outlives its lease. The worker's lanes and an
//! operator's reconcile (a receipt lookup carried out at once) use it.

use std::collections::BTreeMap;

use coordinator_ir::instant::Instant;
use coordinator_ports::adapter::{
    AdapterError, DispatchRequest, MarkSending, NoMark, Observation, Outcome, ProductAdapter,
    ReceiptRequest,
};
use coordinator_ports::clock::{due_at, seconds_after, whole_second};
use coordinator_ports::flow::{CallWait, FlowLimit};
use coordinator_ports::store::{
    Commit, Job, JobKind, JobQueue, JobState, NewJob, RunReads, RunRecord, StepLedger, StoreError,
};
use coordinator_vm::{Answer, DispatchCommand, Event, Expected, Vm};

use std::sync::Arc;

use crate::committer::{Committer, Feeding, StoreWait};
use crate::config::{CANCELLED_UNSENT, INTERRUPTED, MAX_BACKOFF_SECONDS};
use crate::flow_gate::{FlowGate, Turn};
use crate::health::Health;
use crate::parts::Parts;

mod chain;

/// The store ports and the product adapter the worker may touch: nothing
/// else of the store.
pub(crate) struct WorkerPorts {
    /// Leases, releases, discards jobs; tells the next due time.
    pub(crate) queue: Arc<dyn JobQueue>,
    /// Reads the run of a job.
    pub(crate) runs: Arc<dyn RunReads>,
    /// Sends calls, looks receipts up, observes completions.
    pub(crate) adapter: Arc<dyn ProductAdapter>,
}

/// Removes a job from the in-flight set when its lane is done.
struct InFlight<'a> {
    set: &'a std::sync::Mutex<std::collections::BTreeSet<u64>>,
    job: u64,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Ok(mut set) = self.set.lock() {
            set.remove(&self.job);
        }
    }
}

/// Carries out leased jobs. Its own state is the set of jobs this
/// process's lanes are carrying out. Held in an `Arc` by the worker and
/// by operator actions.
pub(crate) struct JobRunner {
    /// Releases and discards jobs.
    queue: Arc<dyn JobQueue>,
    /// Reads the run of a job.
    runs: Arc<dyn RunReads>,
    /// Sends calls, looks receipts up, observes completions.
    adapter: Arc<dyn ProductAdapter>,
    /// Flow control of the calls to each connection.
    flow: Arc<FlowGate>,
    parts: Parts,
    /// Pings the store while it is away.
    health: Arc<Health>,
    /// The longest a job takes once started (`EngineConfig::request_budget_seconds`).
    request_budget_seconds: i64,
    /// Jobs a worker lane of this process is carrying out. The lanes share
    /// one lease owner, so a job whose lease ran out while its lane waited
    /// for the store (holding a product answer) can be leased again by
    /// another lane; that lane must leave it to the holder instead of
    /// taking it for an interrupted attempt.
    in_flight: std::sync::Mutex<std::collections::BTreeSet<u64>>,
}

impl JobRunner {
    /// The runner over the worker's ports, under `flow`, waiting an outage
    /// out through `health`, starting a job only while
    /// `request_budget_seconds` of its lease are left.
    pub(crate) fn new(
        ports: WorkerPorts,
        flow: Arc<FlowGate>,
        parts: Parts,
        health: Arc<Health>,
        request_budget_seconds: i64,
    ) -> Self {
        let WorkerPorts {
            queue,
            runs,
            adapter,
        } = ports;
        JobRunner {
            queue,
            runs,
            adapter,
            flow,
            parts,
            health,
            request_budget_seconds,
            in_flight: std::sync::Mutex::new(std::collections::BTreeSet::new()),
        }
    }

    /// Marks job `id` in flight in this process; `None` when a lane
    /// already carries it out.
    fn hold(&self, id: u64) -> Option<InFlight<'_>> {
        let inserted = self.in_flight.lock().ok()?.insert(id);
        // (The guard is gone before an `InFlight` exists: its drop locks.)
        inserted.then(|| InFlight {
            set: &self.in_flight,
            job: id,
        })
    }

    /// Carries out one leased job (of `carried`, the run as the commit
    /// that made the job left it, or of its run read from the store), unless
    /// too little of its lease (until `lease_until`) is left to start it
    /// safely (then it is given back). A store outage before the request
    /// left is waited out while the lease holds; other failures are logged
    /// and the lease left to expire. Reads the engine clock once per try.
    pub(crate) async fn carry_out(
        &self,
        job: Job,
        lease_until: Instant,
        carried: Option<RunRecord>,
    ) {
        let id = job.id;
        // Another lane of this process holds the job (its lease ran out
        // while it waited for the store): leave it to that lane. The new
        // lease just taken only extends the holder's.
        let Some(_held) = self.hold(id) else {
            return;
        };
        let owner = self.parts.committer.leases().owner();
        let now = self.parts.clock.now();
        if seconds_after(&whole_second(&now), self.request_budget_seconds) > lease_until {
            let _ = self.queue.release(id, owner, job.due_at, None).await;
            return;
        }
        let fence = &self.parts.fence;
        let mut result = self
            .run_job(job.clone(), carried, now)
            .await
            .map_err(|e| fence.count_outage(e));
        // The store went away before the job's request left (an answer in
        // hand is held by `feed`): wait for it, then carry the job out
        // again while the lease holds.
        while let Err(StoreError::Unavailable(e)) = &result {
            tracing::error!(code = "store-unavailable", job = id, error = %e, "store unavailable; the job waits for it");
            if !self.wait_for_store(lease_until).await {
                break;
            }
            result = self
                .run_job(job.clone(), None, self.parts.clock.now())
                .await
                .map_err(|e| fence.count_outage(e));
        }
        match result {
            Ok(()) => {}
            // The job is no longer this lane's: it was deleted (its run
            // ended or was cancelled meanwhile) or, its lease having run
            // out, another lane or process holds it. Nothing waits here.
            Err(e @ StoreError::LeaseLost) => {
                tracing::warn!(job = id, error = %e, "job not completed: it was removed or taken over meanwhile");
            }
            Err(e) => {
                tracing::warn!(job = id, error = %e, "job not completed; it is taken again once its lease expires");
            }
        }
    }

    /// Waits (real time, polling `ping`) until the store answers again, or
    /// until `deadline` (engine clock) passes. Returns whether it answers.
    async fn wait_for_store(&self, deadline: Instant) -> bool {
        let mut outage = StoreWait::new();
        loop {
            match self.health.ping().await {
                Ok(()) => return true,
                Err(e) => {
                    if self.parts.clock.now() >= deadline {
                        return false;
                    }
                    outage.wait("-", &e.to_string()).await;
                }
            }
        }
    }

    /// The run of a leased job (`carried`, or read) and its Program, or
    /// `None` once the job is dealt with: discarded when its run ended or
    /// is gone, held (released for later) when no Program serves its
    /// revision.
    async fn run_and_program(
        &self,
        job: &Job,
        carried: Option<RunRecord>,
        now: &Instant,
    ) -> Result<Option<(RunRecord, Arc<Vm>)>, StoreError> {
        let owner = self.parts.committer.leases().owner();
        let run = match carried {
            Some(run) => run,
            None => match self.runs.get(&job.run_id).await? {
                Some(run) => run,
                None => return self.queue.discard(job.id, owner).await.map(|()| None),
            },
        };
        if run.status().is_terminal() {
            return self.queue.discard(job.id, owner).await.map(|()| None);
        }
        let Some(vm) = self.parts.committer.programs().load(&run.revision).await? else {
            tracing::error!(run = %run.id, revision = %run.revision, "no Program for the run's revision; job held");
            let later = seconds_after(now, MAX_BACKOFF_SECONDS);
            return self
                .queue
                .release(job.id, owner, later, None)
                .await
                .map(|()| None);
        };
        Ok(Some((run, vm)))
    }

    /// Carries out one leased job of `carried` (or of its run, read): a
    /// job of an ended or missing run is discarded, one of a run whose
    /// Program is missing is held ([`JobRunner::run_and_program`]), one found
    /// after the run's deadline expires the run instead; otherwise each
    /// kind has its function. `now` is the engine clock's reading for
    /// this job.
    async fn run_job(
        &self,
        job: Job,
        carried: Option<RunRecord>,
        now: Instant,
    ) -> Result<(), StoreError> {
        let Some((run, vm)) = self.run_and_program(&job, carried, &now).await? else {
            return Ok(());
        };
        let owner = self.parts.committer.leases().owner().to_owned();
        // The run's deadline comes first. A job found once the deadline has
        // passed (after an outage or a restart: a wake, a timeout, a call
        // not yet sent, an observation) is not carried out: the run is fed
        // `TimerFired` at its deadline, so the timers due before it fire
        // and the run expires there, sending nothing. A call found
        // `sending` is answered below first (its request may be out), and a
        // receipt lookup (an operator's reconcile) is a read that settles.
        let deadline_passed = now >= due_at(&run.state.deadline_at);
        if deadline_passed
            && job.state == JobState::Ready
            && !matches!(job.kind, JobKind::LookupReceipt { .. })
        {
            tracing::info!(run = %run.id, job = job.id, "the run's deadline has passed: it expires instead");
            let event = Event::TimerFired {
                at: run.state.deadline_at,
            };
            self.parts
                .committer
                .feed(run, &event, now, Feeding::completing(job.id))
                .await?;
            return Ok(());
        }
        match job.kind.clone() {
            JobKind::Timer { at, .. } => {
                let event = Event::TimerFired { at };
                self.parts
                    .committer
                    .feed(run, &event, now, Feeding::completing(job.id))
                    .await?;
                Ok(())
            }
            JobKind::Dispatch {
                dispatch:
                    DispatchCommand {
                        step,
                        operation_id,
                        connection,
                        action,
                        command,
                        attempt,
                        resend_safe,
                    },
                idempotency_key,
            } => {
                if !vm.expects(
                    &run.state,
                    &Expected::CallAnswer {
                        step: &step,
                        attempt,
                    },
                ) {
                    return self.queue.discard(job.id, &owner).await;
                }
                let call = Call {
                    step,
                    attempt,
                    connection,
                    resend_safe,
                    request: DispatchRequest {
                        operation_id,
                        action,
                        command,
                        idempotency_key,
                    },
                };
                self.dispatch_job(run, &job, call, now).await
            }
            JobKind::LookupReceipt {
                step,
                operation_id,
                connection,
                idempotency_key,
                ..
            } => {
                if !vm.expects(&run.state, &Expected::ReceiptAnswer { step: &step }) {
                    return self.queue.discard(job.id, &owner).await;
                }
                let request = ReceiptRequest {
                    operation_id,
                    idempotency_key,
                };
                self.lookup_receipt_job(run, &job, step, &connection, request)
                    .await
            }
            JobKind::Observe {
                step,
                connection,
                completion,
                review_request_id,
                ..
            } => {
                if !vm.expects(&run.state, &Expected::Completion { step: &step }) {
                    return self.queue.discard(job.id, &owner).await;
                }
                let observation = Observing {
                    step,
                    connection,
                    completion,
                    review_request_id,
                };
                self.observe_job(run, &job, observation, now).await
            }
        }
    }

    /// A dispatch job the VM still expects: sends the call (marking the
    /// job `sending` first unless it is safe to resend) and feeds the VM
    /// the answer. An attempt found `sending` (a crash or a lost lease
    /// while its request may have been out) is never sent again here: it
    /// is reported to the VM as uncertain, and the VM decides (a read goes
    /// again as a new attempt; a mutation or an evaluation is held for an
    /// operator). The answer is stamped when it came.
    async fn dispatch_job(
        &self,
        run: RunRecord,
        job: &Job,
        call: Call,
        now: Instant,
    ) -> Result<(), StoreError> {
        let Call {
            step,
            attempt,
            connection,
            resend_safe,
            request,
        } = call;
        let mut answered_at = now;
        let answer = if job.state == JobState::Sending {
            tracing::warn!(run = %run.id, step = %step, attempt, "interrupted dispatch found; reported to the VM as uncertain");
            self.parts.counters.dispatch_attempt("interrupted");
            Answer::Uncertain {
                code: INTERRUPTED.to_owned(),
            }
        } else {
            let Some(conn) = self.parts.connections.get(&connection) else {
                return self.hold_job(job, "unknown connection").await;
            };
            let Some(epoch) = self.parts.committer.leases().adopted_epoch() else {
                return self.hold_job(job, "no restore epoch adopted").await;
            };
            // The job is marked `sending` by the adapter just before the
            // request is written (after the token and the request's bytes),
            // so a crash before that point leaves it `ready` and it is sent
            // once later. A read that is safe to resend is not marked at
            // all: a crash sends it again.
            let marker = JobSending {
                committer: &self.parts.committer,
                job: job.id,
                owner: self.parts.committer.leases().owner(),
                epoch,
            };
            let mark: &dyn MarkSending = if resend_safe { &NoMark } else { &marker };
            // The connection's flow control decides whether the request
            // may be written now; a wait goes back to the queue, durably.
            let held_until = self.parts.committer.leases().lease_until(&now);
            let holds_slot = match self
                .flow
                .turn(&connection, conn.limits(), job.id, now, held_until)
                .await?
            {
                Turn::Go { holds_slot } => holds_slot,
                Turn::Wait { .. }
                    if run.state.status == coordinator_vm::RunStatus::CancelRequested =>
                {
                    return self.cancel_unsent(run, job, step, now).await;
                }
                Turn::Wait { limit, until } => {
                    let wait = Waiting {
                        step: &step,
                        connection: &connection,
                        limit,
                        until,
                        now,
                    };
                    return self.wait_for_turn(&run, job, wait).await;
                }
            };
            let sent = self.adapter.dispatch_marking(conn, &request, mark);
            let sent = self
                .parts
                .spans
                .traced_attempt(&run, &step, &connection, attempt, sent)
                .await;
            answered_at = self.parts.clock.now();
            self.after_call(&connection, holds_slot, &sent, answered_at)
                .await;
            match sent {
                Ok(outcome) => {
                    tracing::info!(run = %run.id, step = %step, attempt, result = %outcome.label(), "dispatched");
                    self.parts.counters.dispatch_attempt(outcome.kind());
                    outcome.into_answer()
                }
                Err(AdapterError::NotSent(e)) => return Err(e),
                Err(e) => {
                    self.parts.counters.dispatch_attempt("host-fault");
                    return self.hold_job(job, &e.to_string()).await;
                }
            }
        };
        let kept = crate::timeline::answer_record(&answer, attempt, &answered_at);
        let update = |l: &mut StepLedger| {
            l.attempts = attempt;
            l.keep_answer(kept.clone());
            l.waiting = None;
        };
        // A read's answer may carry the next call's `sending` mark.
        if resend_safe && job.state == JobState::Ready {
            let read = chain::ReadAnswer {
                job,
                step,
                answer,
                at: answered_at,
                update: &update,
            };
            return self.answer_read(run, read).await;
        }
        self.feed_call_answer(run, job, step, answer, answered_at, &update)
            .await
    }

    /// Feeds the VM `answer` to call step `step`, answered at `at`, in the
    /// commit that completes `job` and applies `update` to the step's
    /// ledger entry: the one way a dispatch, a cancel unsent and a receipt
    /// lookup answer their call.
    async fn feed_call_answer(
        &self,
        run: RunRecord,
        job: &Job,
        step: String,
        answer: Answer,
        at: Instant,
        update: &(dyn Fn(&mut StepLedger) + Sync),
    ) -> Result<(), StoreError> {
        let ledger =
            |l: &mut BTreeMap<String, StepLedger>| update(l.entry(step.clone()).or_default());
        let event = Event::CallAnswered {
            step: step.clone(),
            answer,
        };
        let feeding = Feeding {
            ledger: Some(&ledger),
            ..Feeding::completing(job.id)
        };
        self.parts.committer.feed(run, &event, at, feeding).await?;
        Ok(())
    }

    /// A call its connection's flow control holds back, of a run whose
    /// cancel was requested: it was never sent, so the VM is answered "not
    /// processed" (retryable) and the run ends cancelled.
    async fn cancel_unsent(
        &self,
        run: RunRecord,
        job: &Job,
        step: String,
        now: Instant,
    ) -> Result<(), StoreError> {
        tracing::info!(run = %run.id, step = %step, "the call waited for its connection's flow control and is cancelled unsent");
        let unsent = Answer::Retryable {
            code: CANCELLED_UNSENT.to_owned(),
        };
        self.feed_call_answer(run, job, step, unsent, now, &|l| l.waiting = None)
            .await
    }

    /// After a dispatch answered at `now`: its in-flight slot back, and a
    /// product's `Retry-After` recorded for every next call to the
    /// connection.
    async fn after_call(
        &self,
        connection: &str,
        holds_slot: bool,
        sent: &Result<Outcome, AdapterError>,
        now: Instant,
    ) {
        let retry_after = match sent {
            Ok(Outcome::HeldBack { retry_after, .. }) => Some(*retry_after),
            _ => None,
        };
        if !holds_slot && retry_after.is_none() {
            return;
        }
        let flow = &self.flow;
        if let Some(until) = flow.done(connection, holds_slot, retry_after, now).await {
            self.parts.counters.retry_after_honoured(connection);
            tracing::info!(connection, until = %until, "the product asked to be called again later; the connection's calls wait until then");
        }
    }

    /// A dispatch its connection's flow control holds back: the job goes
    /// back to the queue, due when the limit lets it go (never after the
    /// run's deadline, where the run expires having sent nothing). The
    /// first wait of a call is recorded on the run's ledger, visibly (one
    /// commit); a wait already recorded only moves the job (one statement).
    async fn wait_for_turn(
        &self,
        run: &RunRecord,
        job: &Job,
        wait: Waiting<'_>,
    ) -> Result<(), StoreError> {
        let Waiting {
            step,
            connection,
            limit,
            until,
            now,
        } = wait;
        self.parts.counters.throttled(connection, limit);
        let due = due_at(&until).min(due_at(&run.state.deadline_at));
        let owner = self.parts.committer.leases().owner();
        let recorded = run
            .ledger
            .get(step)
            .and_then(|l| l.waiting.as_ref())
            .is_some_and(|w| w.connection == connection && w.limit == limit);
        if !recorded {
            tracing::info!(run = %run.id, step, connection, limit = limit.as_str(), until = %until, "the call waits for its connection's flow control");
            let mut ledger = run.ledger.clone();
            if let Ok(Some(vm)) = self.parts.committer.programs().load(&run.revision).await {
                crate::timeline::record_admission(&vm, &run.state, &mut ledger);
            }
            ledger.entry(step.to_owned()).or_default().waiting = Some(CallWait {
                connection: connection.to_owned(),
                limit,
                since: now,
            });
            let commit = Commit {
                run_id: run.id.clone(),
                expected_version: run.version,
                at: now,
                state: run.state.clone(),
                ledger,
                complete: None,
                jobs: Vec::new(),
                review: None,
            };
            match self.parts.committer.commit(commit, None).await {
                // The run moved meanwhile (a cancel): the job is looked at
                // again when due, and records its wait then.
                Ok(_) | Err(StoreError::Conflict) => {}
                Err(e) => return Err(e),
            }
        }
        self.queue.release(job.id, owner, due, None).await
    }

    /// A receipt lookup the VM still expects (an operator's reconcile):
    /// asks the product and feeds the VM what it found.
    async fn lookup_receipt_job(
        &self,
        run: RunRecord,
        job: &Job,
        step: String,
        connection: &str,
        request: ReceiptRequest,
    ) -> Result<(), StoreError> {
        let Some(conn) = self.parts.connections.get(connection) else {
            return self.hold_job(job, "unknown connection").await;
        };
        let answer = match self.adapter.lookup_receipt(conn, &request).await {
            Ok(o) => {
                // What reconcile found (never a body): the operator's only
                // trace when the lookup settles nothing.
                tracing::info!(run = %run.id, step = %step, answer = %o.label(), "receipt lookup answered");
                o.into_answer()
            }
            Err(e) => return self.hold_job(job, &e.to_string()).await,
        };
        let answered_at = self.parts.clock.now();
        let kept = crate::timeline::answer_record(&answer, 0, &answered_at);
        self.feed_call_answer(run, job, step, answer, answered_at, &|l| {
            l.keep_answer(kept.clone())
        })
        .await
    }

    /// An observation the VM still expects: reads the completion once. A
    /// completed one is fed to the VM; a pending (or unanswered) one is
    /// counted and the next observation scheduled, in one commit through
    /// the group commit like every other.
    async fn observe_job(
        &self,
        run: RunRecord,
        job: &Job,
        observation: Observing,
        now: Instant,
    ) -> Result<(), StoreError> {
        let Observing {
            step,
            connection,
            completion,
            review_request_id,
        } = observation;
        let Some(conn) = self.parts.connections.get(&connection) else {
            return self.hold_job(job, "unknown connection").await;
        };
        let read = self
            .adapter
            .observe(conn, &completion, &review_request_id)
            .await;
        let count = |l: &mut BTreeMap<String, StepLedger>| {
            l.entry(step.clone()).or_default().observations += 1;
        };
        match read {
            Ok(Observation::Completed { value }) => {
                let event = Event::CompletionObserved {
                    step: step.clone(),
                    value,
                    at: whole_second(&now),
                };
                let feeding = Feeding {
                    ledger: Some(&count),
                    ..Feeding::completing(job.id)
                };
                self.parts.committer.feed(run, &event, now, feeding).await?;
                return Ok(());
            }
            Ok(_) => {}
            Err(e) => {
                tracing::info!(run = %run.id, step = %step, error = %e, "observation unanswered")
            }
        }
        let mut ledger = run.ledger.clone();
        if let Ok(Some(vm)) = self.parts.committer.programs().load(&run.revision).await {
            crate::timeline::record_admission(&vm, &run.state, &mut ledger);
        }
        count(&mut ledger);
        let next = NewJob {
            kind: JobKind::Observe {
                step: step.clone(),
                connection: connection.clone(),
                completion,
                review_request_id,
                last_observed_at: Some(whole_second(&now)),
            },
            due_at: seconds_after(
                &now,
                self.parts.committer.jobs().observe_interval(&connection),
            ),
        };
        let commit = Commit {
            run_id: run.id.clone(),
            expected_version: run.version,
            at: now,
            state: run.state.clone(),
            ledger,
            complete: Some((job.id, self.parts.committer.leases().owner().to_owned())),
            jobs: vec![next],
            review: None,
        };
        self.parts.committer.commit(commit, None).await.map(|_| ())
    }

    /// A host fault (nothing was sent): log and try the job again later.
    async fn hold_job(&self, job: &Job, why: &str) -> Result<(), StoreError> {
        tracing::error!(job = job.id, run = %job.run_id, reason = why, "host fault; job retried later");
        let later = seconds_after(&self.parts.clock.now(), MAX_BACKOFF_SECONDS);
        self.queue
            .release(job.id, self.parts.committer.leases().owner(), later, None)
            .await
    }
}

/// A dispatch job's call, as [`JobRunner::dispatch_job`] sends it.
struct Call {
    step: String,
    attempt: u32,
    connection: String,
    resend_safe: bool,
    request: DispatchRequest,
}

/// A dispatch held back by its connection's flow control
/// ([`JobRunner::wait_for_turn`]).
struct Waiting<'a> {
    step: &'a str,
    connection: &'a str,
    limit: FlowLimit,
    until: Instant,
    now: Instant,
}

/// An observe job's completion read, as [`JobRunner::observe_job`] makes it.
struct Observing {
    step: String,
    connection: String,
    completion: String,
    review_request_id: String,
}

/// Marks dispatch job `job` `sending` under this process's lease and
/// restore epoch ([`MarkSending`]; `JobQueue::mark_sending`).
struct JobSending<'a> {
    committer: &'a Committer,
    job: u64,
    owner: &'a str,
    epoch: u64,
}

#[async_trait::async_trait]
impl MarkSending for JobSending<'_> {
    async fn mark_sending(&self) -> Result<(), StoreError> {
        self.committer
            .mark_sending(self.job, self.owner, self.epoch)
            .await
    }
}
