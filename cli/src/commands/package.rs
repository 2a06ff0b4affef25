//! `coordinatorctl package` (not built yet).

use clap::Args;

/// Arguments of `package`.
#[derive(Args, Debug)]
pub struct PackageArgs {}

/// Runs the command; returns the exit code.
pub fn run(_args: PackageArgs) -> u8 {
    eprintln!("coordinatorctl package: not available in this build");
    crate::report::EXIT_UNAVAILABLE
}
