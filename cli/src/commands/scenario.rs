//! `coordinatorctl scenario export --run RUN [--redact POINTER]...
//! [--output FILE]`: an ended run written as one scenario case through
//! the service (`POST /v1/runs/{run}/export`, action `export`, operators
//! only; docs/scenarios.md "Cases exported from runs"). The service builds
//! the case, applies the redactions and runs the case on the run's own
//! revision before answering (docs/decisions.md "Exporting a run as a
//! case"); this command writes the answer's text to `--output` (a new
//! file, written whole or not at all) or to stdout.
//!
//! Exit 0 when the case was written; 1 when the service refused (the
//! problem's code: `export.not-reproducible`, `export.payload-erased`,
//! `export.redact-invalid`, `authorization.refused`, `run.not-found`);
//! 2 for an `--output` that exists or whose directory does not
//! (`coordinator.export.output`), checked before any request; 3 when the
//! service is unreachable or the file cannot be written
//! (`coordinator.export.write`).

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use coordinator_api as api;
use coordinator_source::Diagnostic;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::codes;
use crate::report::{self, EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE};
use crate::service_client::{fetch_answer, request_path, Body, Conn, Method, ServiceCall};
use crate::Format;

/// Arguments of `scenario`.
#[derive(Args, Debug)]
pub struct ScenarioArgs {
    #[command(subcommand)]
    pub command: ScenarioCommand,
}

/// The `scenario` subcommands.
#[derive(Subcommand, Debug)]
pub enum ScenarioCommand {
    /// Write an ended run as one scenario case that passes on its revision
    /// (through the service; operators with the `export` action).
    Export(ExportArgs),
}

/// Arguments of `scenario export`.
#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The run id.
    #[arg(long, value_name = "RUN")]
    pub run: String,
    /// A member of the run's input to replace by a placeholder of its type
    /// everywhere in the case, as a JSON Pointer into the input
    /// (`/applicationId`); repeatable.
    #[arg(long = "redact", value_name = "POINTER")]
    pub redact: Vec<String>,
    /// Write the case to this new file (refused when it exists); stdout
    /// when absent.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// An investigation reference for the audit record (no personal data).
    #[arg(long, value_name = "REF", default_value = "scenario-export")]
    pub reason: String,
    #[command(flatten)]
    pub conn: Conn,
}

/// Runs a `scenario` subcommand; returns the exit code.
pub fn run(args: ScenarioArgs) -> u8 {
    match args.command {
        ScenarioCommand::Export(a) => export(a),
    }
}

/// A diagnostic about a path given on the command line.
fn about(path: &Path, code: &str, message: String, next: &str) -> Diagnostic {
    crate::report::path_error(path, code, message, next)
}

/// `--output` must be a new path in an existing directory.
fn output_fault(output: &Path) -> Option<Diagnostic> {
    let next = "Name a new file in an existing directory; an exported case never replaces a file.";
    if std::fs::symlink_metadata(output).is_ok() {
        return Some(about(
            output,
            codes::EXPORT_OUTPUT,
            "--output exists; it is never replaced".into(),
            next,
        ));
    }
    crate::report::missing_parent_error(output, codes::EXPORT_OUTPUT, next)
}

/// Writes `text` to the new file `output` whole: into a fresh file beside
/// it, then linked to its name (refused if the name appeared meanwhile),
/// so no reader ever sees part of it and nothing is replaced. The file is
/// its owner's alone (0600): a case holds a run's answers, which
/// `--redact` (input members) may not reach.
fn write_new(output: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = output.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temp)
        .and_then(|mut f| {
            f.write_all(text.as_bytes())?;
            f.sync_all()
        })
        .and_then(|()| std::fs::hard_link(&temp, output));
    let _ = std::fs::remove_file(&temp);
    written
}

fn fail(format: Format, diagnostics: &[Diagnostic], exit: u8) -> u8 {
    match format {
        Format::Json => {
            report::print_json("scenario export", false, "failed", diagnostics, json!({}))
        }
        Format::Text => report::print_diagnostics(diagnostics),
    }
    exit
}

fn export(a: ExportArgs) -> u8 {
    let format = a.conn.format;
    if let Some(fault) = a.output.as_deref().and_then(output_fault) {
        return fail(format, &[fault], EXIT_USAGE);
    }
    let call = ServiceCall {
        command: "scenario export",
        method: Method::Post(Body::Export(api::ExportRun {
            redact: a.redact,
            reason: a.reason,
        })),
        path: request_path(&["v1", "runs", &a.run, "export"]),
        query: vec![],
        conn: a.conn,
    };
    let read = |value: &Value| api::ExportedCase::deserialize(value);
    let fetched = match report::io_runtime() {
        Ok(runtime) => runtime.block_on(fetch_answer(&call, read)),
        Err(exit) => return exit,
    };
    let exported = match fetched {
        Ok((_, exported)) => exported,
        Err(exit) => return exit,
    };
    if let Some(output) = &a.output {
        if let Err(e) = write_new(output, &exported.text) {
            let d = about(
                output,
                codes::EXPORT_WRITE,
                format!("cannot write the case: {e}"),
                "Check the directory's permissions and free space; nothing was written.",
            );
            return fail(format, &[d], EXIT_UNAVAILABLE);
        }
    }
    match (format, &a.output) {
        (Format::Json, output) => report::print_json(
            "scenario export",
            true,
            "exported",
            &[],
            json!({"run": exported.run, "revision": exported.revision,
                   "output": output.as_ref().map(|o| o.display().to_string()),
                   "document": exported.document}),
        ),
        (Format::Text, Some(output)) => outln!(
            "exported run {} as case run-{} to {} (passes on {})",
            exported.run,
            exported.run,
            output.display(),
            exported.revision
        ),
        (Format::Text, None) => out!("{}", exported.text),
    }
    EXIT_OK
}
