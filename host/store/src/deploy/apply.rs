//! `apply`: the only user of `database.migrationUrlRef`. One transaction
//! checks and migrates the namespace, records key custody, the pinned
//! packages' definitions and the active package per workflow, and grants
//! and checks the runtime role; then one audit record.

use serde::Serialize;
use sqlx::Row;

use super::checks::{
    check_applied_namespace, check_database_id, check_layout, check_live_bindings,
    check_same_database, deployment_of, load_pinned_packages, log_in_as_runtime_role,
    DatabaseIdentity, DeploymentKeysRead,
};
use super::namespace::{active_workflows, deployment_row, has_table, layout, Layout};
use super::plan::{compute_plan, PlanAction, PlanEntry};
use super::runtime_role::{grant_runtime_role, verify_runtime_role};
use crate::codes;
use crate::runs::read_definition;
use crate::schema::{self, SCHEMA_VERSION};
use crate::servers::Access;
use crate::session::Transaction;
use crate::{
    check_admission_custody, check_custody, connect, db_error, namespace_of, DatabaseError,
};
use coordinator_runtime::audit::{AuditJournal, AuditRecord};
use coordinator_runtime::config::{Deployment, RuntimeConfig};
use coordinator_runtime::keys::{AuditKey, Binding};
use coordinator_runtime::package::LoadedPackage;
use coordinator_runtime::secrets::SecretResolver;

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

/// `apply`: the only use of the migration URL. First it logs in with the
/// runtime URL too, which must log in as `deployment.runtimeRole` and reach
/// the database the migration URL reaches (the same PostgreSQL cluster,
/// a standby or a pooler of it included, and the same database), so that
/// `deployment-status` and the service, which read through the runtime URL,
/// see what apply did. Then in one transaction (under an
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
/// Everything [`plan`](fn@super::plan) refuses, plus the migration login's
/// (`database.login`, ...), `deployment.database-urls-differ`,
/// `deployment.workflow-unlisted`,
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
) -> Result<ApplyReport, DatabaseError> {
    let ns = namespace_of(config)?;
    let deployment = deployment_of(config)?;
    let packages = load_pinned_packages(deployment)?;
    let keys = DeploymentKeysRead::load(resolver, deployment)?;
    let pool = connect(
        config,
        resolver,
        &config.database.migration_url_ref,
        1,
        &[],
        Access::Write,
    )
    .await?;
    // The runtime role must be able to log in too, as itself and to this
    // same database, before anything changes: apply alone would change the
    // deployment for a service that then cannot start, or serves another
    // database. (The migration URL first: it is apply's own.)
    let migration_database = DatabaseIdentity::read(&pool).await;
    let runtime_database = log_in_as_runtime_role(config, resolver, deployment).await?;
    check_same_database(migration_database.as_ref(), runtime_database.as_ref())?;
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
        .bind(format!("registry-coordinator:{ns}"))
        .execute(tx.on())
        .await
        .map_err(db_error)?;

    let migrated = check_and_migrate_namespace(&mut tx, ns, deployment, &keys).await?;
    record_key_custody(&mut tx, ns, &keys).await?;

    let active = active_workflows(&mut tx, ns).await?;
    let plan = compute_plan(Some(&mut tx), ns, &packages, &active, remove).await?;
    if let Some(refusal) = plan.refusal {
        return Err(refusal);
    }
    check_live_bindings(&mut tx, ns, config).await?;
    let sealing = DefinitionSealing {
        ns,
        keyring: &keys.state,
        database_id: &deployment.database_id,
    };
    sealing.reseal_definitions(&mut tx).await?;
    sealing.record_definitions(&mut tx, &packages).await?;
    let changed = activate_planned_workflows(&mut tx, ns, &plan.entries).await?;
    record_activation_and_bindings(&mut tx, ns, config, changed).await?;

    set_storage_parameters(&mut tx, ns).await?;
    grant_runtime_role(&mut tx, ns, &deployment.runtime_role).await?;
    verify_runtime_role(&mut tx, ns, &deployment.runtime_role).await?;
    tx.commit().await?;
    pool.close().await;

    append_apply_record(journal, &keys.audit, deployment, migrated, &plan.entries)?;
    Ok(ApplyReport {
        entries: plan.entries,
        schema_version: SCHEMA_VERSION,
        migrated,
    })
}

