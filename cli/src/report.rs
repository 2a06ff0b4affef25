//! Shared output: exit codes, the JSON report, and diagnostic printing.

use coordinator_source::{diagnostic, Diagnostic, Located};
use serde::Serialize;

/// Exit code: accepted.
pub const EXIT_OK: u8 = 0;
/// Exit code: refused (diagnostics, failed scenarios).
pub const EXIT_REFUSED: u8 = 1;
/// Exit code: usage error.
pub const EXIT_USAGE: u8 = 2;
/// Exit code: a resource (file, service) is unavailable.
pub const EXIT_UNAVAILABLE: u8 = 3;
/// Exit code of `start --wait`: the run had not ended when the wait was
/// over (the service's `Prefer: wait=N` answered at N).
pub const EXIT_NOT_ENDED: u8 = 4;

/// `apiVersion` of the JSON report.
pub const REPORT_API_VERSION: &str = "id.registrystack.org/formats/coordinator/ctl-report/v1beta1";

/// The `--format json` output of every command (SPEC §2.3):
/// `{apiVersion, kind, ok, command, status, diagnostics, ...}`; `extra`
/// members are flattened in beside them.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report<'a, T: Serialize> {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub ok: bool,
    pub command: &'a str,
    pub status: &'a str,
    pub diagnostics: &'a [Diagnostic],
    #[serde(flatten)]
    pub extra: T,
}

/// Prints a report as one JSON object on stdout.
pub fn print_json<T: Serialize>(
    command: &str,
    ok: bool,
    status: &str,
    diagnostics: &[Diagnostic],
    extra: T,
) {
    let report = Report {
        api_version: REPORT_API_VERSION,
        kind: "CoordinatorCtlReport",
        ok,
        command,
        status,
        diagnostics,
        extra,
    };
    match serde_json::to_string_pretty(&report) {
        Ok(s) => outln!("{s}"),
        Err(e) => errln!("coordinatorctl: cannot render the report: {e}"),
    }
}

/// Prints a report as one line of JSON on stdout (JSON Lines: a bulk
/// action's summary after its progress lines), with `extra`'s members
/// beside the shared ones and no diagnostics.
pub fn print_json_line<T: Serialize>(command: &str, ok: bool, status: &str, extra: T) {
    let report = Report {
        api_version: REPORT_API_VERSION,
        kind: "CoordinatorCtlReport",
        ok,
        command,
        status,
        diagnostics: &[],
        extra,
    };
    match serde_json::to_string(&report) {
        Ok(s) => outln!("{s}"),
        Err(e) => errln!("coordinatorctl: cannot render the report: {e}"),
    }
}

/// Prints diagnostics in the seed 004 text form on stderr, followed by the
/// count line (`N errors, M warnings in K files`). Prints nothing when there
/// are none.
pub fn print_diagnostics(diags: &[Diagnostic]) {
    if diags.is_empty() {
        return;
    }
    err!("{}", diagnostic::render_text(diags));
    errln!("{}", diagnostic::summary_line(diags));
}

/// The exit code for a set of diagnostics: 3 when a file was unavailable,
/// 1 on any error, 0 otherwise.
pub fn exit_code(diags: &[Diagnostic]) -> u8 {
    if diags
        .iter()
        .any(|d| d.code == coordinator_source::codes::FILE_UNREADABLE)
    {
        EXIT_UNAVAILABLE
    } else if diags.iter().any(Diagnostic::is_error) {
        EXIT_REFUSED
    } else {
        EXIT_OK
    }
}

/// The I/O runtime of a command that talks to the network or the database
/// (one thread). `Err` holds [`EXIT_UNAVAILABLE`] after the reason was
/// printed.
pub fn io_runtime() -> Result<tokio::runtime::Runtime, u8> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            errln!("coordinatorctl: cannot start the I/O runtime: {e}");
            EXIT_UNAVAILABLE
        })
}

/// [`path_error`] `code` about `output` when the directory it would be
/// written in does not exist (a bare file name is in `.`); `None` when it
/// does. Checked before an output file is written.
pub fn missing_parent_error(
    output: &std::path::Path,
    code: &str,
    next: &str,
) -> Option<Diagnostic> {
    let parent = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    (!parent.is_dir()).then(|| {
        path_error(
            output,
            code,
            format!("the directory {} does not exist", parent.display()),
            next,
        )
    })
}

/// An error about a path given on the command line (the file itself, no
/// line or column): `code`, what is wrong (`message`) and the `next` step.
pub fn path_error(path: &std::path::Path, code: &str, message: String, next: &str) -> Diagnostic {
    Diagnostic::error(
        code,
        Located {
            file: path.display().to_string(),
            ..Located::default()
        },
        message,
        next,
    )
}
