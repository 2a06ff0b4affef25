//! Real-binary journeys on PostgreSQL 17: the built `coordinator` binary,
//! a package applied with the library `apply` (what `coordinatorctl apply`
//! runs), the product and issuer fakes over real sockets, HTTP with
//! reqwest. Each test has its own namespace; children are killed by a Drop
//! guard, so a failing test leaves no process behind.
//!
//! Needs `COORDINATOR_TEST_DATABASE_URL`, `_MIGRATION_URL` and
//! `_RUNTIME_URL` (`eval "$(scripts/postgres.sh start)"`); each test prints
//! a notice and passes when they are unset, except under `CI=true` (where
//! scripts/test.sh sets them), where it fails. `COORDINATOR_JOURNEY_RUNS` sets
//! the run count of the two-process journey (default 500).

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod bulk;
mod clock_skew;
mod console;
mod export_replay;
mod flow;
mod image;
mod move_apply;
mod partition;
mod run_wait_across;
mod small_fs;
mod support;
mod traces;
mod tutorial;
mod typed_callers;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use coordinator::events::sign;
use coordinator_fakes::{FakeCasework, Reply};
use coordinator_ports::Maintenance;
use serde_json::{json, Value};
use sqlx::{Connection, PgConnection, Row};
use support::{
    free_port, rfc3339, unix_now, urls, Cluster, Coordinator, Deployment, Example, BINDING,
    COMPLETION_TOKEN, EVENT_KEY,
};

#[tokio::test]
async fn delayed_follow_up_finishes_after_send_after() {
    let Some(urls) = urls("delayed_follow_up_finishes_after_send_after") else {
        return;
    };
    let d = Deployment::new(urls, 2_000).await;
    let c = d.spawn().await;
    let send_after = rfc3339(unix_now() + 3);
    let run = d.start(&c, "app-a", &send_after).await;
    let v = d
        .wait_state(&c, &run, "finished", Duration::from_secs(30))
        .await;
    assert_eq!(v["outcome"], "message-accepted", "{v}");
    assert!(v["endedAt"].as_str().unwrap() >= send_after.as_str(), "{v}");
    assert_eq!(d.messaging.messages().len(), 1);
    let inspect = d.get(&c, &format!("/v1/runs/{run}/inspect")).await.unwrap();
    assert!(inspect.to_string().contains("accepted"), "{inspect}");
    // The binary audited the admission in its own journal file, with keyed
    // references only (the input's application id never appears).
    let base = d.dir.path().join("audit.jsonl");
    let files = coordinator_runtime::audit::journal_files(&base).unwrap();
    let text: String = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    assert!(!text.trim().is_empty(), "no audit line in {files:?}");
    assert!(!text.contains("app-a"), "{text}");
    drop(c);
    d.cleanup().await;
}

#[tokio::test]
async fn kill_9_during_a_mutation_leaves_it_unknown_and_sent_once() {
    let Some(urls) = urls("kill_9_during_a_mutation") else {
        return;
    };
    let d = Deployment::new(urls, 2_000).await;
    d.messaging.fake().script("/v1/messages", [Reply::Hang]);
    let c = d.spawn().await;
    let run = d.start(&c, "app-b", &rfc3339(unix_now() - 60)).await;
    let start = Instant::now();
    while d.messaging.fake().requests_to("/v1/messages").is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{}",
            c.log_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    c.kill9();
    let c = d.spawn().await;
    // The lease of the killed process expires (twice the request budget of
    // a 2 s timeout: 18 s); the job is found `sending` and never resent.
    let v = d
        .wait_state(&c, &run, "attention", Duration::from_secs(45))
        .await;
    let inspect = d.get(&c, &format!("/v1/runs/{run}/inspect")).await.unwrap();
    let steps = inspect["steps"].as_array().cloned().unwrap_or_default();
    let notify = steps
        .iter()
        .find(|s| s["name"] == "notify")
        .unwrap_or_else(|| panic!("{inspect}"));
    assert_eq!(notify["effect"], "unknown", "{inspect} {v}");
    assert_eq!(d.messaging.fake().requests_to("/v1/messages").len(), 1);
    drop(c);
    d.cleanup().await;
}

#[tokio::test]
async fn kill_9_during_a_wait_wakes_on_time_after_restart() {
    let Some(urls) = urls("kill_9_during_a_wait") else {
        return;
    };
    let d = Deployment::new(urls, 2_000).await;
    let c = d.spawn().await;
    let wake = unix_now() + 5;
    let send_after = rfc3339(wake);
    let run = d.start(&c, "app-c", &send_after).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    c.kill9();
    let c = d.spawn().await;
    let v = d
        .wait_state(&c, &run, "finished", Duration::from_secs(30))
        .await;
    let finished_at = unix_now();
    assert!(v["endedAt"].as_str().unwrap() >= send_after.as_str(), "{v}");
    assert!(
        finished_at <= wake + 5,
        "woke late: {} s after the instant",
        finished_at - wake
    );
    assert_eq!(d.messaging.messages().len(), 1);
    drop(c);
    d.cleanup().await;
}

