//! Flow control at the worker: whether a dispatch may write its request
//! now, given its connection's `limits` and a product's `Retry-After`
//! ([`FlowControl`], shared by every process of the deployment).
//!
//! A connection with `limits` is shared out by the store: this process
//! asks for its share (one statement) and hands it out to its next calls
//! without asking again, so a call costs a statement only when the share
//! runs out. The share is sized so that no limit is ever exceeded across
//! processes (docs/decisions.md "Flow control is shared through
//! PostgreSQL"):
//!
//! - `inFlight`: the process holds the slots its calls in flight use plus
//!   a reserve of at most `inFlight / 16` (none below 16), and gives back
//!   what goes beyond that as its calls end. The store counts every
//!   process's slots, reserve included, against the limit.
//! - the rate: the process takes tokens from the shared bucket, at most a
//!   tenth of a second's worth (and `burst / 16`; none when that is below
//!   2), and drops those it has not used a tenth of a second later. The
//!   bucket holds that tenth of a second less than `burst`, so tokens used
//!   late never let more than `burst` plus the rate through over any
//!   stretch of time.
//!
//! With small limits (the journey's `inFlight: 2, perSecond: 5`) there is
//! no reserve: every call asks, and every slot is given back as its call
//! ends. A connection without `limits` is held back only by a product's
//! `Retry-After`: this process reads the shared hold at most once a second
//! per connection, so such calls cost nothing in the common case.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use coordinator_ir::instant::Instant;
use coordinator_ports::adapter::RetryAfter;
use coordinator_ports::clock::whole_second;
use coordinator_ports::flow::{
    instant_after, seconds_between, FlowControl, FlowLimit, MemoryFlowControl, SlotAnswer,
    SlotRequest, SlotsAsk, TokensAsk,
};
use coordinator_ports::store::StoreError;
use coordinator_runtime::config::CallLimits;

/// The longest a product's `Retry-After` holds a connection back (1 h): a
/// product asking for more is called again after an hour.
pub const MAX_RETRY_AFTER_SECONDS: i64 = 3_600;

/// A process keeps at most this fraction (1/16) of `inFlight`, and of
/// `burst`, in reserve.
pub const RESERVE_SHARE: u32 = 16;

/// Tokens in reserve are used within this many seconds of being taken, or
/// dropped; a process takes at most this many seconds of the rate at once.
pub const TOKEN_RESERVE_SECONDS: f64 = 0.1;

/// The flow-control port and this process's shares of it.
pub(crate) struct FlowGate {
    /// The shared port ([`crate::Engine::with_flow_control`]); an
    /// in-memory one (this process only) until one is attached.
    port: OnceLock<Arc<dyn FlowControl>>,
    /// This process's id as a holder of slots (random, 63 bits).
    holder: u64,
    /// Connection → this process's share of its limits. The share's lock
    /// is held across an ask, so one ask per connection is in progress at
    /// a time and the calls behind it use what it brought.
    shares: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Share>>>>,
    /// Connection → (the whole second it was read, the hold then recorded).
    holds_read: Mutex<HashMap<String, (Instant, Option<Instant>)>>,
}

/// This process's share of one connection's limits.
#[derive(Debug, Default)]
struct Share {
    /// In-flight slots the store records for this process.
    slots_held: u32,
    /// Of them, the slots calls in flight use.
    slots_in_use: u32,
    /// Until when the store holds them (`None`: none held).
    slots_until: Option<Instant>,
    /// The reserve of slots this process may keep (`inFlight / 16`).
    slot_reserve: u32,
    /// Tokens taken from the bucket and not used yet.
    tokens: u32,
    /// Until when they may be used.
    tokens_until: Option<Instant>,
    /// Tokens the last ask took (the next ask's size follows their use).
    tokens_taken: u32,
}

/// How this process asks for a connection's rate.
struct RatePlan {
    per_second: f64,
    /// The bucket's capacity as asked (`burst`, less the reserve's time).
    capacity: f64,
    /// The most tokens one ask takes (1 when there is no reserve).
    most: u32,
}

