//! `coordinator`: the workflow service's HTTP edge (SPEC §8).
//!
//! Handlers only translate HTTP ↔ domain and call the engine in
//! `coordinator_engine`; request and response bodies come from
//! `coordinator_api`. [`run`] takes its listener and its shutdown signal
//! from the caller, so tests bind port 0; [`work`] is the in-process
//! worker loop. Before the store is open, `coordinator` serves
//! [`waiting_router`] through a [`gate::Gate`] on the same listener. See
//! docs/service.md.

#![deny(clippy::unwrap_used, clippy::indexing_slicing)]

pub mod auth;
pub mod events;
pub mod gate;
pub mod metrics;
pub mod ops;
pub mod readiness;
pub mod startup;
pub mod strict;

pub use readiness::{not_ready_reason, waiting_router, WaitingReason};

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::header::{
    HeaderValue, AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE, WWW_AUTHENTICATE,
};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use coordinator_api as api;
use coordinator_api::problems;
use coordinator_engine::{
    Action, ActionError, AdmitError, EffectState, Engine, EventOrigin, Principal, RunStatus,
    StartRequest,
};
use coordinator_ports::{RunFilter, RunRecord, StoreError};
use coordinator_runtime::audit::AuditRecord;
use serde::Deserialize;
use subtle::{Choice, ConstantTimeEq};

use auth::{Grant, Verifier};

/// The header Casework sends its recipient binding in (seed 000).
pub const RECIPIENT_BINDING_HEADER: &str = "registry-recipient-binding";
/// How long shutdown may take (seed 000: SIGTERM stops within 15 s).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(15);
/// Longest accepted `Idempotency-Key`, in bytes.
pub const MAX_IDEMPOTENCY_KEY_BYTES: usize = 255;

/// The review-completion credentials: one (recipient binding, bearer
/// token) pair per Casework connection with a `completion` block.
#[derive(Clone, Default)]
pub struct Completions {
    pairs: Vec<(String, Vec<u8>)>,
}

impl std::fmt::Debug for Completions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Completions")
            .field("bindings", &self.pairs.len())
            .finish()
    }
}

impl Completions {
    /// Adds a connection's binding and its token's bytes.
    pub fn add(&mut self, binding: &str, token: Vec<u8>) {
        self.pairs.push((binding.to_owned(), token));
    }

    /// Whether `(binding, token)` is one of the pairs. Every pair is
    /// compared, each binding and token in constant time (`subtle`), so the
    /// time taken does not tell which pair, or how much of one, matched
    /// (only lengths may show).
    fn accepts(&self, binding: &str, token: &[u8]) -> bool {
        let mut matched = Choice::from(0);
        for (b, t) in &self.pairs {
            matched |= b.as_bytes().ct_eq(binding.as_bytes()) & t.as_slice().ct_eq(token);
        }
        matched.into()
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        ApiError::store(&e)
    }
}

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    /// The engine (admission, runs, operator actions).
    pub engine: Arc<Engine>,
    /// The store's counts (doctor), the same store the engine uses.
    pub counts: Arc<dyn coordinator_ports::RunCounts>,
    /// Token verification and policies.
    pub verifier: Arc<Verifier>,
    /// Review-completion credentials.
    pub completions: Arc<Completions>,
    /// The event sources and their signing keys (`POST /v1/events/...`).
    pub events: Arc<events::EventSources>,
}

/// An error answer: an RFC 9457 problem document, only ever made from a
/// type of the problem registry ([`api::problems`]), so every code the
/// service answers is in the registry with its status and title.
#[derive(Debug)]
pub struct ApiError(api::Problem);

impl ApiError {
    fn of(kind: &api::problems::ProblemType) -> Self {
        ApiError(kind.problem(None))
    }
    fn detail(mut self, detail: impl Into<String>) -> Self {
        self.0.detail = Some(detail.into());
        self
    }
    fn refused() -> Self {
        Self::of(&problems::AUTHENTICATION_REFUSED)
    }
    /// 403: the caller's policy (by `client_id`) lacks `action`, or (for
    /// the deployment-wide actions) is not `operator: true`.
    fn forbidden(action: &str) -> Self {
        Self::of(&problems::AUTHORIZATION_REFUSED)
        .detail(format!(
            "the caller's policy does not grant `{action}` here: its `actions` must list `{action}` and its `workflows`, when set, the run's workflow (deployment.authentication.policies)"
        ))
    }
    fn not_found() -> Self {
        Self::of(&problems::RUN_NOT_FOUND)
    }
    fn bad_request(detail: impl Into<String>) -> Self {
        Self::of(&problems::REQUEST_INVALID).detail(detail)
    }
    /// 409 `run.payload-erased` (seed 000).
    fn payload_erased() -> Self {
        Self::of(&problems::RUN_PAYLOAD_ERASED).detail("it can no longer be retried or reconciled")
    }

