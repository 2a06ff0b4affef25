//! `coordinatorctl check --project D [--explain] [--format text|json|rich]
//! [--runtime-config F]`: compiles and checks a project offline.
//!
//! Without `--format`, diagnostics are drawn in the rich form (`rich`: the
//! source line and a marked stretch, by `ariadne`) when stderr is a
//! terminal and `NO_COLOR` is not set, and in the text form of seed 004
//! otherwise (a pipe, a file, CI); docs/decisions.md "Rich diagnostics".
//! Both print the same count line and the same stdout.
//!
//! Text: diagnostics on stderr (warnings before the result), then on stdout
//! `Valid workflow <id> version <version>` and `Definition: <revision>`;
//! with `--explain`, the steps and the Function limits follow. With
//! `--runtime-config F`, the runtime file is checked as the author's template
//! against the project's connections, and `Valid runtime configuration`
//! follows (seed 004).
//!
//! `coordinatorctl --runtime-config F check` (no `--project`) checks a
//! complete deployment file instead: the `deployment` section is required and
//! every pinned package is verified against its digest, offline (SPEC §9).

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use coordinator_source::Diagnostic;
use serde::Serialize;

use coordinator_runtime::{check_runtime_file, Mode, RuntimeCheck};

use crate::report::{self, EXIT_OK, EXIT_REFUSED, EXIT_UNAVAILABLE, EXIT_USAGE};
use crate::Format;

/// Arguments of `check`.
#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The project directory (holding workflow.yaml). Without it, the
    /// top-level `--runtime-config` file is checked as a whole deployment.
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// Also print the steps and the Function limits.
    #[arg(long)]
    pub explain: bool,
    /// Output format [default: rich when stderr is a terminal and NO_COLOR
    /// is not set, else text].
    #[arg(long, value_enum)]
    pub format: Option<CheckFormat>,
    /// Also check a runtime file against the project.
    #[arg(long = "runtime-config", value_name = "FILE")]
    pub runtime_config: Option<PathBuf>,
}

/// Output format of `check`: the text and JSON of every command, and the
/// rich form of diagnostics.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum CheckFormat {
    /// Diagnostics in the text form of seed 004 (`error[CODE] FILE:LINE:COLUMN POINTER`).
    Text,
    /// One `CoordinatorCtlReport` JSON object on stdout.
    Json,
    /// Diagnostics with their source line and a marked stretch (colour on a
    /// terminal unless `NO_COLOR` is set); stdout as `text`.
    Rich,
}

impl CheckFormat {
    /// The format asked for, or the default: rich on a terminal without
    /// `NO_COLOR`, text otherwise.
    fn resolve(asked: Option<CheckFormat>) -> CheckFormat {
        asked.unwrap_or(if crate::rich::rich_by_default() {
            CheckFormat::Rich
        } else {
            CheckFormat::Text
        })
    }

    /// The report format (text for `rich`).
    fn report(self) -> Format {
        match self {
            CheckFormat::Json => Format::Json,
            CheckFormat::Text | CheckFormat::Rich => Format::Text,
        }
    }
}

