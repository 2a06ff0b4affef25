//! `convert --from v1alpha1` through the real binary (docs/convert.md): the
//! JSON report of a project that needs a person (written, exit 0, each item
//! located, `test` on NEW refused only at those items), the text form of a
//! project whose cases pass, and the refusals (NEW not empty, OLD not of
//! the v1alpha1 format) that write nothing.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::ctl;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../cli/tests/fixtures/v1alpha1")
        .join(name)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("UTF-8 output")
}

fn convert(dir: &Path, old: &Path, new: &str, json: bool) -> std::process::Output {
    let old = old.to_str().expect("UTF-8 path");
    let mut args = vec![
        "convert",
        "--from",
        "v1alpha1",
        "--project",
        old,
        "--output",
        new,
    ];
    if json {
        args.extend(["--format", "json"]);
    }
    ctl(dir, &args)
}

#[test]
fn items_for_a_person_are_data_and_the_project_is_written_all_the_same() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let out = convert(tmp.path(), &fixture("needs-a-person"), "new", true);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).expect("one JSON report");
    assert_eq!(report["command"], "convert");
    assert_eq!(report["ok"], true);
    let items = report["diagnostics"].as_array().expect("diagnostics");
    let bearer = items
        .iter()
        .find(|d| d["code"] == "coordinator.convert.decision-bearer")
        .expect("the bearer token is listed");
    assert_eq!(
        (bearer["line"].as_u64(), bearer["column"].as_u64()),
        (Some(35), Some(9))
    );
    assert!(bearer["file"]
        .as_str()
        .expect("file")
        .ends_with("needs-a-person/runtime.yaml"));
    assert!(!bearer["next"].as_str().expect("next").is_empty());
    assert!(items.iter().all(|d| d["severity"] == "warning"));
    let refused: Vec<&str> = report["test"]["diagnostics"]
        .as_array()
        .expect("test diagnostics")
        .iter()
        .filter_map(|d| d["pointer"].as_str())
        .collect();
    assert_eq!(
        refused,
        [
            "/operations/calendar-read-scheduling/uses",
            "/operations/cases-invoke-breg-action"
        ]
    );
    for file in [
        "workflow.yaml",
        "functions.rhai",
        "scenarios.yaml",
        "runtime.yaml",
    ] {
        assert!(tmp.path().join("new").join(file).is_file(), "{file}");
    }
}

#[test]
fn a_converted_project_passes_test_and_names_the_rules_it_applied() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let out = convert(tmp.path(), &fixture("permit-reminder"), "new", false);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("rule receipt-expired-first "), "{stdout}");
    assert!(
        stdout.contains("scenarios.yaml:59:7 /cases/3/replies/send_reminder/0"),
        "{stdout}"
    );
    assert!(stdout.contains("5 passed, 0 failed"), "{stdout}");
    let again = ctl(tmp.path(), &["test", "--project", "new"]);
    assert!(again.status.success(), "{}", text(&again.stdout));
    let check = ctl(tmp.path(), &["check", "--project", "new"]);
    assert!(check.status.success(), "{}", text(&check.stderr));
}

#[test]
fn refusals_write_nothing() {
    let tmp = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir(tmp.path().join("taken")).expect("dir");
    std::fs::write(tmp.path().join("taken/notes.txt"), "mine").expect("file");
    let out = convert(tmp.path(), &fixture("office-lookup"), "taken", false);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("coordinator.convert.output-exists"));
    let entries = std::fs::read_dir(tmp.path().join("taken"))
        .expect("list")
        .count();
    assert_eq!(entries, 1, "nothing was written into the taken directory");
    let this_format = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/delayed-follow-up");
    let out = convert(tmp.path(), &this_format, "fresh", false);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("coordinator.convert.not-v1alpha1"));
    assert!(!tmp.path().join("fresh").exists());
}
