//! Durable state on PostgreSQL 17+ (issue 5; DESIGN.md "The service";
//! SPEC §8; seed 000 "Apply and start", "Rotate keys").
//!
//! - [`schema`]: the state schema (version [`schema::SCHEMA_VERSION`]) as
//!   versioned SQL text, all in the deployment's namespace.
//! - [`codes`]: every code a store operation refuses or fails with, as
//!   data.
//! - [`deploy`]: `plan`, `apply` (the only user of the migration URL),
//!   `deployment_status`, and the runtime-role safety check.
//! - [`runs`]: [`Store`], the PostgreSQL implementation of the service's
//!   [`coordinator_ports::RunStore`] port (admission, leases, commits,
//!   listing), plus what only PostgreSQL has (definitions of every applied
//!   revision, holds, the activation generation).
//!
//! Invariants (kept as absences):
//! - only [`deploy::apply`] resolves `database.migrationUrlRef`;
//! - no column holds a run's input, state, output or prepared command in
//!   plaintext: they are sealed with the state keyring, bound to
//!   (database id, run id, purpose, step);
//! - no caller identity is stored: a run's owner is a keyed reference
//!   ([`coordinator_runtime::keys::AdmissionKey::owner_reference`]).
//!
//! Database connections verify the server certificate: `sslmode=require`
//! (and `verify-ca`) is taken as `verify-full`; plaintext is allowed only to
//! a loopback host or a Unix socket. Each pool holds at most
//! [`MAX_POOL_CONNECTIONS`] connections. A URL may list several servers
//! (libpq's form, [`servers`]); a connection that writes is used only on a
//! writable server, and every statement reaches PostgreSQL through
//! [`session::Database`], which also serves a pooler in transaction mode.

pub mod codes;
pub mod deploy;
pub mod runs;
pub mod schema;
pub mod servers;
pub mod session;

use std::fmt;

use session::Transaction;

use sqlx::Row;

use coordinator_runtime::config::{valid_namespace, PoolingMode, RuntimeConfig, SecretRef};
use coordinator_runtime::keys::{KeyError, StateKeyring};
use coordinator_runtime::secrets::{SecretError, SecretResolver};

pub use deploy::{
    apply, deployment_status, live_binding_refusal, plan, verify_runtime_role, ApplyReport,
    DeploymentStatus, Plan, PlanAction, PlanEntry, WorkflowStatus,
};
pub use runs::{RunEndListener, Store, PING_TIMEOUT};

/// Most connections one pool (one process) opens.
pub const MAX_POOL_CONNECTIONS: u32 = 32;

/// The raw code of a code as `coordinatorctl` prints it: the inverse of
/// [`DatabaseError::cli_code`] (`coordinator.command.state-key-custody` →
/// `state-key-custody`, `coordinator.database.url` → `database.url`). A code
/// without the prefix is returned as it is.
pub fn raw_code(code: &'static str) -> &'static str {
    code.strip_prefix("coordinator.command.")
        .or_else(|| code.strip_prefix("coordinator."))
        .unwrap_or(code)
}

/// Whether a [`DatabaseError`] is a refusal or an unavailable resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The database, a file or a secret could not be reached or read (the
    /// CLI exits 3; the service answers 503 and keeps running).
    Unavailable,
    /// The request was refused (the CLI exits 1).
    Refused,
}

/// A refusal or failure of the PostgreSQL database as this crate meets it
/// directly (connecting, `plan`/`apply`/`deployment-status`,
/// [`Store::open`], sealing, the store's own reads): a stable code, a
/// message and a repair line, what the operator sees. Callers of the
/// service's store port never meet it: the port's methods answer
/// [`coordinator_ports::StoreError`], into which `runs` maps it (unavailable
/// stays unavailable, a refusal keeps its code). Never carries a secret
/// value, a run input or a database URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatabaseError {
    /// Refused or unavailable.
    pub kind: ErrorKind,
    /// The raw code (the [`codes::StoreCode::raw`] of one of [`codes::ALL`],
    /// or a `secret.*` code).
    pub code: &'static str,
    /// What happened.
    pub message: String,
    /// What to do next.
    pub next: String,
}

impl DatabaseError {
    /// A refusal. `code` is the code as `coordinatorctl` prints it
    /// (`coordinator.deployment.workflow-unlisted`), so that every code is
    /// written out once, whole, where it is raised; the error keeps the raw
    /// code (see [`raw_code`]). A raw code is taken as it is.
    pub fn refused(
        code: &'static str,
        message: impl Into<String>,
        next: impl Into<String>,
    ) -> Self {
        DatabaseError {
            kind: ErrorKind::Refused,
            code: raw_code(code),
            message: message.into(),
            next: next.into(),
        }
    }

