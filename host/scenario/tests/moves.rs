//! Cases that move their run to another revision at a wait
//! (docs/scenarios.md "Moves"): the starter (A) moved at `due` to revisions
//! B compiled from edited copies of it, through the scenario host's API
//! (`file::parse`, `file::check`, `run::run_case_with_moves`,
//! `moves::run_moved_cases`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use coordinator_ir::Program;
use coordinator_scenario::moves::{run_moved_cases, MoveTargets};
use coordinator_scenario::{codes, file, run};
use coordinator_source::{Diagnostic, YamlDocument};

const WORKFLOW: &str = include_str!("../../../examples/delayed-follow-up/workflow.yaml");
const FUNCTIONS: &str = include_str!("../../../examples/delayed-follow-up/functions.rhai");
const MOVES: &str = include_str!("../../../golden/moves/scenarios.yaml");

fn compile(workflow: &str, functions: &str) -> Program {
    let compiled = coordinator_compiler::compile_sources("p", workflow, Some(functions));
    compiled
        .program
        .unwrap_or_else(|| panic!("compiles: {:?}", compiled.diagnostics))
}

fn starter() -> Program {
    compile(WORKFLOW, FUNCTIONS)
}

/// The starter with each `(from, to)` replaced in its workflow (once).
fn edited(edits: &[(&str, &str)]) -> Program {
    let mut workflow = WORKFLOW.to_owned();
    for (from, to) in edits {
        assert!(workflow.contains(from), "{from}");
        workflow = workflow.replacen(from, to, 1);
    }
    compile(&workflow, FUNCTIONS)
}

/// The second notice text (examples/delayed-follow-up-v2).
fn second_notice() -> Program {
    compile(
        include_str!("../../../examples/delayed-follow-up-v2/workflow.yaml"),
        include_str!("../../../examples/delayed-follow-up-v2/functions.rhai"),
    )
}

const HEADER: &str = "apiVersion: id.registrystack.org/formats/coordinator/scenarios/v1beta1\nkind: CoordinatorScenarios\ncases:\n";

/// One case moving to project `b` (`body` after `- id: probe`), with the
/// starter's first-case input and admission.
fn one_case(body: &str) -> YamlDocument {
    let text = format!(
        "{HEADER}- id: probe\n  admittedAt: '2026-10-09T09:00:00Z'\n  input: {{applicationId: app-1, sendAfter: '2026-10-09T09:16:00Z'}}\n{}",
        body.lines().map(|l| format!("  {l}\n")).collect::<String>()
    );
    coordinator_source::parse("a/scenarios.yaml", &text).expect("parses")
}

fn targets(b: &[(&str, Result<&Program, String>)]) -> MoveTargets {
    let mut t = MoveTargets::default();
    for (project, program) in b {
        t.insert(project, program.clone());
    }
    t
}

/// Checks and runs the first case of `doc` on the starter with `targets`.
fn run_first(
    doc: &YamlDocument,
    targets: &MoveTargets,
) -> Result<run::CaseReport, Vec<Diagnostic>> {
    let a = starter();
    let scenarios = file::parse(doc)?;
    let faults = file::check(doc, &scenarios, &a, targets);
    if !faults.is_empty() {
        return Err(faults);
    }
    let vm = run::load_vm(&a, "a").expect("loads");
    run::run_case_with_moves(&vm, targets, doc, 0, &scenarios.cases[0])
}

fn codes_of(d: &[Diagnostic]) -> Vec<&str> {
    d.iter().map(|d| d.code.as_str()).collect()
}

const READ_OK: &str = "read-application: [{type: success, value: {collection: applications, recordId: app-1, revision: '7', data: {noticeAllowed: true, applicantEmail: a@example.org}}}]";
const NOTIFY_OK: &str =
    "notify: [{type: success, value: {id: 6f1c2a4e-8b7d-4c3e-9a2f-1d5e7b9c0a11, status: accepted}}]";

