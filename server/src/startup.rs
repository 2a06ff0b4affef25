//! Startup: waiting for the store, the checks `coordinator` makes before it
//! serves, and the live-binding rule; kept here so the binary reads as one
//! sequence and tests call the checks without spawning it.
//!
//! [`open_store`]: opens the PostgreSQL store (`Store::open`: server
//! version, schema, database id, role, custody, activation) and runs
//! [`check_bindings`]. A database that cannot be reached is waited out
//! (seed 000 "Apply and start": "While the database is unreachable the
//! service logs `store-unavailable`, answers `/ready` with 503, and keeps
//! running"), retried with a bounded backoff ([`StoreWait`]); every other
//! fault refuses at once with its raw code.
//!
//! [`check_bindings`]: seed 000 "Apply and start": "Startup refuses when a
//! runtime file change alters a live run's endpoint, identity, scopes, or
//! task authority. Restore the original binding, or investigate with
//! `--recovery-only`, which admits and dispatches nothing." The rule and
//! the binding's fields are in docs/service.md "Connection bindings".

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use coordinator_ports::{RunReads, StoreError};
use coordinator_runtime::binding::{self, BindingConflict};
use coordinator_runtime::config::{Connection, RuntimeConfig};
use coordinator_runtime::package::LoadedPackage;
use coordinator_runtime::secrets::{DeploymentKeys, SecretResolver};
use coordinator_store::{self as store, ErrorKind, Store};
use tokio::time::Instant;

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
/// ([`RunReads::live_bindings`]) with the runtime file's `connections`.
///
/// # Errors
/// The store's (at startup, [`open_store`] waits out `store-unavailable`
/// as it does for the other startup reads).
pub async fn check_bindings(
    store: &dyn RunReads,
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

/// How [`open_store`] waits for a database it cannot reach: the delay
/// after the first failed attempt, doubled after each further one up to a
/// bound, and how often a wait that goes on is logged again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreWait {
    /// The delay after the first failed attempt.
    pub first_delay: Duration,
    /// The longest delay between two attempts.
    pub max_delay: Duration,
    /// How long after the last `store-unavailable` line the next failed
    /// attempt is logged (the first failure is always logged).
    pub log_every: Duration,
}

impl Default for StoreWait {
    /// 250 ms, doubling up to 5 s; logged again every 30 s.
    fn default() -> Self {
        StoreWait {
            first_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(5),
            log_every: Duration::from_secs(30),
        }
    }
}

impl StoreWait {
    /// The delay before the next attempt after `failed` failed attempts in
    /// a row (`failed` ≥ 1): `first_delay × 2^(failed − 1)`, at most
    /// `max_delay`.
    pub fn delay(&self, failed: u32) -> Duration {
        let doublings = failed.saturating_sub(1).min(31);
        self.first_delay
            .saturating_mul(1 << doublings)
            .min(self.max_delay)
    }
}

/// What [`open_store`] came to.
#[derive(Debug)]
pub enum StoreStartup {
    /// The database answered and every check passed (under
    /// `--recovery-only`, changed bindings were logged as warnings): serve.
    Serve(Store),
    /// `stop` completed first (SIGTERM while waiting): exit 0 without
    /// serving.
    Stopped,
    /// A check refused; the refusal was logged as one JSON line on stderr
    /// with its raw code (`deployment.refused` with the store's code as
    /// `reason`, `state-key-custody`, or `live-binding-conflict`): exit 1.
    Refused,
}

/// Whether a startup failure is an outage to wait out: the database server
/// could not be reached (connection refused, no answer within the first
/// connection's 5 s, a connection lost during the checks, a server still
/// starting up, or every server that answers is read-only:
/// `database.read-only`). A refused login (`database.login`), a missing database
/// (`database.missing`), a TLS configuration fault (`database.tls`), an
/// unreadable URL or root certificate file and every check's refusal are
/// not.
pub fn is_outage(e: &store::DatabaseError) -> bool {
    e.kind == ErrorKind::Unavailable && matches!(e.code, "store-unavailable" | "database.read-only")
}

/// Logs a refusal of [`Store::open`] with its raw code: custody keeps
/// `state-key-custody`, every other refusal is `deployment.refused` with
/// the store's code as `reason` (a missing URL file included).
pub fn log_store_refusal(e: &store::DatabaseError) {
    if e.code == "state-key-custody" {
        tracing::error!(code = "state-key-custody", next = %e.next, "{}", e.message);
    } else {
        tracing::error!(code = "deployment.refused", reason = %e.cli_code(), next = %e.next, "{}", e.message);
    }
}

/// A failed binding read as a store error (outages stay outages).
fn binding_read_error(e: StoreError) -> store::DatabaseError {
    match e {
        StoreError::Unavailable(m) => store::DatabaseError::unavailable(
            "store-unavailable",
            format!("the database is unavailable: {m}"),
            "check that PostgreSQL is running and reachable from this host",
        ),
        StoreError::Refused { code, message } => store::DatabaseError::refused(
            code,
            message,
            "run `coordinatorctl --runtime-config FILE deployment-status`",
        ),
        other => store::DatabaseError::refused(
            "deployment.refused",
            other.to_string(),
            "run `coordinatorctl --runtime-config FILE deployment-status`",
        ),
    }
}