    /// An unavailable resource; `code` as for [`DatabaseError::refused`].
    pub fn unavailable(
        code: &'static str,
        message: impl Into<String>,
        next: impl Into<String>,
    ) -> Self {
        DatabaseError {
            kind: ErrorKind::Unavailable,
            code: raw_code(code),
            message: message.into(),
            next: next.into(),
        }
    }

    /// The code as `coordinatorctl` prints it (seed 000 "Codes you see"):
    /// `coordinator.` + the code, with codes that name no area (such as
    /// `state-key-custody`) under `command.`:
    /// `coordinator.command.state-key-custody`.
    pub fn cli_code(&self) -> String {
        printed_code(self.code)
    }

    /// What the deployment commands (`plan`, `apply`,
    /// `deployment-status`) print for this error, as
    /// `(code, reason)` (seed 000 "Codes you see"). A refusal is named by
    /// one of the seed's five names: `coordinator.deployment.workflow-unlisted`,
    /// `coordinator.deployment.workflow-live-runs`,
    /// `coordinator.command.state-key-custody`,
    /// `coordinator.command.live-binding-conflict`, or else
    /// `coordinator.deployment.refused`, whose reason is the finer code
    /// (`coordinator.deployment.runtime-role-superuser`,
    /// `coordinator.database.login`, `coordinator.secret.permissions`, ...;
    /// each has its page in docs/errors). An unavailable resource (exit 3)
    /// keeps its own code and has no reason.
    pub fn deployment_command_code(&self) -> (String, Option<String>) {
        const SEED_NAMED: [&str; 4] = [
            codes::DEPLOYMENT_WORKFLOW_UNLISTED,
            codes::DEPLOYMENT_WORKFLOW_LIVE_RUNS,
            codes::COMMAND_STATE_KEY_CUSTODY,
            codes::COMMAND_LIVE_BINDING_CONFLICT,
        ];
        if self.kind == ErrorKind::Unavailable
            || SEED_NAMED.iter().any(|named| raw_code(named) == self.code)
        {
            (self.cli_code(), None)
        } else {
            (codes::DEPLOYMENT_REFUSED.to_owned(), Some(self.cli_code()))
        }
    }
}

/// A raw code as `coordinatorctl` prints it: `coordinator.` + the code,
/// with codes that name no area under `command.`.
fn printed_code(code: &str) -> String {
    if code.contains('.') {
        format!("coordinator.{}", code)
    } else {
        format!("coordinator.command.{}", code)
    }
}

impl fmt::Display for DatabaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for DatabaseError {}

impl From<SecretError> for DatabaseError {
    fn from(e: SecretError) -> Self {
        let next = match &e {
            SecretError::Permissions { .. } => "make the file owner-only: chmod 0600 FILE",
            SecretError::Unavailable { .. } => {
                "create the secret file under secretProviders.file.root, or set the variable"
            }
            _ => "fix the secret or its reference in the runtime file",
        };
        DatabaseError {
            kind: if e.is_unavailable() {
                ErrorKind::Unavailable
            } else {
                ErrorKind::Refused
            },
            code: e.code(),
            message: e.to_string(),
            next: next.into(),
        }
    }
}

impl From<KeyError> for DatabaseError {
    fn from(e: KeyError) -> Self {
        match e {
            KeyError::StateKeyCustody { .. } => DatabaseError::refused(
                codes::COMMAND_STATE_KEY_CUSTODY,
                e.to_string(),
                "configure every state key version the stored rows use (deployment.stateKeys)",
            ),
            _ => DatabaseError::refused(
                codes::COMMAND_STATE_TAMPERED,
                e.to_string(),
                "the stored value does not open under its binding; investigate the database",
            ),
        }
    }
}

/// A database error as a [`DatabaseError`]: lost connections, timeouts and
/// server errors are `store-unavailable`; the SQLSTATE and the server's
/// message are kept (they hold no parameter values).
pub(crate) fn db_error(e: sqlx::Error) -> DatabaseError {
    // A statement prepared by name already on the server's session: the
    // connection is shared by a pooler in transaction mode while the
    // runtime file says `session` (a configuration fault, not an outage).
    if let sqlx::Error::Database(d) = &e {
        if d.code().as_deref() == Some("42P05") && d.message().contains("sqlx_s_") {
            return DatabaseError::refused(
                codes::DATABASE_URL,
                format!(
                    "the database refused a statement (42P05): {}; the connection is shared by a pooler in transaction mode",
                    d.message()
                ),
                "set `database.poolingMode: transaction` in the runtime file",
            );
        }
    }
    let message = match &e {
        sqlx::Error::Database(d) => format!(
            "the database refused a statement ({}): {}",
            d.code().as_deref().unwrap_or("?"),
            d.message()
        ),
        other => format!("the database is unavailable: {other}"),
    };
    DatabaseError::unavailable(
        codes::COMMAND_STORE_UNAVAILABLE,
        message,
        "check that PostgreSQL is reachable and the role may connect, then try again",
    )
}

