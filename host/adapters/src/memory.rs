//! An in-memory [`ProductAdapter`] for unit tests of the service: outcomes
//! are scripted per operation id and consumed in order; every call is
//! recorded. No sockets, no tokens.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use coordinator_vm::Answer;

use super::{
    AdapterError, DispatchRequest, MarkSending, Observation, ObserveError, Outcome, ProductAdapter,
    ReceiptRequest,
};
use coordinator_runtime::config::Connection;

/// One call the [`MemoryAdapter`] received.
#[derive(Clone, Debug, PartialEq)]
pub enum MemoryCall {
    /// A dispatch, with the connection's `type`.
    Dispatch {
        /// The connection's `type` (`breg`, `messaging`, ...).
        connection_type: &'static str,
        /// What was asked.
        request: DispatchRequest,
    },
    /// A receipt lookup, with the connection's `type`.
    Receipt {
        /// The connection's `type`.
        connection_type: &'static str,
        /// What was asked.
        request: ReceiptRequest,
    },
}

#[derive(Default)]
struct Inner {
    dispatch: HashMap<String, VecDeque<Outcome>>,
    receipts: HashMap<String, VecDeque<Outcome>>,
    calls: Vec<MemoryCall>,
}

/// Scripted outcomes by operation id. A call with nothing scripted answers
/// [`Answer::Retryable`] `memory.unscripted` (a definite "not processed", so
/// a test that forgot a script sees a retry, never a fake effect).
#[derive(Clone, Default)]
pub struct MemoryAdapter {
    inner: Arc<Mutex<Inner>>,
}

/// The code of the answer to an unscripted call.
pub const UNSCRIPTED: &str = "memory.unscripted";

impl MemoryAdapter {
    /// An adapter with nothing scripted.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends `outcome` to the answers of dispatches of `operation_id`.
    pub fn script(&self, operation_id: &str, outcome: impl Into<Outcome>) -> &Self {
        self.lock()
            .dispatch
            .entry(operation_id.to_owned())
            .or_default()
            .push_back(outcome.into());
        self
    }

    /// Appends `outcome` to the answers of receipt lookups of `operation_id`.
    pub fn script_receipt(&self, operation_id: &str, outcome: impl Into<Outcome>) -> &Self {
        self.lock()
            .receipts
            .entry(operation_id.to_owned())
            .or_default()
            .push_back(outcome.into());
        self
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<MemoryCall> {
        self.lock().calls.clone()
    }

    /// How many dispatches of `operation_id` were made.
    pub fn dispatches(&self, operation_id: &str) -> usize {
        self.lock()
            .calls
            .iter()
            .filter(|c| matches!(c, MemoryCall::Dispatch { request, .. } if request.operation_id == operation_id))
            .count()
    }
}

fn unscripted() -> Outcome {
    Answer::Retryable {
        code: UNSCRIPTED.to_owned(),
    }
    .into()
}

#[async_trait]
impl ProductAdapter for MemoryAdapter {
    async fn dispatch_marking(
        &self,
        connection: &Connection,
        request: &DispatchRequest,
        mark: &dyn MarkSending,
    ) -> Result<Outcome, AdapterError> {
        mark.mark_sending().await.map_err(AdapterError::NotSent)?;
        let mut inner = self.lock();
        inner.calls.push(MemoryCall::Dispatch {
            connection_type: connection.type_name(),
            request: request.clone(),
        });
        Ok(inner
            .dispatch
            .get_mut(&request.operation_id)
            .and_then(VecDeque::pop_front)
            .unwrap_or_else(unscripted))
    }

    async fn lookup_receipt(
        &self,
        connection: &Connection,
        request: &ReceiptRequest,
    ) -> Result<Outcome, AdapterError> {
        let mut inner = self.lock();
        inner.calls.push(MemoryCall::Receipt {
            connection_type: connection.type_name(),
            request: request.clone(),
        });
        Ok(inner
            .receipts
            .get_mut(&request.operation_id)
            .and_then(VecDeque::pop_front)
            .unwrap_or_else(unscripted))
    }
    async fn observe(
        &self,
        connection: &Connection,
        completion: &str,
        handle: &str,
    ) -> Result<Observation, ObserveError> {
        crate::casework::observe(self, connection, completion, handle).await
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::Observation;
    use coordinator_runtime::config::{Authorization, PlainConnection, SecretRef};

    fn messaging() -> Connection {
        Connection::Messaging(PlainConnection {
            base_url: "http://127.0.0.1:1".into(),
            authorization: Authorization {
                token_endpoint: "http://127.0.0.1:1/token".into(),
                client_id: "c".into(),
                signing_key_ref: SecretRef("secret:file/k".into()),
                scopes: vec![],
                resource: None,
            },
            request_timeout_milliseconds: None,
            limits: None,
        })
    }

    #[tokio::test]
    async fn scripted_in_order_then_unscripted() {
        let a = MemoryAdapter::new();
        let op = "messaging.submit-message/v1";
        a.script(op, Answer::Uncertain { code: "x".into() }).script(
            op,
            Answer::Success {
                value: serde_json::json!({"id": "1"}),
            },
        );
        let req = DispatchRequest {
            operation_id: op.into(),
            action: None,
            command: serde_json::json!({}),
            idempotency_key: Some("k".into()),
        };
        let c = messaging();
        assert!(matches!(
            a.dispatch(&c, &req).await.unwrap(),
            Outcome::Answer(Answer::Uncertain { .. })
        ));
        assert!(matches!(
            a.dispatch(&c, &req).await.unwrap(),
            Outcome::Answer(Answer::Success { .. })
        ));
        assert_eq!(a.dispatch(&c, &req).await.unwrap(), unscripted());
        assert_eq!(a.dispatches(op), 3);
    }

    #[tokio::test]
    async fn a_review_is_observed_through_a_read() {
        let a = MemoryAdapter::new();
        a.script(
            crate::casework::READ_REVIEW,
            Answer::Success {
                value: serde_json::json!({"id": "r", "status": "decided",
                    "decision": {"outcome": "approved", "decidedAt": "2026-10-10T00:00:00Z"}}),
            },
        );
        let state = a.observe(&messaging(), "result", "r").await.unwrap();
        assert!(matches!(state, Observation::Completed { .. }));
        assert!(a.observe(&messaging(), "result", "r").await.is_err());
        assert!(a.observe(&messaging(), "other", "r").await.is_err());
    }
}
