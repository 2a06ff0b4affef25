//! One role of the engine: the [`Operator`]. [`actions`]: `cancel`,
//! `retry-same`, `reconcile`, inspection, listing, retention and review
//! completions; [`restore`]: the deployment-wide holds and the restore
//! sequence (the restore epoch, review of restored prepared commands,
//! attestations); [`moves`]: a waiting run moved to another revision by a
//! move certificate. All are `impl Operator`.

pub mod actions;
pub mod moves;
pub mod restore;

use std::sync::Arc;

use coordinator_ports::store::{HoldsAndReviews, JobQueue, Maintenance, RunMoves, RunReads};

use crate::job_runner::JobRunner;
use crate::parts::Parts;

/// The store ports the operator may touch: nothing else of the store.
/// An operator action takes what it needs from here and commits through
/// the committer's one commit path.
pub(crate) struct OperatorPorts {
    /// Reads runs, pages of runs and a run's jobs.
    pub(crate) runs: Arc<dyn RunReads>,
    /// The deployment-wide holds, the review survey and attestations.
    pub(crate) holds: Arc<dyn HoldsAndReviews>,
    /// Retention.
    pub(crate) maintenance: Arc<dyn Maintenance>,
    /// The jobs it leases (a reconcile's lookup), claims (the restore
    /// hold's sweep), discards and brings forward.
    pub(crate) queue: Arc<dyn JobQueue>,
    /// A waiting run moved to another revision ([`moves`]).
    pub(crate) moves: Arc<dyn RunMoves>,
}

/// One role of the engine: operator actions (`cancel`, `retry-same`,
/// `reconcile`), inspection, listing, retention, review completions, the
/// deployment-wide holds and the restore sequence (`restore.rs`). It holds
/// the job runner to carry out a reconcile's receipt lookup at once.
pub struct Operator {
    ports: OperatorPorts,
    /// Carries out a reconcile's receipt lookup at once.
    runner: Arc<JobRunner>,
    parts: Parts,
    /// `observation.minimumIntervalSeconds`: a review completion brings a
    /// read no sooner than this after the last.
    observation_floor_seconds: u64,
    /// How long a reconcile waits for a lookup a worker took first.
    request_budget_seconds: i64,
}

impl Operator {
    /// Operator actions over `ports` with `parts`, carrying
    /// lookups out at once with `runner`.
    pub(crate) fn new(
        ports: OperatorPorts,
        runner: Arc<JobRunner>,
        parts: Parts,
        observation_floor_seconds: u64,
        request_budget_seconds: i64,
    ) -> Self {
        Operator {
            ports,
            runner,
            parts,
            observation_floor_seconds,
            request_budget_seconds,
        }
    }
}
