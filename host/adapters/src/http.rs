//! The real [`ProductAdapter`]: every request of SPEC §6's table over reqwest
//! (rustls with ring, no redirects), with a fresh access token per attempt.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use coordinator_ir::catalogue;
use coordinator_ir::instant::Instant;
use coordinator_ports::adapter::RetryAfter;
use coordinator_vm::Answer;
use reqwest::header::{HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
use reqwest::{Method, Url};

use crate::client_span::ClientSpan;
use serde_json::{Map, Value};

use super::mapping::{self, dispatch_status, external_status, receipt_status};
use super::token::{TokenClient, TokenError};
use super::{
    AdapterError, DispatchRequest, MarkSending, NoMark, Observation, ObserveError, Outcome,
    ProductAdapter, ReceiptRequest, SecretSource, DEFAULT_REQUEST_TIMEOUT_MILLISECONDS,
};
use coordinator_runtime::config::{
    BregConnection, CaseworkConnection, Connection, DecisionConnection, ExternalHttpConnection,
};

/// The header that carries a mutation's idempotency key (SPEC §6).
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// The header that carries the BReg access profile on record reads (SPEC §6).
pub const ACCESS_PROFILE: &str = "registry-access-profile";
/// Responses larger than this (bytes) are refused as `invalid-response`.
pub const MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;
/// Time allowed to open a connection (TCP and TLS) before the request is
/// sent, bounded by the request timeout. A connect failure is retryable.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Calls products over HTTP (SPEC §6).
///
/// One attempt per call: a token from the connection's token endpoint (when
/// the connection has `authorization`), then the product request, each
/// within the connection's `requestTimeoutMilliseconds` (default
/// [`DEFAULT_REQUEST_TIMEOUT_MILLISECONDS`]). Redirects are never followed.
#[derive(Clone)]
pub struct HttpAdapter {
    http: reqwest::Client,
    tokens: TokenClient,
    /// Makes the HTTP client span of a traced attempt
    /// ([`HttpAdapter::with_tracer`]); `None`: no span, no `traceparent`.
    tracer: Option<Arc<opentelemetry::global::BoxedTracer>>,
}

impl HttpAdapter {
    /// An adapter reading connection signing keys from `secrets`.
    ///
    /// Errors: the TLS backend cannot be initialised (no system roots are
    /// not an error; a product over https then fails to connect).
    pub fn new(secrets: Arc<dyn SecretSource>) -> Result<Self, AdapterError> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(concat!("registry-coordinator/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| AdapterError::Url(format!("cannot build the HTTP client: {e}")))?;
        Ok(HttpAdapter {
            tokens: TokenClient::new(http.clone(), secrets),
            http,
            tracer: None,
        })
    }

    /// The adapter making an HTTP client span (OpenTelemetry's client
    /// conventions, no URL path or query) for each request sent inside a
    /// span of the engine's, and sending the product its `traceparent`
    /// (docs/operations.md "Traces"). It never touches the global provider.
    pub fn with_tracer(mut self, tracer: opentelemetry::global::BoxedTracer) -> Self {
        self.tracer = Some(Arc::new(tracer));
        self
    }

    /// The adapter stamping its client assertions (`iat`, `exp`) with
    /// `clock` instead of the operating system's: the service gives it the
    /// engine's database-aligned clock.
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn coordinator_runtime::clock::Clock>) -> Self {
        self.tokens = self.tokens.with_clock(clock);
        self
    }

    /// The token client (for diagnostics and tests).
    pub fn tokens(&self) -> &TokenClient {
        &self.tokens
    }

    async fn send(
        &self,
        connection: &Connection,
        operation_id: &str,
        plan: Plan,
        idempotency_key: Option<&str>,
        mark: &dyn MarkSending,
    ) -> Result<Result<Answered, Outcome>, AdapterError> {
        let timeout = Duration::from_millis(
            connection
                .request_timeout_milliseconds()
                .unwrap_or(DEFAULT_REQUEST_TIMEOUT_MILLISECONDS),
        );
        let span = ClientSpan::start(
            self.tracer.as_deref(),
            &plan.method,
            &plan.url,
            operation_id,
        );
        let mut builder = self
            .http
            .request(plan.method, plan.url)
            .timeout(timeout)
            .header(ACCEPT, "application/json, application/problem+json");
        if let Some(auth) = connection.authorization() {
            let token = match self.tokens.acquire(auth, timeout).await {
                Ok(t) => t,
                Err(TokenError::Secret(e)) => return Err(AdapterError::Key(e.to_string())),
                Err(TokenError::Key(e)) => return Err(AdapterError::Key(e.to_string())),
                Err(TokenError::Refused { .. }) => {
                    return Ok(Err(refused(mapping::TOKEN_REFUSED)));
                }
                Err(TokenError::Unavailable(_)) => {
                    return Ok(Err(Answer::Retryable {
                        code: mapping::TOKEN_UNAVAILABLE.to_owned(),
                    }
                    .into()));
                }
            };
            let mut value = HeaderValue::try_from(format!("Bearer {}", token.secret()))
                .map_err(|_| AdapterError::Key("the access token is not a header value".into()))?;
            value.set_sensitive(true);
            builder = builder.header(AUTHORIZATION, value);
        }
        if plan.idempotent {
            let key = idempotency_key.ok_or_else(|| {
                AdapterError::BadRequest(format!("`{operation_id}` needs an idempotency key"))
            })?;
            builder = builder.header(IDEMPOTENCY_KEY, key);
        }
        if let Some(profile) = plan.profile {
            builder = builder.header(ACCESS_PROFILE, profile);
        }
        if let Some(body) = plan.body {
            builder = builder.header(CONTENT_TYPE, "application/json").body(body);
        }
        if let Some(traceparent) = span.traceparent() {
            builder = builder.header(TRACEPARENT, traceparent);
        }
        // Everything that can fail without the product is done: from here
        // on the request may reach it.
        mark.mark_sending().await.map_err(AdapterError::NotSent)?;
        let exchanged = exchange(builder).await;
        span.end(match &exchanged {
            Ok(answered) => Ok(answered.status),
            Err((_, kind)) => Err(kind),
        });
        Ok(exchanged.map_err(|(outcome, _)| outcome))
    }
}

/// W3C Trace Context's request header.
const TRACEPARENT: &str = "traceparent";

/// Sends the request and reads the response, at most
/// [`MAX_RESPONSE_BYTES`] of body: its status and body, or the outcome of
/// a failure with its kind for the client span.
async fn exchange(builder: reqwest::RequestBuilder) -> Result<Answered, (Outcome, &'static str)> {
    let mut response = match builder.send().await {
        Ok(r) => r,
        Err(e) => return Err((transport(&e), error_kind(&e))),
    };
    let status = response.status().as_u16();
    let retry_after = match status {
        429 | 503 => response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(retry_after),
        _ => None,
    };
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
                    return Err((Outcome::InvalidResponse { status }, "body-too-large"));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => break,
            Err(e) => return Err((transport(&e), error_kind(&e))),
        }
    }
    Ok(Answered {
        status,
        body,
        retry_after,
    })
}

