//! The run's timeline, kept in its ledger ([`StepLedger`]'s step times,
//! wait due times and ends, and call answers): [`record_steps`] is the one
//! place that stamps when a step started and ended, called by
//! `Committer::feed` for every event it commits;
//! [`answer_record`] is what a call step keeps of an answer (kind and code,
//! never a body). Times are whole seconds of the engine clock at the
//! commit ([`whole_second`]).

use std::collections::BTreeMap;

use coordinator_ir::instant::Instant;
use coordinator_ir::StepKind;
use coordinator_ports::clock::whole_second;
use coordinator_ports::store::{AnswerRecord, StepLedger, WaitEnd};
use coordinator_vm::{Answer, Event, RunState, Vm};

/// Stamps in `ledger` the steps the run visited at admission, when it has
/// seen nothing since (an empty ledger, and the state's `now` still its
/// `admitted_at`; admission itself writes no ledger): they started, and
/// all but the last ended, at `admitted_at`; the wait it is in records its
/// due time. Otherwise changes nothing. Every commit calls it on the
/// ledger it read before changing anything else (an answer's count would
/// make the ledger non-empty); inspection calls it on what it reads.
pub(crate) fn record_admission(
    vm: &Vm,
    state: &RunState,
    ledger: &mut BTreeMap<String, StepLedger>,
) {
    if !ledger.is_empty() || state.now != state.admitted_at {
        return;
    }
    let at = whole_second(&state.admitted_at);
    let last = state.path.len().saturating_sub(1);
    for (i, name) in state.path.iter().enumerate() {
        let l = ledger.entry(name.clone()).or_default();
        l.started_at.get_or_insert(at);
        if i < last || state.status.is_terminal() {
            l.ended_at.get_or_insert(at);
            let kind = vm.step_kind(name);
            if matches!(kind, Some(StepKind::WaitUntil | StepKind::WaitFor)) {
                // Only its own timer ends a wait before any event.
                l.wait_end.get_or_insert(timer_end(kind));
            }
        }
    }
    if let Some(w) = vm.current_wait(state) {
        let l = ledger.entry(w.step.to_owned()).or_default();
        l.due_at.get_or_insert(whole_second(&w.due_at));
    }
}

/// What a call step keeps of `answer` to dispatch attempt `attempt` (`0`
/// for a receipt lookup), answered at `at` (its whole second is kept): its
/// kind and code only.
pub(crate) fn answer_record(answer: &Answer, attempt: u32, at: &Instant) -> AnswerRecord {
    let code = match answer {
        Answer::Retryable { code }
        | Answer::Refused { code }
        | Answer::Uncertain { code }
        | Answer::InvalidCommand { code }
        | Answer::InvalidResponse { code } => Some(code.clone()),
        Answer::DeclaredRefusal { refusal_code } => Some(refusal_code.clone()),
        Answer::Success { .. } | Answer::ReceiptExpired | Answer::ReceiptUnresolved => None,
    };
    AnswerRecord {
        at: whole_second(at),
        attempt,
        kind: answer.kind().to_owned(),
        code,
    }
}

/// Stamps in `ledger` the step times that `event` moving the run from
/// `before` to `after` implies, at `now`'s whole second (engine clock)
/// (the caller has applied [`record_admission`] to `before` first, before
/// any other change to the ledger):
///
/// - each step `after` visited anew started at `now`;
/// - every step but the last of `after`'s path has ended (at `now` if not
///   stamped yet), and the last too once the run has ended;
/// - the wait the run is in records its due time, and a wait that ended
///   records how ([`WaitEnd`]).
///
/// A stamp once written is never moved.
pub(crate) fn record_steps(
    vm: &Vm,
    before: &RunState,
    after: &RunState,
    event: &Event,
    now: &Instant,
    ledger: &mut BTreeMap<String, StepLedger>,
) {
    let now = whole_second(now);
    for name in after.path.iter().skip(before.path.len()) {
        ledger
            .entry(name.clone())
            .or_default()
            .started_at
            .get_or_insert(now);
    }
    let waited = vm.current_wait(before).map(|w| w.step.to_owned());
    let ended = if after.status.is_terminal() {
        after.path.len()
    } else {
        after.path.len().saturating_sub(1)
    };
    for name in after.path.iter().take(ended) {
        let l = ledger.entry(name.clone()).or_default();
        if l.ended_at.is_some() {
            continue;
        }
        l.ended_at = Some(now);
        let kind = vm.step_kind(name);
        if matches!(kind, Some(StepKind::WaitUntil | StepKind::WaitFor)) {
            let was_waiting = waited.as_deref() == Some(name.as_str());
            l.wait_end = Some(wait_end(kind, was_waiting, event, after));
        }
    }
    if let Some(w) = vm.current_wait(after) {
        let l = ledger.entry(w.step.to_owned()).or_default();
        l.due_at.get_or_insert(whole_second(&w.due_at));
    }
}

/// How a wait step of `kind` ended: by `event` if the run was waiting
/// there before it, else by its own timer (it fell due in the same commit).
fn wait_end(kind: Option<StepKind>, was_waiting: bool, event: &Event, after: &RunState) -> WaitEnd {
    let timer = timer_end(kind);
    if !was_waiting {
        return timer;
    }
    match event {
        Event::CompletionObserved { .. } => WaitEnd::Completed,
        Event::CancelRequested { .. } => WaitEnd::Cancelled,
        Event::TimerFired { at } if *at >= after.deadline_at => WaitEnd::Deadline,
        _ => timer,
    }
}

/// How a wait step of `kind` ends by its own timer: a wait-for times
/// out, a wait-until wakes.
fn timer_end(kind: Option<StepKind>) -> WaitEnd {
    if kind == Some(StepKind::WaitFor) {
        WaitEnd::TimedOut
    } else {
        WaitEnd::Woke
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_keeps_its_kind_and_code_never_its_value() {
        let ok = Answer::Success {
            value: serde_json::json!({"secret": "x"}),
        };
        let r = answer_record(&ok, 2, &Instant::from_unix_seconds_and_nanos(7, 5));
        assert_eq!(
            (r.kind.as_str(), r.code, r.attempt, r.at),
            ("success", None, 2, Instant::from_unix_seconds(7))
        );
        let r = answer_record(
            &Answer::DeclaredRefusal {
                refusal_code: "no-permission".into(),
            },
            1,
            &Instant::from_unix_seconds(8),
        );
        assert_eq!(
            (r.kind.as_str(), r.code.as_deref()),
            ("declared-refusal", Some("no-permission"))
        );
    }

    #[test]
    fn the_ledger_keeps_the_latest_answers_only() {
        let mut l = StepLedger::default();
        for i in 0..20u32 {
            l.keep_answer(answer_record(
                &Answer::Retryable { code: "503".into() },
                i + 1,
                &Instant::from_unix_seconds(i64::from(i)),
            ));
        }
        assert_eq!(l.answers.len(), coordinator_ports::store::ANSWERS_KEPT);
        assert_eq!(l.answers.first().map(|a| a.attempt), Some(13));
        assert_eq!(l.answers.last().map(|a| a.attempt), Some(20));
    }
}
