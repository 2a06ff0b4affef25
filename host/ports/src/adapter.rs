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
    /// A 429 or 503 that said when to come back (`Retry-After`): `answer`
    /// is what the status means for this attempt (retryable), and the
    /// engine holds every next call to the connection back until
    /// `retry_after` ([`crate::flow::FlowControl::hold_back_connection`]).
    HeldBack {
        /// The attempt's answer.
        answer: Answer,
        /// When the product asked to be called again.
        retry_after: RetryAfter,
    },
}

/// A product's `Retry-After` header (RFC 9110 §10.2.3), as it was written.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RetryAfter {
    /// `delay-seconds`: this many seconds after the answer.
    Seconds(u64),
    /// An HTTP date.
    At(coordinator_ir::instant::Instant),
}

impl RetryAfter {
    /// The instant it names, the answer having come at `now`.
    pub fn until(
        &self,
        now: &coordinator_ir::instant::Instant,
    ) -> coordinator_ir::instant::Instant {
        match self {
            RetryAfter::Seconds(s) => now
                .plus_seconds(i64::try_from(*s).unwrap_or(i64::MAX))
                .unwrap_or(*now),
            RetryAfter::At(at) => *at,
        }
    }
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
            Outcome::HeldBack { answer, .. } => answer,
        }
    }

    /// The outcome's kind alone (`success`, `retryable`, `uncertain`, ...,
    /// `invalid-command`, `invalid-response`): the `result` label of the
    /// dispatch metric.
    pub fn kind(&self) -> &'static str {
        match self {
            Outcome::Answer(a) | Outcome::HeldBack { answer: a, .. } => a.kind(),
            Outcome::InvalidCommand { .. } => "invalid-command",
            Outcome::InvalidResponse { .. } => "invalid-response",
        }
    }

    /// The outcome's kind and code, for logs (never a body).
    pub fn label(&self) -> String {
        match self {
            Outcome::Answer(a) | Outcome::HeldBack { answer: a, .. } => match a {
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

/// What one observation of a completion found (SPEC §6 "Completion of a
/// review").
#[derive(Clone, Debug, PartialEq)]
pub enum Observation {
    /// Not complete yet: observe again at the next interval.
    Pending,
    /// Complete: `value` is the completion value to deliver as
    /// [`coordinator_vm::Event::CompletionObserved`] (the VM validates it;
    /// a Casework review's `{outcome, decidedAt, note?}`).
    Completed {
        /// The completion value.
        value: Value,
    },
    /// It will never complete (a withdrawn review): the wait runs to its
    /// timeout.
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
    /// The attempt stopped before its request was written: marking the
    /// job `sending` ([`MarkSending`]) failed (the lease was lost, the
    /// store is unavailable). Nothing reached the product.
    NotSent(crate::store::StoreError),
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
            AdapterError::NotSent(e) => write!(f, "not sent: {e}"),
        }
    }
}

impl std::error::Error for AdapterError {}

/// Why an observation produced no [`Observation`].
#[derive(Debug)]
pub enum ObserveError {
    /// The read did not succeed (retryable, uncertain, refused, ...): observe
    /// again at the next observation.
    Unanswered(Outcome),
    /// The product answered with something that is not the observed thing
    /// (the message says why; never a body).
    Malformed(String),
    /// Nothing was sent.
    Adapter(AdapterError),
}

impl std::fmt::Display for ObserveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ObserveError::Unanswered(o) => write!(f, "observation unanswered: {}", o.label()),
            ObserveError::Malformed(m) => write!(f, "observation malformed: {m}"),
            ObserveError::Adapter(e) => write!(f, "observation not attempted: {e}"),
        }
    }
}

impl std::error::Error for ObserveError {}

/// Marks a dispatch job `sending`: called by an adapter once everything
/// that can fail without contacting the product is done (the access
/// token, the signing key, the request's bytes), immediately before the
/// request is written. An attempt that stops before this point leaves its
/// job `ready`, to be sent once later with the same bytes and key; only a
/// job marked `sending` can have reached the product, so only such a job is
/// held as uncertain after a crash.
#[async_trait]
pub trait MarkSending: Send + Sync {
    /// Marks the job; an error stops the attempt unsent
    /// ([`AdapterError::NotSent`]).
    async fn mark_sending(&self) -> Result<(), crate::store::StoreError>;
}

/// A [`MarkSending`] that marks nothing: for reads that are safe to send
/// again (a crash mid-read sends the read again), and for callers with no
/// job (tests, observations).
pub struct NoMark;

#[async_trait]
impl MarkSending for NoMark {
    async fn mark_sending(&self) -> Result<(), crate::store::StoreError> {
        Ok(())
    }
}

/// The port through which the service calls products (STYLE.md "host/").
///
/// Every method is one attempt: no method retries, backs off or remembers
/// earlier attempts (the VM and the service decide about retries, SPEC §5).
#[async_trait]
pub trait ProductAdapter: Send + Sync {
    /// Sends one attempt of a call step through `connection` and maps the
    /// product's answer (SPEC §6 table and status mapping), marking
    /// nothing ([`NoMark`]).
    async fn dispatch(
        &self,
        connection: &Connection,
        request: &DispatchRequest,
    ) -> Result<Outcome, AdapterError> {
        self.dispatch_marking(connection, request, &NoMark).await
    }

    /// [`ProductAdapter::dispatch`], calling `mark` immediately before the
    /// request is written (never when the attempt ends earlier: a refused
    /// token, a command the operation cannot carry).
    async fn dispatch_marking(
        &self,
        connection: &Connection,
        request: &DispatchRequest,
        mark: &dyn MarkSending,
    ) -> Result<Outcome, AdapterError>;

    /// Looks up the receipt of a mutation's idempotency key (SPEC §6: 200 →
    /// [`Answer::Success`] with the original response, 404 →
    /// [`Answer::ReceiptUnresolved`], 410 → [`Answer::ReceiptExpired`]).
    async fn lookup_receipt(
        &self,
        connection: &Connection,
        request: &ReceiptRequest,
    ) -> Result<Outcome, AdapterError>;

    /// Observes completion `completion` of an accepted call whose product
    /// handle is `handle`, through `connection` (one read; SPEC §6
    /// "Completion of a review": a Casework review request read by its id).
    /// What a product's completion looks like is the adapter's knowledge.
    async fn observe(
        &self,
        connection: &Connection,
        completion: &str,
        handle: &str,
    ) -> Result<Observation, ObserveError>;
}
