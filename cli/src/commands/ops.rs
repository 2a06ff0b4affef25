//! The caller and operator commands over the HTTP API (SPEC §8, seed 000):
//! `start` (`ops/starting.rs`), `status`, `list`, `inspect`, `cancel`, `retry-same`, `reconcile`,
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
//! file cannot be read; 4 (`start --wait`) the run had not ended when the
//! wait was over.

pub(crate) mod bulk;
mod filter;
pub(crate) mod moving;

pub(crate) use bulk::{takes_action, ACTIONS as BULK_ACTIONS, NO_LONGER_NEEDED};
mod render;
mod starting;

use clap::{Args, Subcommand};
use coordinator_api as api;

use crate::report::{self, EXIT_OK, EXIT_USAGE};
use crate::service_client::{fetch_answer, request_path, Body, Conn, Method, ServiceCall};
use render::{print_answer, read, Render};

/// `--run ID`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The run id.
    #[arg(long, value_name = "ID", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub run: String,
    #[command(flatten)]
    pub conn: Conn,
}

/// `--run ID --reason REF`, or the bulk form `--filter F --reason REF`
/// (`ops/bulk.rs`).
#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["run", "filter"])))]
pub struct RecoverArgs {
    /// The run id.
    #[arg(long, value_name = "ID", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub run: Option<String>,
    /// Act on every run this filter matches: `key=value` pairs separated by
    /// `,`, keys `workflow`, `state`, `attention`, `step`, `effect`,
    /// `admitted-before` (docs/operations.md "Bulk actions").
    #[arg(long, value_name = "F")]
    pub filter: Option<String>,
    /// An investigation reference holding no personal data.
    #[arg(long, value_name = "REF")]
    pub reason: String,
    /// With --filter: print how many runs match and the first of them;
    /// do nothing.
    #[arg(long = "dry-run")]
    pub dry_run: bool,
    /// With --filter: act without asking on the terminal.
    #[arg(long)]
    pub yes: bool,
    /// With --filter: at most this many runs a second (1..=100; default
    /// 10).
    #[arg(long = "max-per-second", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=100))]
    pub max_per_second: Option<u32>,
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
    /// Only runs admitted before this RFC 3339 instant.
    #[arg(long = "admitted-before", value_name = "T")]
    pub admitted_before: Option<String>,
    /// Only runs whose current step (the last they visited) is this one.
    #[arg(long, value_name = "STEP")]
    pub step: Option<String>,
    /// Only runs whose current step's effect is this one (`accepted`,
    /// `unknown`).
    #[arg(long, value_name = "E")]
    pub effect: Option<String>,
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
    /// Start a run of a workflow's active revision; with --wait, wait for
    /// its end (at most 60 s).
    Start(starting::StartArgs),
    /// Show a run's status.
    Status(RunArgs),
    /// List runs, newest first.
    List(ListArgs),
    /// Show a run's steps, effects and waits (never inputs or responses).
    Inspect(RunArgs),
    /// Cancel a run (its onCancel path where one exists), or every run
    /// --filter matches.
    Cancel(RecoverArgs),
    /// Resend a held call with its original command and key (one run, or
    /// every run --filter matches).
    RetrySame(RecoverArgs),
    /// Ask the product for its receipt of a held call (one run, or every
    /// run --filter matches).
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

/// A command's request and how its answer is read and rendered as text.
struct OperatorCall {
    request: ServiceCall,
    render: Render,
}

async fn execute(command: OpsCommand) -> u8 {
    let command = match command {
        OpsCommand::Start(a) => return starting::run(a).await,
        other => other,
    };
    let command = match bulk_action(command) {
        Ok(b) => return bulk::run(b).await,
        Err(command) => command,
    };
    let call = match operator_call(command) {
        Ok(call) => call,
        Err(exit) => return exit,
    };
    let (answer, rendered) = match fetch_answer(&call.request, call.render).await {
        Ok(fetched) => fetched,
        Err(exit) => return exit,
    };
    print_answer(&call.request, &answer, &rendered);
    EXIT_OK
}

/// The bulk action `command` is (`cancel`, `retry-same` or `reconcile`
/// with `--filter`), or `Err` with the command.
fn bulk_action(command: OpsCommand) -> Result<bulk::Bulk, OpsCommand> {
    let (action, a) = match command {
        OpsCommand::Cancel(a) if a.filter.is_some() => ("cancel", a),
        OpsCommand::RetrySame(a) if a.filter.is_some() => ("retry-same", a),
        OpsCommand::Reconcile(a) if a.filter.is_some() => ("reconcile", a),
        other => return Err(other),
    };
    Ok(bulk::Bulk {
        action,
        filter: a.filter.unwrap_or_default(),
        reason: a.reason,
        dry_run: a.dry_run,
        yes: a.yes,
        max_per_second: a.max_per_second.unwrap_or(bulk::DEFAULT_MAX_PER_SECOND),
        conn: a.conn,
        moving: None,
    })
}

/// The request `command` makes; `Err` holds [`EXIT_USAGE`] after a usage
/// error (a `--limit` out of range, a missing attestation) was printed.
fn operator_call(command: OpsCommand) -> Result<OperatorCall, u8> {
    Ok(match command {
        // Sent by `starting::run`, which `execute` calls first.
        OpsCommand::Start(_) => return Err(EXIT_USAGE),
        OpsCommand::Status(a) => get(
            "status",
            &["v1", "runs", &a.run],
            a.conn,
            read::<api::RunStatus>,
        ),
        OpsCommand::List(a) => list(a)?,
        OpsCommand::Inspect(a) => get(
            "inspect",
            &["v1", "runs", &a.run, "inspect"],
            a.conn,
            read::<api::Inspection>,
        ),
        OpsCommand::Cancel(a) => recover("cancel", a)?,
        OpsCommand::RetrySame(a) => recover("retry-same", a)?,
        OpsCommand::Reconcile(a) => recover("reconcile", a)?,
        OpsCommand::Doctor(conn) => get("doctor", &["v1", "doctor"], conn, read::<api::Doctor>),
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
        OpsCommand::CompleteExecutionRecovery(a) => attested_hold(
            "complete-execution-recovery",
            a.execution_history_complete && a.prior_deployment_fenced,
            "--execution-history-complete and --prior-deployment-fenced",
            Body::Execution(api::ExecutionRecovery {
                recovery_reference: a.recovery_reference,
                execution_history_complete: true,
                prior_deployment_fenced: true,
            }),
            a.conn,
        )?,
        OpsCommand::ReleaseAdmissionHold(a) => attested_hold(
            "release-admission-hold",
            a.admission_history_complete && a.prior_deployment_fenced,
            "--admission-history-complete and --prior-deployment-fenced",
            Body::Admission(api::AdmissionRecovery {
                recovery_reference: a.recovery_reference,
                admission_history_complete: true,
                prior_deployment_fenced: true,
            }),
            a.conn,
        )?,
        OpsCommand::Retain(a) => retain(a)?,
    })
}

/// The request `method` to the path `segments` under `--url`, its answer
/// read and rendered by `render`.
fn call(
    command: &'static str,
    method: Method,
    segments: &[&str],
    query: Vec<(&'static str, String)>,
    conn: Conn,
    render: Render,
) -> OperatorCall {
    OperatorCall {
        request: ServiceCall {
            command,
            method,
            path: request_path(segments),
            query,
            conn,
        },
        render,
    }
}

/// A `GET` of the path `segments` under `--url`, without a query.
fn get(command: &'static str, segments: &[&str], conn: Conn, render: Render) -> OperatorCall {
    call(command, Method::Get, segments, vec![], conn, render)
}

/// `list`: the filters as the query, in the service's order.
fn list(a: ListArgs) -> Result<OperatorCall, u8> {
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
    if let Some(v) = a.admitted_before {
        query.push(("admittedBefore", v));
    }
    if let Some(v) = a.step {
        query.push(("step", v));
    }
    if let Some(v) = a.effect {
        query.push(("effect", v));
    }
    if let Some(v) = a.limit {
        if v == 0 || v > api::MAX_LIST_LIMIT {
            errln!("coordinatorctl list: --limit must be 1..=100");
            return Err(EXIT_USAGE);
        }
        query.push(("limit", v.to_string()));
    }
    if let Some(v) = a.cursor {
        query.push(("cursor", v));
    }
    Ok(call(
        "list",
        Method::Get,
        &["v1", "runs"],
        query,
        a.conn,
        read::<api::RunList>,
    ))
}

/// `cancel`, `retry-same` and `reconcile`: `POST /v1/runs/{run}/{name}`
/// with the reason; the answer is the run's status. `Err` holds
/// [`EXIT_USAGE`] after a bulk option given with `--run` was refused.
fn recover(name: &'static str, a: RecoverArgs) -> Result<OperatorCall, u8> {
    if a.dry_run || a.yes || a.max_per_second.is_some() {
        errln!("coordinatorctl {name}: --dry-run, --yes and --max-per-second go with --filter, not --run; nothing was done");
        return Err(EXIT_USAGE);
    }
    let body = Body::Recovery(api::Recovery { reason: a.reason });
    // Clap requires `--run` or `--filter`, and `--filter` went to the
    // bulk form.
    let run = a.run.unwrap_or_default();
    Ok(call(
        name,
        Method::Post(body),
        &["v1", "runs", &run, name],
        vec![],
        a.conn,
        read::<api::RunStatus>,
    ))
}

/// The hold commands: `POST /v1/{name}` with `body`; the answer is the
/// holds.
fn hold(name: &'static str, body: Body, conn: Conn) -> OperatorCall {
    call(
        name,
        Method::Post(body),
        &["v1", name],
        vec![],
        conn,
        read::<api::Holds>,
    )
}

/// A hold command that takes the operator's audited attestations: a usage
/// error naming the `flags` unless `attested` (every one of them given).
fn attested_hold(
    name: &'static str,
    attested: bool,
    flags: &str,
    body: Body,
    conn: Conn,
) -> Result<OperatorCall, u8> {
    if !attested {
        errln!("coordinatorctl {name}: attest with {flags} (audited operator statements)");
        return Err(EXIT_USAGE);
    }
    Ok(hold(name, body, conn))
}

/// `retain`: `POST /v1/retention` with the cutoff and a `--limit` of
/// 1..=100.
fn retain(a: RetainArgs) -> Result<OperatorCall, u8> {
    if a.limit == 0 || a.limit > api::MAX_RETENTION_LIMIT {
        errln!("coordinatorctl retain: --limit must be 1..=100");
        return Err(EXIT_USAGE);
    }
    let body = Body::Retention(api::Retention {
        before: a.before,
        limit: a.limit,
    });
    Ok(call(
        "retain",
        Method::Post(body),
        &["v1", "retention"],
        vec![],
        a.conn,
        read::<api::Retained>,
    ))
}
