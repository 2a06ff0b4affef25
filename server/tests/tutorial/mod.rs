//! The tutorial "Review an application and send an approval notice" on
//! this machine, as a person runs it: `scripts/run.sh reviewed-notice
//! --decide approve|decline`, the real script with the built binaries
//! (`COORDINATOR_RUN_BIN_DIR` names the debug binaries the tests already
//! build, so no release build), coordinator-sandbox's Casework stand-in
//! and the test PostgreSQL 17. Each path must exit 0 with the outcome it
//! decided: `approval-notice-sent` and one message Messaging accepted, or
//! `application-rejected` and none. The namespace the script applied is
//! dropped afterwards. Prints each path's wall time.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use sqlx::{Connection, Executor, PgConnection};

use crate::support::{urls, Urls};

/// The directory of the built binaries (`coordinator`, `coordinatorctl`,
/// and `coordinator-sandbox`, which `cargo test --workspace` builds for
/// the fakes' own tests); `None` after a notice (a failure under CI=true)
/// when the sandbox is not built.
fn binaries(test: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_BIN_EXE_coordinator"))
        .parent()
        .unwrap()
        .to_owned();
    assert!(dir.join("coordinatorctl").is_file(), "{}", dir.display());
    if dir.join("coordinator-sandbox").is_file() {
        return Some(dir);
    }
    coordinator_testkit::postgres::missing(
        test,
        "coordinator-sandbox (cargo build -p coordinator-fakes; cargo test --workspace builds it) is",
    );
    None
}

/// Runs `scripts/run.sh reviewed-notice ARGS WORK` against the test
/// PostgreSQL; its exit code, standard output and error, and wall time.
fn run_tutorial(
    urls: &Urls,
    bin: &Path,
    args: &[&str],
    work: &Path,
) -> (Option<i32>, String, String, f64) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let started = Instant::now();
    let out = Command::new("bash")
        .arg(root.join("scripts/run.sh"))
        .arg("reviewed-notice")
        .args(args)
        .arg(work)
        .env("COORDINATOR_RUN_BIN_DIR", bin)
        .env_remove("COORDINATOR_RUN_PG_PORT")
        .env_remove("COORDINATOR_RUN_KEEP_SERVING")
        .env("COORDINATOR_TEST_DATABASE_URL", &urls.admin)
        .env("COORDINATOR_TEST_MIGRATION_URL", &urls.migration)
        .env("COORDINATOR_TEST_RUNTIME_URL", &urls.runtime)
        .output()
        .unwrap();
    let took = started.elapsed().as_secs_f64();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        took,
    )
}

/// Drops the namespace the script's runtime file names.
async fn drop_namespace(urls: &Urls, work: &Path) {
    let Ok(runtime) = std::fs::read_to_string(work.join("runtime.yaml")) else {
        return;
    };
    let Some(namespace) = runtime
        .lines()
        .find_map(|l| l.strip_prefix("namespace: "))
        .filter(|n| n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
    else {
        return;
    };
    if let Ok(mut admin) = PgConnection::connect(&urls.admin).await {
        let _ = admin
            .execute(format!("DROP SCHEMA IF EXISTS {namespace} CASCADE").as_str())
            .await;
    }
}

/// The lines of the sandbox's log that say a message request reached
/// Messaging.
fn messages_sent(work: &Path) -> usize {
    std::fs::read_to_string(work.join("logs/sandbox.log"))
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("messaging: message request"))
        .count()
}

/// One path: decides `decision`, expects exit 0, `outcome` and `messages`
/// messages (prints the wall time).
async fn decided_path(test: &str, decision: &str, outcome: &str, messages: usize) {
    let Some(urls) = urls(test) else { return };
    let Some(bin) = binaries(test) else { return };
    let scratch = tempfile::tempdir().unwrap();
    let work = scratch.path().join("tutorial");
    let (code, stdout, stderr, took) = run_tutorial(&urls, &bin, &["--decide", decision], &work);
    drop_namespace(&urls, &work).await;
    eprintln!("{test}: scripts/run.sh reviewed-notice --decide {decision} took {took:.1} s");
    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stdout.contains("is waiting for the review: Casework holds review request"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "coordinator-sandbox decide {}",
            work.join("sandbox").display()
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("\noutcome: {outcome}\n")),
        "{stdout}"
    );
    assert!(
        stdout.contains("the coordinator answered 202"),
        "the completion was sent and accepted: {stdout}"
    );
    assert_eq!(messages_sent(&work), messages, "{stdout}");
}

#[tokio::test]
async fn the_tutorial_approved_delivers_the_notice() {
    decided_path(
        "the_tutorial_approved_delivers_the_notice",
        "approve",
        "approval-notice-sent",
        1,
    )
    .await;
}

#[tokio::test]
async fn the_tutorial_declined_sends_no_notice() {
    decided_path(
        "the_tutorial_declined_sends_no_notice",
        "decline",
        "application-rejected",
        0,
    )
    .await;
}

#[test]
fn the_tutorial_refuses_an_unknown_decision() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let out = Command::new("bash")
        .arg(root.join("scripts/run.sh"))
        .args(["reviewed-notice", "--decide", "maybe"])
        .arg(scratch.path())
        .env("COORDINATOR_RUN_BIN_DIR", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--decide takes approve or decline"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_dir(scratch.path()).unwrap().count(), 0);
}
