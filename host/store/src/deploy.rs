//! `plan`, `apply` and `deployment_status` (seed 000 "Apply and start",
//! "Change the workflows"), and the runtime-role safety check used by
//! `apply` and at service startup.
//!
//! - [`plan`] reads with the runtime credential and writes nothing; it
//!   previews `apply`: it reads the keys as `apply` does, logs in with the
//!   migration URL too, and on an applied namespace refuses what `apply`
//!   refuses before writing ([`check_applied_namespace`]: runtime role
//!   safety, key custody). `apply` logs in with the runtime URL before it
//!   changes anything.
//! - [`apply`] is the only user of `database.migrationUrlRef`: one
//!   transaction migrates, checks the database id, records the key custody
//!   fingerprints, records every pinned package's definition (kept forever)
//!   and the active package per workflow, grants the runtime role exactly
//!   [`super::schema::RUNTIME_GRANTS`], then checks the runtime role; any
//!   refusal rolls everything back.
//! - [`deployment_status`] reads with the runtime credential and verifies
//!   what the service verifies before it serves.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use sqlx::Row;

use super::schema::{self, SCHEMA_VERSION};
use super::servers::Access;
use super::session::Transaction;
use super::{check_admission_custody, check_custody, connect, db_error, namespace_of, StoreError};
use coordinator_runtime::audit::{AuditJournal, AuditRecord};
use coordinator_runtime::binding::{self, BindingConflict, LiveBinding};
use coordinator_runtime::config::{Deployment, RuntimeConfig};
use coordinator_runtime::package::{load_package, LoadedPackage, PackageError};
use coordinator_runtime::secrets::{
    load_admission_key, load_audit_key, load_state_keyring, SecretResolver,
};

/// What `apply` would do to one workflow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlanAction {
    /// Not active yet: its package becomes active.
    Install,
    /// Active with another package digest: the pinned one replaces it.
    Replace,
    /// Active with the pinned digest.
    Unchanged,
    /// Active, no longer listed, and named by `--remove-workflow`.
    Remove,
}

impl PlanAction {
    /// `install`, `replace`, `unchanged` or `remove`.
    pub fn as_str(self) -> &'static str {
        match self {
            PlanAction::Install => "install",
            PlanAction::Replace => "replace",
            PlanAction::Unchanged => "unchanged",
            PlanAction::Remove => "remove",
        }
    }
}

/// One workflow's line of a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanEntry {
    /// The workflow id.
    pub workflow: String,
    /// What apply would do.
    pub action: PlanAction,
    /// The pinned package digest (absent for `remove`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub package_digest: Option<String>,
    /// The pinned revision (absent for `remove`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// The currently active package digest, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_package_digest: Option<String>,
}

/// A plan: one entry per workflow, sorted by workflow id, and why apply
/// would refuse, if it would.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// The entries.
    pub entries: Vec<PlanEntry>,
    /// Apply's refusal (`deployment.workflow-unlisted`,
    /// `deployment.workflow-live-runs`, `deployment.remove-workflow`,
    /// `live-binding-conflict`).
    #[serde(skip)]
    pub refusal: Option<StoreError>,
}

/// What `apply` did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplyReport {
    /// The plan it carried out.
    pub entries: Vec<PlanEntry>,
    /// The state schema version now recorded ([`SCHEMA_VERSION`]).
    pub schema_version: i32,
    /// Whether this apply created the schema.
    pub migrated: bool,
}

/// One active workflow as the database records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowStatus {
    /// The workflow id.
    pub workflow: String,
    /// Its active package digest.
    pub package_digest: String,
    /// Its active revision.
    pub revision: String,
}

/// `deployment-status`: what the service would verify before serving.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentStatus {
    /// The recorded state schema version.
    pub schema_version: i32,
    /// The recorded database id (equal to the file's).
    pub database_id: String,
    /// Active workflows, sorted by id.
    pub workflows: Vec<WorkflowStatus>,
    /// The restore hold is in place.
    pub restore_hold: bool,
    /// The admission hold is in place.
    pub admission_hold: bool,
    /// State key versions with a custody record, ascending.
    pub state_key_versions: Vec<u32>,
    /// The active state key version.
    pub active_state_key: u32,
}

fn deployment_of(config: &RuntimeConfig) -> Result<&Deployment, StoreError> {
    config.deployment.as_ref().ok_or_else(|| {
        StoreError::refused(
            "coordinator.deployment.not-applied",
            "the runtime file has no `deployment` section",
            "complete the deployment section, then run `check`",
        )
    })
}