    /// 503 `service.unavailable` before the store is open and checked.
    fn starting() -> Self {
        Self::of(&problems::SERVICE_UNAVAILABLE).detail(
            "the service is waiting for the database and has not passed its deployment checks; try again once /ready answers 200",
        )
    }

    fn store(e: &StoreError) -> Self {
        match e {
            StoreError::BadCursor => {
                Self::bad_request("the cursor was not written by this service")
            }
            StoreError::NotFound => Self::not_found(),
            StoreError::Refused {
                code: "run.payload-erased",
                ..
            } => Self::payload_erased(),
            StoreError::LeaseIncompatible { .. } => Self::of(&problems::RESTORE_LEASE_INCOMPATIBLE)
                .detail("this instance started before the restore hold was placed: restart it"),
            // A value this process cannot open (a state key version its
            // runtime file lacks, or a row that does not open under its
            // binding) is a deployment fault, not an outage: seed 000
            // `deployment.refused`, never a 503.
            StoreError::Refused { code, message } => {
                tracing::error!(code = *code, error = %message, "store refused");
                Self::of(&problems::DEPLOYMENT_REFUSED)
                .detail(format!(
                    "{code}: run `coordinatorctl --runtime-config FILE deployment-status` with this service's runtime file"
                ))
            }
            other => {
                tracing::error!(code = "store-unavailable", error = %other, "store error");
                Self::of(&problems::SERVICE_UNAVAILABLE)
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.0.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self.0).unwrap_or_default();
        let mut response = (
            status,
            [(
                CONTENT_TYPE,
                HeaderValue::from_static("application/problem+json"),
            )],
            body,
        )
            .into_response();
        // RFC 6750 §3: a bearer-token refusal says so.
        let challenge = match status {
            StatusCode::UNAUTHORIZED => Some(r#"Bearer error="invalid_token""#),
            StatusCode::FORBIDDEN => Some(r#"Bearer error="insufficient_scope""#),
            _ => None,
        };
        if let Some(c) = challenge {
            response
                .headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static(c));
        }
        response
    }
}

fn json<T: serde::Serialize>(status: StatusCode, body: &T) -> Response {
    (
        status,
        [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        serde_json::to_vec(body).unwrap_or_default(),
    )
        .into_response()
}

/// The router of SPEC §8's implemented routes.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/ready", get(readiness::ready))
        .route("/health", get(health))
        .route("/v1/runs", json_post(start).get(list))
        .route("/v1/runs/{run}", get(status))
        .route("/v1/runs/{run}/inspect", get(inspect))
        .route("/v1/runs/{run}/{action}", json_post(recover))
        .route("/v1/events/{workflow}/{trigger}", json_post(event_start))
        .route("/v1/review-completions", json_post(review_completion))
        .route("/v1/doctor", get(ops::doctor))
        .route("/v1/restore-hold", json_post(ops::restore_hold))
        .route(
            "/v1/release-restore-hold",
            json_post(ops::release_restore_hold),
        )
        .route(
            "/v1/complete-execution-recovery",
            json_post(ops::complete_execution_recovery),
        )
        .route(
            "/v1/release-admission-hold",
            json_post(ops::release_admission_hold),
        )
        .route("/v1/retention", json_post(ops::retention))
        .fallback(|| async { ApiError::of(&problems::ROUTE_NOT_FOUND) })
        .method_not_allowed_fallback(|| async {
            ApiError::of(&problems::METHOD_NOT_ALLOWED)
                .detail("see docs/openapi.json for each route's method")
        })
        .layer(DefaultBodyLimit::max(api::MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn(single_valued_headers))
        .layer(axum::middleware::map_response(no_store))
        .with_state(state)
}

/// The request headers the API reads one value of: a request that repeats
/// one is 400 `request.invalid` naming it, rather than having one of the
/// values silently win.
const SINGLE_VALUED_HEADERS: [&str; 5] = [
    "authorization",
    "content-type",
    "idempotency-key",
    events::SIGNATURE_HEADER,
    RECIPIENT_BINDING_HEADER,
];

/// Refuses a request that repeats one of [`SINGLE_VALUED_HEADERS`].
async fn single_valued_headers(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if let Some(name) = SINGLE_VALUED_HEADERS
        .iter()
        .find(|name| request.headers().get_all(**name).iter().nth(1).is_some())
    {
        return ApiError::bad_request(format!("the `{name}` header is repeated; send it once"))
            .into_response();
    }
    next.run(request).await
}

/// A `POST` route whose body is JSON ([`json_bodies_only`]): the media type
/// is checked only once the method matched, so a method the path lacks is
/// 405 `method.not-allowed` with `Allow`, whatever its body.
fn json_post<H, T>(handler: H) -> axum::routing::MethodRouter<AppState>
where
    H: axum::handler::Handler<T, AppState>,
    T: 'static,
{
    post(handler).route_layer(axum::middleware::from_fn(json_bodies_only))
}

/// Every `POST` of the API carries a JSON body: one whose `Content-Type` is
/// not `application/json` or `application/<anything>+json` (parameters
/// such as `charset` allowed) is 415 `request.unsupported-media-type`
/// before it is read.
async fn json_bodies_only(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if request.method() == axum::http::Method::POST && !json_content_type(request.headers()) {
        return ApiError::of(&problems::REQUEST_UNSUPPORTED_MEDIA_TYPE)
            .detail("send the body with Content-Type: application/json")
            .into_response();
    }
    next.run(request).await
}

/// Whether `Content-Type` names JSON (`application/json`,
/// `application/*+json`), case-insensitively, parameters ignored.
fn json_content_type(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

async fn no_store(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// Serves the API on `listener` until `shutdown` completes, then drains
/// open requests (the caller bounds the drain by [`SHUTDOWN_GRACE`]).
///
/// # Errors
/// The listener's I/O errors.
pub async fn run(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
}

/// How many worker lanes one process runs ([`work`]).
pub const WORKER_LANES: usize = 8;

/// The worker: [`WORKER_LANES`] lanes and a due-time timer, until
/// `shutdown` says stop.
///
/// A lane leases due jobs ([`Engine::tick`]) and carries them out; leases
/// keep the lanes (and other processes) from taking the same job, so a
/// product call that hangs until its timeout holds up one lane, not the
/// process. An idle lane sleeps until woken ([`Engine::woken`]: an
/// admission, a commit that made the run's next job, or a review
/// completion of this process wakes one lane at once), or for
/// `safety_poll` at most (which finds what no wake announced: a lease that
/// ran out after a crash). A lane that leased a full batch leases again at
/// once and wakes another lane, so a backlog spreads over the lanes.
///
/// The timer ([`due_timer`]) sleeps until the earliest due job in the
/// store (the due-time index), then wakes a lane: timers and jobs other
/// processes made due are taken on time, without polling by every lane.
///
/// A store error is logged as `store-unavailable` and the lane backs off
/// (up to 5 s). Returns before `shutdown` only when the engine is fenced
/// ([`Engine::fenced`]: a restore hold was placed after this process
/// started), so the caller can stop the process.
pub async fn work(
    engine: Arc<Engine>,
    safety_poll: Duration,
    shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let timer = tokio::spawn(due_timer(engine.clone(), safety_poll, shutdown.clone()));
    futures_util::future::join_all(
        (0..WORKER_LANES).map(|_| lane(engine.clone(), safety_poll, shutdown.clone())),
    )
    .await;
    timer.abort();
    engine.release_handed().await;
}

/// Sleeps until the store's earliest due job ([`Engine::next_due`]; at
/// most `safety_poll`), then wakes a lane when it is due. Errors are left
/// to the lanes to log.
async fn due_timer(
    engine: Arc<Engine>,
    safety_poll: Duration,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        if *shutdown.borrow() || engine.fenced() {
            return;
        }
        let pause = match engine.next_due().await {
            Ok(Some(due)) => {
                let now = engine.now_unix();
                if due <= now {
                    engine.wake_one();
                    safety_poll
                } else {
                    let seconds = u64::try_from(due.saturating_sub(now)).unwrap_or(u64::MAX);
                    Duration::from_secs(seconds).min(safety_poll)
                }
            }
            Ok(None) | Err(_) => safety_poll,
        };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = shutdown.changed() => {}
        }
    }
}

async fn lane(
    engine: Arc<Engine>,
    safety_poll: Duration,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    // Consecutive failed ticks: the lane backs off (up to 5 s) and logs the
    // first failure and every 20th, so an outage does not flood the log.
    let mut failures: u32 = 0;
    loop {
        if *shutdown.borrow() || engine.fenced() {
            return;
        }
        let full_batch = match engine.tick().await {
            Ok(n) => {
                failures = 0;
                n >= engine.batch()
            }
            // Logged by the engine (`restore.lease-incompatible`); the
            // lane stops.
            Err(_) if engine.fenced() => return,
            Err(e) => {
                failures = failures.saturating_add(1);
                if failures == 1 || failures.is_multiple_of(20) {
                    // A value this process cannot open (a state key
                    // version its runtime file lacks, during a rolling key
                    // rotation) keeps its own code: it is no outage.
                    let code = match &e {
                        StoreError::Refused { code, .. } => code,
                        _ => "store-unavailable",
                    };
                    tracing::error!(code, error = %e, failures, "worker tick failed");
                }
                false
            }
        };
        if full_batch {
            // More may be due: lease again, and let another lane help.
            engine.wake_one();
            continue;
        }
        let pause = if failures == 0 {
            safety_poll
        } else {
            safety_poll
                .saturating_mul(1 << failures.min(5))
                .min(Duration::from_secs(5))
        };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = engine.woken(), if failures == 0 => {}
            _ = shutdown.changed() => {}
        }
    }
}

async fn health() -> Response {
    json(StatusCode::OK, &serde_json::json!({"live": true}))
}

async fn principal(s: &AppState, headers: &HeaderMap) -> Result<Principal, ApiError> {
    let token = bearer(headers).ok_or_else(ApiError::refused)?;
    s.verifier.verify(token).await.map_err(|e| match e {
        // The issuer's keys could not be fetched: an outage of ours, never
        // a refusal of the caller (seed 000 `service.unavailable`).
        auth::AuthError::Unavailable(reason) => {
            tracing::error!(code = "service.unavailable", reason = %reason, "token verifier unavailable");
            ApiError::of(&problems::SERVICE_UNAVAILABLE)
                .detail("try again after it recovers")
        }
        auth::AuthError::Refused(reason) => {
            tracing::info!(code = "authentication.refused", reason = %reason, "token refused");
            ApiError::refused()
        }
    })
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let v = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
        .filter(|t| !t.is_empty())
}

fn body(bytes: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    bytes.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::of(&problems::REQUEST_TOO_LARGE)
        } else {
            ApiError::bad_request("the body could not be read")
        }
    })
}

