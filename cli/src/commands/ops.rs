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
//! Text output on stdout; a refusal goes to stderr as
//! `error[<problem code>] <url>`, the problem's title and detail, and a
//! `next:` line. `--format json` prints one `CoordinatorCtlReport` with the
//! answer under `result` or the problem under `error`.
//!
//! Exit codes: 0 ok; 1 refused (a problem document, an unsafe token file);
//! 2 usage; 3 the service cannot be reached or answers 503, or the token
//! file cannot be read.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand};
use coordinator_api as api;
use serde::Serialize;
use serde_json::{json, Value};

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
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("coordinatorctl: cannot start the I/O runtime: {e}");
            return EXIT_UNAVAILABLE;
        }
    };
    runtime.block_on(execute(command))
}

enum Method {
    Get,
    Post(Value),
}

struct Call {
    name: &'static str,
    method: Method,
    path: String,
    query: Vec<(&'static str, String)>,
    conn: Conn,
    render: fn(&Value),
}

fn segment(id: &str) -> String {
    id.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.' || b == b'~' {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

async fn execute(command: OpsCommand) -> u8 {
    let call = match command {
        OpsCommand::Status(a) => Call {
            name: "status",
            method: Method::Get,
            path: format!("/v1/runs/{}", segment(&a.run)),
            query: vec![],
            conn: a.conn,
            render: render_status,
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
                    eprintln!("coordinatorctl list: --limit must be 1..=100");
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
                path: "/v1/runs".into(),
                query,
                conn: a.conn,
                render: render_list,
            }
        }
        OpsCommand::Inspect(a) => Call {
            name: "inspect",
            method: Method::Get,
            path: format!("/v1/runs/{}/inspect", segment(&a.run)),
            query: vec![],
            conn: a.conn,
            render: render_inspection,
        },
        OpsCommand::Cancel(a) => recover("cancel", a),
        OpsCommand::RetrySame(a) => recover("retry-same", a),
        OpsCommand::Reconcile(a) => recover("reconcile", a),
        OpsCommand::Doctor(conn) => Call {
            name: "doctor",
            method: Method::Get,
            path: "/v1/doctor".into(),
            query: vec![],
            conn,
            render: render_doctor,
        },
        OpsCommand::RestoreHold(a) => hold("restore-hold", json!({"reason": a.reason}), a.conn),
        OpsCommand::ReleaseRestoreHold(a) => {
            hold("release-restore-hold", json!({"reason": a.reason}), a.conn)
        }
        OpsCommand::CompleteExecutionRecovery(a) => {
            if !(a.execution_history_complete && a.prior_deployment_fenced) {
                eprintln!("coordinatorctl complete-execution-recovery: attest with --execution-history-complete and --prior-deployment-fenced (audited operator statements)");
                return EXIT_USAGE;
            }
            hold(
                "complete-execution-recovery",
                json!({"recoveryReference": a.recovery_reference, "executionHistoryComplete": true, "priorDeploymentFenced": true}),
                a.conn,
            )
        }
        OpsCommand::ReleaseAdmissionHold(a) => {
            if !(a.admission_history_complete && a.prior_deployment_fenced) {
                eprintln!("coordinatorctl release-admission-hold: attest with --admission-history-complete and --prior-deployment-fenced (audited operator statements)");
                return EXIT_USAGE;
            }
            hold(
                "release-admission-hold",
                json!({"recoveryReference": a.recovery_reference, "admissionHistoryComplete": true, "priorDeploymentFenced": true}),
                a.conn,
            )
        }
        OpsCommand::Retain(a) => {
            if a.limit == 0 || a.limit > api::MAX_RETENTION_LIMIT {
                eprintln!("coordinatorctl retain: --limit must be 1..=100");
                return EXIT_USAGE;
            }
            Call {
                name: "retain",
                method: Method::Post(json!({"before": a.before, "limit": a.limit})),
                path: "/v1/retention".into(),
                query: vec![],
                conn: a.conn,
                render: render_retained,
            }
        }
    };
    perform(call).await
}

fn recover(name: &'static str, a: RecoverArgs) -> Call {
    Call {
        name,
        method: Method::Post(json!({"reason": a.reason})),
        path: format!("/v1/runs/{}/{name}", segment(&a.run)),
        query: vec![],
        conn: a.conn,
        render: render_status,
    }
}

fn hold(name: &'static str, body: Value, conn: Conn) -> Call {
    Call {
        name,
        method: Method::Post(body),
        path: format!("/v1/{name}"),
        query: vec![],
        conn,
        render: render_holds,
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
            eprintln!("error[{}] {url}", failure.code);
            match (&failure.status, &failure.detail) {
                (Some(s), Some(d)) => eprintln!("  {s} {}: {d}", failure.title),
                (Some(s), None) => eprintln!("  {s} {}", failure.title),
                (None, Some(d)) => eprintln!("  {}: {d}", failure.title),
                (None, None) => eprintln!("  {}", failure.title),
            }
            eprintln!("  next: {}", failure.next);
        }
    }
    exit
}

