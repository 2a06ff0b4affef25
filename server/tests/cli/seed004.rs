//! Seed 004 ("Author a Coordinator workflow"), run verbatim against the built
//! `coordinatorctl`: every `text test-expect` block must match exactly
//! (`<digest>` stands for 64 lowercase hex digits, `<file>` for
//! `FILE:LINE:COLUMN`). Also the schema copies under `docs/schemas/`.

use std::path::Path;

use crate::ctl;

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("UTF-8 output")
}

/// Checks `actual` against a seed block, where `<digest>` matches 64 hex
/// digits and `<file>` a `path:line:column`.
fn assert_matches(actual: &str, expected: &str) {
    let actual: Vec<&str> = actual.lines().collect();
    let expected: Vec<&str> = expected.lines().collect();
    assert_eq!(
        actual.len(),
        expected.len(),
        "line count\n{actual:#?}\nvs\n{expected:#?}"
    );
    for (a, e) in actual.iter().zip(&expected) {
        if let Some((head, _)) = e.split_once("sha256:<digest>") {
            assert!(a.starts_with(&format!("{head}sha256:")), "{a:?} vs {e:?}");
            let hex = &a[head.len() + "sha256:".len()..];
            assert_eq!(hex.len(), 64, "{a}");
            assert!(
                hex.bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
                "{a}"
            );
        } else if let Some((head, tail)) = e.split_once("<file>") {
            assert!(a.starts_with(head) && a.ends_with(tail), "{a:?} vs {e:?}");
            let place = &a[head.len()..a.len() - tail.len()];
            let mut parts = place.rsplitn(3, ':');
            let col: u32 = parts.next().and_then(|c| c.parse().ok()).expect("column");
            let line: u32 = parts.next().and_then(|l| l.parse().ok()).expect("line");
            assert!(col > 0 && line > 0);
            assert_eq!(parts.next(), Some("follow-up/workflow.yaml"));
        } else {
            assert_eq!(a, e);
        }
    }
}

