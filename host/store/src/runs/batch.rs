//! Group commit on PostgreSQL: the admissions, commits and "mark sending"
//! fences of several runs, each kind in one statement over arrays
//! ([`RunAdmission::admit_batch`], [`JobQueue::commit_batch`],
//! [`JobQueue::mark_sending_batch`]), so runs moving together share one
//! round trip, one transaction and one WAL flush. Every row keeps its own
//! fence (the run's version, the completed job's lease, the restore epoch,
//! the admission checks), and one item's refusal never fails another's. A
//! single admission, commit or mark is a group of one: these statements
//! are the only ones that write them.
//!
//! **One plan for every batch size.** Each statement unnests its first
//! array through a scalar subquery (`unnest((SELECT $1::text[]), ...)`):
//! the planner cannot see that array's length, so it estimates every batch
//! at its default size, a custom plan costs what the generic plan costs,
//! and PostgreSQL keeps the generic plan from the sixth execution on a
//! connection instead of planning each batch anew (an admission of one was
//! 0.8 ms of planning and 0.3 ms of execution). The `sending` mark, whose
//! cost is mostly its key lookup, reads its `= ANY` array the same way.
//! One plan fits every size because every table is reached by key
//! (`= ANY(array)`), never by a join whose method depends on the estimate.
//!
//! [`RunAdmission::admit_batch`]: coordinator_ports::store::RunAdmission::admit_batch
//! [`JobQueue::commit_batch`]: coordinator_ports::store::JobQueue::commit_batch
//! [`JobQueue::mark_sending_batch`]: coordinator_ports::store::JobQueue::mark_sending_batch

use std::collections::{BTreeMap, HashMap};

use coordinator_ports::store::{
    Commit, Committed, Job, LeaseOnInsert, NewJob, StoreError as PortError,
};
use serde_json::Value;
use sqlx::Row;
use time::OffsetDateTime;

use coordinator_ports::store::{Admitted, NewRun, Review, RunRecord};

use super::admission::AdmissionChecks;
use super::columns::{at, at_text, effect_unknown, epoch_column, wait_column};
use super::errors::{erased, pdb, port};
use super::new_jobs::{leased_job, JobValues};
use super::Store;

/// One commit of a batch as bound: its values and, for its new jobs, what
/// [`Store::job_values`] made of them.
struct Prepared<'a> {
    commit: &'a Commit,
    jobs: &'a [NewJob],
    values: Vec<JobValues<'a>>,
}

