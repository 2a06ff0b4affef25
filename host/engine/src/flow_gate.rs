//! Flow control at the worker: whether a dispatch may write its request
//! now, given its connection's `limits` and a product's `Retry-After`
//! ([`FlowControl`], shared by every process of the deployment).
//!
//! A connection with `limits` asks the shared store for every call (one
//! statement; `inFlight` adds one more to give the slot back). A
//! connection without `limits` is held back only by a product's
//! `Retry-After`: this process reads the shared hold at most once a
//! second per connection, so such calls cost nothing in the common case.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use coordinator_ir::instant::Instant;
use coordinator_ports::adapter::RetryAfter;
use coordinator_ports::flow::{FlowControl, FlowLimit, MemoryFlowControl, SlotAnswer, SlotRequest};
use coordinator_ports::store::StoreError;
use coordinator_runtime::config::{CallLimits, Connection};

/// The longest a product's `Retry-After` holds a connection back (1 h): a
/// product asking for more is called again after an hour.
pub const MAX_RETRY_AFTER_SECONDS: i64 = 3_600;

/// The flow-control port and this process's view of the holds of
/// connections without `limits`.
pub(crate) struct FlowGate {
    /// The shared port ([`crate::Engine::with_flow_control`]); an
    /// in-memory one (this process only) until one is attached.
    port: OnceLock<Arc<dyn FlowControl>>,
    /// Connection → (Unix second it was read, the hold then recorded).
    holds_read: Mutex<HashMap<String, (i64, Option<Instant>)>>,
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

/// The limits nothing but a `Retry-After` enforces.
const NO_LIMITS: CallLimits = CallLimits {
    in_flight: None,
    per_second: None,
    burst: None,
};

impl FlowGate {
    /// A gate over an in-memory port until [`FlowGate::attach`].
    pub(crate) fn new() -> Self {
        FlowGate {
            port: OnceLock::new(),
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

    /// Whether job `job_id`'s call on connection `name` may go at `now`;
    /// a granted in-flight slot is held until `held_until` unless given
    /// back ([`FlowGate::done`]).
    ///
    /// # Errors
    /// The port's (the call does not go; the job is tried again).
    pub(crate) async fn turn(
        &self,
        name: &str,
        connection: &Connection,
        job_id: u64,
        now: Instant,
        held_until: Instant,
    ) -> Result<Turn, StoreError> {
        let Some(limits) = connection.limits() else {
            return Ok(match self.hold_of_unlimited(name, &now).await? {
                Some(until) if until > now => Turn::Wait {
                    limit: FlowLimit::RetryAfter,
                    until,
                },
                _ => Turn::Go { holds_slot: false },
            });
        };
        let answer = self
            .port()
            .take_call_slot(&SlotRequest {
                connection: name,
                job_id,
                limits: if limits.any() { limits } else { &NO_LIMITS },
                now,
                held_until,
            })
            .await?;
        Ok(match answer {
            SlotAnswer::Granted => Turn::Go {
                holds_slot: limits.in_flight.is_some(),
            },
            SlotAnswer::Wait { limit, until } => Turn::Wait { limit, until },
        })
    }

    /// After a call's answer is in hand: gives its in-flight slot back and
    /// records the product's `Retry-After` (capped at
    /// [`MAX_RETRY_AFTER_SECONDS`]). Returns the hold recorded. Failures
    /// are logged, never the call's: a slot not given back ends with its
    /// hold, a `Retry-After` not recorded is answered by the retry policy.
    pub(crate) async fn done(
        &self,
        name: &str,
        job_id: u64,
        holds_slot: bool,
        retry_after: Option<RetryAfter>,
        now: Instant,
    ) -> Option<Instant> {
        if holds_slot {
            if let Err(e) = self.port().give_back_call_slot(name, job_id).await {
                tracing::warn!(connection = name, job = job_id, error = %e, "in-flight slot not given back; it ends with the job's lease");
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
            read.insert(name.to_owned(), (now.unix_seconds(), Some(until)));
        }
        Some(until)
    }

    /// The `Retry-After` hold of a connection without `limits`, read from
    /// the shared port at most once a second.
    async fn hold_of_unlimited(
        &self,
        name: &str,
        now: &Instant,
    ) -> Result<Option<Instant>, StoreError> {
        let second = now.unix_seconds();
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
