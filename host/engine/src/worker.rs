//! One role of the engine: the worker. [`Worker::tick`] takes the jobs
//! this process's commits handed off, or leases the due jobs, and carries
//! each out through the `JobRunner` (`job_runner.rs`); the server's lanes
//! call it, woken by the hand-off or by the due time of the next job.

use std::collections::BTreeMap;
use std::sync::Arc;

use coordinator_ports::clock::whole_second;
use coordinator_ports::flow::{ConnectionFlow, FlowControl};
use coordinator_ports::store::{Job, JobQueue, LeaseRequest, StoreError};

use crate::flow_gate::FlowGate;
use crate::handoff::HandedOff;
use crate::health::Health;
use crate::job_runner::{JobRunner, WorkerPorts};
use crate::parts::Parts;

/// What one [`Worker::tick_lane`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaneTick {
    /// How many jobs it took.
    pub taken: usize,
    /// Whether they were leased from the store (false: handed off by this
    /// process's commits, or none).
    pub leased: bool,
}

/// The worker: leases due jobs and carries each out. `Send + Sync`.
pub struct Worker {
    /// Leases jobs, gives handed-off ones back, tells the next due time.
    queue: Arc<dyn JobQueue>,
    /// Flow control of the calls to each connection (read for `/metrics`).
    flow: Arc<FlowGate>,
    /// Carries out one job.
    runner: Arc<JobRunner>,
    parts: Parts,
    /// Jobs one tick takes at most.
    batch: usize,
}

impl Worker {
    /// The worker over `ports` with `parts`, `batch` jobs a tick, waiting
    /// an outage out through `health`, starting a job only while
    /// `request_budget_seconds` of its lease are left. Its flow gate uses
    /// an in-memory flow control until the deployment's is attached.
    pub(crate) fn new(
        ports: WorkerPorts,
        parts: Parts,
        health: Arc<Health>,
        batch: usize,
        request_budget_seconds: i64,
    ) -> Self {
        let flow = Arc::new(FlowGate::new());
        let queue = ports.queue.clone();
        let runner = Arc::new(JobRunner::new(
            ports,
            flow.clone(),
            parts.clone(),
            health,
            request_budget_seconds,
        ));
        Worker {
            queue,
            flow,
            runner,
            parts,
            batch,
        }
    }

    /// The job runner, for operator actions that carry a job out at once.
    pub(crate) fn runner(&self) -> Arc<JobRunner> {
        self.runner.clone()
    }

    /// Uses the deployment's shared flow control from now on; `false` when
    /// one was attached already.
    pub(crate) fn attach_flow_control(&self, flow: Arc<dyn FlowControl>) -> bool {
        self.flow.attach(flow)
    }

    /// One worker step: carries out the jobs this process's commits handed
    /// off, or else leases the due jobs and carries each out. Returns how
    /// many jobs it took. Under the restore hold, and on a
    /// `--recovery-only` instance, only receipt lookups are leased (reads,
    /// never dispatches). A fenced engine leases nothing, nor does one
    /// whose clock is out of its bound
    /// ([`Health::clock_out_of_service`](crate::Health::clock_out_of_service)).
    ///
    /// # Errors
    /// The store's; [`StoreError::LeaseIncompatible`] when a restore hold
    /// was placed after this process started (it is fenced from then on).
    pub async fn tick(&self) -> Result<usize, StoreError> {
        self.tick_lane(true).await.map(|tick| tick.taken)
    }

    /// [`Worker::tick`] for a worker lane: the handed-off jobs first, as
    /// `tick`; without any, the store is leased from only when
    /// `lease_store` (a lane's safety tick, or the batch after a full one
    /// leased) or when a [`Worker::wake_one`] asked for it since the last
    /// lease. A lane woken for a hand-off that another lane emptied first
    /// so costs no statement.
    ///
    /// # Errors
    /// As [`Worker::tick`].
    pub async fn tick_lane(&self, lease_store: bool) -> Result<LaneTick, StoreError> {
        if self.parts.fence.fenced() {
            return Ok(LaneTick::default());
        }
        // Jobs this process's own commits leased to it come first: no lease
        // statement and no re-read of the run.
        let hand_off = self.parts.committer.hand_off();
        let handed = hand_off.take(self.batch);
        if !handed.is_empty() {
            let n = handed.len();
            let mut by_run: Vec<(String, Vec<HandedOff>)> = Vec::new();
            for h in handed {
                match by_run.iter_mut().find(|(run, _)| *run == h.job.run_id) {
                    Some((_, group)) => group.push(h),
                    None => by_run.push((h.job.run_id.clone(), vec![h])),
                }
            }
            futures_util::future::join_all(by_run.into_iter().map(|(_, group)| async move {
                for h in group {
                    self.runner
                        .carry_out(h.job, h.lease_until, Some(h.run))
                        .await;
                }
            }))
            .await;
            return Ok(LaneTick {
                taken: n,
                leased: false,
            });
        }
        if !hand_off.take_store_due() && !lease_store {
            return Ok(LaneTick::default());
        }
        if self.parts.fence.clock_out_of_service() {
            // This process's clock is beyond its bound: it leases nothing
            // (docs/operations.md "Clock skew").
            return Ok(LaneTick::default());
        }
        let leases = self.parts.committer.leases();
        let epoch = leases.lease_epoch().await?;
        let now = self.parts.clock.now();
        let lease_until = leases.lease_until(&now);
        let jobs = self
            .queue
            .lease(&LeaseRequest {
                owner: leases.owner(),
                now,
                lease_until,
                limit: self.batch,
                epoch,
                run_id: None,
                receipt_lookups_only: false,
            })
            .await
            .map_err(|e| self.parts.fence.fence_if_incompatible(e))?;
        let n = jobs.len();
        // Jobs of one run are carried out in lease order, one after
        // another (each sees the state its predecessor committed); jobs of
        // different runs go concurrently, so one slow product call does
        // not hold up the others.
        let mut by_run: Vec<(String, Vec<Job>)> = Vec::new();
        for job in jobs {
            match by_run.iter_mut().find(|(run, _)| *run == job.run_id) {
                Some((_, group)) => group.push(job),
                None => by_run.push((job.run_id.clone(), vec![job])),
            }
        }
        futures_util::future::join_all(by_run.into_iter().map(|(_, group)| async move {
            for job in group {
                self.runner.carry_out(job, lease_until, None).await;
            }
        }))
        .await;
        Ok(LaneTick {
            taken: n,
            leased: true,
        })
    }

