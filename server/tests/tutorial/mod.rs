//! The tutorial "Review an application and send an approval notice" on
//! this machine, as a person runs it: `scripts/run.sh reviewed-notice
//! --decide approve|decline`, the real script with the built binaries
//! (`COORDINATOR_RUN_BIN_DIR` names the debug binaries the tests already
//! build, so no release build), coordinator-sandbox's Casework stand-in
//! and the test PostgreSQL 17. Each path must exit 0 with the outcome it
//! decided: `approval-notice-sent` and one message Messaging accepted, or
//! `application-rejected` and none. Without `--decide`, the script waits
//! for the person: the test runs the approve command the script printed.
//! The namespace the script applied is dropped afterwards. Prints each
//! path's wall time.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Instant, SystemTime};

use sqlx::{Connection, Executor, PgConnection};

use crate::support::{urls, Urls};

/// The directory of the built binaries (`coordinator`, `coordinatorctl`,
/// and `coordinator-sandbox`, which `cargo test --workspace` builds for
/// the fakes' own tests); `None` after a notice (a failure under CI=true)
/// when the sandbox is not built.
pub(crate) fn binaries(test: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_BIN_EXE_coordinator"))
        .parent()
        .unwrap()
        .to_owned();
    assert!(dir.join("coordinatorctl").is_file(), "{}", dir.display());
    if let Ok(built) = std::fs::metadata(dir.join("coordinator-sandbox")).and_then(|m| m.modified())
    {
        let newest = newest_source(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../fakes/src"));
        assert!(
            newest <= built,
            "{} is older than fakes/src: cargo build -p coordinator-fakes (cargo test --workspace builds it)",
            dir.join("coordinator-sandbox").display()
        );
        return Some(dir);
    }
    coordinator_testkit::postgres::missing(
        test,
        "coordinator-sandbox (cargo build -p coordinator-fakes; cargo test --workspace builds it) is",
    );
    None
}

/// The latest modification time of a file under `dir`.
fn newest_source(dir: &Path) -> SystemTime {
    let mut newest = SystemTime::UNIX_EPOCH;
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let meta = entry.metadata().unwrap();
        let time = if meta.is_dir() {
            newest_source(&entry.path())
        } else {
            meta.modified().unwrap()
        };
        newest = newest.max(time);
    }
    newest
}

/// `scripts/run.sh reviewed-notice ARGS WORK` against the test PostgreSQL.
fn tutorial_command(urls: &Urls, bin: &Path, args: &[&str], work: &Path) -> Command {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut command = Command::new("bash");
    command
        .arg(root.join("scripts/run.sh"))
        .arg("reviewed-notice")
        .args(args)
        .arg(work)
        .env("COORDINATOR_RUN_BIN_DIR", bin)
        .env_remove("COORDINATOR_RUN_PG_PORT")
        .env_remove("COORDINATOR_RUN_KEEP_SERVING")
        .env("COORDINATOR_TEST_DATABASE_URL", &urls.admin)
        .env("COORDINATOR_TEST_MIGRATION_URL", &urls.migration)
        .env("COORDINATOR_TEST_RUNTIME_URL", &urls.runtime);
    command
}

/// Runs the tutorial with `--decide`-style ARGS; its exit code, standard
/// output and error, and wall time (seconds).
fn run_tutorial(
    urls: &Urls,
    bin: &Path,
    args: &[&str],
    work: &Path,
) -> (Option<i32>, String, String, f64) {
    let started = Instant::now();
    let out = tutorial_command(urls, bin, args, work).output().unwrap();
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
    assert_tutorial_ended(&stdout, &work, outcome, messages);
}

/// What every path prints and leaves: the wait for the review, the decide
/// command, the completion accepted, `outcome`, `messages` messages.
fn assert_tutorial_ended(stdout: &str, work: &Path, outcome: &str, messages: usize) {
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
    assert_eq!(messages_sent(work), messages, "{stdout}");
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

/// Without `--decide`: the script prints the approve command and waits;
/// the person (this test) runs it, and the run ends as approved.
#[tokio::test]
async fn the_tutorial_waits_for_the_person_and_follows_their_approval() {
    let test = "the_tutorial_waits_for_the_person_and_follows_their_approval";
    let Some(urls) = urls(test) else { return };
    let Some(bin) = binaries(test) else { return };
    let scratch = tempfile::tempdir().unwrap();
    let work = scratch.path().join("tutorial");
    let started = Instant::now();
    let mut child = tutorial_command(&urls, &bin, &[], &work)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The script ends by itself when the run does not wait (60 s), so
    // reading until the command line is bounded.
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    let mut approve = None;
    let mut line = String::new();
    while approve.is_none() && stdout.read_line(&mut line).unwrap() > 0 {
        if line.contains("coordinator-sandbox decide ") && line.trim_end().ends_with(" approve") {
            approve = Some(line.trim().to_owned());
        }
        seen.push_str(&line);
        line.clear();
    }
    let approve = approve.unwrap_or_else(|| panic!("no approve command printed:\n{seen}"));
    let words: Vec<&str> = approve.split_whitespace().collect();
    let decided = Command::new(words[0]).args(&words[1..]).output().unwrap();
    assert!(
        decided.status.success(),
        "{approve}: {}",
        String::from_utf8_lossy(&decided.stderr)
    );
    stdout.read_to_string(&mut seen).unwrap();
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    drop_namespace(&urls, &work).await;
    eprintln!(
        "{test}: scripts/run.sh reviewed-notice with a person's approval took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(status.success(), "stdout:\n{seen}\nstderr:\n{stderr}");
    assert!(
        seen.contains("(waiting for the decision; Ctrl-C stops everything)"),
        "{seen}"
    );
    assert_tutorial_ended(&seen, &work, "approval-notice-sent", 1);
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
