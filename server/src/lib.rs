//! `coordinator`: the workflow service's HTTP edge (SPEC §8).
//!
//! Handlers only translate HTTP ↔ domain and call the engine in
//! `coordinator_engine`; request and response bodies come from
//! `coordinator_api`. [`run`] takes its listener and its shutdown signal
//! from the caller, so tests bind port 0; [`work`] is the in-process
//! worker loop. Before the store is open, `coordinator` serves
//! [`waiting_router`] through a [`gate::Gate`] on the same listener. See
//! docs/service.md.
//!
//! Code map: [`http`] (the router, its middleware, the handlers of the run,
//! event-start, recovery and review-completion routes, [`ApiError`]),
//! [`ops`] (the operator routes), [`readiness`] (`/ready`), [`metrics`]
//! (the metrics listener), [`auth`] (tokens and policies), [`events`]
//! (event source keys and signatures), [`strict`] (strict JSON),
//! [`startup`] (the wait for the store and the checks before serving),
//! [`gate`] (serving before the store is open), [`telemetry`] (the
//! OpenTelemetry traces' provider and exporter, off unless configured),
//! [`version`] (the package version and source revision both binaries
//! report), [`clock_skew`] (this process's clock against the database's),
//! [`run_end_relay`] (run ends told between processes, for the callers
//! waiting for them) and [`worker_loop`].

#![deny(clippy::unwrap_used, clippy::indexing_slicing)]

pub mod auth;
pub mod clock_skew;
pub mod events;
pub mod gate;
pub mod http;
pub mod metrics;
pub mod ops;
pub mod readiness;
pub mod run_end_relay;
pub mod startup;
pub mod stopping;
pub mod strict;
pub mod telemetry;
pub mod verified_tokens;
pub mod version;
pub mod worker_loop;

pub use http::{
    router, run, ApiError, AppState, Completions, MAX_IDEMPOTENCY_KEY_BYTES,
    RECIPIENT_BINDING_HEADER, SHUTDOWN_GRACE,
};
pub use readiness::{holds_in_place, not_ready_reason, waiting_router, WaitingReason};
pub use worker_loop::{work, WORKER_LANES};

// The helpers `ops` and `readiness` reach at the crate root.
pub(crate) use http::middleware::no_store;
pub(crate) use http::request::{body, principal};
pub(crate) use http::response::json;
pub(crate) use http::router::health;
