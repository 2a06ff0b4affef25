//! The operator side in process: `GET /v1/doctor`, the restore and
//! admission holds, `--recovery-only`, retention, the audit journal and the
//! metrics listener, over real sockets with the fake issuer and products.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::sync::Arc;

use coordinator::startup::{check_bindings, BindingStartup};
use coordinator_engine::Engine;
use coordinator_fakes::{FakeCasework, FakeIssuer, FakeMessaging, Mint, Reply};
use coordinator_ports::{MemoryRunStore, RunFilter, RunReads};
use coordinator_runtime::audit::{journal_files, AuditJournal};
use coordinator_runtime::binding::BindingConflict;
use coordinator_runtime::config::Connection;
use coordinator_runtime::keys::AuditKey;
use serde_json::{json, Value};

mod moves;
mod ops_support;
mod small_fs;

use ops_support::{Instance, AUDIENCE, OPERATOR, PRODUCER};

const EMAIL: &str = "applicant-7@example.org";

struct Env {
    fakes: ops_support::Fakes,
    issuer: FakeIssuer,
    casework: FakeCasework,
    _messaging: FakeMessaging,
    engine: Arc<Engine>,
    store: Arc<MemoryRunStore>,
    connections: BTreeMap<String, Connection>,
    audit_dir: tempfile::TempDir,
    base: String,
    metrics: String,
    http: reqwest::Client,
    _stop: Vec<tokio::sync::oneshot::Sender<()>>,
}

impl Env {
    async fn new(recovery_only: bool) -> Env {
        Env::on(recovery_only, Arc::new(MemoryRunStore::new())).await
    }

    /// An instance on `store` (shared with another instance). Each instance
    /// starts its own fakes, so its connections' `baseUrl` and token
    /// endpoint differ from another instance's: another binding.
    async fn on(recovery_only: bool, store: Arc<MemoryRunStore>) -> Env {
        Env::serve(
            ops_support::start("db-ops-1", recovery_only, store.clone()).await,
            store,
        )
        .await
    }

    /// This instance's process restarted (its store, fakes and bindings),
    /// with or without `--recovery-only`.
    async fn restarted(&self, recovery_only: bool) -> Env {
        Env::serve(
            ops_support::start_with(
                self.fakes.clone(),
                "db-ops-1",
                recovery_only,
                self.store.clone(),
            )
            .await,
            self.store.clone(),
        )
        .await
    }