/// Loads and verifies every pinned package against its `expectedDigest`.
///
/// # Errors
/// `deployment.package` (refused, or unavailable when a file cannot be read).
pub fn load_pinned_packages(deployment: &Deployment) -> Result<Vec<LoadedPackage>, StoreError> {
    let mut out = Vec::new();
    for pin in &deployment.packages {
        let loaded =
            load_package(Path::new(&pin.root), Some(&pin.expected_digest)).map_err(|e| {
                let message = format!("package {}: {e}", pin.root);
                let next =
                    "rebuild or restore the package the author handed over, or pin its digest";
                match e {
                    PackageError::Unavailable { .. } => {
                        StoreError::unavailable("coordinator.deployment.package", message, next)
                    }
                    _ => StoreError::refused("coordinator.deployment.package", message, next),
                }
            })?;
        out.push(loaded);
    }
    Ok(out)
}

/// The schema layout found in a namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// No schema of that name.
    Absent,
    /// The schema exists and holds no relation.
    Empty,
    /// A deployment table recording this version.
    Versioned(i32),
    /// Relations, but no readable deployment record.
    Unknown,
}

async fn layout(conn: &mut Transaction, ns: &str) -> Result<Layout, StoreError> {
    let row = sqlx::query(
        "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1),
                (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                  WHERE n.nspname = $1),
                EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                  WHERE n.nspname = $1 AND c.relname = 'deployment' AND c.relkind = 'r')",
    )
    .bind(ns)
    .fetch_one(conn.on())
    .await
    .map_err(db_error)?;
    let exists: bool = row.try_get(0).map_err(db_error)?;
    let objects: i64 = row.try_get(1).map_err(db_error)?;
    let has_deployment: bool = row.try_get(2).map_err(db_error)?;
    if !exists {
        return Ok(Layout::Absent);
    }
    if objects == 0 {
        return Ok(Layout::Empty);
    }
    if !has_deployment {
        return Ok(Layout::Unknown);
    }
    let version = sqlx::query(&format!("SELECT schema_version FROM {ns}.deployment"))
        .fetch_optional(conn.on())
        .await;
    match version {
        Ok(Some(row)) => Ok(Layout::Versioned(row.try_get(0).map_err(db_error)?)),
        Ok(None) => Ok(Layout::Unknown),
        Err(sqlx::Error::Database(d)) if d.code().as_deref() == Some("42501") => {
            Err(not_applied(ns))
        }
        Err(sqlx::Error::Database(_)) => Ok(Layout::Unknown),
        Err(e) => Err(db_error(e)),
    }
}

fn not_applied(ns: &str) -> StoreError {
    StoreError::refused(
        "coordinator.deployment.not-applied",
        format!("namespace `{ns}` holds no deployment this role may read"),
        "run `coordinatorctl --runtime-config FILE apply` with this runtimeRole",
    )
}

fn check_layout(layout: Layout, ns: &str) -> Result<(), StoreError> {
    match layout {
        Layout::Versioned(SCHEMA_VERSION) | Layout::Absent | Layout::Empty => Ok(()),
        Layout::Versioned(v) => Err(StoreError::refused(
            "coordinator.deployment.schema-version",
            format!(
                "namespace `{ns}` records state schema version {v}; this binary requires version {SCHEMA_VERSION}"
            ),
            "settle that work with its matching binary, then use a fresh namespace and databaseId",
        )),
        Layout::Unknown => Err(StoreError::refused(
            "coordinator.deployment.schema-version",
            format!("namespace `{ns}` holds objects but no state schema version {SCHEMA_VERSION} record"),
            "use a fresh namespace, or settle the earlier layout with its matching binary",
        )),
    }
}

/// The deployment record.
pub(crate) struct DeploymentRow {
    pub(crate) database_id: String,
    pub(crate) restore_hold: bool,
    pub(crate) admission_hold: bool,
}

async fn deployment_row(conn: &mut Transaction, ns: &str) -> Result<DeploymentRow, StoreError> {
    let row = sqlx::query(&format!(
        "SELECT database_id, restore_hold, admission_hold FROM {ns}.deployment"
    ))
    .fetch_one(conn.on())
    .await
    .map_err(db_error)?;
    Ok(DeploymentRow {
        database_id: row.try_get(0).map_err(db_error)?,
        restore_hold: row.try_get(1).map_err(db_error)?,
        admission_hold: row.try_get(2).map_err(db_error)?,
    })
}

fn check_database_id(recorded: &str, configured: &str) -> Result<(), StoreError> {
    if recorded == configured {
        Ok(())
    } else {
        Err(StoreError::refused(
            "coordinator.deployment.database-id",
            format!(
                "the database records databaseId `{recorded}`, the runtime file says `{configured}`"
            ),
            "point the runtime file at its own database, or restore the original databaseId",
        ))
    }
}

