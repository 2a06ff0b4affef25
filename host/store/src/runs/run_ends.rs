//! Run ends relayed between the processes of one deployment, for the
//! callers waiting for them (`GET /v1/runs/{run}` with `Prefer: wait=N`;
//! docs/decisions.md "Waiting for a run's end"): PostgreSQL `NOTIFY` on
//! one channel per namespace (the namespace's name), heard by one
//! `LISTEN` connection per process (`RunEndChannel::listen_run_ends`).
//!
//! A notice is sent only for a run some caller waits for, never on the
//! commit path of a run nobody waits for, and never inside a commit: in
//! a statement of its own after the end is committed
//! (`RunEndChannel::notify_run_ends`), with `synchronous_commit` off for that
//! one transaction (`NOTIFY` assigns it a transaction id, so it would
//! otherwise wait for its own WAL flush; a notice lost in a crash is a
//! wait answered at N, nothing more). Under `poolingMode: transaction`
//! no session can `LISTEN`, and nothing is relayed.

use async_trait::async_trait;
use coordinator_ports::run_ends::{Heard, RunEndChannel, RunEndHearing};
use coordinator_ports::store::StoreError as PortError;
use coordinator_runtime::config::PoolingMode;
use sqlx::postgres::PgListener;

use super::errors::pdb;
use super::Store;

/// One process's `LISTEN` connection to the run-end channel.
pub struct RunEndListener {
    listener: PgListener,
}

impl std::fmt::Debug for RunEndListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunEndListener").finish_non_exhaustive()
    }
}

#[async_trait]
impl RunEndHearing for RunEndListener {
    async fn heard(&mut self) -> Result<Heard, PortError> {
        match self.listener.try_recv().await.map_err(pdb)? {
            Some(notice) => Ok(Heard::Notice(notice.payload().to_owned())),
            None => Ok(Heard::Reconnected),
        }
    }
}

impl Store {
    /// This deployment's run-end channel: the namespace's name (at most 63
    /// bytes, a PostgreSQL identifier's length).
    fn run_end_channel(&self) -> &str {
        &self.ns
    }
}

/// A `LISTEN` connection to the run-end channel, held apart from the
/// pool's statements (it takes one of the pool's connections for as long
/// as it lives; `None` under `poolingMode: transaction`), and a notice as
/// one statement in its own transaction, `synchronous_commit` off for it.
#[async_trait]
impl RunEndChannel for Store {
    async fn listen_run_ends(&self) -> Result<Option<Box<dyn RunEndHearing>>, PortError> {
        if self.db.pooling() == PoolingMode::Transaction {
            return Ok(None);
        }
        let mut listener = PgListener::connect_with(self.db.pool())
            .await
            .map_err(pdb)?;
        listener.listen(self.run_end_channel()).await.map_err(pdb)?;
        Ok(Some(Box::new(RunEndListener { listener })))
    }

    async fn notify_run_ends(&self, payload: &str) -> Result<(), PortError> {
        sqlx::query("SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, $2)")
            .bind(self.run_end_channel())
            .bind(payload)
            .fetch_optional(&self.db)
            .await
            .map_err(pdb)?;
        Ok(())
    }
}