/// Checks the namespace's layout ([`check_layout`]) and databaseId
/// ([`check_database_id`]) and brings it to this build's layout: lays out
/// state schema version [`SCHEMA_VERSION`] where there is none
/// ([`lay_out_schema`]), or amends a namespace laid out by an earlier build
/// of that version ([`schema::amend_v4`], [`schema::amend_v4_flow`],
/// [`schema::amend_v4_revision_counts`]), and
/// (re)creates the flow-control routine ([`schema::flow_routines`]). On a namespace already applied,
/// refuses what `plan` refuses ([`check_applied_namespace`]). Returns
/// whether this apply laid the schema out.
///
/// # Errors
/// `deployment.schema-version`, `deployment.database-id`,
/// `deployment.runtime-role-*`, `state-key-custody`, `store-unavailable`.
async fn check_and_migrate_namespace(
    tx: &mut Transaction,
    ns: &str,
    deployment: &Deployment,
    keys: &DeploymentKeysRead,
) -> Result<bool, DatabaseError> {
    let found = layout(tx, ns).await?;
    check_layout(found, ns)?;
    let migrated = !matches!(found, Layout::Versioned(_));
    if migrated {
        lay_out_schema(tx, ns, found, &deployment.database_id).await?;
    }
    let d = deployment_row(tx, ns).await?;
    check_database_id(&d.database_id, &deployment.database_id)?;
    if !migrated && !has_table(tx, ns, "run_counts").await? {
        execute_each(tx, schema::amend_v4(ns)).await?;
    }
    if !migrated && !has_table(tx, ns, "revision_counts").await? {
        execute_each(tx, schema::amend_v4_revision_counts(ns)).await?;
    }
    if !migrated && !has_table(tx, ns, "connection_flow").await? {
        execute_each(tx, schema::amend_v4_flow(ns)).await?;
    }
    // The routine of this build, whatever the namespace had.
    execute_each(tx, schema::flow_routines(ns)).await?;
    if !migrated {
        execute_each(tx, schema::amend_v4_trace(ns)).await?;
        execute_each(tx, schema::amend_v4_sealed_definitions(ns)).await?;
    }
    if !migrated {
        // Refuse an unsafe role as found, before the grants below would
        // silently repair part of it (a CREATE granted by hand), and keys
        // that are not the recorded ones: what plan checks too.
        check_applied_namespace(tx, ns, deployment, keys).await?;
    }
    Ok(migrated)
}

/// Lays out state schema version [`SCHEMA_VERSION`] in a namespace that is
/// `found` absent (the schema is created) or empty: the migrations, the
/// count routines, and the deployment record with `database_id`.
///
/// # Errors
/// `store-unavailable`.
async fn lay_out_schema(
    tx: &mut Transaction,
    ns: &str,
    found: Layout,
    database_id: &str,
) -> Result<(), DatabaseError> {
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
    execute_each(tx, schema::count_routines(ns)).await?;
    sqlx::query(&format!(
        "INSERT INTO {ns}.deployment (database_id, schema_version) VALUES ($1, $2)"
    ))
    .bind(database_id)
    .bind(SCHEMA_VERSION)
    .execute(tx.on())
    .await
    .map_err(db_error)?;
    Ok(())
}

/// Runs each statement of `statements` (complete SQL, namespace included),
/// in order.
///
/// # Errors
/// `store-unavailable`.
async fn execute_each(tx: &mut Transaction, statements: Vec<String>) -> Result<(), DatabaseError> {
    for statement in statements {
        sqlx::query(&statement)
            .execute(tx.on())
            .await
            .map_err(db_error)?;
    }
    Ok(())
}

/// Key custody: the recorded state key versions must match the keyring
/// ([`check_custody`]: a different key under a recorded version is
/// `state-key-custody`), and so must a recorded admission key; the
/// configured ones without a record get their fingerprint recorded.
///
/// # Errors
/// `state-key-custody`, `store-unavailable`.
async fn record_key_custody(
    tx: &mut Transaction,
    ns: &str,
    keys: &DeploymentKeysRead,
) -> Result<(), DatabaseError> {
    let (keyring, admission) = (&keys.state, &keys.admission);
    let recorded = check_custody(tx, ns, keyring).await?;
    if !check_admission_custody(tx, ns, admission).await? {
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
    Ok(())
}

/// How `apply` seals definitions: with the active payload state key,
/// bound to the database id and the revision
/// ([`coordinator_runtime::keys::Binding::definition`]).
struct DefinitionSealing<'a> {
    ns: &'a str,
    keyring: &'a coordinator_runtime::keys::StateKeyring,
    database_id: &'a str,
}

