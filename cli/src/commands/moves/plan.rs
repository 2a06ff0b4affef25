//! `coordinatorctl move plan --from A --to B [--map OLD=NEW]...
//! [--accept-skipped STEP]... --output CERT [--format json]`: proves
//! offline, from the two revisions alone, which runs waiting on revision A
//! can resume on revision B, and writes the move certificate
//! (docs/operations.md "Moving waiting runs"). No database, no credential.
//!
//! A is a project directory (compiled here) or a package directory
//! (`definition.json` and `SHA256SUMS`, verified as `check` verifies a
//! pinned package); B is a project directory, since its findings are
//! located in its files (a package for B is refused,
//! `coordinator.move.to-package`). Both must compile cleanly and be the
//! same workflow. When A is a project, the cases of its `scenarios.yaml`
//! that move their run to B are run first (`test/moves.rs`,
//! `moved_case_results`), and a wait one of whose cases fails is refused.
//! The decision is `coordinator_compiler::moves::plan_move`; this command
//! reads the arguments, loads the revisions, runs the moved cases, writes
//! the certificate whole (a temporary sibling, then a rename) and reports.
//!
//! Text: the findings on stderr in `check`'s form, then on stdout one line
//! per wait (`movable:` or `refused:`, with the moved cases it ran there:
//! `, 2 moved cases passed`) and the certificate's path and digest.
//! `--format json`: one `CoordinatorCtlReport` with the findings as its
//! diagnostics, the certificate as `certificate` and, per wait of A, the
//! moved cases run as `movedCases`.
//!
//! Exit codes: 0 at least one wait movable, 1 none (the certificate is
//! written in both cases), or A or B refused, or A's scenarios file has
//! faults (no certificate); 2 usage (a bad `--map`, `--accept-skipped` or
//! `--output`, a package for B); 3 a file cannot be read or the
//! certificate cannot be written.

use std::path::{Path, PathBuf};

use clap::Args;
use coordinator_compiler::moves::{
    plan_move, read_step_map, CasesByWait, MoveOptions, MovePlan, MovedCaseRun, MovedCases,
    PlanRefused,
};
use coordinator_compiler::Compiled;
use coordinator_ir::moves::MoveCertificate;
use coordinator_ir::Program;
use coordinator_runtime::package::{load_package, PackageError, DEFINITION_FILE, SUMS_FILE};
use coordinator_source::Diagnostic;
use serde::Serialize;

use crate::codes;
use crate::report::{self, EXIT_OK, EXIT_REFUSED, EXIT_UNAVAILABLE, EXIT_USAGE};
use crate::Format;

/// Arguments of `move plan`.
#[derive(Args, Debug)]
pub struct PlanArgs {
    /// Revision A, the one runs wait on: its project directory or its
    /// package directory.
    #[arg(long, value_name = "DIR")]
    pub from: PathBuf,
    /// Revision B, the one they would resume on: its project directory.
    #[arg(long, value_name = "DIR")]
    pub to: PathBuf,
    /// A wait step of A and the step of B its runs resume at (`OLD=NEW`);
    /// repeatable. Without it a wait resumes at B's step of the same id.
    #[arg(long = "map", value_name = "OLD=NEW")]
    pub map: Vec<String>,
    /// A call of B placed before a wait's target that a moved run may skip,
    /// since nothing after the target reads it; repeatable.
    #[arg(long = "accept-skipped", value_name = "STEP")]
    pub accept_skipped: Vec<String>,
    /// The certificate file to write (a new path or a regular file, which
    /// is replaced whole).
    #[arg(long, value_name = "FILE")]
    pub output: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// The JSON report's members beside the shared ones: the certificate's
/// path (`output`, only when it was written), the certificate, and per
/// wait of A the scenario cases held to its move (`case`, `wait`, `to`,
/// `passed`, `problem`; an empty list when none moves there).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PlanExtra<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    certificate: Option<&'a MoveCertificate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    moved_cases: Option<&'a CasesByWait>,
}

/// Why no plan was made: what to print and the exit code.
struct Stop {
    diagnostics: Vec<Diagnostic>,
    exit: u8,
}

impl Stop {
    fn new(diagnostics: Vec<Diagnostic>, exit: u8) -> Self {
        Stop { diagnostics, exit }
    }
}

