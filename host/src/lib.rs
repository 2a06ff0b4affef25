//! `coordinator-host`: the hosts that drive the VM, and what they read.
//!
//! - [`keys`]: the state keyring (AES-256-GCM sealing), admission and audit keys (HMAC-SHA256).
//! - [`scenario`]: `scenarios.yaml` and the scenario host (`coordinatorctl test`).

#![deny(clippy::unwrap_used, clippy::indexing_slicing)]

pub mod keys;
pub mod scenario;
