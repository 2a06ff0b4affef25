//! Run semantics, driven through the public API with hand-built Programs.

#![allow(clippy::indexing_slicing, clippy::wildcard_enum_match_arm)]

use coordinator_ir::{Program, StepId, StepOp};
use serde_json::{json, Value};

use crate::testkit::*;
use crate::*;

fn answered(step: &str, answer: Answer) -> Event {
    Event::CallAnswered {
        step: step.into(),
        answer,
    }
}
fn success(v: Value) -> Answer {
    Answer::Success { value: v }
}
fn retryable() -> Answer {
    Answer::Retryable {
        code: "busy".into(),
    }
}
fn uncertain() -> Answer {
    Answer::Uncertain {
        code: "transport-uncertain".into(),
    }
}
fn refused(code: &str) -> Answer {
    Answer::Refused { code: code.into() }
}

fn record() -> Value {
    json!({"collection": "applications", "recordId": "r1", "revision": "3", "data": {"name": "Ada"}})
}

/// s0 read-record (input from the run input), s1 finish `done` with the
/// record's `/data/name`.
fn read_program() -> Program {
    let mut b = ProgramBuilder::new(86_400);
    b.input_schema(json!({"type": "object", "required": ["recordId"]}));
    let op = b.op("applications-read-record", "breg.read-record/v1");
    let c = b.constant(json!("applications"));
    let input = b.expr(vec![
        coordinator_ir::Instr::Const { value: c },
        coordinator_ir::Instr::Input {
            path: Some("/recordId".into()),
        },
        coordinator_ir::Instr::Object {
            keys: vec!["collection".into(), "recordId".into()],
        },
    ]);
    let done = b.outcome("done", json!({"type": "string"}));
    let out = b.output_of(0, Some("/data/name"));
    b.step("read", call(op, input, 1));
    b.step("done", finish(done, Some(out)));
    b.build()
}

fn mutation_input(id: &str) -> Value {
    match id {
        "messaging.submit-message/v1" => json!({
            "senderProfile": "p", "to": {"email": "a@example.org"},
            "template": {"id": "t", "version": "1"}, "locale": "en", "data": {}
        }),
        "breg.invoke-action/v1" => json!({"input": {}}),
        "evaluation.evaluate/v1" => json!({"state": {}, "questions": {}}),
        "casework.submit-review-request/v1" => json!({
            "subject": {"product": "breg", "recordType": "application", "identifier": "r1"},
            "policy": "p", "summary": {}
        }),
        _ => json!({}),
    }
}

fn mutation_output(id: &str) -> Value {
    match id {
        "messaging.submit-message/v1" => {
            json!({"id": "6f1c1a0e-1111-4a4a-8a8a-0123456789ab", "status": "queued"})
        }
        "breg.invoke-action/v1" => json!({"action": "act", "results": {}}),
        "evaluation.evaluate/v1" => json!({"model": "m", "answers": {}, "usage": {}}),
        "casework.submit-review-request/v1" => json!({"id": "rr-1", "status": "pending"}),
        _ => json!({}),
    }
}

/// s0 call `id` with a literal input, s1 finish `accepted` (output null).
fn call_program(id: &str) -> Program {
    let mut b = ProgramBuilder::new(86_400);
    let op = b.op("the-op", id);
    let input = b.lit(mutation_input(id));
    let accepted = b.outcome("accepted", json!({"type": "null"}));
    b.step("send", call(op, input, 1));
    b.step("accepted", finish(accepted, None));
    b.build()
}

fn dispatches(d: &Driver) -> Vec<(u32, Vec<u8>)> {
    d.commands
        .iter()
        .filter_map(|c| match c {
            Command::Dispatch { dispatch, .. } => Some((
                dispatch.attempt,
                coordinator_ir::canonical::to_vec(&dispatch.command),
            )),
            _ => None,
        })
        .collect()
}

#[test]
fn admission_schedules_the_deadline_and_dispatches_the_first_call() {
    let d = Driver::admit(&read_program(), json!({"recordId": "r1"}));
    assert_eq!(d.last.status, RunStatus::Running);
    assert_eq!(
        d.last.commands,
        vec![
            Command::ScheduleWake {
                at: instant("2026-10-10T09:00:00Z"),
                kind: WakeKind::Deadline
            },
            Command::Dispatch {
                operation: "applications-read-record".into(),
                needs_idempotency_key: false,
                dispatch: DispatchCommand {
                    step: "read".into(),
                    operation_id: "breg.read-record/v1".into(),
                    connection: "conn".into(),
                    action: None,
                    command: json!({"collection": "applications", "recordId": "r1"}),
                    attempt: 1,
                    resend_safe: true,
                },
            }
        ]
    );
}

#[test]
fn input_outside_the_schema_is_rejected() {
    let vm = Vm::new(&read_program()).expect("loads");
    let err = vm.admit(json!({"x": 1}), t0()).expect_err("rejected");
    assert_eq!(err.code, RejectCode::InputInvalid);
    // The refusal names the pointer and the rule, never the value.
    let secret = "john.smith@example.org-personal";
    let err = vm.admit(json!({"x": secret}), t0()).expect_err("rejected");
    assert!(!err.message.contains(secret), "{}", err.message);
    let err = vm.admit(json!({}), t0()).expect_err("rejected");
    assert!(
        err.message.contains("\"recordId\" is required"),
        "{}",
        err.message
    );
    assert_eq!(
        vm.admit(json!({"recordId": "r"}), instant("0000-06-01T00:00:00Z"))
            .expect_err("bad")
            .code,
        RejectCode::InstantInvalid
    );
}

