//! A command's request to the service: from `--url` and `--token-file` to
//! the API's answer ([`fetch_answer`]), and `graph --run`'s inspection,
//! fetched as `inspect` fetches it ([`fetch_inspection`]).

use std::path::{Path, PathBuf};

use clap::Args;
use coordinator_api as api;
use serde::Deserialize;
use serde_json::Value;

use super::base_url::{request_path, service_url};
use super::refusal::{
    report_failure, report_refusal, report_unexpected_answer, unreachable, Failure, Reporting,
};
use super::token_file::read_token;
use super::transport::{http_client, send, Method, RawAnswer, SendFailure};
use crate::report::{self, EXIT_UNAVAILABLE, EXIT_USAGE};
use crate::Format;

/// Where the service is and how to authenticate.
#[derive(Args, Debug, Clone)]
pub struct Conn {
    /// The service's base URL (`https://coordinator.example.org`).
    #[arg(long, value_name = "URL")]
    pub url: String,
    /// A file holding the access token (owner-only; never pass the token
    /// itself).
    #[arg(long = "token-file", value_name = "PATH")]
    pub token_file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// One request a command makes to the service.
pub(crate) struct ServiceCall {
    /// The command's name (in messages and the JSON report's `command`).
    pub command: &'static str,
    pub method: Method,
    /// The path under `--url`, as segments (each percent-encoded by the
    /// `url` crate when the request URL is built).
    pub path: Vec<String>,
    /// The query's pairs, in order.
    pub query: Vec<(&'static str, String)>,
    /// `--url`, `--token-file`, and the `--format` a refusal is reported in.
    pub conn: Conn,
}

impl ServiceCall {
    /// How this call's refusals are reported.
    fn reporting(&self) -> Reporting {
        Reporting {
            command: self.command,
            format: self.conn.format,
        }
    }
}

/// Sends `call` and reads a 2xx answer with `read_answer` (its API type;
/// `Err` when it is not): the answer as the service sent it and as read.
/// A refusal is reported in the call's format and `Err` holds the exit
/// code: 2 for a `--url` that is not the service's base URL, 3 for no
/// answer, 1 or 3 for a problem or an answer that is not the API's.
pub(crate) async fn fetch_answer<T>(
    call: &ServiceCall,
    read_answer: impl FnOnce(&Value) -> Result<T, serde_json::Error>,
) -> Result<(Value, T), u8> {
    let url = match service_url(call.command, &call.conn.url, &call.path) {
        Ok(u) => u.to_string(),
        Err(message) => {
            errln!("{message}");
            return Err(EXIT_USAGE);
        }
    };
    let token = match read_token(&call.conn.token_file) {
        Ok(t) => t,
        Err((exit, code, title, next)) => {
            let failure = Failure {
                code: code.into(),
                status: None,
                url,
                title,
                detail: None,
                next,
            };
            return Err(report_failure(call.reporting(), exit, failure));
        }
    };
    let client = match http_client() {
        Ok(c) => c,
        Err(e) => {
            errln!("coordinatorctl: cannot build the HTTP client: {e}");
            return Err(EXIT_UNAVAILABLE);
        }
    };
    match send(&client, &url, &token, &call.method, &call.query).await {
        Ok(answer) => read_api_answer(call, &url, answer, read_answer),
        Err(SendFailure::Encode(e)) => {
            errln!(
                "coordinatorctl {}: cannot encode the request: {e}",
                call.command
            );
            Err(EXIT_USAGE)
        }
        Err(SendFailure::Unreachable {
            status,
            title,
            chain,
        }) => {
            let failure = unreachable(&url, status, title, chain);
            Err(report_failure(call.reporting(), EXIT_UNAVAILABLE, failure))
        }
    }
}

/// A 2xx answer read as JSON and by `read_answer`; anything else reported
/// (a problem, or an answer that is not the API's), `Err` holding the
/// exit code.
fn read_api_answer<T>(
    call: &ServiceCall,
    url: &str,
    answer: RawAnswer,
    read_answer: impl FnOnce(&Value) -> Result<T, serde_json::Error>,
) -> Result<(Value, T), u8> {
    let RawAnswer {
        status,
        problem,
        text,
    } = answer;
    if !(200..300).contains(&status) {
        return Err(report_refusal(
            call.reporting(),
            url,
            status,
            problem,
            &text,
        ));
    }
    let Ok(value) = serde_json::from_str::<Value>(&text) else {
        return Err(report_unexpected_answer(call.reporting(), url, status));
    };
    // The answer must be the API's type in either format; the JSON
    // report then carries it as the service sent it.
    match read_answer(&value) {
        Ok(read) => Ok((value, read)),
        Err(_) => Err(report_unexpected_answer(call.reporting(), url, status)),
    }
}

/// The run `run`'s inspection (`GET /v1/runs/{run}/inspect`), for
/// `graph --run`: the request and its refusals exactly as `inspect` makes
/// and reports them (in text, on stderr), named `command`. `Err` holds the
/// exit code after the refusal was printed.
pub(crate) fn fetch_inspection(
    command: &'static str,
    run: &str,
    url: &str,
    token_file: &Path,
) -> Result<api::Inspection, u8> {
    let call = ServiceCall {
        command,
        method: Method::Get,
        path: request_path(&["v1", "runs", run, "inspect"]),
        query: vec![],
        conn: Conn {
            url: url.to_owned(),
            token_file: token_file.to_owned(),
            format: Format::Text,
        },
    };
    let read_inspection = |value: &Value| api::Inspection::deserialize(value);
    let (_, inspection) = report::io_runtime()?.block_on(fetch_answer(&call, read_inspection))?;
    Ok(inspection)
}
