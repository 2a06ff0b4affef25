//! The restore sequence of seed 000 "Restore from a backup" on the engine:
//! the restore and admission holds, the review of restored prepared
//! commands, and the attestations (docs/operations.md "Restore from a
//! backup"). The server's operator routes only translate HTTP to these
//! calls; every refusal rule of the sequence lives here.
//!
//! - Placing the restore hold moves the restore epoch ([`Holds::restore_epoch`]),
//!   so no process that started before it leases again, and holds back
//!   every prepared command of a mutation or evaluation that is `ready` or
//!   `sending` (`Operator::hold_back_restored_commands`): each is answered
//!   `uncertain` ([`RESTORED`]), so the run waits in `attention` with an
//!   `unknown` effect and review [`Review::Required`]. Such a command is
//!   never dispatched by itself again: `reconcile`, `cancel`, or the
//!   attestation and then `retry-same` settle it.
//! - Releasing the restore hold is refused while a live run needs review
//!   (`restore.review-required`) or holds an unknown effect
//!   (`restore.unresolved`), unless `complete-execution-recovery` attested
//!   the history (the runs needing review are then recorded
//!   [`Review::Attested`]).

use coordinator_vm::{Answer, Event};

use super::Operator;
use crate::committer::{Fed, Feeding};
use crate::config::RESTORED;
use coordinator_ports::store::{Holds, JobKind, JobState, Review, StepLedger, StoreError};

/// Jobs one round of `Operator::hold_back_restored_commands` claims.
const HOLD_BACK_BATCH: usize = 100;

/// Why a step of the restore sequence was refused (409, seed 000 "Codes
/// you see").
#[derive(Debug)]
pub enum HoldError {
    /// `restore.hold-required`: the hold this step needs is not in place;
    /// the text says which.
    HoldRequired(&'static str),
    /// `restore.review-required`: this many live runs hold a restored
    /// prepared command that no operator reviewed yet.
    ReviewRequired {
        /// Runs needing review.
        runs: u64,
    },
    /// `restore.unresolved`: held work is unresolved (the text says what).
    Unresolved(String),
    /// The store failed.
    Store(StoreError),
}

impl From<StoreError> for HoldError {
    fn from(e: StoreError) -> Self {
        HoldError::Store(e)
    }
}

impl HoldError {
    /// The problem code (`restore.hold-required`, `restore.review-required`,
    /// `restore.unresolved`); `None` for a store failure.
    pub fn code(&self) -> Option<&'static str> {
        match self {
            HoldError::HoldRequired(_) => Some("restore.hold-required"),
            HoldError::ReviewRequired { .. } => Some("restore.review-required"),
            HoldError::Unresolved(_) => Some("restore.unresolved"),
            HoldError::Store(_) => None,
        }
    }

    /// What to do, for the problem's `detail` (no run id, no personal data).
    pub fn detail(&self) -> String {
        match self {
            HoldError::HoldRequired(what) => (*what).to_owned(),
            HoldError::ReviewRequired { runs } => format!(
                "{runs} run(s) hold a restored prepared command that may have been sent after the backup: `list --attention true`, then reconcile or cancel each, or attest with complete-execution-recovery"
            ),
            HoldError::Unresolved(what) => what.clone(),
            HoldError::Store(e) => e.to_string(),
        }
    }
}

impl Operator {
    /// The deployment-wide holds, read from the store (every process on
    /// the database obeys the same holds).
    ///
    /// # Errors
    /// The store's.
    pub async fn holds(&self) -> Result<Holds, StoreError> {
        self.ports.holds.holds().await
    }

    /// Changes the holds: `change` sees the current holds and either
    /// changes them or refuses; the change is stored only if no other
    /// process changed them meanwhile (else `change` runs again on the
    /// new holds). Returns the holds after.
    ///
    /// # Errors
    /// The refusal `change` returns, or the store's.
    pub async fn update_holds<E: From<StoreError>>(
        &self,
        change: impl Fn(&mut Holds) -> Result<(), E>,
    ) -> Result<Holds, E> {
        loop {
            let current = self.ports.holds.holds().await?;
            let mut next = current.clone();
            change(&mut next)?;
            if next == current || self.ports.holds.swap_holds(&current, &next).await? {
                return Ok(next);
            }
        }
    }

    /// `restore-hold`: places the restore hold and the admission hold. A
    /// new placement moves the restore epoch and clears the attestation.
    /// Then holds back every restored prepared command (also when the hold
    /// was in place already, so a placement that stopped half way is
    /// finished by placing it again). Returns the holds after and how many
    /// prepared commands this call held back.
    ///
    /// # Errors
    /// The store's.
    pub async fn place_restore_hold(&self) -> Result<(Holds, u64), HoldError> {
        let holds = self
            .update_holds(|h: &mut Holds| {
                if !h.restore {
                    h.execution_recovery_completed = false;
                    h.restore_epoch = h.restore_epoch.saturating_add(1);
                }
                h.restore = true;
                h.admission = true;
                Ok::<(), HoldError>(())
            })
            .await?;
        let held_back = self.hold_back_restored_commands().await?;
        tracing::warn!(
            action = "restore-hold",
            restore_epoch = holds.restore_epoch,
            held_back,
            "restore hold placed"
        );
        Ok((holds, held_back))
    }

