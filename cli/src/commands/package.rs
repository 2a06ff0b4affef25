//! `coordinatorctl package --project D --output OUT`: runs the scenarios and,
//! only when every case passes, writes an immutable package (SPEC §4):
//! `definition.json` (the compiled Program in canonical JSON, with its
//! revision) and `SHA256SUMS`. Prints `created: OUT` and
//! `package digest: sha256:<hex>` (the SHA-256 of `SHA256SUMS`).
//!
//! Refuses an existing OUT; writes nothing on any failure.

use std::path::PathBuf;

use clap::Args;
use coordinator_ir::Definition;
use serde::Serialize;

use crate::codes;
use crate::commands::test::compile_and_run;
use crate::report::{self, EXIT_OK, EXIT_REFUSED, EXIT_UNAVAILABLE};
use crate::Format;

/// Arguments of `package`.
#[derive(Args, Debug)]
pub struct PackageArgs {
    /// The project directory.
    #[arg(long, value_name = "DIR")]
    pub project: PathBuf,
    /// The package directory to create; it must not exist.
    #[arg(long, value_name = "DIR")]
    pub output: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PackageExtra {
    output: String,
    package_digest: Option<String>,
    workflow_revision: Option<String>,
    failed_cases: Vec<String>,
}

/// Runs `package`; returns the exit code.
pub fn run(args: PackageArgs) -> u8 {
    let output = args.output.display().to_string();
    if args.output.exists() {
        let diag = coordinator_source::Diagnostic::error(
            codes::PACKAGE_EXISTS,
            coordinator_source::Located {
                file: output.clone(),
                ..Default::default()
            },
            "the output path already exists; a package is written only into a new directory",
            "Choose a new --output directory, or remove this path first.",
        );
        finish(&args, EXIT_REFUSED, &[diag], &output, None, Vec::new());
        return EXIT_REFUSED;
    }
    let (program, outcome) = compile_and_run(&args.project, None);
    let failed: Vec<String> = outcome
        .reports
        .iter()
        .filter(|r| !r.passed)
        .map(|r| r.id.clone())
        .collect();
    let code = report::exit_code(&outcome.diagnostics);
    let (Some(program), true) = (program, outcome.all_passed()) else {
        let code = if code == EXIT_OK { EXIT_REFUSED } else { code };
        let mut diags = outcome.diagnostics.clone();
        if !failed.is_empty() {
            diags.push(coordinator_source::Diagnostic::error(
                codes::PACKAGE_SCENARIOS_FAILED,
                coordinator_source::Located {
                    file: args.project.join("scenarios.yaml").display().to_string(),
                    ..Default::default()
                },
                format!(
                    "{} of {} scenario cases failed ({}); nothing was written",
                    failed.len(),
                    outcome.reports.len(),
                    failed.join(", ")
                ),
                format!(
                    "Run coordinatorctl test --project {} and fix the failing cases.",
                    args.project.display()
                ),
            ));
        }
        finish(&args, code, &diags, &output, None, failed);
        return code;
    };
    let definition = Definition::new(program);
    let revision = definition.revision.clone();
    match coordinator_runtime::package::write_package(&args.output, &definition) {
        Ok(digest) => {
            finish(
                &args,
                EXIT_OK,
                &outcome.diagnostics,
                &output,
                Some((digest, revision)),
                failed,
            );
            EXIT_OK
        }
        Err(e) => {
            errln!(
                "error[{code}] {output}\n  cannot write the package: {e}; nothing was written\n  next: Check that the parent directory exists, is writable and has room.\n1 error, 0 warnings in 1 file", code = codes::PACKAGE_WRITE);
            EXIT_UNAVAILABLE
        }
    }
}

fn finish(
    args: &PackageArgs,
    code: u8,
    diags: &[coordinator_source::Diagnostic],
    output: &str,
    done: Option<(String, String)>,
    failed: Vec<String>,
) {
    match args.format {
        Format::Json => report::print_json(
            "package",
            code == EXIT_OK,
            if code == EXIT_OK {
                "created"
            } else {
                "refused"
            },
            diags,
            PackageExtra {
                output: output.to_owned(),
                package_digest: done.as_ref().map(|d| d.0.clone()),
                workflow_revision: done.as_ref().map(|d| d.1.clone()),
                failed_cases: failed,
            },
        ),
        Format::Text => {
            report::print_diagnostics(diags);
            if let Some((digest, _)) = done {
                outln!("created: {output}");
                outln!("package digest: {digest}");
            }
        }
    }
}
