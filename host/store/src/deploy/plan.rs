//! `plan`: what `apply` would do to each workflow, and why it would refuse,
//! read with the runtime credential only (the migration URL is never
//! resolved); it writes nothing.

use std::collections::BTreeMap;

use serde::Serialize;

use super::checks::{
    check_applied_namespace, check_database_id, check_layout, check_live_bindings,
    check_runtime_login, deployment_of, load_pinned_packages, read_with_runtime_role,
    DeploymentKeysRead,
};
use super::namespace::WorkflowStatus;
use super::namespace::{active_workflows, deployment_row, layout, live_runs, Layout};
use crate::codes;
use crate::session::Transaction;
use crate::{namespace_of, DatabaseError};
use coordinator_runtime::config::RuntimeConfig;
use coordinator_runtime::package::LoadedPackage;
use coordinator_runtime::secrets::SecretResolver;

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
    pub refusal: Option<DatabaseError>,
}

/// Computes the plan of `packages` against `active`, with the removals the
/// operator asked for. Pure apart from the live-run counts.
pub(super) async fn compute_plan(
    conn: Option<&mut Transaction>,
    ns: &str,
    packages: &[LoadedPackage],
    active: &BTreeMap<String, WorkflowStatus>,
    remove: &[String],
) -> Result<Plan, DatabaseError> {
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
            refusal = Some(DatabaseError::refused(
                codes::DEPLOYMENT_REMOVE_WORKFLOW,
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
            refusal = Some(DatabaseError::refused(
                codes::DEPLOYMENT_REMOVE_WORKFLOW,
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
                DatabaseError::refused(
                    codes::DEPLOYMENT_WORKFLOW_UNLISTED,
                    format!("workflow `{workflow}` is active but the runtime file no longer lists its package"),
                    format!("list its package again, or pass `--remove-workflow {workflow}`"),
                )
            });
            continue;
        }
        if let Some(c) = conn.as_deref_mut() {
            let live = live_runs(c, ns, workflow).await?;
            if live > 0 && refusal.is_none() {
                refusal = Some(DatabaseError::refused(
                    codes::DEPLOYMENT_WORKFLOW_LIVE_RUNS,
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
/// unchanged or remove its package. Resolves and logs in with the runtime
/// URL only, as `deployment-status` and the service do: it never reads
/// `database.migrationUrlRef`, so a deployment whose migration secret is
/// absent or wrong still gets a plan (a fresh database, where the
/// namespace does not exist yet, plans an install of everything); writes
/// nothing. It refuses what it can see without the migration credential,
/// as `apply` would: the packages, the key files (read as `apply` reads
/// them), the runtime login (refused, or not `deployment.runtimeRole`),
/// and on an applied namespace its layout, databaseId, the runtime role's
/// authority (`check_applied_namespace`: role safety, key custody).
/// `remove` holds the `--remove-workflow` ids. A plan apply would refuse
/// carries [`Plan::refusal`]. Not seen without the migration login: that
/// login itself, and a runtime URL reaching another database
/// (`deployment.database-urls-differ`, `apply`'s).
///
/// # Errors
/// Secrets, packages (`deployment.package`), `store-unavailable`,
/// `database.login`, `deployment.runtime-role-mismatch`,
/// `deployment.database-version`, `deployment.schema-version`,
/// `deployment.database-id`, `deployment.runtime-role-*`,
/// `state-key-custody`.
pub async fn plan(
    config: &RuntimeConfig,
    resolver: &SecretResolver,
    remove: &[String],
) -> Result<Plan, DatabaseError> {
    let ns = namespace_of(config)?;
    let deployment = deployment_of(config)?;
    let packages = load_pinned_packages(deployment)?;
    let keys = DeploymentKeysRead::load(resolver, deployment)?;
    let (pool, mut conn) = read_with_runtime_role(config, resolver).await?;
    check_runtime_login(&mut conn, deployment).await?;
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
