//! The bulk form of `cancel`, `retry-same` and `reconcile`: `--filter`
//! instead of `--run` (docs/operations.md "Bulk actions";
//! docs/decisions.md "Bulk actions drive the single-run actions"); and
//! `move apply`, which drives `POST /v1/runs/{run}/move` the same way
//! ([`Moving`]: the certificate's workflow joins the filter, a run is
//! skipped without a request unless it is listed `running` on the
//! certificate's revision A at a wait the certificate says movable, and
//! the dry run counts the runs that would move and those skipped, by
//! reason).
//!
//! 1. The filter is read ([`super::filter::parse_filter`]); an empty one,
//!    an unknown key or a bad value is refused before any request.
//! 2. Every matching run is listed first (`GET /v1/runs` with the filter,
//!    page by page to the end): the count and the runs acted on are fixed
//!    before anything is done.
//! 3. `--dry-run` prints the count and the first [`DRY_RUN_SHOWN`] runs,
//!    and stops. Otherwise the action is confirmed: `--yes`, or `yes`
//!    typed on a terminal; without either nothing is done
//!    (`coordinator.bulk.confirmation-required`).
//! 4. Each run gets the single-run action (`POST /v1/runs/{run}/{action}`
//!    with the one reason, audited per run by the service), at most
//!    `--max-per-second` a second. A run whose listed state does not take
//!    the action (retry-same and reconcile: not `attention`; cancel: not
//!    `running` or `attention`) is skipped without a request. The service refuses a run
//!    that is no longer held as the action needs (`reconcile.refused`,
//!    `retry.refused`) or that changed meanwhile (`reconcile.raced`):
//!    such a run is counted `skipped` under that code, as another operator
//!    (or an earlier, interrupted run of the same command) acted on it.
//! 5. Progress: a bar on stderr when it is a terminal (text), a line a
//!    run otherwise; with `--format json`, one JSON object a line.
//! 6. Ctrl-C finishes the run in hand and stops (a second Ctrl-C stops at
//!    once); the same command run again goes on. The summary counts the
//!    runs by result and problem code.
//!
//! Exit codes: 0 every run done or skipped; 1 a run refused for another
//! reason; 2 usage (filter, confirmation); 3 the service cannot be
//! reached or answers 503 (the rest is left; run the command again);
//! 130 interrupted.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use coordinator_api as api;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::filter::parse_filter;
use super::moving::{self, AtWait, Moving};
use crate::codes;
use crate::report::{self, EXIT_OK, EXIT_REFUSED, EXIT_UNAVAILABLE, EXIT_USAGE};
use crate::service_client::{
    cli_code, fetch_answer, http_client, read_token, request_path, send, service_url, Body, Conn,
    Method, RawAnswer, SendFailure, ServiceCall,
};
use crate::Format;

/// Exit code of a bulk action stopped by Ctrl-C (the shell's 128 + SIGINT).
pub const EXIT_INTERRUPTED: u8 = 130;

/// `--max-per-second` when none is given: modest, so that an incident's
/// hundreds of runs take a minute or two without crowding the workers.
pub const DEFAULT_MAX_PER_SECOND: u32 = 10;

/// How many of the matching runs `--dry-run` prints.
pub const DRY_RUN_SHOWN: usize = 10;

/// The problem codes that say the run no longer needs the action: it is
/// not held with an unknown effect any more, or changed between the
/// service's read and its commit. Counted `skipped` (here and by the
/// console's bulk actions).
pub(crate) const NO_LONGER_NEEDED: [&str; 9] = [
    "reconcile.refused",
    "retry.refused",
    "reconcile.raced",
    // A move's: the run moved on, or moved already (`move apply` again).
    "move.raced",
    "move.revision-differs",
    "move.run-ended",
    "move.run-held",
    "move.run-not-waiting",
    "move.wait-refused",
];

/// The bulk actions.
pub(crate) const ACTIONS: [&str; 3] = ["reconcile", "retry-same", "cancel"];

/// A bulk action as given on the command line.
pub(crate) struct Bulk {
    /// `cancel`, `retry-same` or `reconcile`.
    pub action: &'static str,
    /// `--filter` as written.
    pub filter: String,
    /// `--reason`.
    pub reason: String,
    /// `--dry-run`.
    pub dry_run: bool,
    /// `--yes`.
    pub yes: bool,
    /// `--max-per-second`, 1..=100.
    pub max_per_second: u32,
    /// `--url`, `--token-file`, `--format`.
    pub conn: Conn,
    /// `move apply`'s certificate; `None` for the recovery actions.
    pub moving: Option<Moving>,
}

