//! [`FlowControl`] behaviours every implementation keeps (the in-memory
//! form and the PostgreSQL store's): in-flight slots, the rate's bucket,
//! `Retry-After` holds, and the counts `/metrics` shows.

use coordinator_ir::instant::Instant;
use coordinator_ports::flow::{
    instant_after, ConnectionFlow, FlowControl, FlowLimit, SlotAnswer, SlotRequest,
};
use coordinator_runtime::config::CallLimits;

fn at(seconds: i64, millis: u32) -> Instant {
    Instant::from_unix_seconds_and_nanos(1_800_000_000 + seconds, millis * 1_000_000)
}

fn ask(limits: &CallLimits, job: u64, now: Instant) -> SlotRequest<'_> {
    SlotRequest {
        connection: "breg",
        job_id: job,
        limits,
        now,
        held_until: instant_after(&now, 30.0),
    }
}

async fn take(f: &dyn FlowControl, limits: &CallLimits, job: u64, now: Instant) -> SlotAnswer {
    f.take_call_slot(&ask(limits, job, now))
        .await
        .expect("take")
}

/// At most `inFlight` slots are held; a job asking again keeps its own; a
/// slot given back, or whose hold ran out, goes to the next call.
pub async fn in_flight_slots_are_held_until_given_back_or_their_lease_ends(f: &dyn FlowControl) {
    let limits = CallLimits {
        in_flight: Some(2),
        per_second: None,
        burst: None,
    };
    let now = at(0, 0);
    assert_eq!(take(f, &limits, 1, now).await, SlotAnswer::Granted);
    assert_eq!(take(f, &limits, 2, now).await, SlotAnswer::Granted);
    assert_eq!(
        take(f, &limits, 3, now).await,
        SlotAnswer::Wait {
            limit: FlowLimit::InFlight,
            until: at(1, 0)
        }
    );
    assert_eq!(take(f, &limits, 1, now).await, SlotAnswer::Granted);
    // (`waiting` counts waits of jobs that exist: the PostgreSQL store
    // joins its job queue, which holds none of these ids.)
    let counted = f.flows(now).await.expect("flows");
    assert_eq!(counted.get("breg").map(|c| c.in_flight), Some(2));
    f.give_back_call_slot("breg", 1).await.expect("give back");
    assert_eq!(take(f, &limits, 3, now).await, SlotAnswer::Granted);
    assert_eq!(
        f.flows(now).await.expect("flows").get("breg"),
        Some(&ConnectionFlow {
            in_flight: 2,
            waiting: 0
        })
    );
    // Slots never given back end with their hold (30 s).
    assert_eq!(take(f, &limits, 4, at(31, 0)).await, SlotAnswer::Granted);
}

/// The rate lets `burst` calls go at once, then one per token; a quiet
/// spell refills the bucket to the burst, never beyond.
pub async fn the_rate_lets_a_burst_go_then_one_call_per_token(f: &dyn FlowControl) {
    let limits = CallLimits {
        in_flight: None,
        per_second: Some(5.0),
        burst: Some(3),
    };
    let now = at(0, 0);
    for job in 1..=3 {
        assert_eq!(take(f, &limits, job, now).await, SlotAnswer::Granted);
    }
    match take(f, &limits, 4, now).await {
        SlotAnswer::Wait {
            limit: FlowLimit::Rate,
            until,
        } => {
            // One token takes 1/5 s.
            let ms = (until.unix_nanos() - now.unix_nanos()) / 1_000_000;
            assert!((199..=201).contains(&ms), "{ms} ms");
        }
        other => panic!("expected a rate wait, got {other:?}"),
    }
    assert_eq!(take(f, &limits, 4, at(0, 201)).await, SlotAnswer::Granted);
    let later = at(60, 0);
    for job in 5..=7 {
        assert_eq!(take(f, &limits, job, later).await, SlotAnswer::Granted);
    }
    assert!(matches!(
        take(f, &limits, 8, later).await,
        SlotAnswer::Wait {
            limit: FlowLimit::Rate,
            ..
        }
    ));
}

/// A `Retry-After` holds every call of the connection back, whatever its
/// limits; a later hold wins over an earlier one.
pub async fn retry_after_holds_every_call_back_and_a_later_hold_wins(f: &dyn FlowControl) {
    let none = CallLimits {
        in_flight: None,
        per_second: None,
        burst: None,
    };
    f.hold_back_connection("breg", at(10, 0))
        .await
        .expect("hold");
    f.hold_back_connection("breg", at(5, 0))
        .await
        .expect("hold");
    assert_eq!(
        take(f, &none, 1, at(1, 0)).await,
        SlotAnswer::Wait {
            limit: FlowLimit::RetryAfter,
            until: at(10, 0)
        }
    );
    assert_eq!(take(f, &none, 1, at(10, 0)).await, SlotAnswer::Granted);
}
