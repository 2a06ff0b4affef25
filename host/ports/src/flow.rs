//! The flow-control port: a connection's `limits` (runtime file,
//! [`CallLimits`]) and a product's `Retry-After`, held where every
//! `coordinator` process of the deployment sees them.
//!
//! Before a dispatch attempt writes its request, the worker asks
//! [`FlowControl::take_call_slot`]: [`SlotAnswer::Granted`] takes one unit
//! of the connection's rate and, with `inFlight`, one slot held by the job
//! until [`FlowControl::give_back_call_slot`] (or until `held_until`, the
//! job's lease, should the process die meanwhile); [`SlotAnswer::Wait`]
//! says which limit holds the call back and until when. A product's
//! `Retry-After` is recorded with [`FlowControl::hold_back_connection`].
//!
//! Every instant here comes from the caller's clock port, so tests on a
//! manual clock drive it deterministically. The PostgreSQL store
//! implements it in the deployment's namespace (`connection_flow`,
//! `connection_calls`, `connection_waits`; docs/decisions.md "Flow
//! control is shared through PostgreSQL"); [`MemoryFlowControl`] is the
//! in-memory form for one process and tests.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use coordinator_ir::instant::Instant;
use coordinator_runtime::config::CallLimits;

use crate::store::StoreError;
pub use crate::waiting::{CallWait, FlowLimit};

/// One ask for a call's turn ([`FlowControl::take_call_slot`]).
#[derive(Clone, Copy, Debug)]
pub struct SlotRequest<'a> {
    /// The connection's name in the runtime file.
    pub connection: &'a str,
    /// The dispatch job that will make the call (holds the in-flight slot).
    pub job_id: u64,
    /// The connection's `limits` (an empty one limits nothing but a
    /// product's `Retry-After`).
    pub limits: &'a CallLimits,
    /// Now, from the caller's clock.
    pub now: Instant,
    /// Until when a granted in-flight slot is held should it never be
    /// given back (the job's lease).
    pub held_until: Instant,
}

/// The answer to a [`SlotRequest`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SlotAnswer {
    /// The call may go now.
    Granted,
    /// The call must wait: `limit` holds it back, and asking again before
    /// `until` is in vain.
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
    /// Calls holding an in-flight slot now (connections with `inFlight`).
    pub in_flight: u64,
    /// Calls that were told to wait and have not gone yet.
    pub waiting: u64,
}

/// Flow control of the calls to each connection, shared by every process
/// of a deployment.
#[async_trait]
pub trait FlowControl: Send + Sync {
    /// Asks for a call's turn: [`SlotAnswer::Granted`] takes one unit of
    /// the rate and (with `inFlight`) an in-flight slot for `job_id` until
    /// `held_until`, atomically across processes; otherwise which limit
    /// holds it back until when (a product's `Retry-After` first, then
    /// `inFlight`, then the rate), and nothing is taken. Asking again for a
    /// job that holds a slot keeps that one slot.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the shared state cannot be reached
    /// (the call does not go).
    async fn take_call_slot(&self, request: &SlotRequest<'_>) -> Result<SlotAnswer, StoreError>;

    /// Gives `job_id`'s in-flight slot on `connection` back (its answer is
    /// in hand). Nothing when it holds none.
    async fn give_back_call_slot(&self, connection: &str, job_id: u64) -> Result<(), StoreError>;

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

    /// Each connection's calls in flight and calls waiting, as of `now`
    /// (connections never limited are absent).
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
    /// Job → held until.
    calls: BTreeMap<u64, Instant>,
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
/// state, shared by the in-memory form and the PostgreSQL store's tests.
fn decide(flow: &mut Flow, request: &SlotRequest<'_>) -> SlotAnswer {
    let now = request.now;
    if let Some(until) = flow.retry_after_until.filter(|u| *u > now) {
        return SlotAnswer::Wait {
            limit: FlowLimit::RetryAfter,
            until,
        };
    }
    if let Some(max) = request.limits.in_flight {
        flow.calls.retain(|_, held| *held > now);
        let others = flow.calls.keys().filter(|j| **j != request.job_id).count();
        if others >= max as usize {
            return SlotAnswer::Wait {
                limit: FlowLimit::InFlight,
                until: instant_after(&now, SLOT_WAIT_SECONDS as f64),
            };
        }
    }
    if let (Some(rate), Some(burst)) = (request.limits.per_second, request.limits.effective_burst())
    {
        let burst = f64::from(burst);
        let bucket = flow.bucket.get_or_insert(Bucket {
            tokens: burst,
            at: now,
        });
        let elapsed = seconds_between(&bucket.at, &now).max(0.0);
        let tokens = (bucket.tokens + rate * elapsed).min(burst);
        if tokens < 1.0 {
            return SlotAnswer::Wait {
                limit: FlowLimit::Rate,
                until: instant_after(&now, (1.0 - tokens) / rate),
            };
        }
        bucket.tokens = tokens - 1.0;
        if now > bucket.at {
            bucket.at = now;
        }
    }
    if request.limits.in_flight.is_some() {
        flow.calls.insert(request.job_id, request.held_until);
    }
    SlotAnswer::Granted
}

#[async_trait]
impl FlowControl for MemoryFlowControl {
    async fn take_call_slot(&self, request: &SlotRequest<'_>) -> Result<SlotAnswer, StoreError> {
        let mut flows = self.lock()?;
        let flow = flows.entry(request.connection.to_owned()).or_default();
        let answer = decide(flow, request);
        match answer {
            SlotAnswer::Granted => {
                flow.waits.remove(&request.job_id);
            }
            SlotAnswer::Wait { until, .. } => {
                flow.waits.insert(request.job_id, until);
            }
        }
        Ok(answer)
    }

    async fn give_back_call_slot(&self, connection: &str, job_id: u64) -> Result<(), StoreError> {
        if let Some(flow) = self.lock()?.get_mut(connection) {
            flow.calls.remove(&job_id);
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
                        in_flight: flow.calls.values().filter(|h| **h > now).count() as u64,
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
