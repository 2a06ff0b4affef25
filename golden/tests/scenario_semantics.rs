//! SPEC §7 edge rules of the scenario host, each pinned on a small probe
//! workflow (`semantics/*.workflow.yaml`):
//! - `w`: wait-until `/startAt`, submit a Casework review (mutation), wait-for
//!   its result (1 day, no onTimeout/onCancel), finish; deadline 7 days.
//! - `wt`: as `w` with `onTimeout` and `onCancel` finishes.
//! - `m`: wait-until, send a Messaging notice (receipt-capable mutation),
//!   wait-until 2030-01-02, finish; deadline 1 year.
//! - `e`: wait-until, an evaluation, a BReg immediate action without
//!   `onDeclaredRefusal`, finish.
//!
//! Cases are admitted at 2030-01-01T00:00:00Z. The regressions fixed on the
//! `examples` branch are marked "regression".

use coordinator_scenario::{file, run};
use coordinator_source::Diagnostic;

const W: &str = include_str!("semantics/w.workflow.yaml");
const WT: &str = include_str!("semantics/wt.workflow.yaml");
const M: &str = include_str!("semantics/m.workflow.yaml");
const E: &str = include_str!("semantics/e.workflow.yaml");
const FUNCTIONS: &str = "fn noop(x) { x }\n";

const HEADER: &str = "apiVersion: id.registrystack.org/formats/coordinator/scenarios/v1beta1\nkind: CoordinatorScenarios\ncases:\n";
const SUBMIT_OK: &str = "submit: [{type: success, value: {id: r1, status: pending}}]";
const NOTICE_OK: &str =
    "{type: success, value: {id: 0c9d8e7f-6a5b-4c3d-8e2f-1a0b9c8d7e6f, status: accepted}}";

/// Runs one case (`body` is the case mapping after `- id: probe`); `Err`
/// carries the scenario-file diagnostics.
fn run_one(workflow: &str, body: &str) -> Result<run::CaseReport, Vec<Diagnostic>> {
    let compiled = coordinator_compiler::compile_sources("probe", workflow, Some(FUNCTIONS));
    let program = compiled
        .program
        .unwrap_or_else(|| panic!("probe compiles: {:?}", compiled.diagnostics));
    let text = format!(
        "{HEADER}- id: probe\n  admittedAt: '2030-01-01T00:00:00Z'\n{}",
        body.lines().map(|l| format!("  {l}\n")).collect::<String>()
    );
    let doc = coordinator_source::parse("probe/scenarios.yaml", &text).map_err(|d| vec![d])?;
    let scenarios = file::read(&doc, &program)?;
    let vm = run::load_vm(&program, "probe/scenarios.yaml").expect("vm loads");
    run::run_case(&vm, &doc, 0, &scenarios.cases[0])
}

fn passes(workflow: &str, body: &str) {
    let report = run_one(workflow, body).unwrap_or_else(|d| panic!("scenario fault: {d:?}"));
    assert!(
        report.passed,
        "FAIL {}: {report:?}",
        report.difference.as_deref().unwrap_or("")
    );
}

fn fault(workflow: &str, body: &str) -> Diagnostic {
    match run_one(workflow, body) {
        Ok(r) => panic!("expected a scenario fault, got {r:?}"),
        Err(mut d) => d.remove(0),
    }
}

fn difference(workflow: &str, body: &str) -> String {
    let report = run_one(workflow, body).unwrap_or_else(|d| panic!("scenario fault: {d:?}"));
    assert!(!report.passed, "expected FAIL, got {report:?}");
    report.difference.unwrap_or_default()
}

// ---- timing -------------------------------------------------------------

#[test]
fn completion_scripted_before_its_wait_is_observed_when_the_wait_begins() {
    passes(W, &format!("input: {{startAt: '2030-01-01T01:00:00Z'}}\nreplies: {{{SUBMIT_OK}}}\ncompletions: {{wait: {{type: completed, afterSeconds: 60, value: {{outcome: ok, decidedAt: '2030-01-01T00:01:00Z'}}}}}}\nexpect: {{path: [pre, submit, wait, done], state: completed, outcome: {{type: named, value: decided}}, output: {{outcome: ok}}, workflowElapsedSeconds: 3600}}"));
}

