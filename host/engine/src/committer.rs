//! [`Committer`]: what the engine's roles share, behind a small API. It
//! owns the one commit path ([`Committer::feed`], `feed.rs`), the group
//! commits of runs and of `sending` marks ([`crate::group`]), the Program
//! cache ([`Programs`]), the translation of the VM's commands into jobs
//! ([`JobMaker`]), the lease rule ([`LeaseRule`]) and the hand-off of jobs
//! leased on insert ([`HandOff`]). Its fields are private: a role reaches
//! the store only through the ports its own constructor lists, and through
//! this API.

use std::sync::Arc;

use coordinator_ports::clock::Clock;
use coordinator_ports::store::{Commit, Committed, JobQueue, LeaseOnInsert, RunReads, StoreError};

use crate::group::{Group, GROUP_MAX, GROUP_SLOTS};
use crate::handoff::HandOff;
use crate::jobs::JobMaker;
use crate::leases::LeaseRule;
use crate::metrics::Counters;
use crate::programs::Programs;
use crate::run_end_waiters::RunEndWaiters;
use crate::spans::Spans;

mod feed;

pub(crate) use feed::{Fed, Feeding, LedgerUpdate, MarkOnInsert, StoreWait};

/// The parts a [`Committer`] is made of besides its ports.
pub(crate) struct CommitterParts {
    /// The Program cache.
    pub(crate) programs: Programs,
    /// The VM's commands as jobs.
    pub(crate) jobs: JobMaker,
    /// The lease rule.
    pub(crate) leases: LeaseRule,
    /// Counts the runs that end.
    pub(crate) counters: Arc<Counters>,
    /// The spans of the steps a commit ends.
    pub(crate) spans: Arc<Spans>,
    /// The engine clock, read again when a commit is tried anew after a
    /// conflict or an outage (a new step of work).
    pub(crate) clock: Arc<dyn Clock>,
}

/// The one commit path and what every role shares. Held in an `Arc`.
pub(crate) struct Committer {
    /// Commits, `sending` marks, discards.
    queue: Arc<dyn JobQueue>,
    /// The run read again when a commit is tried anew.
    runs: Arc<dyn RunReads>,
    programs: Programs,
    jobs: JobMaker,
    leases: LeaseRule,
    hand_off: HandOff,
    /// The callers waiting for runs' ends, woken by the commits that end
    /// them.
    run_ends: Arc<RunEndWaiters>,
    counters: Arc<Counters>,
    spans: Arc<Spans>,
    clock: Arc<dyn Clock>,
    /// Commits of this process written together ([`crate::group`]).
    commits: Group<(Commit, Option<LeaseOnInsert>), Result<Committed, StoreError>>,
    /// "Mark sending" fences of this process written together: job id,
    /// lease owner, epoch.
    sendings: Group<(u64, String, u64), Result<(), StoreError>>,
}

impl Committer {
    /// The committer writing to `queue`, reading a run again from `runs`
    /// after a conflict, with `parts`.
    pub(crate) fn new(
        queue: Arc<dyn JobQueue>,
        runs: Arc<dyn RunReads>,
        parts: CommitterParts,
    ) -> Self {
        let CommitterParts {
            programs,
            jobs,
            leases,
            counters,
            spans,
            clock,
        } = parts;
        Committer {
            queue,
            runs,
            programs,
            jobs,
            leases,
            hand_off: HandOff::new(),
            run_ends: Arc::new(RunEndWaiters::default()),
            counters,
            spans,
            clock,
            commits: Group::new(GROUP_SLOTS, GROUP_MAX),
            sendings: Group::new(GROUP_SLOTS, GROUP_MAX),
        }
    }

    /// The Program cache.
    pub(crate) fn programs(&self) -> &Programs {
        &self.programs
    }

    /// The VM's commands as jobs.
    pub(crate) fn jobs(&self) -> &JobMaker {
        &self.jobs
    }

    /// This process's lease rule.
    pub(crate) fn leases(&self) -> &LeaseRule {
        &self.leases
    }

    /// The hand-off of jobs leased on insert, and the wake of idle lanes.
    pub(crate) fn hand_off(&self) -> &HandOff {
        &self.hand_off
    }

    /// The callers waiting for runs' ends in this process.
    pub(crate) fn run_ends(&self) -> &Arc<RunEndWaiters> {
        &self.run_ends
    }

    /// Commits through the group commit ([`crate::group`]): written with
    /// the commits of other runs that arrive meanwhile, answered as
    /// [`JobQueue::commit_leasing`] answers.
    ///
    /// # Errors
    /// The store's ([`StoreError::Conflict`] when the run moved).
    ///
    /// [`JobQueue::commit_leasing`]: coordinator_ports::store::JobQueue::commit_leasing
    pub(crate) async fn commit(
        &self,
        commit: Commit,
        lease: Option<LeaseOnInsert>,
    ) -> Result<Committed, StoreError> {
        let queue = self.queue.clone();
        self.commits
            .submit(
                (commit, lease),
                move |batch| {
                    let queue = queue.clone();
                    async move { queue.commit_batch(batch).await }
                },
                || {
                    Err(StoreError::Unavailable(
                        "the group commit ended without an answer".into(),
                    ))
                },
            )
            .await
    }

    /// Marks leased job `job` `sending` through the group commit
    /// ([`JobQueue::mark_sending_batch`]), fenced by `owner`'s lease and
    /// restore epoch `epoch`.
    ///
    /// # Errors
    /// [`StoreError::LeaseLost`] when the request must not leave; the
    /// store's.
    ///
    /// [`JobQueue::mark_sending_batch`]: coordinator_ports::store::JobQueue::mark_sending_batch
    pub(crate) async fn mark_sending(
        &self,
        job: u64,
        owner: &str,
        epoch: u64,
    ) -> Result<(), StoreError> {
        let queue = self.queue.clone();
        self.sendings
            .submit(
                (job, owner.to_owned(), epoch),
                move |batch| {
                    let queue = queue.clone();
                    async move { queue.mark_sending_batch(batch).await }
                },
                || {
                    Err(StoreError::Unavailable(
                        "the group commit ended without an answer".into(),
                    ))
                },
            )
            .await
    }
}