fn run_status(r: &RunRecord) -> api::RunStatus {
    let st = &r.state;
    api::RunStatus {
        run: r.id.clone(),
        workflow: r.workflow.clone(),
        revision: r.revision.clone(),
        state: st.status.as_str().to_owned(),
        admitted_at: st.admitted_at.clone(),
        deadline_at: st.deadline_at.clone(),
        // The engine's clock when the run ended (the VM's `ended_at` is
        // the instant of the event that ended it, which may be long before).
        ended_at: r
            .ended_unix
            .map(coordinator_ports::clock::unix_to_rfc3339)
            .or_else(|| st.ended_at.clone()),
        outcome: st.outcome.clone(),
        output: if st.status == RunStatus::Finished || st.outcome.is_some() {
            st.output.clone()
        } else {
            None
        },
        failure: st.failure.as_ref().map(|f| f.code.as_str().to_owned()),
        failure_path: st.failure.as_ref().and_then(|f| f.path.clone()),
        refusal_code: st.failure.as_ref().and_then(|f| f.product_code.clone()),
        payload_erased: r.payload_erased,
        review: r.review.map(|v| v.as_str().to_owned()),
    }
}

async fn start(
    State(s): State<AppState>,
    headers: HeaderMap,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let who = principal(&s, &headers).await?;
    let bytes = body(bytes)?;
    let request: api::StartRun = strict::from_slice(&bytes).map_err(ApiError::bad_request)?;
    if s.verifier.grant(&who, "start", Some(&request.workflow)) == Grant::Denied {
        return Err(ApiError::forbidden("start"));
    }
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .filter(|k| {
            !k.is_empty()
                && k.len() <= MAX_IDEMPOTENCY_KEY_BYTES
                && k.bytes().all(|b| b.is_ascii_graphic())
        })
        .ok_or_else(|| {
            ApiError::of(&problems::IDEMPOTENCY_KEY_REQUIRED)
                .detail("1 to 255 visible ASCII characters")
        })?
        .to_owned();
    let start = StartRequest {
        workflow: request.workflow,
        revision: request.revision,
        input: request.input,
    };
    let result = s.engine.admit(&who, start, &key).await;
    admitted(&s, result, ops::principal_value(&who), None).await
}

