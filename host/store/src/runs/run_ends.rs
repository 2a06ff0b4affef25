//! Run ends relayed between the processes of one deployment, for the
//! callers waiting for them (`GET /v1/runs/{run}` with `Prefer: wait=N`;
//! docs/decisions.md "Waiting for a run's end"): PostgreSQL `NOTIFY` on
//! one channel per namespace (the namespace's name), heard by one
//! `LISTEN` connection per process ([`Store::listen_run_ends`]).
//!
//! A notice is sent only for a run some caller waits for, never on the
//! commit path of a run nobody waits for, and never inside a commit: in
//! a statement of its own after the end is committed
//! ([`Store::notify_run_ends`]), with `synchronous_commit` off for that
//! one transaction (`NOTIFY` assigns it a transaction id, so it would
//! otherwise wait for its own WAL flush; a notice lost in a crash is a
//! wait answered at N, nothing more). Under `poolingMode: transaction`
//! no session can `LISTEN`, and nothing is relayed.

use coordinator_runtime::config::PoolingMode;
use sqlx::postgres::PgListener;

use super::Store;
use crate::{db_error, DatabaseError};

/// What the run-end channel carried ([`RunEndListener::heard`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Heard {
    /// One notice's payload, as [`Store::notify_run_ends`] sent it.
    Notice(String),
    /// The connection was lost and is back: notices sent meanwhile are
    /// lost.
    Reconnected,
}

/// One process's `LISTEN` connection to the run-end channel.
pub struct RunEndListener {
    listener: PgListener,
}

impl std::fmt::Debug for RunEndListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunEndListener").finish_non_exhaustive()
    }
}

impl RunEndListener {
    /// The next notice on the channel, or [`Heard::Reconnected`] after a
    /// lost connection was made again.
    ///
    /// # Errors
    /// The database's (the connection could not be made again; call
    /// again later).
    pub async fn heard(&mut self) -> Result<Heard, DatabaseError> {
        match self.listener.try_recv().await.map_err(db_error)? {
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

    /// A `LISTEN` connection to the run-end channel, held apart from the
    /// pool's statements (it takes one of the pool's connections for as
    /// long as it lives); `None` under `poolingMode: transaction`.
    ///
    /// # Errors
    /// The database's.
    pub async fn listen_run_ends(&self) -> Result<Option<RunEndListener>, DatabaseError> {
        if self.db.pooling() == PoolingMode::Transaction {
            return Ok(None);
        }
        let mut listener = PgListener::connect_with(self.db.pool())
            .await
            .map_err(db_error)?;
        listener
            .listen(self.run_end_channel())
            .await
            .map_err(db_error)?;
        Ok(Some(RunEndListener { listener }))
    }

    /// Sends `payload` on the run-end channel: one statement, its own
    /// transaction, `synchronous_commit` off for it.
    ///
    /// # Errors
    /// The database's.
    pub async fn notify_run_ends(&self, payload: &str) -> Result<(), DatabaseError> {
        sqlx::query("SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, $2)")
            .bind(self.run_end_channel())
            .bind(payload)
            .fetch_optional(&self.db)
            .await
            .map_err(db_error)?;
        Ok(())
    }
}