#[test]
fn cancel_comes_before_a_completion_at_the_same_instant() {
    passes(WT, &format!("input: {{startAt: '2030-01-01T00:00:00Z'}}\nreplies: {{{SUBMIT_OK}}}\ncompletions: {{wait: {{type: completed, afterSeconds: 600, value: {{outcome: ok, decidedAt: '2030-01-01T00:10:00Z'}}}}}}\ncancel: {{afterSeconds: 600}}\nexpect: {{path: [pre, submit, wait, cancel-route], state: cancelled, outcome: {{type: named, value: cancel-route}}, output: null, workflowElapsedSeconds: 600}}"));
}

#[test]
fn completion_comes_before_a_timeout_at_the_same_instant() {
    passes(W, &format!("input: {{startAt: '2030-01-01T00:00:00Z'}}\nreplies: {{{SUBMIT_OK}}}\ncompletions: {{wait: {{type: completed, afterSeconds: 86400, value: {{outcome: late, decidedAt: '2030-01-02T00:00:00Z'}}}}}}\nexpect: {{path: [pre, submit, wait, done], state: completed, outcome: {{type: named, value: decided}}, workflowElapsedSeconds: 86400}}"));
}

#[test]
fn cancel_comes_before_a_wake_at_the_same_instant() {
    passes(W, "input: {startAt: '2030-01-01T02:00:00Z'}\ncancel: {afterSeconds: 7200}\nexpect: {path: [pre], state: cancelled, outcome: {type: none}, workflowElapsedSeconds: 7200}");
}

#[test]
fn deadline_comes_before_a_wake_or_cancel_at_the_same_instant() {
    passes(W, "input: {startAt: '2030-01-08T00:00:00Z'}\ncancel: {afterSeconds: 604800}\nexpect: {path: [pre], state: expired, outcome: {type: none}, workflowElapsedSeconds: 604800}");
}

#[test]
fn wait_until_past_the_deadline_expires_at_the_deadline() {
    passes(W, "input: {startAt: '2031-06-01T00:00:00Z'}\nexpect: {path: [pre], state: expired, outcome: {type: none}, workflowElapsedSeconds: 604800}");
}

#[test]
fn wait_until_in_the_past_does_not_wait() {
    passes(W, &format!("input: {{startAt: '2029-01-01T00:00:00Z'}}\nreplies: {{{SUBMIT_OK}}}\ncompletions: {{wait: {{type: completed, afterSeconds: 5, value: {{outcome: ok, decidedAt: '2030-01-01T00:00:05Z'}}}}}}\nexpect: {{path: [pre, submit, wait, done], state: completed, outcome: {{type: named, value: decided}}, workflowElapsedSeconds: 5}}"));
}

#[test]
fn timeout_without_on_timeout_expires_at_the_timeout() {
    passes(W, &format!("input: {{startAt: '2030-01-01T00:00:00Z'}}\nreplies: {{{SUBMIT_OK}}}\ncompletions: {{wait: {{type: never}}}}\nexpect: {{path: [pre, submit, wait], state: expired, outcome: {{type: none}}, workflowElapsedSeconds: 86400}}"));
}

#[test]
fn a_timeout_past_the_deadline_expires_at_the_deadline_even_with_on_timeout() {
    passes(WT, &format!("input: {{startAt: '2030-01-07T12:00:00Z'}}\nreplies: {{{SUBMIT_OK}}}\ncompletions: {{wait: {{type: never}}}}\nexpect: {{path: [pre, submit, wait], state: expired, outcome: {{type: none}}, workflowElapsedSeconds: 604800}}"));
}

// ---- cancel -------------------------------------------------------------

#[test]
fn cancel_at_a_wait_for_without_on_cancel_after_a_mutation() {
    passes(W, &format!("input: {{startAt: '2030-01-01T00:00:00Z'}}\nreplies: {{{SUBMIT_OK}}}\ncompletions: {{wait: {{type: never}}}}\ncancel: {{afterSeconds: 600}}\nexpect: {{path: [pre, submit, wait], state: cancelled-after-effect, outcome: {{type: none}}, workflowElapsedSeconds: 600}}"));
}

#[test]
fn cancel_at_a_wait_until_after_an_accepted_notice() {
    passes(M, &format!("input: {{startAt: '2030-01-01T00:00:00Z'}}\nreplies: {{send: [{NOTICE_OK}]}}\ncancel: {{afterSeconds: 60}}\nexpect: {{path: [pre, send, later], state: cancelled-after-effect, outcome: {{type: none}}, workflowElapsedSeconds: 60}}"));
}

