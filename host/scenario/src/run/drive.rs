//! The case's event loop: the VM's commands are answered from the script
//! at once (calls and receipt lookups take no virtual time); when none is
//! left, an operator's recovery is applied to a held run, or the earliest
//! timed event (deadline, cancel, completion, timer) is delivered.

use std::collections::VecDeque;

use coordinator_ir::canonical;
use coordinator_ir::instant::Instant;
use coordinator_source::Diagnostic;
use coordinator_vm::{Command, Event, RunState, RunStatus, TimedEvent, WaitKind, WakeKind};

use super::{CaseHost, End};
use crate::codes;
use crate::file::{CompletionScript, RecoveryAction, Reply};

/// Most events one case may take before it is reported as not settling.
const MAX_EVENTS: usize = 10_000;

/// What answering one immediate command gives the loop.
enum CommandAnswer {
    /// An event to resume the run with.
    Event(Event),
    /// Nothing to deliver (a wake or an observation was recorded).
    Nothing,
    /// A dispatch found no reply left after an answer the VM retries by
    /// itself: the case ends `retryable`.
    RepliesRanOut,
}

impl CaseHost<'_> {
    /// Admits the run and delivers events until it settles: the end state,
    /// or the scenario file's faults.
    pub(super) fn drive(&mut self) -> Result<End, Vec<Diagnostic>> {
        let admitted = self.instant(&self.case.admitted_at, "/admittedAt")?;
        let resumed = self
            .vm
            .admit(self.case.input.clone(), admitted)
            .map_err(|r| self.rejected("/input", &r))?;
        self.exercised.record(self.vm, None, None, &resumed);
        let mut state = resumed.state;
        let mut queue: VecDeque<Command> = resumed.commands.into();
        let mut timers: Vec<Instant> = Vec::new();
        // Bounded: every loop turn consumes a reply, a timed event or a recovery.
        for _ in 0..MAX_EVENTS {
            // 1. Immediate commands: calls and receipt lookups take no time.
            if let Some(cmd) = queue.pop_front() {
                let event = match self.answer_command(cmd, &state, &mut timers)? {
                    CommandAnswer::Event(event) => event,
                    CommandAnswer::Nothing => continue,
                    CommandAnswer::RepliesRanOut => return Ok(End::Retryable(state)),
                };
                self.resume(&mut state, &mut queue, &event, "/replies")?;
                continue;
            }
            if state.status.is_terminal() {
                return Ok(End::Settled(state));
            }
            // The case's move, once the run waits at its step.
            self.move_when_waiting(&mut state)?;
            let now = state.now;
            // 2. An operator's recovery after an unknown answer.
            if state.status == RunStatus::Attention {
                let Some((event, pointer)) = self.operator_action(&state, admitted, now)? else {
                    return Ok(End::Settled(state));
                };
                self.resume(&mut state, &mut queue, &event, &pointer)?;
                continue;
            }
            // 3. The run waits: deliver the earliest timed event.
            let Some(event) = self.earliest_timed_event(&state, admitted, now, &mut timers)? else {
                return Ok(End::Settled(state));
            };
            self.resume(&mut state, &mut queue, &event, "")?;
        }
        Err(self.fault(
            codes::SCENARIO_NO_PROGRESS,
            "",
            "the case did not settle within 10,000 events".into(),
            "Check the replies and completions for a loop.",
        ))
    }

    /// Resumes the run with `event`, records what the VM did and queues
    /// the commands it gives; a refusal is located at `pointer` (under the
    /// case).
    fn resume(
        &mut self,
        state: &mut RunState,
        queue: &mut VecDeque<Command>,
        event: &Event,
        pointer: &str,
    ) -> Result<(), Vec<Diagnostic>> {
        let vm = self.vm;
        let resumed = vm
            .resume(state, event)
            .map_err(|r| self.rejected(pointer, &r))?;
        // After a move the run is on another revision: not this
        // workflow's coverage.
        if self.moved.is_none() {
            self.exercised
                .record(vm, Some(event), vm.held_call(state), &resumed);
        }
        *state = resumed.state;
        queue.extend(resumed.commands);
        Ok(())
    }

    /// One command of the VM: a dispatch or a receipt lookup is answered
    /// from the script; a wake or an observation's timeout is kept in
    /// `timers` (a deadline wake also as the deadline).
    fn answer_command(
        &mut self,
        cmd: Command,
        state: &RunState,
        timers: &mut Vec<Instant>,
    ) -> Result<CommandAnswer, Vec<Diagnostic>> {
        match cmd {
            Command::Dispatch { dispatch, .. } => {
                let step = dispatch.step;
                self.hold_command_frozen(&step, canonical::to_vec(&dispatch.command))?;
                self.answer_dispatch(&step, state)
            }
            Command::LookupReceipt { step, .. } => {
                self.answer_receipt_lookup(&step).map(CommandAnswer::Event)
            }
            Command::ScheduleWake { at, kind } => {
                if kind == WakeKind::Deadline {
                    self.deadline = Some(at);
                }
                timers.push(at);
                Ok(CommandAnswer::Nothing)
            }
            Command::ObserveCompletion { timeout_at, .. } => {
                timers.push(timeout_at);
                self.completion_delivered = false;
                Ok(CommandAnswer::Nothing)
            }
            Command::Ended { .. } => Ok(CommandAnswer::Nothing),
        }
    }

    /// Records `step`'s first command (canonical JSON `bytes`); a later
    /// attempt that sends other bytes is a fault.
    fn hold_command_frozen(&mut self, step: &str, bytes: Vec<u8>) -> Result<(), Vec<Diagnostic>> {
        match self.frozen.get(step) {
            Some(first) if *first != bytes => Err(self.fault(
                codes::SCENARIO_COMMAND_CHANGED,
                "",
                format!("a later attempt of `{step}` sent a different command"),
                "Report this: every attempt must send the frozen command.",
            )),
            Some(_) => Ok(()),
            None => {
                self.frozen.insert(step.to_owned(), bytes);
                Ok(())
            }
        }
    }

    /// The next scripted reply to a dispatch of `step`: a receipt answer is
    /// a fault here; no reply left ends the case `retryable` when the VM
    /// was retrying by itself, and is a fault otherwise.
    fn answer_dispatch(
        &mut self,
        step: &str,
        state: &RunState,
    ) -> Result<CommandAnswer, Vec<Diagnostic>> {
        match self.next_reply(step) {
            Some(Reply::ReceiptExpired | Reply::ReceiptUnresolved) => Err(self.fault(
                codes::SCENARIO_RECEIPT_WITHOUT_RECONCILE,
                &format!("/replies/{step}"),
                format!("`{step}` gets a receipt answer where it sent a command"),
                "Script receipt answers only after an unknown answer with recovery reconcile.",
            )),
            Some(other) => Ok(CommandAnswer::Event(self.answer(step, other))),
            None => {
                if self.frozen_attempts_exhausted(state, step) {
                    return Ok(CommandAnswer::RepliesRanOut);
                }
                Err(self.fault(
                    codes::SCENARIO_UNSCRIPTED_CALL,
                    "/replies",
                    format!("the run reaches call `{step}` with no reply scripted for it"),
                    &format!("Add replies for `{step}` under replies."),
                ))
            }
        }
    }

    /// The next scripted reply to a receipt lookup of `step` (after
    /// reconcile): it must be a receipt answer.
    fn answer_receipt_lookup(&mut self, step: &str) -> Result<Event, Vec<Diagnostic>> {
        match self.next_reply(step) {
            Some(
                reply @ (Reply::Success { .. } | Reply::ReceiptExpired | Reply::ReceiptUnresolved),
            ) => Ok(self.answer(step, reply)),
            Some(
                Reply::Retryable { .. }
                | Reply::Refused { .. }
                | Reply::Uncertain { .. }
                | Reply::DeclaredRefusal { .. },
            ) => Err(self.fault(
                codes::SCENARIO_RECONCILE_REPLY,
                &format!("/replies/{step}"),
                format!("after reconcile, `{step}` needs a receipt answer (success, receipt-unresolved or receipt-expired)"),
                "Script the receipt lookup's answer.",
            )),
            None => Err(self.fault(
                codes::SCENARIO_UNSCRIPTED_CALL,
                "/replies",
                format!("reconcile of `{step}` has no receipt answer scripted"),
                &format!("Add the receipt answer for `{step}` under replies."),
            )),
        }
    }

    /// What happens to a run held for an operator at `now`: the scripted
    /// recovery of its held call, or a scripted cancel before the deadline,
    /// each with the pointer a refusal is located at; `None` when the case
    /// ends held.
    fn operator_action(
        &mut self,
        state: &RunState,
        admitted: Instant,
        now: Instant,
    ) -> Result<Option<(Event, String)>, Vec<Diagnostic>> {
        let step = self
            .vm
            .held_call(state)
            .map(str::to_owned)
            .unwrap_or_default();
        // The operator acts after an unknown answer only while the
        // script still holds an answer for the step: when the replies
        // ran out on an unknown answer the run stays held (uncertain).
        let due = self.recovery_due.get(&step).copied().unwrap_or(false)
            && self.replies.get(&step).is_some_and(|left| !left.is_empty());
        match self.case.recovery.get(&step) {
            Some(action) if due => {
                self.recovery_due.insert(step.clone(), false);
                if *action == RecoveryAction::RetrySame {
                    self.operator_resend.insert(step.clone());
                }
                let at = self.writable(now)?;
                let event = match action {
                    RecoveryAction::RetrySame => Event::RetrySame { at },
                    RecoveryAction::Reconcile => Event::Reconcile { at },
                };
                Ok(Some((event, format!("/recovery/{step}"))))
            }
            _ => {
                // A held run still takes a scripted cancel that falls
                // before the deadline; otherwise the case ends held.
                let Some(event) = self.cancel_while_held(admitted, now)? else {
                    return Ok(None);
                };
                self.cancel_delivered = true;
                Ok(Some((event, "/cancel".to_owned())))
            }
        }
    }

    /// The scripted cancel, when it is still to come and falls before the
    /// deadline (at the deadline instant the deadline comes first).
    fn cancel_while_held(
        &self,
        admitted: Instant,
        now: Instant,
    ) -> Result<Option<Event>, Vec<Diagnostic>> {
        let Some(c) = (!self.cancel_delivered)
            .then_some(())
            .and(self.case.cancel.as_ref())
        else {
            return Ok(None);
        };
        let t = self
            .after(admitted, c.after_seconds, "/cancel/afterSeconds")?
            .max(now);
        if self.deadline.is_some_and(|d| t >= d) {
            return Ok(None);
        }
        Ok(Some(Event::CancelRequested {
            at: self.writable(t)?,
        }))
    }

    /// The earliest of the timed events still to come for a waiting run
    /// (at one instant, in the VM's order), marked as delivered; `None`
    /// when nothing is left to come. A wait-for with no completion
    /// scripted is a fault.
    fn earliest_timed_event(
        &mut self,
        state: &RunState,
        admitted: Instant,
        now: Instant,
        timers: &mut Vec<Instant>,
    ) -> Result<Option<Event>, Vec<Diagnostic>> {
        let waiting_on = self
            .vm
            .current_wait(state)
            .filter(|w| w.kind == WaitKind::For)
            .map(|w| w.step.to_owned());
        if let Some(step) = &waiting_on {
            if !self.case.completions.contains_key(step) {
                return Err(self.fault(
                    codes::SCENARIO_UNSCRIPTED_WAIT,
                    "/completions",
                    format!("the run reaches wait-for `{step}` with no completion scripted for it"),
                    &format!("Add a completion for `{step}` (completed or never)."),
                ));
            }
        }
        let mut candidates = self.timed_candidates(waiting_on.as_deref(), admitted, now)?;
        timers.retain(|t| *t >= now);
        for t in timers.iter() {
            if Some(*t) != self.deadline {
                candidates.push((
                    *t,
                    TimedEvent::Timer,
                    Event::TimerFired {
                        at: self.writable(*t)?,
                    },
                ));
            }
        }
        // At one instant, the VM's order (SPEC §7).
        candidates.sort_by_key(|a| (a.0, a.1.rank()));
        let Some((at, kind, event)) = candidates.into_iter().next() else {
            return Ok(None);
        };
        match kind {
            TimedEvent::Cancel => self.cancel_delivered = true,
            TimedEvent::Completion => self.completion_delivered = true,
            TimedEvent::Deadline => {
                timers.retain(|t| *t != at);
                self.deadline = None;
            }
            TimedEvent::Timer => timers.retain(|t| *t != at),
        }
        Ok(Some(event))
    }

    /// The deadline, the scripted cancel and the scripted completion of
    /// the wait-for step `waiting_on`, each when still to come, with its
    /// instant (never before `now`).
    fn timed_candidates(
        &self,
        waiting_on: Option<&str>,
        admitted: Instant,
        now: Instant,
    ) -> Result<Vec<(Instant, TimedEvent, Event)>, Vec<Diagnostic>> {
        let mut candidates = Vec::new();
        if let Some(d) = self.deadline {
            if d >= now {
                candidates.push((
                    d,
                    TimedEvent::Deadline,
                    Event::TimerFired {
                        at: self.writable(d)?,
                    },
                ));
            }
        }
        if let (Some(c), false) = (&self.case.cancel, self.cancel_delivered) {
            let t = self
                .after(admitted, c.after_seconds, "/cancel/afterSeconds")?
                .max(now);
            candidates.push((
                t,
                TimedEvent::Cancel,
                Event::CancelRequested {
                    at: self.writable(t)?,
                },
            ));
        }
        if let (Some(step), false) = (waiting_on, self.completion_delivered) {
            if let Some(CompletionScript::Completed {
                after_seconds,
                value,
            }) = self.case.completions.get(step)
            {
                let t = self
                    .after(admitted, *after_seconds, &format!("/completions/{step}"))?
                    .max(now);
                candidates.push((
                    t,
                    TimedEvent::Completion,
                    Event::CompletionObserved {
                        step: step.to_owned(),
                        value: value.clone(),
                        at: self.writable(t)?,
                    },
                ));
            }
        }
        Ok(candidates)
    }
}
