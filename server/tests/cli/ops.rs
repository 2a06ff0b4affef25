//! The real `coordinatorctl` binary against an in-process `coordinator`
//! (engine on the in-memory store, fake issuer and products) on
//! 127.0.0.1:0: status, list, inspect, cancel, doctor, holds and retain in
//! text and JSON, refusals with their problem code, exit 3 when the service
//! cannot be reached, an answer that is not the API type, and token file
//! handling.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use coordinator_engine::Engine;
use coordinator_fakes::{FakeCasework, FakeIssuer, FakeMessaging, Mint};
use coordinator_ports::MemoryRunStore;
use serde_json::{json, Value};

#[path = "../ops_support/mod.rs"]
mod ops_support;

use ops_support::{Instance, AUDIENCE, OPERATOR, PRODUCER};

struct Service {
    rt: tokio::runtime::Runtime,
    issuer: FakeIssuer,
    _products: (FakeCasework, FakeMessaging),
    engine: Arc<Engine>,
    base: String,
    dir: tempfile::TempDir,
    _stop: (tokio::sync::oneshot::Sender<()>, tempfile::TempDir),
}

impl Service {
    fn start() -> Service {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let Instance {
            issuer,
            casework,
            messaging,
            engine,
            audit_dir,
            base,
            stop,
            ..
        } = rt.block_on(ops_support::start(
            "db-cli-1",
            false,
            Arc::new(MemoryRunStore::new()),
        ));
        Service {
            rt,
            issuer,
            _products: (casework, messaging),
            engine,
            base,
            dir,
            _stop: (stop, audit_dir),
        }
    }

    /// Writes an owner-only token file for `client` and returns its path.
    fn token_file(&self, client: &str) -> PathBuf {
        let path = self.dir.path().join(format!("{client}.token"));
        std::fs::write(&path, self.token(client) + "\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        path
    }

    fn token(&self, client: &str) -> String {
        self.issuer.mint(&Mint::new(client, AUDIENCE))
    }

    /// Starts a run as the producer; returns its id.
    fn start_run(&self, key: &str) -> String {
        let revision = self.engine.admission.active_revisions()["reviewed-notice"].clone();
        let token = self.token(PRODUCER);
        let url = format!("{}/v1/runs", self.base);
        self.rt.block_on(async {
            let resp = reqwest::Client::new()
                .post(url)
                .bearer_auth(token)
                .header("idempotency-key", key)
                .header("content-type", "application/json")
                .body(
                    json!({"workflow": "reviewed-notice", "revision": revision,
                           "input": {"applicationId": "app-1", "applicantEmail": "a@example.org"}})
                    .to_string(),
                )
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status().as_u16(), 201);
            let v: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
            v["run"].as_str().unwrap().to_owned()
        })
    }

    /// Runs `coordinatorctl ARGS --url <base> --token-file <file>`.
    fn ctl(&self, client: &str, args: &[&str]) -> Out {
        let file = self.token_file(client);
        let mut all: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        all.extend([
            "--url".into(),
            self.base.clone(),
            "--token-file".into(),
            file.display().to_string(),
        ]);
        ctl(&all)
    }
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Out {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("{e}: {}", self.stdout))
    }
}