#[tokio::test]
async fn two_processes_complete_every_run_with_each_call_once() {
    let Some(urls) = urls("two_processes_complete_every_run") else {
        return;
    };
    let n: usize = std::env::var("COORDINATOR_JOURNEY_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let d = Arc::new(Deployment::new(urls, 5_000).await);
    let a = Arc::new(d.spawn().await);
    let b = Arc::new(d.spawn().await);
    let started = Instant::now();
    let past = rfc3339(unix_now() - 60);
    let limit = Arc::new(tokio::sync::Semaphore::new(16));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..n {
        let (d, c, past, limit) = (
            d.clone(),
            if i % 2 == 0 { a.clone() } else { b.clone() },
            past.clone(),
            limit.clone(),
        );
        tasks.spawn(async move {
            let _permit = limit.acquire().await.unwrap();
            d.start(&c, &format!("app-{i}"), &past).await
        });
    }
    let mut runs = Vec::new();
    while let Some(r) = tasks.join_next().await {
        runs.push(r.unwrap());
    }
    let admitted = started.elapsed();
    // Every message sent, then every run finished.
    let deadline = Instant::now() + Duration::from_secs(120);
    while d.messaging.fake().requests_to("/v1/messages").len() < n {
        assert!(
            Instant::now() < deadline,
            "{} of {n} messages",
            d.messaging.fake().requests_to("/v1/messages").len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for run in &runs {
        d.wait_state(&a, run, "finished", Duration::from_secs(30))
            .await;
    }
    let elapsed = started.elapsed();
    let per_key = d.messages_per_key();
    assert_eq!(per_key.len(), n, "one idempotency key per run");
    assert!(per_key.values().all(|c| *c == 1), "a message sent twice");
    let reads = d.breg.fake().requests();
    assert_eq!(reads.len(), n, "one record read per run");
    eprintln!(
        "two processes: {n} runs admitted in {admitted:?}, all finished in {elapsed:?} ({:.1} runs/s)",
        n as f64 / elapsed.as_secs_f64()
    );
    drop((a, b));
    d.cleanup().await;
}

#[tokio::test]
async fn postgresql_outage_under_load_is_waited_out() {
    if urls("postgresql_outage_under_load").is_none() {
        return;
    }
    let port = free_port();
    let cluster = Cluster {
        port,
        dir: PathBuf::from(format!("/tmp/coordinator-pg17-journey-{port}")),
    };
    let urls = cluster.start();
    let d = Deployment::new(urls, 2_000).await;
    let mut c = d.spawn().await;
    // Load: runs due now and runs waking during the outage.
    let mut runs = Vec::new();
    for i in 0..60 {
        let at = if i % 2 == 0 {
            unix_now() - 60
        } else {
            unix_now() + 2
        };
        runs.push(d.start(&c, &format!("app-{i}"), &rfc3339(at)).await);
    }
    let out = cluster.script("stop");
    assert!(out.status.success());
    let down = Instant::now();
    let mut saw_503 = false;
    // Seed 000: PostgreSQL stopped for 30 seconds under load.
    while down.elapsed() < Duration::from_secs(30) {
        assert!(c.alive(), "the process died:\n{}", c.log_text());
        if d.ready(&c).await == Some(503) {
            saw_503 = true;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(saw_503, "/ready never answered 503");
    assert!(c.alive(), "the process died:\n{}", c.log_text());
    cluster.start();
    let start = Instant::now();
    while d.ready(&c).await != Some(200) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{}",
            c.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for run in &runs {
        let v = d
            .wait_state(&c, run, "finished", Duration::from_secs(60))
            .await;
        assert_eq!(v["outcome"], "message-accepted");
    }
    let log = c.log_text();
    assert!(log.contains("store-unavailable"), "{log}");
    assert!(d.messages_per_key().values().all(|n| *n == 1));
    drop(c);
    drop(cluster);
}

/// A dedicated cluster on a free port with `example` applied on it, then
/// stopped: a database that is down when `coordinator` starts.
async fn applied_then_stopped(example: Example) -> (Cluster, Deployment) {
    let port = free_port();
    let cluster = Cluster {
        port,
        dir: PathBuf::from(format!("/tmp/coordinator-pg17-journey-{port}")),
    };
    let urls = cluster.start();
    let d = Deployment::of(example, urls, 2_000).await;
    assert!(cluster.script("stop").status.success(), "postgres.sh stop");
    (cluster, d)
}

/// The JSON lines of the process's log.
fn log_lines(c: &Coordinator) -> Vec<Value> {
    c.log_text()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Waits (30 s at most) until a process started while the database is down
/// has logged `store-unavailable` and answers `/ready` with 503, staying
/// alive all along.
async fn wait_not_ready(d: &Deployment, c: &mut Coordinator) {
    let start = Instant::now();
    loop {
        assert!(c.alive(), "the process died:\n{}", c.log_text());
        let logged = log_lines(c)
            .iter()
            .any(|l| l["fields"]["code"] == "store-unavailable");
        match d.ready(c).await {
            Some(503) if logged => return,
            Some(503) | None => {}
            Some(other) => panic!("/ready answered {other}:\n{}", c.log_text()),
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no /ready 503 with store-unavailable logged:\n{}",
            c.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Issue 10 item 3: `coordinator` started while PostgreSQL is down binds
/// its listener, answers `/ready` 503 and every API route 503
/// `service.unavailable`, logs `store-unavailable`, and keeps trying; once
/// PostgreSQL is back it passes the deployment checks and serves (a run
/// started then finishes, its message sent once). A `--recovery-only`
/// instance waits the same way, and SIGTERM stops it while it waits.
#[tokio::test]
async fn a_database_down_at_startup_is_waited_out() {
    if urls("a_database_down_at_startup_is_waited_out").is_none() {
        return;
    }
    let (cluster, d) = applied_then_stopped(Example::follow_up()).await;
    let port = free_port();
    let mut c = d.launch(&d.runtime_file(port), port, &[]);
    wait_not_ready(&d, &mut c).await;
    // It stays up and not ready while the database is down.
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(c.alive(), "the process died:\n{}", c.log_text());
        assert_eq!(d.ready(&c).await, Some(503), "{}", c.log_text());
    }
    let r = d
        .http
        .get(format!("{}/v1/runs/some-run", c.base))
        .bearer_auth(d.token(support::OPERATOR))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 503);
    assert_eq!(r.headers()["content-type"], "application/problem+json");
    assert_eq!(r.headers()["cache-control"], "no-store");
    let problem = json_of(r).await;
    assert_eq!(problem["code"], "service.unavailable", "{problem}");
    let waiting = log_lines(&c)
        .into_iter()
        .find(|l| l["fields"]["code"] == "store-unavailable")
        .unwrap();
    assert_eq!(waiting["level"], "ERROR", "{waiting}");
    let message = waiting["fields"]["message"].as_str().unwrap();
    assert!(message.contains(&format!(":{}", cluster.port)), "{waiting}");

    // --recovery-only waits the same way; SIGTERM stops it while it waits.
    let port = free_port();
    let mut recovery = d.launch(&d.runtime_file(port), port, &["--recovery-only"]);
    wait_not_ready(&d, &mut recovery).await;
    let killed = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(recovery.child.id().to_string())
        .status()
        .unwrap();
    assert!(killed.success());
    let status = recovery.exited(Duration::from_secs(15)).await;
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "not stopped by SIGTERM within 15 s:\n{}",
        recovery.log_text()
    );

    cluster.start();
    let start = Instant::now();
    while d.ready(&c).await != Some(200) {
        assert!(c.alive(), "the process died:\n{}", c.log_text());
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "not ready once PostgreSQL is back:\n{}",
            c.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let run = d.start(&c, "app-late", &rfc3339(unix_now() - 60)).await;
    let v = d
        .wait_state(&c, &run, "finished", Duration::from_secs(30))
        .await;
    assert_eq!(v["outcome"], "message-accepted", "{v}");
    assert_eq!(d.messaging.messages().len(), 1);
    assert!(d.messages_per_key().values().all(|n| *n == 1));
    // Logged at the first failure and then periodically, not per attempt.
    let lines = log_lines(&c);
    let logged = lines
        .iter()
        .filter(|l| l["fields"]["code"] == "store-unavailable")
        .count();
    let answered = lines
        .iter()
        .find(|l| l["fields"]["attempts"].is_u64() && l["level"] == "INFO")
        .unwrap_or_else(|| panic!("no line for the database answering:\n{}", c.log_text()));
    let attempts = answered["fields"]["attempts"].as_u64().unwrap();
    assert!(
        (logged as u64) < attempts - 1,
        "{logged} store-unavailable lines for {attempts} attempts"
    );
    drop(c);
    drop(cluster);
}

/// A deployment check that fails once the database answers stops the
/// process as at a normal startup: here the runtime file names another
/// `databaseId` than the one applied, so `coordinator`, started while
/// PostgreSQL is down, waits, then exits 1 with `deployment.refused`
/// (`reason` `deployment.database-id`) once PostgreSQL is back.
#[tokio::test]
async fn a_deployment_check_failing_once_the_database_answers_exits_1() {
    if urls("a_deployment_check_failing_once_the_database_answers").is_none() {
        return;
    }
    let (cluster, d) = applied_then_stopped(Example::follow_up()).await;
    let port = free_port();
    let file = d.runtime_file(port);
    let text = std::fs::read_to_string(&file).unwrap();
    let applied = format!("databaseId: {}", d.database_id);
    assert!(text.contains(&applied));
    std::fs::write(
        &file,
        text.replace(&applied, "databaseId: another-database"),
    )
    .unwrap();
    let mut c = d.launch(&file, port, &[]);
    wait_not_ready(&d, &mut c).await;
    cluster.start();
    let status = c.exited(Duration::from_secs(60)).await;
    assert_eq!(status.and_then(|s| s.code()), Some(1), "{}", c.log_text());
    let refusal = log_lines(&c)
        .into_iter()
        .find(|l| l["fields"]["code"] == "deployment.refused")
        .unwrap_or_else(|| panic!("no deployment.refused line:\n{}", c.log_text()));
    assert_eq!(refusal["level"], "ERROR", "{refusal}");
    assert_eq!(
        refusal["fields"]["reason"], "coordinator.deployment.database-id",
        "{refusal}"
    );
    drop(c);
    drop(cluster);
}

/// Faults that are not outages are not waited out: a refused login, a
/// missing database and a missing database URL file each stop
/// `coordinator` with exit 1 and `deployment.refused` (the store's code as
/// `reason`), never `store-unavailable`.
#[tokio::test]
async fn a_refused_login_or_a_missing_database_is_refused_at_once() {
    let Some(urls) = urls("a_refused_login_or_a_missing_database") else {
        return;
    };
    let d = Deployment::new(urls, 2_000).await;
    let runtime = d.urls.runtime.clone();
    let (scheme, rest) = runtime.split_once("://").unwrap();
    let (login, place) = rest.split_once('@').unwrap();
    let role = login.split_once(':').unwrap().0;
    let (server, _database) = place.split_once('/').unwrap();
    let faults = [
        (
            "database.login",
            format!("{scheme}://{role}:not-the-password@{place}"),
        ),
        (
            "database.missing",
            format!("{scheme}://{login}@{server}/no_such_database"),
        ),
    ];
    for (reason, url) in faults {
        support::write_secret(&d.secrets, "runtime-database-url", url.as_bytes());
        let (code, log) = d.spawn_refused();
        assert_eq!(code, Some(1), "{reason}: {log}");
        let line: Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
        assert_eq!(line["fields"]["code"], "deployment.refused", "{log}");
        assert_eq!(
            line["fields"]["reason"],
            format!("coordinator.{reason}"),
            "{log}"
        );
        assert!(!log.contains("store-unavailable"), "{reason}: {log}");
    }
    std::fs::remove_file(d.secrets.join("runtime-database-url")).unwrap();
    let (code, log) = d.spawn_refused();
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("deployment.refused"), "{log}");
    assert!(!log.contains("store-unavailable"), "{log}");
    d.set_database(&d.urls);
    d.cleanup().await;
}

fn review_input(app: &str) -> Value {
    json!({"applicationId": app, "applicantEmail": format!("{app}@example.org")})
}

fn step(inspection: &Value, name: &str) -> Option<Value> {
    inspection["steps"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == name)
        .cloned()
}

fn step_names(inspection: &Value) -> Vec<String> {
    inspection["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Polls inspect until the run waits at `await-decision`.
async fn wait_entered(d: &Deployment, c: &Coordinator, run: &str) {
    let start = Instant::now();
    loop {
        if let Some(v) = d.get(c, &format!("/v1/runs/{run}/inspect")).await {
            if step(&v, "await-decision").is_some() {
                return;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "run {run} never waited:\n{}",
            c.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The approved path: finished `approval-notice-sent` with the message's
/// id, every step listed, both effects `accepted`, one message sent.
async fn assert_notice_sent(d: &Deployment, c: &Coordinator, run: &str, status: &Value) {
    assert_eq!(status["outcome"], "approval-notice-sent", "{status}");
    let messages = d.messaging.messages();
    assert_eq!(messages.len(), 1, "{messages:?}");
    let message_id = status["output"]["messageId"].as_str().unwrap();
    assert!(!message_id.is_empty(), "{status}");
    assert_eq!(d.messaging.fake().requests_to("/v1/messages").len(), 1);
    let inspect = d.get(c, &format!("/v1/runs/{run}/inspect")).await.unwrap();
    assert_eq!(
        step_names(&inspect),
        [
            "submit-review",
            "await-decision",
            "route-decision",
            "send-notice",
            "notice-sent"
        ],
        "{inspect}"
    );
    for name in ["submit-review", "send-notice"] {
        assert_eq!(
            step(&inspect, name).unwrap()["effect"],
            "accepted",
            "{inspect}"
        );
    }
    assert_eq!(
        d.casework.fake().requests_to("/v1/review-requests").len(),
        1,
        "one review submission"
    );
}

#[tokio::test]
async fn reviewed_notice_finishes_after_a_completion_event() {
    let Some(urls) = urls("reviewed_notice_finishes_after_a_completion_event") else {
        return;
    };
    let d = Deployment::of(Example::reviewed_notice(), urls, 2_000).await;
    let c = d.spawn().await;
    let run = d.start_input(&c, "review-a", review_input("app-ra")).await;
    let review = d.review_id(&c).await;
    wait_entered(&d, &c, &run).await;
    assert!(d
        .casework
        .decide(&review, "approved", &rfc3339(unix_now()), None));
    // A `--recovery-only` instance on the same database takes no events:
    // the completion is refused there (and brings nothing forward).
    let rport = free_port();
    let recovery = d
        .spawn_with(&d.runtime_file(rport), rport, &["--recovery-only"])
        .await;
    let (s, body) = FakeCasework::post_completion(
        &format!("{}/v1/review-completions", recovery.base),
        COMPLETION_TOKEN,
        BINDING,
        &review,
    )
    .await
    .unwrap();
    assert_eq!(s, 409, "{body}");
    assert!(body.contains("\"event.recovery-only\""), "{body}");
    drop(recovery);
    // Wrong credentials are refused and move nothing.
    let url = format!("{}/v1/review-completions", c.base);
    let (s, _) = FakeCasework::post_completion(&url, "not-the-token", BINDING, &review)
        .await
        .unwrap();
    assert_eq!(s, 401);
    let posted = Instant::now();
    let (s, body) = FakeCasework::post_completion(&url, COMPLETION_TOKEN, BINDING, &review)
        .await
        .unwrap();
    assert_eq!(s, 202, "{body}");
    // The periodic read is 60 s away; the event brings it forward.
    let v = d
        .wait_state(&c, &run, "finished", Duration::from_secs(20))
        .await;
    assert!(posted.elapsed() < Duration::from_secs(20));
    assert_notice_sent(&d, &c, &run, &v).await;
    let inspect = d.get(&c, &format!("/v1/runs/{run}/inspect")).await.unwrap();
    assert_eq!(
        step(&inspect, "await-decision").unwrap()["observations"],
        1,
        "{inspect}"
    );
    assert!(
        !inspect.to_string().contains("app-ra@example.org"),
        "{inspect}"
    );
    drop(c);
    d.cleanup().await;
}

#[tokio::test]
async fn reviewed_notice_finishes_by_the_periodic_read() {
    let Some(urls) = urls("reviewed_notice_finishes_by_the_periodic_read") else {
        return;
    };
    let d = Deployment::of(Example::reviewed_notice(), urls, 2_000).await;
    let c = d.spawn().await;
    let run = d.start_input(&c, "review-b", review_input("app-rb")).await;
    let review = d.review_id(&c).await;
    let submitted = Instant::now();
    wait_entered(&d, &c, &run).await;
    assert!(d
        .casework
        .decide(&review, "approved", &rfc3339(unix_now()), None));
    // No completion event: the read every resultCheckSeconds (60) finds it
    // (due 60 s after the submission; margin for a loaded machine).
    let v = d
        .wait_state(&c, &run, "finished", Duration::from_secs(90))
        .await;
    let took = submitted.elapsed();
    assert!(
        took >= Duration::from_secs(55),
        "finished after {took:?}, before the periodic read was due"
    );
    eprintln!("periodic read: finished {took:?} after the submission");
    assert_notice_sent(&d, &c, &run, &v).await;
    let reads = d
        .casework
        .fake()
        .requests_to(&format!("/v1/review-requests/{review}"))
        .len();
    assert_eq!(reads, 1, "one periodic read");
    drop(c);
    d.cleanup().await;
}

#[tokio::test]
async fn reviewed_notice_times_out_and_withdraws() {
    let Some(urls) = urls("reviewed_notice_times_out_and_withdraws") else {
        return;
    };
    let example = Example::reviewed_notice().with_timeout_seconds(5);
    let d = Deployment::of(example, urls, 2_000).await;
    let c = d.spawn().await;
    let started = Instant::now();
    let run = d.start_input(&c, "review-c", review_input("app-rc")).await;
    let review = d.review_id(&c).await;
    let v = d
        .wait_state(&c, &run, "finished", Duration::from_secs(30))
        .await;
    // The timeout counts whole seconds from the wait's start.
    assert!(started.elapsed() >= Duration::from_secs(4), "{v}");
    assert_eq!(v["outcome"], "review-timed-out", "{v}");
    assert!(v["output"].is_null(), "{v}");
    let requests = d.casework.review_requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0]["status"], "withdrawn", "{requests:?}");
    assert_eq!(
        d.casework
            .fake()
            .requests_to(&format!("/v1/review-requests/{review}/withdraw"))
            .len(),
        1
    );
    assert!(d.messaging.messages().is_empty());
    let inspect = d.get(&c, &format!("/v1/runs/{run}/inspect")).await.unwrap();
    assert_eq!(
        step_names(&inspect),
        [
            "submit-review",
            "await-decision",
            "withdraw-after-timeout",
            "read-late-decision",
            "late-route",
            "review-timed-out"
        ],
        "{inspect}"
    );
    for name in ["submit-review", "withdraw-after-timeout"] {
        assert_eq!(
            step(&inspect, name).unwrap()["effect"],
            "accepted",
            "{inspect}"
        );
    }
    drop(c);
    d.cleanup().await;
}

/// Runs the binary on `port` until it exits (it is expected to refuse);
/// returns its exit code and log.
fn refused_startup(d: &Deployment, port: u16) -> (Option<i32>, String) {
    let file = d.runtime_file(port);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_coordinator"))
        .arg("--runtime-config")
        .arg(&file)
        .env("RUST_LOG", "info,sqlx=warn")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn startup_refuses_a_taken_port_and_an_unusable_connection_key_by_name() {
    let Some(urls) = urls("startup_refusals") else {
        return;
    };
    let d = Deployment::new(urls, 2_000).await;
    let journals = || {
        coordinator_runtime::audit::journal_files(&d.dir.path().join("audit.jsonl"))
            .unwrap()
            .len()
    };
    let before = journals();

    // The listener's address is taken: the refusal names it.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let (code, log) = refused_startup(&d, port);
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("deployment.refused"), "{log}");
    assert!(log.contains(&format!("127.0.0.1:{port}")), "{log}");
    drop(taken);

    // A connection's signing key is missing: refused at startup, naming the
    // connection, before anything is dispatched.
    std::fs::remove_file(d.secrets.join("notices-client-key")).unwrap();
    let (code, log) = refused_startup(&d, free_port());
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("deployment.refused"), "{log}");
    assert!(log.contains("connection `notices`"), "{log}");
    assert!(log.contains("secret.unavailable"), "{log}");
    assert_eq!(d.messaging.messages().len(), 0);

    // Present but not a private JWK: refused the same way.
    support::write_secret(&d.secrets, "notices-client-key", b"{\"kty\":\"oct\"}");
    let (code, log) = refused_startup(&d, free_port());
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("connection `notices`"), "{log}");
    assert_eq!(journals(), before, "a refused start left a journal file");

    // A runtime file the checker refuses: the log line names the first
    // finding's code as `reason` and what to run next.
    let bad = d.dir.path().join("bad-runtime.yaml");
    std::fs::write(&bad, "apiVersion: nope\nkind: CoordinatorRuntimeConfig\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_coordinator"))
        .arg("--runtime-config")
        .arg(&bad)
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{log}");
    let line: Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
    assert_eq!(line["fields"]["code"], "deployment.refused", "{log}");
    assert!(
        line["fields"]["reason"]
            .as_str()
            .unwrap()
            .starts_with("coordinator.runtime."),
        "{log}"
    );
    assert!(
        line["fields"]["next"].as_str().unwrap().contains("check"),
        "{log}"
    );

    // A listener on every interface: the check's rule holds at startup,
    // before anything is bound (seed 000: a listener on a private address).
    let port = free_port();
    let exposed = d.dir.path().join("exposed-runtime.yaml");
    let text = std::fs::read_to_string(d.runtime_file(port)).unwrap();
    std::fs::write(&exposed, text.replace("bind: 127.0.0.1:", "bind: 0.0.0.0:")).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_coordinator"))
        .arg("--runtime-config")
        .arg(&exposed)
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{log}");
    let line: Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
    assert_eq!(line["fields"]["code"], "deployment.refused", "{log}");
    assert_eq!(
        line["fields"]["reason"], "coordinator.runtime.listener-not-private",
        "{log}"
    );
    assert!(
        std::net::TcpListener::bind(("0.0.0.0", port)).is_ok(),
        "the refused start left its port bound"
    );
    d.cleanup().await;
}

/// Connection signing keys and Casework completion tokens are read by the
/// one secret reader (`coordinator_runtime::secrets`), as every other
/// secret: one that is a symbolic link, readable by group, or owned by
/// another user refuses startup (`deployment.refused`, exit 1) with the
/// secret's own code as `reason`, naming the connection and never the value.
#[tokio::test]
async fn startup_refuses_unsafe_connection_keys_and_completion_tokens_by_the_secret_code() {
    let Some(urls) = urls("startup_refuses_unsafe_connection_secrets") else {
        return;
    };
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let d = Deployment::of(Example::reviewed_notice(), urls, 2_000).await;
    // Owned by another user: only root can give a file away. CI runs the
    // tests as root; elsewhere that one sub-case cannot be set up, so it is
    // left out (the other two still run).
    let root = std::fs::metadata("/proc/self").unwrap().uid() == 0;
    for (file, whose) in [
        ("notices-client-key", "connection `notices` signing key"),
        (
            "review-completion-token",
            "connection `review` completion token",
        ),
    ] {
        let path = d.secrets.join(file);
        let value = std::fs::read(&path).unwrap();
        let mut faults = vec![
            ("symlink", "secret.not-regular-file"),
            ("group-readable", "secret.permissions"),
        ];
        if root {
            faults.push(("another owner", "secret.owner"));
        }
        for (fault, code) in faults {
            match fault {
                "symlink" => {
                    // A link to a safe file of the right user is still refused.
                    let target = d.secrets.join(format!("{file}.target"));
                    support::write_secret(&d.secrets, &format!("{file}.target"), &value);
                    std::fs::remove_file(&path).unwrap();
                    std::os::unix::fs::symlink(&target, &path).unwrap();
                }
                "group-readable" => {
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap()
                }
                _ => std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap(),
            }
            // (A process that starts instead fails the test after 30 s.)
            let (exit, log) = d.spawn_refused();
            assert_eq!(exit, Some(1), "{file}, {fault}: {log}");
            let line: Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
            let fields = &line["fields"];
            assert_eq!(
                fields["code"], "deployment.refused",
                "{file}, {fault}: {log}"
            );
            assert_eq!(
                fields["reason"],
                format!("coordinator.{code}"),
                "{file}, {fault}: {log}"
            );
            assert!(
                fields["message"].as_str().unwrap().starts_with(whose),
                "{file}, {fault}: {log}"
            );
            assert!(
                !log.contains(std::str::from_utf8(&value).unwrap()),
                "{file}, {fault}: the log holds the secret"
            );
            std::fs::remove_file(&path).unwrap();
            support::write_secret(&d.secrets, file, &value);
        }
    }
    // A completion token over 4096 bytes (or empty) is refused by its
    // length, never echoed.
    let path = d.secrets.join("review-completion-token");
    let value = std::fs::read(&path).unwrap();
    for (long, why) in [(vec![b'x'; 4097], "4097 bytes"), (Vec::new(), "is empty")] {
        std::fs::remove_file(&path).unwrap();
        support::write_secret(&d.secrets, "review-completion-token", &long);
        let (exit, log) = d.spawn_refused();
        assert_eq!(exit, Some(1), "{log}");
        let line: Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
        assert_eq!(line["fields"]["code"], "deployment.refused", "{log}");
        assert_eq!(
            line["fields"]["reason"], "coordinator.secret.content",
            "{log}"
        );
        assert!(
            line["fields"]["message"].as_str().unwrap().contains(why),
            "{log}"
        );
        assert!(!log.contains("xxxxxxxx"), "the log holds the token");
    }
    std::fs::remove_file(&path).unwrap();
    support::write_secret(&d.secrets, "review-completion-token", &value);
    d.cleanup().await;
}

/// seed 000 "Apply and start": the built binary refuses to start when the
/// runtime file changed a live run's connection endpoint (one JSON line,
/// raw code `live-binding-conflict`, exit 1), and starts with
/// `--recovery-only`.
#[tokio::test]
async fn startup_refuses_a_changed_binding_unless_recovery_only() {
    let Some(urls) = urls("startup_refuses_a_changed_binding") else {
        return;
    };
    let d = Deployment::new(urls, 2_000).await;
    let c = d.spawn().await;
    let run = d.start(&c, "app-bound", &rfc3339(unix_now() + 3_600)).await;
    drop(c);
    let port = free_port();
    let file = d.runtime_file(port);
    let text = std::fs::read_to_string(&file).unwrap();
    let messaging = d.messaging.base_url().to_owned();
    assert!(text.contains(&messaging));
    std::fs::write(
        &file,
        text.replace(&messaging, "https://messaging-2.example.org"),
    )
    .unwrap();

    let mut refused = d.launch(&file, port, &[]);
    let status = refused.exited(Duration::from_secs(30)).await;
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(1),
        "{}",
        refused.log_text()
    );
    let log = refused.log_text();
    let line: Value = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["fields"]["code"] == "live-binding-conflict")
        .unwrap_or_else(|| panic!("no live-binding-conflict line:\n{log}"));
    assert_eq!(line["level"], "ERROR", "{line}");
    assert_eq!(line["fields"]["connection"], "notices", "{line}");
    assert_eq!(line["fields"]["runs"], 1, "{line}");
    assert!(!log.contains("app-bound"), "{log}");

    let c = d.spawn_with(&file, port, &["--recovery-only"]).await;
    let status = d.get(&c, &format!("/v1/runs/{run}")).await.unwrap();
    assert_eq!(status["state"], "running", "{status}");
    drop(c);
    d.cleanup().await;
}

/// seed 000 `service.unavailable`, through the built binary: its audit
/// journal (`deployment.auditFile`) on a 64 KiB tmpfs that fills up. The
/// first start whose line does not fit is 503 `audit.response-unavailable`;
/// from then on a start and an operator action are 503
/// `service.unavailable` before anything is done, and `/ready` is 503
/// `audit.response-unavailable`. Room made: ready again without a restart,
/// and the refused start's key creates its run.
#[tokio::test]
async fn a_full_audit_disk_refuses_starts_and_actions_before_anything_is_done() {
    let Some(urls) = urls("a_full_audit_disk") else {
        return;
    };
    let Some(fs) = small_fs::SmallFileSystem::mount("a_full_audit_disk") else {
        return;
    };
    let d = Deployment::new(urls, 2_000).await;
    let port = free_port();
    let file = d.runtime_file(port);
    let text = std::fs::read_to_string(&file).unwrap();
    let audit = d.dir.path().join("audit.jsonl").display().to_string();
    let on_tmpfs = fs.dir.path().join("audit.jsonl").display().to_string();
    assert!(text.contains(&audit));
    std::fs::write(&file, text.replace(&audit, &on_tmpfs)).unwrap();
    let c = d.spawn_with(&file, port, &[]).await;
    let later = rfc3339(unix_now() + 3_600);
    let first = d.start(&c, "app-first", &later).await;

    fs.fill();
    let mut withheld = None;
    for i in 0..64 {
        let (status, p) = d
            .try_start(&c, &format!("app-fill-{i}"), &d.revision, &later)
            .await;
        if status != 201 {
            withheld = Some((status, p));
            break;
        }
    }
    let (status, p) = withheld.expect("an append failed on the full file system");
    assert_eq!(
        (status, p["code"].as_str()),
        (503, Some("audit.response-unavailable")),
        "{p}"
    );
    let (status, p) = d.try_start(&c, "app-refused", &d.revision, &later).await;
    assert_eq!(
        (status, p["code"].as_str()),
        (503, Some("service.unavailable")),
        "{p}"
    );
    let (status, p) = d
        .operate(
            &c,
            &format!("/v1/runs/{first}/cancel"),
            json!({"reason": "full-1"}),
        )
        .await;
    assert_eq!(
        (status, p["code"].as_str()),
        (503, Some("service.unavailable")),
        "{p}"
    );
    let st = d.get(&c, &format!("/v1/runs/{first}")).await.unwrap();
    assert_eq!(st["state"], "running", "not cancelled: {st}");
    assert_eq!(
        d.ready_answer(&c).await,
        (
            503,
            json!({"ready": false, "reason": "audit.response-unavailable"})
        )
    );

    fs.free();
    assert_eq!(d.ready_answer(&c).await, (200, json!({"ready": true})));
    let (status, p) = d.try_start(&c, "app-refused", &d.revision, &later).await;
    assert_eq!(status, 201, "the refused start admitted nothing: {p}");
    drop(c);
    d.cleanup().await;
}

/// A `coordinator` stopped by SIGTERM having audited nothing removes its
/// empty journal file; one that audited an admission keeps its file.
#[tokio::test]
async fn a_process_that_audited_nothing_leaves_no_journal_file() {
    let Some(urls) = urls("a_process_that_audited_nothing_leaves_no_journal_file") else {
        return;
    };
    let d = Deployment::new(urls, 2_000).await;
    let base = d.dir.path().join("audit.jsonl");
    let files = || coordinator_runtime::audit::journal_files(&base).unwrap();
    let before = files();

    let mut idle = d.spawn().await;
    assert_eq!(
        files().len(),
        before.len() + 1,
        "no journal file while serving"
    );
    let status = idle.terminate(Duration::from_secs(15)).await;
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "{}",
        idle.log_text()
    );
    assert_eq!(files(), before, "{}", idle.log_text());
    assert!(idle
        .log_text()
        .contains("removed this process's empty audit journal"));

    let mut busy = d.spawn().await;
    d.start(&busy, "app-j", &rfc3339(unix_now() - 60)).await;
    let status = busy.terminate(Duration::from_secs(15)).await;
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "{}",
        busy.log_text()
    );
    let after = files();
    assert_eq!(after.len(), before.len() + 1, "{}", busy.log_text());
    let kept: Vec<_> = after.iter().filter(|f| !before.contains(f)).collect();
    assert!(std::fs::metadata(kept[0]).unwrap().len() > 0);
    d.cleanup().await;
}

/// Under systemd (`Type=notify`, deploy/systemd/coordinator.service) the
/// service says `READY=1` through `NOTIFY_SOCKET` once it serves (the
/// store open and checked: `/ready` is 200 by then) and `STOPPING=1` when
/// SIGTERM begins its drain; nothing else.
#[tokio::test]
async fn the_service_tells_systemd_when_it_is_ready_and_when_it_stops() {
    let Some(urls) = urls("the_service_tells_systemd_when_it_is_ready_and_when_it_stops") else {
        return;
    };
    let d = Deployment::new(urls, 2_000).await;
    let socket_path = d.dir.path().join("notify.sock");
    let socket = std::os::unix::net::UnixDatagram::bind(&socket_path).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let port = free_port();
    let path = socket_path.display().to_string();
    let mut c = d
        .spawn_env(
            &d.runtime_file(port),
            port,
            &[],
            &[("NOTIFY_SOCKET", path.as_str())],
        )
        .await;
    let mut buffer = [0u8; 512];
    let read = |buffer: &mut [u8]| {
        let n = socket.recv(buffer).expect("a notification within 30 s");
        String::from_utf8_lossy(&buffer[..n]).into_owned()
    };
    assert_eq!(read(&mut buffer).trim(), "READY=1");
    assert_eq!(d.ready(&c).await, Some(200));
    let status = c.terminate(Duration::from_secs(15)).await;
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{}", c.log_text());
    assert_eq!(read(&mut buffer).trim(), "STOPPING=1");
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    assert!(socket.recv(&mut buffer).is_err(), "a third notification");
    d.cleanup().await;
}

/// `--worker-threads N` sizes the async runtime (logged as
/// `worker_threads` when listening); without it the runtime has a thread
/// per available core; 0 is refused before anything starts.
#[tokio::test]
async fn the_runtime_has_the_worker_threads_asked_for() {
    let Some(urls) = urls("the_runtime_has_the_worker_threads_asked_for") else {
        return;
    };
    let d = Deployment::new(urls, 2_000).await;
    let listening = |c: &support::Coordinator| {
        let log = c.log_text();
        log.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| {
                v["fields"]["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("listening"))
            })
            .unwrap_or_else(|| panic!("no listening line:\n{log}"))
    };

    let port = free_port();
    let c = d
        .spawn_with(&d.runtime_file(port), port, &["--worker-threads", "3"])
        .await;
    assert_eq!(listening(&c)["fields"]["worker_threads"], 3);
    drop(c);

    let port = free_port();
    let c = d.spawn_with(&d.runtime_file(port), port, &[]).await;
    let cores = std::thread::available_parallelism().unwrap().get();
    assert_eq!(listening(&c)["fields"]["worker_threads"], cores);
    drop(c);

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_coordinator"))
        .arg("--runtime-config")
        .arg(d.runtime_file(free_port()))
        .args(["--worker-threads", "0"])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{log}");
    assert!(log.contains("--worker-threads"), "{log}");
    assert!(!log.contains("listening"), "{log}");
    d.cleanup().await;
}

/// A signed event through the built binary on PostgreSQL: the run is
/// admitted once (a repeat is the same run), owned by the event source
/// (the producer's token does not see it), and finishes; a bad signature
/// is 401.
#[tokio::test]
async fn a_signed_event_starts_a_run_through_the_binary() {
    let Some(urls) = urls("a_signed_event_starts_a_run_through_the_binary") else {
        return;
    };
    let d = Deployment::of(Example::event_follow_up(), urls, 2_000).await;
    d.record("app-e");
    let c = d.spawn().await;
    let body = json!({
        "specversion": "1.0",
        "id": "evt-journey-1",
        "source": "https://breg.example.org/applications",
        "type": "breg.record.created/v1",
        "time": rfc3339(unix_now()),
        "data": {"recordId": "app-e"},
    })
    .to_string();
    let url = format!("{}/v1/events/event-follow-up/application-submitted", c.base);
    let post = |signature: String| {
        d.http
            .post(&url)
            .header("content-type", "application/json")
            .header("registry-signature", signature)
            .body(body.clone())
            .send()
    };
    let r = post(sign(&EVENT_KEY, unix_now(), body.as_bytes()))
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let first = json_of(r).await;
    let r = post(sign(&EVENT_KEY, unix_now(), body.as_bytes()))
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let again = json_of(r).await;
    assert_eq!(again["run"], first["run"]);
    let r = post(sign(&[1; 32], unix_now(), body.as_bytes()))
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let run = first["run"].as_str().unwrap().to_owned();
    let v = d
        .wait_state(&c, &run, "finished", Duration::from_secs(30))
        .await;
    assert_eq!(v["outcome"], "read", "{v}");
    let r = d
        .http
        .get(format!("{}/v1/runs/{run}", c.base))
        .bearer_auth(d.token(support::PRODUCER))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404, "a token caller never sees it");
    drop(c);
    d.cleanup().await;
}

/// A missing, group-readable or short event source key refuses startup
/// with `deployment.refused` (exit 1), like every key file.
#[tokio::test]
async fn event_source_key_faults_refuse_startup() {
    let Some(urls) = urls("event_source_key_faults_refuse_startup") else {
        return;
    };
    use std::os::unix::fs::PermissionsExt;
    let d = Deployment::of(Example::event_follow_up(), urls, 2_000).await;
    let key = d.secrets.join("breg-applications-signing-key");
    let faults: [(&str, &dyn Fn()); 3] = [
        ("group-readable", &|| {
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap()
        }),
        ("short", &|| {
            support::write_secret(&d.secrets, "breg-applications-signing-key", &[6; 31])
        }),
        ("missing", &|| std::fs::remove_file(&key).unwrap()),
    ];
    for (what, fault) in faults {
        support::write_secret(&d.secrets, "breg-applications-signing-key", &EVENT_KEY);
        fault();
        let (code, log) = d.spawn_refused();
        assert_eq!(code, Some(1), "{what}: {log}");
        assert!(log.contains("deployment.refused"), "{what}: {log}");
        assert!(!log.contains("store-unavailable"), "{what}: {log}");
    }
    d.cleanup().await;
}

async fn json_of(r: reqwest::Response) -> Value {
    serde_json::from_str(&r.text().await.unwrap()).unwrap()
}

/// A run's state and the state key versions of its sealed values, read
/// through the admin URL: (`state`, `key_version` of state and output,
/// `input_key_version` of input and owner).
async fn sealed_versions(admin: &mut PgConnection, ns: &str, run: &str) -> (String, i32, i32) {
    let row = sqlx::query(&format!(
        "SELECT state, key_version, input_key_version FROM {ns}.runs WHERE run_id = $1"
    ))
    .bind(run)
    .fetch_one(&mut *admin)
    .await
    .unwrap();
    (row.get(0), row.get(1), row.get(2))
}

/// The state key custody line of a refused start: the JSON line on stderr
/// whose raw code is `state-key-custody`.
fn custody_line(log: &str) -> Value {
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["fields"]["code"] == "state-key-custody")
        .unwrap_or_else(|| panic!("no state-key-custody line:\n{log}"))
}

/// seed 000 "Rotate keys", payload state key, as docs/operations.md "Rotate
/// keys" writes it down, through the built binary on PostgreSQL 17: runs
/// admitted under version 1 wait while the service stops; version 2 is
/// added (1 kept) and made active; startup refuses until `apply` recorded
/// it; after apply and a restart every old run finishes with its message
/// sent once, a new run too, and what is written from then on is sealed
/// under version 2. Removing version 1 while rows still use it is refused
/// by `deployment-status`, `apply` and startup (`state-key-custody`, exit
/// 1); once retention erased those runs, it is accepted.
#[tokio::test]
async fn state_key_rotation_under_live_runs_and_early_removal_refused() {
    let Some(urls) = urls("state_key_rotation_under_live_runs") else {
        return;
    };
    let d = Deployment::new(urls, 2_000).await; // applied with version 1 only
    let mut admin = PgConnection::connect(&d.urls.admin).await.unwrap();
    let mut c = d.spawn().await;
    let send_after = rfc3339(unix_now() + 4);
    let mut runs = Vec::new();
    for i in 0..3 {
        runs.push(d.start(&c, &format!("app-rot-{i}"), &send_after).await);
    }
    let status = c.terminate(Duration::from_secs(15)).await;
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{}", c.log_text());
    drop(c);
    // Live when the service stopped: waiting, nothing sent, sealed under 1.
    assert!(
        d.messaging.messages().is_empty(),
        "a run went on before the stop"
    );
    for run in &runs {
        assert_eq!(
            sealed_versions(&mut admin, &d.ns, run).await,
            ("running".to_owned(), 1, 1)
        );
    }

    // Add version 2, keep 1, make 2 active. Before `apply` the new version
    // has no custody record: `deployment-status` and startup refuse.
    support::write_secret(&d.secrets, "state-key-2", &[2; 32]);
    let port = free_port();
    let rotated = d.runtime_file_with_keys(port, &[1, 2], 2);
    let e = d
        .status_file(&rotated)
        .await
        .expect_err("status before apply");
    assert_eq!(e.cli_code(), "coordinator.command.state-key-custody");
    assert_eq!(
        e.message,
        "the active state key version 2 has no custody record"
    );
    let mut early = d.launch(&rotated, port, &[]);
    let status = early.exited(Duration::from_secs(30)).await;
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(1),
        "{}",
        early.log_text()
    );
    let line = custody_line(&early.log_text());
    assert_eq!(
        line["fields"]["message"], "the active state key version 2 has no custody record",
        "{line}"
    );
    drop(early);

    // apply, deployment-status, restart.
    let applied = d.apply_file(&rotated).await.expect("apply the rotation");
    assert_eq!(applied.entries[0].action.as_str(), "unchanged");
    let checked = d.status_file(&rotated).await.expect("status after apply");
    assert_eq!(
        (checked.state_key_versions.clone(), checked.active_state_key),
        (vec![1, 2], 2)
    );
    // Each message is held for a moment, so the dispatch jobs of the
    // restarted process can be seen with their sealed commands.
    d.messaging.fake().script(
        "/v1/messages",
        (0..4).map(|_| Reply::Delay(Duration::from_millis(600))),
    );
    let c = d.spawn_with(&rotated, port, &[]).await;
    runs.push(d.start(&c, "app-rot-new", &rfc3339(unix_now() - 1)).await);
    let mut sealed_jobs: Vec<i32> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let jobs = sqlx::query(&format!(
            "SELECT key_version FROM {}.jobs WHERE sealed_command IS NOT NULL",
            d.ns
        ))
        .fetch_all(&mut admin)
        .await
        .unwrap();
        sealed_jobs.extend(jobs.iter().map(|r| r.get::<i32, _>(0)));
        let live: i64 = sqlx::query(&format!(
            "SELECT count(*) FROM {}.runs WHERE NOT ended",
            d.ns
        ))
        .fetch_one(&mut admin)
        .await
        .unwrap()
        .get(0);
        if live == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{live} runs not ended:\n{}",
            c.log_text()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    for run in &runs {
        let v = d.get(&c, &format!("/v1/runs/{run}")).await.unwrap();
        assert_eq!(
            (v["state"].as_str(), v["outcome"].as_str()),
            (Some("finished"), Some("message-accepted")),
            "{v}"
        );
    }
    let per_key = d.messages_per_key();
    assert_eq!(per_key.len(), 4, "one idempotency key per run: {per_key:?}");
    assert!(per_key.values().all(|n| *n == 1), "{per_key:?}");
    // Written after the restart: sealed under version 2. The old runs keep
    // their input and owner under version 1 (sealed once, at admission).
    assert!(!sealed_jobs.is_empty(), "no dispatch job was seen");
    assert!(sealed_jobs.iter().all(|v| *v == 2), "{sealed_jobs:?}");
    for (i, run) in runs.iter().enumerate() {
        let input = if i < 3 { 1 } else { 2 };
        assert_eq!(
            sealed_versions(&mut admin, &d.ns, run).await,
            ("finished".to_owned(), 2, input),
            "run {i}"
        );
    }
    drop(c);

    // Remove version 1 while rows still use it: refused everywhere.
    std::fs::remove_file(d.secrets.join("state-key-1")).unwrap();
    let port = free_port();
    let removed = d.runtime_file_with_keys(port, &[2], 2);
    let refusal = "state key version 1 is not configured, and stored runs were sealed under it";
    let e = d.status_file(&removed).await.expect_err("status refuses");
    assert_eq!(
        (e.cli_code().as_str(), e.message.as_str()),
        ("coordinator.command.state-key-custody", refusal)
    );
    assert!(e.next.contains("add version 1 back"), "{}", e.next);
    let e = d.apply_file(&removed).await.expect_err("apply refuses");
    assert_eq!(
        (e.cli_code().as_str(), e.message.as_str()),
        ("coordinator.command.state-key-custody", refusal)
    );
    let mut refused = d.launch(&removed, port, &[]);
    let status = refused.exited(Duration::from_secs(30)).await;
    let log = refused.log_text();
    assert_eq!(status.and_then(|s| s.code()), Some(1), "{log}");
    let line = custody_line(&log);
    assert_eq!(line["level"], "ERROR", "{line}");
    assert_eq!(line["fields"]["message"], refusal, "{line}");
    assert!(!log.contains("\"deployment.refused\""), "{log}");
    drop(refused);

    // Once retention erased every run sealed under version 1, it may go.
    support::write_secret(&d.secrets, "state-key-1", &[1; 32]);
    let store = d.open_store(&rotated).await.expect("store");
    let now = unix_now();
    let at = coordinator_ir::instant::Instant::from_unix_seconds;
    let erased = store
        .erase_payloads(at(now + 1), 100, at(now))
        .await
        .unwrap();
    assert_eq!((erased.erased, erased.more), (4, false));
    store.close().await;
    std::fs::remove_file(d.secrets.join("state-key-1")).unwrap();
    let checked = d.status_file(&removed).await.expect("status after erasure");
    assert_eq!(checked.active_state_key, 2);
    d.cleanup().await;
}

