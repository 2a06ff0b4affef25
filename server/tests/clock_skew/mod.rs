//! One time for every process (docs/operations.md "Clock skew"): two
//! `coordinator` processes on one database, the second under libfaketime
//! (Debian's `faketime` package, loaded into that process alone), its wall
//! clock shifted +300 s, then −300 s, then +2 s (against the default
//! 1 s bound), then back. Runs with a `sendAfter` a few seconds ahead are
//! offered to the shifted process first and started on the other when it
//! refuses: no run acts before its `sendAfter` on the true clock, no valid
//! start is refused 401, none is lost, nothing is sent twice, and the
//! shifted process serves again by itself once its clock is back.
//!
//! libfaketime is found at `COORDINATOR_TEST_LIBFAKETIME` or Debian's
//! paths; without it the journey is skipped with a notice, except under
//! `CI=true` (scripts/test.sh installs the package), where it fails.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::support::{free_port, rfc3339, unix_now, urls, Coordinator, Deployment};

/// Debian's libfaketime (multi-threaded variant), by architecture.
const LIBFAKETIME: [&str; 3] = [
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/faketime/libfaketimeMT.so.1",
];

/// The libfaketime to preload, if this host has one.
fn libfaketime() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("COORDINATOR_TEST_LIBFAKETIME") {
        return Some(PathBuf::from(p));
    }
    LIBFAKETIME.iter().map(PathBuf::from).find(|p| p.exists())
}

/// The shifts tried in turn, as libfaketime's offset and in seconds.
const SHIFTS: [(&str, f64); 3] = [("+300", 300.0), ("-300", -300.0), ("+2", 2.0)];

/// Runs started per shift.
const RUNS_PER_SHIFT: usize = 3;

