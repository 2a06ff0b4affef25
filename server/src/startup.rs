//! Startup checks the `coordinator` binary makes after the store verified
//! the deployment (`Store::open`: schema, database id, role, custody,
//! activation), kept here so tests call them without spawning the binary.
//!
//! [`check_bindings`]: seed 000 "Apply and start": "Startup refuses when a
//! runtime file change alters a live run's endpoint, identity, scopes, or
//! task authority. Restore the original binding, or investigate with
//! `--recovery-only`, which admits and dispatches nothing." The rule and
//! the binding's fields are in docs/service.md "Connection bindings".

use std::collections::BTreeMap;

use coordinator_host::runtime::binding::{self, BindingConflict};
use coordinator_host::runtime::config::Connection;
use coordinator_host::service::{RunStore, StoreError};

/// The raw code of the startup refusal on standard error (seed 000 "Codes
/// you see"); `coordinatorctl` prints it as
/// `coordinator.command.live-binding-conflict`.
pub const LIVE_BINDING_CONFLICT: &str = "live-binding-conflict";

/// What startup does about connection bindings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BindingStartup {
    /// No run that has not ended recorded another binding: serve.
    Serve,
    /// Bindings changed, but the instance runs with `--recovery-only`: serve
    /// recovery operations (a `retry-same` or `reconcile` of an affected
    /// run answers 409 `binding.live-conflict`).
    RecoveryOnly(Vec<BindingConflict>),
    /// Bindings changed: refuse to start ([`log_refusal`], exit 1).
    Refuse(Vec<BindingConflict>),
}

/// Compares the binding digests recorded by runs that have not ended
/// ([`RunStore::live_bindings`]) with the runtime file's `connections`.
///
/// # Errors
/// The store's (`store-unavailable` at startup exits 3, as for the other
/// startup reads).
pub async fn check_bindings(
    store: &dyn RunStore,
    connections: &BTreeMap<String, Connection>,
    recovery_only: bool,
) -> Result<BindingStartup, StoreError> {
    let live = store.live_bindings().await?;
    let found = binding::conflicts(&live, connections);
    Ok(if found.is_empty() {
        BindingStartup::Serve
    } else if recovery_only {
        BindingStartup::RecoveryOnly(found)
    } else {
        BindingStartup::Refuse(found)
    })
}

/// Logs the refusal as one JSON line on standard error: raw `code`
/// [`LIVE_BINDING_CONFLICT`], the first `connection` and its `runs`, the
/// number of `connections` that changed, and a message naming each with its
/// run count (never a payload or a setting's value).
pub fn log_refusal(conflicts: &[BindingConflict]) {
    let first = conflicts.first();
    tracing::error!(
        code = LIVE_BINDING_CONFLICT,
        connection = first.map_or("", |c| c.connection.as_str()),
        runs = first.map_or(0, |c| c.runs),
        connections = conflicts.len(),
        next = "restore the connection settings those runs were admitted with and restart, or investigate with --recovery-only",
        "the runtime file changes the binding of connections runs that have not ended use: {}",
        binding::describe(conflicts)
    );
}

/// Logs, for an instance started with `--recovery-only`, each connection
/// whose binding changed (a warning: the instance serves).
pub fn log_recovery_only(conflicts: &[BindingConflict]) {
    for c in conflicts {
        tracing::warn!(
            code = LIVE_BINDING_CONFLICT,
            connection = %c.connection,
            runs = c.runs,
            "serving recovery operations only: this connection's binding changed under runs that have not ended; their retry-same and reconcile are refused"
        );
    }
}
