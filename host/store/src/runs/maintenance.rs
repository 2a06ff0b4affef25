//! Maintenance ([`Maintenance`]): retention's erasure of ended runs'
//! payloads, and the readiness ping.

use std::time::Duration;

use async_trait::async_trait;
use coordinator_ir::instant::Instant;
use coordinator_ports::store::{
    Erasure, Maintenance, Owner, StoreError as PortError, MAX_ERASE_LIMIT,
};
use coordinator_runtime::clock::{Clock, ClockSample};
use sqlx::Row;

use super::columns::at_instant;
use super::errors::{pdb, port, tampered};
use super::Store;

/// How long `ping` waits for the database before `/ready` says 503.
pub const PING_TIMEOUT: Duration = Duration::from_secs(2);

#[async_trait]
impl Maintenance for Store {
    async fn erase_payloads(
        &self,
        before: Instant,
        limit: u32,
        now: Instant,
    ) -> Result<Erasure, PortError> {
        let ns = &self.ns;
        // Ended, not held, no unknown effect, no job left, not yet erased.
        let qualifies = format!(
            "r.ended AND NOT r.attention AND NOT r.effect_unknown AND r.payload_erased_at IS NULL
             AND r.ended_at IS NOT NULL AND r.ended_at < $1
             AND NOT EXISTS (SELECT 1 FROM {ns}.jobs j WHERE j.run_id = r.run_id)"
        );
        let limit = i64::from(limit.clamp(1, MAX_ERASE_LIMIT));
        let mut tx = self.db.begin().await.map_err(port)?;
        let rows = sqlx::query(&format!(
            "SELECT r.run_id, r.sealed_owner FROM {ns}.runs r WHERE {qualifies}
              ORDER BY r.ended_at, r.seq LIMIT $2 FOR UPDATE SKIP LOCKED"
        ))
        .bind(at_instant(&before))
        .bind(limit)
        .fetch_all(tx.on())
        .await
        .map_err(pdb)?;
        let active = self.keyring.active_version() as i32;
        for row in &rows {
            let id: String = row.try_get(0).map_err(pdb)?;
            let sealed: Option<Vec<u8>> = row.try_get(1).map_err(pdb)?;
            let sealed = sealed.ok_or_else(|| tampered(format!("run {id} has no sealed owner")))?;
            // The owner stays (status and list answer its owner), re-sealed
            // under the active version, so the version the run was admitted
            // under holds nothing of it any more.
            let owner: Owner = self.open_json(&id, "owner", "", &sealed).map_err(port)?;
            sqlx::query(&format!(
                "UPDATE {ns}.runs SET sealed_input = NULL, sealed_state = NULL,
                    sealed_output = NULL, sealed_owner = $2, key_version = $3,
                    input_key_version = $3, payload_erased_at = $4, version = version + 1
                  WHERE run_id = $1"
            ))
            .bind(&id)
            .bind(self.seal_json(&id, "owner", "", &owner))
            .bind(active)
            .bind(at_instant(&now))
            .execute(tx.on())
            .await
            .map_err(pdb)?;
        }
        let more: bool = sqlx::query(&format!(
            "SELECT EXISTS (SELECT 1 FROM {ns}.runs r WHERE {qualifies})"
        ))
        .bind(at_instant(&before))
        .fetch_one(tx.on())
        .await
        .map_err(pdb)?
        .try_get(0)
        .map_err(pdb)?;
        tx.commit().await.map_err(port)?;
        Ok(Erasure {
            erased: u32::try_from(rows.len()).unwrap_or(u32::MAX),
            more,
        })
    }

    /// Asks one pooled connection's server whether it may be written to:
    /// a server in recovery or read-only is refused as `database.read-only`
    /// (and, with several servers in the URL, the list is walked again).
    async fn ping(&self) -> Result<(), PortError> {
        let probe = self.db.check_usable();
        let failed = match tokio::time::timeout(PING_TIMEOUT, probe).await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(e)) if e.code == "database.read-only" => e,
            // No connection in time: the servers are asked directly why
            // (gone, or answering but read-only, as when an address moved
            // to a standby before its promotion).
            Ok(Err(_)) | Err(_) => {
                match tokio::time::timeout(PING_TIMEOUT, self.db.diagnose()).await {
                    Ok(e) => e,
                    Err(_) => {
                        return Err(PortError::Unavailable(
                            "store-unavailable: the database did not answer in time".into(),
                        ))
                    }
                }
            }
        };
        if failed.code == "database.read-only" {
            Err(PortError::Refused {
                code: failed.code,
                message: failed.message,
            })
        } else {
            Err(port(failed))
        }
    }

    /// Reads `clock_timestamp()` `count` times on one pooled connection
    /// (the simple query protocol: one round trip, nothing prepared, so a
    /// pooler in transaction mode passes it through), as microseconds
    /// since 1970, each timed on the monotonic clock; within
    /// [`PING_TIMEOUT`].
    async fn sample_database_clock(
        &self,
        local: &dyn Clock,
        count: usize,
    ) -> Result<Vec<ClockSample>, PortError> {
        let read = async {
            let mut connection = self.db.pool().acquire().await.map_err(pdb)?;
            let mut samples = Vec::with_capacity(count);
            for _ in 0..count {
                let sent_at = local.now();
                let sent_monotonic = std::time::Instant::now();
                let row = sqlx::Executor::fetch_one(
                    &mut *connection,
                    "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint",
                )
                .await
                .map_err(pdb)?;
                let round_trip = sent_monotonic.elapsed();
                let micros: i64 = row.try_get(0).map_err(pdb)?;
                samples.push(ClockSample {
                    sent_at,
                    sent_monotonic,
                    round_trip,
                    database: Instant::from_unix_seconds_and_nanos(
                        micros.div_euclid(1_000_000),
                        u32::try_from(micros.rem_euclid(1_000_000) * 1_000).unwrap_or(0),
                    ),
                });
            }
            Ok(samples)
        };
        tokio::time::timeout(PING_TIMEOUT, read)
            .await
            .unwrap_or_else(|_| {
                Err(PortError::Unavailable(
                    "store-unavailable: the database did not answer in time".into(),
                ))
            })
    }
}