/// Prints diagnostics on stderr in the text or the rich form.
fn print_diagnostics(diags: &[Diagnostic], format: CheckFormat) {
    if format == CheckFormat::Rich && !diags.is_empty() {
        err!(
            "{}",
            crate::rich::render(diags, crate::rich::colour_wanted())
        );
    } else {
        report::print_diagnostics(diags);
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CheckExtra<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    workflow: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    revision: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    explain: Option<Vec<&'a str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    runtime_configuration: Option<&'static str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DeploymentExtra {
    runtime_configuration: &'static str,
    packages: Vec<PackageLine>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PackageLine {
    workflow: String,
    revision: String,
    package_digest: String,
}

/// The exit code of a runtime check.
fn runtime_code(check: &RuntimeCheck) -> u8 {
    if check.resource_unavailable {
        EXIT_UNAVAILABLE
    } else if check.is_valid() {
        EXIT_OK
    } else {
        EXIT_REFUSED
    }
}

/// `coordinatorctl --runtime-config F check`: the whole deployment file.
fn run_deployment(file: &Path, format: CheckFormat) -> u8 {
    let display = file.to_string_lossy().into_owned();
    let check = check_runtime_file(file, &display, None, Mode::Deployment);
    let code = runtime_code(&check);
    let packages: Vec<PackageLine> = check
        .packages
        .iter()
        .map(|p| PackageLine {
            workflow: p.definition.program.workflow.clone(),
            revision: p.definition.revision.clone(),
            package_digest: p.digest.clone(),
        })
        .collect();
    match format.report() {
        Format::Json => report::print_json(
            "check",
            code == EXIT_OK,
            if code == EXIT_OK { "valid" } else { "refused" },
            &check.diagnostics,
            DeploymentExtra {
                runtime_configuration: if code == EXIT_OK { "valid" } else { "refused" },
                packages,
            },
        ),
        Format::Text => {
            print_diagnostics(&check.diagnostics, format);
            if code == EXIT_OK {
                for p in &packages {
                    outln!(
                        "Valid package {} {} (revision {})",
                        p.workflow,
                        p.package_digest,
                        p.revision
                    );
                }
                outln!("Valid runtime configuration");
            }
        }
    }
    code
}

/// Runs the command; returns the exit code.
pub fn run(args: CheckArgs, top_level_runtime_config: Option<&Path>) -> u8 {
    let format = CheckFormat::resolve(args.format);
    let Some(project) = args.project.as_deref() else {
        return match args.runtime_config.as_deref().or(top_level_runtime_config) {
            Some(file) => run_deployment(file, format),
            None => {
                errln!("error: check needs --project DIR, or a deployment file given as coordinatorctl --runtime-config FILE check");
                EXIT_USAGE
            }
        };
    };
    let display = project.to_string_lossy().into_owned();
    let compiled = coordinator_compiler::compile_project(project, &display);
    let mut diagnostics = compiled.diagnostics.clone();
    let runtime = args
        .runtime_config
        .as_deref()
        .or(top_level_runtime_config)
        .map(|file| {
            let shown = file.to_string_lossy().into_owned();
            check_runtime_file(file, &shown, compiled.program.as_ref(), Mode::Template)
        });
    let mut code = report::exit_code(&compiled.diagnostics);
    if let Some(check) = &runtime {
        diagnostics.extend(check.diagnostics.iter().cloned());
        coordinator_source::diagnostic::sort(&mut diagnostics);
        code = code.max(runtime_code(check));
    }
    let runtime_valid = runtime.as_ref().map(RuntimeCheck::is_valid);
    let revision = compiled.revision();
    match format.report() {
        Format::Json => {
            let explain = if args.explain {
                compiled
                    .explain
                    .as_deref()
                    .map(|e| e.lines().skip(1).map(str::trim).collect())
            } else {
                None
            };
            report::print_json(
                "check",
                code == EXIT_OK,
                if code == EXIT_OK { "valid" } else { "refused" },
                &diagnostics,
                CheckExtra {
                    workflow: compiled.workflow.as_deref(),
                    version: compiled.version.as_deref(),
                    revision,
                    explain,
                    runtime_configuration: runtime_valid
                        .map(|ok| if ok { "valid" } else { "refused" }),
                },
            );
        }
        Format::Text => {
            print_diagnostics(&diagnostics, format);
            if code == EXIT_OK {
                if let Some(rev) = revision {
                    outln!(
                        "Valid workflow {} version {}",
                        compiled.workflow.as_deref().unwrap_or_default(),
                        compiled.version.as_deref().unwrap_or_default()
                    );
                    outln!("Definition: {rev}");
                    if args.explain {
                        out!("{}", compiled.explain.as_deref().unwrap_or_default());
                        out!("{}", coordinator_compiler::FUNCTION_LIMITS);
                    }
                    if runtime_valid == Some(true) {
                        outln!("Valid runtime configuration");
                    }
                }
            }
        }
    }
    code
}
