//! A call in progress: its dispatches, receipt lookups and holds, and the
//! product's answers, one function per answer kind.

use coordinator_ir::catalogue::Effect;
use coordinator_ir::{OperationBinding, StepId};
use serde_json::{json, Value};

use super::{reject, Run};
use crate::model::{
    Answer, CallPhase, CancelMode, Command, DispatchCommand, Edge, EffectState, FailureCode,
    Pending, RejectCode, Rejected, RunStatus,
};
use crate::view::RecoverySupport;

/// The call an answer is for, as the run stood when the answer arrived.
struct AnsweredCall<'v> {
    step: StepId,
    binding: &'v OperationBinding,
    /// The step after the call.
    next: StepId,
    /// The route for a declared refusal, if the step has one.
    on_refusal: Option<StepId>,
    /// Whether an earlier answer left the effect unknown.
    unknown: bool,
    /// Whether a cancel arrived while the call was in flight (the answer
    /// ends the run).
    cancelling: bool,
}

impl<'v> Run<'v> {
    /// Sends (again) the frozen command of the pending call.
    pub(super) fn dispatch(&mut self) -> Result<(), Rejected> {
        let (step, attempt, command) = self.count_call_phase(CallPhase::Dispatched)?;
        let (binding, _, _) = self.binding(step)?;
        self.commands.push(Command::Dispatch {
            operation: binding.alias.clone(),
            needs_idempotency_key: binding.descriptor.idempotency_key,
            dispatch: DispatchCommand {
                step: self.vm.step_name(step).to_owned(),
                operation_id: binding.descriptor.id.clone(),
                connection: binding.connection.clone(),
                action: binding.action.clone(),
                command,
                attempt,
                resend_safe: binding.descriptor.effect == Effect::Read,
            },
        });
        if self.st.cancel.is_none() {
            self.st.status = RunStatus::Running;
        }
        Ok(())
    }

    /// Looks up the receipt of the pending call (again).
    pub(super) fn lookup_receipt(&mut self) -> Result<(), Rejected> {
        let (step, lookup, _) = self.count_call_phase(CallPhase::LookingUpReceipt)?;
        let (binding, _, _) = self.binding(step)?;
        self.commands.push(Command::LookupReceipt {
            lookup,
            step: self.vm.step_name(step).to_owned(),
            operation: binding.alias.clone(),
            operation_id: binding.descriptor.id.clone(),
            connection: binding.connection.clone(),
        });
        self.st.status = RunStatus::Running;
        Ok(())
    }

    /// Moves the pending call to `next` (`Dispatched` or
    /// `LookingUpReceipt`) and counts one more dispatch or lookup. Returns
    /// the call's step, the new count and the frozen command.
    fn count_call_phase(&mut self, next: CallPhase) -> Result<(StepId, u32, Value), Rejected> {
        let Some(Pending::Call {
            step,
            command,
            attempt,
            lookups,
            phase,
            ..
        }) = self.st.pending.as_mut()
        else {
            return Err(reject(RejectCode::Unexpected, "no call in progress"));
        };
        let count = if next == CallPhase::LookingUpReceipt {
            lookups
        } else {
            attempt
        };
        *count += 1;
        *phase = next;
        Ok((*step, *count, command.clone()))
    }

    /// Holds the pending call: effect unknown, status attention.
    fn hold(&mut self, step: StepId) {
        if let Some(Pending::Call { phase, unknown, .. }) = self.st.pending.as_mut() {
            *phase = CallPhase::Held;
            *unknown = true;
        }
        self.st
            .effects
            .insert(self.vm.step_name(step).to_owned(), EffectState::Unknown);
        self.st.status = RunStatus::Attention;
    }

    /// Applies the answer to the call in flight: a success, the answer to a
    /// receipt lookup, or the answer to a dispatch.
    pub(super) fn on_answer(&mut self, step_name: &str, answer: &Answer) -> Result<(), Rejected> {
        let (step, phase, unknown) = self.record_answer(step_name, answer)?;
        let (binding, next, on_refusal) = self.binding(step)?;
        let call = AnsweredCall {
            step,
            binding,
            next,
            on_refusal,
            unknown,
            cancelling: self.cancel_mode() == Some(CancelMode::InFlight),
        };
        if let Answer::Success { value } = answer {
            return self.on_success(&call, value);
        }
        if phase == CallPhase::LookingUpReceipt {
            return self.on_receipt_answer(&call, answer);
        }
        self.on_dispatch_answer(&call, answer)
    }