/// Regression: a cancel scripted while the run is held in `attention` was
/// never delivered (the case ended `uncertain`).
#[test]
fn cancel_reaches_a_run_held_after_an_unknown_answer() {
    passes(W, "input: {startAt: '2030-01-01T00:00:00Z'}\nreplies: {submit: [{type: uncertain, code: t}]}\ncancel: {afterSeconds: 600}\nexpect: {path: [pre, submit], state: cancelled, outcome: {type: none}, workflowElapsedSeconds: 600}");
    passes(E, "input: {startAt: '2030-01-01T00:00:00Z'}\nreplies: {evaluate: [{type: uncertain, code: t}]}\ncancel: {afterSeconds: 5}\nexpect: {path: [pre, evaluate], state: cancelled, outcome: {type: none}, workflowElapsedSeconds: 5}");
    // At or after the deadline the held run is left as it is.
    passes(W, "input: {startAt: '2030-01-01T00:00:00Z'}\nreplies: {submit: [{type: uncertain, code: t}]}\ncancel: {afterSeconds: 604800}\nexpect: {path: [pre, submit], state: uncertain, outcome: {type: none}, workflowElapsedSeconds: 0}");
}

// ---- replies and recovery -----------------------------------------------

#[test]
fn retryable_replies_running_out_leave_the_run_retryable() {
    passes(M, "input: {startAt: '2030-01-01T00:00:00Z'}\nreplies: {send: [{type: retryable, code: busy}, {type: retryable, code: busy}]}\nexpect: {path: [pre, send], state: retryable, outcome: {type: none}}");
}

#[test]
fn receipt_unresolved_is_reconciled_again() {
    passes(M, &format!("input: {{startAt: '2030-01-01T00:00:00Z'}}\nreplies: {{send: [{{type: uncertain, code: t}}, {{type: receipt-unresolved}}, {{type: receipt-unresolved}}, {NOTICE_OK}]}}\nrecovery: {{send: reconcile}}\nexpect: {{path: [pre, send, later, sent], state: completed, outcome: {{type: named, value: sent}}}}"));
}

/// Regression: when the replies ran out on an unknown answer, the recovery
/// was applied once more and the case failed with "no receipt answer
/// scripted" instead of staying held.
#[test]
fn recovery_stops_when_the_replies_run_out_on_an_unknown_answer() {
    passes(M, "input: {startAt: '2030-01-01T00:00:00Z'}\nreplies: {send: [{type: uncertain, code: t}, {type: receipt-unresolved}]}\nrecovery: {send: reconcile}\nexpect: {path: [pre, send], state: uncertain, outcome: {type: none}}");
    passes(W, "input: {startAt: '2030-01-01T00:00:00Z'}\nreplies: {submit: [{type: uncertain, code: t}, {type: uncertain, code: t}]}\nrecovery: {submit: retry-same}\nexpect: {path: [pre, submit], state: uncertain, outcome: {type: none}}");
}

#[test]
fn refusal_after_an_unknown_answer_stays_uncertain() {
    passes(W, "input: {startAt: '2030-01-01T00:00:00Z'}\nreplies: {submit: [{type: uncertain, code: t}, {type: refused, code: idempotency.key-reused}]}\nrecovery: {submit: retry-same}\nexpect: {path: [pre, submit], state: uncertain, outcome: {type: none}}");
}

#[test]
fn reconcile_on_an_operation_without_receipts_is_a_located_file_error() {
    let d = fault(W, "input: {startAt: '2030-01-01T00:00:00Z'}\nreplies: {submit: [{type: uncertain, code: t}]}\nrecovery: {submit: reconcile}\nexpect: {path: [pre, submit], state: uncertain, outcome: {type: none}}");
    assert_eq!(d.code, "coordinator.scenario.reconcile-unsupported");
    assert_eq!(d.pointer, "/cases/0/recovery/submit");
    assert!(d.line > 0);
}

/// Regression: recovery for an evaluation was accepted by the file and only
/// refused (or silently ignored) at run time.
#[test]
fn recovery_for_an_evaluation_is_a_located_file_error() {
    let d = fault(E, "input: {startAt: '2030-01-01T00:00:00Z'}\nreplies: {evaluate: [{type: uncertain, code: t}]}\nrecovery: {evaluate: retry-same}\nexpect: {path: [pre, evaluate], state: uncertain, outcome: {type: none}}");
    assert_eq!(d.code, "coordinator.scenario.recovery-unsupported");
    assert_eq!(d.pointer, "/cases/0/recovery/evaluate");
}

