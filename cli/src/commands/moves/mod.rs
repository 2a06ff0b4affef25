//! `coordinatorctl move ...`: moving waiting runs to a new revision
//! (docs/operations.md "Moving waiting runs"). `move plan` (`plan.rs`)
//! proves offline which waits of revision A can move to revision B and
//! writes the certificate; the decision is the compiler's
//! (`coordinator_compiler::moves`), the certificate `coordinator_ir::moves`.
//! `move apply` (`apply.rs`) moves the runs through the service, with the
//! bulk actions' machinery (`ops/bulk.rs`).

use clap::{Args, Subcommand};

pub mod apply;
pub mod plan;

/// Arguments of `move`.
#[derive(Args, Debug)]
pub struct MoveArgs {
    #[command(subcommand)]
    pub command: MoveCommand,
}

/// The `move` subcommands.
#[derive(Subcommand, Debug)]
pub enum MoveCommand {
    /// Prove offline which waiting runs of revision A can resume on revision
    /// B, and write the move certificate (no database, no credential).
    Plan(plan::PlanArgs),
    /// Move the waiting runs a filter matches to the certificate's revision
    /// B, through the service (operators; `apply` B and restart the
    /// service on it first).
    Apply(apply::ApplyArgs),
}

/// Runs a `move` subcommand; returns the exit code.
pub fn run(args: MoveArgs) -> u8 {
    match args.command {
        MoveCommand::Plan(a) => plan::run(a),
        MoveCommand::Apply(a) => apply::run(a),
    }
}
