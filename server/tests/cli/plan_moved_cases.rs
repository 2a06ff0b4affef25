//! `move plan` holding each wait to revision A's moved scenario cases,
//! through the real binary (docs/operations.md "Moving waiting runs",
//! docs/scenarios.md "Moves"): the starter as A, with the cases of
//! `golden/moves/scenarios.yaml` moving at `due` to B. A B that only
//! changes the notice text: the cases pass, `due` is movable (exit 0), and
//! `test` passes. A B whose Function reads a record member the run does
//! not have at run time: the static check cannot see it, the moved case
//! fails, `due` is refused with the scenario finding located at the case
//! in A's `scenarios.yaml` (exit 1), and `test` fails it too. A scenarios
//! file with faults refuses the plan without a certificate.

use std::path::{Path, PathBuf};
use std::process::Output;

use coordinator_ir::moves::MoveCertificate;
use serde_json::Value;

use crate::ctl;

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("UTF-8 output")
}

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
}

/// The moved cases of the starter, moving to `../b`.
fn moved_cases() -> String {
    let golden = std::fs::read_to_string(repo("golden/moves/scenarios.yaml")).expect("read");
    assert!(golden.contains("project: ../delayed-follow-up-v2"));
    golden.replace("project: ../delayed-follow-up-v2", "project: ../b")
}

/// DIR/a: the starter with its moved cases as `scenarios.yaml`; DIR/b: the
/// starter with `edits` applied to its `functions.rhai`.
fn layout(edits: &[(&str, &str)]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("temp dir");
    for to in ["a", "b"] {
        let dir = tmp.path().join(to);
        std::fs::create_dir(&dir).expect("dir");
        for name in ["workflow.yaml", "functions.rhai"] {
            std::fs::copy(
                repo("examples/delayed-follow-up").join(name),
                dir.join(name),
            )
            .expect("copy");
        }
    }
    std::fs::write(tmp.path().join("a/scenarios.yaml"), moved_cases()).expect("write");
    let functions = tmp.path().join("b/functions.rhai");
    let mut body = std::fs::read_to_string(&functions).expect("read");
    for (from, to) in edits {
        assert!(body.contains(from), "functions.rhai has {from:?}");
        body = body.replacen(from, to, 1);
    }
    // Always another revision than A (a plan refuses the same one twice).
    body.push_str("\n// revision B\n");
    std::fs::write(&functions, body).expect("write");
    tmp
}

fn plan(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "move",
        "plan",
        "--from",
        "a",
        "--to",
        "b",
        "--output",
        "cert.json",
    ];
    args.extend_from_slice(extra);
    ctl(dir, &args)
}

fn certificate(dir: &Path) -> MoveCertificate {
    let bytes = std::fs::read(dir.join("cert.json")).expect("the certificate is written");
    MoveCertificate::from_json(&bytes).expect("a certificate that verifies")
}

/// The JSON report's `movedCases.due` as (case, passed).
fn moved_at_due(report: &Value) -> Vec<(String, bool)> {
    report["movedCases"]["due"]
        .as_array()
        .expect("movedCases.due")
        .iter()
        .map(|c| {
            (
                c["case"].as_str().unwrap_or("").to_owned(),
                c["passed"].as_bool().unwrap_or(false),
            )
        })
        .collect()
}

#[test]
fn a_moved_case_that_passes_leaves_due_movable() {
    let tmp = layout(&[("\"application-follow-up\"", "\"application-reminder\"")]);
    let dir = tmp.path();
    let out = plan(dir, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "");
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(
            "\nmovable: due -> due (wait-until), carrying no step output, 3 moved cases passed\n"
        ),
        "{stdout}"
    );
    let c = certificate(dir);
    assert!(c.movable_wait("due").is_some());

    let out = plan(dir, &["--format", "json"]);
    assert_eq!(out.status.code(), Some(0));
    let report: Value = serde_json::from_slice(&out.stdout).expect("one report");
    assert_eq!(
        moved_at_due(&report),
        [
            ("notice-accepted-after-moving-at-due".to_owned(), true),
            ("permission-withdrawn-after-moving-at-due".to_owned(), true),
            ("cancelled-after-moving-at-due".to_owned(), true),
        ]
    );
    assert_eq!(report["movedCases"]["due"][0]["to"], "due");

    // `test` on A runs the same cases and passes them.
    let out = ctl(dir, &["test", "--project", "a"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(text(&out.stdout).ends_with("3 passed, 0 failed\n"));
}

#[test]
fn a_moved_case_that_fails_under_b_refuses_due_at_the_case() {
    // B addresses the notice to a record member the starter's records do
    // not have: the types allow it (the record's data is open), the run
    // fails at `notify`.
    let tmp = layout(&[(
        "to: #{ email: record.data.applicantEmail }",
        "to: #{ email: record.data.contactEmail }",
    )]);
    let dir = tmp.path();
    let out = plan(dir, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let scenarios = moved_cases();
    let line = scenarios
        .lines()
        .position(|l| l == "  move:")
        .expect("the first case's move")
        + 1;
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with(&format!(
            "error[coordinator.move.scenario-failed] a/scenarios.yaml:{line}:3 /cases/0/move\n  \
             scenario case `notice-accepted-after-moving-at-due` moves its run at `due` of revision A to `due` of revision B and does not pass: path: expected [due, read-application, permission, notify, accepted], got [due, read-application, permission, notify]; the run failed function-error at step notify after the move at `due` to ../b: "
        )),
        "{stderr}"
    );
    assert_eq!(stderr.matches("error[").count(), 1, "{stderr}");
    let stdout = text(&out.stdout);
    assert!(
        stdout
            .contains("\nrefused: due -> due (wait-until), 1 finding, 1 of 3 moved cases failed\n"),
        "{stdout}"
    );
    // The certificate is written, `due` refused by the case alone.
    let c = certificate(dir);
    let due = c.wait("due").expect("due");
    assert!(!due.movable);
    let codes: Vec<(&str, &str, u32)> = due
        .findings
        .iter()
        .map(|f| (f.code.as_str(), f.file.as_str(), f.line))
        .collect();
    assert_eq!(
        codes,
        [(
            "coordinator.move.scenario-failed",
            "a/scenarios.yaml",
            u32::try_from(line).expect("a line")
        )]
    );

    let out = plan(dir, &["--format", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).expect("one report");
    assert_eq!(report["ok"], false);
    let passed: Vec<bool> = moved_at_due(&report).into_iter().map(|(_, p)| p).collect();
    assert_eq!(passed, [false, true, true]);
    assert!(report["movedCases"]["due"][0]["problem"]
        .as_str()
        .is_some_and(|p| p.contains("function-error")));

    // `test` on A fails the same case.
    let out = ctl(dir, &["test", "--project", "a"]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with("FAIL notice-accepted-after-moving-at-due\n")
            && stdout.ends_with("2 passed, 1 failed\n"),
        "{stdout}"
    );
}

#[test]
fn a_scenarios_file_with_faults_refuses_the_plan() {
    let tmp = layout(&[]);
    let dir = tmp.path();
    let broken = moved_cases().replacen("project: ../b", "project: ../nowhere", 1);
    std::fs::write(dir.join("a/scenarios.yaml"), broken).expect("write");
    let out = plan(dir, &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with("error[coordinator.scenario.move-project] a/scenarios.yaml:"),
        "{stderr}"
    );
    assert!(!dir.join("cert.json").exists(), "no certificate");
    assert!(text(&out.stdout).is_empty());
}
