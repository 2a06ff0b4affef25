//! The flow-control port: a connection's `limits` (runtime file,
//! [`CallLimits`]) and a product's `Retry-After`, held where every
//! `coordinator` process of the deployment sees them.
//!
//! Before a dispatch attempt writes its request, a process that has no
//! share of the connection's limits left asks
//! [`FlowControl::take_call_slot`]. It asks as a *holder* (one id per
//! process): [`SlotAnswer::Granted`] sets the number of in-flight slots
//! the holder holds (until `held_until`, should the process die) and hands
//! it tokens of the rate's bucket, at least what the call needs and at most
//! what the holder wants in reserve; the process hands its reserve out to
//! its next calls without asking again (the engine's flow gate, which
//! sizes the reserve so that no limit is exceeded; docs/decisions.md "Flow
//! control is shared through PostgreSQL"). [`SlotAnswer::Wait`] says which
//! limit holds the call back and until when, and takes nothing. Slots are
//! given back with [`FlowControl::give_back_call_slots`]; a product's
//! `Retry-After` is recorded with [`FlowControl::hold_back_connection`].
//!
//! Every instant here comes from the caller's clock port, so tests on a
//! manual clock drive it deterministically. The PostgreSQL store
//! implements it in the deployment's namespace (`connection_flow`,
//! `connection_calls`, `connection_waits`); [`MemoryFlowControl`] is the
//! in-memory form for one process and tests.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use coordinator_ir::instant::Instant;
#[cfg(doc)]
use coordinator_runtime::config::CallLimits;

use crate::store::StoreError;
pub use crate::waiting::{CallWait, FlowLimit};

/// What a holder asks of a connection's `inFlight` limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotsAsk {
    /// The connection's `inFlight`: slots held by every holder together.
    pub limit: u32,
    /// The fewest slots the holder must hold for the call to go (the
    /// slots its calls in flight use, plus this call's).
    pub needed: u32,
    /// The most it would hold (`needed` plus a reserve), granted as far
    /// as the other holders leave room.
    pub wanted: u32,
}

/// What a holder asks of a connection's rate (`perSecond`, `burst`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TokensAsk {
    /// Tokens added to the bucket per second.
    pub per_second: f64,
    /// The most tokens the bucket holds (the `burst`, less what the
    /// holders may keep in reserve).
    pub capacity: f64,
    /// Tokens the call needs (1).
    pub needed: u32,
    /// The most it takes (`needed` plus a reserve), as far as the bucket
    /// holds them.
    pub wanted: u32,
}

/// One ask for a call's turn ([`FlowControl::take_call_slot`]).
#[derive(Clone, Copy, Debug)]
pub struct SlotRequest<'a> {
    /// The connection's name in the runtime file.
    pub connection: &'a str,
    /// Whose slots these are: one id per process (63 bits).
    pub holder: u64,
    /// The dispatch job that asks (a wait is recorded under it, for
    /// `/metrics`).
    pub job_id: u64,
    /// Now, from the caller's clock.
    pub now: Instant,
    /// Until when the holder's slots hold should it never give them back
    /// (a later one recorded already stays).
    pub held_until: Instant,
    /// The `inFlight` ask (`None`: the holder's slots are left as they are).
    pub slots: Option<SlotsAsk>,
    /// The rate's ask (`None`: the bucket is not touched).
    pub tokens: Option<TokensAsk>,
}

/// The answer to a [`SlotRequest`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SlotAnswer {
    /// The call may go now.
    Granted {
        /// In-flight slots the holder holds now (0 when it asked none).
        slots: u32,
        /// Tokens taken from the bucket (0 when it asked none).
        tokens: u32,
    },
    /// The call must wait: `limit` holds it back, and asking again before
    /// `until` is in vain. Nothing was taken.
    Wait {
        /// The limit that holds it.
        limit: FlowLimit,
        /// The earliest instant worth asking again.
        until: Instant,
    },
}

/// A connection's flow as `/metrics` shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnectionFlow {
    /// In-flight slots held now, by calls or in a process's reserve
    /// (connections with `inFlight`).
    pub in_flight: u64,
    /// Calls that were told to wait and have not gone yet.
    pub waiting: u64,
}

