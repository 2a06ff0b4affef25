//! The scenario cases of revision A that move their run to revision B
//! (docs/scenarios.md "Moves"), held to the plan: the caller runs them
//! (`coordinatorctl move plan`; the compiler runs nothing) and hands over
//! what they gave as [`MovedCases`]. A case that did not pass refuses the
//! wait it moves at (`coordinator.move.scenario-failed`, located at the
//! case in A's `scenarios.yaml`); faults of the scenarios file refuse the
//! whole plan, since a plan must not pass on cases that could not be read.

use std::collections::BTreeMap;

use coordinator_source::{Diagnostic, Located};
use serde::Serialize;

use crate::codes;

/// One scenario case of revision A whose run moves to revision B, as the
/// caller ran it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MovedCaseRun {
    /// The case id.
    pub case: String,
    /// The wait step of A the run moves at (`move.step`).
    pub wait: String,
    /// The step of B it moves to (`move.to`, else the wait's id).
    pub to: String,
    /// Whether it ran and every expectation held.
    pub passed: bool,
    /// Why not, on one line, for a case that did not pass.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// The case's `move` member in A's `scenarios.yaml` (file, line,
    /// column of its key, JSON Pointer `/cases/N/move`).
    #[serde(skip)]
    pub at: Located,
}

/// What A's scenario cases that move to B gave: the plan holds each wait
/// to the cases that move there to the plan's target.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MovedCases {
    /// Every case of A's scenarios that moves to revision B (compared by
    /// revision), in file order.
    pub runs: Vec<MovedCaseRun>,
    /// Faults of A's scenarios file that kept its cases from running (it
    /// cannot be read, or a case is refused before running): the plan is
    /// refused with them.
    pub faults: Vec<Diagnostic>,
}

impl MovedCases {
    /// The cases held to the move of wait `wait` to B's step `target`: those
    /// moving at `wait` to `target`, in file order. A case that moves at
    /// the wait to another step of B tests another move, not this one.
    pub(super) fn at<'c>(&'c self, wait: &'c str, target: &'c str) -> Vec<&'c MovedCaseRun> {
        self.runs
            .iter()
            .filter(|r| r.wait == wait && r.to == target)
            .collect()
    }
}

/// The finding each case held to the move of `wait` to `target` makes when
/// it did not pass.
pub(super) fn failed(cases: &[&MovedCaseRun], wait: &str, target: &str) -> Vec<Diagnostic> {
    cases
        .iter()
        .filter(|r| !r.passed)
        .map(|r| {
            Diagnostic::error(
                codes::MOVE_SCENARIO_FAILED,
                r.at.clone(),
                format!(
                    "scenario case `{}` moves its run at `{wait}` of revision A to `{target}` of revision B and does not pass: {}",
                    r.case,
                    r.problem.as_deref().unwrap_or("it did not pass")
                ),
                "Change revision B until the case passes (`coordinatorctl test` on revision A's project runs it), correct the case if B's behaviour is the one wanted, or let the runs on revision A drain.",
            )
        })
        .collect()
}

/// The cases held to each wait of the plan, by A's wait step: what
/// `move plan --format json` reports as `movedCases`.
pub type CasesByWait = BTreeMap<String, Vec<MovedCaseRun>>;
