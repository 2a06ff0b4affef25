//! Process-wide counters for the metrics listener, and the wait kind of a
//! run (no label is ever a workflow, run or principal).

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use coordinator_ports::flow::FlowLimit;
use coordinator_vm::RunState;

/// Process-wide counters for the metrics listener, one field per metric of
/// docs/operations.md "Metrics" that the engine counts. Each label set is
/// small and fixed (outcomes, answer kinds, run states): never a workflow,
/// run or principal.
#[derive(Debug, Default)]
pub struct Counters {
    values: Mutex<CounterValues>,
}

/// The counters' values at one moment. Counts are since the process
/// started; a label not yet seen is absent from its map.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CounterValues {
    /// `coordinator_admissions`: start requests by outcome (`created`,
    /// `existing`, `key-reused`, `refused`, `held`, `store-error`).
    pub admissions: BTreeMap<String, u64>,
    /// `coordinator_dispatch_attempts`: dispatch attempts by result (an
    /// answer kind, `interrupted` or `host-fault`).
    pub dispatch_attempts: BTreeMap<String, u64>,
    /// `coordinator_runs_ended`: runs this process saw end, by ended state.
    pub runs_ended: BTreeMap<String, u64>,
    /// `coordinator_store_errors`: store operations that failed because the
    /// store was unavailable.
    pub store_errors: u64,
    /// `coordinator_connection_throttled`: calls this process told to
    /// wait, by (connection, limit: `in-flight`, `rate`, `retry-after`).
    pub throttled: BTreeMap<(String, FlowLimit), u64>,
    /// `coordinator_connection_retry_after_honoured`: a product's
    /// `Retry-After` recorded for its connection, by connection.
    pub retry_after_honoured: BTreeMap<String, u64>,
}

impl Counters {
    /// Counts one start request that ended with `outcome`.
    pub fn admission(&self, outcome: &str) {
        add(&mut self.lock().admissions, outcome);
    }

    /// Counts one dispatch attempt that ended with `result`.
    pub fn dispatch_attempt(&self, result: &str) {
        add(&mut self.lock().dispatch_attempts, result);
    }

    /// Counts one run that ended in `state`.
    pub fn run_ended(&self, state: &str) {
        add(&mut self.lock().runs_ended, state);
    }

    /// Counts one store operation that failed because the store was
    /// unavailable.
    pub fn store_error(&self) {
        self.lock().store_errors += 1;
    }

    /// Counts one call on `connection` told to wait for `limit`.
    pub fn throttled(&self, connection: &str, limit: FlowLimit) {
        *self
            .lock()
            .throttled
            .entry((connection.to_owned(), limit))
            .or_insert(0) += 1;
    }

    /// Counts one `Retry-After` of `connection`'s product recorded.
    pub fn retry_after_honoured(&self, connection: &str) {
        add(&mut self.lock().retry_after_honoured, connection);
    }

    /// Every counter's value now.
    pub fn values(&self) -> CounterValues {
        self.lock().clone()
    }

    fn lock(&self) -> MutexGuard<'_, CounterValues> {
        match self.values.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

fn add(counts: &mut BTreeMap<String, u64>, label: &str) {
    match counts.get_mut(label) {
        Some(n) => *n += 1,
        None => {
            counts.insert(label.to_owned(), 1);
        }
    }
}

/// The kind of the wait a run is in: `wait-until`, `wait-for`, or `None`
/// (the VM's [`coordinator_vm::wait_kind`], as a metric label).
pub fn wait_kind(state: &RunState) -> Option<&'static str> {
    coordinator_vm::wait_kind(state).map(coordinator_vm::WaitKind::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_metric_counts_its_own_labels() {
        let c = Counters::default();
        c.admission("created");
        c.admission("created");
        c.admission("held");
        c.dispatch_attempt("success");
        c.run_ended("finished");
        c.store_error();
        let v = c.values();
        assert_eq!(
            v.admissions.into_iter().collect::<Vec<_>>(),
            [("created".to_owned(), 2), ("held".to_owned(), 1)]
        );
        assert_eq!(
            v.dispatch_attempts.into_iter().collect::<Vec<_>>(),
            [("success".to_owned(), 1)]
        );
        assert_eq!(
            v.runs_ended.into_iter().collect::<Vec<_>>(),
            [("finished".to_owned(), 1)]
        );
        assert_eq!(v.store_errors, 1);
    }
}
