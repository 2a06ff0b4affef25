//! `POST /v1/runs/{run}/move`: a waiting run moved to the revision a move
//! certificate names (docs/decisions.md "Moving waiting runs"). The
//! certificate's proof is the compiler's; here the run is held to it: on
//! revision A, waiting at a wait the certificate says movable, the VM's
//! `move_waiting_run` translating the state, committed optimistic on the
//! run's version ([`RunMoves::commit_move`]).
//!
//! [`RunMoves::commit_move`]: coordinator_ports::store::RunMoves::commit_move

use coordinator_ir::carried::carried_steps;
use coordinator_ir::instant::Instant;
use coordinator_ir::moves::MoveCertificate;
use coordinator_ports::clock::whole_second;
use coordinator_ports::store::{MoveRecord, RunMove, RunRecord, StoreError};
use coordinator_runtime::binding;
use coordinator_vm::{move_waiting_run, MoveRefused, MoveTarget, RunState, Vm};

use super::Operator;

/// Why a move was refused; nothing changed.
#[derive(Debug)]
pub enum MoveError {
    /// No such run.
    NotFound,
    /// The certificate does not hold against the revisions this
    /// deployment has (`move.certificate-invalid`): revision A is not
    /// stored, or a wait it says movable does not fit B.
    CertificateInvalid(String),
    /// The certificate's revision B is not the active revision of its
    /// workflow in this process (`move.target-not-active`): `apply` B and
    /// restart the service on it first.
    TargetNotActive {
        /// This process's active revision of the workflow, if any.
        active: Option<String>,
    },
    /// The run is not on the certificate's revision A, or is of another
    /// workflow (`move.revision-differs`); a run moved already is on B.
    RevisionDiffers {
        /// The run's revision.
        revision: String,
    },
    /// The run is not waiting (`move.run-not-waiting`): ended, held in
    /// attention, in a call, a cancel requested (the VM's refusal, whose
    /// [`MoveRefused::code`] says which).
    NotWaiting(MoveRefused),
    /// The run waits at `step`, a wait the certificate refuses or lacks
    /// (`move.wait-refused`).
    WaitRefused {
        /// A's wait step.
        step: String,
    },
    /// The restore hold is in place (409 `execution.held`).
    ExecutionHeld,
    /// This instance runs `--recovery-only` (409 `execution.held`: it dispatches nothing and moves nothing).
    RecoveryOnly,
    /// The run was admitted under another binding of `connection` than
    /// this process's (409 `binding.live-conflict`).
    BindingChanged {
        /// The first such connection.
        connection: String,
    },
    /// The run changed between the read the move was decided on and its
    /// commit (409 `move.raced`): nothing was moved.
    Raced,
    /// The store failed.
    Store(StoreError),
}

impl From<StoreError> for MoveError {
    fn from(e: StoreError) -> Self {
        MoveError::Store(e)
    }
}

/// A move done: the run after it and the move as its ledger records it.
#[derive(Clone, Debug)]
pub struct MovedRun {
    /// The run on revision B.
    pub run: RunRecord,
    /// The move.
    pub record: MoveRecord,
}

impl Operator {
    /// Moves run `run_id` to `certificate`'s revision B (a certificate
    /// already read and its digest verified: `MoveCertificate::from_json`).
    ///
    /// # Errors
    /// [`MoveError`]: in this order, the run unknown, `--recovery-only`,
    /// the restore hold, B not active, A not stored, the run on another
    /// revision, not waiting, at a wait the certificate refuses, a target
    /// that does not fit, another binding, a race.
    pub async fn move_run(
        &self,
        run_id: &str,
        certificate: &MoveCertificate,
    ) -> Result<MovedRun, MoveError> {
        let started = self.parts.clock.now();
        let result = self.move_on(run_id, certificate, started).await;
        if let Ok(moved) = &result {
            self.parts
                .spans
                .trace_action(&moved.run, "move", &started, "applied");
        }
        result
    }