/// `/ready` of `c`: the status and the JSON body.
async fn ready(d: &Deployment, c: &Coordinator) -> Option<(u16, Value)> {
    let r = d
        .http
        .get(format!("{}/ready", c.base))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .ok()?;
    let status = r.status().as_u16();
    let text = r.text().await.unwrap_or_default();
    Some((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
}

/// Waits (at most 15 s) until `c`'s `/ready` says `clock.skew` with an
/// offset near `seconds`; the body.
async fn wait_out_of_service(d: &Deployment, c: &mut Coordinator, seconds: f64) -> Value {
    let start = Instant::now();
    loop {
        assert!(c.alive(), "the shifted process died:\n{}", c.log_text());
        if let Some((503, body)) = ready(d, c).await {
            let offset = body["clockOffsetSeconds"].as_f64().unwrap_or(0.0);
            if body["reason"] == "clock.skew" && (offset - seconds).abs() < 1.0 {
                return body;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "not out of service for a clock {seconds} s off:\n{}",
            c.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Writes libfaketime's offset for the shifted process.
fn shift(file: &Path, offset: &str) {
    std::fs::write(file, format!("{offset}\n")).unwrap();
}

/// A start offered to the shifted process `b` first: it must answer 503
/// `service.unavailable` (never 401), and the start goes to `a`. The run
/// id.
async fn start_on_the_other(
    d: &Deployment,
    b: &Coordinator,
    a: &Coordinator,
    app: &str,
    at: i64,
) -> String {
    let (status, body) = d.try_start(b, app, &d.revision, &rfc3339(at)).await;
    assert_eq!(
        (status, &body["code"]),
        (503, &json!("service.unavailable")),
        "the shifted process answered a valid start: {body}"
    );
    d.start(a, app, &rfc3339(at)).await
}

#[tokio::test]
async fn a_process_whose_clock_is_off_takes_itself_out_of_service_and_nothing_acts_early() {
    let Some(urls) = urls("clock_skew") else {
        return;
    };
    let Some(lib) = libfaketime() else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "clock_skew: libfaketime is missing, and CI=true (apt-get install faketime)"
        );
        eprintln!("NOTICE: clock_skew skipped: libfaketime is missing (apt-get install faketime)");
        return;
    };
    let began = Instant::now();
    let d = Deployment::new(urls, 2_000).await;
    let a = d.spawn().await;
    let offset_file = d.dir.path().join("faketime");
    shift(&offset_file, SHIFTS[0].0);
    let port = free_port();
    let file = d.runtime_file(port);
    let mut b = d.launch_env(
        &file,
        port,
        &[],
        &[
            ("LD_PRELOAD", lib.to_str().unwrap()),
            ("FAKETIME_TIMESTAMP_FILE", offset_file.to_str().unwrap()),
            ("FAKETIME_CACHE_DURATION", "1"),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
        ],
    );
    // The true clock on this host (PostgreSQL's too) and the monotonic
    // clock the fakes stamp requests with, read together.
    let (base_unix, base_mono) = (
        SystemTime::now().duration_since(UNIX_EPOCH).unwrap(),
        Instant::now(),
    );
    let due_mono = |unix: i64| {
        base_mono + Duration::from_secs(u64::try_from(unix).unwrap()).saturating_sub(base_unix)
    };
    let mut runs: Vec<(String, String, i64)> = Vec::new();
    for (round, (offset, seconds)) in SHIFTS.iter().enumerate() {
        shift(&offset_file, offset);
        let body = wait_out_of_service(&d, &mut b, *seconds).await;
        eprintln!("clock shifted {offset} s: /ready {body}");
        let doctor = d.get(&b, "/v1/doctor").await.unwrap();
        assert_eq!(doctor["clock"]["outOfService"], true, "{doctor}");
        for i in 0..RUNS_PER_SHIFT {
            let app = format!("app-{round}-{i}");
            let at = unix_now() + 2 + i64::try_from(i).unwrap();
            let run = start_on_the_other(&d, &b, &a, &app, at).await;
            runs.push((run, app, at));
        }
    }
    // Back on time: the shifted process serves again by itself, and a
    // start it admits is served like any other.
    shift(&offset_file, "+0");
    let start = Instant::now();
    while d.ready(&b).await != Some(200) {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "{}",
            b.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let at = unix_now() + 2;
    runs.push((
        d.start(&b, "app-back", &rfc3339(at)).await,
        "app-back".into(),
        at,
    ));

    for (run, _, _) in &runs {
        let v = d
            .wait_state(&a, run, "finished", Duration::from_secs(30))
            .await;
        assert_eq!(v["outcome"], "message-accepted", "{v}");
    }
    // Each message arrived at or after its run's sendAfter on the true
    // clock, and once.
    let messages = d.messaging.fake().requests_to("/v1/messages");
    for (run, app, at) in &runs {
        let email = format!("{app}@example.org");
        let sent: Vec<_> = messages
            .iter()
            .filter(|r| String::from_utf8_lossy(&r.body).contains(&email))
            .collect();
        assert_eq!(sent.len(), 1, "run {run}: {} messages", sent.len());
        assert!(
            sent[0].at >= due_mono(*at),
            "run {run} sent {:?} before its sendAfter",
            due_mono(*at) - sent[0].at
        );
    }
    assert!(d.messages_per_key().values().all(|n| *n == 1));
    // One line when it went out of service, one when it came back.
    let log = b.log_text();
    let lines: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    // (`/ready`'s own "not ready" and "ready again" lines carry no offset.)
    let measured = |field: &str| {
        lines
            .iter()
            .filter(|l| {
                l["fields"][field] == "clock.skew" && l["fields"]["offset_seconds"].is_number()
            })
            .count()
    };
    assert_eq!((measured("code"), measured("was")), (1, 1), "{log}");
    eprintln!(
        "clock skew journey: {} runs over shifts of +300 s, -300 s and +2 s in {:?}",
        runs.len(),
        began.elapsed()
    );
    drop((a, b));
    d.cleanup().await;
}