#[test]
fn a_read_success_flows_into_the_finish() {
    let mut d = Driver::admit(&read_program(), json!({"recordId": "r1"}));
    d.feed(answered("read", success(record())));
    let st = &d.last.state;
    assert_eq!(st.status, RunStatus::Finished);
    assert_eq!(d.path(), ["read", "done"]);
    assert_eq!(st.outcome.as_deref(), Some("done"));
    assert_eq!(st.output, Some(json!("Ada")));
    assert_eq!(st.elapsed_seconds, 0);
    assert!(st.effects.is_empty());
    assert_eq!(
        d.last.commands,
        vec![Command::Ended {
            status: RunStatus::Finished
        }]
    );
}

#[test]
fn retryable_and_uncertain_reads_are_sent_again_with_identical_commands() {
    let mut d = Driver::admit(&read_program(), json!({"recordId": "r1"}));
    d.feed(answered("read", retryable()));
    assert_eq!(d.last.status, RunStatus::Running);
    d.feed(answered("read", uncertain()));
    d.feed(answered("read", success(record())));
    let sent = dispatches(&d);
    assert_eq!(sent.iter().map(|s| s.0).collect::<Vec<_>>(), [1, 2, 3]);
    assert!(sent.iter().all(|s| s.1 == sent[0].1));
    assert_eq!(d.last.status, RunStatus::Finished);
}

#[test]
fn a_refused_read_fails_keeping_the_product_code() {
    let mut d = Driver::admit(&read_program(), json!({"recordId": "r1"}));
    d.feed(answered("read", refused("product-not-found")));
    let f = d.last.state.failure.clone().expect("failure");
    assert_eq!(d.last.status, RunStatus::Failed);
    assert_eq!(f.code, FailureCode::ProductRefused);
    assert_eq!(f.product_code.as_deref(), Some("product-not-found"));
    assert_eq!(f.step, "read");
}

#[test]
fn an_invalid_response_fails() {
    let mut d = Driver::admit(&read_program(), json!({"recordId": "r1"}));
    d.feed(answered("read", success(json!({"collection": "a"}))));
    assert_eq!(
        d.last.state.failure.as_ref().map(|f| f.code),
        Some(FailureCode::InvalidResponse)
    );
}

#[test]
fn a_missing_member_after_success_is_mapping_invalid() {
    let mut d = Driver::admit(&read_program(), json!({"recordId": "r1"}));
    let mut r = record();
    r["data"] = json!({});
    d.feed(answered("read", success(r)));
    assert_eq!(
        d.last.state.failure.as_ref().map(|f| f.code),
        Some(FailureCode::MappingInvalid)
    );
    assert!(
        d.last
            .state
            .failure
            .as_ref()
            .is_some_and(|f| f.path.is_some()),
        "the member the mapping read is named: {:?}",
        d.last.state.failure
    );
    assert_eq!(d.path(), ["read", "done"]);
}

#[test]
fn an_input_outside_the_operation_schema_is_invalid_command() {
    let mut b = ProgramBuilder::new(100);
    let op = b.op("r", "breg.read-record/v1");
    let input = b.lit(json!({"collection": "", "recordId": "x"}));
    let o = b.outcome("o", json!({}));
    b.step("read", call(op, input, 1));
    b.step("o", finish(o, None));
    let d = Driver::admit(&b.build(), json!({}));
    let f = d.last.state.failure.clone().expect("failed");
    assert_eq!(f.code, FailureCode::InvalidCommand);
    assert!(f.message.contains("/collection"), "{}", f.message);
    assert_eq!(
        f.path.as_deref(),
        Some("/collection"),
        "the failure's place"
    );
    assert!(!d
        .commands
        .iter()
        .any(|c| matches!(c, Command::Dispatch { .. })));
}

#[test]
fn a_finish_output_outside_the_outcome_schema_is_mapping_invalid() {
    let mut b = ProgramBuilder::new(100);
    let o = b.outcome("o", json!({"type": "null"}));
    let out = b.lit(json!(1));
    b.step("o", finish(o, Some(out)));
    let d = Driver::admit(&b.build(), json!({}));
    assert_eq!(
        d.last.state.failure.as_ref().map(|f| f.code),
        Some(FailureCode::MappingInvalid)
    );
}

#[test]
fn mutation_retryable_resends_the_frozen_command() {
    let mut d = Driver::admit(&call_program("messaging.submit-message/v1"), json!({}));
    d.feed(answered("send", retryable()));
    d.feed(answered("send", retryable()));
    d.feed(answered(
        "send",
        success(mutation_output("messaging.submit-message/v1")),
    ));
    let sent = dispatches(&d);
    assert_eq!(sent.len(), 3);
    assert!(sent.iter().all(|s| s.1 == sent[0].1));
    assert_eq!(d.last.status, RunStatus::Finished);
    assert_eq!(
        d.last.state.effects.get("send"),
        Some(&EffectState::Accepted)
    );
}

