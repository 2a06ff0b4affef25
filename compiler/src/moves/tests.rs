//! The cross-revision check on the examples: the starter
//! (examples/delayed-follow-up, a `wait-until`) and reviewed-notice (a
//! `wait-for`), each as revision A, against revisions B written here.

use std::path::{Path, PathBuf};

use coordinator_ir::moves::StepMapEntry;
use coordinator_ir::Program;
use coordinator_source::{Diagnostic, Located};

use super::{
    plan_move, read_step_map, MoveOptions, MovePlan, MovedCaseRun, MovedCases, PlanRefused,
};
use crate::check::Graph;
use crate::{compile_sources, Compiled};

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name)
}

/// An example's workflow.yaml and functions.rhai.
fn texts(name: &str) -> (String, String) {
    let dir = example(name);
    (
        std::fs::read_to_string(dir.join("workflow.yaml")).expect("workflow.yaml"),
        std::fs::read_to_string(dir.join("functions.rhai")).expect("functions.rhai"),
    )
}

/// `text` with each `(from, to)` replaced once, in order; each must be there.
fn edited(text: &str, edits: &[(&str, &str)]) -> String {
    let mut out = text.to_owned();
    for (from, to) in edits {
        assert!(out.contains(from), "the text has {from:?}");
        out = out.replacen(from, to, 1);
    }
    out
}

/// A project compiled from texts; it must compile.
fn compiled(dir: &str, workflow: &str, functions: &str) -> Compiled {
    let c = compile_sources(dir, workflow, Some(functions));
    assert!(!c.has_errors(), "{dir}: {:#?}", c.diagnostics);
    c
}

fn program(c: &Compiled) -> &Program {
    c.program.as_ref().expect("a Program")
}

fn plan(a: &Compiled, b: &Compiled, options: &MoveOptions) -> MovePlan {
    plan_move(program(a), b, options, &MovedCases::default()).expect("a plan")
}

fn codes(diags: &[Diagnostic]) -> Vec<&str> {
    diags.iter().map(|d| d.code.as_str()).collect()
}

/// The 1-based line of the first line of `text` containing `needle` after
/// the first line containing `after`.
fn line_after(text: &str, after: &str, needle: &str) -> u32 {
    let start = text.lines().position(|l| l.contains(after)).expect("after");
    let at = text
        .lines()
        .enumerate()
        .skip(start)
        .find(|(_, l)| l.contains(needle))
        .map(|(i, _)| i + 1)
        .expect("needle");
    u32::try_from(at).expect("small")
}

fn starter() -> Compiled {
    let (w, f) = texts("delayed-follow-up");
    compiled("a", &w, &f)
}

/// The starter's `notify` input built in place, with `data.priority` read
/// from the input; B's input type gains `priority`, required.
fn priority_b() -> (String, String) {
    let (w, f) = texts("delayed-follow-up");
    let w = edited(
        &w,
        &[
            (
                "        format: date-time\n    required:\n",
                "        format: date-time\n      priority:\n        type: string\n    required:\n    - priority\n",
            ),
            (
                "      input:\n        type: function\n        function: notice-request\n",
                concat!(
                    "      input:\n        type: fields\n        fields:\n",
                    "          senderProfile: {type: literal, value: applications-office}\n",
                    "          to: {type: literal, value: {email: someone@example.org}}\n",
                    "          template: {type: literal, value: {id: application-follow-up, version: \"1\"}}\n",
                    "          locale: {type: literal, value: en}\n",
                    "          data:\n            type: fields\n            fields:\n",
                    "              priority:\n                type: input\n                path: /priority\n",
                ),
            ),
        ],
    );
    (w, f)
}

