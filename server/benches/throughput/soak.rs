//! The `soak` phase (scripts/bench.sh --soak, driven by
//! scripts/bench-soak.sh).

use super::*;

/// Arguments of `soak`.
#[derive(Args)]
pub(crate) struct SoakArgs {
    #[command(flatten)]
    pub(crate) target: Target,
}

/// Not written yet.
pub(crate) async fn run(_a: SoakArgs) -> Result<(), Failure> {
    Err("soak is not written yet".into())
}