impl Store {
    /// One statement for every commit of the batch (arrays unnested, each
    /// row fenced by its run's version and its completed job's lease),
    /// answered in order as [`JobQueue::commit_batch`] says.
    ///
    /// [`JobQueue::commit_batch`]: coordinator_ports::store::JobQueue::commit_batch
    pub(super) async fn try_commit_batch(
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
        let mut waits: Vec<Option<&str>> = Vec::new();
        let mut reviews: Vec<Option<&str>> = Vec::new();
        let mut complete_jobs: Vec<Option<i64>> = Vec::new();
        let mut complete_owners: Vec<Option<&str>> = Vec::new();
        let mut new_jobs = JobArrays::default();
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
            // The run's end is the engine's clock at this commit, not the
            // VM's logical instant of the event that ended it.
            ended_at.push(status.is_terminal().then(|| at(c.at_unix)));
            sealed_states.push(self.seal_json(id, "state", "", &c.state));
            sealed_outputs.push(
                c.state
                    .output
                    .as_ref()
                    .map(|o| self.seal_json(id, "output", "", o)),
            );
            ledgers.push(serde_json::to_string(&c.ledger).unwrap_or_else(|_| "{}".into()));
            unknown.push(effect_unknown(&c.state));
            waits.push(wait_column(&c.state));
            reviews.push(c.review.map(Review::as_str));
            complete_jobs.push(
                c.complete
                    .as_ref()
                    .map(|(job, _)| i64::try_from(*job).unwrap_or(-1)),
            );
            complete_owners.push(c.complete.as_ref().map(|(_, owner)| owner.as_str()));
            new_jobs.push(i, &p.values);
        }
        // Each table is reached through its index by `= ANY(array)`, never
        // by a join the planner may turn into a scan (its estimate of an
        // unnested array is a guess, and a growing table's statistics lag).
        // The commit statement of `commit_leasing`, over arrays: the
        // completed jobs locked under their leases, each run updated under
        // its version (and only with its completed job's lease), the
        // completed jobs deleted, every other job of a run that ended
        // deleted, and the new jobs (leased on insert under the restore
        // epoch and no restore hold) and their spent keys inserted, each
        // only for a run whose update happened. What comes back: one row
        // per updated run (`k`, its new version) and one per job leased on
        // insert.
        let new_jobs_sql = new_jobs_sql(ns, 16, "upd");
        let (leased_none, leased_columns) = (LEASED_NONE, LEASED_COLUMNS);
        let sql = format!(
            "WITH c AS (
               SELECT * FROM unnest((SELECT $1::text[]), $2::bigint[], $3::text[], $4::boolean[],
                   $5::boolean[], $6::timestamptz[], $7::timestamptz[], $8::bytea[], $9::bytea[],
                   $10::text[], $11::boolean[], $12::text[], $13::bigint[], $14::text[],
                   $28::text[])
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
               FROM ins WHERE ins.lease_owner IS NOT NULL"
        );
        let query = sqlx::query(&sql)
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
            .bind(self.keyring.active_version() as i32);
        // `$28`, after the new jobs' twelve arrays (`$16`..`$27`).
        let rows = new_jobs
            .bind(query)
            .bind(&waits)
            .fetch_all(&self.db)
            .await?;
        // The updated runs (by k) and the jobs leased on insert (by run).
        let mut updated: BTreeMap<usize, i64> = BTreeMap::new();
        let mut leased_rows = LeasedRows::default();
        for row in &rows {
            match row.try_get::<Option<i64>, _>("k")? {
                Some(k) => {
                    let version: i64 = row.try_get("version")?;
                    updated.insert(usize::try_from(k).unwrap_or(0), version);
                }
                None => leased_rows.read(row)?,
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
            for row in sqlx::query(&sql).bind(&refused).fetch_all(&self.db).await? {
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
            let leased = leased_rows.take(id, p.jobs, &p.values);
            answers.push(Ok(Committed {
                version: u64::try_from(*version).unwrap_or(0),
                leased,
            }));
        }
        Ok(answers)
    }

    /// One statement for every admission of the batch, each with the
    /// admission checks (the admission hold, a binding the last apply
    /// recorded otherwise, the activation generation, the active revision,
    /// the start identity), answered in order as [`RunAdmission::admit_batch`]
    /// says.
    ///
    /// [`RunAdmission::admit_batch`]: coordinator_ports::store::RunAdmission::admit_batch
    pub(super) async fn try_admit_batch(
        &self,
        runs: &[(NewRun, Option<LeaseOnInsert>)],
    ) -> Result<Vec<Result<(Admitted, Vec<Job>), PortError>>, sqlx::Error> {
        let ns = &self.ns;
        let values: Vec<Vec<JobValues<'_>>> = runs
            .iter()
            .map(|(run, lease)| {
                let jobs: &[NewJob] = if run.state.status.is_terminal() {
                    &[]
                } else {
                    &run.jobs
                };
                jobs.iter()
                    .map(|job| self.job_values(&run.id, job, lease.as_ref()))
                    .collect()
            })
            .collect();
        let mut ids = Vec::new();
        let mut workflows = Vec::new();
        let mut revisions = Vec::new();
        let mut owner_refs = Vec::new();
        let mut identities = Vec::new();
        let mut fingerprints = Vec::new();
        let mut states = Vec::new();
        let mut attention = Vec::new();
        let mut ended = Vec::new();
        let mut deadlines = Vec::new();
        let mut created = Vec::new();
        let mut updated = Vec::new();
        let mut ended_at: Vec<Option<OffsetDateTime>> = Vec::new();
        let mut inputs = Vec::new();
        let mut sealed_states = Vec::new();
        let mut outputs: Vec<Option<Vec<u8>>> = Vec::new();
        let mut owners = Vec::new();
        let mut bindings = Vec::new();
        let mut unknown = Vec::new();
        let mut waits: Vec<Option<&str>> = Vec::new();
        let mut new_jobs = JobArrays::default();
        for (i, ((run, _), values)) in runs.iter().zip(&values).enumerate() {
            let id = run.id.as_str();
            let status = run.state.status;
            ids.push(id);
            workflows.push(run.workflow.as_str());
            revisions.push(run.revision.as_str());
            owner_refs.push(
                self.admission
                    .owner_reference(&run.owner.iss, &run.owner.sub),
            );
            identities.push(run.start_identity.as_str());
            fingerprints.push(run.request_digest.as_str());
            states.push(status.as_str());
            attention.push(status == coordinator_vm::RunStatus::Attention);
            ended.push(status.is_terminal());
            // Whole seconds rounded up: `runs.deadline_at` is when the
            // deadline's timer job is due (`JobQueue::lease`).
            deadlines.push(at(coordinator_ports::clock::due_unix(
                &run.state.deadline_at,
            )
            .expect("the VM writes its state's instants in RFC 3339")));
            created.push(at_text(&run.state.admitted_at));
            updated.push(at_text(&run.state.now));
            ended_at.push(run.state.ended_at.as_deref().map(at_text));
            inputs.push(self.seal_json(id, "input", "", &run.state.input));
            sealed_states.push(self.seal_json(id, "state", "", &run.state));
            outputs.push(
                run.state
                    .output
                    .as_ref()
                    .map(|o| self.seal_json(id, "output", "", o)),
            );
            owners.push(self.seal_json(id, "owner", "", &run.owner));
            bindings.push(serde_json::to_string(&run.bindings).unwrap_or_else(|_| "{}".into()));
            unknown.push(effect_unknown(&run.state));
            waits.push(wait_column(&run.state));
            new_jobs.push(i, values);
        }
        // The admission statement of `admit_leasing`, over arrays: the
        // checks of each start (what they read comes back, so a refusal is
        // named without another read), then, for each start they pass, the
        // start identity spent (waiting for a concurrent admission of the
        // same identity to settle; of two starts of one identity in the
        // batch, one), the run and its jobs.
        let new_jobs_sql = new_jobs_sql(ns, 22, "made");
        let (leased_none, leased_columns) = (LEASED_NONE, LEASED_COLUMNS);
        let sql = format!(
            "WITH a AS (
               SELECT * FROM unnest((SELECT $1::text[]), $2::text[], $3::text[], $4::text[],
                   $5::text[], $6::text[], $7::text[], $8::boolean[], $9::boolean[], $10::timestamptz[],
                   $11::timestamptz[], $12::timestamptz[], $13::timestamptz[], $14::bytea[],
                   $15::bytea[], $16::bytea[], $17::bytea[], $18::text[], $19::boolean[],
                   $34::text[])
                 WITH ORDINALITY AS a(run_id, workflow, revision, owner_ref, start_identity,
                   request_fingerprint, state, attention, ended, deadline_at, created_at,
                   updated_at, ended_at, sealed_input, sealed_state, sealed_output, sealed_owner,
                   bindings, effect_unknown, wait, k)),
             already AS (
               SELECT identity FROM {ns}.spent_keys
                WHERE kind = 'start' AND identity = ANY($5::text[])),
             chk AS (
               SELECT a.k, d.admission_hold AS held,
                      (SELECT revision FROM {ns}.active_workflows w
                        WHERE w.workflow = a.workflow) AS active,
                      d.activation_generation = $20 AS current,
                      (SELECT r.key FROM jsonb_each_text(a.bindings::jsonb) r
                         JOIN jsonb_each_text(d.connection_bindings) x ON x.key = r.key
                        WHERE x.value <> r.value ORDER BY r.key LIMIT 1) AS conflict,
                      a.start_identity IN (SELECT identity FROM already) AS spent
                 FROM a CROSS JOIN {ns}.deployment d),
             spent AS (
               INSERT INTO {ns}.spent_keys (kind, identity, run_id, spent_at)
               SELECT 'start', a.start_identity, a.run_id, a.created_at
                 FROM a JOIN chk ON chk.k = a.k
                WHERE NOT chk.spent AND NOT chk.held AND chk.conflict IS NULL AND chk.current
                  AND chk.active IS NOT DISTINCT FROM a.revision
                ORDER BY a.k
               ON CONFLICT DO NOTHING RETURNING run_id),
             run AS (
               INSERT INTO {ns}.runs (run_id, workflow, revision, owner_ref, start_identity,
                   request_fingerprint, state, attention, ended, deadline_at, created_at, updated_at,
                   ended_at, key_version, input_key_version, sealed_input, sealed_state, sealed_output,
                   sealed_owner, bindings, effect_unknown, wait)
               SELECT a.run_id, a.workflow, a.revision, a.owner_ref, a.start_identity,
                      a.request_fingerprint, a.state, a.attention, a.ended, a.deadline_at,
                      a.created_at, a.updated_at, a.ended_at, $21, $21, a.sealed_input,
                      a.sealed_state, a.sealed_output, a.sealed_owner, a.bindings::jsonb,
                      a.effect_unknown, a.wait
                 FROM a WHERE a.run_id IN (SELECT run_id FROM spent)
                ORDER BY a.k
               RETURNING run_id, seq),
             made AS (SELECT a.k, a.run_id FROM a JOIN run ON run.run_id = a.run_id){new_jobs_sql}
             SELECT chk.k AS k, a.run_id, run.seq, chk.held, chk.active, chk.current,
                    chk.conflict, chk.spent, {leased_none}
               FROM chk JOIN a ON a.k = chk.k LEFT JOIN run ON run.run_id = a.run_id
             UNION ALL
             SELECT NULL, ins.run_id, NULL, NULL, NULL, NULL, NULL, NULL, {leased_columns}
               FROM ins WHERE ins.lease_owner IS NOT NULL"
        );
        let query = sqlx::query(&sql)
            .bind(&ids)
            .bind(&workflows)
            .bind(&revisions)
            .bind(&owner_refs)
            .bind(&identities)
            .bind(&fingerprints)
            .bind(&states)
            .bind(&attention)
            .bind(&ended)
            .bind(&deadlines)
            .bind(&created)
            .bind(&updated)
            .bind(&ended_at)
            .bind(&inputs)
            .bind(&sealed_states)
            .bind(&outputs)
            .bind(&owners)
            .bind(&bindings)
            .bind(&unknown)
            .bind(self.activation_generation)
            .bind(self.keyring.active_version() as i32);
        // `$34`, after the new jobs' twelve arrays (`$22`..`$33`).
        let rows = new_jobs
            .bind(query)
            .bind(&waits)
            .fetch_all(&self.db)
            .await?;
        let mut checked: BTreeMap<usize, (Option<i64>, AdmissionChecks)> = BTreeMap::new();
        let mut leased_rows = LeasedRows::default();
        for row in &rows {
            match row.try_get::<Option<i64>, _>("k")? {
                Some(k) => {
                    let checks = AdmissionChecks {
                        spent: row.try_get("spent")?,
                        held: row.try_get("held")?,
                        conflict: row.try_get("conflict")?,
                        current: row.try_get("current")?,
                        active: row.try_get("active")?,
                    };
                    checked.insert(
                        usize::try_from(k).unwrap_or(0),
                        (row.try_get("seq")?, checks),
                    );
                }
                None => leased_rows.read(row)?,
            }
        }
        let mut answers = Vec::with_capacity(runs.len());
        for (i, ((run, _), values)) in runs.iter().zip(&values).enumerate() {
            let Some((seq, checks)) = checked.remove(&(i + 1)) else {
                answers.push(Err(PortError::Unavailable(
                    "an admission of a group came back without its checks".into(),
                )));
                continue;
            };
            let Some(seq) = seq else {
                if let Some(refused) = checks.refusal(&run.revision) {
                    answers.push(Ok((refused, Vec::new())));
                    continue;
                }
                // The identity was spent already, or another admission of
                // it (in this batch or a concurrent one) won: its run is
                // the answer.
                let found = match self.db.begin().await {
                    Ok(mut conn) => self
                        .existing(&mut conn, &run.start_identity, &run.request_digest)
                        .await
                        .map(|found| (found.unwrap_or(Admitted::Conflict), Vec::new())),
                    Err(e) => Err(port(e)),
                };
                answers.push(found);
                continue;
            };
            let jobs: &[NewJob] = if run.state.status.is_terminal() {
                &[]
            } else {
                &run.jobs
            };
            let leased = leased_rows.take(&run.id, jobs, values);
            answers.push(Ok((
                Admitted::Created(RunRecord::admitted(
                    run.clone(),
                    u64::try_from(seq).unwrap_or(0),
                )),
                leased,
            )));
        }
        Ok(answers)
    }

