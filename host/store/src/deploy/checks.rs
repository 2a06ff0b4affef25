//! The checks the deployment commands share, each in one place so that
//! `plan` previews `apply` and `deployment-status` verifies what the service
//! verifies: the runtime file's deployment section and pinned packages, the
//! deployment keys as `apply` reads them, the runtime URL's login (its role,
//! and that it reaches the database the migration URL reaches), the
//! namespace's schema version and databaseId, what an
//! applied namespace refuses (runtime role, key custody), the connection
//! bindings of runs that have not ended, and the active packages.

use std::path::Path;

use sqlx::Row;

use super::namespace::WorkflowStatus;
use super::namespace::{
    active_workflows, deployment_row, has_column, has_table, layout, live_bindings, not_applied,
    DeploymentRow, Layout,
};
use super::runtime_role::verify_runtime_role;
use crate::codes;
use crate::schema::SCHEMA_VERSION;
use crate::servers::Access;
use crate::session::{Database, Transaction};
use crate::{check_admission_custody, check_custody, connect, db_error, DatabaseError};
use coordinator_runtime::binding::{self, BindingConflict};
use coordinator_runtime::config::{Deployment, RuntimeConfig};
use coordinator_runtime::package::{load_package, LoadedPackage, PackageError};
use coordinator_runtime::secrets::{
    load_admission_key, load_audit_key, load_state_keyring, SecretResolver,
};

/// The runtime file's `deployment` section.
///
/// # Errors
/// `deployment.not-applied` when the file has none.
pub(super) fn deployment_of(config: &RuntimeConfig) -> Result<&Deployment, DatabaseError> {
    config.deployment.as_ref().ok_or_else(|| {
        DatabaseError::refused(
            codes::DEPLOYMENT_NOT_APPLIED,
            "the runtime file has no `deployment` section",
            "complete the deployment section, then run `check`",
        )
    })
}

/// Loads and verifies every pinned package against its `expectedDigest`.
///
/// # Errors
/// `deployment.package` (refused, or unavailable when a file cannot be read).
pub fn load_pinned_packages(deployment: &Deployment) -> Result<Vec<LoadedPackage>, DatabaseError> {
    let mut out = Vec::new();
    for pin in &deployment.packages {
        let loaded =
            load_package(Path::new(&pin.root), Some(&pin.expected_digest)).map_err(|e| {
                let message = format!("package {}: {e}", pin.root);
                let next =
                    "rebuild or restore the package the author handed over, or pin its digest";
                match e {
                    PackageError::Unavailable { .. } => {
                        DatabaseError::unavailable(codes::DEPLOYMENT_PACKAGE, message, next)
                    }
                    _ => DatabaseError::refused(codes::DEPLOYMENT_PACKAGE, message, next),
                }
            })?;
        out.push(loaded);
    }
    Ok(out)
}

/// The deployment's keys as `apply` reads them (state keyring, admission
/// key, audit key): `plan` reads them the same way, so a key file `apply`
/// would refuse (group-readable, missing, not 32 bytes) refuses `plan`.
pub(super) struct DeploymentKeysRead {
    pub(super) state: coordinator_runtime::keys::StateKeyring,
    pub(super) admission: coordinator_runtime::keys::AdmissionKey,
    pub(super) audit: coordinator_runtime::keys::AuditKey,
}

impl DeploymentKeysRead {
    /// Reads the three keys through `resolver`.
    ///
    /// # Errors
    /// The `secret.*` and key refusals of `coordinator_runtime::secrets`.
    pub(super) fn load(
        resolver: &SecretResolver,
        deployment: &Deployment,
    ) -> Result<Self, DatabaseError> {
        Ok(DeploymentKeysRead {
            state: load_state_keyring(resolver, deployment)?,
            admission: load_admission_key(resolver, deployment)?,
            audit: load_audit_key(resolver, deployment)?,
        })
    }
}

/// What a login reached: the PostgreSQL cluster (its system identifier,
/// which a primary shares with its physical standbys and which reads the
/// same through a pooler) and the database in it. `apply` compares the
/// migration login's with the runtime login's, so that it never migrates
/// one database while the service would serve another.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct DatabaseIdentity {
    system_identifier: i64,
    database: String,
}

