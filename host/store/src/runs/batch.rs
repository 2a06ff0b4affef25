//! Group commit: the commits and "mark sending" fences of several runs in
//! one statement each ([`RunStore::commit_batch`],
//! [`RunStore::mark_sending_batch`]), so that runs finishing together share
//! one round trip, one transaction and one WAL flush. Every row keeps its
//! own fence (the run's version, the completed job's lease, the restore
//! epoch), and one commit's refusal never fails another's: it is answered
//! exactly as [`RunStore::commit_leasing`] answers it.
//!
//! [`RunStore::commit_batch`]: coordinator_ports::store::RunStore::commit_batch
//! [`RunStore::mark_sending_batch`]: coordinator_ports::store::RunStore::mark_sending_batch
//! [`RunStore::commit_leasing`]: coordinator_ports::store::RunStore::commit_leasing

use std::collections::{BTreeMap, HashMap};

use coordinator_ports::store::{
    Commit, Committed, LeaseOnInsert, NewJob, RunStore, StoreError as PortError,
};
use serde_json::Value;
use sqlx::Row;
use time::OffsetDateTime;

use super::{at_text, effect_unknown, epoch_column, erased, leased_job, pdb, port, JobValues};
use super::{Review, Store};

/// One commit of a batch as bound: its values and, for its new jobs, what
/// [`Store::job_values`] made of them.
struct Prepared<'a> {
    commit: &'a Commit,
    jobs: &'a [NewJob],
    values: Vec<JobValues<'a>>,
}

impl Store {
    /// [`RunStore::commit_batch`] on PostgreSQL: one statement for every
    /// commit of the batch (arrays unnested, each row fenced by its run's
    /// version and its completed job's lease). A database error in that
    /// statement (a deadlock between two batches touching one run, say)
    /// commits the batch again one commit at a time; a lost connection
    /// answers every commit unavailable (the callers retry).
    pub(super) async fn commit_batch_in_one_statement(
        &self,
        commits: Vec<(Commit, Option<LeaseOnInsert>)>,
    ) -> Vec<Result<Committed, PortError>> {
        if commits.len() <= 1 {
            let mut answers = Vec::new();
            for (commit, lease) in commits {
                answers.push(self.commit_leasing(commit, lease.as_ref()).await);
            }
            return answers;
        }
        match self.try_commit_batch(&commits).await {
            Ok(answers) => answers,
            Err(sqlx::Error::Database(e)) => {
                tracing::warn!(error = %e, commits = commits.len(), "a group commit failed; its commits are made one at a time");
                let mut answers = Vec::with_capacity(commits.len());
                for (commit, lease) in commits {
                    answers.push(self.commit_leasing(commit, lease.as_ref()).await);
                }
                answers
            }
            Err(e) => {
                let e = pdb(e);
                commits.iter().map(|_| Err(e.clone())).collect()
            }
        }
    }