async fn active_workflows(
    conn: &mut Transaction,
    ns: &str,
) -> Result<BTreeMap<String, WorkflowStatus>, StoreError> {
    let rows = sqlx::query(&format!(
        "SELECT workflow, package_digest, revision FROM {ns}.active_workflows ORDER BY workflow"
    ))
    .fetch_all(conn.on())
    .await
    .map_err(db_error)?;
    let mut out = BTreeMap::new();
    for row in rows {
        let w = WorkflowStatus {
            workflow: row.try_get(0).map_err(db_error)?,
            package_digest: row.try_get(1).map_err(db_error)?,
            revision: row.try_get(2).map_err(db_error)?,
        };
        out.insert(w.workflow.clone(), w);
    }
    Ok(out)
}

async fn live_runs(conn: &mut Transaction, ns: &str, workflow: &str) -> Result<i64, StoreError> {
    sqlx::query(&format!(
        "SELECT count(*) FROM {ns}.runs WHERE workflow = $1 AND NOT ended"
    ))
    .bind(workflow)
    .fetch_one(conn.on())
    .await
    .map_err(db_error)?
    .try_get(0)
    .map_err(db_error)
}

/// The binding digests recorded by runs that have not ended, one entry per
/// (connection, digest) with its run count, sorted (the
/// [`coordinator_ports::RunStore::live_bindings`] of the PostgreSQL store).
pub(crate) async fn live_bindings(
    conn: &mut Transaction,
    ns: &str,
) -> Result<Vec<LiveBinding>, StoreError> {
    let rows = sqlx::query(&format!(
        "SELECT b.key, b.value, count(*)
           FROM {ns}.runs r, jsonb_each_text(r.bindings) b
          WHERE NOT r.ended
          GROUP BY b.key, b.value
          ORDER BY b.key, b.value"
    ))
    .fetch_all(conn.on())
    .await
    .map_err(db_error)?;
    rows.iter()
        .map(|r| {
            let runs: i64 = r.try_get(2).map_err(db_error)?;
            Ok(LiveBinding {
                connection: r.try_get(0).map_err(db_error)?,
                digest: r.try_get(1).map_err(db_error)?,
                runs: u64::try_from(runs).unwrap_or(0),
            })
        })
        .collect()
}

