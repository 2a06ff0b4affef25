//! `coordinator-host`: the hosts that drive the VM, and what they read.
//!
//! - [`scenario`]: `scenarios.yaml` and the scenario host (`coordinatorctl test`).
//! - [`runtime`]: the runtime file (`runtime.yaml`): types, offline check,
//!   JSON Schema.
//! - [`package`]: workflow packages: write, load and verify against a digest.
//! - [`types`]: typed callers (TypeScript, Python) generated from a Program.
//! - [`adapters`]: product adapters (HTTP calls to other products, SPEC §6)
//!   behind the [`adapters::ProductAdapter`] port.
//! - [`service`]: the service host: ports (run store, clock), in-memory
//!   implementations, and the engine (`coordinator`).
//! - [`keys`]: the state keyring (AES-256-GCM sealing), admission and audit
//!   keys (HMAC-SHA256).
//! - [`secrets`]: secret references resolved (owner-only files, environment).
//! - [`store`]: durable state on PostgreSQL 17+: schema, `plan`/`apply`/
//!   `deployment-status`, the run store.
//! - [`audit`]: the audit journal (JSON Lines, one file per process).
//!
//! See ARCHITECTURE.md.

#![deny(clippy::unwrap_used, clippy::indexing_slicing)]
#![warn(missing_docs)]

pub mod adapters;
pub mod audit;
pub mod keys;
pub mod package;
pub mod runtime;
pub mod scenario;
pub mod secrets;
pub mod service;
pub mod store;
pub mod types;
