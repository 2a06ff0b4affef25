//! What a wait for flow control is, as the run's ledger records it and
//! the flow-control port ([`crate::flow`]) answers it: [`FlowLimit`] and
//! [`CallWait`]. Data only, so the store's data and the port both take it.

use coordinator_ir::instant::Instant;
use serde::{Deserialize, Serialize};

/// The limit that holds a call back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlowLimit {
    /// `limits.inFlight` calls are in flight.
    InFlight,
    /// `limits.perSecond` (with `burst`) is spent for now.
    Rate,
    /// The product answered `Retry-After` (429 or 503) for the connection.
    RetryAfter,
}

impl FlowLimit {
    /// The label as operators read it: `in-flight`, `rate`, `retry-after`.
    pub fn as_str(self) -> &'static str {
        match self {
            FlowLimit::InFlight => "in-flight",
            FlowLimit::Rate => "rate",
            FlowLimit::RetryAfter => "retry-after",
        }
    }

    /// Every limit, in label order (for metrics).
    pub const ALL: [FlowLimit; 3] = [FlowLimit::InFlight, FlowLimit::Rate, FlowLimit::RetryAfter];
}

/// A step's next call waiting for its connection's flow control, as the
/// run's ledger records it (`inspect`'s `waitingFor`, the status's
/// `waitingFor`): recorded when the wait begins, cleared in the commit
/// that feeds the call's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallWait {
    /// The connection's name.
    pub connection: String,
    /// The limit that held the call back when the wait began.
    pub limit: FlowLimit,
    /// When the wait began.
    pub since: Instant,
}
