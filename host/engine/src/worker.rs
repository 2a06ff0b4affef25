//! The worker: [`Engine::tick`] leases due jobs and carries each out (a
//! dispatch, a receipt lookup, a timer, an observation), feeding the VM the
//! answer and committing the result ([`Engine::feed`]). Store outages with
//! an answer in hand are waited out; nothing not yet sent outlives its
//! lease.

use std::collections::BTreeMap;

use coordinator_ports::adapter::{
    AdapterError, DispatchRequest, MarkSending, NoMark, Observation, ReceiptRequest,
};
use coordinator_ports::clock::{due_unix, unix_to_rfc3339};
use coordinator_ports::store::{
    Commit, Committed, Job, JobKind, JobState, LeaseRequest, NewJob, Review, RunRecord, StepLedger,
    StoreError,
};
use coordinator_vm::{Answer, Command, Event, Expected, RejectCode};

use crate::engine::{Engine, Fed, HandedOff, InFlight, INTERRUPTED, MAX_BACKOFF_SECONDS};

/// A change to a run's ledger, made in the commit of an event.
pub(crate) type LedgerUpdate<'a> = dyn Fn(&mut BTreeMap<String, StepLedger>) + Sync + 'a;

/// How [`Engine::feed`] commits an event.
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
}

impl Default for Feeding<'_> {
    fn default() -> Self {
        Feeding {
            complete: None,
            ledger: None,
            review: None,
            refuse_dispatch: false,
            retry_conflicts: true,
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
    fn new() -> Self {
        StoreWait { waits: 0 }
    }

    async fn wait(&mut self, run: &str, error: &str) {
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

impl Engine {
    /// One worker step: leases the due jobs and carries each out. Returns
    /// how many jobs it leased. Under the restore hold, and on a
    /// `--recovery-only` instance, only receipt lookups are leased (reads,
    /// never dispatches). A fenced engine ([`Engine::fenced`]) leases
    /// nothing.
    ///
    /// # Errors
    /// The store's; [`StoreError::LeaseIncompatible`] when a restore hold
    /// was placed after this process started (it is fenced from then on).
    pub async fn tick(&self) -> Result<usize, StoreError> {
        if self.fenced() {
            return Ok(0);
        }
        // Jobs this process's own commits leased to it come first: no lease
        // statement and no re-read of the run.
        let handed = self.take_handed(self.config.batch);
        if !handed.is_empty() {
            let n = handed.len();
            let mut by_run: Vec<(String, Vec<HandedOff>)> = Vec::new();
            for h in handed {
                match by_run.iter_mut().find(|(run, _)| *run == h.job.run_id) {
                    Some((_, group)) => group.push(h),
                    None => by_run.push((h.job.run_id.clone(), vec![h])),
                }
            }
            futures_util::future::join_all(by_run.into_iter().map(|(_, group)| async move {
                for h in group {
                    self.carry_out_with(h.job, h.lease_until, Some(h.run)).await;
                }
            }))
            .await;
            return Ok(n);
        }
        let epoch = self.lease_epoch().await?;
        let now = self.clock.now_unix();
        let jobs = self
            .store
            .lease(&LeaseRequest {
                owner: &self.config.worker_id,
                now,
                lease_until: self.lease_until(now),
                limit: self.config.batch,
                epoch,
                run_id: None,
                receipt_lookups_only: false,
            })
            .await
            .map_err(|e| self.noted(e))?;
        let n = jobs.len();
        let lease_until = self.lease_until(now);
        // Jobs of one run are carried out in lease order, one after
        // another (each sees the state its predecessor committed); jobs of
        // different runs go concurrently, so one slow product call does
        // not hold up the others.
        let mut by_run: Vec<(String, Vec<Job>)> = Vec::new();
        for job in jobs {
            match by_run.iter_mut().find(|(run, _)| *run == job.run_id) {
                Some((_, group)) => group.push(job),
                None => by_run.push((job.run_id.clone(), vec![job])),
            }
        }
        futures_util::future::join_all(by_run.into_iter().map(|(_, group)| async move {
            for job in group {
                self.carry_out(job, lease_until).await;
            }
        }))
        .await;
        Ok(n)
    }

    /// Marks job `id` in flight in this process; `None` when a lane
    /// already carries it out.
    pub(crate) fn hold(&self, id: u64) -> Option<InFlight<'_>> {
        let inserted = self.in_flight.lock().ok()?.insert(id);
        // (The guard is gone before an `InFlight` exists: its drop locks.)
        inserted.then(|| InFlight {
            set: &self.in_flight,
            job: id,
        })
    }

    /// Carries out one leased job, unless too little of its lease is left
    /// to start it safely (then it is given back). A store outage before
    /// the request left is waited out while the lease holds; other failures
    /// are logged and the lease left to expire.
    pub(crate) async fn carry_out(&self, job: Job, lease_until: i64) {
        self.carry_out_with(job, lease_until, None).await;
    }

    /// [`Engine::carry_out`] with the run as the commit that made the job
    /// left it (`carried`), read from the store when `None`.
    pub(crate) async fn carry_out_with(
        &self,
        job: Job,
        lease_until: i64,
        carried: Option<RunRecord>,
    ) {
        let id = job.id;
        // Another lane of this process holds the job (its lease ran out
        // while it waited for the store): leave it to that lane. The new
        // lease just taken only extends the holder's.
        let Some(_held) = self.hold(id) else {
            return;
        };
        if self
            .clock
            .now_unix()
            .saturating_add(self.config.request_budget_seconds)
            > lease_until
        {
            let _ = self
                .store
                .release(id, &self.config.worker_id, job.due_unix, None)
                .await;
            return;
        }
        let mut result = self
            .run_job(job.clone(), carried)
            .await
            .map_err(|e| self.seen(e));
        // The store went away before the job's request left (an answer in
        // hand is held by `feed`): wait for it, then carry the job out
        // again while the lease holds.
        while let Err(StoreError::Unavailable(e)) = &result {
            tracing::error!(code = "store-unavailable", job = id, error = %e, "store unavailable; the job waits for it");
            if !self.wait_for_store(lease_until).await {
                break;
            }
            result = self
                .run_job(job.clone(), None)
                .await
                .map_err(|e| self.seen(e));
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

    /// Ticks until a tick leases nothing (at most `max_ticks` times);
    /// returns the jobs leased in all. For tests and for draining.
    ///
    /// # Errors
    /// The store's.
    pub async fn run_until_idle(&self, max_ticks: usize) -> Result<usize, StoreError> {
        let mut total = 0;
        for _ in 0..max_ticks {
            let n = self.tick().await?;
            total += n;
            if n == 0 {
                break;
            }
        }
        Ok(total)
    }

    /// Carries out one leased job of `carried` (or of its run, read): a
    /// job of an ended or missing run is discarded, one of a run whose
    /// Program is missing is held, one found after the run's deadline
    /// expires the run instead; otherwise each kind has its function.
    pub(crate) async fn run_job(
        &self,
        job: Job,
        carried: Option<RunRecord>,
    ) -> Result<(), StoreError> {
        let owner = self.config.worker_id.clone();
        let run = match carried {
            Some(run) => run,
            None => match self.store.get(&job.run_id).await? {
                Some(run) => run,
                None => return self.store.discard(job.id, &owner).await,
            },
        };
        if run.status().is_terminal() {
            return self.store.discard(job.id, &owner).await;
        }
        let Some(vm) = self.vm(&run.revision).await? else {
            tracing::error!(run = %run.id, revision = %run.revision, "no Program for the run's revision; job held");
            let later = self.clock.now_unix().saturating_add(MAX_BACKOFF_SECONDS);
            return self.store.release(job.id, &owner, later, None).await;
        };
        let now = self.clock.now_unix();
        // The run's deadline comes first. A job found once the deadline has
        // passed (after an outage or a restart: a wake, a timeout, a call
        // not yet sent, an observation) is not carried out: the run is fed
        // `TimerFired` at its deadline, so the timers due before it fire
        // and the run expires there, sending nothing. A call found
        // `sending` is answered below first (its request may be out), and a
        // receipt lookup (an operator's reconcile) is a read that settles.
        let deadline_passed = due_unix(&run.state.deadline_at).is_some_and(|d| now >= d);
        if deadline_passed
            && job.state == JobState::Ready
            && !matches!(job.kind, JobKind::LookupReceipt { .. })
        {
            tracing::info!(run = %run.id, job = job.id, "the run's deadline has passed: it expires instead");
            let event = Event::TimerFired {
                at: run.state.deadline_at.clone(),
            };
            self.feed(run, &event, Feeding::completing(job.id)).await?;
            return Ok(());
        }
        match job.kind.clone() {
            JobKind::Timer { at, .. } => {
                let event = Event::TimerFired { at };
                self.feed(run, &event, Feeding::completing(job.id)).await?;
                Ok(())
            }
            JobKind::Dispatch {
                step,
                operation_id,
                connection,
                action,
                command,
                idempotency_key,
                attempt,
                resend_safe,
            } => {
                if !vm.expects(
                    &run.state,
                    &Expected::CallAnswer {
                        step: &step,
                        attempt,
                    },
                ) {
                    return self.store.discard(job.id, &owner).await;
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
                self.dispatch_job(run, &job, call).await
            }
            JobKind::LookupReceipt {
                step,
                operation_id,
                connection,
                idempotency_key,
                ..
            } => {
                if !vm.expects(&run.state, &Expected::ReceiptAnswer { step: &step }) {
                    return self.store.discard(job.id, &owner).await;
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
                    return self.store.discard(job.id, &owner).await;
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
    /// operator).
    async fn dispatch_job(&self, run: RunRecord, job: &Job, call: Call) -> Result<(), StoreError> {
        let Call {
            step,
            attempt,
            connection,
            resend_safe,
            request,
        } = call;
        let answer = if job.state == JobState::Sending {
            tracing::warn!(run = %run.id, step = %step, attempt, "interrupted dispatch found; reported to the VM as uncertain");
            self.counters.add("dispatch_attempts", "interrupted");
            Answer::Uncertain {
                code: INTERRUPTED.to_owned(),
            }
        } else {
            let Some(conn) = self.connections.get(&connection) else {
                return self.hold_job(job, "unknown connection").await;
            };
            let Some(epoch) = self.restore_epoch.get().copied() else {
                return self.hold_job(job, "no restore epoch adopted").await;
            };
            // The job is marked `sending` by the adapter just before the
            // request is written (after the token and the request's bytes),
            // so a crash before that point leaves it `ready` and it is sent
            // once later. A read that is safe to resend is not marked at
            // all: a crash sends it again.
            let marker = JobSending {
                engine: self,
                job: job.id,
                owner: &self.config.worker_id,
                epoch,
            };
            let mark: &dyn MarkSending = if resend_safe { &NoMark } else { &marker };
            match self.adapter.dispatch_marking(conn, &request, mark).await {
                Ok(outcome) => {
                    tracing::info!(run = %run.id, step = %step, attempt, result = %outcome.label(), "dispatched");
                    self.counters.add("dispatch_attempts", outcome.kind());
                    outcome.into_answer()
                }
                Err(AdapterError::NotSent(e)) => return Err(e),
                Err(e) => {
                    self.counters.add("dispatch_attempts", "host-fault");
                    return self.hold_job(job, &e.to_string()).await;
                }
            }
        };
        let event = Event::CallAnswered {
            step: step.clone(),
            answer,
        };
        let count = |l: &mut BTreeMap<String, StepLedger>| {
            l.entry(step.clone()).or_default().attempts = attempt;
        };
        let feeding = Feeding {
            ledger: Some(&count),
            ..Feeding::completing(job.id)
        };
        self.feed(run, &event, feeding).await?;
        Ok(())
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
        let Some(conn) = self.connections.get(connection) else {
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
        let event = Event::CallAnswered { step, answer };
        self.feed(run, &event, Feeding::completing(job.id)).await?;
        Ok(())
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
        now: i64,
    ) -> Result<(), StoreError> {
        let Observing {
            step,
            connection,
            completion,
            review_request_id,
        } = observation;
        let Some(conn) = self.connections.get(&connection) else {
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
                    at: unix_to_rfc3339(now),
                };
                let feeding = Feeding {
                    ledger: Some(&count),
                    ..Feeding::completing(job.id)
                };
                self.feed(run, &event, feeding).await?;
                return Ok(());
            }
            Ok(_) => {}
            Err(e) => {
                tracing::info!(run = %run.id, step = %step, error = %e, "observation unanswered")
            }
        }
        let mut ledger = run.ledger.clone();
        count(&mut ledger);
        let next = NewJob {
            kind: JobKind::Observe {
                step: step.clone(),
                connection: connection.clone(),
                completion,
                review_request_id,
                last_observed_unix: Some(now),
            },
            due_unix: now.saturating_add(self.observe_interval(&connection)),
        };
        let commit = Commit {
            run_id: run.id.clone(),
            expected_version: run.version,
            at_unix: now,
            state: run.state.clone(),
            ledger,
            complete: Some((job.id, self.config.worker_id.clone())),
            jobs: vec![next],
            review: None,
        };
        self.commit_grouped(commit, None).await.map(|_| ())
    }

    /// A host fault (nothing was sent): log and try the job again later.
    pub(crate) async fn hold_job(&self, job: &Job, why: &str) -> Result<(), StoreError> {
        tracing::error!(job = job.id, run = %job.run_id, reason = why, "host fault; job retried later");
        let later = self.clock.now_unix().saturating_add(MAX_BACKOFF_SECONDS);
        self.store
            .release(job.id, &self.config.worker_id, later, None)
            .await
    }

    /// Feeds `event` to the run, commits the new state, the completed job
    /// and the new jobs; on a version conflict re-reads the run and applies
    /// the event again (an answer is never dropped because an operator
    /// acted meanwhile). See [`Feeding`] for the options.
    pub(crate) async fn feed(
        &self,
        mut run: RunRecord,
        event: &Event,
        feeding: Feeding<'_>,
    ) -> Result<Fed, StoreError> {
        let Feeding {
            complete,
            ledger: ledger_update,
            review,
            refuse_dispatch,
            retry_conflicts,
        } = feeding;
        let owner = self.config.worker_id.clone();
        let Some(vm) = self.vm(&run.revision).await? else {
            return Err(StoreError::NotFound);
        };
        let answered = matches!(event, Event::CallAnswered { .. });
        let mut conflicts = 0;
        let mut outage = StoreWait::new();
        loop {
            let resumed = match vm.resume(&run.state, event) {
                Ok(r) => r,
                Err(rejected) => {
                    if let Some(job) = complete {
                        // A run that ended meanwhile (its deadline and a wake
                        // taken by two lanes) is the common, harmless case.
                        if rejected.code == RejectCode::RunEnded {
                            tracing::info!(run = %run.id, "the run has ended meanwhile; job discarded");
                        } else {
                            tracing::warn!(run = %run.id, error = %rejected, "event refused by the VM; job discarded");
                        }
                        self.store.discard(job, &owner).await?;
                    }
                    return Ok(Fed::Rejected(rejected));
                }
            };
            let now = self.clock.now_unix();
            let resumed = crate::jobs::take_due_waits(&vm, resumed, now, false);
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
                self.jobs_for(&run.start_identity, &resumed.commands, now, answered)
            };
            let mut ledger = run.ledger.clone();
            if let Some(update) = ledger_update {
                update(&mut ledger);
            }
            let commit = Commit {
                run_id: run.id.clone(),
                expected_version: run.version,
                at_unix: self.clock.now_unix(),
                state: resumed.state.clone(),
                ledger: ledger.clone(),
                complete: complete.map(|j| (j, owner.clone())),
                jobs,
                review,
            };
            let now = self.clock.now_unix();
            let scheduled_due_now = commit.jobs.iter().any(|j| j.due_unix <= now);
            let lease = self.lease_on_insert(now);
            let failed = match self.commit_grouped(commit, lease.clone()).await {
                Ok(Committed { version, leased }) => {
                    if scheduled_due_now && leased.is_empty() {
                        self.wake_one();
                    }
                    if resumed.status.is_terminal() {
                        tracing::info!(run = %run.id, state = resumed.status.as_str(), "run ended");
                        self.counters.add("runs_ended", resumed.status.as_str());
                    }
                    run.state = resumed.state;
                    run.ledger = ledger;
                    run.version = version;
                    run.review = Review::after(run.review, review);
                    if let Some(lease) = lease.filter(|_| !leased.is_empty()) {
                        self.hand_off(leased, &run, lease.lease_until);
                    }
                    return Ok(Fed::Applied(Box::new(run)));
                }
                Err(e) => e,
            };
            match failed {
                StoreError::Conflict if retry_conflicts && conflicts < 8 => conflicts += 1,
                // A worker holds an answer (a request may have left): it is
                // never dropped for an outage; the commit is tried again
                // until the store is back. An operator action fails fast.
                StoreError::Unavailable(e) if complete.is_some() => {
                    outage.wait(&run.id, &e).await;
                    continue;
                }
                e => return Err(e),
            }
            run = loop {
                match self.store.get(&run.id).await {
                    Ok(Some(r)) => break r,
                    Ok(None) => return Err(StoreError::NotFound),
                    Err(StoreError::Unavailable(e)) if complete.is_some() => {
                        outage.wait(&run.id, &e).await;
                    }
                    Err(e) => return Err(e),
                }
            };
        }
    }

    /// Waits (real time, polling `ping`) until the store answers again, or
    /// until `deadline` (engine clock) passes. Returns whether it answers.
    pub(crate) async fn wait_for_store(&self, deadline: i64) -> bool {
        let mut outage = StoreWait::new();
        loop {
            match self.store.ping().await {
                Ok(()) => return true,
                Err(e) => {
                    if self.clock.now_unix() >= deadline {
                        return false;
                    }
                    outage.wait("-", &e.to_string()).await;
                }
            }
        }
    }
}

/// A dispatch job's call, as [`Engine::dispatch_job`] sends it.
struct Call {
    step: String,
    attempt: u32,
    connection: String,
    resend_safe: bool,
    request: DispatchRequest,
}

/// An observe job's completion read, as [`Engine::observe_job`] makes it.
struct Observing {
    step: String,
    connection: String,
    completion: String,
    review_request_id: String,
}

/// Marks dispatch job `job` `sending` under this process's lease and
/// restore epoch ([`MarkSending`]; `JobQueue::mark_sending`).
struct JobSending<'a> {
    engine: &'a Engine,
    job: u64,
    owner: &'a str,
    epoch: u64,
}

#[async_trait::async_trait]
impl MarkSending for JobSending<'_> {
    async fn mark_sending(&self) -> Result<(), StoreError> {
        self.engine
            .mark_sending_grouped(self.job, self.owner, self.epoch)
            .await
    }
}
