//! Production as it runs (issue 25), with the built `coordinator` binary:
//! a primary failover with a synchronous standby (behind an address that
//! moves, and with libpq's multi-host URL), a coordinator pointed only at a
//! standby, and the service through PgBouncer in transaction pooling mode.
//! Each journey has its own PostgreSQL 17 clusters (scripts/postgres.sh on
//! free ports), destroyed when it ends.
//!
//! Needs the variables of scripts/test.sh (a notice and a pass without
//! them, except under `CI=true`); PgBouncer is installed by
//! scripts/pgbouncer.sh. `COORDINATOR_FAILOVER_RUNS` sets the runs of each
//! failover journey (default 300).

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod support;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sqlx::{Connection, PgConnection};
use support::{
    free_port, rfc3339, unix_now, urls, Cluster, Coordinator, Deployment, Example, Hop, Pooler,
    Urls, PRODUCER, WORKFLOW,
};

/// Prints `line` and appends it to `target/tmp/production-figures.txt`,
/// which scripts/test.sh prints after the tests (a passing test's output is
/// not shown).
fn figure(line: &str) {
    eprintln!("{line}");
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("production-figures.txt");
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(f, "{line}");
    }
}

/// A dedicated cluster on a free port.
fn cluster() -> Cluster {
    let port = free_port();
    Cluster {
        port,
        dir: PathBuf::from(format!("/tmp/coordinator-pg17-journey-{port}")),
    }
}

