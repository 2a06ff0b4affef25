//! `POST /v1/runs/{run}/move` in process (docs/operations.md "Moving
//! waiting runs"): runs of `reviewed-notice` (revision A) waiting at
//! `await-decision` are moved, after the process restarted on a revision
//! B whose notice template changed, by the certificate the compiler's
//! `plan_move` wrote; every refusal answers its code and moves nothing.

use std::sync::Arc;

use coordinator_compiler::moves::{plan_move, MoveOptions, MovedCases};
use coordinator_engine::MoveCertificate;
use coordinator_ir::moves::{FindingSeverity, MoveFinding};
use coordinator_ir::Definition;
use coordinator_ports::MemoryRunStore;
use coordinator_runtime::keys::AuditKey;
use serde_json::{json, Value};

use super::ops_support::{self, definition, OPERATOR, PRODUCER};
use super::Env;

/// Revision B: `reviewed-notice` with the approval notice's template
/// version 3 (A's is 2), compiled from a copy.
fn revision_b() -> (tempfile::TempDir, coordinator_compiler::Compiled) {
    let from = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/reviewed-notice");
    let dir = tempfile::tempdir().unwrap();
    for file in ["workflow.yaml", "functions.rhai"] {
        std::fs::copy(from.join(file), dir.path().join(file)).unwrap();
    }
    let path = dir.path().join("workflow.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let old = "              id: application-approved\n              version: \"2\"";
    assert!(text.contains(old));
    std::fs::write(
        &path,
        text.replace(
            old,
            "              id: application-approved\n              version: \"3\"",
        ),
    )
    .unwrap();
    let compiled = coordinator_compiler::compile_project(dir.path(), "b");
    assert!(!compiled.has_errors(), "{:?}", compiled.diagnostics);
    (dir, compiled)
}

/// The process restarted on `definitions` (the same store, fakes and
/// bindings), as after an `apply`.
async fn restarted_on(env: &Env, definitions: &[Definition]) -> Env {
    Env::serve(
        ops_support::start_serving(
            env.fakes.clone(),
            "db-ops-1",
            false,
            env.store.clone(),
            None,
            definitions,
        )
        .await,
        env.store.clone(),
    )
    .await
}

/// `POST /v1/runs/{run}/move` as `client` with `certificate`.
async fn move_run(env: &Env, client: &str, run: &str, certificate: &Value) -> (u16, Value) {
    env.call(
        Some(client),
        &format!("/v1/runs/{run}/move"),
        Some(json!({"certificate": certificate, "reason": "ticket-34"})),
    )
    .await
}

/// A started run of revision A, carried to its wait (or as far as the
/// worker takes it).
async fn started(env: &Env, key: &str) -> String {
    let (s, run) = env.start(key).await;
    assert_eq!(s, 201, "{run}");
    env.engine.worker.run_until_idle(10).await.unwrap();
    run["run"].as_str().unwrap().to_owned()
}

fn code(answer: &(u16, Value)) -> (u16, Option<&str>) {
    (answer.0, answer.1["code"].as_str())
}

#[tokio::test]
async fn waiting_runs_move_once_by_a_certificate_and_every_refusal_has_its_code() {
    let a_env = Env::on(false, Arc::new(MemoryRunStore::new())).await;
    let a = definition("reviewed-notice");
    let waiting = started(&a_env, "k-wait").await;
    let second = started(&a_env, "k-second").await;
    let held = a_env.uncertain_run("k-held").await;
    let ended = started(&a_env, "k-ended").await;
    let (s, _) = a_env
        .call(
            Some(OPERATOR),
            &format!("/v1/runs/{ended}/cancel"),
            Some(json!({"reason": "r-1"})),
        )
        .await;
    assert_eq!(s, 200);
    // Its `onCancel` route withdraws the review, then it ends.
    a_env.engine.worker.run_until_idle(10).await.unwrap();
    // Admitted, its first call not yet carried out: in a call.
    let (s, run) = a_env.start("k-in-call").await;
    assert_eq!(s, 201);
    let in_call = run["run"].as_str().unwrap().to_owned();

    let (_b_dir, b) = revision_b();
    let plan = plan_move(
        &a.program,
        &b,
        &MoveOptions::default(),
        &MovedCases::default(),
    )
    .expect("a plan");
    let certificate: MoveCertificate = plan.certificate;
    assert!(
        certificate.movable_wait("await-decision").is_some(),
        "{certificate:?}"
    );
    let cert = serde_json::to_value(&certificate).unwrap();

    // On the process that still serves A, B is not active.
    assert_eq!(
        code(&move_run(&a_env, OPERATOR, &waiting, &cert).await),
        (409, Some("move.target-not-active"))
    );

    // A `--recovery-only` instance moves nothing.
    let recovery_only = a_env.restarted(true).await;
    assert_eq!(
        code(&move_run(&recovery_only, OPERATOR, &waiting, &cert).await),
        (409, Some("execution.held"))
    );

    let b_definition = Definition::new(b.program.clone().unwrap());
    a_env.store.add_definition(a.clone());
    let env = restarted_on(&a_env, std::slice::from_ref(&b_definition)).await;
    // A caller's policy never grants `move`.
    assert_eq!(
        code(&move_run(&env, PRODUCER, &waiting, &cert).await),
        (403, Some("authorization.refused"))
    );
    // A certificate edited after `move plan` wrote it.
    let mut edited = cert.clone();
    edited["waits"][0]["carried"] = json!([]);
    assert_eq!(
        code(&move_run(&env, OPERATOR, &waiting, &edited).await),
        (409, Some("move.certificate-invalid"))
    );
    // Re-sealed after an edit (the digest recomputed, as anyone can): the
    // steps it carries are checked against the two Programs, so a forged
    // list is refused, and so is a certificate from a revision to itself.
    let mut forged = certificate.clone();
    for wait in &mut forged.waits {
        wait.carried.push("not-a-step".into());
    }
    let forged = serde_json::to_value(forged.sealed()).unwrap();
    assert_eq!(
        code(&move_run(&env, OPERATOR, &waiting, &forged).await),
        (409, Some("move.certificate-invalid"))
    );
    let mut to_itself = certificate.clone();
    to_itself.from.revision = to_itself.to.revision.clone();
    let to_itself = serde_json::to_value(to_itself.sealed()).unwrap();
    let refused = move_run(&env, OPERATOR, &waiting, &to_itself).await;
    assert_eq!(code(&refused), (409, Some("move.certificate-invalid")));
    // A certificate that refuses the wait (sealed as the compiler would).
    let mut refusing = certificate.clone();
    for wait in &mut refusing.waits {
        wait.movable = false;
        wait.findings.push(MoveFinding {
            code: "coordinator.move.input-missing".into(),
            severity: FindingSeverity::Error,
            file: "b/workflow.yaml".into(),
            line: 1,
            column: 1,
            pointer: "/workflow".into(),
            message: "m".into(),
            next: "n".into(),
        });
    }
    let refusing = serde_json::to_value(refusing.sealed()).unwrap();
    assert_eq!(
        code(&move_run(&env, OPERATOR, &waiting, &refusing).await),
        (409, Some("move.wait-refused"))
    );
    for (run, expected) in [
        (&held, "move.run-held"),
        (&ended, "move.run-ended"),
        (&in_call, "move.run-not-waiting"),
    ] {
        assert_eq!(
            code(&move_run(&env, OPERATOR, run, &cert).await),
            (409, Some(expected)),
            "{run}"
        );
    }
    // Changed between the read and the commit: nothing moved.
    env.store.conflict_next_commit();
    assert_eq!(
        code(&move_run(&env, OPERATOR, &second, &cert).await),
        (409, Some("move.raced"))
    );

    let (s, moved) = move_run(&env, OPERATOR, &waiting, &cert).await;
    assert_eq!(s, 200, "{moved}");
    assert_eq!(moved["revision"], json!(b_definition.revision));
    assert_eq!(moved["moves"][0]["fromRevision"], json!(a.revision));
    assert_eq!(moved["moves"][0]["fromStep"], "await-decision");
    assert_eq!(moved["moves"][0]["toStep"], "await-decision");
    assert_eq!(moved["moves"][0]["certificate"], json!(certificate.digest));
    let (_, status) = env
        .call(Some(OPERATOR), &format!("/v1/runs/{waiting}"), None)
        .await;
    assert_eq!(status["revision"], json!(b_definition.revision));
    assert_eq!(status["moves"].as_array().map(Vec::len), Some(1));
    // Moved once: a second move finds it on B.
    assert_eq!(
        code(&move_run(&env, OPERATOR, &waiting, &cert).await),
        (409, Some("move.revision-differs"))
    );
    // The run raced above still waits on A, and moves now.
    assert_eq!(move_run(&env, OPERATOR, &second, &cert).await.0, 200);

    // One audit line per move, keyed references and the move's facts.
    let lines: Vec<Value> = env
        .journal()
        .into_iter()
        .filter(|l| l["action"] == "run.move")
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    let key = AuditKey::new(&[9u8; 32]).unwrap();
    assert_eq!(
        lines[0]["references"]["run"],
        key.reference("run", &waiting)
    );
    assert_eq!(
        lines[0]["references"]["reason"],
        key.reference("reason", "ticket-34")
    );
    assert_eq!(lines[0]["facts"]["from-revision"], json!(a.revision));
    assert_eq!(
        lines[0]["facts"]["to-revision"],
        json!(b_definition.revision)
    );
    assert_eq!(lines[0]["facts"]["certificate"], json!(certificate.digest));

    // Under the restore hold nothing is moved.
    let (s, _) = env
        .call(
            Some(OPERATOR),
            "/v1/restore-hold",
            Some(json!({"reason": "r-2"})),
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(
        code(&move_run(&env, OPERATOR, &held, &cert).await),
        (409, Some("execution.held"))
    );
}

/// The move route alone reads a body over 64 KiB (a big certificate); a
/// recovery action's is still refused at 64 KiB.
#[tokio::test]
async fn the_move_route_reads_up_to_one_mebibyte() {
    let env = Env::new(false).await;
    let padding = "x".repeat(100 * 1024);
    let big = json!({"certificate": {"padding": padding}, "reason": "r-1"});
    let (s, p) = env
        .call(
            Some(OPERATOR),
            "/v1/runs/00000000-0000-4000-8000-000000000000/move",
            Some(big.clone()),
        )
        .await;
    assert_eq!((s, p["code"].as_str()), (404, Some("run.not-found")), "{p}");
    let (s, p) = env
        .call(
            Some(OPERATOR),
            "/v1/runs/00000000-0000-4000-8000-000000000000/cancel",
            Some(big),
        )
        .await;
    assert_eq!((s, p["code"].as_str()), (413, Some("request.too-large")));
}
