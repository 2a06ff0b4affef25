//! `coordinator-adapters`: the product adapters, implementations of the
//! [`ProductAdapter`] port (SPEC §5, §6).
//!
//! - [`http::HttpAdapter`]: the real adapter (reqwest over rustls/ring), one
//!   request per attempt with a fresh access token ([`token`]).
//! - [`memory::MemoryAdapter`]: an in-memory adapter with scripted outcomes,
//!   for unit tests of the service.
//! - [`mapping`]: the status mapping of SPEC §6 as pure functions.
//! - [`casework`]: how a Casework review's completion is observed.
//! - `client_span.rs`: the HTTP client span of a traced attempt and the
//!   `traceparent` it sends (only with [`HttpAdapter::with_tracer`]).
//!
//! Invariants: adapters never retry and never log a token, key or secret
//! value; they see the engine only through the port (`coordinator-ports`);
//! they read no secret file themselves: key bytes come through
//! [`SecretSource`], whose production implementation is the runtime crate's
//! one reader (`coordinator_runtime::secrets::SecretResolver`).

#![deny(clippy::unwrap_used, clippy::indexing_slicing)]
#![warn(missing_docs)]

pub mod casework;
mod client_span;
pub mod http;
pub mod jwk;
pub mod mapping;
pub mod memory;
pub mod token;

pub use coordinator_ports::adapter::*;
pub use http::HttpAdapter;
pub use memory::MemoryAdapter;
pub use token::{MemorySecrets, SecretSource};