/// What became of one run.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    /// The action was applied; the run's state after it.
    Done { state: String },
    /// Not needed: the listed state does not take the action (no request),
    /// or the service's problem code says so ([`NO_LONGER_NEEDED`]).
    Skipped { why: String },
    /// The service refused the action with this problem code, saying
    /// why (the problem's `detail`, else its `title`).
    Refused { code: String, detail: String },
    /// No answer of the API (unreachable, 503, another answer): the bulk
    /// action stops.
    Failed { code: String, detail: String },
}

impl Outcome {
    /// `done`, `skipped`, `refused` or `failed`.
    fn result(&self) -> &'static str {
        match self {
            Outcome::Done { .. } => "done",
            Outcome::Skipped { .. } => "skipped",
            Outcome::Refused { .. } => "refused",
            Outcome::Failed { .. } => "failed",
        }
    }

    /// Whether the service refused the caller, not the run
    /// (`authentication.refused`, `authorization.refused`): every other
    /// run would be refused the same way.
    fn refuses_the_caller(&self) -> bool {
        let caller = [
            &api::problems::AUTHENTICATION_REFUSED,
            &api::problems::AUTHORIZATION_REFUSED,
        ];
        matches!(self, Outcome::Refused { code, .. }
            if caller.iter().any(|p| *code == cli_code(p.code)))
    }

    /// The problem code or the skipped run's listed state, if any.
    fn code(&self) -> Option<&str> {
        match self {
            Outcome::Done { .. } => None,
            Outcome::Skipped { why } => Some(why),
            Outcome::Refused { code, .. } | Outcome::Failed { code, .. } => Some(code),
        }
    }
}

/// Runs a bulk action; returns the exit code.
pub(crate) async fn run(b: Bulk) -> u8 {
    let query = match parse_filter(&b.filter) {
        Ok(q) => q,
        Err(e) => {
            let at = e
                .column
                .map_or("--filter".to_owned(), |c| format!("--filter, column {c}"));
            let next =
                "correct --filter (docs/operations.md \"Bulk actions\"), and try it with --dry-run";
            return refuse(&b, e.code, &at, &e.message, next);
        }
    };
    let query = match moving_query(&b, query) {
        Ok(q) => q,
        Err(exit) => return exit,
    };
    let runs = match matching_runs(&b, query.clone()).await {
        Ok(runs) => runs,
        Err(exit) => return exit,
    };
    let at_wait = match runs_at_waits(&b, &query).await {
        Ok(at) => at,
        Err(exit) => return exit,
    };
    if b.dry_run {
        print_dry_run(&b, &runs, &at_wait);
        return EXIT_OK;
    }
    if !runs.is_empty() {
        if let Err(exit) = confirm(&b, runs.len()) {
            return exit;
        }
    }
    act_on_all(&b, &runs, &at_wait).await
}

