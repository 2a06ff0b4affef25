//! `coordinatorctl test` (not built yet).

use clap::Args;

/// Arguments of `test`.
#[derive(Args, Debug)]
pub struct TestArgs {}

/// Runs the command; returns the exit code.
pub fn run(_args: TestArgs) -> u8 {
    eprintln!("coordinatorctl test: not available in this build");
    crate::report::EXIT_UNAVAILABLE
}
