//! Moving a waiting run from the Program it waits under (revision A) to
//! another revision B of the same workflow (docs/decisions.md "Moving
//! waiting runs"). The VM translates the state and re-checks only what the
//! translation needs: the run waits at the step the move names, the target
//! exists in B with the same kind and wait contract, and the steps whose
//! outputs are carried exist in B. Which outputs are carried is
//! [`coordinator_ir::carried::carried_steps`]'s rule; that every value B
//! will read is there is the compiler's proof, not the VM's.
//!
//! A move is a pure function of its arguments: it reads no clock and keeps
//! every instant of the run (admission, deadline, `now`, the wait's due
//! instant or timeout).

use coordinator_ir::{Program, Step, StepId, StepKind, StepOp};

use crate::machine::Vm;
use crate::model::{Pending, RunState, RunStatus};
use crate::view::{Wait, WaitKind};

/// Where a waiting run moves: from wait step `from_step` of revision A to
/// step `to_step` of revision B (the same name unless a map renames it),
/// keeping the outputs and effects of the A steps named in `carried`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MoveTarget {
    /// A's wait step (`wait-until` or `wait-for`), by name.
    pub from_step: String,
    /// B's step the run waits at after the move, by name.
    pub to_step: String,
    /// The A steps whose outputs and effects the run keeps, by name
    /// ([`coordinator_ir::carried::carried_steps`]).
    pub carried: Vec<String>,
}

/// A run moved to revision B.
#[derive(Clone, Debug, PartialEq)]
pub struct Moved<'v> {
    /// The run's state under B: waiting at the target step with A's due
    /// instant (a `wait-until`) or timeout (a `wait-for`); the outputs and
    /// effects of the carried steps only; the path, admission, deadline,
    /// `now` and status unchanged.
    pub state: RunState,
    /// The wait the run now holds under B (the step is B's name).
    pub wait: Wait<'v>,
}

/// Why the VM refuses a move; [`MoveRefused::code`] is a stable word.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MoveRefused {
    /// `run-ended`: the run has ended.
    Ended {
        /// Its end status.
        status: RunStatus,
    },
    /// `held`: the run is held in `attention` (an unknown effect awaits an
    /// operator's recovery).
    Held {
        /// The held call step.
        step: String,
    },
    /// `cancel-requested`: a cancel was requested (with a call in flight,
    /// or the run follows an `onCancel` route).
    CancelRequested,
    /// `not-waiting`: the run is in a call (dispatched or looking up its
    /// receipt), not in a wait.
    NotWaiting {
        /// The call step.
        step: String,
    },
    /// `waiting-elsewhere`: the run waits at another step than the move's.
    WaitingElsewhere {
        /// The step it waits at.
        step: String,
    },
    /// `workflow-differs`: the two Programs are different workflows.
    WorkflowDiffers {
        /// A's workflow name.
        from: String,
        /// B's workflow name.
        to: String,
    },
    /// `not-a-wait`: the move's `from_step` is not a `wait-until` or
    /// `wait-for` step of A.
    NotAWait {
        /// The step named.
        step: String,
    },
    /// `target-missing`: B has no step `to_step`.
    TargetMissing {
        /// The target named.
        step: String,
    },
    /// `target-kind-differs`: B's target is of another kind than A's wait.
    TargetKindDiffers {
        /// A's wait kind.
        from: StepKind,
        /// B's step kind.
        to: StepKind,
    },
    /// `completion-differs`: B's `wait-for` awaits another completion.
    CompletionDiffers {
        /// A's completion name.
        from: String,
        /// B's completion name.
        to: String,
    },
    /// `wait-call-differs`: B's `wait-for` waits on another call step.
    WaitCallDiffers {
        /// A's call step.
        from: String,
        /// B's call step.
        to: String,
    },
    /// `wait-call-not-carried`: the call a `wait-for` waits on is not among
    /// the carried steps (the completion belongs to its accepted call).
    WaitCallNotCarried {
        /// The call step.
        step: String,
    },
    /// `carried-missing`: a carried step is not a `call` or `wait-for`
    /// step of B.
    CarriedMissing {
        /// The carried step.
        step: String,
    },
}

