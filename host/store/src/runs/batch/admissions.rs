//! The group admission: one statement for the starts of several runs, each
//! with the admission checks (the admission hold, a binding the last apply
//! recorded otherwise, the activation generation, the active revision, the
//! start identity) ([`RunAdmission::admit_batch`]).
//!
//! [`RunAdmission::admit_batch`]: coordinator_ports::store::RunAdmission::admit_batch

use coordinator_ports::store::{
    Admitted, Job, LeaseOnInsert, NewRun, RunRecord, StoreError as PortError,
};
use sqlx::postgres::PgRow;
use sqlx::Row;
use time::OffsetDateTime;

use super::inserted_jobs::{new_jobs_sql, LEASED_COLUMNS, LEASED_NONE};
use super::{columns_of, GroupAnswer, GroupQuery, ItemColumns, StateColumns};
use crate::runs::admission::AdmissionChecks;
use crate::runs::columns::{at, at_instant};
use crate::runs::errors::port;
use crate::runs::Store;

impl Store {
    /// One statement for every admission of the batch, each with the
    /// admission checks (the admission hold, a binding the last apply
    /// recorded otherwise, the activation generation, the active revision,
    /// the start identity), answered in order as [`RunAdmission::admit_batch`]
    /// says.
    ///
    /// [`RunAdmission::admit_batch`]: coordinator_ports::store::RunAdmission::admit_batch
    pub(in crate::runs) async fn try_admit_batch(
        &self,
        runs: &[(NewRun, Option<LeaseOnInsert>)],
    ) -> Result<Vec<Result<(Admitted, Vec<Job>), PortError>>, sqlx::Error> {
        let prepared = self.prepare_group(runs);
        let columns: AdmissionColumns<'_> = columns_of(self, &prepared);
        let sql = admission_statement(&self.ns);
        let query = columns.bind(
            sqlx::query(&sql),
            self.activation_generation,
            self.keyring.active_version() as i32,
        );
        let rows = columns.state.fetch(self, query).await?;
        let answers = GroupAnswer::read(&rows, admitted_sequence)?.in_order(&prepared);
        let mut admitted = Vec::with_capacity(runs.len());
        for (p, answer) in prepared.iter().zip(answers) {
            let run = p.item;
            admitted.push(match answer {
                Ok((seq, leased)) => Ok((
                    Admitted::Created(RunRecord::admitted(
                        run.clone(),
                        u64::try_from(seq).unwrap_or(0),
                    )),
                    leased,
                )),
                Err(None) => Err(PortError::Unavailable(
                    "an admission of a group came back without its checks".into(),
                )),
                Err(Some(checks)) => match checks.refusal(&run.revision) {
                    Some(refused) => Ok((refused, Vec::new())),
                    None => self.admitted_before(run).await,
                },
            });
        }
        Ok(admitted)
    }

    /// The answer to a start the group statement did not insert though its
    /// checks passed: the identity was spent already, or another admission
    /// of it (in this batch or a concurrent one) won: its run is the answer.
    async fn admitted_before(&self, run: &NewRun) -> Result<(Admitted, Vec<Job>), PortError> {
        match self.db.begin().await {
            Ok(mut conn) => self
                .existing(&mut conn, &run.start_identity, &run.request_digest)
                .await
                .map(|found| (found.unwrap_or(Admitted::Conflict), Vec::new())),
            Err(e) => Err(port(e)),
        }
    }
}

/// A start's row of the group admission: its run's sequence when it was
/// inserted, otherwise what its checks read.
fn admitted_sequence(row: &PgRow) -> Result<Result<i64, AdmissionChecks>, sqlx::Error> {
    let checks = AdmissionChecks {
        spent: row.try_get("spent")?,
        held: row.try_get("held")?,
        conflict: row.try_get("conflict")?,
        current: row.try_get("current")?,
        active: row.try_get("active")?,
    };
    let seq: Option<i64> = row.try_get("seq")?;
    Ok(seq.ok_or(checks))
}

/// The runs' columns of a group admission, one array element per start
/// (ordinal k from 1), beside those written from their states.
#[derive(Default)]
struct AdmissionColumns<'a> {
    ids: Vec<&'a str>,
    workflows: Vec<&'a str>,
    revisions: Vec<&'a str>,
    owner_refs: Vec<String>,
    identities: Vec<&'a str>,
    fingerprints: Vec<&'a str>,
    deadlines: Vec<OffsetDateTime>,
    created: Vec<OffsetDateTime>,
    ended_at: Vec<Option<OffsetDateTime>>,
    inputs: Vec<Vec<u8>>,
    owners: Vec<Vec<u8>>,
    bindings: Vec<String>,
    trace_parents: Vec<Option<String>>,
    state: StateColumns<'a>,
}

