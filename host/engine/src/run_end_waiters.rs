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
//!
//! Runs another process of the deployment ends reach a wait through a
//! relay the embedding process attaches ([`RunEndWaiters::attach_relay`]:
//! the service's is PostgreSQL `NOTIFY`): once another process is known
//! to hear it ([`RunEndWaiters::others_hear`]), this process says which
//! runs its callers wait for ([`RunEndSignal::Waiting`]), the others keep them
//! ([`RunEndWaiters::waited_elsewhere`]) and say when they end one
//! ([`RunEndSignal::Ended`]), and this process wakes its waits
//! ([`RunEndWaiters::ended_elsewhere`]). Nothing is relayed for a run
//! nobody waits for.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// How many waits one process holds at most; a caller past it is answered
/// at once with the run as it is (the preference ignored, RFC 7240).
pub const MAX_RUN_END_WAITS: usize = 1024;

/// How long a run another process waits for is kept here: the longest
/// wait (60 s) and a margin for the relay's delivery.
const KEPT_FOR_ELSEWHERE: Duration = Duration::from_secs(75);

/// What this process tells the other processes of the deployment through
/// the relay ([`RunEndWaiters::attach_relay`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunEndSignal {
    /// A caller here waits for this run to end.
    Waiting(String),
    /// This process ended this run, which a caller elsewhere waits for.
    Ended(String),
}

/// The registry of waits for runs' ends in this process. Held in an
/// `Arc` by the engine (`Engine::run_ends`) and its committer.
pub struct RunEndWaiters {
    /// The waits registered here plus the runs kept for other processes;
    /// read without the lock on the commit path.
    watched: AtomicUsize,
    /// The waits registered here (the limit counts these).
    waits: AtomicUsize,
    runs: Mutex<Watched>,
    /// Set once by [`RunEndWaiters::close`]: every wait answers at once.
    closing: watch::Sender<bool>,
    /// [`MAX_RUN_END_WAITS`], or less in tests.
    limit: usize,
    /// Where [`RunEndSignal`]s go, once attached.
    relay: OnceLock<mpsc::UnboundedSender<RunEndSignal>>,
    /// This process among the relay's senders (random, per process).
    process: String,
    /// Whether another process of the deployment is known to hear the
    /// relay ([`RunEndWaiters::others_hear`]): waits are told only then.
    others: AtomicBool,
}

/// The runs watched, under one lock.
#[derive(Default)]
struct Watched {
    /// Runs callers of this process wait for, by id.
    here: HashMap<String, RunWaited>,
    /// Runs callers of other processes wait for, with when each was said.
    elsewhere: HashMap<String, Instant>,
    /// When `elsewhere` was last rid of entries past [`KEPT_FOR_ELSEWHERE`].
    pruned: Option<Instant>,
}

/// One run waited for: the signal its end sends, and how many wait on it.
struct RunWaited {
    ended: watch::Sender<bool>,
    waits: usize,
}

