//! Time and waits: moving the run's clock, firing the timers due (a
//! wait-until's wake, a wait-for's timeout), the deadline, and a completion
//! observed for a wait-for.

use coordinator_ir::catalogue::Effect;
use coordinator_ir::{StepId, StepOp};
use serde_json::Value;

use super::{reject, Run};
use crate::model::{
    CallPhase, Edge, EffectState, FailureCode, Pending, RejectCode, Rejected, RunStatus,
};
use coordinator_ir::instant::Instant;

impl Run<'_> {
    /// Moves time to `at`, firing timers due before it (or at it, when
    /// `inclusive`), and expiring the run at the deadline. Returns whether
    /// the run has ended.
    pub(super) fn tick(&mut self, at: Instant, inclusive: bool) -> Result<bool, Rejected> {
        let t = at.max(self.now());
        let deadline = self.deadline();
        let past_deadline = t >= deadline;
        let limit = if past_deadline { deadline } else { t };
        self.catch_up(&limit, inclusive && !past_deadline)?;
        if self.st.status.is_terminal() {
            return Ok(true);
        }
        if past_deadline {
            self.expire()?;
            return Ok(true);
        }
        self.set_now(t)?;
        Ok(false)
    }

    /// Fires the wake or timeout the run waits for while it is due by
    /// `limit`, and again for the wait that follows, until none is due.
    fn catch_up(&mut self, limit: &Instant, inclusive: bool) -> Result<(), Rejected> {
        let due = |at: &Instant| if inclusive { at <= limit } else { at < limit };
        loop {
            if self.st.status.is_terminal() {
                return Ok(());
            }
            let (step, at, is_wake) = match &self.st.pending {
                Some(Pending::Wake { step, at }) => (*step, *at, true),
                Some(Pending::Completion { step, timeout_at }) => (*step, *timeout_at, false),
                Some(Pending::Call { .. }) | None => return Ok(()),
            };
            if !due(&at) {
                return Ok(());
            }
            self.set_now(at)?;
            self.st.pending = None;
            if is_wake {
                self.wake(step)?;
            } else {
                self.time_out(step)?;
            }
        }
    }

    /// Wait-until step `step` is due: the run goes on to its next step.
    fn wake(&mut self, step: StepId) -> Result<(), Rejected> {
        match self.program().step(step).map(|s| &s.op) {
            Some(StepOp::WaitUntil { next, .. }) => self.follow(step, Edge::Next, *next),
            _ => Err(reject(RejectCode::Unexpected, "wake outside a wait-until")),
        }
    }

    /// Wait-for step `step` timed out: the run follows its `onTimeout`
    /// route, or ends `expired` without one.
    fn time_out(&mut self, step: StepId) -> Result<(), Rejected> {
        match self.program().step(step).map(|s| &s.op) {
            Some(StepOp::WaitFor {
                on_timeout: Some(route),
                ..
            }) => self.follow(step, Edge::OnTimeout, *route),
            Some(StepOp::WaitFor {
                on_timeout: None, ..
            }) => {
                self.end(RunStatus::Expired);
                Ok(())
            }
            _ => Err(reject(RejectCode::Unexpected, "timeout outside a wait-for")),
        }
    }

    /// Ends the run `expired` at the deadline; a mutation or evaluation
    /// dispatched and unanswered is recorded with effect `unknown`.
    fn expire(&mut self) -> Result<(), Rejected> {
        if let Some(Pending::Call { step, phase, .. }) = self.st.pending.clone() {
            let (binding, _, _) = self.binding(step)?;
            let name = self.vm.step_name(step).to_owned();
            if binding.descriptor.effect != Effect::Read
                && phase == CallPhase::Dispatched
                && !self.st.effects.contains_key(&name)
            {
                self.st.effects.insert(name, EffectState::Unknown);
            }
        }
        let deadline = self.deadline();
        self.set_now(deadline)?;
        self.end(RunStatus::Expired);
        Ok(())
    }

    /// The completion awaited by wait-for step `step` arrived with `value`.
    pub(super) fn on_completion(&mut self, step: StepId, value: &Value) -> Result<(), Rejected> {
        let Some(StepOp::WaitFor { call, next, .. }) = self.program().step(step).map(|s| &s.op)
        else {
            return Err(reject(RejectCode::Unexpected, "not a wait-for"));
        };
        self.st.pending = None;
        let (binding, _, _) = self.binding(*call)?;
        if let Some(schema) = binding.completion {
            if let Err((pointer, message)) = self.vm.check_schema(schema, value) {
                self.fail(
                    step,
                    FailureCode::InvalidResponse,
                    format!(
                        "the completion value at `{}`: {message}",
                        super::shown_pointer(&pointer)
                    ),
                    None,
                    None,
                );
                return Ok(());
            }
        }
        self.st
            .outputs
            .insert(self.vm.step_name(step).to_owned(), value.clone());
        self.follow(step, Edge::Next, *next)
    }
}
