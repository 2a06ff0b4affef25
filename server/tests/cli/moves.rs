//! `move plan` through the real binary (docs/operations.md "Moving waiting
//! runs"): the issue's acceptance on the starter as revision A (a B that
//! only changes the notice text moves `due`; a B whose `notify` reads an
//! input member A never had is refused at that mapping; a renamed `due`
//! moves only with `--map`; `due` turned into a call is refused), a
//! `wait-for` (reviewed-notice) whose call changes, revision A given as a
//! package, and bad usage: exit codes, messages, and the certificate
//! written whole or not at all.

use std::path::{Path, PathBuf};
use std::process::Output;

use coordinator_ir::moves::MoveCertificate;
use serde_json::Value;

use crate::ctl;

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("UTF-8 output")
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Copies example `name` to `dir/to`.
fn copy_example(name: &str, dir: &Path, to: &str) {
    let from = root().join("examples").join(name);
    let target = dir.join(to);
    std::fs::create_dir_all(&target).expect("create the copy");
    for file in ["workflow.yaml", "functions.rhai"] {
        std::fs::copy(from.join(file), target.join(file)).expect("copy a project file");
    }
}

/// Replaces each `(from, to)` once in `dir/file`; each must be there.
fn edit(dir: &Path, file: &str, edits: &[(&str, &str)]) {
    let path = dir.join(file);
    let mut body = std::fs::read_to_string(&path).expect("read");
    for (from, to) in edits {
        assert!(body.contains(from), "{file} has {from:?}");
        body = body.replacen(from, to, 1);
    }
    std::fs::write(&path, body).expect("write");
}

/// A temporary directory with the starter as `a` and a copy as `b`.
fn starter_pair() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("temp dir");
    copy_example("delayed-follow-up", tmp.path(), "a");
    copy_example("delayed-follow-up", tmp.path(), "b");
    // B is another revision of the same workflow (a comment in its
    // Functions changes the revision, nothing else): a plan refuses the
    // same revision twice.
    let functions = tmp.path().join("b/functions.rhai");
    let body = std::fs::read_to_string(&functions).expect("read");
    std::fs::write(&functions, format!("{body}\n// revision B\n")).expect("write");
    tmp
}

/// `move plan --from a --to b` in `dir` with `extra`, writing `cert.json`
/// unless `extra` names another `--output`.
fn plan(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["move", "plan", "--from", "a", "--to", "b"];
    if !extra.contains(&"--output") {
        args.extend(["--output", "cert.json"]);
    }
    args.extend_from_slice(extra);
    ctl(dir, &args)
}

/// The certificate written, read back as the service reads it.
fn certificate(dir: &Path) -> MoveCertificate {
    let bytes = std::fs::read(dir.join("cert.json")).expect("the certificate is written");
    MoveCertificate::from_json(&bytes).expect("a certificate that verifies")
}

fn status(out: &Output) -> i32 {
    out.status.code().expect("an exit code")
}

#[test]
fn a_b_that_only_changes_the_notice_text_moves_due() {
    let tmp = starter_pair();
    let dir = tmp.path();
    edit(
        dir,
        "b/functions.rhai",
        &[("\"application-follow-up\"", "\"application-reminder\"")],
    );
    let out = plan(dir, &[]);
    assert_eq!(status(&out), 0, "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "");
    let c = certificate(dir);
    assert_ne!(c.from.revision, c.to.revision);
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            format!(
                "Move plan for workflow follow-up from {} to {}",
                c.from.revision, c.to.revision
            )
            .as_str(),
            "movable: due -> due (wait-until), carrying no step output",
            "Certificate: cert.json",
            format!("Digest: {}", c.digest).as_str(),
        ]
    );
    let due = c.movable_wait("due").expect("due is movable");
    assert!(due.findings.is_empty() && due.carried.is_empty());

    // The same plan as JSON: the certificate inside the report, equal to
    // the file.
    let out = plan(dir, &["--format", "json"]);
    assert_eq!(status(&out), 0);
    let report: Value = serde_json::from_slice(&out.stdout).expect("one report");
    assert_eq!(report["kind"], "CoordinatorCtlReport");
    assert_eq!(report["command"], "move plan");
    assert_eq!(report["ok"], true);
    assert_eq!(report["status"], "movable");
    assert_eq!(
        report["certificate"],
        serde_json::to_value(certificate(dir)).expect("value")
    );
}

