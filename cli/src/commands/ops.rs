//! The caller and operator commands over the HTTP API (SPEC §8, seed 000):
//! `status`, `list`, `inspect`, `cancel`, `retry-same`, `reconcile`,
//! `doctor`, `restore-hold`, `release-restore-hold`,
//! `complete-execution-recovery`, `release-admission-hold` and `retain`.
//!
//! Each takes `--url` (the service's base URL) and `--token-file` (a file
//! holding the access token: never the token itself, which is never
//! printed). The token file must be a regular, owner-only file (mode
//! `& 0o077 == 0`), as secret files are.
//!
//! Request bodies are the `coordinator-api` request types, and a success
//! is read as the command's `coordinator-api` answer type (anything else is
//! `coordinator.command.unexpected-answer`).
//!
//! Text output on stdout; a refusal goes to stderr as
//! `error[coordinator.<problem code>] <url>`, the problem's title and detail, and a
//! `next:` line. `--format json` prints one `CoordinatorCtlReport` with the
//! answer under `result` or the problem under `error`.
//!
//! Exit codes: 0 ok; 1 refused (a problem document, an unsafe token file);
//! 2 usage; 3 the service cannot be reached or answers 503, or the token
//! file cannot be read.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use std::fmt::Write as _;

use clap::{Args, Subcommand};
use coordinator_api as api;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::report::{self, EXIT_OK, EXIT_REFUSED, EXIT_UNAVAILABLE, EXIT_USAGE};
use crate::Format;

/// Largest token file read, in bytes.
pub const MAX_TOKEN_BYTES: u64 = 16 * 1024;
/// Timeout of one request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

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

/// `--run ID`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The run id.
    #[arg(long, value_name = "ID", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub run: String,
    #[command(flatten)]
    pub conn: Conn,
}

/// `--run ID --reason REF`.
#[derive(Args, Debug)]
pub struct RecoverArgs {
    /// The run id.
    #[arg(long, value_name = "ID", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub run: String,
    /// An investigation reference holding no personal data.
    #[arg(long, value_name = "REF")]
    pub reason: String,
    #[command(flatten)]
    pub conn: Conn,
}

/// `list` filters.
#[derive(Args, Debug)]
pub struct ListArgs {
    /// `true`: only runs in `attention`; `false`: all others.
    #[arg(long, value_name = "BOOL")]
    pub attention: Option<bool>,
    /// Only runs of this workflow.
    #[arg(long, value_name = "W")]
    pub workflow: Option<String>,
    /// Only runs in this state (`running`, `attention`, `finished`, ...).
    #[arg(long, value_name = "S")]
    pub state: Option<String>,
    /// Page size, 1..=100 (the service's default is 20).
    #[arg(long, value_name = "N")]
    pub limit: Option<u32>,
    /// The `nextCursor` of the previous page.
    #[arg(long, value_name = "C")]
    pub cursor: Option<String>,
    #[command(flatten)]
    pub conn: Conn,
}

/// `--reason REF` (holds).
#[derive(Args, Debug)]
pub struct ReasonArgs {
    /// An investigation reference holding no personal data.
    #[arg(long, value_name = "REF")]
    pub reason: String,
    #[command(flatten)]
    pub conn: Conn,
}

/// `complete-execution-recovery` attestations.
#[derive(Args, Debug)]
pub struct ExecutionArgs {
    /// The investigation reference, holding no personal data.
    #[arg(long = "recovery-reference", value_name = "R")]
    pub recovery_reference: String,
    /// Attest that retained evidence establishes every held call's history.
    #[arg(long = "execution-history-complete")]
    pub execution_history_complete: bool,
    /// Attest that the prior deployment and its workers are stopped or fenced.
    #[arg(long = "prior-deployment-fenced")]
    pub prior_deployment_fenced: bool,
    #[command(flatten)]
    pub conn: Conn,
}

/// `release-admission-hold` attestations.
#[derive(Args, Debug)]
pub struct AdmissionArgs {
    /// The investigation reference, holding no personal data.
    #[arg(long = "recovery-reference", value_name = "R")]
    pub recovery_reference: String,
    /// Attest that every spent start key is established.
    #[arg(long = "admission-history-complete")]
    pub admission_history_complete: bool,
    /// Attest that the prior deployment and its workers are stopped or fenced.
    #[arg(long = "prior-deployment-fenced")]
    pub prior_deployment_fenced: bool,
    #[command(flatten)]
    pub conn: Conn,
}