/// Answers an admission: 201 for a new run, 200 for a repeat (each audited
/// as `run.admit` first), or the refusal's problem.
async fn admitted(
    s: &AppState,
    result: Result<(bool, RunRecord), AdmitError>,
    principal: String,
    trigger: Option<String>,
) -> Result<Response, ApiError> {
    match result {
        Ok((created, run)) => {
            let (id, start_identity, workflow, revision) = (
                run.id.clone(),
                run.start_identity.clone(),
                run.workflow.clone(),
                run.revision.clone(),
            );
            ops::audited(&s.engine, move |k| {
                let record =
                    AuditRecord::new("run.admit", if created { "created" } else { "existing" })
                        .reference(k, "run", &id)
                        .reference(k, "principal", &principal)
                        .reference(k, "start-identity", &start_identity)
                        .fact("workflow", workflow)
                        .fact("revision", revision);
                match trigger {
                    Some(t) => record.fact("trigger", t),
                    None => record,
                }
            })
            .await?;
            Ok(json(
                if created {
                    StatusCode::CREATED
                } else {
                    StatusCode::OK
                },
                &run_status(&run),
            ))
        }
        Err(AdmitError::UnknownWorkflow) => Err(ApiError::of(&problems::WORKFLOW_NOT_FOUND)),
        Err(AdmitError::UnknownTrigger) => Err(ApiError::of(&problems::TRIGGER_NOT_FOUND)),
        Err(AdmitError::EventSourceMismatch) => Err(ApiError::of(&problems::EVENT_SOURCE_MISMATCH)),
        Err(AdmitError::EventTypeMismatch) => Err(ApiError::of(&problems::EVENT_TYPE_MISMATCH)),
        Err(AdmitError::EventRefused(m)) => Err(ApiError::of(&problems::EVENT_DATA_INVALID)
        .detail(m)),
        Err(AdmitError::RevisionNotActive { active }) => Err(ApiError::of(&problems::REVISION_NOT_ACTIVE)
        .detail(format!("the active revision is {active}"))),
        Err(AdmitError::InputRefused(m)) => {
            Err(ApiError::of(&problems::INPUT_INVALID).detail(m))
        }
        Err(AdmitError::KeyReused) => Err(ApiError::of(&problems::IDEMPOTENCY_KEY_REUSED)),
        Err(AdmitError::RecoveryOnly) => Err(ApiError::of(&problems::ADMISSION_RECOVERY_ONLY)),
        Err(AdmitError::ActivationChanged) => Err(ApiError::of(&problems::DEPLOYMENT_ACTIVATION_CHANGED)
        .detail("restart the service with the runtime file apply used")),
        Err(AdmitError::BindingConflict { connection }) => Err(ApiError::of(
            &problems::BINDING_CONFLICT,
        )
        .detail(format!(
            "connection `{connection}` is bound differently here than in the runtime file the last apply used: restart this service with that file"
        ))),
        Err(AdmitError::AdmissionHeld) => {
            Err(
                ApiError::of(&problems::ADMISSION_HELD)
                    .detail("release-admission-hold reopens admissions after a restore"),
            )
        }
        Err(AdmitError::Store(e)) => Err(ApiError::store(&e)),
    }
}

