//! Entering steps: [`Run::advance`] runs from a step until a call, a wait
//! or an end, with one function per step kind.

use coordinator_ir::instant::Instant;
use coordinator_ir::{Case, ExprId, OperationId, OutcomeId, StepId, StepOp};
use serde_json::Value;

use super::{reject, writable, Run};
use crate::model::{
    CallPhase, CancelMode, Command, Edge, EdgeTaken, FailureCode, Pending, RejectCode, Rejected,
    RunStatus, WakeKind,
};

/// Where entering a step leaves the run.
enum Entered {
    /// Go on at once by this edge to this step.
    Next(Edge, StepId),
    /// Stop: the run is in a call or a wait, or has ended.
    Stopped,
}

impl Run<'_> {
    /// Leaves step `from` by its member `edge` for step `to`, recorded in
    /// [`crate::Resumed::edges`], and runs from `to` ([`Run::advance`]).
    pub(super) fn follow(&mut self, from: StepId, edge: Edge, to: StepId) -> Result<(), Rejected> {
        self.record_edge(from, edge, to);
        self.advance(to)
    }

    fn record_edge(&mut self, from: StepId, edge: Edge, to: StepId) {
        self.edges.push(EdgeTaken {
            from: self.vm.step_name(from).to_owned(),
            edge,
            to: self.vm.step_name(to).to_owned(),
        });
    }

    /// Runs steps from `id` until a call, a wait or a finish; an edge taken
    /// on the way is recorded.
    pub(super) fn advance(&mut self, mut id: StepId) -> Result<(), Rejected> {
        let program = self.program();
        loop {
            let step = program
                .step(id)
                .ok_or_else(|| reject(RejectCode::Unexpected, format!("no step {id}")))?;
            self.st.path.push(step.name.clone());
            let entered = match &step.op {
                StepOp::Call {
                    operation, input, ..
                } => self.enter_call(id, *operation, *input)?,
                StepOp::Choose { selector, cases } => self.enter_choose(id, *selector, cases),
                StepOp::WaitUntil { until, next } => self.enter_wait_until(id, *until, *next)?,
                StepOp::WaitFor {
                    call,
                    completion,
                    timeout_seconds,
                    ..
                } => self.enter_wait_for(id, &step.name, *call, completion, *timeout_seconds)?,
                StepOp::Finish { outcome, output } => self.enter_finish(id, *outcome, *output)?,
            };
            match entered {
                Entered::Next(edge, next) => {
                    self.record_edge(id, edge, next);
                    id = next;
                }
                Entered::Stopped => return Ok(()),
            }
        }
    }

    /// A call step: maps the input, checks it against the operation's input
    /// schema, freezes it and sends it.
    fn enter_call(
        &mut self,
        id: StepId,
        operation: OperationId,
        input: ExprId,
    ) -> Result<Entered, Rejected> {
        let binding = self
            .program()
            .operations
            .get(operation.index())
            .ok_or_else(|| reject(RejectCode::Unexpected, "no such operation"))?;
        let Some(command) = self.eval_or_fail(id, input) else {
            return Ok(Entered::Stopped);
        };
        if let Err((pointer, message)) = self.vm.check_schema(binding.input, &command) {
            self.fail_at(
                id,
                FailureCode::InvalidCommand,
                format!(
                    "the input of `{}` at `{}`: {message}",
                    binding.alias,
                    super::shown_pointer(&pointer)
                ),
                pointer,
            );
            return Ok(Entered::Stopped);
        }
        self.st.pending = Some(Pending::Call {
            step: id,
            command,
            attempt: 0,
            lookups: 0,
            phase: CallPhase::Dispatched,
            unknown: false,
            receipt_expired: false,
            last_answer: None,
        });
        self.dispatch()?;
        Ok(Entered::Stopped)
    }

    /// A choose step: goes to the case whose label the selector returns.
    fn enter_choose(&mut self, id: StepId, selector: ExprId, cases: &[Case]) -> Entered {
        let Some(label) = self.eval_or_fail(id, selector) else {
            return Entered::Stopped;
        };
        match cases
            .iter()
            .find(|c| Some(c.label.as_str()) == label.as_str())
        {
            Some(case) => Entered::Next(
                Edge::Case {
                    label: case.label.clone(),
                },
                case.step,
            ),
            None => {
                self.fail(
                    id,
                    FailureCode::MappingInvalid,
                    format!("the selector returned {label}, which is not a case label"),
                    None,
                    None,
                );
                Entered::Stopped
            }
        }
    }

    /// A wait-until step: waits for the instant `until` evaluates to (for
    /// the deadline when it is at or past it), or goes on at once when the
    /// instant has passed.
    fn enter_wait_until(
        &mut self,
        id: StepId,
        until: ExprId,
        next: StepId,
    ) -> Result<Entered, Rejected> {
        let Some(value) = self.eval_or_fail(id, until) else {
            return Ok(Entered::Stopped);
        };
        let at = match value.as_str().map(Instant::parse) {
            Some(Ok(at)) => at,
            Some(Err(e)) => {
                self.fail(
                    id,
                    FailureCode::MappingInvalid,
                    format!("until: {e}"),
                    None,
                    None,
                );
                return Ok(Entered::Stopped);
            }
            None => {
                self.fail(
                    id,
                    FailureCode::MappingInvalid,
                    format!("until: {value} is not an RFC 3339 string"),
                    None,
                    None,
                );
                return Ok(Entered::Stopped);
            }
        };
        if at >= self.deadline() {
            // Ends `expired` when the deadline timer fires.
            self.st.pending = Some(Pending::Wake {
                step: id,
                at: self.deadline(),
            });
            return Ok(Entered::Stopped);
        }
        if at <= self.now() {
            return Ok(Entered::Next(Edge::Next, next));
        }
        let at = writable(at)?;
        self.st.pending = Some(Pending::Wake { step: id, at });
        self.commands.push(Command::ScheduleWake {
            at,
            kind: WakeKind::Wake,
        });
        Ok(Entered::Stopped)
    }

    /// A wait-for step (named `name`): observes completion `completion` of
    /// call step `call` until `timeout_seconds` from now (at most until the
    /// deadline).
    fn enter_wait_for(
        &mut self,
        id: StepId,
        name: &str,
        call: StepId,
        completion: &str,
        timeout_seconds: u64,
    ) -> Result<Entered, Rejected> {
        let deadline = self.deadline();
        let timeout_at = self
            .now()
            .plus_seconds(i64::try_from(timeout_seconds).unwrap_or(i64::MAX))
            .map_or(deadline, |t| t.min(deadline));
        let timeout_at = writable(timeout_at)?;
        let call_name = self.vm.step_name(call).to_owned();
        let (binding, _, _) = self.binding(call)?;
        let connection = binding.connection.clone();
        let handle = self
            .st
            .outputs
            .get(&call_name)
            .and_then(|o| o.pointer(coordinator_ir::catalogue::COMPLETION_HANDLE))
            .and_then(Value::as_str)
            .map(str::to_owned);
        self.st.pending = Some(Pending::Completion {
            step: id,
            timeout_at,
        });
        self.commands.push(Command::ObserveCompletion {
            step: name.to_owned(),
            call: call_name,
            completion: completion.to_owned(),
            connection,
            handle,
            timeout_at,
        });
        Ok(Entered::Stopped)
    }

    /// A finish step: ends the run with outcome `outcome` and the output
    /// `output` evaluates to (`null` without one), checked against the
    /// outcome's schema; `cancelled` after an `onCancel` route.
    fn enter_finish(
        &mut self,
        id: StepId,
        outcome: OutcomeId,
        output: Option<ExprId>,
    ) -> Result<Entered, Rejected> {
        let value = match output {
            Some(e) => match self.eval_or_fail(id, e) {
                Some(v) => v,
                None => return Ok(Entered::Stopped),
            },
            None => Value::Null,
        };
        let outcome = self
            .program()
            .outcomes
            .get(outcome.index())
            .ok_or_else(|| reject(RejectCode::Unexpected, "no such outcome"))?;
        if let Err((pointer, message)) = self.vm.check_schema(outcome.schema, &value) {
            self.fail_at(
                id,
                FailureCode::MappingInvalid,
                format!(
                    "the output of outcome `{}` at `{}`: {message}",
                    outcome.name,
                    super::shown_pointer(&pointer)
                ),
                pointer,
            );
            return Ok(Entered::Stopped);
        }
        self.st.outcome = Some(outcome.name.clone());
        self.st.output = Some(value);
        self.end(if self.cancel_mode() == Some(CancelMode::Route) {
            RunStatus::Cancelled
        } else {
            RunStatus::Finished
        });
        Ok(Entered::Stopped)
    }
}