/// `retain` arguments.
#[derive(Args, Debug)]
pub struct RetainArgs {
    /// Erase the payloads of runs that ended before this RFC 3339 instant.
    #[arg(long, value_name = "T")]
    pub before: String,
    /// At most this many runs per call (1..=100; default 100).
    #[arg(long, value_name = "N", default_value_t = api::DEFAULT_RETENTION_LIMIT)]
    pub limit: u32,
    #[command(flatten)]
    pub conn: Conn,
}

/// The commands over the API (flattened into `coordinatorctl`'s commands).
#[derive(Subcommand, Debug)]
pub enum OpsCommand {
    /// Show a run's status.
    Status(RunArgs),
    /// List runs, newest first.
    List(ListArgs),
    /// Show a run's steps, effects and waits (never inputs or responses).
    Inspect(RunArgs),
    /// Cancel a run (its onCancel path where one exists).
    Cancel(RecoverArgs),
    /// Resend a held call with its original command and key.
    RetrySame(RecoverArgs),
    /// Ask the product for its receipt of a held call.
    Reconcile(RecoverArgs),
    /// Show the deployment's health, holds and uncertain runs (operator).
    Doctor(Conn),
    /// Place the restore hold (execution and admissions) (operator).
    RestoreHold(ReasonArgs),
    /// Release the restore hold (operator).
    ReleaseRestoreHold(ReasonArgs),
    /// Attest that execution recovery is complete (operator).
    CompleteExecutionRecovery(ExecutionArgs),
    /// Reopen admissions after a restore (operator).
    ReleaseAdmissionHold(AdmissionArgs),
    /// Erase the payloads of runs that ended before a cutoff (operator).
    Retain(RetainArgs),
}

/// Runs an API command; returns the exit code.
pub fn run(command: OpsCommand) -> u8 {
    match report::io_runtime() {
        Ok(runtime) => runtime.block_on(execute(command)),
        Err(exit) => exit,
    }
}

/// The method of a request to the service, with its body.
pub(crate) enum Method {
    Get,
    Post(Body),
}

/// A request body: always one of the API's request types.
#[derive(Serialize)]
#[serde(untagged)]
pub(crate) enum Body {
    Recovery(api::Recovery),
    Hold(api::HoldReason),
    Execution(api::ExecutionRecovery),
    Admission(api::AdmissionRecovery),
    Retention(api::Retention),
}

/// Reads a 2xx answer as its API type and renders it as text; `Err` when the
/// answer is not of that type (`coordinator.command.unexpected-answer`).
type Render = fn(&Value) -> Result<String, serde_json::Error>;