/// Reads the token file: a regular, owner-only file of at most
/// [`MAX_TOKEN_BYTES`], holding one token (surrounding whitespace dropped).
/// Returns the exit code and the failure on refusal; never echoes content.
fn read_token(path: &Path) -> Result<String, (u8, &'static str, String, String)> {
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

async fn perform(call: Call) -> u8 {
    let base = call.conn.url.trim_end_matches('/');
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        eprintln!(
            "coordinatorctl {}: --url must be an http(s) URL, e.g. https://coordinator.example.org",
            call.name
        );
        return EXIT_USAGE;
    }
    match reqwest::Url::parse(base) {
        Err(e) => {
            eprintln!(
                "coordinatorctl {}: --url is not a valid URL ({e})",
                call.name
            );
            return EXIT_USAGE;
        }
        Ok(u) if !u.username().is_empty() || u.password().is_some() => {
            eprintln!(
                "coordinatorctl {}: --url must not carry credentials; pass the token with --token-file",
                call.name
            );
            return EXIT_USAGE;
        }
        Ok(_) => {}
    }
    let url = format!("{base}{}", call.path);
    let token = match read_token(&call.conn.token_file) {
        Ok(t) => t,
        Err((exit, code, title, next)) => {
            return fail(
                &call,
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
            )
        }
    };
    let client = match reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(REQUEST_TIMEOUT)
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("coordinatorctl: cannot build the HTTP client: {e}");
            return EXIT_UNAVAILABLE;
        }
    };
    let mut request = match &call.method {
        Method::Get => client.get(&url),
        Method::Post(body) => client
            .post(&url)
            .header("content-type", "application/json")
            .body(body.to_string()),
    };
    if !call.query.is_empty() {
        request = request.query(&call.query);
    }
    let response = match request.bearer_auth(&token).send().await {
        Ok(r) => r,
        Err(e) => {
            let why = if e.is_timeout() {
                "the service did not answer in time".to_owned()
            } else {
                "the service cannot be reached".to_owned()
            };
            return fail(
                &call,
                &url,
                EXIT_UNAVAILABLE,
                Failure {
                    code: "coordinator.command.service-unreachable".into(),
                    status: None,
                    url: url.clone(),
                    title: why,
                    detail: Some(error_chain(&e)),
                    next: "check --url and that the service is running (curl <url>/ready)".into(),
                },
            );
        }
    };
    let status = response.status().as_u16();
    let problem = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/problem+json"));
    let text = match response.text().await {
        Ok(t) => t,
        Err(e) => {
            return fail(
                &call,
                &url,
                EXIT_UNAVAILABLE,
                Failure {
                    code: "coordinator.command.service-unreachable".into(),
                    status: Some(status),
                    url: url.clone(),
                    title: "the answer could not be read".into(),
                    detail: Some(error_chain(&e)),
                    next: "try again".into(),
                },
            )
        }
    };
    if (200..300).contains(&status) {
        let value: Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(_) => return unexpected(&call, &url, status),
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
            Format::Text => (call.render)(&value),
        }
        return EXIT_OK;
    }
    let parsed: Option<api::Problem> = if problem {
        serde_json::from_str(&text).ok()
    } else {
        None
    };
    let Some(p) = parsed else {
        return unexpected(&call, &url, status);
    };
    let exit = if status == 503 {
        EXIT_UNAVAILABLE
    } else {
        EXIT_REFUSED
    };
    let next = next_step(&p.code).to_owned();
    fail(
        &call,
        &url,
        exit,
        Failure {
            code: p.code,
            status: Some(p.status),
            url: url.clone(),
            title: p.title,
            detail: p.detail,
            next,
        },
    )
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

