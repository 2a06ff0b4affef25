//! `deployment-status`: with the runtime credential only, what the service
//! verifies before it serves, and what it found.

use serde::Serialize;

use super::checks::{
    check_activation, check_live_bindings, deployment_of, load_pinned_packages,
    read_with_runtime_role, verify_runtime,
};
use super::namespace::WorkflowStatus;
use crate::schema::SCHEMA_VERSION;
use crate::{namespace_of, DatabaseError};
use coordinator_runtime::config::RuntimeConfig;
use coordinator_runtime::secrets::{load_admission_key, load_state_keyring, SecretResolver};

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
) -> Result<DeploymentStatus, DatabaseError> {
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