/// How a [`RunEndWait`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitOutcome {
    /// The run's end was committed here or elsewhere, or the relay lost
    /// what it was told ([`RunEndWaiters::recheck_all`]): read it again.
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
            watched: AtomicUsize::new(0),
            waits: AtomicUsize::new(0),
            runs: Mutex::new(Watched::default()),
            closing: watch::Sender::new(false),
            limit,
            relay: OnceLock::new(),
            process: uuid::Uuid::new_v4().simple().to_string(),
            others: AtomicBool::new(false),
        }
    }

    /// This process's name among the relay's senders: a signal it reads
    /// back from the relay with this name is its own.
    pub fn process(&self) -> &str {
        &self.process
    }

    /// Sends this process's [`RunEndSignal`]s to `relay` from now on.
    /// `false` (and nothing changes) when one is attached already.
    pub fn attach_relay(&self, relay: mpsc::UnboundedSender<RunEndSignal>) -> bool {
        self.relay.set(relay).is_ok()
    }

    /// Another process of the deployment hears the relay (it said so, or
    /// was told of anew): from now on each run waited for here is told
    /// ([`RunEndSignal::Waiting`]), and those waited for now are told at
    /// once. Until the first call, nothing is told: a lone process sends
    /// nothing for its waits.
    pub fn others_hear(&self) {
        self.others.store(true, Ordering::SeqCst);
        let waited: Vec<String> = self
            .runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .here
            .keys()
            .cloned()
            .collect();
        for run_id in waited {
            self.relay(RunEndSignal::Waiting(run_id));
        }
    }

    /// No other process is known to hear the relay any more: waits are
    /// no longer told.
    pub fn others_gone(&self) {
        self.others.store(false, Ordering::SeqCst);
    }

    /// Registers a wait for run `run_id`'s end. `None` when
    /// [`MAX_RUN_END_WAITS`] waits are held already or the process is
    /// stopping: the caller answers at once. The wait is released when
    /// the returned [`RunEndWait`] is dropped (the request answered, or
    /// its client gone). The first wait on a run here is relayed once
    /// another process hears the relay ([`RunEndWaiters::others_hear`]).
    pub fn register(self: &Arc<Self>, run_id: &str) -> Option<RunEndWait> {
        if *self.closing.borrow() {
            return None;
        }
        if self
            .waits
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.limit).then_some(n + 1)
            })
            .is_err()
        {
            return None;
        }
        // Counted before the run is inserted (and so before the caller
        // reads the run again): a commit that reads zero here ended the
        // run before that read.
        self.watched.fetch_add(1, Ordering::SeqCst);
        let (ended, first) = {
            let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
            let waited = runs
                .here
                .entry(run_id.to_owned())
                .or_insert_with(|| RunWaited {
                    ended: watch::Sender::new(false),
                    waits: 0,
                });
            waited.waits += 1;
            (waited.ended.subscribe(), waited.waits == 1)
        };
        // Read after the insert: a process learnt of meanwhile is told
        // of this wait by `others_hear`, if not here.
        if first && self.others.load(Ordering::SeqCst) {
            self.relay(RunEndSignal::Waiting(run_id.to_owned()));
        }
        Some(RunEndWait {
            waiters: self.clone(),
            run_id: run_id.to_owned(),
            ended,
            closing: self.closing.subscribe(),
        })
    }

    /// Run `run_id` has ended (its end is committed by this process, or
    /// read after another process said a caller waits for it): wakes its
    /// waits here, and relays the end when a caller elsewhere waits for
    /// it. One atomic load when nothing is watched.
    pub fn run_ended(&self, run_id: &str) {
        if self.watched.load(Ordering::SeqCst) == 0 {
            return;
        }
        if self.forget(run_id) {
            self.relay(RunEndSignal::Ended(run_id.to_owned()));
        }
    }

    /// Another process ended run `run_id`: wakes its waits here; relays
    /// nothing.
    pub fn ended_elsewhere(&self, run_id: &str) {
        self.forget(run_id);
    }

    /// A caller of another process waits for run `run_id`: this process
    /// relays its end if it commits it within `KEPT_FOR_ELSEWHERE`. The
    /// caller then reads the run (an end committed before this call) and
    /// calls [`RunEndWaiters::run_ended`] if it has ended.
    pub fn waited_elsewhere(&self, run_id: &str) {
        let now = Instant::now();
        let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        if runs
            .pruned
            .is_none_or(|at| now.duration_since(at) >= KEPT_FOR_ELSEWHERE)
        {
            let before = runs.elsewhere.len();
            runs.elsewhere
                .retain(|_, said| now.duration_since(*said) < KEPT_FOR_ELSEWHERE);
            self.watched
                .fetch_sub(before - runs.elsewhere.len(), Ordering::SeqCst);
            runs.pruned = Some(now);
        }
        if runs.elsewhere.insert(run_id.to_owned(), now).is_none() {
            self.watched.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// The relay may have lost signals (its connection was lost): every
    /// wait here is woken to read its run again, and waits on anew.
    pub fn recheck_all(&self) {
        let here = std::mem::take(
            &mut self
                .runs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .here,
        );
        for waited in here.into_values() {
            waited.ended.send_replace(true);
        }
    }

    /// The process is stopping: every wait answers at once, and no new one
    /// is registered.
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// The waits registered here now.
    pub fn waiting(&self) -> usize {
        self.waits.load(Ordering::SeqCst)
    }

    /// Wakes the waits here on `run_id` and forgets it; whether a caller
    /// elsewhere waited for it.
    fn forget(&self, run_id: &str) -> bool {
        let (here, elsewhere) = {
            let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
            (runs.here.remove(run_id), runs.elsewhere.remove(run_id))
        };
        if let Some(waited) = here {
            waited.ended.send_replace(true);
        }
        if elsewhere.is_some() {
            self.watched.fetch_sub(1, Ordering::SeqCst);
        }
        elsewhere.is_some()
    }

    /// `signal` to the relay, when one is attached.
    fn relay(&self, signal: RunEndSignal) {
        if let Some(relay) = self.relay.get() {
            // A relay gone (its task ended) leaves waits to their N.
            let _ = relay.send(signal);
        }
    }

    /// Wait on `run_id` released.
    fn release(&self, run_id: &str) {
        {
            let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(waited) = runs.here.get_mut(run_id) {
                waited.waits = waited.waits.saturating_sub(1);
                if waited.waits == 0 {
                    runs.here.remove(run_id);
                }
            }
        }
        self.waits.fetch_sub(1, Ordering::SeqCst);
        self.watched.fetch_sub(1, Ordering::SeqCst);
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
        assert!(waiters.runs.lock().expect("lock").here.is_empty());
        assert_eq!(waiters.watched.load(Ordering::SeqCst), 0);
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

    #[tokio::test]
    async fn waits_and_ends_are_relayed_only_where_a_caller_waits() {
        let (tx, mut relayed) = mpsc::unbounded_channel();
        let waiters = Arc::new(RunEndWaiters::default());
        assert!(waiters.attach_relay(tx));
        // An end nobody waits for relays nothing; a wait is not told
        // while no other process hears, and is told when one does.
        waiters.run_ended("run-a");
        let lone = waiters.register("run-z").expect("room");
        assert!(relayed.try_recv().is_err());
        waiters.others_hear();
        assert_eq!(
            relayed.try_recv(),
            Ok(RunEndSignal::Waiting("run-z".into()))
        );
        drop(lone);
        let first = waiters.register("run-a").expect("room");
        let second = waiters.register("run-a").expect("room");
        assert_eq!(
            relayed.try_recv(),
            Ok(RunEndSignal::Waiting("run-a".into()))
        );
        assert!(relayed.try_recv().is_err(), "one signal a run");
        drop((first, second));
        // Another process's caller waits for run-b: its end here is relayed
        // once; one ended elsewhere is not relayed back.
        waiters.waited_elsewhere("run-b");
        waiters.waited_elsewhere("run-c");
        waiters.run_ended("run-b");
        waiters.run_ended("run-b");
        assert_eq!(relayed.try_recv(), Ok(RunEndSignal::Ended("run-b".into())));
        assert!(relayed.try_recv().is_err());
        let mut here = waiters.register("run-c").expect("room");
        let _ = relayed.try_recv();
        waiters.ended_elsewhere("run-c");
        assert_eq!(
            here.wait(Duration::from_secs(3600)).await,
            WaitOutcome::Ended
        );
        assert!(relayed.try_recv().is_err());
        drop(here);
        assert_eq!(waiters.watched.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_recheck_wakes_every_wait_here() {
        let waiters = Arc::new(RunEndWaiters::default());
        let mut a = waiters.register("run-a").expect("room");
        let mut b = waiters.register("run-b").expect("room");
        waiters.recheck_all();
        let long = Duration::from_secs(3600);
        assert_eq!(a.wait(long).await, WaitOutcome::Ended);
        assert_eq!(b.wait(long).await, WaitOutcome::Ended);
        drop((a, b));
        assert_eq!(waiters.waiting(), 0);
        assert_eq!(waiters.watched.load(Ordering::SeqCst), 0);
    }
}
