//! One event being applied to one state: the run's clock, its bindings,
//! and how it ends or fails.

use coordinator_ir::catalogue::Effect;
use coordinator_ir::{ExprId, OperationBinding, Program, StepId, StepOp};
use serde_json::Value;

use super::eval::EvalError;
use super::{reject, writable, Run, Vm};
use crate::functions::FunctionError;
use crate::model::{
    CancelMode, Command, EffectState, Failure, FailureCode, Pending, RejectCode, Rejected, Resumed,
    RunState, RunStatus,
};
use coordinator_ir::instant::Instant;

impl<'v> Run<'v> {
    /// Starts applying an event to `st`.
    pub(super) fn new(vm: &'v Vm, st: RunState) -> Self {
        Run {
            vm,
            st,
            commands: Vec::new(),
            edges: Vec::new(),
        }
    }

    /// The new state and the commands, once the event is applied.
    pub(super) fn finish(self) -> Resumed {
        Resumed {
            status: self.st.status,
            state: self.st,
            commands: self.commands,
            edges: self.edges,
        }
    }

    pub(super) fn program(&self) -> &'v Program {
        &self.vm.program
    }

    /// The latest instant the run has seen.
    pub(super) fn now(&self) -> Instant {
        self.st.now
    }

    /// The run's deadline.
    pub(super) fn deadline(&self) -> Instant {
        self.st.deadline_at
    }

    /// Moves the run's clock to `t` (and its elapsed seconds with it).
    pub(super) fn set_now(&mut self, t: Instant) -> Result<(), Rejected> {
        self.st.now = writable(t)?;
        self.st.elapsed_seconds = u64::try_from(self.st.admitted_at.seconds_until(&t)).unwrap_or(0);
        Ok(())
    }

    /// The wait-for step the run waits in, if any.
    pub(super) fn waiting_completion(&self) -> Option<StepId> {
        match &self.st.pending {
            Some(Pending::Completion { step, .. }) => Some(*step),
            Some(Pending::Call { .. }) | Some(Pending::Wake { .. }) | None => None,
        }
    }

    /// Call step `step`'s operation binding, its next step and its
    /// declared-refusal route.
    pub(super) fn binding(
        &self,
        step: StepId,
    ) -> Result<(&'v OperationBinding, StepId, Option<StepId>), Rejected> {
        match self.program().step(step).map(|s| &s.op) {
            Some(StepOp::Call {
                operation,
                next,
                on_declared_refusal,
                ..
            }) => self
                .program()
                .operations
                .get(operation.index())
                .map(|b| (b, *next, *on_declared_refusal))
                .ok_or_else(|| reject(RejectCode::Unexpected, "no such operation")),
            _ => Err(reject(
                RejectCode::Unexpected,
                format!("step {step} is not a call"),
            )),
        }
    }

    /// Ends the run with `status` at its `now`.
    pub(super) fn end(&mut self, status: RunStatus) {
        self.st.status = status;
        self.st.pending = None;
        self.st.ended_at = Some(self.st.now);
        self.commands.push(Command::Ended { status });
    }

    /// Ends the run cancelled: `cancelled-after-effect` when a mutation was
    /// accepted, else `cancelled`.
    pub(super) fn end_cancelled(&mut self) {
        let program = self.program();
        let after_effect = self.st.effects.iter().any(|(name, effect)| {
            *effect == EffectState::Accepted
                && program.step_id(name).is_some_and(|id| {
                    self.binding(id)
                        .is_ok_and(|(b, _, _)| b.descriptor.effect == Effect::Mutation)
                })
        });
        self.end(if after_effect {
            RunStatus::CancelledAfterEffect
        } else {
            RunStatus::Cancelled
        });
    }

    /// Fails the run at step `step`.
    pub(super) fn fail(
        &mut self,
        step: StepId,
        code: FailureCode,
        message: String,
        product_code: Option<String>,
        function: Option<FunctionError>,
    ) {
        self.st.failure = Some(Failure {
            code,
            step: self.vm.step_name(step).to_owned(),
            product_code,
            function,
            message,
            path: None,
        });
        self.end(RunStatus::Failed);
    }

    /// [`Self::fail`] with the failure's JSON Pointer ([`Failure::path`]).
    pub(super) fn fail_at(
        &mut self,
        step: StepId,
        code: FailureCode,
        message: String,
        path: String,
    ) {
        self.fail(step, code, message, None, None);
        if let Some(f) = self.st.failure.as_mut() {
            f.path = Some(path);
        }
    }

    /// Fails the run at step `step` because an expression failed.
    fn fail_eval(&mut self, step: StepId, e: EvalError) {
        match e {
            EvalError::Mapping(m) => self.fail(step, FailureCode::MappingInvalid, m, None, None),
            EvalError::MissingMember { message, path } => {
                self.fail_at(step, FailureCode::MappingInvalid, message, path)
            }
            EvalError::EventMember(path) => self.fail_at(
                step,
                FailureCode::MappingInvalid,
                format!("the event has no member at `{path}`"),
                path,
            ),
            EvalError::Function(f) => self.fail(
                step,
                FailureCode::FunctionError,
                f.to_string(),
                None,
                Some(f),
            ),
        }
    }

    /// Evaluates `expr` for step `step`; when it fails, the run fails
    /// there (see [`Self::fail_eval`]) and the answer is `None`.
    pub(super) fn eval_or_fail(&mut self, step: StepId, expr: ExprId) -> Option<Value> {
        match self.vm.eval(expr, &self.st, None) {
            Ok(v) => Some(v),
            Err(e) => {
                self.fail_eval(step, e);
                None
            }
        }
    }

    /// How a recorded cancel is being honoured, if one was requested.
    pub(super) fn cancel_mode(&self) -> Option<CancelMode> {
        self.st.cancel.as_ref().map(|c| c.mode)
    }
}