/// A transport failure's kind, as the client span's `error.type`.
fn error_kind(e: &reqwest::Error) -> &'static str {
    if e.is_connect() {
        "connect"
    } else if e.is_timeout() {
        "timeout"
    } else if e.is_body() || e.is_decode() {
        "body"
    } else {
        "transport"
    }
}

/// A product's answer to one request, read whole.
struct Answered {
    status: u16,
    body: Vec<u8>,
    /// `Retry-After` of a 429 or 503, when it parses.
    retry_after: Option<RetryAfter>,
}

/// Reads a `Retry-After` value (RFC 9110 §10.2.3): `delay-seconds` (digits
/// only) or an HTTP date (`httpdate`); `None` for anything else, which is
/// then ignored (the step's retry policy applies).
fn retry_after(value: &str) -> Option<RetryAfter> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // More digits than a u64 holds is "a very long time".
        return Some(RetryAfter::Seconds(value.parse().unwrap_or(u64::MAX)));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    let since = at.duration_since(std::time::UNIX_EPOCH).ok()?;
    Some(RetryAfter::At(Instant::from_unix_seconds(
        i64::try_from(since.as_secs()).ok()?,
    )))
}

/// One planned request.
struct Plan {
    method: Method,
    url: Url,
    body: Option<Vec<u8>>,
    /// `registry-access-profile` value.
    profile: Option<String>,
    /// Whether the request carries `Idempotency-Key`.
    idempotent: bool,
}

