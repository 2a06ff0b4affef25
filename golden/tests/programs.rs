//! Compiled Programs and explain output of the example projects, pinned
//! revisions, revision invariance, and robustness against malformed input.

use std::path::{Path, PathBuf};

use coordinator_compiler::{compile_project, compile_sources, Compiled};
use coordinator_source::diagnostic;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn starter_dir() -> PathBuf {
    workspace().join("examples/delayed-follow-up")
}

fn starter() -> (String, String) {
    let d = starter_dir();
    (
        std::fs::read_to_string(d.join("workflow.yaml")).expect("workflow"),
        std::fs::read_to_string(d.join("functions.rhai")).expect("functions"),
    )
}

fn listing(dir: &Path, display: &str) -> (Compiled, String) {
    let c = compile_project(dir, display);
    let mut out = String::new();
    out.push_str(&diagnostic::render_text(&c.diagnostics));
    let program = c.program.as_ref().expect("the project compiles");
    program.validate().expect("the Program is well formed");
    out.push_str(&format!("revision {}\n", program.revision()));
    out.push_str("--- explain\n");
    out.push_str(c.explain.as_deref().unwrap_or_default());
    out.push_str("--- program\n");
    out.push_str(&coordinator_ir::disasm::disassemble(program));
    (c, out)
}

/// The starter's revision, pinned: any change to the compiler's output or the
/// encoding shows here.
const STARTER_REVISION: &str =
    "sha256:8331087d073e33706125edccec6da8736df6cec060cfee5e0d7064b6db9d06c7";

#[test]
fn starter_program_and_explain() {
    let (c, out) = listing(&starter_dir(), "follow-up");
    assert!(c.diagnostics.is_empty(), "{:?}", c.diagnostics);
    assert_eq!(c.revision().as_deref(), Some(STARTER_REVISION));
    insta::assert_snapshot!("starter", out);
}

#[test]
fn starter_explain_matches_seed_004() {
    let c = compile_project(&starter_dir(), "follow-up");
    assert_eq!(
        c.explain.as_deref(),
        Some(
            "Steps from start:
  due: wait until input /sendAfter, then read-application
  read-application: call applications applications-read-record (breg read, recovery read-again) with {collection: \"applications\", recordId: input /applicationId}, then permission
  permission: choose by notice-route(): send -> notify, skip -> skipped
  notify: call notices notices-submit-message (messaging mutation, recovery same-command-and-receipt) with notice-request(), then accepted
  skipped: finish no-current-permission
  accepted: finish message-accepted with {messageId: step notify /id}
"
        )
    );
}

#[test]
fn seed_004_misspelt_path() {
    let (wf, rhai) = starter();
    let wf = wf.replace("path: /applicationId", "path: /applicationID");
    let c = compile_sources("follow-up", &wf, Some(&rhai));
    let line = wf
        .lines()
        .position(|l| l.contains("/applicationID"))
        .expect("edited line")
        + 1;
    let col = wf
        .lines()
        .nth(line - 1)
        .and_then(|l| l.find('/'))
        .expect("column")
        + 1;
    assert_eq!(
        format!(
            "{}{}\n",
            diagnostic::render_text(&c.diagnostics),
            diagnostic::summary_line(&c.diagnostics)
        ),
        format!(
            "error[coordinator.mapping.path] follow-up/workflow.yaml:{line}:{col} /workflow/steps/read-application/input/fields/recordId/path
  expected a path that the workflow input schema declares; it declares nothing at /applicationID
  next: Correct the path to a member the workflow input schema declares, or omit path to use the whole value.
1 error, 0 warnings in 1 file
"
        )
    );
    assert!(c.program.is_none());
}

#[test]
fn review_program_and_explain() {
    let (_, out) = listing(&workspace().join("golden/projects/review"), "review");
    insta::assert_snapshot!("review", out);
}

#[test]
fn governed_action_program_and_explain() {
    let (_, out) = listing(
        &workspace().join("golden/projects/governed-action"),
        "governed-action",
    );
    insta::assert_snapshot!("governed-action", out);
}

fn revision_of(wf: &str, rhai: &str) -> String {
    let c = compile_sources("p", wf, Some(rhai));
    assert!(!c.has_errors(), "{:?}", c.diagnostics);
    c.revision().expect("revision")
}

fn edit(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "fixture edit: {from:?} not found");
    text.replacen(from, to, 1)
}