/// `coordinator.command.live-binding-conflict`: the runtime file changed the
/// binding of connections that runs which have not ended use (seed 000
/// "Apply and start"). `conflicts` must not be empty.
pub fn live_binding_refusal(conflicts: &[BindingConflict]) -> StoreError {
    StoreError::refused(
        "coordinator.command.live-binding-conflict",
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
async fn check_live_bindings(
    conn: &mut Transaction,
    ns: &str,
    config: &RuntimeConfig,
) -> Result<(), StoreError> {
    let live = live_bindings(conn, ns).await?;
    let found = binding::conflicts(&live, &config.connections);
    if found.is_empty() {
        Ok(())
    } else {
        Err(live_binding_refusal(&found))
    }
}

/// Computes the plan of `packages` against `active`, with the removals the
/// operator asked for. Pure apart from the live-run counts.
async fn compute_plan(
    conn: Option<&mut Transaction>,
    ns: &str,
    packages: &[LoadedPackage],
    active: &BTreeMap<String, WorkflowStatus>,
    remove: &[String],
) -> Result<Plan, StoreError> {
    let mut entries = Vec::new();
    let mut refusal = None;
    for p in packages {
        let workflow = p.definition.program.workflow.clone();
        let current = active.get(&workflow);
        let action = match current {
            None => PlanAction::Install,
            Some(a) if a.package_digest == p.digest => PlanAction::Unchanged,
            Some(_) => PlanAction::Replace,
        };
        if remove.contains(&workflow) && refusal.is_none() {
            refusal = Some(StoreError::refused(
                "coordinator.deployment.remove-workflow",
                format!(
                    "`--remove-workflow {workflow}` names a workflow the runtime file still lists"
                ),
                "drop its packages entry first, or do not remove it",
            ));
        }
        entries.push(PlanEntry {
            workflow,
            action,
            package_digest: Some(p.digest.clone()),
            revision: Some(p.definition.revision.clone()),
            active_package_digest: current.map(|a| a.package_digest.clone()),
        });
    }
    for r in remove {
        if !active.contains_key(r) && refusal.is_none() {
            refusal = Some(StoreError::refused(
                "coordinator.deployment.remove-workflow",
                format!("`--remove-workflow {r}` names a workflow that is not active"),
                "run `plan` to see the active workflows",
            ));
        }
    }
    let mut conn = conn;
    for (workflow, a) in active {
        if entries.iter().any(|e| &e.workflow == workflow) {
            continue;
        }
        if !remove.contains(workflow) {
            refusal.get_or_insert_with(|| {
                StoreError::refused(
                    "coordinator.deployment.workflow-unlisted",
                    format!("workflow `{workflow}` is active but the runtime file no longer lists its package"),
                    format!("list its package again, or pass `--remove-workflow {workflow}`"),
                )
            });
            continue;
        }
        if let Some(c) = conn.as_deref_mut() {
            let live = live_runs(c, ns, workflow).await?;
            if live > 0 && refusal.is_none() {
                refusal = Some(StoreError::refused(
                    "coordinator.deployment.workflow-live-runs",
                    format!("workflow `{workflow}` has {live} runs that have not ended"),
                    "let them end (or cancel them), then remove the workflow",
                ));
            }
        }
        entries.push(PlanEntry {
            workflow: workflow.clone(),
            action: PlanAction::Remove,
            package_digest: None,
            revision: None,
            active_package_digest: Some(a.package_digest.clone()),
        });
    }
    entries.sort_by(|a, b| a.workflow.cmp(&b.workflow));
    Ok(Plan { entries, refusal })
}

/// `plan`: per workflow, whether `apply` would install, replace, leave
/// unchanged or remove its package. Reads with the runtime credential (a
/// fresh database, where the namespace does not exist yet, plans an install
/// of everything); writes nothing. `remove` holds the `--remove-workflow`
/// ids. A plan apply would refuse carries [`Plan::refusal`].
///
/// # Errors
/// Secrets, packages (`deployment.package`), `store-unavailable`,
/// `deployment.database-version`, `deployment.schema-version`,
/// `deployment.database-id`.
pub async fn plan(
    config: &RuntimeConfig,
    resolver: &SecretResolver,
    remove: &[String],
) -> Result<Plan, StoreError> {
    let ns = namespace_of(config)?;
    let deployment = deployment_of(config)?;
    let packages = load_pinned_packages(deployment)?;
    let keys = DeploymentKeysRead::load(resolver, deployment)?;
    let (pool, mut conn) = read_with_runtime_role(config, resolver).await?;
    log_in_once(config, resolver, &config.database.migration_url_ref).await?;
    let found = layout(&mut conn, ns).await?;
    check_layout(found, ns)?;
    let active = if let Layout::Versioned(_) = found {
        let d = deployment_row(&mut conn, ns).await?;
        check_database_id(&d.database_id, &deployment.database_id)?;
        check_applied_namespace(&mut conn, ns, deployment, &keys).await?;
        active_workflows(&mut conn, ns).await?
    } else {
        BTreeMap::new()
    };
    let mut plan = compute_plan(Some(&mut conn), ns, &packages, &active, remove).await?;
    if plan.refusal.is_none() && matches!(found, Layout::Versioned(_)) {
        plan.refusal = check_live_bindings(&mut conn, ns, config).await.err();
    }
    drop(conn);
    pool.close().await;
    Ok(plan)
}

/// The deployment's keys as `apply` reads them (state keyring, admission
/// key, audit key): `plan` reads them the same way, so a key file `apply`
/// would refuse (group-readable, missing, not 32 bytes) refuses `plan`.
struct DeploymentKeysRead {
    state: coordinator_runtime::keys::StateKeyring,
    admission: coordinator_runtime::keys::AdmissionKey,
    audit: coordinator_runtime::keys::AuditKey,
}

impl DeploymentKeysRead {
    fn load(resolver: &SecretResolver, deployment: &Deployment) -> Result<Self, StoreError> {
        Ok(DeploymentKeysRead {
            state: load_state_keyring(resolver, deployment)?,
            admission: load_admission_key(resolver, deployment)?,
            audit: load_audit_key(resolver, deployment)?,
        })
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
async fn check_applied_namespace(
    conn: &mut Transaction,
    ns: &str,
    deployment: &Deployment,
    keys: &DeploymentKeysRead,
) -> Result<(), StoreError> {
    verify_runtime_role(conn, ns, &deployment.runtime_role).await?;
    check_custody(conn, ns, &keys.state).await?;
    check_admission_custody(conn, ns, &keys.admission).await?;
    Ok(())
}

/// Logs in once with the URL behind `reference` and closes the connection:
/// `plan` and `apply` log in with every database URL the deployment names,
/// so a wrong password is refused before anything changes.
///
/// # Errors
/// [`connect`]'s (`database.login` for a refused login).
async fn log_in_once(
    config: &RuntimeConfig,
    resolver: &SecretResolver,
    reference: &coordinator_runtime::config::SecretRef,
) -> Result<(), StoreError> {
    let pool = connect(config, resolver, reference, 1, &[], Access::Read).await?;
    pool.close().await;
    Ok(())
}

/// One connection of the runtime role for reading (`plan`,
/// `deployment-status`: a standby will do when the URL says
/// `target_session_attrs=any`), and a transaction on it.
///
/// # Errors
/// [`connect`]'s.
async fn read_with_runtime_role(
    config: &RuntimeConfig,
    resolver: &SecretResolver,
) -> Result<(super::session::Database, Transaction), StoreError> {
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

/// `apply`: the only use of the migration URL. In one transaction (under an
/// advisory lock per namespace): refuse a server below 17, an earlier or
/// unknown layout, another databaseId; create schema version 4 when absent;
/// record each state key version's custody fingerprint (a different key
/// under a recorded version is `state-key-custody`); verify every pinned
/// package against its digest and record its definition (kept forever) and
/// the active package per workflow; remove the `remove` workflows (refused
/// while they have runs that have not ended); grant the runtime role
/// exactly what serving needs; check the runtime role
/// ([`verify_runtime_role`]). Any refusal rolls everything back. Then one
/// `deployment.apply` record is appended to `journal`.
///
/// # Errors
/// Everything [`plan`] refuses, plus `deployment.workflow-unlisted`,
/// `deployment.workflow-live-runs`, `deployment.remove-workflow`,
/// `live-binding-conflict` (a connection's binding changed under runs that
/// have not ended: nothing is written), `deployment.runtime-role-*`,
/// `state-key-custody`, `audit.unavailable` (the apply committed but its
/// audit record could not be written).
pub async fn apply(
    config: &RuntimeConfig,
    resolver: &SecretResolver,
    remove: &[String],
    journal: &AuditJournal,
) -> Result<ApplyReport, StoreError> {
    let ns = namespace_of(config)?;
    let deployment = deployment_of(config)?;
    let packages = load_pinned_packages(deployment)?;
    let keys = DeploymentKeysRead::load(resolver, deployment)?;
    let (keyring, admission, audit_key) = (&keys.state, &keys.admission, &keys.audit);
    let pool = connect(
        config,
        resolver,
        &config.database.migration_url_ref,
        1,
        &[],
        Access::Write,
    )
    .await?;
    // The runtime role must be able to log in too before anything
    // changes: apply alone would change the deployment for a service that
    // then cannot start. (The migration URL first: it is apply's own.)
    log_in_once(config, resolver, &config.database.runtime_url_ref).await?;
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
        .bind(format!("registry-coordinator:{ns}"))
        .execute(tx.on())
        .await
        .map_err(db_error)?;

    let found = layout(&mut tx, ns).await?;
    check_layout(found, ns)?;
    let migrated = !matches!(found, Layout::Versioned(_));
    if migrated {
        if found == Layout::Absent {
            sqlx::query(&format!("CREATE SCHEMA {ns}"))
                .execute(tx.on())
                .await
                .map_err(db_error)?;
        }
        for (_, sql) in schema::MIGRATIONS {
            for statement in schema::statements(sql) {
                sqlx::query(&schema::in_namespace(statement, ns))
                    .execute(tx.on())
                    .await
                    .map_err(db_error)?;
            }
        }
        for statement in schema::count_routines(ns) {
            sqlx::query(&statement)
                .execute(tx.on())
                .await
                .map_err(db_error)?;
        }
        sqlx::query(&format!(
            "INSERT INTO {ns}.deployment (database_id, schema_version) VALUES ($1, $2)"
        ))
        .bind(&deployment.database_id)
        .bind(SCHEMA_VERSION)
        .execute(tx.on())
        .await
        .map_err(db_error)?;
    }
    let d = deployment_row(&mut tx, ns).await?;
    check_database_id(&d.database_id, &deployment.database_id)?;
    if !migrated && !has_run_counts(&mut tx, ns).await? {
        for statement in schema::amend_v4(ns) {
            sqlx::query(&statement)
                .execute(tx.on())
                .await
                .map_err(db_error)?;
        }
    }
    if !migrated {
        // Refuse an unsafe role as found, before the grants below would
        // silently repair part of it (a CREATE granted by hand), and keys
        // that are not the recorded ones: what plan checks too.
        check_applied_namespace(&mut tx, ns, deployment, &keys).await?;
    }

    // Key custody: recorded versions must match; configured ones get a record.
    let recorded = check_custody(&mut tx, ns, keyring).await?;
    if !check_admission_custody(&mut tx, ns, admission).await? {
        sqlx::query(&format!(
            "UPDATE {ns}.deployment SET admission_key_fingerprint = $1"
        ))
        .bind(admission.fingerprint())
        .execute(tx.on())
        .await
        .map_err(db_error)?;
    }
    for version in keyring.versions() {
        if recorded.iter().any(|(v, _)| *v == version) {
            continue;
        }
        let fingerprint = keyring.fingerprint(version).unwrap_or_default();
        sqlx::query(&format!(
            "INSERT INTO {ns}.state_key_custody (version, fingerprint) VALUES ($1, $2)"
        ))
        .bind(version as i32)
        .bind(fingerprint)
        .execute(tx.on())
        .await
        .map_err(db_error)?;
    }

    let active = active_workflows(&mut tx, ns).await?;
    let plan = compute_plan(Some(&mut tx), ns, &packages, &active, remove).await?;
    if let Some(refusal) = plan.refusal {
        return Err(refusal);
    }
    check_live_bindings(&mut tx, ns, config).await?;
    let mut changed = false;
    for p in &packages {
        sqlx::query(&format!(
            "INSERT INTO {ns}.definitions (revision, workflow, definition, package_digest)
             VALUES ($1, $2, $3, $4) ON CONFLICT (revision) DO NOTHING"
        ))
        .bind(&p.definition.revision)
        .bind(&p.definition.program.workflow)
        .bind(p.definition.canonical_bytes())
        .bind(&p.digest)
        .execute(tx.on())
        .await
        .map_err(db_error)?;
    }
    for entry in &plan.entries {
        match entry.action {
            PlanAction::Unchanged => {}
            PlanAction::Install | PlanAction::Replace => {
                changed = true;
                sqlx::query(&format!(
                    "INSERT INTO {ns}.active_workflows (workflow, revision, package_digest)
                     VALUES ($1, $2, $3)
                     ON CONFLICT (workflow) DO UPDATE SET revision = EXCLUDED.revision,
                        package_digest = EXCLUDED.package_digest, activated_at = now()"
                ))
                .bind(&entry.workflow)
                .bind(entry.revision.as_deref().unwrap_or_default())
                .bind(entry.package_digest.as_deref().unwrap_or_default())
                .execute(tx.on())
                .await
                .map_err(db_error)?;
            }
            PlanAction::Remove => {
                changed = true;
                sqlx::query(&format!(
                    "DELETE FROM {ns}.active_workflows WHERE workflow = $1"
                ))
                .bind(&entry.workflow)
                .execute(tx.on())
                .await
                .map_err(db_error)?;
            }
        }
    }
    let bindings = coordinator_runtime::binding::binding_digests(
        &config.connections.clone().into_iter().collect(),
        config.connections.keys(),
    );
    sqlx::query(&format!(
        "UPDATE {ns}.deployment SET applied_at = now(),
            activation_generation = activation_generation + $1,
            connection_bindings = $2::jsonb"
    ))
    .bind(i64::from(changed))
    .bind(serde_json::to_string(&bindings).map_err(|e| {
        StoreError::refused(
            "deployment.refused",
            format!("the connection bindings do not serialise: {e}"),
            "report this",
        )
    })?)
    .execute(tx.on())
    .await
    .map_err(db_error)?;

    set_storage_parameters(&mut tx, ns).await?;
    grant_runtime_role(&mut tx, ns, &deployment.runtime_role).await?;
    verify_runtime_role(&mut tx, ns, &deployment.runtime_role).await?;
    tx.commit().await?;
    pool.close().await;

    let mut record = AuditRecord::new("deployment.apply", "accepted")
        .reference(audit_key, "database", &deployment.database_id)
        .fact("schemaVersion", SCHEMA_VERSION)
        .fact("migrated", migrated);
    for e in &plan.entries {
        record = record.fact(
            &format!("workflow:{}", e.workflow),
            serde_json::json!({"action": e.action.as_str(), "packageDigest": e.package_digest}),
        );
    }
    journal.append(&record).map_err(|e| {
        StoreError::unavailable(
            "coordinator.audit.unavailable",
            format!(
                "apply committed, but its audit record could not be written to {}: {e}",
                journal.path().display()
            ),
            "restore the audit storage; run `deployment-status` to see the applied state",
        )
    })?;
    Ok(ApplyReport {
        entries: plan.entries,
        schema_version: SCHEMA_VERSION,
        migrated,
    })
}

/// Whether the namespace has `run_counts` (a namespace laid out by an
/// earlier build of version 4 has not; `apply` amends it,
/// [`schema::amend_v4`]).
async fn has_run_counts(conn: &mut Transaction, ns: &str) -> Result<bool, StoreError> {
    sqlx::query_scalar("SELECT to_regclass($1) IS NOT NULL")
        .bind(format!("{ns}.run_counts"))
        .fetch_one(conn.on())
        .await
        .map_err(db_error)
}

/// Sets the tables' storage parameters ([`schema::STORAGE_PARAMETERS`])
/// on every apply, so a namespace made by an earlier binary gets them too
/// (no schema version: they change no column, and a running service keeps
/// working meanwhile, since `SET (...)` takes only a share-update-exclusive
/// lock; pages written before keep their fill).
async fn set_storage_parameters(conn: &mut Transaction, ns: &str) -> Result<(), StoreError> {
    for (table, parameters) in schema::STORAGE_PARAMETERS {
        sqlx::query(&format!("ALTER TABLE {ns}.{table} SET ({parameters})"))
            .execute(conn.on())
            .await
            .map_err(db_error)?;
    }
    Ok(())
}

async fn grant_runtime_role(
    conn: &mut Transaction,
    ns: &str,
    role: &str,
) -> Result<(), StoreError> {
    role_exists(conn, role).await?;
    // `role` passed the runtime check's `^[a-z_][a-z0-9_]{0,62}$`; quote it anyway.
    let quoted = format!("\"{}\"", role.replace('"', "\"\""));
    let mut statements = vec![
        format!("REVOKE ALL ON SCHEMA {ns} FROM PUBLIC"),
        format!("REVOKE ALL ON SCHEMA {ns} FROM {quoted}"),
        format!("GRANT USAGE ON SCHEMA {ns} TO {quoted}"),
    ];
    for (table, privileges) in schema::RUNTIME_GRANTS {
        statements.push(format!("REVOKE ALL ON TABLE {ns}.{table} FROM PUBLIC"));
        statements.push(format!("REVOKE ALL ON TABLE {ns}.{table} FROM {quoted}"));
        statements.push(format!(
            "GRANT {privileges} ON TABLE {ns}.{table} TO {quoted}"
        ));
    }
    for s in statements {
        sqlx::query(&s).execute(conn.on()).await.map_err(db_error)?;
    }
    Ok(())
}

async fn role_exists(conn: &mut Transaction, role: &str) -> Result<(), StoreError> {
    let exists: bool = sqlx::query("SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)")
        .bind(role)
        .fetch_one(conn.on())
        .await
        .map_err(db_error)?
        .try_get(0)
        .map_err(db_error)?;
    if exists {
        Ok(())
    } else {
        Err(StoreError::refused(
            "coordinator.deployment.runtime-role-missing",
            format!("the runtime role `{role}` does not exist"),
            "create the role as the deployment runbook describes, or fix deployment.runtimeRole",
        ))
    }
}

/// Refuses an unsafe runtime role, each shape with its own code, checked in
/// this order: `deployment.runtime-role-superuser` (`rolsuper`),
/// `deployment.runtime-role-bypassrls` (`rolbypassrls`),
/// `deployment.runtime-role-member` (a member, directly or not, of the role
/// that owns the namespace, i.e. the migration role, or that role itself),
/// `deployment.runtime-role-create` (may `CREATE` in the namespace, also
/// through `PUBLIC`). Also `deployment.runtime-role-missing`. Used by
/// [`apply`] (after granting) and at service startup ([`super::Store::open`]).
///
/// # Errors
/// The codes above, `deployment.not-applied` when the namespace is absent,
/// `store-unavailable`.
pub async fn verify_runtime_role(
    conn: &mut Transaction,
    ns: &str,
    role: &str,
) -> Result<(), StoreError> {
    role_exists(conn, role).await?;
    let row = sqlx::query(
        "SELECT r.rolsuper, r.rolbypassrls,
                pg_has_role(r.oid, n.nspowner, 'MEMBER'),
                has_schema_privilege(r.oid, n.oid, 'CREATE')
           FROM pg_roles r, pg_namespace n
          WHERE r.rolname = $1 AND n.nspname = $2",
    )
    .bind(role)
    .bind(ns)
    .fetch_optional(conn.on())
    .await
    .map_err(db_error)?
    .ok_or_else(|| not_applied(ns))?;
    let superuser: bool = row.try_get(0).map_err(db_error)?;
    let bypassrls: bool = row.try_get(1).map_err(db_error)?;
    let member: bool = row.try_get(2).map_err(db_error)?;
    let create: bool = row.try_get(3).map_err(db_error)?;
    let next = "serve with a role that is LOGIN NOSUPERUSER NOBYPASSRLS, member of no role, with only the grants apply gives";
    if superuser {
        return Err(StoreError::refused(
            "coordinator.deployment.runtime-role-superuser",
            format!("the runtime role `{role}` is a superuser"),
            next,
        ));
    }
    if bypassrls {
        return Err(StoreError::refused(
            "coordinator.deployment.runtime-role-bypassrls",
            format!("the runtime role `{role}` bypasses row-level security"),
            next,
        ));
    }
    if member {
        return Err(StoreError::refused(
            "coordinator.deployment.runtime-role-member",
            format!("the runtime role `{role}` is a member of the migration role that owns `{ns}`"),
            next,
        ));
    }
    if create {
        return Err(StoreError::refused(
            "coordinator.deployment.runtime-role-create",
            format!("the runtime role `{role}` can create objects in `{ns}`"),
            next,
        ));
    }
    Ok(())
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
) -> Result<(DeploymentRow, Vec<u32>), StoreError> {
    let found = layout(conn, ns).await?;
    check_layout(found, ns)?;
    if !matches!(found, Layout::Versioned(_)) {
        return Err(not_applied(ns));
    }
    if !has_run_counts(conn, ns).await? {
        return Err(StoreError::refused(
            "coordinator.deployment.schema-version",
            format!("namespace `{ns}` was laid out by an earlier build of state schema version {SCHEMA_VERSION} (it has no run_counts table)"),
            "run `coordinatorctl --runtime-config FILE apply`, which brings it to this build's layout",
        ));
    }
    let d = deployment_row(conn, ns).await?;
    check_database_id(&d.database_id, &deployment.database_id)?;
    let user: String = sqlx::query("SELECT current_user::text")
        .fetch_one(conn.on())
        .await
        .map_err(db_error)?
        .try_get(0)
        .map_err(db_error)?;
    if user != deployment.runtime_role {
        return Err(StoreError::refused(
            "coordinator.deployment.runtime-role-mismatch",
            format!(
                "the runtime database URL logs in as `{user}`, but deployment.runtimeRole is `{}`",
                deployment.runtime_role
            ),
            "make the runtime URL's role and deployment.runtimeRole the same",
        ));
    }
    verify_runtime_role(conn, ns, &deployment.runtime_role).await?;
    let recorded = check_custody(conn, ns, keyring).await?;
    if !check_admission_custody(conn, ns, admission).await? {
        return Err(StoreError::refused(
            "coordinator.command.state-key-custody",
            "the admission key has no custody record",
            "run `apply` (it records the admission key's fingerprint)",
        ));
    }
    let active = keyring.active_version();
    if !recorded.iter().any(|(v, _)| *v == active) {
        return Err(StoreError::refused(
            "coordinator.command.state-key-custody",
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
) -> Result<Vec<WorkflowStatus>, StoreError> {
    let active = active_workflows(conn, ns).await?;
    for p in packages {
        let workflow = &p.definition.program.workflow;
        match active.get(workflow) {
            Some(a) if a.package_digest == p.digest => {}
            Some(a) => {
                return Err(StoreError::refused(
                    "coordinator.deployment.packages-not-applied",
                    format!(
                        "workflow `{workflow}` pins {} but {} is active",
                        p.digest, a.package_digest
                    ),
                    "run `plan` and `apply` with this runtime file",
                ))
            }
            None => {
                return Err(StoreError::refused(
                    "coordinator.deployment.packages-not-applied",
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
        return Err(StoreError::refused(
            "coordinator.deployment.workflow-unlisted",
            format!("workflow `{w}` is active but the runtime file no longer lists its package"),
            format!("list its package again, or `apply --remove-workflow {w}`"),
        ));
    }
    Ok(active.into_values().collect())
}

/// `deployment-status`, with the runtime credential only: verifies what the
/// service verifies before serving (server version, schema version 4,
/// database id, runtime role identity and safety, key custody, every pinned
/// package active with its digest, no connection binding changed under a
/// run that has not ended) and reports it.
///
/// # Errors
/// Any of those refusals (`live-binding-conflict` for the last), secrets,
/// packages, `store-unavailable`.
pub async fn deployment_status(
    config: &RuntimeConfig,
    resolver: &SecretResolver,
) -> Result<DeploymentStatus, StoreError> {
    let ns = namespace_of(config)?;
    let deployment = deployment_of(config)?;
    let packages = load_pinned_packages(deployment)?;
    let keyring = load_state_keyring(resolver, deployment)?;
    let admission = load_admission_key(resolver, deployment)?;
    let (pool, mut conn) = read_with_runtime_role(config, resolver).await?;
    let (d, versions) = verify_runtime(&mut conn, ns, deployment, &keyring, &admission).await?;
    let workflows = check_activation(&mut conn, ns, &packages).await?;
    check_live_bindings(&mut conn, ns, config).await?;
    drop(conn);
    pool.close().await;
    Ok(DeploymentStatus {
        schema_version: SCHEMA_VERSION,
        database_id: d.database_id,
        workflows,
        restore_hold: d.restore_hold,
        admission_hold: d.admission_hold,
        state_key_versions: versions,
        active_state_key: keyring.active_version(),
    })
}