/// What [`open_store`] opens the store with.
#[derive(Clone, Copy, Debug)]
pub struct StoreStart<'a> {
    /// The checked runtime file (its `deployment` section present).
    pub config: &'a RuntimeConfig,
    /// Resolves the runtime database URL (and its trusted root).
    pub resolver: &'a SecretResolver,
    /// The state keyring and admission key (custody checks).
    pub keys: &'a DeploymentKeys,
    /// The pinned packages, verified by the runtime check.
    pub packages: &'a [LoadedPackage],
    /// The pool's size (at most 32).
    pub max_connections: u32,
    /// `--recovery-only`: changed bindings are served, not refused.
    pub recovery_only: bool,
    /// Set to the code of each failed attempt, for `/ready` while waiting.
    pub waiting_reason: Option<&'a crate::WaitingReason>,
}

/// Opens the store and runs the checks of a normal startup: `Store::open`
/// (server version, schema version, database id, runtime role safety, key
/// custody, pinned packages == active), then [`check_bindings`].
///
/// While the database cannot be reached ([`is_outage`]) it retries every
/// [`StoreWait::delay`], logging `store-unavailable` (`attempts`,
/// `waited_seconds`, the cause with `HOST:PORT`) at the first failure and
/// then at most every [`StoreWait::log_every`]; once the database answers,
/// the checks run as at any startup. `stop` is polled throughout (an
/// attempt in flight is abandoned): when it completes the result is
/// [`StoreStartup::Stopped`], and `stop` must not be polled again.
pub async fn open_store<S>(start: StoreStart<'_>, wait: StoreWait, stop: &mut S) -> StoreStartup
where
    S: Future<Output = ()> + Unpin,
{
    let started = Instant::now();
    let mut failed: u32 = 0;
    let mut logged: Option<Instant> = None;
    loop {
        let attempt = async {
            let store = Store::open(
                start.config,
                start.resolver,
                start.keys,
                start.packages,
                start.max_connections,
            )
            .await?;
            match check_bindings(&store, &start.config.connections, start.recovery_only).await {
                Ok(bindings) => Ok((store, bindings)),
                Err(e) => {
                    store.close().await;
                    Err(binding_read_error(e))
                }
            }
        };
        let outcome = tokio::select! {
            outcome = attempt => outcome,
            () = &mut *stop => return StoreStartup::Stopped,
        };
        let e = match outcome {
            Ok((store, bindings)) => {
                if failed > 0 {
                    tracing::info!(
                        attempts = failed + 1,
                        waited_seconds = started.elapsed().as_secs(),
                        "the database answers; the deployment checks passed"
                    );
                }
                return match bindings {
                    BindingStartup::Serve => StoreStartup::Serve(store),
                    BindingStartup::RecoveryOnly(conflicts) => {
                        log_recovery_only(&conflicts);
                        StoreStartup::Serve(store)
                    }
                    BindingStartup::Refuse(conflicts) => {
                        store.close().await;
                        log_refusal(&conflicts);
                        StoreStartup::Refused
                    }
                };
            }
            Err(e) => e,
        };
        if !is_outage(&e) {
            log_store_refusal(&e);
            return StoreStartup::Refused;
        }
        failed = failed.saturating_add(1);
        if let Some(reason) = start.waiting_reason {
            reason.set(e.code);
        }
        if logged.is_none_or(|at| at.elapsed() >= wait.log_every) {
            logged = Some(Instant::now());
            tracing::error!(
                code = e.code,
                attempts = failed,
                waited_seconds = started.elapsed().as_secs(),
                next = %e.next,
                "{}; not serving yet (/ready answers 503), retrying until the database answers",
                e.message
            );
        }
        tokio::select! {
            () = tokio::time::sleep(wait.delay(failed)) => {}
            () = &mut *stop => return StoreStartup::Stopped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_up_to_its_bound() {
        let w = StoreWait::default();
        let ms: Vec<u128> = (1..=8).map(|n| w.delay(n).as_millis()).collect();
        assert_eq!(ms, [250, 500, 1000, 2000, 4000, 5000, 5000, 5000]);
        assert_eq!(w.delay(u32::MAX), w.max_delay);
        assert_eq!(w.delay(0), w.first_delay);
    }

    #[test]
    fn only_an_unreachable_server_is_waited_out() {
        let outage = store::DatabaseError::unavailable("store-unavailable", "m", "n");
        assert!(is_outage(&outage));
        for refused in [
            store::DatabaseError::refused("coordinator.database.login", "m", "n"),
            store::DatabaseError::refused("coordinator.database.missing", "m", "n"),
            // A TLS configuration fault (no TLS at the server, a refused
            // certificate, an empty private root) is no outage either.
            store::DatabaseError::refused("coordinator.database.tls", "m", "n"),
            store::DatabaseError::refused("coordinator.deployment.database-id", "m", "n"),
            store::DatabaseError::refused("coordinator.command.state-key-custody", "m", "n"),
            // An unreadable URL file is unavailable, but not an outage.
            store::DatabaseError::unavailable("secret.unavailable", "m", "n"),
        ] {
            assert!(!is_outage(&refused), "{refused}");
        }
        assert!(is_outage(&binding_read_error(StoreError::Unavailable(
            "gone".into()
        ))));
        let custody = binding_read_error(StoreError::Refused {
            code: "state-key-custody",
            message: "m".into(),
        });
        assert_eq!(custody.code, "state-key-custody");
        assert!(!is_outage(&custody));
    }
}
