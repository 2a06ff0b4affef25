//! The sandbox's Casework stand-in for `examples/reviewed-notice`: the
//! review desk a person (or `scripts/run.sh reviewed-notice --decide`)
//! decides through, and the `coordinator-sandbox decide` command.
//!
//! The sandbox serves a small control listener on `127.0.0.1`
//! (`SANDBOX_CONTROL_URL`); `POST /review-decisions` with `Authorization:
//! Bearer <DIR/control-token>` and a JSON body `{"outcome": "approved" |
//! "rejected", "reviewRequestId"?: string}` decides a pending review
//! request in the [`FakeCasework`] (the only pending one when no id is
//! given), then sends the review completion to the coordinator's
//! `POST /v1/review-completions` as Casework would (the connection's
//! recipient binding [`RECIPIENT_BINDING`] and the completion token the
//! sandbox's issuer minted, `secrets/review-completion-token`). It answers
//! 200 `{reviewRequestId, outcome, completionStatus, completionBody}` when
//! the coordinator answered (any status), 409 `review.none-pending` /
//! `review.several-pending` / `review.not-pending`, 404
//! `review.not-found`, 400 `request.invalid`, 401 `control.unauthorized`,
//! and 502 `coordinator.unreachable` (the decision stands: the
//! coordinator's periodic read finds it).

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use coordinator_fakes::server::problem_with;
use coordinator_fakes::{problem, FakeCasework};
use serde_json::{json, Value};
use subtle::ConstantTimeEq;

/// The Casework connection's `completion.recipientBinding` in
/// `examples/reviewed-notice/runtime.yaml`, sent with every completion.
pub const RECIPIENT_BINDING: &str = "coordinator-v1";
/// The file in DIR holding the control listener's bearer token.
pub const CONTROL_TOKEN_FILE: &str = "control-token";

/// What the control listener decides with.
pub struct ReviewDesk {
    /// The Casework stand-in holding the review requests.
    pub casework: FakeCasework,
    /// `http://127.0.0.1:<SANDBOX_LISTENER_PORT>/v1/review-completions`.
    pub completion_url: String,
    /// The completion bearer token (the secret's bytes as text).
    pub completion_token: String,
    /// The control listener's bearer token.
    pub control_token: String,
}

/// Binds the control listener on a free loopback port and serves it in
/// the background; its base URL (`http://127.0.0.1:PORT`).
///
/// # Errors
/// When no loopback port can be bound.
pub async fn serve_control(desk: ReviewDesk) -> std::io::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let router = Router::new()
        .route("/review-decisions", post(decide_review))
        .with_state(Arc::new(desk));
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            eprintln!("coordinator-sandbox: warning: the control listener stopped: {e}");
        }
    });
    Ok(format!("http://{address}"))
}

/// Prints each review request Casework received since the last call
/// (`casework: review request ID submitted (pending) for application X`),
/// so the person sees what waits for a decision; `seen` counts those
/// printed.
pub fn print_new_review_requests(casework: &FakeCasework, seen: &mut usize) {
    let requests = casework.review_requests();
    for r in requests.iter().skip(*seen) {
        println!(
            "casework: review request {} submitted ({}) for application {}",
            r["id"].as_str().unwrap_or("-"),
            r["status"].as_str().unwrap_or("-"),
            r["summary"]["applicationId"].as_str().unwrap_or("-"),
        );
    }
    *seen = requests.len();
}

async fn decide_review(
    State(desk): State<Arc<ReviewDesk>>,
    headers: HeaderMap,
    body: Option<Json<Value>>,
) -> Response {
    let presented = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if !bool::from(presented.as_bytes().ct_eq(desk.control_token.as_bytes())) {
        return problem(401, "control.unauthorized");
    }
    let Some(Json(body)) = body else {
        return problem(400, "request.invalid");
    };
    let outcome = match body["outcome"].as_str() {
        Some(o @ ("approved" | "rejected")) => o.to_owned(),
        _ => return problem(400, "request.invalid"),
    };
    let id = match pick_request(&desk.casework, body["reviewRequestId"].as_str()) {
        Ok(id) => id,
        Err(refusal) => return refusal,
    };
    let decided_at = time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default();
    if !desk.casework.decide(&id, &outcome, &decided_at, None) {
        return problem(409, "review.not-pending");
    }
    println!("casework: review request {id} decided: {outcome} at {decided_at}");
    match FakeCasework::post_completion(
        &desk.completion_url,
        &desk.completion_token,
        RECIPIENT_BINDING,
        &id,
    )
    .await
    {
        Ok((status, text)) => {
            println!(
                "casework: review completion for {id} sent; the coordinator answered {status}"
            );
            let completion_body =
                serde_json::from_str::<Value>(&text).unwrap_or(Value::String(text));
            Json(json!({
                "reviewRequestId": id,
                "outcome": outcome,
                "completionStatus": status,
                "completionBody": completion_body,
            }))
            .into_response()
        }
        Err(e) => {
            println!("casework: review completion for {id} not sent: {e}");
            problem_with(
                502,
                "coordinator.unreachable",
                json!({"reviewRequestId": id, "outcome": outcome, "detail": e.to_string()}),
            )
        }
    }
}