impl DefinitionSealing<'_> {
    /// `bytes` of `revision` sealed under the active key.
    fn seal(&self, revision: &str, bytes: &[u8]) -> Vec<u8> {
        self.keyring
            .seal(&Binding::definition(self.database_id, revision), bytes)
    }

    /// Records every pinned package's definition under its revision,
    /// sealed (kept forever; a revision already recorded is left as it
    /// is).
    ///
    /// # Errors
    /// `store-unavailable`.
    async fn record_definitions(
        &self,
        tx: &mut Transaction,
        packages: &[LoadedPackage],
    ) -> Result<(), DatabaseError> {
        let ns = self.ns;
        for p in packages {
            let revision = &p.definition.revision;
            sqlx::query(&format!(
                "INSERT INTO {ns}.definitions (revision, workflow, definition, package_digest, key_version)
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (revision) DO NOTHING"
            ))
            .bind(revision)
            .bind(&p.definition.program.workflow)
            .bind(self.seal(revision, &p.definition.canonical_bytes()))
            .bind(&p.digest)
            .bind(self.keyring.active_version() as i32)
            .execute(tx.on())
            .await
            .map_err(db_error)?;
        }
        Ok(())
    }

    /// Seals, in place, under the active key, every definition that is
    /// not sealed under it: one an earlier build stored in plaintext
    /// (`key_version` NULL; how `apply` carries a namespace over,
    /// [`schema::amend_v4_sealed_definitions`]) and one sealed under an
    /// earlier state key version (so that version can be removed once
    /// retention has erased the runs it sealed). A definition that does
    /// not read back as its revision is refused, not sealed.
    ///
    /// # Errors
    /// `store-unavailable`; `state-tampered`; `state-key-custody` (the
    /// version it is sealed under is not configured).
    async fn reseal_definitions(&self, tx: &mut Transaction) -> Result<(), DatabaseError> {
        let ns = self.ns;
        let active = self.keyring.active_version() as i32;
        let rows = sqlx::query(&format!(
            "SELECT revision, definition, key_version FROM {ns}.definitions
              WHERE key_version IS DISTINCT FROM $1 FOR UPDATE"
        ))
        .bind(active)
        .fetch_all(tx.on())
        .await
        .map_err(db_error)?;
        for row in rows {
            let revision: String = row.try_get(0).map_err(db_error)?;
            let stored: Vec<u8> = row.try_get(1).map_err(db_error)?;
            let key_version: Option<i32> = row.try_get(2).map_err(db_error)?;
            let bytes = match key_version {
                None => stored,
                Some(_) => self
                    .keyring
                    .open(&Binding::definition(self.database_id, &revision), &stored)?,
            };
            read_definition(&revision, &bytes)?;
            sqlx::query(&format!(
                "UPDATE {ns}.definitions SET definition = $2, key_version = $3 WHERE revision = $1"
            ))
            .bind(&revision)
            .bind(self.seal(&revision, &bytes))
            .bind(active)
            .execute(tx.on())
            .await
            .map_err(db_error)?;
        }
        Ok(())
    }
}

/// Carries out the plan's entries on the active workflows: installs and
/// replaces make the pinned package active, removals drop the workflow.
/// Returns whether any entry changed the activation.
///
/// # Errors
/// `store-unavailable`.
async fn activate_planned_workflows(
    tx: &mut Transaction,
    ns: &str,
    entries: &[PlanEntry],
) -> Result<bool, DatabaseError> {
    let mut changed = false;
    for entry in entries {
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
    Ok(changed)
}

/// Stamps the deployment record: `applied_at`, the activation generation
/// (one up when `changed`), and the binding digest of every connection of
/// the runtime file.
///
/// # Errors
/// `store-unavailable`; `deployment.refused` if the digests do not
/// serialise.
async fn record_activation_and_bindings(
    tx: &mut Transaction,
    ns: &str,
    config: &RuntimeConfig,
    changed: bool,
) -> Result<(), DatabaseError> {
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
        DatabaseError::refused(
            "deployment.refused",
            format!("the connection bindings do not serialise: {e}"),
            "report this",
        )
    })?)
    .execute(tx.on())
    .await
    .map_err(db_error)?;
    Ok(())
}

/// Appends the `deployment.apply` record of a committed apply to `journal`:
/// the database as a keyed reference under `audit_key`, the schema version,
/// whether it migrated, and each workflow's action and package digest.
///
/// # Errors
/// `audit.unavailable` (the apply has committed all the same).
fn append_apply_record(
    journal: &AuditJournal,
    audit_key: &AuditKey,
    deployment: &Deployment,
    migrated: bool,
    entries: &[PlanEntry],
) -> Result<(), DatabaseError> {
    let mut record = AuditRecord::new("deployment.apply", "accepted")
        .reference(audit_key, "database", &deployment.database_id)
        .fact("schemaVersion", SCHEMA_VERSION)
        .fact("migrated", migrated);
    for e in entries {
        record = record.fact(
            &format!("workflow:{}", e.workflow),
            serde_json::json!({"action": e.action.as_str(), "packageDigest": e.package_digest}),
        );
    }
    journal.append(&record).map_err(|e| {
        DatabaseError::unavailable(
            codes::AUDIT_UNAVAILABLE,
            format!(
                "apply committed, but its audit record could not be written to {}: {e}",
                journal.path().display()
            ),
            "restore the audit storage; run `deployment-status` to see the applied state",
        )
    })?;
    Ok(())
}

/// Sets the tables' storage parameters ([`schema::STORAGE_PARAMETERS`])
/// on every apply, so a namespace made by an earlier binary gets them too
/// (no schema version: they change no column, and a running service keeps
/// working meanwhile, since `SET (...)` takes only a share-update-exclusive
/// lock; pages written before keep their fill).
async fn set_storage_parameters(conn: &mut Transaction, ns: &str) -> Result<(), DatabaseError> {
    for (table, parameters) in schema::STORAGE_PARAMETERS {
        sqlx::query(&format!("ALTER TABLE {ns}.{table} SET ({parameters})"))
            .execute(conn.on())
            .await
            .map_err(db_error)?;
    }
    Ok(())
}