impl MoveRefused {
    /// The stable word of the refusal (`run-ended`, `held`,
    /// `cancel-requested`, `not-waiting`, `waiting-elsewhere`,
    /// `workflow-differs`, `not-a-wait`, `target-missing`,
    /// `target-kind-differs`, `completion-differs`, `wait-call-differs`,
    /// `wait-call-not-carried`, `carried-missing`).
    pub fn code(&self) -> &'static str {
        match self {
            MoveRefused::Ended { .. } => "run-ended",
            MoveRefused::Held { .. } => "held",
            MoveRefused::CancelRequested => "cancel-requested",
            MoveRefused::NotWaiting { .. } => "not-waiting",
            MoveRefused::WaitingElsewhere { .. } => "waiting-elsewhere",
            MoveRefused::WorkflowDiffers { .. } => "workflow-differs",
            MoveRefused::NotAWait { .. } => "not-a-wait",
            MoveRefused::TargetMissing { .. } => "target-missing",
            MoveRefused::TargetKindDiffers { .. } => "target-kind-differs",
            MoveRefused::CompletionDiffers { .. } => "completion-differs",
            MoveRefused::WaitCallDiffers { .. } => "wait-call-differs",
            MoveRefused::WaitCallNotCarried { .. } => "wait-call-not-carried",
            MoveRefused::CarriedMissing { .. } => "carried-missing",
        }
    }
}

impl std::fmt::Display for MoveRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MoveRefused::Ended { status } => {
                write!(f, "the run has ended ({})", status.as_str())
            }
            MoveRefused::Held { step } => write!(
                f,
                "the run is held in attention at call `{step}`; its effect must be settled first"
            ),
            MoveRefused::CancelRequested => write!(f, "a cancel was requested for the run"),
            MoveRefused::NotWaiting { step } => {
                write!(f, "the run is in call `{step}`, not in a wait")
            }
            MoveRefused::WaitingElsewhere { step } => write!(f, "the run waits at `{step}`"),
            MoveRefused::WorkflowDiffers { from, to } => {
                write!(f, "workflow `{to}` is not workflow `{from}`")
            }
            MoveRefused::NotAWait { step } => {
                write!(f, "`{step}` is not a wait-until or wait-for step")
            }
            MoveRefused::TargetMissing { step } => {
                write!(f, "the new revision has no step `{step}`")
            }
            MoveRefused::TargetKindDiffers { from, to } => {
                write!(f, "the target is a {to} step, the wait a {from} step")
            }
            MoveRefused::CompletionDiffers { from, to } => write!(
                f,
                "the target awaits completion `{to}`, the wait completion `{from}`"
            ),
            MoveRefused::WaitCallDiffers { from, to } => {
                write!(
                    f,
                    "the target waits on call `{to}`, the wait on call `{from}`"
                )
            }
            MoveRefused::WaitCallNotCarried { step } => {
                write!(f, "the call `{step}` the wait is on is not carried")
            }
            MoveRefused::CarriedMissing { step } => write!(
                f,
                "carried step `{step}` is not a call or wait-for step of the new revision"
            ),
        }
    }
}

impl std::error::Error for MoveRefused {}

/// The wait step `from_step` of `from`, by its kind: `wait-until` or
/// `wait-for`.
///
/// # Errors
/// [`MoveRefused::NotAWait`] when `from` has no such step, or it is of
/// another kind.
pub fn move_source(from: &Program, from_step: &str) -> Result<WaitKind, MoveRefused> {
    match from
        .step_id(from_step)
        .and_then(|id| from.step(id))
        .map(|s| &s.op)
    {
        Some(StepOp::WaitUntil { .. }) => Ok(WaitKind::Until),
        Some(StepOp::WaitFor { .. }) => Ok(WaitKind::For),
        _ => Err(MoveRefused::NotAWait {
            step: from_step.to_owned(),
        }),
    }
}

/// Whether a run waiting at `target.from_step` of `from` can be moved to
/// `target.to_step` of `to`, whatever its state: the same workflow, A's
/// step a wait, B's target of the same kind (a `wait-for`: the same
/// completion on the same, carried, call step), every carried step a
/// `call` or `wait-for` of B.
///
/// # Errors
/// The first [`MoveRefused`] found, in that order.
pub fn check_move_target(
    from: &Program,
    to: &Program,
    target: &MoveTarget,
) -> Result<(), MoveRefused> {
    if from.workflow != to.workflow {
        return Err(MoveRefused::WorkflowDiffers {
            from: from.workflow.clone(),
            to: to.workflow.clone(),
        });
    }
    move_source(from, &target.from_step)?;
    let ours = step_named(from, &target.from_step).ok_or_else(|| MoveRefused::NotAWait {
        step: target.from_step.clone(),
    })?;
    let theirs = step_named(to, &target.to_step).ok_or_else(|| MoveRefused::TargetMissing {
        step: target.to_step.clone(),
    })?;
    let (from_kind, to_kind) = (ours.op.kind(), theirs.op.kind());
    if from_kind != to_kind {
        return Err(MoveRefused::TargetKindDiffers {
            from: from_kind,
            to: to_kind,
        });
    }
    if let (
        StepOp::WaitFor {
            call: a_call,
            completion: a_completion,
            ..
        },
        StepOp::WaitFor {
            call: b_call,
            completion: b_completion,
            ..
        },
    ) = (&ours.op, &theirs.op)
    {
        if a_completion != b_completion {
            return Err(MoveRefused::CompletionDiffers {
                from: a_completion.clone(),
                to: b_completion.clone(),
            });
        }
        let a_call = name_of(from, *a_call);
        let b_call = name_of(to, *b_call);
        if a_call != b_call {
            return Err(MoveRefused::WaitCallDiffers {
                from: a_call.to_owned(),
                to: b_call.to_owned(),
            });
        }
        if !target.carried.iter().any(|c| c == a_call) {
            return Err(MoveRefused::WaitCallNotCarried {
                step: a_call.to_owned(),
            });
        }
    }
    for carried in &target.carried {
        let kind = step_named(to, carried).map(|s| s.op.kind());
        if !matches!(kind, Some(StepKind::Call | StepKind::WaitFor)) {
            return Err(MoveRefused::CarriedMissing {
                step: carried.clone(),
            });
        }
    }
    Ok(())
}

