//! `coordinator-vm`: the deterministic interpreter of compiled workflow
//! [`Program`](coordinator_ir::Program)s, with sandboxed Rhai Functions.
//!
//! A host loads a Program once ([`Vm::new`]), admits runs ([`Vm::admit`]) and
//! feeds each run its [`Event`]s ([`Vm::resume`]); every call returns the new
//! [`RunState`] and the [`Command`]s to carry out. The VM reads no clock,
//! does no I/O and uses no randomness: time, answers and operator actions
//! arrive as events, so the same events give the same states, bit for bit.
//! See `vm/README.md` for the semantics decided where SPEC is silent.

#![deny(clippy::unwrap_used, clippy::indexing_slicing)]
#![warn(clippy::wildcard_enum_match_arm)]
#![forbid(unsafe_code)]

pub mod functions;
pub mod instant; // re-exports `coordinator_ir::instant` for hosts
mod machine;
mod model;
mod moves;
mod view;

#[cfg(test)]
mod testkit;
#[cfg(test)]
mod tests;

// What is exported here is the contract hosts may use; the rest (the
// record of pending work `Pending`, `CallPhase`, the cancel record, the
// interpreter's internals) is the VM's own. Hosts learn what they need from
// the commands, the rejections and the queries of `view.rs`.
pub use functions::{FunctionError, Limits, LIMITS};
pub use machine::{LoadError, TriggerStart, Vm};
pub use model::{
    Answer, Command, DispatchCommand, Edge, EdgeTaken, EffectState, Event, Failure, FailureCode,
    RejectCode, Rejected, Resumed, RunState, RunStatus, WakeKind,
};
pub use moves::{check_move_target, move_source, move_waiting_run, MoveRefused, MoveTarget, Moved};
pub use view::{
    recovery_support, wait_kind, Expected, RecoverySupport, TimedEvent, Wait, WaitKind,
    SAME_INSTANT_ORDER,
};
