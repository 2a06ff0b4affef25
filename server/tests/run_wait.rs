//! `GET /v1/runs/{run}` with `Prefer: wait=N` (RFC 7240) over a real
//! socket, one in-process service (`ops_support`): an end committed while
//! a caller waits answers it at once; a run that does not end is answered
//! at N with its state; N over 60 is refused; a wait the service cannot
//! read is ignored; a stopping service answers its waits at once; a
//! caller that goes away releases its wait (docs/decisions.md "Waiting
//! for a run's end").

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::sync::Arc;
use std::time::Duration;

use coordinator_engine::Engine;
use coordinator_ports::MemoryRunStore;
use serde_json::{json, Value};

mod ops_support;

use ops_support::{Instance, OPERATOR, PRODUCER};

/// Longer than any answer here takes, far shorter than the 60 s waits
/// asked for: a wait that was not woken fails the test rather than
/// answering late.
const WOKEN_WITHIN: Duration = Duration::from_secs(30);

/// One answer: status, `Preference-Applied`, body.
type Answer = (u16, Option<String>, Value);

async fn status_of(base: &str, token: &str, run: &str, prefer: &[&str]) -> Answer {
    let mut request = reqwest::Client::new()
        .get(format!("{base}/v1/runs/{run}"))
        .bearer_auth(token);
    for field in prefer {
        request = request.header("prefer", *field);
    }
    let answer = request.send().await.unwrap();
    let status = answer.status().as_u16();
    let applied = answer
        .headers()
        .get("preference-applied")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = serde_json::from_str(&answer.text().await.unwrap()).unwrap();
    (status, applied, body)
}

/// [`status_of`] as the producer, in a task of its own.
fn spawn_status(
    instance: &Instance,
    run: &str,
    prefer: &'static [&'static str],
) -> tokio::task::JoinHandle<Answer> {
    let (base, token, run) = (
        instance.base.clone(),
        instance.token(PRODUCER),
        run.to_owned(),
    );
    tokio::spawn(async move { status_of(&base, &token, &run, prefer).await })
}

/// A `reviewed-notice` run (it waits for a review, so it stays `running`).
async fn started(instance: &Instance, key: &str) -> String {
    instance.start_reviewed_notice(key).await
}

/// Until `engine` holds `count` waits (the waiting request got that far).
async fn waits_held(engine: &Engine, count: usize) {
    tokio::time::timeout(WOKEN_WITHIN, async {
        while engine.run_ends.waiting() != count {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("never {count} waits held"));
}

async fn instance() -> Instance {
    ops_support::start("db-wait-1", false, Arc::new(MemoryRunStore::new())).await
}

#[tokio::test]
async fn a_run_that_ends_while_a_caller_waits_answers_it_at_once() {
    let instance = instance().await;
    let run = started(&instance, "k-ends").await;
    let waiting = spawn_status(&instance, &run, &["respond-async", "wait=60"]);
    waits_held(&instance.engine, 1).await;
    let cancelled = reqwest::Client::new()
        .post(format!("{}/v1/runs/{run}/cancel", instance.base))
        .bearer_auth(instance.token(OPERATOR))
        .header("content-type", "application/json")
        .body(json!({"reason": "inc-1"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(cancelled.status().as_u16(), 200);
    // `cancel-requested` is no end: the wait goes on until the worker
    // commits the cancel's path.
    let body: Value = serde_json::from_str(&cancelled.text().await.unwrap()).unwrap();
    assert_eq!(body["state"], "cancel-requested", "{body}");
    assert_eq!(instance.engine.run_ends.waiting(), 1);
    instance.engine.worker.run_until_idle(10).await.unwrap();
    let (status, applied, body) = tokio::time::timeout(WOKEN_WITHIN, waiting)
        .await
        .expect("woken by the cancel's commit")
        .unwrap();
    assert_eq!(
        (status, applied.as_deref()),
        (200, Some("wait=60")),
        "{body}"
    );
    assert_eq!(body["state"], "cancelled-after-effect", "{body}");
    waits_held(&instance.engine, 0).await;

    // An ended run answers at once, the preference applied.
    let (status, applied, body) = tokio::time::timeout(
        WOKEN_WITHIN,
        status_of(
            &instance.base,
            &instance.token(PRODUCER),
            &run,
            &["wait=60"],
        ),
    )
    .await
    .unwrap();
    assert_eq!((status, applied.as_deref()), (200, Some("wait=60")));
    assert_eq!(body["state"], "cancelled-after-effect");
}

#[tokio::test]
async fn a_run_that_does_not_end_is_answered_at_n_with_its_state() {
    let instance = instance().await;
    let run = started(&instance, "k-runs").await;
    let token = instance.token(PRODUCER);
    for (prefer, applied) in [("wait=1", "wait=1"), ("WAIT=\"0\"", "wait=0")] {
        let (status, got, body) = status_of(&instance.base, &token, &run, &[prefer]).await;
        assert_eq!((status, got.as_deref()), (200, Some(applied)), "{body}");
        assert_eq!(body["state"], "running", "{body}");
        assert_eq!(body["run"], run.as_str());
    }
    assert_eq!(instance.engine.run_ends.waiting(), 0);
}

#[tokio::test]
async fn a_wait_over_sixty_seconds_is_refused_and_one_not_in_seconds_ignored() {
    let instance = instance().await;
    let run = started(&instance, "k-bounds").await;
    let token = instance.token(PRODUCER);
    for prefer in ["wait=61", "return=minimal, wait=3600"] {
        let (status, applied, body) = status_of(&instance.base, &token, &run, &[prefer]).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(body["code"], "request.wait-too-long", "{body}");
        assert_eq!(applied, None);
    }
    for prefer in ["wait=soon", "wait=1.5", "wait=-1"] {
        let (status, applied, body) = status_of(&instance.base, &token, &run, &[prefer]).await;
        assert_eq!((status, applied), (200, None), "{prefer}: {body}");
        assert_eq!(body["state"], "running");
    }
    // The refusal comes after the caller and the run are checked.
    let (status, _, body) = status_of(&instance.base, &token, "no-such-run", &["wait=61"]).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (404, Some("run.not-found"))
    );
}

#[tokio::test]
async fn a_stopping_service_answers_its_waits_at_once_without_applying_them() {
    let instance = instance().await;
    let run = started(&instance, "k-stop").await;
    let waiting = spawn_status(&instance, &run, &["wait=60"]);
    waits_held(&instance.engine, 1).await;
    instance.engine.run_ends.close();
    let (status, applied, body) = tokio::time::timeout(WOKEN_WITHIN, waiting)
        .await
        .expect("answered when the service stops")
        .unwrap();
    assert_eq!((status, applied), (200, None), "{body}");
    assert_eq!(body["state"], "running");
    // A new wait while stopping is answered at once, not applied.
    let (status, applied, _) = tokio::time::timeout(
        WOKEN_WITHIN,
        status_of(
            &instance.base,
            &instance.token(PRODUCER),
            &run,
            &["wait=60"],
        ),
    )
    .await
    .unwrap();
    assert_eq!((status, applied), (200, None));
}

#[tokio::test]
async fn a_caller_that_goes_away_releases_its_wait() {
    let instance = instance().await;
    let run = started(&instance, "k-gone").await;
    let waiting = spawn_status(&instance, &run, &["wait=60"]);
    waits_held(&instance.engine, 1).await;
    // The client's task, its connection with it, is dropped.
    waiting.abort();
    waits_held(&instance.engine, 0).await;
}