    async fn serve(instance: Instance, store: Arc<MemoryRunStore>) -> Env {
        let Instance {
            fakes,
            issuer,
            casework,
            messaging,
            engine,
            connections,
            audit_dir,
            base,
            stop: tx,
            clock: _,
        } = instance;
        let mlistener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let metrics = format!("http://{}/metrics", mlistener.local_addr().unwrap());
        let (mtx, mrx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(coordinator::metrics::serve(
            mlistener,
            engine.clone(),
            store.clone(),
            async move {
                let _ = mrx.await;
            },
        ));
        Env {
            fakes,
            issuer,
            casework,
            _messaging: messaging,
            engine,
            store,
            connections,
            audit_dir,
            base,
            metrics,
            http: reqwest::Client::new(),
            _stop: vec![tx, mtx],
        }
    }

    fn token(&self, client: &str) -> String {
        self.issuer.mint(&Mint::new(client, AUDIENCE))
    }

    async fn call(&self, client: Option<&str>, path: &str, body: Option<Value>) -> (u16, Value) {
        let url = format!("{}{path}", self.base);
        let mut r = match &body {
            Some(b) => self
                .http
                .post(url)
                .header("content-type", "application/json")
                .body(b.to_string()),
            None => self.http.get(url),
        };
        if let Some(c) = client {
            r = r.bearer_auth(self.token(c));
        }
        let resp = r.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    async fn start(&self, key: &str) -> (u16, Value) {
        let revision = self.engine.admission.active_revisions()["reviewed-notice"].clone();
        let url = format!("{}/v1/runs", self.base);
        let resp = self
            .http
            .post(url)
            .bearer_auth(self.token(PRODUCER))
            .header("idempotency-key", key)
            .header("content-type", "application/json")
            .body(
                json!({"workflow": "reviewed-notice", "revision": revision,
                       "input": {"applicationId": "app-7", "applicantEmail": EMAIL}})
                .to_string(),
            )
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (
            status,
            serde_json::from_str(&resp.text().await.unwrap()).unwrap(),
        )
    }

    /// A run whose Casework submission was reset after the request was
    /// read: effect `unknown`, run `attention`.
    async fn uncertain_run(&self, key: &str) -> String {
        self.casework
            .fake()
            .script("/v1/review-requests", [Reply::Reset]);
        let (s, run) = self.start(key).await;
        assert_eq!(s, 201, "{run}");
        self.engine.worker.run_until_idle(10).await.unwrap();
        let id = run["run"].as_str().unwrap().to_owned();
        let (_, status) = self
            .call(Some(OPERATOR), &format!("/v1/runs/{id}"), None)
            .await;
        assert_eq!(status["state"], "attention", "{status}");
        id
    }

    fn journal(&self) -> Vec<Value> {
        let files = journal_files(&self.audit_dir.path().join("audit.jsonl")).unwrap();
        assert_eq!(files.len(), 1);
        let text = std::fs::read_to_string(&files[0]).unwrap();
        assert!(!text.contains(EMAIL), "the journal holds an input value");
        assert!(!text.contains("app-7"), "the journal holds an input value");
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

#[tokio::test]
async fn doctor_reports_readiness_holds_and_uncertain_runs() {
    let env = Env::new(false).await;
    let (s, d) = env.call(Some(OPERATOR), "/v1/doctor", None).await;
    assert_eq!(s, 200, "{d}");
    assert_eq!(d["version"]["package"], env!("CARGO_PKG_VERSION"), "{d}");
    assert_eq!(
        d["version"]["sourceRevision"],
        coordinator::version::SOURCE_REVISION,
        "{d}"
    );
    assert_eq!(d["activationReady"], true);
    assert_eq!(d["recoveryOnly"], false);
    assert_eq!(d["state"]["auditReady"], true);
    assert_eq!(d["state"]["storeReady"], true);
    assert_eq!(d["state"]["uncertain"], 0);
    assert_eq!(d["holds"]["restore"], false);
    assert_eq!(d["holds"]["admission"], false);
    // No clock measured in process: unknown, in service.
    assert_eq!(
        d["clock"],
        json!({"offsetSeconds": null, "outOfService": false})
    );
    env.engine.health.set_clock_standing(-2.5, false);
    let (_, d) = env.call(Some(OPERATOR), "/v1/doctor", None).await;
    assert_eq!(
        d["clock"],
        json!({"offsetSeconds": -2.5, "outOfService": true})
    );
    env.engine.health.set_clock_standing(0.0, true);

    env.uncertain_run("k-1").await;
    let (_, d) = env.call(Some(OPERATOR), "/v1/doctor", None).await;
    assert_eq!(d["state"]["uncertain"], 1, "{d}");
    assert_eq!(d["state"]["attention"], 1, "{d}");

    // With the store down, what only the store knows is unknown (null),
    // activationReady included: not false.
    env.store.set_unavailable(true);
    let (s, d) = env.call(Some(OPERATOR), "/v1/doctor", None).await;
    assert_eq!(s, 200, "{d}");
    assert_eq!(d["state"]["storeReady"], false, "{d}");
    assert_eq!(d["activationReady"], Value::Null, "{d}");
    assert_eq!(d["state"]["uncertain"], Value::Null, "{d}");
    env.store.set_unavailable(false);
    let (_, d) = env.call(Some(OPERATOR), "/v1/doctor", None).await;
    assert_eq!(d["activationReady"], true, "{d}");

    let (s, p) = env.call(Some(PRODUCER), "/v1/doctor", None).await;
    assert_eq!(
        (s, p["code"].as_str()),
        (403, Some("authorization.refused"))
    );
    let (s, p) = env.call(None, "/v1/doctor", None).await;
    assert_eq!(
        (s, p["code"].as_str()),
        (401, Some("authentication.refused"))
    );
}

#[tokio::test]
async fn restore_sequence_holds_execution_and_admissions() {
    let env = Env::new(false).await;
    let uncertain = env.uncertain_run("k-1").await;
    let reason = json!({"reason": "incident-2026-10-12"});
    let execution = json!({"recoveryReference": "incident-2026-10-12",
        "executionHistoryComplete": true, "priorDeploymentFenced": true});
    let admission = json!({"recoveryReference": "incident-2026-10-12",
        "admissionHistoryComplete": true, "priorDeploymentFenced": true});
    // seed 000 "Restore from a backup": the operator works from a
    // `--recovery-only` instance on the same store until the hold is
    // released, then starts an ordinary one.
    let recovery = env.restarted(true).await;
    let post = |path: &'static str, body: Value| {
        let recovery = &recovery;
        async move { recovery.call(Some(OPERATOR), path, Some(body)).await }
    };
    let code = |(s, p): (u16, Value)| (s, p["code"].as_str().map(str::to_owned));
    let refused = |code: &str| (409, Some(code.to_owned()));

    // Out of order before any hold.
    assert_eq!(
        code(post("/v1/release-restore-hold", reason.clone()).await),
        refused("restore.hold-required")
    );
    assert_eq!(
        code(post("/v1/complete-execution-recovery", execution.clone()).await),
        refused("restore.hold-required")
    );

    // A run admitted before the hold whose first command (the Casework
    // submission) is prepared but not yet dispatched: in a restored
    // database, the old deployment may have sent it after the backup.
    let (s, before) = env.start("k-2").await;
    assert_eq!(s, 201);
    let before = before["run"].as_str().unwrap().to_owned();

    let (s, h) = post("/v1/restore-hold", reason.clone()).await;
    assert_eq!(s, 200, "{h}");
    assert_eq!(
        h,
        json!({"restore": true, "admission": true, "executionRecoveryCompleted": false,
               "restoreEpoch": 1})
    );
    // The restored prepared command is held back for review: the run waits
    // in attention with the effect unknown, and its step says why.
    let (_, st) = recovery
        .call(Some(OPERATOR), &format!("/v1/runs/{before}/inspect"), None)
        .await;
    assert_eq!(st["status"]["state"], "attention", "{st}");
    assert_eq!(st["status"]["review"], "required", "{st}");
    let submit = st["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["restored"] == true)
        .cloned()
        .unwrap_or_else(|| panic!("no restored step: {st}"));
    assert_eq!(submit["effect"], "unknown", "{st}");
    let (_, listed) = recovery
        .call(Some(OPERATOR), "/v1/runs?attention=true", None)
        .await;
    let listed: Vec<&str> = listed["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [before.as_str(), uncertain.as_str()]);
    let (_, d) = recovery.call(Some(OPERATOR), "/v1/doctor", None).await;
    assert_eq!(d["state"]["reviewRequired"], 1, "{d}");
    assert_eq!(d["state"]["uncertain"], 2, "{d}");
    // No dispatch while held.
    assert_eq!(recovery.engine.worker.run_until_idle(5).await.unwrap(), 0);
    assert_eq!(
        env.casework.fake().requests_to("/v1/review-requests").len(),
        1
    );
    // No admission, no retry-same.
    let (s, p) = env.start("k-3").await;
    assert_eq!((s, p["code"].as_str()), (409, Some("admission.held")));
    let (s, p) = recovery
        .call(
            Some(OPERATOR),
            &format!("/v1/runs/{uncertain}/retry-same"),
            Some(reason.clone()),
        )
        .await;
    assert_eq!((s, p["code"].as_str()), (409, Some("execution.held")));
    // A Casework submission has no receipt: reconcile cannot review it.
    let (s, p) = recovery
        .call(
            Some(OPERATOR),
            &format!("/v1/runs/{before}/reconcile"),
            Some(reason.clone()),
        )
        .await;
    assert_eq!(
        (s, p["code"].as_str()),
        (409, Some("reconcile.unsupported"))
    );
    // Admissions cannot reopen before the restore hold is released.
    assert_eq!(
        code(post("/v1/release-admission-hold", admission.clone()).await),
        refused("restore.unresolved")
    );
    // The unreviewed restored command blocks the release first...
    assert_eq!(
        code(post("/v1/release-restore-hold", reason.clone()).await),
        refused("restore.review-required")
    );
    // ... until the operator attests the history.
    let (s, p) = post(
        "/v1/complete-execution-recovery",
        json!({"recoveryReference": "r", "executionHistoryComplete": false, "priorDeploymentFenced": true}),
    )
    .await;
    assert_eq!((s, p["code"].as_str()), (400, Some("request.invalid")));
    let (s, h) = post("/v1/complete-execution-recovery", execution).await;
    assert_eq!(
        (s, h["executionRecoveryCompleted"].as_bool()),
        (200, Some(true))
    );
    let (s, h) = post("/v1/release-restore-hold", reason.clone()).await;
    assert_eq!(s, 200, "{h}");
    assert_eq!(
        h,
        json!({"restore": false, "admission": true, "executionRecoveryCompleted": false,
               "restoreEpoch": 1})
    );
    // The ordinary service starts again. The attested run stays held: its
    // restored command is never sent by itself, even after the release.
    let ordinary = env.restarted(false).await;
    let (_, st) = ordinary
        .call(Some(OPERATOR), &format!("/v1/runs/{before}"), None)
        .await;
    assert_eq!(
        (st["state"].as_str(), st["review"].as_str()),
        (Some("attention"), Some("attested")),
        "{st}"
    );
    ordinary.engine.worker.run_until_idle(10).await.unwrap();
    assert_eq!(
        env.casework.fake().requests_to("/v1/review-requests").len(),
        1
    );
    // retry-same resends it, with its original key, now that the hold is
    // released.
    let (s, st) = ordinary
        .call(
            Some(OPERATOR),
            &format!("/v1/runs/{before}/retry-same"),
            Some(reason.clone()),
        )
        .await;
    assert_eq!(s, 200, "{st}");
    ordinary.engine.worker.run_until_idle(10).await.unwrap();
    let sent = env.casework.fake().requests_to("/v1/review-requests");
    assert_eq!(sent.len(), 2);
    let (_, st) = ordinary
        .call(Some(OPERATOR), &format!("/v1/runs/{before}"), None)
        .await;
    assert_eq!(st["state"], "running", "{st}");
    // Still no admissions until the admission hold is released.
    let (s, _) = ordinary.start("k-3").await;
    assert_eq!(s, 409);
    let (s, p) = ordinary
        .call(
            Some(PRODUCER),
            "/v1/release-admission-hold",
            Some(admission.clone()),
        )
        .await;
    assert_eq!(
        (s, p["code"].as_str()),
        (403, Some("authorization.refused"))
    );
    let (s, h) = ordinary
        .call(
            Some(OPERATOR),
            "/v1/release-admission-hold",
            Some(admission),
        )
        .await;
    assert_eq!(s, 200, "{h}");
    assert_eq!(h["admission"], false);
    let (s, _) = ordinary.start("k-3").await;
    assert_eq!(s, 201);

    // Each process journals what it answered (and doctor's probes).
    let actions = |e: &Env| -> Vec<String> {
        e.journal()
            .iter()
            .map(|l| l["action"].as_str().unwrap().to_owned())
            .filter(|a| a != "audit.probe")
            .collect()
    };
    assert_eq!(actions(&env), ["run.admit", "run.admit"]);
    assert_eq!(
        actions(&recovery),
        [
            "restore.hold",
            "restore.complete-execution-recovery",
            "restore.release",
        ]
    );
    assert_eq!(
        actions(&ordinary),
        [
            "run.retry-same",
            "restore.release-admission-hold",
            "run.admit"
        ]
    );
}

/// Under the restore hold a run's review is recorded by the action that
/// settles it: a cancel that dispatches nothing reviews it (`cancelled`)
/// and lets the hold go; the release is then refused only for the unknown
/// effect of another run (`restore.unresolved`).
#[tokio::test]
async fn a_cancel_reviews_a_restored_command_and_unknown_effects_stay_unresolved() {
    let env = Env::new(false).await;
    let uncertain = env.uncertain_run("k-1").await;
    let (s, before) = env.start("k-2").await;
    assert_eq!(s, 201);
    let before = before["run"].as_str().unwrap().to_owned();
    let reason = json!({"reason": "incident-7"});
    let env = env.restarted(true).await;
    let (s, _) = env
        .call(Some(OPERATOR), "/v1/restore-hold", Some(reason.clone()))
        .await;
    assert_eq!(s, 200);
    let (s, st) = env
        .call(
            Some(OPERATOR),
            &format!("/v1/runs/{before}/cancel"),
            Some(reason.clone()),
        )
        .await;
    assert_eq!(s, 200, "{st}");
    assert_eq!(st["review"], "cancelled", "{st}");
    assert_eq!(st["state"], "cancelled", "{st}");
    let (s, p) = env
        .call(
            Some(OPERATOR),
            "/v1/release-restore-hold",
            Some(reason.clone()),
        )
        .await;
    assert_eq!(
        (s, p["code"].as_str()),
        (409, Some("restore.unresolved")),
        "{p}"
    );
    // The uncertain run predates the hold: nothing marks it for review,
    // but its unknown effect must be settled.
    let (_, st) = env
        .call(Some(OPERATOR), &format!("/v1/runs/{uncertain}"), None)
        .await;
    assert!(st.get("review").is_none(), "{st}");
    let (s, _) = env
        .call(
            Some(OPERATOR),
            &format!("/v1/runs/{uncertain}/cancel"),
            Some(reason.clone()),
        )
        .await;
    assert_eq!(s, 200);
    let (s, h) = env
        .call(Some(OPERATOR), "/v1/release-restore-hold", Some(reason))
        .await;
    assert_eq!(s, 200, "{h}");
    assert_eq!(
        env.casework.fake().requests_to("/v1/review-requests").len(),
        1,
        "nothing was sent for either run"
    );
}

/// A process that started before the restore hold was placed is fenced:
/// its next lease is refused (`restore.lease-incompatible`), it does no
/// more work, and a recovery action through it is refused with that code.
/// A process started after the hold works under the new epoch.
#[tokio::test]
async fn a_process_that_predates_the_restore_hold_is_fenced() {
    let old = Env::new(false).await;
    assert_eq!(old.engine.worker.adopt_restore_epoch().await.unwrap(), 0);
    let recovery = old.restarted(true).await;
    let (s, _) = recovery
        .call(
            Some(OPERATOR),
            "/v1/restore-hold",
            Some(json!({"reason": "r-1"})),
        )
        .await;
    assert_eq!(s, 200);
    let refused = old.engine.worker.tick().await;
    assert!(
        matches!(
            refused,
            Err(coordinator_ports::StoreError::LeaseIncompatible {
                process: 0,
                store: 1
            })
        ),
        "{refused:?}"
    );
    assert!(old.engine.health.fenced());
    assert_eq!(
        old.engine.worker.tick().await.unwrap(),
        0,
        "a fenced engine leases nothing"
    );
    // Released, the hold no longer stops anyone, but the old process stays
    // fenced; a process started now works.
    for (path, body) in [
        ("/v1/release-restore-hold", json!({"reason": "r-1"})),
        (
            "/v1/release-admission-hold",
            json!({"recoveryReference": "r-1", "admissionHistoryComplete": true,
                   "priorDeploymentFenced": true}),
        ),
    ] {
        let (s, p) = recovery.call(Some(OPERATOR), path, Some(body)).await;
        assert_eq!(s, 200, "{path}: {p}");
    }
    let new = old.restarted(false).await;
    assert_eq!(new.engine.worker.adopt_restore_epoch().await.unwrap(), 1);
    let uncertain = new.uncertain_run("k-9").await;
    assert!(!new.engine.health.fenced());
    let (s, p) = old
        .call(
            Some(OPERATOR),
            &format!("/v1/runs/{uncertain}/cancel"),
            Some(json!({"reason": "r-1"})),
        )
        .await;
    assert_eq!(
        (s, p["code"].as_str()),
        (409, Some("restore.lease-incompatible")),
        "{p}"
    );
    assert_eq!(old.engine.worker.tick().await.unwrap(), 0);
}

/// seed 000 "Change the workflows": after an apply changed the active
/// packages, a service that was not restarted refuses every new start with
/// `deployment.activation-changed` and its doctor says `activationReady:
/// false`; a repeated start of an admitted run still answers 200 with
/// that run, as it does under the admission hold and on a
/// `--recovery-only` instance: the key lookup comes first.
#[tokio::test]
async fn a_repeated_start_finds_its_run_whatever_refuses_new_starts() {
    let store = Arc::new(MemoryRunStore::new());
    let env = Env::on(false, store.clone()).await;
    let (s, first) = env.start("k-1").await;
    assert_eq!(s, 201, "{first}");
    let run = first["run"].clone();

    store.change_activation();
    let (s, p) = env.start("k-2").await;
    assert_eq!(
        (s, p["code"].as_str()),
        (409, Some("deployment.activation-changed")),
        "{p}"
    );
    let (s, again) = env.start("k-1").await;
    assert_eq!((s, &again["run"]), (200, &run), "{again}");
    let (_, d) = env.call(Some(OPERATOR), "/v1/doctor", None).await;
    assert_eq!(d["activationReady"], false, "{d}");

    let fresh = Arc::new(MemoryRunStore::new());
    let env = Env::on(false, fresh.clone()).await;
    let (s, first) = env.start("k-1").await;
    assert_eq!(s, 201);
    let (s, _) = env
        .call(
            Some(OPERATOR),
            "/v1/restore-hold",
            Some(json!({"reason": "r-1"})),
        )
        .await;
    assert_eq!(s, 200);
    let (s, again) = env.start("k-1").await;
    assert_eq!((s, &again["run"]), (200, &first["run"]), "{again}");
    let (s, p) = env.start("k-2").await;
    assert_eq!((s, p["code"].as_str()), (409, Some("admission.held")));

    let recovery = env.restarted(true).await;
    let (s, again) = recovery.start("k-1").await;
    assert_eq!((s, &again["run"]), (200, &first["run"]), "{again}");
    let (s, p) = recovery.start("k-2").await;
    assert_eq!(
        (s, p["code"].as_str()),
        (409, Some("admission.recovery-only"))
    );
}

#[tokio::test]
async fn audit_journal_has_one_keyed_line_per_audited_action() {
    let env = Env::new(false).await;
    let (s, run) = env.start("k-1").await;
    assert_eq!(s, 201);
    let id = run["run"].as_str().unwrap().to_owned();
    // A repeat of the same admission is audited as `existing`.
    let (s, _) = env.start("k-1").await;
    assert_eq!(s, 200);
    let (s, _) = env
        .call(
            Some(PRODUCER),
            &format!("/v1/runs/{id}/cancel"),
            Some(json!({"reason": "ticket-42"})),
        )
        .await;
    assert_eq!(
        s, 403,
        "the producer policy lacks cancel: refused, not audited"
    );
    let lines = env.journal();
    assert_eq!(lines.len(), 2, "{lines:?}");
    let (s, _) = env
        .call(
            Some(OPERATOR),
            &format!("/v1/runs/{id}/cancel"),
            Some(json!({"reason": "ticket-42"})),
        )
        .await;
    assert_eq!(s, 200);
    let (s, _) = env
        .call(Some(OPERATOR), &format!("/v1/runs/{id}"), None)
        .await;
    assert_eq!(s, 200, "reads are not audited");
    let lines = env.journal();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0]["action"], "run.admit");
    assert_eq!(lines[0]["outcome"], "created");
    assert_eq!(lines[1]["outcome"], "existing");
    assert_eq!(lines[2]["action"], "run.cancel");
    let key = AuditKey::new(&[9u8; 32]).unwrap();
    assert_eq!(lines[0]["references"]["run"], key.reference("run", &id));
    assert_eq!(lines[2]["references"]["run"], key.reference("run", &id));
    assert_eq!(
        lines[2]["references"]["reason"],
        key.reference("reason", "ticket-42")
    );
    let text = lines
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    for raw in [id.as_str(), "ticket-42", PRODUCER, OPERATOR] {
        assert!(!text.contains(raw), "raw `{raw}` in the journal");
    }
}

#[tokio::test]
async fn recovery_only_admits_nothing_and_dispatches_nothing() {
    let env = Env::new(true).await;
    let (s, p) = env.start("k-1").await;
    assert_eq!(
        (s, p["code"].as_str()),
        (409, Some("admission.recovery-only"))
    );
    let (_, d) = env.call(Some(OPERATOR), "/v1/doctor", None).await;
    assert_eq!(d["recoveryOnly"], true);
    assert_eq!(env.engine.worker.tick().await.unwrap(), 0);
    // Recovery operations are served.
    let (s, _) = env
        .call(
            Some(OPERATOR),
            "/v1/restore-hold",
            Some(json!({"reason": "r-1"})),
        )
        .await;
    assert_eq!(s, 200);
}

/// seed 000 "Apply and start": startup refuses a runtime file that changed
/// a live run's connection binding, unless `--recovery-only`; there,
/// `retry-same` and `reconcile` of such a run answer 409
/// `binding.live-conflict` and `cancel` is served.
#[tokio::test]
async fn a_changed_binding_refuses_startup_and_recovery_actions() {
    let first = Env::new(false).await;
    let id = first.uncertain_run("k-bound").await;
    let run = first.engine.operator.get(&id).await.unwrap().unwrap();
    assert_eq!(
        run.bindings.keys().collect::<Vec<_>>(),
        ["notices", "review"],
        "each connection the Program uses is recorded"
    );
    // The same runtime file: startup serves.
    assert_eq!(
        check_bindings(first.store.as_ref(), &first.connections, false).await,
        Ok(BindingStartup::Serve)
    );

    // Another runtime file (other endpoints) on the same database.
    let second = Env::on(true, first.store.clone()).await;
    let conflicts = |runs| {
        ["notices", "review"]
            .map(|c| BindingConflict {
                connection: c.into(),
                runs,
                missing: false,
            })
            .to_vec()
    };
    assert_eq!(
        check_bindings(second.store.as_ref(), &second.connections, false).await,
        Ok(BindingStartup::Refuse(conflicts(1))),
        "startup refuses"
    );
    assert_eq!(
        check_bindings(second.store.as_ref(), &second.connections, true).await,
        Ok(BindingStartup::RecoveryOnly(conflicts(1))),
        "--recovery-only starts"
    );
    // A timeout is not part of the binding.
    let mut slower = first.connections.clone();
    if let Some(Connection::Messaging(m)) = slower.get_mut("notices") {
        m.request_timeout_milliseconds = Some(60_000);
    }
    assert_eq!(
        check_bindings(first.store.as_ref(), &slower, false).await,
        Ok(BindingStartup::Serve)
    );

    let reason = Some(json!({"reason": "ticket-7"}));
    for action in ["retry-same", "reconcile"] {
        let (s, p) = second
            .call(
                Some(OPERATOR),
                &format!("/v1/runs/{id}/{action}"),
                reason.clone(),
            )
            .await;
        assert_eq!(
            (s, p["code"].as_str()),
            (409, Some("binding.live-conflict")),
            "{action}: {p}"
        );
        assert!(
            p["detail"].as_str().unwrap_or("").contains("`notices`"),
            "{p}"
        );
    }
    let after = second.engine.operator.get(&id).await.unwrap().unwrap();
    assert_eq!(
        after.version, run.version,
        "a refused action changes nothing"
    );
    // Inspection and cancel are served.
    let (s, _) = second
        .call(Some(OPERATOR), &format!("/v1/runs/{id}/inspect"), None)
        .await;
    assert_eq!(s, 200);
    let (s, p) = second
        .call(
            Some(OPERATOR),
            &format!("/v1/runs/{id}/cancel"),
            reason.clone(),
        )
        .await;
    assert_eq!(s, 200, "{p}");
    // The instance with the original file is not refused.
    let (s, p) = first
        .call(Some(OPERATOR), &format!("/v1/runs/{id}/reconcile"), reason)
        .await;
    assert_ne!(p["code"], "binding.live-conflict", "{s} {p}");
}

#[tokio::test]
async fn retention_erases_ended_payloads_only_and_is_audited() {
    let env = Env::new(false).await;
    let held = env.uncertain_run("k-held").await;
    // A run that ended at 09:00:00 (cancelled while its first call was out).
    let (s, run) = env.start("k-1").await;
    assert_eq!(s, 201);
    let id = run["run"].as_str().unwrap().to_owned();
    let reason = json!({"reason": "ticket-42"});
    let (s, _) = env
        .call(
            Some(OPERATOR),
            &format!("/v1/runs/{id}/cancel"),
            Some(reason.clone()),
        )
        .await;
    assert_eq!(s, 200);
    env.engine.worker.run_until_idle(10).await.unwrap();
    let (_, st) = env
        .call(Some(OPERATOR), &format!("/v1/runs/{id}"), None)
        .await;
    let ended = st["state"].as_str().unwrap().to_owned();
    assert!(ended.starts_with("cancelled"), "{st}");
    assert!(st.get("payloadErased").is_none(), "absent until erased");

    // Refusals: not an operator, a bad cutoff, a limit out of range.
    let ok = json!({"before": "2026-03-02T09:00:01Z", "limit": 100});
    let (s, p) = env
        .call(Some(PRODUCER), "/v1/retention", Some(ok.clone()))
        .await;
    assert_eq!(
        (s, p["code"].as_str()),
        (403, Some("authorization.refused"))
    );
    for bad in [
        json!({"before": "yesterday", "limit": 10}),
        json!({"before": "2026-03-02T09:00:01Z", "limit": 0}),
        json!({"before": "2026-03-02T09:00:01Z", "limit": 101}),
        json!({"before": "2026-03-02T09:00:01Z"}),
    ] {
        let (s, p) = env.call(Some(OPERATOR), "/v1/retention", Some(bad)).await;
        assert_eq!((s, p["code"].as_str()), (400, Some("request.invalid")));
    }

    // A cutoff before the run ended erases nothing.
    let (s, r) = env
        .call(
            Some(OPERATOR),
            "/v1/retention",
            Some(json!({"before": "2026-03-02T09:00:00Z", "limit": 100})),
        )
        .await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(
        r,
        json!({"erased": 0, "more": false, "before": "2026-03-02T09:00:00Z"})
    );
    let (s, r) = env
        .call(Some(OPERATOR), "/v1/retention", Some(ok.clone()))
        .await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(
        (r["erased"].as_u64(), r["more"].as_bool()),
        (Some(1), Some(false))
    );

    // Status, inspect and list still answer; the payload is gone.
    let (s, st) = env
        .call(Some(OPERATOR), &format!("/v1/runs/{id}"), None)
        .await;
    assert_eq!(s, 200, "{st}");
    assert_eq!(st["state"], ended.as_str());
    assert_eq!(st["payloadErased"], true);
    assert_eq!(st["output"], Value::Null);
    assert_eq!(st["workflow"], "reviewed-notice");
    assert_eq!(st["endedAt"], "2026-03-02T09:00:00Z");
    let (s, st) = env
        .call(Some(PRODUCER), &format!("/v1/runs/{id}"), None)
        .await;
    assert_eq!(
        (s, st["payloadErased"].as_bool()),
        (200, Some(true)),
        "its owner still sees it"
    );
    let (s, ins) = env
        .call(Some(OPERATOR), &format!("/v1/runs/{id}/inspect"), None)
        .await;
    assert_eq!(s, 200, "{ins}");
    assert_eq!(ins["steps"], json!([]));
    assert_eq!(ins["status"]["payloadErased"], true);
    let (s, list) = env.call(Some(OPERATOR), "/v1/runs", None).await;
    assert_eq!(s, 200);
    assert_eq!(list["runs"].as_array().unwrap().len(), 2);

    // An erased run can no longer be retried or reconciled.
    for action in ["retry-same", "reconcile"] {
        let (s, p) = env
            .call(
                Some(OPERATOR),
                &format!("/v1/runs/{id}/{action}"),
                Some(reason.clone()),
            )
            .await;
        assert_eq!(
            (s, p["code"].as_str()),
            (409, Some("run.payload-erased")),
            "{action}: {p}"
        );
    }
    // A repeated start key answers with the erased run, never a second one.
    let (s, again) = env.start("k-1").await;
    assert_eq!((s, again["run"].as_str()), (200, Some(id.as_str())));
    assert_eq!(again["payloadErased"], true);

    // The held run with an unknown effect is untouched.
    let (_, st) = env
        .call(Some(OPERATOR), &format!("/v1/runs/{held}"), None)
        .await;
    assert_eq!(st["state"], "attention");
    assert!(st.get("payloadErased").is_none());

    // One audit line per call, refusals not audited.
    let lines = env.journal();
    let retention: Vec<&Value> = lines
        .iter()
        .filter(|l| l["action"] == "retention.erase")
        .collect();
    assert_eq!(retention.len(), 2, "{lines:?}");
    assert_eq!(retention[1]["facts"]["erased"], 1);
    assert_eq!(retention[1]["facts"]["more"], false);
    assert_eq!(retention[1]["facts"]["before"], "2026-03-02T09:00:01Z");
    assert!(retention[1]["references"]["principal"].is_string());
    assert!(!retention[1].to_string().contains(OPERATOR));
}

#[tokio::test]
async fn metrics_are_prometheus_text_without_run_labels() {
    let env = Env::new(false).await;
    let id = env.uncertain_run("k-1").await;
    let (s, _) = env.start("k-2").await;
    assert_eq!(s, 201);
    let resp = env.http.get(&env.metrics).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain; version=0.0.4"));
    let text = resp.text().await.unwrap();
    for line in [
        "# TYPE coordinator_dispatch_jobs gauge",
        // The second run's first call was leased to this process as it
        // was admitted (handed to a worker lane, none running here).
        "coordinator_dispatch_jobs{state=\"leased\"} 1",
        "coordinator_dispatch_jobs{state=\"ready\"} 0",
        "coordinator_dispatch_jobs{state=\"sending\"} 0",
        "coordinator_admissions_total{outcome=\"created\"} 2",
        "coordinator_dispatch_attempts_total{result=\"uncertain\"} 1",
        "coordinator_runs{state=\"attention\"} 1",
        "coordinator_runs{state=\"running\"} 1",
        "coordinator_waits{kind=\"wait-for\"} 0",
        "coordinator_uncertain_runs 1",
        "coordinator_store_errors_total 0",
        "coordinator_hold{hold=\"restore\"} 0",
    ] {
        assert!(text.lines().any(|l| l == line), "no `{line}` in\n{text}");
    }
    for forbidden in [id.as_str(), PRODUCER, "run=", "principal="] {
        assert!(!text.contains(forbidden), "`{forbidden}` in metrics");
    }
    // Only the live runs by revision name a workflow (and a revision).
    for l in text.lines().filter(|l| l.contains("reviewed-notice")) {
        assert!(
            l.starts_with("coordinator_live_runs{workflow=\"reviewed-notice\",revision=\"sha256:"),
            "{l}"
        );
    }
    // Every sample line is `name{labels} value` or `name value`.
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let (_, v) = l.rsplit_once(' ').unwrap();
        v.parse::<f64>().unwrap();
    }
    let resp = env
        .http
        .get(env.metrics.replace("/metrics", "/other"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 404);
}

/// The series of docs/operations.md "Metrics": sample name, type, labels
/// (sorted).
const SERIES: [(&str, &str, &[&str]); 11] = [
    ("coordinator_dispatch_jobs", "gauge", &["state"]),
    ("coordinator_runs", "gauge", &["state"]),
    ("coordinator_waits", "gauge", &["kind"]),
    ("coordinator_uncertain_runs", "gauge", &[]),
    ("coordinator_live_runs", "gauge", &["revision", "workflow"]),
    ("coordinator_store_ready", "gauge", &[]),
    ("coordinator_admissions_total", "counter", &["outcome"]),
    (
        "coordinator_dispatch_attempts_total",
        "counter",
        &["result"],
    ),
    ("coordinator_runs_ended_total", "counter", &["state"]),
    ("coordinator_store_errors_total", "counter", &[]),
    ("coordinator_hold", "gauge", &["hold"]),
];

/// Read from the store: absent while it does not answer.
const FROM_STORE: [&str; 5] = [
    "coordinator_dispatch_jobs",
    "coordinator_runs",
    "coordinator_waits",
    "coordinator_uncertain_runs",
    "coordinator_live_runs",
];

/// Parses a Prometheus text 0.0.4 answer whole (`prometheus-parse`): every
/// sample line is read, and every sample is one of [`SERIES`] with its type
/// and label; returns the sample names.
fn parse_prometheus_text(text: &str) -> Vec<String> {
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap();
    let sample_lines = text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .count();
    assert_eq!(
        scrape.samples.len(),
        sample_lines,
        "a line was not read:\n{text}"
    );
    for s in &scrape.samples {
        let (_, kind, label) = SERIES
            .iter()
            .find(|(name, _, _)| *name == s.metric)
            .unwrap_or_else(|| panic!("undocumented series {}", s.metric));
        match (&s.value, *kind) {
            (prometheus_parse::Value::Gauge(_), "gauge")
            | (prometheus_parse::Value::Counter(_), "counter") => {}
            (v, _) => panic!("{} is {v:?}, documented as a {kind}", s.metric),
        }
        let mut keys: Vec<&str> = s.labels.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(&keys, label, "{}", s.metric);
        assert!(
            scrape.docs.contains_key(&s.metric),
            "no HELP for {}",
            s.metric
        );
    }
    scrape.samples.into_iter().map(|s| s.metric).collect()
}

/// Checks an OpenMetrics 1.0.0 answer: a `# TYPE` line per family present
/// (a counter's family named without `_total`, its samples with it), every
/// sample line of a typed family, and `# EOF` once, last.
fn check_openmetrics(text: &str) -> Vec<String> {
    assert!(text.ends_with("\n# EOF\n"), "{text}");
    assert_eq!(text.matches("# EOF").count(), 1, "{text}");
    let mut seen = Vec::new();
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let name = l.split(['{', ' ']).next().unwrap();
        let (_, kind, _) = SERIES
            .iter()
            .find(|(n, _, _)| *n == name)
            .unwrap_or_else(|| panic!("undocumented series {name}"));
        let family = name.strip_suffix("_total").unwrap_or(name);
        assert!(
            text.lines().any(|t| t == format!("# TYPE {family} {kind}")),
            "no `# TYPE {family} {kind}` in\n{text}"
        );
        let (_, v) = l.rsplit_once(' ').unwrap();
        v.parse::<f64>().unwrap();
        seen.push(name.to_owned());
    }
    seen
}

/// `coordinator_live_runs`: the active revision with its runs that have
/// not ended; a run moved to another revision (committed by the store's
/// move, as the operator's move does) counts there and no more on the
/// active one; a revision whose last live run ended leaves the exposition
/// while the active one stays, at 0 once drained.
#[tokio::test]
async fn live_runs_are_counted_by_revision_and_follow_a_move() {
    use coordinator_ports::{Commit, JobQueue, RunMove, RunMoves, RunReads};
    let env = Env::new(false).await;
    let active = env.engine.admission.active_revisions()["reviewed-notice"].clone();
    let other = format!("sha256:{}", "b".repeat(64));
    let sample = |revision: &str, n: u64| {
        format!("coordinator_live_runs{{workflow=\"reviewed-notice\",revision=\"{revision}\"}} {n}")
    };
    let scrape = || async {
        let text = env
            .http
            .get(&env.metrics)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .filter(|l| l.starts_with("coordinator_live_runs{"))
            .map(str::to_owned)
            .collect::<Vec<String>>()
    };
    assert_eq!(scrape().await, [sample(&active, 0)], "no run yet");
    let mut ids = Vec::new();
    for key in ["k-1", "k-2"] {
        let (s, run) = env.start(key).await;
        assert_eq!(s, 201, "{run}");
        ids.push(run["run"].as_str().unwrap().to_owned());
    }
    assert_eq!(scrape().await, [sample(&active, 2)]);

    let moved = env.store.get(&ids[0]).await.unwrap().unwrap();
    let version = env
        .store
        .commit_move(&RunMove {
            run_id: moved.id.clone(),
            at: moved.state.now,
            expected_version: moved.version,
            from_revision: active.clone(),
            to_revision: other.clone(),
            from_step: "submit-review".into(),
            to_step: "submit-review".into(),
            state: moved.state.clone(),
            ledger: moved.ledger.clone(),
            bindings: moved.bindings.clone(),
        })
        .await
        .unwrap();
    let mut expected = [sample(&active, 1), sample(&other, 1)];
    expected.sort();
    assert_eq!(
        scrape().await,
        expected,
        "the moved run counts on its new revision"
    );

    let mut ended = moved.state.clone();
    ended.status = coordinator_vm::RunStatus::Cancelled;
    ended.ended_at = Some(ended.now);
    env.store
        .commit(Commit {
            review: None,
            run_id: moved.id.clone(),
            expected_version: version,
            at: ended.now,
            state: ended,
            ledger: moved.ledger.clone(),
            complete: None,
            jobs: vec![],
        })
        .await
        .unwrap();
    assert_eq!(
        scrape().await,
        [sample(&active, 1)],
        "a drained revision leaves"
    );
}

#[tokio::test]
async fn metrics_parse_whole_in_both_text_formats() {
    let env = Env::new(false).await;
    env.uncertain_run("k-1").await;
    let scrape = |openmetrics: bool| {
        let mut request = env.http.get(&env.metrics);
        if openmetrics {
            // Prometheus's own Accept header.
            request = request.header(
                "accept",
                "application/openmetrics-text;version=1.0.0;q=0.5,\
                 application/openmetrics-text;version=0.0.1;q=0.4,\
                 text/plain;version=0.0.4;q=0.2,*/*;q=0.1",
            );
        }
        async move {
            let resp = request.send().await.unwrap();
            assert_eq!(resp.status().as_u16(), 200);
            let ct = resp.headers()["content-type"].to_str().unwrap().to_owned();
            (ct, resp.text().await.unwrap())
        }
    };

    let (ct, text) = scrape(false).await;
    assert_eq!(ct, "text/plain; version=0.0.4; charset=utf-8");
    let names = parse_prometheus_text(&text);
    for (name, _, _) in SERIES {
        assert!(names.iter().any(|n| n == name), "no {name} in\n{text}");
    }
    assert!(!text.contains("# EOF"), "{text}");

    let (ct, text) = scrape(true).await;
    assert_eq!(
        ct,
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let names = check_openmetrics(&text);
    for (name, _, _) in SERIES {
        assert!(names.iter().any(|n| n == name), "no {name} in\n{text}");
    }
    assert!(text
        .lines()
        .any(|l| l == "# TYPE coordinator_admissions counter"));
    assert!(text
        .lines()
        .any(|l| l == "coordinator_dispatch_attempts_total{result=\"uncertain\"} 1"));

    // The store does not answer: the series read from it are left out, in
    // both formats, and the rest still parses.
    env.store.set_unavailable(true);
    for openmetrics in [false, true] {
        let (_, text) = scrape(openmetrics).await;
        let names = if openmetrics {
            check_openmetrics(&text)
        } else {
            parse_prometheus_text(&text)
        };
        for absent in FROM_STORE {
            assert!(!names.iter().any(|n| n == absent), "{absent} in\n{text}");
        }
        assert!(
            text.lines().any(|l| l == "coordinator_store_ready 0"),
            "{text}"
        );
        // The failed survey counts as a store error.
        let errors = text
            .lines()
            .find_map(|l| l.strip_prefix("coordinator_store_errors_total "))
            .unwrap_or_else(|| panic!("no store errors in\n{text}"));
        assert!(errors.parse::<u64>().unwrap() >= 1, "{text}");
        assert!(names.iter().any(|n| n == "coordinator_hold"), "{text}");
    }
    env.store.set_unavailable(false);
}

/// Edge input: a run id that is no UUID (a NUL byte included) names no run
/// (404, the store is never asked, so no outage is counted), and a
/// `reason` follows the one rule for investigation references (1 to 256
/// visible ASCII characters) on the run actions as on the holds.
#[tokio::test]
async fn run_ids_and_reasons_are_checked_at_the_edge() {
    let env = Env::new(false).await;
    for path in [
        "/v1/runs/%00",
        "/v1/runs/a%00b/inspect",
        "/v1/runs/not-a-run",
    ] {
        let (s, p) = env.call(Some(OPERATOR), path, None).await;
        assert_eq!(
            (s, p["code"].as_str()),
            (404, Some("run.not-found")),
            "{path}: {p}"
        );
    }
    let (s, p) = env
        .call(
            Some(OPERATOR),
            "/v1/runs/%00/cancel",
            Some(json!({"reason": "r-1"})),
        )
        .await;
    assert_eq!((s, p["code"].as_str()), (404, Some("run.not-found")), "{p}");
    assert!(
        env.engine.health.counters().values().store_errors == 0,
        "no store error was counted"
    );
    let run = env.uncertain_run("k-1").await;
    for reason in ["", "a\tb", "инцидент", &"x".repeat(257)] {
        for action in ["cancel", "reconcile"] {
            let (s, p) = env
                .call(
                    Some(OPERATOR),
                    &format!("/v1/runs/{run}/{action}"),
                    Some(json!({ "reason": reason })),
                )
                .await;
            assert_eq!(
                (s, p["code"].as_str()),
                (400, Some("request.invalid")),
                "{action} {reason:?}: {p}"
            );
        }
    }
}

/// The recovery refusals answer their registry codes: a reconcile or a
/// retry-same of a run that is not held is 409 `reconcile.refused` /
/// `retry.refused`; a cancel the VM does not take answers the run
/// unchanged. An audited answer whose journal line cannot be written is
/// 503 `audit.response-unavailable` (the action may have happened).
#[tokio::test]
async fn recovery_refusals_and_an_unwritable_journal_answer_their_codes() {
    let env = Env::new(false).await;
    let (s, run) = env.start("k-1").await;
    assert_eq!(s, 201, "{run}");
    let id = run["run"].as_str().unwrap().to_owned();
    for (action, code) in [
        ("reconcile", "reconcile.refused"),
        ("retry-same", "retry.refused"),
    ] {
        let (s, p) = env
            .call(
                Some(OPERATOR),
                &format!("/v1/runs/{id}/{action}"),
                Some(json!({"reason": "r-1"})),
            )
            .await;
        assert_eq!((s, p["code"].as_str()), (409, Some(code)), "{action}: {p}");
    }
    let full = Env::serve(
        ops_support::start_journaled(
            env.fakes.clone(),
            "db-ops-1",
            false,
            env.store.clone(),
            Some(true),
        )
        .await,
        env.store.clone(),
    )
    .await;
    let (s, p) = full
        .call(
            Some(OPERATOR),
            &format!("/v1/runs/{id}/cancel"),
            Some(json!({"reason": "r-1"})),
        )
        .await;
    assert_eq!(
        (s, p["code"].as_str()),
        (503, Some("audit.response-unavailable")),
        "{p}"
    );
    // The cancel happened (the call in flight is cancelled when it is
    // answered); only its answer was withheld.
    let (_, st) = env
        .call(Some(OPERATOR), &format!("/v1/runs/{id}"), None)
        .await;
    assert_eq!(st["state"], "cancel-requested", "{st}");
    // What the process says of itself is true: doctor's probe finds the
    // journal unwritable, and /ready sends load balancers elsewhere.
    let (s, d) = full.call(Some(OPERATOR), "/v1/doctor", None).await;
    assert_eq!((s, &d["state"]["auditReady"]), (200, &json!(false)), "{d}");
    assert_eq!(
        full.call(None, "/ready", None).await,
        (
            503,
            json!({"ready": false, "reason": "audit.response-unavailable"})
        )
    );
    assert_eq!(
        env.call(None, "/ready", None).await,
        (200, json!({"ready": true}))
    );
}

/// `/ready` stays 200 while a hold is in place and names it: a hold
/// refuses starts (`admission.held`) or dispatches, never the operator's
/// routes, so a probe must not take the only instance out of rotation
/// during a restore (docs/operations.md "Restore from a backup", 7-8).
#[tokio::test]
async fn ready_stays_200_and_names_the_holds_while_they_are_in_place() {
    let env = Env::new(false).await;
    assert_eq!(
        env.call(None, "/ready", None).await,
        (200, json!({"ready": true}))
    );
    let (s, p) = env
        .call(
            Some(OPERATOR),
            "/v1/restore-hold",
            Some(json!({"reason": "r-1"})),
        )
        .await;
    assert_eq!(s, 200, "{p}");
    // The restore hold places the admission hold (this instance runs no
    // worker, so nothing fenced it yet): still ready, the holds named.
    assert_eq!(
        env.call(None, "/ready", None).await,
        (
            200,
            json!({"ready": true, "holds": ["restore", "admission"]})
        )
    );
    let (s, p) = env
        .call(
            Some(OPERATOR),
            "/v1/release-restore-hold",
            Some(json!({"reason": "r-1"})),
        )
        .await;
    assert_eq!(s, 200, "{p}");
    assert_eq!(
        env.call(None, "/ready", None).await,
        (200, json!({"ready": true, "holds": ["admission"]}))
    );
    // Starts are still answered with the hold's problem code, and the
    // gauge and doctor name the hold.
    let (s, p) = env.start("held-after-ready").await;
    assert_eq!(
        (s, p["code"].as_str()),
        (409, Some("admission.held")),
        "{p}"
    );
    let (s, doctor) = env.call(Some(OPERATOR), "/v1/doctor", None).await;
    assert_eq!(s, 200, "{doctor}");
    assert_eq!(doctor["holds"]["admission"], json!(true), "{doctor}");
    assert_eq!(doctor["holds"]["restore"], json!(false), "{doctor}");
    let metrics = env
        .http
        .get(&env.metrics)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("coordinator_hold{hold=\"admission\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("coordinator_hold{hold=\"restore\"} 0"),
        "{metrics}"
    );
}

/// seed 000 "Codes you see" `service.unavailable`: with the audit journal
/// on a file system that fills up, the first audited answer whose line
/// cannot be written is 503 `audit.response-unavailable` (it happened);
/// from then on, while the journal is known to be failing, a start and an
/// operator action (a run action, a hold, retention) are 503
/// `service.unavailable` before anything is done: no run admitted, no
/// cancel, no hold placed. With room made, the journal recovers by itself:
/// `/ready` 200, and the same start key creates its run.
#[tokio::test]
async fn a_journal_on_a_full_file_system_refuses_starts_and_actions_before_anything_is_done() {
    let Some(fs) = small_fs::SmallFileSystem::mount("audit_full_file_system") else {
        return;
    };
    let store = Arc::new(MemoryRunStore::new());
    let journal = AuditJournal::open(&fs.dir.path().join("audit.jsonl")).unwrap();
    let env = Env::serve(
        ops_support::start_with_journal(
            ops_support::Fakes::start().await,
            "db-ops-1",
            false,
            store.clone(),
            (journal, tempfile::tempdir().unwrap()),
            &[ops_support::definition("reviewed-notice")],
        )
        .await,
        store.clone(),
    )
    .await;
    let (s, run) = env.start("k-1").await;
    assert_eq!(s, 201, "{run}");
    let id = run["run"].as_str().unwrap().to_owned();

    // The disk fills: the journal's last page may still take a few lines;
    // the first answer whose line does not fit is withheld.
    fs.fill();
    let mut withheld = None;
    for i in 0..64 {
        let (s, p) = env.start(&format!("fill-{i}")).await;
        if s != 201 {
            withheld = Some((s, p));
            break;
        }
    }
    let (s, p) = withheld.expect("an append failed on the full file system");
    assert_eq!(
        (s, p["code"].as_str()),
        (503, Some("audit.response-unavailable")),
        "{p}"
    );
    let runs = || async {
        let filter = RunFilter {
            limit: 100,
            ..RunFilter::default()
        };
        store.list(&filter).await.unwrap().runs.len()
    };
    let admitted = runs().await;

    // Known to be failing: refused before anything is done.
    let unavailable = |(s, p): (u16, Value)| {
        assert_eq!(
            (s, p["code"].as_str()),
            (503, Some("service.unavailable")),
            "{p}"
        );
    };
    unavailable(env.start("while-full").await);
    assert_eq!(runs().await, admitted, "no run admitted");
    unavailable(
        env.call(
            Some(OPERATOR),
            &format!("/v1/runs/{id}/cancel"),
            Some(json!({"reason": "r-1"})),
        )
        .await,
    );
    let (_, st) = env
        .call(Some(OPERATOR), &format!("/v1/runs/{id}"), None)
        .await;
    assert_eq!(st["state"], "running", "not cancelled: {st}");
    unavailable(
        env.call(
            Some(OPERATOR),
            "/v1/restore-hold",
            Some(json!({"reason": "r-1"})),
        )
        .await,
    );
    unavailable(
        env.call(
            Some(OPERATOR),
            "/v1/retention",
            Some(json!({"before": "2026-03-02T09:00:00Z", "limit": 10})),
        )
        .await,
    );
    let (s, d) = env.call(Some(OPERATOR), "/v1/doctor", None).await;
    assert_eq!(s, 200, "{d}");
    assert_eq!(d["state"]["auditReady"], false, "{d}");
    assert_eq!(d["holds"]["restore"], false, "no hold placed: {d}");
    assert_eq!(
        env.call(None, "/ready", None).await,
        (
            503,
            json!({"ready": false, "reason": "audit.response-unavailable"})
        )
    );

    // Room made: the journal recovers without a restart.
    fs.free();
    assert_eq!(
        env.call(None, "/ready", None).await,
        (200, json!({"ready": true}))
    );
    let (s, p) = env.start("while-full").await;
    assert_eq!(s, 201, "the refused start admitted nothing: {p}");
    let (s, p) = env
        .call(
            Some(OPERATOR),
            &format!("/v1/runs/{id}/cancel"),
            Some(json!({"reason": "r-1"})),
        )
        .await;
    assert_eq!(s, 200, "{p}");
}