struct Call {
    name: &'static str,
    method: Method,
    /// The path under `--url`, as segments (each percent-encoded by the
    /// `url` crate when the request URL is built).
    path: Vec<String>,
    query: Vec<(&'static str, String)>,
    conn: Conn,
    render: Render,
}

/// The segments of a path under `--url`.
fn path(segments: &[&str]) -> Vec<String> {
    segments.iter().map(|s| (*s).to_owned()).collect()
}

async fn execute(command: OpsCommand) -> u8 {
    let call = match command {
        OpsCommand::Status(a) => Call {
            name: "status",
            method: Method::Get,
            path: path(&["v1", "runs", &a.run]),
            query: vec![],
            conn: a.conn,
            render: read::<api::RunStatus>,
        },
        OpsCommand::List(a) => {
            let mut query = Vec::new();
            if let Some(v) = a.attention {
                query.push(("attention", v.to_string()));
            }
            if let Some(v) = a.workflow {
                query.push(("workflow", v));
            }
            if let Some(v) = a.state {
                query.push(("state", v));
            }
            if let Some(v) = a.limit {
                if v == 0 || v > api::MAX_LIST_LIMIT {
                    errln!("coordinatorctl list: --limit must be 1..=100");
                    return EXIT_USAGE;
                }
                query.push(("limit", v.to_string()));
            }
            if let Some(v) = a.cursor {
                query.push(("cursor", v));
            }
            Call {
                name: "list",
                method: Method::Get,
                path: path(&["v1", "runs"]),
                query,
                conn: a.conn,
                render: read::<api::RunList>,
            }
        }
        OpsCommand::Inspect(a) => Call {
            name: "inspect",
            method: Method::Get,
            path: path(&["v1", "runs", &a.run, "inspect"]),
            query: vec![],
            conn: a.conn,
            render: read::<api::Inspection>,
        },
        OpsCommand::Cancel(a) => recover("cancel", a),
        OpsCommand::RetrySame(a) => recover("retry-same", a),
        OpsCommand::Reconcile(a) => recover("reconcile", a),
        OpsCommand::Doctor(conn) => Call {
            name: "doctor",
            method: Method::Get,
            path: path(&["v1", "doctor"]),
            query: vec![],
            conn,
            render: read::<api::Doctor>,
        },
        OpsCommand::RestoreHold(a) => hold(
            "restore-hold",
            Body::Hold(api::HoldReason { reason: a.reason }),
            a.conn,
        ),
        OpsCommand::ReleaseRestoreHold(a) => hold(
            "release-restore-hold",
            Body::Hold(api::HoldReason { reason: a.reason }),
            a.conn,
        ),
        OpsCommand::CompleteExecutionRecovery(a) => {
            if !(a.execution_history_complete && a.prior_deployment_fenced) {
                errln!("coordinatorctl complete-execution-recovery: attest with --execution-history-complete and --prior-deployment-fenced (audited operator statements)");
                return EXIT_USAGE;
            }
            hold(
                "complete-execution-recovery",
                Body::Execution(api::ExecutionRecovery {
                    recovery_reference: a.recovery_reference,
                    execution_history_complete: true,
                    prior_deployment_fenced: true,
                }),
                a.conn,
            )
        }
        OpsCommand::ReleaseAdmissionHold(a) => {
            if !(a.admission_history_complete && a.prior_deployment_fenced) {
                errln!("coordinatorctl release-admission-hold: attest with --admission-history-complete and --prior-deployment-fenced (audited operator statements)");
                return EXIT_USAGE;
            }
            hold(
                "release-admission-hold",
                Body::Admission(api::AdmissionRecovery {
                    recovery_reference: a.recovery_reference,
                    admission_history_complete: true,
                    prior_deployment_fenced: true,
                }),
                a.conn,
            )
        }
        OpsCommand::Retain(a) => {
            if a.limit == 0 || a.limit > api::MAX_RETENTION_LIMIT {
                errln!("coordinatorctl retain: --limit must be 1..=100");
                return EXIT_USAGE;
            }
            Call {
                name: "retain",
                method: Method::Post(Body::Retention(api::Retention {
                    before: a.before,
                    limit: a.limit,
                })),
                path: path(&["v1", "retention"]),
                query: vec![],
                conn: a.conn,
                render: read::<api::Retained>,
            }
        }
    };
    perform(call).await
}

fn recover(name: &'static str, a: RecoverArgs) -> Call {
    Call {
        name,
        method: Method::Post(Body::Recovery(api::Recovery { reason: a.reason })),
        path: path(&["v1", "runs", &a.run, name]),
        query: vec![],
        conn: a.conn,
        render: read::<api::RunStatus>,
    }
}

fn hold(name: &'static str, body: Body, conn: Conn) -> Call {
    Call {
        name,
        method: Method::Post(body),
        path: path(&["v1", name]),
        query: vec![],
        conn,
        render: read::<api::Holds>,
    }
}

/// A failure before or instead of an answer.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Failure {
    code: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    url: String,
    title: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<String>,
    next: String,
}

#[derive(Serialize)]
struct Answer<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a Failure>,
}

