//! The group commit: one statement for the commits of several runs, each
//! row fenced by its run's version and its completed job's lease
//! ([`JobQueue::commit_batch`]).
//!
//! [`JobQueue::commit_batch`]: coordinator_ports::store::JobQueue::commit_batch

use std::collections::HashMap;
use std::convert::Infallible;

use coordinator_ports::store::{Commit, Committed, LeaseOnInsert, Review, StoreError as PortError};
use sqlx::postgres::PgRow;
use sqlx::Row;
use time::OffsetDateTime;

use super::inserted_jobs::{new_jobs_sql, LEASED_COLUMNS, LEASED_NONE};
use super::{columns_of, GroupAnswer, GroupQuery, ItemColumns, StateColumns};
use crate::runs::columns::at_instant;
use crate::runs::errors::{erased, port};
use crate::runs::Store;

impl Store {
    /// One statement for every commit of the batch (arrays unnested, each
    /// row fenced by its run's version and its completed job's lease),
    /// answered in order as [`JobQueue::commit_batch`] says.
    ///
    /// [`JobQueue::commit_batch`]: coordinator_ports::store::JobQueue::commit_batch
    pub(in crate::runs) async fn try_commit_batch(
        &self,
        commits: &[(Commit, Option<LeaseOnInsert>)],
    ) -> Result<Vec<Result<Committed, PortError>>, sqlx::Error> {
        let prepared = self.prepare_group(commits);
        let columns: CommitColumns<'_> = columns_of(self, &prepared);
        let sql = commit_statement(&self.ns);
        let query = columns.bind(sqlx::query(&sql), self.keyring.active_version() as i32);
        let rows = columns.state.fetch(self, query).await?;
        // The updated runs (by k, their new version) and the jobs leased on
        // insert (by run).
        let answers = GroupAnswer::read(&rows, updated_version)?.in_order(&prepared);
        // Why each commit that changed nothing was refused, read at once.
        let refused: Vec<&str> = prepared
            .iter()
            .zip(&answers)
            .filter(|(_, answer)| answer.is_err())
            .map(|(p, _)| p.item.run_id.as_str())
            .collect();
        let found = self.refused_commits(&refused).await?;
        Ok(prepared
            .iter()
            .zip(answers)
            .map(|(p, answer)| match answer {
                Ok((version, leased)) => Ok(Committed {
                    version: u64::try_from(version).unwrap_or(0),
                    leased,
                }),
                Err(_) => Err(commit_refusal(p.item, found.get(p.item.run_id.as_str()))),
            })
            .collect())
    }

    /// The version of each of `run_ids` (commits that changed nothing) and
    /// whether retention erased its payloads; a run not found is absent.
    async fn refused_commits(
        &self,
        run_ids: &[&str],
    ) -> Result<HashMap<String, (i64, bool)>, sqlx::Error> {
        let mut found = HashMap::new();
        if run_ids.is_empty() {
            return Ok(found);
        }
        let ns = &self.ns;
        let sql = format!(
            "SELECT run_id, version, payload_erased_at IS NOT NULL AS erased
                   FROM {ns}.runs WHERE run_id = ANY($1)"
        );
        for row in sqlx::query(&sql).bind(run_ids).fetch_all(&self.db).await? {
            found.insert(
                row.try_get("run_id")?,
                (row.try_get("version")?, row.try_get("erased")?),
            );
        }
        Ok(found)
    }
}

/// An updated run's row of the group commit: its new version (a commit
/// that changed nothing has no row).
fn updated_version(row: &PgRow) -> Result<Result<i64, Infallible>, sqlx::Error> {
    Ok(Ok(row.try_get("version")?))
}

/// Why `commit` changed nothing, from its run as read after the statement
/// (`found`: its version and whether it was erased): not found, erased,
/// another version (a conflict), or the completed job's lease lost.
fn commit_refusal(commit: &Commit, found: Option<&(i64, bool)>) -> PortError {
    match found {
        None => PortError::NotFound,
        Some((_, true)) => port(erased(&commit.run_id)),
        Some((now, false)) if u64::try_from(*now).ok() != Some(commit.expected_version) => {
            PortError::Conflict
        }
        Some(_) => PortError::LeaseLost,
    }
}

/// The runs' columns of a group commit, one array element per commit
/// (ordinal k from 1), beside those written from their states.
#[derive(Default)]
struct CommitColumns<'a> {
    run_ids: Vec<&'a str>,
    versions: Vec<i64>,
    ended_at: Vec<Option<OffsetDateTime>>,
    ledgers: Vec<String>,
    reviews: Vec<Option<&'static str>>,
    complete_jobs: Vec<Option<i64>>,
    complete_owners: Vec<Option<&'a str>>,
    state: StateColumns<'a>,
}

