//! The hand-off of jobs leased on insert: a commit of this process (an
//! admission, a fed event) that inserted jobs leased to it
//! ([`coordinator_ports::store::LeaseOnInsert`]) queues them here with the
//! run as that commit left it, and wakes a worker lane, which carries them
//! out without leasing them or reading the run again.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use coordinator_ir::instant::Instant;
use coordinator_ports::store::{Job, RunRecord};
use tokio::sync::Notify;

/// A job handed from a commit to a worker lane of the same process.
pub(crate) struct HandedOff {
    /// The job, leased to this process.
    pub(crate) job: Job,
    /// The run as the commit that made the job left it.
    pub(crate) run: RunRecord,
    /// When the job's lease runs out.
    pub(crate) lease_until: Instant,
}

/// The queue of handed-off jobs and the wake of idle worker lanes.
pub(crate) struct HandOff {
    queue: Mutex<VecDeque<HandedOff>>,
    /// Wakes an idle worker lane of this process when a job became due
    /// here (an admission, a commit that made the next job, a review
    /// completion), so a due job runs now rather than at the next poll.
    wake: Notify,
    /// Set by [`HandOff::wake_one`]: a job is due in the store that no
    /// hand-off carries, so the next lane woken leases from the store. A
    /// lane woken by a hand-off that finds the queue emptied by another
    /// lane leases nothing (docs/decisions.md "A lane woken for a
    /// hand-off leases nothing from the store").
    store_due: AtomicBool,
}

impl HandOff {
    /// An empty queue.
    pub(crate) fn new() -> Self {
        HandOff {
            queue: Mutex::new(VecDeque::new()),
            wake: Notify::new(),
            store_due: AtomicBool::new(false),
        }
    }

    /// Queues `jobs`, which a commit leased to this process until
    /// `lease_until` and left `run` as it is, and wakes a lane for each.
    pub(crate) fn hand_off(&self, jobs: Vec<Job>, run: &RunRecord, lease_until: Instant) {
        let Ok(mut queue) = self.queue.lock() else {
            return;
        };
        for job in jobs {
            queue.push_back(HandedOff {
                job,
                run: run.clone(),
                lease_until,
            });
            self.wake.notify_one();
        }
    }

    /// Up to `limit` handed-off jobs, oldest first (taken off the queue).
    pub(crate) fn take(&self, limit: usize) -> Vec<HandedOff> {
        match self.queue.lock() {
            Ok(mut queue) => {
                let n = limit.min(queue.len());
                queue.drain(..n).collect()
            }
            Err(_) => Vec::new(),
        }
    }

    /// The handed-off jobs of run `run_id` (taken off the queue).
    pub(crate) fn take_of_run(&self, run_id: &str) -> Vec<HandedOff> {
        match self.queue.lock() {
            Ok(mut queue) => {
                let (mine, rest): (Vec<HandedOff>, Vec<HandedOff>) =
                    queue.drain(..).partition(|h| h.job.run_id == run_id);
                queue.extend(rest);
                mine
            }
            Err(_) => Vec::new(),
        }
    }

    /// Wakes one idle worker lane of this process ([`HandOff::woken`]) to
    /// lease from the store: a job is due there that no hand-off carries
    /// (a commit or admission that could not lease it on insert, a timer,
    /// a job brought forward, a lane's full batch). A wake while no lane
    /// waits is kept for the next lane that does.
    pub(crate) fn wake_one(&self) {
        self.store_due.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    /// Wakes one idle worker lane for the hand-off queue only (a lane's
    /// full batch of handed-off jobs: more may be queued).
    pub(crate) fn wake_for_hand_off(&self) {
        self.wake.notify_one();
    }

    /// Whether a [`HandOff::wake_one`] asked for a store lease that no
    /// lane has made yet.
    pub(crate) fn store_due(&self) -> bool {
        self.store_due.load(Ordering::Acquire)
    }

    /// Takes the request of [`HandOff::wake_one`]: true when one was
    /// pending (the caller leases from the store now).
    pub(crate) fn take_store_due(&self) -> bool {
        self.store_due.swap(false, Ordering::AcqRel)
    }

    /// Waits for [`HandOff::wake_one`] (at once when a wake is kept).
    pub(crate) async fn woken(&self) {
        self.wake.notified().await;
    }
}
