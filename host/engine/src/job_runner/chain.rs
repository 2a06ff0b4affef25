//! A read's answer and the next call's `sending` mark in one commit
//! ([`JobRunner::answer_read`]): when the VM's next command after a read
//! is a call not safe to resend (a mutation, an evaluation), due now, the
//! lane that holds the read's answer writes that call itself. The adapter
//! prepares the request (the access token, the bytes) and, just before
//! writing it, asks for the `sending` mark; the mark is the commit of the
//! read's answer, which inserts the call's job already `sending` and
//! leased to this process ([`MarkOnInsert`]). A lone run of a
//! read-then-notify workflow makes one write transaction less, and its
//! call leaves one commit earlier (docs/decisions.md, "The commit of a
//! read's answer marks the next command").
//!
//! Nothing changes for a crash: before the commit, the read's answer is
//! lost and the read (safe to resend) goes again; after it, the call's job
//! is `sending` and is never sent again by itself, as when its own mark
//! was written. When the adapter stops before the mark (a refused token, a
//! key it cannot read), nothing was committed: the read's answer is
//! committed the usual way and the call goes as any other.

use std::collections::BTreeMap;
use std::sync::Mutex;

use coordinator_ir::instant::Instant;
use coordinator_ports::adapter::{DispatchRequest, MarkSending};
use coordinator_ports::clock::due_at;
use coordinator_ports::store::{Job, JobKind, RunRecord, StepLedger, StoreError};
use coordinator_vm::{Answer, Event, Resumed};

use super::{Call, JobRunner};
use crate::committer::{Committer, Fed, Feeding, LedgerUpdate, MarkOnInsert};
use crate::flow_gate::Turn;

/// A read's answer as [`JobRunner::answer_read`] commits it.
pub(super) struct ReadAnswer<'a> {
    /// The read's leased job, completed by the commit.
    pub(super) job: &'a Job,
    /// The read's step.
    pub(super) step: String,
    /// What the read answered.
    pub(super) answer: Answer,
    /// When it answered (engine clock).
    pub(super) at: Instant,
    /// The change to the read step's ledger entry.
    pub(super) update: &'a (dyn Fn(&mut StepLedger) + Sync),
}

/// The call the VM makes next after a read, as this lane would write it.
struct NextCall {
    /// The VM's answer to the read's answer (reused by the commit).
    resumed: Resumed,
    /// The call's job kind, as the commit makes it.
    kind: JobKind,
    /// The call.
    call: Call,
}

