//! The HTTP edge of SPEC §8: the [`router()`] of the implemented routes,
//! its middleware, the handlers and the [`ApiError`] every refusal is
//! answered with. Handlers only translate HTTP ↔ domain and call the
//! engine in `coordinator_engine`; request and response bodies come from
//! `coordinator_api`. [`run`] serves the router on the caller's listener
//! until the caller's shutdown signal.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use coordinator_engine::Engine;

use crate::auth::Verifier;
use crate::events;

mod document;
mod error;
mod event_starts;
mod exports;
pub(crate) mod middleware;
mod moves;
mod prefer;
mod recovery;
pub(crate) mod request;
pub(crate) mod response;
mod review_completions;
pub(crate) mod router;
mod runs;

pub use error::ApiError;
pub use review_completions::{Completions, RECIPIENT_BINDING_HEADER};
pub use router::router;
pub use runs::MAX_IDEMPOTENCY_KEY_BYTES;

/// How long shutdown may take (seed 000: SIGTERM stops within 15 s).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(15);

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    /// The engine: its roles (admission, the worker, the operator) and its
    /// health part.
    pub engine: Arc<Engine>,
    /// The engine's clock, handed over where the engine is assembled (the
    /// event signature's clock-skew check reads it, so a manual clock
    /// drives it).
    pub clock: Arc<dyn coordinator_ports::Clock>,
    /// The store's counts (doctor), the same store the engine uses.
    pub counts: Arc<dyn coordinator_ports::RunCounts>,
    /// Token verification and policies.
    pub verifier: Arc<Verifier>,
    /// Review-completion credentials.
    pub completions: Arc<Completions>,
    /// The event sources and their signing keys (`POST /v1/events/...`).
    pub events: Arc<events::EventSources>,
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