#[test]
fn a_revision_that_only_changes_the_notice_text_moves_due() {
    let a = starter();
    let (w, f) = texts("delayed-follow-up");
    let b = compiled(
        "b",
        &w,
        &edited(
            &f,
            &[("\"application-follow-up\"", "\"application-reminder\"")],
        ),
    );
    assert_ne!(a.revision(), b.revision());
    let p = plan(&a, &b, &MoveOptions::default());
    let c = &p.certificate;
    assert_eq!(c.waits.len(), 1);
    let due = c.wait("due").expect("due");
    assert!(due.movable, "{:#?}", p.diagnostics);
    assert_eq!((due.to.as_str(), due.carried.len()), ("due", 0));
    assert!(p.diagnostics.is_empty());
    assert_eq!(c.from.revision, a.revision().expect("A"));
    assert_eq!(c.to.revision, b.revision().expect("B"));
    assert_eq!(c.workflow, "follow-up");
    assert!(c.verify_digest().is_ok());
}

#[test]
fn a_read_of_an_input_member_a_never_had_refuses_the_wait_at_that_mapping() {
    let a = starter();
    let (w, f) = priority_b();
    let b = compiled("b", &w, &f);
    let p = plan(&a, &b, &MoveOptions::default());
    let due = p.certificate.wait("due").expect("due");
    assert!(!due.movable);
    assert_eq!(codes(&p.diagnostics), ["coordinator.move.input-missing"]);
    let d = p.diagnostics.first().expect("one finding");
    assert_eq!(d.file, "b/workflow.yaml");
    assert_eq!(
        d.pointer,
        "/workflow/steps/notify/input/fields/data/fields/priority/path"
    );
    assert_eq!(
        (d.line, d.column),
        (line_after(&w, "          data:", "path: /priority"), 23),
        "{d:?}"
    );
    assert!(d.message.contains("/priority"), "{}", d.message);
    let f = due.findings.first().expect("in the certificate");
    assert_eq!((f.line, f.pointer.as_str()), (d.line, d.pointer.as_str()));
}

#[test]
fn reformatting_b_moves_the_findings_but_not_the_digest() {
    let a = starter();
    let (w, f) = priority_b();
    let b = compiled("b", &w, &f);
    let moved = compiled("b", &format!("# a comment\n\n{w}"), &f);
    assert_eq!(b.revision(), moved.revision());
    let (p, q) = (
        plan(&a, &b, &MoveOptions::default()),
        plan(&a, &moved, &MoveOptions::default()),
    );
    let (d, e) = (p.diagnostics.first(), q.diagnostics.first());
    assert_eq!(
        d.map(|d| d.line + 2),
        e.map(|e| e.line),
        "the finding moved with the text"
    );
    assert_eq!(p.certificate.digest, q.certificate.digest);
}

#[test]
fn a_renamed_wait_moves_only_where_the_map_names_it() {
    let a = starter();
    let (w, f) = texts("delayed-follow-up");
    let w = edited(
        &w,
        &[
            ("  start: due\n", "  start: due-later\n"),
            ("    due:\n", "    due-later:\n"),
        ],
    );
    let b = compiled("b", &w, &f);
    let p = plan(&a, &b, &MoveOptions::default());
    assert_eq!(codes(&p.diagnostics), ["coordinator.move.target-missing"]);
    let d = p.diagnostics.first().expect("one");
    assert_eq!(d.pointer, "/workflow/steps");
    assert_eq!(d.line, line_after(&w, "workflow:", "  steps:"));
    assert!(!p.certificate.any_movable());

    let map = read_step_map(&["due=due-later".to_owned()]).expect("a map");
    let options = MoveOptions {
        map,
        accept_skipped: Vec::new(),
    };
    let p = plan(&a, &b, &options);
    let due = p.certificate.wait("due").expect("due");
    assert!(due.movable, "{:#?}", p.diagnostics);
    assert_eq!(due.to, "due-later");
    assert_eq!(
        p.certificate.map,
        [StepMapEntry {
            from: "due".into(),
            to: "due-later".into()
        }]
    );
}