/// `move apply`: the certificate's workflow added to the filter
/// ([`Moving::with_workflow`]); the query as it is otherwise.
fn moving_query(
    b: &Bulk,
    query: Vec<(&'static str, String)>,
) -> Result<Vec<(&'static str, String)>, u8> {
    let Some(m) = &b.moving else {
        return Ok(query);
    };
    m.with_workflow(query).map_err(|message| {
        refuse(
            b,
            codes::BULK_FILTER_VALUE,
            "--filter",
            &message,
            "leave `workflow` out of the filter (the certificate's is added) or use the certificate of that workflow",
        )
    })
}

/// `move apply`: where the runs `query` matches wait, listed once per wait
/// step of A (`step` and `state=running` in place of the filter's own).
async fn runs_at_waits(b: &Bulk, query: &[(&'static str, String)]) -> Result<AtWait, u8> {
    let mut at = AtWait::new();
    let Some(m) = &b.moving else {
        return Ok(at);
    };
    for (wait, movable, at_this) in m.wait_queries(query) {
        for run in matching_runs(b, at_this).await? {
            at.insert(run.run, (wait.clone(), movable));
        }
    }
    Ok(at)
}

/// Every run `query` matches, newest first, listed page by page to the
/// end. `Err` holds the exit code after a refusal was reported.
async fn matching_runs(
    b: &Bulk,
    query: Vec<(&'static str, String)>,
) -> Result<Vec<api::RunStatus>, u8> {
    let mut runs = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut page_query = query.clone();
        page_query.push(("limit", api::MAX_LIST_LIMIT.to_string()));
        if let Some(c) = cursor.take() {
            page_query.push(("cursor", c));
        }
        let call = ServiceCall {
            command: b.action,
            method: Method::Get,
            path: request_path(&["v1", "runs"]),
            query: page_query,
            conn: b.conn.clone(),
        };
        let (_, page) = fetch_answer(&call, |v: &Value| api::RunList::deserialize(v)).await?;
        runs.extend(page.runs);
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => return Ok(runs),
        }
    }
}

/// `--dry-run`: the count and the first [`DRY_RUN_SHOWN`] runs (for
/// `move apply`, how many would move and how many are skipped, by reason).
fn print_dry_run(b: &Bulk, runs: &[api::RunStatus], at_wait: &AtWait) {
    if let Some(m) = &b.moving {
        return moving::print_dry_run(b.action, b.conn.format, runs, DRY_RUN_SHOWN, |r| {
            m.skip_reason(r, at_wait)
        });
    }
    let shown = &runs[..runs.len().min(DRY_RUN_SHOWN)];
    match b.conn.format {
        Format::Json => report::print_json_line(
            b.action,
            true,
            "dry-run",
            json!({"matched": runs.len(), "first": shown}),
        ),
        Format::Text => {
            outln!(
                "{} --dry-run: {} runs match the filter; nothing was done",
                b.action,
                runs.len()
            );
            for r in shown {
                outln!(
                    "  {}  {}  {}  admitted {}",
                    r.run,
                    r.workflow,
                    r.state,
                    r.admitted_at
                );
            }
            if runs.len() > shown.len() {
                outln!("  ... and {} more", runs.len() - shown.len());
            }
        }
    }
}

/// Asks for confirmation unless `--yes`: on a terminal, `yes` goes on;
/// anything else, or no terminal, is `coordinator.bulk.confirmation-required`
/// (`Err` holds [`EXIT_USAGE`] after it was reported).
fn confirm(b: &Bulk, count: usize) -> Result<(), u8> {
    if b.yes {
        return Ok(());
    }
    let next = "check the runs with --dry-run, then confirm on a terminal or pass --yes";
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return Err(refuse(
            b,
            codes::BULK_CONFIRMATION_REQUIRED,
            "--yes",
            &format!("{count} runs match, and there is no terminal to confirm on"),
            next,
        ));
    }
    err!(
        "{} {count} runs matching `{}`, each audited with reason `{}`? Type yes to go on: ",
        b.action,
        b.filter,
        b.reason
    );
    let mut answer = String::new();
    if stdin.read_line(&mut answer).is_ok() && answer.trim() == "yes" {
        return Ok(());
    }
    Err(refuse(
        b,
        codes::BULK_CONFIRMATION_REQUIRED,
        "--yes",
        "not confirmed: nothing was done",
        next,
    ))
}

/// Reports a refusal of the command itself (`code`, where, what, next),
/// in text or as a JSON line; returns [`EXIT_USAGE`].
fn refuse(b: &Bulk, code: &str, at: &str, message: &str, next: &str) -> u8 {
    match b.conn.format {
        Format::Json => report::print_json_line(
            b.action,
            false,
            "refused",
            json!({"error": {"code": code, "at": at, "title": message, "next": next}}),
        ),
        Format::Text => errln!("error[{code}] {at}\n  {message}\n  next: {next}"),
    }
    EXIT_USAGE
}

/// What a run acted on needs of the bulk action, read once: the token, the
/// client and the request body.
struct Sender {
    client: reqwest::Client,
    token: String,
    body: Method,
}

/// The action on each of `runs` in turn, with progress and the summary.
async fn act_on_all(b: &Bulk, runs: &[api::RunStatus], at_wait: &AtWait) -> u8 {
    let sender = match sender(b) {
        Ok(s) => s,
        Err(exit) => return exit,
    };
    let stop = interrupt_flag();
    let progress = Progress::new(b.conn.format, runs.len());
    let mut ticks = tokio::time::interval(Duration::from_secs_f64(
        1.0 / f64::from(b.max_per_second.max(1)),
    ));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut outcomes: Vec<Outcome> = Vec::new();
    let mut unavailable = false;
    for (i, listed) in runs.iter().enumerate() {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let outcome = match skip_reason(b, listed, at_wait) {
            Some(why) => Outcome::Skipped { why },
            None => {
                ticks.tick().await;
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                act_on(b, &sender, &listed.run).await
            }
        };
        progress.show(b.action, &listed.run, &outcome, i + 1);
        unavailable = matches!(outcome, Outcome::Failed { .. });
        // The token itself is refused: every other run would be too.
        let caller_refused = outcome.refuses_the_caller();
        outcomes.push(outcome);
        if unavailable || caller_refused {
            break;
        }
    }
    progress.finish();
    let interrupted = stop.load(Ordering::SeqCst) && outcomes.len() < runs.len();
    let exit = if interrupted {
        EXIT_INTERRUPTED
    } else if unavailable {
        EXIT_UNAVAILABLE
    } else if outcomes
        .iter()
        .any(|o| matches!(o, Outcome::Refused { .. }))
    {
        EXIT_REFUSED
    } else {
        EXIT_OK
    };
    print_summary(b, runs.len(), &outcomes, interrupted, exit);
    exit
}

/// The token, the client and the body of every request; `Err` holds the
/// exit code after the reason was printed (the listing read the same
/// token just before, so this is rare).
fn sender(b: &Bulk) -> Result<Sender, u8> {
    let token = read_token(&b.conn.token_file).map_err(|(exit, code, title, _)| {
        errln!("error[{code}] {}\n  {title}", b.conn.token_file.display());
        exit
    })?;
    let client = http_client().map_err(|e| {
        errln!("coordinatorctl: cannot build the HTTP client: {e}");
        EXIT_UNAVAILABLE
    })?;
    Ok(Sender {
        client,
        token,
        body: Method::Post(match &b.moving {
            Some(m) => Body::Move(api::MoveRun {
                certificate: m.certificate.clone(),
                reason: b.reason.clone(),
            }),
            None => Body::Recovery(api::Recovery {
                reason: b.reason.clone(),
            }),
        }),
    })
}

/// Why `listed` is skipped without a request, or `None` when the action
/// is asked for: the listed state ([`not_needed`]), or for a move
/// [`Moving::skip_reason`].
fn skip_reason(b: &Bulk, listed: &api::RunStatus, at_wait: &AtWait) -> Option<String> {
    match &b.moving {
        Some(m) => m.skip_reason(listed, at_wait),
        None => not_needed(b.action, &listed.state),
    }
}

/// Whether a run in the listed `state` takes `action` in bulk: retry-same
/// and reconcile a run in `attention`, cancel one `running` or in
/// `attention` (a `cancel-requested` run was cancelled already: it ends
/// when the call in flight answers).
pub(crate) fn takes_action(action: &str, state: &str) -> bool {
    match action {
        "cancel" => matches!(state, "running" | "attention"),
        _ => state == "attention",
    }
}

/// Why a run in the listed `state` does not take `action` (no request is
/// made), or `None` when it does.
fn not_needed(action: &str, state: &str) -> Option<String> {
    (!takes_action(action, state)).then(|| format!("state {state}"))
}

/// The single-run action on `run`: `POST /v1/runs/{run}/{action}`.
async fn act_on(b: &Bulk, s: &Sender, run: &str) -> Outcome {
    let url = match service_url(
        b.action,
        &b.conn.url,
        &request_path(&["v1", "runs", run, b.action]),
    ) {
        Ok(u) => u.to_string(),
        Err(message) => {
            return Outcome::Failed {
                code: codes::COMMAND_UNEXPECTED_ANSWER.into(),
                detail: message,
            }
        }
    };
    match send(&s.client, &url, &s.token, &s.body, &[]).await {
        Ok(answer) => outcome_of(answer),
        Err(SendFailure::Encode(e)) => Outcome::Failed {
            code: codes::COMMAND_UNEXPECTED_ANSWER.into(),
            detail: e.to_string(),
        },
        Err(SendFailure::Unreachable { title, chain, .. }) => Outcome::Failed {
            code: codes::COMMAND_SERVICE_UNREACHABLE.into(),
            detail: format!("{title}: {chain}"),
        },
    }
}

/// The outcome an answer of the single-run action says.
fn outcome_of(answer: RawAnswer) -> Outcome {
    let unexpected = |status: u16| Outcome::Failed {
        code: codes::COMMAND_UNEXPECTED_ANSWER.into(),
        detail: format!("HTTP {status}: the answer is not the coordinator API's"),
    };
    if (200..300).contains(&answer.status) {
        return match serde_json::from_str::<api::RunStatus>(&answer.text) {
            Ok(st) => Outcome::Done { state: st.state },
            Err(_) => unexpected(answer.status),
        };
    }
    let problem = answer
        .problem
        .then(|| serde_json::from_str::<api::Problem>(&answer.text).ok())
        .flatten();
    match problem {
        Some(p) if p.status == 503 || answer.status == 503 => Outcome::Failed {
            code: cli_code(&p.code),
            detail: p.title,
        },
        Some(p) if NO_LONGER_NEEDED.contains(&p.code.as_str()) => Outcome::Skipped {
            why: cli_code(&p.code),
        },
        Some(p) => Outcome::Refused {
            code: cli_code(&p.code),
            detail: p.detail.unwrap_or(p.title),
        },
        None => unexpected(answer.status),
    }
}

/// Set by the first Ctrl-C (the run in hand is finished, then the action
/// stops); a second Ctrl-C ends the process at once.
fn interrupt_flag() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            flag.store(true, Ordering::SeqCst);
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(i32::from(EXIT_INTERRUPTED));
            }
        }
    });
    stop
}