fn fail(call: &Call, url: &str, exit: u8, failure: Failure) -> u8 {
    match call.conn.format {
        Format::Json => report::print_json(
            call.name,
            false,
            if exit == EXIT_UNAVAILABLE {
                "unavailable"
            } else {
                "refused"
            },
            &[],
            Answer {
                result: None,
                error: Some(&failure),
            },
        ),
        Format::Text => {
            errln!("error[{}] {url}", failure.code);
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

/// Reads the token file: a regular, owner-only file of at most
/// [`MAX_TOKEN_BYTES`], holding one token (surrounding whitespace dropped).
/// Returns the exit code and the failure on refusal; never echoes content.
pub(crate) fn read_token(path: &Path) -> Result<String, (u8, &'static str, String, String)> {
    let shown = path.display().to_string();
    let unreadable = |why: String| {
        (
            EXIT_UNAVAILABLE,
            "coordinator.command.token-file-unreadable",
            why,
            "write the access token to an owner-only file and pass its path with --token-file"
                .to_owned(),
        )
    };
    let meta = std::fs::symlink_metadata(path).map_err(|e| {
        unreadable(match e.kind() {
            std::io::ErrorKind::NotFound => format!("token file {shown} does not exist"),
            kind => format!("token file {shown}: {kind}"),
        })
    })?;
    if meta.file_type().is_symlink() {
        return Err(unreadable(format!(
            "token file {shown} is a symbolic link; pass the file itself"
        )));
    }
    if !meta.is_file() {
        return Err(unreadable(format!(
            "token file {shown} is not a regular file"
        )));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err((
            EXIT_REFUSED,
            "coordinator.command.token-file-permissions",
            format!("token file {shown} has mode {mode:04o}; it must be owner-only"),
            format!("chmod 0600 {shown}"),
        ));
    }
    if meta.len() > MAX_TOKEN_BYTES {
        return Err(unreadable(format!(
            "token file {shown} is larger than 16 KiB"
        )));
    }
    let bytes =
        std::fs::read(path).map_err(|e| unreadable(format!("token file {shown}: {}", e.kind())))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| unreadable(format!("token file {shown} is not UTF-8 text")))?;
    let token = text.trim();
    if token.is_empty() || token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(unreadable(format!(
            "token file {shown} must hold exactly one token"
        )));
    }
    Ok(token.to_owned())
}

/// `--url` parsed by the `url` crate (the `Url` reqwest takes): an absolute
/// `http(s)` URL without credentials, query or fragment. The request URL is
/// this base with the call's path segments appended, so a base path
/// (`https://host/coordinator`) is kept. `Err` holds the usage message.
pub(crate) fn service_url(name: &str, text: &str, segments: &[String]) -> Result<url::Url, String> {
    let not_http = || {
        format!("coordinatorctl {name}: --url must be an http(s) URL, e.g. https://coordinator.example.org")
    };
    let mut url = match url::Url::parse(text) {
        Err(url::ParseError::RelativeUrlWithoutBase) => return Err(not_http()),
        Err(e) => {
            return Err(format!(
                "coordinatorctl {name}: --url is not a valid URL ({e})"
            ))
        }
        Ok(u) => u,
    };
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(not_http());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "coordinatorctl {name}: --url must not carry credentials; pass the token with --token-file"
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!(
            "coordinatorctl {name}: --url must be the service's base URL, without a query or fragment"
        ));
    }
    // An http(s) URL always has a path to extend.
    url.path_segments_mut()
        .map_err(|()| not_http())?
        .pop_if_empty()
        .extend(segments);
    Ok(url)
}

async fn perform(call: Call) -> u8 {
    let (value, rendered) = match fetch(&call).await {
        Ok(answer) => answer,
        Err(exit) => return exit,
    };
    match call.conn.format {
        Format::Json => report::print_json(
            call.name,
            true,
            "ok",
            &[],
            Answer {
                result: Some(&value),
                error: None,
            },
        ),
        Format::Text => out!("{rendered}"),
    }
    EXIT_OK
}

/// The run `run`'s inspection (`GET /v1/runs/{run}/inspect`), for
/// `graph --run`: the request and its refusals exactly as `inspect` makes
/// and reports them (in text, on stderr), named `command`. `Err` holds the
/// exit code after the refusal was printed.
pub(crate) fn inspection(
    command: &'static str,
    run: &str,
    url: &str,
    token_file: &Path,
) -> Result<api::Inspection, u8> {
    let call = Call {
        name: command,
        method: Method::Get,
        path: path(&["v1", "runs", run, "inspect"]),
        query: vec![],
        conn: Conn {
            url: url.to_owned(),
            token_file: token_file.to_owned(),
            format: Format::Text,
        },
        render: read::<api::Inspection>,
    };
    let (value, _) = report::io_runtime()?.block_on(fetch(&call))?;
    serde_json::from_value(value).map_err(|_| {
        let url = service_url(call.name, url, &call.path)
            .map(|u| u.to_string())
            .unwrap_or_default();
        unexpected(&call, &url, 200)
    })
}