impl DatabaseIdentity {
    /// The identity of the database `executor` reaches; `None` when the
    /// server does not say (`pg_control_system()` not permitted to the
    /// role): nothing is compared then.
    pub(super) async fn read<'e, E>(executor: E) -> Option<DatabaseIdentity>
    where
        E: sqlx::Executor<'e, Database = sqlx::Postgres>,
    {
        let row = sqlx::query(
            "SELECT (SELECT system_identifier FROM pg_control_system()), current_database()::text",
        )
        .fetch_one(executor)
        .await
        .ok()?;
        Some(DatabaseIdentity {
            system_identifier: row.try_get(0).ok()?,
            database: row.try_get(1).ok()?,
        })
    }
}

/// Refuses (`deployment.database-urls-differ`) a runtime URL that reaches
/// another database than the migration URL: `apply` would lay out and
/// activate the deployment where the service never looks, and
/// `deployment-status` (the runtime URL's) would disagree with it.
/// Passes when either side could not be read.
pub(super) fn check_same_database(
    migration: Option<&DatabaseIdentity>,
    runtime: Option<&DatabaseIdentity>,
) -> Result<(), DatabaseError> {
    match (migration, runtime) {
        (Some(m), Some(r)) if m != r => Err(DatabaseError::refused(
            codes::DEPLOYMENT_DATABASE_URLS_DIFFER,
            format!(
                "the migration URL reaches database `{}` of PostgreSQL cluster {}, the runtime URL database `{}` of cluster {}; apply would change a database the service does not serve",
                m.database, m.system_identifier, r.database, r.system_identifier
            ),
            "point `database.runtimeUrlRef` and `database.migrationUrlRef` at the same database (a pooler or a standby of it is fine), then run `apply` again",
        )),
        _ => Ok(()),
    }
}

/// Refuses (`deployment.runtime-role-mismatch`) a runtime URL whose login
/// is not `deployment.runtimeRole`: `apply` grants that role, and the
/// service (and `deployment-status`) refuse any other.
///
/// # Errors
/// `deployment.runtime-role-mismatch`, `store-unavailable`.
pub(super) async fn check_runtime_login(
    conn: &mut Transaction,
    deployment: &Deployment,
) -> Result<(), DatabaseError> {
    let user: String = sqlx::query("SELECT current_user::text")
        .fetch_one(conn.on())
        .await
        .map_err(db_error)?
        .try_get(0)
        .map_err(db_error)?;
    if user == deployment.runtime_role {
        return Ok(());
    }
    Err(DatabaseError::refused(
        codes::DEPLOYMENT_RUNTIME_ROLE_MISMATCH,
        format!(
            "the runtime database URL logs in as `{user}`, but deployment.runtimeRole is `{}`",
            deployment.runtime_role
        ),
        "make the runtime URL's role and deployment.runtimeRole the same",
    ))
}

/// Logs in once with the runtime URL, as `apply` does before it changes
/// anything (a service that then could not start would be left behind):
/// the login must succeed and be `deployment.runtimeRole`
/// ([`check_runtime_login`]). Returns the database it reached
/// ([`DatabaseIdentity`]).
///
/// # Errors
/// [`connect`]'s (`database.login` for a refused login),
/// `deployment.runtime-role-mismatch`.
pub(super) async fn log_in_as_runtime_role(
    config: &RuntimeConfig,
    resolver: &SecretResolver,
    deployment: &Deployment,
) -> Result<Option<DatabaseIdentity>, DatabaseError> {
    let (pool, mut conn) = read_with_runtime_role(config, resolver).await?;
    let checked = check_runtime_login(&mut conn, deployment).await;
    drop(conn);
    let identity = match checked {
        Ok(()) => DatabaseIdentity::read(&pool).await,
        Err(e) => {
            pool.close().await;
            return Err(e);
        }
    };
    pool.close().await;
    Ok(identity)
}