    /// Checks that `answer` is for the call of step `step_name` in flight
    /// (a receipt answer only while a lookup is out) and records it on the
    /// call. Returns the call's step, its phase and whether an earlier
    /// answer left its effect unknown.
    fn record_answer(
        &mut self,
        step_name: &str,
        answer: &Answer,
    ) -> Result<(StepId, CallPhase, bool), Rejected> {
        let Some(Pending::Call {
            step,
            phase,
            unknown,
            last_answer,
            receipt_expired,
            ..
        }) = self.st.pending.as_mut()
        else {
            return Err(reject(
                RejectCode::Unexpected,
                format!("no call of step `{step_name}` is in flight"),
            ));
        };
        let step = *step;
        if self.vm.step_name(step) != step_name || *phase == CallPhase::Held {
            return Err(reject(
                RejectCode::Unexpected,
                format!("no call of step `{step_name}` is in flight"),
            ));
        }
        let receipt_answer = matches!(answer, Answer::ReceiptExpired | Answer::ReceiptUnresolved);
        if receipt_answer && *phase != CallPhase::LookingUpReceipt {
            return Err(reject(
                RejectCode::Unexpected,
                "a receipt answer arrived but no receipt lookup is out",
            ));
        }
        *last_answer = Some(answer_summary(answer));
        if matches!(answer, Answer::ReceiptExpired) {
            *receipt_expired = true;
        }
        Ok((step, *phase, *unknown))
    }

    /// A success (from a dispatch or a receipt lookup): the effect is
    /// accepted, the value checked against the operation's output schema,
    /// and the run goes on (or ends, when a cancel is waiting for it).
    fn on_success(&mut self, call: &AnsweredCall<'v>, value: &Value) -> Result<(), Rejected> {
        let name = self.vm.step_name(call.step).to_owned();
        self.st.pending = None;
        if call.binding.descriptor.effect != Effect::Read {
            self.st.effects.insert(name.clone(), EffectState::Accepted);
        }
        if let Err((pointer, message)) = self.vm.check_schema(call.binding.output, value) {
            self.fail(
                call.step,
                FailureCode::InvalidResponse,
                format!(
                    "the response of `{}` at `{}`: {message}",
                    call.binding.alias,
                    super::shown_pointer(&pointer)
                ),
                None,
                None,
            );
            return Ok(());
        }
        self.st.outputs.insert(name, value.clone());
        if call.cancelling {
            self.end_cancelled();
            return Ok(());
        }
        self.follow(call.step, Edge::Next, call.next)
    }

    /// Any answer but the original response to a receipt lookup leaves the
    /// effect unknown: a retryable one looks up again, the rest hold.
    fn on_receipt_answer(
        &mut self,
        call: &AnsweredCall<'v>,
        answer: &Answer,
    ) -> Result<(), Rejected> {
        if call.cancelling {
            self.end_cancelled();
        } else if matches!(answer, Answer::Retryable { .. }) {
            self.lookup_receipt()?;
        } else {
            self.hold(call.step);
        }
        Ok(())
    }

