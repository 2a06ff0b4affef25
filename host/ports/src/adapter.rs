//! The product adapter port: how the service calls other products over
//! HTTP (SPEC §5, §6), behind one small trait, [`ProductAdapter`]. The
//! implementations are in `coordinator-adapters` (`HttpAdapter`, and
//! `MemoryAdapter` for tests).
//!
//! An adapter answers in the VM's vocabulary ([`Answer`]) wherever the VM has
//! one. SPEC §6 also names two failures the VM cannot receive from the host
//! yet (`invalid-command` for 400 and other 4xx, `invalid-response` for a 2xx
//! body that is not JSON); they are [`Outcome::InvalidCommand`] and
//! [`Outcome::InvalidResponse`], and the service decides how to feed them to
//! the VM (see docs/adapters.md).

use async_trait::async_trait;
use coordinator_vm::Answer;
use serde_json::Value;

use coordinator_runtime::config::Connection;

/// Default per-request timeout when a connection sets no
/// `requestTimeoutMilliseconds` (SPEC §9): 10 seconds.
pub const DEFAULT_REQUEST_TIMEOUT_MILLISECONDS: u64 = 10_000;

/// One attempt of a call step, as [`coordinator_vm::Command::Dispatch`]
/// carries it.
#[derive(Clone, Debug, PartialEq)]
pub struct DispatchRequest {
    /// The catalogue operation, e.g. `messaging.submit-message/v1`.
    pub operation_id: String,
    /// The BReg action (`breg.invoke-action/v1` only).
    pub action: Option<String>,
    /// The frozen operation input (SPEC §5.1), sent as is.
    pub command: Value,
    /// The step's idempotency key (SPEC §5): required for mutations, ignored
    /// for reads and evaluations.
    pub idempotency_key: Option<String>,
}

/// A receipt lookup of a mutation's idempotency key (SPEC §6, `reconcile`).
#[derive(Clone, Debug, PartialEq)]
pub struct ReceiptRequest {
    /// The catalogue operation whose receipt is looked up
    /// (`messaging.submit-message/v1` or `scheduling.create-appointment/v1`).
    pub operation_id: String,
    /// The idempotency key the original command was sent with.
    pub idempotency_key: String,
}

/// What one dispatch or receipt lookup came to.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// An answer the VM takes as [`coordinator_vm::Event::CallAnswered`].
    Answer(Answer),
    /// 400 or another 4xx outside the mapping (SPEC §6): the product refused
    /// the command as malformed. The step fails `invalid-command`
    /// ([`Answer::InvalidCommand`], see [`Outcome::into_answer`]). Also returned,
    /// before anything is sent, for an `external.get` path or query name the
    /// connection does not permit.
    InvalidCommand {
        /// The HTTP status, or `None` when refused before sending.
        status: Option<u16>,
        /// The problem `code`, when the body had one, or the host's reason.
        code: Option<String>,
    },
    /// A 2xx whose body is not JSON (SPEC §6 "unexpected 2xx body"): the step
    /// must fail `invalid-response`. A JSON body of the wrong shape is a
    /// [`Answer::Success`]: the VM validates it against the output schema.
    InvalidResponse {
        /// The HTTP status.
        status: u16,
    },
}

impl Outcome {
    /// The VM answer for this outcome: `InvalidCommand` and `InvalidResponse`
    /// become [`Answer::InvalidCommand`] / [`Answer::InvalidResponse`] with
    /// the status or code as their code.
    pub fn into_answer(self) -> Answer {
        match self {
            Outcome::Answer(a) => a,
            Outcome::InvalidCommand { status, code } => Answer::InvalidCommand {
                code: code
                    .or_else(|| status.map(|s| format!("http-{s}")))
                    .unwrap_or_else(|| "invalid-command".into()),
            },
            Outcome::InvalidResponse { status } => Answer::InvalidResponse {
                code: format!("http-{status}"),
            },
        }
    }

    /// The outcome's kind and code, for logs and metrics (never a body).
    pub fn label(&self) -> String {
        match self {
            Outcome::Answer(a) => match a {
                Answer::Retryable { code }
                | Answer::Refused { code }
                | Answer::Uncertain { code } => {
                    format!("{} {code}", a.kind())
                }
                _ => a.kind().to_owned(),
            },
            Outcome::InvalidCommand { .. } => "invalid-command".to_owned(),
            Outcome::InvalidResponse { .. } => "invalid-response".to_owned(),
        }
    }
}

impl From<Answer> for Outcome {
    fn from(answer: Answer) -> Self {
        Outcome::Answer(answer)
    }
}

/// The state of a Casework review request, as a wait-for observation reads it
/// (SPEC §6 "Completion of a review").
#[derive(Clone, Debug, PartialEq)]
pub enum ReviewState {
    /// Not decided yet: observe again after `resultCheckSeconds`.
    Pending,
    /// Decided: `decision` is the completion value `{outcome, decidedAt,
    /// note?}` to deliver as [`coordinator_vm::Event::CompletionObserved`]
    /// (the VM validates it).
    Decided {
        /// The completion value (`{outcome, decidedAt, note?}`).
        decision: Value,
    },
    /// Withdrawn: no decision will come; the wait runs to its timeout.
    Withdrawn,
}

