//! The [`Engine`]: its construction, and its public face. It is three
//! roles ([`Admission`], `admission.rs`; [`Worker`], `worker.rs`;
//! [`Operator`], `operator/`) and a [`Health`] part, each built here from
//! the ports it uses; what the roles share is the [`Committer`]
//! (`committer.rs`). It feeds the VM events and turns the VM's commands
//! into jobs; it never decides what a step does (ARCHITECTURE.md).

use std::collections::BTreeMap;
use std::sync::Arc;

use coordinator_ir::Definition;
use coordinator_ports::adapter::ProductAdapter;
use coordinator_ports::clock::Clock;
use coordinator_ports::flow::FlowControl;
pub use coordinator_ports::store::Holds;
use coordinator_ports::store::{
    Definitions, HoldsAndReviews, JobQueue, Maintenance, RunAdmission, RunReads, RunRecord,
    RunStore, StoreError,
};
use coordinator_runtime::audit::{AuditJournal, AuditRecord};
use coordinator_runtime::config::Connection;
use coordinator_runtime::keys::{AdmissionKey, AuditKey};

use coordinator_ports::store::{Erasure, RunFilter, RunPage};
use serde_json::Value;

use crate::admission::{
    Admission, AdmissionPorts, AdmitError, EventOrigin, Principal, StartRequest, TriggerInfo,
};
use crate::committer::{Committer, CommitterParts};
use crate::config::EngineConfig;
pub use crate::config::EngineError;
use crate::health::{Fence, Health};
use crate::job_runner::WorkerPorts;
use crate::jobs::JobMaker;
use crate::leases::LeaseRule;
use crate::metrics::Counters;
use crate::operator::actions::{Action, ActionError, InspectedStep};
use crate::operator::restore::HoldError;
use crate::operator::{Operator, OperatorPorts};
use crate::parts::Parts;
use crate::programs::Programs;
use crate::spans::Spans;
use crate::worker::Worker;

/// The service host's engine: admission, the worker and operator actions,
/// and the health part. `Send + Sync`; share it in an `Arc`.
pub struct Engine {
    admission: Admission,
    worker: Worker,
    operator: Operator,
    health: Arc<Health>,
    spans: Arc<Spans>,
}