impl JobRunner {
    /// Commits a read's answer (see the module's documentation): with the
    /// next call marked and written at once when the VM's next command is
    /// a call not safe to resend, due now, on a connection without call
    /// limits and no `Retry-After` in force, before the run's deadline;
    /// otherwise as every answer is committed.
    pub(super) async fn answer_read(
        &self,
        run: RunRecord,
        read: ReadAnswer<'_>,
    ) -> Result<(), StoreError> {
        let ReadAnswer {
            job,
            step,
            answer,
            at,
            update,
        } = read;
        let event = Event::CallAnswered {
            step: step.clone(),
            answer,
        };
        let ledger =
            |l: &mut BTreeMap<String, StepLedger>| update(l.entry(step.clone()).or_default());
        let next = match self.next_call(&run, &event, &at).await {
            Ok(next) if self.parts.connections.contains_key(&next.call.connection) => next,
            Ok(next) => {
                return self
                    .commit_answer(run, job.id, &event, at, &ledger, Some(next.resumed))
                    .await
            }
            Err(resumed) => {
                return self
                    .commit_answer(run, job.id, &event, at, &ledger, resumed)
                    .await
            }
        };
        let NextCall {
            resumed,
            kind,
            call,
        } = next;
        let Some(conn) = self.parts.connections.get(&call.connection) else {
            return self
                .commit_answer(run, job.id, &event, at, &ledger, Some(resumed))
                .await;
        };
        let mark = MarkOnInsert::new(kind);
        let marker = CommitOfAnswer {
            committer: &self.parts.committer,
            run: &run,
            event: &event,
            at,
            job: job.id,
            ledger: &ledger,
            resumed: Mutex::new(Some(resumed)),
            mark: &mark,
            fed: Mutex::new(None),
        };
        let sent = self.adapter.dispatch_marking(conn, &call.request, &marker);
        let sent = self
            .parts
            .spans
            .traced_attempt(&run, &call.step, &call.connection, call.attempt, sent)
            .await;
        let answered_at = self.parts.clock.now();
        let fed = marker.fed.lock().ok().and_then(|mut f| f.take());
        let applied = match fed {
            // The adapter stopped before its mark: nothing was committed.
            // The read's answer is committed now and the call goes as any
            // other (its attempt made again from the start).
            None => {
                let resumed = marker.resumed.lock().ok().and_then(|mut r| r.take());
                return self
                    .commit_answer(run, job.id, &event, at, &ledger, resumed)
                    .await;
            }
            Some(Err(e)) => return Err(e),
            Some(Ok(applied)) => applied,
        };
        let (Some(run), Some(marked)) = (applied, mark.marked()) else {
            // Committed without the mark (another command after a
            // conflict, a restore hold): the call, if any, goes as any
            // other.
            return Ok(());
        };
        let _held = self.hold(marked.id);
        self.after_call(&call.connection, false, &sent, answered_at)
            .await;
        let answer = match sent {
            Ok(outcome) => {
                tracing::info!(run = %run.id, step = %call.step, attempt = call.attempt, result = %outcome.label(), "dispatched");
                self.parts.counters.dispatch_attempt(outcome.kind());
                outcome.into_answer()
            }
            // Unreachable once marked (an adapter's errors all come before
            // its mark). Were it reached, the request may have left: the
            // job stays `sending` until its lease runs out, and is then
            // answered `uncertain` (held for an operator), never released
            // to be sent again.
            Err(e) => {
                self.parts.counters.dispatch_attempt("host-fault");
                tracing::error!(run = %run.id, step = %call.step, error = %e, "the adapter failed after the sending mark; the call is left sending");
                return Ok(());
            }
        };
        let attempt = call.attempt;
        let kept = crate::timeline::answer_record(&answer, attempt, &answered_at);
        self.feed_call_answer(run, &marked, call.step, answer, answered_at, &|l| {
            l.attempts = attempt;
            l.keep_answer(kept.clone());
            l.waiting = None;
        })
        .await
    }

    /// Commits the read's answer `event` as every answer is committed,
    /// completing job `job` (with the VM's answer `resumed` when it was
    /// computed already).
    async fn commit_answer(
        &self,
        run: RunRecord,
        job: u64,
        event: &Event,
        at: Instant,
        ledger: &LedgerUpdate<'_>,
        resumed: Option<Resumed>,
    ) -> Result<(), StoreError> {
        let feeding = Feeding {
            ledger: Some(ledger),
            resumed,
            ..Feeding::completing(job)
        };
        self.parts.committer.feed(run, event, at, feeding).await?;
        Ok(())
    }