#[test]
fn a_wait_turned_into_a_call_is_refused_at_its_type() {
    let a = starter();
    let (w, f) = texts("delayed-follow-up");
    let w = edited(
        &w,
        &[(
            "    due:\n      type: wait-until\n      until:\n        type: input\n        path: /sendAfter\n",
            concat!(
                "    due:\n      type: call\n      operation: applications-read-record\n",
                "      input:\n        type: fields\n        fields:\n",
                "          collection: {type: literal, value: applications}\n",
                "          recordId: {type: input, path: /applicationId}\n",
            ),
        )],
    );
    // `due` now reads the record and `read-application` reads it again:
    // notify's Function binds by type to one call only, so read it by name.
    let w = edited(
        &w,
        &[
            (
                "      operation: applications-read-record\n      input:\n        type: fields\n        fields:\n          collection:\n",
                "      operation: applications-peek\n      input:\n        type: fields\n        fields:\n          collection:\n",
            ),
            (
                "  notices-submit-message:\n",
                "  applications-peek:\n    uses: breg.read-record/v1\n    connection: applications\n  notices-submit-message:\n",
            ),
        ],
    );
    let b = compiled("b", &w, &f);
    let p = plan(&a, &b, &MoveOptions::default());
    assert_eq!(codes(&p.diagnostics), ["coordinator.move.target-kind"]);
    let d = p.diagnostics.first().expect("one");
    assert_eq!(d.pointer, "/workflow/steps/due/type");
    assert!(d.message.contains("is a call"), "{}", d.message);
}

/// The starter with `read-application` before `due`.
fn read_first(w: &str) -> String {
    edited(
        w,
        &[
            ("  start: due\n", "  start: read-application\n"),
            ("      next: permission\n", "      next: due\n"),
            ("      next: read-application\n", "      next: permission\n"),
        ],
    )
}

#[test]
fn a_call_a_performed_before_the_wait_and_b_places_after_it_is_refused() {
    let (w, f) = texts("delayed-follow-up");
    let a = compiled("a", &read_first(&w), &f);
    let b = starter();
    let p = plan(&a, &b, &MoveOptions::default());
    let due = p.certificate.wait("due").expect("due");
    assert_eq!(due.carried, ["read-application"]);
    assert_eq!(codes(&p.diagnostics), ["coordinator.move.effect-repeats"]);
    let d = p.diagnostics.first().expect("one");
    assert_eq!(d.pointer, "/workflow/steps/read-application");
}

#[test]
fn a_skipped_call_refuses_the_wait_unless_accepted_and_unread() {
    // B reads the record before the wait: a run moved from the starter's
    // `due` never did, and B's choose and notify read it.
    let a = starter();
    let (w, f) = texts("delayed-follow-up");
    let b = compiled("b", &read_first(&w), &f);
    let p = plan(&a, &b, &MoveOptions::default());
    let found = codes(&p.diagnostics);
    assert!(
        found.contains(&"coordinator.move.call-skipped"),
        "{found:?}"
    );
    assert!(
        found.contains(&"coordinator.move.read-unavailable"),
        "{found:?}"
    );
    let accepted = MoveOptions {
        map: Vec::new(),
        accept_skipped: vec!["read-application".into()],
    };
    let p = plan(&a, &b, &accepted);
    let found = codes(&p.diagnostics);
    assert!(
        !found.contains(&"coordinator.move.call-skipped"),
        "{found:?}"
    );
    assert!(
        found.contains(&"coordinator.move.read-unavailable"),
        "{found:?}"
    );
    assert_eq!(p.certificate.accept_skipped, ["read-application"]);

    // A call before the wait that nothing after it reads: accepted, it moves.
    let peek = edited(
        &w,
        &[
            ("  start: due\n", "  start: peek\n"),
            (
                "  steps:\n",
                concat!(
                    "  steps:\n    peek:\n      type: call\n      operation: applications-peek\n",
                    "      input:\n        type: fields\n        fields:\n",
                    "          collection: {type: literal, value: applications}\n",
                    "          recordId: {type: input, path: /applicationId}\n",
                    "      next: due\n",
                ),
            ),
            (
                "  notices-submit-message:\n",
                "  applications-peek:\n    uses: breg.read-record/v1\n    connection: applications\n  notices-submit-message:\n",
            ),
        ],
    );
    let b = compiled("b", &peek, &f);
    let p = plan(&a, &b, &MoveOptions::default());
    assert_eq!(codes(&p.diagnostics), ["coordinator.move.call-skipped"]);
    assert_eq!(
        p.diagnostics.first().map(|d| d.pointer.as_str()),
        Some("/workflow/steps/peek")
    );
    let accepted = MoveOptions {
        map: Vec::new(),
        accept_skipped: vec!["peek".into()],
    };
    let p = plan(&a, &b, &accepted);
    assert!(p.certificate.any_movable(), "{:#?}", p.diagnostics);
}

