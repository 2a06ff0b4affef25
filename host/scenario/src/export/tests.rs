#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::path::Path;

use coordinator_ir::instant::Instant;
use coordinator_vm::{Answer, Event, RunState, Vm};
use serde_json::{json, Value};

use super::*;

fn starter() -> Vm {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/delayed-follow-up");
    let compiled = coordinator_compiler::compile_project(&dir, "starter");
    Vm::new(&compiled.program.expect("the starter compiles")).unwrap()
}

fn at(text: &str) -> Instant {
    Instant::parse(text).unwrap()
}

fn record() -> Value {
    json!({"collection": "applications", "recordId": "app-77", "revision": "2",
           "data": {"noticeAllowed": true, "applicantEmail": "a@example.org"}})
}

/// Drives the starter as the service would: admitted at 09:00, woken at
/// 09:16, then `events` (each answering or acting at 09:16 + n s), and
/// keeps the answers it fed per call step as the ledger would.
fn drive(vm: &Vm, events: Vec<Event>) -> (RunState, BTreeMap<String, StepHistory>) {
    let input = json!({"applicationId": "app-77", "sendAfter": "2026-10-09T09:16:00Z"});
    let mut state = vm.admit(input, at("2026-10-09T09:00:00Z")).unwrap().state;
    let woke = Event::TimerFired {
        at: at("2026-10-09T09:16:00Z"),
    };
    state = vm.resume(&state, &woke).unwrap().state;
    let mut steps: BTreeMap<String, StepHistory> = BTreeMap::new();
    let mut attempts: BTreeMap<String, u32> = BTreeMap::new();
    let mut lookup = false;
    for event in events {
        match &event {
            Event::CallAnswered { step, answer } => {
                let n = attempts.entry(step.clone()).or_default();
                let attempt = if lookup {
                    0
                } else {
                    *n += 1;
                    *n
                };
                let h = steps.entry(step.clone()).or_default();
                h.answers_complete = true;
                h.answers.push(AnswerHistory {
                    attempt,
                    kind: answer.kind().to_owned(),
                    code: match answer {
                        Answer::Uncertain { code } | Answer::Refused { code } => Some(code.clone()),
                        _ => None,
                    },
                });
                lookup = false;
            }
            Event::Reconcile { .. } => lookup = true,
            _ => {}
        }
        state = vm.resume(&state, &event).unwrap().state;
    }
    (state, steps)
}

fn answered(step: &str, answer: Answer) -> Event {
    Event::CallAnswered {
        step: step.into(),
        answer,
    }
}

fn sent() -> Answer {
    Answer::Success {
        value: json!({"id": "6f1c2a4e-8b7d-4c3e-9a2f-1d5e7b9c0a11", "status": "accepted"}),
    }
}

#[test]
fn a_finished_run_exports_as_a_case_that_passes() {
    let vm = starter();
    let (state, steps) = drive(
        &vm,
        vec![
            answered("read-application", Answer::Success { value: record() }),
            answered("notify", sent()),
        ],
    );
    let history = RunHistory {
        run_id: "0b1e",
        state: &state,
        steps,
    };
    let case = export_case(&vm, &history, &[]).unwrap();
    let c = &case.document["cases"][0];
    assert_eq!(c["id"], "run-0b1e");
    assert_eq!(c["expect"]["state"], "completed");
    assert_eq!(c["expect"]["workflowElapsedSeconds"], 960);
    assert_eq!(c["replies"]["read-application"][0]["value"], record());
    assert!(case.text.starts_with("# Exported from run 0b1e"));
}