/// The `next:` line for a problem code (seed 000 "Codes you see", and the
/// codes of docs/service.md).
pub fn next_step(code: &str) -> &'static str {
    match code {
        "service.unavailable" => "the database, audit stream or token verifier is unavailable; try again after it recovers",
        "audit.response-unavailable" => "the operation may have completed; inspect the run before repeating it",
        "deployment.refused" => "run `coordinatorctl --runtime-config FILE deployment-status`",
        "deployment.activation-changed" => "restart the service with the runtime file apply used",
        "binding.conflict" | "binding.live-conflict" => "restore the connection settings and restart, or investigate with `coordinator --recovery-only`",
        "execution.held" | "admission.held" => "the restore hold or the admission hold is in place; see `coordinatorctl doctor`",
        "admission.recovery-only" => "this instance runs with --recovery-only; send starts to the ordinary service",
        "restore.hold-required" | "restore.unresolved" | "restore.review-required" | "restore.lease-incompatible" => "a restore step is out of order or held work needs review; see `coordinatorctl doctor` and `list --attention true`",
        "reconcile.unsupported" | "reconcile.refused" | "reconcile.raced" | "retry.refused" | "cancel.refused" => "inspect the run: it may have ended, hold no uncertain call, or have changed meanwhile",
        "receipt.expired" => "the product no longer holds the receipt; this is not evidence the command was never sent",
        "run.payload-erased" => "retention erased the run's payloads; it can no longer be retried or reconciled",
        "authentication.refused" => "the token file must hold a current access token for this service's audience",
        "authorization.refused" => "the policy of this token's client does not grant the action",
        "run.not-found" => "check the run id; a caller sees only its own runs",
        "request.invalid" | "input.invalid" => "correct the request (see the detail)",
        _ => "see docs/operations.md for this code",
    }
}

fn field<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    v.get(name).filter(|x| !x.is_null())
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn render_status(v: &Value) {
    for name in [
        "run",
        "workflow",
        "revision",
        "state",
        "admittedAt",
        "deadlineAt",
        "endedAt",
        "outcome",
        "failure",
        "failurePath",
        "payloadErased",
        "review",
    ] {
        if let Some(x) = field(v, name) {
            println!("{name}: {}", text_of(x));
        }
    }
    if let Some(out) = field(v, "output") {
        println!("output: {out}");
    }
}

fn render_list(v: &Value) {
    let runs = v.get("runs").and_then(Value::as_array);
    let runs = runs.map(Vec::as_slice).unwrap_or_default();
    if runs.is_empty() {
        println!("no runs");
    }
    for r in runs {
        let get = |n: &str| field(r, n).map(text_of).unwrap_or_else(|| "-".into());
        let review = field(r, "review")
            .map(|x| format!("  review={}", text_of(x)))
            .unwrap_or_default();
        println!(
            "{}  {}  {}  {}{review}",
            get("run"),
            get("state"),
            get("workflow"),
            get("admittedAt")
        );
    }
    if let Some(c) = field(v, "nextCursor") {
        println!("nextCursor: {}", text_of(c));
    }
}

fn render_inspection(v: &Value) {
    if let Some(s) = v.get("status") {
        render_status(s);
    }
    let erased = v
        .get("status")
        .and_then(|s| s.get("payloadErased"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if erased {
        println!("steps: (erased by retention)");
        return;
    }
    println!("steps:");
    for st in v
        .get("steps")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let mut line = format!(
            "  {} ({})",
            field(st, "name").map(text_of).unwrap_or_default(),
            field(st, "kind").map(text_of).unwrap_or_default()
        );
        for name in ["effect", "attempts", "dueAt", "observations", "restored"] {
            if let Some(x) = field(st, name) {
                line.push_str(&format!(" {name}={}", text_of(x)));
            }
        }
        println!("{line}");
    }
}

fn render_doctor(v: &Value) {
    fn flat(prefix: &str, v: &Value) {
        if let Value::Object(map) = v {
            for (k, x) in map {
                let name = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flat(&name, x);
            }
        } else if v.is_null() {
            println!("{prefix}: unknown");
        } else {
            println!("{prefix}: {}", text_of(v));
        }
    }
    flat("", v);
}

fn render_holds(v: &Value) {
    if let Value::Object(map) = v {
        for (k, x) in map {
            println!("holds.{k}: {}", text_of(x));
        }
    }
}

/// `Erased N runs ended before T; more remain` (or `none remain`).
fn render_retained(v: &Value) {
    let erased = v.get("erased").and_then(Value::as_u64).unwrap_or(0);
    let before = v.get("before").and_then(Value::as_str).unwrap_or("?");
    let more = v.get("more").and_then(Value::as_bool).unwrap_or(false);
    println!(
        "Erased {erased} run{} ended before {before}; {}",
        if erased == 1 { "" } else { "s" },
        if more { "more remain" } else { "none remain" }
    );
}