/// One connection of the runtime role for reading (`plan`,
/// `deployment-status`: a standby will do when the URL says
/// `target_session_attrs=any`), and a transaction on it.
///
/// # Errors
/// [`connect`]'s.
pub(super) async fn read_with_runtime_role(
    config: &RuntimeConfig,
    resolver: &SecretResolver,
) -> Result<(Database, Transaction), DatabaseError> {
    let pool = connect(
        config,
        resolver,
        &config.database.runtime_url_ref,
        1,
        &[],
        Access::Read,
    )
    .await?;
    let conn = pool.begin().await?;
    Ok((pool, conn))
}

/// Refuses (`deployment.schema-version`) a namespace laid out by another
/// state schema version, or holding objects but no version record; an
/// absent or empty namespace passes.
pub(super) fn check_layout(layout: Layout, ns: &str) -> Result<(), DatabaseError> {
    match layout {
        Layout::Versioned(SCHEMA_VERSION) | Layout::Absent | Layout::Empty => Ok(()),
        Layout::Versioned(v) => Err(DatabaseError::refused(
            codes::DEPLOYMENT_SCHEMA_VERSION,
            format!(
                "namespace `{ns}` records state schema version {v}; this binary requires version {SCHEMA_VERSION}"
            ),
            "settle that work with its matching binary, then use a fresh namespace and databaseId",
        )),
        Layout::Unknown => Err(DatabaseError::refused(
            codes::DEPLOYMENT_SCHEMA_VERSION,
            format!("namespace `{ns}` holds objects but no state schema version {SCHEMA_VERSION} record"),
            "use a fresh namespace, or settle the earlier layout with its matching binary",
        )),
    }
}

/// Refuses (`deployment.database-id`) a database that records another
/// databaseId than the runtime file's.
pub(super) fn check_database_id(recorded: &str, configured: &str) -> Result<(), DatabaseError> {
    if recorded == configured {
        Ok(())
    } else {
        Err(DatabaseError::refused(
            codes::DEPLOYMENT_DATABASE_ID,
            format!(
                "the database records databaseId `{recorded}`, the runtime file says `{configured}`"
            ),
            "point the runtime file at its own database, or restore the original databaseId",
        ))
    }
}

/// What `plan` and `apply` both refuse on a namespace already applied,
/// before anything is written (one home, so `plan` previews `apply`): an
/// unsafe runtime role as found ([`verify_runtime_role`]), a state key or
/// admission key that is not the one recorded ([`check_custody`],
/// [`check_admission_custody`]). Reads only.
///
/// # Errors
/// `deployment.runtime-role-*`, `state-key-custody`, `store-unavailable`.
pub(super) async fn check_applied_namespace(
    conn: &mut Transaction,
    ns: &str,
    deployment: &Deployment,
    keys: &DeploymentKeysRead,
) -> Result<(), DatabaseError> {
    verify_runtime_role(conn, ns, &deployment.runtime_role).await?;
    check_custody(conn, ns, &keys.state).await?;
    check_admission_custody(conn, ns, &keys.admission).await?;
    Ok(())
}

/// `coordinator.command.live-binding-conflict`: the runtime file changed the
/// binding of connections that runs which have not ended use (seed 000
/// "Apply and start"). `conflicts` must not be empty.
pub fn live_binding_refusal(conflicts: &[BindingConflict]) -> DatabaseError {
    DatabaseError::refused(
        codes::COMMAND_LIVE_BINDING_CONFLICT,
        format!(
            "the runtime file changes the binding of connections runs that have not ended use: {}",
            binding::describe(conflicts)
        ),
        "restore the connection settings those runs were admitted with (endpoint, identity, scopes, \
         task authority), or let the runs end; investigate with `coordinator --recovery-only`",
    )
}

/// Refuses (`live-binding-conflict`) when the runtime file's connections
/// change a binding that runs which have not ended recorded.
pub(super) async fn check_live_bindings(
    conn: &mut Transaction,
    ns: &str,
    config: &RuntimeConfig,
) -> Result<(), DatabaseError> {
    let live = live_bindings(conn, ns).await?;
    let found = binding::conflicts(&live, &config.connections);
    if found.is_empty() {
        Ok(())
    } else {
        Err(live_binding_refusal(&found))
    }
}

