//! `convert` on the v1alpha1 fixtures under `cli/tests/fixtures/v1alpha1/`
//! (written for these tests): the regular shapes convert to projects whose
//! cases pass; what needs a person is listed at its place.

use std::path::{Path, PathBuf};

use super::{convert_project, test_new, write, Converted};
use crate::codes;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/v1alpha1")
        .join(name)
}

/// Converts fixture `name` into a new directory; NEW's path and the result.
fn convert_fixture(name: &str) -> (tempfile::TempDir, PathBuf, Converted) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let new = dir.path().join(name);
    let converted = convert_project(&fixture(name)).expect("the fixture converts");
    write::write_whole(&new, &converted.files).expect("NEW is written");
    (dir, new, converted)
}

fn rules_of(converted: &Converted) -> Vec<&'static str> {
    converted.findings.rules.iter().map(|r| r.rule).collect()
}

#[test]
fn regular_shapes_convert_to_a_project_whose_cases_all_pass() {
    let (_dir, new, converted) = convert_fixture("permit-reminder");
    assert!(
        converted.findings.people.is_empty(),
        "{:?}",
        converted.findings.people
    );
    let rules = rules_of(&converted);
    for rule in [
        "input-schema-to-type",
        "connection-operation-to-alias",
        "positional-arguments-named",
        "wait-until-key",
        "choose-key",
        "output-key",
        "name-without-underscore",
        "read-record-answer",
        "receipt-expired-first",
        "deadline-exceeded-to-expired",
        "connection-product-to-type",
    ] {
        assert!(rules.contains(&rule), "{rule} not applied: {rules:?}");
    }
    let summary = test_new(&new, &converted);
    assert!(summary.diagnostics.is_empty(), "{:?}", summary.diagnostics);
    assert_eq!((summary.passed, summary.failed, summary.errors), (5, 0, 0));
    let workflow = std::fs::read_to_string(new.join("workflow.yaml")).expect("workflow.yaml");
    assert!(workflow.contains("uses: breg.read-record/v1"), "{workflow}");
    assert!(workflow.contains("typeRef: workflow-input"), "{workflow}");
    assert!(!workflow.contains("wait_for_reminder"), "{workflow}");
}

#[test]
fn a_rule_is_located_in_old() {
    let (_dir, _new, converted) = convert_fixture("permit-reminder");
    let rule = converted
        .findings
        .rules
        .iter()
        .find(|r| r.rule == "deadline-exceeded-to-expired")
        .expect("the deadline rule");
    assert!(
        rule.file.ends_with("permit-reminder/scenarios.yaml"),
        "{rule:?}"
    );
    assert_eq!((rule.line, rule.column), (69, 12), "{rule:?}");
    assert_eq!(rule.pointer, "/cases/4/expect/state");
    let receipt = converted
        .findings
        .rules
        .iter()
        .find(|r| r.rule == "receipt-expired-first")
        .expect("the receipt rule");
    assert_eq!((receipt.line, receipt.column), (59, 7), "{receipt:?}");
}

#[test]
fn a_relative_external_path_is_reshaped_by_a_wrapper() {
    let (_dir, new, converted) = convert_fixture("office-lookup");
    assert!(
        converted.findings.people.is_empty(),
        "{:?}",
        converted.findings.people
    );
    let rules = rules_of(&converted);
    assert!(rules.contains(&"wrapper-path-slash"), "{rules:?}");
    assert!(rules.contains(&"response-schema-to-type"), "{rules:?}");
    assert!(rules.contains(&"external-http-connection"), "{rules:?}");
    let functions = std::fs::read_to_string(new.join("functions.rhai")).expect("functions.rhai");
    assert!(
        functions.contains("fn ask_request_path(input)"),
        "{functions}"
    );
    let runtime = std::fs::read_to_string(new.join("runtime.yaml")).expect("runtime.yaml");
    assert!(runtime.contains("- /service-points"), "{runtime}");
    let summary = test_new(&new, &converted);
    assert_eq!(
        (summary.passed, summary.failed),
        (2, 0),
        "{:?}",
        summary.diagnostics
    );
}

