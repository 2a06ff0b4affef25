//! Admission ([`RunAdmission`]): starts are written by the group
//! statement (`batch.rs`); here a start found again by its identity, and
//! the refusal an admission's checks name.

use async_trait::async_trait;
use coordinator_ports::store::{
    Admitted, Job, LeaseOnInsert, NewRun, RunAdmission, StoreError as PortError,
};
use sqlx::Row;

use super::batch;
use super::columns::RUN_COLUMNS;
use super::errors::{pdb, port};
use super::Store;
use crate::session::Transaction;

impl Store {
    /// The run admitted under `start_identity`, when the identity is spent:
    /// [`Admitted::Existing`] for the same request fingerprint, otherwise
    /// [`Admitted::Conflict`]; `None` while the identity is unspent.
    pub(super) async fn existing(
        &self,
        conn: &mut Transaction,
        start_identity: &str,
        fingerprint: &str,
    ) -> Result<Option<Admitted>, PortError> {
        let ns = &self.ns;
        // The spent key first, then the run: each statement reads its own
        // snapshot, and a run never exists without its spent key, so a
        // concurrent admission that commits between the two statements is
        // seen whole (the other order could see the key without the run).
        let spent: bool = sqlx::query(&format!(
            "SELECT EXISTS (SELECT 1 FROM {ns}.spent_keys WHERE kind = 'start' AND identity = $1)"
        ))
        .bind(start_identity)
        .fetch_one(conn.on())
        .await
        .map_err(pdb)?
        .try_get(0)
        .map_err(pdb)?;
        if !spent {
            return Ok(None);
        }
        let row = sqlx::query(&format!(
            "SELECT {RUN_COLUMNS} FROM {ns}.runs WHERE start_identity = $1"
        ))
        .bind(start_identity)
        .fetch_optional(conn.on())
        .await
        .map_err(pdb)?;
        Ok(Some(match row {
            Some(row) => {
                let stored: String = row.try_get("request_fingerprint").map_err(pdb)?;
                if stored == fingerprint {
                    Admitted::Existing(self.record(&row)?)
                } else {
                    Admitted::Conflict
                }
            }
            // A spent identity without its run row (retention keeps the row,
            // so only a damaged database) is never admitted again.
            None => Admitted::Conflict,
        }))
    }
}

/// What an admission statement read before it inserted anything.
pub(super) struct AdmissionChecks {
    /// The start identity was spent already.
    pub(super) spent: bool,
    /// The admission hold is in place.
    pub(super) held: bool,
    /// The first connection whose binding differs from the last apply's.
    pub(super) conflict: Option<String>,
    /// The activation generation is the one this store was opened under.
    pub(super) current: bool,
    /// The workflow's active revision.
    pub(super) active: Option<String>,
}

impl AdmissionChecks {
    /// The refusal of a start of `revision` that inserted nothing, in this
    /// order: admission hold, binding conflict, activation changed,
    /// revision not active; `None` when the identity was spent (or a
    /// concurrent admission of it won): its run is the answer.
    pub(super) fn refusal(self, revision: &str) -> Option<Admitted> {
        if self.spent {
            None
        } else if self.held {
            Some(Admitted::AdmissionHeld)
        } else if let Some(connection) = self.conflict {
            // A binding the last apply did not record: this process
            // serves another runtime file than the one applied.
            Some(Admitted::BindingConflict { connection })
        } else if !self.current {
            Some(Admitted::ActivationChanged)
        } else if self.active.as_deref() != Some(revision) {
            Some(Admitted::RevisionNotActive {
                active: self.active,
            })
        } else {
            None
        }
    }
}

#[async_trait]
impl RunAdmission for Store {
    async fn admit_batch(
        &self,
        runs: Vec<(NewRun, Option<LeaseOnInsert>)>,
    ) -> Vec<Result<(Admitted, Vec<Job>), PortError>> {
        batch::in_one_statement(&runs, |group| self.try_admit_batch(group)).await
    }

    async fn find_start(
        &self,
        start_identity: &str,
        request_digest: &str,
    ) -> Result<Option<Admitted>, PortError> {
        let mut conn = self.db.begin().await.map_err(port)?;
        self.existing(&mut conn, start_identity, request_digest)
            .await
    }
}
