//! `check --format rich`: seed 004's misspelling drawn with its source line
//! and a mark under the path; without `--format` and off a terminal, the
//! text form of seed 004 (its block is checked byte for byte in `seed004`).

use std::path::Path;

use crate::ctl;

fn misspelt(dir: &Path) {
    assert!(ctl(dir, &["init", "--directory", "follow-up"])
        .status
        .success());
    let file = dir.join("follow-up/workflow.yaml");
    let text = std::fs::read_to_string(&file).expect("read");
    let broken = text.replacen("path: /applicationId", "path: /applicationID", 1);
    std::fs::write(&file, broken).expect("write");
}

#[test]
fn check_rich_marks_the_misspelt_path_under_its_source_line() {
    let tmp = tempfile::tempdir().expect("temp dir");
    misspelt(tmp.path());
    let out = ctl(
        tmp.path(),
        &["check", "--project", "follow-up", "--format", "rich"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).expect("UTF-8");
    // Not a terminal: no colour.
    assert!(!err.contains('\u{1b}'), "{err:?}");
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines[0].starts_with("[coordinator.mapping.path] Error: expected a path that the workflow input schema declares; it declares nothing at /applicationID"),
        "{err}"
    );
    assert!(err.contains("follow-up/workflow.yaml:"), "{err}");
    let source = lines
        .iter()
        .position(|l| l.ends_with("│             path: /applicationID"))
        .expect("the source line");
    // The mark stands under `/applicationID`, all of it.
    let mark_line = lines[source + 1];
    let column = lines[source].find("/applicationID").expect("path");
    let marked: String = mark_line
        .chars()
        .skip(lines[source][..column].chars().count())
        .take(14)
        .collect();
    assert!(marked.chars().all(|c| "─┬".contains(c)), "{mark_line:?}");
    assert!(
        err.contains("/workflow/steps/read-application/input/fields/recordId/path"),
        "{err}"
    );
    assert!(
        err.contains("Help: Correct the path to a member the workflow input schema declares"),
        "{err}"
    );
    assert_eq!(lines.last(), Some(&"1 error, 0 warnings in 1 file"));

    // The default off a terminal is the seed's text form, whatever NO_COLOR says.
    for no_color in [None, Some("1")] {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_coordinatorctl"));
        cmd.args(["check", "--project", "follow-up"])
            .current_dir(tmp.path());
        if let Some(v) = no_color {
            cmd.env("NO_COLOR", v);
        }
        let out = cmd.output().expect("runs");
        let err = String::from_utf8(out.stderr).expect("UTF-8");
        assert!(
            err.starts_with("error[coordinator.mapping.path] follow-up/workflow.yaml:"),
            "{err}"
        );
    }
}

#[test]
fn check_rich_falls_back_to_the_text_form_without_a_source() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let out = ctl(
        tmp.path(),
        &["check", "--project", "missing", "--format", "rich"],
    );
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8(out.stderr).expect("UTF-8");
    assert!(
        err.starts_with("error[coordinator.file.unreadable] missing/workflow.yaml\n"),
        "{err}"
    );
    assert!(err.ends_with("1 error, 0 warnings in 1 file\n"), "{err}");
}