/// Regression: a reply after `receipt-expired` was reported only as "never
/// used"; SPEC §7 names the rule.
#[test]
fn anything_after_receipt_expired_is_a_located_file_error() {
    let d = fault(M, &format!("input: {{startAt: '2030-01-01T00:00:00Z'}}\nreplies: {{send: [{{type: uncertain, code: t}}, {{type: receipt-expired}}, {NOTICE_OK}]}}\nrecovery: {{send: reconcile}}\nexpect: {{path: [pre, send], state: uncertain, outcome: {{type: none}}}}"));
    assert_eq!(d.code, "coordinator.scenario.reply-after-receipt-expired");
    assert_eq!(d.pointer, "/cases/0/replies/send/2");
}

/// Regression: as above, for a reply after an unknown evaluation answer.
#[test]
fn anything_after_an_unknown_evaluation_is_a_located_file_error() {
    let d = fault(E, "input: {startAt: '2030-01-01T00:00:00Z'}\nreplies: {evaluate: [{type: uncertain, code: t}, {type: success, value: {model: m, answers: {}, usage: {}}}]}\nexpect: {path: [pre, evaluate], state: uncertain, outcome: {type: none}}");
    assert_eq!(
        d.code,
        "coordinator.scenario.reply-after-unknown-evaluation"
    );
    assert_eq!(d.pointer, "/cases/0/replies/evaluate/1");
}

#[test]
fn a_reply_never_used_is_a_located_file_error() {
    let d = fault(M, &format!("input: {{startAt: '2030-01-01T00:00:00Z'}}\nreplies: {{send: [{NOTICE_OK}, {NOTICE_OK}]}}\nexpect: {{path: [pre, send, later, sent], state: completed, outcome: {{type: named, value: sent}}}}"));
    assert_eq!(d.code, "coordinator.scenario.unused-reply");
    assert_eq!(d.pointer, "/cases/0/replies/send/1");
}

#[test]
fn a_call_or_wait_reached_with_nothing_scripted_is_a_located_file_error() {
    let d = fault(W, "input: {startAt: '2030-01-01T00:00:00Z'}\nexpect: {path: [pre, submit], state: uncertain, outcome: {type: none}}");
    assert_eq!(d.code, "coordinator.scenario.unscripted-call");
    let d = fault(W, &format!("input: {{startAt: '2030-01-01T00:00:00Z'}}\nreplies: {{{SUBMIT_OK}}}\nexpect: {{path: [pre, submit, wait], state: expired, outcome: {{type: none}}}}"));
    assert_eq!(d.code, "coordinator.scenario.unscripted-wait");
}

#[test]
fn declared_refusal_without_a_route_is_refused() {
    passes(E, "input: {startAt: '2030-01-01T00:00:00Z'}\nreplies: {evaluate: [{type: success, value: {model: m, answers: {}, usage: {}}}], act: [{type: declared-refusal, refusalCode: owner.no}]}\nexpect: {path: [pre, evaluate, act], state: refused, outcome: {type: none}, failure: product-refused}");
}

#[test]
fn an_evaluation_retryable_answer_is_retried() {
    passes(E, "input: {startAt: '2030-01-01T00:00:00Z'}\nreplies: {evaluate: [{type: retryable, code: busy}, {type: success, value: {model: m, answers: {}, usage: {}}}], act: [{type: success, value: {action: do-it, results: {}}}]}\nexpect: {path: [pre, evaluate, act, ok], state: completed, outcome: {type: named, value: ok}, output: null}");
}

// ---- expectations -------------------------------------------------------

#[test]
fn explicit_null_output_is_checked_and_absent_output_is_not() {
    let body = |output: &str| {
        format!("input: {{startAt: '2030-01-01T00:00:00Z'}}\nreplies: {{send: [{NOTICE_OK}]}}\nexpect: {{path: [pre, send, later, sent], state: completed, outcome: {{type: named, value: sent}}{output}}}")
    };
    passes(M, &body(""));
    assert_eq!(
        difference(M, &body(", output: null")),
        "output: expected null, got {\"id\":\"0c9d8e7f-6a5b-4c3d-8e2f-1a0b9c8d7e6f\"}"
    );
}

