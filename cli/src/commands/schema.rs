//! `coordinatorctl schema --kind project|scenarios|runtime|explain|coverage|move-certificate`:
//! prints the JSON Schema (draft 2020-12) of a file format, generated from
//! the Rust types that read it (SPEC §1), of `explain --format json`'s
//! report, of the `coverage` member of `test --coverage --format json`, or
//! of the certificate `move plan` writes.
//! `docs/schemas/` keeps copies, checked by tests.

use clap::{Args, ValueEnum};

use crate::report::EXIT_OK;

/// Which format.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// `workflow.yaml` (CoordinatorProject).
    Project,
    /// `scenarios.yaml` (CoordinatorScenarios).
    Scenarios,
    /// `runtime.yaml` (CoordinatorRuntimeConfig).
    Runtime,
    /// `explain --format json`'s report with the typed IR (CoordinatorExplainReport).
    Explain,
    /// The `coverage` member of `test --coverage --format json` (docs/coverage.md).
    Coverage,
    /// The certificate `move plan` writes (CoordinatorMoveCertificate).
    MoveCertificate,
}

/// Arguments of `schema`.
#[derive(Args, Debug)]
pub struct SchemaArgs {
    /// The format.
    #[arg(long, value_enum)]
    pub kind: Kind,
}

/// The schema text of a format: pretty JSON and a final newline, exactly as
/// committed under `docs/schemas/`.
pub fn schema_text(kind: Kind) -> String {
    let value = match kind {
        Kind::Project => coordinator_compiler::project_schema(),
        Kind::Scenarios => coordinator_scenario::file::scenarios_schema(),
        Kind::Runtime => coordinator_runtime::runtime_schema(),
        Kind::Explain => super::explain::report_schema(),
        Kind::Coverage => super::test::coverage::schema(),
        Kind::MoveCertificate => coordinator_compiler::moves::certificate_schema(),
    };
    let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
    text.push('\n');
    text
}

/// Runs `schema`; returns the exit code.
pub fn run(args: SchemaArgs) -> u8 {
    out!("{}", schema_text(args.kind));
    EXIT_OK
}
