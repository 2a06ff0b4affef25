//! Process-wide counters for the metrics listener, and the wait kind of a
//! run (no label is ever a workflow, run or principal).

use std::collections::BTreeMap;
use std::sync::Mutex;

use coordinator_vm::RunState;

/// Process-wide counters by (metric, label), for the metrics listener. Each
/// label set is small and fixed (outcomes, answer kinds, run states): never
/// a workflow, run or principal.
#[derive(Debug, Default)]
pub struct Counters {
    values: Mutex<BTreeMap<(&'static str, String), u64>>,
}

impl Counters {
    /// Adds one to `metric{label}`.
    pub fn add(&self, metric: &'static str, label: &str) {
        let mut guard = match self.values.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        *guard.entry((metric, label.to_owned())).or_insert(0) += 1;
    }

    /// The label values and counts of `metric`, sorted by label.
    pub fn of(&self, metric: &str) -> Vec<(String, u64)> {
        let guard = match self.values.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        guard
            .iter()
            .filter(|((m, _), _)| *m == metric)
            .map(|((_, l), v)| (l.clone(), *v))
            .collect()
    }
}

/// The kind of the wait a run is in: `wait-until`, `wait-for`, or `None`
/// (the VM's [`coordinator_vm::wait_kind`], as a metric label).
pub fn wait_kind(state: &RunState) -> Option<&'static str> {
    coordinator_vm::wait_kind(state).map(coordinator_vm::WaitKind::as_str)
}