impl RatePlan {
    fn of(limits: &CallLimits) -> Option<RatePlan> {
        let per_second = limits.per_second?;
        let burst = f64::from(limits.effective_burst()?);
        let reserve = (per_second * TOKEN_RESERVE_SECONDS)
            .min(burst / f64::from(RESERVE_SHARE))
            .floor();
        Some(if reserve >= 2.0 {
            RatePlan {
                per_second,
                capacity: burst - per_second * TOKEN_RESERVE_SECONDS,
                // At most a tenth of a second of the rate (<= 1,000).
                most: reserve as u32,
            }
        } else {
            RatePlan {
                per_second,
                capacity: burst,
                most: 1,
            }
        })
    }
}

/// Whether a call may go now.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Turn {
    /// It may; `holds_slot` when it took an in-flight slot to give back.
    Go {
        /// An in-flight slot is held for the job.
        holds_slot: bool,
    },
    /// It must wait: `limit` holds it back until `until`.
    Wait {
        /// The limit that holds it.
        limit: FlowLimit,
        /// When to ask again.
        until: Instant,
    },
}

impl FlowGate {
    /// A gate over an in-memory port until [`FlowGate::attach`].
    pub(crate) fn new() -> Self {
        FlowGate {
            port: OnceLock::new(),
            holder: uuid::Uuid::new_v4().as_u64_pair().0 & (i64::MAX as u64),
            shares: Mutex::new(HashMap::new()),
            holds_read: Mutex::new(HashMap::new()),
        }
    }

    /// Uses `port` from now on; `false` when one was attached already.
    pub(crate) fn attach(&self, port: Arc<dyn FlowControl>) -> bool {
        self.port.set(port).is_ok()
    }

    /// The port in use.
    pub(crate) fn port(&self) -> &Arc<dyn FlowControl> {
        self.port
            .get_or_init(|| Arc::new(MemoryFlowControl::new()) as Arc<dyn FlowControl>)
    }

    /// This process's share of connection `name`.
    fn share(&self, name: &str) -> Arc<tokio::sync::Mutex<Share>> {
        let mut shares = self.shares.lock().unwrap_or_else(|p| p.into_inner());
        Arc::clone(shares.entry(name.to_owned()).or_default())
    }

    /// Whether job `job_id`'s call on connection `name` (its `limits`) may go at `now`,
    /// from this process's share or, when that runs out, by asking the
    /// store for more; `held_until` is the job's lease (a slot's hold
    /// lasts twice its span from now, renewed by the next ask).
    ///
    /// # Errors
    /// The port's (the call does not go; the job is tried again).
    pub(crate) async fn turn(
        &self,
        name: &str,
        limits: Option<&CallLimits>,
        job_id: u64,
        now: Instant,
        held_until: Instant,
    ) -> Result<Turn, StoreError> {
        let Some(limits) = limits.filter(|l| l.any()) else {
            return self.turn_of_unlimited(name, &now).await;
        };
        let share = self.share(name);
        let mut share = share.lock().await;
        let rate = RatePlan::of(limits);
        let slots_needed = limits.in_flight.is_some_and(|_| {
            share.slots_in_use >= share.slots_held
                || share.slots_until.is_none_or(|until| until < held_until)
        });
        let tokens_needed = rate.is_some()
            && (share.tokens == 0 || share.tokens_until.is_none_or(|until| until <= now));
        if !slots_needed && !tokens_needed {
            // All from this process's share: only a Retry-After holds it.
            if let Turn::Wait { limit, until } = self.turn_of_unlimited(name, &now).await? {
                return Ok(Turn::Wait { limit, until });
            }
            return Ok(share.go(limits, &now, None));
        }
        let slots = limits.in_flight.filter(|_| slots_needed).map(|limit| {
            share.slot_reserve = limit / RESERVE_SHARE;
            let needed = share.slots_in_use + 1;
            SlotsAsk {
                limit,
                needed,
                wanted: needed + share.slot_reserve.min(needed),
            }
        });
        let tokens = rate.as_ref().filter(|_| tokens_needed).map(|plan| {
            let used = share.tokens_taken.saturating_sub(share.tokens);
            TokensAsk {
                per_second: plan.per_second,
                capacity: plan.capacity,
                needed: 1,
                wanted: used.saturating_mul(2).clamp(1, plan.most),
            }
        });
        let hold = instant_after(&held_until, seconds_between(&now, &held_until));
        let answer = self
            .port()
            .take_call_slot(&SlotRequest {
                connection: name,
                holder: self.holder,
                job_id,
                now,
                held_until: hold,
                slots,
                tokens,
            })
            .await?;
        Ok(match answer {
            SlotAnswer::Granted {
                slots: held,
                tokens: taken,
            } => {
                let brought = slots.map(|_| (held, hold));
                if tokens.is_some() {
                    share.tokens = taken;
                    share.tokens_taken = taken;
                    share.tokens_until = Some(instant_after(&now, TOKEN_RESERVE_SECONDS));
                }
                share.go(limits, &now, brought)
            }
            SlotAnswer::Wait { limit, until } => Turn::Wait { limit, until },
        })
    }

