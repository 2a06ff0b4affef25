//! Bulk recovery by filter (issue 29): Messaging drops the connection
//! after doing its work for every send, so each run stops in `attention`
//! at `notify` with an `unknown` effect; the built `coordinatorctl`
//! recovers them all with one filter against the built `coordinator` on
//! PostgreSQL 17.
//!
//! An empty filter is refused (`coordinator.bulk.filter-empty`), and so is
//! a bulk action with no terminal and no `--yes`
//! (`coordinator.bulk.confirmation-required`), each before anything is
//! done; `--dry-run` counts every held run; a bulk reconcile interrupted
//! (SIGINT, as Ctrl-C sends it) after half of them stops after the run in
//! hand; resumed from two processes at once it settles the rest. Every run
//! finishes, Messaging is asked for each run's receipt exactly once, the
//! three processes together report each run `done` exactly once, and the
//! service audited one `run.reconcile` a run, all with the one reason.
//!
//! `COORDINATOR_BULK_RUNS` sets the run count (default 200).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use coordinator_fakes::Reply;
use serde_json::Value;

use crate::support::{rfc3339, unix_now, urls, Coordinator, Deployment, OPERATOR, WORKFLOW};

/// `coordinatorctl` with `args`, its output.
pub(crate) fn ctl(args: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_coordinatorctl"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("coordinatorctl runs")
}

/// The JSON lines of `out`'s stdout.
pub(crate) fn json_lines(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The runs reported `done` in JSON `lines`.
pub(crate) fn done_runs(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l["kind"] == "BulkProgress" && l["result"] == "done")
        .map(|l| l["run"].as_str().unwrap().to_owned())
        .collect()
}

/// How many runs are in `state`, paging `GET /v1/runs` to the end.
pub(crate) async fn count_in(d: &Deployment, c: &Coordinator, state: &str) -> usize {
    let mut count = 0;
    let mut cursor = String::new();
    loop {
        let page = d
            .get(c, &format!("/v1/runs?state={state}&limit=100{cursor}"))
            .await
            .unwrap_or_else(|| panic!("list\n{}", c.log_text()));
        count += page["runs"].as_array().unwrap().len();
        match page["nextCursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => return count,
        }
    }
}

