//! An operator's actions on a run: a cancel request, and the recoveries of
//! a call held with an unknown effect (retry-same, reconcile).

use coordinator_ir::instant::Instant;
use coordinator_ir::StepOp;

use super::{reject, writable, Run};
use crate::model::{
    CallPhase, CancelMode, CancelRecord, Edge, Pending, RejectCode, Rejected, RunStatus,
};

impl Run<'_> {
    /// A cancel request at `at`: follows a wait-for's `onCancel` route,
    /// waits for the answer of a call in flight, or ends the run cancelled.
    pub(super) fn on_cancel(&mut self, at: Instant) -> Result<(), Rejected> {
        if self.st.cancel.is_some() {
            return Ok(());
        }
        let at = writable(at.max(self.now()))?;
        match self.st.pending.clone() {
            Some(Pending::Completion { step, .. }) => {
                if let Some(StepOp::WaitFor {
                    on_cancel: Some(route),
                    ..
                }) = self.program().step(step).map(|s| &s.op)
                {
                    self.st.cancel = Some(CancelRecord {
                        at,
                        mode: CancelMode::Route,
                    });
                    self.st.pending = None;
                    return self.follow(step, Edge::OnCancel, *route);
                }
                self.end_cancelled();
            }
            Some(Pending::Call {
                phase: CallPhase::Dispatched | CallPhase::LookingUpReceipt,
                ..
            }) => {
                self.st.cancel = Some(CancelRecord {
                    at,
                    mode: CancelMode::InFlight,
                });
                self.st.status = RunStatus::CancelRequested;
            }
            Some(Pending::Call {
                phase: CallPhase::Held,
                ..
            })
            | Some(Pending::Wake { .. })
            | None => self.end_cancelled(),
        }
        Ok(())
    }

    /// Checks that the run is held and may be recovered by retry-same
    /// (`reconcile == false`) or reconcile.
    pub(super) fn check_recovery(&self, reconcile: bool) -> Result<(), Rejected> {
        let Some(Pending::Call {
            step,
            phase: CallPhase::Held,
            receipt_expired,
            ..
        }) = &self.st.pending
        else {
            return Err(reject(
                RejectCode::NotHeld,
                "the run is not held with an unknown effect",
            ));
        };
        let (binding, _, _) = self.binding(*step)?;
        if *receipt_expired {
            return Err(reject(
                if reconcile {
                    RejectCode::ReceiptExpired
                } else {
                    RejectCode::NotResendable
                },
                "the receipt expired: nothing may be sent or looked up for this call any more",
            ));
        }
        let support = crate::view::RecoverySupport::of(&binding.descriptor);
        if reconcile && !support.reconcile {
            return Err(reject(
                RejectCode::NoReceipt,
                format!("`{}` has no receipts to reconcile", binding.descriptor.id),
            ));
        }
        if !reconcile && !support.retry_same {
            return Err(reject(
                RejectCode::NotResendable,
                "an evaluation that may have been sent is never sent again",
            ));
        }
        Ok(())
    }

    /// Retry-same: sends the frozen command again.
    pub(super) fn retry_same(&mut self) -> Result<(), Rejected> {
        self.dispatch()
    }

    /// Reconcile: looks up the receipt.
    pub(super) fn reconcile(&mut self) -> Result<(), Rejected> {
        self.lookup_receipt()
    }
}
