//! Serving before the store is open: a listener is bound and answering
//! while `coordinator` still waits for the database, and is handed the real
//! router once the deployment checks have passed.
//!
//! A [`Gate`] holds two routers: the *waiting* one it serves first (built
//! without an engine: [`crate::waiting_router`] answers `/ready` with 503
//! and every API route with the problem `service.unavailable`;
//! [`crate::metrics::waiting_router`] has `/metrics` report only
//! `coordinator_store_ready 0`), and the real one, set once by
//! [`Gate::open`]. Each request goes to whichever is
//! current when it arrives, on the same listener and the same connections,
//! so nothing is re-bound and no client sees the port closed in between.
//! The gate never closes again: once serving, an outage is the real
//! router's to answer (`/ready` 503 from its store ping).

use std::future::Future;
use std::sync::{Arc, OnceLock};

use axum::extract::Request;
use axum::Router;
use tower::ServiceExt;

/// A router that serves its waiting router until [`Gate::open`] gives it
/// the real one. Cloning shares the gate.
#[derive(Clone)]
pub struct Gate {
    waiting: Router,
    open: Arc<OnceLock<Router>>,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("open", &self.is_open())
            .finish()
    }
}

impl Gate {
    /// A closed gate serving `waiting`.
    pub fn new(waiting: Router) -> Gate {
        Gate {
            waiting,
            open: Arc::new(OnceLock::new()),
        }
    }

    /// Serves `router` from now on (requests already being answered finish
    /// on the waiting router). Returns `false`, and changes nothing, when
    /// the gate was already open.
    pub fn open(&self, router: Router) -> bool {
        self.open.set(router).is_ok()
    }

    /// Whether [`Gate::open`] has been called.
    pub fn is_open(&self) -> bool {
        self.open.get().is_some()
    }

    /// The router that answers for the gate: each request is passed, path
    /// and all, to the real router when the gate is open, else to the
    /// waiting one.
    pub fn router(&self) -> Router {
        let gate = self.clone();
        Router::new().fallback_service(tower::service_fn(move |request: Request| {
            let current = gate.open.get().unwrap_or(&gate.waiting).clone();
            async move { current.oneshot(request).await }
        }))
    }
}

/// Serves the gate's router on `listener` until `shutdown` completes, then
/// drains open requests (the caller bounds the drain, as for [`crate::run`]).
///
/// # Errors
/// The listener's I/O errors.
pub async fn serve(
    listener: tokio::net::TcpListener,
    gate: Gate,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, gate.router())
        .with_graceful_shutdown(shutdown)
        .await
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::StatusCode;
    use axum::routing::get;

    async fn answer(router: &Router, path: &str) -> (StatusCode, String, String) {
        let response = router
            .clone()
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let cache = response
            .headers()
            .get("cache-control")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let body = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        (status, cache, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn waits_until_opened_then_serves_the_real_router() {
        let gate = Gate::new(crate::waiting_router(crate::WaitingReason::default()));
        let served = gate.router();
        assert!(!gate.is_open());
        let (status, cache, body) = answer(&served, "/ready").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(cache, "no-store");
        assert_eq!(body, r#"{"ready":false,"reason":"store-unavailable"}"#);
        let (status, _, body) = answer(&served, "/health").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        for path in ["/v1/runs", "/v1/runs/r-1/inspect", "/v1/doctor"] {
            let (status, cache, body) = answer(&served, path).await;
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{path}");
            assert_eq!(cache, "no-store", "{path}");
            let problem: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert_eq!(problem["code"], "service.unavailable", "{body}");
            assert_eq!(problem["status"], 503, "{body}");
        }

        let real = Router::new().route("/ready", get(|| async { "ready" }));
        assert!(gate.open(real));
        assert!(gate.is_open());
        // The router already handed to the listener follows the gate.
        let (status, _, body) = answer(&served, "/ready").await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ready"));
        let (status, _, _) = answer(&served, "/v1/runs").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        // Opened once: a second router is refused and changes nothing.
        assert!(!gate.open(Router::new()));
        let (status, _, _) = answer(&served, "/ready").await;
        assert_eq!(status, StatusCode::OK);
    }

    #[tokio::test]
    async fn the_metrics_gate_reports_the_store_not_ready_until_opened() {
        let gate = Gate::new(crate::metrics::waiting_router());
        let (status, _, body) = answer(&gate.router(), "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.ends_with("\ncoordinator_store_ready 0\n"), "{body}");
        assert_eq!(body.lines().filter(|l| !l.starts_with('#')).count(), 1);
    }
}
