//! `test` with cases that move their run to another revision at a wait
//! (docs/scenarios.md "Moves"), through the real binary: the starter's
//! moved cases (`golden/moves/scenarios.yaml`) pass against the second
//! notice text and `--coverage` counts the move; a moved case whose run
//! fails under the new revision FAILs naming the move; a project that
//! does not compile is a located fault.

use std::path::Path;

use serde_json::Value;

use crate::ctl;

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("UTF-8 output")
}

fn repo(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
}

/// DIR/follow-up: the starter (`init`) with golden/moves/scenarios.yaml;
/// DIR/delayed-follow-up-v2: the second notice text.
fn layout() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("temp dir");
    let out = ctl(tmp.path(), &["init", "--directory", "follow-up"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    std::fs::copy(
        repo("golden/moves/scenarios.yaml"),
        tmp.path().join("follow-up/scenarios.yaml"),
    )
    .expect("copy");
    let b = tmp.path().join("delayed-follow-up-v2");
    std::fs::create_dir(&b).expect("dir");
    for name in ["workflow.yaml", "functions.rhai"] {
        std::fs::copy(
            repo("examples/delayed-follow-up-v2").join(name),
            b.join(name),
        )
        .expect("copy");
    }
    tmp
}

#[test]
fn the_starters_moved_cases_pass_and_coverage_counts_the_move() {
    let tmp = layout();
    let out = ctl(
        tmp.path(),
        &["test", "--project", "follow-up", "--coverage"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with(
            "PASS notice-accepted-after-moving-at-due\n\
             PASS permission-withdrawn-after-moving-at-due\n\
             PASS cancelled-after-moving-at-due\n\
             3 passed, 0 failed\n\
             coverage follow-up: 1 of 16 reached (6.2%): steps 1/6, edges 0/5, outcomes 0/2, recovery paths 0/3\n  \
             moves exercised at 1 of 1 wait steps: due (3 cases)\n"
        ),
        "{stdout}"
    );

    let out = ctl(
        tmp.path(),
        &[
            "test",
            "--project",
            "follow-up",
            "--coverage",
            "--format",
            "json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).expect("one JSON report");
    let moves = &report["coverage"]["workflows"][0]["moves"];
    assert_eq!(
        (moves["exercised"].as_u64(), moves["waits"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(moves["items"][0]["step"], "due");
    assert_eq!(moves["items"][0]["cases"].as_array().map(Vec::len), Some(3));
    let moved = &report["cases"][0]["moved"];
    assert_eq!(
        (
            moved["step"].as_str(),
            moved["to"].as_str(),
            moved["project"].as_str()
        ),
        (Some("due"), Some("due"), Some("../delayed-follow-up-v2"))
    );
    assert!(moved["revision"]
        .as_str()
        .is_some_and(|r| r.starts_with("sha256:")));

    // The starter's own scenarios move nothing: no moves line.
    let plain = tempfile::tempdir().expect("temp dir");
    assert!(ctl(plain.path(), &["init", "--directory", "follow-up"])
        .status
        .success());
    let out = ctl(
        plain.path(),
        &["test", "--project", "follow-up", "--coverage"],
    );
    assert!(!text(&out.stdout).contains("moves exercised"));
}

#[test]
fn a_moved_run_that_fails_under_the_new_revision_fails_naming_the_move() {
    let tmp = layout();
    let b = tmp.path().join("delayed-follow-up-v2");
    // B requires /priority and its notice reads it: the starter's runs have none.
    let workflow = std::fs::read_to_string(b.join("workflow.yaml")).expect("read");
    let workflow = workflow.replacen(
        "    required:\n    - applicationId\n    - sendAfter\n",
        "      priority:\n        type: string\n    required:\n    - applicationId\n    - sendAfter\n    - priority\n",
        1,
    );
    std::fs::write(b.join("workflow.yaml"), workflow).expect("write");
    let functions = std::fs::read_to_string(b.join("functions.rhai")).expect("read");
    let functions = functions.replacen(
        "recordRevision: record.revision",
        "recordRevision: record.revision,\n            priority: input.priority",
        1,
    );
    std::fs::write(b.join("functions.rhai"), functions).expect("write");
    let out = ctl(tmp.path(), &["test", "--project", "follow-up"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with(
            "FAIL notice-accepted-after-moving-at-due\n  \
             path: expected [due, read-application, permission, notify, accepted], got [due, read-application, permission, notify]\n  \
             the run failed function-error at step notify after the move at `due` to ../delayed-follow-up-v2: function `notice-request`, input `input`: the member \"priority\" is required\n"
        ),
        "{stdout}"
    );
    assert!(stdout.ends_with("2 passed, 1 failed\n"), "{stdout}");
}

#[test]
fn a_move_to_a_project_that_does_not_compile_is_a_located_fault() {
    let tmp = layout();
    std::fs::remove_file(tmp.path().join("delayed-follow-up-v2/workflow.yaml")).expect("remove");
    let out = ctl(tmp.path(), &["test", "--project", "follow-up"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    let scenarios = std::fs::read_to_string(repo("golden/moves/scenarios.yaml")).expect("read");
    let line = scenarios
        .lines()
        .position(|l| l == "    project: ../delayed-follow-up-v2")
        .expect("the first move")
        + 1;
    assert!(
        stderr.starts_with(&format!(
            "error[coordinator.scenario.move-project] follow-up/scenarios.yaml:{line}:14 /cases/0/move/project\n  \
             the project `../delayed-follow-up-v2` cannot be moved to: it does not compile (1 error, the first: error[coordinator.file.unreadable] follow-up/../delayed-follow-up-v2/workflow.yaml cannot read the file:"
        )),
        "{stderr}"
    );
    // One fault per moved case, and no case runs.
    assert_eq!(
        stderr
            .matches("error[coordinator.scenario.move-project]")
            .count(),
        3
    );
    assert!(text(&out.stdout).is_empty(), "{}", text(&out.stdout));
}
