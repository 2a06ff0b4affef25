//! The job queue ([`JobQueue`]): the lease statement (due deadlines made
//! timer jobs, due jobs leased under the restore epoch), the next due
//! time, a job released, discarded or brought forward, and the restored
//! commands claimed. Commits and `sending` marks are group statements
//! (`batch.rs`).

use async_trait::async_trait;
use coordinator_ir::instant::Instant;
use coordinator_ports::store::{
    Commit, Committed, Job, JobKind, JobQueue, LeaseOnInsert, LeaseRequest, StoreError as PortError,
};
use sqlx::Row;
use time::OffsetDateTime;

use super::batch;
use super::columns::{at_instant, epoch_column, epoch_of, instant_of};
use super::errors::{pdb, port, tampered};
use super::new_jobs::job_row;
use super::Store;

impl Store {
    /// Runs `sql` (with `{ns}` for the namespace, `$1` the job id, `$2` the
    /// lease owner) on one job this worker holds.
    ///
    /// # Errors
    /// [`PortError::LeaseLost`] unless exactly one row was touched (the
    /// lease passed to another worker, or the job is gone); database errors.
    async fn on_leased_job(&self, sql: &str, job_id: u64, owner: &str) -> Result<(), PortError> {
        let done = sqlx::query(&crate::schema::in_namespace(sql, &self.ns))
            .bind(i64::try_from(job_id).unwrap_or(-1))
            .bind(owner)
            .execute(&self.db)
            .await
            .map_err(pdb)?;
        if done.rows_affected() == 1 {
            Ok(())
        } else {
            Err(PortError::LeaseLost)
        }
    }
}