/// B's input type gains a required `priority`, and `notify` reads it.
fn priority_b(dir: &Path) {
    edit(
        dir,
        "b/workflow.yaml",
        &[
            (
                "        format: date-time\n    required:\n",
                "        format: date-time\n      priority:\n        type: string\n    required:\n    - priority\n",
            ),
            (
                "      input:\n        type: function\n        function: notice-request\n",
                concat!(
                    "      input:\n        type: fields\n        fields:\n",
                    "          senderProfile: {type: literal, value: applications-office}\n",
                    "          to: {type: literal, value: {email: someone@example.org}}\n",
                    "          template: {type: literal, value: {id: application-follow-up, version: \"1\"}}\n",
                    "          locale: {type: literal, value: en}\n",
                    "          data:\n            type: fields\n            fields:\n",
                    "              priority:\n                type: input\n                path: /priority\n",
                ),
            ),
        ],
    );
}

/// The 1-based line of `needle` in `file`.
fn line_of(file: &Path, needle: &str) -> usize {
    std::fs::read_to_string(file)
        .expect("read")
        .lines()
        .position(|l| l.contains(needle))
        .expect("the line is there")
        + 1
}

#[test]
fn a_read_of_an_input_member_a_never_had_is_refused_at_that_mapping() {
    let tmp = starter_pair();
    let dir = tmp.path();
    priority_b(dir);
    let out = plan(dir, &[]);
    assert_eq!(status(&out), 1, "{}", text(&out.stderr));
    let line = line_of(&dir.join("b/workflow.yaml"), "path: /priority");
    let stderr = text(&out.stderr);
    let first = stderr.lines().next().expect("a diagnostic");
    assert_eq!(
        first,
        format!("error[coordinator.move.input-missing] b/workflow.yaml:{line}:23 /workflow/steps/notify/input/fields/data/fields/priority/path")
    );
    assert!(stderr.contains("/priority"), "{stderr}");
    assert!(stderr.contains("\n  next: "), "{stderr}");
    assert!(
        stderr.ends_with("1 error, 0 warnings in 1 file\n"),
        "{stderr}"
    );
    assert!(
        text(&out.stdout).contains("refused: due -> due (wait-until), 1 finding\n"),
        "{}",
        text(&out.stdout)
    );
    // The findings are the point: the certificate is written all the same.
    let c = certificate(dir);
    let due = c.wait("due").expect("due");
    assert!(!due.movable);
    let f = due.findings.first().expect("one finding");
    assert_eq!(
        (f.code.as_str(), f.file.as_str(), f.line),
        (
            "coordinator.move.input-missing",
            "b/workflow.yaml",
            u32::try_from(line).expect("small")
        )
    );

    let out = plan(dir, &["--format", "json"]);
    assert_eq!(status(&out), 1);
    let report: Value = serde_json::from_slice(&out.stdout).expect("one report");
    assert_eq!(
        (report["ok"].clone(), report["status"].clone()),
        (false.into(), "refused".into())
    );
    assert_eq!(
        report["diagnostics"][0]["code"],
        "coordinator.move.input-missing"
    );
    assert_eq!(report["certificate"]["waits"][0]["movable"], false);
}

