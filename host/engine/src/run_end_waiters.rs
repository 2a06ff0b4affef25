//! [`RunEndWaiters`]: the callers waiting for runs to end
//! (`GET /v1/runs/{run}` with `Prefer: wait=N`), by run id, woken when
//! this process commits a run's end, never by reading the store again on
//! a timer (docs/decisions.md "Waiting for a run's end").
//!
//! The commit path calls [`RunEndWaiters::run_ended`] once per run it
//! ends (`committer/feed.rs`). When nobody waits that is one atomic load;
//! otherwise one hash lookup under a lock. A wait is registered
//! ([`RunEndWaiters::register`]) *before* the caller reads the run again,
//! so an end committed after that read always wakes it, and one committed
//! before it is seen by the read.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

/// How many waits one process holds at most; a caller past it is answered
/// at once with the run as it is (the preference ignored, RFC 7240).
pub const MAX_RUN_END_WAITS: usize = 1024;

/// The registry of waits for runs' ends in this process. Held in an
/// `Arc` by the engine (`Engine::run_ends`) and its committer.
pub struct RunEndWaiters {
    /// The waits registered now; read without the lock on the commit path.
    waits: AtomicUsize,
    /// The runs waited for, by id.
    runs: Mutex<HashMap<String, RunWaited>>,
    /// Set once by [`RunEndWaiters::close`]: every wait answers at once.
    closing: watch::Sender<bool>,
    /// [`MAX_RUN_END_WAITS`], or less in tests.
    limit: usize,
}

/// One run waited for: the signal its end sends, and how many wait on it.
struct RunWaited {
    ended: watch::Sender<bool>,
    waits: usize,
}

/// How a [`RunEndWait`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitOutcome {
    /// This process committed the run's end (or was told of one,
    /// [`RunEndWaiters::run_ended`]).
    Ended,
    /// The time given passed first.
    TimedOut,
    /// The process is stopping ([`RunEndWaiters::close`]).
    Closing,
}

impl Default for RunEndWaiters {
    fn default() -> Self {
        RunEndWaiters::with_limit(MAX_RUN_END_WAITS)
    }
}

impl RunEndWaiters {
    /// A registry holding at most `limit` waits at once.
    pub fn with_limit(limit: usize) -> Self {
        RunEndWaiters {
            waits: AtomicUsize::new(0),
            runs: Mutex::new(HashMap::new()),
            closing: watch::Sender::new(false),
            limit,
        }
    }

    /// Registers a wait for run `run_id`'s end. `None` when
    /// [`MAX_RUN_END_WAITS`] waits are held already or the process is
    /// stopping: the caller answers at once. The wait is released when
    /// the returned [`RunEndWait`] is dropped (the request answered, or
    /// its client gone).
    pub fn register(self: &Arc<Self>, run_id: &str) -> Option<RunEndWait> {
        if *self.closing.borrow() {
            return None;
        }
        // Counted before the run is inserted (and so before the caller
        // reads the run again): a commit that reads zero here ended the
        // run before that read.
        if self
            .waits
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.limit).then_some(n + 1)
            })
            .is_err()
        {
            return None;
        }
        let ended = {
            let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
            let waited = runs.entry(run_id.to_owned()).or_insert_with(|| RunWaited {
                ended: watch::Sender::new(false),
                waits: 0,
            });
            waited.waits += 1;
            waited.ended.subscribe()
        };
        Some(RunEndWait {
            waiters: self.clone(),
            run_id: run_id.to_owned(),
            ended,
            closing: self.closing.subscribe(),
        })
    }

    /// Run `run_id` has ended (its end is committed): wakes its waits.
    /// One atomic load when nobody waits in this process.
    pub fn run_ended(&self, run_id: &str) {
        if self.waits.load(Ordering::SeqCst) == 0 {
            return;
        }
        let waited = self
            .runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(run_id);
        if let Some(waited) = waited {
            waited.ended.send_replace(true);
        }
    }

    /// The process is stopping: every wait answers at once, and no new one
    /// is registered.
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// The waits registered now.
    pub fn waiting(&self) -> usize {
        self.waits.load(Ordering::SeqCst)
    }

    /// Wait on `run_id` released.
    fn release(&self, run_id: &str) {
        {
            let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(waited) = runs.get_mut(run_id) {
                waited.waits = waited.waits.saturating_sub(1);
                if waited.waits == 0 {
                    runs.remove(run_id);
                }
            }
        }
        self.waits.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One registered wait for a run's end; released when dropped.
pub struct RunEndWait {
    waiters: Arc<RunEndWaiters>,
    run_id: String,
    ended: watch::Receiver<bool>,
    closing: watch::Receiver<bool>,
}

impl RunEndWait {
    /// Waits until the run ends, `within` passes or the process stops,
    /// whichever comes first.
    pub async fn wait(&mut self, within: Duration) -> WaitOutcome {
        let ended = self.ended.wait_for(|ended| *ended);
        let closing = self.closing.wait_for(|closing| *closing);
        tokio::select! {
            // A sender dropped is the run's entry removed: by its end.
            _ = ended => WaitOutcome::Ended,
            Ok(_) = closing => WaitOutcome::Closing,
            _ = tokio::time::sleep(within) => WaitOutcome::TimedOut,
        }
    }
}

impl Drop for RunEndWait {
    fn drop(&mut self) {
        self.waiters.release(&self.run_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_end_wakes_every_wait_on_the_run_and_no_other() {
        let waiters = Arc::new(RunEndWaiters::default());
        let mut first = waiters.register("run-a").expect("room");
        let mut second = waiters.register("run-a").expect("room");
        let mut other = waiters.register("run-b").expect("room");
        assert_eq!(waiters.waiting(), 3);
        waiters.run_ended("run-a");
        let long = Duration::from_secs(3600);
        assert_eq!(first.wait(long).await, WaitOutcome::Ended);
        assert_eq!(second.wait(long).await, WaitOutcome::Ended);
        assert_eq!(
            other.wait(Duration::from_millis(1)).await,
            WaitOutcome::TimedOut
        );
        drop((first, second));
        assert_eq!(waiters.waiting(), 1);
        drop(other);
        assert_eq!(waiters.waiting(), 0);
        assert!(waiters.runs.lock().expect("lock").is_empty());
    }

    #[tokio::test]
    async fn a_dropped_wait_leaves_the_others_on_the_run() {
        let waiters = Arc::new(RunEndWaiters::default());
        let first = waiters.register("run-a").expect("room");
        let mut second = waiters.register("run-a").expect("room");
        drop(first);
        assert_eq!(waiters.waiting(), 1);
        waiters.run_ended("run-a");
        assert_eq!(
            second.wait(Duration::from_secs(3600)).await,
            WaitOutcome::Ended
        );
    }

    #[tokio::test]
    async fn the_limit_and_the_stop_refuse_new_waits_and_the_stop_answers_the_held_ones() {
        let waiters = Arc::new(RunEndWaiters::with_limit(1));
        let mut held = waiters.register("run-a").expect("room");
        assert!(waiters.register("run-b").is_none(), "over the limit");
        waiters.close();
        assert_eq!(
            held.wait(Duration::from_secs(3600)).await,
            WaitOutcome::Closing
        );
        drop(held);
        assert!(waiters.register("run-b").is_none(), "stopping");
    }
}