#[async_trait]
impl JobQueue for Store {
    async fn lease(&self, request: &LeaseRequest<'_>) -> Result<Vec<Job>, PortError> {
        let ns = &self.ns;
        let limit = i64::try_from(request.limit.clamp(1, 1000)).unwrap_or(1000);
        // One statement: the deployment row (holds, epoch), the deadlines
        // that came due (each run's timer job created once, from
        // `runs.deadline_at`, leased at once when timers may be leased) and
        // the leased jobs, at most `limit` in all. The LEFT JOIN keeps the
        // deployment row when no job is leased, so a stale epoch is always
        // seen; a stale epoch creates and leases nothing. Under the restore
        // hold, without an epoch, or when asked, only receipt lookups
        // (reads) are leased. `deadline_at` holds whole seconds rounded up
        // (`coordinator_ports::clock::due_unix`), so the timer never fires before the
        // deadline.
        let rows = sqlx::query(&format!(
            "WITH d AS (SELECT restore_hold, restore_epoch,
                               NOT ($7 OR $5::bigint IS NULL OR restore_hold) AS timers
                          FROM {ns}.deployment),
             due_deadlines AS (
               UPDATE {ns}.runs r SET deadline_job_created = true
                 FROM (SELECT run_id FROM {ns}.runs
                        WHERE NOT ended AND NOT deadline_job_created AND deadline_at <= $1
                          AND ($5::bigint IS NULL OR $5 = (SELECT restore_epoch FROM d))
                          AND ($6::text IS NULL OR run_id = $6)
                        ORDER BY deadline_at LIMIT $4 FOR UPDATE SKIP LOCKED) s
                WHERE r.run_id = s.run_id
            RETURNING r.run_id, r.deadline_at),
             deadline_jobs AS (
               INSERT INTO {ns}.jobs (run_id, kind, state, due_at, detail, lease_owner,
                                      lease_expires_at)
               SELECT x.run_id, 'timer', 'ready', x.deadline_at,
                      jsonb_build_object('kind', 'timer', 'wake', 'deadline', 'at',
                        to_char(x.deadline_at AT TIME ZONE 'UTC',
                                'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')),
                      CASE WHEN d.timers THEN $2 END,
                      CASE WHEN d.timers THEN $3::timestamptz END
                 FROM due_deadlines x, d
            RETURNING job_id, run_id, kind, step, state, due_at, lease_owner,
                      lease_expires_at, detail::text AS detail, sealed_command),
             leased AS (
               UPDATE {ns}.jobs j SET lease_owner = $2, lease_expires_at = $3
                 FROM (SELECT job_id FROM {ns}.jobs
                        WHERE due_at <= $1 AND (lease_expires_at IS NULL OR lease_expires_at <= $1)
                          AND ($5::bigint IS NULL OR $5 = (SELECT restore_epoch FROM d))
                          AND (kind = 'lookup-receipt' OR (SELECT timers FROM d))
                          AND ($6::text IS NULL OR run_id = $6)
                        ORDER BY due_at, job_id
                        LIMIT greatest($4 - (SELECT count(*) FROM deadline_jobs
                                              WHERE lease_owner IS NOT NULL), 0)
                        FOR UPDATE SKIP LOCKED) s
                WHERE j.job_id = s.job_id
            RETURNING j.job_id, j.run_id, j.kind, j.step, j.state, j.due_at, j.lease_owner,
                      j.lease_expires_at, j.detail::text AS detail, j.sealed_command)
             SELECT d.restore_epoch AS store_epoch, l.* FROM d LEFT JOIN (
               SELECT * FROM leased
               UNION ALL SELECT * FROM deadline_jobs WHERE lease_owner IS NOT NULL) l ON true"
        ))
        .bind(at_instant(&request.now))
        .bind(request.owner)
        .bind(at_instant(&request.lease_until))
        .bind(limit)
        .bind(request.epoch.map(epoch_column))
        .bind(request.run_id)
        .bind(request.receipt_lookups_only)
        .fetch_all(&self.db)
        .await
        .map_err(pdb)?;
        let Some(first) = rows.first() else {
            return Err(tampered("the deployment row is missing"));
        };
        let store = epoch_of(first.try_get("store_epoch").map_err(pdb)?)?;
        if let Some(process) = request.epoch {
            if process != store {
                return Err(PortError::LeaseIncompatible { process, store });
            }
        }
        let mut jobs = Vec::with_capacity(rows.len());
        for row in &rows {
            let id: Option<i64> = row.try_get("job_id").map_err(pdb)?;
            if id.is_some() {
                jobs.push(self.job(row)?);
            }
        }
        jobs.sort_by_key(|j| (j.due_at, j.id));
        Ok(jobs)
    }

    async fn next_due(&self) -> Result<Option<Instant>, PortError> {
        // The due-time index in order, skipping the (few) leased jobs, and
        // the earliest deadline not yet a job (`runs_deadline_due`).
        let due: Option<OffsetDateTime> = sqlx::query_scalar(&format!(
            "SELECT least(
               (SELECT due_at FROM {ns}.jobs WHERE lease_expires_at IS NULL
                 ORDER BY due_at, job_id LIMIT 1),
               (SELECT deadline_at FROM {ns}.runs WHERE NOT ended AND NOT deadline_job_created
                 ORDER BY deadline_at LIMIT 1))",
            ns = self.ns
        ))
        .fetch_one(&self.db)
        .await
        .map_err(pdb)?;
        Ok(due.map(instant_of))
    }

    async fn mark_sending_batch(
        &self,
        jobs: Vec<(u64, String, u64)>,
    ) -> Vec<Result<(), PortError>> {
        self.mark_sending_in_one_statement(jobs).await
    }

    async fn commit_batch(
        &self,
        commits: Vec<(Commit, Option<LeaseOnInsert>)>,
    ) -> Vec<Result<Committed, PortError>> {
        batch::in_one_statement(&commits, |group| self.try_commit_batch(group)).await
    }

    async fn release(
        &self,
        job_id: u64,
        owner: &str,
        due: Instant,
        kind: Option<JobKind>,
    ) -> Result<(), PortError> {
        let ns = &self.ns;
        let job_id = i64::try_from(job_id).unwrap_or(-1);
        let mut tx = self.db.begin().await.map_err(port)?;
        let run_id: Option<String> = sqlx::query(&format!(
            "SELECT run_id FROM {ns}.jobs WHERE job_id = $1 AND lease_owner = $2 FOR UPDATE"
        ))
        .bind(job_id)
        .bind(owner)
        .fetch_optional(tx.on())
        .await
        .map_err(pdb)?
        .map(|r| r.try_get(0))
        .transpose()
        .map_err(pdb)?;
        let Some(run_id) = run_id else {
            return Err(PortError::LeaseLost);
        };
        sqlx::query(&format!(
            "UPDATE {ns}.jobs SET state = 'ready', lease_owner = NULL, lease_expires_at = NULL,
                due_at = $2 WHERE job_id = $1"
        ))
        .bind(job_id)
        .bind(at_instant(&due))
        .execute(tx.on())
        .await
        .map_err(pdb)?;
        if let Some(kind) = kind {
            let row = job_row(&kind);
            let (sealed, key_version) = self.sealed_command(&run_id, &row);
            sqlx::query(&format!(
                "UPDATE {ns}.jobs SET kind = $2, step = $3, detail = $4::jsonb,
                    review_request_id = $5, idempotency_key = $6, key_version = $7,
                    sealed_command = $8
                  WHERE job_id = $1"
            ))
            .bind(job_id)
            .bind(row.kind)
            .bind(&row.step)
            .bind(&row.detail)
            .bind(&row.review_request_id)
            .bind(&row.idempotency_key)
            .bind(key_version)
            .bind(sealed)
            .execute(tx.on())
            .await
            .map_err(pdb)?;
        }
        tx.commit().await.map_err(port)
    }

    async fn discard(&self, job_id: u64, owner: &str) -> Result<(), PortError> {
        self.on_leased_job(
            "DELETE FROM {ns}.jobs WHERE job_id = $1 AND lease_owner = $2",
            job_id,
            owner,
        )
        .await
    }

    async fn claim_restored_commands(
        &self,
        owner: &str,
        lease_until: Instant,
        limit: usize,
    ) -> Result<Vec<Job>, PortError> {
        let ns = &self.ns;
        let limit = i64::try_from(limit.clamp(1, 1000)).unwrap_or(1000);
        // Waits for a worker that is marking one `sending` (no SKIP
        // LOCKED): every such job is taken, whoever leased it.
        let rows = sqlx::query(&format!(
            "UPDATE {ns}.jobs j SET lease_owner = $1, lease_expires_at = $2
               FROM (SELECT job_id FROM {ns}.jobs
                      WHERE kind = 'dispatch' AND NOT (detail->>'resendSafe')::boolean
                      ORDER BY job_id LIMIT $3 FOR UPDATE) s
              WHERE j.job_id = s.job_id
          RETURNING j.job_id, j.run_id, j.kind, j.step, j.state, j.due_at, j.lease_owner,
                    j.lease_expires_at, j.detail::text AS detail, j.sealed_command"
        ))
        .bind(owner)
        .bind(at_instant(&lease_until))
        .bind(limit)
        .fetch_all(&self.db)
        .await
        .map_err(pdb)?;
        let mut jobs = rows
            .iter()
            .map(|r| self.job(r))
            .collect::<Result<Vec<_>, _>>()?;
        jobs.sort_by_key(|j| j.id);
        Ok(jobs)
    }

    async fn bring_run_forward(&self, run_id: &str, now: Instant) -> Result<usize, PortError> {
        let done = sqlx::query(&format!(
            "UPDATE {ns}.jobs SET due_at = $2
              WHERE run_id = $1 AND kind = 'dispatch' AND state = 'ready'
                AND lease_owner IS NULL AND due_at > $2",
            ns = self.ns
        ))
        .bind(run_id)
        .bind(at_instant(&now))
        .execute(&self.db)
        .await
        .map_err(pdb)?;
        Ok(usize::try_from(done.rows_affected()).unwrap_or(0))
    }

    async fn bring_forward(
        &self,
        review_request_id: &str,
        now: Instant,
        floor_seconds: i64,
    ) -> Result<usize, PortError> {
        let done = sqlx::query(&format!(
            "WITH t AS (
               SELECT job_id, GREATEST($2::timestamptz,
                        COALESCE(to_timestamp((detail->>'lastObservedUnix')::bigint + $3),
                                 $2::timestamptz)) AS earliest
                 FROM {ns}.jobs WHERE kind = 'observe' AND review_request_id = $1)
             UPDATE {ns}.jobs j SET due_at = t.earliest FROM t
              WHERE j.job_id = t.job_id AND j.due_at > t.earliest",
            ns = self.ns
        ))
        .bind(review_request_id)
        .bind(at_instant(&now))
        .bind(floor_seconds)
        .execute(&self.db)
        .await
        .map_err(pdb)?;
        Ok(usize::try_from(done.rows_affected()).unwrap_or(0))
    }
}
