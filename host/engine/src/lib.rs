//! `coordinator-engine`: the service host's engine, which drives the VM
//! over the ports of `coordinator-ports` (run store, clock, product
//! adapter). It feeds the VM events and turns the VM's commands into jobs;
//! it never decides what a step does (ARCHITECTURE.md).
//!
//! - [`engine`]: the [`Engine`], its settings and construction: three
//!   roles over one shared core, each with its own state: admission
//!   ([`admission`]: starts by token and by event), the worker
//!   ([`worker`]: [`Engine::tick`] over leased jobs, one function per job
//!   kind) and operator actions ([`operator`]: `cancel`, `retry-same`,
//!   `reconcile`, inspection, listing, retention, and the restore
//!   sequence). The core (`core.rs`) holds the ports, the Program cache,
//!   the restore epoch and the group commits; `feed.rs` is the one commit
//!   path every role takes; [`jobs`] turns the VM's commands into jobs.
//! - [`metrics`]: the process's counters.
//! - [`trace`]: the OpenTelemetry spans of runs, through a tracer the
//!   embedding process hands over ([`Engine::with_tracer`]); none without.
//!   The core's methods that make them are `spans.rs`.
//!
//! No HTTP server here: `server/` translates HTTP to these calls. See
//! docs/service.md.

#![deny(clippy::unwrap_used, clippy::indexing_slicing)]
#![warn(missing_docs)]

pub mod admission;
pub(crate) mod config;
pub(crate) mod core;
pub mod engine;
pub(crate) mod feed;
pub(crate) mod flow_gate;
pub(crate) mod group;
pub mod jobs;
pub mod metrics;
pub mod operator;
pub(crate) mod spans;
pub(crate) mod timeline;
pub mod trace;
pub mod worker;

pub use admission::{AdmitError, EventOrigin, Principal, StartRequest, TriggerInfo};
pub use config::{EngineConfig, INTERRUPTED, MAX_BACKOFF_SECONDS, RESTORED};
pub use engine::{Engine, EngineError};
pub use flow_gate::MAX_RETRY_AFTER_SECONDS;
pub use operator::actions::{Action, ActionError, InspectedStep};
pub use operator::restore::HoldError;

/// The VM's run state names and effect states, re-exported for `server/`
/// (which depends on the hosts and `api/` only).
pub use coordinator_vm::{EffectState, RejectCode, RunStatus};
