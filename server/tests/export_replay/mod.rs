//! Runs exported as scenario cases and replayed (issue 38): three runs of
//! the starter — one that finished, one held in `attention` after its
//! notice's answer was lost and settled by a reconcile, one cancelled
//! while it waited — are exported by the built `coordinatorctl scenario
//! export` with `--redact /applicationId`. Each file holds no application
//! id; `coordinatorctl test --cases` passes them on the starter, and on a
//! revision whose notice route skips the notice the two that sent one
//! fail with a difference that names `permission`, the last step both
//! share, while the cancelled one passes. A token without `export`, an
//! unknown run and an existing `--output` are refused with their codes
//! and write nothing; the service audited one `run.export` per case.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use coordinator_fakes::Reply;
use coordinator_ports::Maintenance;
use serde_json::{json, Value};

use crate::bulk::{ctl, token_file};
use crate::support::{rfc3339, unix_now, urls, Deployment, PRODUCER};

/// The `run.export` records of the audit journal: each keyed run
/// reference.
fn exports_audited(d: &Deployment) -> Vec<String> {
    let base = d.dir.path().join("audit.jsonl");
    let mut out = Vec::new();
    for file in coordinator_runtime::audit::journal_files(&base).unwrap() {
        for line in std::fs::read_to_string(file).unwrap().lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            if v["action"] == "run.export" && v["outcome"] == "accepted" {
                out.push(v["references"]["run"].as_str().unwrap().to_owned());
            }
        }
    }
    out
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}

/// `coordinatorctl` with `args` on the blocking pool (the fakes go on
/// serving on this test's runtime meanwhile): exit code, stdout, stderr.
async fn ctl_off(args: Vec<String>) -> (Option<i32>, String, String) {
    let out = tokio::task::spawn_blocking(move || ctl(&args))
        .await
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The starter with its notice route always `skip`: a revision on which
/// no notice is sent.
fn skipping_revision(dir: &Path) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/delayed-follow-up");
    let to = dir.join("skipping");
    std::fs::create_dir_all(&to).unwrap();
    for name in ["workflow.yaml", "scenarios.yaml", "runtime.yaml"] {
        std::fs::copy(from.join(name), to.join(name)).unwrap();
    }
    let functions = std::fs::read_to_string(from.join("functions.rhai")).unwrap();
    let changed = functions.replace("if record.data.noticeAllowed == true {", "if false {");
    assert_ne!(
        changed, functions,
        "the starter's notice route changed shape"
    );
    std::fs::write(to.join("functions.rhai"), changed).unwrap();
    // Its own cases that send a notice no longer hold either: keep only
    // the one that skips, so what fails below is the exported cases.
    let scenarios = std::fs::read_to_string(to.join("scenarios.yaml")).unwrap();
    let kept: Vec<&str> = scenarios.split("\n- id: ").collect();
    let skipping = kept
        .iter()
        .find(|c| c.starts_with("permission-withdrawn"))
        .unwrap();
    std::fs::write(
        to.join("scenarios.yaml"),
        format!("{}\n- id: {skipping}", kept[0]),
    )
    .unwrap();
    to
}

