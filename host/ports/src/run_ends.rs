//! The run-end channel port: how the processes of one deployment tell
//! each other of the runs their callers wait for and of the runs they end
//! (`GET /v1/runs/{run}` with `Prefer: wait=N`; docs/decisions.md "Waiting
//! for a run's end"). The PostgreSQL store implements it with
//! `LISTEN`/`NOTIFY`; the service's relay (`server/src/run_end_relay.rs`)
//! takes only this port.

use async_trait::async_trait;

use crate::store::StoreError;

/// What the run-end channel carried ([`RunEndHearing::heard`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Heard {
    /// One notice's payload, as [`RunEndChannel::notify_run_ends`] sent it.
    Notice(String),
    /// The connection was lost and is back: notices sent meanwhile are
    /// lost.
    Reconnected,
}

/// One process's hearing of the run-end channel.
#[async_trait]
pub trait RunEndHearing: Send {
    /// The next notice on the channel, or [`Heard::Reconnected`] after a
    /// lost connection was made again.
    ///
    /// # Errors
    /// The store's (the connection could not be made again; call again
    /// later).
    async fn heard(&mut self) -> Result<Heard, StoreError>;
}

/// The deployment's run-end channel.
#[async_trait]
pub trait RunEndChannel: Send + Sync {
    /// Starts hearing the channel; `None` when this deployment cannot
    /// (PostgreSQL under `poolingMode: transaction`, where no session can
    /// `LISTEN`).
    ///
    /// # Errors
    /// The store's.
    async fn listen_run_ends(&self) -> Result<Option<Box<dyn RunEndHearing>>, StoreError>;

    /// Sends `payload` (one notice, UTF-8 text) on the channel to every
    /// process hearing it.
    ///
    /// # Errors
    /// The store's.
    async fn notify_run_ends(&self, payload: &str) -> Result<(), StoreError>;
}
