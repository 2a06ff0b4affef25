//! `coordinatorctl types` (not built yet).

use clap::Args;

/// Arguments of `types`.
#[derive(Args, Debug)]
pub struct TypesArgs {}

/// Runs the command; returns the exit code.
pub fn run(_args: TypesArgs) -> u8 {
    eprintln!("coordinatorctl types: not available in this build");
    crate::report::EXIT_UNAVAILABLE
}
