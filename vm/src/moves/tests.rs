//! Moves between hand-built revisions: every refusal, and moved runs that
//! go on under B to their end.

#![allow(clippy::indexing_slicing, clippy::wildcard_enum_match_arm)]

use coordinator_ir::carried::carried_steps;
use coordinator_ir::{Program, StepId, StepKind, StepOp};
use serde_json::{json, Value};

use crate::testkit::*;
use crate::*;

fn answered(step: &str, value: Value) -> Event {
    Event::CallAnswered {
        step: step.into(),
        answer: Answer::Success { value },
    }
}

fn notice(version: &str) -> Value {
    json!({
        "senderProfile": "p", "to": {"email": "a@example.org"},
        "template": {"id": "follow-up", "version": version}, "locale": "en", "data": {}
    })
}

/// s0 `read` (breg.read-record/v1), s1 `due` (wait-until input `/at`),
/// s2 `notify` (messaging, template `version`), s3 `done` (finish with the
/// record's `/data/name`).
fn follow_up(version: &str) -> Program {
    let mut b = ProgramBuilder::new(86_400);
    b.input_schema(json!({"type": "object", "required": ["at"]}));
    let read = b.op("read", "breg.read-record/v1");
    let notify = b.op("notify", "messaging.submit-message/v1");
    let read_input = b.lit(json!({"collection": "applications", "recordId": "r1"}));
    let notify_input = b.lit(notice(version));
    let until = b.input(Some("/at"));
    let done = b.outcome("done", json!({"type": "string"}));
    let name = b.output_of(0, Some("/data/name"));
    b.step("read", call(read, read_input, 1));
    b.step(
        "due",
        StepOp::WaitUntil {
            until,
            next: StepId(2),
        },
    );
    b.step("notify", call(notify, notify_input, 3));
    b.step("done", finish(done, Some(name)));
    b.build()
}

fn record() -> Value {
    json!({"collection": "applications", "recordId": "r1", "revision": "3", "data": {"name": "Ada"}})
}

/// A run of [`follow_up`] "1" waiting at `due` (960 s after admission).
fn waiting_at_due() -> Driver {
    let mut d = Driver::admit(&follow_up("1"), json!({"at": "2026-10-09T09:16:00Z"}));
    d.feed(answered("read", record()));
    assert_eq!(
        d.vm.current_wait(&d.last.state).map(|w| w.step),
        Some("due")
    );
    d
}

fn target(from: &str, to: &str, carried: &[&str]) -> MoveTarget {
    MoveTarget {
        from_step: from.into(),
        to_step: to.into(),
        carried: carried.iter().map(|s| (*s).to_owned()).collect(),
    }
}

fn moved_or_refusal(d: &Driver, to: &Vm, t: &MoveTarget) -> Result<RunState, MoveRefused> {
    move_waiting_run(&d.vm, to, &d.last.state, t).map(|m| m.state)
}

#[test]
fn a_moved_wait_until_wakes_at_its_kept_instant_and_ends_under_b() {
    let d = waiting_at_due();
    let b = Vm::new(&follow_up("2")).expect("B loads");
    let carried = carried_steps(d.vm.program(), b.program(), "due");
    assert_eq!(carried, ["read"]);
    let moved = move_waiting_run(&d.vm, &b, &d.last.state, &target("due", "due", &["read"]))
        .expect("moves");
    assert_eq!(moved.wait.step, "due");
    assert_eq!(moved.wait.kind, WaitKind::Until);
    assert_eq!(moved.wait.due_at, at(960));
    let before = &d.last.state;
    let state = moved.state;
    assert_eq!(state.status, RunStatus::Running);
    assert_eq!(
        (state.admitted_at, state.deadline_at, state.now),
        (before.admitted_at, before.deadline_at, before.now)
    );
    assert_eq!(state.path, ["read", "due"]);
    assert_eq!(state.outputs["read"], record());
    assert_eq!(b.current_wait(&state), Some(moved.wait));
    // Not due a second early; due at A's instant.
    let early = b
        .resume(&state, &Event::TimerFired { at: at(959) })
        .expect("applies");
    assert_eq!(early.status, RunStatus::Running);
    assert!(early.commands.is_empty());
    let woke = b
        .resume(&state, &Event::TimerFired { at: at(960) })
        .expect("applies");
    let Some(Command::Dispatch { dispatch, .. }) = woke.commands.first() else {
        panic!("B's notify is dispatched: {:?}", woke.commands);
    };
    assert_eq!(dispatch.step, "notify");
    assert_eq!(dispatch.command, notice("2"), "B's command, not A's");
    let end = b
        .resume(
            &woke.state,
            &answered(
                "notify",
                json!({"id": "6f1c1a0e-1111-4a4a-8a8a-0123456789ab", "status": "queued"}),
            ),
        )
        .expect("applies");
    assert_eq!(end.status, RunStatus::Finished);
    assert_eq!(
        end.state.output,
        Some(json!("Ada")),
        "read from the carried output"
    );
    assert_eq!(end.state.path, ["read", "due", "notify", "done"]);
    assert_eq!(end.state.elapsed_seconds, 960);
}

