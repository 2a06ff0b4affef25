//! The revisions a project's scenario cases move to (`move.project`,
//! docs/scenarios.md "Moves"): each compiled here, since the scenario host
//! compiles nothing, and handed over as [`MoveTargets`]; and the moved
//! cases of one revision B run for `move plan` ([`moved_case_results`]).

use std::collections::BTreeMap;
use std::path::Path;

use coordinator_ir::Program;
use coordinator_scenario::file::ScenarioFile;
use coordinator_scenario::moves::{run_moved_cases, MoveTargets, MovedCase};
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

/// "it does not compile: N errors, the first: error[CODE] FILE:LINE:COLUMN MESSAGE".
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

/// What the moved cases of a project gave for one revision B.
// `move plan` (issue 34) calls these; until it lands only the tests do.
#[cfg_attr(not(test), allow(dead_code))]
#[derive(Debug, Default)]
pub struct MovedCaseResults {
    /// Per wait step of A (`move.step`), the cases that move there to B,
    /// run, in file order (each passed or not, with why not).
    pub by_wait: BTreeMap<String, Vec<MovedCase>>,
    /// Faults of the scenarios file that kept every case from running
    /// (it cannot be read, or a case is refused before running); empty
    /// when the cases ran.
    pub diagnostics: Vec<Diagnostic>,
}

/// Runs the scenario cases of `project` (A, compiled to `from`) whose
/// `move.project` compiles to revision `to` (compared by revision, so B
/// may be given as a directory or a package), starting on A and moving at
/// their wait; per A wait step, the cases run and whether each passed.
/// A project without `scenarios.yaml` has no moved cases. `move plan`
/// refuses a wait one of whose cases did not pass.
#[cfg_attr(not(test), allow(dead_code))]
pub fn moved_case_results(project: &Path, from: &Program, to: &Program) -> MovedCaseResults {
    if !project.join("scenarios.yaml").is_file() {
        return MovedCaseResults::default();
    }
    let display = project.display().to_string();
    let (doc, scenarios, targets) = match super::read_scenarios(project, &display, from) {
        Ok(read) => read,
        Err(diagnostics) => {
            return MovedCaseResults {
                by_wait: BTreeMap::new(),
                diagnostics,
            }
        }
    };
    let vm = match coordinator_scenario::run::load_vm(from, &doc.file) {
        Ok(vm) => vm,
        Err(d) => {
            return MovedCaseResults {
                by_wait: BTreeMap::new(),
                diagnostics: vec![d],
            }
        }
    };
    MovedCaseResults {
        by_wait: run_moved_cases(&vm, &doc, &scenarios, &targets, &to.revision()),
        diagnostics: Vec::new(),
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
        assert!(results.diagnostics.is_empty(), "{:?}", results.diagnostics);
        let due = &results.by_wait["due"];
        assert_eq!(due.len(), 3);
        assert!(due.iter().all(|c| c.passed), "{due:?}");
        // Another revision B: no case moves to it.
        assert!(moved_case_results(&a_dir, &a, &a).by_wait.is_empty());
        // No scenarios file: nothing to run.
        let empty = tempfile::tempdir().expect("temp dir");
        assert!(moved_case_results(empty.path(), &a, &b).by_wait.is_empty());
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