impl<'a> ItemColumns<'a, NewRun> for AdmissionColumns<'a> {
    fn push_item(&mut self, store: &Store, run: &'a NewRun) {
        let id = run.id.as_str();
        self.ids.push(id);
        self.workflows.push(run.workflow.as_str());
        self.revisions.push(run.revision.as_str());
        self.owner_refs.push(
            store
                .admission
                .owner_reference(&run.owner.iss, &run.owner.sub),
        );
        self.identities.push(run.start_identity.as_str());
        self.fingerprints.push(run.request_digest.as_str());
        // Whole seconds rounded up: `runs.deadline_at` is when the
        // deadline's timer job is due (`JobQueue::lease`).
        let deadline = coordinator_ports::clock::due_unix(&run.state.deadline_at);
        self.deadlines.push(at(deadline));
        self.created.push(at_instant(&run.state.admitted_at));
        self.ended_at
            .push(run.state.ended_at.as_ref().map(at_instant));
        self.inputs
            .push(store.seal_json(id, "input", "", &run.state.input));
        self.owners
            .push(store.seal_json(id, "owner", "", &run.owner));
        self.bindings
            .push(serde_json::to_string(&run.bindings).unwrap_or_else(|_| "{}".into()));
        self.trace_parents
            .push(run.trace_parent.as_ref().map(ToString::to_string));
    }

    fn state_columns(&mut self) -> &mut StateColumns<'a> {
        &mut self.state
    }
}

impl AdmissionColumns<'_> {
    /// Binds `$1`..`$22` of [`admission_statement`] (`$20` the activation
    /// generation the store was opened under, `$21` the active state key
    /// version, `$22` the trace contexts); [`StateColumns::fetch`] binds
    /// the rest.
    fn bind<'q>(
        &'q self,
        query: GroupQuery<'q>,
        activation_generation: i64,
        key_version: i32,
    ) -> GroupQuery<'q> {
        let state = &self.state;
        bind_in_order!(query;
            &self.ids, &self.workflows, &self.revisions, &self.owner_refs, &self.identities,
            &self.fingerprints, &state.states, &state.attention, &state.ended, &self.deadlines,
            &self.created, &state.updated_at, &self.ended_at, &self.inputs, &state.sealed_states,
            &state.sealed_outputs, &self.owners, &self.bindings, &state.unknown,
            activation_generation, key_version)
        .bind(&self.trace_parents)
    }
}

/// The admission statement of `admit_leasing`, over arrays: the
/// checks of each start (what they read comes back, so a refusal is
/// named without another read), then, for each start they pass, the
/// start identity spent (waiting for a concurrent admission of the
/// same identity to settle; of two starts of one identity in the
/// batch, one), the run and its jobs.
///
/// Parameters: `$1`..`$19` the starts' columns, `$20` the activation
/// generation, `$21` the active state key version, `$22` the trace
/// contexts, `$23`..`$35` the new jobs' arrays, `$36` the `wait` column.
fn admission_statement(ns: &str) -> String {
    format!(
            "WITH a AS (
               SELECT * FROM unnest((SELECT $1::text[]), $2::text[], $3::text[], $4::text[],
                   $5::text[], $6::text[], $7::text[], $8::boolean[], $9::boolean[], $10::timestamptz[],
                   $11::timestamptz[], $12::timestamptz[], $13::timestamptz[], $14::bytea[],
                   $15::bytea[], $16::bytea[], $17::bytea[], $18::text[], $19::boolean[],
                   $36::text[], $22::text[])
                 WITH ORDINALITY AS a(run_id, workflow, revision, owner_ref, start_identity,
                   request_fingerprint, state, attention, ended, deadline_at, created_at,
                   updated_at, ended_at, sealed_input, sealed_state, sealed_output, sealed_owner,
                   bindings, effect_unknown, wait, trace_parent, k)),
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
                   sealed_owner, bindings, effect_unknown, wait, trace_parent)
               SELECT a.run_id, a.workflow, a.revision, a.owner_ref, a.start_identity,
                      a.request_fingerprint, a.state, a.attention, a.ended, a.deadline_at,
                      a.created_at, a.updated_at, a.ended_at, $21, $21, a.sealed_input,
                      a.sealed_state, a.sealed_output, a.sealed_owner, a.bindings::jsonb,
                      a.effect_unknown, a.wait, a.trace_parent
                 FROM a WHERE a.run_id IN (SELECT run_id FROM spent)
                ORDER BY a.k
               RETURNING run_id, seq),
             made AS (SELECT a.k, a.run_id FROM a JOIN run ON run.run_id = a.run_id){new_jobs_sql}
             SELECT chk.k AS k, a.run_id, run.seq, chk.held, chk.active, chk.current,
                    chk.conflict, chk.spent, {leased_none}
               FROM chk JOIN a ON a.k = chk.k LEFT JOIN run ON run.run_id = a.run_id
             UNION ALL
             SELECT NULL, ins.run_id, NULL, NULL, NULL, NULL, NULL, NULL, {leased_columns}
               FROM ins WHERE ins.lease_owner IS NOT NULL",
        new_jobs_sql = new_jobs_sql(ns, 23, "made"),
        leased_none = LEASED_NONE,
        leased_columns = LEASED_COLUMNS,
    )
}
