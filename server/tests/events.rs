//! Signed event starts in process (SPEC §2.4, docs/service.md "Event
//! starts"): the real HTTP edge over a real socket, the engine on a manual
//! clock and the in-memory store, the HTTP adapter against the fake BReg,
//! and the `event-follow-up` fixture (tests/fixtures), whose trigger reads
//! `/data/recordId` and `/time`.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use coordinator::auth::{KeySource, Verifier};
use coordinator::events::{sign, EventSources, SIGNATURE_HEADER};
use coordinator::{AppState, Completions};
use coordinator_adapters::{HttpAdapter, MemorySecrets};
use coordinator_engine::{Engine, EngineConfig};
use coordinator_fakes::{FakeBreg, FakeIssuer, KeyKind, Mint, TestKey};
use coordinator_ir::Definition;
use coordinator_ports::{
    Clock, JobQueue, ManualClock, MemoryRunStore, RunFilter, RunReads, StoreError,
};
use coordinator_runtime::config::{
    Authentication, Authorization, BregConnection, Connection, Policy, SecretRef,
};
use coordinator_runtime::keys::AdmissionKey;
use serde_json::{json, Value};

const AUDIENCE: &str = "registry-coordinator";
const PRODUCER: &str = "producer-app";
const OPERATOR: &str = "ops-console";
const WORKFLOW: &str = "event-follow-up";
const TRIGGER: &str = "application-submitted";
const SOURCE_NAME: &str = "breg-applications";
const SOURCE_URI: &str = "https://breg.example.org/applications";
const EVENT_TYPE: &str = "breg.record.created/v1";
const KEY: [u8; 32] = [0x5a; 32];
const START: &str = "2026-03-02T09:00:00Z";

fn definition() -> Definition {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/event-follow-up");
    let compiled = coordinator_compiler::compile_project(&dir, WORKFLOW);
    assert!(!compiled.has_errors(), "{:?}", compiled.diagnostics);
    Definition::new(compiled.program.unwrap())
}