fn ctl(args: &[String]) -> Out {
    let out = Command::new(env!("CARGO_BIN_EXE_coordinatorctl"))
        .args(args)
        .output()
        .unwrap();
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

#[test]
fn status_list_inspect_and_cancel_in_text_and_json() {
    let svc = Service::start();
    let id = svc.start_run("k-1");

    let out = svc.ctl(OPERATOR, &["status", "--run", &id]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains(&format!("run: {id}\n")),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("state: running\n"), "{}", out.stdout);
    assert!(out.stdout.contains("workflow: reviewed-notice\n"));

    let out = svc.ctl(OPERATOR, &["status", "--run", &id, "--format", "json"]);
    assert_eq!(out.code, 0);
    let v = out.json();
    assert_eq!(v["kind"], "CoordinatorCtlReport");
    assert_eq!(v["ok"], true);
    assert_eq!(v["command"], "status");
    assert_eq!(v["result"]["run"], id.as_str());
    assert_eq!(v["result"]["state"], "running");

    let out = svc.ctl(OPERATOR, &["list", "--attention", "false", "--limit", "5"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .starts_with(&format!("{id}  running  reviewed-notice  ")),
        "{}",
        out.stdout
    );
    let out = svc.ctl(
        OPERATOR,
        &["list", "--attention", "true", "--format", "json"],
    );
    assert_eq!(out.json()["result"]["runs"], json!([]));
    let out = svc.ctl(OPERATOR, &["list", "--attention", "true"]);
    assert_eq!(out.stdout, "no runs\n");

    let out = svc.ctl(OPERATOR, &["inspect", "--run", &id, "--format", "json"]);
    let inspection = out.json();
    assert_eq!(inspection["result"]["steps"][0]["name"], "submit-review");
    let admitted = inspection["result"]["status"]["admittedAt"]
        .as_str()
        .unwrap()
        .to_owned();
    let out = svc.ctl(OPERATOR, &["inspect", "--run", &id]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains(&format!(
            "steps:\n  submit-review (call) attempts=0 startedAt={admitted}\n"
        )),
        "the step reached at admission started then: {}",
        out.stdout
    );
    assert!(!out.stdout.contains("a@example.org"), "inspect leaks input");

    // `graph --run` draws the same timeline on the workflow.
    let project = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/reviewed-notice");
    let project = project.to_string_lossy();
    let args = [
        "graph",
        "--project",
        &project,
        "--run",
        &id,
        "--format",
        "dot",
    ];
    let out = svc.ctl(OPERATOR, &args);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains(&format!(
            "  label=\"run {id}: admitted {admitted}, deadline "
        )),
        "{}",
        out.stdout
    );
    let since = format!("\\nsince {}\", shape=box", &admitted[11..19]);
    assert!(out.stdout.contains(&since), "{since} in {}", out.stdout);
    assert!(
        out.stdout
            .contains("\"submit-review\" -> \"await-decision\" [label=\"next\", color=\"gray75\""),
        "an edge not taken yet is faint: {}",
        out.stdout
    );

    let out = svc.ctl(OPERATOR, &["cancel", "--run", &id, "--reason", "ticket-1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("state: cancel-requested\n"),
        "{}",
        out.stdout
    );
}

#[test]
fn refusals_show_their_problem_code_and_next_step() {
    let svc = Service::start();
    let id = svc.start_run("k-1");
    // The producer's policy lacks cancel.
    let out = svc.ctl(PRODUCER, &["cancel", "--run", &id, "--reason", "ticket-1"]);
    assert_eq!(out.code, 1);
    assert!(out.stdout.is_empty());
    let url = format!("{}/v1/runs/{id}/cancel", svc.base);
    assert!(
        out.stderr
            .starts_with(&format!("error[coordinator.authorization.refused] {url}\n")),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("  next: "), "{}", out.stderr);
    // An unknown run, as JSON.
    let out = svc.ctl(
        OPERATOR,
        &["status", "--run", "no-such-run", "--format", "json"],
    );
    assert_eq!(out.code, 1);
    let v = out.json();
    assert_eq!(v["ok"], false);
    assert_eq!(v["status"], "refused");
    assert_eq!(v["error"]["code"], "coordinator.run.not-found");
    assert_eq!(v["error"]["status"], 404);
    assert!(v["error"]["next"].is_string());
    // A refusal from the seed's table: admissions held.
    let out = svc.ctl(OPERATOR, &["restore-hold", "--reason", "incident-1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("holds.restore: true\n"),
        "{}",
        out.stdout
    );
    let out = svc.ctl(
        OPERATOR,
        &[
            "release-admission-hold",
            "--recovery-reference",
            "incident-1",
            "--admission-history-complete",
            "--prior-deployment-fenced",
        ],
    );
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .starts_with("error[coordinator.restore.unresolved] "),
        "{}",
        out.stderr
    );
    // Attestations are required (usage).
    let out = svc.ctl(
        OPERATOR,
        &[
            "complete-execution-recovery",
            "--recovery-reference",
            "incident-1",
        ],
    );
    assert_eq!(out.code, 2, "{}", out.stderr);
    // Retention: --limit out of range is a usage error; a caller that is
    // not an operator is refused.
    let out = svc.ctl(
        OPERATOR,
        &["retain", "--before", "2026-07-01T00:00:00Z", "--limit", "0"],
    );
    assert_eq!(out.code, 2, "{}", out.stderr);
    let out = svc.ctl(PRODUCER, &["retain", "--before", "2026-07-01T00:00:00Z"]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .starts_with("error[coordinator.authorization.refused] "),
        "{}",
        out.stderr
    );
}

#[test]
fn retain_erases_ended_runs_in_text_and_json() {
    let svc = Service::start();
    let id = svc.start_run("k-1");
    let live = svc.start_run("k-2");
    let out = svc.ctl(OPERATOR, &["cancel", "--run", &id, "--reason", "ticket-1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    svc.rt
        .block_on(svc.engine.worker.run_until_idle(10))
        .unwrap();

    let out = svc.ctl(OPERATOR, &["retain", "--before", "yesterday"]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .starts_with("error[coordinator.request.invalid] "),
        "{}",
        out.stderr
    );
    let out = svc.ctl(
        OPERATOR,
        &[
            "retain",
            "--before",
            "2026-03-02T09:00:01Z",
            "--limit",
            "100",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        "Erased 1 run ended before 2026-03-02T09:00:01Z; none remain\n"
    );
    let out = svc.ctl(
        OPERATOR,
        &[
            "retain",
            "--before",
            "2026-03-02T09:00:01Z",
            "--format",
            "json",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v = out.json();
    assert_eq!(
        (v["ok"].as_bool(), v["command"].as_str()),
        (Some(true), Some("retain"))
    );
    assert_eq!(
        v["result"],
        json!({"erased": 0, "more": false, "before": "2026-03-02T09:00:01Z"})
    );

    let out = svc.ctl(OPERATOR, &["status", "--run", &id]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("payloadErased: true\n"),
        "{}",
        out.stdout
    );
    let out = svc.ctl(OPERATOR, &["inspect", "--run", &id]);
    assert!(
        out.stdout.ends_with("steps: (erased by retention)\n"),
        "{}",
        out.stdout
    );
    let out = svc.ctl(OPERATOR, &["status", "--run", &live]);
    assert!(!out.stdout.contains("payloadErased"), "{}", out.stdout);
    let out = svc.ctl(
        OPERATOR,
        &["retry-same", "--run", &id, "--reason", "ticket-2"],
    );
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .starts_with("error[coordinator.run.payload-erased] "),
        "{}",
        out.stderr
    );
    assert!(out
        .stderr
        .contains("can no longer be retried or reconciled"));
}

#[test]
fn doctor_text_and_json() {
    let svc = Service::start();
    let out = svc.ctl(OPERATOR, &["doctor"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let version = format!("version: {}", env!("CARGO_PKG_VERSION"));
    let revision = format!("sourceRevision: {}", coordinator::version::SOURCE_REVISION);
    for line in [
        version.as_str(),
        revision.as_str(),
        "activationReady: true",
        "state.auditReady: true",
        "state.uncertain: 0",
        "holds.restore: false",
        "holds.admission: false",
    ] {
        assert!(
            out.stdout.lines().any(|l| l == line),
            "no `{line}` in\n{}",
            out.stdout
        );
    }
    let out = svc.ctl(OPERATOR, &["doctor", "--format", "json"]);
    let v = out.json();
    assert_eq!(v["result"]["state"]["auditReady"], true);
    assert_eq!(v["result"]["holds"]["restore"], false);
    let out = svc.ctl(PRODUCER, &["doctor"]);
    assert_eq!(out.code, 1);
    assert!(out
        .stderr
        .starts_with("error[coordinator.authorization.refused]"));
}

#[test]
fn unreachable_service_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("t");
    std::fs::write(&token, "a.b.c").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let args: Vec<String> = [
        "doctor",
        "--url",
        &format!("http://127.0.0.1:{port}"),
        "--token-file",
        token.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec();
    let out = ctl(&args);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(
        out.stderr
            .starts_with("error[coordinator.command.service-unreachable]"),
        "{}",
        out.stderr
    );
    let mut json_args = args.clone();
    json_args.extend(["--format".to_owned(), "json".to_owned()]);
    let out = ctl(&json_args);
    assert_eq!(out.code, 3);
    assert_eq!(out.json()["status"], "unavailable");
}

#[test]
fn token_file_handling() {
    let svc = Service::start();
    let secret = svc.token(OPERATOR);
    let path = svc.dir.path().join("loose.token");
    std::fs::write(&path, &secret).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let run = |p: &Path| {
        ctl(&[
            "doctor".into(),
            "--url".into(),
            svc.base.clone(),
            "--token-file".into(),
            p.display().to_string(),
        ])
    };
    // World-readable: refused, token never shown.
    let out = run(&path);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out
        .stderr
        .starts_with("error[coordinator.command.token-file-permissions]"));
    assert!(!out.stderr.contains(&secret) && !out.stdout.contains(&secret));
    // Owner-only: accepted.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(run(&path).code, 0);
    // Missing: unavailable.
    let out = run(&svc.dir.path().join("missing.token"));
    assert_eq!(out.code, 3);
    assert!(out
        .stderr
        .starts_with("error[coordinator.command.token-file-unreadable]"));
    // A directory is not a token file.
    assert_eq!(run(svc.dir.path()).code, 3);
    // A bad token: the service refuses, the token is not shown.
    std::fs::write(&path, "not-a-token").unwrap();
    let out = run(&path);
    assert_eq!(out.code, 1);
    assert!(out
        .stderr
        .starts_with("error[coordinator.authentication.refused]"));
    assert!(!out.stderr.contains("not-a-token"));
    // The token is never accepted by value.
    let out = ctl(&[
        "doctor".into(),
        "--url".into(),
        svc.base.clone(),
        "--token".into(),
        secret.clone(),
    ]);
    assert_eq!(out.code, 2);
    // A symbolic link is not the token file itself.
    std::fs::write(&path, &secret).unwrap();
    let link = svc.dir.path().join("link.token");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    let out = run(&link);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(out.stderr.contains("symbolic link"), "{}", out.stderr);
    let out = run(&svc.dir.path().join("missing.token"));
    assert!(out.stderr.contains("does not exist"), "{}", out.stderr);
}

#[test]
fn bad_urls_and_empty_run_ids_are_usage_errors() {
    let svc = Service::start();
    let file = svc.token_file(OPERATOR).display().to_string();
    let with_url = |url: &str| {
        ctl(&[
            "doctor".into(),
            "--url".into(),
            url.into(),
            "--token-file".into(),
            file.clone(),
        ])
    };
    let credentials = svc.base.replace("http://", "http://user:pw-123@");
    let out = with_url(&credentials);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(!out.stderr.contains("pw-123"), "{}", out.stderr);
    assert!(out.stderr.contains("--token-file"), "{}", out.stderr);
    assert_eq!(with_url("http://127.0.0.1:http://x").code, 2);
    // A query would end up inside the request URL: refused, naming it.
    let out = with_url(&format!("{}/?x=1", svc.base));
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("without a query"), "{}", out.stderr);
    // A trailing slash is no fault.
    let out = with_url(&format!("{}/", svc.base));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = svc.ctl(OPERATOR, &["status", "--run", ""]);
    assert_eq!(out.code, 2, "{}", out.stderr);
}

/// A 2xx JSON answer that is not the expected API type is
/// `coordinator.command.unexpected-answer`, in text and JSON alike.
#[test]
fn an_answer_that_is_not_the_api_type_is_unexpected() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("t");
    std::fs::write(&token, "a.b.c").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = std::thread::spawn(move || {
        for _ in 0..2 {
            let (mut conn, _) = listener.accept().unwrap();
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf).unwrap();
            let body = r#"{"live":true}"#;
            write!(
                conn,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
        }
    });
    let args: Vec<String> = [
        "doctor",
        "--url",
        &base,
        "--token-file",
        token.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec();
    let out = ctl(&args);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert!(
        out.stderr
            .starts_with("error[coordinator.command.unexpected-answer] "),
        "{}",
        out.stderr
    );
    let mut json_args = args.clone();
    json_args.extend(["--format".to_owned(), "json".to_owned()]);
    let v = ctl(&json_args).json();
    assert_eq!(v["error"]["code"], "coordinator.command.unexpected-answer");
    assert!(v.get("result").is_none(), "{v}");
    server.join().unwrap();
}

/// The bulk form (`--filter`): a filter that is not one is refused with
/// its code and column before any request; `--dry-run` counts; with
/// `--yes` each matching run is cancelled once (a line a run when stderr
/// is no terminal, then the summary), and the same command again finds
/// none left to act on.
#[test]
fn bulk_cancel_by_filter_acts_once_on_each_matching_run() {
    let svc = Service::start();
    let ids: Vec<String> = (1..=3).map(|i| svc.start_run(&format!("k-b{i}"))).collect();
    let filter = "workflow=reviewed-notice,state=running";

    for (bad, code) in [
        ("", "error[coordinator.bulk.filter-empty] --filter\n"),
        (
            "workflow=reviewed-notice,colour=red",
            "error[coordinator.bulk.filter-key] --filter, column 26\n",
        ),
        (
            "state=paused",
            "error[coordinator.bulk.filter-value] --filter, column 1\n",
        ),
    ] {
        let out = svc.ctl(
            OPERATOR,
            &["cancel", "--filter", bad, "--reason", "t-1", "--yes"],
        );
        assert_eq!(out.code, 2, "{}", out.stderr);
        assert!(out.stderr.starts_with(code), "{}", out.stderr);
    }
    for usage in [
        &["cancel", "--reason", "t-1", "--dry-run", "--run", &ids[0]][..],
        &[
            "cancel", "--reason", "t-1", "--run", &ids[0], "--filter", filter,
        ][..],
        &[
            "cancel",
            "--reason",
            "t-1",
            "--filter",
            filter,
            "--max-per-second",
            "0",
        ][..],
    ] {
        assert_eq!(svc.ctl(OPERATOR, usage).code, 2, "{usage:?}");
    }

    let out = svc.ctl(
        OPERATOR,
        &["cancel", "--filter", filter, "--reason", "t-1", "--dry-run"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .starts_with("cancel --dry-run: 3 runs match the filter; nothing was done\n"),
        "{}",
        out.stdout
    );
    let out = svc.ctl(
        OPERATOR,
        &["cancel", "--filter", filter, "--reason", "t-1", "--yes"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    for id in &ids {
        assert!(
            // `cancel-requested` while its call is in flight.
            out.stdout.contains(&format!("done     {id}  cancel")),
            "{}",
            out.stdout
        );
    }
    assert!(
        out.stdout
            .contains("cancel: 3 runs matched the filter; 3 handled\n  done"),
        "{}",
        out.stdout
    );
    let out = svc.ctl(
        OPERATOR,
        &[
            "cancel", "--filter", filter, "--reason", "t-1", "--format", "json",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let summary = out.json();
    assert_eq!(
        (&summary["status"], &summary["matched"], &summary["handled"]),
        (&json!("ok"), &json!(0), &json!(0)),
        "{summary}"
    );
}

/// `start` starts a run with its key; `--wait` waits for its end through
/// `Prefer: wait=N`: exit 0 with the ended run when a cancel ends it
/// meanwhile, exit 4 with the run as it is when N passes first; a wait
/// over 60 s is a usage error.
#[test]
fn start_waits_for_the_run_to_end_and_says_whether_it_did() {
    let svc = Service::start();
    let revision = svc.engine.admission.active_revisions()["reviewed-notice"].clone();
    let input = r#"{"applicationId": "app-1", "applicantEmail": "a@example.org"}"#;
    let start = |key: &str, wait: &[&str]| {
        let mut args = vec![
            "start",
            "--workflow",
            "reviewed-notice",
            "--revision",
            &revision,
            "--input",
            input,
        ];
        args.extend(["--idempotency-key", key]);
        args.extend(wait);
        args.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };

    let out = svc.ctl(PRODUCER, &as_strs(&start("k-wait-1", &["--wait", "1"])));
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert!(out.stdout.contains("state: running\n"), "{}", out.stdout);
    assert!(
        out.stderr.contains("had not ended after 1 s"),
        "{}",
        out.stderr
    );
    let id = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("run: "))
        .unwrap()
        .to_owned();
    // The same key starts no second run.
    let out = svc.ctl(
        PRODUCER,
        &as_strs(&start("k-wait-1", &["--format", "json"])),
    );
    assert_eq!((out.code, &out.json()["result"]["run"]), (0, &json!(id)));
    // In JSON, a wait that ran out says so beside the run's state.
    let out = svc.ctl(
        PRODUCER,
        &as_strs(&start("k-wait-1", &["--wait", "1", "--format", "json"])),
    );
    let v = out.json();
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert_eq!(
        (&v["ok"], &v["status"]),
        (&json!(false), &json!("not-ended")),
        "{v}"
    );
    assert_eq!(v["result"]["state"], "running", "{v}");

    // A bare --wait waits up to 60 s; the cancel's end wakes it.
    let file = svc.token_file(PRODUCER);
    let mut args = start("k-wait-2", &["--wait"]);
    args.extend([
        "--url".to_owned(),
        svc.base.clone(),
        "--token-file".to_owned(),
        file.display().to_string(),
    ]);
    let waiting = Command::new(env!("CARGO_BIN_EXE_coordinatorctl"))
        .args(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    svc.rt.block_on(async {
        tokio::time::timeout(std::time::Duration::from_secs(30), async {
            while svc.engine.run_ends.waiting() != 1 {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the CLI's wait is held");
    });
    let run = svc
        .rt
        .block_on(svc.engine.operator.list(&coordinator_ports::RunFilter {
            limit: 1,
            ..coordinator_ports::RunFilter::default()
        }))
        .unwrap()
        .runs
        .remove(0);
    let out = svc.ctl(OPERATOR, &["cancel", "--run", &run.id, "--reason", "t-1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    svc.rt
        .block_on(svc.engine.worker.run_until_idle(10))
        .unwrap();
    let done = waiting.wait_with_output().unwrap();
    let stdout = String::from_utf8(done.stdout).unwrap();
    assert_eq!(
        done.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert!(stdout.contains(&format!("run: {}\n", run.id)), "{stdout}");
    assert!(
        stdout.contains("state: cancelled-after-effect\n"),
        "{stdout}"
    );

    let out = svc.ctl(PRODUCER, &as_strs(&start("k-wait-3", &["--wait", "61"])));
    assert_eq!(out.code, 2, "{}", out.stderr);
}

fn as_strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}