/// `release-restore-hold` as the operator: the status and problem code.
async fn release_restore_hold(d: &Deployment, c: &Coordinator) -> (u16, String) {
    let (status, body) = d
        .operate(
            c,
            "/v1/release-restore-hold",
            json!({"reason": "rehearsal-1"}),
        )
        .await;
    (status, body["code"].as_str().unwrap_or("").to_owned())
}

/// seed 000 "Restore from a backup", rehearsed with the built binary on a
/// PostgreSQL 17 cluster of its own (docs/operations.md "Rehearse a
/// restore"): a deployment serves runs; a physical backup is taken while a
/// message is in flight (`sending`) and a retry is prepared (`ready`); the
/// old deployment goes on and sends more; it is stopped, the backup is
/// restored in the database's place with the same keys; `--recovery-only`
/// places the restore hold, which holds both restored prepared commands
/// back for review; release is refused (`restore.review-required`, then
/// `restore.unresolved`) until every one is reconciled against Messaging's
/// receipts or attested; then the ordinary service finishes every run. No
/// run is lost, and Messaging never sees one run's message under a second
/// key nor performs one twice.
#[tokio::test]
async fn restore_rehearsal_reviews_every_restored_command_and_sends_nothing_twice() {
    if urls("restore_rehearsal").is_none() {
        return;
    }
    let port = free_port();
    let cluster = Cluster {
        port,
        dir: PathBuf::from(format!("/tmp/coordinator-pg17-journey-{port}")),
    };
    let backup = PathBuf::from(format!("/tmp/coordinator-pg17-journey-{port}-backup"));
    let _ = std::fs::remove_dir_all(&backup);
    let urls = cluster.start();
    let d = Deployment::new(urls, 10_000).await;
    let messages = d.messaging.fake();
    let old = d.spawn().await;
    let past = rfc3339(unix_now() - 60);

    // Before the backup: F finished; U sent but unanswered (the effect
    // happened); V unanswered and not performed. Both held `unknown`.
    let f = d.start(&old, "app-f", &past).await;
    d.wait_state(&old, &f, "finished", Duration::from_secs(30))
        .await;
    messages.script("/v1/messages", [Reply::ResetAfterEffect]);
    let u = d.start(&old, "app-u", &past).await;
    d.wait_state(&old, &u, "attention", Duration::from_secs(30))
        .await;
    messages.script("/v1/messages", [Reply::Reset]);
    let v = d.start(&old, "app-v", &past).await;
    d.wait_state(&old, &v, "attention", Duration::from_secs(30))
        .await;
    // W: waiting at the backup, sent by the old deployment after it.
    let soon = rfc3339(unix_now() + 6);
    let mut w = Vec::new();
    for i in 0..3 {
        w.push(d.start(&old, &format!("app-w{i}"), &soon).await);
    }
    // S: its message is in flight at the backup (answered 8 s later).
    let seen = |n: usize| async move {
        let start = Instant::now();
        while messages.requests_to("/v1/messages").len() < n {
            assert!(start.elapsed() < Duration::from_secs(30), "no request");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let before = messages.requests_to("/v1/messages").len();
    messages.script("/v1/messages", [Reply::Delay(Duration::from_secs(8))]);
    let s = d.start(&old, "app-s", &past).await;
    seen(before + 1).await;
    // T: answered "retryable" twice: its next attempt is a prepared command
    // waiting for its backoff at the backup.
    messages.script("/v1/messages", [Reply::Retryable, Reply::Retryable]);
    let t = d.start(&old, "app-t", &past).await;
    seen(before + 2).await;

    // The backup: a clean stop, a copy of the data directory, started again.
    cluster.backup(&backup);

    // The old deployment goes on: S is answered, T retried, W sent.
    for run in w.iter().chain([&s, &t]) {
        d.wait_state(&old, run, "finished", Duration::from_secs(60))
            .await;
    }
    let sent_by_old = d.messages_per_key();
    // It is stopped (fenced) before the restore, as seed 000 requires.
    old.kill9();
    let urls = cluster.restore(&backup);
    d.set_database(&urls);

    // A maintenance instance places the hold.
    let rport = free_port();
    let file = d.runtime_file(rport);
    let recovery = d.spawn_with(&file, rport, &["--recovery-only"]).await;
    let (code, holds) = d
        .operate(
            &recovery,
            "/v1/restore-hold",
            json!({"reason": "rehearsal-1"}),
        )
        .await;
    assert_eq!(code, 200, "{holds}");
    assert_eq!(holds["restoreEpoch"], 1, "{holds}");
    let submissions = messages.requests_to("/v1/messages").len();

    // Both restored prepared commands wait for review; U and V for their
    // unknown effects; W wait for their time, as in the backup.
    let attention = d.get(&recovery, "/v1/runs?attention=true").await.unwrap();
    let held: std::collections::BTreeMap<String, Value> = attention["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["run"].as_str().unwrap().to_owned(), r["review"].clone()))
        .collect();
    let want: std::collections::BTreeMap<String, Value> = [
        (s.clone(), json!("required")),
        (t.clone(), json!("required")),
        (u.clone(), Value::Null),
        (v.clone(), Value::Null),
    ]
    .into();
    assert_eq!(held, want);
    for run in &w {
        let st = d.get(&recovery, &format!("/v1/runs/{run}")).await.unwrap();
        assert_eq!(st["state"], "running", "{st}");
    }
    let inspected = d
        .get(&recovery, &format!("/v1/runs/{s}/inspect"))
        .await
        .unwrap();
    let restored: Vec<&Value> = inspected["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["restored"] == true)
        .collect();
    assert_eq!(restored.len(), 1, "{inspected}");
    assert_eq!(restored[0]["effect"], "unknown", "{inspected}");
    assert_eq!(
        restored[0]["attempts"], 1,
        "the attempt in flight counts: {inspected}"
    );

    assert_eq!(
        release_restore_hold(&d, &recovery).await,
        (409, "restore.review-required".to_owned())
    );
    // Reconcile on the recovery-only instance reads Messaging's receipt of
    // the original key and settles each restored send: S and T were
    // accepted after the backup, so their runs finish without a resend.
    for run in [&s, &t] {
        let (code, st) = d
            .operate(
                &recovery,
                &format!("/v1/runs/{run}/reconcile"),
                json!({"reason": "rehearsal-1"}),
            )
            .await;
        assert_eq!(code, 200, "{st}");
        assert_eq!(
            (st["state"].as_str(), st["review"].as_str()),
            (Some("finished"), Some("reconciled")),
            "{st}"
        );
    }
    assert_eq!(
        release_restore_hold(&d, &recovery).await,
        (409, "restore.unresolved".to_owned())
    );
    // U's effect happened: its receipt settles it. V's never did: the
    // lookup finds no receipt and the run stays held.
    let (code, st) = d
        .operate(
            &recovery,
            &format!("/v1/runs/{u}/reconcile"),
            json!({"reason": "rehearsal-1"}),
        )
        .await;
    assert_eq!(
        (code, st["state"].as_str()),
        (200, Some("finished")),
        "{st}"
    );
    let (code, st) = d
        .operate(
            &recovery,
            &format!("/v1/runs/{v}/reconcile"),
            json!({"reason": "rehearsal-1"}),
        )
        .await;
    assert_eq!(
        (code, st["state"].as_str()),
        (200, Some("attention")),
        "{st}"
    );
    assert_eq!(
        release_restore_hold(&d, &recovery).await,
        (409, "restore.unresolved".to_owned())
    );
    // The operator's evidence (Messaging has no record of V's key) is
    // attested, and the hold released.
    let (code, body) = d
        .operate(
            &recovery,
            "/v1/complete-execution-recovery",
            json!({"recoveryReference": "rehearsal-1", "executionHistoryComplete": true,
                   "priorDeploymentFenced": true}),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(release_restore_hold(&d, &recovery).await.0, 200);
    assert_eq!(
        messages.requests_to("/v1/messages").len(),
        submissions,
        "nothing was submitted while the hold stood (only receipts were read)"
    );
    let mut recovery = recovery;
    assert_eq!(
        recovery
            .terminate(Duration::from_secs(15))
            .await
            .and_then(|s| s.code()),
        Some(0)
    );

    // The ordinary service: W's timers fire and their sends replay under
    // the original keys; V is retried with its original command. Behind
    // the admission hold it is ready (a probe keeps it in rotation) and
    // names the hold; starts get the hold's code.
    let ordinary = d.spawn().await;
    assert_eq!(
        d.ready_answer(&ordinary).await,
        (200, json!({"ready": true, "holds": ["admission"]}))
    );
    let (status, p) = d.try_start(&ordinary, "app-held", &d.revision, &past).await;
    assert_eq!(
        (status, p["code"].as_str()),
        (409, Some("admission.held")),
        "{p}"
    );
    for run in &w {
        let st = d
            .wait_state(&ordinary, run, "finished", Duration::from_secs(60))
            .await;
        assert_eq!(st["outcome"], "message-accepted");
    }
    let (code, st) = d
        .operate(
            &ordinary,
            &format!("/v1/runs/{v}/retry-same"),
            json!({"reason": "rehearsal-1"}),
        )
        .await;
    assert_eq!(code, 200, "{st}");
    d.wait_state(&ordinary, &v, "finished", Duration::from_secs(60))
        .await;
    let (code, body) = d
        .operate(
            &ordinary,
            "/v1/release-admission-hold",
            json!({"recoveryReference": "rehearsal-1", "admissionHistoryComplete": true,
                   "priorDeploymentFenced": true}),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        d.ready_answer(&ordinary).await,
        (200, json!({"ready": true}))
    );
    let x = d.start(&ordinary, "app-x", &past).await;
    let mut all = vec![f, u, v, s, t, x];
    all.extend(w);
    for run in &all {
        let st = d
            .wait_state(&ordinary, run, "finished", Duration::from_secs(60))
            .await;
        assert_eq!(st["outcome"], "message-accepted", "{st}");
    }
    // One key per run, each performed once: nothing the product accepted
    // was sent again under a new key, and nothing was performed twice.
    let keys = d.messages_per_key();
    assert_eq!(keys.len(), all.len(), "{keys:?}");
    for key in keys.keys() {
        assert_eq!(messages.effect_count(key), 1, "key {key}: {keys:?}");
    }
    for key in sent_by_old.keys() {
        assert!(keys.contains_key(key));
    }
    drop(ordinary);
    d.cleanup().await;
    drop(cluster);
    let _ = std::fs::remove_dir_all(&backup);
}

/// seed 000 "Change the workflows" with the built binary: after an `apply`
/// of the workflow's next version while the service runs, that service
/// answers every new start with 409 `deployment.activation-changed` (not
/// `revision.not-active`) and its doctor says `activationReady: false`; a
/// repeated start of an admitted run still answers 200 with that run. After
/// a restart new starts run the new revision and the run in flight
/// finishes on its own.
#[tokio::test]
async fn an_apply_under_a_running_service_refuses_new_starts_until_restart() {
    let Some(urls) = urls("activation_changed") else {
        return;
    };
    let mut d = Deployment::new(urls, 2_000).await;
    let mut old = d.spawn().await;
    let first = d.revision.clone();
    let later = rfc3339(unix_now() + 6);
    let (status, a) = d.try_start(&old, "app-a", &first, &later).await;
    assert_eq!(status, 201, "{a}");
    let a = a["run"].as_str().unwrap().to_owned();

    // The author's next version: another revision of the same workflow.
    let next = d
        .example
        .clone()
        .with_deadline_seconds(2_591_999)
        .compile(&d.dir.path().join("next"));
    assert_ne!(next.revision, first);
    let root = d.dir.path().join("package-next");
    let digest = coordinator_runtime::package::write_package(&root, &next).unwrap();
    d.package = (root.display().to_string(), digest);
    d.revision = next.revision.clone();
    d.apply().await;

    for revision in [&next.revision, &first] {
        let (status, p) = d.try_start(&old, "app-b", revision, &later).await;
        assert_eq!(
            (status, p["code"].as_str()),
            (409, Some("deployment.activation-changed")),
            "{p}"
        );
    }
    let (status, again) = d.try_start(&old, "app-a", &first, &later).await;
    assert_eq!((status, again["run"].as_str()), (200, Some(a.as_str())));
    let doctor = d.get(&old, "/v1/doctor").await.unwrap();
    assert_eq!(doctor["activationReady"], false, "{doctor}");
    // A load balancer stops sending starts to it.
    let ready = d
        .http
        .get(format!("{}/ready", old.base))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status().as_u16(), 503);
    assert_eq!(
        serde_json::from_str::<Value>(&ready.text().await.unwrap()).unwrap(),
        json!({"ready": false, "reason": "deployment.activation-changed"})
    );

    assert_eq!(
        old.terminate(Duration::from_secs(15))
            .await
            .and_then(|s| s.code()),
        Some(0)
    );
    let new = d.spawn().await;
    let doctor = d.get(&new, "/v1/doctor").await.unwrap();
    assert_eq!(doctor["activationReady"], true, "{doctor}");
    let ready = d
        .http
        .get(format!("{}/ready", new.base))
        .send()
        .await
        .unwrap();
    assert_eq!(
        (ready.status().as_u16(), ready.text().await.unwrap()),
        (200, r#"{"ready":true}"#.to_owned())
    );
    let (status, b) = d
        .try_start(&new, "app-b", &next.revision, &rfc3339(unix_now() - 1))
        .await;
    assert_eq!(status, 201, "{b}");
    let b = b["run"].as_str().unwrap().to_owned();
    for (run, revision) in [(&a, &first), (&b, &next.revision)] {
        let st = d
            .wait_state(&new, run, "finished", Duration::from_secs(60))
            .await;
        assert_eq!(
            (st["revision"].as_str(), st["outcome"].as_str()),
            (Some(revision.as_str()), Some("message-accepted")),
            "{st}"
        );
    }
    d.cleanup().await;
}

/// A restore hold placed from a `--recovery-only` instance stops an
/// ordinary `coordinator` that was already running: its next lease is
/// refused (`restore.lease-incompatible`) and it exits 1, so no process
/// that predates the hold dispatches again. One started afterwards serves.
#[tokio::test]
async fn a_restore_hold_stops_an_ordinary_process_started_before_it() {
    let Some(urls) = urls("restore_fence") else {
        return;
    };
    let d = Deployment::new(urls, 2_000).await;
    let mut old = d.spawn().await;
    let rport = free_port();
    let recovery = d
        .spawn_with(&d.runtime_file(rport), rport, &["--recovery-only"])
        .await;
    let (status, holds) = d
        .operate(&recovery, "/v1/restore-hold", json!({"reason": "fence-1"}))
        .await;
    assert_eq!(status, 200, "{holds}");
    let exited = old.exited(Duration::from_secs(15)).await;
    assert_eq!(exited.and_then(|s| s.code()), Some(1), "{}", old.log_text());
    let log = old.log_text();
    assert!(
        log.contains("\"code\":\"restore.lease-incompatible\""),
        "{log}"
    );
    assert_eq!(release_restore_hold(&d, &recovery).await.0, 200);
    let new = d.spawn().await;
    let (status, body) = d
        .operate(
            &new,
            "/v1/release-admission-hold",
            json!({"recoveryReference": "fence-1", "admissionHistoryComplete": true,
                   "priorDeploymentFenced": true}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let run = d.start(&new, "app-n", &rfc3339(unix_now() - 1)).await;
    d.wait_state(&new, &run, "finished", Duration::from_secs(60))
        .await;
    d.cleanup().await;
}

/// seed 000 "Codes you see" `binding.conflict`: after an `apply` of a
/// runtime file that moves a connection no live run uses, a service still
/// running on the old file admits nothing new (409 `binding.conflict`: its
/// runs would record a binding the applied file does not have); restarted
/// on the applied file, it admits again.
#[tokio::test]
async fn a_service_on_another_runtime_file_than_applied_admits_nothing() {
    let Some(urls) = urls("binding_conflict") else {
        return;
    };
    let d = Deployment::new(urls, 2_000).await;
    let mut old = d.spawn().await;
    let port = free_port();
    let moved = d.runtime_file(port);
    let text = std::fs::read_to_string(&moved).unwrap();
    let base = d.messaging.base_url().to_owned();
    assert!(text.contains(&base));
    // Messaging moves (another base URL): no live run uses it.
    std::fs::write(&moved, text.replace(&base, "http://127.0.0.1:9")).unwrap();
    d.apply_file(&moved).await.expect("apply");
    let (status, p) = d
        .try_start(&old, "app-b", &d.revision, &rfc3339(unix_now() + 600))
        .await;
    assert_eq!(
        (status, p["code"].as_str()),
        (409, Some("binding.conflict")),
        "{p}"
    );
    assert_eq!(
        old.terminate(Duration::from_secs(15))
            .await
            .and_then(|s| s.code()),
        Some(0)
    );
    let new = d.spawn_with(&moved, port, &[]).await;
    let (status, p) = d
        .try_start(&new, "app-b", &d.revision, &rfc3339(unix_now() + 600))
        .await;
    assert_eq!(status, 201, "{p}");
    d.cleanup().await;
}