    /// [`JobQueue::mark_sending_batch`] on PostgreSQL: one statement; each
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
               FROM unnest((SELECT $1::bigint[]), $2::text[], $3::bigint[])
                      WITH ORDINALITY AS m(job_id, owner, epoch, n),
                    {ns}.deployment d
              WHERE j.job_id = ANY((SELECT $1::bigint[])::bigint[]) AND j.job_id = m.job_id
                AND j.lease_owner = m.owner
                AND NOT d.restore_hold AND d.restore_epoch = m.epoch
          RETURNING m.n",
            ns = self.ns
        );
        let marked = sqlx::query_scalar::<_, i64>(&sql)
            .bind(&ids)
            .bind(&owners)
            .bind(&epochs)
            .fetch_all(&self.db)
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

/// Writes `items` with `write`, one group statement for all of them. When
/// that statement fails with a rollback or an integrity error
/// ([`one_at_a_time_may_pass`]: a deadlock between two processes' batches,
/// two items colliding), the items are written again one at a time, each
/// answered on its own; any other error (a lost connection: the callers
/// retry) answers every item.
pub(super) async fn in_one_statement<'a, T, R, F, Fut>(
    items: &'a [T],
    write: F,
) -> Vec<Result<R, PortError>>
where
    F: Fn(&'a [T]) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<Result<R, PortError>>, sqlx::Error>>,
{
    match write(items).await {
        Ok(answers) => answers,
        Err(sqlx::Error::Database(e))
            if items.len() > 1 && one_at_a_time_may_pass(e.code().as_deref()) =>
        {
            tracing::warn!(error = %e, items = items.len(), "a group statement failed; its items are written one at a time");
            each_alone(items, write).await
        }
        Err(e) => {
            let e = pdb(e);
            items.iter().map(|_| Err(e.clone())).collect()
        }
    }
}

/// The answer of a group of one: its only item's (a statement answering
/// no item is a broken invariant of the store, answered unavailable so the
/// caller retries).
pub(super) fn only_answer<R>(mut answers: Vec<Result<R, PortError>>) -> Result<R, PortError> {
    answers.pop().unwrap_or_else(|| {
        Err(PortError::Unavailable(
            "a group statement answered nothing".into(),
        ))
    })
}

/// Writes `items` one at a time with `write` (a group statement of one
/// each), each answered on its own: a database error fails only its item.
async fn each_alone<'a, T, R, F, Fut>(items: &'a [T], write: F) -> Vec<Result<R, PortError>>
where
    F: Fn(&'a [T]) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<Result<R, PortError>>, sqlx::Error>>,
{
    let mut answers = Vec::with_capacity(items.len());
    for one in items.chunks(1) {
        answers.push(match write(one).await {
            Ok(answer) => only_answer(answer),
            Err(e) => Err(pdb(e)),
        });
    }
    answers
}

/// Whether a batch statement that failed with SQLSTATE `code` may pass
/// when its items are written one at a time: a transaction rollback
/// (class 40: a deadlock between two batches touching one run, a
/// serialization failure) or an integrity violation (class 23: two items
/// of one batch colliding). Any other error (a statement PostgreSQL cannot
/// run) is answered to every item.
fn one_at_a_time_may_pass(code: Option<&str>) -> bool {
    code.is_some_and(|c| c.starts_with("40") || c.starts_with("23"))
}

/// The new jobs of a batch as bound: one array element per job, with the
/// ordinal `k` (from 1) of the commit or admission it belongs to.
#[derive(Default)]
struct JobArrays<'a> {
    k: Vec<i32>,
    kinds: Vec<&'static str>,
    steps: Vec<&'a str>,
    dues: Vec<OffsetDateTime>,
    details: Vec<&'a str>,
    review_requests: Vec<Option<&'a str>>,
    keys: Vec<Option<&'a str>>,
    key_versions: Vec<Option<i32>>,
    sealed_commands: Vec<Option<&'a [u8]>>,
    owners: Vec<Option<&'a str>>,
    untils: Vec<Option<OffsetDateTime>>,
    epochs: Vec<Option<i64>>,
}