    /// After a call's answer is in hand: gives back the slots beyond this
    /// process's calls in flight and its reserve, and records the
    /// product's `Retry-After` (capped at [`MAX_RETRY_AFTER_SECONDS`]).
    /// Returns the hold recorded. Failures are logged, never the call's:
    /// slots not given back end with their hold, a `Retry-After` not
    /// recorded is answered by the retry policy.
    pub(crate) async fn done(
        &self,
        name: &str,
        holds_slot: bool,
        retry_after: Option<RetryAfter>,
        now: Instant,
    ) -> Option<Instant> {
        if holds_slot {
            let share = self.share(name);
            let mut share = share.lock().await;
            share.slots_in_use = share.slots_in_use.saturating_sub(1);
            let keep = share.slots_in_use + share.slot_reserve;
            if share.slots_held > keep {
                if let Err(e) = self
                    .port()
                    .give_back_call_slots(name, self.holder, keep)
                    .await
                {
                    tracing::warn!(connection = name, error = %e, "in-flight slots not given back; they end with their hold");
                }
                share.slots_held = keep;
            }
        }
        let until = retry_after?.until(&now);
        let cap = now.plus_seconds(MAX_RETRY_AFTER_SECONDS).unwrap_or(now);
        let until = if until > cap { cap } else { until };
        if until <= now {
            return None;
        }
        if let Err(e) = self.port().hold_back_connection(name, until).await {
            tracing::warn!(connection = name, error = %e, "Retry-After not recorded for the other processes");
        }
        if let Ok(mut read) = self.holds_read.lock() {
            read.insert(name.to_owned(), (whole_second(&now), Some(until)));
        }
        Some(until)
    }

    /// A call only a product's `Retry-After` may hold back.
    async fn turn_of_unlimited(&self, name: &str, now: &Instant) -> Result<Turn, StoreError> {
        Ok(match self.hold_of_unlimited(name, now).await? {
            Some(until) if until > *now => Turn::Wait {
                limit: FlowLimit::RetryAfter,
                until,
            },
            _ => Turn::Go { holds_slot: false },
        })
    }

    /// The `Retry-After` hold of a connection, read from the shared port
    /// at most once a second (for calls that do not ask the store).
    async fn hold_of_unlimited(
        &self,
        name: &str,
        now: &Instant,
    ) -> Result<Option<Instant>, StoreError> {
        let second = whole_second(now);
        if let Ok(read) = self.holds_read.lock() {
            if let Some((at, hold)) = read.get(name) {
                if *at == second {
                    return Ok(*hold);
                }
            }
        }
        let hold = self.port().held_back_until(name).await?;
        if let Ok(mut read) = self.holds_read.lock() {
            read.insert(name.to_owned(), (second, hold));
        }
        Ok(hold)
    }
}

