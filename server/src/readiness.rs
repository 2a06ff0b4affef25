//! Readiness: what `GET /ready` answers, while `coordinator` waits for its
//! store ([`waiting_router`], with the [`WaitingReason`] of the last failed
//! attempt) and once it serves ([`not_ready_reason`]): 200 when this
//! process serves, naming the holds in place ([`holds_in_place`]: under
//! the admission hold it serves every route but starts), else 503 with the
//! code of the reason it cannot (docs/operations.md "doctor").

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use coordinator_api as api;
use coordinator_engine::Engine;
use coordinator_ports::StoreError;

use crate::clock_skew::CLOCK_SKEW;
use crate::{health, json, no_store, ApiError, AppState};

/// Why a process waiting for its store is not ready yet: the code of the
/// last failed attempt (`store-unavailable` until one failed otherwise, or
/// `database.read-only`). Clones share the value.
#[derive(Clone, Debug)]
pub struct WaitingReason(Arc<std::sync::Mutex<&'static str>>);

impl Default for WaitingReason {
    fn default() -> Self {
        WaitingReason(Arc::new(std::sync::Mutex::new("store-unavailable")))
    }
}

impl WaitingReason {
    /// Records the code of the last failed attempt.
    pub fn set(&self, code: &'static str) {
        if let Ok(mut reason) = self.0.lock() {
            *reason = code;
        }
    }

    /// The code recorded last.
    pub fn get(&self) -> &'static str {
        self.0.lock().map_or("store-unavailable", |r| *r)
    }
}

/// The router served while `coordinator` waits for the database (before
/// the store is open and checked; no engine exists yet): `GET /ready` is
/// 503 `{"ready":false,"reason":CODE}` with the code `reason` holds,
/// `GET /health` is 200 `{"live":true}`, and any other request is 503 with
/// the problem `service.unavailable`. Every answer carries
/// `Cache-Control: no-store`. Nothing is logged per request: the wait
/// itself logs its code.
pub fn waiting_router(reason: WaitingReason) -> Router {
    Router::new()
        .route(
            "/ready",
            get(move || {
                let reason = reason.get();
                async move { not_ready(reason) }
            }),
        )
        .route("/health", get(health))
        .fallback(|| async { ApiError::starting() })
        .layer(axum::middleware::map_response(no_store))
}

/// How long `/ready` waits for its answer (0.9 s, under Kubernetes'
/// default probe timeout of 1 s). A check still running then goes on in
/// the background, and the probe is answered with the reason the last
/// check that finished gave (a store that answered "read-only" slowly
/// stays `database.read-only`), or `store-unavailable`.
pub const READY_DEADLINE: std::time::Duration = std::time::Duration::from_millis(900);

/// The reason `/ready` gave last (`None`: ready), so that a reason is
/// logged when it begins and when it ends, not at every probe.
static LAST_REASON: std::sync::Mutex<Option<&'static str>> = std::sync::Mutex::new(None);

/// The reason the last check that finished gave (`Some(None)`: ready).
static LAST_FINISHED: std::sync::Mutex<Option<Option<&'static str>>> = std::sync::Mutex::new(None);

/// Logs `reason` when it differs from the last probe's.
fn log_change(reason: Option<&'static str>) {
    let Ok(mut last) = LAST_REASON.lock() else {
        return;
    };
    if *last == reason {
        return;
    }
    match reason {
        Some(code) => tracing::warn!(code, "not ready"),
        None => tracing::info!(was = last.unwrap_or_default(), "ready again"),
    }
    *last = reason;
}

/// The answer to a probe whose check outlived [`READY_DEADLINE`]: the
/// last finished check's reason, if it found one, else `store-unavailable`.
fn reason_past_deadline() -> &'static str {
    match LAST_FINISHED.lock().ok().and_then(|l| *l) {
        Some(Some(reason)) => reason,
        _ => "store-unavailable",
    }
}

