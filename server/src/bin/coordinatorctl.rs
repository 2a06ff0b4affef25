//! The `coordinatorctl` binary: the offline toolchain, the deployment
//! commands and the operator commands (the `coordinatorctl` library,
//! `cli/`). Built by this package so that
//! `cargo build -p registry-coordinator --bins` builds both binaries.

fn main() -> std::process::ExitCode {
    coordinatorctl::main()
}