/// The JSON lines of a process's log.
fn log_lines(c: &Coordinator) -> Vec<Value> {
    c.log_text()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// `GET /ready`: the status and the answer.
async fn ready(d: &Deployment, c: &Coordinator) -> Option<(u16, Value)> {
    ready_within(d, c, Duration::from_secs(5)).await
}

/// `GET /ready` as a probe with `timeout` asks it: the status and the
/// answer (`None`: no answer in time).
async fn ready_within(d: &Deployment, c: &Coordinator, timeout: Duration) -> Option<(u16, Value)> {
    let r = d
        .http
        .get(format!("{}/ready", c.base))
        .timeout(timeout)
        .send()
        .await
        .ok()?;
    let status = r.status().as_u16();
    let text = r.text().await.unwrap_or_default();
    Some((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
}

/// Waits (up to `limit`) until `/ready` answers 503 with `reason`.
async fn wait_not_ready_for(d: &Deployment, c: &mut Coordinator, reason: &str, limit: Duration) {
    let start = Instant::now();
    loop {
        assert!(c.alive(), "the process died:\n{}", c.log_text());
        if let Some((503, body)) = ready(d, c).await {
            if body["reason"] == reason {
                return;
            }
        }
        assert!(
            start.elapsed() < limit,
            "/ready never answered 503 with reason {reason}: {:?}\n{}",
            ready(d, c).await,
            c.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits (up to `limit`) until `/ready` answers 200.
async fn wait_ready(d: &Deployment, c: &mut Coordinator, limit: Duration) {
    let start = Instant::now();
    while d.ready(c).await != Some(200) {
        assert!(c.alive(), "the process died:\n{}", c.log_text());
        assert!(
            start.elapsed() < limit,
            "not ready again within {limit:?}:\n{}",
            c.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A start as a client makes it through an outage: the same idempotency
/// key again until the service answers 201 or 200 (within 120 s). The run
/// id, and whether the answer came before `failed_over` was set.
async fn start_until_answered(
    d: &Deployment,
    base: &str,
    app: &str,
    send_after: &str,
    failed_over: &AtomicBool,
) -> (String, bool) {
    d.record(app);
    let body = json!({"workflow": WORKFLOW, "revision": d.revision,
        "input": {"applicationId": app, "sendAfter": send_after}});
    let start = Instant::now();
    loop {
        let before = !failed_over.load(Ordering::SeqCst);
        let sent = d
            .http
            .post(format!("{base}/v1/runs"))
            .bearer_auth(d.token(PRODUCER))
            .header("idempotency-key", format!("start-{app}"))
            .header("content-type", "application/json")
            .body(body.to_string())
            .timeout(Duration::from_secs(30))
            .send()
            .await;
        if let Ok(r) = sent {
            let status = r.status().as_u16();
            let v: Value =
                serde_json::from_str(&r.text().await.unwrap_or_default()).unwrap_or(Value::Null);
            if status == 201 || status == 200 {
                return (v["run"].as_str().unwrap().to_owned(), before);
            }
            assert_eq!(status, 503, "start of {app}: {v}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "start of {app} never answered"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// How the coordinators reach the database in a failover journey.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reach {
    /// Through a TCP hop standing for a moving address, moved to the
    /// standby (before it is promoted) when the primary dies.
    MovingAddress,
    /// Through libpq's host list (`PRIMARY,STANDBY`,
    /// `target_session_attrs=read-write`), nothing moved.
    HostList,
}

/// `urls` (of the primary on `primary`) listing the standby on `standby`
/// after it, with `target_session_attrs=read-write`.
fn host_list(urls: &Urls, primary: u16, standby: u16) -> Urls {
    let list = |u: &str| {
        u.replace(
            &format!("127.0.0.1:{primary}/coordinator"),
            &format!(
                "127.0.0.1:{primary},127.0.0.1:{standby}/coordinator?target_session_attrs=read-write"
            ),
        )
    };
    Urls {
        // Set-up and clean-up connect directly (sqlx reads one host).
        admin: urls.admin.clone(),
        migration: list(&urls.migration),
        runtime: list(&urls.runtime),
    }
}

/// Issue 25 item 1: two coordinators under load on a primary with a
/// synchronous standby; the primary is killed (kill -9) in the middle of
/// the load, the standby promoted and the address moved. Every admitted
/// run finishes, none is lost, Messaging receives each run's message
/// exactly once (a run held for `reconcile` is reconciled), and every
/// start answered 201/200 before the failover is found after it.
/// Whether `run`, just reconciled, settles held again (`attention`: no
/// receipt was found) rather than finishing, within 30 s.
async fn settles_as_held(d: &Deployment, c: &Coordinator, run: &str) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        let v = d.get(c, &format!("/v1/runs/{run}")).await;
        match v.as_ref().and_then(|v| v["state"].as_str()) {
            Some("finished") => return false,
            Some("attention") => return true,
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    false
}

async fn failover_loses_nothing(reach: Reach) {
    if urls("failover").is_none() {
        return;
    }
    let n: usize = std::env::var("COORDINATOR_FAILOVER_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let primary = cluster();
    let primary_urls = primary.start();
    let standby = cluster();
    let standby_urls = standby.standby_of(&primary, true);
    let hop = Hop::start(primary.port).await;
    let served = match reach {
        Reach::MovingAddress => hop.urls(&primary_urls, primary.port),
        Reach::HostList => host_list(&primary_urls, primary.port, standby.port),
    };
    let d = Arc::new(Deployment::new(served, 2_000).await);
    let mut a = d.spawn().await;
    let mut b = d.spawn().await;
    let (ca, cb) = (Arc::new(a.base.clone()), Arc::new(b.base.clone()));

    // The load: n starts by 16 clients through both processes, each
    // retried with its key until answered.
    let failed_over = Arc::new(AtomicBool::new(false));
    let admitted = Arc::new(AtomicUsize::new(0));
    let past = rfc3339(unix_now() - 60);
    let limit = Arc::new(tokio::sync::Semaphore::new(16));
    let answered: Arc<Mutex<Vec<(String, bool)>>> = Arc::default();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..n {
        let (d, base, past, limit, failed_over, admitted, answered) = (
            d.clone(),
            if i % 2 == 0 { ca.clone() } else { cb.clone() },
            past.clone(),
            limit.clone(),
            failed_over.clone(),
            admitted.clone(),
            answered.clone(),
        );
        tasks.spawn(async move {
            let _permit = limit.acquire().await.unwrap();
            let got =
                start_until_answered(&d, &base, &format!("app-{i}"), &past, &failed_over).await;
            admitted.fetch_add(1, Ordering::SeqCst);
            answered.lock().unwrap().push(got);
        });
    }
    // The primary dies in the middle of the load.
    while admitted.load(Ordering::SeqCst) < n / 3 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    failed_over.store(true, Ordering::SeqCst);
    primary.kill9();
    let died = Instant::now();
    let before: BTreeSet<String> = answered
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, before)| *before)
        .map(|(run, _)| run.clone())
        .collect();
    eprintln!(
        "{reach:?}: primary killed after {} of {n} starts answered",
        before.len()
    );
    if reach == Reach::MovingAddress {
        // The address moves before the standby is promoted: the service
        // finds a read-only server there and never works against it.
        hop.point_at(standby.port);
        wait_not_ready_for(&d, &mut a, "database.read-only", Duration::from_secs(30)).await;
    } else {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    standby.promote();
    let promoted = died.elapsed();
    // The first run to finish on the new primary: the ended runs it held
    // at promotion (every commit acknowledged before the kill, the standby
    // being synchronous), then the first one more.
    let mut admin = PgConnection::connect(&standby_urls.admin).await.unwrap();
    let ended_sql = format!("SELECT count(*) FROM {}.runs WHERE ended", d.ns);
    let at_promotion: i64 = sqlx::query_scalar(&ended_sql)
        .fetch_one(&mut admin)
        .await
        .unwrap();
    let first_finished = loop {
        let now: i64 = sqlx::query_scalar(&ended_sql)
            .fetch_one(&mut admin)
            .await
            .unwrap();
        if now > at_promotion {
            break died.elapsed();
        }
        assert!(
            died.elapsed() < Duration::from_secs(120),
            "no run finished after the failover:\n{}",
            a.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    while let Some(r) = tasks.join_next().await {
        r.unwrap();
    }
    let runs: Vec<(String, bool)> = answered.lock().unwrap().clone();
    assert_eq!(runs.len(), n);

    // Every run finishes; one held for reconcile (its message may have
    // left as the primary died) is reconciled.
    let mut reconciled = 0;
    for (run, _) in &runs {
        let start = Instant::now();
        loop {
            let v = d.get(&a, &format!("/v1/runs/{run}")).await;
            match v
                .as_ref()
                .map(|v| v["state"].as_str().unwrap_or("").to_owned())
            {
                Some(s) if s == "finished" => {
                    assert_eq!(v.unwrap()["outcome"], "message-accepted");
                    break;
                }
                Some(s) if s == "attention" => {
                    let (status, body) = d
                        .operate(
                            &a,
                            &format!("/v1/runs/{run}/reconcile"),
                            json!({"reason": "failover-journey"}),
                        )
                        .await;
                    assert!(status == 200 || status == 202, "{status} {body}");
                    reconciled += 1;
                    // The receipt settles it, unless the message never
                    // reached Messaging (marked `sending`, then cut with the
                    // primary): then the lookup finds no receipt, the run
                    // stays held, and retry-same sends it, once.
                    if settles_as_held(&d, &a, run).await {
                        let (status, body) = d
                            .operate(
                                &a,
                                &format!("/v1/runs/{run}/retry-same"),
                                json!({"reason": "failover-journey"}),
                            )
                            .await;
                        assert!(status == 200 || status == 202, "{status} {body}");
                    }
                    d.wait_state(&a, run, "finished", Duration::from_secs(60))
                        .await;
                    break;
                }
                _ => {}
            }
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "run {run} did not finish: {v:?}\n{}",
                a.log_text()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    // Nothing lost: every start answered before the failover is there.
    for run in &before {
        assert!(
            d.get(&b, &format!("/v1/runs/{run}")).await.is_some(),
            "run {run}, answered before the failover, is gone"
        );
    }
    // Each message once.
    let per_key = d.messages_per_key();
    assert_eq!(per_key.len(), n, "one idempotency key per run");
    assert!(
        per_key.values().all(|c| *c == 1),
        "a message sent twice: {:?}",
        per_key.iter().filter(|(_, c)| **c > 1).collect::<Vec<_>>()
    );
    // Both processes serve on the new primary, and said what they found.
    wait_ready(&d, &mut a, Duration::from_secs(30)).await;
    wait_ready(&d, &mut b, Duration::from_secs(30)).await;
    let said: Vec<Value> = log_lines(&a).into_iter().chain(log_lines(&b)).collect();
    match reach {
        Reach::MovingAddress => assert!(
            said.iter()
                .any(|l| l["fields"]["code"] == "database.read-only"),
            "no database.read-only logged"
        ),
        Reach::HostList => assert!(
            said.iter()
                .any(|l| l["fields"]["code"] == "database.server-changed"
                    && l["fields"]["server"] == format!("127.0.0.1:{}", standby.port)),
            "no move to the standby logged"
        ),
    }
    figure(&format!(
        "failover ({}): {n} runs by two processes, {} answered before the primary was killed, 0 lost, each message once, {reconciled} held for reconcile; standby promoted {:.1} s after the primary died, first run finished on the new primary {:.1} s after it",
        match reach {
            Reach::MovingAddress => "moving address",
            Reach::HostList => "libpq host list",
        },
        before.len(),
        promoted.as_secs_f64(),
        first_finished.as_secs_f64()
    ));
    drop((a, b));
    drop(hop);
    drop(standby);
    drop(primary);
}

#[tokio::test]
async fn a_failover_behind_a_moving_address_loses_nothing() {
    failover_loses_nothing(Reach::MovingAddress).await;
}

#[tokio::test]
async fn a_failover_with_a_host_list_loses_nothing() {
    failover_loses_nothing(Reach::HostList).await;
}

/// Issue 25 item 2: a coordinator whose database URL names only a standby
/// never works against it: it does not open the store, answers `/ready`
/// 503 with the reason `database.read-only`, logs which server it passed
/// over and why, and serves once that server is promoted.
#[tokio::test]
async fn a_coordinator_pointed_at_a_standby_waits_and_never_works_against_it() {
    if urls("pointed_at_a_standby").is_none() {
        return;
    }
    let primary = cluster();
    let primary_urls = primary.start();
    let standby = cluster();
    let standby_urls = standby.standby_of(&primary, false);
    let d = Deployment::new(primary_urls, 2_000).await;
    // A run waiting on the primary, due in a few seconds: a coordinator
    // that worked against the standby would have to lease it there. (Due
    // later than the process that admitted it lives: on a loaded machine a
    // run due at once was leased, marked sending and cut by the kill, and
    // rightly held for reconcile.)
    let on_primary = d.spawn().await;
    let due = unix_now() + 6;
    let run = d.start(&on_primary, "app-standby", &rfc3339(due)).await;
    drop(on_primary);
    assert!(
        unix_now() < due,
        "the admitting process outlived the due time; the test's premise does not hold"
    );
    d.set_database(&standby_urls);
    let port = free_port();
    let file = d.runtime_file(port);
    let mut c = d.launch(&file, port, &[]);
    wait_not_ready_for(&d, &mut c, "database.read-only", Duration::from_secs(30)).await;
    // Still waiting after the run fell due: nothing leased, nothing sent.
    let past_due = (due + 3 - unix_now()).max(3);
    tokio::time::sleep(Duration::from_secs(past_due as u64)).await;
    assert!(c.alive(), "{}", c.log_text());
    assert_eq!(
        ready(&d, &c).await.map(|(s, b)| (s, b["reason"].clone())),
        Some((503, json!("database.read-only")))
    );
    assert!(d.messaging.fake().requests_to("/v1/messages").is_empty());
    let passed_over = log_lines(&c).into_iter().any(|l| {
        l["fields"]["code"] == "database.read-only"
            && l["fields"]["message"].as_str().is_some_and(|m| {
                m.contains(&format!("127.0.0.1:{}", standby.port)) && m.contains("in recovery")
            })
    });
    assert!(
        passed_over,
        "which server and why not logged:\n{}",
        c.log_text()
    );
    // Promoted, the same server is writable: the process serves and the
    // run finishes, its message sent once.
    drop(primary);
    standby.promote();
    wait_ready(&d, &mut c, Duration::from_secs(60)).await;
    let v = d
        .wait_state(&c, &run, "finished", Duration::from_secs(60))
        .await;
    assert_eq!(v["outcome"], "message-accepted");
    assert!(d.messages_per_key().values().all(|n| *n == 1));
    drop(c);
    drop(standby);
}

/// Issue 25 item 6: through PgBouncer in transaction pooling mode
/// (`database.poolingMode: transaction`), `plan`, `apply` and
/// `deployment-status` work, and two processes serve the starter: every
/// run finishes, each message once.
#[tokio::test]
async fn two_processes_serve_through_pgbouncer_in_transaction_mode() {
    if urls("through_pgbouncer").is_none() {
        return;
    }
    let n = 200;
    let db = cluster();
    db.start();
    let (pooler, pooled) = Pooler::start(&db);
    let d = Deployment::of_with_database(
        Example::follow_up(),
        pooled,
        2_000,
        "  poolingMode: transaction\n",
    )
    .await;
    let file = d.runtime_file(free_port());
    for command in ["plan", "deployment-status"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_coordinatorctl"))
            .args(["--runtime-config", &file.display().to_string(), command])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "coordinatorctl {command} through PgBouncer: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The same file in the default `session` mode: the pooler's shared
    // connections are named as the configuration fault they are, with
    // the setting to change, not waited out as an outage.
    let session_mode = file.with_extension("session.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("  poolingMode: transaction\n"), "{text}");
    std::fs::write(
        &session_mode,
        text.replace("  poolingMode: transaction\n", ""),
    )
    .unwrap();
    let port = free_port();
    let mut c = d.launch(&session_mode, port, &[]);
    let start = std::time::Instant::now();
    while c.alive() && start.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let said = c.log_text();
    assert!(!c.alive(), "still running after 30 s:\n{said}");
    assert!(
        said.contains("poolingMode: transaction") && said.contains("database.url"),
        "{said}"
    );
    drop(c);
    // apply again (the first ran in Deployment::of_with_database).
    d.apply().await;
    let a = Arc::new(d.spawn().await);
    let b = Arc::new(d.spawn().await);
    let d = Arc::new(d);
    let past = rfc3339(unix_now() - 60);
    let soon = rfc3339(unix_now() + 2);
    let limit = Arc::new(tokio::sync::Semaphore::new(16));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..n {
        let (d, c, at, limit) = (
            d.clone(),
            if i % 2 == 0 { a.clone() } else { b.clone() },
            // Half due now, half waiting a moment (a wait through the pooler).
            if i % 4 == 0 {
                soon.clone()
            } else {
                past.clone()
            },
            limit.clone(),
        );
        tasks.spawn(async move {
            let _permit = limit.acquire().await.unwrap();
            d.start(&c, &format!("app-{i}"), &at).await
        });
    }
    let mut runs = Vec::new();
    while let Some(r) = tasks.join_next().await {
        runs.push(r.unwrap());
    }
    for run in &runs {
        let v = d
            .wait_state(&a, run, "finished", Duration::from_secs(60))
            .await;
        assert_eq!(v["outcome"], "message-accepted");
    }
    let per_key = d.messages_per_key();
    assert_eq!(per_key.len(), n);
    assert!(per_key.values().all(|c| *c == 1), "a message sent twice");
    // Doctor and the run list read through the pooler too.
    let doctor = d.get(&a, "/v1/doctor").await.expect("doctor");
    assert_eq!(doctor["state"]["storeReady"], true, "{doctor}");
    assert_eq!(doctor["state"]["live"], 0, "{doctor}");
    for c in [&a, &b] {
        let said = c.log_text();
        // The SQLSTATE as a word of its own (a run id's hex may hold the
        // digits), or PostgreSQL's message for it.
        let says = |code: &str, message: &str| {
            said.split(|ch: char| !ch.is_ascii_alphanumeric())
                .any(|word| word == code)
                || said
                    .lines()
                    .any(|l| l.contains("prepared statement") && l.contains(message))
        };
        assert!(
            !says("42P05", "already exists"),
            "a named statement collided:\n{said}"
        );
        assert!(
            !says("26000", "does not exist"),
            "a statement was lost between sessions:\n{said}"
        );
    }
    drop((a, b));
    drop(pooler);
    drop(db);
}

/// The port of a test database URL (`postgres://ROLE:PASSWORD@127.0.0.1:PORT/DB`).
fn port_in(url: &str) -> u16 {
    let after_host = url.rsplit_once("@127.0.0.1:").expect("a 127.0.0.1 URL").1;
    after_host.split('/').next().unwrap().parse().unwrap()
}

/// A database that stops answering (a hung server, a route dropping
/// packets) is `store-unavailable` on `/ready` within its deadline, as a
/// Kubernetes probe with a short timeout needs, and is logged once when
/// it begins and once when it ends, not at every probe.
#[tokio::test]
async fn ready_answers_a_probe_in_time_while_the_database_hangs() {
    let Some(urls) = urls("ready_hang") else {
        return;
    };
    let port = port_in(&urls.runtime);
    let hop = Hop::start(port).await;
    let d = Deployment::new(hop.urls(&urls, port), 2_000).await;
    let mut c = d.spawn().await;
    wait_ready(&d, &mut c, Duration::from_secs(60)).await;
    let messages = |c: &Coordinator, message: &str| {
        log_lines(c)
            .iter()
            .filter(|l| l["fields"]["message"] == message)
            .count()
    };
    let before = (messages(&c, "not ready"), messages(&c, "ready again"));

    // A server that takes connections and never answers; the hop moves
    // there, cutting the pool's connections.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let held = tokio::spawn(async move {
        let mut kept = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            kept.push(socket);
        }
    });
    hop.point_at(silent_port);
    for _ in 0..5 {
        // Before the deadline, a pooled connection's wait was ~4 s.
        let (status, body) = ready_within(&d, &c, Duration::from_secs(2))
            .await
            .expect("/ready answers within 2 s while the database hangs");
        assert_eq!(status, 503);
        assert_eq!(body["reason"], "store-unavailable", "{body}");
    }
    assert_eq!(messages(&c, "not ready"), before.0 + 1, "{}", c.log_text());

    hop.point_at(port);
    wait_ready(&d, &mut c, Duration::from_secs(60)).await;
    assert_eq!(
        messages(&c, "ready again"),
        before.1 + 1,
        "{}",
        c.log_text()
    );
    held.abort();
}

/// PostgreSQL down behind PgBouncer: PgBouncer keeps taking connections,
/// and each fails its first statement (`server_login_retry`) while sqlx's
/// pool tries a new one every few milliseconds for every statement
/// waiting. The log says so once when it begins and once when it ends
/// (the store's lines), never once per attempt (sqlx's own lines, dozens a
/// second before), and the service serves again by itself.
#[tokio::test]
async fn postgresql_down_behind_pgbouncer_is_logged_once_when_it_begins_and_once_when_it_ends() {
    if urls("pgbouncer_outage_log").is_none() {
        return;
    }
    let db = cluster();
    db.start();
    let (_pooler, pooled) = Pooler::start(&db);
    let d = Deployment::of_with_database(
        Example::follow_up(),
        pooled,
        2_000,
        "  poolingMode: transaction\n",
    )
    .await;
    let mut c = d.spawn().await;
    wait_ready(&d, &mut c, Duration::from_secs(60)).await;

    let stopped = db.script("stop");
    assert!(stopped.status.success(), "{stopped:?}");
    // Fifteen seconds of probes and worker ticks asking for connections.
    let outage = Instant::now();
    while outage.elapsed() < Duration::from_secs(15) {
        assert!(c.alive(), "the process died:\n{}", c.log_text());
        let _ = ready(&d, &c).await;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    db.start();
    wait_ready(&d, &mut c, Duration::from_secs(60)).await;
    let run = d.start(&c, "app-after", &rfc3339(unix_now() - 60)).await;
    d.wait_state(&c, &run, "finished", Duration::from_secs(60))
        .await;

    let lines = log_lines(&c);
    let count = |text: &str| {
        lines
            .iter()
            .filter(|l| {
                l["fields"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(text))
            })
            .count()
    };
    let log = c.log_text();
    assert_eq!(count("error returned from after_connect"), 0, "{log}");
    assert_eq!(count("ping on idle connection"), 0, "{log}");
    // One line when failures begin and one when they end, per episode.
    // PgBouncer may refuse a login or two more just after PostgreSQL is
    // back (its `server_login_retry`), which is a second, short episode;
    // the flood this guards against was 121 lines in 20 s.
    let began = count("new database connections fail");
    let ended = count("new database connections succeed again");
    assert!((1..=3).contains(&began), "{began} episodes began:\n{log}");
    assert_eq!(began, ended, "every episode that began ended:\n{log}");
}
