//! The PostgreSQL [`RunCounts`]: doctor's and `/metrics`' counts, read in
//! time independent of the number of runs (docs/decisions.md "Doctor's and
//! `/metrics`' counts are kept by statement triggers").

use coordinator_ports::counts::{LiveCounts, RevisionLiveRuns, RunCounts};
use coordinator_ports::store::StoreError as PortError;
use sqlx::Row;

use super::errors::pdb;
use super::Store;

/// The counts of [`RunCounts`]: the sums of `run_counts` (kept by the
/// statements that change runs, `schema::count_routines`) and the dispatch
/// jobs counted through their own index (`jobs_dispatch`); one statement,
/// whose cost depends on neither the number of runs nor of other jobs.
#[async_trait::async_trait]
impl RunCounts for Store {
    async fn live_counts(&self) -> Result<LiveCounts, PortError> {
        let ns = &self.ns;
        let sums: Vec<String> = crate::schema::COUNTED
            .iter()
            .map(|(name, _)| format!("coalesce(sum({name}), 0)::bigint AS {name}"))
            .collect();
        let row = sqlx::query(&format!(
            "SELECT {sums},
                    (SELECT count(*) FROM {ns}.jobs
                      WHERE kind = 'dispatch' AND state = 'ready' AND lease_owner IS NULL) AS ready,
                    (SELECT count(*) FROM {ns}.jobs
                      WHERE kind = 'dispatch' AND state = 'ready' AND lease_owner IS NOT NULL) AS leased,
                    (SELECT count(*) FROM {ns}.jobs
                      WHERE kind = 'dispatch' AND state = 'sending') AS sending
               FROM {ns}.run_counts",
            sums = sums.join(", ")
        ))
        .fetch_one(&self.db)
        .await
        .map_err(pdb)?;
        let count = |name: &str| -> Result<u64, PortError> {
            let n: i64 = row.try_get(name).map_err(pdb)?;
            Ok(u64::try_from(n).unwrap_or(0))
        };
        Ok(LiveCounts {
            running: count("running")?,
            attention: count("attention")?,
            cancel_requested: count("cancel_requested")?,
            unknown_effects: count("unknown_effects")?,
            ended_unknown_effects: count("ended_unknown_effects")?,
            review_required: count("review_required")?,
            wait_until: count("wait_until")?,
            wait_for: count("wait_for")?,
            dispatch_ready: count("ready")?,
            dispatch_leased: count("leased")?,
            dispatch_sending: count("sending")?,
        })
    }

    /// The sums of `revision_counts` by revision (kept by the same
    /// statements, `schema::count_routines`): at most one row per revision
    /// and session slot is read, whatever the number of runs.
    async fn live_runs_by_revision(&self) -> Result<Vec<RevisionLiveRuns>, PortError> {
        let ns = &self.ns;
        let rows = sqlx::query(&format!(
            "SELECT min(workflow) AS workflow, revision, sum(live)::bigint AS live
               FROM {ns}.revision_counts GROUP BY revision HAVING sum(live) > 0
              ORDER BY min(workflow) COLLATE \"C\", revision COLLATE \"C\""
        ))
        .fetch_all(&self.db)
        .await
        .map_err(pdb)?;
        rows.iter()
            .map(|row| {
                let live: i64 = row.try_get("live").map_err(pdb)?;
                Ok(RevisionLiveRuns {
                    workflow: row.try_get("workflow").map_err(pdb)?,
                    revision: row.try_get("revision").map_err(pdb)?,
                    live: u64::try_from(live).unwrap_or(0),
                })
            })
            .collect()
    }
}