impl Share {
    /// The call goes: it uses a slot and a token of this share, after the
    /// slots an ask `brought` (held, until) are recorded.
    fn go(&mut self, limits: &CallLimits, now: &Instant, brought: Option<(u32, Instant)>) -> Turn {
        if let Some((held, until)) = brought {
            self.slots_held = held;
            self.slots_until = Some(match self.slots_until {
                Some(before) if before > until => before,
                _ => until,
            });
        }
        if limits.per_second.is_some() && self.tokens_until.is_some_and(|u| u > *now) {
            self.tokens = self.tokens.saturating_sub(1);
        }
        let holds_slot = limits.in_flight.is_some();
        if holds_slot {
            self.slots_in_use += 1;
        }
        Turn::Go { holds_slot }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicU64, Ordering};

    use coordinator_ports::flow::ConnectionFlow;

    use super::*;

    /// The in-memory port, counting the asks and give-backs it answers.
    #[derive(Default)]
    struct Counted {
        inner: MemoryFlowControl,
        asks: AtomicU64,
        give_backs: AtomicU64,
    }

    #[async_trait::async_trait]
    impl FlowControl for Counted {
        async fn take_call_slot(&self, r: &SlotRequest<'_>) -> Result<SlotAnswer, StoreError> {
            self.asks.fetch_add(1, Ordering::Relaxed);
            self.inner.take_call_slot(r).await
        }
        async fn give_back_call_slots(&self, c: &str, h: u64, k: u32) -> Result<(), StoreError> {
            self.give_backs.fetch_add(1, Ordering::Relaxed);
            self.inner.give_back_call_slots(c, h, k).await
        }
        async fn hold_back_connection(&self, c: &str, u: Instant) -> Result<(), StoreError> {
            self.inner.hold_back_connection(c, u).await
        }
        async fn held_back_until(&self, c: &str) -> Result<Option<Instant>, StoreError> {
            self.inner.held_back_until(c).await
        }
        async fn flows(
            &self,
            now: Instant,
        ) -> Result<BTreeMap<String, ConnectionFlow>, StoreError> {
            self.inner.flows(now).await
        }
    }

    fn ms(millis: i64) -> Instant {
        instant_after(
            &Instant::from_unix_seconds_and_nanos(1_800_000_000, 0),
            millis as f64 / 1e3,
        )
    }

    /// Two processes (gates) on one shared port, each trying to start
    /// `per_ms` calls every millisecond for `millis`, each call answered
    /// 30 ms later. Returns each call's start (ms) and the most calls in
    /// flight at once.
    async fn drive(
        limits: &CallLimits,
        port: &Arc<Counted>,
        per_ms: u64,
        millis: i64,
    ) -> (Vec<i64>, u32) {
        // Each gate with its next try: a call told to wait is asked again
        // when its wait ends (the worker's job falls due then), in ms.
        let mut gates = [(FlowGate::new(), 0_i64), (FlowGate::new(), 0_i64)];
        for (gate, _) in &gates {
            assert!(gate.attach(Arc::clone(port) as Arc<dyn FlowControl>));
        }
        let mut starts = Vec::new();
        // (answered at ms, gate, holds a slot)
        let mut in_flight: Vec<(i64, usize, bool)> = Vec::new();
        let mut most = 0;
        let mut job = 0;
        for t in 0..millis {
            let now = ms(t);
            for (at, g, holds) in std::mem::take(&mut in_flight) {
                if at <= t {
                    let (gate, _) = gates.get(g).expect("a gate");
                    gate.done("breg", holds, None, now).await;
                } else {
                    in_flight.push((at, g, holds));
                }
            }
            for (g, (gate, next_try)) in gates.iter_mut().enumerate() {
                for _ in 0..per_ms {
                    if t < *next_try {
                        break;
                    }
                    job += 1;
                    let turn = gate
                        .turn("breg", Some(limits), job, now, ms(t + 30_000))
                        .await
                        .expect("turn");
                    match turn {
                        Turn::Go { holds_slot } => {
                            starts.push(t);
                            in_flight.push((t + 30, g, holds_slot));
                        }
                        Turn::Wait { until, .. } => {
                            let wait = seconds_between(&now, &until);
                            *next_try = t + (wait * 1e3).ceil() as i64;
                        }
                    }
                }
            }
            most = most.max(in_flight.len() as u32);
        }
        (starts, most)
    }