impl<'a> JobArrays<'a> {
    /// Adds the jobs of the batch's item `index` (0-based; `k` is
    /// `index + 1`).
    fn push(&mut self, index: usize, values: &'a [JobValues<'a>]) {
        let k = i32::try_from(index + 1).unwrap_or(i32::MAX);
        for v in values {
            self.k.push(k);
            self.kinds.push(v.row.kind);
            self.steps.push(v.row.step.as_str());
            self.dues.push(v.due_at);
            self.details.push(v.row.detail.as_str());
            self.review_requests
                .push(v.row.review_request_id.as_deref());
            self.keys.push(v.row.idempotency_key.as_deref());
            self.key_versions.push(v.key_version);
            self.sealed_commands.push(v.sealed.as_deref());
            self.owners.push(v.lease.map(|l| l.owner.as_str()));
            self.untils.push(v.lease.map(|l| at(l.lease_until)));
            self.epochs.push(v.lease.map(|l| epoch_column(l.epoch)));
        }
    }

    /// Binds the twelve arrays, in [`new_jobs_sql`]'s order, after the
    /// parameters bound before.
    fn bind<'q>(
        &'q self,
        query: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    ) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
        query
            .bind(&self.k)
            .bind(&self.kinds)
            .bind(&self.steps)
            .bind(&self.dues)
            .bind(&self.details)
            .bind(&self.review_requests)
            .bind(&self.keys)
            .bind(&self.key_versions)
            .bind(&self.sealed_commands)
            .bind(&self.owners)
            .bind(&self.untils)
            .bind(&self.epochs)
    }
}

