//! The revisions a project's scenario cases move to (`move.project`,
//! docs/scenarios.md "Moves"): each compiled here, since the scenario host
//! compiles nothing, and handed over as [`MoveTargets`]; and the moved
//! cases of one revision B run for `move plan` ([`moved_case_results`]).

use std::path::Path;

use coordinator_compiler::moves::{MovedCaseRun, MovedCases};
use coordinator_ir::Program;
use coordinator_scenario::file::ScenarioFile;
use coordinator_scenario::moves::{run_moved_cases, MoveTargets};
use coordinator_source::Diagnostic;

/// Compiles each project the cases of `file` move to: `move.project`
/// joined to `dir`, the directory of the scenarios file (shown as
/// `display_dir`). A project that does not compile is recorded with the
/// number of its errors and the first one, in text form.
pub fn load_move_targets(dir: &Path, display_dir: &str, file: &ScenarioFile) -> MoveTargets {
    let mut targets = MoveTargets::default();
    for project in file.move_projects() {
        let shown = Path::new(display_dir).join(project).display().to_string();
        let compiled = coordinator_compiler::compile_project(&dir.join(project), &shown);
        match &compiled.program {
            Some(program) => targets.insert(project, Ok(program)),
            None => targets.insert(project, Err(not_compiled(&compiled.diagnostics))),
        }
    }
    targets
}

/// "it does not compile: N errors, the first: error\[CODE\] FILE:LINE:COLUMN MESSAGE".
fn not_compiled(diagnostics: &[Diagnostic]) -> String {
    let errors: Vec<&Diagnostic> = diagnostics.iter().filter(|d| d.is_error()).collect();
    let first = errors
        .first()
        .map(|d| {
            let place = if d.line == 0 {
                d.file.clone()
            } else {
                format!("{}:{}:{}", d.file, d.line, d.column)
            };
            format!(", the first: error[{}] {place} {}", d.code, d.message)
        })
        .unwrap_or_default();
    format!(
        "it does not compile ({} error{}{first})",
        errors.len(),
        if errors.len() == 1 { "" } else { "s" }
    )
}

/// Runs the scenario cases of `project` (A, compiled to `from`) whose
/// `move.project` compiles to revision `to` (compared by revision, so B
/// may be given as any directory that compiles to it), starting on A and
/// moving at their wait: what `move plan` holds each wait to
/// (`coordinator_compiler::moves::plan_move`). `runs` are grouped by A's
/// wait step, each group in file order; `faults` are the faults of the
/// scenarios file that kept every case from running (it cannot be read,
/// or a case is refused before running), which refuse the plan. A project
/// without `scenarios.yaml` has no moved cases.
pub fn moved_case_results(project: &Path, from: &Program, to: &Program) -> MovedCases {
    if !project.join("scenarios.yaml").is_file() {
        return MovedCases::default();
    }
    let display = project.display().to_string();
    let (doc, scenarios, targets) = match super::read_scenarios(project, &display, from) {
        Ok(read) => read,
        Err(faults) => {
            return MovedCases {
                runs: Vec::new(),
                faults,
            }
        }
    };
    let vm = match coordinator_scenario::run::load_vm(from, &doc.file) {
        Ok(vm) => vm,
        Err(d) => {
            return MovedCases {
                runs: Vec::new(),
                faults: vec![d],
            }
        }
    };
    let by_wait = run_moved_cases(&vm, &doc, &scenarios, &targets, &to.revision());
    let runs = by_wait
        .into_iter()
        .flat_map(|(wait, cases)| {
            cases.into_iter().map(move |c| MovedCaseRun {
                case: c.case,
                wait: wait.clone(),
                to: c.to,
                passed: c.passed,
                problem: c.problem,
                at: c.at,
            })
        })
        .collect();
    MovedCases {
        runs,
        faults: Vec::new(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    const STARTER: &str = "../examples/delayed-follow-up";
    const SECOND: &str = "../examples/delayed-follow-up-v2";

    fn repo(rel: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
    }

    fn compiled(dir: &Path) -> Program {
        coordinator_compiler::compile_project(dir, "p")
            .program
            .expect("compiles")
    }

    /// DIR/a: the starter with golden/moves/scenarios.yaml (moving to
    /// `../delayed-follow-up-v2`), DIR/delayed-follow-up-v2: the second
    /// notice text.
    fn layout() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("temp dir");
        let a = dir.path().join("a");
        let b = dir.path().join("delayed-follow-up-v2");
        for (to, from) in [(&a, STARTER), (&b, SECOND)] {
            std::fs::create_dir(to).expect("dir");
            for name in ["workflow.yaml", "functions.rhai", "scenarios.yaml"] {
                std::fs::copy(repo(from).join(name), to.join(name)).expect("copy");
            }
        }
        std::fs::copy(
            repo("../golden/moves/scenarios.yaml"),
            a.join("scenarios.yaml"),
        )
        .expect("copy");
        dir
    }

    #[test]
    fn the_moved_cases_of_revision_b_are_run_by_wait() {
        let dir = layout();
        let a_dir = dir.path().join("a");
        let a = compiled(&a_dir);
        let b = compiled(&dir.path().join("delayed-follow-up-v2"));
        let results = moved_case_results(&a_dir, &a, &b);
        assert!(results.faults.is_empty(), "{:?}", results.faults);
        let due: Vec<(&str, &str, bool)> = results
            .runs
            .iter()
            .map(|r| (r.wait.as_str(), r.to.as_str(), r.passed))
            .collect();
        assert_eq!(due, [("due", "due", true); 3], "{:?}", results.runs);
        assert_eq!(results.runs[2].at.pointer, "/cases/2/move");
        // Another revision B: no case moves to it.
        assert!(moved_case_results(&a_dir, &a, &a).runs.is_empty());
        // No scenarios file: nothing to run.
        let empty = tempfile::tempdir().expect("temp dir");
        assert_eq!(
            moved_case_results(empty.path(), &a, &b),
            MovedCases::default()
        );
        // A scenarios file with faults: no case runs, the faults say why.
        std::fs::write(a_dir.join("scenarios.yaml"), "cases: [").expect("write");
        let broken = moved_case_results(&a_dir, &a, &b);
        assert!(broken.runs.is_empty() && !broken.faults.is_empty());
    }

    #[test]
    fn a_target_that_does_not_compile_is_named_with_its_first_error() {
        let dir = layout();
        let b = dir.path().join("delayed-follow-up-v2");
        std::fs::write(b.join("workflow.yaml"), "kind: Nothing\n").expect("write");
        let a_dir = dir.path().join("a");
        let scenarios = coordinator_scenario::file::ScenarioFile {
            api_version: String::new(),
            kind: String::new(),
            cases: Vec::new(),
        };
        assert!(load_move_targets(&a_dir, "a", &scenarios)
            .get("x")
            .is_none());
        let text = std::fs::read_to_string(a_dir.join("scenarios.yaml")).expect("read");
        let doc = coordinator_source::parse("a/scenarios.yaml", &text).expect("parses");
        let file = coordinator_scenario::file::parse(&doc).expect("reads");
        let targets = load_move_targets(&a_dir, "a", &file);
        let reason = targets
            .get("../delayed-follow-up-v2")
            .expect("compiled")
            .expect_err("refused");
        assert!(
            reason.starts_with("it does not compile (")
                && reason.contains("a/../delayed-follow-up-v2/workflow.yaml"),
            "{reason}"
        );
    }
}