    /// The answer to a dispatch, other than a success.
    fn on_dispatch_answer(
        &mut self,
        call: &AnsweredCall<'v>,
        answer: &Answer,
    ) -> Result<(), Rejected> {
        let effect = call.binding.descriptor.effect;
        match answer {
            Answer::Retryable { .. } => {
                if call.cancelling {
                    self.end_cancelled();
                } else {
                    self.dispatch()?;
                }
            }
            Answer::Uncertain { .. } => {
                if RecoverySupport::of(&call.binding.descriptor).holds {
                    self.hold_effect_unknown(call);
                } else if call.cancelling {
                    self.end_cancelled();
                } else {
                    self.dispatch()?;
                }
            }
            Answer::Refused { code } if effect == Effect::Read => {
                self.product_refused(call.step, code, call.cancelling)
            }
            Answer::Refused { .. }
            | Answer::DeclaredRefusal { .. }
            | Answer::InvalidCommand { .. }
                if call.unknown =>
            {
                // A refusal after an unknown answer proves nothing.
                self.hold_effect_unknown(call);
            }
            Answer::Refused { code } => self.product_refused(call.step, code, call.cancelling),
            Answer::DeclaredRefusal { refusal_code } => {
                self.on_declared_refusal(call, refusal_code)?
            }
            Answer::InvalidCommand { code } => self.on_invalid_command(call, code),
            Answer::InvalidResponse { code } => self.on_invalid_response(call, code),
            Answer::Success { .. } | Answer::ReceiptExpired | Answer::ReceiptUnresolved => {}
        }
        Ok(())
    }

    /// Holds the call with its effect unknown; a cancel waiting for the
    /// answer then ends the run (the `unknown` effect stays recorded).
    fn hold_effect_unknown(&mut self, call: &AnsweredCall<'v>) {
        self.hold(call.step);
        if call.cancelling {
            self.end_cancelled();
        }
    }

    /// An owner-declared no-effect refusal: the step's refusal route with
    /// `{refusalCode}` as the step's output, or a product refusal without
    /// one.
    fn on_declared_refusal(
        &mut self,
        call: &AnsweredCall<'v>,
        refusal_code: &str,
    ) -> Result<(), Rejected> {
        match call.on_refusal {
            Some(_) if call.cancelling => self.end_cancelled(),
            Some(route) => {
                self.st.pending = None;
                self.st.outputs.insert(
                    self.vm.step_name(call.step).to_owned(),
                    json!({ "refusalCode": refusal_code }),
                );
                self.follow(call.step, Edge::OnDeclaredRefusal, route)?;
            }
            None => self.product_refused(call.step, refusal_code, call.cancelling),
        }
        Ok(())
    }

    /// The product refused the command as invalid: the run fails
    /// `invalid-command`.
    fn on_invalid_command(&mut self, call: &AnsweredCall<'v>, code: &str) {
        if call.cancelling {
            self.end_cancelled();
        } else {
            self.fail(
                call.step,
                FailureCode::InvalidCommand,
                format!("the product refused the command as invalid (`{code}`)"),
                Some(code.to_owned()),
                None,
            );
        }
    }

    /// A 2xx whose body is not the operation's output: the effect is
    /// accepted and the run fails `invalid-response`.
    fn on_invalid_response(&mut self, call: &AnsweredCall<'v>, code: &str) {
        self.st.pending = None;
        if call.binding.descriptor.effect != Effect::Read {
            self.st.effects.insert(
                self.vm.step_name(call.step).to_owned(),
                EffectState::Accepted,
            );
        }
        self.fail(
            call.step,
            FailureCode::InvalidResponse,
            format!(
                "the response of `{}` is not its declared output (`{code}`)",
                call.binding.alias
            ),
            None,
            None,
        );
    }

    /// A definite refusal: the run fails `product-refused` (or ends
    /// cancelled, when a cancel is waiting for the answer).
    fn product_refused(&mut self, step: StepId, code: &str, cancelling: bool) {
        if cancelling {
            self.end_cancelled();
            return;
        }
        self.fail(
            step,
            FailureCode::ProductRefused,
            format!("the product refused with `{code}`"),
            Some(code.to_owned()),
            None,
        );
    }
}

/// The kind and code of an answer, as the call records it for inspection.
fn answer_summary(answer: &Answer) -> String {
    match answer {
        Answer::Retryable { code }
        | Answer::Refused { code }
        | Answer::Uncertain { code }
        | Answer::InvalidCommand { code }
        | Answer::InvalidResponse { code } => format!("{} {code}", answer.kind()),
        Answer::DeclaredRefusal { refusal_code } => format!("{} {refusal_code}", answer.kind()),
        Answer::Success { .. } | Answer::ReceiptExpired | Answer::ReceiptUnresolved => {
            answer.kind().to_owned()
        }
    }
}
