//! The `coordinatorctl` binary: the offline toolchain, the deployment
//! commands and the operator commands (the `coordinatorctl` library,
//! `cli/`). Built by this package so that
//! `cargo build -p registry-coordinator --bins` builds both binaries, and
//! so that both report one version (`coordinator::version`).

fn main() -> std::process::ExitCode {
    coordinatorctl::main(coordinator::version::VERSION_LINE)
}
