//! The published contract against the real binary (issue 27): Schemathesis
//! (PyPI; scripts/test.sh installs it into the tools cache) runs the
//! document the service serves to each caller (`GET /v1/openapi.json`:
//! `docs/openapi.json` with the start's body one variant per workflow the
//! caller may start) against a `coordinator` on PostgreSQL 17, with no
//! hook, once with a producer's token and once with an operator's, with every check,
//! positive and negative data, and its stateful phase (the document's
//! `links` from a start's answer to status, inspect, cancel, retry-same and
//! reconcile), under a fixed seed and a bounded number of examples: any
//! failure fails the test.
//!
//! Excluded, because it fences the process by design: `POST
//! /v1/restore-hold` (placing the restore hold on an ordinary instance
//! raises the restore epoch, which stops this process; its journeys are
//! server/tests/journeys.rs `a_restore_hold_stops_an_ordinary_process_started_before_it`
//! and `restore_rehearsal_reviews_every_restored_command_and_sends_nothing_twice`,
//! and server/tests/ops.rs `restore_sequence_holds_execution_and_admissions`).
//! docs/service.md "The contract, tested" says the same.
//!
//! And a client someone else generated works (issue 27, item 3):
//! `openapi-typescript` (npm) makes `api.d.ts` from the document,
//! `client.mts` calls the service through it with `openapi-fetch`, compiled
//! with `tsc --strict` and run with `node`: a start, its status until
//! `finished`, and a refused start read as a typed problem.
//!
//! Tools: `SCHEMATHESIS_PATH` (a `pip --target` directory holding
//! `schemathesis`), else `target/tools/schemathesis`;
//! `OPENAPI_TYPESCRIPT_DIR` (an `npm --prefix` directory holding
//! `openapi-typescript` and `openapi-fetch`), else
//! `target/tools/openapi-typescript`; `TSC` and `node`. A missing one skips
//! its test after a notice, and fails it under `CI=true`
//! (scripts/test.sh installs them).
//! `COORDINATOR_CONTRACT_EXAMPLES` raises the examples per operation (the
//! longer run before a release: scripts/contract.sh).

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use coordinator_fakes::Mint;
use serde_json::json;
use support::{rfc3339, unix_now, urls, Deployment, AUDIENCE, OPERATOR, PRODUCER};

/// The seed of every run: the same requests each time.
const SEED: &str = "27";

/// Examples per operation and phase in scripts/test.sh.
const EXAMPLES: u32 = 100;

/// The operations left out of the run, by operation id, and why (see the
/// module documentation).
const EXCLUDED_OPERATIONS: [&str; 1] = ["restoreHold"];

/// The directory holding the `schemathesis` package, if installed.
fn schemathesis_path(test: &str) -> Option<PathBuf> {
    let path = std::env::var_os("SCHEMATHESIS_PATH").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tools/schemathesis"),
        PathBuf::from,
    );
    if path.join("schemathesis").is_dir() {
        Some(path)
    } else {
        coordinator_testkit::tools::missing(test, "schemathesis (SCHEMATHESIS_PATH)");
        None
    }
}

/// The `npm --prefix` directory holding `openapi-typescript` and
/// `openapi-fetch`, if installed.
fn openapi_typescript_dir(test: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("OPENAPI_TYPESCRIPT_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tools/openapi-typescript"),
        PathBuf::from,
    );
    let modules = dir.join("node_modules");
    if modules.join(".bin/openapi-typescript").exists() && modules.join("openapi-fetch").is_dir() {
        Some(dir)
    } else {
        coordinator_testkit::tools::missing(test, "openapi-typescript (OPENAPI_TYPESCRIPT_DIR)");
        None
    }
}