    /// [`Operator::move_run`] without its span, at `now`.
    async fn move_on(
        &self,
        run_id: &str,
        certificate: &MoveCertificate,
        now: Instant,
    ) -> Result<MovedRun, MoveError> {
        let run = self.get(run_id).await?.ok_or(MoveError::NotFound)?;
        self.may_move().await?;
        let programs = self.parts.committer.programs();
        let active = programs.active_revisions().get(&certificate.workflow);
        if active != Some(&certificate.to.revision) {
            return Err(MoveError::TargetNotActive {
                active: active.cloned(),
            });
        }
        let to = programs
            .load(&certificate.to.revision)
            .await?
            .ok_or(MoveError::TargetNotActive { active: None })?;
        let from = programs
            .load(&certificate.from.revision)
            .await?
            .ok_or_else(|| {
                MoveError::CertificateInvalid(format!(
                    "revision {} is not stored in this deployment",
                    certificate.from.revision
                ))
            })?;
        if certificate.from.revision == certificate.to.revision {
            return Err(MoveError::CertificateInvalid(
                "it moves runs to the revision they are on".into(),
            ));
        }
        if run.workflow != certificate.workflow || run.revision != certificate.from.revision {
            return Err(MoveError::RevisionDiffers {
                revision: run.revision,
            });
        }
        if run.payload_erased {
            return Err(MoveError::NotWaiting(MoveRefused::Ended {
                status: run.status(),
            }));
        }
        let (target, state) = moved_state(&from, &to, &run, certificate)?;
        if let Some(c) = binding::changed_connection(&run.bindings, &self.parts.connections) {
            return Err(MoveError::BindingChanged {
                connection: c.to_owned(),
            });
        }
        let record = MoveRecord {
            at: whole_second(&now),
            from_revision: run.revision.clone(),
            to_revision: certificate.to.revision.clone(),
            from_step: target.from_step.clone(),
            to_step: target.to_step.clone(),
            certificate: certificate.digest.clone(),
        };
        let mut ledger = run.ledger.clone();
        // A run moved before its first commit keeps its admission's step
        // times, as every commit records them.
        crate::timeline::record_admission(&from, &run.state, &mut ledger);
        ledger
            .entry(target.from_step.clone())
            .or_default()
            .moves
            .push(record.clone());
        let run_move = RunMove {
            run_id: run.id.clone(),
            at: now,
            expected_version: run.version,
            from_revision: run.revision.clone(),
            to_revision: certificate.to.revision.clone(),
            from_step: target.from_step,
            to_step: target.to_step,
            state,
            ledger,
            bindings: binding::binding_digests(&self.parts.connections, &to.program().connections),
        };
        let version = self
            .ports
            .moves
            .commit_move(&run_move)
            .await
            .map_err(|e| match e {
                StoreError::Conflict => MoveError::Raced,
                other => MoveError::Store(self.parts.fence.count_outage(other)),
            })?;
        tracing::info!(run = %run.id, from = %record.from_step, to = %record.to_step, "run moved");
        let mut after = run;
        after.revision = run_move.to_revision;
        after.state = run_move.state;
        after.ledger = run_move.ledger;
        after.bindings = run_move.bindings;
        after.version = version;
        Ok(MovedRun { run: after, record })
    }

    /// Whether this process may move runs now: not `--recovery-only`, not
    /// under the restore hold, under the store's restore epoch.
    async fn may_move(&self) -> Result<(), MoveError> {
        let holds = self
            .ports
            .holds
            .holds()
            .await
            .map_err(|e| self.parts.fence.count_outage(e))?;
        let Some(process) = self.parts.committer.leases().lease_epoch().await? else {
            return Err(MoveError::RecoveryOnly);
        };
        // The hold says more than the epoch it moved: answered first.
        if holds.restore {
            return Err(MoveError::ExecutionHeld);
        }
        if process != holds.restore_epoch {
            return Err(MoveError::Store(self.parts.fence.fence_if_incompatible(
                StoreError::LeaseIncompatible {
                    process,
                    store: holds.restore_epoch,
                },
            )));
        }
        Ok(())
    }
}

/// The run's state moved from `from` (A) to `to` (B) at the wait it is
/// in, by `certificate`'s verdict on that wait, and the move's target.
///
/// # Errors
/// [`MoveError::NotWaiting`] (the VM's refusal of the run's state),
/// [`MoveError::WaitRefused`] (the certificate refuses or lacks the
/// wait), [`MoveError::CertificateInvalid`] (a certified target the VM
/// finds does not fit B).
fn moved_state(
    from: &Vm,
    to: &Vm,
    run: &RunRecord,
    certificate: &MoveCertificate,
) -> Result<(MoveTarget, RunState), MoveError> {
    let from_step = from
        .current_wait(&run.state)
        .map(|w| w.step.to_owned())
        .unwrap_or_default();
    let verdict = certificate.wait(&from_step);
    let target = MoveTarget {
        from_step: from_step.clone(),
        to_step: verdict.map_or_else(|| from_step.clone(), |v| v.to.clone()),
        carried: verdict.map(|v| v.carried.clone()).unwrap_or_default(),
    };
    let moved = move_waiting_run(from, to, &run.state, &target);
    if let Err(
        refused @ (MoveRefused::Ended { .. }
        | MoveRefused::Held { .. }
        | MoveRefused::CancelRequested
        | MoveRefused::NotWaiting { .. }),
    ) = moved
    {
        return Err(MoveError::NotWaiting(refused));
    }
    if !verdict.is_some_and(|v| v.movable) {
        return Err(MoveError::WaitRefused { step: from_step });
    }
    // The steps kept are the one rule's over the two Programs this process
    // holds, never the certificate's word alone.
    let carried = carried_steps(from.program(), to.program(), &from_step);
    if target.carried != carried {
        return Err(MoveError::CertificateInvalid(format!(
            "its steps carried from wait `{from_step}` ({}) are not the ones the two revisions carry ({})",
            target.carried.join(", "),
            carried.join(", ")
        )));
    }
    let state = moved
        .map_err(|e| {
            MoveError::CertificateInvalid(format!(
                "wait `{from_step}` is certified movable, but {e}"
            ))
        })?
        .state;
    Ok((target, state))
}
