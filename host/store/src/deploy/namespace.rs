//! What a deployment's namespace records, read by `plan`, `apply`,
//! `deployment-status` and the service's startup: its layout (and state
//! schema version), the deployment record, the active workflows, and the
//! runs that have not ended with their connection bindings. Reads only.

use serde::Serialize;
use std::collections::BTreeMap;

use sqlx::Row;

use crate::codes;
use crate::session::Transaction;
use crate::{db_error, DatabaseError};
use coordinator_runtime::binding::LiveBinding;

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

/// The schema layout found in a namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Layout {
    /// No schema of that name.
    Absent,
    /// The schema exists and holds no relation.
    Empty,
    /// A deployment table recording this version.
    Versioned(i32),
    /// Relations, but no readable deployment record.
    Unknown,
}

/// Reads which layout namespace `ns` has (and its recorded schema version).
///
/// # Errors
/// `deployment.not-applied` when this role may not read the deployment
/// record, `store-unavailable`.
pub(super) async fn layout(conn: &mut Transaction, ns: &str) -> Result<Layout, DatabaseError> {
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

/// `deployment.not-applied`: the namespace holds no deployment this role
/// may read.
pub(super) fn not_applied(ns: &str) -> DatabaseError {
    DatabaseError::refused(
        codes::DEPLOYMENT_NOT_APPLIED,
        format!("namespace `{ns}` holds no deployment this role may read"),
        "run `coordinatorctl --runtime-config FILE apply` with this runtimeRole",
    )
}

/// The deployment record.
pub(crate) struct DeploymentRow {
    pub(crate) database_id: String,
    pub(crate) restore_hold: bool,
    pub(crate) admission_hold: bool,
}

/// Reads the deployment record of an applied namespace.
///
/// # Errors
/// `store-unavailable`.
pub(super) async fn deployment_row(
    conn: &mut Transaction,
    ns: &str,
) -> Result<DeploymentRow, DatabaseError> {
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

/// The active workflows of an applied namespace, by workflow id.
///
/// # Errors
/// `store-unavailable`.
pub(super) async fn active_workflows(
    conn: &mut Transaction,
    ns: &str,
) -> Result<BTreeMap<String, WorkflowStatus>, DatabaseError> {
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

/// How many runs of `workflow` have not ended.
///
/// # Errors
/// `store-unavailable`.
pub(super) async fn live_runs(
    conn: &mut Transaction,
    ns: &str,
    workflow: &str,
) -> Result<i64, DatabaseError> {
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
/// [`coordinator_ports::RunReads::live_bindings`] of the PostgreSQL store).
pub(crate) async fn live_bindings(
    conn: &mut Transaction,
    ns: &str,
) -> Result<Vec<LiveBinding>, DatabaseError> {
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

/// Whether the namespace has table `table` (a namespace laid out by an
/// earlier build of version 4 may lack `run_counts`, `revision_counts` or
/// `connection_flow`; `apply` amends it, [`crate::schema::amend_v4`],
/// [`crate::schema::amend_v4_revision_counts`],
/// [`crate::schema::amend_v4_flow`]).
pub(super) async fn has_table(
    conn: &mut Transaction,
    ns: &str,
    table: &str,
) -> Result<bool, DatabaseError> {
    sqlx::query_scalar("SELECT to_regclass($1) IS NOT NULL")
        .bind(format!("{ns}.{table}"))
        .fetch_one(conn.on())
        .await
        .map_err(db_error)
}

/// Whether the namespace's `table` has `column` (a namespace laid out by
/// an earlier build of version 4 has no `runs.trace_parent` nor
/// `definitions.key_version`; `apply` adds them,
/// [`crate::schema::amend_v4_trace`],
/// [`crate::schema::amend_v4_sealed_definitions`]).
pub(super) async fn has_column(
    conn: &mut Transaction,
    ns: &str,
    table: &str,
    column: &str,
) -> Result<bool, DatabaseError> {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM information_schema.columns
                         WHERE table_schema = $1 AND table_name = $2
                           AND column_name = $3)",
    )
    .bind(ns)
    .bind(table)
    .bind(column)
    .fetch_one(conn.on())
    .await
    .map_err(db_error)
}