/// `GET /ready`: 200 when this process serves, with the holds in place
/// ([`holds_in_place`]: a hold refuses starts or dispatches, not the
/// operator's routes, so a probe must not take the only instance out of
/// rotation during a restore), else 503 with the reason
/// ([`not_ready_reason`]); within [`READY_DEADLINE`].
pub(crate) async fn ready(State(s): State<AppState>) -> Response {
    let engine = Arc::clone(&s.engine);
    let check = tokio::spawn(async move {
        let found = match not_ready_reason(&engine).await {
            Some(reason) => Err(reason),
            None => holds_in_place(&engine).await,
        };
        if let Ok(mut last) = LAST_FINISHED.lock() {
            *last = Some(found.as_ref().err().copied());
        }
        found
    });
    let found = match tokio::time::timeout(READY_DEADLINE, check).await {
        Ok(Ok(found)) => found,
        _ => Err(reason_past_deadline()),
    };
    log_change(found.as_ref().err().copied());
    match found {
        Ok(holds) => json(
            StatusCode::OK,
            &api::Ready {
                ready: true,
                reason: None,
                holds: holds.into_iter().map(str::to_owned).collect(),
                clock_offset_seconds: None,
            },
        ),
        Err(CLOCK_SKEW) => not_ready_with(CLOCK_SKEW, s.engine.health.clock_offset_seconds()),
        Err(reason) => not_ready(reason),
    }
}

/// The holds in place, by the names of the `coordinator_hold` gauge's
/// `hold` label (`restore`, `admission`: [`Holds::named`](coordinator_ports::Holds::named)), or `store-unavailable` when the
/// store does not answer. Under the admission hold every start is refused
/// `admission.held`; the process serves every other route.
pub async fn holds_in_place(engine: &Engine) -> Result<Vec<&'static str>, &'static str> {
    let holds = engine
        .operator
        .holds()
        .await
        .map_err(|_| "store-unavailable")?;
    Ok(holds
        .named()
        .into_iter()
        .filter_map(|(name, placed)| placed.then_some(name))
        .collect())
}

/// Why this process cannot serve now, as the code of the refusal its
/// requests would get (`None`: it can): fenced by a restore hold placed
/// after it started (`restore.lease-incompatible`), the store unreachable
/// (`store-unavailable`) or read-only (`database.read-only`), this
/// process's clock beyond its bound from the database's (`clock.skew`,
/// [`crate::clock_skew`]; a `--recovery-only` instance too), the audit
/// journal failing (`audit.response-unavailable`: known to be failing and
/// a probe append fails now, so it recovers by itself), or the active packages
/// changed by an `apply` since it started (`deployment.activation-changed`).
/// A hold is no reason: it refuses starts ([`holds_in_place`]). A
/// `--recovery-only` instance admits nothing by design and is ready while
/// its store is.
pub async fn not_ready_reason(engine: &Engine) -> Option<&'static str> {
    if engine.health.fenced() {
        return Some("restore.lease-incompatible");
    }
    if let Err(e) = engine.health.ping().await {
        let reason = match &e {
            StoreError::Refused { code, .. } => *code,
            _ => "store-unavailable",
        };
        tracing::debug!(code = reason, error = %e, "not ready");
        return Some(reason);
    }
    if engine.health.clock_out_of_service() {
        return Some(CLOCK_SKEW);
    }
    if engine.health.recovery_only() {
        return None;
    }
    if !engine.health.audit_available().await {
        return Some("audit.response-unavailable");
    }
    match engine.admission.activation_current().await {
        Ok(true) => None,
        Ok(false) => Some("deployment.activation-changed"),
        Err(_) => Some("store-unavailable"),
    }
}

/// `/ready`'s 503 answer with its reason code.
fn not_ready(reason: &str) -> Response {
    not_ready_with(reason, None)
}

/// `/ready`'s 503 answer with its reason code and, for `clock.skew`, the
/// measured clock offset in seconds.
fn not_ready_with(reason: &str, clock_offset_seconds: Option<f64>) -> Response {
    json(
        StatusCode::SERVICE_UNAVAILABLE,
        &api::Ready {
            ready: false,
            reason: Some(reason.to_owned()),
            holds: Vec::new(),
            clock_offset_seconds,
        },
    )
}
