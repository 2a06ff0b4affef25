//! What a host may ask of a run, by step name, so that no host reads the
//! VM's own record of pending work (`Pending`, `CallPhase`: crate-private):
//! whether a job still applies ([`Vm::expects`]), the wait a run is in
//! ([`Vm::current_wait`], [`wait_kind`]), the call held for an operator
//! ([`Vm::held_call`]), a step's kind ([`Vm::step_kind`]), and the order of
//! events due at one instant ([`SAME_INSTANT_ORDER`]).

use coordinator_ir::catalogue::{Effect, OperationDescriptor};
use coordinator_ir::instant::Instant;
use coordinator_ir::{Program, StepKind, StepOp};

use crate::machine::Vm;
use crate::model::{CallPhase, Pending, RunState, RunStatus};

/// An event a host is about to deliver, for [`Vm::expects`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expected<'a> {
    /// The answer of attempt `attempt` of call step `step` (a dispatch).
    CallAnswer {
        /// The call step's name.
        step: &'a str,
        /// The VM's attempt number the command carried.
        attempt: u32,
    },
    /// A receipt answer for call step `step` (a receipt lookup).
    ReceiptAnswer {
        /// The call step's name.
        step: &'a str,
    },
    /// A completion observed for wait-for step `step`.
    Completion {
        /// The wait-for step's name.
        step: &'a str,
    },
}

/// The kind of a wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitKind {
    /// A `wait-until` (or the wait for the deadline).
    Until,
    /// A `wait-for`.
    For,
}

impl WaitKind {
    /// The kind of step that waits this way: `wait-until` or `wait-for`.
    pub fn step_kind(self) -> StepKind {
        match self {
            WaitKind::Until => StepKind::WaitUntil,
            WaitKind::For => StepKind::WaitFor,
        }
    }

    /// `wait-until` or `wait-for` ([`WaitKind::step_kind`]'s word).
    pub fn as_str(self) -> &'static str {
        self.step_kind().as_str()
    }
}

/// The wait a run is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wait<'a> {
    /// The waiting step's name.
    pub step: &'a str,
    /// Which kind of wait.
    pub kind: WaitKind,
    /// When it is due (a wait-until's instant, a wait-for's timeout).
    pub due_at: Instant,
}

/// Events that fall due at the same instant are delivered in this order
/// (SPEC §7), by every host: the deadline, a cancel, a completion, then a
/// timer (a wait-for's timeout or a wait-until's wake; a run has only one
/// of them at a time).
pub const SAME_INSTANT_ORDER: [TimedEvent; 4] = [
    TimedEvent::Deadline,
    TimedEvent::Cancel,
    TimedEvent::Completion,
    TimedEvent::Timer,
];

/// A timed event, for [`SAME_INSTANT_ORDER`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimedEvent {
    /// The run deadline.
    Deadline,
    /// An operator's (or a scenario's) cancel.
    Cancel,
    /// A completion observed for the wait-for the run is in.
    Completion,
    /// A wait-for's timeout or a wait-until's wake.
    Timer,
}

impl TimedEvent {
    /// Its place in [`SAME_INSTANT_ORDER`] (smaller first).
    pub fn rank(self) -> u8 {
        SAME_INSTANT_ORDER
            .iter()
            .position(|e| *e == self)
            .and_then(|p| u8::try_from(p).ok())
            .unwrap_or(u8::MAX)
    }
}

/// The kind of the wait the run is in, if any (`wait-until` for a wake or
/// the deadline, `wait-for`).
pub fn wait_kind(state: &RunState) -> Option<WaitKind> {
    match state.pending {
        Some(Pending::Wake { .. }) => Some(WaitKind::Until),
        Some(Pending::Completion { .. }) => Some(WaitKind::For),
        _ => None,
    }
}

impl Vm {
    /// Whether the run would take `expected` now: a host asks before it
    /// carries out a job (a dispatch whose step moved on, a lookup no longer
    /// out, an observation for a wait that ended), and drops the job when
    /// not. The VM refuses such an event anyway (`Rejected::Unexpected`);
    /// this lets a host know before it sends anything.
    pub fn expects(&self, state: &RunState, expected: &Expected<'_>) -> bool {
        match (&state.pending, expected) {
            (
                Some(Pending::Call {
                    step,
                    phase: CallPhase::Dispatched,
                    attempt: a,
                    ..
                }),
                Expected::CallAnswer {
                    step: name,
                    attempt,
                },
            ) => self.step_is(*step, name) && a == attempt,
            (
                Some(Pending::Call {
                    step,
                    phase: CallPhase::LookingUpReceipt,
                    ..
                }),
                Expected::ReceiptAnswer { step: name },
            ) => self.step_is(*step, name),
            (Some(Pending::Completion { step, .. }), Expected::Completion { step: name }) => {
                self.step_is(*step, name)
            }
            _ => false,
        }
    }

