//! What every fake shares: a server on a loopback socket, a record of every
//! request, scripted misbehaviour per path, optional bearer-token checks and
//! idempotent replay.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::{to_bytes, Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::middleware::{from_fn_with_state, Next};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Router};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::{watch, Notify};

/// Largest request body a fake reads (bytes).
pub const MAX_REQUEST_BYTES: usize = 1024 * 1024;

/// One request a fake received, recorded before anything else happens to it.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The raw query string, when there was one.
    pub query: Option<String>,
    /// Every header, names in lowercase, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The body bytes.
    pub body: Bytes,
    /// When it arrived (this process's monotonic clock).
    pub at: std::time::Instant,
}

impl Recorded {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON (`Value::Null` when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// The bearer token of the `Authorization` header.
    pub fn bearer(&self) -> Option<&str> {
        self.header("authorization")?.strip_prefix("Bearer ")
    }
}

/// How a fake answers the next request to a path (see [`Fake::script`]).
#[derive(Clone, Debug)]
pub enum Reply {
    /// The product's ordinary behaviour.
    Normal,
    /// A problem document (`application/problem+json`) with this status and
    /// `code`; the product does nothing.
    Problem { status: u16, code: String },
    /// Any status with a JSON body; the product does nothing.
    Json { status: u16, body: Value },
    /// Raw bytes with a content type; the product does nothing.
    Raw {
        status: u16,
        content_type: String,
        body: Vec<u8>,
    },
    /// 503 `service.unavailable`: definitely not processed.
    Retryable,
    /// Never answers (the client's timeout ends it).
    Hang,
    /// Waits, then behaves normally.
    Delay(Duration),
    /// 429 `rate.limited` with `Retry-After: <value>` (as written); the
    /// product does nothing.
    TooMany {
        /// The `Retry-After` header's value.
        retry_after: String,
    },
    /// Drops the connection after reading the request, doing nothing.
    Reset,
    /// Does the product's work, then drops the connection without answering
    /// (the effect happened; the client cannot know).
    ResetAfterEffect,
}

impl Reply {
    /// A refusal: `Problem { status, code }`.
    pub fn refuse(status: u16, code: &str) -> Reply {
        Reply::Problem {
            status,
            code: code.to_owned(),
        }
    }
}

/// Decides whether a bearer token is acceptable (e.g. issued by the fake
/// issuer: [`crate::FakeIssuer::token_check`]).
pub type TokenCheck = Arc<dyn Fn(&str) -> bool + Send + Sync>;

#[derive(Clone)]
struct Stored {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

#[derive(Default)]
struct State_ {
    requests: Vec<Recorded>,
    scripts: HashMap<String, VecDeque<Reply>>,
    token_check: Option<TokenCheck>,
    /// (path, idempotency key) → the first definite answer.
    replays: HashMap<(String, String), Stored>,
    /// idempotency key → requests that carried it.
    key_counts: HashMap<String, u32>,
    /// idempotency key → times the product's work ran for it.
    effects: HashMap<String, u32>,
    expired: HashSet<String>,
    /// Requests being answered now, and the most there ever were at once.
    in_flight: u32,
    max_in_flight: u32,
    /// How long each request is held before it is answered.
    latency: Option<Duration>,
}

/// Counts a request in flight until dropped.
struct Answering(Fake);

impl Drop for Answering {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.in_flight = st.in_flight.saturating_sub(1);
    }
}

/// The handle every fake shares: record, script, inspect. Cheap to clone.
#[derive(Clone, Default)]
pub struct Fake {
    state: Arc<Mutex<State_>>,
}

impl Fake {
    fn lock(&self) -> MutexGuard<'_, State_> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Holds every request `latency` before answering it (so calls
    /// overlap, and [`Fake::max_in_flight`] shows how many did).
    pub fn slow(&self, latency: Duration) -> &Self {
        self.lock().latency = Some(latency);
        self
    }

    /// The most requests this fake was answering at once.
    pub fn max_in_flight(&self) -> u32 {
        self.lock().max_in_flight
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.lock().requests.clone()
    }

    /// The requests received since the last call (or the start), in
    /// arrival order, forgotten here: a long-running watcher (the
    /// sandbox) reads each request once and the fake keeps no history
    /// that grows with every request. The idempotency records (replays,
    /// key and effect counts) are kept.
    pub fn take_requests(&self) -> Vec<Recorded> {
        std::mem::take(&mut self.lock().requests)
    }

