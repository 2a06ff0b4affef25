//! `coordinator-engine`: the service host's engine, which drives the VM
//! over the ports of `coordinator-ports` (run store, clock, product
//! adapter). It feeds the VM events and turns the VM's commands into jobs;
//! it never decides what a step does (ARCHITECTURE.md).
//!
//! - [`engine`]: the [`Engine`], its settings, construction and shared
//!   state.
//! - [`admission`]: starts by token and by event.
//! - [`worker`]: the worker step ([`Engine::tick`]) and how an event is fed
//!   to the VM and committed.
//! - [`jobs`]: the VM's commands turned into jobs.
//! - [`actions`]: operator actions (`cancel`, `retry-same`, `reconcile`),
//!   inspection, listing, retention.
//! - [`restore`]: the restore sequence (holds, the restore epoch, review of
//!   restored prepared commands, attestations).
//! - [`metrics`]: the process's counters.
//!
//! No HTTP server here: `server/` translates HTTP to these calls. See
//! docs/service.md.

#![deny(clippy::unwrap_used, clippy::indexing_slicing)]
#![warn(missing_docs)]

pub mod actions;
pub mod admission;
pub mod engine;
pub(crate) mod group;
pub mod jobs;
pub mod metrics;
pub mod restore;
pub mod worker;

pub use actions::{Action, ActionError, InspectedStep};
pub use admission::{AdmitError, EventOrigin, Principal, StartRequest, TriggerInfo};
pub use engine::{Engine, EngineConfig, EngineError};
pub use restore::HoldError;

/// The VM's run state names and effect states, re-exported for `server/`
/// (which depends on the hosts and `api/` only).
pub use coordinator_vm::{EffectState, RejectCode, RunStatus};