#[test]
fn a_reconcile_after_a_lost_answer_is_the_calls_recovery() {
    let vm = starter();
    let later = at("2026-10-09T10:00:00Z");
    let (state, steps) = drive(
        &vm,
        vec![
            answered("read-application", Answer::Success { value: record() }),
            answered(
                "notify",
                Answer::Uncertain {
                    code: "transport-uncertain".into(),
                },
            ),
            Event::Reconcile { at: later },
            answered("notify", sent()),
        ],
    );
    let history = RunHistory {
        run_id: "r",
        state: &state,
        steps,
    };
    let case = export_case(&vm, &history, &[]).unwrap();
    let c = &case.document["cases"][0];
    assert_eq!(c["recovery"]["notify"], "reconcile");
    assert_eq!(c["replies"]["notify"].as_array().unwrap().len(), 2);
}

#[test]
fn redaction_hides_the_value_and_its_echoes() {
    let vm = starter();
    let (state, steps) = drive(
        &vm,
        vec![
            answered("read-application", Answer::Success { value: record() }),
            answered("notify", sent()),
        ],
    );
    let history = RunHistory {
        run_id: "r",
        state: &state,
        steps,
    };
    let case = export_case(&vm, &history, &["/applicationId".to_owned()]).unwrap();
    assert!(!case.text.contains("app-77"), "{}", case.text);
    let c = &case.document["cases"][0];
    assert_eq!(c["input"]["applicationId"], "redacted-1");
    assert_eq!(
        c["replies"]["read-application"][0]["value"]["recordId"],
        "redacted-1"
    );
    let refused = export_case(&vm, &history, &["/nothing".to_owned()]).unwrap_err();
    assert!(
        matches!(refused, ExportRefused::RedactInvalid { .. }),
        "{refused:?}"
    );
    // A date-time replaced by a placeholder no longer passes the input's
    // schema: the export says so rather than writing a case that fails.
    let refused = export_case(&vm, &history, &["/sendAfter".to_owned()]).unwrap_err();
    assert!(
        matches!(&refused, ExportRefused::NotReproducible(m) if m.contains("/sendAfter")),
        "{refused:?}"
    );
}

#[test]
fn a_running_run_or_an_unscriptable_answer_is_refused() {
    let vm = starter();
    let input = json!({"applicationId": "app-77", "sendAfter": "2026-10-09T09:16:00Z"});
    let waiting = vm.admit(input, at("2026-10-09T09:00:00Z")).unwrap().state;
    let history = RunHistory {
        run_id: "r",
        state: &waiting,
        steps: BTreeMap::new(),
    };
    let refused = export_case(&vm, &history, &[]).unwrap_err();
    assert!(
        matches!(&refused, ExportRefused::NotReproducible(m) if m.contains("running")),
        "{refused:?}"
    );
    let (state, mut steps) = drive(
        &vm,
        vec![
            answered("read-application", Answer::Success { value: record() }),
            answered("notify", sent()),
        ],
    );
    steps.get_mut("notify").unwrap().answers_complete = false;
    let history = RunHistory {
        run_id: "r",
        state: &state,
        steps,
    };
    let refused = export_case(&vm, &history, &[]).unwrap_err();
    assert!(
        matches!(&refused, ExportRefused::NotReproducible(m) if m.contains("latest 8")),
        "{refused:?}"
    );
}

#[test]
fn a_run_cancelled_while_it_waited_exports_its_cancel() {
    let vm = starter();
    let input = json!({"applicationId": "app-77", "sendAfter": "2026-10-09T09:16:00Z"});
    let waiting = vm.admit(input, at("2026-10-09T09:00:00Z")).unwrap().state;
    let cancel = Event::CancelRequested {
        at: at("2026-10-09T09:05:30Z"),
    };
    let state = vm.resume(&waiting, &cancel).unwrap().state;
    let history = RunHistory {
        run_id: "r",
        state: &state,
        steps: BTreeMap::new(),
    };
    let case = export_case(&vm, &history, &[]).unwrap();
    let c = &case.document["cases"][0];
    assert_eq!(c["cancel"]["afterSeconds"], 330);
    assert_eq!(c["expect"]["state"], "cancelled");
    assert_eq!(c["expect"]["workflowElapsedSeconds"], 330);
}
