//! The deployment's holds (restore hold, admission hold, execution
//! recovery, restore epoch; swapped as one compare-and-set) and the
//! survey and attestation of runs that need review ([`HoldsAndReviews`]).

use async_trait::async_trait;
use coordinator_ports::store::{
    Holds as EngineHolds, HoldsAndReviews, ReviewSurvey, StoreError as PortError,
};
use sqlx::Row;

use super::columns::{epoch_column, epoch_of};
use super::errors::pdb;
use super::Store;

#[async_trait]
impl HoldsAndReviews for Store {
    async fn holds(&self) -> Result<EngineHolds, PortError> {
        let row = sqlx::query(&format!(
            "SELECT restore_hold, admission_hold, execution_recovery_completed, restore_epoch
               FROM {}.deployment",
            self.ns
        ))
        .fetch_one(&self.db)
        .await
        .map_err(pdb)?;
        Ok(EngineHolds {
            restore: row.try_get(0).map_err(pdb)?,
            admission: row.try_get(1).map_err(pdb)?,
            execution_recovery_completed: row.try_get(2).map_err(pdb)?,
            restore_epoch: epoch_of(row.try_get(3).map_err(pdb)?)?,
        })
    }

    async fn swap_holds(
        &self,
        expected: &EngineHolds,
        next: &EngineHolds,
    ) -> Result<bool, PortError> {
        let done = sqlx::query(&format!(
            "UPDATE {}.deployment
                SET restore_hold = $4, admission_hold = $5,
                    execution_recovery_completed = $6, restore_epoch = $8
              WHERE restore_hold = $1 AND admission_hold = $2
                AND execution_recovery_completed = $3 AND restore_epoch = $7",
            self.ns
        ))
        .bind(expected.restore)
        .bind(expected.admission)
        .bind(expected.execution_recovery_completed)
        .bind(next.restore)
        .bind(next.admission)
        .bind(next.execution_recovery_completed)
        .bind(epoch_column(expected.restore_epoch))
        .bind(epoch_column(next.restore_epoch))
        .execute(&self.db)
        .await
        .map_err(pdb)?;
        Ok(done.rows_affected() == 1)
    }

    async fn review_survey(&self) -> Result<ReviewSurvey, PortError> {
        use coordinator_ports::counts::RunCounts;
        let counts = self.live_counts().await?;
        Ok(ReviewSurvey {
            review_required: counts.review_required,
            unknown_effects: counts.unknown_effects,
            ended_unknown_effects: counts.ended_unknown_effects,
        })
    }

    async fn attest_reviews(&self) -> Result<u64, PortError> {
        let done = sqlx::query(&format!(
            "UPDATE {}.runs SET review = 'attested' WHERE review = 'required'",
            self.ns
        ))
        .execute(&self.db)
        .await
        .map_err(pdb)?;
        Ok(done.rows_affected())
    }
}
