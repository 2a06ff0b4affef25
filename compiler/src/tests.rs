//! Behaviour of `check` on whole projects: literals are decided by the
//! run-time validators (`coordinator_ir::instant` for `until`,
//! `coordinator_ir::validation` for schemas), never left unchecked.

use std::path::{Path, PathBuf};

use coordinator_source::Diagnostic;

use crate::{compile_project, compile_sources, Compiled};

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name)
}

/// The starter (examples/delayed-follow-up) with `from` replaced by `to`.
fn starter_with(from: &str, to: &str) -> (Compiled, String) {
    let dir = example("delayed-follow-up");
    let workflow = std::fs::read_to_string(dir.join("workflow.yaml")).expect("workflow.yaml");
    let functions = std::fs::read_to_string(dir.join("functions.rhai")).expect("functions.rhai");
    assert!(workflow.contains(from), "the starter has {from:?}");
    let workflow = workflow.replacen(from, to, 1);
    (
        compile_sources("fixture", &workflow, Some(&functions)),
        workflow,
    )
}

/// The 1-based line of the first line of `text` that contains `needle`.
fn line_of(text: &str, needle: &str) -> u32 {
    text.lines()
        .position(|l| l.contains(needle))
        .and_then(|i| u32::try_from(i + 1).ok())
        .expect("the needle is in the text")
}

fn codes(diags: &[Diagnostic]) -> Vec<&str> {
    diags.iter().map(|d| d.code.as_str()).collect()
}

const UNTIL_INPUT: &str = "      until:\n        type: input\n        path: /sendAfter\n";

fn until_literal(value: &str) -> String {
    format!("      until:\n        type: literal\n        value: {value}\n")
}

#[test]
fn an_until_literal_that_is_no_instant_is_refused_at_its_line_and_column() {
    // The compiler used to accept any text containing `:60`; the VM's
    // parser refuses this one, so check must too.
    let (c, text) = starter_with(UNTIL_INPUT, &until_literal("\"noon:60\""));
    assert_eq!(codes(&c.diagnostics), ["coordinator.wait-until.instant"]);
    let d = c.diagnostics.first().expect("one diagnostic");
    assert!(d.is_error());
    assert_eq!(
        (d.line, d.column),
        (line_of(&text, "type: literal"), 9),
        "{d:?}"
    );
    assert!(d.message.contains("\"noon:60\""), "{}", d.message);
    assert!(c.program.is_none());
}

#[test]
fn an_until_literal_is_read_as_the_vm_reads_it() {
    // A leap second at any minute is an instant for the VM (the next
    // minute's first instant), though the JSON Schema `date-time` format
    // accepts `:60` only at 23:59 UTC: `until` follows the VM.
    for ok in [
        "\"2026-10-09T09:00:00Z\"",
        "\"2026-10-09t11:00:00.5+02:00\"",
        "\"2026-10-09T12:30:60Z\"",
    ] {
        let (c, _) = starter_with(UNTIL_INPUT, &until_literal(ok));
        assert!(c.diagnostics.is_empty(), "{ok}: {:?}", c.diagnostics);
        assert!(c.program.is_some());
    }
    for bad in [
        "tomorrow",
        "\"2026-02-30T00:00:00Z\"",
        "\"2026-10-09T09:00:00\"",
        "42",
    ] {
        let (c, _) = starter_with(UNTIL_INPUT, &until_literal(bad));
        assert_eq!(
            codes(&c.diagnostics),
            ["coordinator.wait-until.instant"],
            "{bad}"
        );
    }
}

#[test]
fn a_literal_that_fits_a_pattern_is_proven() {
    // external.get/v1's `path` has `pattern: ^/`; the literal `/offices`
    // used to draw `coordinator.mapping.fit-unchecked`.
    let c = compile_project(&example("external-directory"), "external-directory");
    assert!(c.diagnostics.is_empty(), "{:?}", c.diagnostics);
    assert!(c.program.is_some());
}

#[test]
fn a_literal_outside_a_pattern_is_an_error_at_its_line() {
    let dir = example("external-directory");
    let workflow = std::fs::read_to_string(dir.join("workflow.yaml")).expect("workflow.yaml");
    let functions = std::fs::read_to_string(dir.join("functions.rhai")).expect("functions.rhai");
    let workflow = workflow.replacen("value: /offices", "value: offices", 1);
    let c = compile_sources("fixture", &workflow, Some(&functions));
    assert_eq!(codes(&c.diagnostics), ["coordinator.mapping.type"]);
    let d = c.diagnostics.first().expect("one diagnostic");
    assert_eq!(d.line, line_of(&workflow, "value: offices") - 1, "{d:?}");
    assert!(d.message.contains("`^/`"), "{}", d.message);
    assert!(d.message.contains("at /path"), "{}", d.message);
}