#[test]
fn a_renamed_wait_moves_only_with_a_map() {
    let tmp = starter_pair();
    let dir = tmp.path();
    edit(
        dir,
        "b/workflow.yaml",
        &[
            ("  start: due\n", "  start: due-later\n"),
            ("    due:\n", "    due-later:\n"),
        ],
    );
    let out = plan(dir, &[]);
    assert_eq!(status(&out), 1);
    let steps = line_of(&dir.join("b/workflow.yaml"), "  steps:");
    assert!(
        text(&out.stderr).starts_with(&format!(
            "error[coordinator.move.target-missing] b/workflow.yaml:{steps}:3 /workflow/steps\n"
        )),
        "{}",
        text(&out.stderr)
    );
    assert!(!certificate(dir).any_movable());

    let out = plan(dir, &["--map", "due=due-later"]);
    assert_eq!(status(&out), 0, "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("movable: due -> due-later (wait-until)"));
    let c = certificate(dir);
    assert_eq!(c.map.len(), 1);
    assert_eq!(
        c.movable_wait("due").map(|w| w.to.as_str()),
        Some("due-later")
    );
}

#[test]
fn a_wait_turned_into_a_call_is_refused() {
    let tmp = starter_pair();
    let dir = tmp.path();
    edit(
        dir,
        "b/workflow.yaml",
        &[
            (
                "    due:\n      type: wait-until\n      until:\n        type: input\n        path: /sendAfter\n",
                concat!(
                    "    due:\n      type: call\n      operation: applications-peek\n",
                    "      input:\n        type: fields\n        fields:\n",
                    "          collection: {type: literal, value: applications}\n",
                    "          recordId: {type: input, path: /applicationId}\n",
                ),
            ),
            (
                "  notices-submit-message:\n",
                "  applications-peek:\n    uses: breg.read-record/v1\n    connection: applications\n  notices-submit-message:\n",
            ),
        ],
    );
    let out = plan(dir, &[]);
    assert_eq!(status(&out), 1, "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with("error[coordinator.move.target-kind] b/workflow.yaml:"),
        "{stderr}"
    );
    assert!(stderr.contains(" /workflow/steps/due/type\n"), "{stderr}");
    assert!(text(&out.stdout).contains("refused: due -> due (wait-until), 1 finding"));
}

#[test]
fn a_wait_for_moves_unless_the_call_it_waits_on_changes() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    copy_example("reviewed-notice", dir, "a");
    copy_example("reviewed-notice", dir, "b");
    edit(
        dir,
        "b/workflow.yaml",
        &[("id: application-approved", "id: application-granted")],
    );
    let out = plan(dir, &[]);
    assert_eq!(status(&out), 0, "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains(
            "movable: await-decision -> await-decision (wait-for), carrying submit-review\n"
        ),
        "{}",
        text(&out.stdout)
    );

    // The review is now submitted under an alias whose output is narrowed:
    // the call is not carried, so the completion awaited belongs to no call
    // of B.
    edit(
        dir,
        "b/workflow.yaml",
        &[(
            "  review-submit:\n    uses: casework.submit-review-request/v1\n    connection: review\n",
            "  review-submit:\n    uses: casework.submit-review-request/v1\n    connection: review\n    output:\n      type: object\n      required: [id, status]\n",
        )],
    );
    let out = plan(dir, &[]);
    assert_eq!(status(&out), 1, "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("error[coordinator.move.completion-differs] b/workflow.yaml:"),
        "{stderr}"
    );
    assert!(
        stderr.contains(" /workflow/steps/await-decision/completion/step\n"),
        "{stderr}"
    );
    let c = certificate(dir);
    let wait = c.wait("await-decision").expect("the wait");
    assert!(!wait.movable && wait.carried.is_empty());
}

