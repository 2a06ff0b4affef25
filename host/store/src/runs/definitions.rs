//! What apply recorded and the service reads back: the active workflows,
//! the definition of every applied revision, and the activation
//! generation ([`Definitions`]).

use async_trait::async_trait;
use coordinator_ir::Definition;
use coordinator_ports::store::{Definitions, StoreError as PortError};
use sqlx::Row;

use coordinator_runtime::keys::Binding;

use super::errors::port;
use super::Store;
use crate::codes;
use crate::deploy::WorkflowStatus;
use crate::{db_error, DatabaseError};

impl Store {
    /// The active workflows (workflow, package digest, revision).
    ///
    /// # Errors
    /// `store-unavailable`.
    pub async fn active_workflows(&self) -> Result<Vec<WorkflowStatus>, DatabaseError> {
        let rows = sqlx::query(&format!(
            "SELECT workflow, package_digest, revision FROM {}.active_workflows ORDER BY workflow",
            self.ns
        ))
        .fetch_all(&self.db)
        .await
        .map_err(db_error)?;
        rows.iter()
            .map(|r| {
                Ok(WorkflowStatus {
                    workflow: r.try_get(0).map_err(db_error)?,
                    package_digest: r.try_get(1).map_err(db_error)?,
                    revision: r.try_get(2).map_err(db_error)?,
                })
            })
            .collect()
    }

    /// The definition (Program) of `revision`, kept forever by apply,
    /// sealed with the payload state key (bound to the database id and
    /// the revision) and checked against the revision once opened.
    ///
    /// # Errors
    /// `store-unavailable`; `state-key-custody` (the key it names is not
    /// configured); `state-tampered` when the stored bytes do not open or
    /// read back as `revision`; `deployment.schema-version` for a
    /// definition an earlier build stored in plaintext (not yet sealed by
    /// this build's `apply`).
    pub async fn definition(&self, revision: &str) -> Result<Option<Definition>, DatabaseError> {
        let row = sqlx::query(&format!(
            "SELECT definition, key_version FROM {}.definitions WHERE revision = $1",
            self.ns
        ))
        .bind(revision)
        .fetch_optional(&self.db)
        .await
        .map_err(db_error)?;
        let Some(row) = row else { return Ok(None) };
        let sealed: Vec<u8> = row.try_get(0).map_err(db_error)?;
        let key_version: Option<i32> = row.try_get(1).map_err(db_error)?;
        if key_version.is_none() {
            return Err(DatabaseError::refused(
                codes::DEPLOYMENT_SCHEMA_VERSION,
                format!("stored definition {revision} is not sealed: namespace `{}` was carried by an earlier build's apply", self.ns),
                "run `coordinatorctl --runtime-config FILE apply` with this build, which seals it",
            ));
        }
        let bytes = self
            .keyring
            .open(&Binding::definition(&self.database_id, revision), &sealed)?;
        read_definition(revision, &bytes).map(Some)
    }

    /// Apply's activation counter; a service compares it with the value at
    /// startup (`deployment.activation-changed`).
    ///
    /// # Errors
    /// `store-unavailable`.
    pub async fn activation_generation(&self) -> Result<i64, DatabaseError> {
        sqlx::query(&format!(
            "SELECT activation_generation FROM {}.deployment",
            self.ns
        ))
        .fetch_one(&self.db)
        .await
        .map_err(db_error)?
        .try_get(0)
        .map_err(db_error)
    }
}

#[async_trait]
impl Definitions for Store {
    async fn definition(&self, revision: &str) -> Result<Option<Definition>, PortError> {
        Store::definition(self, revision).await.map_err(port)
    }

    async fn activation_current(&self) -> Result<bool, PortError> {
        let generation = self.activation_generation().await.map_err(port)?;
        Ok(generation == self.activation_generation)
    }
}

/// A stored definition's bytes read as the definition of `revision`
/// (`Definition::from_slice` checks that its Program hashes to the
/// revision it records; this, that the revision is the row's).
///
/// # Errors
/// `state-tampered`.
pub(crate) fn read_definition(revision: &str, bytes: &[u8]) -> Result<Definition, DatabaseError> {
    let tampered = |e: String| {
        DatabaseError::refused(
            "state-tampered",
            format!("stored definition {revision}: {e}"),
            "investigate the database",
        )
    };
    let definition = Definition::from_slice(bytes).map_err(tampered)?;
    if definition.revision != revision {
        return Err(tampered(format!(
            "it is the definition of revision {}",
            definition.revision
        )));
    }
    Ok(definition)
}