/// Sends `call` and reads a 2xx answer as the call's API type: the answer
/// and its text rendering. A refusal is reported (`fail`) and `Err` holds
/// the exit code.
async fn fetch(call: &Call) -> Result<(Value, String), u8> {
    let url = match service_url(call.name, &call.conn.url, &call.path) {
        Ok(u) => u.to_string(),
        Err(message) => {
            errln!("{message}");
            return Err(EXIT_USAGE);
        }
    };
    let token = match read_token(&call.conn.token_file) {
        Ok(t) => t,
        Err((exit, code, title, next)) => {
            return Err(fail(
                call,
                &url,
                exit,
                Failure {
                    code: code.into(),
                    status: None,
                    url: url.clone(),
                    title,
                    detail: None,
                    next,
                },
            ))
        }
    };
    let client = match http_client() {
        Ok(c) => c,
        Err(e) => {
            errln!("coordinatorctl: cannot build the HTTP client: {e}");
            return Err(EXIT_UNAVAILABLE);
        }
    };
    let RawAnswer {
        status,
        problem,
        text,
    } = match send(&client, &url, &token, &call.method, &call.query).await {
        Ok(answer) => answer,
        Err(SendFailure::Encode(e)) => {
            errln!(
                "coordinatorctl {}: cannot encode the request: {e}",
                call.name
            );
            return Err(EXIT_USAGE);
        }
        Err(SendFailure::Unreachable {
            status,
            title,
            chain,
        }) => {
            return Err(fail(
                call,
                &url,
                EXIT_UNAVAILABLE,
                Failure {
                    code: "coordinator.command.service-unreachable".into(),
                    status,
                    url: url.clone(),
                    next: if status.is_some() {
                        "try again".into()
                    } else {
                        "check --url and that the service is running (curl <url>/ready)".into()
                    },
                    title,
                    detail: Some(chain),
                },
            ));
        }
    };
    if (200..300).contains(&status) {
        let value: Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(_) => return Err(unexpected(call, &url, status)),
        };
        // The answer must be the API's type in either format; the JSON
        // report then carries it as the service sent it.
        let Ok(rendered) = (call.render)(&value) else {
            return Err(unexpected(call, &url, status));
        };
        return Ok((value, rendered));
    }
    let parsed: Option<api::Problem> = if problem {
        serde_json::from_str(&text).ok()
    } else {
        None
    };
    let Some(p) = parsed else {
        return Err(unexpected(call, &url, status));
    };
    let exit = if status == 503 {
        EXIT_UNAVAILABLE
    } else {
        EXIT_REFUSED
    };
    let next = next_step(&p.code).to_owned();
    Err(fail(
        call,
        &url,
        exit,
        Failure {
            code: cli_code(&p.code),
            status: Some(p.status),
            url: url.clone(),
            title: p.title,
            detail: p.detail,
            next,
        },
    ))
}

/// The HTTP client of every request to the service: no redirects
/// followed, [`REQUEST_TIMEOUT`] per request.
pub(crate) fn http_client() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(REQUEST_TIMEOUT)
        .build()
}

/// The service's answer to one request, read whole.
pub(crate) struct RawAnswer {
    /// The HTTP status.
    pub status: u16,
    /// The answer is `application/problem+json`.
    pub problem: bool,
    /// The body.
    pub text: String,
}

/// Why a request got no answer.
pub(crate) enum SendFailure {
    /// The request body could not be encoded.
    Encode(serde_json::Error),
    /// The service could not be reached, did not answer in time, or its
    /// answer (with `status`) could not be read; `title` says which,
    /// `chain` is the error and its sources.
    Unreachable {
        status: Option<u16>,
        title: String,
        chain: String,
    },
}