impl<'a> ItemColumns<'a, Commit> for CommitColumns<'a> {
    fn push_item(&mut self, _: &Store, c: &'a Commit) {
        self.run_ids.push(c.run_id.as_str());
        self.versions
            .push(i64::try_from(c.expected_version).unwrap_or(-1));
        // The run's end is the engine's clock at this commit, not the
        // VM's logical instant of the event that ended it.
        self.ended_at
            .push(c.state.status.is_terminal().then(|| at_instant(&c.at)));
        self.ledgers
            .push(serde_json::to_string(&c.ledger).unwrap_or_else(|_| "{}".into()));
        self.reviews.push(c.review.map(Review::as_str));
        self.complete_jobs.push(
            c.complete
                .as_ref()
                .map(|(job, _)| i64::try_from(*job).unwrap_or(-1)),
        );
        self.complete_owners
            .push(c.complete.as_ref().map(|(_, owner)| owner.as_str()));
    }

    fn state_columns(&mut self) -> &mut StateColumns<'a> {
        &mut self.state
    }
}

impl CommitColumns<'_> {
    /// Binds `$1`..`$15` of [`commit_statement`] (`$15` the active state
    /// key version); [`StateColumns::fetch`] binds the rest.
    fn bind<'q>(&'q self, query: GroupQuery<'q>, key_version: i32) -> GroupQuery<'q> {
        let state = &self.state;
        bind_in_order!(query;
            &self.run_ids, &self.versions, &state.states, &state.attention, &state.ended,
            &state.updated_at, &self.ended_at, &state.sealed_states, &state.sealed_outputs,
            &self.ledgers, &state.unknown, &self.reviews, &self.complete_jobs,
            &self.complete_owners, key_version)
    }
}

/// Each table is reached through its index by `= ANY(array)`, never
/// by a join the planner may turn into a scan (its estimate of an
/// unnested array is a guess, and a growing table's statistics lag).
/// The commit statement of `commit_leasing`, over arrays: the
/// completed jobs locked under their leases, each run updated under
/// its version (and only with its completed job's lease), the
/// completed jobs deleted, every other job of a run that ended
/// deleted, and the new jobs (leased on insert under the restore
/// epoch and no restore hold) and their spent keys inserted, each
/// only for a run whose update happened. What comes back: one row
/// per updated run (`k`, its new version) and one per job leased on
/// insert.
///
/// Parameters: `$1`..`$14` the commits' columns, `$15` the active state key
/// version, `$16`..`$28` the new jobs' arrays, `$29` the `wait` column.
fn commit_statement(ns: &str) -> String {
    format!(
        "WITH c AS (
               SELECT * FROM unnest((SELECT $1::text[]), $2::bigint[], $3::text[], $4::boolean[],
                   $5::boolean[], $6::timestamptz[], $7::timestamptz[], $8::bytea[], $9::bytea[],
                   $10::text[], $11::boolean[], $12::text[], $13::bigint[], $14::text[],
                   $29::text[])
                 WITH ORDINALITY AS c(run_id, expected_version, state, attention, ended,
                   updated_at, ended_at, sealed_state, sealed_output, ledger, effect_unknown,
                   review, complete_job, complete_owner, wait, k)),
             lease AS (
               SELECT j.job_id FROM {ns}.jobs j JOIN c
                   ON j.job_id = c.complete_job AND j.lease_owner = c.complete_owner
                WHERE j.job_id = ANY($13::bigint[])
                  FOR UPDATE OF j),
             upd AS (
               UPDATE {ns}.runs r SET state = c.state, attention = c.attention, ended = c.ended,
                   version = r.version + 1, updated_at = c.updated_at,
                   ended_at = CASE WHEN c.ended THEN COALESCE(r.ended_at, c.ended_at) END,
                   key_version = $15, sealed_state = c.sealed_state,
                   sealed_output = c.sealed_output, ledger = c.ledger::jsonb,
                   effect_unknown = c.effect_unknown, wait = c.wait,
                   review = CASE WHEN c.review = 'required' THEN c.review
                                 WHEN r.review = 'required' AND c.review IS NOT NULL THEN c.review
                                 ELSE r.review END
                 FROM c
                WHERE r.run_id = ANY($1::text[]) AND r.run_id = c.run_id
                  AND r.version = c.expected_version AND r.payload_erased_at IS NULL
                  AND (c.complete_job IS NULL
                       OR EXISTS (SELECT 1 FROM lease l WHERE l.job_id = c.complete_job))
            RETURNING c.k, r.run_id, r.version, c.ended, c.complete_job),
             done AS (
               DELETE FROM {ns}.jobs
                WHERE job_id = ANY(ARRAY(SELECT complete_job FROM upd
                                          WHERE complete_job IS NOT NULL))),
             cleared AS (
               DELETE FROM {ns}.jobs
                WHERE run_id = ANY(ARRAY(SELECT run_id FROM upd WHERE ended))
                  AND NOT job_id = ANY(ARRAY(SELECT complete_job FROM upd
                                              WHERE complete_job IS NOT NULL))){new_jobs_sql}
             SELECT upd.k AS k, upd.run_id, upd.version, {leased_none}
               FROM upd
             UNION ALL
             SELECT NULL, ins.run_id, NULL, {leased_columns}
               FROM ins WHERE ins.lease_owner IS NOT NULL",
        new_jobs_sql = new_jobs_sql(ns, 16, "upd"),
        leased_none = LEASED_NONE,
        leased_columns = LEASED_COLUMNS,
    )
}
