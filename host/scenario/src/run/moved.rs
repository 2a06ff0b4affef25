//! A case's move: as soon as its run waits at the move's step (no command
//! left to answer), the VM moves it to the revision of `move.project`, and
//! the host drives that revision from then on, on the same clock and
//! timers (the wait's instant or timeout is kept). What the VM did after
//! the move is not recorded for this workflow's coverage: those are the
//! other revision's steps; the move itself is ([`super::Exercised::moves`]).

use coordinator_source::Diagnostic;
use coordinator_vm::RunState;

use super::{CaseHost, End, MoveReport};
use crate::codes;

impl CaseHost<'_> {
    /// Moves the run when the case moves and the run now waits at the
    /// move's step; otherwise leaves it as it is.
    pub(super) fn move_when_waiting(
        &mut self,
        state: &mut RunState,
    ) -> Result<(), Vec<Diagnostic>> {
        let Some(m) = &self.case.move_to else {
            return Ok(());
        };
        let waits_there = self
            .vm
            .current_wait(state)
            .is_some_and(|w| w.step == m.step);
        if self.moved.is_some() || !waits_there {
            return Ok(());
        }
        let to = match self.targets.get(&m.project) {
            Some(Ok(vm)) => vm,
            Some(Err(reason)) => {
                return Err(self.fault(
                    codes::SCENARIO_MOVE_PROJECT,
                    "/move/project",
                    format!("the project `{}` cannot be moved to: {reason}", m.project),
                    "Point move.project at a project directory that `coordinatorctl check` accepts.",
                ))
            }
            None => {
                return Err(self.fault(
                    codes::SCENARIO_MOVE_PROJECT,
                    "/move/project",
                    format!("the project `{}` was not compiled for this run", m.project),
                    "Run the case with `coordinatorctl test`, which compiles the projects the cases move to.",
                ))
            }
        };
        let target = m.vm_target(self.vm.program(), to.program());
        let moved = coordinator_vm::move_waiting_run(self.vm, to, state, &target).map_err(|r| {
            self.fault(
                codes::SCENARIO_MOVE_REFUSED,
                "/move",
                format!(
                    "the run waiting at `{}` cannot move ({}): {r}",
                    m.step,
                    r.code()
                ),
                "Move the run to a step of the same kind and wait contract, or change the new revision.",
            )
        })?;
        *state = moved.state;
        self.vm = to;
        // A step of the new revision is a new call: the commands frozen
        // under the old one do not bind it.
        self.frozen.clear();
        self.exercised.moves.insert(m.step.clone());
        self.moved = Some(MoveReport {
            step: m.step.clone(),
            to: target.to_step,
            project: m.project.clone(),
            revision: self.targets.revision(&m.project).unwrap_or("").to_owned(),
        });
        Ok(())
    }

    /// A case with a `move` whose run ended (or settled) without ever
    /// waiting at the move's step is a fault.
    pub(super) fn check_moved(&self, end: &End) -> Result<(), Vec<Diagnostic>> {
        match (&self.case.move_to, &self.moved) {
            (Some(m), None) => {
                let state = super::end_state(end);
                Err(self.fault(
                    codes::SCENARIO_MOVE_NOT_REACHED,
                    "/move/step",
                    format!(
                        "the run never waits at `{}` (it went [{}] and stopped {}), so it never moves",
                        m.step,
                        state.path.join(", "),
                        super::scenario_state(end).0
                    ),
                    "Script the replies and times that bring the run to the wait, or name the wait it reaches.",
                ))
            }
            _ => Ok(()),
        }
    }
}