    /// The requests whose path is `path`.
    pub fn requests_to(&self, path: &str) -> Vec<Recorded> {
        self.lock()
            .requests
            .iter()
            .filter(|r| r.path == path)
            .cloned()
            .collect()
    }

    /// Appends replies for the next requests to `path` (exact path, no
    /// query), consumed in order; afterwards the product behaves normally.
    pub fn script(&self, path: &str, replies: impl IntoIterator<Item = Reply>) -> &Self {
        self.lock()
            .scripts
            .entry(path.to_owned())
            .or_default()
            .extend(replies);
        self
    }

    /// Requires every request to carry `Authorization: Bearer <token>` that
    /// `check` accepts; otherwise 401 `authentication.refused`.
    pub fn require_bearer(&self, check: TokenCheck) -> &Self {
        self.lock().token_check = Some(check);
        self
    }

    /// How many requests carried `Idempotency-Key: key`.
    pub fn key_count(&self, key: &str) -> u32 {
        self.lock().key_counts.get(key).copied().unwrap_or(0)
    }

    /// How many times the product's work ran for idempotency key `key`
    /// (replays do not count).
    pub fn effect_count(&self, key: &str) -> u32 {
        self.lock().effects.get(key).copied().unwrap_or(0)
    }

    /// Marks the idempotency record of `key` expired: receipts answer 410
    /// `idempotency.expired`.
    pub fn expire(&self, key: &str) -> &Self {
        self.lock().expired.insert(key.to_owned());
        self
    }

    /// The receipt answer for `key` of mutations to `path` (SPEC §6): the
    /// original 2xx response, 404 `receipt.unresolved`, or 410.
    pub(crate) fn receipt(&self, path: &str, key: &str) -> Response {
        let st = self.lock();
        if st.expired.contains(key) {
            return problem(410, "idempotency.expired");
        }
        match st.replays.get(&(path.to_owned(), key.to_owned())) {
            Some(s) if s.status.is_success() => {
                (StatusCode::OK, s.headers.clone(), s.body.clone()).into_response()
            }
            _ => problem(404, "receipt.unresolved"),
        }
    }
}

/// A problem document (RFC 9457) with `code`.
pub fn problem(status: u16, code: &str) -> Response {
    problem_with(status, code, json!({}))
}

/// A problem document with `code` and extra members.
pub fn problem_with(status: u16, code: &str, extra: Value) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut body = json!({
        "type": "about:blank",
        "title": status.canonical_reason().unwrap_or("error"),
        "status": status.as_u16(),
        "code": code,
    });
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
    (
        status,
        [("content-type", "application/problem+json")],
        body.to_string(),
    )
        .into_response()
}

/// Signals the connection task to drop its connection.
#[derive(Clone)]
struct Kill(Arc<Notify>);