    /// `complete-execution-recovery`: the operator attests the execution
    /// history; only under the restore hold.
    ///
    /// # Errors
    /// [`HoldError::HoldRequired`] without the restore hold; the store's.
    pub async fn complete_execution_recovery(&self) -> Result<Holds, HoldError> {
        self.update_holds(|h: &mut Holds| {
            if !h.restore {
                return Err(HoldError::HoldRequired(
                    "place the restore hold first (restore-hold)",
                ));
            }
            h.execution_recovery_completed = true;
            Ok(())
        })
        .await
    }

    /// `release-restore-hold`: refused while a live run needs review or
    /// holds an unknown effect, unless execution recovery was attested (then
    /// every run needing review is recorded [`Review::Attested`]). Holds
    /// back any restored prepared command a placement left first.
    ///
    /// # Errors
    /// [`HoldError::HoldRequired`], [`HoldError::ReviewRequired`],
    /// [`HoldError::Unresolved`]; the store's.
    pub async fn release_restore_hold(&self) -> Result<Holds, HoldError> {
        let current = self.ports.holds.holds().await?;
        if !current.restore {
            return Err(HoldError::HoldRequired("the restore hold is not in place"));
        }
        self.hold_back_restored_commands().await?;
        let survey = self.ports.holds.review_survey().await?;
        if current.execution_recovery_completed {
            self.ports.holds.attest_reviews().await?;
        }
        let holds = self
            .update_holds(|h: &mut Holds| {
                if !h.restore {
                    return Err(HoldError::HoldRequired("the restore hold is not in place"));
                }
                if !h.execution_recovery_completed {
                    if survey.review_required > 0 {
                        return Err(HoldError::ReviewRequired {
                            runs: survey.review_required,
                        });
                    }
                    if survey.unknown_effects > 0 {
                        return Err(HoldError::Unresolved(format!(
                            "{} held run(s) hold an unknown effect: reconcile them, or attest with complete-execution-recovery",
                            survey.unknown_effects
                        )));
                    }
                }
                h.restore = false;
                h.execution_recovery_completed = false;
                Ok(())
            })
            .await?;
        tracing::warn!(action = "release-restore-hold", "restore hold released");
        Ok(holds)
    }

    /// `release-admission-hold`: only once the restore hold is released.
    ///
    /// # Errors
    /// [`HoldError::HoldRequired`] without the admission hold,
    /// [`HoldError::Unresolved`] while the restore hold is in place; the
    /// store's.
    pub async fn release_admission_hold(&self) -> Result<Holds, HoldError> {
        let holds = self
            .update_holds(|h: &mut Holds| {
                if !h.admission {
                    return Err(HoldError::HoldRequired(
                        "the admission hold is not in place",
                    ));
                }
                if h.restore {
                    return Err(HoldError::Unresolved(
                        "release the restore hold first (release-restore-hold)".into(),
                    ));
                }
                h.admission = false;
                Ok(())
            })
            .await?;
        tracing::warn!(action = "release-admission-hold", "admission hold released");
        Ok(holds)
    }

    /// Holds back every prepared command of a mutation or evaluation that
    /// is `ready` or `sending` (the restore hold must be in place): each is
    /// answered `uncertain` with code [`RESTORED`] through the VM, which
    /// holds the run in `attention` with an `unknown` effect; the run's
    /// review becomes [`Review::Required`] and the step's ledger says
    /// `restored`. Commands of reads are left: resending a read is safe.
    /// Returns how many were held back.
    ///
    /// # Errors
    /// The store's.
    async fn hold_back_restored_commands(&self) -> Result<u64, StoreError> {
        let leases = self.parts.committer.leases();
        let owner = leases.owner().to_owned();
        let mut held_back = 0;
        loop {
            let lease_until = leases.lease_until(&self.parts.clock.now());
            let jobs = self
                .ports
                .queue
                .claim_restored_commands(&owner, lease_until, HOLD_BACK_BATCH)
                .await?;
            let claimed = jobs.len();
            for job in jobs {
                let JobKind::Dispatch { dispatch, .. } = &job.kind else {
                    continue;
                };
                let step = &dispatch.step;
                // A `sending` job's attempt was started (its request may
                // have left): inspection counts it.
                let started = (job.state == JobState::Sending).then_some(dispatch.attempt);
                let run = match self.ports.runs.get(&job.run_id).await? {
                    Some(r) if !r.status().is_terminal() => r,
                    _ => {
                        self.ports.queue.discard(job.id, &owner).await?;
                        continue;
                    }
                };
                let event = Event::CallAnswered {
                    step: step.clone(),
                    answer: Answer::Uncertain {
                        code: RESTORED.to_owned(),
                    },
                };
                let mark = |l: &mut std::collections::BTreeMap<String, StepLedger>| {
                    let entry = l.entry(step.clone()).or_default();
                    entry.restored = true;
                    if let Some(attempt) = started {
                        entry.attempts = entry.attempts.max(attempt);
                    }
                };
                let fed = self
                    .parts
                    .committer
                    .feed(
                        run,
                        &event,
                        self.parts.clock.now(),
                        Feeding {
                            ledger: Some(&mark),
                            review: Some(Review::Required),
                            ..Feeding::completing(job.id)
                        },
                    )
                    .await?;
                if let Fed::Applied(r) = fed {
                    tracing::warn!(run = %r.id, step = %step, "restored prepared command held for review");
                    held_back += 1;
                }
            }
            if claimed < HOLD_BACK_BATCH {
                return Ok(held_back);
            }
        }
    }
}