#[test]
fn mutation_uncertain_holds_then_retry_same_settles() {
    let id = "breg.invoke-action/v1";
    let mut d = Driver::admit(&call_program(id), json!({}));
    d.feed(answered("send", uncertain()));
    assert_eq!(d.last.status, RunStatus::Attention);
    assert_eq!(
        d.last.state.effects.get("send"),
        Some(&EffectState::Unknown)
    );
    assert_eq!(d.last.commands, vec![]);
    // An answer while held is not expected; reconcile needs receipts.
    assert_eq!(
        d.try_feed(answered("send", success(json!({}))))
            .expect_err("held")
            .code,
        RejectCode::Unexpected
    );
    assert_eq!(
        d.try_feed(Event::Reconcile { at: at(0) })
            .expect_err("no receipt")
            .code,
        RejectCode::NoReceipt
    );
    d.feed(Event::RetrySame { at: at(60) });
    assert_eq!(d.last.status, RunStatus::Running);
    d.feed(answered("send", success(mutation_output(id))));
    assert_eq!(d.last.status, RunStatus::Finished);
    assert_eq!(
        d.last.state.effects.get("send"),
        Some(&EffectState::Accepted)
    );
    assert_eq!(d.last.state.elapsed_seconds, 60);
    let sent = dispatches(&d);
    assert_eq!(sent.iter().map(|s| s.0).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(sent[0].1, sent[1].1);
    // Action alias is carried.
    assert!(
        matches!(&d.commands[1], Command::Dispatch { dispatch, .. } if dispatch.action.as_deref() == Some("act"))
    );
}

#[test]
fn a_refusal_after_an_unknown_answer_stays_uncertain() {
    let mut d = Driver::admit(&call_program("breg.invoke-action/v1"), json!({}));
    d.feed(answered("send", uncertain()));
    d.feed(Event::RetrySame { at: at(0) });
    d.feed(answered("send", refused("conflict")));
    assert_eq!(d.last.status, RunStatus::Attention);
    assert_eq!(
        d.last.state.effects.get("send"),
        Some(&EffectState::Unknown)
    );
    assert!(d.last.state.failure.is_none());
}

#[test]
fn reconcile_finds_the_original_response() {
    let id = "messaging.submit-message/v1";
    let mut d = Driver::admit(&call_program(id), json!({}));
    d.feed(answered("send", uncertain()));
    assert_eq!(
        d.try_feed(answered("send", Answer::ReceiptUnresolved))
            .expect_err("no lookup")
            .code,
        RejectCode::Unexpected
    );
    d.feed(Event::Reconcile { at: at(0) });
    assert!(
        matches!(&d.last.commands[..], [Command::LookupReceipt { lookup: 1, step, .. }] if step == "send")
    );
    d.feed(answered("send", Answer::ReceiptUnresolved));
    assert_eq!(d.last.status, RunStatus::Attention);
    d.feed(Event::Reconcile { at: at(10) });
    d.feed(answered("send", success(mutation_output(id))));
    assert_eq!(d.last.status, RunStatus::Finished);
    assert_eq!(
        d.last.state.effects.get("send"),
        Some(&EffectState::Accepted)
    );
    assert_eq!(dispatches(&d).len(), 1);
}

#[test]
fn an_expired_receipt_holds_for_good() {
    let mut d = Driver::admit(&call_program("scheduling.create-appointment/v1"), json!({}));
    // Literal `{}` is not a valid appointment input: use messaging instead.
    assert_eq!(d.last.status, RunStatus::Failed);
    d = Driver::admit(&call_program("messaging.submit-message/v1"), json!({}));
    d.feed(answered("send", uncertain()));
    d.feed(Event::Reconcile { at: at(0) });
    d.feed(answered("send", Answer::ReceiptExpired));
    assert_eq!(d.last.status, RunStatus::Attention);
    assert_eq!(
        d.try_feed(Event::RetrySame { at: at(1) })
            .expect_err("nothing may follow")
            .code,
        RejectCode::NotResendable
    );
    assert_eq!(
        d.try_feed(Event::Reconcile { at: at(1) })
            .expect_err("nothing may follow")
            .code,
        RejectCode::ReceiptExpired
    );
}

#[test]
fn an_uncertain_evaluation_is_never_sent_again() {
    let mut d = Driver::admit(&call_program("evaluation.evaluate/v1"), json!({}));
    d.feed(answered("send", uncertain()));
    assert_eq!(d.last.status, RunStatus::Attention);
    assert_eq!(
        d.try_feed(Event::RetrySame { at: at(0) })
            .expect_err("hold")
            .code,
        RejectCode::NotResendable
    );
    assert_eq!(
        d.try_feed(Event::Reconcile { at: at(0) })
            .expect_err("hold")
            .code,
        RejectCode::NoReceipt
    );
    assert_eq!(dispatches(&d).len(), 1);
}

#[test]
fn retry_same_needs_a_held_run() {
    let mut d = Driver::admit(&call_program("breg.invoke-action/v1"), json!({}));
    assert_eq!(
        d.try_feed(Event::RetrySame { at: at(0) })
            .expect_err("not held")
            .code,
        RejectCode::NotHeld
    );
}

fn declared_refusal_program(with_route: bool) -> Program {
    let mut b = ProgramBuilder::new(100);
    let op = b.op("approve", "breg.invoke-action/v1");
    let input = b.lit(json!({"input": {}}));
    let ok = b.outcome("approved", json!({}));
    let no = b.outcome("declined", json!({"type": "string"}));
    let code = b.output_of(0, Some("/refusalCode"));
    b.step(
        "approve",
        StepOp::Call {
            operation: op,
            input,
            next: StepId(1),
            on_declared_refusal: with_route.then_some(StepId(2)),
        },
    );
    b.step("approved", finish(ok, None));
    b.step("declined", finish(no, Some(code)));
    b.build()
}

#[test]
fn a_declared_refusal_takes_its_route_with_the_refusal_code() {
    let mut d = Driver::admit(&declared_refusal_program(true), json!({}));
    d.feed(answered(
        "approve",
        Answer::DeclaredRefusal {
            refusal_code: "not-eligible".into(),
        },
    ));
    assert_eq!(d.path(), ["approve", "declined"]);
    assert_eq!(d.last.state.output, Some(json!("not-eligible")));
    assert_eq!(
        d.last.state.outputs.get("approve"),
        Some(&json!({"refusalCode": "not-eligible"}))
    );

    let mut d = Driver::admit(&declared_refusal_program(false), json!({}));
    d.feed(answered(
        "approve",
        Answer::DeclaredRefusal {
            refusal_code: "not-eligible".into(),
        },
    ));
    let f = d.last.state.failure.clone().expect("failed");
    assert_eq!(
        (f.code, f.product_code.as_deref()),
        (FailureCode::ProductRefused, Some("not-eligible"))
    );
}

/// s0 submit review, s1 wait-for result (timeout 3600 s), s2 finish
/// `decided` (the completion), s3 finish `timed-out`, s4 finish `withdrawn`.
fn wait_for_program(on_timeout: bool, on_cancel: bool) -> Program {
    let id = "casework.submit-review-request/v1";
    let mut b = ProgramBuilder::new(86_400);
    let op = b.op("review", id);
    let input = b.lit(mutation_input(id));
    let decided = b.outcome("decided", json!({}));
    let timed_out = b.outcome("timed-out", json!({"type": "null"}));
    let withdrawn = b.outcome("withdrawn", json!({"type": "null"}));
    let out = b.output_of(1, None);
    b.step("submit", call(op, input, 1));
    b.step(
        "await",
        StepOp::WaitFor {
            call: StepId(0),
            completion: "result".into(),
            timeout_seconds: 3600,
            next: StepId(2),
            on_timeout: on_timeout.then_some(StepId(3)),
            on_cancel: on_cancel.then_some(StepId(4)),
        },
    );
    b.step("decided", finish(decided, Some(out)));
    b.step("timed-out", finish(timed_out, None));
    b.step("withdrawn", finish(withdrawn, None));
    b.build()
}

fn submitted(on_timeout: bool, on_cancel: bool) -> Driver {
    let mut d = Driver::admit(&wait_for_program(on_timeout, on_cancel), json!({}));
    d.feed(answered(
        "submit",
        success(mutation_output("casework.submit-review-request/v1")),
    ));
    d
}

fn decision() -> Value {
    json!({"outcome": "approved", "decidedAt": "2026-10-09T10:00:00Z"})
}

#[test]
fn wait_for_announces_the_observation_and_takes_the_completion() {
    let mut d = submitted(false, false);
    assert_eq!(
        d.last.commands,
        vec![Command::ObserveCompletion {
            step: "await".into(),
            call: "submit".into(),
            completion: "result".into(),
            connection: "conn".into(),
            handle: Some("rr-1".into()),
            timeout_at: at(3600),
        }]
    );
    d.feed(Event::CompletionObserved {
        step: "await".into(),
        value: decision(),
        at: at(900),
    });
    assert_eq!(d.last.status, RunStatus::Finished);
    assert_eq!(d.path(), ["submit", "await", "decided"]);
    assert_eq!(d.last.state.output, Some(decision()));
    assert_eq!(d.last.state.elapsed_seconds, 900);
}

#[test]
fn a_completion_outside_its_schema_is_an_invalid_response() {
    let mut d = submitted(false, false);
    d.feed(Event::CompletionObserved {
        step: "await".into(),
        value: json!({"outcome": 1}),
        at: at(1),
    });
    assert_eq!(
        d.last.state.failure.as_ref().map(|f| f.code),
        Some(FailureCode::InvalidResponse)
    );
}

#[test]
fn wait_for_timeout_takes_on_timeout_or_expires() {
    let mut d = submitted(true, false);
    d.feed(Event::TimerFired { at: at(3599) });
    assert_eq!(d.last.status, RunStatus::Running);
    d.feed(Event::TimerFired { at: at(3600) });
    assert_eq!(d.path(), ["submit", "await", "timed-out"]);
    assert_eq!(d.last.state.elapsed_seconds, 3600);
    assert_eq!(d.last.status, RunStatus::Finished);

    let mut d = submitted(false, false);
    d.feed(Event::TimerFired { at: at(3600) });
    assert_eq!(d.last.status, RunStatus::Expired);
    assert_eq!(d.last.state.ended_at, Some(at(3600)));
    assert_eq!(d.path(), ["submit", "await"]);
}

#[test]
fn at_one_instant_completion_beats_timeout_and_a_late_completion_loses() {
    let mut d = submitted(true, false);
    d.feed(Event::CompletionObserved {
        step: "await".into(),
        value: decision(),
        at: at(3600),
    });
    assert_eq!(d.path(), ["submit", "await", "decided"]);

    let mut d = submitted(true, false);
    d.feed(Event::CompletionObserved {
        step: "await".into(),
        value: decision(),
        at: at(3601),
    });
    assert_eq!(d.path(), ["submit", "await", "timed-out"]);
    assert_eq!(d.last.state.elapsed_seconds, 3600);
}

#[test]
fn cancel_during_wait_for_takes_on_cancel_and_ends_cancelled() {
    let mut d = submitted(false, true);
    d.feed(Event::CancelRequested { at: at(60) });
    assert_eq!(d.last.status, RunStatus::Cancelled);
    assert_eq!(d.path(), ["submit", "await", "withdrawn"]);
    assert_eq!(d.last.state.outcome.as_deref(), Some("withdrawn"));
    assert_eq!(d.last.state.output, Some(Value::Null));
    assert_eq!(
        d.try_feed(Event::CancelRequested { at: at(61) })
            .expect_err("ended")
            .code,
        RejectCode::RunEnded
    );
}

/// Each edge a run takes is reported once, named by its authored member,
/// in the result of the event that took it (the record coverage reads).
#[test]
fn the_edges_taken_are_reported_with_the_event_that_took_them() {
    let taken = |from: &str, edge: Edge, to: &str| EdgeTaken {
        from: from.into(),
        edge,
        to: to.into(),
    };
    let d = submitted(true, true);
    assert_eq!(d.last.edges, vec![taken("submit", Edge::Next, "await")]);
    let mut timed_out = submitted(true, true);
    timed_out.feed(Event::TimerFired { at: at(3600) });
    assert_eq!(
        timed_out.last.edges,
        vec![taken("await", Edge::OnTimeout, "timed-out")]
    );
    let mut cancelled = submitted(true, true);
    cancelled.feed(Event::CancelRequested { at: at(60) });
    assert_eq!(
        cancelled.last.edges,
        vec![taken("await", Edge::OnCancel, "withdrawn")]
    );
    let mut declined = Driver::admit(&declared_refusal_program(true), json!({}));
    assert!(declined.last.edges.is_empty());
    declined.feed(answered(
        "approve",
        Answer::DeclaredRefusal {
            refusal_code: "not-eligible".into(),
        },
    ));
    assert_eq!(
        declined.last.edges,
        vec![taken("approve", Edge::OnDeclaredRefusal, "declined")]
    );
}

#[test]
fn cancel_after_an_accepted_mutation_without_on_cancel() {
    let mut d = submitted(false, false);
    d.feed(Event::CancelRequested { at: at(60) });
    assert_eq!(d.last.status, RunStatus::CancelledAfterEffect);
    assert_eq!(d.last.state.outcome, None);
    assert_eq!(d.last.state.elapsed_seconds, 60);
}

/// s0 wait-until input `/at`, s1 finish.
fn wait_until_program() -> Program {
    let mut b = ProgramBuilder::new(86_400);
    let until = b.input(Some("/at"));
    let o = b.outcome("done", json!({"type": "null"}));
    b.step(
        "due",
        StepOp::WaitUntil {
            until,
            next: StepId(1),
        },
    );
    b.step("done", finish(o, None));
    b.build()
}

#[test]
fn wait_until_wakes_at_its_instant() {
    let mut d = Driver::admit(
        &wait_until_program(),
        json!({"at": "2026-10-09T11:00:00+02:00"}),
    );
    // 11:00+02:00 is 09:00Z: already due.
    assert_eq!(d.last.status, RunStatus::Finished);
    d = Driver::admit(&wait_until_program(), json!({"at": "2026-10-09T09:16:00Z"}));
    assert_eq!(
        d.last.commands.last(),
        Some(&Command::ScheduleWake {
            at: at(960),
            kind: WakeKind::Wake
        })
    );
    d.feed(Event::TimerFired { at: at(959) });
    assert_eq!(d.last.status, RunStatus::Running);
    d.feed(Event::TimerFired { at: at(960) });
    assert_eq!(d.last.status, RunStatus::Finished);
    assert_eq!(d.last.state.elapsed_seconds, 960);
}

#[test]
fn wait_until_at_or_past_the_deadline_expires_at_the_deadline() {
    let mut d = Driver::admit(&wait_until_program(), json!({"at": "2026-10-10T09:00:00Z"}));
    assert_eq!(d.last.status, RunStatus::Running);
    d.feed(Event::TimerFired { at: at(86_400) });
    assert_eq!(d.last.status, RunStatus::Expired);
    assert_eq!(d.last.state.elapsed_seconds, 86_400);
    assert_eq!(
        d.last.state.ended_at.map(|t| t.to_string()).as_deref(),
        Some("2026-10-10T09:00:00Z")
    );
}

#[test]
fn a_late_timer_fires_earlier_wakes_before_the_deadline() {
    let mut d = Driver::admit(&wait_until_program(), json!({"at": "2026-10-09T10:00:00Z"}));
    d.feed(Event::TimerFired { at: at(200_000) });
    assert_eq!(d.last.status, RunStatus::Finished);
    assert_eq!(d.last.state.elapsed_seconds, 3600);
}

#[test]
fn an_until_that_is_not_an_instant_is_mapping_invalid() {
    let d = Driver::admit(&wait_until_program(), json!({"at": "tomorrow"}));
    assert_eq!(
        d.last.state.failure.as_ref().map(|f| f.code),
        Some(FailureCode::MappingInvalid)
    );
}

#[test]
fn cancel_during_wait_until_without_effect_is_cancelled() {
    let mut d = Driver::admit(&wait_until_program(), json!({"at": "2026-10-09T10:00:00Z"}));
    d.feed(Event::CancelRequested { at: at(10) });
    assert_eq!(d.last.status, RunStatus::Cancelled);
    assert_eq!(
        d.last.commands,
        vec![Command::Ended {
            status: RunStatus::Cancelled
        }]
    );
}

#[test]
fn the_deadline_comes_before_a_cancel_at_the_same_instant() {
    let mut d = Driver::admit(&wait_until_program(), json!({"at": "2026-10-11T10:00:00Z"}));
    d.feed(Event::CancelRequested { at: at(86_400) });
    assert_eq!(d.last.status, RunStatus::Expired);
}

#[test]
fn cancel_while_a_call_is_in_flight_waits_for_its_answer() {
    let id = "breg.invoke-action/v1";
    let mut d = Driver::admit(&call_program(id), json!({}));
    d.feed(Event::CancelRequested { at: at(5) });
    assert_eq!(d.last.status, RunStatus::CancelRequested);
    d.feed(answered("send", success(mutation_output(id))));
    assert_eq!(d.last.status, RunStatus::CancelledAfterEffect);
    assert_eq!(d.path(), ["send"]);
}

#[test]
fn the_deadline_expires_a_held_run_and_marks_in_flight_effects_unknown() {
    let mut d = Driver::admit(&call_program("breg.invoke-action/v1"), json!({}));
    d.feed(Event::TimerFired { at: at(86_400) });
    assert_eq!(d.last.status, RunStatus::Expired);
    assert_eq!(
        d.last.state.effects.get("send"),
        Some(&EffectState::Unknown)
    );
    assert_eq!(
        d.try_feed(answered("send", success(json!({}))))
            .expect_err("ended")
            .code,
        RejectCode::RunEnded
    );
}

const FUNCTIONS: &str = r#"
fn pick(n) { if n > 1 { "many" } else { "one" } }
fn spin(n) { loop { n += 1; } }
fn grow(n) { let s = "x"; loop { s += s; } }
fn deep(n) { deep(n + 1) }
fn shape(n) { #{ count: "three" } }
fn wide(n) { let a = []; for i in 0..1000 { a.push(i); } a }
fn later(at, n) { add_seconds(at, n) }
fn between(a, b) { seconds_between(a, b) }
fn nothing(n) { () }
fn nap(n) { sleep(1); 1 }
fn fail(n) { throw "no" }
"#;

/// s0 finish `done` whose output calls `entrypoint` with the given args.
fn function_program(
    entrypoint: &str,
    inputs: &[(&str, Value)],
    output: Value,
    args: &[(&str, Value)],
) -> Program {
    let mut b = ProgramBuilder::new(100);
    b.source(FUNCTIONS);
    let f = b.function(entrypoint, entrypoint, inputs, output);
    let e = b.call(f, args);
    let o = b.outcome("done", json!({}));
    b.step("done", finish(o, Some(e)));
    b.build()
}

fn function_failure(entrypoint: &str, output: Value, n: Value) -> FunctionError {
    let p = function_program(entrypoint, &[("n", json!({}))], output, &[("n", n)]);
    let d = Driver::admit(&p, json!({}));
    let f = d.last.state.failure.clone().expect("failed");
    assert_eq!(f.code, FailureCode::FunctionError);
    f.function.expect("function error")
}

#[test]
fn choose_goes_to_the_case_the_function_names() {
    let mut b = ProgramBuilder::new(100);
    b.source(FUNCTIONS);
    let f = b.function(
        "pick",
        "pick",
        &[("n", json!({"type": "integer"}))],
        json!({"enum": ["one", "many"]}),
    );
    let sel = b.call(f, &[("n", json!(3))]);
    let one = b.outcome("one", json!({"type": "null"}));
    let many = b.outcome("many", json!({"type": "null"}));
    b.step("how-many", choose(sel, &[("one", 1), ("many", 2)]));
    b.step("one", finish(one, None));
    b.step("many", finish(many, None));
    let d = Driver::admit(&b.build(), json!({}));
    assert_eq!(d.path(), ["how-many", "many"]);
    assert_eq!(
        d.last.edges,
        vec![EdgeTaken {
            from: "how-many".into(),
            edge: Edge::Case {
                label: "many".into()
            },
            to: "many".into(),
        }]
    );
}

#[test]
fn functions_that_never_end_are_stopped() {
    let e = function_failure("spin", json!({}), json!(0));
    assert_eq!(e.input, None);
    assert!(e.message.contains("100000 operations"), "{e}");
}

#[test]
fn functions_that_build_huge_strings_or_arrays_are_stopped() {
    let e = function_failure("grow", json!({}), json!(0));
    assert!(
        e.message.to_lowercase().contains("length") || e.message.contains("too large"),
        "{e}"
    );
    let e = function_failure("wide", json!({}), json!(0));
    assert!(
        e.message.to_lowercase().contains("size") || e.message.contains("too large"),
        "{e}"
    );
}

#[test]
fn functions_that_recurse_deeply_are_stopped() {
    let e = function_failure("deep", json!({}), json!(0));
    assert!(e.message.contains("call levels"), "{e}");
}

#[test]
fn a_result_of_the_wrong_shape_names_the_pointer() {
    let e = function_failure(
        "shape",
        json!({"type": "object", "properties": {"count": {"type": "integer"}}}),
        json!(0),
    );
    assert_eq!(
        (e.function.as_str(), e.input.as_deref(), e.pointer.as_str()),
        ("shape", None, "/count")
    );
    assert!(
        e.to_string()
            .starts_with("function `shape`, result at /count: "),
        "{e}"
    );
}

#[test]
fn an_argument_outside_its_schema_names_the_input_and_pointer() {
    let p = function_program(
        "pick",
        &[(
            "n",
            json!({"type": "object", "properties": {"a": {"type": "string"}}}),
        )],
        json!({}),
        &[("n", json!({"a": 1}))],
    );
    let d = Driver::admit(&p, json!({}));
    let e = d
        .last
        .state
        .failure
        .and_then(|f| f.function)
        .expect("function error");
    assert_eq!((e.input.as_deref(), e.pointer.as_str()), (Some("n"), "/a"));
}

#[test]
fn oversized_arguments_are_refused() {
    let big: Vec<Value> = (0..5000).map(Value::from).collect();
    let p = function_program(
        "nothing",
        &[("n", json!({}))],
        json!({}),
        &[("n", Value::Array(big))],
    );
    let d = Driver::admit(&p, json!({}));
    let e = d
        .last
        .state
        .failure
        .and_then(|f| f.function)
        .expect("function error");
    assert_eq!(e.input.as_deref(), Some("n"));
    assert!(e.message.contains("4096 JSON nodes"), "{e}");
    let mut deep = json!(1);
    for _ in 0..40 {
        deep = json!([deep]);
    }
    let p = function_program("nothing", &[("n", json!({}))], json!({}), &[("n", deep)]);
    let d = Driver::admit(&p, json!({}));
    let e = d
        .last
        .state
        .failure
        .and_then(|f| f.function)
        .expect("function error");
    assert!(e.message.contains("deeper than 32"), "{e}");
    let p = function_program(
        "nothing",
        &[("n", json!({}))],
        json!({}),
        &[("n", json!("y".repeat(140_000)))],
    );
    let d = Driver::admit(&p, json!({}));
    let e = d
        .last
        .state
        .failure
        .and_then(|f| f.function)
        .expect("function error");
    assert!(e.message.contains("canonical JSON"), "{e}");
}

#[test]
fn eval_sleep_and_throw_are_function_errors() {
    for name in ["nap", "fail"] {
        let e = function_failure(name, json!({}), json!(0));
        assert_eq!(e.function, name);
    }
    let mut b = ProgramBuilder::new(100);
    b.source("fn f(n) { print(n); 1 }");
    b.function("f", "f", &[("n", json!({}))], json!({}));
    let o = b.outcome("o", json!({}));
    b.step("o", finish(o, None));
    assert!(Vm::new(&b.build()).is_err(), "print is disabled");
    let mut b = ProgramBuilder::new(100);
    b.source("fn f(n) { eval(\"1\") }");
    b.function("f", "f", &[("n", json!({}))], json!({}));
    let o = b.outcome("o", json!({}));
    b.step("o", finish(o, None));
    assert!(Vm::new(&b.build())
        .expect_err("eval is disabled")
        .0
        .contains("eval"));
}

#[test]
fn null_is_unit_and_time_built_ins_work() {
    let p = function_program(
        "nothing",
        &[("n", json!({}))],
        json!({"type": "null"}),
        &[("n", Value::Null)],
    );
    assert_eq!(
        Driver::admit(&p, json!({})).last.state.output,
        Some(Value::Null)
    );
    let p = function_program(
        "later",
        &[
            ("at", json!({"type": "string", "format": "date-time"})),
            ("n", json!({"type": "integer"})),
        ],
        json!({"type": "string"}),
        &[("n", json!(90)), ("at", json!("2026-10-09t09:00:00.5z"))],
    );
    assert_eq!(
        Driver::admit(&p, json!({})).last.state.output,
        Some(json!("2026-10-09T09:01:30.5Z"))
    );
    let p = function_program(
        "between",
        &[("a", json!({})), ("b", json!({}))],
        json!({"type": "integer"}),
        &[
            ("a", json!("2026-10-09T09:00:00Z")),
            ("b", json!("2026-10-09T09:00:00-01:00")),
        ],
    );
    assert_eq!(
        Driver::admit(&p, json!({})).last.state.output,
        Some(json!(3600))
    );
    let p = function_program(
        "later",
        &[("at", json!({})), ("n", json!({}))],
        json!({}),
        &[("at", json!("9999-12-31T23:59:59Z")), ("n", json!(1))],
    );
    let d = Driver::admit(&p, json!({}));
    assert_eq!(
        d.last.state.failure.map(|f| f.code),
        Some(FailureCode::FunctionError)
    );
}

#[test]
fn loading_checks_entrypoints_and_argument_names() {
    let mut b = ProgramBuilder::new(100);
    b.source("fn f(a) { a }");
    b.function("f", "f", &[("b", json!({}))], json!({}));
    let o = b.outcome("o", json!({}));
    b.step("o", finish(o, None));
    let e = Vm::new(&b.build()).expect_err("mismatch").0;
    assert!(e.contains("takes (a)"), "{e}");
    let p = function_program("pick", &[("n", json!({}))], json!({}), &[("m", json!(1))]);
    assert!(Vm::new(&p).is_err());
}

#[test]
fn the_same_events_give_bit_identical_states() {
    let run = || {
        let mut d = submitted(true, true);
        d.feed(Event::CompletionObserved {
            step: "await".into(),
            value: decision(),
            at: at(100),
        });
        serde_json::to_vec(&d.last).expect("serializes")
    };
    assert_eq!(run(), run());
}

#[test]
fn a_dispatch_command_is_flat_json_and_reads_back() {
    let command = Command::Dispatch {
        operation: "notify".into(),
        needs_idempotency_key: true,
        dispatch: DispatchCommand {
            step: "send".into(),
            operation_id: "messaging.submit-message/v1".into(),
            connection: "messaging".into(),
            action: None,
            command: json!({"to": "x"}),
            attempt: 2,
            resend_safe: false,
        },
    };
    let text = serde_json::to_string(&command).expect("json");
    assert_eq!(
        text,
        r#"{"type":"dispatch","operation":"notify","needsIdempotencyKey":true,"step":"send","operationId":"messaging.submit-message/v1","connection":"messaging","action":null,"command":{"to":"x"},"attempt":2,"resendSafe":false}"#
    );
    let back: Command = serde_json::from_str(&text).expect("reads back");
    assert_eq!(back, command);
    let extra = text.replace(r#""attempt":2"#, r#""attempt":2,"extra":1"#);
    assert!(serde_json::from_str::<Command>(&extra).is_err());
}

#[test]
fn run_state_round_trips_through_json() {
    let mut d = Driver::admit(&call_program("messaging.submit-message/v1"), json!({}));
    d.feed(answered("send", uncertain()));
    let text = serde_json::to_string(&d.last.state).expect("json");
    let back: RunState = serde_json::from_str(&text).expect("reads back");
    assert_eq!(back, d.last.state);
    // And the VM continues from the decoded state.
    let r =
        d.vm.resume(&back, &Event::RetrySame { at: at(1) })
            .expect("continues");
    assert!(matches!(
        r.commands.first(),
        Some(Command::Dispatch {
            dispatch: DispatchCommand { attempt: 2, .. },
            ..
        })
    ));
}

#[test]
fn vm_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Vm>();
}

#[test]
fn an_invalid_command_answer_fails_unless_the_effect_is_unknown() {
    let mut d = Driver::admit(&call_program("breg.invoke-action/v1"), json!({}));
    d.feed(answered(
        "send",
        Answer::InvalidCommand {
            code: "http-400".into(),
        },
    ));
    let f = d.last.state.failure.clone().expect("failure");
    assert_eq!(d.last.status, RunStatus::Failed);
    assert_eq!(f.code, FailureCode::InvalidCommand);
    assert_eq!(f.product_code.as_deref(), Some("http-400"));
    assert!(!d.last.state.effects.contains_key("send"));

    // After an unknown answer, a 400 to the resend proves nothing.
    let mut d = Driver::admit(&call_program("breg.invoke-action/v1"), json!({}));
    d.feed(answered("send", uncertain()));
    d.feed(Event::RetrySame { at: at(0) });
    d.feed(answered(
        "send",
        Answer::InvalidCommand {
            code: "http-400".into(),
        },
    ));
    assert_eq!(d.last.status, RunStatus::Attention);
    assert_eq!(
        d.last.state.effects.get("send"),
        Some(&EffectState::Unknown)
    );
}

#[test]
fn an_invalid_response_answer_fails_and_keeps_the_mutation_accepted() {
    let mut d = Driver::admit(&call_program("breg.invoke-action/v1"), json!({}));
    d.feed(answered(
        "send",
        Answer::InvalidResponse {
            code: "http-200".into(),
        },
    ));
    assert_eq!(d.last.status, RunStatus::Failed);
    assert_eq!(
        d.last.state.failure.as_ref().map(|f| f.code),
        Some(FailureCode::InvalidResponse)
    );
    assert_eq!(
        d.last.state.effects.get("send"),
        Some(&EffectState::Accepted)
    );
}

/// The host asks the VM whether a job still applies, instead of reading
/// its pending work (the VM boundary).
#[test]
fn a_host_asks_what_the_run_expects() {
    let d = Driver::admit(&read_program(), json!({"recordId": "r1"}));
    let st = &d.last.state;
    assert!(d.vm.expects(
        st,
        &Expected::CallAnswer {
            step: "read",
            attempt: 1
        }
    ));
    assert!(!d.vm.expects(
        st,
        &Expected::CallAnswer {
            step: "read",
            attempt: 2
        }
    ));
    assert!(!d.vm.expects(
        st,
        &Expected::CallAnswer {
            step: "other",
            attempt: 1
        }
    ));
    assert!(!d.vm.expects(st, &Expected::ReceiptAnswer { step: "read" }));
    assert!(!d.vm.expects(st, &Expected::Completion { step: "read" }));
    assert_eq!(d.vm.current_wait(st), None);
    assert_eq!(d.vm.held_call(st), None);
    assert_eq!(d.vm.current_call(st), Some("read"));
    assert_eq!(d.vm.step_kind("read"), Some(coordinator_ir::StepKind::Call));
    assert_eq!(d.vm.step_kind("nowhere"), None);

    let w = submitted(false, false);
    let st = &w.last.state;
    assert_eq!(
        w.vm.current_wait(st),
        Some(Wait {
            step: "await",
            kind: WaitKind::For,
            due_at: at(3600),
        })
    );
    assert!(w.vm.expects(st, &Expected::Completion { step: "await" }));
    assert_eq!(crate::wait_kind(st), Some(WaitKind::For));
}

/// A read whose attempt was interrupted (reported as uncertain) goes again
/// as a new attempt: the VM decides, the host never resends by itself. A
/// mutation is held, and which recoveries apply is the VM's rule.
#[test]
fn an_interrupted_read_goes_again_and_a_mutation_is_held() {
    let mut d = Driver::admit(&read_program(), json!({"recordId": "r1"}));
    d.feed(answered("read", uncertain()));
    assert_eq!(
        dispatches(&d).iter().map(|(a, _)| *a).collect::<Vec<_>>(),
        [1, 2]
    );
    assert!(matches!(
        d.last.commands.as_slice(),
        [Command::Dispatch {
            needs_idempotency_key: false,
            dispatch: DispatchCommand {
                resend_safe: true,
                ..
            },
            ..
        }]
    ));
    let id = "breg.invoke-action/v1";
    let mut m = Driver::admit(&call_program(id), json!({}));
    assert!(matches!(
        m.last.commands.as_slice(),
        [
            Command::ScheduleWake { .. },
            Command::Dispatch {
                needs_idempotency_key: true,
                dispatch: DispatchCommand {
                    resend_safe: false,
                    ..
                },
                ..
            }
        ]
    ));
    m.feed(answered("send", uncertain()));
    assert_eq!(m.vm.held_call(&m.last.state), Some("send"));
    assert_eq!(
        crate::recovery_support(m.vm.program(), "send"),
        Some(RecoverySupport {
            holds: true,
            retry_same: true,
            reconcile: false
        })
    );
    assert_eq!(crate::recovery_support(m.vm.program(), "nowhere"), None);
    let eval = Driver::admit(&call_program("evaluation.evaluate/v1"), json!({}));
    assert_eq!(
        crate::recovery_support(eval.vm.program(), "send"),
        Some(RecoverySupport {
            holds: true,
            retry_same: false,
            reconcile: false
        })
    );
}

/// At one instant the deadline comes first and a timer last (SPEC §7).
#[test]
fn the_same_instant_order_is_stated_once() {
    assert_eq!(SAME_INSTANT_ORDER.map(TimedEvent::rank), [0, 1, 2, 3]);
    assert!(TimedEvent::Deadline.rank() < TimedEvent::Timer.rank());
}