fn refused(code: &str) -> Outcome {
    Answer::Refused {
        code: code.to_owned(),
    }
    .into()
}

/// A transport failure (SPEC §5 rules): nothing sent (connect failed) is
/// retryable; anything after the request may have been sent is uncertain.
fn transport(e: &reqwest::Error) -> Outcome {
    if e.is_connect() {
        Answer::Retryable {
            code: mapping::CONNECTION_REFUSED.to_owned(),
        }
        .into()
    } else if e.is_timeout() {
        Answer::Uncertain {
            code: mapping::TRANSPORT_TIMEOUT.to_owned(),
        }
        .into()
    } else {
        Answer::Uncertain {
            code: mapping::TRANSPORT_RESET.to_owned(),
        }
        .into()
    }
}

fn base(connection: &Connection) -> Result<Url, AdapterError> {
    let url = Url::parse(connection.base_url())
        .map_err(|e| AdapterError::Url(format!("baseUrl: {e}")))?;
    if url.cannot_be_a_base() {
        return Err(AdapterError::Url("baseUrl cannot be a base".into()));
    }
    Ok(url)
}

/// `base` + path segments (each percent-encoded as one segment).
fn url_with(connection: &Connection, segments: &[&str]) -> Result<Url, AdapterError> {
    let mut url = base(connection)?;
    url.set_query(None);
    url.path_segments_mut()
        .map_err(|_| AdapterError::Url("baseUrl cannot be a base".into()))?
        .pop_if_empty()
        .extend(segments);
    Ok(url)
}

fn text<'a>(command: &'a Value, name: &str) -> Result<&'a str, AdapterError> {
    command
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| AdapterError::BadRequest(format!("the command has no `{name}` string")))
}

fn json(value: &Value) -> Result<Vec<u8>, AdapterError> {
    serde_json::to_vec(value).map_err(|e| AdapterError::BadRequest(e.to_string()))
}

fn checked_operation(
    connection: &Connection,
    operation_id: &str,
) -> Result<catalogue::OperationDescriptor, AdapterError> {
    let descriptor = catalogue::lookup(operation_id)
        .ok_or_else(|| AdapterError::UnknownOperation(operation_id.to_owned()))?;
    if descriptor.product.connection_type() != connection.type_name() {
        return Err(AdapterError::ConnectionMismatch {
            operation: operation_id.to_owned(),
            connection_type: connection.type_name(),
        });
    }
    Ok(descriptor)
}

/// Plans the request of SPEC §6's table, or refuses the command before
/// sending (`external.get` paths and query names the connection does not
/// permit: invalid-command).
fn plan(
    connection: &Connection,
    request: &DispatchRequest,
) -> Result<Result<Plan, Outcome>, AdapterError> {
    let descriptor = checked_operation(connection, &request.operation_id)?;
    let planner = RequestPlanner {
        connection,
        command: &request.command,
        idempotent: descriptor.idempotency_key,
    };
    let c = planner.command;
    let plan = match (request.operation_id.as_str(), connection) {
        ("breg.read-record/v1", Connection::Breg(b)) => planner.breg_read_record(b)?,
        ("breg.invoke-action/v1", _) => planner.breg_invoke_action(request.action.as_deref())?,
        ("messaging.submit-message/v1", _) => planner.post(planner.url(&["v1", "messages"])?, c)?,
        ("scheduling.read-availability/v1", _) => planner.scheduling_read_availability()?,
        ("scheduling.create-appointment/v1", _) => {
            planner.post(planner.url(&["v1", "appointments"])?, c)?
        }
        ("casework.submit-review-request/v1", Connection::CaseworkReviewProducer(cw)) => {
            planner.casework_submit_review_request(cw)?
        }
        ("casework.read-review-request/v1", _) => {
            planner.get(planner.url(&["v1", "review-requests", text(c, "id")?])?)
        }
        ("casework.withdraw-review-request/v1", _) => planner.casework_withdraw_review_request()?,
        ("external.get/v1", Connection::ExternalHttp(x)) => match planner.external_get(x)? {
            Ok(plan) => plan,
            Err(refusal) => return Ok(Err(refusal)),
        },
        ("evaluation.evaluate/v1", Connection::Decision(d)) => planner.evaluation_evaluate(d)?,
        (op, _) => return Err(AdapterError::UnknownOperation(op.to_owned())),
    };
    Ok(Ok(plan))
}

