//! Bad input through the real binary: clear refusals, exit codes, and nothing
//! left behind or removed that the command did not create.

use std::path::Path;
use std::process::{Command, Output};

use crate::ctl;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn starter(dir: &Path) {
    assert!(ctl(dir, &["init", "--directory", "follow-up"])
        .status
        .success());
}

#[test]
fn init_never_removes_a_path_it_did_not_create() {
    let tmp = tempfile::tempdir().expect("temp dir");
    std::os::unix::fs::symlink(tmp.path().join("nowhere"), tmp.path().join("mylink"))
        .expect("link");
    let out = ctl(tmp.path(), &["init", "--directory", "mylink"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("coordinator.init.exists"));
    assert!(
        tmp.path().join("mylink").is_symlink(),
        "the link was removed"
    );
}

#[test]
fn check_refuses_functions_that_eval_or_print() {
    for call in ["eval(\"1\");", "print(\"x\");", "debug(\"x\");"] {
        let tmp = tempfile::tempdir().expect("temp dir");
        starter(tmp.path());
        let f = tmp.path().join("follow-up/functions.rhai");
        let src = std::fs::read_to_string(&f).expect("read");
        let src = src.replacen(
            "fn notice_route(record) {",
            &format!("fn notice_route(record) {{\n    {call}"),
            1,
        );
        std::fs::write(&f, src).expect("write");
        let out = ctl(tmp.path(), &["check", "--project", "follow-up"]);
        assert_eq!(out.status.code(), Some(1), "{call}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("coordinator.function.syntax"),
            "{call}: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains("follow-up/functions.rhai:"),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn a_failing_function_is_named_in_the_test_output() {
    let tmp = tempfile::tempdir().expect("temp dir");
    starter(tmp.path());
    let f = tmp.path().join("follow-up/functions.rhai");
    let src = std::fs::read_to_string(&f).expect("read");
    std::fs::write(
        &f,
        src.replacen(
            "fn notice_route(record) {",
            "fn notice_route(record) {\n    loop { }",
            1,
        ),
    )
    .expect("write");
    let out = ctl(
        tmp.path(),
        &[
            "test",
            "--project",
            "follow-up",
            "--case",
            "notice-accepted-after-virtual-wait",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("FAIL notice-accepted-after-virtual-wait"),
        "{stdout}"
    );
    assert!(
        stdout.contains("the run failed function-error at step permission"),
        "{stdout}"
    );
    assert!(
        stdout.contains("operations"),
        "the limit is named: {stdout}"
    );
    assert!(stdout.contains("0 passed, 1 failed"), "{stdout}");
}

#[test]
fn device_and_pipe_inputs_are_refused_not_read() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().join("dev");
    std::fs::create_dir(&dir).expect("dir");
    std::os::unix::fs::symlink("/dev/zero", dir.join("workflow.yaml")).expect("link");
    let out = ctl(tmp.path(), &["check", "--project", "dev"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("coordinator.file.not-regular"),
        "{}",
        stderr(&out)
    );
}

/// `types --output` never replaces what is not a regular file: a symbolic
/// link (and its target), a directory or a device stays as it was.
#[test]
fn types_never_replaces_a_link_a_directory_or_a_device() {
    let tmp = tempfile::tempdir().expect("temp dir");
    starter(tmp.path());
    std::fs::write(tmp.path().join("target.txt"), "keep").expect("write");
    std::os::unix::fs::symlink(tmp.path().join("target.txt"), tmp.path().join("link.ts"))
        .expect("link");
    std::fs::create_dir(tmp.path().join("dir.ts")).expect("dir");
    let types_to = |output: &str| {
        ctl(
            tmp.path(),
            &[
                "types",
                "--project",
                "follow-up",
                "--language",
                "typescript",
                "--output",
                output,
            ],
        )
    };
    for output in ["link.ts", "dir.ts", "/dev/null"] {
        let out = types_to(output);
        assert_eq!(out.status.code(), Some(3), "{output}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("error[coordinator.types.write]")
                && stderr(&out).contains("not a regular file"),
            "{}",
            stderr(&out)
        );
    }
    assert!(tmp.path().join("link.ts").is_symlink());
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("target.txt")).expect("read"),
        "keep"
    );
    assert!(tmp.path().join("dir.ts").is_dir());
    assert!(
        !Path::new("/dev/null").is_file(),
        "/dev/null is still a device"
    );
    // `-` is not stdout here (stdout carries the report), nor a file named `-`.
    let out = types_to("-");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--output - is not supported"),
        "{}",
        stderr(&out)
    );
    assert!(!tmp.path().join("-").exists());
}

#[test]
fn package_into_a_missing_parent_writes_nothing() {
    let tmp = tempfile::tempdir().expect("temp dir");
    starter(tmp.path());
    let out = ctl(
        tmp.path(),
        &["package", "--project", "follow-up", "--output", "nodir/pkg"],
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(!tmp.path().join("nodir").exists());
    let leftovers: Vec<_> = std::fs::read_dir(tmp.path())
        .expect("list")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains("partial"))
        .collect();
    assert!(leftovers.is_empty());
}

#[test]
fn a_quoted_number_gets_a_fix_that_removes_the_quotes() {
    let tmp = tempfile::tempdir().expect("temp dir");
    starter(tmp.path());
    let f = tmp.path().join("follow-up/workflow.yaml");
    let src = std::fs::read_to_string(&f).expect("read");
    std::fs::write(
        &f,
        src.replacen(
            "deadlineSeconds: 2592000",
            "deadlineSeconds: \"2592000\"",
            1,
        ),
    )
    .expect("write");
    let out = ctl(tmp.path(), &["check", "--project", "follow-up"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("coordinator.yaml.wrong-type"), "{err}");
    assert!(
        err.contains("next: Write the number without quotes."),
        "{err}"
    );
    assert!(!err.contains("u64"), "{err}");
}

/// A closed standard output (a pipe whose reader went away, as with
/// `| head -1`) ends the output quietly: no panic, no message, and the
/// command's own exit code. A standard output that cannot be written for
/// another reason (a full device) is a coded refusal, exit 3.
#[test]
fn a_closed_stdout_ends_quietly_and_a_failing_one_is_refused() {
    use std::process::Stdio;
    let tmp = tempfile::tempdir().expect("temp dir");
    for args in [
        &["schema", "--kind", "project"][..],
        &["openapi"][..],
        &["init", "--directory", "follow-up"][..],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_coordinatorctl"))
            .args(args)
            .current_dir(tmp.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("coordinatorctl runs");
        // Close the read end before anything is written.
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("waits");
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(err.is_empty(), "{args:?}: {err}");
    }
    assert!(
        tmp.path().join("follow-up/workflow.yaml").is_file(),
        "init did its work"
    );
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let out = Command::new(env!("CARGO_BIN_EXE_coordinatorctl"))
        .args(["schema", "--kind", "project"])
        .stdout(full)
        .output()
        .expect("coordinatorctl runs");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("error[coordinator.command.output-closed]"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

/// The starter's `scenarios.yaml` with `from` replaced by `to` (once).
fn edit_scenarios(dir: &Path, from: &str, to: &str) {
    let f = dir.join("follow-up/scenarios.yaml");
    let src = std::fs::read_to_string(&f).expect("read");
    assert!(src.contains(from), "{from} in {src}");
    std::fs::write(&f, src.replacen(from, to, 1)).expect("write");
}

/// A case stopped by a fault of the scenario file (here a reply it never
/// uses) is counted: `5 passed, 0 failed, 1 error`, and `errors` in the
/// JSON report, never a bare exit 1 beside "5 passed, 0 failed".
#[test]
fn a_case_stopped_by_a_scenario_file_error_is_counted_as_an_error() {
    let tmp = tempfile::tempdir().expect("temp dir");
    starter(tmp.path());
    edit_scenarios(
        tmp.path(),
        "          noticeAllowed: false\n          applicantEmail: applicant@example.org\n  expect:",
        "          noticeAllowed: false\n          applicantEmail: applicant@example.org\n    notify:\n    - type: success\n      value:\n        id: never-used\n        status: accepted\n  expect:",
    );
    let out = ctl(tmp.path(), &["test", "--project", "follow-up"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.ends_with("\n5 passed, 0 failed, 1 error\n"),
        "{stdout}"
    );
    assert!(!stdout.contains("PASS permission-withdrawn"), "{stdout}");
    assert!(
        stderr(&out).contains("coordinator.scenario.unused-reply"),
        "{}",
        stderr(&out)
    );
    let out = ctl(
        tmp.path(),
        &["test", "--project", "follow-up", "--format", "json"],
    );
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        (&report["passed"], &report["failed"], &report["errors"]),
        (
            &serde_json::json!(5),
            &serde_json::json!(0),
            &serde_json::json!(1)
        ),
        "{report}"
    );
    assert_eq!(report["ok"], false, "{report}");
}

/// A reply whose whole answer the operation's output schema refuses is
/// named at the root as `/`, not as an empty pointer ("at ``").
#[test]
fn a_refused_answer_at_the_root_is_shown_at_slash() {
    let tmp = tempfile::tempdir().expect("temp dir");
    starter(tmp.path());
    edit_scenarios(
        tmp.path(),
        "      value:\n        id: 6f1c2a4e-8b7d-4c3e-9a2f-1d5e7b9c0a11\n        status: accepted\n",
        "      value: accepted\n",
    );
    let out = ctl(
        tmp.path(),
        &[
            "test",
            "--project",
            "follow-up",
            "--case",
            "notice-accepted-after-virtual-wait",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("the response of `notices-submit-message` at `/`: is not of type object"),
        "{stdout}"
    );
    assert!(!stdout.contains("at ``"), "{stdout}");
    assert!(stdout.ends_with("\n0 passed, 1 failed\n"), "{stdout}");
}
