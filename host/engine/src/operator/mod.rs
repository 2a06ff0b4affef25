//! One role of the engine: the [`Operator`]. [`actions`]: `cancel`,
//! `retry-same`, `reconcile`, inspection, listing, retention and review
//! completions; [`restore`]: the deployment-wide holds and the restore
//! sequence (the restore epoch, review of restored prepared commands,
//! attestations). Both are `impl Operator`, over the one commit path.

pub mod actions;
pub mod restore;

use std::sync::Arc;

use coordinator_ports::store::RunStore;

use crate::job_runner::JobRunner;
use crate::parts::Parts;

/// One role of the engine: operator actions (`cancel`, `retry-same`,
/// `reconcile`), inspection, listing, retention, review completions, the
/// deployment-wide holds and the restore sequence (`restore.rs`). It holds
/// the job runner to carry out a reconcile's receipt lookup at once.
pub struct Operator {
    /// Reads runs and their jobs; the holds and reviews; retention; the
    /// jobs it leases, claims, discards and brings forward.
    store: Arc<dyn RunStore>,
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
    /// Operator actions over `store` with `parts`, carrying lookups out
    /// at once with `runner`.
    pub(crate) fn new(
        store: Arc<dyn RunStore>,
        runner: Arc<JobRunner>,
        parts: Parts,
        observation_floor_seconds: u64,
        request_budget_seconds: i64,
    ) -> Self {
        Operator {
            store,
            runner,
            parts,
            observation_floor_seconds,
            request_budget_seconds,
        }
    }
}