#[test]
fn the_golden_move_cases_pass_and_record_the_move_only() {
    let doc = coordinator_source::parse("moves/scenarios.yaml", MOVES).expect("parses");
    let a = starter();
    let b = second_notice();
    let targets = targets(&[("../delayed-follow-up-v2", Ok(&b))]);
    let scenarios = file::parse(&doc).expect("reads");
    assert_eq!(
        scenarios.move_projects().into_iter().collect::<Vec<_>>(),
        ["../delayed-follow-up-v2"]
    );
    assert!(file::check(&doc, &scenarios, &a, &targets).is_empty());
    let vm = run::load_vm(&a, "a").expect("loads");
    for (i, case) in scenarios.cases.iter().enumerate() {
        let report = run::run_case_with_moves(&vm, &targets, &doc, i, case).expect("runs");
        assert!(report.passed, "{}: {:?}", case.id, report.difference);
        let moved = report.moved.as_ref().expect("moved");
        assert_eq!((moved.step.as_str(), moved.to.as_str()), ("due", "due"));
        assert_eq!(moved.revision, b.revision());
        // A's coverage: its steps up to the wait and the move, nothing of B's.
        assert_eq!(report.exercised.steps.iter().collect::<Vec<_>>(), ["due"]);
        assert!(report.exercised.edges.is_empty());
        assert!(report.exercised.outcomes.is_empty());
        assert_eq!(report.exercised.moves.iter().collect::<Vec<_>>(), ["due"]);
    }
    // Without its target loaded, a moved case is refused where it moves.
    let faults = file::read(&doc, &a).expect_err("not loaded");
    assert_eq!(faults[0].code, codes::SCENARIO_MOVE_PROJECT);
    assert_eq!(faults[0].pointer, "/cases/0/move/project");
}

#[test]
fn a_renamed_wait_moves_with_to_and_the_wait_is_listed_once() {
    let b = edited(&[
        ("  start: due\n", "  start: due-v2\n"),
        (
            "    due:\n      type: wait-until",
            "    due-v2:\n      type: wait-until",
        ),
    ]);
    let t = targets(&[("../b", Ok(&b))]);
    let doc = one_case(&format!(
        "move: {{project: ../b, step: due, to: due-v2}}\nreplies: {{{READ_OK}, {NOTIFY_OK}}}\nexpect: {{path: [due, read-application, permission, notify, accepted], state: completed, outcome: {{type: named, value: message-accepted}}, workflowElapsedSeconds: 960}}"
    ));
    let report = run_first(&doc, &t).expect("runs");
    assert!(report.passed, "{:?}", report.difference);
    assert_eq!(report.moved.expect("moved").to, "due-v2");
    // Without `to`, B has no `due`: the VM's move refuses the target.
    let doc = one_case(&format!(
        "move: {{project: ../b, step: due}}\nreplies: {{{READ_OK}, {NOTIFY_OK}}}\nexpect: {{path: [due], state: completed, outcome: {{type: none}}}}"
    ));
    let faults = run_first(&doc, &t).expect_err("refused");
    assert_eq!(codes_of(&faults), [codes::SCENARIO_MOVE_REFUSED]);
    assert_eq!(faults[0].pointer, "/cases/0/move/step");
    assert!(
        faults[0].message.contains("(target-missing)"),
        "{}",
        faults[0].message
    );
}

/// B requires `/priority` in its input and its notice reads it: a run
/// admitted under the starter has none.
fn reads_priority() -> Program {
    let workflow = WORKFLOW
        .replacen(
            "    required:\n    - applicationId\n    - sendAfter\n",
            "      priority:\n        type: string\n    required:\n    - applicationId\n    - sendAfter\n    - priority\n",
            1,
        );
    let functions = FUNCTIONS.replacen(
        "recordRevision: record.revision",
        "recordRevision: record.revision,\n            priority: input.priority",
        1,
    );
    assert!(workflow.contains("- priority") && functions.contains("input.priority"));
    compile(&workflow, &functions)
}

#[test]
fn a_moved_run_that_fails_under_b_fails_naming_the_move() {
    let b = reads_priority();
    let t = targets(&[("../b", Ok(&b))]);
    let doc = one_case(&format!(
        "move: {{project: ../b, step: due}}\nreplies: {{{READ_OK}, {NOTIFY_OK}}}\nexpect: {{path: [due, read-application, permission, notify, accepted], state: completed, outcome: {{type: named, value: message-accepted}}}}"
    ));
    let report = run_first(&doc, &t).expect("runs");
    assert!(!report.passed);
    assert_eq!(report.state, "failed");
    let problem = report.problem();
    assert!(
        problem.contains("after the move at `due` to ../b") && problem.contains("priority"),
        "{problem}"
    );
}