pub(crate) fn namespace_of(config: &RuntimeConfig) -> Result<&str, DatabaseError> {
    if valid_namespace(&config.namespace) {
        Ok(&config.namespace)
    } else {
        Err(DatabaseError::refused(
            codes::DEPLOYMENT_NOT_APPLIED,
            "the runtime file's namespace is not `coordinator_` followed by lowercase letters, digits or `_`",
            "run `coordinatorctl --runtime-config FILE check`",
        ))
    }
}

/// Opens a pool of at most `max_connections` (≤ [`MAX_POOL_CONNECTIONS`])
/// to the first usable server of the URL behind `reference`, resolved
/// through `resolver` ([`servers::ServerList`]: one server or libpq's host
/// list, the TLS rule of SPEC §8), and checks the server version
/// (PostgreSQL 17 or newer). In `session` pooling mode each connection
/// starts with `settings` (name, value) as its session's settings (sent in
/// the startup packet, so no statement is spent on them); in `transaction`
/// mode nothing is sent (a pooler in that mode refuses `options`), and the
/// settings are left out.
///
/// # Errors
/// Secret errors, `database.*` for the URL, the login, TLS (a trusted root
/// that holds no certificate, a handshake refused) or a server that is
/// read-only, `store-unavailable` when no server can be reached,
/// `deployment.database-version` below 17.
pub(crate) async fn connect(
    config: &RuntimeConfig,
    resolver: &SecretResolver,
    reference: &SecretRef,
    max_connections: u32,
    settings: &[(&str, &str)],
    access: servers::Access,
) -> Result<session::Database, DatabaseError> {
    let url = resolver.resolve_text(reference)?;
    let root = match &config.database.trusted_root_certificate_ref {
        Some(r) => {
            let pem = resolver.resolve(r)?.bytes().to_vec();
            servers::check_trusted_root(&pem, r)?;
            Some(pem)
        }
        None => None,
    };
    let pooling = config.database.pooling_mode;
    let mut list = servers::ServerList::parse(&url, reference, root.as_deref(), pooling)?;
    if pooling == PoolingMode::Session && !settings.is_empty() {
        list = list.map(|o| o.options(settings.iter().copied()));
    }
    let database = session::Database::open(
        list,
        pooling,
        access,
        max_connections.clamp(1, MAX_POOL_CONNECTIONS),
    )
    .await?;
    check_server_version(&database).await?;
    Ok(database)
}

/// Refuses a server below PostgreSQL 17 (`SHOW server_version_num`).
///
/// # Errors
/// `deployment.database-version`, or `store-unavailable`.
pub async fn check_server_version(database: &session::Database) -> Result<i32, DatabaseError> {
    let row = sqlx::query("SHOW server_version_num")
        .fetch_one(database)
        .await
        .map_err(db_error)?;
    let text: String = row.try_get(0).map_err(db_error)?;
    let num: i32 = text.trim().parse().unwrap_or(0);
    if num < schema::MIN_SERVER_VERSION_NUM {
        return Err(DatabaseError::refused(
            codes::DEPLOYMENT_DATABASE_VERSION,
            format!(
                "the database server is version {}.{}; PostgreSQL 17 or newer is required",
                num / 10_000,
                num % 10_000
            ),
            "upgrade the server to PostgreSQL 17 or newer, or point the URL at one",
        ));
    }
    Ok(num)
}

/// Checks the admission key against the fingerprint `apply` recorded in the
/// deployment row. Returns whether one is recorded.
///
/// # Errors
/// `state-key-custody` when another key is configured (start identities
/// would no longer match, so a repeated start would create a second run),
/// `store-unavailable`.
pub(crate) async fn check_admission_custody(
    conn: &mut Transaction,
    ns: &str,
    admission: &coordinator_runtime::keys::AdmissionKey,
) -> Result<bool, DatabaseError> {
    let recorded: Option<String> = sqlx::query(&format!(
        "SELECT admission_key_fingerprint FROM {ns}.deployment"
    ))
    .fetch_one(conn.on())
    .await
    .map_err(db_error)?
    .try_get(0)
    .map_err(db_error)?;
    match recorded {
        None => Ok(false),
        Some(f) if f == admission.fingerprint() => Ok(true),
        Some(_) => Err(DatabaseError::refused(
            codes::COMMAND_STATE_KEY_CUSTODY,
            "the admission key (deployment.admissionKeyRef) is not the key this database recorded; start identities are keyed by it, so a repeated start would create a second run",
            "configure the original admission key file",
        )),
    }
}

