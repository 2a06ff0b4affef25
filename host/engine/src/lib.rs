//! `coordinator-engine`: the service host's engine, which drives the VM
//! over the ports of `coordinator-ports` (run store, clock, product
//! adapter). It feeds the VM events and turns the VM's commands into jobs;
//! it never decides what a step does (ARCHITECTURE.md).
//!
//! - [`engine`]: the [`Engine`] and its assembly: three roles, each built
//!   from the ports it uses, and a health part: admission ([`admission`]:
//!   starts by token and by event), the worker ([`worker`]: ticks over
//!   leased jobs; `job_runner.rs` carries one out, one function per job
//!   kind) and the operator ([`operator`]: `cancel`, `retry-same`,
//!   `reconcile`, inspection, listing, retention, the holds and the restore
//!   sequence); [`health`]: the fence, the audit journal, the store's ping.
//!   What the roles share is the committer (`committer.rs`): the one commit
//!   path (`committer/feed.rs`), the group commits, the Program cache
//!   (`programs.rs`), the lease rule (`leases.rs`), the hand-off of jobs
//!   leased on insert (`handoff.rs`); [`jobs`] turns the VM's commands into
//!   jobs.
//! - [`run_end_waiters`]: the callers waiting for runs' ends, woken by
//!   the commits that end them.
//! - [`metrics`]: the process's counters.
//! - [`trace`]: the OpenTelemetry spans of runs, through a tracer the
//!   embedding process hands over ([`Engine::with_tracer`]); none without.
//!   The part that makes them is `spans.rs`.
//!
//! No HTTP server here: `server/` translates HTTP to these calls. See
//! docs/service.md.

#![deny(clippy::unwrap_used, clippy::indexing_slicing)]
#![warn(missing_docs)]

pub mod admission;
pub(crate) mod committer;
pub(crate) mod config;
pub mod engine;
pub(crate) mod flow_gate;
pub(crate) mod group;
pub(crate) mod handoff;
pub mod health;
pub(crate) mod job_runner;
pub mod jobs;
pub(crate) mod leases;
pub mod metrics;
pub mod operator;
pub(crate) mod parts;
pub(crate) mod programs;
pub mod run_end_waiters;
pub(crate) mod spans;
pub(crate) mod timeline;
pub mod trace;
pub mod worker;

pub use admission::{Admission, AdmitError, EventOrigin, Principal, StartRequest, TriggerInfo};
pub use config::{EngineConfig, EngineError, INTERRUPTED, MAX_BACKOFF_SECONDS, RESTORED};
pub use engine::Engine;
pub use flow_gate::MAX_RETRY_AFTER_SECONDS;
pub use health::Health;
pub use operator::actions::{Action, ActionError, InspectedStep};
pub use operator::moves::{MoveError, MovedRun};
pub use operator::restore::HoldError;
pub use operator::Operator;
pub use run_end_waiters::{
    RunEndSignal, RunEndWait, RunEndWaiters, WaitOutcome, MAX_RUN_END_WAITS,
};
pub use worker::{LaneTick, Worker};

/// The move certificate a move takes (`Operator::move_run`), as the
/// compiler writes it.
pub use coordinator_ir::moves::MoveCertificate;
/// The VM's run state names and effect states, re-exported for `server/`
/// (which depends on the hosts and `api/` only).
pub use coordinator_vm::{EffectState, MoveRefused, RejectCode, RunStatus};
