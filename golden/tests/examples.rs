//! Every maintained example project under `examples/` compiles, its
//! `scenarios.yaml` reads cleanly, and every case passes (the semantics of
//! `coordinatorctl test`, through the library API). Each case runs twice and
//! must give the identical report (determinism). The starter's cases that
//! move to its second notice text (`golden/moves/scenarios.yaml`) pass too.

use std::path::{Path, PathBuf};

use coordinator_scenario::{file, run};
use coordinator_source::Diagnostic;

/// The examples the project maintains (issue 3); a new directory under
/// `examples/` is picked up too, but none of these may disappear.
const MAINTAINED: [&str; 7] = [
    "decision-follow-up",
    "deferred-appointment",
    "delayed-follow-up",
    "delayed-follow-up-v2",
    "external-directory",
    "governed-action",
    "reviewed-notice",
];

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

fn projects() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(examples_dir())
        .expect("examples/ is readable")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.join("workflow.yaml").is_file())
        .collect();
    dirs.sort();
    dirs
}

fn errors(diags: &[Diagnostic]) -> Vec<String> {
    diags
        .iter()
        .filter(|d| d.is_error())
        .map(|d| format!("{d:?}"))
        .collect()
}

/// Runs every case of one project; returns (case id, report) pairs.
fn run_project(dir: &Path) -> Vec<run::CaseReport> {
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .expect("utf-8 name");
    let compiled = coordinator_compiler::compile_project(dir, name);
    assert!(
        errors(&compiled.diagnostics).is_empty(),
        "{name}: workflow refused: {:?}",
        errors(&compiled.diagnostics)
    );
    let program = compiled.program.expect("compiled program");
    let shown = format!("{name}/scenarios.yaml");
    let text = std::fs::read_to_string(dir.join("scenarios.yaml")).expect("scenarios.yaml");
    let doc = coordinator_source::parse(&shown, &text).expect("scenarios.yaml parses");
    let scenarios = file::read(&doc, &program)
        .unwrap_or_else(|d| panic!("{name}: scenarios refused: {:?}", errors(&d)));
    let vm = run::load_vm(&program, &shown).expect("the VM loads");
    assert!(!scenarios.cases.is_empty(), "{name}: no cases");
    scenarios
        .cases
        .iter()
        .enumerate()
        .map(|(i, case)| {
            run::run_case(&vm, &doc, i, case)
                .unwrap_or_else(|d| panic!("{name}/{}: scenario fault: {:?}", case.id, errors(&d)))
        })
        .collect()
}

#[test]
fn every_maintained_example_is_present() {
    let names: Vec<String> = projects()
        .iter()
        .filter_map(|p| p.file_name()?.to_str().map(str::to_owned))
        .collect();
    for m in MAINTAINED {
        assert!(names.iter().any(|n| n == m), "examples/{m} is missing");
    }
}

#[test]
fn every_example_case_passes_and_is_deterministic() {
    let mut total = 0;
    for dir in projects() {
        let first = run_project(&dir);
        let second = run_project(&dir);
        for report in &first {
            assert!(
                report.passed,
                "{}/{}: FAIL {}",
                dir.display(),
                report.id,
                report.difference.as_deref().unwrap_or("")
            );
        }
        assert_eq!(
            serde_json::to_string(&first).expect("report serializes"),
            serde_json::to_string(&second).expect("report serializes"),
            "{}: two runs differ",
            dir.display()
        );
        total += first.len();
    }
    assert!(total >= 60, "only {total} example cases ran");
}

/// `golden/moves/scenarios.yaml` on the starter (A), its runs moving at
/// `due` to `examples/delayed-follow-up-v2` (B, `../delayed-follow-up-v2`
/// from the starter's directory): every case passes, twice alike, each
/// run moved to B's revision.
#[test]
fn the_starters_cases_that_move_to_the_second_notice_text_pass() {
    let compile = |name: &str| {
        let compiled = coordinator_compiler::compile_project(&examples_dir().join(name), name);
        compiled.program.expect("compiles")
    };
    let (a, b) = (
        compile("delayed-follow-up"),
        compile("delayed-follow-up-v2"),
    );
    assert_ne!(a.revision(), b.revision());
    let text = std::fs::read_to_string(examples_dir().join("../golden/moves/scenarios.yaml"))
        .expect("golden/moves/scenarios.yaml");
    let doc = coordinator_source::parse("moves/scenarios.yaml", &text).expect("parses");
    let scenarios = file::parse(&doc).expect("reads");
    let mut targets = coordinator_scenario::moves::MoveTargets::default();
    targets.insert("../delayed-follow-up-v2", Ok(&b));
    let faults = file::check(&doc, &scenarios, &a, &targets);
    assert!(faults.is_empty(), "{:?}", errors(&faults));
    let vm = run::load_vm(&a, "moves").expect("the VM loads");
    let run_all = || -> Vec<run::CaseReport> {
        scenarios
            .cases
            .iter()
            .enumerate()
            .map(|(i, case)| {
                run::run_case_with_moves(&vm, &targets, &doc, i, case)
                    .unwrap_or_else(|d| panic!("{}: scenario fault: {:?}", case.id, errors(&d)))
            })
            .collect()
    };
    let (first, second) = (run_all(), run_all());
    assert!(first.len() >= 3);
    for report in &first {
        assert!(report.passed, "{}: {:?}", report.id, report.difference);
        assert_eq!(
            report.moved.as_ref().map(|m| m.revision.as_str()),
            Some(b.revision().as_str())
        );
    }
    assert_eq!(
        serde_json::to_string(&first).expect("serializes"),
        serde_json::to_string(&second).expect("serializes")
    );
}

/// Each example covers more than its success path: the scenario states its
/// cases reach.
#[test]
fn examples_cover_their_failure_modes() {
    let want: [(&str, &[&str]); 4] = [
        (
            "deferred-appointment",
            &[
                "completed",
                "uncertain",
                "refused",
                "retryable",
                "failed",
                "cancelled",
                "expired",
            ],
        ),
        (
            "governed-action",
            &["completed", "uncertain", "refused", "retryable", "failed"],
        ),
        (
            "decision-follow-up",
            &[
                "completed",
                "uncertain",
                "refused",
                "retryable",
                "failed",
                "cancelled",
                "expired",
            ],
        ),
        ("external-directory", &["completed", "retryable", "failed"]),
    ];
    for (name, states) in want {
        let reports = run_project(&examples_dir().join(name));
        for state in states {
            assert!(
                reports.iter().any(|r| r.state == *state),
                "{name}: no case ends {state}"
            );
        }
    }
}