/// How progress is shown: a bar on a terminal (text), a line a run
/// otherwise, a JSON object a line with `--format json`.
enum Progress {
    Bar(indicatif::ProgressBar),
    Lines,
    Json { total: usize },
}

impl Progress {
    /// The progress of `total` runs in `format`.
    fn new(format: Format, total: usize) -> Progress {
        match format {
            Format::Json => Progress::Json { total },
            Format::Text if std::io::stderr().is_terminal() => {
                let bar = indicatif::ProgressBar::new(u64::try_from(total).unwrap_or(u64::MAX));
                if let Ok(style) = indicatif::ProgressStyle::with_template(
                    "{bar:40} {pos}/{len} runs  {per_sec}  eta {eta}",
                ) {
                    bar.set_style(style);
                }
                Progress::Bar(bar)
            }
            Format::Text => Progress::Lines,
        }
    }

    /// Shows the `position`-th run's outcome.
    fn show(&self, action: &str, run: &str, outcome: &Outcome, position: usize) {
        let detail = match outcome {
            Outcome::Done { state } => state.clone(),
            Outcome::Skipped { why } => why.clone(),
            Outcome::Refused { code, detail } | Outcome::Failed { code, detail } => {
                format!("{code}: {detail}")
            }
        };
        let line = format!("{:<8} {run}  {detail}", outcome.result());
        match self {
            Progress::Bar(bar) => {
                if !matches!(outcome, Outcome::Done { .. }) {
                    bar.println(line);
                }
                bar.inc(1);
            }
            Progress::Lines => outln!("{line}"),
            Progress::Json { total } => {
                let state = match outcome {
                    Outcome::Done { state } => Some(state.as_str()),
                    _ => None,
                };
                let said = match outcome {
                    Outcome::Refused { detail, .. } | Outcome::Failed { detail, .. } => {
                        Some(detail.as_str())
                    }
                    _ => None,
                };
                let value = json!({
                    "kind": "BulkProgress", "command": action, "run": run,
                    "result": outcome.result(), "state": state, "code": outcome.code(),
                    "detail": said, "position": position, "total": total,
                });
                outln!("{value}");
            }
        }
    }

