//! Moving a waiting run to another revision of its workflow (issue 34,
//! docs/decisions.md "Moving waiting runs"): the port [`RunMoves`], what
//! one move writes ([`RunMove`]) and what the run's ledger keeps of it
//! ([`MoveRecord`]).

use std::collections::BTreeMap;

use async_trait::async_trait;
use coordinator_ir::instant::Instant;
use coordinator_vm::RunState;
use serde::{Deserialize, Serialize};

use super::{StepLedger, StoreError};

/// One move of a run, as its ledger keeps it (on the entry of A's wait
/// step, [`StepLedger::moves`]): when, from which revision and step to
/// which, under which certificate. No payload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MoveRecord {
    /// When the move was committed, a whole second of the engine's clock
    /// (stored as Unix seconds, `at_unix`).
    #[serde(rename = "at_unix", with = "crate::clock::unix_seconds")]
    pub at: Instant,
    /// The revision the run was on (`sha256:<hex>`).
    pub from_revision: String,
    /// The revision the run is on after the move.
    pub to_revision: String,
    /// The wait step of the revision it left.
    pub from_step: String,
    /// The step of the new revision it waits at.
    pub to_step: String,
    /// The digest of the move certificate that allowed it
    /// (`sha256:<hex>`, `coordinator_ir::moves::MoveCertificate::digest`).
    pub certificate: String,
}

/// What [`RunMoves::commit_move`] writes: the run's new revision, its
/// moved state, its ledger with the move recorded, the bindings of the new
/// revision's connections, and the rename of the wait's observation.
#[derive(Clone, Debug, PartialEq)]
pub struct RunMove {
    /// The run.
    pub run_id: String,
    /// When the engine commits, its clock's reading (a store keeps its
    /// whole second as the run's `updated_at`).
    pub at: Instant,
    /// The version read: the move fails with [`StoreError::Conflict`] if
    /// the stored version differs.
    pub expected_version: u64,
    /// The revision the run was read on (A): the move fails with
    /// [`StoreError::Conflict`] if the run is on another one.
    pub from_revision: String,
    /// The revision the run moves to (B); a store that keeps definitions
    /// must hold it.
    pub to_revision: String,
    /// A's wait step (the observation job of a `wait-for` names it).
    pub from_step: String,
    /// B's step the run waits at: a `wait-for`'s observation job is
    /// renamed to it. A wait's timer job (a `wait-until`'s wake, a
    /// `wait-for`'s timeout) and the deadline name no step: kept as they are.
    pub to_step: String,
    /// The moved state (the VM's `move_waiting_run`).
    pub state: RunState,
    /// The new ledger (with the move's [`MoveRecord`]).
    pub ledger: BTreeMap<String, StepLedger>,
    /// The binding digest of each connection B uses, by name (replaces
    /// the run's recorded bindings: the live-binding check holds the run
    /// to B's connections from now on).
    pub bindings: BTreeMap<String, String>,
}

/// Moving waiting runs: the one write an operator's move makes.
#[async_trait]
pub trait RunMoves: Send + Sync {
    /// Commits `run_move` atomically (one statement): only if the run's
    /// version is still `expected_version`, it is on `from_revision`, has
    /// not ended and its payloads were not erased, its revision becomes
    /// `to_revision`, its state, ledger and bindings the move's, its
    /// version +1; its observation jobs for `from_step` are renamed to
    /// `to_step`; every other job is kept. Returns the new version.
    ///
    /// # Errors
    /// [`StoreError::NotFound`] for no such run; [`StoreError::Conflict`]
    /// when the run moved on meanwhile (another version, another revision,
    /// ended or erased): nothing changed.
    async fn commit_move(&self, run_move: &RunMove) -> Result<u64, StoreError>;
}

/// Every move of a run, from its ledger, oldest first.
pub fn moves_of(ledger: &BTreeMap<String, StepLedger>) -> Vec<&MoveRecord> {
    let mut moves: Vec<&MoveRecord> = ledger.values().flat_map(|l| l.moves.iter()).collect();
    moves.sort_by_key(|m| m.at);
    moves
}