/// The CTEs (each with a leading comma) that insert a batch's new jobs
/// ([`JobArrays`], parameters `$first`..`$first+11`) for the items that
/// went ahead: `made` is a CTE with columns `k` and `run_id`, one row per
/// item whose run was inserted or updated. Each job is leased on insert to
/// its owner until its expiry when the deployment is under the job's
/// restore epoch and no restore hold (`ins` returns what
/// [`LEASED_COLUMNS`] reads), and its idempotency key is recorded spent.
fn new_jobs_sql(ns: &str, first: usize, made: &str) -> String {
    let p = |i: usize| format!("${}", first + i);
    format!(
        ", nj AS (
               SELECT * FROM unnest((SELECT {k}::integer[]), {kind}::text[], {step}::text[],
                   {due}::timestamptz[], {detail}::text[], {review}::text[], {key}::text[],
                   {kv}::integer[], {sealed}::bytea[], {owner}::text[], {until}::timestamptz[],
                   {epoch}::bigint[])
                 WITH ORDINALITY AS nj(k, kind, step, due_at, detail, review_request_id,
                   idempotency_key, key_version, sealed_command, owner, lease_until, epoch, n)),
             ins AS (
               INSERT INTO {ns}.jobs (run_id, kind, step, state, due_at, detail, review_request_id,
                   idempotency_key, key_version, sealed_command, lease_owner, lease_expires_at)
               SELECT m.run_id, nj.kind, nj.step, 'ready', nj.due_at, nj.detail::jsonb,
                      nj.review_request_id, nj.idempotency_key, nj.key_version, nj.sealed_command,
                      o.owner, CASE WHEN o.owner IS NOT NULL THEN nj.lease_until END
                 FROM nj JOIN {made} m ON m.k = nj.k
                CROSS JOIN {ns}.deployment d
                CROSS JOIN LATERAL (SELECT CASE WHEN NOT d.restore_hold
                                                 AND d.restore_epoch = nj.epoch
                                                THEN nj.owner END AS owner) o
                ORDER BY nj.n
             RETURNING job_id, run_id, kind, step, due_at, idempotency_key, detail, lease_owner),
             spent_commands AS (
               INSERT INTO {ns}.spent_keys (kind, identity, run_id, spent_at)
               SELECT 'command', nj.idempotency_key, m.run_id, nj.due_at
                 FROM nj JOIN {made} m ON m.k = nj.k
                WHERE nj.idempotency_key IS NOT NULL
               ON CONFLICT DO NOTHING)",
        k = p(0),
        kind = p(1),
        step = p(2),
        due = p(3),
        detail = p(4),
        review = p(5),
        key = p(6),
        kv = p(7),
        sealed = p(8),
        owner = p(9),
        until = p(10),
        epoch = p(11),
    )
}

