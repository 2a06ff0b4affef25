//! `coordinatorctl start`: `POST /v1/runs` with the workflow, its active
//! revision, the input and an `Idempotency-Key`; with `--wait [SECONDS]`
//! (60 when bare, at most [`api::MAX_RUN_WAIT_SECONDS`]) then one
//! `GET /v1/runs/{run}` with `Prefer: wait=SECONDS`, which the service
//! answers when the run ends or after SECONDS (docs/decisions.md "Waiting
//! for a run's end"). Prints the run's status as `status` does.
//!
//! Exit codes: those of every API command, and with `--wait`
//! [`EXIT_NOT_ENDED`] when the run had not ended when the wait was over
//! (its `state` is printed: `running`, `attention` or `cancel-requested`).

use std::path::PathBuf;

use clap::Args;
use coordinator_api as api;
use serde_json::Value;

use super::render::{print_answer, print_answer_as, read};
use crate::report::{EXIT_NOT_ENDED, EXIT_OK, EXIT_USAGE};
use crate::service_client::{fetch_answer, request_path, Body, Conn, Method, ServiceCall};

/// `start`'s arguments.
#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("run-input").required(true).args(["input", "input_file"])))]
pub struct StartArgs {
    /// The workflow to start.
    #[arg(long, value_name = "W")]
    pub workflow: String,
    /// Its active revision (`sha256:<hex>`, as `deployment-status` and
    /// `package` print it); another is refused (`revision.not-active`).
    #[arg(long, value_name = "REVISION")]
    pub revision: String,
    /// The run's input, a JSON value.
    #[arg(long, value_name = "JSON")]
    pub input: Option<String>,
    /// A file holding the run's input, a JSON value.
    #[arg(long = "input-file", value_name = "PATH")]
    pub input_file: Option<PathBuf>,
    /// The start's idempotency key (1 to 255 visible ASCII characters):
    /// the same key, revision and input start one run, however often sent.
    #[arg(long = "idempotency-key", value_name = "KEY")]
    pub idempotency_key: String,
    /// Wait for the run to end, at most SECONDS (0 to 60; 60 when given
    /// without a value); exit 4 when it has not ended by then.
    #[arg(long, value_name = "SECONDS", num_args = 0..=1,
          default_missing_value = "60",
          value_parser = clap::value_parser!(u64).range(0..=api::MAX_RUN_WAIT_SECONDS))]
    pub wait: Option<u64>,
    #[command(flatten)]
    pub conn: Conn,
}

/// Runs `start`; the exit code.
pub(super) async fn run(a: StartArgs) -> u8 {
    let input = match start_input(&a) {
        Ok(input) => input,
        Err(message) => {
            errln!("coordinatorctl start: {message}");
            return EXIT_USAGE;
        }
    };
    if !api::idempotency_key_valid(&a.idempotency_key) {
        errln!("coordinatorctl start: --idempotency-key must be 1 to 255 visible ASCII characters");
        return EXIT_USAGE;
    }
    let start = ServiceCall {
        command: "start",
        method: Method::PostKeyed(
            Body::Start(api::StartRun {
                workflow: a.workflow,
                revision: a.revision,
                input,
            }),
            a.idempotency_key,
        ),
        path: request_path(&["v1", "runs"]),
        query: vec![],
        conn: a.conn,
    };
    let (answer, status) = match fetch_answer(&start, read_status).await {
        Ok(fetched) => fetched,
        Err(exit) => return exit,
    };
    let Some(seconds) = a.wait.filter(|_| !ended(&status)) else {
        print_answer(&start, &answer, &text(&answer));
        return EXIT_OK;
    };
    // Said first, so that a wait given up (Ctrl-C) still names the run,
    // which was admitted.
    errln!(
        "coordinatorctl start: run {} admitted; waiting up to {seconds} s for its end",
        status.run
    );
    let waited = ServiceCall {
        command: "start",
        method: Method::GetWaiting(seconds),
        path: request_path(&["v1", "runs", &status.run]),
        query: vec![],
        conn: start.conn,
    };
    let asked = std::time::Instant::now();
    let (answer, status) = match fetch_answer(&waited, read_status).await {
        Ok(fetched) => fetched,
        Err(exit) => return exit,
    };
    if ended(&status) {
        print_answer(&waited, &answer, &text(&answer));
        return EXIT_OK;
    }
    print_answer_as(&waited, &answer, &text(&answer), (false, "not-ended"));
    let after = asked.elapsed().as_secs();
    if after + 1 < seconds {
        // The service answered before the wait was over (it is stopping,
        // or it holds too many waits).
        errln!(
            "coordinatorctl start: the service answered after {after} s, before the {seconds} s wait was over; run {} is {} (ask again with `coordinatorctl status`)",
            status.run,
            status.state
        );
    } else {
        errln!(
            "coordinatorctl start: run {} had not ended after {seconds} s (state {})",
            status.run,
            status.state
        );
    }
    EXIT_NOT_ENDED
}

/// The input of `--input` or `--input-file`, read as JSON; `Err` says why
/// not.
fn start_input(a: &StartArgs) -> Result<Value, String> {
    let (text, from) = match (&a.input, &a.input_file) {
        (Some(text), _) => (text.clone(), "--input".to_owned()),
        (None, Some(path)) => (
            std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read --input-file {}: {e}", path.display()))?,
            format!("--input-file {}", path.display()),
        ),
        // Clap requires one of the two.
        (None, None) => return Err("give --input or --input-file".to_owned()),
    };
    serde_json::from_str(&text).map_err(|e| format!("{from} is not JSON: {e}"))
}

/// The answer read as a run's status.
fn read_status(value: &Value) -> Result<api::RunStatus, serde_json::Error> {
    serde_json::from_value(value.clone())
}

/// Whether the run has ended ([`api::ENDED_RUN_STATES`]).
fn ended(status: &api::RunStatus) -> bool {
    api::ENDED_RUN_STATES.contains(&status.state.as_str())
}

/// The text form of a run's status, as `status` prints it.
fn text(answer: &Value) -> String {
    read::<api::RunStatus>(answer).unwrap_or_default()
}