async fn intercept(
    State(fake): State<Fake>,
    Extension(kill): Extension<Kill>,
    request: Request,
    next: Next,
) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = to_bytes(body, MAX_REQUEST_BYTES).await.unwrap_or_default();
    let path = parts.uri.path().to_owned();
    let key = parts
        .headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let _answering = {
        let mut st = fake.lock();
        st.in_flight += 1;
        st.max_in_flight = st.max_in_flight.max(st.in_flight);
        Answering(fake.clone())
    };
    let (reply, check) = {
        let mut st = fake.lock();
        st.requests.push(Recorded {
            method: parts.method.to_string(),
            path: path.clone(),
            query: parts.uri.query().map(str::to_owned),
            headers: parts
                .headers
                .iter()
                .map(|(n, v)| {
                    (
                        n.as_str().to_owned(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect(),
            body: bytes.clone(),
            at: std::time::Instant::now(),
        });
        if let Some(k) = &key {
            *st.key_counts.entry(k.clone()).or_default() += 1;
        }
        let reply = st
            .scripts
            .get_mut(&path)
            .and_then(VecDeque::pop_front)
            .unwrap_or(Reply::Normal);
        (reply, st.token_check.clone())
    };
    let latency = fake.lock().latency;
    if let Some(latency) = latency {
        tokio::time::sleep(latency).await;
    }
    if let Some(check) = check {
        let ok = parts
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|t| check(t));
        if !ok {
            return problem(401, "authentication.refused");
        }
    }
    let request = Request::from_parts(parts, Body::from(bytes));
    match reply {
        Reply::Normal => normal(&fake, &path, key, request, next).await,
        Reply::Problem { status, code } => problem(status, &code),
        Reply::Json { status, body } => (
            StatusCode::from_u16(status).unwrap_or(StatusCode::OK),
            [("content-type", "application/json")],
            body.to_string(),
        )
            .into_response(),
        Reply::Raw {
            status,
            content_type,
            body,
        } => (
            StatusCode::from_u16(status).unwrap_or(StatusCode::OK),
            [("content-type", content_type)],
            body,
        )
            .into_response(),
        Reply::Retryable => problem(503, "service.unavailable"),
        Reply::TooMany { retry_after } => {
            let mut r = problem(429, "rate.limited");
            if let Ok(v) = axum::http::HeaderValue::from_str(&retry_after) {
                r.headers_mut().insert("retry-after", v);
            }
            r
        }
        Reply::Hang => std::future::pending().await,
        Reply::Delay(d) => {
            tokio::time::sleep(d).await;
            normal(&fake, &path, key, request, next).await
        }
        Reply::Reset => {
            kill.0.notify_one();
            std::future::pending().await
        }
        Reply::ResetAfterEffect => {
            let _ = normal(&fake, &path, key, request, next).await;
            kill.0.notify_one();
            std::future::pending().await
        }
    }
}

/// The product's behaviour with idempotent replay: a mutation (POST) with an
/// `Idempotency-Key` already answered definitely gets the same answer again.
async fn normal(
    fake: &Fake,
    path: &str,
    key: Option<String>,
    request: Request,
    next: Next,
) -> Response {
    let Some(key) = key.filter(|_| request.method() == Method::POST) else {
        return next.run(request).await;
    };
    let slot = (path.to_owned(), key.clone());
    if let Some(s) = fake.lock().replays.get(&slot).cloned() {
        return (s.status, s.headers, s.body).into_response();
    }
    let response = next.run(request).await;
    *fake.lock().effects.entry(key).or_default() += 1;
    let (parts, body) = response.into_parts();
    let body = to_bytes(body, usize::MAX).await.unwrap_or_default();
    let definite = !matches!(parts.status.as_u16(), 408 | 429 | 503);
    if definite {
        fake.lock().replays.insert(
            slot,
            Stored {
                status: parts.status,
                headers: parts.headers.clone(),
                body: body.clone(),
            },
        );
    }
    Response::from_parts(parts, Body::from(body))
}

/// A running server. Dropping the last clone stops it (and every
/// connection it holds, hanging ones included).
#[derive(Clone)]
pub struct Running {
    base_url: String,
    _guard: Arc<Guard>,
}

struct Guard {
    shutdown: watch::Sender<bool>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
    }
}

impl Running {
    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }
}

/// Binds `127.0.0.1:0` and serves `router` wrapped in `fake`'s recording
/// and scripting.
pub async fn serve(router: Router, fake: &Fake) -> std::io::Result<Running> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    serve_on(listener, router, fake)
}

/// Serves `router` on a listener the caller bound.
pub fn serve_on(listener: TcpListener, router: Router, fake: &Fake) -> std::io::Result<Running> {
    let addr = listener.local_addr()?;
    let router = router.layer(from_fn_with_state(fake.clone(), intercept));
    let (tx, rx) = watch::channel(false);
    let mut accept_rx = rx.clone();
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = accept_rx.changed() => return,
            };
            let Ok((stream, _)) = accepted else { continue };
            let kill = Arc::new(Notify::new());
            let service =
                TowerToHyperService::new(router.clone().layer(Extension(Kill(kill.clone()))));
            let mut rx = rx.clone();
            tokio::spawn(async move {
                let connection = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service);
                tokio::select! {
                    _ = connection => {}
                    _ = kill.notified() => {}
                    _ = rx.changed() => {}
                }
            });
        }
    });
    Ok(Running {
        base_url: format!("http://{addr}"),
        _guard: Arc::new(Guard { shutdown: tx }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(fake: &Fake, path: &str) {
        fake.lock().requests.push(Recorded {
            method: "POST".to_owned(),
            path: path.to_owned(),
            query: None,
            headers: Vec::new(),
            body: Bytes::new(),
            at: std::time::Instant::now(),
        });
    }

    fn paths(requests: &[Recorded]) -> Vec<&str> {
        requests.iter().map(|r| r.path.as_str()).collect()
    }

    #[test]
    fn take_requests_gives_each_request_once_and_keeps_the_idempotency_records() {
        let fake = Fake::default();
        record(&fake, "/a");
        record(&fake, "/b");
        assert_eq!(paths(&fake.take_requests()), vec!["/a", "/b"]);
        assert!(fake.take_requests().is_empty());
        assert!(fake.requests().is_empty());
        record(&fake, "/c");
        assert_eq!(paths(&fake.take_requests()), vec!["/c"]);
    }
}
