//! [`RunMoves`]: a waiting run moved to another revision of its workflow
//! in one statement (docs/decisions.md "Moving waiting runs").

use async_trait::async_trait;
use coordinator_ports::store::{RunMove, RunMoves, StoreError as PortError};
use sqlx::Row;

use super::columns::{at_instant, effect_unknown, wait_column};
use super::errors::pdb;
use super::Store;

#[async_trait]
impl RunMoves for Store {
    async fn commit_move(&self, run_move: &RunMove) -> Result<u64, PortError> {
        let ns = &self.ns;
        // One statement: the run updated under its version, its revision,
        // that it has not ended and was not erased; then its observation
        // of A's wait step renamed to B's (only if the run was updated).
        let sql = format!(
            "WITH upd AS (
                   UPDATE {ns}.runs r SET revision = $3, version = r.version + 1,
                          updated_at = $4, key_version = $5, sealed_state = $6,
                          ledger = $7::jsonb, bindings = $8::jsonb, effect_unknown = $9,
                          wait = $10
                    WHERE r.run_id = $1 AND r.version = $2 AND r.revision = $11
                      AND NOT r.ended AND r.payload_erased_at IS NULL
                RETURNING r.run_id, r.version),
                  renamed AS (
                   UPDATE {ns}.jobs j SET step = $13,
                          detail = jsonb_set(j.detail, '{{step}}', to_jsonb($13::text))
                    WHERE j.run_id = ANY(ARRAY(SELECT run_id FROM upd))
                      AND j.kind = 'observe' AND j.step = $12)
             SELECT version FROM upd"
        );
        let ledger = serde_json::to_string(&run_move.ledger).unwrap_or_else(|_| "{}".into());
        let bindings = serde_json::to_string(&run_move.bindings).unwrap_or_else(|_| "{}".into());
        let row = sqlx::query(&sql)
            .bind(&run_move.run_id)
            .bind(i64::try_from(run_move.expected_version).unwrap_or(-1))
            .bind(&run_move.to_revision)
            .bind(at_instant(&run_move.state.now))
            .bind(self.keyring.active_version() as i32)
            .bind(self.seal_json(&run_move.run_id, "state", "", &run_move.state))
            .bind(ledger)
            .bind(bindings)
            .bind(effect_unknown(&run_move.state))
            .bind(wait_column(&run_move.state))
            .bind(&run_move.from_revision)
            .bind(&run_move.from_step)
            .bind(&run_move.to_step)
            .fetch_optional(&self.db)
            .await
            .map_err(pdb)?;
        if let Some(row) = row {
            let version: i64 = row.try_get("version").map_err(pdb)?;
            return Ok(u64::try_from(version).unwrap_or(0));
        }
        let exists = sqlx::query(&format!("SELECT 1 FROM {ns}.runs WHERE run_id = $1"))
            .bind(&run_move.run_id)
            .fetch_optional(&self.db)
            .await
            .map_err(pdb)?;
        Err(if exists.is_some() {
            PortError::Conflict
        } else {
            PortError::NotFound
        })
    }
}
