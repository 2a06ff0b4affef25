//! Moving waiting runs (issue 34) end to end: runs of the starter
//! (revision A) wait at `due`; `apply` of `delayed-follow-up-v2` (revision
//! B, the notice's template version 2) leaves them on A; the service
//! restarted on B's package; the built `coordinatorctl move apply` with
//! the certificate `move plan` wrote: `--dry-run` counts the runs and
//! changes nothing, `--yes` moves them, interrupted once (SIGINT) and run
//! again to go on; a run held in `attention` is skipped with its reason;
//! a second `move apply` moves none. Every moved run ends on B having sent
//! B's message exactly once, and the service audited one `run.move` a run.
//!
//! `COORDINATOR_MOVE_RUNS` sets the run count (default 100).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use coordinator_fakes::Reply;
use coordinator_runtime::package::write_package;
use serde_json::Value;

use crate::bulk::{count_in, ctl, done_runs, interrupted_after, json_lines, token_file};
use crate::support::{rfc3339, unix_now, urls, Coordinator, Deployment, Example};

/// How long after they start the runs' `due` comes: room to start them,
/// apply B, restart and move them all, on a slow machine too.
const WAIT_SECONDS: i64 = 35;

/// The `run.move` records of the audit journal: each keyed run reference.
fn moves_audited(d: &Deployment) -> Vec<String> {
    let base = d.dir.path().join("audit.jsonl");
    let mut out = Vec::new();
    for file in coordinator_runtime::audit::journal_files(&base).unwrap() {
        for line in std::fs::read_to_string(file).unwrap().lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            if v["action"] == "run.move" && v["outcome"] == "accepted" {
                out.push(v["references"]["run"].as_str().unwrap().to_owned());
            }
        }
    }
    out
}

/// How many runs of `state` wait at `step`, paging to the end.
async fn at_step(d: &Deployment, c: &Coordinator, state: &str, step: &str) -> usize {
    let mut count = 0;
    let mut cursor = String::new();
    loop {
        let page = d
            .get(
                c,
                &format!("/v1/runs?state={state}&step={step}&limit=100{cursor}"),
            )
            .await
            .unwrap_or_else(|| panic!("list\n{}", c.log_text()));
        count += page["runs"].as_array().unwrap().len();
        match page["nextCursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => return count,
        }
    }
}