/// A diagnostic about a path given on the command line.
fn about(path: &Path, code: &str, message: String, next: &str) -> Diagnostic {
    crate::report::path_error(path, code, message, next)
}

/// `--output` must be a new path in an existing directory, or a regular
/// file (replaced whole); checked before anything is done.
fn output_fault(output: &Path) -> Option<Diagnostic> {
    let next = "Name a new file, or an existing regular file to replace, in an existing directory.";
    if let Ok(meta) = std::fs::symlink_metadata(output) {
        if !meta.file_type().is_file() {
            return Some(about(
                output,
                codes::MOVE_OUTPUT,
                "--output exists and is not a regular file (a directory, a symbolic link or a device); it is never replaced".into(),
                next,
            ));
        }
        return None;
    }
    crate::report::missing_parent_error(output, codes::MOVE_OUTPUT, next)
}

/// Whether `dir` looks like a package: no `workflow.yaml`, and
/// `definition.json` or `SHA256SUMS`.
fn is_package(dir: &Path) -> bool {
    !dir.join(coordinator_compiler::WORKFLOW_FILE).exists()
        && (dir.join(DEFINITION_FILE).exists() || dir.join(SUMS_FILE).exists())
}

/// Compiles the project `dir`; refused unless it compiles cleanly.
fn project(dir: &Path) -> Result<Compiled, Stop> {
    let display = dir.to_string_lossy().into_owned();
    let compiled = coordinator_compiler::compile_project(dir, &display);
    if compiled.has_errors() || compiled.program.is_none() {
        let exit = report::exit_code(&compiled.diagnostics).max(EXIT_REFUSED);
        return Err(Stop::new(compiled.diagnostics, exit));
    }
    Ok(compiled)
}

/// Revision A's Program, from its project or its package.
fn revision_a(dir: &Path) -> Result<Program, Stop> {
    if !is_package(dir) {
        return project(dir).and_then(|c| {
            c.program
                .ok_or_else(|| Stop::new(c.diagnostics, EXIT_REFUSED))
        });
    }
    match load_package(dir, None) {
        Ok(package) => Ok(package.definition.program),
        Err(e) => {
            let (code, exit) = match &e {
                PackageError::Unavailable { .. } => (
                    coordinator_runtime::codes::RUNTIME_PACKAGE_UNREADABLE,
                    EXIT_UNAVAILABLE,
                ),
                PackageError::DigestMismatch { .. }
                | PackageError::FileChanged { .. }
                | PackageError::Malformed(_)
                | PackageError::Definition(_)
                | PackageError::Exists(_) => (
                    coordinator_runtime::codes::RUNTIME_PACKAGE_REFUSED,
                    EXIT_REFUSED,
                ),
            };
            let d = about(
                dir,
                code,
                format!("--from package: {e}"),
                "Give --from the package exactly as `coordinatorctl package` wrote it, or the project directory of revision A.",
            );
            Err(Stop::new(vec![d], exit))
        }
    }
}

/// Revision B's project; a package is refused.
fn revision_b(dir: &Path) -> Result<Compiled, Stop> {
    if is_package(dir) {
        let d = about(
            dir,
            codes::MOVE_TO_PACKAGE,
            "--to names a package; the check of revision B reads its project (workflow.yaml and functions.rhai), to locate its findings".into(),
            "Give --to the project directory revision B's package was built from.",
        );
        return Err(Stop::new(vec![d], EXIT_USAGE));
    }
    project(dir)
}

/// Reads the arguments and both revisions, and plans.
fn make_plan(args: &PlanArgs) -> Result<MovePlan, Stop> {
    if let Some(d) = output_fault(&args.output) {
        return Err(Stop::new(vec![d], EXIT_USAGE));
    }
    let map = read_step_map(&args.map).map_err(|d| Stop::new(d, EXIT_USAGE))?;
    let a = revision_a(&args.from)?;
    let b = revision_b(&args.to)?;
    let options = MoveOptions {
        map,
        accept_skipped: args.accept_skipped.clone(),
    };
    // A's scenario cases that move to B; a package holds no scenarios.
    let cases = match &b.program {
        Some(b_program) if !is_package(&args.from) => {
            crate::commands::test::moves::moved_case_results(&args.from, &a, b_program)
        }
        Some(_) | None => MovedCases::default(),
    };
    plan_move(&a, &b, &options, &cases).map_err(|refused| match refused {
        PlanRefused::Usage(d) => Stop::new(d, EXIT_USAGE),
        PlanRefused::Refused(d) => Stop::new(d, EXIT_REFUSED),
    })
}