#[test]
fn seed_004_author_journey() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();

    let out = ctl(dir, &["init", "--directory", "follow-up"]);
    assert!(out.status.success());
    assert_matches(
        &text(&out.stdout),
        "created: follow-up\n  workflow.yaml\n  functions.rhai\n  runtime.yaml\n  scenarios.yaml\n  .gitignore\nnext: coordinatorctl test --project follow-up\n",
    );

    let out = ctl(dir, &["test", "--project", "follow-up"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_matches(
        &text(&out.stdout),
        "PASS notice-accepted-after-virtual-wait\nPASS permission-withdrawn\nPASS same-command-after-response-loss\nPASS read-only-reconciliation-after-response-loss\nPASS expired-receipt-does-not-prove-no-effect\nPASS refusal-after-unknown-preserves-unknown\n6 passed, 0 failed\n",
    );

    let out = ctl(dir, &["explain", "--project", "follow-up"]);
    assert!(out.status.success());
    let explain = text(&out.stdout);
    for line in [
        "Steps from start:",
        "  due: wait until input /sendAfter, then read-application",
        "  read-application: call applications applications-read-record (breg read, recovery read-again) with {collection: \"applications\", recordId: input /applicationId}, then permission",
        "  permission: choose by notice-route(): send -> notify, skip -> skipped",
        "  notify: call notices notices-submit-message (messaging mutation, recovery same-command-and-receipt) with notice-request(), then accepted",
        "  skipped: finish no-current-permission",
        "  accepted: finish message-accepted with {messageId: step notify /id}",
    ] {
        assert!(explain.lines().any(|l| l == line), "missing {line:?} in\n{explain}");
    }

    // The seed's excerpts of workflow.yaml are in the starter (indentation aside).
    let workflow = std::fs::read_to_string(dir.join("follow-up/workflow.yaml")).expect("read");
    let flat: Vec<&str> = workflow.lines().map(str::trim).collect();
    for excerpt in [
        "operations:\napplications-read-record:\nuses: breg.read-record/v1\nconnection: applications\nnotices-submit-message:\nuses: messaging.submit-message/v1\nconnection: notices",
        "read-application:\ntype: call\noperation: applications-read-record\ninput:\ntype: fields\nfields:\ncollection:\ntype: literal\nvalue: applications\nrecordId:\ntype: input\npath: /applicationId\nnext: permission",
        "notice-request:\nruntime: rhai\nsource: functions.rhai\nentrypoint: notice_request\ninputs:\ninput:\ntypeRef: workflow-input\nrecord:\noperationOutput: applications-read-record\noutput:\noperationInput: notices-submit-message",
    ] {
        let want: Vec<&str> = excerpt.lines().collect();
        assert!(flat.windows(want.len()).any(|w| w == want.as_slice()), "excerpt missing:\n{excerpt}");
    }

    // Misspell the path, as the seed does.
    let broken = workflow.replacen("path: /applicationId", "path: /applicationID", 1);
    std::fs::write(dir.join("follow-up/workflow.yaml"), &broken).expect("write");
    let out = ctl(dir, &["check", "--project", "follow-up"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert_matches(
        &text(&out.stderr),
        "error[coordinator.mapping.path] <file> /workflow/steps/read-application/input/fields/recordId/path\n  expected a path that the workflow input schema declares; it declares nothing at /applicationID\n  next: Correct the path to a member the workflow input schema declares, or omit path to use the whole value.\n1 error, 0 warnings in 1 file\n",
    );
    // The location points at the path value.
    let place = text(&out.stderr);
    let loc = place.split_whitespace().nth(1).expect("location");
    let mut parts = loc.rsplitn(3, ':');
    let col: usize = parts.next().and_then(|c| c.parse().ok()).expect("col");
    let line: usize = parts.next().and_then(|l| l.parse().ok()).expect("line");
    let source_line = broken.lines().nth(line - 1).expect("line exists");
    assert_eq!(&source_line[col - 1..], "/applicationID");

    std::fs::write(dir.join("follow-up/workflow.yaml"), &workflow).expect("write");
    let out = ctl(
        dir,
        &[
            "check",
            "--project",
            "follow-up",
            "--runtime-config",
            "follow-up/runtime.yaml",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_matches(
        &text(&out.stdout),
        "Valid workflow follow-up version 1\nDefinition: sha256:<digest>\nValid runtime configuration\n",
    );
    let definition = text(&out.stdout)
        .lines()
        .nth(1)
        .map(str::to_owned)
        .expect("digest line");

    let out = ctl(
        dir,
        &[
            "package",
            "--project",
            "follow-up",
            "--output",
            "follow-up-package",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_matches(
        &text(&out.stdout),
        "created: follow-up-package\npackage digest: sha256:<digest>\n",
    );
    let digest = text(&out.stdout);

    // Packaging again into another folder gives the same bytes and digest.
    let out = ctl(
        dir,
        &["package", "--project", "follow-up", "--output", "again"],
    );
    assert!(out.status.success());
    assert_eq!(text(&out.stdout).lines().nth(1), digest.lines().nth(1));
    for f in ["definition.json", "SHA256SUMS"] {
        assert_eq!(
            std::fs::read(dir.join("follow-up-package").join(f)).expect("read"),
            std::fs::read(dir.join("again").join(f)).expect("read")
        );
    }
    // An existing output folder is refused and left alone.
    let out = ctl(
        dir,
        &["package", "--project", "follow-up", "--output", "again"],
    );
    assert_eq!(out.status.code(), Some(1));

    let out = ctl(
        dir,
        &[
            "types",
            "--project",
            "follow-up",
            "--language",
            "typescript",
            "--output",
            "follow-up.ts",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_matches(
        &text(&out.stdout),
        "output: follow-up.ts\nstatus: exported\nworkflow: follow-up\nworkflowRevision: sha256:<digest>\n",
    );
    let revision = text(&out.stdout)
        .lines()
        .nth(3)
        .map(str::to_owned)
        .expect("revision");
    assert_eq!(
        revision.trim_start_matches("workflowRevision: "),
        definition.trim_start_matches("Definition: ")
    );
    assert!(dir.join("follow-up.ts").exists());
}

#[test]
fn committed_schemas_match_the_generated_ones() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for kind in [
        "project",
        "scenarios",
        "runtime",
        "explain",
        "coverage",
        "move-certificate",
    ] {
        let out = ctl(&root, &["schema", "--kind", kind]);
        assert!(out.status.success());
        let path = root.join(format!("docs/schemas/{kind}.v1beta1.schema.json"));
        if std::env::var_os("UPDATE_SCHEMAS").is_some() {
            std::fs::write(&path, &out.stdout).expect("write schema");
        }
        let committed = std::fs::read(&path).expect("committed schema exists");
        assert_eq!(
            text(&committed),
            text(&out.stdout),
            "{kind}: run with UPDATE_SCHEMAS=1"
        );
        let schema: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(
            schema["$id"],
            format!("https://id.registrystack.org/schemas/coordinator/{kind}/{kind}.v1beta1.schema.json")
        );
    }
}

#[test]
fn committed_schemas_validate_every_example() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut checked = 0;
    for entry in std::fs::read_dir(root.join("examples")).expect("examples") {
        let dir = entry.expect("entry").path();
        for (file, kind) in [
            ("workflow.yaml", "project"),
            ("scenarios.yaml", "scenarios"),
            ("runtime.yaml", "runtime"),
        ] {
            let path = dir.join(file);
            let Ok(source) = std::fs::read_to_string(&path) else {
                continue;
            };
            let doc = coordinator_source::parse(file, &source).expect("example YAML reads");
            let schema_text = std::fs::read_to_string(
                root.join(format!("docs/schemas/{kind}.v1beta1.schema.json")),
            )
            .expect("schema");
            let schema: serde_json::Value =
                serde_json::from_str(&schema_text).expect("schema JSON");
            let validator = jsonschema::validator_for(&schema).expect("schema compiles");
            let errors: Vec<String> = validator
                .iter_errors(&doc.value)
                .map(|e| e.to_string())
                .collect();
            assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
            checked += 1;
        }
    }
    assert!(checked >= 6, "only {checked} files checked");
}

#[test]
fn committed_openapi_document_matches_the_generated_one() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = ctl(&root, &["openapi"]);
    assert!(out.status.success());
    let path = root.join("docs/openapi.json");
    if std::env::var_os("UPDATE_SCHEMAS").is_some() {
        std::fs::write(&path, &out.stdout).expect("write openapi.json");
    }
    let committed = std::fs::read(&path).expect("docs/openapi.json exists");
    assert_eq!(
        text(&committed),
        text(&out.stdout),
        "docs/openapi.json: run with UPDATE_SCHEMAS=1"
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(doc["openapi"], "3.1.0");
    assert!(doc["paths"]["/v1/runs"]["post"]["requestBody"].is_object());
}
