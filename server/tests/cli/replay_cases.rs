//! `test --cases` through the real binary (docs/scenarios.md "Replaying
//! exported cases in CI"): a one-case file and a scenarios document pass
//! beside the starter's own cases and are counted with them; on a revision
//! that renamed a step the case naming it fails with its difference (the
//! step gone, the last step both share), in text and JSON; a missing path
//! and a file that holds no case are `coordinator.test.cases`, and the
//! other paths' cases still run; `scenario export` refuses an existing
//! `--output` before it asks the service and leaves the file as it was.

use serde_json::Value;

use crate::ctl;

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("UTF-8 output")
}

/// One case of the starter that sends the notice, as its own file.
const ONE_CASE: &str = "\
id: sent-once
admittedAt: '2026-10-09T09:00:00Z'
input: {applicationId: app-9, sendAfter: '2026-10-09T09:16:00Z'}
replies:
  read-application:
  - type: success
    value:
      collection: applications
      recordId: app-9
      revision: '1'
      data: {noticeAllowed: true, applicantEmail: a@example.org}
  notify:
  - type: success
    value: {id: 6f1c2a4e-8b7d-4c3e-9a2f-1d5e7b9c0a11, status: accepted}
expect:
  path: [due, read-application, permission, notify, accepted]
  state: completed
  outcome: {type: named, value: message-accepted}
  output: {messageId: 6f1c2a4e-8b7d-4c3e-9a2f-1d5e7b9c0a11}
  workflowElapsedSeconds: 960
";