impl Engine {
    /// Builds an engine serving `definitions` (each the active revision of
    /// its workflow). Each admission records the binding digest of every
    /// connection its Program uses ([`coordinator_runtime::binding`]), from
    /// `connections`.
    ///
    /// # Errors
    /// A Program the VM cannot load, two definitions of one workflow, or a
    /// connection a workflow names that `connections` lacks.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        config: EngineConfig,
        store: Arc<dyn RunStore>,
        clock: Arc<dyn Clock>,
        adapter: Arc<dyn ProductAdapter>,
        admission_key: AdmissionKey,
        connections: BTreeMap<String, Connection>,
        definitions: &[Definition],
    ) -> Result<Engine, EngineError> {
        // The store, upcast once to its narrow ports: from here on each
        // role and part holds only the ports its constructor lists.
        let admissions: Arc<dyn RunAdmission> = store.clone();
        let queue: Arc<dyn JobQueue> = store.clone();
        let runs: Arc<dyn RunReads> = store.clone();
        let holds: Arc<dyn HoldsAndReviews> = store.clone();
        let definitions_port: Arc<dyn Definitions> = store.clone();
        let maintenance: Arc<dyn Maintenance> = store;
        let connections = Arc::new(connections);
        let counters = Arc::new(Counters::default());
        let fence = Arc::new(Fence::new(counters.clone()));
        let spans = Arc::new(Spans::new(clock.clone()));
        let committer = Committer::new(
            queue.clone(),
            runs.clone(),
            CommitterParts {
                programs: Programs::new(
                    definitions_port.clone(),
                    connections.clone(),
                    definitions,
                )?,
                jobs: JobMaker::new(
                    admission_key.clone(),
                    config.database_id.clone(),
                    connections.clone(),
                    config.observation_floor_seconds,
                ),
                leases: LeaseRule::new(
                    config.worker_id.clone(),
                    config.lease_seconds,
                    config.recovery_only,
                    holds.clone(),
                    fence.clone(),
                ),
                counters: counters.clone(),
                spans: spans.clone(),
                clock: clock.clone(),
            },
        );
        let parts = Parts {
            committer: Arc::new(committer),
            clock,
            fence: fence.clone(),
            counters: counters.clone(),
            spans: spans.clone(),
            connections,
        };
        let health = Arc::new(Health::new(
            fence,
            counters,
            maintenance.clone(),
            config.recovery_only,
        ));
        let worker = Worker::new(
            WorkerPorts {
                queue: queue.clone(),
                runs: runs.clone(),
                adapter,
            },
            parts.clone(),
            health.clone(),
            config.batch,
            config.request_budget_seconds,
        );
        Ok(Engine {
            admission: Admission::new(
                AdmissionPorts {
                    admission: admissions,
                    definitions: definitions_port,
                },
                parts.clone(),
                admission_key,
                config.recovery_only,
            ),
            operator: Operator::new(
                OperatorPorts {
                    runs,
                    holds,
                    maintenance,
                    queue,
                },
                worker.runner(),
                parts,
                config.observation_floor_seconds,
                config.request_budget_seconds,
            ),
            worker,
            health,
            spans,
        })
    }

    /// Gives the engine this process's audit journal and the audit key
    /// (`deployment.auditFile`, `deployment.auditKeyRef`). Without one,
    /// [`Engine::audit`] records nothing and the doctor report says
    /// `auditReady: false`. A second journal is ignored (logged).
    pub fn with_audit(self, journal: Arc<AuditJournal>, key: AuditKey) -> Engine {
        if !self.health.attach_audit(journal, key) {
            tracing::warn!("an audit journal is attached already; the second is ignored");
        }
        self
    }

    /// Gives the engine the deployment's shared flow control (the
    /// PostgreSQL store's, so every process holds the same `limits`).
    /// Without one, limits hold within this process only. A second one is
    /// ignored (logged).
    pub fn with_flow_control(self, flow: Arc<dyn FlowControl>) -> Engine {
        if !self.worker.attach_flow_control(flow) {
            tracing::warn!("a flow control is attached already; the second is ignored");
        }
        self
    }

    /// Gives the engine the tracer it makes runs' spans with
    /// ([`crate::trace`]): from then on each new run is one trace, and runs
    /// admitted with a trace context get spans for their steps, attempts,
    /// waits and operator actions. Without one the engine makes no span
    /// and stores no trace context. It never touches the global provider.
    /// A second tracer is ignored.
    pub fn with_tracer(self, tracer: opentelemetry::global::BoxedTracer) -> Engine {
        if !self.spans.attach(crate::trace::RunTracer::new(tracer)) {
            tracing::warn!("a tracer is attached already; the second is ignored");
        }
        self
    }

    /// Whether this engine runs with `--recovery-only`.
    pub fn recovery_only(&self) -> bool {
        self.health.recovery_only()
    }

    /// Reads the store's restore epoch and works under it from now on (the
    /// `coordinator` binary calls it once at startup, so the epoch is the
    /// one the process started under). A later call changes nothing.
    /// Returns the epoch this engine works under.
    ///
    /// # Errors
    /// The store's.
    pub async fn adopt_restore_epoch(&self) -> Result<u64, StoreError> {
        self.worker.adopt_restore_epoch().await
    }

    /// Whether the store refused this process's lease as
    /// `restore.lease-incompatible` (a restore hold was placed after it
    /// started): it leases nothing any more and should stop.
    pub fn fenced(&self) -> bool {
        self.health.fenced()
    }

    /// How many jobs one [`Engine::tick`] leases at most.
    pub fn batch(&self) -> usize {
        self.worker.batch()
    }

    /// Wakes one idle worker lane of this process ([`Engine::woken`]); a
    /// wake while no lane waits is kept for the next lane that does.
    pub fn wake_one(&self) {
        self.worker.wake_one()
    }

    /// Gives back the leases of handed-off jobs no lane has started (at
    /// shutdown), so that another process takes them at once rather than
    /// when their leases run out. Errors are logged: the leases then run
    /// out by themselves.
    pub async fn release_handed(&self) {
        self.worker.release_handed().await
    }

    /// Waits for [`Engine::wake_one`] (at once when a wake is kept).
    pub async fn woken(&self) {
        self.worker.woken().await
    }

    /// The earliest due instant (Unix seconds) of a job no lease holds
    /// ([`JobQueue::next_due`]): the worker's timer sleeps until then.
    ///
    /// # Errors
    /// The store's.
    pub async fn next_due(&self) -> Result<Option<i64>, StoreError> {
        self.worker.next_due().await
    }

    /// Whether an audited answer would be released now, without writing
    /// anything: no journal is attached (nothing is audited), or the one
    /// attached did not fail its last append and its file is there
    /// ([`AuditJournal::healthy`]). `/ready` asks this.
    pub fn audit_ready(&self) -> bool {
        self.health.audit_ready()
    }

    /// Whether the audit journal takes an append now: a probe line
    /// appended and synced ([`AuditJournal::probe`]); false without a
    /// journal. Doctor asks this.
    pub async fn audit_probe(&self) -> bool {
        self.health.audit_probe().await
    }

    /// Appends the record `build` makes with the audit key, `fsync`ed before
    /// this returns. Records nothing (and succeeds) when no journal is
    /// attached.
    ///
    /// # Errors
    /// The journal's I/O error: the audited answer must not be released
    /// (`audit.response-unavailable`).
    pub fn audit(&self, build: impl FnOnce(&AuditKey) -> AuditRecord) -> std::io::Result<()> {
        self.health.audit(build)
    }

    /// The deployment-wide holds, read from the store (every process on
    /// the database obeys the same holds).
    ///
    /// # Errors
    /// The store's.
    pub async fn holds(&self) -> Result<Holds, StoreError> {
        self.operator.holds().await
    }

    /// Changes the holds: `change` sees the current holds and either
    /// changes them or refuses; the change is stored only if no other
    /// process changed them meanwhile (else `change` runs again on the
    /// new holds). Returns the holds after.
    ///
    /// # Errors
    /// The refusal `change` returns, or the store's.
    pub async fn update_holds<E: From<StoreError>>(
        &self,
        change: impl Fn(&mut Holds) -> Result<(), E>,
    ) -> Result<Holds, E> {
        self.operator.update_holds(change).await
    }

    /// Each limited connection's calls in flight and waiting now, from
    /// the shared flow control: every connection of the runtime file with
    /// `limits` (zero when it saw no call yet), and any other the flow
    /// control holds (a `Retry-After` of a connection without `limits`).
    ///
    /// # Errors
    /// The flow control's (the store's).
    pub async fn connection_flows(
        &self,
    ) -> Result<BTreeMap<String, coordinator_ports::flow::ConnectionFlow>, StoreError> {
        self.worker.connection_flows().await
    }

    /// The counters the metrics listener renders.
    pub fn counters(&self) -> &Counters {
        self.health.counters()
    }

    /// Counts a store error (the `coordinator_store_errors_total` metric)
    /// and hands it back.
    pub fn seen(&self, e: StoreError) -> StoreError {
        self.health.count_outage(e)
    }

    /// Whether the store answers and can be written to (readiness).
    ///
    /// # Errors
    /// The store's.
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.health.ping().await
    }

    /// The active revision of each workflow.
    pub fn active_revisions(&self) -> &BTreeMap<String, String> {
        self.admission.active_revisions()
    }

    /// The engine clock's current instant, Unix seconds (the event
    /// signature's clock-skew check uses it, so a manual clock drives it).
    pub fn now_unix(&self) -> i64 {
        self.admission.now_unix()
    }

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
        self.worker.tick().await
    }

    /// Ticks until a tick leases nothing (at most `max_ticks` times);
    /// returns the jobs leased in all. For tests and for draining.
    ///
    /// # Errors
    /// The store's.
    pub async fn run_until_idle(&self, max_ticks: usize) -> Result<usize, StoreError> {
        self.worker.run_until_idle(max_ticks).await
    }

    /// Admits a run (SPEC §8 `POST /v1/runs`): the revision must be the
    /// active one, the VM checks the input, and the run and its first jobs
    /// are stored in one step. Returns `(created, run)`: `false` for a
    /// repeat of the same key, revision and input.
    ///
    /// # Errors
    /// See [`AdmitError`].
    pub async fn admit(
        &self,
        principal: &Principal,
        request: StartRequest,
        idempotency_key: &str,
    ) -> Result<(bool, RunRecord), AdmitError> {
        self.admission
            .admit(principal, request, idempotency_key)
            .await
    }

    /// The trigger `trigger` of `workflow`'s active Program, or `None` when
    /// no package serves the workflow or its Program has no such trigger.
    pub fn trigger(&self, workflow: &str, trigger: &str) -> Option<TriggerInfo> {
        self.admission.trigger(workflow, trigger)
    }

    /// Admits a run from a verified event (SPEC §2.4 `POST
    /// /v1/events/{workflow}/{trigger}`): the event's `source` must be
    /// `origin`'s URI and its `type` the trigger's `eventType`; the
    /// trigger's mappings give the idempotency value and the input; the run
    /// is admitted under the active revision with `origin` as its owner and
    /// the start identity [`AdmissionKey::event_start_identity`]. Returns
    /// `(created, run)`: `false` for a repeat with the same idempotency
    /// value and the same input. Counted as an admission. With traces on,
    /// the run's admission span is the child of `trace_parent` (the
    /// request's `traceparent`) when given.
    ///
    /// # Errors
    /// See [`AdmitError`] (the `Event*` and `UnknownTrigger` variants are
    /// this route's).
    pub async fn admit_event(
        &self,
        origin: &EventOrigin,
        workflow: &str,
        trigger: &str,
        event: &Value,
        trace_parent: Option<coordinator_ports::TraceParent>,
    ) -> Result<(bool, RunRecord), AdmitError> {
        self.admission
            .admit_event(origin, workflow, trigger, event, trace_parent)
            .await
    }

    /// The run with this id; `None` also for an id that is not a UUID.
    ///
    /// # Errors
    /// The store's.
    pub async fn get(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        self.operator.get(run_id).await
    }

    /// A page of runs.
    ///
    /// # Errors
    /// The store's ([`StoreError::BadCursor`] for a foreign cursor).
    pub async fn list(&self, filter: &RunFilter) -> Result<RunPage, StoreError> {
        self.operator.list(filter).await
    }

    /// Each visited step with its effect, attempts, and the current wait's
    /// due time and observation count.
    ///
    /// # Errors
    /// The store's.
    pub async fn inspect(&self, run: &RunRecord) -> Result<Vec<InspectedStep>, StoreError> {
        self.operator.inspect(run).await
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
        self.operator.act(run_id, action).await
    }

    /// Retention (seed 000 "Erase ended payloads"): erases the payloads of
    /// at most `limit` runs (1..=100) that ended before `before_unix`,
    /// oldest ended first, never live or uncertain work
    /// ([`Maintenance::erase_payloads`]); stamped with this engine's clock.
    ///
    /// # Errors
    /// The store's.
    pub async fn retain(&self, before_unix: i64, limit: u32) -> Result<Erasure, StoreError> {
        self.operator.retain(before_unix, limit).await
    }

    /// `POST /v1/review-completions`: brings the next read of this review
    /// request forward (never sooner than the observation floor after the
    /// last read). Returns how many waits moved.
    ///
    /// # Errors
    /// The store's.
    pub async fn bring_forward(&self, review_request_id: &str) -> Result<usize, StoreError> {
        self.operator.bring_forward(review_request_id).await
    }

    /// `restore-hold`: places the restore hold and the admission hold. A
    /// new placement moves the restore epoch and clears the attestation.
    /// Then holds back every restored prepared command (also when the hold
    /// was in place already, so a placement that stopped half way is
    /// finished by placing it again). Returns the holds after and how many
    /// prepared commands this call held back.
    ///
    /// # Errors
    /// The store's.
    pub async fn place_restore_hold(&self) -> Result<(Holds, u64), HoldError> {
        self.operator.place_restore_hold().await
    }

    /// `complete-execution-recovery`: the operator attests the execution
    /// history; only under the restore hold.
    ///
    /// # Errors
    /// [`HoldError::HoldRequired`] without the restore hold; the store's.
    pub async fn complete_execution_recovery(&self) -> Result<Holds, HoldError> {
        self.operator.complete_execution_recovery().await
    }

    /// `release-restore-hold`: refused while a live run needs review or
    /// holds an unknown effect, unless execution recovery was attested (then
    /// every run needing review is recorded [`Review::Attested`]). Holds
    /// back any restored prepared command a placement left first.
    ///
    /// # Errors
    /// [`HoldError::HoldRequired`], [`HoldError::ReviewRequired`],
    /// [`HoldError::Unresolved`]; the store's.
    pub async fn release_restore_hold(&self) -> Result<Holds, HoldError> {
        self.operator.release_restore_hold().await
    }

    /// `release-admission-hold`: only once the restore hold is released.
    ///
    /// # Errors
    /// [`HoldError::HoldRequired`] without the admission hold,
    /// [`HoldError::Unresolved`] while the restore hold is in place; the
    /// store's.
    pub async fn release_admission_hold(&self) -> Result<Holds, HoldError> {
        self.operator.release_admission_hold().await
    }

    /// Whether the active packages are still the ones this process started
    /// with (the doctor's `activationReady`).
    ///
    /// # Errors
    /// The store's.
    pub async fn activation_current(&self) -> Result<bool, StoreError> {
        self.admission.activation_current().await
    }
}
