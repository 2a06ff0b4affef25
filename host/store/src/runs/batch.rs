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
//! Where: `batch/commits.rs` and `batch/admissions.rs` build and run the
//! two statements that write runs, `batch/inserted_jobs.rs` the new jobs'
//! arrays and CTEs both share, `batch/sending.rs` the `sending` mark; here
//! what every group shares: an item prepared ([`GroupItem`]), the columns
//! written from its state, its answer read back in order
//! ([`GroupAnswer`]), and a failed group written again one item at a time
//! ([`in_one_statement`]).
//!
//! [`RunAdmission::admit_batch`]: coordinator_ports::store::RunAdmission::admit_batch
//! [`JobQueue::commit_batch`]: coordinator_ports::store::JobQueue::commit_batch
//! [`JobQueue::mark_sending_batch`]: coordinator_ports::store::JobQueue::mark_sending_batch

/// `query` with each value bound in turn (`query.bind(a).bind(b)…`): a
/// group statement's parameters, listed in their `$n` order.
macro_rules! bind_in_order {
    ($query:expr; $($value:expr),+ $(,)?) => {
        $query$(.bind($value))+
    };
}

mod admissions;
mod commits;
mod inserted_jobs;
mod sending;

use std::collections::BTreeMap;

use coordinator_ports::store::{
    Commit, Job, LeaseOnInsert, NewJob, NewRun, StoreError as PortError,
};
use coordinator_vm::{RunState, RunStatus};
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::{Postgres, Row};
use time::OffsetDateTime;

use super::columns::{at_instant, effect_unknown, wait_column};
use super::errors::pdb;
use super::new_jobs::JobValues;
use super::Store;
use inserted_jobs::{JobArrays, LeasedRows};

/// A group statement as its parameters are bound.
type GroupQuery<'q> = sqlx::query::Query<'q, Postgres, PgArguments>;

/// One item of a group statement: a run written with its state and the
/// new jobs that state asks for.
trait GroupItem {
    /// The run the item writes, its state as written, and the jobs that
    /// state asks for (inserted only while the run has not ended).
    fn parts(&self) -> (&str, &RunState, &[NewJob]);
}

impl GroupItem for Commit {
    fn parts(&self) -> (&str, &RunState, &[NewJob]) {
        (&self.run_id, &self.state, &self.jobs)
    }
}

impl GroupItem for NewRun {
    fn parts(&self) -> (&str, &RunState, &[NewJob]) {
        (&self.id, &self.state, &self.jobs)
    }
}

/// One item of a group as bound: the item, the jobs it inserts (none once
/// its run has ended) and what [`Store::job_values`] made of them.
struct Prepared<'a, T> {
    item: &'a T,
    jobs: &'a [NewJob],
    values: Vec<JobValues<'a>>,
}

impl Store {
    /// The items of a group as bound, in order, each new job with the lease
    /// its item asked for ([`Store::job_values`]).
    fn prepare_group<'a, T: GroupItem>(
        &self,
        items: &'a [(T, Option<LeaseOnInsert>)],
    ) -> Vec<Prepared<'a, T>> {
        items
            .iter()
            .map(|(item, lease)| {
                let (run_id, state, new_jobs) = item.parts();
                let jobs: &[NewJob] = if state.status.is_terminal() {
                    &[]
                } else {
                    new_jobs
                };
                let mark = lease.as_ref().and_then(|l| l.mark_sending);
                let values = jobs
                    .iter()
                    .enumerate()
                    .map(|(index, job)| {
                        let mut values = self.job_values(run_id, job, lease.as_ref());
                        // Marked `sending` only when leased on insert to the
                        // lane that writes it next.
                        values.sending = mark == Some(index);
                        values
                    })
                    .collect();
                Prepared { item, jobs, values }
            })
            .collect()
    }
}

/// The columns both group statements write from a run's state and its new
/// jobs, one array element per item (its jobs in [`JobArrays`]).
#[derive(Default)]
struct StateColumns<'a> {
    states: Vec<&'static str>,
    attention: Vec<bool>,
    ended: Vec<bool>,
    updated_at: Vec<OffsetDateTime>,
    sealed_states: Vec<Vec<u8>>,
    sealed_outputs: Vec<Option<Vec<u8>>>,
    unknown: Vec<bool>,
    /// The `wait` column, bound last (after the new jobs' arrays).
    waits: Vec<Option<&'static str>>,
    new_jobs: JobArrays<'a>,
}