/// Moves a run waiting under `from` (revision A) to `to` (revision B):
/// the run must be `running` and waiting at `target.from_step`, and the
/// target must pass [`check_move_target`]. The moved state waits at
/// `target.to_step` with A's due instant (a `wait-until`'s instant, or the
/// deadline it waits for) or timeout (a `wait-for`), keeps only the
/// outputs and effects of `target.carried`, and keeps its path, input,
/// admission, deadline, `now`, elapsed seconds and status. The host keeps
/// the wait's timer (and a `wait-for`'s observation) as it is; the
/// deadline timer is unchanged too.
///
/// # Errors
/// [`MoveRefused`]: the run has ended, is held, has a cancel requested, is
/// in a call or waits elsewhere (checked in that order), or the target
/// refusals of [`check_move_target`].
pub fn move_waiting_run<'v>(
    from: &Vm,
    to: &'v Vm,
    state: &RunState,
    target: &MoveTarget,
) -> Result<Moved<'v>, MoveRefused> {
    let (a, b) = (from.program(), to.program());
    let (waiting_at, due_at) = waiting(a, state)?;
    if name_of(a, waiting_at) != target.from_step {
        return Err(MoveRefused::WaitingElsewhere {
            step: name_of(a, waiting_at).to_owned(),
        });
    }
    check_move_target(a, b, target)?;
    let to_id = b
        .step_id(&target.to_step)
        .ok_or_else(|| MoveRefused::TargetMissing {
            step: target.to_step.clone(),
        })?;
    let kind = move_source(a, &target.from_step)?;
    let mut moved = state.clone();
    moved.pending = Some(match kind {
        WaitKind::Until => Pending::Wake {
            step: to_id,
            at: due_at,
        },
        WaitKind::For => Pending::Completion {
            step: to_id,
            timeout_at: due_at,
        },
    });
    let kept = |name: &String| target.carried.contains(name);
    moved.outputs.retain(|name, _| kept(name));
    moved.effects.retain(|name, _| kept(name));
    Ok(Moved {
        state: moved,
        wait: Wait {
            step: name_of(b, to_id),
            kind,
            due_at,
        },
    })
}

/// The step a run waits at and when that wait is due, or why the run is
/// not waiting.
fn waiting(
    program: &Program,
    state: &RunState,
) -> Result<(StepId, coordinator_ir::instant::Instant), MoveRefused> {
    let call_step = |pending: &Option<Pending>| match pending {
        Some(Pending::Call { step, .. }) => name_of(program, *step).to_owned(),
        Some(Pending::Wake { .. } | Pending::Completion { .. }) | None => String::new(),
    };
    match state.status {
        RunStatus::Attention => {
            return Err(MoveRefused::Held {
                step: call_step(&state.pending),
            })
        }
        RunStatus::CancelRequested => return Err(MoveRefused::CancelRequested),
        RunStatus::Running => {}
        RunStatus::Finished
        | RunStatus::Failed
        | RunStatus::Expired
        | RunStatus::Cancelled
        | RunStatus::CancelledAfterEffect => {
            return Err(MoveRefused::Ended {
                status: state.status,
            })
        }
    }
    if state.cancel.is_some() {
        return Err(MoveRefused::CancelRequested);
    }
    match &state.pending {
        Some(Pending::Wake { step, at }) => Ok((*step, *at)),
        Some(Pending::Completion { step, timeout_at }) => Ok((*step, *timeout_at)),
        Some(Pending::Call { .. }) | None => Err(MoveRefused::NotWaiting {
            step: call_step(&state.pending),
        }),
    }
}

fn step_named<'p>(program: &'p Program, name: &str) -> Option<&'p Step> {
    program.step_id(name).and_then(|id| program.step(id))
}

fn name_of(program: &Program, id: StepId) -> &str {
    program.step(id).map(|s| s.name.as_str()).unwrap_or("")
}

#[cfg(test)]
mod tests;
