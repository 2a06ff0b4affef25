//! The `coordinatorctl` binary end to end (one test binary): the language
//! server driven as an editor drives it (`lsp`), the rich form of `check`
//! (`rich`), seed 004's
//! author journey byte for byte (`seed004`), bad input and closed pipes
//! (`robustness`), scenario coverage (`coverage`), cases that move their run
//! to another revision (`scenario_moves`), the deployment commands on PostgreSQL
//! (`deploy_postgres`), the caller and operator commands over a real
//! service (`ops`), explain's typed IR (`explain`), the drawn graph
//! (`graph`), `move plan` (`moves`) holding waits to the moved scenario
//! cases (`plan_moved_cases`), exported cases replayed with `test
//! --cases` (`replay_cases`), both binaries' `--version` (`version`), the
//! installation files under `deploy/` (`install_files`,
//! `kubernetes_files`), `copy-secrets`, the Kubernetes init step
//! (`copy_secrets`), and `convert --from v1alpha1` on the v1alpha1
//! fixtures (`convert`).

mod convert;
mod copy_secrets;
mod coverage;
mod deploy_postgres;
mod explain;
mod graph;
mod install_files;
mod kubernetes_files;
mod lsp;
mod moves;
mod ops;
mod plan_moved_cases;
mod replay_cases;
mod rich;
mod robustness;
mod scenario_moves;
mod seed004;
mod version;

use std::path::Path;
use std::process::{Command, Output};

/// Runs the built `coordinatorctl` with `args` in `dir`.
fn ctl(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_coordinatorctl"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("coordinatorctl runs")
}
