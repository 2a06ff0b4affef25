//! A request that got no answer of the API, as `coordinatorctl` reports it:
//! a problem document (`application/problem+json`) under its code with the
//! `coordinator.` prefix and the registry's `next:` step, an answer that is
//! not the API's (`coordinator.command.unexpected-answer`), a service that
//! cannot be reached, or a token file that cannot be used. In text it goes
//! to stderr as `error[<code>] <url>`, the title and detail, and a `next:`
//! line; with `--format json` it is the report's `error`.

use coordinator_api as api;
use serde::Serialize;
use serde_json::Value;

use crate::codes;
use crate::report::{self, EXIT_REFUSED, EXIT_UNAVAILABLE};
use crate::Format;

/// A failure before or instead of an answer.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Failure {
    /// The code as printed (`coordinator.…`).
    pub code: String,
    /// The HTTP status, when the service answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The request URL.
    pub url: String,
    pub title: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// What to do next.
    pub next: String,
}

/// The members a command's JSON report carries beside the shared ones:
/// the answer under `result`, or the failure under `error`.
#[derive(Serialize)]
pub(crate) struct AnswerOrFailure<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a Failure>,
}

impl<'a> AnswerOrFailure<'a> {
    /// The service's answer, as it sent it.
    pub(crate) fn answer(result: &'a Value) -> Self {
        AnswerOrFailure {
            result: Some(result),
            error: None,
        }
    }
}

/// How a command reports a refusal: its name (in messages and the JSON
/// report's `command`) and the `--format` it was run with.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reporting {
    /// The command's name.
    pub command: &'static str,
    /// Text or JSON.
    pub format: Format,
}

/// Reports `failure` of `call` in the call's format (the JSON report's
/// status is `unavailable` for [`EXIT_UNAVAILABLE`], `refused` otherwise);
/// returns `exit`.
pub(super) fn report_failure(call: Reporting, exit: u8, failure: Failure) -> u8 {
    match call.format {
        Format::Json => report::print_json(
            call.command,
            false,
            if exit == EXIT_UNAVAILABLE {
                "unavailable"
            } else {
                "refused"
            },
            &[],
            AnswerOrFailure {
                result: None,
                error: Some(&failure),
            },
        ),
        Format::Text => {
            errln!("error[{}] {}", failure.code, failure.url);
            match (&failure.status, &failure.detail) {
                (Some(s), Some(d)) => errln!("  {s} {}: {d}", failure.title),
                (Some(s), None) => errln!("  {s} {}", failure.title),
                (None, Some(d)) => errln!("  {}: {d}", failure.title),
                (None, None) => errln!("  {}", failure.title),
            }
            errln!("  next: {}", failure.next);
        }
    }
    exit
}

/// `coordinator.command.service-unreachable` at `url`: no answer, none in
/// time, or (with `status`) an answer that could not be read.
pub(super) fn unreachable(url: &str, status: Option<u16>, title: String, chain: String) -> Failure {
    Failure {
        code: codes::COMMAND_SERVICE_UNREACHABLE.into(),
        status,
        url: url.to_owned(),
        next: if status.is_some() {
            "try again".into()
        } else {
            "check --url and that the service is running (curl <url>/ready)".into()
        },
        title,
        detail: Some(chain),
    }
}

/// Reports a non-2xx answer `text` with `status`: its problem document
/// (exit 3 for 503, 1 otherwise), or, when it is none, an unexpected
/// answer. Returns the exit code.
pub(super) fn report_refusal(
    call: Reporting,
    url: &str,
    status: u16,
    problem: bool,
    text: &str,
) -> u8 {
    let parsed: Option<api::Problem> = if problem {
        serde_json::from_str(text).ok()
    } else {
        None
    };
    let Some(p) = parsed else {
        return report_unexpected_answer(call, url, status);
    };
    let exit = if status == 503 {
        EXIT_UNAVAILABLE
    } else {
        EXIT_REFUSED
    };
    let next = next_step(&p.code).to_owned();
    report_failure(
        call,
        exit,
        Failure {
            code: cli_code(&p.code),
            status: Some(p.status),
            url: url.to_owned(),
            title: p.title,
            detail: p.detail,
            next,
        },
    )
}

/// Reports an answer (with `status`) that is not the API's:
/// `coordinator.command.unexpected-answer`, exit 3 for 502, 503 and 504,
/// 1 otherwise. Returns the exit code.
pub(super) fn report_unexpected_answer(call: Reporting, url: &str, status: u16) -> u8 {
    let exit = if status == 502 || status == 503 || status == 504 {
        EXIT_UNAVAILABLE
    } else {
        EXIT_REFUSED
    };
    report_failure(
        call,
        exit,
        Failure {
            code: codes::COMMAND_UNEXPECTED_ANSWER.into(),
            status: Some(status),
            url: url.to_owned(),
            title: "the answer is not the coordinator API's".into(),
            detail: None,
            next: "check that --url names the coordinator service".into(),
        },
    )
}

/// The `next:` line for a problem code: the registry's (seed 000 "Codes
/// you see" word for word where it has a line).
pub fn next_step(code: &str) -> &'static str {
    api::problems::find(code).map_or("see docs/errors/ for this code", |p| p.next)
}

/// A problem code as `coordinatorctl` prints it: with the `coordinator.`
/// prefix (seed 000: "coordinatorctl prefixes its codes with
/// `coordinator.`"). A code that is not a code (characters other than
/// lowercase letters, digits, `.` and `-`, or longer than 100) is shown
/// escaped, never raw: it came from the other end of a socket.
pub fn cli_code(code: &str) -> String {
    let plain = !code.is_empty()
        && code.len() <= 100
        && code
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-');
    if plain {
        format!("coordinator.{code}")
    } else {
        format!("coordinator.{}", code.escape_default())
    }
}