/// Why an adapter could not attempt a call at all. These are faults of the
/// deployment or of the host, never product answers: nothing was sent.
#[derive(Debug)]
pub enum AdapterError {
    /// The operation id is not in the catalogue, or has no receipts.
    UnknownOperation(String),
    /// The connection's `type` does not serve the operation's product.
    ConnectionMismatch {
        /// The operation id.
        operation: String,
        /// The connection `type` found.
        connection_type: &'static str,
    },
    /// A mutation without an idempotency key, or an invoke-action without an
    /// action, or a command missing a member the request needs.
    BadRequest(String),
    /// The connection's signing key could not be read or used.
    Key(String),
    /// The base URL or token endpoint is not a valid URL.
    Url(String),
}

impl std::fmt::Display for AdapterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AdapterError::UnknownOperation(op) => write!(f, "unknown operation `{op}`"),
            AdapterError::ConnectionMismatch {
                operation,
                connection_type,
            } => write!(
                f,
                "operation `{operation}` cannot use a connection of type `{connection_type}`"
            ),
            AdapterError::BadRequest(m) => write!(f, "bad request: {m}"),
            AdapterError::Key(m) => write!(f, "signing key: {m}"),
            AdapterError::Url(m) => write!(f, "url: {m}"),
        }
    }
}

impl std::error::Error for AdapterError {}

/// Why a review read produced no [`ReviewState`].
#[derive(Debug)]
pub enum ReviewReadError {
    /// The read did not succeed (retryable, uncertain, refused, ...): observe
    /// again at the next observation.
    Unanswered(Outcome),
    /// 200 with a body that is not a review request (`message` says why).
    Malformed(String),
    /// Nothing was sent.
    Adapter(AdapterError),
}

impl std::fmt::Display for ReviewReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReviewReadError::Unanswered(o) => write!(f, "review read unanswered: {}", o.label()),
            ReviewReadError::Malformed(m) => write!(f, "review read malformed: {m}"),
            ReviewReadError::Adapter(e) => write!(f, "review read not attempted: {e}"),
        }
    }
}

impl std::error::Error for ReviewReadError {}

/// The port through which the service calls products (STYLE.md "host/").
///
/// Every method is one attempt: no method retries, backs off or remembers
/// earlier attempts (the VM and the service decide about retries, SPEC §5).
#[async_trait]
pub trait ProductAdapter: Send + Sync {
    /// Sends one attempt of a call step through `connection` and maps the
    /// product's answer (SPEC §6 table and status mapping).
    async fn dispatch(
        &self,
        connection: &Connection,
        request: &DispatchRequest,
    ) -> Result<Outcome, AdapterError>;

    /// Looks up the receipt of a mutation's idempotency key (SPEC §6: 200 →
    /// [`Answer::Success`] with the original response, 404 →
    /// [`Answer::ReceiptUnresolved`], 410 → [`Answer::ReceiptExpired`]).
    async fn lookup_receipt(
        &self,
        connection: &Connection,
        request: &ReceiptRequest,
    ) -> Result<Outcome, AdapterError>;

    /// Reads a Casework review request for a wait-for observation
    /// (`casework.read-review-request/v1`, SPEC §6 "Completion of a review").
    async fn read_review(
        &self,
        connection: &Connection,
        review_request_id: &str,
    ) -> Result<ReviewState, ReviewReadError> {
        let request = DispatchRequest {
            operation_id: READ_REVIEW.to_owned(),
            action: None,
            command: serde_json::json!({ "id": review_request_id }),
            idempotency_key: None,
        };
        match self.dispatch(connection, &request).await {
            Ok(Outcome::Answer(Answer::Success { value })) => review_state(&value),
            Ok(other) => Err(ReviewReadError::Unanswered(other)),
            Err(e) => Err(ReviewReadError::Adapter(e)),
        }
    }
}

/// `casework.read-review-request/v1`.
pub const READ_REVIEW: &str = "casework.read-review-request/v1";

/// Reads a review request body (`{id, status, decision?}`) into a
/// [`ReviewState`].
pub fn review_state(value: &Value) -> Result<ReviewState, ReviewReadError> {
    match value.get("status").and_then(Value::as_str) {
        Some("pending") => Ok(ReviewState::Pending),
        Some("withdrawn") => Ok(ReviewState::Withdrawn),
        Some("decided") => match value.get("decision") {
            Some(decision) if decision.is_object() => Ok(ReviewState::Decided {
                decision: decision.clone(),
            }),
            _ => Err(ReviewReadError::Malformed(
                "status `decided` without a `decision` object".to_owned(),
            )),
        },
        Some(other) => Err(ReviewReadError::Malformed(format!(
            "unknown status `{other}`"
        ))),
        None => Err(ReviewReadError::Malformed("no `status` string".to_owned())),
    }
}