/// Runs `command`, panicking with its output unless it succeeds; its
/// stdout.
fn succeeds(what: &str, command: &mut Command) -> String {
    let out = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// What one Schemathesis run reported.
struct Figures {
    who: &'static str,
    seconds: f64,
    summary: String,
}

/// Runs `st run` against `base` with `token`; panics with its output when
/// it reports a failure or an error.
fn schemathesis(
    tool: &Path,
    base: &str,
    who: &'static str,
    token: &str,
    document: &Path,
    report: &Path,
) -> Figures {
    let examples = std::env::var("COORDINATOR_CONTRACT_EXAMPLES")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(EXAMPLES);
    let began = Instant::now();
    let mut command = Command::new("python3");
    command
        .args(["-m", "schemathesis.cli", "run"])
        .arg(document)
        .args(["--url", base])
        .args(["--checks", "all", "--mode", "all"])
        .args(["--phases", "examples,coverage,fuzzing,stateful"])
        .args(["--seed", SEED, "--max-examples", &examples.to_string()])
        .args([
            "--generation-database",
            "none",
            "--no-color",
            "--workers",
            "2",
        ])
        .args(["--request-timeout", "20"])
        .arg("--header")
        .arg(format!("Authorization: Bearer {token}"))
        // `GET /v1/runs/{run}` holds a request with `Prefer: wait=N` for
        // up to 60 s while the run has not ended, as documented; a
        // generated `wait` would outlast the request timeout (and make the
        // run minutes long). Parsing the header is unit-tested
        // (`server/src/http/prefer.rs`), the waits in `tests/run_wait.rs`.
        .arg("--header")
        .arg("Prefer: wait=0")
        .args(["--report", "junit", "--report-dir"])
        .arg(report)
        .env("PYTHONPATH", tool);
    for id in EXCLUDED_OPERATIONS {
        command.args(["--exclude-operation-id", id]);
    }
    let out = command.output().expect("python3 runs");
    let seconds = began.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "Schemathesis ({who}) failed:\n{stdout}\n{stderr}"
    );
    // The figures of its summary: operations, stateful scenarios and
    // links, and the line after `Test cases:` (generated, passed, skipped).
    let lines: Vec<&str> = stdout.lines().map(str::trim).collect();
    let mut summary: Vec<String> = lines
        .iter()
        .filter(|l| {
            l.starts_with("Operations:")
                || l.starts_with("Scenarios:")
                || l.starts_with("API Links:")
        })
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    if let Some(i) = lines.iter().position(|l| *l == "Test cases:") {
        summary.extend(lines.get(i + 1).map(|l| (*l).to_owned()));
    }
    let summary = summary.join("; ");
    Figures {
        who,
        seconds,
        summary,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_the_service_true_to_its_document() {
    let test = "schemathesis_finds_the_service_true_to_its_document";
    let Some(urls) = urls(test) else {
        return;
    };
    let Some(tool) = schemathesis_path(test) else {
        return;
    };
    let d = Deployment::new(urls, 2_000).await;
    let c = d.spawn().await;
    let token = |client: &str| {
        let mut mint = Mint::new(client, AUDIENCE);
        mint.lifetime_seconds = 3600;
        d.issuer.mint(&mint)
    };
    let report = d.dir.path().join("schemathesis");
    std::fs::create_dir_all(&report).unwrap();
    let (producer, operator) = (token(PRODUCER), token(OPERATOR));
    // The document each caller reads from the service itself: the
    // producer's names the served workflow's start with its input schema,
    // the operator's (granted no start) is the published one.
    let mut documents = Vec::new();
    for (who, token) in [("producer", &producer), ("operator", &operator)] {
        let answer = d
            .http
            .get(format!("{}/v1/openapi.json", c.base))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status().as_u16(), 200);
        assert_eq!(
            answer.headers()["content-type"],
            "application/json",
            "{who}"
        );
        let document: serde_json::Value =
            serde_json::from_str(&answer.text().await.unwrap()).unwrap();
        let path = report.join(format!("openapi-{who}.json"));
        std::fs::write(&path, document.to_string()).unwrap();
        documents.push((who, document, path));
    }
    let anonymous = d
        .http
        .get(format!("{}/v1/openapi.json", c.base))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status().as_u16(), 401);
    let start_schema = |doc: &serde_json::Value| {
        doc["paths"]["/v1/runs"]["post"]["requestBody"]["content"]["application/json"]["schema"]
            .clone()
    };
    let variants = start_schema(&documents[0].1)["oneOf"].clone();
    assert_eq!(variants.as_array().map(Vec::len), Some(1), "{variants}");
    assert_eq!(
        variants[0]["properties"]["workflow"]["const"],
        d.example.workflow
    );
    assert_eq!(
        variants[0]["properties"]["revision"]["const"],
        d.revision.as_str()
    );
    assert_eq!(
        start_schema(&documents[1].1),
        json!({"$ref": "#/components/schemas/StartRun"})
    );
    let base = c.base.clone();
    let runs: [(&'static str, String, std::path::PathBuf); 2] = [
        ("producer", producer, documents[0].2.clone()),
        ("operator", operator, documents[1].2.clone()),
    ];
    let figures = tokio::task::spawn_blocking(move || {
        runs.into_iter()
            .map(|(who, token, document)| {
                schemathesis(&tool, &base, who, &token, &document, &report)
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    // The cursors the service writes are the document's: a page of one
    // run of the many Schemathesis started has a `nextCursor` of
    // `LIST_CURSOR_PATTERN`.
    let page = d.get(&c, "/v1/runs?limit=1").await.expect("a page");
    let cursor = jsonschema::validator_for(
        &json!({"type": "string", "pattern": coordinator_api::LIST_CURSOR_PATTERN}),
    )
    .expect("the pattern compiles");
    assert!(cursor.is_valid(&page["nextCursor"]), "{page}");
    let mut lines = String::new();
    for f in &figures {
        lines.push_str(&format!(
            "schemathesis {}: {:.0} s: {}\n",
            f.who, f.seconds, f.summary
        ));
    }
    eprint!("{lines}");
    let _ = std::fs::create_dir_all("../target/tmp");
    let _ = std::fs::write("../target/tmp/contract-figures.txt", &lines);
    assert!(c.log_text().lines().all(|l| !l.contains("panicked")));
    drop(c);
    tokio::time::sleep(Duration::from_millis(10)).await;
    d.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_generated_by_openapi_typescript_starts_reads_and_is_refused() {
    let test = "a_client_generated_by_openapi_typescript_starts_reads_and_is_refused";
    let Some(urls) = urls(test) else {
        return;
    };
    let (Some(tools), Some(tsc), Some(node)) = (
        openapi_typescript_dir(test),
        coordinator_testkit::tools::tsc(test),
        coordinator_testkit::tools::program(test, "node"),
    ) else {
        return;
    };
    let d = Deployment::new(urls, 2_000).await;
    let c = d.spawn().await;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let work = d.dir.path().join("typed-client");
    std::fs::create_dir(&work).unwrap();
    std::os::unix::fs::symlink(tools.join("node_modules"), work.join("node_modules")).unwrap();
    succeeds(
        "openapi-typescript",
        Command::new(tools.join("node_modules/.bin/openapi-typescript"))
            .arg(root.join("../docs/openapi.json"))
            .arg("--output")
            .arg(work.join("api.d.ts")),
    );
    std::fs::copy(
        root.join("tests/contract/client.mts"),
        work.join("client.mts"),
    )
    .unwrap();
    let tsconfig = json!({"compilerOptions": {
        "strict": true, "noUncheckedIndexedAccess": true, "exactOptionalPropertyTypes": true,
        "target": "es2022", "module": "nodenext", "moduleResolution": "nodenext",
        "lib": ["es2022", "dom"], "outDir": "out"},
        "files": ["client.mts"]});
    std::fs::write(work.join("tsconfig.json"), tsconfig.to_string()).unwrap();
    succeeds("tsc --strict", Command::new(&tsc).arg("-p").arg(&work));
    d.record("app-typed-client");
    let input = json!({"applicationId": "app-typed-client", "sendAfter": rfc3339(unix_now() + 1)});
    let mut run = Command::new(node);
    run.arg(work.join("out/client.mjs"))
        .env("COORDINATOR_BASE", &c.base)
        .env("COORDINATOR_TOKEN", d.token(PRODUCER))
        .env("COORDINATOR_WORKFLOW", &d.example.workflow)
        .env("COORDINATOR_REVISION", &d.revision)
        .env("COORDINATOR_INPUT", input.to_string());
    let out = tokio::task::spawn_blocking(move || succeeds("node client.mjs", &mut run))
        .await
        .unwrap();
    let said: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(said["state"], "finished", "{said}");
    assert_eq!(said["outcome"], "message-accepted", "{said}");
    assert_eq!(said["refused"], "revision.not-active", "{said}");
    assert_eq!(d.messaging.messages().len(), 1);
    drop(c);
    d.cleanup().await;
}
