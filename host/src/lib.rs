//! `coordinator-host`: the hosts that drive the VM, and what they read.
//!
//! - [`scenario`]: `scenarios.yaml` and the scenario host (`coordinatorctl test`).

#![deny(clippy::unwrap_used, clippy::indexing_slicing)]

pub mod scenario;