/// Verifies, with the runtime credential, everything the service verifies
/// before serving except the active packages: server version, layout and
/// schema version, database id, the URL's role is `runtimeRole`, role
/// safety, key custody (and that the active key version was applied).
pub(crate) async fn verify_runtime(
    conn: &mut Transaction,
    ns: &str,
    deployment: &Deployment,
    keyring: &coordinator_runtime::keys::StateKeyring,
    admission: &coordinator_runtime::keys::AdmissionKey,
) -> Result<(DeploymentRow, Vec<u32>), DatabaseError> {
    let found = layout(conn, ns).await?;
    check_layout(found, ns)?;
    if !matches!(found, Layout::Versioned(_)) {
        return Err(not_applied(ns));
    }
    for table in ["run_counts", "revision_counts", "connection_flow"] {
        if !has_table(conn, ns, table).await? {
            return Err(DatabaseError::refused(
                codes::DEPLOYMENT_SCHEMA_VERSION,
                format!("namespace `{ns}` was laid out by an earlier build of state schema version {SCHEMA_VERSION} (it has no {table} table)"),
                "run `coordinatorctl --runtime-config FILE apply`, which brings it to this build's layout",
            ));
        }
    }
    for (table, column, what) in [
        (
            "runs",
            "trace_parent",
            "its runs have no trace_parent column",
        ),
        (
            "definitions",
            "key_version",
            "its definitions are not sealed",
        ),
    ] {
        if !has_column(conn, ns, table, column).await? {
            return Err(DatabaseError::refused(
                codes::DEPLOYMENT_SCHEMA_VERSION,
                format!("namespace `{ns}` was laid out by an earlier build of state schema version {SCHEMA_VERSION} ({what})"),
                "run `coordinatorctl --runtime-config FILE apply`, which brings it to this build's layout",
            ));
        }
    }
    let d = deployment_row(conn, ns).await?;
    check_database_id(&d.database_id, &deployment.database_id)?;
    check_runtime_login(conn, deployment).await?;
    verify_runtime_role(conn, ns, &deployment.runtime_role).await?;
    let recorded = check_custody(conn, ns, keyring).await?;
    if !check_admission_custody(conn, ns, admission).await? {
        return Err(DatabaseError::refused(
            codes::COMMAND_STATE_KEY_CUSTODY,
            "the admission key has no custody record",
            "run `apply` (it records the admission key's fingerprint)",
        ));
    }
    let active = keyring.active_version();
    if !recorded.iter().any(|(v, _)| *v == active) {
        return Err(DatabaseError::refused(
            codes::COMMAND_STATE_KEY_CUSTODY,
            format!("the active state key version {active} has no custody record"),
            "run `apply` after adding a state key version",
        ));
    }
    Ok((d, recorded.into_iter().map(|(v, _)| v).collect()))
}

/// Refuses when the runtime file's packages are not what apply recorded as
/// active (a pinned digest not applied, or an active workflow not listed).
pub(crate) async fn check_activation(
    conn: &mut Transaction,
    ns: &str,
    packages: &[LoadedPackage],
) -> Result<Vec<WorkflowStatus>, DatabaseError> {
    let active = active_workflows(conn, ns).await?;
    for p in packages {
        let workflow = &p.definition.program.workflow;
        match active.get(workflow) {
            Some(a) if a.package_digest == p.digest => {}
            Some(a) => {
                return Err(DatabaseError::refused(
                    codes::DEPLOYMENT_PACKAGES_NOT_APPLIED,
                    format!(
                        "workflow `{workflow}` pins {} but {} is active",
                        p.digest, a.package_digest
                    ),
                    "run `plan` and `apply` with this runtime file",
                ))
            }
            None => {
                return Err(DatabaseError::refused(
                    codes::DEPLOYMENT_PACKAGES_NOT_APPLIED,
                    format!("workflow `{workflow}` is pinned but not active"),
                    "run `plan` and `apply` with this runtime file",
                ))
            }
        }
    }
    if let Some(w) = active.keys().find(|w| {
        !packages
            .iter()
            .any(|p| &p.definition.program.workflow == *w)
    }) {
        return Err(DatabaseError::refused(
            codes::DEPLOYMENT_WORKFLOW_UNLISTED,
            format!("workflow `{w}` is active but the runtime file no longer lists its package"),
            format!("list its package again, or `apply --remove-workflow {w}`"),
        ));
    }
    Ok(active.into_values().collect())
}