    /// No stretch of time sees more calls start than `burst` plus the
    /// rate over its length.
    fn assert_rate_kept(starts: &[i64], per_second: f64, burst: u32) {
        for (j, last) in starts.iter().enumerate() {
            for (i, first) in starts.iter().enumerate().take(j) {
                let calls = (j - i + 1) as f64;
                let span = (last - first) as f64 / 1e3;
                assert!(
                    calls <= f64::from(burst) + per_second * span + 1e-9,
                    "{calls} calls in {span} s ({first} ms .. {last} ms)"
                );
            }
        }
    }

    #[tokio::test]
    async fn a_generous_limit_is_shared_out_in_reserves_and_asked_for_rarely() {
        // Two processes want 4,000 calls a second, 120 in flight: the
        // limits hold none of them back.
        let limits = CallLimits {
            in_flight: Some(256),
            per_second: Some(10_000.0),
            burst: None,
        };
        let port = Arc::new(Counted::default());
        let (starts, most) = drive(&limits, &port, 2, 2_000).await;
        assert_eq!(starts.len(), 8_000);
        assert!(most <= 256, "{most} calls in flight at once");
        let asks = port.asks.load(Ordering::Relaxed) + port.give_backs.load(Ordering::Relaxed);
        assert!(
            asks * 4 < starts.len() as u64,
            "{asks} statements for {} calls",
            starts.len()
        );
    }

    #[tokio::test]
    async fn reserves_never_let_more_through_than_the_limits() {
        // Two processes want 4,000 calls a second; 1,000 may go.
        let limits = CallLimits {
            in_flight: Some(256),
            per_second: Some(1_000.0),
            burst: None,
        };
        let port = Arc::new(Counted::default());
        let (starts, most) = drive(&limits, &port, 2, 2_000).await;
        assert!(most <= 256, "{most} calls in flight at once");
        assert_rate_kept(&starts, 1_000.0, 1_000);
        // The bucket less its reserve time (900), then 1,000 a second,
        // less what reserves dropped unused.
        assert!(starts.len() > 2_500, "{} calls", starts.len());
        // inFlight holds them back when the rate does not.
        let limits = CallLimits {
            in_flight: Some(64),
            per_second: None,
            burst: None,
        };
        let (_, most) = drive(&limits, &Arc::new(Counted::default()), 2, 500).await;
        assert_eq!(most, 64);
    }

    #[tokio::test]
    async fn small_limits_ask_for_every_call_and_give_every_slot_back() {
        let limits = CallLimits {
            in_flight: Some(2),
            per_second: Some(5.0),
            burst: Some(5),
        };
        let port = Arc::new(Counted::default());
        let (starts, most) = drive(&limits, &port, 1, 3_000).await;
        assert!(most <= 2, "{most} calls in flight at once");
        assert_rate_kept(&starts, 5.0, 5);
        // Every call asked the store, and gave its slot back as it was
        // answered (the last two may still be in flight).
        assert!(starts.len() >= 5, "{} calls", starts.len());
        assert!(port.asks.load(Ordering::Relaxed) >= starts.len() as u64);
        let given = port.give_backs.load(Ordering::Relaxed);
        assert!(
            given + 2 >= starts.len() as u64,
            "{given} give-backs for {} calls",
            starts.len()
        );
    }

    #[tokio::test]
    async fn a_retry_after_holds_back_calls_served_from_a_reserve() {
        let limits = CallLimits {
            in_flight: Some(64),
            per_second: Some(1_000.0),
            burst: None,
        };
        let gate = FlowGate::new();
        let now = ms(0);
        let lease = ms(30_000);
        assert!(matches!(
            gate.turn("breg", Some(&limits), 1, now, lease).await,
            Ok(Turn::Go { holds_slot: true })
        ));
        // The product answers 429 with Retry-After: 5 s.
        let until = gate
            .done("breg", true, Some(RetryAfter::Seconds(5)), now)
            .await;
        assert_eq!(until, Some(ms(5_000)));
        assert_eq!(
            gate.turn("breg", Some(&limits), 2, ms(1), lease)
                .await
                .expect("turn"),
            Turn::Wait {
                limit: FlowLimit::RetryAfter,
                until: ms(5_000)
            }
        );
    }
}
