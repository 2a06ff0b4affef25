//! `coordinatorctl`: the offline toolchain (`init`, `check`, `explain`,
//! `test`, `package`, `types`, `schema`, `move plan`, `convert` (a
//! project of the earlier format), and `lsp`, the language server),
//! the deployment commands (`plan`,
//! `apply`, `deployment-status`) and the caller and operator commands over
//! the service's HTTP API (`status`, `list`, `inspect`, `cancel`,
//! `retry-same`, `reconcile`, `doctor`, the holds, `retain`).
//!
//! Exit codes (SPEC §2.3): 0 accepted, 1 refused, 2 usage, 3 resource
//! unavailable. Diagnostics go to stderr, results to stdout.
//!
//! A library: the `coordinatorctl` binary is built by the
//! `registry-coordinator` package (`server/src/bin/coordinatorctl.rs`),
//! which calls [`main`], so that seed 004's
//! `cargo build --locked --release -p registry-coordinator --bins` builds
//! both binaries.

pub mod codes;
#[macro_use]
mod output;
mod commands;
mod report;
mod rich;
mod service_client;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use commands::deploy::Which;

/// Registry Coordinator's command-line tool.
#[derive(Parser, Debug)]
#[command(name = "coordinatorctl", about)]
struct Cli {
    /// The deployment's runtime file (`runtime.yaml`), for deployment commands
    /// and `check` of a complete deployment.
    #[arg(long = "runtime-config", value_name = "FILE")]
    runtime_config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

/// Output format of a command.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum, Default)]
pub enum Format {
    /// Lines for people.
    #[default]
    Text,
    /// One `CoordinatorCtlReport` JSON object on stdout.
    Json,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Create a starter project (a delayed follow-up) in a new directory.
    Init {
        /// The directory to create; its base name becomes the project id.
        #[arg(long, value_name = "DIR")]
        directory: PathBuf,
    },
    /// Compile and check a project offline.
    Check(commands::check::CheckArgs),
    /// List a project's steps breadth-first from `start`.
    Explain(commands::explain::ExplainArgs),
    /// Draw a project's steps and edges (SVG, DOT or Mermaid).
    Graph(commands::graph::GraphArgs),
    /// Run the project's scenarios on a virtual clock.
    Test(commands::test::TestArgs),
    /// Run the scenarios, then write an immutable package.
    Package(commands::package::PackageArgs),
    /// Export a typed caller (TypeScript or Python) for the workflow.
    Types(commands::types::TypesArgs),
    /// Print the JSON Schema of a file format.
    Schema(commands::schema::SchemaArgs),
    /// Print the OpenAPI 3.1 document of the service's HTTP API.
    Openapi,
    /// Translate a project of the earlier format (v1alpha1) into this one
    /// (docs/convert.md).
    Convert(commands::convert::ConvertArgs),
    /// Move waiting runs to a new revision: `move plan` proves offline which
    /// can move and writes the certificate.
    Move(commands::moves::MoveArgs),
    /// Scenario cases from real runs: `scenario export` writes an ended run
    /// as a case that passes on its revision (through the service).
    Scenario(commands::scenario::ScenarioArgs),
    /// Show what `apply` would do to each workflow (runtime credential only).
    Plan(commands::deploy::PlanArgs),
    /// Migrate, grant the runtime role and record the active packages (the
    /// only command that uses the migration credential).
    Apply(commands::deploy::PlanArgs),
    /// Verify the deployment as the service would and print its status.
    DeploymentStatus(commands::deploy::StatusArgs),
    /// Copy secret files owned by another user (a Kubernetes Secret volume)
    /// into a new owner-only directory the service reads (docs/install.md).
    CopySecrets(commands::copy_secrets::CopySecretsArgs),
    #[command(flatten)]
    Ops(commands::ops::OpsCommand),
    /// Serve the Language Server Protocol on stdin and stdout (diagnostics
    /// as you type, hover, go-to-definition, completion); see docs/editors.md.
    Lsp(commands::lsp::LspArgs),
    /// Serve the operator console on a loopback address (the CLI holds the
    /// token; the browser talks only to the console).
    Console(commands::console::ConsoleArgs),
}

fn deploy(which: Which, config: &Option<PathBuf>, remove: &[String], format: Format) -> u8 {
    commands::deploy::run(which, config.as_deref(), remove, format)
}

/// Parses the command line and runs the command; the process's exit code.
/// `version` is what `--version` prints after `coordinatorctl`: the
/// product package's version and source revision
/// (`coordinator::version::VERSION_LINE`, recorded when the binaries are
/// built), so that both binaries report the same build.
pub fn main(version: &'static str) -> ExitCode {
    let matches = Cli::command().version(version).get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let code = match cli.command {
        Command::Init { directory } => commands::init::run(&directory),
        Command::Check(args) => commands::check::run(args, cli.runtime_config.as_deref()),
        Command::Explain(args) => commands::explain::run(args),
        Command::Graph(args) => commands::graph::run(args),
        Command::Test(args) => commands::test::run(args),
        Command::Package(args) => commands::package::run(args),
        Command::Types(args) => commands::types::run(args),
        Command::Schema(args) => commands::schema::run(args),
        Command::Openapi => commands::openapi::run(),
        Command::CopySecrets(args) => commands::copy_secrets::run(&args),
        Command::Move(args) => commands::moves::run(args),
        Command::Scenario(args) => commands::scenario::run(args),
        Command::Convert(args) => commands::convert::run(args),
        Command::Plan(a) => deploy(
            Which::Plan,
            &a.runtime_config.or(cli.runtime_config),
            &a.remove_workflow,
            a.format,
        ),
        Command::Apply(a) => deploy(
            Which::Apply,
            &a.runtime_config.or(cli.runtime_config),
            &a.remove_workflow,
            a.format,
        ),
        Command::DeploymentStatus(a) => deploy(
            Which::Status,
            &a.runtime_config.or(cli.runtime_config),
            &[],
            a.format,
        ),
        Command::Ops(c) => commands::ops::run(c),
        Command::Lsp(args) => commands::lsp::run(args),
        Command::Console(args) => commands::console::run(args),
    };
    ExitCode::from(code)
}