/// Flow control of the calls to each connection, shared by every process
/// of a deployment.
#[async_trait]
pub trait FlowControl: Send + Sync {
    /// Asks for a call's turn, atomically across processes: a product's
    /// `Retry-After` first, then `inFlight` (the holder is granted
    /// `min(wanted, limit − the other holders' slots)` slots, and the call
    /// waits when that is below `needed`; holds past their `held_until`
    /// count no more), then the rate (the holder takes `min(wanted, whole
    /// tokens in the bucket)`, and the call waits when that is below
    /// `needed`). All or nothing: a wait takes nothing and leaves the
    /// holder's slots as they were.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the shared state cannot be reached
    /// (the call does not go).
    async fn take_call_slot(&self, request: &SlotRequest<'_>) -> Result<SlotAnswer, StoreError>;

    /// Lowers `holder`'s in-flight slots on `connection` to `keep` (0
    /// gives them all back); nothing when it holds no more than that.
    async fn give_back_call_slots(
        &self,
        connection: &str,
        holder: u64,
        keep: u32,
    ) -> Result<(), StoreError>;

    /// Holds every next call to `connection` back until `until` (a
    /// product's `Retry-After`); a later hold already recorded stays.
    async fn hold_back_connection(
        &self,
        connection: &str,
        until: Instant,
    ) -> Result<(), StoreError>;

    /// Until when a product's `Retry-After` holds `connection`'s calls
    /// back (`None`: no hold recorded; one in the past may be answered).
    async fn held_back_until(&self, connection: &str) -> Result<Option<Instant>, StoreError>;

    /// Each connection's in-flight slots held and calls waiting, as of
    /// `now` (connections never limited are absent).
    async fn flows(&self, now: Instant) -> Result<BTreeMap<String, ConnectionFlow>, StoreError>;
}

/// Seconds of a slot wait: a call told to wait for an in-flight slot asks
/// again this much later (a slot's end is not known in advance).
pub const SLOT_WAIT_SECONDS: i64 = 1;

/// A recorded wait is counted as waiting for this long past its `until`
/// (the job is leased again a little after it).
pub const WAIT_GRACE_SECONDS: i64 = 60;

/// The token bucket of a rate: `tokens` left at `at`.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// One connection's shared state.
#[derive(Debug, Default)]
struct Flow {
    bucket: Option<Bucket>,
    retry_after_until: Option<Instant>,
    /// Holder → (slots, held until).
    calls: BTreeMap<u64, (u32, Instant)>,
    /// Job → waiting until.
    waits: BTreeMap<u64, Instant>,
}

/// [`FlowControl`] in one process's memory: for tests and the scenario
/// of one process (a deployment of several processes needs the
/// PostgreSQL store's).
#[derive(Debug, Default)]
pub struct MemoryFlowControl {
    flows: Mutex<BTreeMap<String, Flow>>,
}

impl MemoryFlowControl {
    /// No connection limited yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, BTreeMap<String, Flow>>, StoreError> {
        self.flows
            .lock()
            .map_err(|_| StoreError::Unavailable("flow control poisoned".into()))
    }
}

/// Seconds from `from` to `to` (negative when `to` is earlier), with the
/// nanoseconds.
pub fn seconds_between(from: &Instant, to: &Instant) -> f64 {
    (to.unix_nanos() - from.unix_nanos()) as f64 / 1e9
}

/// `at` plus `seconds` (at least 0), to the nanosecond.
pub fn instant_after(at: &Instant, seconds: f64) -> Instant {
    let seconds = if seconds.is_finite() {
        seconds.clamp(0.0, 1e9)
    } else {
        0.0
    };
    let nanos = at.unix_nanos() + (seconds * 1e9).round() as i128;
    let whole = i64::try_from(nanos.div_euclid(1_000_000_000)).unwrap_or(i64::MAX);
    // rem_euclid of 1e9 is below 1e9, so it fits in u32.
    let part = u32::try_from(nanos.rem_euclid(1_000_000_000)).unwrap_or(0);
    Instant::from_unix_seconds_and_nanos(whole, part)
}

