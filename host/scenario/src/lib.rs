//! `coordinator-scenario`: the scenario host (SPEC §7). Reads
//! `scenarios.yaml` ([`mod@file`]) and runs each case on a virtual clock against
//! fake product replies ([`run`]), driving the VM exactly as the service
//! does (`coordinatorctl test`), a case's run moved to another revision of
//! the workflow at a wait when it says so ([`moves`]). Its codes are data:
//! [`codes`].
//!
//! Invariant: the scenario host never sends a request, reads a credential
//! or reaches a store: Cargo keeps it so (it depends on `ir`, `vm` and
//! `source` only).

#![deny(clippy::unwrap_used, clippy::indexing_slicing)]
#![warn(missing_docs)]

pub mod codes;
pub mod export;
pub mod file;
pub mod moves;
pub mod run;
pub mod targets;

/// Calls a script function of a `functions.rhai` source with JSON
/// arguments in the VM's sandbox, outside any run, and returns its result
/// as JSON (`Err`: a sentence). For tools that compute what a Function
/// sends for a scenario's input (`coordinatorctl convert` completes a
/// scripted read-record answer with its request's `collection` and
/// `recordId`); the scenario host is the offline toolchain's way to the VM.
pub use coordinator_vm::functions::call_outside_run;
