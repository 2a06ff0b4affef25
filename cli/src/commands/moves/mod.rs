//! `coordinatorctl move ...`: moving waiting runs to a new revision
//! (docs/operations.md "Moving waiting runs"). `move plan` (`plan.rs`)
//! proves offline which waits of revision A can move to revision B and
//! writes the certificate; the decision is the compiler's
//! (`coordinator_compiler::moves`), the certificate `coordinator_ir::moves`.

use clap::{Args, Subcommand};

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
}

/// Runs a `move` subcommand; returns the exit code.
pub fn run(args: MoveArgs) -> u8 {
    match args.command {
        MoveCommand::Plan(a) => plan::run(a),
    }
}
