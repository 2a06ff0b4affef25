//! The public entry points: admitting a run, applying one event, and a
//! trigger's start.

use coordinator_ir::instant::Instant;
use serde_json::Value;

use super::eval::EvalError;
use super::{reject, writable, Run, TriggerStart, Vm};
use crate::model::{Command, Event, RejectCode, Rejected, Resumed, RunState, RunStatus, WakeKind};

impl Vm {
    /// Admits a run: checks `input` against the workflow input schema, sets
    /// the deadline to `admitted_at` + `deadline_seconds`, and runs from
    /// `start` until the first call or wait. The first command is always
    /// `ScheduleWake { at: deadline, kind: Deadline }`.
    ///
    /// # Errors
    /// [`RejectCode::InputInvalid`] (the message names the JSON Pointer) or
    /// [`RejectCode::InstantInvalid`] (the admission or the deadline falls
    /// outside years 0001–9999).
    pub fn admit(&self, input: Value, admitted_at: Instant) -> Result<Resumed, Rejected> {
        if let Err((pointer, message)) = self.check_schema(self.program.input, &input) {
            return Err(reject(
                RejectCode::InputInvalid,
                format!("input at `{}`: {message}", super::shown_pointer(&pointer)),
            ));
        }
        let admitted = writable(admitted_at)?;
        let deadline = admitted
            .plus_seconds(i64::try_from(self.program.deadline_seconds).unwrap_or(i64::MAX))
            .ok_or_else(|| reject(RejectCode::InstantInvalid, "deadline out of range"))?;
        let deadline = writable(deadline)?;
        let state = RunState::new(RunStatus::Running, input, admitted, deadline, admitted);
        let mut run = Run::new(self, state);
        run.commands.push(Command::ScheduleWake {
            at: deadline,
            kind: WakeKind::Deadline,
        });
        run.advance(self.program.start)?;
        Ok(run.finish())
    }

    /// Applies one event to a run. Pure: the same state and event always
    /// give the same result, bit for bit.
    ///
    /// Time: an instant earlier than `state.now` counts as `state.now`.
    /// Before a timed event at instant T is applied, every timer due before
    /// T fires first (wakes and timeouts; the deadline at T itself comes
    /// first, then the event, and only a [`Event::TimerFired`] fires timers
    /// due exactly at T). An event at or past the deadline ends the run
    /// `expired` at the deadline once earlier timers have fired, and is
    /// then moot.
    ///
    /// # Errors
    /// [`Rejected`] when the event does not apply (the state is unchanged):
    /// the run has ended, an answer for a step that is not in flight, a
    /// receipt answer without a lookup, a completion for another step,
    /// retry-same or reconcile on a run that is not held or cannot be
    /// recovered that way, an instant that falls outside years 0001–9999.
    pub fn resume(&self, state: &RunState, event: &Event) -> Result<Resumed, Rejected> {
        if state.status.is_terminal() {
            return Err(reject(
                RejectCode::RunEnded,
                format!("the run has ended ({})", state.status.as_str()),
            ));
        }
        let mut run = Run::new(self, state.clone());
        match event {
            Event::CallAnswered { step, answer } => run.on_answer(step, answer)?,
            Event::TimerFired { at } => {
                run.tick(*at, true)?;
            }
            Event::CompletionObserved { step, value, at } => {
                let wanted = run.waiting_completion();
                if wanted.map(|id| self.step_name(id)) != Some(step.as_str()) {
                    return Err(reject(
                        RejectCode::Unexpected,
                        format!("the run is not waiting for a completion at step `{step}`"),
                    ));
                }
                if !run.tick(*at, false)? && run.waiting_completion() == wanted {
                    if let Some(id) = wanted {
                        run.on_completion(id, value)?;
                    }
                }
            }
            Event::CancelRequested { at } => {
                if !run.tick(*at, false)? {
                    run.on_cancel(*at)?;
                }
            }
            Event::RetrySame { at } => {
                run.check_recovery(false)?;
                if !run.tick(*at, false)? {
                    run.retry_same()?;
                }
            }
            Event::Reconcile { at } => {
                run.check_recovery(true)?;
                if !run.tick(*at, false)? {
                    run.reconcile()?;
                }
            }
        }
        Ok(run.finish())
    }

    /// Evaluates trigger `trigger`'s mappings over a CloudEvents-shaped
    /// `event` (SPEC §2.4): the idempotency string and the run input.
    ///
    /// # Errors
    /// [`RejectCode::Unexpected`] for an unknown trigger, a mapping that
    /// fails, or an idempotency value that is not a string.
    pub fn trigger_start(&self, trigger: &str, event: &Value) -> Result<TriggerStart, Rejected> {
        let t = self
            .program
            .triggers
            .iter()
            .find(|t| t.name == trigger)
            .ok_or_else(|| reject(RejectCode::Unexpected, format!("no trigger `{trigger}`")))?;
        // Mappings read no instant of the state; the epoch stands in.
        let epoch = Instant::from_unix_seconds(0);
        let empty = RunState::new(RunStatus::Running, Value::Null, epoch, epoch, epoch);
        let idempotency = match self
            .eval(t.idempotency, &empty, Some(event))
            .map_err(trigger_rejection)?
        {
            Value::String(s) => s,
            other @ (Value::Null
            | Value::Bool(_)
            | Value::Number(_)
            | Value::Array(_)
            | Value::Object(_)) => {
                return Err(reject(
                    RejectCode::Unexpected,
                    format!("the idempotency value {other} is not a string"),
                ))
            }
        };
        let input = self
            .eval(t.input, &empty, Some(event))
            .map_err(trigger_rejection)?;
        Ok(TriggerStart { idempotency, input })
    }
}

/// The rejection of a trigger mapping that failed.
fn trigger_rejection(e: EvalError) -> Rejected {
    match e {
        EvalError::Mapping(m) | EvalError::MissingMember { message: m, .. } => {
            reject(RejectCode::Unexpected, m)
        }
        EvalError::EventMember(path) => reject(
            RejectCode::EventMemberMissing,
            format!("the event has no member at `{path}`"),
        ),
        EvalError::Function(f) => reject(RejectCode::Unexpected, f.to_string()),
    }
}
