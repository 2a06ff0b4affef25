//! [`FlowControl`] behaviours every implementation keeps (the in-memory
//! form and the PostgreSQL store's): in-flight slots, the rate's bucket,
//! `Retry-After` holds, and the counts `/metrics` shows.

use coordinator_ir::instant::Instant;
use coordinator_ports::flow::{
    instant_after, ConnectionFlow, FlowControl, FlowLimit, SlotAnswer, SlotRequest, SlotsAsk,
    TokensAsk,
};

fn at(seconds: i64, millis: u32) -> Instant {
    Instant::from_unix_seconds_and_nanos(1_800_000_000 + seconds, millis * 1_000_000)
}

fn ask(
    holder: u64,
    slots: Option<SlotsAsk>,
    tokens: Option<TokensAsk>,
    now: Instant,
) -> SlotRequest<'static> {
    SlotRequest {
        connection: "breg",
        holder,
        job_id: holder * 100,
        now,
        held_until: instant_after(&now, 30.0),
        slots,
        tokens,
    }
}

/// An in-flight ask of a limit of `limit` slots.
fn slots(limit: u32, needed: u32, wanted: u32) -> Option<SlotsAsk> {
    Some(SlotsAsk {
        limit,
        needed,
        wanted,
    })
}

/// A rate ask of 5 tokens a second, a bucket of 3.
fn tokens(needed: u32, wanted: u32) -> Option<TokensAsk> {
    Some(TokensAsk {
        per_second: 5.0,
        capacity: 3.0,
        needed,
        wanted,
    })
}

async fn take(f: &dyn FlowControl, request: SlotRequest<'_>) -> SlotAnswer {
    f.take_call_slot(&request).await.expect("take")
}

fn granted(slots: u32, tokens: u32) -> SlotAnswer {
    SlotAnswer::Granted { slots, tokens }
}

/// The holders together never hold more than `inFlight` slots: a holder
/// gets as many as it wants while the others leave room, at least what it
/// needs or it waits; slots given back, or whose hold ran out, go to the
/// next holder.
pub async fn in_flight_slots_are_held_until_given_back_or_their_lease_ends(f: &dyn FlowControl) {
    let now = at(0, 0);
    // Holder 1 needs 1, would keep 3 more in reserve: it gets all 4.
    assert_eq!(
        take(f, ask(1, slots(6, 1, 4), None, now)).await,
        granted(4, 0)
    );
    // Holder 2 wants 4 but only 2 are left: it gets 2.
    assert_eq!(
        take(f, ask(2, slots(6, 1, 4), None, now)).await,
        granted(2, 0)
    );
    // Holder 3 needs 1 and none is left: it waits a second.
    assert_eq!(
        take(f, ask(3, slots(6, 1, 1), None, now)).await,
        SlotAnswer::Wait {
            limit: FlowLimit::InFlight,
            until: at(1, 0)
        }
    );
    // (`waiting` counts waits of jobs that exist: the PostgreSQL store
    // joins its job queue, which holds none of these ids.)
    let counted = f.flows(now).await.expect("flows");
    assert_eq!(counted.get("breg").map(|c| c.in_flight), Some(6));
    // Holder 1 keeps 1 of its 4: holder 3 gets 1 of the 3 given back.
    f.give_back_call_slots("breg", 1, 1)
        .await
        .expect("give back");
    assert_eq!(
        take(f, ask(3, slots(6, 1, 1), None, now)).await,
        granted(1, 0)
    );
    // Asking again sets a holder's slots: holder 2 lowers its 2 to 1.
    assert_eq!(
        take(f, ask(2, slots(6, 1, 1), None, now)).await,
        granted(1, 0)
    );
    assert_eq!(
        f.flows(now).await.expect("flows").get("breg"),
        Some(&ConnectionFlow {
            in_flight: 3,
            waiting: 0
        })
    );
    // Holder 1 gives all back; a holder's slots end with its hold (30 s).
    f.give_back_call_slots("breg", 1, 0)
        .await
        .expect("give back");
    assert_eq!(
        take(f, ask(4, slots(6, 5, 5), None, now)).await,
        SlotAnswer::Wait {
            limit: FlowLimit::InFlight,
            until: at(1, 0)
        }
    );
    assert_eq!(
        take(f, ask(4, slots(6, 4, 5), None, now)).await,
        granted(4, 0)
    );
    assert_eq!(
        take(f, ask(5, slots(6, 6, 6), None, at(31, 0))).await,
        granted(6, 0)
    );
}

/// The rate lets `burst` calls go at once, then one per token; a holder
/// takes as many whole tokens as it wants and the bucket holds, at least
/// what it needs or it waits; a quiet spell refills the bucket to its
/// capacity, never beyond.
pub async fn the_rate_lets_a_burst_go_then_one_call_per_token(f: &dyn FlowControl) {
    let now = at(0, 0);
    // A bucket of 3: a reserve of 2 and one more call, then none left.
    assert_eq!(
        take(f, ask(1, None, tokens(1, 2), now)).await,
        granted(0, 2)
    );
    assert_eq!(
        take(f, ask(2, None, tokens(1, 1), now)).await,
        granted(0, 1)
    );
    match take(f, ask(2, None, tokens(1, 1), now)).await {
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
    // 0.3 s later 1.5 tokens are in: a holder wanting 2 gets the whole 1.
    assert_eq!(
        take(f, ask(2, None, tokens(1, 2), at(0, 300))).await,
        granted(0, 1)
    );
    let later = at(60, 0);
    assert_eq!(
        take(f, ask(1, None, tokens(1, 5), later)).await,
        granted(0, 3)
    );
    assert!(matches!(
        take(f, ask(1, None, tokens(1, 1), later)).await,
        SlotAnswer::Wait {
            limit: FlowLimit::Rate,
            ..
        }
    ));
}

/// A grant is all or nothing: a call the rate holds back takes no slot.
pub async fn a_call_held_back_by_its_rate_takes_no_slot(f: &dyn FlowControl) {
    let now = at(0, 0);
    assert_eq!(
        take(f, ask(1, slots(2, 1, 1), tokens(1, 3), now)).await,
        granted(1, 3)
    );
    assert!(matches!(
        take(f, ask(2, slots(2, 1, 1), tokens(1, 1), now)).await,
        SlotAnswer::Wait {
            limit: FlowLimit::Rate,
            ..
        }
    ));
    assert_eq!(
        f.flows(now)
            .await
            .expect("flows")
            .get("breg")
            .map(|c| c.in_flight),
        Some(1)
    );
}

/// A `Retry-After` holds every call of the connection back, whatever its
/// limits; a later hold wins over an earlier one.
pub async fn retry_after_holds_every_call_back_and_a_later_hold_wins(f: &dyn FlowControl) {
    f.hold_back_connection("breg", at(10, 0))
        .await
        .expect("hold");
    f.hold_back_connection("breg", at(5, 0))
        .await
        .expect("hold");
    assert_eq!(
        take(f, ask(1, slots(2, 1, 1), None, at(1, 0))).await,
        SlotAnswer::Wait {
            limit: FlowLimit::RetryAfter,
            until: at(10, 0)
        }
    );
    assert_eq!(
        f.held_back_until("breg").await.expect("read"),
        Some(at(10, 0))
    );
    assert_eq!(
        take(f, ask(1, slots(2, 1, 1), None, at(10, 0))).await,
        granted(1, 0)
    );
}