/// Checks each version recorded in `state_key_custody` against `keyring`:
/// a configured version whose fingerprint differs is a wrong key file; a
/// recorded version that is not configured while rows still use it makes
/// those rows unreadable. Both are `state-key-custody`.
pub(crate) async fn check_custody(
    conn: &mut Transaction,
    ns: &str,
    keyring: &StateKeyring,
) -> Result<Vec<(u32, String)>, DatabaseError> {
    let rows = sqlx::query(&format!(
        "SELECT version, fingerprint FROM {ns}.state_key_custody ORDER BY version"
    ))
    .fetch_all(conn.on())
    .await
    .map_err(db_error)?;
    let mut recorded = Vec::new();
    for row in rows {
        let version: i32 = row.try_get(0).map_err(db_error)?;
        let fingerprint: String = row.try_get(1).map_err(db_error)?;
        let version = version as u32;
        match keyring.fingerprint(version) {
            Some(f) if f == fingerprint => {}
            Some(_) => {
                return Err(DatabaseError::refused(
                    codes::COMMAND_STATE_KEY_CUSTODY,
                    format!("state key version {version} is not the key this database recorded for that version"),
                    format!("configure the original key file of version {version} under deployment.stateKeys"),
                ))
            }
            None => {
                let in_use: bool = sqlx::query(&format!(
                    // An erased run keeps only its owner, re-sealed under
                    // the version active at erasure (both columns name it).
                    "SELECT EXISTS (SELECT 1 FROM {ns}.runs WHERE key_version = $1 OR input_key_version = $1)
                         OR EXISTS (SELECT 1 FROM {ns}.jobs WHERE key_version = $1)
                         OR EXISTS (SELECT 1 FROM {ns}.definitions WHERE key_version = $1)"
                ))
                .bind(version as i32)
                .fetch_one(conn.on())
                .await
                .map_err(db_error)?
                .try_get(0)
                .map_err(db_error)?;
                if in_use {
                    return Err(DatabaseError::refused(
                        codes::COMMAND_STATE_KEY_CUSTODY,
                        format!("state key version {version} is not configured, and stored runs were sealed under it"),
                        format!("add version {version} back under deployment.stateKeys; remove a version only after retention erased what it sealed"),
                    ));
                }
            }
        }
        recorded.push((version, fingerprint));
    }
    Ok(recorded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_codes() {
        // (The namespace rule is `coordinator_runtime::config::valid_namespace`,
        // tested there.)
        let custody = DatabaseError::refused("coordinator.command.state-key-custody", "m", "n");
        assert_eq!(custody.code, "state-key-custody");
        assert_eq!(custody.cli_code(), "coordinator.command.state-key-custody");
        assert_eq!(custody.to_string(), "state-key-custody: m");
        let unlisted = DatabaseError::refused("coordinator.deployment.workflow-unlisted", "m", "n");
        assert_eq!(unlisted.code, "deployment.workflow-unlisted");
        assert_eq!(
            unlisted.cli_code(),
            "coordinator.deployment.workflow-unlisted"
        );
        // Raw codes are still taken as they are, and every listed code
        // survives the round trip through the CLI's form.
        assert_eq!(
            DatabaseError::refused("state-key-custody", "m", "n"),
            custody
        );
        for code in codes::ALL {
            let e = DatabaseError::unavailable(code.code, "m", "n");
            assert_eq!(e.code, code.raw());
            assert_eq!(e.cli_code(), code.code);
        }
    }

    #[test]
    fn deployment_commands_print_the_seed_names() {
        let printed = |code: &'static str| {
            DatabaseError::refused(code, "m", "n")
                .deployment_command_code()
                .0
        };
        for named in [
            "coordinator.deployment.workflow-unlisted",
            "coordinator.deployment.workflow-live-runs",
            "coordinator.command.state-key-custody",
            "coordinator.command.live-binding-conflict",
        ] {
            assert_eq!(printed(named), named);
        }
        let finer =
            DatabaseError::refused("coordinator.deployment.runtime-role-superuser", "m", "n");
        assert_eq!(
            finer.deployment_command_code(),
            (
                "coordinator.deployment.refused".to_owned(),
                Some("coordinator.deployment.runtime-role-superuser".to_owned())
            )
        );
        let secret = DatabaseError::from(SecretError::Reference);
        assert_eq!(
            secret.deployment_command_code().1.as_deref(),
            Some("coordinator.secret.reference")
        );
        // An outage keeps its own code: it is not a refused check.
        let down = DatabaseError::unavailable("store-unavailable", "m", "n");
        assert_eq!(
            down.deployment_command_code(),
            ("coordinator.command.store-unavailable".to_owned(), None)
        );
    }
}
