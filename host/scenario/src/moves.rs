//! Cases that move their run to another revision of the workflow
//! (`move: {project, step, to}`, docs/scenarios.md "Moves"): the revisions
//! they move to ([`MoveTargets`], which the caller compiles: this crate
//! compiles nothing), the VM's [`MoveTarget`] of a case, and the moved
//! cases run for a given revision B ([`run_moved_cases`], what
//! `coordinatorctl move plan` holds a wait to).

use std::collections::BTreeMap;

use coordinator_ir::carried::carried_steps;
use coordinator_ir::Program;
use coordinator_source::{Located, YamlDocument};
use coordinator_vm::{MoveTarget, Vm};
use serde::Serialize;

use crate::file::{CaseMove, ScenarioFile};
use crate::run;

/// The revisions the cases of one scenarios file move to, by `move.project`
/// as written: each loaded (a [`Vm`] and its revision) or the reason it
/// could not be (it does not compile, or its Program does not load).
#[derive(Debug, Default)]
pub struct MoveTargets {
    loaded: BTreeMap<String, Result<Target, String>>,
}

#[derive(Debug)]
struct Target {
    vm: Vm,
    revision: String,
}

impl MoveTargets {
    /// Records `project` (as written in `move.project`) as compiled to
    /// `program`, or as refused with `reason` (a sentence naming what is
    /// wrong: it does not compile, its files are missing); a Program that
    /// does not load is recorded as refused with the VM's reason.
    pub fn insert(&mut self, project: &str, program: Result<&Program, String>) {
        let loaded = program.and_then(|p| {
            Vm::new(p)
                .map(|vm| Target {
                    vm,
                    revision: p.revision(),
                })
                .map_err(|e| format!("its compiled workflow does not load: {}", e.0))
        });
        self.loaded.insert(project.to_owned(), loaded);
    }

    /// `project`'s loaded revision, or the reason it could not be loaded;
    /// `None` when it was never given.
    pub fn get(&self, project: &str) -> Option<Result<&Vm, &str>> {
        self.loaded.get(project).map(|t| match t {
            Ok(t) => Ok(&t.vm),
            Err(reason) => Err(reason.as_str()),
        })
    }

    /// `project`'s revision (`sha256:...`), when it was loaded.
    pub fn revision(&self, project: &str) -> Option<&str> {
        match self.loaded.get(project) {
            Some(Ok(t)) => Some(&t.revision),
            Some(Err(_)) | None => None,
        }
    }
}

/// Whether `step` of `program` is a step where a run can move (a
/// `wait-until` or `wait-for`: the VM's [`coordinator_vm::move_source`]).
pub fn is_movable_wait(program: &Program, step: &str) -> bool {
    coordinator_vm::move_source(program, step).is_ok()
}

/// The VM's move of a case's run from `from` to `to`: from `m.step` to
/// [`CaseMove::target_step`], carrying what
/// [`coordinator_ir::carried::carried_steps`] says (the rule the move
/// certificate is written with).
pub fn move_target(from: &Program, to: &Program, m: &CaseMove) -> MoveTarget {
    MoveTarget {
        from_step: m.step.clone(),
        to_step: m.target_step().to_owned(),
        carried: carried_steps(from, to, &m.step),
    }
}

/// One moved case run for [`run_moved_cases`].
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MovedCase {
    /// The case id.
    pub case: String,
    /// The step of revision B the run moves to ([`CaseMove::target_step`]).
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