#[test]
fn outputs_not_carried_are_dropped_and_a_read_of_them_fails_under_b() {
    let d = waiting_at_due();
    let b = Vm::new(&follow_up("2")).expect("B loads");
    let state = moved_or_refusal(&d, &b, &target("due", "due", &[])).expect("moves");
    assert!(state.outputs.is_empty());
    let woke = b
        .resume(&state, &Event::TimerFired { at: at(960) })
        .expect("applies");
    let end = b
        .resume(
            &woke.state,
            &answered(
                "notify",
                json!({"id": "6f1c1a0e-1111-4a4a-8a8a-0123456789ab", "status": "queued"}),
            ),
        )
        .expect("applies");
    assert_eq!(end.status, RunStatus::Failed);
    let failure = end.state.failure.expect("a failure");
    assert_eq!(
        (failure.code, failure.step.as_str()),
        (FailureCode::MappingInvalid, "done")
    );
}

#[test]
fn a_run_that_is_not_waiting_at_the_step_is_refused() {
    let b = Vm::new(&follow_up("2")).expect("B loads");
    let due = target("due", "due", &["read"]);
    // Mid-call: admitted, `read` dispatched.
    let mid_call = Driver::admit(&follow_up("1"), json!({"at": "2026-10-09T09:16:00Z"}));
    let refused = moved_or_refusal(&mid_call, &b, &due).expect_err("mid-call");
    assert_eq!(
        refused,
        MoveRefused::NotWaiting {
            step: "read".into()
        }
    );
    assert_eq!(refused.code(), "not-waiting");
    // Waiting, but the move names another step.
    let d = waiting_at_due();
    let refused = moved_or_refusal(&d, &b, &target("read", "read", &[])).expect_err("elsewhere");
    assert_eq!(
        refused,
        MoveRefused::WaitingElsewhere { step: "due".into() }
    );
    assert_eq!(refused.code(), "waiting-elsewhere");
    // Woken: `notify` in flight; then a cancel; then held; then ended.
    let mut d = waiting_at_due();
    d.feed(Event::TimerFired { at: at(960) });
    let mut cancelled = Driver {
        vm: Vm::new(&follow_up("1")).expect("loads"),
        last: d.last.clone(),
        commands: Vec::new(),
    };
    cancelled.feed(Event::CancelRequested { at: at(961) });
    assert_eq!(cancelled.last.status, RunStatus::CancelRequested);
    let refused = moved_or_refusal(&cancelled, &b, &due).expect_err("cancel requested");
    assert_eq!(
        (refused.code(), refused),
        ("cancel-requested", MoveRefused::CancelRequested)
    );
    let mut held = Driver {
        vm: Vm::new(&follow_up("1")).expect("loads"),
        last: d.last.clone(),
        commands: Vec::new(),
    };
    held.feed(Event::CallAnswered {
        step: "notify".into(),
        answer: Answer::Uncertain {
            code: "timeout".into(),
        },
    });
    assert_eq!(held.last.status, RunStatus::Attention);
    let refused = moved_or_refusal(&held, &b, &due).expect_err("held");
    assert_eq!(
        refused,
        MoveRefused::Held {
            step: "notify".into()
        }
    );
    assert_eq!(refused.code(), "held");
    d.feed(answered(
        "notify",
        json!({"id": "6f1c1a0e-1111-4a4a-8a8a-0123456789ab", "status": "queued"}),
    ));
    let refused = moved_or_refusal(&d, &b, &due).expect_err("ended");
    assert_eq!(
        refused,
        MoveRefused::Ended {
            status: RunStatus::Finished
        }
    );
    assert_eq!(refused.code(), "run-ended");
}

#[test]
fn a_target_that_does_not_fit_is_refused_and_the_state_is_unchanged() {
    let d = waiting_at_due();
    let b = Vm::new(&follow_up("2")).expect("B loads");
    let cases = [
        (target("due", "later", &["read"]), "target-missing"),
        (target("due", "notify", &["read"]), "target-kind-differs"),
        (target("due", "due", &["read", "ghost"]), "carried-missing"),
        (target("due", "due", &["due"]), "carried-missing"),
    ];
    for (t, code) in cases {
        let refused = moved_or_refusal(&d, &b, &t).expect_err(code);
        assert_eq!(refused.code(), code, "{t:?}: {refused}");
    }
    assert_eq!(
        check_move_target(
            d.vm.program(),
            b.program(),
            &target("notify", "notify", &[])
        ),
        Err(MoveRefused::NotAWait {
            step: "notify".into()
        })
    );
    assert_eq!(
        move_source(d.vm.program(), "nowhere").map_err(|r| r.code()),
        Err("not-a-wait")
    );
    let mut other = follow_up("2");
    other.workflow = "other".into();
    let other = Vm::new(&other).expect("loads");
    let refused =
        moved_or_refusal(&d, &other, &target("due", "due", &["read"])).expect_err("workflow");
    assert_eq!(refused.code(), "workflow-differs");
    assert_eq!(
        refused.to_string(),
        "workflow `other` is not workflow `test`"
    );
}