#[tokio::test]
async fn exported_runs_replay_on_their_revision_and_differ_on_another() {
    let Some(urls) = urls("export_replay") else {
        return;
    };
    let began = Instant::now();
    let d = Deployment::new(urls, 2_000).await;
    let c = d.spawn().await;
    let past = rfc3339(unix_now() - 60);

    // Finished.
    let finished = d.start(&c, "app-finished", &past).await;
    d.wait_state(&c, &finished, "finished", Duration::from_secs(30))
        .await;
    // Lost answer, held, reconciled.
    d.messaging
        .fake()
        .script("/v1/messages", [Reply::ResetAfterEffect]);
    let lost = d.start(&c, "app-lost", &past).await;
    d.wait_state(&c, &lost, "attention", Duration::from_secs(30))
        .await;
    let (status, v) = d
        .operate(
            &c,
            &format!("/v1/runs/{lost}/reconcile"),
            json!({"reason": "inc-38"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    d.wait_state(&c, &lost, "finished", Duration::from_secs(30))
        .await;
    // Cancelled while it waited.
    let cancelled = d
        .start(&c, "app-cancelled", &rfc3339(unix_now() + 3600))
        .await;
    let (status, v) = d
        .operate(
            &c,
            &format!("/v1/runs/{cancelled}/cancel"),
            json!({"reason": "inc-38"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    d.wait_state(&c, &cancelled, "cancelled", Duration::from_secs(30))
        .await;

    let token = token_file(&d);
    let cases = d.dir.path().join("cases");
    std::fs::create_dir(&cases).unwrap();
    let export = |run: &str, output: &Path, token: &Path| {
        strings(&[
            "scenario",
            "export",
            "--run",
            run,
            "--redact",
            "/applicationId",
            "--output",
            &output.display().to_string(),
            "--url",
            &c.base,
            "--token-file",
            &token.display().to_string(),
        ])
    };
    for (run, app) in [
        (&finished, "app-finished"),
        (&lost, "app-lost"),
        (&cancelled, "app-cancelled"),
    ] {
        let file = cases.join(format!("{app}.yaml"));
        let (code, out, err) = ctl_off(export(run, &file, &token)).await;
        assert_eq!(code, Some(0), "{out}{err}\n{}", c.log_text());
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(!text.contains(app), "{app} in {text}");
        assert!(text.contains("redacted-1"), "{text}");
    }
    let lost_case = std::fs::read_to_string(cases.join("app-lost.yaml")).unwrap();
    assert!(lost_case.contains("\"reconcile\""), "{lost_case}");

    // Refusals write nothing.
    let (code, _, err) = ctl_off(export(&finished, &cases.join("app-finished.yaml"), &token)).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("coordinator.export.output"), "{err}");
    let producer = d.dir.path().join("producer.token");
    std::fs::write(&producer, d.token(PRODUCER)).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&producer, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let denied = d.dir.path().join("denied.yaml");
    let (code, _, err) = ctl_off(export(&finished, &denied, &producer)).await;
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("authorization.refused"), "{err}");
    let unknown = "00000000-0000-4000-8000-000000000000";
    let (code, _, err) = ctl_off(export(unknown, &denied, &token)).await;
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("run.not-found"), "{err}");
    let (code, _, err) = ctl_off(
        export(&finished, &denied, &token)
            .into_iter()
            .chain(strings(&["--redact", "/nothing"]))
            .collect(),
    )
    .await;
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("export.redact-invalid"), "{err}");
    let waiting = d
        .start(&c, "app-waiting", &rfc3339(unix_now() + 3600))
        .await;
    let (code, _, err) = ctl_off(export(&waiting, &denied, &token)).await;
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("export.not-reproducible"), "{err}");
    assert!(!denied.exists());
    let audited = exports_audited(&d);
    assert_eq!(audited.len(), 3, "{audited:?}");

    // Replayed on the same revision: every case passes.
    let starter = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/delayed-follow-up");
    let test = |project: &Path| {
        strings(&[
            "test",
            "--project",
            &project.display().to_string(),
            "--cases",
            &cases.display().to_string(),
        ])
    };
    let (code, out, err) = ctl_off(test(&starter)).await;
    assert_eq!(code, Some(0), "{out}{err}");
    for run in [&finished, &lost, &cancelled] {
        assert!(out.contains(&format!("PASS run-{run}")), "{out}");
    }

    // On a revision that skips the notice, the two that sent one differ
    // after `permission`; the cancelled one never got there.
    let skipping = skipping_revision(d.dir.path());
    let (code, out, err) = ctl_off(test(&skipping)).await;
    assert_eq!(code, Some(1), "{out}{err}");
    for run in [&finished, &lost] {
        let at = out
            .find(&format!("FAIL run-{run}"))
            .unwrap_or_else(|| panic!("{out}"));
        let said: Vec<&str> = out[at..].lines().take(4).collect();
        assert!(
            said[1].contains("then: path [due, read-application, permission, notify, accepted]"),
            "{said:?}"
        );
        assert!(
            said[2].contains("now:  path [due, read-application, permission, skipped]"),
            "{said:?}"
        );
        assert_eq!(said[3].trim(), "last shared step: permission", "{said:?}");
    }
    assert!(out.contains(&format!("PASS run-{cancelled}")), "{out}");

    // Once retention erased its payloads, a run is no longer exported.
    let store = d
        .open_store(&d.runtime_file(crate::support::free_port()))
        .await
        .expect("store");
    let now = unix_now();
    let at = coordinator_ir::instant::Instant::from_unix_seconds;
    let erased = store
        .erase_payloads(at(now + 1), 100, at(now))
        .await
        .unwrap();
    assert_eq!(erased.erased, 3);
    store.close().await;
    let (code, _, err) = ctl_off(export(&finished, &denied, &token)).await;
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("export.payload-erased"), "{err}");
    assert!(!denied.exists());
    assert_eq!(exports_audited(&d).len(), 3);
    eprintln!("export journey: {:?}", began.elapsed());
    drop(c);
    d.cleanup().await;
}
