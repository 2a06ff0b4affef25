//! The in-process worker loop: [`WORKER_LANES`] lanes that lease due jobs
//! from the engine and carry them out, and a due-time timer that wakes a
//! lane when the store's earliest job falls due. `coordinator` starts it
//! once the store is open ([`work`]); it holds no HTTP code.

use std::sync::Arc;
use std::time::Duration;

use coordinator_engine::Engine;
use coordinator_ports::StoreError;

/// How many worker lanes one process runs ([`work`]). Sixteen, with
/// four jobs each, keep the calls of the peer
/// benchmark's 16 clients flowing on 2 cores; eight left a queue of
/// handed-off jobs behind the admissions (docs/decisions.md "Sixteen
/// lanes and a thread per core").
pub const WORKER_LANES: usize = 16;

/// The worker: [`WORKER_LANES`] lanes and a due-time timer, until
/// `shutdown` says stop.
///
/// A lane leases due jobs ([`Worker::tick`](coordinator_engine::Worker::tick)) and carries them out; leases
/// keep the lanes (and other processes) from taking the same job, so a
/// product call that hangs until its timeout holds up one lane, not the
/// process. An idle lane sleeps until woken ([`Worker::woken`](coordinator_engine::Worker::woken): an
/// admission, a commit that made the run's next job, or a review
/// completion of this process wakes one lane at once), or for
/// `safety_poll` at most (which finds what no wake announced: a lease that
/// ran out after a crash). A lane that leased a full batch leases again at
/// once and wakes another lane, so a backlog spreads over the lanes. A
/// lane woken for a hand-off that another lane emptied first leases
/// nothing from the store ([`Worker::tick_lane`](coordinator_engine::Worker::tick_lane)).
///
/// The timer (`due_timer`) sleeps until the earliest due job in the
/// store (the due-time index), then wakes a lane: timers and jobs other
/// processes made due are taken on time, without polling by every lane.
///
/// A store error is logged as `store-unavailable` and the lane backs off
/// (up to 5 s). Returns before `shutdown` only when the engine is fenced
/// ([`Health::fenced`](coordinator_engine::Health::fenced): a restore hold was placed after this process
/// started), so the caller can stop the process.
pub async fn work(
    engine: Arc<Engine>,
    safety_poll: Duration,
    shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let timer = tokio::spawn(due_timer(engine.clone(), safety_poll, shutdown.clone()));
    futures_util::future::join_all(
        (0..WORKER_LANES).map(|_| lane(engine.clone(), safety_poll, shutdown.clone())),
    )
    .await;
    timer.abort();
    engine.worker.release_handed().await;
}

/// Sleeps until the store's earliest due job ([`Worker::next_due_in`](coordinator_engine::Worker::next_due_in); at
/// most `safety_poll`), then wakes a lane when it is due. Errors are left
/// to the lanes to log.
async fn due_timer(
    engine: Arc<Engine>,
    safety_poll: Duration,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        if *shutdown.borrow() || engine.health.fenced() {
            return;
        }
        let pause = match engine.worker.next_due_in().await {
            Ok(Some(wait)) if wait.is_zero() => {
                engine.worker.wake_one();
                safety_poll
            }
            Ok(Some(wait)) => wait.min(safety_poll),
            Ok(None) | Err(_) => safety_poll,
        };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = shutdown.changed() => {}
        }
    }
}

async fn lane(
    engine: Arc<Engine>,
    safety_poll: Duration,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    // Consecutive failed ticks: the lane backs off (up to 5 s) and logs the
    // first failure and every 20th, so an outage does not flood the log.
    let mut failures: u32 = 0;
    // Whether the next tick leases from the store even when no wake asked
    // for it: at the start, after a safety pause, after a full batch
    // leased. A lane woken for a hand-off it finds emptied leases nothing.
    let mut lease_store = true;
    loop {
        if *shutdown.borrow() || engine.health.fenced() {
            return;
        }
        let full_batch = match engine.worker.tick_lane(lease_store).await {
            Ok(tick) => {
                failures = 0;
                lease_store = tick.leased;
                tick.taken >= engine.worker.batch()
            }
            // Logged by the engine (`restore.lease-incompatible`); the
            // lane stops.
            Err(_) if engine.health.fenced() => return,
            Err(e) => {
                failures = failures.saturating_add(1);
                if failures == 1 || failures.is_multiple_of(20) {
                    // A value this process cannot open (a state key
                    // version its runtime file lacks, during a rolling key
                    // rotation) keeps its own code: it is no outage.
                    let code = match &e {
                        StoreError::Refused { code, .. } => code,
                        _ => "store-unavailable",
                    };
                    tracing::error!(code, error = %e, failures, "worker tick failed");
                }
                false
            }
        };
        if full_batch {
            // More may be due (or handed off): take again, and let another
            // lane help.
            if lease_store {
                engine.worker.wake_one();
            } else {
                engine.worker.wake_for_hand_off();
            }
            continue;
        }
        if failures == 0 && engine.worker.store_lease_pending() {
            // A store wake arrived while this lane carried out handed-off
            // jobs: it takes it now.
            lease_store = false;
            continue;
        }
        let pause = if failures == 0 {
            safety_poll
        } else {
            safety_poll
                .saturating_mul(1 << failures.min(5))
                .min(Duration::from_secs(5))
        };
        tokio::select! {
            _ = tokio::time::sleep(pause) => lease_store = true,
            _ = engine.worker.woken(), if failures == 0 => lease_store = false,
            _ = shutdown.changed() => {}
        }
    }
}