/// What every request of one dispatch is planned from: the connection
/// (its base URL and product settings), the operation's command (JSON) and
/// whether the operation carries `Idempotency-Key`.
struct RequestPlanner<'a> {
    connection: &'a Connection,
    command: &'a Value,
    idempotent: bool,
}

impl RequestPlanner<'_> {
    /// The connection's base URL + `segments` (see [`url_with`]).
    fn url(&self, segments: &[&str]) -> Result<Url, AdapterError> {
        url_with(self.connection, segments)
    }

    /// A `POST` of `body` as JSON to `url`.
    fn post(&self, url: Url, body: &Value) -> Result<Plan, AdapterError> {
        Ok(Plan {
            method: Method::POST,
            url,
            body: Some(json(body)?),
            profile: None,
            idempotent: self.idempotent,
        })
    }

    /// A `GET` of `url`, with no body.
    fn get(&self, url: Url) -> Plan {
        Plan {
            method: Method::GET,
            url,
            body: None,
            profile: None,
            idempotent: self.idempotent,
        }
    }

    /// `GET /v1/collections/{collection}/records/{recordId}` with the
    /// connection's access profile.
    fn breg_read_record(&self, breg: &BregConnection) -> Result<Plan, AdapterError> {
        let c = self.command;
        let url = self.url(&[
            "v1",
            "collections",
            text(c, "collection")?,
            "records",
            text(c, "recordId")?,
        ])?;
        Ok(Plan {
            profile: Some(breg.profile.clone()),
            ..self.get(url)
        })
    }

    /// `POST /v1/actions/{action}` with the command as the body; the
    /// dispatch must name its action.
    fn breg_invoke_action(&self, action: Option<&str>) -> Result<Plan, AdapterError> {
        let action = action.ok_or_else(|| {
            AdapterError::BadRequest("`breg.invoke-action/v1` needs an action".into())
        })?;
        self.post(self.url(&["v1", "actions", action])?, self.command)
    }

    /// `GET /v1/availability?offering=&start=&end=&limit=` from the
    /// command's strings and its integer `limit`.
    fn scheduling_read_availability(&self) -> Result<Plan, AdapterError> {
        let c = self.command;
        let mut url = self.url(&["v1", "availability"])?;
        {
            let mut q = url.query_pairs_mut();
            for name in ["offering", "start", "end"] {
                q.append_pair(name, text(c, name)?);
            }
            let limit = c.get("limit").and_then(Value::as_u64).ok_or_else(|| {
                AdapterError::BadRequest("the command has no integer `limit`".into())
            })?;
            q.append_pair("limit", &limit.to_string());
        }
        Ok(self.get(url))
    }

    /// `POST /v1/review-requests` with the connection's `producer` first,
    /// then the command's members.
    fn casework_submit_review_request(
        &self,
        casework: &CaseworkConnection,
    ) -> Result<Plan, AdapterError> {
        let mut body = Map::new();
        body.insert("producer".into(), Value::String(casework.producer.clone()));
        if let Some(members) = self.command.as_object() {
            for (k, v) in members {
                body.insert(k.clone(), v.clone());
            }
        }
        self.post(self.url(&["v1", "review-requests"])?, &Value::Object(body))
    }

    /// `POST /v1/review-requests/{id}/withdraw` with `{"reason": ...}`
    /// (`null` when the command has none).
    fn casework_withdraw_review_request(&self) -> Result<Plan, AdapterError> {
        let c = self.command;
        let body = serde_json::json!({ "reason": c.get("reason").cloned().unwrap_or(Value::Null) });
        self.post(
            self.url(&["v1", "review-requests", text(c, "id")?, "withdraw"])?,
            &body,
        )
    }

    /// `GET` of the command's `path` with its string `query`, or
    /// invalid-command when the connection does not permit the path
    /// (`external.path-not-permitted`) or a query name
    /// (`external.query-not-permitted`).
    fn external_get(
        &self,
        external: &ExternalHttpConnection,
    ) -> Result<Result<Plan, Outcome>, AdapterError> {
        let c = self.command;
        let path = text(c, "path")?;
        if !external.paths.iter().any(|p| p == path) {
            return Ok(Err(Outcome::InvalidCommand {
                status: None,
                code: Some("external.path-not-permitted".into()),
            }));
        }
        let segments: Vec<&str> = path.split('/').skip(1).collect();
        let mut url = self.url(&segments)?;
        if let Some(query) = c.get("query").and_then(Value::as_object) {
            if query.keys().any(|k| !external.query_parameters.contains(k)) {
                return Ok(Err(Outcome::InvalidCommand {
                    status: None,
                    code: Some("external.query-not-permitted".into()),
                }));
            }
            if !query.is_empty() {
                let mut q = url.query_pairs_mut();
                for (k, v) in query {
                    let v = v.as_str().ok_or_else(|| {
                        AdapterError::BadRequest(format!("query `{k}` is not a string"))
                    })?;
                    q.append_pair(k, v);
                }
            }
        }
        Ok(Ok(self.get(url)))
    }

    /// `POST /v1/evaluations` with the connection's `model` and the
    /// command's `state` and `questions` (`null` when absent).
    fn evaluation_evaluate(&self, decision: &DecisionConnection) -> Result<Plan, AdapterError> {
        let c = self.command;
        let body = serde_json::json!({
            "model": decision.model,
            "state": c.get("state").cloned().unwrap_or(Value::Null),
            "questions": c.get("questions").cloned().unwrap_or(Value::Null),
        });
        self.post(self.url(&["v1", "evaluations"])?, &body)
    }
}

