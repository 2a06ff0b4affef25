//! `coordinatorctl types --project D --language typescript|python --output FILE`:
//! exports a typed caller for the workflow (SPEC §4).
//!
//! Prints `output:`, `status: exported`, `workflow:` and `workflowRevision:`
//! (seed 004). Nothing is written when the project does not compile; the
//! file is written whole (to a temporary sibling, then renamed).

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use serde::Serialize;

use crate::codes;
use crate::report::{self, EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE};
use crate::Format;

/// Target language of the caller.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Language {
    /// A TypeScript module using `fetch`.
    Typescript,
    /// A Python 3.11+ module using the standard library.
    Python,
}

/// Arguments of `types`.
#[derive(Args, Debug)]
pub struct TypesArgs {
    /// The project directory.
    #[arg(long, value_name = "DIR")]
    pub project: PathBuf,
    /// The caller's language.
    #[arg(long, value_enum)]
    pub language: Language,
    /// The file to write.
    #[arg(long, value_name = "FILE")]
    pub output: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TypesExtra {
    output: String,
    workflow: Option<String>,
    workflow_revision: Option<String>,
}

/// Runs `types`; returns the exit code.
pub fn run(args: TypesArgs) -> u8 {
    // stdout carries the report, so the caller cannot go there; a file
    // named `-` is surely a mistake (`graph --output -` means stdout).
    if args.output.as_os_str() == "-" {
        errln!("coordinatorctl types: --output - is not supported: the caller is written to a file (stdout carries the report); name the file, e.g. --output ./-");
        return EXIT_USAGE;
    }
    let display = args.project.display().to_string();
    let compiled = coordinator_compiler::compile_project(&args.project, &display);
    let output = args.output.display().to_string();
    let Some(program) = compiled.program else {
        let code = report::exit_code(&compiled.diagnostics);
        emit(&args, code, "refused", &compiled.diagnostics, &output, None);
        return code;
    };
    let text = match args.language {
        Language::Typescript => coordinator_callers::typescript(&program),
        Language::Python => coordinator_callers::python(&program),
    };
    if let Err(e) = write_whole(&args.output, &text) {
        errln!(
            "error[{code}] {output}\n  cannot write the caller: {e}; nothing was written\n  next: Check that the directory exists, is writable and has room.\n1 error, 0 warnings in 1 file", code = codes::TYPES_WRITE);
        return EXIT_UNAVAILABLE;
    }
    emit(
        &args,
        EXIT_OK,
        "exported",
        &compiled.diagnostics,
        &output,
        Some((program.workflow.clone(), program.revision())),
    );
    EXIT_OK
}

fn emit(
    args: &TypesArgs,
    code: u8,
    status: &str,
    diags: &[coordinator_source::Diagnostic],
    output: &str,
    done: Option<(String, String)>,
) {
    match args.format {
        Format::Json => report::print_json(
            "types",
            code == EXIT_OK,
            status,
            diags,
            TypesExtra {
                output: output.to_owned(),
                workflow: done.as_ref().map(|d| d.0.clone()),
                workflow_revision: done.as_ref().map(|d| d.1.clone()),
            },
        ),
        Format::Text => {
            report::print_diagnostics(diags);
            if let Some((workflow, revision)) = done {
                outln!("output: {output}");
                outln!("status: {status}");
                outln!("workflow: {workflow}");
                outln!("workflowRevision: {revision}");
            }
        }
    }
}

/// Writes `text` to `path` through a temporary sibling and a rename, so a
/// failure never leaves a partial file. A `path` that exists and is not a
/// regular file (a device, a pipe, a directory, a symbolic link) is
/// refused, never replaced.
pub fn write_whole(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    // Replacing a device, pipe, directory or symbolic link with a regular
    // file would destroy it: only a regular file (or a new path) is written.
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_file() {
            return Err(std::io::Error::other(
                "the path exists and is not a regular file (a device, pipe, directory or symbolic link); choose another path",
            ));
        }
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "output".into());
    let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}