#[test]
fn items_for_a_person_are_listed_where_they_are_and_check_refuses_only_there() {
    let (_dir, new, converted) = convert_fixture("needs-a-person");
    let people: Vec<(String, String, u32, u32)> = converted
        .findings
        .people
        .iter()
        .map(|d| {
            let file = Path::new(&d.file)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default();
            (d.code.clone(), file, d.line, d.column)
        })
        .collect();
    let expected = [
        (codes::CONVERT_TASK_AUTHORITY, "runtime.yaml", 26, 9),
        (codes::CONVERT_DECISION_BEARER, "runtime.yaml", 35, 9),
        (codes::CONVERT_RUNTIME_SECTION, "runtime.yaml", 37, 3),
        (codes::CONVERT_REQUEST_SHAPE, "functions.rhai", 2, 1),
        (codes::CONVERT_OPERATION_MISSING, "workflow.yaml", 34, 16),
        (codes::CONVERT_BREG_ACTION, "workflow.yaml", 40, 16),
        (codes::CONVERT_REQUEST_SHAPE, "functions.rhai", 19, 1),
    ];
    let expected: Vec<(String, String, u32, u32)> = expected
        .iter()
        .map(|(c, f, l, k)| ((*c).to_owned(), (*f).to_owned(), *l, *k))
        .collect();
    assert_eq!(people, expected);
    assert!(converted
        .findings
        .people
        .iter()
        .all(|d| !d.next.is_empty() && d.message.contains('`')));
    let evaluation = converted
        .findings
        .rules
        .iter()
        .find(|r| r.rule == "evaluation-answer")
        .expect("the evaluation answer rule");
    assert_eq!(evaluation.pointer, "/cases/1/replies/screen/0");
    assert_eq!(
        (evaluation.line, evaluation.column),
        (20, 7),
        "{evaluation:?}"
    );
    let scenarios = std::fs::read_to_string(new.join("scenarios.yaml")).expect("scenarios.yaml");
    assert!(
        scenarios.contains("model: screening-2027-01"),
        "{scenarios}"
    );
    assert!(
        !scenarios.contains("returnedModel") && !scenarios.contains("protocol"),
        "{scenarios}"
    );
    assert!(scenarios.contains("usage: {}"), "{scenarios}");
    let summary = test_new(&new, &converted);
    let refused: Vec<(&str, &str)> = summary
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| (d.code.as_str(), d.pointer.as_str()))
        .collect();
    assert_eq!(
        refused,
        [
            (
                "coordinator.operation.unknown",
                "/operations/calendar-read-scheduling/uses"
            ),
            (
                "coordinator.operation.action-required",
                "/operations/cases-invoke-breg-action"
            ),
        ]
    );
    let runtime = std::fs::read_to_string(new.join("runtime.yaml")).expect("runtime.yaml");
    assert!(
        !runtime.contains("bearer")
            && !runtime.contains("taskAuthority")
            && !runtime.contains("deployment"),
        "{runtime}"
    );
}

#[test]
fn a_non_empty_output_is_refused_and_an_empty_one_is_filled() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let taken = dir.path().join("taken");
    std::fs::create_dir(&taken).expect("dir");
    std::fs::write(taken.join("keep.txt"), "mine").expect("file");
    let (code, diagnostics) = write::refuse_existing(&taken).expect_err("refused");
    assert_eq!(code, crate::report::EXIT_REFUSED);
    assert_eq!(diagnostics[0].code, codes::CONVERT_OUTPUT_EXISTS);
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").expect("file");
    assert!(write::refuse_existing(&file).is_err());
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("dir");
    write::refuse_existing(&empty).expect("an empty directory is accepted");
    let converted = convert_project(&fixture("office-lookup")).expect("converts");
    write::write_whole(&empty, &converted.files).expect("written into the empty directory");
    assert!(empty.join("scenarios.yaml").is_file());
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .expect("list")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
        .collect();
    assert!(left.is_empty(), "a staging directory was left behind");
}