#[test]
fn same_project_same_digest() {
    let (wf, rhai) = starter();
    assert_eq!(revision_of(&wf, &rhai), revision_of(&wf, &rhai));
    assert_eq!(revision_of(&wf, &rhai), STARTER_REVISION);
}

#[test]
fn presentation_does_not_move_the_revision() {
    let (wf, rhai) = starter();
    let base = revision_of(&wf, &rhai);
    let edits: Vec<(&str, String)> = vec![
        ("title", edit(&wf, "title: Delayed follow-up", "title: Something else")),
        ("description", edit(&wf, "only if the record still allows one.", "only if allowed.")),
        ("version", edit(&wf, "version: \"1\"", "version: \"7.2\"")),
        ("comments", format!("# a comment\n{}", edit(&wf, "  start: due\n", "  start: due # the first step\n"))),
        (
            "schema annotations",
            edit(
                &wf,
                "      applicationId:\n        type: string\n",
                "      applicationId:\n        description: The application.\n        title: Id\n        type: string\n",
            ),
        ),
        (
            "required order",
            edit(&wf, "    - applicationId\n    - sendAfter\n", "    - sendAfter\n    - applicationId\n"),
        ),
        (
            "key order of a mapping",
            edit(
                &wf,
                "          collection:\n            type: literal\n            value: applications\n          recordId:\n            type: input\n            path: /applicationId\n",
                "          recordId:\n            path: /applicationId\n            type: input\n          collection:\n            value: applications\n            type: literal\n",
            ),
        ),
        (
            "step order",
            edit(
                &wf,
                "    skipped:\n      type: finish\n      outcome: no-current-permission\n",
                "",
            )
            .replace(
                "  outcomes:\n",
                "    skipped:\n      type: finish\n      outcome: no-current-permission\n  outcomes:\n",
            ),
        ),
        (
            "case order",
            edit(&wf, "        send: notify\n        skip: skipped\n", "        skip: skipped\n        send: notify\n"),
        ),
        (
            "flow style",
            edit(
                &wf,
                "    skipped:\n      type: finish\n      outcome: no-current-permission\n",
                "    skipped: {type: finish, outcome: no-current-permission}\n",
            ),
        ),
        (
            "operations order",
            edit(
                &wf,
                "  applications-read-record:\n    uses: breg.read-record/v1\n    connection: applications\n  notices-submit-message:\n    uses: messaging.submit-message/v1\n    connection: notices\n",
                "  notices-submit-message:\n    connection: notices\n    uses: messaging.submit-message/v1\n  applications-read-record:\n    uses: breg.read-record/v1\n    connection: applications\n",
            ),
        ),
    ];
    for (what, text) in edits {
        assert_eq!(revision_of(&text, &rhai), base, "{what} moved the revision");
    }
    assert_eq!(
        revision_of(&wf, &rhai.replace('\n', "\r\n")),
        base,
        "CRLF moved it"
    );
}

#[test]
fn execution_changes_move_the_revision() {
    let (wf, rhai) = starter();
    let base = revision_of(&wf, &rhai);
    let changes: Vec<(&str, String, String)> = vec![
        (
            "step",
            edit(&wf, "        skip: skipped\n", "        skip: skipped\n")
                .replace("deadlineSeconds: 2592000", "deadlineSeconds: 2592001"),
            rhai.clone(),
        ),
        (
            "mapping",
            edit(&wf, "value: applications", "value: applicants"),
            rhai.clone(),
        ),
        (
            "schema",
            edit(&wf, "maxLength: 512", "maxLength: 511"),
            rhai.clone(),
        ),
        (
            "operation connection",
            edit(&wf, "connection: notices", "connection: messages"),
            rhai.clone(),
        ),
        (
            "step name",
            edit(&wf, "    skipped:\n", "    skip-it:\n").replace("skip: skipped", "skip: skip-it"),
            rhai.clone(),
        ),
        (
            "function source",
            wf.clone(),
            format!("// another comment\n{rhai}"),
        ),
        (
            "project id",
            edit(&wf, "id: follow-up", "id: follow-up-2"),
            rhai.clone(),
        ),
    ];
    for (what, text, src) in changes {
        assert_ne!(
            revision_of(&text, &src),
            base,
            "{what} did not move the revision"
        );
    }
}

