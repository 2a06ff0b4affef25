//! Operator actions and inspection (SPEC §8 recovery routes, `GET
//! /v1/runs`, inspect), retention and review completions.

use std::sync::Arc;

use coordinator_ir::instant::Instant;
use coordinator_ir::StepKind;
use coordinator_ports::clock::whole_second;
use coordinator_ports::store::{
    Erasure, JobKind, LeaseRequest, Review, RunFilter, RunPage, RunRecord, StepLedger, StoreError,
};
use coordinator_runtime::binding;
use coordinator_vm::{EffectState, Event, Rejected, Vm};

use super::Operator;
use crate::committer::{Fed, Feeding};

/// Why an operator action was refused.
#[derive(Debug)]
pub enum ActionError {
    /// No such run.
    NotFound,
    /// The VM refused the event (not held, not resendable, no receipt, ...).
    Refused(Rejected),
    /// The restore hold is in place and the action would dispatch (409
    /// `execution.held`): `retry-same` always, `cancel` when its route
    /// sends a call. A reconcile only looks a receipt up, so it is served.
    ExecutionHeld,
    /// `retry-same` or `reconcile` of a run whose recorded binding of
    /// `connection` differs from the runtime file's (409
    /// `binding.live-conflict`; only an instance started with
    /// `--recovery-only` serves such a run at all).
    BindingChanged {
        /// The first connection (by name) whose binding changed.
        connection: String,
    },
    /// `retry-same` or `reconcile` of a run whose payloads retention erased
    /// (409 `run.payload-erased`, seed 000).
    PayloadErased,
    /// `reconcile` or `retry-same` of a run that changed between the read
    /// the action was decided on and its commit (409 `reconcile.raced`):
    /// nothing was applied; inspect it again.
    Raced,
    /// The reconcile was carried out, and the product answered that it no
    /// longer holds the original receipt (409 `receipt.expired`): the run
    /// stays held; this is not evidence the command was never sent. The
    /// run as it stands after the action (the action happened: audit it).
    ReceiptExpired(Box<RunRecord>),
    /// The store failed.
    Store(StoreError),
}

impl From<StoreError> for ActionError {
    fn from(e: StoreError) -> Self {
        ActionError::Store(e)
    }
}

/// An operator action on a run (SPEC §8 recovery routes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// `cancel`.
    Cancel,
    /// `retry-same`.
    RetrySame,
    /// `reconcile`.
    Reconcile,
}

/// One visited step as inspection shows it (never inputs, responses or
/// commands).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InspectedStep {
    /// The step name.
    pub name: String,
    /// The step's kind; `None` when the run's Program is not loaded or no
    /// longer has the step (inspection shows `unknown`).
    pub kind: Option<StepKind>,
    /// Mutation and evaluation calls: `accepted` / `unknown`.
    pub effect: Option<EffectState>,
    /// Calls: dispatch attempts made.
    pub attempts: Option<u32>,
    /// The current wait: when it is due (a wait-until's instant, a
    /// wait-for's timeout), RFC 3339.
    pub due_at: Option<String>,
    /// Wait-for steps: observations made.
    pub observations: Option<u32>,
    /// Call steps: the restore hold held this step's prepared command back
    /// for review ([`StepLedger::restored`]).
    pub restored: bool,
    /// The step's times, wait due time and end, and latest answers, as its
    /// ledger keeps them (docs/graph.md "The run's timeline"); the
    /// `attempts`, `observations` and `restored` of it are not read here.
    pub timeline: StepLedger,
}

impl Operator {
    /// The run with this id; `None` also for an id that is not a UUID.
    ///
    /// # Errors
    /// The store's.
    pub async fn get(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        // Run ids are UUIDs (`Admission::admit` makes them): anything else
        // names no run, and never reaches the store (a NUL byte there is a
        // database error, not an outage).
        if uuid::Uuid::try_parse(run_id).is_err() {
            return Ok(None);
        }
        self.ports
            .runs
            .get(run_id)
            .await
            .map_err(|e| self.parts.fence.count_outage(e))
    }

    /// A page of runs.
    ///
    /// # Errors
    /// The store's ([`StoreError::BadCursor`] for a foreign cursor).
    pub async fn list(&self, filter: &RunFilter) -> Result<RunPage, StoreError> {
        // Workflow names are names ([`coordinator_ir::name::is_name`]):
        // anything else names no workflow, and never reaches the store (a
        // NUL byte there is a database error, not an outage).
        let mut filter = filter.clone();
        if let Some(workflows) = &mut filter.workflows {
            workflows.retain(|w| coordinator_ir::name::is_name(w));
        }
        self.ports
            .runs
            .list(&filter)
            .await
            .map_err(|e| self.parts.fence.count_outage(e))
    }

    /// The VM of `revision` (the Program a run of it runs on): loaded from
    /// the store's definitions when this process does not serve it;
    /// `None` when no definition of it can be served.
    ///
    /// # Errors
    /// The store's.
    pub async fn program_of(&self, revision: &str) -> Result<Option<Arc<Vm>>, StoreError> {
        self.parts.committer.programs().load(revision).await
    }