/// The starter whose outcome member `messageId` is a literal under
/// `format: email`.
fn email_outcome(value: &str) -> Compiled {
    let dir = example("delayed-follow-up");
    let workflow = std::fs::read_to_string(dir.join("workflow.yaml")).expect("workflow.yaml");
    let functions = std::fs::read_to_string(dir.join("functions.rhai")).expect("functions.rhai");
    let mapped = "          messageId:\n            type: step\n            step: notify\n            path: /id\n";
    let schema = "        messageId:\n          type: string\n";
    assert!(workflow.contains(mapped) && workflow.contains(schema));
    let workflow = workflow
        .replacen(
            mapped,
            &format!(
                "          messageId:\n            type: literal\n            value: {value}\n"
            ),
            1,
        )
        .replacen(
            schema,
            "        messageId:\n          type: string\n          format: email\n",
            1,
        );
    compile_sources("fixture", &workflow, Some(&functions))
}

#[test]
fn email_literals_are_judged_as_the_vm_judges_them() {
    // The compiler's own e-mail test (`x@y.z`) disagreed with the VM's
    // validator both ways.
    let c = email_outcome("someone@example.org");
    assert!(c.diagnostics.is_empty(), "{:?}", c.diagnostics);
    let c = email_outcome("someone@localhost");
    assert!(c.diagnostics.is_empty(), "{:?}", c.diagnostics);
    let c = email_outcome("first..last@example.org");
    assert_eq!(codes(&c.diagnostics), ["coordinator.mapping.type"]);
    let d = c.diagnostics.first().expect("one diagnostic");
    assert!(
        d.message
            .contains("expected a email string at /messageId, found \"first..last@example.org\""),
        "{}",
        d.message
    );
}

#[test]
fn unsaved_texts_take_the_place_of_the_files_on_disk() {
    let dir = example("delayed-follow-up");
    let on_disk = crate::compile_project(&dir, "p");
    assert!(on_disk.program.is_some(), "{:?}", on_disk.diagnostics);
    let workflow = std::fs::read_to_string(dir.join("workflow.yaml")).expect("workflow.yaml");
    let broken = workflow.replacen("path: /applicationId", "path: /applicationID", 1);
    let unsaved = crate::compile_project_with(&dir, "p", &|name| {
        (name == crate::WORKFLOW_FILE).then(|| broken.clone())
    });
    assert_eq!(codes(&unsaved.diagnostics), ["coordinator.mapping.path"]);
    assert!(unsaved
        .diagnostics
        .iter()
        .all(|d| d.file == "p/workflow.yaml"));
    // An unsaved functions.rhai is read from memory too, with the file's limits.
    let too_big = crate::compile_project_with(&dir, "p", &|name| {
        (name == crate::FUNCTIONS_FILE).then(|| "x".repeat(1 << 20))
    });
    assert_eq!(codes(&too_big.diagnostics), ["coordinator.file.too-large"]);
    let same = crate::compile_project_with(&dir, "p", &|name| {
        (name == crate::WORKFLOW_FILE).then(|| format!("\u{feff}{workflow}"))
    });
    assert_eq!(same.revision(), on_disk.revision());
}

/// The typed-reading fault of the starter with `from` replaced by `to`,
/// and the code `check` gives it.
fn typed_fault_of(from: &str, to: &str) -> (coordinator_source::yaml::TypedErrorKind, String) {
    let (c, workflow) = starter_with(from, to);
    let doc = coordinator_source::parse("workflow.yaml", &workflow).expect("still YAML");
    let fault = coordinator_source::yaml::read_typed::<crate::ast::ProjectFile>(doc.value)
        .expect_err("the change is a typed-reading fault");
    assert_eq!(c.diagnostics.len(), 1, "{:?}", c.diagnostics);
    let code = c
        .diagnostics
        .first()
        .map(|d| d.code.clone())
        .unwrap_or_default();
    (fault.error.kind().clone(), code)
}

#[test]
fn workflow_yaml_typed_faults_take_their_code_from_the_kind_serde_reported() {
    use coordinator_source::yaml::{Found, TypedErrorKind, Wants};
    // Each fault is inside a step, so it passes through the step's
    // two-phase read (`read_nested`) with its kind, not as a sentence.
    let (kind, code) = typed_fault_of(
        "      operation: applications-read-record\n",
        "      operation: applications-read-record\n      retries: 3\n",
    );
    assert!(
        matches!(&kind, TypedErrorKind::UnknownKey { key, .. } if key == "retries"),
        "{kind:?}"
    );
    assert_eq!(code, "coordinator.yaml.unknown-key");

    let (kind, code) = typed_fault_of("      outcome: no-current-permission\n", "");
    assert_eq!(
        kind,
        TypedErrorKind::MissingKey {
            key: "outcome".to_owned()
        }
    );
    assert_eq!(code, "coordinator.yaml.missing-key");

    let (kind, code) = typed_fault_of("      next: permission\n", "      next: 7\n");
    assert_eq!(
        kind,
        TypedErrorKind::WrongType {
            found: Found::Other,
            wants: Wants::String
        }
    );
    assert_eq!(code, "coordinator.yaml.wrong-type");

    let (kind, code) = typed_fault_of(
        "      type: finish\n      outcome: no-current-permission\n",
        "      type: halt\n      outcome: no-current-permission\n",
    );
    assert!(
        matches!(&kind, TypedErrorKind::UnknownValue { value, expected }
            if value == "halt" && expected.starts_with("one of call, choose")),
        "{kind:?}"
    );
    assert_eq!(code, "coordinator.yaml.unknown-value");
}
