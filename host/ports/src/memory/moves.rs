//! [`RunMoves`] for the in-memory store: the same rule as the PostgreSQL
//! store's one statement (host/store/src/runs/moves.rs).

use async_trait::async_trait;

use super::MemoryRunStore;
use crate::store::{JobKind, RunMove, RunMoves, StoreError};

#[async_trait]
impl RunMoves for MemoryRunStore {
    async fn commit_move(&self, run_move: &RunMove) -> Result<u64, StoreError> {
        let mut m = self.lock()?;
        if std::mem::take(&mut m.conflict_next_commit) {
            return Err(StoreError::Conflict);
        }
        let run = m
            .runs
            .get_mut(&run_move.run_id)
            .ok_or(StoreError::NotFound)?;
        if run.version != run_move.expected_version
            || run.revision != run_move.from_revision
            || run.payload_erased
            || run.status().is_terminal()
        {
            return Err(StoreError::Conflict);
        }
        run.revision = run_move.to_revision.clone();
        run.state = run_move.state.clone();
        run.ledger = run_move.ledger.clone();
        run.bindings = run_move.bindings.clone();
        run.version += 1;
        let version = run.version;
        for job in m.jobs.values_mut() {
            if job.run_id != run_move.run_id {
                continue;
            }
            if let JobKind::Observe { step, .. } = &mut job.kind {
                if *step == run_move.from_step {
                    step.clone_from(&run_move.to_step);
                }
            }
        }
        Ok(version)
    }
}