/// Starts `n` runs whose send Messaging performs and then drops, and
/// waits until every one is held in `attention`.
async fn hold_runs(d: &Deployment, c: &Coordinator, n: usize) {
    d.messaging
        .fake()
        .script("/v1/messages", (0..n).map(|_| Reply::ResetAfterEffect));
    let past = rfc3339(unix_now() - 60);
    for i in 0..n {
        d.start(c, &format!("app-{i}"), &past).await;
    }
    let began = Instant::now();
    while count_in(d, c, "attention").await < n {
        assert!(
            began.elapsed() < Duration::from_secs(120),
            "not all held\n{}",
            c.log_text()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// An owner-only file holding the operator's token.
pub(crate) fn token_file(d: &Deployment) -> PathBuf {
    let path = d.dir.path().join("operator.token");
    std::fs::write(&path, d.token(OPERATOR)).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// A bulk reconcile that is sent SIGINT once it reported `after` runs;
/// its exit code and JSON lines.
pub(crate) fn interrupted_after(args: Vec<String>, after: usize) -> (Option<i32>, Vec<Value>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_coordinatorctl"))
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("coordinatorctl runs");
    let mut lines = Vec::new();
    let mut reported = 0;
    let stdout = child.stdout.take().unwrap();
    for line in BufReader::new(stdout).lines() {
        let line: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if line["kind"] == "BulkProgress" {
            reported += 1;
            if reported == after {
                let sent = Command::new("kill")
                    .args(["-INT", &child.id().to_string()])
                    .status()
                    .unwrap();
                assert!(sent.success());
            }
        }
        lines.push(line);
    }
    (child.wait().unwrap().code(), lines)
}

/// Receipt lookups Messaging answered, by path (one path per key).
fn lookups(d: &Deployment) -> BTreeMap<String, usize> {
    let mut per = BTreeMap::new();
    for r in d.messaging.fake().requests() {
        if r.path.starts_with("/v1/message-receipts/") {
            *per.entry(r.path).or_insert(0) += 1;
        }
    }
    per
}

/// The `run.reconcile` records of the audit journal: the keyed run and
/// reason references of each.
fn reconciles_audited(d: &Deployment) -> Vec<(String, String)> {
    let base = d.dir.path().join("audit.jsonl");
    let mut out = Vec::new();
    for file in coordinator_runtime::audit::journal_files(&base).unwrap() {
        for line in std::fs::read_to_string(file).unwrap().lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            if v["action"] == "run.reconcile" && v["outcome"] == "accepted" {
                let r = &v["references"];
                out.push((
                    r["run"].as_str().unwrap().to_owned(),
                    r["reason"].as_str().unwrap().to_owned(),
                ));
            }
        }
    }
    out
}

#[tokio::test]
async fn bulk_reconcile_settles_every_held_run_once_across_an_interruption_and_two_operators() {
    let Some(urls) = urls("bulk_reconcile") else {
        return;
    };
    let runs: usize = std::env::var("COORDINATOR_BULK_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let began = Instant::now();
    let d = Deployment::new(urls, 5_000).await;
    let c = d.spawn().await;
    hold_runs(&d, &c, runs).await;
    let held_in = began.elapsed();
    let token = token_file(&d);
    let filter = format!(
        "workflow={WORKFLOW},state=attention,step=notify,effect=unknown,admitted-before={}",
        rfc3339(unix_now() + 60)
    );
    let args = |filter: &str, extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = ["reconcile", "--filter", filter, "--reason", "inc-2912"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        a.extend([
            "--url".to_owned(),
            c.base.clone(),
            "--token-file".to_owned(),
        ]);
        a.push(Path::new(&token).display().to_string());
        a.extend(extra.iter().map(|s| (*s).to_owned()));
        a
    };

    // Refused before anything is done: an empty filter, and no
    // confirmation (no terminal, no --yes).
    let out = ctl(&args(" , ", &["--yes"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("error[coordinator.bulk.filter-empty]"),
        "{stderr}"
    );
    let out = ctl(&args(&filter, &[]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("error[coordinator.bulk.confirmation-required]"),
        "{stderr}"
    );
    assert!(lookups(&d).is_empty(), "nothing was looked up");

    // The dry run counts every held run and acts on none.
    let out = ctl(&args(&filter, &["--dry-run", "--format", "json"]));
    assert_eq!(out.status.code(), Some(0));
    let report = &json_lines(&out.stdout)[0];
    assert_eq!(report["matched"], runs, "{report}");
    assert_eq!(report["first"].as_array().unwrap().len(), 10.min(runs));
    assert_eq!(count_in(&d, &c, "attention").await, runs);

    // Interrupted after half: it stops after the run in hand.
    let acting = Instant::now();
    let bulk = |extra: &[&str]| {
        let mut more = vec!["--yes", "--format", "json", "--max-per-second", "100"];
        more.extend(extra);
        args(&filter, &more)
    };
    let first = bulk(&[]);
    let (code, first_lines) =
        tokio::task::spawn_blocking(move || interrupted_after(first, runs / 2))
            .await
            .unwrap();
    assert_eq!(code, Some(130), "{first_lines:?}");
    let summary = first_lines.last().unwrap();
    assert_eq!(summary["status"], "interrupted", "{summary}");
    let first_done = done_runs(&first_lines);
    assert!(
        first_done.len() >= runs / 2 && first_done.len() < runs,
        "{}",
        first_done.len()
    );

    // Resumed by two operators at once.
    let (a, b) = (bulk(&[]), bulk(&[]));
    let (a, b) = tokio::join!(
        tokio::task::spawn_blocking(move || ctl(&a)),
        tokio::task::spawn_blocking(move || ctl(&b)),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    let mut done = first_done;
    let mut summaries = Vec::new();
    for out in [&a, &b] {
        let lines = json_lines(&out.stdout);
        let summary = lines.last().unwrap();
        assert_eq!(out.status.code(), Some(0), "{summary}");
        assert_eq!(summary["status"], "ok", "{summary}");
        // What the other operator settled first is skipped, never refused.
        for count in summary["summary"].as_array().unwrap() {
            assert!(
                count["result"] == "done" || count["result"] == "skipped",
                "{summary}"
            );
        }
        done.extend(done_runs(&lines));
        summaries.push(summary["summary"].clone());
    }
    let acted_in = acting.elapsed();

    // Each run was acted on once, and settled after one receipt lookup.
    let mut once = done.clone();
    once.sort();
    once.dedup();
    assert_eq!((once.len(), done.len()), (runs, runs), "each run done once");
    assert_eq!(count_in(&d, &c, "finished").await, runs);
    let looked_up = lookups(&d);
    assert_eq!(looked_up.len(), runs, "{looked_up:?}");
    assert!(looked_up.values().all(|n| *n == 1), "{looked_up:?}");
    assert!(d.messages_per_key().values().all(|n| *n == 1));
    // The service audited each run's reconcile once, with the one reason.
    let audited = reconciles_audited(&d);
    let runs_audited: BTreeSet<&str> = audited.iter().map(|(run, _)| run.as_str()).collect();
    let reasons: BTreeSet<&str> = audited.iter().map(|(_, r)| r.as_str()).collect();
    assert_eq!(
        (audited.len(), runs_audited.len(), reasons.len()),
        (runs, runs, 1)
    );
    eprintln!(
        "bulk journey: {runs} runs held in {held_in:?}; recovered in {acted_in:?}; total {:?}; the two resumed: {summaries:?}",
        began.elapsed()
    );
    drop(c);
    d.cleanup().await;
}