#[test]
fn a_project_of_this_format_is_not_converted() {
    let this_format = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/delayed-follow-up");
    let Err((code, diagnostics)) = convert_project(&this_format) else {
        panic!("a v1beta1 project converted");
    };
    assert_eq!(code, crate::report::EXIT_REFUSED);
    assert_eq!(diagnostics[0].code, codes::CONVERT_NOT_V1ALPHA1);
    assert_eq!(diagnostics[0].pointer, "/apiVersion");
}

#[test]
fn a_failing_case_is_pointed_at_the_function_to_edit() {
    let (_dir, new, converted) = convert_fixture("permit-reminder");
    let functions = new.join("functions.rhai");
    let text = std::fs::read_to_string(&functions).expect("functions.rhai");
    let broken = text.replace(
        "#{ reminderId: receipt.id }",
        "#{ reminderId: receipt.missing }",
    );
    assert_ne!(broken, text);
    std::fs::write(&functions, broken).expect("write");
    let summary = test_new(&new, &converted);
    let failed = summary
        .cases
        .iter()
        .find(|c| c.id == "reminder-sent")
        .expect("the case");
    assert!(!failed.passed);
    let edit = failed.edit.as_ref().expect("a Function to edit");
    assert_eq!(
        (
            edit.step.as_str(),
            edit.function.as_str(),
            edit.entrypoint.as_str()
        ),
        ("reminded", "sent-result", "sent_result")
    );
    let untouched = summary
        .cases
        .iter()
        .find(|c| c.id == "already-renewed")
        .expect("case");
    assert!(untouched.passed && untouched.edit.is_none());
}

#[test]
fn two_steps_named_alike_once_underscores_go_are_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let old = dir.path().join("old");
    std::fs::create_dir(&old).expect("dir");
    for entry in std::fs::read_dir(fixture("permit-reminder")).expect("fixture") {
        let path = entry.expect("entry").path();
        let name = path.file_name().expect("name").to_owned();
        std::fs::copy(&path, old.join(name)).expect("copy");
    }
    // A second step `read-permit` beside `read_permit`.
    let workflow = old.join("workflow.yaml");
    let text = std::fs::read_to_string(&workflow).expect("workflow.yaml");
    let text = text.replacen(
        "\n  read_permit:\n",
        "\n  read-permit:\n    type: finish\n    outcome: nothing-to-remind\n  read_permit:\n",
        1,
    );
    std::fs::write(&workflow, text).expect("write");
    let Err((code, diagnostics)) = convert_project(&old) else {
        panic!("two steps named alike converted");
    };
    assert_eq!(code, crate::report::EXIT_REFUSED);
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert_eq!(diagnostics[0].code, codes::CONVERT_NAME_COLLISION);
    assert!(
        diagnostics[0].pointer.starts_with("/steps/read"),
        "{diagnostics:?}"
    );
    assert!(
        diagnostics[0].message.contains("`read-permit`"),
        "{diagnostics:?}"
    );
}

#[test]
fn a_functions_file_outside_the_project_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let old = dir.path().join("old");
    std::fs::create_dir(&old).expect("dir");
    for entry in std::fs::read_dir(fixture("permit-reminder")).expect("fixture") {
        let path = entry.expect("entry").path();
        let name = path.file_name().expect("name").to_owned();
        std::fs::copy(&path, old.join(name)).expect("copy");
    }
    let workflow = old.join("workflow.yaml");
    let text = std::fs::read_to_string(&workflow).expect("workflow.yaml");
    for outside in ["../functions.rhai", "/etc/passwd", "sub/functions.rhai"] {
        let changed = text.replacen(
            "functionsFile: functions.rhai",
            &format!("functionsFile: {outside}"),
            1,
        );
        std::fs::write(&workflow, changed).expect("write");
        let Err((code, diagnostics)) = convert_project(&old) else {
            panic!("{outside} was read");
        };
        assert_eq!(code, crate::report::EXIT_REFUSED);
        assert_eq!(
            diagnostics[0].code,
            codes::CONVERT_FUNCTIONS_FILE,
            "{outside}"
        );
        assert_eq!(diagnostics[0].pointer, "/functionsFile");
    }
}