    /// The call this lane writes after the read's `event`: the VM's first
    /// command not safe to resend, due by `at`, on a known connection
    /// without call limits and no `Retry-After` in force, before the run's
    /// deadline, with this process under an adopted restore epoch.
    /// Otherwise `Err` with the VM's answer when it was computed (the
    /// commit reuses it).
    async fn next_call(
        &self,
        run: &RunRecord,
        event: &Event,
        at: &Instant,
    ) -> Result<NextCall, Option<Resumed>> {
        if *at >= due_at(&run.state.deadline_at)
            || self.parts.committer.leases().adopted_epoch().is_none()
        {
            return Err(None);
        }
        let Ok(Some(vm)) = self.parts.committer.programs().load(&run.revision).await else {
            return Err(None);
        };
        let Ok(resumed) = vm.resume(&run.state, event) else {
            return Err(None);
        };
        let resumed = crate::jobs::take_due_waits(&vm, resumed, at, false);
        if resumed.status.is_terminal() {
            return Err(Some(resumed));
        }
        let jobs =
            self.parts
                .committer
                .jobs()
                .jobs_for(&run.start_identity, &resumed.commands, at, true);
        let next = jobs.into_iter().find(|j| {
            j.due_at <= *at
                && matches!(&j.kind, JobKind::Dispatch { dispatch, .. } if !dispatch.resend_safe)
        });
        let Some(JobKind::Dispatch {
            dispatch,
            idempotency_key,
        }) = next.map(|j| j.kind)
        else {
            return Err(Some(resumed));
        };
        let unlimited = self
            .parts
            .connections
            .get(&dispatch.connection)
            .is_some_and(|c| !c.limits().is_some_and(|l| l.any()));
        if !unlimited {
            return Err(Some(resumed));
        }
        // A product's `Retry-After` holds every call of its connection.
        match self
            .flow
            .turn(&dispatch.connection, None, 0, *at, *at)
            .await
        {
            Ok(Turn::Go { .. }) => {}
            _ => return Err(Some(resumed)),
        }
        let kind = JobKind::Dispatch {
            dispatch: dispatch.clone(),
            idempotency_key: idempotency_key.clone(),
        };
        Ok(NextCall {
            resumed,
            kind,
            call: Call {
                step: dispatch.step,
                attempt: dispatch.attempt,
                connection: dispatch.connection,
                resend_safe: false,
                request: DispatchRequest {
                    operation_id: dispatch.operation_id,
                    action: dispatch.action,
                    command: dispatch.command,
                    idempotency_key,
                },
            },
        })
    }
}

/// The `sending` mark of the next call, made by the commit of the read's
/// answer ([`JobRunner::answer_read`]).
struct CommitOfAnswer<'a> {
    committer: &'a Committer,
    /// The run as the read found it.
    run: &'a RunRecord,
    /// The read's answer.
    event: &'a Event,
    /// When the read answered.
    at: Instant,
    /// The read's job, completed by the commit.
    job: u64,
    /// The read step's ledger change.
    ledger: &'a LedgerUpdate<'a>,
    /// The VM's answer to `event`, computed already.
    resumed: Mutex<Option<Resumed>>,
    /// The call's job to mark.
    mark: &'a MarkOnInsert,
    /// What the commit did, once made: the run after it (`None` when the
    /// VM refused the event), or the store's error.
    fed: Mutex<Option<Result<Option<RunRecord>, StoreError>>>,
}

#[async_trait::async_trait]
impl MarkSending for CommitOfAnswer<'_> {
    /// Commits the read's answer, inserting the call's job marked; `Ok`
    /// only when the job was marked and leased here (otherwise nothing is
    /// sent: [`AdapterError::NotSent`](coordinator_ports::adapter::AdapterError::NotSent)).
    async fn mark_sending(&self) -> Result<(), StoreError> {
        let resumed = self.resumed.lock().ok().and_then(|mut r| r.take());
        let feeding = Feeding {
            ledger: Some(self.ledger),
            resumed,
            mark: Some(self.mark),
            ..Feeding::completing(self.job)
        };
        let fed = self
            .committer
            .feed(self.run.clone(), self.event, self.at, feeding)
            .await;
        let result = match &fed {
            Ok(_) if self.mark.marked().is_some() => Ok(()),
            Ok(_) => Err(StoreError::LeaseLost),
            Err(e) => Err(e.clone()),
        };
        let applied = fed.map(|f| match f {
            Fed::Applied(run) => Some(*run),
            Fed::Rejected(_) | Fed::Held => None,
        });
        if let Ok(mut slot) = self.fed.lock() {
            *slot = Some(applied);
        }
        result
    }
}