/// Waits until `done` says so (at most `within`), polling.
async fn until<F, Fut>(what: &str, c: &Coordinator, within: Duration, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let began = Instant::now();
    while !done().await {
        assert!(began.elapsed() < within, "{what}\n{}", c.log_text());
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// `coordinatorctl` with `args` on the blocking pool: the fakes (the
/// issuer the restarted service fetches its keys from) go on serving on
/// this test's runtime meanwhile.
async fn ctl_off(args: Vec<String>) -> std::process::Output {
    tokio::task::spawn_blocking(move || ctl(&args))
        .await
        .unwrap()
}

/// `move plan` of the starter to `delayed-follow-up-v2`, written to
/// `dir/cert.json`.
fn plan(dir: &Path) -> PathBuf {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let cert = dir.join("cert.json");
    let args: Vec<String> = [
        "move",
        "plan",
        "--from",
        &examples.join("delayed-follow-up").display().to_string(),
        "--to",
        &examples.join("delayed-follow-up-v2").display().to_string(),
        "--output",
        &cert.display().to_string(),
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let out = ctl(&args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    cert
}

#[tokio::test]
async fn move_apply_moves_every_waiting_run_once_across_an_interruption() {
    let Some(urls) = urls("move_apply") else {
        return;
    };
    let runs: usize = std::env::var("COORDINATOR_MOVE_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let began = Instant::now();
    let mut d = Deployment::new(urls, 5_000).await;
    let revision_a = d.revision.clone();
    let c = d.spawn().await;

    // One run held in attention at `notify` (its send reset after the
    // effect), then the runs that wait at `due`.
    d.messaging
        .fake()
        .script("/v1/messages", [Reply::ResetAfterEffect]);
    d.start(&c, "held-0", &rfc3339(unix_now() - 60)).await;
    until("the held run", &c, Duration::from_secs(60), || async {
        count_in(&d, &c, "attention").await == 1
    })
    .await;
    let due = rfc3339(unix_now() + WAIT_SECONDS);
    for i in 0..runs {
        d.start(&c, &format!("app-{i}"), &due).await;
    }
    assert_eq!(at_step(&d, &c, "running", "due").await, runs);
    let started_in = began.elapsed();

    // `apply` B: the runs stay on A. The service restarts on B's package.
    let b = Example {
        name: "delayed-follow-up-v2".into(),
        ..Example::follow_up()
    }
    .compile(d.dir.path());
    let root = d.dir.path().join("package-b");
    let digest = write_package(&root, &b).unwrap();
    d.package = (root.display().to_string(), digest);
    d.apply().await;
    let listed = d.get(&c, "/v1/runs?state=running&limit=1").await.unwrap();
    assert_eq!(
        listed["runs"][0]["revision"].as_str(),
        Some(revision_a.as_str())
    );
    drop(c);
    let c = d.spawn().await;
    let moving = Instant::now();

    let cert = plan(d.dir.path());
    let token = token_file(&d);
    let filter = format!("admitted-before={}", rfc3339(unix_now() + 3600));
    let args = |extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = [
            "move",
            "apply",
            "--certificate",
            &cert.display().to_string(),
            "--filter",
            &filter,
            "--reason",
            "inc-34",
            "--url",
            &c.base,
            "--token-file",
            &token.display().to_string(),
            "--format",
            "json",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        a.extend(extra.iter().map(|s| (*s).to_owned()));
        a
    };

    // The dry run: every waiting run would move, the held one is skipped
    // with its reason; nothing moves.
    let out = ctl_off(args(&["--dry-run"])).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = &json_lines(&out.stdout)[0];
    assert_eq!(report["matched"], runs + 1, "{report}");
    assert_eq!(report["wouldMove"], runs, "{report}");
    assert_eq!(
        report["skippedBy"][0]["reason"], "state attention",
        "{report}"
    );
    assert!(moves_audited(&d).is_empty());
    let listed = d.get(&c, "/v1/runs?state=running&limit=1").await.unwrap();
    assert_eq!(
        listed["runs"][0]["revision"].as_str(),
        Some(revision_a.as_str())
    );

    // Interrupted after half, then run again to go on.
    let first = args(&["--yes", "--max-per-second", "100"]);
    let (code, first_lines) =
        tokio::task::spawn_blocking(move || interrupted_after(first, runs / 2))
            .await
            .unwrap();
    assert_eq!(code, Some(130), "{first_lines:?}");
    let mut done = done_runs(&first_lines);
    assert!(done.len() < runs, "{}", done.len());
    let out = ctl_off(args(&["--yes", "--max-per-second", "100"])).await;
    let lines = json_lines(&out.stdout);
    let summary = lines.last().unwrap();
    assert_eq!(out.status.code(), Some(0), "{summary}");
    done.extend(done_runs(&lines));
    let skipped: Vec<&Value> = lines
        .iter()
        .filter(|l| l["kind"] == "BulkProgress" && l["result"] == "skipped")
        .collect();
    assert!(
        skipped.iter().any(|l| l["code"] == "state attention"),
        "{summary}"
    );
    let unique: BTreeSet<&String> = done.iter().collect();
    assert_eq!(
        (unique.len(), done.len()),
        (runs, runs),
        "each run moved once"
    );
    // A second `move apply` moves none.
    let out = ctl_off(args(&["--yes", "--max-per-second", "100"])).await;
    let lines = json_lines(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{:?}", lines.last());
    assert!(done_runs(&lines).is_empty(), "{:?}", lines.last());
    let moved_in = moving.elapsed();

    // One `run.move` a run; every moved run goes on under B and sends B's
    // message once.
    let audited = moves_audited(&d);
    let audited_runs: BTreeSet<&String> = audited.iter().collect();
    assert_eq!((audited.len(), audited_runs.len()), (runs, runs));
    until(
        "every moved run finished",
        &c,
        Duration::from_secs(u64::try_from(WAIT_SECONDS).unwrap() + 120),
        || async { count_in(&d, &c, "finished").await == runs },
    )
    .await;
    let mut versions: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for m in d.messaging.messages() {
        let app = m["correlationId"].as_str().unwrap_or_default().to_owned();
        let version = m["template"]["version"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        versions.entry(app).or_default().push(version);
    }
    for i in 0..runs {
        assert_eq!(
            versions.get(&format!("app-{i}")),
            Some(&vec!["2".to_owned()]),
            "app-{i}: {versions:?}"
        );
    }
    assert!(d.messages_per_key().values().all(|n| *n == 1));
    let finished = d.get(&c, "/v1/runs?state=finished&limit=1").await.unwrap();
    assert_eq!(
        finished["runs"][0]["revision"].as_str(),
        Some(b.revision.as_str())
    );
    assert_eq!(finished["runs"][0]["moves"][0]["fromStep"], "due");
    eprintln!(
        "move journey: {runs} runs waiting in {started_in:?}; applied, restarted and moved in {moved_in:?}; total {:?}",
        began.elapsed()
    );
    drop(c);
    d.cleanup().await;
}