fn reviewed() -> (String, String) {
    texts("reviewed-notice")
}

#[test]
fn a_wait_for_moves_with_its_call_carried() {
    let (w, f) = reviewed();
    let a = compiled("a", &w, &f);
    let b = compiled(
        "b",
        &edited(
            &w,
            &[("id: application-approved", "id: application-granted")],
        ),
        &f,
    );
    let p = plan(&a, &b, &MoveOptions::default());
    let wait = p.certificate.wait("await-decision").expect("the wait");
    assert!(wait.movable, "{:#?}", p.diagnostics);
    assert_eq!(wait.carried, ["submit-review"]);
    assert_eq!(wait.kind, coordinator_ir::StepKind::WaitFor);
}

#[test]
fn a_wait_for_on_another_call_is_refused_with_what_follows_from_it() {
    let (w, f) = reviewed();
    let a = compiled("a", &w, &f);
    // B opens the review under another id: the completion it waits on is
    // not A's, the call is skipped, and the withdrawals read its id.
    let b_text = w
        .replace("    submit-review:\n", "    open-review:\n")
        .replace("start: submit-review", "start: open-review")
        .replace("step: submit-review", "step: open-review");
    let b = compiled("b", &b_text, &f);
    let p = plan(&a, &b, &MoveOptions::default());
    let found = codes(&p.diagnostics);
    for code in [
        "coordinator.move.completion-differs",
        "coordinator.move.call-skipped",
        "coordinator.move.read-unavailable",
    ] {
        assert!(found.contains(&code), "{code} in {found:?}");
    }
    let differs = p
        .diagnostics
        .iter()
        .find(|d| d.code == "coordinator.move.completion-differs")
        .expect("completion-differs");
    assert_eq!(
        differs.pointer,
        "/workflow/steps/await-decision/completion/step"
    );
    assert!(!p.certificate.any_movable());
}

#[test]
fn a_wait_for_whose_call_changes_operation_is_refused() {
    let (w, f) = reviewed();
    let a = compiled("a", &w, &f);
    // The review is now submitted through an alias with a narrowed output:
    // the call's output type differs, so it is not carried.
    let b_text = edited(
        &w,
        &[(
            "  review-submit:\n    uses: casework.submit-review-request/v1\n    connection: review\n",
            "  review-submit:\n    uses: casework.submit-review-request/v1\n    connection: review\n    output:\n      type: object\n      required: [id, status]\n",
        )],
    );
    let b = compiled("b", &b_text, &f);
    assert_ne!(a.revision(), b.revision());
    let p = plan(&a, &b, &MoveOptions::default());
    let wait = p.certificate.wait("await-decision").expect("the wait");
    assert!(wait.carried.is_empty());
    let found = codes(&p.diagnostics);
    assert!(
        found.contains(&"coordinator.move.completion-differs"),
        "{found:?}"
    );
}

