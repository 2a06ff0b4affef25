//! The PostgreSQL [`FlowControl`]: a connection's `limits` and a
//! product's `Retry-After` in the namespace's unlogged `connection_*`
//! tables, shared by every process of the deployment (docs/decisions.md
//! "Flow control is shared through PostgreSQL"). A call's turn is one
//! statement (`take_call_slot`, [`crate::schema::flow_routines`]), asked
//! only when a process's share runs out; giving slots back is another,
//! and only on connections with `inFlight`.

use std::collections::BTreeMap;

use coordinator_ir::instant::Instant;
use coordinator_ports::flow::{ConnectionFlow, FlowControl, FlowLimit, SlotAnswer, SlotRequest};
use coordinator_ports::store::StoreError as PortError;
use sqlx::Row;

use super::errors::{pdb, tampered};
use super::Store;

/// An instant as the tables hold it: Unix seconds with the fraction.
fn seconds(at: &Instant) -> f64 {
    at.unix_nanos() as f64 / 1e9
}

/// A holder's id as the tables hold it (a `bigint`: its low 63 bits).
fn holder(id: u64) -> i64 {
    i64::try_from(id & (i64::MAX as u64)).unwrap_or(0)
}

/// Unix seconds with a fraction, as the tables hold them, as an instant.
fn instant(seconds: f64) -> Instant {
    let whole = seconds.floor();
    // A fraction of a second in nanoseconds fits in u32; the cast saturates.
    let nanos = ((seconds - whole) * 1e9).round() as u32;
    Instant::from_unix_seconds_and_nanos(whole as i64, nanos.min(999_999_999))
}

#[async_trait::async_trait]
impl FlowControl for Store {
    async fn take_call_slot(&self, request: &SlotRequest<'_>) -> Result<SlotAnswer, PortError> {
        let ns = &self.ns;
        let count = |n: u32| i32::try_from(n).unwrap_or(i32::MAX);
        let row = sqlx::query(&format!(
            "SELECT held_by, wait_until, slots_held, tokens_taken
               FROM {ns}.take_call_slot($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
        ))
        .bind(request.connection)
        .bind(holder(request.holder))
        .bind(i64::try_from(request.job_id).unwrap_or(i64::MAX))
        .bind(seconds(&request.now))
        .bind(seconds(&request.held_until))
        .bind(request.slots.map(|a| count(a.limit)))
        .bind(request.slots.map(|a| count(a.needed)))
        .bind(request.slots.map(|a| count(a.wanted)))
        .bind(request.tokens.map(|a| a.per_second))
        .bind(request.tokens.map(|a| a.capacity))
        .bind(request.tokens.map(|a| count(a.needed)))
        .bind(request.tokens.map(|a| count(a.wanted)))
        .fetch_one(&self.db)
        .await
        .map_err(pdb)?;
        let held_by: Option<String> = row.try_get(0).map_err(pdb)?;
        let until: Option<f64> = row.try_get(1).map_err(pdb)?;
        let limit = match held_by.as_deref() {
            None => {
                let n = |i: usize| -> Result<u32, PortError> {
                    let n: i32 = row.try_get(i).map_err(pdb)?;
                    u32::try_from(n).map_err(|_| tampered(format!("take_call_slot answered {n}")))
                };
                return Ok(SlotAnswer::Granted {
                    slots: n(2)?,
                    tokens: n(3)?,
                });
            }
            Some("in-flight") => FlowLimit::InFlight,
            Some("rate") => FlowLimit::Rate,
            Some("retry-after") => FlowLimit::RetryAfter,
            Some(other) => return Err(tampered(format!("take_call_slot answered `{other}`"))),
        };
        let until = until.ok_or_else(|| tampered("take_call_slot answered no wait"))?;
        Ok(SlotAnswer::Wait {
            limit,
            until: instant(until),
        })
    }

    async fn give_back_call_slots(
        &self,
        connection: &str,
        holder_id: u64,
        keep: u32,
    ) -> Result<(), PortError> {
        let ns = &self.ns;
        if keep == 0 {
            sqlx::query(&format!(
                "DELETE FROM {ns}.connection_calls WHERE connection = $1 AND holder = $2"
            ))
            .bind(connection)
            .bind(holder(holder_id))
            .execute(&self.db)
            .await
            .map_err(pdb)?;
        } else {
            sqlx::query(&format!(
                "UPDATE {ns}.connection_calls SET slots = $3
                  WHERE connection = $1 AND holder = $2 AND slots > $3"
            ))
            .bind(connection)
            .bind(holder(holder_id))
            .bind(i32::try_from(keep).unwrap_or(i32::MAX))
            .execute(&self.db)
            .await
            .map_err(pdb)?;
        }
        Ok(())
    }

    async fn hold_back_connection(
        &self,
        connection: &str,
        until: Instant,
    ) -> Result<(), PortError> {
        let ns = &self.ns;
        sqlx::query(&format!(
            "INSERT INTO {ns}.connection_flow AS f (connection, tokens, refilled_at, retry_after_until)
                  VALUES ($1, 0, $2, $2)
             ON CONFLICT (connection) DO UPDATE
                SET retry_after_until = greatest(f.retry_after_until, excluded.retry_after_until)"
        ))
        .bind(connection)
        .bind(seconds(&until))
        .execute(&self.db)
        .await
        .map_err(pdb)?;
        Ok(())
    }

    async fn held_back_until(&self, connection: &str) -> Result<Option<Instant>, PortError> {
        let ns = &self.ns;
        let until: Option<Option<f64>> = sqlx::query_scalar(&format!(
            "SELECT retry_after_until FROM {ns}.connection_flow WHERE connection = $1"
        ))
        .bind(connection)
        .fetch_optional(&self.db)
        .await
        .map_err(pdb)?;
        Ok(until.flatten().map(instant))
    }

    async fn flows(&self, now: Instant) -> Result<BTreeMap<String, ConnectionFlow>, PortError> {
        let ns = &self.ns;
        let grace = coordinator_ports::flow::WAIT_GRACE_SECONDS;
        let rows = sqlx::query(&format!(
            "SELECT f.connection,
                    (SELECT coalesce(sum(c.slots), 0)::bigint FROM {ns}.connection_calls c
                      WHERE c.connection = f.connection AND c.held_until > $1),
                    (SELECT count(*) FROM {ns}.connection_waits w
                       JOIN {ns}.jobs j ON j.job_id = w.job_id AND j.state = 'ready'
                      WHERE w.connection = f.connection AND w.waiting_until > $1 - {grace})
               FROM {ns}.connection_flow f"
        ))
        .bind(seconds(&now))
        .fetch_all(&self.db)
        .await
        .map_err(pdb)?;
        let mut out = BTreeMap::new();
        for row in rows {
            let count = |i: usize| -> Result<u64, PortError> {
                let n: i64 = row.try_get(i).map_err(pdb)?;
                Ok(u64::try_from(n).unwrap_or(0))
            };
            out.insert(
                row.try_get(0).map_err(pdb)?,
                ConnectionFlow {
                    in_flight: count(1)?,
                    waiting: count(2)?,
                },
            );
        }
        Ok(out)
    }
}