/// The review request to decide: `id` when it is pending, else the only
/// pending one; a problem answer otherwise.
fn pick_request(casework: &FakeCasework, id: Option<&str>) -> Result<String, Response> {
    let requests = casework.review_requests();
    if let Some(id) = id {
        return match requests.iter().find(|r| r["id"] == id) {
            None => Err(problem(404, "review.not-found")),
            Some(r) if r["status"] != "pending" => Err(problem(409, "review.not-pending")),
            Some(_) => Ok(id.to_owned()),
        };
    }
    let pending: Vec<&str> = requests
        .iter()
        .filter(|r| r["status"] == "pending")
        .filter_map(|r| r["id"].as_str())
        .collect();
    match pending.as_slice() {
        [only] => Ok((*only).to_owned()),
        [] => Err(problem(409, "review.none-pending")),
        several => Err(problem_with(
            409,
            "review.several-pending",
            json!({"pending": several}),
        )),
    }
}

/// `coordinator-sandbox decide DIR approve|decline [--review-request ID]`:
/// asks the sandbox serving DIR to decide a review request and send its
/// completion; prints what happened. Exit 0 when the coordinator accepted
/// the completion (202), 1 otherwise, 2 on usage.
pub async fn decide_command(args: &[String]) -> Result<(), (u8, String)> {
    let usage = || (2, DECIDE_USAGE.to_owned());
    let (dir, decision, id) = match args {
        [dir, decision] => (dir, decision, None),
        [dir, decision, flag, id] if flag == "--review-request" => (dir, decision, Some(id)),
        _ => return Err(usage()),
    };
    let outcome = match decision.as_str() {
        "approve" => "approved",
        "decline" => "rejected",
        _ => return Err(usage()),
    };
    let dir = Path::new(dir);
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name)).map_err(|e| {
            (
                1,
                format!(
                    "cannot read {}: {e} (is coordinator-sandbox serving {}?)",
                    dir.join(name).display(),
                    dir.display()
                ),
            )
        })
    };
    let settings: Value = serde_json::from_str(&read("sandbox.json")?).map_err(|e| {
        (
            1,
            format!("{}/sandbox.json is not JSON: {e}", dir.display()),
        )
    })?;
    let control = settings["SANDBOX_CONTROL_URL"].as_str().ok_or((
        1,
        format!(
            "{}/sandbox.json names no SANDBOX_CONTROL_URL",
            dir.display()
        ),
    ))?;
    let token = read(CONTROL_TOKEN_FILE)?;
    let mut body = json!({"outcome": outcome});
    if let Some(id) = id {
        body["reviewRequestId"] = json!(id);
    }
    let response = reqwest::Client::new()
        .post(format!("{control}/review-decisions"))
        .bearer_auth(token.trim())
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| {
            (
                1,
                format!("the sandbox at {control} did not answer ({e}); is it still running?"),
            )
        })?;
    let status = response.status().as_u16();
    let answer: Value = response
        .text()
        .await
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    decide_report(status, &answer)
}

/// What `decide` prints for the control listener's answer.
fn decide_report(status: u16, answer: &Value) -> Result<(), (u8, String)> {
    let id = answer["reviewRequestId"].as_str().unwrap_or("-");
    match (status, answer["code"].as_str()) {
        (200, _) => {
            let completion = answer["completionStatus"].as_u64().unwrap_or(0);
            // A closed stdout (`| head -0`) loses the line, never the
            // decision, which is made already.
            let _ = writeln!(
                std::io::stdout(),
                "review request {id}: {} in Casework; review completion sent, the coordinator answered {completion}",
                answer["outcome"].as_str().unwrap_or("-")
            );
            if completion == 202 {
                Ok(())
            } else {
                Err((
                    1,
                    format!(
                        "the coordinator refused the review completion: {}",
                        answer["completionBody"]
                    ),
                ))
            }
        }
        (_, Some("review.none-pending")) => Err((
            1,
            "no review request is pending: the run has not submitted one yet, or it was decided already".into(),
        )),
        (_, Some("review.several-pending")) => Err((
            1,
            format!(
                "several review requests are pending ({}); name one with --review-request ID",
                answer["pending"]
            ),
        )),
        (_, Some("review.not-found")) => Err((1, "Casework holds no such review request".into())),
        (_, Some("review.not-pending")) => Err((1, "that review request is no longer pending".into())),
        (_, Some("coordinator.unreachable")) => Err((
            1,
            format!(
                "review request {id} is decided, but the completion did not reach the coordinator ({}); its periodic read will find the decision",
                answer["detail"].as_str().unwrap_or("-")
            ),
        )),
        _ => Err((1, format!("the sandbox answered {status}: {answer}"))),
    }
}

/// `decide`'s usage text.
pub const DECIDE_USAGE: &str =
    "usage: coordinator-sandbox decide DIR approve|decline [--review-request ID]\n\n\
Decides the pending review request in the Casework stand-in of the sandbox\n\
serving DIR (the only pending one, or ID) and sends the coordinator the\n\
review completion, as Casework would.";