/// `POST /v1/events/{workflow}/{trigger}` (SPEC §2.4; docs/service.md
/// "Event starts"). No bearer token: the `registry-signature` header under
/// the trigger's event source key authenticates. Order: 413 for a body over
/// 64 KiB; 404 for a workflow or trigger the active revisions lack; 401 for
/// a missing, malformed, wrong or stale signature; 400 for a body that is
/// not a strict-JSON CloudEvent; then the admission's answers.
async fn event_start(
    State(s): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
    headers: HeaderMap,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let bytes = body(bytes)?;
    let (workflow, trigger) = path_segments(path)?;
    let Some(info) = s.engine.trigger(&workflow, &trigger) else {
        return Err(if s.engine.active_revisions().contains_key(&workflow) {
            ApiError::of(&problems::TRIGGER_NOT_FOUND)
        } else {
            ApiError::of(&problems::WORKFLOW_NOT_FOUND)
        });
    };
    let Some(source) = s.events.source(&info.source) else {
        // The runtime check refuses a trigger whose event source is not
        // configured, so this is not reached in a started service.
        tracing::error!(
            code = "deployment.refused",
            workflow,
            trigger,
            "a trigger's event source has no key"
        );
        return Err(ApiError::refused());
    };
    let origin = EventOrigin {
        name: info.source.clone(),
        source: source.to_owned(),
    };
    let header = headers
        .get(events::SIGNATURE_HEADER)
        .and_then(|v| v.to_str().ok());
    if let Err(e) = s
        .events
        .verify(&origin.name, header, &bytes, s.engine.now_unix())
    {
        tracing::info!(
            code = "authentication.refused",
            reason = e.detail(),
            "event signature refused"
        );
        return Err(ApiError::refused().detail(e.detail()));
    }
    let event: serde_json::Value = strict::from_slice(&bytes).map_err(ApiError::bad_request)?;
    events::check_event(&event).map_err(ApiError::bad_request)?;
    let result = s
        .engine
        .admit_event(&origin, &workflow, &trigger, &event)
        .await;
    let owner = origin.owner();
    let principal = format!("{}\u{0}{}", owner.iss, owner.sub);
    admitted(&s, result, principal, Some(trigger)).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    workflow: Option<String>,
    state: Option<String>,
    attention: Option<bool>,
    limit: Option<u32>,
    cursor: Option<String>,
}