#[test]
fn revision_a_may_be_a_package_and_b_may_not() {
    let tmp = starter_pair();
    let dir = tmp.path();
    edit(
        dir,
        "b/functions.rhai",
        &[("\"application-follow-up\"", "\"application-reminder\"")],
    );
    // `package` runs the scenarios; the copies have none, so package the
    // example itself.
    let example = root().join("examples/delayed-follow-up");
    let packaged = dir.join("a-package");
    let out = ctl(
        dir,
        &[
            "package",
            "--project",
            example.to_str().expect("UTF-8"),
            "--output",
            packaged.to_str().expect("UTF-8"),
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let from_project = plan(dir, &[]);
    assert_eq!(status(&from_project), 0);
    let by_project = certificate(dir);
    let out = ctl(
        dir,
        &[
            "move",
            "plan",
            "--from",
            "a-package",
            "--to",
            "b",
            "--output",
            "cert.json",
        ],
    );
    assert_eq!(status(&out), 0, "{}", text(&out.stderr));
    assert_eq!(
        certificate(dir),
        by_project,
        "a package is the same revision A"
    );

    let out = ctl(
        dir,
        &[
            "move",
            "plan",
            "--from",
            "a",
            "--to",
            "a-package",
            "--output",
            "other.json",
        ],
    );
    assert_eq!(status(&out), 2);
    assert!(
        text(&out.stderr).starts_with("error[coordinator.move.to-package] a-package\n"),
        "{}",
        text(&out.stderr)
    );
    assert!(!dir.join("other.json").exists());

    // A package that does not verify is refused as `check` refuses one.
    let definition = packaged.join("definition.json");
    let mut bytes = std::fs::read(&definition).expect("definition");
    bytes.push(b'\n');
    std::fs::write(&definition, bytes).expect("tamper");
    let out = ctl(
        dir,
        &[
            "move",
            "plan",
            "--from",
            "a-package",
            "--to",
            "b",
            "--output",
            "other.json",
        ],
    );
    assert_eq!(status(&out), 1);
    assert!(
        text(&out.stderr).starts_with("error[coordinator.runtime.package-refused] a-package\n"),
        "{}",
        text(&out.stderr)
    );
    assert!(!dir.join("other.json").exists());
}

#[test]
fn bad_usage_is_refused_before_anything_is_written() {
    let tmp = starter_pair();
    let dir = tmp.path();
    std::fs::write(dir.join("cert.json"), "kept\n").expect("an earlier file");
    let cases: [(&[&str], &str); 6] = [
        (
            &["--map", "due"],
            "error[coordinator.move.map-invalid] --map due\n",
        ),
        (
            &["--map", "notify=due"],
            "error[coordinator.move.map-invalid] --map notify=due\n",
        ),
        (
            &["--map", "due=x", "--map", "due=y"],
            "error[coordinator.move.map-invalid] --map due=y\n",
        ),
        (
            &["--map", "nowhere=due"],
            "error[coordinator.move.map-invalid] --map nowhere=due\n",
        ),
        (
            &["--accept-skipped", "permission"],
            "error[coordinator.move.skip-invalid] --accept-skipped permission\n",
        ),
        (&["--output", "."], "error[coordinator.move.output] .\n"),
    ];
    for (extra, first) in cases {
        let out = plan(dir, extra);
        assert_eq!(status(&out), 2, "{extra:?}: {}", text(&out.stderr));
        assert!(
            text(&out.stderr).starts_with(first),
            "{extra:?}: {}",
            text(&out.stderr)
        );
        assert_eq!(text(&out.stdout), "");
        assert_eq!(
            std::fs::read_to_string(dir.join("cert.json")).expect("kept"),
            "kept\n"
        );
    }
    let out = plan(dir, &["--output", "missing/cert.json"]);
    assert_eq!(status(&out), 2);
    assert!(text(&out.stderr).starts_with("error[coordinator.move.output] missing/cert.json\n"));

    // Another workflow: refused at B's project id, nothing written.
    edit(
        dir,
        "b/workflow.yaml",
        &[("  id: follow-up\n", "  id: other\n")],
    );
    let out = plan(dir, &[]);
    assert_eq!(status(&out), 1);
    assert!(
        text(&out.stderr).starts_with("error[coordinator.move.workflow-differs] b/workflow.yaml:"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("cert.json")).expect("kept"),
        "kept\n"
    );
    // A missing revision: resource unavailable.
    let out = ctl(
        dir,
        &[
            "move", "plan", "--from", "nowhere", "--to", "a", "--output", "x.json",
        ],
    );
    assert_eq!(status(&out), 3);
    assert!(
        text(&out.stderr).starts_with("error[coordinator.file.unreadable] nowhere/workflow.yaml\n")
    );
}

#[test]
fn a_certificate_that_cannot_be_written_leaves_nothing() {
    // `/proc` takes no new file, whoever runs the test.
    let tmp = starter_pair();
    let dir = tmp.path();
    let out = plan(dir, &["--output", "/proc/coordinator-move-plan.json"]);
    assert_eq!(status(&out), 3, "{}", text(&out.stderr));
    assert!(
        text(&out.stderr)
            .starts_with("error[coordinator.move.write] /proc/coordinator-move-plan.json\n"),
        "{}",
        text(&out.stderr)
    );
    assert!(!Path::new("/proc/coordinator-move-plan.json").exists());
    // The JSON report names no certificate file when none was written.
    let out = plan(
        dir,
        &[
            "--output",
            "/proc/coordinator-move-plan.json",
            "--format",
            "json",
        ],
    );
    assert_eq!(status(&out), 3, "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).expect("one report");
    assert_eq!(report["status"], "refused", "{report}");
    assert!(report.get("output").is_none(), "{report}");
    assert_eq!(report["diagnostics"][0]["code"], "coordinator.move.write");
    // A written one is named.
    let out = plan(dir, &["--format", "json"]);
    let report: Value = serde_json::from_slice(&out.stdout).expect("one report");
    assert_eq!(report["output"], "cert.json", "{report}");
}

#[test]
fn the_certificate_fits_its_committed_schema() {
    let tmp = starter_pair();
    let dir = tmp.path();
    priority_b(dir);
    assert_eq!(status(&plan(dir, &[])), 1);
    let written: Value =
        serde_json::from_slice(&std::fs::read(dir.join("cert.json")).expect("written"))
            .expect("JSON");
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("docs/schemas/move-certificate.v1beta1.schema.json"))
            .expect("the committed schema"),
    )
    .expect("schema JSON");
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&written)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
}