impl<'a> StateColumns<'a> {
    /// Adds the item `index` (0-based) of a group: its state's columns, its
    /// state and output sealed, and its new jobs.
    fn push<T: GroupItem>(&mut self, store: &Store, index: usize, prepared: &'a Prepared<'a, T>) {
        let (id, state, _) = prepared.item.parts();
        let status = state.status;
        self.states.push(status.as_str());
        self.attention.push(status == RunStatus::Attention);
        self.ended.push(status.is_terminal());
        self.updated_at.push(at_instant(&state.now));
        self.sealed_states
            .push(store.seal_json(id, "state", "", state));
        self.sealed_outputs.push(
            state
                .output
                .as_ref()
                .map(|o| store.seal_json(id, "output", "", o)),
        );
        self.unknown.push(effect_unknown(state));
        self.waits.push(wait_column(state));
        self.new_jobs.push(index, &prepared.values);
    }

    /// Runs a group statement whose item columns `query` binds: the new
    /// jobs' thirteen arrays follow them, and the `wait` column comes last.
    async fn fetch<'q>(
        &'q self,
        store: &Store,
        query: GroupQuery<'q>,
    ) -> Result<Vec<PgRow>, sqlx::Error> {
        self.new_jobs
            .bind(query)
            .bind(&self.waits)
            .fetch_all(&store.db)
            .await
    }
}

/// The columns a group statement writes for each of its items beside
/// those written from the item's state ([`StateColumns`]).
trait ItemColumns<'a, T>: Default {
    /// Adds one item's own columns (one array element each).
    fn push_item(&mut self, store: &Store, item: &'a T);
    /// The columns written from the items' states and their new jobs.
    fn state_columns(&mut self) -> &mut StateColumns<'a>;
}

/// The columns of the `prepared` items of a group, one array element per
/// item in order (ordinal k from 1), their new jobs in [`JobArrays`].
fn columns_of<'a, T: GroupItem, C: ItemColumns<'a, T>>(
    store: &Store,
    prepared: &'a [Prepared<'a, T>],
) -> C {
    let mut columns = C::default();
    for (i, p) in prepared.iter().enumerate() {
        columns.push_item(store, p.item);
        columns.state_columns().push(store, i, p);
    }
    columns
}

/// A group statement's answer as read: each item's row by its ordinal `k`
/// (from 1), as written (`Ok(W)`) or not (`Err(N)`, what the row says
/// why), and the jobs the statement inserted leased.
struct GroupAnswer<W, N> {
    items: BTreeMap<usize, Result<W, N>>,
    leased: LeasedRows,
}

/// An item of a group as answered: written (what its row returned, and the
/// jobs leased on insert) or not (what its row said, `None` when the
/// statement returned no row for it).
type ItemAnswer<W, N> = Result<(W, Vec<Job>), Option<N>>;

impl<W, N> GroupAnswer<W, N> {
    /// Reads a group statement's rows: a row with a `k` is that item's
    /// (read by `item_row`), a row without one is a job leased on insert.
    fn read(
        rows: &[PgRow],
        item_row: impl Fn(&PgRow) -> Result<Result<W, N>, sqlx::Error>,
    ) -> Result<Self, sqlx::Error> {
        let mut answer = GroupAnswer {
            items: BTreeMap::new(),
            leased: LeasedRows::default(),
        };
        for row in rows {
            match row.try_get::<Option<i64>, _>("k")? {
                Some(k) => {
                    answer
                        .items
                        .insert(usize::try_from(k).unwrap_or(0), item_row(row)?);
                }
                None => answer.leased.read(row)?,
            }
        }
        Ok(answer)
    }

    /// The items of the group in order, each as answered; a written item
    /// takes the jobs leased on insert for its run, in its jobs' order.
    fn in_order<T: GroupItem>(mut self, prepared: &[Prepared<'_, T>]) -> Vec<ItemAnswer<W, N>> {
        prepared
            .iter()
            .enumerate()
            .map(|(i, p)| match self.items.remove(&(i + 1)) {
                Some(Ok(written)) => {
                    let (run_id, _, _) = p.item.parts();
                    let leased = self.leased.take(run_id, p.jobs, &p.values);
                    Ok((written, leased))
                }
                Some(Err(not_written)) => Err(Some(not_written)),
                None => Err(None),
            })
            .collect()
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