fn parse_state(s: &str) -> Option<RunStatus> {
    serde_json::from_value(serde_json::Value::String(s.to_owned())).ok()
}

/// The path's segments, or 400 `request.invalid` when one does not decode
/// (a percent-encoding that is not UTF-8, `%ff`): axum's own answer to that
/// would be plain text.
fn path_segments<T>(path: Result<Path<T>, PathRejection>) -> Result<T, ApiError> {
    path.map(|Path(segments)| segments)
        .map_err(|e| ApiError::bad_request(e.body_text()))
}

async fn list(
    State(s): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let who = principal(&s, &headers).await?;
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let Grant::Allowed { operator } = s.verifier.grant(&who, "status", None) else {
        return Err(ApiError::forbidden("status"));
    };
    let limit = q.limit.unwrap_or(api::DEFAULT_LIST_LIMIT);
    if limit == 0 || limit > api::MAX_LIST_LIMIT {
        return Err(ApiError::bad_request("limit must be 1..=100"));
    }
    let state = match q.state.as_deref() {
        None => None,
        Some(t) => Some(parse_state(t).ok_or_else(|| ApiError::bad_request("unknown state; one of running, attention, cancel-requested, finished, failed, cancelled, cancelled-after-effect, expired"))?),
    };
    let mut workflows = s.verifier.scope(&who);
    if let Some(w) = q.workflow {
        workflows = match workflows {
            Some(ws) if !ws.contains(&w) => Some(Vec::new()),
            _ => Some(vec![w]),
        };
    }
    let filter = RunFilter {
        owner: (!operator).then(|| who.owner()),
        workflows,
        state,
        attention: q.attention,
        limit,
        cursor: q.cursor,
    };
    let page = s
        .engine
        .list(&filter)
        .await
        .map_err(|e| ApiError::store(&e))?;
    Ok(json(
        StatusCode::OK,
        &api::RunList {
            runs: page.runs.iter().map(run_status).collect(),
            next_cursor: page.next_cursor,
        },
    ))
}

/// Loads a run the principal may act on with `action`: 403 when the policy
/// lacks the action entirely, 404 when the run does not exist or is not
/// theirs (non-operators) or outside the policy's workflows.
async fn visible_run(
    s: &AppState,
    who: &Principal,
    run_id: &str,
    action: &str,
) -> Result<RunRecord, ApiError> {
    if s.verifier.grant(who, action, None) == Grant::Denied {
        return Err(ApiError::forbidden(action));
    }
    let run = s
        .engine
        .get(run_id)
        .await
        .map_err(|e| ApiError::store(&e))?
        .ok_or_else(ApiError::not_found)?;
    match s.verifier.grant(who, action, Some(&run.workflow)) {
        Grant::Allowed { operator: true } => Ok(run),
        Grant::Allowed { operator: false } if run.owner == who.owner() => Ok(run),
        _ => Err(ApiError::not_found()),
    }
}

async fn status(
    State(s): State<AppState>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let who = principal(&s, &headers).await?;
    let run = path_segments(path)?;
    let run = visible_run(&s, &who, &run, "status").await?;
    Ok(json(StatusCode::OK, &run_status(&run)))
}