struct Env {
    issuer: FakeIssuer,
    breg: FakeBreg,
    clock: ManualClock,
    store: Arc<MemoryRunStore>,
    engine: Arc<Engine>,
    base: String,
    http: reqwest::Client,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Env {
    async fn new(recovery_only: bool) -> Env {
        let issuer = FakeIssuer::start().await.unwrap();
        let breg = FakeBreg::start().await.unwrap();
        let key = TestKey::generate(KeyKind::Es256, "applications-kid");
        issuer.register_client("coordinator-applications", key.public_jwk.clone(), None);
        let mut secrets = MemorySecrets::new();
        secrets.insert(
            "secret:file/applications-key",
            key.private_jwk_text().into_bytes(),
        );
        breg.fake().require_bearer(issuer.token_check());
        let mut connections = BTreeMap::new();
        connections.insert(
            "applications".to_owned(),
            Connection::Breg(BregConnection {
                base_url: breg.base_url().to_owned(),
                profile: "follow-up-reader".into(),
                authorization: Authorization {
                    token_endpoint: issuer.token_endpoint(),
                    client_id: "coordinator-applications".into(),
                    signing_key_ref: SecretRef("secret:file/applications-key".into()),
                    scopes: vec![],
                    resource: None,
                },
                request_timeout_milliseconds: Some(5_000),
                limits: None,
            }),
        );
        let clock = ManualClock::at(START);
        let store = Arc::new(MemoryRunStore::new());
        let mut config = EngineConfig::new("db-test-1", "worker-1");
        config.recovery_only = recovery_only;
        let engine = Arc::new(
            Engine::new(
                config,
                store.clone(),
                Arc::new(clock.clone()),
                Arc::new(HttpAdapter::new(Arc::new(secrets)).unwrap()),
                AdmissionKey::new(&[7u8; 32]).unwrap(),
                connections,
                &[definition()],
            )
            .unwrap(),
        );
        let mut policies = BTreeMap::new();
        policies.insert(
            PRODUCER.to_owned(),
            Policy {
                workflows: Some(vec![WORKFLOW.into()]),
                actions: vec!["start".into(), "status".into()],
                operator: false,
            },
        );
        policies.insert(
            OPERATOR.to_owned(),
            Policy {
                workflows: None,
                actions: vec!["status".into()],
                operator: true,
            },
        );
        let authentication = Authentication {
            issuer: issuer.issuer().to_owned(),
            audience: AUDIENCE.into(),
            jwks: None,
            policies,
        };
        let mut events = EventSources::default();
        events.add(SOURCE_NAME, SOURCE_URI, KEY.to_vec()).unwrap();
        let state = AppState {
            engine: engine.clone(),
            clock: Arc::new(clock.clone()),
            counts: store.clone(),
            verifier: Arc::new(Verifier::new(&authentication, KeySource::Discovery)),
            completions: Arc::new(Completions::default()),
            events: Arc::new(events),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(coordinator::run(listener, state, async move {
            let _ = rx.await;
        }));
        Env {
            issuer,
            breg,
            clock,
            store,
            engine,
            base,
            http: reqwest::Client::new(),
            _stop: tx,
        }
    }

    /// POSTs `body` to the route with `signature` as the header (none when
    /// `None`); answers the status and the body.
    async fn post_raw(&self, path: &str, body: &str, signature: Option<&str>) -> (u16, Value) {
        let mut r = self
            .http
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(body.to_owned());
        if let Some(sig) = signature {
            r = r.header(SIGNATURE_HEADER, sig);
        }
        let resp = r.send().await.unwrap();
        let status = resp.status().as_u16();
        assert_eq!(resp.headers()["cache-control"], "no-store");
        let text = resp.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// POSTs `body` to `/v1/events/{WORKFLOW}/{TRIGGER}`, signed now.
    async fn post(&self, body: &str) -> (u16, Value) {
        let sig = sign(&KEY, self.clock.now_unix(), body.as_bytes());
        self.post_raw(&route(WORKFLOW, TRIGGER), body, Some(&sig))
            .await
    }

    async fn get(&self, client: &str, path: &str) -> (u16, Value) {
        let resp = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(self.issuer.mint(&Mint::new(client, AUDIENCE)))
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap())
    }
}

fn route(workflow: &str, trigger: &str) -> String {
    format!("/v1/events/{workflow}/{trigger}")
}

fn event(id: &str, record: &str) -> String {
    json!({
        "specversion": "1.0",
        "id": id,
        "source": SOURCE_URI,
        "type": EVENT_TYPE,
        "time": "2026-03-02T10:00:00Z",
        "data": {"recordId": record},
    })
    .to_string()
}

fn code(problem: &Value) -> &str {
    problem["code"].as_str().unwrap_or("")
}

#[tokio::test]
async fn a_signed_event_starts_a_run_that_finishes_once() {
    let env = Env::new(false).await;
    env.breg.put_record(
        "applications",
        "app-1",
        "r1",
        json!({"noticeAllowed": true, "applicantEmail": "applicant@example.org"}),
    );
    let body = event("evt-1", "app-1");
    let (s, run) = env.post(&body).await;
    assert_eq!(s, 201, "{run}");
    assert_eq!(run["workflow"], WORKFLOW);
    assert_eq!(run["state"], "running");
    let id = run["run"].as_str().unwrap().to_owned();

    // The same event again: the same run, 200. A redelivery signed later
    // (another `t`) is the same event too.
    let (s, again) = env.post(&body).await;
    assert_eq!((s, &again["run"]), (200, &run["run"]), "{again}");
    env.clock.advance(10);
    let (s, again) = env.post(&body).await;
    assert_eq!((s, &again["run"]), (200, &run["run"]), "{again}");

    // The same event id with other data: 409, like a reused key.
    let (s, p) = env.post(&event("evt-1", "app-2")).await;
    assert_eq!((s, code(&p)), (409, "idempotency.key-reused"), "{p}");

    // The run waits until the event's `time`, reads the record, finishes.
    env.engine.worker.run_until_idle(50).await.unwrap();
    assert!(env.breg.fake().requests().is_empty(), "nothing before time");
    env.clock.advance(3600);
    env.engine.worker.run_until_idle(50).await.unwrap();
    let stored = env.engine.operator.get(&id).await.unwrap().unwrap();
    assert_eq!(stored.status().as_str(), "finished");
    assert_eq!(stored.state.outcome.as_deref(), Some("read"));
    assert_eq!(env.breg.fake().requests().len(), 1);

    // The owner is the event source: operators see the run, token callers
    // (even one allowed the workflow) do not.
    let (s, seen) = env.get(OPERATOR, &format!("/v1/runs/{id}")).await;
    assert_eq!((s, seen["state"].as_str()), (200, Some("finished")));
    let (s, p) = env.get(PRODUCER, &format!("/v1/runs/{id}")).await;
    assert_eq!((s, code(&p)), (404, "run.not-found"));
    assert_eq!(stored.owner.iss, SOURCE_URI);
    assert_eq!(stored.owner.sub, SOURCE_NAME);

    // A new event id starts a new run; admissions are counted.
    let (s, other) = env.post(&event("evt-2", "app-1")).await;
    assert_eq!(s, 201, "{other}");
    assert_ne!(other["run"], run["run"]);
    let counted = env.engine.health.counters().values().admissions;
    assert_eq!(counted.get("created"), Some(&2), "{counted:?}");
    assert_eq!(counted.get("existing"), Some(&2), "{counted:?}");
    assert_eq!(counted.get("key-reused"), Some(&1), "{counted:?}");
}

#[tokio::test]
async fn signatures_are_required_and_checked() {
    let env = Env::new(false).await;
    let body = event("evt-1", "app-1");
    let path = route(WORKFLOW, TRIGGER);
    let now = env.clock.now_unix();
    let tag = "0".repeat(64);
    let cases: Vec<(&str, Option<String>)> = vec![
        ("missing header", None),
        ("malformed", Some("v1=abc".to_owned())),
        ("malformed t", Some(format!("t=soon,v1={tag}"))),
        ("no v1", Some(format!("t={now}"))),
        ("bad tag", Some(format!("t={now},v1={tag}"))),
        ("other key", Some(sign(&[1; 32], now, body.as_bytes()))),
        (
            "another body",
            Some(sign(&KEY, now, event("evt-2", "app-1").as_bytes())),
        ),
        ("301 s old", Some(sign(&KEY, now - 301, body.as_bytes()))),
        ("301 s ahead", Some(sign(&KEY, now + 301, body.as_bytes()))),
    ];
    for (what, sig) in cases {
        let (s, p) = env.post_raw(&path, &body, sig.as_deref()).await;
        assert_eq!(
            (s, code(&p)),
            (401, "authentication.refused"),
            "{what}: {p}"
        );
    }
    // A bearer token does not replace the signature.
    let resp = env
        .http
        .post(format!("{}{path}", env.base))
        .bearer_auth(env.issuer.mint(&Mint::new(OPERATOR, AUDIENCE)))
        .header("content-type", "application/json")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 401);
    // The edges of the window are accepted.
    let (s, p) = env
        .post_raw(&path, &body, Some(&sign(&KEY, now - 300, body.as_bytes())))
        .await;
    assert_eq!(s, 201, "{p}");
    let (s, p) = env
        .post_raw(&path, &body, Some(&sign(&KEY, now + 300, body.as_bytes())))
        .await;
    assert_eq!(s, 200, "{p}");
}

#[tokio::test]
async fn events_that_do_not_fit_are_refused() {
    let env = Env::new(false).await;
    // Unknown workflow and trigger: 404 before the signature is looked at.
    let body = event("evt-1", "app-1");
    let sig = sign(&KEY, env.clock.now_unix(), body.as_bytes());
    let (s, p) = env
        .post_raw(&route("no-such-workflow", TRIGGER), &body, Some(&sig))
        .await;
    assert_eq!((s, code(&p)), (404, "workflow.not-found"), "{p}");
    let (s, p) = env
        .post_raw(&route(WORKFLOW, "no-such-trigger"), &body, Some(&sig))
        .await;
    assert_eq!((s, code(&p)), (404, "trigger.not-found"), "{p}");

    // Wrong source or type: 422.
    let mut wrong = serde_json::from_str::<Value>(&body).unwrap();
    wrong["source"] = json!("https://elsewhere.example.org");
    let (s, p) = env.post(&wrong.to_string()).await;
    assert_eq!((s, code(&p)), (422, "event.source-mismatch"), "{p}");
    let mut wrong = serde_json::from_str::<Value>(&body).unwrap();
    wrong["type"] = json!("breg.record.deleted/v1");
    let (s, p) = env.post(&wrong.to_string()).await;
    assert_eq!((s, code(&p)), (422, "event.type-mismatch"), "{p}");
    // Data the trigger cannot map, or whose input the schema refuses: 422.
    let mut wrong = serde_json::from_str::<Value>(&body).unwrap();
    wrong["data"] = json!({"other": 1});
    let (s, p) = env.post(&wrong.to_string()).await;
    assert_eq!((s, code(&p)), (422, "event.data-invalid"), "{p}");
    let (s, p) = env.post(&event("evt-3", "")).await;
    assert_eq!((s, code(&p)), (422, "event.data-invalid"), "{p}");

    // Not a strict-JSON CloudEvent: 400.
    let dup = format!(
        r#"{{"id":"evt-4","id":"evt-5","source":"{SOURCE_URI}","type":"{EVENT_TYPE}","data":{{"recordId":"a"}}}}"#
    );
    for bad in [
        dup.as_str(),
        "[]",
        "\"event\"",
        "not json",
        r#"{"source":"s","type":"t"}"#,
    ] {
        let (s, p) = env.post(bad).await;
        assert_eq!((s, code(&p)), (400, "request.invalid"), "{bad}: {p}");
    }
    // Over 64 KiB: refused before it is read (413, as on every route).
    let big = json!({"id": "evt-6", "source": SOURCE_URI, "type": EVENT_TYPE, "data": {"recordId": "a", "pad": "x".repeat(70_000)}}).to_string();
    let (s, p) = env.post(&big).await;
    assert_eq!((s, code(&p)), (413, "request.too-large"), "{p}");

    // The admission hold and a store outage, as on `POST /v1/runs`.
    env.engine
        .operator
        .update_holds(|h| {
            h.admission = true;
            Ok::<(), StoreError>(())
        })
        .await
        .unwrap();
    let (s, p) = env.post(&body).await;
    assert_eq!((s, code(&p)), (409, "admission.held"), "{p}");
    env.engine
        .operator
        .update_holds(|h| {
            h.admission = false;
            Ok::<(), StoreError>(())
        })
        .await
        .unwrap();
    env.store.set_unavailable(true);
    let (s, p) = env.post(&body).await;
    assert_eq!((s, code(&p)), (503, "service.unavailable"), "{p}");
    env.store.set_unavailable(false);
    let (s, p) = env.post(&body).await;
    assert_eq!(s, 201, "{p}");
}

/// seed 000: a `--recovery-only` instance takes no events. A signed event
/// start is a start: 409 `admission.recovery-only`, and nothing is stored
/// (no run, no job); the sender is still authenticated first. (The other
/// inbound event, a review completion: server/tests/service.rs
/// `a_recovery_only_instance_refuses_a_review_completion_and_changes_nothing`.)
#[tokio::test]
async fn recovery_only_takes_no_events() {
    let env = Env::new(true).await;
    let (s, p) = env.post(&event("evt-1", "app-1")).await;
    assert_eq!((s, code(&p)), (409, "admission.recovery-only"), "{p}");
    let stored = env.store.list(&RunFilter::default()).await.unwrap();
    assert!(stored.runs.is_empty(), "{:?}", stored.runs);
    assert_eq!(env.store.next_due().await.unwrap(), None, "no job stored");
    // Still authenticated first.
    let (s, p) = env
        .post_raw(&route(WORKFLOW, TRIGGER), &event("evt-1", "app-1"), None)
        .await;
    assert_eq!((s, code(&p)), (401, "authentication.refused"), "{p}");
}