fn one_located(c: &Compiled, code: &str) {
    assert_eq!(c.diagnostics.len(), 1, "{:?}", c.diagnostics);
    let d = c.diagnostics.first().expect("one");
    assert_eq!(d.code, code, "{d:?}");
    assert!(d.line >= 1 && d.column >= 1, "{d:?}");
    assert!(c.program.is_none());
}

#[test]
fn malformed_input_gives_one_located_diagnostic() {
    let (wf, rhai) = starter();
    let cases: Vec<(&str, String)> = vec![
        ("coordinator.yaml.syntax", "apiVersion: [\n".into()),
        (
            "coordinator.yaml.duplicate-key",
            edit(&wf, "  start: due\n", "  start: due\n  start: due\n"),
        ),
        (
            "coordinator.yaml.unknown-key",
            edit(
                &wf,
                "      next: permission\n",
                "      next: permission\n      retries: 2\n",
            ),
        ),
        (
            "coordinator.yaml.wrong-type",
            edit(&wf, "deadlineSeconds: 2592000", "deadlineSeconds: soon"),
        ),
        (
            "coordinator.yaml.too-deep",
            format!("{}{}", "[".repeat(200), "]".repeat(200)),
        ),
        (
            "coordinator.file.too-large",
            format!("{wf}#{}\n", "x".repeat(2 * 1024 * 1024)),
        ),
        ("coordinator.project.header", "".into()),
    ];
    for (code, text) in cases {
        one_located(&compile_sources("p", &text, Some(&rhai)), code);
    }
}

#[test]
fn binary_and_missing_files() {
    let dir = std::env::temp_dir().join(format!("coordinator-golden-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(dir.join("workflow.yaml"), [0u8, 159, 146, 150, 0, 1, 2]).expect("write");
    let c = compile_project(&dir, "bin");
    one_located(&c, "coordinator.file.encoding");
    std::fs::write(dir.join("workflow.yaml"), vec![b'#'; 2 * 1024 * 1024]).expect("write");
    one_located(&compile_project(&dir, "big"), "coordinator.file.too-large");
    let c = compile_project(&dir.join("nope"), "nope");
    assert_eq!(c.diagnostics.len(), 1);
    assert_eq!(
        c.diagnostics.first().map(|d| d.code.as_str()),
        Some("coordinator.file.unreadable")
    );
    // A project whose functions.rhai is missing: unreadable (exit 3).
    let (wf, _) = starter();
    std::fs::write(dir.join("workflow.yaml"), wf).expect("write");
    let c = compile_project(&dir, "nofn");
    assert!(c
        .diagnostics
        .iter()
        .any(|d| d.code == "coordinator.file.unreadable" && d.file == "nofn/functions.rhai"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn independent_errors_are_all_reported_in_position_order() {
    let (wf, rhai) = starter();
    let wf = edit(&wf, "path: /applicationId", "path: /applicationID");
    let wf = edit(&wf, "entrypoint: notice_route", "entrypoint: notice_routes");
    let wf = edit(
        &wf,
        "  notice-route:\n    type: string\n",
        "  notice-route:\n    type: string\n    propertes: {}\n",
    );
    let c = compile_sources("p", &wf, Some(&rhai));
    let codes: Vec<&str> = c.diagnostics.iter().map(|d| d.code.as_str()).collect();
    assert_eq!(
        codes,
        vec![
            "coordinator.schema.unknown-keyword",
            "coordinator.function.entrypoint",
            "coordinator.mapping.path"
        ]
    );
}

#[test]
fn project_schema_is_generated() {
    let s = coordinator_compiler::project_schema();
    assert_eq!(
        s.get("$id").and_then(|v| v.as_str()),
        Some(
            "https://id.registrystack.org/schemas/coordinator/project/project.v1beta1.schema.json"
        )
    );
    assert!(s.get("$schema").is_some());
    assert!(s.pointer("/properties/workflow").is_some());
}