#[test]
fn the_first_difference_is_reported() {
    let refused = "input: {startAt: '2030-01-01T00:00:00Z'}\nreplies: {send: [{type: refused, code: template.bad}]}\n";
    assert_eq!(
        difference(
            M,
            &format!("{refused}expect: {{path: [pre], state: failed, outcome: {{type: none}}}}")
        ),
        "path: expected [pre], got [pre, send]"
    );
    assert_eq!(
        difference(
            M,
            &format!(
                "{refused}expect: {{path: [pre, send], state: failed, outcome: {{type: none}}}}"
            )
        ),
        "state: expected failed, got refused"
    );
    assert_eq!(
        difference(M, &format!("{refused}expect: {{path: [pre, send], state: refused, outcome: {{type: none}}, failure: invalid-command}}")),
        "failure: expected invalid-command, got product-refused"
    );
    passes(M, &format!("{refused}expect: {{path: [pre, send], state: refused, outcome: {{type: none}}, failure: template.bad}}"));
    assert_eq!(
        difference(M, &format!("input: {{startAt: '2030-01-01T00:00:00Z'}}\nreplies: {{send: [{NOTICE_OK}]}}\nexpect: {{path: [pre, send, later, sent], state: completed, outcome: {{type: named, value: sent}}, workflowElapsedSeconds: 5}}")),
        "elapsed seconds: expected 5, got 86400"
    );
}

#[test]
fn same_case_twice_gives_identical_reports() {
    let body = format!("input: {{startAt: '2030-01-01T00:00:00Z'}}\nreplies: {{send: [{{type: uncertain, code: t}}, {NOTICE_OK}]}}\nrecovery: {{send: retry-same}}\nexpect: {{path: [pre, send, later, sent], state: completed, outcome: {{type: named, value: sent}}}}");
    let a = serde_json::to_string(&run_one(M, &body).expect("runs")).expect("json");
    let b = serde_json::to_string(&run_one(M, &body).expect("runs")).expect("json");
    assert_eq!(a, b);
}

/// Each scripted section names a step of the right kind: a located
/// `unknown-step`, `not-a-call`, `not-a-wait-for` or `reply-count`.
#[test]
fn scripted_sections_name_steps_of_the_right_kind() {
    let tail = "expect: {path: [pre], state: completed, outcome: {type: none}}";
    let d = fault(W, &format!("input: {{startAt: '2030-01-01T00:00:00Z'}}\nreplies: {{nosuch: [{{type: uncertain, code: t}}]}}\n{tail}"));
    assert_eq!(d.code, "coordinator.scenario.unknown-step");
    assert_eq!(d.pointer, "/cases/0/replies/nosuch");
    // At the step's name (`  replies: {nosuch: ...`), not at its replies.
    assert_eq!((d.line, d.column), (7, 13), "{d:?}");
    let d = fault(W, &format!("input: {{startAt: '2030-01-01T00:00:00Z'}}\nreplies: {{wait: [{{type: uncertain, code: t}}]}}\n{tail}"));
    assert_eq!(d.code, "coordinator.scenario.not-a-call");
    assert_eq!(d.pointer, "/cases/0/replies/wait");
    assert_eq!(d.column, 13, "{d:?}");
    let d = fault(
        W,
        &format!("input: {{startAt: '2030-01-01T00:00:00Z'}}\nreplies: {{submit: []}}\n{tail}"),
    );
    assert_eq!(d.code, "coordinator.scenario.reply-count");
    let d = fault(W, &format!("input: {{startAt: '2030-01-01T00:00:00Z'}}\ncompletions: {{submit: {{type: completed, afterSeconds: 1, value: {{outcome: x}}}}}}\n{tail}"));
    assert_eq!(d.code, "coordinator.scenario.not-a-wait-for");
    assert_eq!(d.pointer, "/cases/0/completions/submit");
    let d = fault(W, &format!("input: {{startAt: '2030-01-01T00:00:00Z'}}\ncompletions: {{gone: {{type: completed, afterSeconds: 1, value: {{outcome: x}}}}}}\n{tail}"));
    assert_eq!(d.code, "coordinator.scenario.unknown-step");
    assert_eq!(d.pointer, "/cases/0/completions/gone");
    let d = fault(
        W,
        &format!(
            "input: {{startAt: '2030-01-01T00:00:00Z'}}\nrecovery: {{pre: retry-same}}\n{tail}"
        ),
    );
    assert_eq!(d.code, "coordinator.scenario.not-a-call");
    assert_eq!(d.pointer, "/cases/0/recovery/pre");
}