    /// Clears the bar.
    fn finish(&self) {
        if let Progress::Bar(bar) = self {
            bar.finish_and_clear();
        }
    }
}

/// One line of the summary: a result, its code (or a skipped run's
/// listed state), how many runs.
#[derive(Serialize)]
struct Count {
    result: &'static str,
    code: Option<String>,
    runs: usize,
}

/// The summary by result and problem code, in text or as the last JSON line.
fn print_summary(b: &Bulk, matched: usize, outcomes: &[Outcome], interrupted: bool, exit: u8) {
    let mut counts: BTreeMap<(u8, &'static str, Option<String>), usize> = BTreeMap::new();
    for o in outcomes {
        let order = match o {
            Outcome::Done { .. } => 0,
            Outcome::Skipped { .. } => 1,
            Outcome::Refused { .. } => 2,
            Outcome::Failed { .. } => 3,
        };
        *counts
            .entry((order, o.result(), o.code().map(str::to_owned)))
            .or_default() += 1;
    }
    let counts: Vec<Count> = counts
        .into_iter()
        .map(|((_, result, code), runs)| Count { result, code, runs })
        .collect();
    let status = match exit {
        EXIT_OK => "ok",
        EXIT_INTERRUPTED => "interrupted",
        EXIT_UNAVAILABLE => "unavailable",
        _ => "refused",
    };
    match b.conn.format {
        Format::Json => {
            let extra: Value =
                json!({"matched": matched, "handled": outcomes.len(), "summary": counts});
            report::print_json_line(b.action, exit == EXIT_OK, status, extra);
        }
        Format::Text => {
            outln!(
                "{}: {matched} runs matched the filter; {} handled",
                b.action,
                outcomes.len()
            );
            for c in &counts {
                outln!(
                    "  {:<8} {:<40} {}",
                    c.result,
                    c.code.as_deref().unwrap_or(""),
                    c.runs
                );
            }
            if interrupted || exit == EXIT_UNAVAILABLE {
                outln!("stopped: run the same command again to go on (a run acted on no longer matches, or the service refuses it again)");
            } else if outcomes.len() < matched
                && outcomes.last().is_some_and(Outcome::refuses_the_caller)
            {
                outln!("stopped: the service refuses this token the action, so no other run was asked; use a token whose policy grants it (docs/runtime.md) and run the same command again");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, body: Value) -> RawAnswer {
        RawAnswer {
            status,
            problem: status >= 400,
            text: body.to_string(),
        }
    }

    fn problem(status: u16, code: &str) -> RawAnswer {
        answer(
            status,
            json!({"type": "about:blank", "title": "t", "status": status, "code": code}),
        )
    }

    #[test]
    fn a_run_that_no_longer_needs_the_action_is_skipped() {
        for code in NO_LONGER_NEEDED {
            assert_eq!(
                outcome_of(problem(409, code)),
                Outcome::Skipped {
                    why: format!("coordinator.{code}")
                }
            );
        }
        assert_eq!(
            outcome_of(problem(409, "receipt.expired")),
            Outcome::Refused {
                code: "coordinator.receipt.expired".into(),
                detail: "t".into()
            }
        );
        // A refusal of the token (not of the run) stops the action.
        assert!(outcome_of(problem(403, "authorization.refused")).refuses_the_caller());
        assert!(outcome_of(problem(401, "authentication.refused")).refuses_the_caller());
        assert!(!outcome_of(problem(409, "receipt.expired")).refuses_the_caller());
        // The problem's `detail`, when it has one, says why.
        let said = answer(
            409,
            json!({"type": "about:blank", "title": "t", "status": 409,
                   "code": "move.refused", "detail": "the run waits at `due`"}),
        );
        assert_eq!(
            outcome_of(said),
            Outcome::Refused {
                code: "coordinator.move.refused".into(),
                detail: "the run waits at `due`".into()
            }
        );
        assert!(matches!(
            outcome_of(problem(503, "store-unavailable")),
            Outcome::Failed { .. }
        ));
        assert!(matches!(
            outcome_of(answer(200, json!({"nope": 1}))),
            Outcome::Failed { .. }
        ));
    }

    #[test]
    fn the_listed_state_decides_whether_a_request_is_made() {
        assert_eq!(not_needed("reconcile", "attention"), None);
        assert_eq!(not_needed("retry-same", "attention"), None);
        assert_eq!(
            not_needed("reconcile", "running"),
            Some("state running".into())
        );
        assert_eq!(not_needed("cancel", "running"), None);
        assert_eq!(
            not_needed("cancel", "cancel-requested"),
            Some("state cancel-requested".into())
        );
        assert_eq!(
            not_needed("cancel", "finished"),
            Some("state finished".into())
        );
    }
}