#[async_trait]
impl ProductAdapter for HttpAdapter {
    async fn dispatch_marking(
        &self,
        connection: &Connection,
        request: &DispatchRequest,
        mark: &dyn MarkSending,
    ) -> Result<Outcome, AdapterError> {
        let plan = match plan(connection, request)? {
            Ok(p) => p,
            Err(refusal) => return Ok(refusal),
        };
        let sent = self
            .send(
                connection,
                &request.operation_id,
                plan,
                request.idempotency_key.as_deref(),
                mark,
            )
            .await?;
        Ok(match sent {
            Err(outcome) => outcome,
            Ok(a) if request.operation_id == "external.get/v1" => {
                external_status(a.status, &a.body)
            }
            Ok(a) => match (
                dispatch_status(&request.operation_id, a.status, &a.body),
                a.retry_after,
            ) {
                (Outcome::Answer(answer @ Answer::Retryable { .. }), Some(retry_after)) => {
                    Outcome::HeldBack {
                        answer,
                        retry_after,
                    }
                }
                (outcome, _) => outcome,
            },
        })
    }

    async fn lookup_receipt(
        &self,
        connection: &Connection,
        request: &ReceiptRequest,
    ) -> Result<Outcome, AdapterError> {
        let descriptor = checked_operation(connection, &request.operation_id)?;
        let route = match request.operation_id.as_str() {
            "messaging.submit-message/v1" => "message-receipts",
            "scheduling.create-appointment/v1" => "appointment-receipts",
            _ => return Err(AdapterError::UnknownOperation(request.operation_id.clone())),
        };
        debug_assert!(descriptor.receipt);
        let plan = Plan {
            method: Method::GET,
            url: url_with(connection, &["v1", route, &request.idempotency_key])?,
            body: None,
            profile: None,
            idempotent: false,
        };
        let sent = self
            .send(connection, &request.operation_id, plan, None, &NoMark)
            .await?;
        Ok(match sent {
            Err(outcome) => outcome,
            Ok(a) => receipt_status(&request.operation_id, a.status, &a.body),
        })
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
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_http_dates_and_ignores_the_rest() {
        assert_eq!(retry_after("120"), Some(RetryAfter::Seconds(120)));
        assert_eq!(retry_after(" 0 "), Some(RetryAfter::Seconds(0)));
        assert_eq!(
            retry_after("99999999999999999999999"),
            Some(RetryAfter::Seconds(u64::MAX))
        );
        assert_eq!(
            retry_after("Wed, 21 Oct 2026 07:28:00 GMT"),
            Some(RetryAfter::At(
                Instant::parse("2026-10-21T07:28:00Z").expect("instant")
            ))
        );
        for junk in ["", "-5", "1.5", "soon", "Wed, 99 Oct 2026 07:28:00 GMT"] {
            assert_eq!(retry_after(junk), None, "{junk:?}");
        }
    }
}