async fn inspect(
    State(s): State<AppState>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let who = principal(&s, &headers).await?;
    let run = path_segments(path)?;
    let run = visible_run(&s, &who, &run, "inspect").await?;
    let steps = s
        .engine
        .inspect(&run)
        .await
        .map_err(|e| ApiError::store(&e))?;
    let body = api::Inspection {
        status: run_status(&run),
        steps: steps
            .into_iter()
            .map(|st| api::InspectedStep {
                name: st.name,
                kind: st.kind.to_owned(),
                effect: st.effect.map(|e| {
                    match e {
                        EffectState::Accepted => "accepted",
                        EffectState::Unknown => "unknown",
                    }
                    .to_owned()
                }),
                attempts: st.attempts,
                due_at: st.due_at,
                observations: st.observations,
                restored: st.restored,
            })
            .collect(),
    };
    Ok(json(StatusCode::OK, &body))
}

async fn recover(
    State(s): State<AppState>,
    headers: HeaderMap,
    path: Result<Path<(String, String)>, PathRejection>,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let (run, action) = path_segments(path)?;
    let (name, act) = match action.as_str() {
        "cancel" => ("cancel", Action::Cancel),
        "retry-same" => ("retry-same", Action::RetrySame),
        "reconcile" => ("reconcile", Action::Reconcile),
        _ => return Err(ApiError::of(&problems::ROUTE_NOT_FOUND)),
    };
    let who = principal(&s, &headers).await?;
    let bytes = body(bytes)?;
    let recovery: api::Recovery = strict::from_slice(&bytes).map_err(ApiError::bad_request)?;
    ops::reference("reason", &recovery.reason)?;
    let run = visible_run(&s, &who, &run, name).await?;
    // A reconcile that found the receipt expired happened all the same: it
    // is audited, then answered 409 `receipt.expired`.
    let (after, expired) = match s.engine.act(&run.id, act).await {
        Ok(after) => (Ok(after), false),
        Err(ActionError::ReceiptExpired(after)) => (Ok(*after), true),
        Err(e) => (Err(e), false),
    };
    match after {
        Ok(after) => {
            // The reason is free text an operator typed: it goes to the
            // audit journal as a keyed reference only, never to the log.
            tracing::info!(run = %after.id, action = name, "recovery action");
            let (id, state, principal, reason) = (
                after.id.clone(),
                after.status().as_str(),
                ops::principal_value(&who),
                recovery.reason,
            );
            ops::audited(&s.engine, move |k| {
                AuditRecord::new(&format!("run.{name}"), "accepted")
                    .reference(k, "run", &id)
                    .reference(k, "principal", &principal)
                    .reference(k, "reason", &reason)
                    .fact("state", state)
            })
            .await?;
            if expired {
                return Err(ApiError::of(&problems::RECEIPT_EXPIRED).detail(
                    "the product no longer holds the original receipt: this is not evidence the command was never sent; the run stays held",
                ));
            }
            Ok(json(StatusCode::OK, &run_status(&after)))
        }
        Err(ActionError::NotFound) => Err(ApiError::not_found()),
        Err(ActionError::ExecutionHeld) => {
            Err(
                ApiError::of(&problems::EXECUTION_HELD)
                    .detail("nothing is dispatched while the restore hold is in place: retry-same, and a cancel whose route sends a call, wait for release-restore-hold; reconcile is served"),
            )
        }
        Err(ActionError::BindingChanged { connection }) => Err(ApiError::of(&problems::BINDING_LIVE_CONFLICT)
        .detail(format!(
            "connection `{connection}` is bound differently than when the run was admitted; restore its settings and restart, or keep investigating with --recovery-only"
        ))),
        Err(ActionError::PayloadErased) => Err(ApiError::payload_erased()),
        Err(ActionError::Raced) => Err(ApiError::of(&problems::RECONCILE_RACED)
            .detail("the run changed between the read this action was decided on and its commit; nothing was applied: inspect it again")),
        // Answered above, after the audit.
        Err(ActionError::ReceiptExpired(_)) => Err(ApiError::of(&problems::RECEIPT_EXPIRED)),
        Err(ActionError::Store(e)) => Err(ApiError::store(&e)),
        Err(ActionError::Refused(r)) => {
            let kind = match (act, r.code) {
                (Action::Reconcile, coordinator_engine::RejectCode::NoReceipt) => {
                    &problems::RECONCILE_UNSUPPORTED
                }
                (Action::Reconcile, coordinator_engine::RejectCode::ReceiptExpired) => {
                    &problems::RECEIPT_EXPIRED
                }
                (Action::Reconcile, _) => &problems::RECONCILE_REFUSED,
                // (A cancel is never refused: one the VM does not take
                // answers the run unchanged.)
                (Action::RetrySame | Action::Cancel, _) => &problems::RETRY_REFUSED,
            };
            Err(ApiError::of(kind).detail(r.message))
        }
    }
}