    /// Each visited step with its effect, attempts, and the current wait's
    /// due time and observation count.
    ///
    /// # Errors
    /// The store's.
    pub async fn inspect(&self, run: &RunRecord) -> Result<Vec<InspectedStep>, StoreError> {
        let vm = self.parts.committer.programs().load(&run.revision).await?;
        let wait = vm.as_ref().and_then(|v| v.current_wait(&run.state));
        let mut ledgers = run.ledger.clone();
        if let Some(vm) = &vm {
            crate::timeline::record_admission(vm, &run.state, &mut ledgers);
        }
        let mut out = Vec::new();
        for name in &run.state.path {
            let kind = vm.as_ref().and_then(|v| v.step_kind(name));
            let ledger = ledgers.get(name);
            let pending_here = wait
                .filter(|w| w.step == name.as_str())
                .map(|w| w.due_at.to_string());
            out.push(InspectedStep {
                name: name.clone(),
                kind,
                effect: run.state.effects.get(name).copied(),
                attempts: (kind == Some(StepKind::Call))
                    .then(|| ledger.map(|l| l.attempts).unwrap_or(0)),
                due_at: pending_here,
                observations: (kind == Some(StepKind::WaitFor))
                    .then(|| ledger.map(|l| l.observations).unwrap_or(0)),
                restored: ledger.is_some_and(|l| l.restored),
                timeline: ledger.cloned().unwrap_or_default(),
            });
        }
        Ok(out)
    }

    /// Applies an operator action (SPEC §8 `cancel`, `retry-same`,
    /// `reconcile`) and returns the run after it. A cancel of an ended run
    /// changes nothing and returns it.
    ///
    /// # Errors
    /// [`ActionError::Refused`] when the VM refuses the event;
    /// [`ActionError::BindingChanged`] for a `retry-same` or `reconcile` of
    /// a run admitted under another binding of one of its connections.
    pub async fn act(&self, run_id: &str, action: Action) -> Result<RunRecord, ActionError> {
        let started = self.parts.clock.now();
        let result = self.act_on(run_id, action, started).await;
        let name = match action {
            Action::Cancel => "cancel",
            Action::RetrySame => "retry-same",
            Action::Reconcile => "reconcile",
        };
        match &result {
            Ok(run) => self
                .parts
                .spans
                .trace_action(run, name, &started, "applied"),
            Err(ActionError::ReceiptExpired(run)) => {
                self.parts
                    .spans
                    .trace_action(run, name, &started, "receipt-expired")
            }
            Err(_) => {}
        }
        result
    }

    /// [`Operator::act`] without its span, at `now` (the engine clock's
    /// reading for this action).
    async fn act_on(
        &self,
        run_id: &str,
        action: Action,
        now: Instant,
    ) -> Result<RunRecord, ActionError> {
        let run = self.get(run_id).await?.ok_or(ActionError::NotFound)?;
        if action == Action::Cancel && run.status().is_terminal() {
            return Ok(run);
        }
        if run.payload_erased {
            return Err(ActionError::PayloadErased);
        }
        let holds = self
            .ports
            .holds
            .holds()
            .await
            .map_err(|e| self.parts.fence.count_outage(e))?;
        if let Some(process) = self.parts.committer.leases().lease_epoch().await? {
            if process != holds.restore_epoch {
                return Err(ActionError::Store(self.parts.fence.fence_if_incompatible(
                    StoreError::LeaseIncompatible {
                        process,
                        store: holds.restore_epoch,
                    },
                )));
            }
        }
        if action == Action::RetrySame && holds.restore {
            return Err(ActionError::ExecutionHeld);
        }
        if action != Action::Cancel {
            // Never resend or look up a receipt where, or as whom, the run
            // was not admitted (docs/service.md "Connection bindings").
            if let Some(c) = binding::changed_connection(&run.bindings, &self.parts.connections) {
                return Err(ActionError::BindingChanged {
                    connection: c.to_owned(),
                });
            }
        }
        let at = whole_second(&now);
        let (event, review) = match action {
            Action::Cancel => (Event::CancelRequested { at }, Some(Review::Cancelled)),
            Action::RetrySame => (Event::RetrySame { at }, None),
            Action::Reconcile => (Event::Reconcile { at }, Some(Review::Reconciled)),
        };
        let fed = self
            .parts
            .committer
            .feed(
                run,
                &event,
                now,
                Feeding {
                    review,
                    refuse_dispatch: holds.restore,
                    // An operator decided on the run as it was read: if it
                    // moved meanwhile, say so rather than apply the decision
                    // to another state. A cancel applies to any state.
                    retry_conflicts: action == Action::Cancel,
                    ..Feeding::default()
                },
            )
            .await
            .map_err(|e| match e {
                StoreError::Conflict => ActionError::Raced,
                other => ActionError::Store(other),
            })?;
        match fed {
            Fed::Applied(r) => {
                tracing::info!(run = %r.id, action = ?action, state = r.status().as_str(), "operator action");
                if r.status() == coordinator_vm::RunStatus::CancelRequested {
                    // A call its connection's flow control holds back is
                    // looked at now: it ends cancelled, never sent.
                    match self.ports.queue.bring_run_forward(&r.id, now).await {
                        Ok(0) => {}
                        Ok(_) => self.parts.committer.hand_off().wake_one(),
                        Err(e) => {
                            tracing::warn!(run = %r.id, error = %e, "a waiting call is cancelled when its wait ends")
                        }
                    }
                }
                if action != Action::Reconcile {
                    return Ok(*r);
                }
                // The receipt lookup is carried out at once, so the answer
                // shows what it found (it is a read: also under the restore
                // hold and on a `--recovery-only` instance).
                self.look_up_receipts_now(&r.id).await;
                let after = self.ports.runs.get(&r.id).await?.unwrap_or(*r);
                let expired = self
                    .parts
                    .committer
                    .programs()
                    .load(&after.revision)
                    .await?
                    .is_some_and(|vm| vm.receipt_expired(&after.state));
                if expired {
                    return Err(ActionError::ReceiptExpired(Box::new(after)));
                }
                Ok(after)
            }
            // A cancel the VM does not take (the run ended meanwhile)
            // changes nothing: the run as it stands, as for an ended run.
            Fed::Rejected(_) if action == Action::Cancel => self
                .ports
                .runs
                .get(run_id)
                .await?
                .ok_or(ActionError::NotFound),
            Fed::Rejected(r) => Err(ActionError::Refused(r)),
            Fed::Held => Err(ActionError::ExecutionHeld),
        }
    }