    /// The wait the run is in, if any.
    pub fn current_wait<'s>(&'s self, state: &'s RunState) -> Option<Wait<'s>> {
        let (step, kind, due_at) = match &state.pending {
            Some(Pending::Wake { step, at }) => (*step, WaitKind::Until, *at),
            Some(Pending::Completion { step, timeout_at }) => (*step, WaitKind::For, *timeout_at),
            _ => return None,
        };
        Some(Wait {
            step: self.program().step(step).map(|s| s.name.as_str())?,
            kind,
            due_at,
        })
    }

    /// The call step whose call is held for an operator (its effect
    /// `unknown`), if any.
    pub fn held_call<'s>(&'s self, state: &'s RunState) -> Option<&'s str> {
        match &state.pending {
            Some(Pending::Call {
                step,
                phase: CallPhase::Held,
                ..
            }) => self.program().step(*step).map(|s| s.name.as_str()),
            _ => None,
        }
    }

    /// Whether the call held for an operator had its receipt lookup answered
    /// "expired" (the product no longer holds the original receipt: not
    /// evidence the command was never sent; nothing is looked up or sent
    /// for it any more).
    pub fn receipt_expired(&self, state: &RunState) -> bool {
        matches!(
            &state.pending,
            Some(Pending::Call {
                phase: CallPhase::Held,
                receipt_expired: true,
                ..
            })
        )
    }

    /// When the run's cancel request arrived, once one did: the cancel
    /// event's `at` as recorded, or, for a run the cancel ended at once
    /// (nothing recorded), its end; `None` for a run never asked to
    /// cancel. What a scenario case exported from the run delivers its
    /// `cancel` at.
    pub fn cancel_requested_at(&self, state: &RunState) -> Option<Instant> {
        let ended_by_cancel = matches!(
            state.status,
            RunStatus::Cancelled | RunStatus::CancelledAfterEffect
        );
        state
            .cancel
            .as_ref()
            .map(|c| c.at)
            .or(state.ended_at.filter(|_| ended_by_cancel))
    }

    /// The call step the run is in (dispatched, looking up its receipt or
    /// held), if any.
    pub fn current_call<'s>(&'s self, state: &'s RunState) -> Option<&'s str> {
        match &state.pending {
            Some(Pending::Call { step, .. }) => self.program().step(*step).map(|s| s.name.as_str()),
            _ => None,
        }
    }

    /// The kind of step `name`, if the Program has it.
    pub fn step_kind(&self, name: &str) -> Option<StepKind> {
        let program = self.program();
        program
            .step_id(name)
            .and_then(|id| program.step(id))
            .map(|s| s.op.kind())
    }

    fn step_is(&self, id: coordinator_ir::StepId, name: &str) -> bool {
        self.program().step(id).is_some_and(|s| s.name == name)
    }
}

/// Which operator recoveries the VM takes for a call once its effect is
/// `unknown` (SPEC §6): `retry-same` resends the same command (never for an
/// evaluation that may have been sent), `reconcile` reads the product's
/// receipt (only for operations with receipts). The rule is stated here
/// once: the VM applies it to a held run, and the scenario host checks a
/// scenario's `recovery` entries with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecoverySupport {
    /// An uncertain answer to a dispatch holds the run for an operator
    /// (`attention`, effect `unknown`): a mutation or an evaluation. A
    /// read is sent again by the VM instead and is never held.
    pub holds: bool,
    /// `retry-same` may resend the command.
    pub retry_same: bool,
    /// `reconcile` may look up the receipt.
    pub reconcile: bool,
}

impl RecoverySupport {
    /// What an operation with `descriptor` supports.
    pub fn of(descriptor: &OperationDescriptor) -> RecoverySupport {
        RecoverySupport {
            holds: descriptor.effect != Effect::Read,
            retry_same: descriptor.effect != Effect::Evaluation,
            reconcile: descriptor.receipt,
        }
    }
}

/// The recoveries of call step `step` of `program`; `None` when `step` is
/// not a call step.
pub fn recovery_support(program: &Program, step: &str) -> Option<RecoverySupport> {
    let op = program.step(program.step_id(step)?).map(|s| &s.op)?;
    let StepOp::Call { operation, .. } = op else {
        return None;
    };
    program
        .operations
        .get(operation.index())
        .map(|b| RecoverySupport::of(&b.descriptor))
}