#[test]
fn bad_maps_and_skips_are_usage_errors() {
    let a = starter();
    let b = starter();
    assert!(matches!(
        read_step_map(&["due".into(), "=x".into(), "due=".into(), "a=b=c".into()]),
        Err(d) if d.len() == 4 && d.iter().all(|d| d.code == "coordinator.move.map-invalid")
    ));
    let bad = |map: &[&str], accept: &[&str]| {
        let options = MoveOptions {
            map: read_step_map(&map.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>())
                .expect("well formed"),
            accept_skipped: accept.iter().map(|s| (*s).to_owned()).collect(),
        };
        match plan_move(program(&a), &b, &options, &MovedCases::default()) {
            Err(PlanRefused::Usage(d)) => d,
            other => panic!("expected a usage error, got {other:?}"),
        }
    };
    let d = bad(&["nowhere=due"], &[]);
    assert_eq!(codes(&d), ["coordinator.move.map-invalid"]);
    assert!(d
        .iter()
        .all(|d| d.message.contains("its wait steps are: due")));
    assert_eq!(
        d.first().map(|d| d.file.as_str()),
        Some("--map nowhere=due")
    );
    let d = bad(&["notify=due"], &[]);
    assert!(d.iter().all(|d| d.message.contains("is a call step")));
    let d = bad(&["due=x", "due=y"], &[]);
    assert_eq!(codes(&d), ["coordinator.move.map-invalid"]);
    let d = bad(&["due=Not_A_Name"], &[]);
    assert_eq!(codes(&d), ["coordinator.move.map-invalid"]);
    let d = bad(&[], &["permission"]);
    assert_eq!(codes(&d), ["coordinator.move.skip-invalid"]);
}

