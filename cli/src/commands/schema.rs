//! `coordinatorctl schema` (not built yet).

use clap::Args;

/// Arguments of `schema`.
#[derive(Args, Debug)]
pub struct SchemaArgs {}

/// Runs the command; returns the exit code.
pub fn run(_args: SchemaArgs) -> u8 {
    eprintln!("coordinatorctl schema: not available in this build");
    crate::report::EXIT_UNAVAILABLE
}