/// The columns of a leased job's row in a batch's answer (from `ins`).
const LEASED_COLUMNS: &str = "ins.job_id, ins.kind, ins.step, ins.due_at, ins.idempotency_key, \
     ins.detail::text AS detail";

/// [`LEASED_COLUMNS`] as NULLs, for the rows of the answer that are not jobs.
const LEASED_NONE: &str = "NULL::bigint AS job_id, NULL::text AS kind, NULL::text AS step, \
     NULL::timestamptz AS due_at, NULL::text AS idempotency_key, NULL::text AS detail";

/// The jobs a batch statement inserted leased, by run.
#[derive(Default)]
struct LeasedRows(HashMap<String, Vec<LeasedRow>>);

impl LeasedRows {
    /// Reads a leased job's row ([`LEASED_COLUMNS`] and `run_id`).
    fn read(&mut self, row: &sqlx::postgres::PgRow) -> Result<(), sqlx::Error> {
        let run_id: String = row.try_get("run_id")?;
        self.0.entry(run_id).or_default().push(LeasedRow {
            job_id: row.try_get("job_id")?,
            kind: row.try_get("kind")?,
            step: row.try_get("step")?,
            due_at: row.try_get("due_at")?,
            idempotency_key: row.try_get("idempotency_key")?,
            detail: row.try_get("detail")?,
            taken: false,
        });
        Ok(())
    }

    /// The jobs of `run_id` (its new `jobs`, `values` as bound) that were
    /// leased on insert, in the order of `jobs`.
    fn take(&mut self, run_id: &str, jobs: &[NewJob], values: &[JobValues<'_>]) -> Vec<Job> {
        let mut leased = Vec::new();
        let Some(rows) = self.0.get_mut(run_id) else {
            return leased;
        };
        for (job, v) in jobs.iter().zip(values) {
            let Some(lease) = v.lease else { continue };
            if let Some(row) = rows.iter_mut().find(|r| !r.taken && r.is(job, v)) {
                row.taken = true;
                leased.extend(leased_job(
                    run_id,
                    job,
                    Some(lease),
                    row.job_id,
                    Some(lease.owner.clone()),
                ));
            }
        }
        leased
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
