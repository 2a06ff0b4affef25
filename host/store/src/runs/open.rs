//! Service startup: [`Store::open`] connects with the runtime credential
//! and verifies the deployment (nothing is migrated), and the session
//! settings every service connection runs with.

use coordinator_runtime::config::RuntimeConfig;
use coordinator_runtime::package::LoadedPackage;
use coordinator_runtime::secrets::{DeploymentKeys, SecretResolver};
use sqlx::{PgPool, Row};

use super::Store;
use crate::deploy::{check_activation, verify_runtime};
use crate::servers::Access;
use crate::session::Database;
use crate::{connect, db_error, namespace_of, DatabaseError, MAX_POOL_CONNECTIONS};

/// The session settings of the service's connections.
///
/// `enable_seqscan = off`: the `jobs` table is a queue (each run inserts
/// and deletes its jobs), so it holds few live rows in many pages between
/// vacuums. A pooled connection keeps the generic plan of each group
/// statement (the group commit, the `sending` mark, the lease)
/// from the statistics of the moment it first planned it; planned while
/// the table was a dozen pages, the plan reads `jobs` sequentially for
/// its job ids, and keeps doing so when the table has grown to hundreds of
/// pages (measured with `scripts/bench.sh` and `auto_explain`: 0.33 ms per
/// such scan on average, up to 2.6 ms, three of them in a group commit).
/// With the setting off, the hot statements reach their rows by key or
/// through the due-time and deadline indexes whatever the statistics said
/// when they were planned (docs/decisions.md); a table without a usable
/// index is still read sequentially.
pub(crate) const SERVICE_SESSION_SETTINGS: &[(&str, &str)] = &[("enable_seqscan", "off")];

impl Store {
    /// Service startup: connects with the runtime credential (a pool of at
    /// most `max_connections`, capped at 32), and verifies the server
    /// version, the schema version, the database id, the runtime role's
    /// identity and safety ([`crate::verify_runtime_role`]), key custody,
    /// and that `packages` (verified by the runtime check) are exactly the
    /// active packages. Never migrates.
    ///
    /// # Errors
    /// The codes of `deployment-status` ([`crate::deployment_status`]).
    pub async fn open(
        config: &RuntimeConfig,
        resolver: &SecretResolver,
        keys: &DeploymentKeys,
        packages: &[LoadedPackage],
        max_connections: u32,
    ) -> Result<Store, DatabaseError> {
        let ns = namespace_of(config)?.to_owned();
        let deployment = config.deployment.as_ref().ok_or_else(|| {
            DatabaseError::refused(
                "deployment.not-applied",
                "the runtime file has no `deployment` section",
                "complete the deployment section",
            )
        })?;
        let db = connect(
            config,
            resolver,
            &config.database.runtime_url_ref,
            max_connections.min(MAX_POOL_CONNECTIONS),
            SERVICE_SESSION_SETTINGS,
            Access::Write,
        )
        .await?;
        let activation_generation = {
            let mut conn = db.begin().await?;
            verify_runtime(&mut conn, &ns, deployment, &keys.state, &keys.admission).await?;
            // Read before the check: an apply in between leaves this
            // process with the older generation, so it refuses admissions
            // (activation-changed) rather than serving a stale activation.
            let generation: i64 = sqlx::query(&format!(
                "SELECT activation_generation FROM {ns}.deployment"
            ))
            .fetch_one(conn.on())
            .await
            .map_err(db_error)?
            .try_get(0)
            .map_err(db_error)?;
            check_activation(&mut conn, &ns, packages).await?;
            conn.commit().await?;
            generation
        };
        Ok(Store {
            db,
            ns,
            database_id: deployment.database_id.clone(),
            keyring: keys.state.clone(),
            admission: keys.admission.clone(),
            activation_generation,
        })
    }

    /// The connection pool (for health probes and tests).
    pub fn pool(&self) -> &PgPool {
        self.db.pool()
    }

    /// The store's connections ([`Database`]).
    pub fn database(&self) -> &Database {
        &self.db
    }

    /// Closes the pool, waiting for connections in use.
    pub async fn close(&self) {
        self.db.close().await;
    }
}