/// s0 `submit` (casework review request), s1 `wait_name` (wait-for
/// completion `completion` of `call_name`, 3600 s), s2 finish `decided`
/// (the completion), s3 finish `timed-out` (the `onTimeout` route, when
/// `on_timeout`).
fn review(call_name: &str, wait_name: &str, completion: &str, on_timeout: bool) -> Program {
    let id = "casework.submit-review-request/v1";
    let mut b = ProgramBuilder::new(86_400);
    let op = b.op("review", id);
    let input = b.lit(json!({
        "subject": {"product": "breg", "recordType": "application", "identifier": "r1"},
        "policy": "p", "summary": {}
    }));
    let decided = b.outcome("decided", json!({}));
    let timed_out = b.outcome("timed-out", json!({"type": "null"}));
    let out = b.output_of(1, None);
    b.step(call_name, call(op, input, 1));
    b.step(
        wait_name,
        StepOp::WaitFor {
            call: StepId(0),
            completion: completion.into(),
            timeout_seconds: 3600,
            next: StepId(2),
            on_timeout: on_timeout.then_some(StepId(3)),
            on_cancel: None,
        },
    );
    b.step("decided", finish(decided, Some(out)));
    b.step("timed-out", finish(timed_out, None));
    b.build()
}

fn waiting_for_review() -> Driver {
    let mut d = Driver::admit(&review("submit", "await", "result", false), json!({}));
    d.feed(answered(
        "submit",
        json!({"id": "rr-1", "status": "pending"}),
    ));
    assert_eq!(
        d.vm.current_wait(&d.last.state).map(|w| w.step),
        Some("await")
    );
    d
}

#[test]
fn a_moved_wait_for_keeps_its_timeout_and_takes_the_completion_under_b() {
    let d = waiting_for_review();
    let b = Vm::new(&review("submit", "await-v2", "result", true)).expect("B loads");
    assert_eq!(
        carried_steps(d.vm.program(), b.program(), "await"),
        ["submit"]
    );
    let moved = move_waiting_run(
        &d.vm,
        &b,
        &d.last.state,
        &target("await", "await-v2", &["submit"]),
    )
    .expect("moves");
    assert_eq!(
        (moved.wait.step, moved.wait.kind, moved.wait.due_at),
        ("await-v2", WaitKind::For, at(3600))
    );
    let state = moved.state;
    assert_eq!(state.effects["submit"], EffectState::Accepted);
    let decision = json!({"outcome": "approved", "decidedAt": "2026-10-09T10:00:00Z"});
    let end = b
        .resume(
            &state,
            &Event::CompletionObserved {
                step: "await-v2".into(),
                value: decision.clone(),
                at: at(900),
            },
        )
        .expect("applies");
    assert_eq!(end.status, RunStatus::Finished);
    assert_eq!(end.state.path, ["submit", "await", "decided"]);
    assert_eq!(end.state.output, Some(decision));
    // The timeout is A's instant; B's onTimeout route is taken there.
    let timed_out = b
        .resume(&state, &Event::TimerFired { at: at(3600) })
        .expect("applies");
    assert_eq!(timed_out.state.outcome.as_deref(), Some("timed-out"));
    assert_eq!(timed_out.state.elapsed_seconds, 3600);
    assert!(
        b.resume(
            &state,
            &Event::CompletionObserved {
                step: "await".into(),
                value: json!({}),
                at: at(1),
            },
        )
        .is_err(),
        "A's wait name is not B's"
    );
}

#[test]
fn a_wait_for_target_with_another_contract_is_refused() {
    let d = waiting_for_review();
    let refusal = |program: Program, t: MoveTarget| {
        let b = Vm::new(&program).expect("B loads");
        moved_or_refusal(&d, &b, &t).expect_err("refused").code()
    };
    assert_eq!(
        refusal(
            review("submit", "await", "withdrawn", false),
            target("await", "await", &["submit"])
        ),
        "completion-differs"
    );
    assert_eq!(
        refusal(
            review("submit-v2", "await", "result", false),
            target("await", "await", &["submit"])
        ),
        "wait-call-differs"
    );
    assert_eq!(
        refusal(
            review("submit", "await", "result", false),
            target("await", "await", &[])
        ),
        "wait-call-not-carried"
    );
    // A wait-until moved onto a wait-for of the same name.
    assert_eq!(
        check_move_target(
            &follow_up("1"),
            &review("submit", "due", "result", false),
            &target("due", "due", &[])
        ),
        Err(MoveRefused::TargetKindDiffers {
            from: StepKind::WaitUntil,
            to: StepKind::WaitFor
        })
    );
}
