//! `coordinatorctl explain --project D [--format text|json]`: lists the
//! steps breadth-first from `start`, one line each (docs/explain.md).

use std::path::PathBuf;

use clap::Args;
use serde::Serialize;

use crate::report::{self, EXIT_OK};
use crate::Format;

/// Arguments of `explain`.
#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// The project directory (holding workflow.yaml).
    #[arg(long, value_name = "DIR")]
    pub project: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ExplainExtra<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    workflow: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    revision: Option<String>,
    steps: Vec<&'a str>,
}

/// Runs the command; returns the exit code.
pub fn run(args: ExplainArgs) -> u8 {
    let display = args.project.to_string_lossy().into_owned();
    let compiled = coordinator_compiler::compile_project(&args.project, &display);
    let code = report::exit_code(&compiled.diagnostics);
    let explain = compiled.explain.as_deref().unwrap_or_default();
    match args.format {
        Format::Json => report::print_json(
            "explain",
            code == EXIT_OK,
            if code == EXIT_OK {
                "explained"
            } else {
                "refused"
            },
            &compiled.diagnostics,
            ExplainExtra {
                workflow: compiled.workflow.as_deref(),
                revision: compiled.revision(),
                steps: explain.lines().skip(1).map(str::trim).collect(),
            },
        ),
        Format::Text => {
            report::print_diagnostics(&compiled.diagnostics);
            if code == EXIT_OK {
                out!("{explain}");
            }
        }
    }
    code
}
