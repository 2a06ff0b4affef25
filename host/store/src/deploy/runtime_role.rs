//! The runtime role: the grants `apply` gives it, and the safety check
//! `plan`, `apply`, `deployment-status` and the service's startup run on it.

use sqlx::Row;

use super::namespace::not_applied;
use crate::codes;
use crate::schema;
use crate::session::Transaction;
use crate::{db_error, DatabaseError};

/// Grants the runtime role exactly [`schema::RUNTIME_GRANTS`] on the
/// namespace (and revokes everything else from it and from `PUBLIC`).
///
/// # Errors
/// `deployment.runtime-role-missing`, `store-unavailable`.
pub(super) async fn grant_runtime_role(
    conn: &mut Transaction,
    ns: &str,
    role: &str,
) -> Result<(), DatabaseError> {
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

/// Refuses (`deployment.runtime-role-missing`) a runtime role that does not
/// exist.
async fn role_exists(conn: &mut Transaction, role: &str) -> Result<(), DatabaseError> {
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
        Err(DatabaseError::refused(
            codes::DEPLOYMENT_RUNTIME_ROLE_MISSING,
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
/// [`super::apply()`] (after granting) and at service startup ([`crate::Store::open`]).
///
/// # Errors
/// The codes above, `deployment.not-applied` when the namespace is absent,
/// `store-unavailable`.
pub async fn verify_runtime_role(
    conn: &mut Transaction,
    ns: &str,
    role: &str,
) -> Result<(), DatabaseError> {
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
        return Err(DatabaseError::refused(
            codes::DEPLOYMENT_RUNTIME_ROLE_SUPERUSER,
            format!("the runtime role `{role}` is a superuser"),
            next,
        ));
    }
    if bypassrls {
        return Err(DatabaseError::refused(
            codes::DEPLOYMENT_RUNTIME_ROLE_BYPASSRLS,
            format!("the runtime role `{role}` bypasses row-level security"),
            next,
        ));
    }
    if member {
        return Err(DatabaseError::refused(
            codes::DEPLOYMENT_RUNTIME_ROLE_MEMBER,
            format!("the runtime role `{role}` is a member of the migration role that owns `{ns}`"),
            next,
        ));
    }
    if create {
        return Err(DatabaseError::refused(
            codes::DEPLOYMENT_RUNTIME_ROLE_CREATE,
            format!("the runtime role `{role}` can create objects in `{ns}`"),
            next,
        ));
    }
    Ok(())
}