    /// Ticks until a tick takes nothing (at most `max_ticks` times);
    /// returns the jobs taken in all. For tests and for draining.
    ///
    /// # Errors
    /// The store's.
    pub async fn run_until_idle(&self, max_ticks: usize) -> Result<usize, StoreError> {
        let mut total = 0;
        for _ in 0..max_ticks {
            let n = self.tick().await?;
            total += n;
            if n == 0 {
                break;
            }
        }
        Ok(total)
    }

    /// How many jobs one [`Worker::tick`] takes at most.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Reads the store's restore epoch and works under it from now on (the
    /// `coordinator` binary calls it once at startup, so the epoch is the
    /// one the process started under; else the first lease adopts it). A
    /// later call changes nothing. Returns the epoch this process works
    /// under.
    ///
    /// # Errors
    /// The store's.
    pub async fn adopt_restore_epoch(&self) -> Result<u64, StoreError> {
        self.parts.committer.leases().adopt_restore_epoch().await
    }

    /// Wakes one idle worker lane of this process ([`Worker::woken`]) to
    /// lease from the store ([`Worker::tick_lane`]); a wake while no lane
    /// waits is kept for the next lane that does.
    pub fn wake_one(&self) {
        self.parts.committer.hand_off().wake_one();
    }

    /// Wakes one idle worker lane for the handed-off jobs only
    /// ([`Worker::tick_lane`] without a store lease): after a lane's full
    /// batch of them.
    pub fn wake_for_hand_off(&self) {
        self.parts.committer.hand_off().wake_for_hand_off();
    }

    /// Whether a [`Worker::wake_one`] asked for a store lease that no lane
    /// has made yet.
    pub fn store_lease_pending(&self) -> bool {
        self.parts.committer.hand_off().store_due()
    }

    /// Waits for [`Worker::wake_one`] or a job handed off (at once when a
    /// wake is kept).
    pub async fn woken(&self) {
        self.parts.committer.hand_off().woken().await;
    }

    /// Gives back the leases of handed-off jobs no lane has started (at
    /// shutdown), so that another process takes them at once rather than
    /// when their leases run out. Errors are logged: the leases then run
    /// out by themselves.
    pub async fn release_handed(&self) {
        let owner = self.parts.committer.leases().owner();
        for h in self.parts.committer.hand_off().take(usize::MAX) {
            if let Err(e) = self
                .queue
                .release(h.job.id, owner, h.job.due_at, None)
                .await
            {
                tracing::warn!(job = h.job.id, error = %e, "handed-off job not released; its lease will run out");
            }
        }
    }

    /// How long until the earliest due job no lease holds (or run
    /// deadline not yet a job, [`JobQueue::next_due`]) is due by the engine
    /// clock: zero when one is due now, `None` when there is none. The
    /// server's due timer sleeps that long, then wakes a lane.
    ///
    /// # Errors
    /// The store's.
    ///
    /// [`JobQueue::next_due`]: coordinator_ports::store::JobQueue::next_due
    pub async fn next_due_in(&self) -> Result<Option<std::time::Duration>, StoreError> {
        let Some(due) = self.queue.next_due().await? else {
            return Ok(None);
        };
        let now = whole_second(&self.parts.clock.now());
        let seconds = u64::try_from(now.seconds_until(&due)).unwrap_or(0);
        Ok(Some(std::time::Duration::from_secs(seconds)))
    }

    /// Each limited connection's calls in flight and waiting now, from
    /// the shared flow control: every connection of the runtime file with
    /// `limits` (zero when it saw no call yet), and any other the flow
    /// control holds (a `Retry-After` of a connection without `limits`).
    ///
    /// # Errors
    /// The flow control's (the store's).
    pub async fn connection_flows(&self) -> Result<BTreeMap<String, ConnectionFlow>, StoreError> {
        let mut flows = self.flow.port().flows(self.parts.clock.now()).await?;
        for (name, connection) in self.parts.connections.iter() {
            if connection.limits().is_some() {
                flows.entry(name.clone()).or_default();
            }
        }
        Ok(flows)
    }
}
