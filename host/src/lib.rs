//! `coordinator-host`: hosts that drive the VM, and what they read at startup.
//!
//! - [`runtime`]: the runtime file (`runtime.yaml`): types, offline check,
//!   JSON Schema.
//! - [`package`]: workflow packages: write, load and verify against a digest.
//! - [`types`]: typed callers (TypeScript, Python) generated from a Program.
//!
//! See ARCHITECTURE.md.

#![warn(missing_docs)]

pub mod package;
pub mod runtime;
pub mod types;