#[test]
fn another_workflow_or_a_broken_b_is_refused() {
    let a = starter();
    let (w, f) = texts("delayed-follow-up");
    let other = compiled(
        "b",
        &edited(&w, &[("  id: follow-up\n", "  id: other\n")]),
        &f,
    );
    match plan_move(
        program(&a),
        &other,
        &MoveOptions::default(),
        &MovedCases::default(),
    ) {
        Err(PlanRefused::Refused(d)) => {
            assert_eq!(codes(&d), ["coordinator.move.workflow-differs"]);
            assert_eq!(d.first().map(|d| d.pointer.as_str()), Some("/project/id"));
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let same = compiled("b", &w, &f);
    match plan_move(
        program(&a),
        &same,
        &MoveOptions::default(),
        &MovedCases::default(),
    ) {
        Err(PlanRefused::Refused(d)) => {
            assert_eq!(codes(&d), ["coordinator.move.same-revision"]);
        }
        other => panic!("expected a refusal of the same revision, got {other:?}"),
    }
    let broken = compile_sources(
        "b",
        &edited(&w, &[("start: due", "start: nowhere")]),
        Some(&f),
    );
    assert!(matches!(
        plan_move(program(&a), &broken, &MoveOptions::default(), &MovedCases::default()),
        Err(PlanRefused::Refused(d)) if codes(&d) == ["coordinator.step.unknown"]
    ));
}

#[test]
fn a_programs_graph_has_the_dataflow_of_its_project() {
    for name in ["delayed-follow-up", "reviewed-notice", "governed-action"] {
        let (w, f) = texts(name);
        let c = compiled(name, &w, &f);
        let analysis = c.analysis.as_ref().expect("analysis");
        let workflow = &analysis.project.workflow;
        let from_project = Graph::new(&workflow.steps).must_complete(&workflow.start);
        let from_program = Graph::from_program(program(&c)).must_complete(&workflow.start);
        assert_eq!(from_project, from_program, "{name}");
    }
}

#[test]
fn a_function_bound_to_b_input_type_that_a_input_does_not_fit_is_refused() {
    // B only requires a new input member; notify's Function takes the run
    // input by its type, which A's input does not fit.
    let a = starter();
    let (w, f) = texts("delayed-follow-up");
    let w = edited(
        &w,
        &[(
            "        format: date-time\n    required:\n",
            "        format: date-time\n      priority:\n        type: string\n    required:\n    - priority\n",
        )],
    );
    let b = compiled("b", &w, &f);
    let p = plan(&a, &b, &MoveOptions::default());
    assert_eq!(codes(&p.diagnostics), ["coordinator.move.input-missing"]);
    let d = p.diagnostics.first().expect("one");
    assert_eq!(d.pointer, "/workflow/steps/notify/input");
    assert!(d.message.contains("notice-request"), "{}", d.message);
}

#[test]
fn every_example_moves_every_wait_to_a_copy_of_itself() {
    // The same workflow on both sides (B differs only by a comment in its
    // Functions, so it is another revision): nothing differs, so every wait
    // is movable and carries every call completed on every route to it.
    let mut waits = 0;
    for name in [
        "decision-follow-up",
        "deferred-appointment",
        "delayed-follow-up",
        "external-directory",
        "governed-action",
        "reviewed-notice",
    ] {
        let (w, f) = texts(name);
        let c = compiled(name, &w, &f);
        let b = compiled(name, &w, &format!("{f}\n// revision B\n"));
        let p = plan(&c, &b, &MoveOptions::default());
        assert!(p.diagnostics.is_empty(), "{name}: {:#?}", p.diagnostics);
        let steps = c.program.as_ref().map_or(0, |p| {
            p.steps.iter().filter(|s| s.op.kind().is_wait()).count()
        });
        assert_eq!(p.certificate.waits.len(), steps, "{name}");
        assert!(p.certificate.waits.iter().all(|w| w.movable), "{name}");
        assert_eq!(p.certificate.any_movable(), steps > 0, "{name}");
        waits += steps;
    }
    assert!(waits >= 4, "the examples wait {waits} times");
}

#[test]
fn a_function_input_bound_by_type_keeps_the_binding_b_runs() {
    // A reads the record before `due`. B reads it as `peek` first (the
    // same alias) and again only on one route: B's own check binds the
    // Functions' `record` to `peek`, the one read on every route, and its
    // Program runs that binding. A moved run carries A's
    // `read-application` but never ran `peek`: even with the skip
    // accepted, the binding reads what the run lacks.
    let (w, f) = texts("delayed-follow-up");
    let a = compiled("a", &read_first(&w), &f);
    let b_text = edited(
        &read_first(&w),
        &[
            ("  start: read-application\n", "  start: peek\n"),
            (
                "  notice-route:\n    type: string\n",
                "  gate-route:\n    type: string\n    enum: [again, skip]\n  notice-route:\n    type: string\n",
            ),
            (
                "functions:\n",
                concat!(
                    "functions:\n  gate:\n    runtime: rhai\n    source: functions.rhai\n",
                    "    entrypoint: gate\n    inputs:\n      input:\n        typeRef: workflow-input\n",
                    "    output:\n      typeRef: gate-route\n",
                ),
            ),
            (
                "  steps:\n",
                concat!(
                    "  steps:\n    peek:\n      type: call\n      operation: applications-read-record\n",
                    "      input:\n        type: fields\n        fields:\n",
                    "          collection: {type: literal, value: applications}\n",
                    "          recordId: {type: input, path: /applicationId}\n",
                    "      next: gate-step\n",
                    "    gate-step:\n      type: choose\n      function: gate\n",
                    "      cases:\n        again: read-application\n        skip: due\n",
                ),
            ),
        ],
    );
    let b = compiled(
        "b",
        &b_text,
        &format!("{f}\nfn gate(input) {{ \"again\" }}\n"),
    );
    let accepted = MoveOptions {
        map: Vec::new(),
        accept_skipped: vec!["peek".into()],
    };
    let p = plan(&a, &b, &accepted);
    let due = p.certificate.wait("due").expect("due");
    assert_eq!(due.carried, ["read-application"]);
    assert!(!due.movable);
    let found = codes(&p.diagnostics);
    assert!(
        found
            .iter()
            .all(|c| *c == "coordinator.move.read-unavailable"),
        "{found:?}"
    );
    let at: Vec<&str> = p.diagnostics.iter().map(|d| d.pointer.as_str()).collect();
    assert_eq!(
        at,
        ["/workflow/steps/permission", "/workflow/steps/notify/input"]
    );
    assert!(
        p.diagnostics
            .iter()
            .all(|d| d.message.contains("call `peek`")),
        "{:#?}",
        p.diagnostics
    );
}

/// The starter with another notice text: `due` moves.
fn notice_text_b() -> Compiled {
    let (w, f) = texts("delayed-follow-up");
    let f = edited(
        &f,
        &[("\"application-follow-up\"", "\"application-reminder\"")],
    );
    compiled("b", &w, &f)
}

/// A moved case of A's scenarios, as the caller ran it (`problem`: failed).
fn case_run(case: &str, index: u32, to: &str, problem: Option<&str>) -> MovedCaseRun {
    MovedCaseRun {
        case: case.into(),
        wait: "due".into(),
        to: to.into(),
        passed: problem.is_none(),
        problem: problem.map(str::to_owned),
        at: Located {
            file: "a/scenarios.yaml".into(),
            line: 17 + 40 * index,
            column: 3,
            pointer: format!("/cases/{index}/move"),
        },
    }
}

/// The cases a plan held to `due`.
fn held_at_due(p: &MovePlan) -> &[MovedCaseRun] {
    p.moved_cases
        .get("due")
        .map(Vec::as_slice)
        .expect("every wait has its list")
}

fn plan_with(a: &Compiled, b: &Compiled, cases: &MovedCases) -> Result<MovePlan, PlanRefused> {
    plan_move(program(a), b, &MoveOptions::default(), cases)
}

#[test]
fn a_moved_case_that_fails_refuses_its_wait_at_the_case() {
    let (a, b) = (starter(), notice_text_b());
    let bare = plan(&a, &b, &MoveOptions::default());
    let passing = MovedCases {
        runs: vec![case_run("sent", 0, "due", None)],
        faults: Vec::new(),
    };
    let p = plan_with(&a, &b, &passing).expect("a plan");
    assert!(
        p.certificate.movable_wait("due").is_some(),
        "{:#?}",
        p.diagnostics
    );
    assert_eq!(held_at_due(&p), passing.runs);
    // Cases enter the certificate only through their findings: passing
    // ones leave the digest as it is without them.
    assert_eq!(p.certificate.digest, bare.certificate.digest);
    assert!(held_at_due(&bare).is_empty());

    let failing = MovedCases {
        runs: vec![
            case_run("sent", 0, "due", None),
            case_run(
                "skipped",
                1,
                "due",
                Some("path: expected [due, x], got [due, y]"),
            ),
        ],
        faults: Vec::new(),
    };
    let p = plan_with(&a, &b, &failing).expect("a plan");
    let due = p.certificate.wait("due").expect("due");
    assert!(!due.movable);
    assert_eq!(codes(&p.diagnostics), ["coordinator.move.scenario-failed"]);
    let d = p.diagnostics.first().expect("one finding");
    assert_eq!(
        (d.file.as_str(), d.line, d.column, d.pointer.as_str()),
        ("a/scenarios.yaml", 57, 3, "/cases/1/move")
    );
    assert!(
        d.message.contains("case `skipped`")
            && d.message.ends_with("path: expected [due, x], got [due, y]"),
        "{}",
        d.message
    );
    let codes_in_certificate: Vec<&str> = due.findings.iter().map(|f| f.code.as_str()).collect();
    assert_eq!(codes_in_certificate, ["coordinator.move.scenario-failed"]);
    assert_ne!(p.certificate.digest, bare.certificate.digest);
    assert!(p.certificate.verify_digest().is_ok());
    assert_eq!(held_at_due(&p).len(), 2);
}

#[test]
fn a_case_moving_to_another_step_is_not_held_to_the_plan_and_faults_refuse_it() {
    let (a, b) = (starter(), notice_text_b());
    // The case moves `due` to a step the plan does not move it to: it
    // tests another move.
    let elsewhere = MovedCases {
        runs: vec![case_run("later", 0, "due-later", Some("it failed"))],
        faults: Vec::new(),
    };
    let p = plan_with(&a, &b, &elsewhere).expect("a plan");
    assert!(p.certificate.movable_wait("due").is_some());
    assert!(held_at_due(&p).is_empty());

    let fault = Diagnostic::error(
        "coordinator.scenario.move-project",
        Located::default(),
        "the project cannot be moved to",
        "fix it",
    );
    let faulty = MovedCases {
        runs: Vec::new(),
        faults: vec![fault.clone()],
    };
    match plan_with(&a, &b, &faulty) {
        Err(PlanRefused::Refused(d)) => assert_eq!(d, [fault]),
        other => panic!("refused with the scenario faults, got {other:?}"),
    }
}
