//! The [`Engine`]: its construction, and its public face. It is three
//! roles ([`Admission`], `admission.rs`; [`Worker`], `worker.rs`;
//! [`Operator`], `operator/`) and a [`Health`] part, each built here from
//! the ports it uses; what the roles share is the `Committer`
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
    Definitions, HoldsAndReviews, JobQueue, Maintenance, RunAdmission, RunMoves, RunReads, RunStore,
};
use coordinator_runtime::audit::AuditJournal;
use coordinator_runtime::config::Connection;
use coordinator_runtime::keys::{AdmissionKey, AuditKey};

use crate::admission::{Admission, AdmissionPorts};
use crate::committer::{Committer, CommitterParts};
use crate::config::EngineConfig;
pub use crate::config::EngineError;
use crate::health::{Fence, Health};
use crate::job_runner::WorkerPorts;
use crate::jobs::JobMaker;
use crate::leases::LeaseRule;
use crate::metrics::Counters;
use crate::operator::{Operator, OperatorPorts};
use crate::parts::Parts;
use crate::programs::Programs;
use crate::run_end_waiters::RunEndWaiters;
use crate::spans::Spans;
use crate::worker::Worker;

/// The service host's engine: its three roles and its health part, each
/// built in [`Engine::new`] from the ports it uses. The server calls the
/// role it means (`engine.admission.admit(..)`, `engine.worker.tick()`,
/// `engine.operator.act(..)`, `engine.health.fenced()`). `Send + Sync`;
/// share it in an `Arc`.
pub struct Engine {
    /// Starts by token and by event ([`Admission`]).
    pub admission: Admission,
    /// Leases due jobs and carries each out ([`Worker`]).
    pub worker: Worker,
    /// Operator actions, inspection, listing, retention, review
    /// completions, the holds and the restore sequence ([`Operator`]).
    pub operator: Operator,
    /// The fence, the audit journal, the store's ping, the counters
    /// ([`Health`]).
    pub health: Arc<Health>,
    /// The callers waiting for runs' ends ([`RunEndWaiters`]), woken by
    /// the commits of this process that end them.
    pub run_ends: Arc<RunEndWaiters>,
    /// The spans' tracer, handed over by [`Engine::with_tracer`].
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
        let maintenance: Arc<dyn Maintenance> = store.clone();
        let moves: Arc<dyn RunMoves> = store;
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
        let run_ends = committer.run_ends().clone();
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
                    moves,
                },
                worker.runner(),
                parts,
                config.observation_floor_seconds,
                config.request_budget_seconds,
            ),
            worker,
            health,
            run_ends,
            spans,
        })
    }

    /// Gives the engine this process's audit journal and the audit key
    /// (`deployment.auditFile`, `deployment.auditKeyRef`). Without one,
    /// [`Health::audit`] records nothing and the doctor report says
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
}