/// The certificate as written: pretty JSON and a final newline.
fn certificate_text(certificate: &MoveCertificate) -> String {
    let mut text = serde_json::to_string_pretty(certificate).unwrap_or_default();
    text.push('\n');
    text
}

/// Runs `move plan`; returns the exit code.
pub fn run(args: PlanArgs) -> u8 {
    let output = args.output.display().to_string();
    let plan = match make_plan(&args) {
        Ok(plan) => plan,
        Err(stop) => {
            finish(&args, stop.exit, &stop.diagnostics, None);
            return stop.exit;
        }
    };
    if let Err(e) =
        super::super::types::write_whole(&args.output, &certificate_text(&plan.certificate))
    {
        let mut diagnostics = plan.diagnostics;
        diagnostics.push(about(
            &args.output,
            codes::MOVE_WRITE,
            format!("cannot write the certificate to {output}: {e}; nothing was written"),
            "Check that the directory is writable and has room, or name another --output.",
        ));
        finish(&args, EXIT_UNAVAILABLE, &diagnostics, None);
        return EXIT_UNAVAILABLE;
    }
    let exit = if plan.certificate.any_movable() {
        EXIT_OK
    } else {
        EXIT_REFUSED
    };
    finish(&args, exit, &plan.diagnostics, Some(&plan));
    exit
}

/// What a wait's moved scenario cases gave, for its line: `, 2 moved
/// cases passed`, `, 1 of 2 moved cases failed`; empty when none moves
/// there.
fn cases_said(cases: Option<&Vec<MovedCaseRun>>) -> String {
    let Some(cases) = cases.filter(|c| !c.is_empty()) else {
        return String::new();
    };
    let failed = cases.iter().filter(|c| !c.passed).count();
    let s = if cases.len() == 1 { "" } else { "s" };
    if failed == 0 {
        format!(", {} moved case{s} passed", cases.len())
    } else {
        format!(", {failed} of {} moved case{s} failed", cases.len())
    }
}

/// Prints the report: JSON, or the findings on stderr and the verdicts on
/// stdout.
fn finish(args: &PlanArgs, exit: u8, diagnostics: &[Diagnostic], plan: Option<&MovePlan>) {
    let output = args.output.display().to_string();
    // A plan reaches the report only once its certificate was written.
    let written = plan.map(|_| output.clone());
    let certificate = plan.map(|p| &p.certificate);
    let moved_cases = plan.map(|p| &p.moved_cases);
    match args.format {
        Format::Json => report::print_json(
            "move plan",
            exit == EXIT_OK,
            if exit == EXIT_OK {
                "movable"
            } else {
                "refused"
            },
            diagnostics,
            PlanExtra {
                output: written,
                certificate,
                moved_cases,
            },
        ),
        Format::Text => {
            report::print_diagnostics(diagnostics);
            let Some(c) = certificate else { return };
            outln!(
                "Move plan for workflow {} from {} to {}",
                c.workflow,
                c.from.revision,
                c.to.revision
            );
            if c.waits.is_empty() {
                outln!("revision A has no wait step: no run of it waits, so none can move");
            }
            for w in &c.waits {
                if w.movable {
                    let carried = if w.carried.is_empty() {
                        "no step output".to_owned()
                    } else {
                        w.carried.join(", ")
                    };
                    outln!(
                        "movable: {} -> {} ({}), carrying {carried}{}",
                        w.from,
                        w.to,
                        w.kind,
                        cases_said(moved_cases.and_then(|m| m.get(&w.from)))
                    );
                } else {
                    let n = w.findings.len();
                    let s = if n == 1 { "" } else { "s" };
                    outln!(
                        "refused: {} -> {} ({}), {n} finding{s}{}",
                        w.from,
                        w.to,
                        w.kind,
                        cases_said(moved_cases.and_then(|m| m.get(&w.from)))
                    );
                }
            }
            outln!("Certificate: {output}");
            outln!("Digest: {}", c.digest);
        }
    }
}
