//! `coordinatorctl check` (not built yet).

use clap::Args;

/// Arguments of `check`.
#[derive(Args, Debug)]
pub struct CheckArgs {}

/// Runs the command; returns the exit code.
pub fn run(_args: CheckArgs, _runtime_config: Option<&std::path::Path>) -> u8 {
    eprintln!("coordinatorctl check: not available in this build");
    crate::report::EXIT_UNAVAILABLE
}