/// Sends one request to `url` with the bearer `token` (the one place the
/// CLI and the console talk to the service).
pub(crate) async fn send(
    client: &reqwest::Client,
    url: &str,
    token: &str,
    method: &Method,
    query: &[(&'static str, String)],
) -> Result<RawAnswer, SendFailure> {
    let mut request = match method {
        Method::Get => client.get(url),
        Method::Post(body) => client
            .post(url)
            .header("content-type", "application/json")
            .body(serde_json::to_string(body).map_err(SendFailure::Encode)?),
    };
    if !query.is_empty() {
        request = request.query(query);
    }
    let response =
        request
            .bearer_auth(token)
            .send()
            .await
            .map_err(|e| SendFailure::Unreachable {
                status: None,
                title: if e.is_timeout() {
                    "the service did not answer in time".to_owned()
                } else {
                    "the service cannot be reached".to_owned()
                },
                chain: error_chain(&e),
            })?;
    let status = response.status().as_u16();
    let problem = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/problem+json"));
    let text = response
        .text()
        .await
        .map_err(|e| SendFailure::Unreachable {
            status: Some(status),
            title: "the answer could not be read".into(),
            chain: error_chain(&e),
        })?;
    Ok(RawAnswer {
        status,
        problem,
        text,
    })
}

fn unexpected(call: &Call, url: &str, status: u16) -> u8 {
    let exit = if status == 502 || status == 503 || status == 504 {
        EXIT_UNAVAILABLE
    } else {
        EXIT_REFUSED
    };
    fail(
        call,
        url,
        exit,
        Failure {
            code: "coordinator.command.unexpected-answer".into(),
            status: Some(status),
            url: url.to_owned(),
            title: "the answer is not the coordinator API's".into(),
            detail: None,
            next: "check that --url names the coordinator service".into(),
        },
    )
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
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

/// Reads `value` as the API type `T` and renders it as text.
fn read<T: DeserializeOwned + Text>(value: &Value) -> Result<String, serde_json::Error> {
    T::deserialize(value).map(|answer| answer.text())
}

/// The text form of an API answer: lines, each ending in `\n`.
///
/// The renderers destructure each type without `..`, so a member added to
/// or renamed in `coordinator-api` breaks the build here until the text
/// form says what to do with it.
trait Text {
    fn text(&self) -> String;
}

/// `name: value` when `value` is set.
fn line(out: &mut String, name: &str, value: Option<&dyn std::fmt::Display>) {
    if let Some(v) = value {
        let _ = writeln!(out, "{name}: {v}");
    }
}

/// An optional member, shown when set.
fn if_set<T: std::fmt::Display>(value: &Option<T>) -> Option<&dyn std::fmt::Display> {
    value.as_ref().map(|v| v as &dyn std::fmt::Display)
}

/// A member present only when `true`, shown as `true`.
fn flag(value: bool) -> Option<&'static dyn std::fmt::Display> {
    value.then_some(&true)
}

/// A count the store may not have answered: `unknown` when it did not.
fn count(n: Option<u64>) -> String {
    n.map_or_else(|| "unknown".to_owned(), |n| n.to_string())
}

impl Text for api::RunStatus {
    fn text(&self) -> String {
        let api::RunStatus {
            run,
            workflow,
            revision,
            state,
            admitted_at,
            deadline_at,
            ended_at,
            outcome,
            output,
            failure,
            failure_path,
            refusal_code,
            payload_erased,
            review,
        } = self;
        let mut out = String::new();
        line(&mut out, "run", Some(run));
        line(&mut out, "workflow", Some(workflow));
        line(&mut out, "revision", Some(revision));
        line(&mut out, "state", Some(state));
        line(&mut out, "admittedAt", Some(admitted_at));
        line(&mut out, "deadlineAt", Some(deadline_at));
        line(&mut out, "endedAt", if_set(ended_at));
        line(&mut out, "outcome", if_set(outcome));
        line(&mut out, "failure", if_set(failure));
        line(&mut out, "failurePath", if_set(failure_path));
        line(&mut out, "refusalCode", if_set(refusal_code));
        line(&mut out, "payloadErased", flag(*payload_erased));
        line(&mut out, "review", if_set(review));
        // Compact JSON, members in the service's order.
        line(&mut out, "output", if_set(output));
        out
    }
}

impl Text for api::RunList {
    fn text(&self) -> String {
        let api::RunList { runs, next_cursor } = self;
        let mut out = String::new();
        if runs.is_empty() {
            out.push_str("no runs\n");
        }
        for r in runs {
            let review = r
                .review
                .as_ref()
                .map(|x| format!("  review={x}"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "{}  {}  {}  {}{review}",
                r.run, r.state, r.workflow, r.admitted_at
            );
        }
        line(&mut out, "nextCursor", if_set(next_cursor));
        out
    }
}

impl Text for api::Inspection {
    fn text(&self) -> String {
        let api::Inspection { status, steps } = self;
        let mut out = status.text();
        if status.payload_erased {
            out.push_str("steps: (erased by retention)\n");
            return out;
        }
        out.push_str("steps:\n");
        for step in steps {
            let api::InspectedStep {
                name,
                kind,
                effect,
                attempts,
                due_at,
                observations,
                restored,
            } = step;
            let _ = write!(out, "  {name} ({kind})");
            let facts: [(&str, Option<&dyn std::fmt::Display>); 5] = [
                ("effect", if_set(effect)),
                ("attempts", if_set(attempts)),
                ("dueAt", if_set(due_at)),
                ("observations", if_set(observations)),
                ("restored", flag(*restored)),
            ];
            for (fact, value) in facts {
                if let Some(v) = value {
                    let _ = write!(out, " {fact}={v}");
                }
            }
            out.push('\n');
        }
        out
    }
}

/// Every member flat, `state.` and `holds.` before the nested ones; a count
/// the store did not answer is `unknown`.
impl Text for api::Doctor {
    fn text(&self) -> String {
        let api::Doctor {
            activation_ready,
            recovery_only,
            state,
            holds,
        } = self;
        let api::DoctorState {
            audit_ready,
            store_ready,
            uncertain,
            attention,
            live,
            review_required,
        } = state;
        let mut out = String::new();
        line(&mut out, "activationReady", Some(activation_ready));
        line(&mut out, "recoveryOnly", Some(recovery_only));
        line(&mut out, "state.auditReady", Some(audit_ready));
        line(&mut out, "state.storeReady", Some(store_ready));
        line(&mut out, "state.uncertain", Some(&count(*uncertain)));
        line(&mut out, "state.attention", Some(&count(*attention)));
        line(&mut out, "state.live", Some(&count(*live)));
        line(
            &mut out,
            "state.reviewRequired",
            Some(&count(*review_required)),
        );
        out.push_str(&holds.text());
        out
    }
}

/// `holds.<member>: <value>`, as the hold routes and `doctor` answer them.
impl Text for api::Holds {
    fn text(&self) -> String {
        let api::Holds {
            restore,
            admission,
            execution_recovery_completed,
            restore_epoch,
        } = self;
        let mut out = String::new();
        line(&mut out, "holds.restore", Some(restore));
        line(&mut out, "holds.admission", Some(admission));
        line(
            &mut out,
            "holds.executionRecoveryCompleted",
            Some(execution_recovery_completed),
        );
        line(&mut out, "holds.restoreEpoch", Some(restore_epoch));
        out
    }
}

/// `Erased N runs ended before T; more remain` (or `none remain`).
impl Text for api::Retained {
    fn text(&self) -> String {
        let api::Retained {
            erased,
            more,
            before,
        } = self;
        format!(
            "Erased {erased} run{} ended before {before}; {}\n",
            if *erased == 1 { "" } else { "s" },
            if *more { "more remain" } else { "none remain" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn status() -> Value {
        json!({
            "run": "r-1", "workflow": "follow-up", "revision": "sha256:9a",
            "state": "failed", "admittedAt": "2026-03-02T09:00:00Z",
            "deadlineAt": "2026-03-16T09:00:00Z", "endedAt": "2026-03-02T09:01:00Z",
            "outcome": null, "output": {"b": 1, "a": [true]}, "failure": "invalid-command",
            "failurePath": "/to", "review": "reconciled"
        })
    }

    #[test]
    fn request_urls_are_built_by_the_url_crate() {
        let url = |base: &str, segments: &[&str]| {
            service_url("status", base, &path(segments)).map(|u| u.to_string())
        };
        let run = ["v1", "runs", "a/b c%", "inspect"];
        assert_eq!(
            url("https://coordinator.example.org", &run).as_deref(),
            Ok("https://coordinator.example.org/v1/runs/a%2Fb%20c%25/inspect")
        );
        // A base path is kept, with or without its trailing slash.
        for base in [
            "http://127.0.0.1:8108/coordinator",
            "http://127.0.0.1:8108/coordinator/",
        ] {
            assert_eq!(
                url(base, &["v1", "doctor"]).as_deref(),
                Ok("http://127.0.0.1:8108/coordinator/v1/doctor"),
                "{base}"
            );
        }
        let refused = |base: &str, why: &str| {
            let e = url(base, &["v1", "doctor"]).expect_err(base);
            assert!(e.contains(why), "{base}: {e}");
        };
        refused("coordinator.example.org", "must be an http(s) URL");
        refused("ftp://coordinator.example.org", "must be an http(s) URL");
        refused("http://127.0.0.1:http://x", "is not a valid URL");
        refused(
            "https://u:pw@coordinator.example.org",
            "must not carry credentials",
        );
        // A query or fragment would end up inside the request URL.
        refused(
            "https://coordinator.example.org/?x=1",
            "without a query or fragment",
        );
        refused(
            "https://coordinator.example.org/#x",
            "without a query or fragment",
        );
    }

    #[test]
    fn status_prints_the_members_that_are_set_in_order() {
        assert_eq!(
            read::<api::RunStatus>(&status()).unwrap(),
            "run: r-1\nworkflow: follow-up\nrevision: sha256:9a\nstate: failed\n\
             admittedAt: 2026-03-02T09:00:00Z\ndeadlineAt: 2026-03-16T09:00:00Z\n\
             endedAt: 2026-03-02T09:01:00Z\nfailure: invalid-command\nfailurePath: /to\n\
             review: reconciled\noutput: {\"b\":1,\"a\":[true]}\n"
        );
    }

    #[test]
    fn list_lines_end_with_the_review_and_the_cursor_follows() {
        let mut other = status();
        other["run"] = json!("r-2");
        other["state"] = json!("running");
        other.as_object_mut().unwrap().remove("review");
        let page = json!({"runs": [status(), other], "nextCursor": "s2"});
        assert_eq!(
            read::<api::RunList>(&page).unwrap(),
            "r-1  failed  follow-up  2026-03-02T09:00:00Z  review=reconciled\n\
             r-2  running  follow-up  2026-03-02T09:00:00Z\nnextCursor: s2\n"
        );
        let empty = json!({"runs": [], "nextCursor": null});
        assert_eq!(read::<api::RunList>(&empty).unwrap(), "no runs\n");
    }

    #[test]
    fn inspect_shows_each_step_with_its_facts() {
        let answer = json!({"status": status(), "steps": [
            {"name": "due", "kind": "wait-until", "effect": null, "attempts": null,
             "dueAt": "2026-03-02T10:00:00Z", "observations": null},
            {"name": "send", "kind": "call", "effect": "unknown", "attempts": 1,
             "dueAt": null, "observations": null, "restored": true},
        ]});
        let text = read::<api::Inspection>(&answer).unwrap();
        assert!(
            text.ends_with(
                "output: {\"b\":1,\"a\":[true]}\nsteps:\n  due (wait-until) dueAt=2026-03-02T10:00:00Z\n  \
                 send (call) effect=unknown attempts=1 restored=true\n"
            ),
            "{text}"
        );
        let mut erased = status();
        erased["payloadErased"] = json!(true);
        erased["output"] = Value::Null;
        let answer = json!({"status": erased, "steps": []});
        let text = read::<api::Inspection>(&answer).unwrap();
        assert!(
            text.ends_with(
                "failurePath: /to\npayloadErased: true\nreview: reconciled\nsteps: (erased by retention)\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn doctor_prints_every_member_flat_and_unknown_for_null() {
        let answer = json!({
            "activationReady": true, "recoveryOnly": false,
            "state": {"auditReady": true, "storeReady": false, "uncertain": null,
                      "attention": null, "live": null, "reviewRequired": null},
            "holds": {"restore": true, "admission": true,
                      "executionRecoveryCompleted": false, "restoreEpoch": 3}
        });
        assert_eq!(
            read::<api::Doctor>(&answer).unwrap(),
            "activationReady: true\nrecoveryOnly: false\nstate.auditReady: true\n\
             state.storeReady: false\nstate.uncertain: unknown\nstate.attention: unknown\n\
             state.live: unknown\nstate.reviewRequired: unknown\nholds.restore: true\n\
             holds.admission: true\nholds.executionRecoveryCompleted: false\n\
             holds.restoreEpoch: 3\n"
        );
    }

    #[test]
    fn retained_counts_runs() {
        let one = json!({"erased": 1, "more": true, "before": "2026-07-01T00:00:00Z"});
        assert_eq!(
            read::<api::Retained>(&one).unwrap(),
            "Erased 1 run ended before 2026-07-01T00:00:00Z; more remain\n"
        );
    }

    #[test]
    fn an_answer_of_another_shape_is_not_read() {
        assert!(read::<api::RunStatus>(&json!({"ready": true})).is_err());
        assert!(read::<api::Holds>(&json!({"restore": "yes"})).is_err());
        assert!(read::<api::Doctor>(&json!([])).is_err());
    }

    #[test]
    fn request_bodies_are_the_api_types() {
        let body = |b: Body| serde_json::to_value(b).unwrap();
        assert_eq!(
            body(Body::Recovery(api::Recovery {
                reason: "t-1".into()
            })),
            json!({"reason": "t-1"})
        );
        assert_eq!(
            body(Body::Execution(api::ExecutionRecovery {
                recovery_reference: "i-1".into(),
                execution_history_complete: true,
                prior_deployment_fenced: true,
            })),
            json!({"recoveryReference": "i-1", "executionHistoryComplete": true, "priorDeploymentFenced": true})
        );
        assert_eq!(
            body(Body::Retention(api::Retention {
                before: "2026-07-01T00:00:00Z".into(),
                limit: 100,
            })),
            json!({"before": "2026-07-01T00:00:00Z", "limit": 100})
        );
    }
}