    async fn try_commit_batch(
        &self,
        commits: &[(Commit, Option<LeaseOnInsert>)],
    ) -> Result<Vec<Result<Committed, PortError>>, sqlx::Error> {
        let ns = &self.ns;
        let prepared: Vec<Prepared<'_>> = commits
            .iter()
            .map(|(c, lease)| {
                let jobs: &[NewJob] = if c.state.status.is_terminal() {
                    &[]
                } else {
                    &c.jobs
                };
                let values = jobs
                    .iter()
                    .map(|job| self.job_values(&c.run_id, job, lease.as_ref()))
                    .collect();
                Prepared {
                    commit: c,
                    jobs,
                    values,
                }
            })
            .collect();
        // The runs' columns, one array element per commit (ordinal k from 1).
        let mut run_ids = Vec::new();
        let mut versions = Vec::new();
        let mut states = Vec::new();
        let mut attention = Vec::new();
        let mut ended = Vec::new();
        let mut updated_at = Vec::new();
        let mut ended_at: Vec<Option<OffsetDateTime>> = Vec::new();
        let mut sealed_states = Vec::new();
        let mut sealed_outputs: Vec<Option<Vec<u8>>> = Vec::new();
        let mut ledgers = Vec::new();
        let mut unknown = Vec::new();
        let mut reviews: Vec<Option<&str>> = Vec::new();
        let mut complete_jobs: Vec<Option<i64>> = Vec::new();
        let mut complete_owners: Vec<Option<&str>> = Vec::new();
        // The new jobs' columns, one element per job, with their commit's k.
        let mut job_k: Vec<i32> = Vec::new();
        let mut kinds = Vec::new();
        let mut steps = Vec::new();
        let mut dues = Vec::new();
        let mut details = Vec::new();
        let mut review_requests: Vec<Option<&str>> = Vec::new();
        let mut keys: Vec<Option<&str>> = Vec::new();
        let mut key_versions: Vec<Option<i32>> = Vec::new();
        let mut sealed_commands: Vec<Option<&[u8]>> = Vec::new();
        let mut owners: Vec<Option<&str>> = Vec::new();
        let mut untils: Vec<Option<OffsetDateTime>> = Vec::new();
        let mut epochs: Vec<Option<i64>> = Vec::new();
        for (i, p) in prepared.iter().enumerate() {
            let c = p.commit;
            let id = c.run_id.as_str();
            let status = c.state.status;
            run_ids.push(id);
            versions.push(i64::try_from(c.expected_version).unwrap_or(-1));
            states.push(status.as_str());
            attention.push(status == coordinator_vm::RunStatus::Attention);
            ended.push(status.is_terminal());
            updated_at.push(at_text(&c.state.now));
            ended_at.push(c.state.ended_at.as_deref().map(at_text));
            sealed_states.push(self.seal_json(id, "state", "", &c.state));
            sealed_outputs.push(
                c.state
                    .output
                    .as_ref()
                    .map(|o| self.seal_json(id, "output", "", o)),
            );
            ledgers.push(serde_json::to_string(&c.ledger).unwrap_or_else(|_| "{}".into()));
            unknown.push(effect_unknown(&c.state));
            reviews.push(c.review.map(Review::as_str));
            complete_jobs.push(
                c.complete
                    .as_ref()
                    .map(|(job, _)| i64::try_from(*job).unwrap_or(-1)),
            );
            complete_owners.push(c.complete.as_ref().map(|(_, owner)| owner.as_str()));
            let k = i32::try_from(i + 1).unwrap_or(i32::MAX);
            for v in &p.values {
                job_k.push(k);
                kinds.push(v.row.kind);
                steps.push(v.row.step.as_str());
                dues.push(v.due_at);
                details.push(v.row.detail.as_str());
                review_requests.push(v.row.review_request_id.as_deref());
                keys.push(v.row.idempotency_key.as_deref());
                key_versions.push(v.key_version);
                sealed_commands.push(v.sealed.as_deref());
                owners.push(v.lease.map(|l| l.owner.as_str()));
                untils.push(v.lease.map(|l| super::at(l.lease_until)));
                epochs.push(v.lease.map(|l| epoch_column(l.epoch)));
            }
        }
        // The commit statement of `commit_leasing`, over arrays: the
        // completed jobs locked under their leases, each run updated under
        // its version (and only with its completed job's lease), the
        // completed jobs deleted, every other job of a run that ended
        // deleted, and the new jobs (leased on insert under the restore
        // epoch and no restore hold) and their spent keys inserted, each
        // only for a run whose update happened. What comes back: one row
        // per updated run (`k`, its new version) and one per job leased on
        // insert.
        let sql = format!(
            "WITH c AS (
               SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::boolean[],
                   $5::boolean[], $6::timestamptz[], $7::timestamptz[], $8::bytea[], $9::bytea[],
                   $10::text[], $11::boolean[], $12::text[], $13::bigint[], $14::text[])
                 WITH ORDINALITY AS c(run_id, expected_version, state, attention, ended,
                   updated_at, ended_at, sealed_state, sealed_output, ledger, effect_unknown,
                   review, complete_job, complete_owner, k)),
             lease AS (
               SELECT j.job_id FROM {ns}.jobs j JOIN c
                   ON j.job_id = c.complete_job AND j.lease_owner = c.complete_owner
                  FOR UPDATE OF j),
             upd AS (
               UPDATE {ns}.runs r SET state = c.state, attention = c.attention, ended = c.ended,
                   version = r.version + 1, updated_at = c.updated_at,
                   ended_at = CASE WHEN c.ended THEN COALESCE(r.ended_at, c.ended_at, c.updated_at) END,
                   key_version = $15, sealed_state = c.sealed_state,
                   sealed_output = c.sealed_output, ledger = c.ledger::jsonb,
                   effect_unknown = c.effect_unknown,
                   review = CASE WHEN c.review = 'required' THEN c.review
                                 WHEN r.review = 'required' AND c.review IS NOT NULL THEN c.review
                                 ELSE r.review END
                 FROM c
                WHERE r.run_id = c.run_id AND r.version = c.expected_version
                  AND r.payload_erased_at IS NULL
                  AND (c.complete_job IS NULL
                       OR EXISTS (SELECT 1 FROM lease l WHERE l.job_id = c.complete_job))
            RETURNING c.k, r.run_id, r.version, c.ended, c.complete_job),
             done AS (
               DELETE FROM {ns}.jobs WHERE job_id IN (SELECT complete_job FROM upd)),
             cleared AS (
               DELETE FROM {ns}.jobs j USING upd
                WHERE upd.ended AND j.run_id = upd.run_id
                  AND j.job_id IS DISTINCT FROM upd.complete_job),
             nj AS (
               SELECT * FROM unnest($16::integer[], $17::text[], $18::text[], $19::timestamptz[],
                   $20::text[], $21::text[], $22::text[], $23::integer[], $24::bytea[],
                   $25::text[], $26::timestamptz[], $27::bigint[])
                 WITH ORDINALITY AS nj(k, kind, step, due_at, detail, review_request_id,
                   idempotency_key, key_version, sealed_command, owner, lease_until, epoch, n)),
             ins AS (
               INSERT INTO {ns}.jobs (run_id, kind, step, state, due_at, detail, review_request_id,
                   idempotency_key, key_version, sealed_command, lease_owner, lease_expires_at)
               SELECT upd.run_id, nj.kind, nj.step, 'ready', nj.due_at, nj.detail::jsonb,
                      nj.review_request_id, nj.idempotency_key, nj.key_version, nj.sealed_command,
                      o.owner, CASE WHEN o.owner IS NOT NULL THEN nj.lease_until END
                 FROM nj JOIN upd ON upd.k = nj.k
                CROSS JOIN {ns}.deployment d
                CROSS JOIN LATERAL (SELECT CASE WHEN NOT d.restore_hold
                                                 AND d.restore_epoch = nj.epoch
                                                THEN nj.owner END AS owner) o
                ORDER BY nj.n
             RETURNING job_id, run_id, kind, step, due_at, idempotency_key, detail, lease_owner),
             spent AS (
               INSERT INTO {ns}.spent_keys (kind, identity, run_id, spent_at)
               SELECT 'command', nj.idempotency_key, upd.run_id, nj.due_at
                 FROM nj JOIN upd ON upd.k = nj.k
                WHERE nj.idempotency_key IS NOT NULL
               ON CONFLICT DO NOTHING)
             SELECT upd.k AS k, upd.run_id, upd.version, NULL::bigint AS job_id, NULL::text AS kind,
                    NULL::text AS step, NULL::timestamptz AS due_at, NULL::text AS idempotency_key,
                    NULL::text AS detail
               FROM upd
             UNION ALL
             SELECT NULL, ins.run_id, NULL, ins.job_id, ins.kind, ins.step, ins.due_at,
                    ins.idempotency_key, ins.detail::text
               FROM ins WHERE ins.lease_owner IS NOT NULL"
        );
        let rows = sqlx::query(&sql)
            .bind(&run_ids)
            .bind(&versions)
            .bind(&states)
            .bind(&attention)
            .bind(&ended)
            .bind(&updated_at)
            .bind(&ended_at)
            .bind(&sealed_states)
            .bind(&sealed_outputs)
            .bind(&ledgers)
            .bind(&unknown)
            .bind(&reviews)
            .bind(&complete_jobs)
            .bind(&complete_owners)
            .bind(self.keyring.active_version() as i32)
            .bind(&job_k)
            .bind(&kinds)
            .bind(&steps)
            .bind(&dues)
            .bind(&details)
            .bind(&review_requests)
            .bind(&keys)
            .bind(&key_versions)
            .bind(&sealed_commands)
            .bind(&owners)
            .bind(&untils)
            .bind(&epochs)
            .fetch_all(&self.pool)
            .await?;
        // The updated runs (by k) and the jobs leased on insert (by run).
        let mut updated: BTreeMap<usize, i64> = BTreeMap::new();
        let mut leased_rows: HashMap<String, Vec<LeasedRow>> = HashMap::new();
        for row in &rows {
            let run_id: String = row.try_get("run_id")?;
            match row.try_get::<Option<i64>, _>("k")? {
                Some(k) => {
                    let version: i64 = row.try_get("version")?;
                    updated.insert(usize::try_from(k).unwrap_or(0), version);
                }
                None => leased_rows.entry(run_id).or_default().push(LeasedRow {
                    job_id: row.try_get("job_id")?,
                    kind: row.try_get("kind")?,
                    step: row.try_get("step")?,
                    due_at: row.try_get("due_at")?,
                    idempotency_key: row.try_get("idempotency_key")?,
                    detail: row.try_get("detail")?,
                    taken: false,
                }),
            }
        }
        // Why each commit that changed nothing was refused, read at once.
        let refused: Vec<&str> = prepared
            .iter()
            .enumerate()
            .filter(|(i, _)| !updated.contains_key(&(i + 1)))
            .map(|(_, p)| p.commit.run_id.as_str())
            .collect();
        let mut found: HashMap<String, (i64, bool)> = HashMap::new();
        if !refused.is_empty() {
            let sql = format!(
                "SELECT run_id, version, payload_erased_at IS NOT NULL AS erased
                   FROM {ns}.runs WHERE run_id = ANY($1)"
            );
            for row in sqlx::query(&sql)
                .bind(&refused)
                .fetch_all(&self.pool)
                .await?
            {
                found.insert(
                    row.try_get("run_id")?,
                    (row.try_get("version")?, row.try_get("erased")?),
                );
            }
        }
        let mut answers = Vec::with_capacity(prepared.len());
        for (i, p) in prepared.iter().enumerate() {
            let c = p.commit;
            let id = c.run_id.as_str();
            let Some(version) = updated.get(&(i + 1)) else {
                answers.push(Err(match found.get(id) {
                    None => PortError::NotFound,
                    Some((_, true)) => port(erased(id)),
                    Some((now, false)) if u64::try_from(*now).ok() != Some(c.expected_version) => {
                        PortError::Conflict
                    }
                    Some(_) => PortError::LeaseLost,
                }));
                continue;
            };
            let mut leased = Vec::new();
            let rows = leased_rows.get_mut(id);
            if let Some(rows) = rows {
                for (job, v) in p.jobs.iter().zip(&p.values) {
                    let Some(lease) = v.lease else { continue };
                    if let Some(row) = rows.iter_mut().find(|r| !r.taken && r.is(job, v)) {
                        row.taken = true;
                        leased.extend(leased_job(
                            id,
                            job,
                            Some(lease),
                            row.job_id,
                            Some(lease.owner.clone()),
                        ));
                    }
                }
            }
            answers.push(Ok(Committed {
                version: u64::try_from(*version).unwrap_or(0),
                leased,
            }));
        }
        Ok(answers)
    }

    /// [`RunStore::mark_sending_batch`] on PostgreSQL: one statement; each
    /// job is marked only under its owner's lease, its epoch and no
    /// restore hold. A lost connection answers every job unavailable; a
    /// job not marked answers [`PortError::LeaseLost`].
    pub(super) async fn mark_sending_in_one_statement(
        &self,
        jobs: Vec<(u64, String, u64)>,
    ) -> Vec<Result<(), PortError>> {
        let ids: Vec<i64> = jobs
            .iter()
            .map(|(id, _, _)| i64::try_from(*id).unwrap_or(-1))
            .collect();
        let owners: Vec<&str> = jobs.iter().map(|(_, o, _)| o.as_str()).collect();
        let epochs: Vec<i64> = jobs.iter().map(|(_, _, e)| epoch_column(*e)).collect();
        let sql = format!(
            "UPDATE {ns}.jobs j SET state = 'sending'
               FROM unnest($1::bigint[], $2::text[], $3::bigint[])
                      WITH ORDINALITY AS m(job_id, owner, epoch, n),
                    {ns}.deployment d
              WHERE j.job_id = m.job_id AND j.lease_owner = m.owner
                AND NOT d.restore_hold AND d.restore_epoch = m.epoch
          RETURNING m.n",
            ns = self.ns
        );
        let marked = sqlx::query_scalar::<_, i64>(&sql)
            .bind(&ids)
            .bind(&owners)
            .bind(&epochs)
            .fetch_all(&self.pool)
            .await;
        match marked {
            Ok(marked) => (1..=ids.len())
                .map(|n| {
                    if marked.contains(&i64::try_from(n).unwrap_or(-1)) {
                        Ok(())
                    } else {
                        Err(PortError::LeaseLost)
                    }
                })
                .collect(),
            Err(e) => {
                let e = pdb(e);
                ids.iter().map(|_| Err(e.clone())).collect()
            }
        }
    }
}

/// A job the batch statement inserted leased, as it came back.
struct LeasedRow {
    job_id: i64,
    kind: String,
    step: String,
    due_at: OffsetDateTime,
    idempotency_key: Option<String>,
    detail: String,
    taken: bool,
}

impl LeasedRow {
    /// Whether this row is the insert of `job` (`values` as bound): the
    /// same kind, step, due time, idempotency key and detail (compared as
    /// JSON values: `jsonb` orders keys its own way). Two new jobs of one
    /// run alike in all of these are interchangeable.
    fn is(&self, job: &NewJob, values: &JobValues<'_>) -> bool {
        self.kind == values.row.kind
            && self.step == values.row.step
            && self.due_at.unix_timestamp() == job.due_unix
            && self.idempotency_key == values.row.idempotency_key
            && serde_json::from_str::<Value>(&self.detail).ok()
                == serde_json::from_str::<Value>(&values.row.detail).ok()
    }
}