#[test]
fn a_move_that_cannot_happen_is_a_located_fault() {
    let b = second_notice();
    let t = targets(&[
        ("../b", Ok(&b)),
        ("../broken", Err("it does not compile: 1 error".to_owned())),
    ]);
    let other = edited(&[("  id: follow-up\n", "  id: follow-up-other\n")]);
    let t_other = targets(&[("../other", Ok(&other))]);
    let expect = "expect: {path: [due], state: completed, outcome: {type: none}}";
    let fault = |body: &str, t: &MoveTargets| -> Diagnostic {
        let faults = run_first(&one_case(body), t).expect_err("a fault");
        assert_eq!(faults.len(), 1, "{faults:?}");
        faults.into_iter().next().unwrap()
    };
    let d = fault(
        &format!("move: {{project: ../b, step: read-application}}\n{expect}"),
        &t,
    );
    assert_eq!(
        (d.code.as_str(), d.pointer.as_str()),
        (codes::SCENARIO_MOVE_NOT_A_WAIT, "/cases/0/move/step")
    );
    let d = fault(
        &format!("move: {{project: ../b, step: later}}\n{expect}"),
        &t,
    );
    assert_eq!(d.code, codes::SCENARIO_UNKNOWN_STEP);
    let d = fault(
        &format!("move: {{project: ../broken, step: due}}\n{expect}"),
        &t,
    );
    assert_eq!(
        (d.code.as_str(), d.pointer.as_str()),
        (codes::SCENARIO_MOVE_PROJECT, "/cases/0/move/project")
    );
    assert!(d.message.contains("does not compile"), "{}", d.message);
    let d = fault(
        &format!("move: {{project: ../other, step: due}}\n{expect}"),
        &t_other,
    );
    assert_eq!(
        (d.code.as_str(), d.pointer.as_str()),
        (codes::SCENARIO_MOVE_WORKFLOW, "/cases/0/move/project")
    );
    // `due` already passed at admission: the run never waits there.
    let past_text = format!(
        "{HEADER}- id: probe\n  admittedAt: '2026-10-09T10:00:00Z'\n  input: {{applicationId: app-1, sendAfter: '2026-10-09T09:16:00Z'}}\n  move: {{project: ../b, step: due}}\n  replies: {{{READ_OK}, {NOTIFY_OK}}}\n  expect: {{path: [due, read-application, permission, notify, accepted], state: completed, outcome: {{type: named, value: message-accepted}}}}\n"
    );
    let past = coordinator_source::parse("a/scenarios.yaml", &past_text).expect("parses");
    let faults = run_first(&past, &t).expect_err("never waits");
    assert_eq!(codes_of(&faults), [codes::SCENARIO_MOVE_NOT_REACHED]);
    assert!(
        faults[0].message.contains("never waits at `due`"),
        "{}",
        faults[0].message
    );
}

#[test]
fn the_moved_cases_of_one_revision_are_reported_by_wait() {
    let good = second_notice();
    let bad = reads_priority();
    let t = targets(&[("../good", Ok(&good)), ("../bad", Ok(&bad))]);
    let case = |id: &str, project: &str| {
        format!(
            "- id: {id}\n  admittedAt: '2026-10-09T09:00:00Z'\n  input: {{applicationId: app-1, sendAfter: '2026-10-09T09:16:00Z'}}\n  move: {{project: {project}, step: due}}\n  replies: {{{READ_OK}, {NOTIFY_OK}}}\n  expect: {{path: [due, read-application, permission, notify, accepted], state: completed, outcome: {{type: named, value: message-accepted}}}}\n"
        )
    };
    let text = format!(
        "{HEADER}{}{}{}",
        case("to-good", "../good"),
        case("to-bad", "../bad"),
        case("to-good-again", "../good")
    );
    let doc = coordinator_source::parse("a/scenarios.yaml", &text).expect("parses");
    let a = starter();
    let scenarios = file::parse(&doc).expect("reads");
    assert!(file::check(&doc, &scenarios, &a, &t).is_empty());
    let vm = run::load_vm(&a, "a").expect("loads");
    let to_bad = run_moved_cases(&vm, &doc, &scenarios, &t, &bad.revision());
    assert_eq!(to_bad.len(), 1);
    let due = &to_bad["due"];
    assert_eq!(due.len(), 1);
    assert_eq!((due[0].case.as_str(), due[0].passed), ("to-bad", false));
    let problem = due[0].problem.as_deref().unwrap_or("");
    assert!(problem.contains("after the move"), "{problem}");
    assert!(!problem.contains('\n'), "one line: {problem}");
    // Where `move plan` locates a finding about the case: its `move` key.
    let move_line = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.starts_with("  move:"))
        .nth(1)
        .map(|(i, _)| i + 1)
        .expect("the second case's move");
    assert_eq!(
        (
            due[0].to.as_str(),
            due[0].at.file.as_str(),
            due[0].at.line as usize,
            due[0].at.column,
            due[0].at.pointer.as_str()
        ),
        ("due", "a/scenarios.yaml", move_line, 3, "/cases/1/move")
    );
    let to_good = run_moved_cases(&vm, &doc, &scenarios, &t, &good.revision());
    let ids: Vec<(&str, bool)> = to_good["due"]
        .iter()
        .map(|c| (c.case.as_str(), c.passed))
        .collect();
    assert_eq!(ids, [("to-good", true), ("to-good-again", true)]);
    assert!(run_moved_cases(&vm, &doc, &scenarios, &t, &a.revision()).is_empty());
}