/// DIR/follow-up (the starter), DIR/cases/one.yaml (one case) and
/// DIR/cases/more/doc.yaml (the starter's scenarios document).
fn layout() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("temp dir");
    let out = ctl(tmp.path(), &["init", "--directory", "follow-up"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let more = tmp.path().join("cases/more");
    std::fs::create_dir_all(&more).expect("dirs");
    std::fs::write(tmp.path().join("cases/one.yaml"), ONE_CASE).expect("write");
    std::fs::copy(
        tmp.path().join("follow-up/scenarios.yaml"),
        more.join("doc.yaml"),
    )
    .expect("copy");
    tmp
}

#[test]
fn cases_in_files_and_directories_run_beside_the_projects() {
    let tmp = layout();
    // A link back to its parent is not followed: the cases count once.
    std::os::unix::fs::symlink("..", tmp.path().join("cases/more/loop")).expect("link");
    let out = ctl(
        tmp.path(),
        &["test", "--project", "follow-up", "--cases", "cases"],
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("PASS sent-once (cases/one.yaml)\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("PASS permission-withdrawn (cases/more/doc.yaml)\n"),
        "{stdout}"
    );
    assert!(stdout.ends_with("13 passed, 0 failed\n"), "{stdout}");
}

#[test]
fn a_step_the_revision_renamed_is_the_cases_difference() {
    let tmp = layout();
    let workflow = tmp.path().join("follow-up/workflow.yaml");
    let renamed = std::fs::read_to_string(&workflow)
        .expect("read")
        .replace("    notify:\n", "    send-notice:\n")
        .replace("send: notify", "send: send-notice")
        .replace("step: notify", "step: send-notice");
    std::fs::write(&workflow, renamed).expect("write");
    std::fs::write(
        tmp.path().join("follow-up/scenarios.yaml"),
        "apiVersion: id.registrystack.org/formats/coordinator/scenarios/v1beta1\nkind: CoordinatorScenarios\ncases: []\n",
    )
    .expect("write");
    let out = ctl(
        tmp.path(),
        &[
            "test",
            "--project",
            "follow-up",
            "--cases",
            "cases/one.yaml",
        ],
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert_eq!(
        stdout,
        "FAIL sent-once (cases/one.yaml)\n  \
         then: path [due, read-application, permission, notify, accepted], state completed, outcome message-accepted\n  \
         now:  the workflow has no step `notify` (coordinator.scenario.unknown-step)\n  \
         last shared step: permission\n\
         0 passed, 1 failed\n"
    );
    let out = ctl(
        tmp.path(),
        &[
            "test",
            "--project",
            "follow-up",
            "--cases",
            "cases/one.yaml",
            "--format",
            "json",
        ],
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let case = &report["replayed"][0];
    assert_eq!(case["passed"], false, "{report}");
    assert_eq!(
        case["difference"]["lastSharedStep"], "permission",
        "{report}"
    );
    assert_eq!(report["failed"], 1, "{report}");
}

#[test]
fn a_path_that_holds_no_case_is_refused_and_the_others_still_run() {
    let tmp = layout();
    std::fs::write(tmp.path().join("not-a-case.yaml"), "hello: world\n").expect("write");
    let out = ctl(
        tmp.path(),
        &[
            "test",
            "--project",
            "follow-up",
            "--cases",
            "missing",
            "--cases",
            "not-a-case.yaml",
            "--cases",
            "cases/one.yaml",
        ],
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    let said = format!("{stdout}{stderr}");
    assert_eq!(said.matches("coordinator.test.cases").count(), 2, "{said}");
    assert!(
        stdout.contains("PASS sent-once (cases/one.yaml)"),
        "{stdout}"
    );
}

#[test]
fn scenario_export_refuses_an_existing_output_before_asking() {
    let tmp = layout();
    let token = tmp.path().join("token");
    std::fs::write(&token, "unused").expect("write");
    let kept = tmp.path().join("cases/one.yaml");
    let out = ctl(
        tmp.path(),
        &[
            "scenario",
            "export",
            "--run",
            "00000000-0000-4000-8000-000000000000",
            "--output",
            "cases/one.yaml",
            // Nothing listens there: the refusal comes first.
            "--url",
            "http://127.0.0.1:9",
            "--token-file",
            &token.display().to_string(),
        ],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("coordinator.export.output"), "{stderr}");
    assert_eq!(std::fs::read_to_string(kept).expect("read"), ONE_CASE);
}

#[test]
fn a_case_the_revision_refuses_before_its_first_step_shares_no_step() {
    let tmp = layout();
    // The revision requires an input member the run did not have.
    let workflow = tmp.path().join("follow-up/workflow.yaml");
    let yaml = std::fs::read_to_string(&workflow).expect("workflow.yaml");
    let yaml = yaml.replacen(
        "    required:\n    - applicationId\n",
        "    required:\n    - locale\n    - applicationId\n",
        1,
    );
    let yaml = yaml.replacen(
        "    properties:\n      applicationId:\n",
        "    properties:\n      locale:\n        type: string\n      applicationId:\n",
        1,
    );
    std::fs::write(&workflow, yaml).expect("write");
    let out = ctl(
        tmp.path(),
        &[
            "test",
            "--project",
            "follow-up",
            "--cases",
            "cases/one.yaml",
        ],
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("FAIL sent-once"), "{stdout}");
    assert!(stdout.contains("locale"), "{stdout}");
    assert!(stdout.contains("last shared step: none"), "{stdout}");
}

#[test]
fn case_selects_one_case_of_the_cases_files() {
    let tmp = layout();
    let out = ctl(
        tmp.path(),
        &[
            "test",
            "--project",
            "follow-up",
            "--cases",
            "cases",
            "--case",
            "sent-once",
        ],
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("PASS sent-once (cases/one.yaml)"),
        "{stdout}"
    );
    assert!(!stdout.contains("permission-withdrawn"), "{stdout}");
    assert!(stdout.ends_with("1 passed, 0 failed\n"), "{stdout}");
    let out = ctl(
        tmp.path(),
        &[
            "test",
            "--project",
            "follow-up",
            "--cases",
            "cases",
            "--case",
            "no-such-case",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains("coordinator.scenario.unknown-case")
            || text(&out.stderr).contains("coordinator.scenario.unknown-case"),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}
