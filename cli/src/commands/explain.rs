//! `coordinatorctl explain` (not built yet).

use clap::Args;

/// Arguments of `explain`.
#[derive(Args, Debug)]
pub struct ExplainArgs {}

/// Runs the command; returns the exit code.
pub fn run(_args: ExplainArgs) -> u8 {
    eprintln!("coordinatorctl explain: not available in this build");
    crate::report::EXIT_UNAVAILABLE
}