    /// Carries out the due receipt lookups of run `run_id` in this call
    /// (after a reconcile). A lookup a worker took first is left to it, and
    /// waited for (at most the request budget); failures are logged, and a
    /// lookup not carried out stays due for the workers.
    async fn look_up_receipts_now(&self, run_id: &str) {
        // The reconcile's own commit may have leased the lookup to this
        // process already (handed off to the lanes): carry it out here.
        let committer = &self.parts.committer;
        for h in committer.hand_off().take_of_run(run_id) {
            self.runner
                .carry_out(h.job, h.lease_until, Some(h.run))
                .await;
        }
        if self.parts.fence.clock_out_of_service() {
            // No lease while this process's clock is out of its bound.
            return;
        }
        let leases = committer.leases();
        let epoch = match leases.lease_epoch().await {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(run = %run_id, error = %e, "receipt lookup left to the workers");
                return;
            }
        };
        let now = self.parts.clock.now();
        let lease_until = leases.lease_until(&now);
        let leased = self
            .ports
            .queue
            .lease(&LeaseRequest {
                owner: leases.owner(),
                now,
                lease_until,
                limit: 1,
                epoch,
                run_id: Some(run_id),
                receipt_lookups_only: true,
            })
            .await;
        match leased {
            Ok(jobs) => {
                for job in jobs {
                    self.runner.carry_out(job, lease_until, None).await;
                }
            }
            Err(e) => {
                let e = self.parts.fence.fence_if_incompatible(e);
                tracing::warn!(run = %run_id, error = %e, "receipt lookup left to the workers");
                return;
            }
        }
        // A worker may have leased the lookup first: wait for its answer
        // (at most one request budget, real time), so the answer shows what
        // the receipt said rather than the lookup in progress.
        let waited = std::time::Instant::now();
        let budget =
            std::time::Duration::from_secs(u64::try_from(self.request_budget_seconds).unwrap_or(0));
        while waited.elapsed() < budget {
            let in_progress = match self.ports.runs.jobs(run_id).await {
                Ok(jobs) => jobs
                    .iter()
                    .any(|j| matches!(j.kind, JobKind::LookupReceipt { .. }) && j.lease.is_some()),
                Err(_) => false,
            };
            if !in_progress {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Retention (seed 000 "Erase ended payloads"): erases the payloads of
    /// at most `limit` runs (1..=100) that ended before `before`,
    /// oldest ended first, never live or uncertain work
    /// ([`Maintenance::erase_payloads`](coordinator_ports::store::Maintenance::erase_payloads));
    /// stamped with this engine's clock.
    ///
    /// # Errors
    /// The store's.
    pub async fn retain(&self, before: Instant, limit: u32) -> Result<Erasure, StoreError> {
        let done = self
            .ports
            .maintenance
            .erase_payloads(before, limit, self.parts.clock.now())
            .await
            .map_err(|e| self.parts.fence.count_outage(e))?;
        tracing::info!(erased = done.erased, more = done.more, "retention");
        Ok(done)
    }

    /// `POST /v1/review-completions`: brings the next read of this review
    /// request forward (never sooner than the observation floor after the
    /// last read). Returns how many waits moved.
    ///
    /// # Errors
    /// The store's.
    pub async fn bring_forward(&self, review_request_id: &str) -> Result<usize, StoreError> {
        let moved = self
            .ports
            .queue
            .bring_forward(
                review_request_id,
                self.parts.clock.now(),
                i64::try_from(self.observation_floor_seconds).unwrap_or(i64::MAX),
            )
            .await?;
        if moved > 0 {
            self.parts.committer.hand_off().wake_one();
        }
        Ok(moved)
    }
}