/// The decision of [`FlowControl::take_call_slot`] on one connection's
/// state (the in-memory form; the PostgreSQL store's `take_call_slot`
/// routine decides the same way).
fn decide(flow: &mut Flow, request: &SlotRequest<'_>) -> SlotAnswer {
    let now = request.now;
    if let Some(until) = flow.retry_after_until.filter(|u| *u > now) {
        return SlotAnswer::Wait {
            limit: FlowLimit::RetryAfter,
            until,
        };
    }
    let mut slots = 0;
    if let Some(ask) = request.slots {
        flow.calls.retain(|_, (_, held)| *held > now);
        let others: u64 = flow
            .calls
            .iter()
            .filter(|(holder, _)| **holder != request.holder)
            .map(|(_, (n, _))| u64::from(*n))
            .sum();
        let room = u64::from(ask.limit).saturating_sub(others);
        slots = u32::try_from(room.min(u64::from(ask.wanted))).unwrap_or(ask.wanted);
        if slots < ask.needed {
            return SlotAnswer::Wait {
                limit: FlowLimit::InFlight,
                until: instant_after(&now, SLOT_WAIT_SECONDS as f64),
            };
        }
    }
    let mut tokens = 0;
    if let Some(ask) = request.tokens {
        let bucket = flow.bucket.get_or_insert(Bucket {
            tokens: ask.capacity,
            at: now,
        });
        let elapsed = seconds_between(&bucket.at, &now).max(0.0);
        let available = (bucket.tokens + ask.per_second * elapsed).min(ask.capacity);
        // Whole tokens in the bucket, as many as wanted (a u32 at most).
        tokens = available.floor().clamp(0.0, f64::from(ask.wanted)) as u32;
        if tokens < ask.needed {
            return SlotAnswer::Wait {
                limit: FlowLimit::Rate,
                until: instant_after(&now, (f64::from(ask.needed) - available) / ask.per_second),
            };
        }
        bucket.tokens = available - f64::from(tokens);
        if now > bucket.at {
            bucket.at = now;
        }
    }
    if request.slots.is_some() {
        let held = flow
            .calls
            .get(&request.holder)
            .map(|(_, until)| *until)
            .filter(|until| *until > request.held_until)
            .unwrap_or(request.held_until);
        flow.calls.insert(request.holder, (slots, held));
    }
    SlotAnswer::Granted { slots, tokens }
}

#[async_trait]
impl FlowControl for MemoryFlowControl {
    async fn take_call_slot(&self, request: &SlotRequest<'_>) -> Result<SlotAnswer, StoreError> {
        let mut flows = self.lock()?;
        let flow = flows.entry(request.connection.to_owned()).or_default();
        let answer = decide(flow, request);
        match answer {
            SlotAnswer::Granted { .. } => {
                flow.waits.remove(&request.job_id);
            }
            SlotAnswer::Wait { until, .. } => {
                flow.waits.insert(request.job_id, until);
            }
        }
        Ok(answer)
    }

    async fn give_back_call_slots(
        &self,
        connection: &str,
        holder: u64,
        keep: u32,
    ) -> Result<(), StoreError> {
        if let Some(flow) = self.lock()?.get_mut(connection) {
            if keep == 0 {
                flow.calls.remove(&holder);
            } else if let Some((slots, _)) = flow.calls.get_mut(&holder) {
                *slots = (*slots).min(keep);
            }
        }
        Ok(())
    }

    async fn hold_back_connection(
        &self,
        connection: &str,
        until: Instant,
    ) -> Result<(), StoreError> {
        let mut flows = self.lock()?;
        let flow = flows.entry(connection.to_owned()).or_default();
        if flow.retry_after_until.is_none_or(|u| u < until) {
            flow.retry_after_until = Some(until);
        }
        Ok(())
    }

    async fn held_back_until(&self, connection: &str) -> Result<Option<Instant>, StoreError> {
        Ok(self
            .lock()?
            .get(connection)
            .and_then(|f| f.retry_after_until))
    }

    async fn flows(&self, now: Instant) -> Result<BTreeMap<String, ConnectionFlow>, StoreError> {
        let flows = self.lock()?;
        Ok(flows
            .iter()
            .map(|(name, flow)| {
                let live = |until: &Instant| instant_after(until, WAIT_GRACE_SECONDS as f64) > now;
                (
                    name.clone(),
                    ConnectionFlow {
                        in_flight: flow
                            .calls
                            .values()
                            .filter(|(_, held)| *held > now)
                            .map(|(n, _)| u64::from(*n))
                            .sum(),
                        waiting: flow.waits.values().filter(|u| live(u)).count() as u64,
                    },
                )
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64, millis: u32) -> Instant {
        Instant::from_unix_seconds_and_nanos(1_800_000_000 + seconds, millis * 1_000_000)
    }

    #[test]
    fn instants_add_and_subtract_to_the_nanosecond() {
        assert_eq!(instant_after(&at(0, 900), 0.2), at(1, 100));
        assert!((seconds_between(&at(0, 900), &at(2, 100)) - 1.2).abs() < 1e-9);
        assert_eq!(instant_after(&at(0, 0), -5.0), at(0, 0));
    }
}
