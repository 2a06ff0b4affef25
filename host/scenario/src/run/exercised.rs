//! What the VM did in one case, recorded as the case runs, for scenario
//! coverage (`coordinatorctl test --coverage`, docs/coverage.md). Nothing
//! here is worked out from the workflow's graph: each entry is read from
//! what the VM returned while the host drove it — the steps on the run's
//! path, the edges it reported taking ([`coordinator_vm::Resumed::edges`]),
//! the outcome it ended with, the call it held for an operator, and the
//! recoveries it accepted.

use std::collections::BTreeSet;

use coordinator_ir::Program;
use coordinator_vm::{Event, Resumed, RunStatus, Vm};

pub use coordinator_vm::{Edge, EdgeTaken};

/// A recovery path of a call whose effect may be unknown (SPEC §6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RecoveryPath {
    /// An uncertain answer held the run for an operator (`attention`,
    /// effect `unknown`).
    Held,
    /// The operator's `retry-same` sent the same command again.
    RetrySame,
    /// The operator's `reconcile` looked up the receipt.
    Reconcile,
}

impl RecoveryPath {
    /// `held`, `retry-same` or `reconcile`.
    pub fn as_str(self) -> &'static str {
        match self {
            RecoveryPath::Held => "held",
            RecoveryPath::RetrySame => "retry-same",
            RecoveryPath::Reconcile => "reconcile",
        }
    }
}

/// The recovery paths the VM offers call step `step` of `program`, in the
/// order held, retry-same, reconcile: none for a read (the VM sends it
/// again and never holds it) or a step that is not a call; otherwise held,
/// then the recoveries [`coordinator_vm::recovery_support`] allows.
pub fn recovery_paths(program: &Program, step: &str) -> Vec<RecoveryPath> {
    let Some(support) = coordinator_vm::recovery_support(program, step) else {
        return Vec::new();
    };
    [
        (support.holds, RecoveryPath::Held),
        (support.holds && support.retry_same, RecoveryPath::RetrySame),
        (support.holds && support.reconcile, RecoveryPath::Reconcile),
    ]
    .into_iter()
    .filter_map(|(offered, path)| offered.then_some(path))
    .collect()
}

/// What one case exercised (step and outcome names as in `workflow.yaml`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Exercised {
    /// The steps the run entered.
    pub steps: BTreeSet<String>,
    /// The edges the run took.
    pub edges: BTreeSet<EdgeTaken>,
    /// The outcome the run ended with, if it reached a finish.
    pub outcomes: BTreeSet<String>,
    /// The recovery paths taken, by call step: a hold the VM reported
    /// (the run in `attention` with the call held) and the recoveries it
    /// accepted.
    pub recoveries: BTreeSet<(String, RecoveryPath)>,
    /// The wait steps where the run moved to another revision (a case's
    /// `move`, done by the VM's move); what it did after is not recorded
    /// here (those are the other revision's steps).
    pub moves: BTreeSet<String>,
}

impl Exercised {
    /// Records what the VM returned for `event` (`None`: the admission),
    /// applied to a run whose held call before it was `held_before`.
    pub(super) fn record(
        &mut self,
        vm: &Vm,
        event: Option<&Event>,
        held_before: Option<&str>,
        resumed: &Resumed,
    ) {
        let state = &resumed.state;
        self.steps.extend(state.path.iter().cloned());
        self.edges.extend(resumed.edges.iter().cloned());
        self.outcomes.extend(state.outcome.iter().cloned());
        if state.status == RunStatus::Attention {
            if let Some(step) = vm.held_call(state) {
                self.recoveries
                    .insert((step.to_owned(), RecoveryPath::Held));
            }
        }
        let recovery = match event {
            Some(Event::RetrySame { .. }) => Some(RecoveryPath::RetrySame),
            Some(Event::Reconcile { .. }) => Some(RecoveryPath::Reconcile),
            _ => None,
        };
        if let (Some(recovery), Some(step)) = (recovery, held_before) {
            self.recoveries.insert((step.to_owned(), recovery));
        }
    }
}