/// `move apply` reads its certificate before it asks the service anything:
/// a file it cannot read is exit 3, a certificate edited after `move
/// plan` wrote it exit 2, each `coordinator.move.certificate`.
#[test]
fn move_apply_refuses_a_certificate_it_cannot_read_or_verify() {
    let tmp = starter_pair();
    let dir = tmp.path();
    edit(
        dir,
        "b/functions.rhai",
        &[("\"application-follow-up\"", "\"application-reminder\"")],
    );
    assert_eq!(status(&plan(dir, &[])), 0);
    let token = dir.join("token");
    std::fs::write(&token, "t").expect("write the token");
    let apply = |cert: &str| {
        ctl(
            dir,
            &[
                "move",
                "apply",
                "--certificate",
                cert,
                "--filter",
                "state=running",
                "--reason",
                "inc-34",
                "--url",
                "http://127.0.0.1:9",
                "--token-file",
                "token",
                "--dry-run",
            ],
        )
    };
    let out = apply("missing.json");
    assert_eq!(status(&out), 3, "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("error[coordinator.move.certificate] missing.json"));
    let body = std::fs::read_to_string(dir.join("cert.json")).expect("read the certificate");
    let edited = body.replacen("\"movable\": true", "\"movable\": false", 1);
    assert_ne!(edited, body);
    std::fs::write(dir.join("edited.json"), edited).expect("write");
    let out = apply("edited.json");
    assert_eq!(status(&out), 2, "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("error[coordinator.move.certificate] edited.json"));
}