async fn review_completion(
    State(s): State<AppState>,
    headers: HeaderMap,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let token = bearer(&headers).ok_or_else(ApiError::refused)?;
    let binding = headers
        .get(RECIPIENT_BINDING_HEADER)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(ApiError::refused)?;
    if !s.completions.accepts(binding, token.as_bytes()) {
        return Err(ApiError::refused());
    }
    let bytes = body(bytes)?;
    let event: api::ReviewCompletion = strict::from_slice(&bytes).map_err(ApiError::bad_request)?;
    let moved = s
        .engine
        .bring_forward(&event.review_request_id)
        .await
        .map_err(|e| ApiError::store(&e))?;
    tracing::info!(moved, "review completion received");
    Ok(json(StatusCode::ACCEPTED, &serde_json::json!({})))
}

#[cfg(test)]
mod tests {
    use super::{ApiError, Completions};
    use coordinator_ports::StoreError;

    /// seed 000 "Recover a run": the status names where a failed run broke
    /// (`failurePath`) and a product's own refusal code.
    #[test]
    fn a_failed_run_says_where_it_broke_and_what_the_product_said() {
        use coordinator_ports::conformance::{new_run, state, Fixture};
        let mut st = state("r-1");
        st.status = coordinator_engine::RunStatus::Failed;
        st.failure = Some(coordinator_vm::Failure {
            code: coordinator_vm::FailureCode::InvalidCommand,
            step: "notify".into(),
            product_code: Some("template.unknown".into()),
            function: None,
            message: "the input of `notify` at `/to/email`: not an email".into(),
            path: Some("/to/email".into()),
        });
        let new = new_run(&Fixture::any(), "r-1", "alice", "id-1", "d");
        let record = coordinator_ports::RunRecord {
            id: new.id,
            sequence: 1,
            workflow: new.workflow,
            revision: new.revision,
            owner: new.owner,
            start_identity: new.start_identity,
            request_digest: new.request_digest,
            state: st,
            ledger: Default::default(),
            version: 1,
            bindings: new.bindings,
            payload_erased: false,
            review: None,
            ended_unix: Some(1_800_000_000),
        };
        let status = super::run_status(&record);
        assert_eq!(status.ended_at.as_deref(), Some("2027-01-15T08:00:00Z"));
        assert_eq!(status.failure.as_deref(), Some("invalid-command"));
        assert_eq!(status.failure_path.as_deref(), Some("/to/email"));
        assert_eq!(status.refusal_code.as_deref(), Some("template.unknown"));
    }

    /// seed 000: a custody or tampering refusal while serving is 409
    /// `deployment.refused`, never 503; only an outage is 503.
    #[test]
    fn store_refusals_are_deployment_refused_and_outages_unavailable() {
        let refused = ApiError::store(&StoreError::Refused {
            code: "state-key-custody",
            message: "state key version 2 is not configured".into(),
        });
        assert_eq!(
            (refused.0.status, refused.0.code.as_str()),
            (409, "deployment.refused")
        );
        assert!(refused
            .0
            .detail
            .as_deref()
            .is_some_and(|d| d.starts_with("state-key-custody")));
        let outage = ApiError::store(&StoreError::Unavailable("down".into()));
        assert_eq!(
            (outage.0.status, outage.0.code.as_str()),
            (503, "service.unavailable")
        );
    }

    #[test]
    fn completions_accept_only_a_configured_pair() {
        let mut c = Completions::default();
        c.add("casework-a", b"token-a".to_vec());
        c.add("casework-b", b"token-b".to_vec());
        assert!(c.accepts("casework-a", b"token-a"));
        assert!(c.accepts("casework-b", b"token-b"));
        // Another connection's token, a prefix, a longer token, another
        // binding: all refused.
        assert!(!c.accepts("casework-a", b"token-b"));
        assert!(!c.accepts("casework-a", b"token-"));
        assert!(!c.accepts("casework-a", b"token-aa"));
        assert!(!c.accepts("casework-c", b"token-a"));
        assert!(!c.accepts("", b""));
        assert!(!Completions::default().accepts("casework-a", b"token-a"));
    }
}
