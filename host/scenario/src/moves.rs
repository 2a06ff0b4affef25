//! Cases that move their run to another revision of the workflow
//! (`move: {project, step, to}`, docs/scenarios.md "Moves"): the revisions
//! they move to ([`MoveTargets`], `targets.rs`, re-exported here: the
//! caller compiles them, this crate compiles nothing), and the moved
//! cases run for a given revision B ([`run_moved_cases`], what
//! `coordinatorctl move plan` holds a wait to).

use std::collections::BTreeMap;

use coordinator_source::{Located, YamlDocument};
use coordinator_vm::Vm;
use serde::Serialize;

use crate::file::ScenarioFile;
use crate::run;
pub use crate::targets::{is_movable_wait, MoveTargets};

/// One moved case run for [`run_moved_cases`].
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MovedCase {
    /// The case id.
    pub case: String,
    /// The step of revision B the run moves to ([`crate::file::CaseMove::target_step`]).
    pub to: String,
    /// Whether it ran and every expectation held.
    pub passed: bool,
    /// Why not, for a case that did not pass, on one line: the first
    /// difference (then the run's failure, if it failed), or the scenario
    /// faults that stopped it (`error[CODE] message`), joined by `; `.
    pub problem: Option<String>,
    /// The case's `move` member in the scenarios file (at its key): where
    /// `move plan` locates a finding about the case.
    #[serde(skip)]
    pub at: Located,
}

/// Runs the cases of `file` (read from `doc`, checked with [`crate::file::check`])
/// that move to revision `to_revision` (`sha256:...`: the cases whose
/// `move.project` loaded to that revision in `targets`), starting on `from`
/// (revision A). Returns, per A wait step the cases move at, the cases run
/// there in file order: `move plan` refuses a wait one of whose cases did
/// not pass.
pub fn run_moved_cases(
    from: &Vm,
    doc: &YamlDocument,
    file: &ScenarioFile,
    targets: &MoveTargets,
    to_revision: &str,
) -> BTreeMap<String, Vec<MovedCase>> {
    let mut by_wait: BTreeMap<String, Vec<MovedCase>> = BTreeMap::new();
    for (i, case) in file.cases.iter().enumerate() {
        let Some(m) = &case.move_to else { continue };
        if targets.revision(&m.project) != Some(to_revision) {
            continue;
        }
        let (passed, problem) = match run::run_case_with_moves(from, targets, doc, i, case) {
            Ok(report) => (
                report.passed,
                (!report.passed).then(|| report.problem().lines().collect::<Vec<_>>().join("; ")),
            ),
            Err(faults) => {
                let each: Vec<String> = faults
                    .iter()
                    .map(|d| format!("{}[{}] {}", d.severity.as_str(), d.code, d.message))
                    .collect();
                (false, Some(each.join("; ")))
            }
        };
        let moved = MovedCase {
            case: case.id.clone(),
            to: m.target_step().to_owned(),
            passed,
            problem,
            at: doc.locate_key(&format!("/cases/{i}/move")),
        };
        by_wait.entry(m.step.clone()).or_default().push(moved);
    }
    by_wait
}
