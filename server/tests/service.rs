//! The service in process: the real HTTP edge over a real socket, the
//! engine on a manual clock and the in-memory store, the HTTP adapter
//! against the product fakes, caller tokens from the fake issuer.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use coordinator::auth::{KeySource, Verifier};
use coordinator::{AppState, Completions};
use coordinator_adapters::{HttpAdapter, MemorySecrets};
use coordinator_engine::{Engine, EngineConfig};
use coordinator_fakes::{
    FakeBreg, FakeCasework, FakeIssuer, FakeMessaging, Flaw, KeyKind, Mint, Reply, TestKey,
};
use coordinator_ir::Definition;
use coordinator_ports::{Clock, ManualClock, MemoryRunStore, RunReads};
use coordinator_runtime::config::{
    Authentication, Authorization, BregConnection, CaseworkConnection, Connection, PlainConnection,
    Policy, ReviewCompletion, SecretRef,
};
use coordinator_runtime::keys::AdmissionKey;
use serde_json::{json, Value};

const AUDIENCE: &str = "registry-coordinator";
const PRODUCER: &str = "producer-app";
const OTHER: &str = "other-app";
const OPERATOR: &str = "ops-console";
const BINDING: &str = "coordinator-v1";
const COMPLETION_TOKEN: &str = "completion-token-0123456789";
const START: &str = "2026-03-02T09:00:00Z";

fn definition(example: &str) -> Definition {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(example);
    let compiled = coordinator_compiler::compile_project(&dir, example);
    assert!(!compiled.has_errors(), "{:?}", compiled.diagnostics);
    Definition::new(compiled.program.unwrap())
}

struct Env {
    issuer: FakeIssuer,
    casework: FakeCasework,
    messaging: FakeMessaging,
    breg: FakeBreg,
    clock: ManualClock,
    store: Arc<MemoryRunStore>,
    engine: Arc<Engine>,
    secrets: MemorySecrets,
    connections: BTreeMap<String, Connection>,
    definitions: Vec<Definition>,
    base: String,
    http: reqwest::Client,
    _stop: tokio::sync::oneshot::Sender<()>,
}

fn auth(issuer: &FakeIssuer, name: &str) -> Authorization {
    Authorization {
        token_endpoint: issuer.token_endpoint(),
        client_id: format!("coordinator-{name}"),
        signing_key_ref: SecretRef(format!("secret:file/{name}-key")),
        scopes: vec![],
        resource: None,
    }
}

impl Env {
    async fn new() -> Env {
        let issuer = FakeIssuer::start().await.unwrap();
        let casework = FakeCasework::start().await.unwrap();
        let messaging = FakeMessaging::start().await.unwrap();
        let breg = FakeBreg::start().await.unwrap();
        let mut secrets = MemorySecrets::new();
        for (name, kind) in [
            ("review", KeyKind::Es256),
            ("notices", KeyKind::EdDsa),
            ("applications", KeyKind::Rs256),
        ] {
            let key = TestKey::generate(kind, &format!("{name}-kid"));
            issuer.register_client(&format!("coordinator-{name}"), key.public_jwk.clone(), None);
            secrets.insert(
                &format!("secret:file/{name}-key"),
                key.private_jwk_text().into_bytes(),
            );
        }
        let check = issuer.token_check();
        for f in [casework.fake(), messaging.fake(), breg.fake()] {
            f.require_bearer(check.clone());
        }
        let mut connections = BTreeMap::new();
        connections.insert(
            "review".to_owned(),
            Connection::CaseworkReviewProducer(CaseworkConnection {
                base_url: casework.base_url().to_owned(),
                profile: Some("application-review".into()),
                producer: "coordinator".into(),
                authorization: auth(&issuer, "review"),
                completion: Some(ReviewCompletion {
                    recipient_binding: BINDING.into(),
                    bearer_token_ref: SecretRef("secret:file/review-completion-token".into()),
                }),
                result_check_seconds: 900,
                request_timeout_milliseconds: Some(10_000),
                limits: None,
            }),
        );
        connections.insert(
            "notices".to_owned(),
            Connection::Messaging(PlainConnection {
                base_url: messaging.base_url().to_owned(),
                authorization: auth(&issuer, "notices"),
                request_timeout_milliseconds: Some(5_000),
                limits: None,
            }),
        );
        connections.insert(
            "applications".to_owned(),
            Connection::Breg(BregConnection {
                base_url: breg.base_url().to_owned(),
                profile: "follow-up-reader".into(),
                authorization: auth(&issuer, "applications"),
                request_timeout_milliseconds: Some(5_000),
                limits: None,
            }),
        );
        let clock = ManualClock::at(START);
        let store = Arc::new(MemoryRunStore::new());
        let definitions = vec![
            definition("reviewed-notice"),
            definition("delayed-follow-up"),
        ];
        let mut env = Env {
            engine: Arc::new(build_engine(
                "worker-1",
                &store,
                &clock,
                &secrets,
                &connections,
                &definitions,
            )),
            issuer,
            casework,
            messaging,
            breg,
            clock,
            store,
            secrets,
            connections,
            definitions,
            base: String::new(),
            http: reqwest::Client::new(),
            _stop: tokio::sync::oneshot::channel().0,
        };
        env.serve().await;
        env
    }

    fn policies() -> BTreeMap<String, Policy> {
        let producer = Policy {
            workflows: Some(vec!["reviewed-notice".into(), "follow-up".into()]),
            actions: vec!["start".into(), "status".into(), "inspect".into()],
            operator: false,
        };
        let mut p = BTreeMap::new();
        p.insert(PRODUCER.to_owned(), producer.clone());
        p.insert(OTHER.to_owned(), producer);
        p.insert(
            OPERATOR.to_owned(),
            Policy {
                workflows: None,
                actions: ["status", "inspect", "cancel", "retry-same", "reconcile"]
                    .map(String::from)
                    .to_vec(),
                operator: true,
            },
        );
        p
    }

    async fn serve(&mut self) {
        self.serve_with(KeySource::Discovery).await;
    }

    /// Serves (again) with the token verifier reading keys from `source`.
    async fn serve_with(&mut self, source: KeySource) {
        let authentication = Authentication {
            issuer: self.issuer.issuer().to_owned(),
            audience: AUDIENCE.into(),
            jwks: None,
            policies: Self::policies(),
        };
        let mut completions = Completions::default();
        completions.add(BINDING, COMPLETION_TOKEN.as_bytes().to_vec());
        let state = AppState {
            engine: self.engine.clone(),
            clock: Arc::new(self.clock.clone()),
            counts: self.store.clone(),
            verifier: Arc::new(Verifier::new(&authentication, source)),
            completions: Arc::new(completions),
            events: Arc::default(),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        self.base = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        self._stop = tx;
        tokio::spawn(coordinator::run(listener, state, async move {
            let _ = rx.await;
        }));
    }

    fn token(&self, client: &str) -> String {
        self.issuer.mint(&Mint::new(client, AUDIENCE))
    }

    fn revision(&self, workflow: &str) -> String {
        self.engine.admission.active_revisions()[workflow].clone()
    }

    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        token: Option<&str>,
        key: Option<&str>,
        body: Option<String>,
    ) -> (u16, reqwest::header::HeaderMap, Value) {
        let mut r = self.http.request(method, format!("{}{path}", self.base));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        if let Some(k) = key {
            r = r.header("idempotency-key", k);
        }
        if let Some(b) = body {
            r = r.header("content-type", "application/json").body(b);
        }
        let resp = r.send().await.unwrap();
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp.text().await.unwrap();
        (
            status,
            headers,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    async fn start(&self, client: &str, key: &str, workflow: &str, input: Value) -> (u16, Value) {
        let body =
            json!({"workflow": workflow, "revision": self.revision(workflow), "input": input});
        let (s, _, v) = self
            .send(
                reqwest::Method::POST,
                "/v1/runs",
                Some(&self.token(client)),
                Some(key),
                Some(body.to_string()),
            )
            .await;
        (s, v)
    }

    async fn get(&self, client: &str, path: &str) -> (u16, Value) {
        let (s, _, v) = self
            .send(
                reqwest::Method::GET,
                path,
                Some(&self.token(client)),
                None,
                None,
            )
            .await;
        (s, v)
    }

    async fn idle(&self) {
        self.engine.worker.run_until_idle(50).await.unwrap();
    }

    fn review_id(&self) -> String {
        let reqs = self.casework.review_requests();
        assert_eq!(reqs.len(), 1, "one review request");
        reqs[0]["id"].as_str().unwrap().to_owned()
    }
}

impl Env {
    /// Starts a tick of the service's engine, waits until `reached()` is
    /// 1 (a fake holds the request it made), then "crashes" the worker by
    /// aborting the tick.
    async fn crash_worker_when(&self, reached: impl Fn() -> usize) {
        let engine = self.engine.clone();
        let worker = tokio::spawn(async move { engine.worker.tick().await });
        for _ in 0..200 {
            if reached() == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(reached(), 1);
        worker.abort();
        let _ = worker.await;
    }

    /// A second worker process (`worker-2`) on the same store.
    fn second_worker(&self) -> Engine {
        build_engine(
            "worker-2",
            &self.store,
            &self.clock,
            &self.secrets,
            &self.connections,
            &self.definitions,
        )
    }
}

fn build_engine(
    worker: &str,
    store: &Arc<MemoryRunStore>,
    clock: &ManualClock,
    secrets: &MemorySecrets,
    connections: &BTreeMap<String, Connection>,
    definitions: &[Definition],
) -> Engine {
    build_engine_with(
        EngineConfig::new("db-test-1", worker),
        store,
        clock,
        secrets,
        connections,
        definitions,
    )
}

fn build_engine_with(
    config: EngineConfig,
    store: &Arc<MemoryRunStore>,
    clock: &ManualClock,
    secrets: &MemorySecrets,
    connections: &BTreeMap<String, Connection>,
    definitions: &[Definition],
) -> Engine {
    let adapter = HttpAdapter::new(Arc::new(secrets.clone())).unwrap();
    Engine::new(
        config,
        store.clone(),
        Arc::new(clock.clone()),
        Arc::new(adapter),
        AdmissionKey::new(&[7u8; 32]).unwrap(),
        connections.clone(),
        definitions,
    )
    .unwrap()
}

fn review_input() -> Value {
    json!({"applicationId": "app-1", "applicantEmail": "applicant@example.org"})
}

fn effect(inspection: &Value, step: &str) -> Value {
    inspection["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == step)
        .unwrap_or_else(|| panic!("step {step} in {inspection}"))["effect"]
        .clone()
}

/// seed 000: a `--recovery-only` instance takes no events. A review
/// completion (authenticated, else 401 as anywhere) is refused 409
/// `event.recovery-only` and changes nothing: the review's result check is
/// not brought forward, so the ordinary service, back on the same store,
/// still waits for it; the same completion sent there finishes the run.
#[tokio::test]
async fn a_recovery_only_instance_refuses_a_review_completion_and_changes_nothing() {
    let mut env = Env::new().await;
    let (status, run) = env
        .start(PRODUCER, "k-1", "reviewed-notice", review_input())
        .await;
    assert_eq!(status, 201, "{run}");
    let id = run["run"].as_str().unwrap().to_owned();
    env.idle().await;
    let review = env.review_id();
    env.clock.advance(120);
    assert!(env
        .casework
        .decide(&review, "approved", &env.clock.now_rfc3339(), None));

    let ordinary = env.engine.clone();
    let mut config = EngineConfig::new("db-test-1", "worker-recovery");
    config.recovery_only = true;
    env.engine = Arc::new(build_engine_with(
        config,
        &env.store,
        &env.clock,
        &env.secrets,
        &env.connections,
        &env.definitions,
    ));
    env.serve().await;
    let url = format!("{}/v1/review-completions", env.base);
    let (s, body) = FakeCasework::post_completion(&url, "wrong", BINDING, &review)
        .await
        .unwrap();
    assert_eq!(s, 401, "authenticated first: {body}");
    let (s, body) = FakeCasework::post_completion(&url, COMPLETION_TOKEN, BINDING, &review)
        .await
        .unwrap();
    assert_eq!(s, 409, "{body}");
    let problem: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(problem["code"], "event.recovery-only", "{problem}");
    env.idle().await;

    // Back to the ordinary service: nothing was brought forward, the run
    // still waits for its review and nothing was sent.
    env.engine = ordinary;
    env.serve().await;
    env.idle().await;
    let (_, status) = env.get(PRODUCER, &format!("/v1/runs/{id}")).await;
    assert_eq!(status["state"], "running", "{status}");
    assert!(env.messaging.messages().is_empty());
    let url = format!("{}/v1/review-completions", env.base);
    let (s, _) = FakeCasework::post_completion(&url, COMPLETION_TOKEN, BINDING, &review)
        .await
        .unwrap();
    assert_eq!(s, 202);
    env.idle().await;
    let (_, status) = env.get(PRODUCER, &format!("/v1/runs/{id}")).await;
    assert_eq!(
        (&status["state"], &status["outcome"]),
        (&json!("finished"), &json!("approval-notice-sent")),
        "{status}"
    );
}

#[tokio::test]
async fn reviewed_notice_finishes_after_a_completion_event() {
    let env = Env::new().await;
    let (status, run) = env
        .start(PRODUCER, "k-1", "reviewed-notice", review_input())
        .await;
    assert_eq!(status, 201, "{run}");
    let id = run["run"].as_str().unwrap().to_owned();
    env.idle().await;
    let review = env.review_id();
    let submitted = &env.casework.review_requests()[0];
    assert_eq!(submitted["producer"], "coordinator");
    assert_eq!(submitted["summary"]["applicationId"], "app-1");

    env.clock.advance(120);
    assert!(env
        .casework
        .decide(&review, "approved", &env.clock.now_rfc3339(), None));
    let url = format!("{}/v1/review-completions", env.base);
    let (s, _) = FakeCasework::post_completion(&url, COMPLETION_TOKEN, BINDING, &review)
        .await
        .unwrap();
    assert_eq!(s, 202);
    env.idle().await;

    let (s, status) = env.get(PRODUCER, &format!("/v1/runs/{id}")).await;
    assert_eq!(s, 200);
    assert_eq!(status["state"], "finished", "{status}");
    assert_eq!(status["outcome"], "approval-notice-sent");
    let messages = env.messaging.messages();
    assert_eq!(messages.len(), 1);
    assert!(status["output"]["messageId"].is_string(), "{status}");
    assert_eq!(messages[0]["to"]["email"], "applicant@example.org");

    let (s, inspection) = env.get(PRODUCER, &format!("/v1/runs/{id}/inspect")).await;
    assert_eq!(s, 200);
    assert_eq!(effect(&inspection, "submit-review"), "accepted");
    assert_eq!(effect(&inspection, "send-notice"), "accepted");
    let names: Vec<&str> = inspection["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "submit-review",
            "await-decision",
            "route-decision",
            "send-notice",
            "notice-sent"
        ]
    );
    let wait = &inspection["steps"][1];
    assert_eq!(
        (&wait["waitEnded"], &wait["endedAt"]),
        (&json!("completed"), &json!(env.clock.now_rfc3339())),
        "the completion ended the wait: {wait}"
    );
    let text = inspection.to_string();
    assert!(
        !text.contains("applicant@example.org"),
        "inspection leaks input"
    );
}

#[tokio::test]
async fn reviewed_notice_finishes_by_periodic_read_without_an_event() {
    let env = Env::new().await;
    let (_, run) = env
        .start(PRODUCER, "k-2", "reviewed-notice", review_input())
        .await;
    let id = run["run"].as_str().unwrap().to_owned();
    env.idle().await;
    let review = env.review_id();
    let reads = || {
        env.casework
            .fake()
            .requests_to(&format!("/v1/review-requests/{review}"))
            .len()
    };

    env.clock.advance(899);
    env.idle().await;
    assert_eq!(reads(), 0, "no read before resultCheckSeconds");
    env.clock.advance(1);
    env.idle().await;
    assert_eq!(reads(), 1, "first periodic read");

    assert!(env
        .casework
        .decide(&review, "approved", &env.clock.now_rfc3339(), None));
    env.clock.advance(900);
    env.idle().await;
    assert_eq!(reads(), 2);

    let (_, inspection) = env.get(PRODUCER, &format!("/v1/runs/{id}/inspect")).await;
    assert_eq!(inspection["status"]["state"], "finished", "{inspection}");
    assert_eq!(inspection["status"]["outcome"], "approval-notice-sent");
    let wait = inspection["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "await-decision")
        .unwrap()
        .clone();
    assert_eq!(wait["observations"], 2);
    assert_eq!(env.messaging.messages().len(), 1);
}

#[tokio::test]
async fn reviewed_notice_times_out_and_withdraws() {
    let env = Env::new().await;
    let (_, run) = env
        .start(PRODUCER, "k-3", "reviewed-notice", review_input())
        .await;
    let id = run["run"].as_str().unwrap().to_owned();
    env.idle().await;
    let review = env.review_id();

    let (_, inspection) = env.get(PRODUCER, &format!("/v1/runs/{id}/inspect")).await;
    let wait = inspection["steps"][1].clone();
    assert_eq!(wait["name"], "await-decision");
    assert_eq!(wait["dueAt"], "2026-03-09T09:00:00Z", "{inspection}");

    // Seven days in one jump: the due read comes first, then the timeout.
    env.clock.advance(604_800);
    env.idle().await;
    let (_, status) = env.get(PRODUCER, &format!("/v1/runs/{id}")).await;
    assert_eq!(status["state"], "finished", "{status}");
    assert_eq!(status["outcome"], "review-timed-out");
    let (_, inspection) = env.get(PRODUCER, &format!("/v1/runs/{id}/inspect")).await;
    let wait = &inspection["steps"][1];
    assert_eq!(
        (&wait["waitEnded"], &wait["waitDueAt"]),
        (&json!("timed-out"), &json!("2026-03-09T09:00:00Z")),
        "{wait}"
    );
    assert_eq!(env.casework.review_requests()[0]["status"], "withdrawn");
    assert_eq!(
        env.casework
            .fake()
            .requests_to(&format!("/v1/review-requests/{review}/withdraw"))
            .len(),
        1
    );
    assert!(env.messaging.messages().is_empty());
}

#[tokio::test]
async fn delayed_follow_up_finishes_after_send_after() {
    let env = Env::new().await;
    env.breg.put_record(
        "applications",
        "app-9",
        "r1",
        json!({"noticeAllowed": true, "applicantEmail": "applicant@example.org"}),
    );
    let send_after = "2026-03-05T09:00:00Z";
    let (s, run) = env
        .start(
            PRODUCER,
            "k-4",
            "follow-up",
            json!({"applicationId": "app-9", "sendAfter": send_after}),
        )
        .await;
    assert_eq!(s, 201, "{run}");
    let id = run["run"].as_str().unwrap().to_owned();
    env.idle().await;
    env.clock.advance(3 * 86_400 - 1);
    env.idle().await;
    assert!(
        env.breg.fake().requests().is_empty(),
        "nothing before sendAfter"
    );
    let (_, status) = env.get(PRODUCER, &format!("/v1/runs/{id}")).await;
    assert_eq!(status["state"], "running");

    env.clock.advance(1);
    env.idle().await;
    let (_, status) = env.get(PRODUCER, &format!("/v1/runs/{id}")).await;
    assert_eq!(status["state"], "finished", "{status}");
    assert_eq!(status["outcome"], "message-accepted");
    assert!(status["endedAt"].as_str().unwrap() >= send_after);
    assert_eq!(env.messaging.messages().len(), 1);
}

/// A wake with a fraction of a second is due at the next whole second of
/// the engine's clock, never before its instant: nothing is read or sent
/// at 09:00:10 for a `sendAfter` of 09:00:10.5.
#[tokio::test]
async fn a_wake_with_a_fraction_of_a_second_never_fires_early() {
    let env = Env::new().await;
    env.breg.put_record(
        "applications",
        "app-frac",
        "r1",
        json!({"noticeAllowed": true, "applicantEmail": "applicant@example.org"}),
    );
    let (s, run) = env
        .start(
            PRODUCER,
            "k-frac",
            "follow-up",
            json!({"applicationId": "app-frac", "sendAfter": "2026-03-02T09:00:10.5Z"}),
        )
        .await;
    assert_eq!(s, 201, "{run}");
    let id = run["run"].as_str().unwrap().to_owned();
    env.idle().await;
    env.clock.advance(10);
    env.idle().await;
    assert!(
        env.breg.fake().requests().is_empty(),
        "woke before sendAfter"
    );
    let (_, status) = env.get(PRODUCER, &format!("/v1/runs/{id}")).await;
    assert_eq!(status["state"], "running", "{status}");
    env.clock.advance(1);
    env.idle().await;
    let (_, status) = env.get(PRODUCER, &format!("/v1/runs/{id}")).await;
    assert_eq!(status["state"], "finished", "{status}");
    assert_eq!(env.messaging.messages().len(), 1);
}

/// A `wait-until` already due at admission (a `sendAfter` in the past) is
/// taken in the admission itself: the run is stored with its first call's
/// job, and no timer job is inserted, leased and deleted for it.
#[tokio::test]
async fn a_wait_already_due_at_admission_is_taken_at_once() {
    let env = Env::new().await;
    env.breg.put_record(
        "applications",
        "app-due",
        "r1",
        json!({"noticeAllowed": true, "applicantEmail": "applicant@example.org"}),
    );
    let (s, run) = env
        .start(
            PRODUCER,
            "k-due",
            "follow-up",
            json!({"applicationId": "app-due", "sendAfter": "2026-03-01T09:00:00Z"}),
        )
        .await;
    assert_eq!(s, 201, "{run}");
    let id = run["run"].as_str().unwrap().to_owned();
    let jobs = env.store.jobs(&id).await.unwrap();
    let kinds: Vec<String> = jobs
        .iter()
        .map(|j| match &j.kind {
            coordinator_ports::JobKind::Timer { wake, .. } => format!("timer:{wake:?}"),
            coordinator_ports::JobKind::Dispatch { dispatch, .. } => dispatch.operation_id.clone(),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        ["breg.read-record/v1"],
        "the due wait left no timer job, and the deadline stays on the run row"
    );
    env.idle().await;
    let (_, status) = env.get(PRODUCER, &format!("/v1/runs/{id}")).await;
    assert_eq!(status["state"], "finished", "{status}");
    assert_eq!(env.messaging.messages().len(), 1);
    // The wait passed at admission (which writes no ledger) still reads
    // its times: the first commit after admission stamped them.
    let (_, inspection) = env.get(PRODUCER, &format!("/v1/runs/{id}/inspect")).await;
    let due = &inspection["steps"][0];
    assert_eq!(
        (&due["startedAt"], &due["endedAt"], &due["waitEnded"]),
        (&status["admittedAt"], &status["admittedAt"], &json!("woke")),
        "{due}"
    );
}

/// The run deadline stays on the run row: no job waits for it (here the
/// run waits for a `sendAfter` beyond its deadline, so it has no job at
/// all), and the first lease once it is due ends the run `expired`, at the
/// deadline, with nothing sent.
#[tokio::test]
async fn a_run_expires_at_its_deadline_without_a_deadline_job() {
    let env = Env::new().await;
    let (s, run) = env
        .start(
            PRODUCER,
            "k-late",
            "follow-up",
            json!({"applicationId": "app-late", "sendAfter": "2026-09-01T09:00:00Z"}),
        )
        .await;
    assert_eq!(s, 201, "{run}");
    let id = run["run"].as_str().unwrap().to_owned();
    env.idle().await;
    assert_eq!(env.store.jobs(&id).await.unwrap(), vec![]);
    let (_, status) = env.get(PRODUCER, &format!("/v1/runs/{id}")).await;
    assert_eq!(status["state"], "running", "{status}");
    let deadline = status["deadlineAt"].as_str().unwrap().to_owned();
    let deadline_unix = coordinator_ports::clock::rfc3339_to_unix(&deadline).unwrap();
    env.clock.advance(deadline_unix - env.clock.now_unix() - 1);
    env.idle().await;
    let (_, status) = env.get(PRODUCER, &format!("/v1/runs/{id}")).await;
    assert_eq!(
        status["state"], "running",
        "not before the deadline: {status}"
    );

    env.clock.advance(1);
    env.idle().await;
    let (_, status) = env.get(PRODUCER, &format!("/v1/runs/{id}")).await;
    assert_eq!(status["state"], "expired", "{status}");
    assert_eq!(status["endedAt"], deadline.as_str());
    let (_, inspection) = env.get(PRODUCER, &format!("/v1/runs/{id}/inspect")).await;
    let due = &inspection["steps"][0];
    assert_eq!(
        (&due["waitEnded"], &due["endedAt"]),
        (&json!("deadline"), &json!(deadline)),
        "the deadline ended the wait: {due}"
    );
    assert_eq!(env.store.jobs(&id).await.unwrap(), vec![]);
    assert!(env.breg.fake().requests().is_empty());
    assert!(env.messaging.messages().is_empty());
}

/// A job found once the run's deadline has passed (after an outage or a
/// restart) is not carried out: the read due since admission is never
/// sent, and the run expires at its deadline with nothing sent.
#[tokio::test]
async fn a_job_found_after_the_deadline_sends_nothing_and_the_run_expires() {
    let env = Env::new().await;
    env.breg.put_record(
        "applications",
        "app-late",
        "r1",
        json!({"noticeAllowed": true, "applicantEmail": "applicant@example.org"}),
    );
    let (s, run) = env
        .start(
            PRODUCER,
            "k-found-late",
            "follow-up",
            json!({"applicationId": "app-late", "sendAfter": "2026-03-01T09:00:00Z"}),
        )
        .await;
    assert_eq!(s, 201, "{run}");
    let id = run["run"].as_str().unwrap().to_owned();
    let (_, status) = env.get(PRODUCER, &format!("/v1/runs/{id}")).await;
    let deadline = status["deadlineAt"].as_str().unwrap().to_owned();
    let deadline_unix = coordinator_ports::clock::rfc3339_to_unix(&deadline).unwrap();
    // The service was down from admission until the deadline.
    env.clock.advance(deadline_unix - env.clock.now_unix());
    env.idle().await;
    let (_, status) = env.get(PRODUCER, &format!("/v1/runs/{id}")).await;
    assert_eq!(status["state"], "expired", "{status}");
    assert_eq!(status["endedAt"], deadline.as_str());
    assert!(env.breg.fake().requests().is_empty(), "the read was sent");
    assert!(env.messaging.messages().is_empty());
    assert_eq!(env.store.jobs(&id).await.unwrap(), vec![]);
}

/// `endedAt` is when the run really ended by the coordinator's clock, not
/// the VM's instant of the event that ended it: a run whose deadline was
/// a day before the service found it (down meanwhile) ended when found,
/// and retention compares that end.
#[tokio::test]
async fn ended_at_is_the_real_end_not_the_instant_of_the_last_timed_event() {
    let env = Env::new().await;
    let (s, run) = env
        .start(
            PRODUCER,
            "k-found-a-day-late",
            "follow-up",
            json!({"applicationId": "app-day-late", "sendAfter": "2026-09-01T09:00:00Z"}),
        )
        .await;
    assert_eq!(s, 201, "{run}");
    let id = run["run"].as_str().unwrap().to_owned();
    env.idle().await;
    let (_, status) = env.get(PRODUCER, &format!("/v1/runs/{id}")).await;
    let deadline = status["deadlineAt"].as_str().unwrap().to_owned();
    let deadline_unix = coordinator_ports::clock::rfc3339_to_unix(&deadline).unwrap();
    // Down from before the deadline until a day after it.
    env.clock
        .advance(deadline_unix + 86_400 - env.clock.now_unix());
    env.idle().await;
    let (_, status) = env.get(PRODUCER, &format!("/v1/runs/{id}")).await;
    assert_eq!(status["state"], "expired", "{status}");
    let ended =
        coordinator_ports::clock::rfc3339_to_unix(status["endedAt"].as_str().unwrap()).unwrap();
    assert!(
        (ended - env.clock.now_unix()).abs() <= 1,
        "endedAt {} is not the real end (now {}, deadline {deadline})",
        status["endedAt"],
        env.clock.now_unix()
    );
    // Retention compares the real end: a cutoff between the deadline and
    // the end leaves the run's payloads.
    use coordinator_ports::Maintenance;
    let erased = env
        .store
        .erase_payloads(
            coordinator_ir::instant::Instant::from_unix_seconds(deadline_unix + 3_600),
            100,
            env.clock.now(),
        )
        .await
        .unwrap();
    assert_eq!(
        erased.erased, 0,
        "erased by the VM's instant, not the real end"
    );
}

#[tokio::test]
async fn interrupted_mutation_is_unknown_and_never_resent() {
    let env = Env::new().await;
    env.casework
        .fake()
        .script("/v1/review-requests", [Reply::Hang]);
    let (_, run) = env
        .start(PRODUCER, "k-5", "reviewed-notice", review_input())
        .await;
    let id = run["run"].as_str().unwrap().to_owned();

    // Worker 1 sends the request, and "crashes" while the fake holds it.
    let sent = || env.casework.fake().requests_to("/v1/review-requests").len();
    env.crash_worker_when(sent).await;

    // Worker 2 on the same store finds the job `sending` once the lease
    // expired.
    let engine2 = env.second_worker();
    engine2.worker.run_until_idle(10).await.unwrap();
    let (_, status) = env.get(PRODUCER, &format!("/v1/runs/{id}")).await;
    assert_eq!(status["state"], "running", "lease not expired yet");
    env.clock.advance(611);
    engine2.worker.run_until_idle(10).await.unwrap();

    let (_, inspection) = env.get(PRODUCER, &format!("/v1/runs/{id}/inspect")).await;
    assert_eq!(inspection["status"]["state"], "attention", "{inspection}");
    assert_eq!(effect(&inspection, "submit-review"), "unknown");
    env.clock.advance(86_400);
    engine2.worker.run_until_idle(10).await.unwrap();
    assert_eq!(sent(), 1, "the mutation was never resent");

    // The operator sees it in the attention list; reconcile is unsupported
    // for Casework (no receipts).
    let (s, list) = env.get(OPERATOR, "/v1/runs?attention=true").await;
    assert_eq!(s, 200);
    assert_eq!(list["runs"][0]["run"], id.as_str());
    let (s, _, problem) = env
        .send(
            reqwest::Method::POST,
            &format!("/v1/runs/{id}/reconcile"),
            Some(&env.token(OPERATOR)),
            None,
            Some(json!({"reason": "incident-1"}).to_string()),
        )
        .await;
    assert_eq!(s, 409);
    assert_eq!(problem["code"], "reconcile.unsupported");
}

/// A crash while the access token is fetched (before the request is
/// written) leaves the job `ready`: the run is never held, and the next
/// worker sends the mutation once, after the lease ran out.
#[tokio::test]
async fn a_crash_during_the_token_request_holds_nothing_and_sends_once() {
    let env = Env::new().await;
    env.issuer.fake().script("/token", [Reply::Hang]);
    let (_, run) = env
        .start(PRODUCER, "k-token", "reviewed-notice", review_input())
        .await;
    let id = run["run"].as_str().unwrap().to_owned();

    // Worker 1 asks for a token and "crashes" while the issuer holds it.
    env.crash_worker_when(|| env.issuer.fake().requests_to("/token").len())
        .await;
    let sent = || env.casework.fake().requests_to("/v1/review-requests").len();
    assert_eq!(sent(), 0);
    let jobs = env.store.jobs(&id).await.unwrap();
    assert!(
        jobs.iter()
            .all(|j| j.state == coordinator_ports::JobState::Ready),
        "nothing left the process, so nothing is `sending`: {jobs:?}"
    );

    // Worker 2 takes the job once the lease ran out and sends it once.
    let engine2 = env.second_worker();
    env.clock.advance(611);
    engine2.worker.run_until_idle(10).await.unwrap();
    assert_eq!(sent(), 1);
    let (_, inspection) = env.get(PRODUCER, &format!("/v1/runs/{id}/inspect")).await;
    assert_ne!(inspection["status"]["state"], "attention", "{inspection}");
    assert_ne!(
        effect(&inspection, "submit-review"),
        "unknown",
        "{inspection}"
    );
    let (_, list) = env.get(OPERATOR, "/v1/runs?attention=true").await;
    assert_eq!(list["runs"].as_array().map(Vec::len), Some(0), "{list}");
}

/// A crash between a read's answer and the call after it (the starter's
/// notice): the notice's access token is being fetched, the read's answer
/// is not yet committed, nothing is `sending`. Another worker reads again
/// (a read is safe to resend) and sends the notice once; no run is held.
/// After that point the read's answer and the notice's `sending` mark are
/// one commit (docs/decisions.md, "The commit of a read's answer marks the
/// next command"), so a crash there holds the notice as `unknown`
/// (`kill_9_during_a_mutation_leaves_it_unknown_and_sent_once`).
#[tokio::test]
async fn a_crash_between_a_read_answer_and_the_notice_loses_nothing_and_sends_once() {
    let env = Env::new().await;
    env.breg.put_record(
        "applications",
        "app-chain",
        "r1",
        json!({"noticeAllowed": true, "applicantEmail": "applicant@example.org"}),
    );
    // The read's token is answered; the notice's is held.
    env.issuer
        .fake()
        .script("/token", [Reply::Normal, Reply::Hang]);
    let (s, run) = env
        .start(
            PRODUCER,
            "k-chain",
            "follow-up",
            json!({"applicationId": "app-chain", "sendAfter": "2026-03-01T09:00:00Z"}),
        )
        .await;
    assert_eq!(s, 201, "{run}");
    let id = run["run"].as_str().unwrap().to_owned();
    let tokens = || env.issuer.fake().requests_to("/token").len();
    env.crash_worker_when(|| tokens().saturating_sub(1)).await;
    assert_eq!(env.breg.fake().requests().len(), 1, "the read was answered");
    assert_eq!(env.messaging.messages().len(), 0);
    let jobs = env.store.jobs(&id).await.unwrap();
    assert!(
        jobs.iter()
            .all(|j| j.state == coordinator_ports::JobState::Ready),
        "the notice's token was not in hand, so nothing is `sending`: {jobs:?}"
    );

    // Worker 2 takes the read once its lease ran out, reads again and
    // sends the notice once.
    let engine2 = env.second_worker();
    env.clock.advance(611);
    engine2.worker.run_until_idle(10).await.unwrap();
    assert_eq!(env.breg.fake().requests().len(), 2, "the read went again");
    assert_eq!(env.messaging.messages().len(), 1);
    let (_, status) = env.get(PRODUCER, &format!("/v1/runs/{id}")).await;
    assert_eq!(status["state"], "finished", "{status}");
    let (_, list) = env.get(OPERATOR, "/v1/runs?attention=true").await;
    assert_eq!(list["runs"].as_array().map(Vec::len), Some(0), "{list}");
}

#[tokio::test]
async fn bad_tokens_are_refused_with_401() {
    let env = Env::new().await;
    for flaw in [
        Flaw::Expired,
        Flaw::WrongTyp,
        Flaw::WrongIssuer,
        Flaw::WrongAudience,
        Flaw::UnknownKid,
        Flaw::AlgNone,
        Flaw::NoIat,
        Flaw::NoJti,
        Flaw::FutureNbf,
        Flaw::FutureIat,
        Flaw::CritHeader,
    ] {
        let mut mint = Mint::new(PRODUCER, AUDIENCE);
        mint.flaw = Some(flaw);
        let token = env.issuer.mint(&mint);
        let (s, headers, body) = env
            .send(reqwest::Method::GET, "/v1/runs", Some(&token), None, None)
            .await;
        assert_eq!(s, 401, "{flaw:?}");
        assert_eq!(body["code"], "authentication.refused", "{flaw:?}");
        assert_eq!(headers["content-type"], "application/problem+json");
        assert_eq!(
            headers["www-authenticate"], r#"Bearer error="invalid_token""#,
            "{flaw:?}"
        );
    }
    let mut long = Mint::new(PRODUCER, AUDIENCE);
    long.lifetime_seconds = 7200;
    let (s, _, _) = env
        .send(
            reqwest::Method::GET,
            "/v1/runs",
            Some(&env.issuer.mint(&long)),
            None,
            None,
        )
        .await;
    assert_eq!(s, 401, "lifetime over an hour");
    let (s, _, _) = env
        .send(reqwest::Method::GET, "/v1/runs", None, None, None)
        .await;
    assert_eq!(s, 401);
    let mut rsa = Mint::new(PRODUCER, AUDIENCE);
    rsa.kind = KeyKind::Rs256;
    let (s, _, _) = env
        .send(
            reqwest::Method::GET,
            "/v1/runs",
            Some(&env.issuer.mint(&rsa)),
            None,
            None,
        )
        .await;
    assert_eq!(s, 200, "a good RS256 token");
    // A completion with the wrong token or binding.
    let url = format!("{}/v1/review-completions", env.base);
    let (s, body) = FakeCasework::post_completion(&url, "wrong", BINDING, "x")
        .await
        .unwrap();
    assert_eq!(s, 401, "{body}");
    let (s, _) = FakeCasework::post_completion(&url, COMPLETION_TOKEN, "other", "x")
        .await
        .unwrap();
    assert_eq!(s, 401);
}

#[tokio::test]
async fn policies_and_ownership() {
    let env = Env::new().await;
    let (_, run) = env
        .start(PRODUCER, "k-6", "reviewed-notice", review_input())
        .await;
    let id = run["run"].as_str().unwrap().to_owned();
    let (s, _, problem) = env
        .send(
            reqwest::Method::POST,
            &format!("/v1/runs/{id}/cancel"),
            Some(&env.token(PRODUCER)),
            None,
            Some(json!({"reason": "r-1"}).to_string()),
        )
        .await;
    assert_eq!(s, 403, "{problem}");
    let (s, _) = env.get(OTHER, &format!("/v1/runs/{id}")).await;
    assert_eq!(s, 404);
    let (_, list) = env.get(OTHER, "/v1/runs").await;
    assert!(list["runs"].as_array().unwrap().is_empty());
    let (s, _) = env.get(OPERATOR, &format!("/v1/runs/{id}")).await;
    assert_eq!(s, 200);
    let (s, _) = env.get("unknown-client", "/v1/runs").await;
    assert_eq!(s, 403);

    // The operator cancels while the review waits: onCancel withdraws.
    env.idle().await;
    let (s, _, after) = env
        .send(
            reqwest::Method::POST,
            &format!("/v1/runs/{id}/cancel"),
            Some(&env.token(OPERATOR)),
            None,
            Some(json!({"reason": "r-1"}).to_string()),
        )
        .await;
    assert_eq!(s, 200, "{after}");
    env.idle().await;
    let (_, status) = env.get(PRODUCER, &format!("/v1/runs/{id}")).await;
    assert_eq!(status["state"], "cancelled", "{status}");
    assert_eq!(status["outcome"], "review-withdrawn");
    assert_eq!(env.casework.review_requests()[0]["status"], "withdrawn");
}

#[tokio::test]
async fn admission_is_idempotent_and_strict() {
    let env = Env::new().await;
    let (s, first) = env
        .start(PRODUCER, "k-7", "reviewed-notice", review_input())
        .await;
    assert_eq!(s, 201);
    let (s, again) = env
        .start(PRODUCER, "k-7", "reviewed-notice", review_input())
        .await;
    assert_eq!(s, 200);
    assert_eq!(first["run"], again["run"]);
    let (s, other) = env
        .start(OTHER, "k-7", "reviewed-notice", review_input())
        .await;
    assert_eq!(s, 201, "the key is per caller");
    assert_ne!(other["run"], first["run"]);
    let (s, problem) = env
        .start(
            PRODUCER,
            "k-7",
            "reviewed-notice",
            json!({"applicationId": "app-2", "applicantEmail": "applicant@example.org"}),
        )
        .await;
    assert_eq!(s, 409);
    assert_eq!(problem["code"], "idempotency.key-reused");

    let token = env.token(PRODUCER);
    let post = |body: String, key: Option<&'static str>| {
        let token = token.clone();
        let env = &env;
        async move {
            env.send(
                reqwest::Method::POST,
                "/v1/runs",
                Some(&token),
                key,
                Some(body),
            )
            .await
        }
    };
    let stale = json!({"workflow": "reviewed-notice", "revision": format!("sha256:{}", "0".repeat(64)), "input": review_input()});
    let (s, headers, problem) = post(stale.to_string(), Some("k-8")).await;
    assert_eq!(s, 409);
    assert_eq!(problem["code"], "revision.not-active");
    assert_eq!(headers["cache-control"], "no-store");
    let bad = json!({"workflow": "reviewed-notice", "revision": env.revision("reviewed-notice"), "input": {"applicationId": ""}});
    let (s, _, problem) = post(bad.to_string(), Some("k-9")).await;
    assert_eq!(s, 400);
    assert_eq!(problem["code"], "input.invalid");
    let dup = format!(
        r#"{{"workflow":"reviewed-notice","revision":"{}","input":{{"applicationId":"a","applicationId":"b","applicantEmail":"x@example.org"}}}}"#,
        env.revision("reviewed-notice")
    );
    let (s, _, problem) = post(dup, Some("k-10")).await;
    assert_eq!(s, 400);
    assert_eq!(problem["code"], "request.invalid");
    let (s, _, problem) = post(stale.to_string(), None).await;
    assert_eq!(s, 400);
    assert_eq!(problem["code"], "idempotency.key-required");
    let big = json!({"workflow": "reviewed-notice", "revision": "x", "input": {"pad": "a".repeat(70_000)}});
    let (s, _, problem) = post(big.to_string(), Some("k-11")).await;
    assert_eq!(s, 413, "{problem}");

    // Listing: newest first, pages with a cursor.
    let (s, second) = env
        .start(PRODUCER, "k-12", "reviewed-notice", review_input())
        .await;
    assert_eq!(s, 201);
    let (_, page) = env.get(PRODUCER, "/v1/runs?limit=1").await;
    assert_eq!(page["runs"].as_array().unwrap().len(), 1);
    let cursor = page["nextCursor"].as_str().unwrap().to_owned();
    assert_eq!(page["runs"][0]["run"], second["run"], "newest first");
    let (_, page2) = env
        .get(PRODUCER, &format!("/v1/runs?limit=1&cursor={cursor}"))
        .await;
    assert_eq!(page2["runs"][0]["run"], first["run"]);
    assert!(page2["nextCursor"].is_null());
    let (s, _) = env.get(PRODUCER, "/v1/runs?limit=101").await;
    assert_eq!(s, 400);
    // The bulk actions' filters: admitted before, the current step and
    // its effect; a bad value is 400, a workflow that is no name lists
    // nothing (it never reaches the store).
    let (s, page) = env
        .get(PRODUCER, "/v1/runs?admittedBefore=2100-01-01T00:00:00Z")
        .await;
    assert_eq!((s, page["runs"].as_array().unwrap().len()), (200, 2));
    let (s, page) = env
        .get(PRODUCER, "/v1/runs?admittedBefore=2000-01-01T00:00:00Z")
        .await;
    assert_eq!((s, page["runs"].as_array().unwrap().len()), (200, 0));
    let (s, page) = env.get(PRODUCER, "/v1/runs?step=nowhere").await;
    assert_eq!((s, page["runs"].as_array().unwrap().len()), (200, 0));
    let (s, page) = env.get(PRODUCER, "/v1/runs?effect=accepted").await;
    assert_eq!((s, page["runs"].as_array().unwrap().len()), (200, 0));
    let (s, page) = env.get(PRODUCER, "/v1/runs?workflow=%00x").await;
    assert_eq!((s, page["runs"].as_array().unwrap().len()), (200, 0));
    for bad in ["effect=maybe", "admittedBefore=yesterday"] {
        let (s, problem) = env.get(PRODUCER, &format!("/v1/runs?{bad}")).await;
        assert_eq!(
            (s, &problem["code"]),
            (400, &json!("request.invalid")),
            "{bad}"
        );
    }
}

/// A path segment whose percent-encoding is not UTF-8 is answered with a
/// problem (400 `request.invalid`), on every route with a segment.
#[tokio::test]
async fn a_path_segment_that_is_not_utf8_is_a_problem() {
    let env = Env::new().await;
    let token = env.token(PRODUCER);
    for (method, path) in [
        (reqwest::Method::GET, "/v1/runs/%ff%00"),
        (reqwest::Method::GET, "/v1/runs/%ff/inspect"),
        (reqwest::Method::POST, "/v1/runs/%ff/cancel"),
        (reqwest::Method::POST, "/v1/events/%ff/x"),
    ] {
        let (s, headers, body) = env
            .send(method, path, Some(&token), None, Some("{}".into()))
            .await;
        assert_eq!(
            (s, body["code"].as_str()),
            (400, Some("request.invalid")),
            "{path}: {body}"
        );
        assert_eq!(
            headers["content-type"], "application/problem+json",
            "{path}"
        );
    }
}

#[tokio::test]
async fn ready_and_health() {
    let env = Env::new().await;
    let (s, _, body) = env
        .send(reqwest::Method::GET, "/ready", None, None, None)
        .await;
    assert_eq!((s, body), (200, json!({"ready": true})));
    env.store.set_unavailable(true);
    let (s, _, body) = env
        .send(reqwest::Method::GET, "/ready", None, None, None)
        .await;
    assert_eq!(
        (s, body),
        (503, json!({"ready": false, "reason": "store-unavailable"}))
    );
    env.store.set_unavailable(false);
    let (s, _, _) = env
        .send(reqwest::Method::GET, "/health", None, None, None)
        .await;
    assert_eq!(s, 200);
}

/// A process whose clock stands beyond its bound from the database's is
/// out of service (docs/operations.md "Clock skew"): `/ready` 503
/// `clock.skew` with the offset, a start 503 `service.unavailable` before
/// its token is read (a bad token too, never 401), reads answered, no
/// lease taken (a due wait waits); back within the bound it serves again.
#[tokio::test]
async fn a_process_whose_clock_is_out_of_its_bound_admits_and_leases_nothing() {
    let env = Env::new().await;
    env.breg.put_record(
        "applications",
        "app-7",
        "r1",
        json!({"noticeAllowed": true, "applicantEmail": "applicant@example.org"}),
    );
    let (s, run) = env
        .start(
            PRODUCER,
            "k-skew",
            "follow-up",
            json!({"applicationId": "app-7", "sendAfter": "2026-03-02T09:01:00Z"}),
        )
        .await;
    assert_eq!(s, 201, "{run}");
    let id = run["run"].as_str().unwrap().to_owned();
    env.idle().await;

    assert!(env.engine.health.set_clock_standing(300.25, false));
    assert!(!env.engine.health.set_clock_standing(300.5, false));
    let (s, _, body) = env
        .send(reqwest::Method::GET, "/ready", None, None, None)
        .await;
    assert_eq!(
        (s, body),
        (
            503,
            json!({"ready": false, "reason": "clock.skew", "clockOffsetSeconds": 300.5})
        )
    );
    let (s, refused) = env
        .start(
            PRODUCER,
            "k-skew-2",
            "follow-up",
            json!({"applicationId": "app-7", "sendAfter": "2026-03-02T09:01:00Z"}),
        )
        .await;
    assert_eq!((s, &refused["code"]), (503, &json!("service.unavailable")));
    let (s, _, refused) = env
        .send(
            reqwest::Method::POST,
            "/v1/runs",
            Some("not-a-token"),
            Some("k-skew-3"),
            Some("{}".into()),
        )
        .await;
    assert_eq!((s, &refused["code"]), (503, &json!("service.unavailable")));
    // The wait falls due, and nothing is leased.
    env.clock.advance(120);
    env.idle().await;
    assert!(env.messaging.messages().is_empty());
    let (s, status) = env.get(PRODUCER, &format!("/v1/runs/{id}")).await;
    assert_eq!((s, &status["state"]), (200, &json!("running")));

    assert!(env.engine.health.set_clock_standing(-0.25, true));
    let (s, _, body) = env
        .send(reqwest::Method::GET, "/ready", None, None, None)
        .await;
    assert_eq!((s, body), (200, json!({"ready": true})));
    env.idle().await;
    assert_eq!(env.messaging.messages().len(), 1);
    let (_, status) = env.get(PRODUCER, &format!("/v1/runs/{id}")).await;
    assert_eq!(status["state"], "finished", "{status}");
}

#[tokio::test]
async fn retryable_answers_are_resent_with_the_same_key_after_backoff() {
    let env = Env::new().await;
    env.messaging
        .fake()
        .script("/v1/messages", [Reply::Retryable, Reply::Normal]);
    env.breg.put_record(
        "applications",
        "app-3",
        "r1",
        json!({"noticeAllowed": true, "applicantEmail": "applicant@example.org"}),
    );
    let (_, run) = env
        .start(
            PRODUCER,
            "k-13",
            "follow-up",
            json!({"applicationId": "app-3", "sendAfter": "2020-01-01T00:00:00Z"}),
        )
        .await;
    let id = run["run"].as_str().unwrap().to_owned();
    env.idle().await;
    let sent = env.messaging.fake().requests_to("/v1/messages");
    assert_eq!(sent.len(), 1, "the retry waits for its backoff");
    env.clock.advance(2);
    env.idle().await;
    let sent = env.messaging.fake().requests_to("/v1/messages");
    assert_eq!(sent.len(), 2);
    let key = sent[0].header("idempotency-key").unwrap().to_owned();
    assert_eq!(sent[1].header("idempotency-key"), Some(key.as_str()));
    assert_eq!(sent[0].body, sent[1].body, "the same bytes");
    let (_, inspection) = env.get(PRODUCER, &format!("/v1/runs/{id}/inspect")).await;
    assert_eq!(inspection["status"]["state"], "finished", "{inspection}");
    let notify = inspection["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "notify")
        .unwrap()
        .clone();
    assert_eq!(notify["attempts"], 2);
    assert_eq!(notify["effect"], "accepted");
}

/// The run's timeline (docs/graph.md): a run that waited three days and
/// was answered `retryable` once reads, per step, when it started and
/// ended, its wait's due time and end, and its answers (kinds and codes,
/// never a body), at the engine clock's instants.
#[tokio::test]
async fn a_run_that_waited_and_retried_reads_its_timeline() {
    let env = Env::new().await;
    env.messaging
        .fake()
        .script("/v1/messages", [Reply::Retryable, Reply::Normal]);
    env.breg.put_record(
        "applications",
        "app-7",
        "r1",
        json!({"noticeAllowed": true, "applicantEmail": "applicant@example.org"}),
    );
    let admitted = env.clock.now_rfc3339();
    let send_after = coordinator_ir::instant::add_seconds(&admitted, 3 * 86_400).unwrap();
    let (_, run) = env
        .start(
            PRODUCER,
            "k-timeline",
            "follow-up",
            json!({"applicationId": "app-7", "sendAfter": send_after}),
        )
        .await;
    let id = run["run"].as_str().unwrap().to_owned();
    env.idle().await;
    let (_, waiting) = env.get(PRODUCER, &format!("/v1/runs/{id}/inspect")).await;
    let due = &waiting["steps"][0];
    assert_eq!(
        (
            &due["name"],
            &due["startedAt"],
            &due["waitDueAt"],
            &due["dueAt"]
        ),
        (
            &json!("due"),
            &json!(admitted),
            &json!(send_after),
            &json!(send_after)
        ),
        "{waiting}"
    );
    assert!(
        due.get("endedAt").is_none() && due.get("waitEnded").is_none(),
        "{due}"
    );

    env.clock.advance(3 * 86_400);
    env.idle().await;
    env.clock.advance(2);
    env.idle().await;
    let retried_at = env.clock.now_rfc3339();
    let (_, inspection) = env.get(PRODUCER, &format!("/v1/runs/{id}/inspect")).await;
    assert_eq!(inspection["status"]["state"], "finished", "{inspection}");
    let step = |name: &str| {
        inspection["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap()
            .clone()
    };
    let due = step("due");
    assert_eq!(
        (&due["endedAt"], &due["waitEnded"], due.get("dueAt")),
        (&json!(send_after), &json!("woke"), Some(&Value::Null)),
        "{due}"
    );
    let notify = step("notify");
    assert_eq!(notify["startedAt"], json!(send_after), "{notify}");
    assert_eq!(notify["endedAt"], json!(retried_at), "{notify}");
    assert_eq!(
        notify["answers"],
        json!([
            {"at": send_after, "attempt": 1, "kind": "retryable", "code": "http-503"},
            {"at": retried_at, "attempt": 2, "kind": "success"}
        ]),
        "{notify}"
    );
    let finish = step("accepted");
    assert_eq!(
        (&finish["startedAt"], &finish["endedAt"]),
        (&json!(retried_at), &json!(retried_at)),
        "{finish}"
    );
}

#[tokio::test]
async fn a_run_keeps_its_revision_after_the_workflow_moves_on() {
    let env = Env::new().await;
    env.breg.put_record(
        "applications",
        "app-r",
        "r1",
        json!({"noticeAllowed": true, "applicantEmail": "applicant@example.org"}),
    );
    let (s, run) = env
        .start(
            PRODUCER,
            "k-rev",
            "follow-up",
            json!({"applicationId": "app-r", "sendAfter": "2026-03-01T00:00:00Z"}),
        )
        .await;
    assert_eq!(s, 201, "{run}");
    let id = run["run"].as_str().unwrap().to_owned();
    // Another process serves a newer revision of the workflow; the store
    // keeps the old definition, so the run finishes under its own Program.
    let old = env
        .definitions
        .iter()
        .find(|d| d.program.workflow == "follow-up")
        .unwrap()
        .clone();
    let mut program = old.program.clone();
    program.deadline_seconds -= 1;
    let newer = Definition::new(program);
    assert_ne!(newer.revision, old.revision);
    let definitions: Vec<Definition> = env
        .definitions
        .iter()
        .filter(|d| d.program.workflow != "follow-up")
        .cloned()
        .chain([newer])
        .collect();
    let engine = build_engine(
        "worker-2",
        &env.store,
        &env.clock,
        &env.secrets,
        &env.connections,
        &definitions,
    );
    env.store.add_definition(old.clone());
    engine.worker.run_until_idle(20).await.unwrap();
    let stored = env.store.get(&id).await.unwrap().unwrap();
    assert_eq!(stored.revision, old.revision);
    assert_eq!(stored.status().as_str(), "finished", "{:?}", stored.state);
    assert_eq!(env.messaging.messages().len(), 1);
}

#[tokio::test]
async fn a_hanging_call_holds_up_one_worker_lane_not_the_others() {
    let env = Env::new().await;
    // Run A's review request hangs until the connection's timeout.
    env.casework
        .fake()
        .script("/v1/review-requests", [Reply::Hang]);
    let (_, a) = env
        .start(PRODUCER, "k-lane-a", "reviewed-notice", review_input())
        .await;
    let a = a["run"].as_str().unwrap().to_owned();
    // Run B is due at once: a record read, then a message, in two ticks.
    env.breg.put_record(
        "applications",
        "app-lane",
        "r1",
        json!({"noticeAllowed": true, "applicantEmail": "applicant@example.org"}),
    );
    let (s, b) = env
        .start(
            PRODUCER,
            "k-lane-b",
            "follow-up",
            json!({"applicationId": "app-lane", "sendAfter": START}),
        )
        .await;
    assert_eq!(s, 201, "{b}");

    let (stop, stopped) = tokio::sync::watch::channel(false);
    let worker = tokio::spawn(coordinator::work(
        env.engine.clone(),
        Duration::from_millis(10),
        stopped,
    ));
    let mut sent = false;
    for _ in 0..300 {
        if env.messaging.messages().len() == 1 {
            sent = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(sent, "run B's message was not sent while A's call hung");
    // A's request is still in flight: its job is `sending`, so B did not
    // wait for A's timeout.
    let jobs = env.store.jobs(&a).await.unwrap();
    assert!(
        jobs.iter()
            .any(|j| j.state == coordinator_ports::JobState::Sending),
        "{jobs:?}"
    );
    let _ = stop.send(true);
    worker.abort();
}

/// A lane holding a product answer through a store outage keeps its job:
/// when its lease ran out meanwhile, another lane of the same process that
/// leases the job again leaves it to the holder instead of taking the
/// attempt for an interrupted one (which would make the effect `unknown`).
#[tokio::test]
async fn a_lane_holding_an_answer_through_an_outage_keeps_its_job() {
    let env = Env::new().await;
    env.casework.fake().script(
        "/v1/review-requests",
        [Reply::Delay(Duration::from_millis(300))],
    );
    let (_, run) = env
        .start(PRODUCER, "k-held", "reviewed-notice", review_input())
        .await;
    let id = run["run"].as_str().unwrap().to_owned();

    let engine = env.engine.clone();
    let holder = tokio::spawn(async move { engine.worker.tick().await });
    let sent = || env.casework.fake().requests_to("/v1/review-requests").len();
    for _ in 0..300 {
        if sent() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(sent(), 1);
    // The store goes away while the answer is on its way; the holder waits
    // for it, and its lease runs out.
    env.store.set_unavailable(true);
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    env.clock.advance(611);
    env.store.set_unavailable(false);
    // Another lane leases the job again before the holder retries.
    env.engine.worker.tick().await.unwrap();
    holder.await.unwrap().unwrap();

    let (_, inspection) = env.get(PRODUCER, &format!("/v1/runs/{id}/inspect")).await;
    assert_eq!(inspection["status"]["state"], "running", "{inspection}");
    assert_eq!(effect(&inspection, "submit-review"), "accepted");
    env.idle().await;
    assert_eq!(sent(), 1, "the mutation was sent once");
}

/// Every operation the OpenAPI document lists is routed: without
/// credentials each answers something other than `route.not-found` or 405,
/// and a path it does not list is `route.not-found`.
#[tokio::test]
async fn every_operation_in_the_openapi_document_is_routed() {
    let env = Env::new().await;
    for (method, path) in coordinator_api::openapi::routes() {
        let concrete = path
            .replace("{run}", "no-such-run")
            .replace("{workflow}", "follow-up")
            .replace("{trigger}", "no-such-trigger");
        let method = match method {
            "get" => reqwest::Method::GET,
            "post" => reqwest::Method::POST,
            other => panic!("unexpected method {other}"),
        };
        let body = (method == reqwest::Method::POST).then(|| "{}".to_owned());
        let (s, _, problem) = env.send(method.clone(), &concrete, None, None, body).await;
        assert_ne!(s, 405, "{method} {path}");
        assert_ne!(problem["code"], "route.not-found", "{method} {path}");
    }
    let (s, _, problem) = env
        .send(reqwest::Method::GET, "/v1/not-listed", None, None, None)
        .await;
    assert_eq!(
        (s, problem["code"].clone()),
        (404, json!("route.not-found"))
    );
}

/// Review findings: an array is not a body, a wrong method is a problem
/// document, a 403 names the missing action, an input refusal never echoes
/// the value.
#[tokio::test]
async fn refusals_are_problem_documents_that_name_their_cause() {
    let env = Env::new().await;
    let revision = env.revision("follow-up");
    let token = env.token(PRODUCER);
    let (s, _, problem) = env
        .send(
            reqwest::Method::POST,
            "/v1/runs",
            Some(&token),
            Some("k-array"),
            Some(json!(["follow-up", revision, {"applicationId": "a"}]).to_string()),
        )
        .await;
    assert_eq!(
        (s, problem["code"].clone()),
        (400, json!("request.invalid"))
    );
    assert_eq!(problem["detail"], "the body must be a JSON object");

    let (s, _, problem) = env
        .send(
            reqwest::Method::GET,
            "/v1/events/follow-up/t",
            None,
            None,
            None,
        )
        .await;
    assert_eq!(
        (s, problem["code"].clone()),
        (405, json!("method.not-allowed"))
    );

    let (s, _, problem) = env
        .send(reqwest::Method::GET, "/v1/doctor", Some(&token), None, None)
        .await;
    assert_eq!(s, 403);
    assert!(
        problem["detail"].as_str().unwrap().contains("`doctor`"),
        "{problem}"
    );

    let personal = "john.smith@example.org";
    let (s, run) = env
        .start(
            PRODUCER,
            "k-echo",
            "follow-up",
            json!({"applicationId": "app-1", "sendAfter": personal}),
        )
        .await;
    assert_eq!((s, run["code"].clone()), (400, json!("input.invalid")));
    assert!(!run.to_string().contains(personal), "{run}");
    assert!(
        run["detail"].as_str().unwrap().contains("/sendAfter"),
        "{run}"
    );
}

/// The edge's answers beyond the token rules: a 403 says
/// `insufficient_scope`; a POST whose body is not JSON is 415 before it is
/// read; a token verifier that cannot reach the issuer's keys is an outage
/// of ours (503 `service.unavailable`), never a 401.
/// A header the API reads one value of, sent twice, is 400
/// `request.invalid` naming it: no value silently wins.
#[tokio::test]
async fn a_repeated_header_is_refused_not_guessed() {
    let env = Env::new().await;
    let token = env.token(PRODUCER);
    let body =
        json!({"workflow": "follow-up", "input": {"applicationId": "a", "sendAfter": START}})
            .to_string();
    for (name, first, second) in [
        ("idempotency-key", "k-a", "k-b"),
        ("authorization", "Bearer x", "Bearer y"),
        ("content-type", "application/json", "text/plain"),
    ] {
        let mut r = env
            .http
            .post(format!("{}/v1/runs", env.base))
            .body(body.clone());
        if name != "authorization" {
            r = r.bearer_auth(&token);
        }
        if name != "idempotency-key" {
            r = r.header("idempotency-key", "k-once");
        }
        if name != "content-type" {
            r = r.header("content-type", "application/json");
        }
        let resp = r
            .header(name, first)
            .header(name, second)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let problem: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
        assert_eq!(
            (status, problem["code"].as_str()),
            (400, Some("request.invalid")),
            "{name}: {problem}"
        );
        assert!(
            problem["detail"]
                .as_str()
                .unwrap_or_default()
                .contains(name),
            "{problem}"
        );
    }
    let (_, list) = env.get(OPERATOR, "/v1/runs").await;
    assert_eq!(
        list["runs"].as_array().map(Vec::len),
        Some(0),
        "nothing started"
    );
}

#[tokio::test]
async fn media_types_scopes_and_a_verifier_outage_answer_as_the_seed_says() {
    let mut env = Env::new().await;
    let (s, headers, body) = env
        .send(
            reqwest::Method::GET,
            "/v1/doctor",
            Some(&env.token(PRODUCER)),
            None,
            None,
        )
        .await;
    assert_eq!(
        (s, body["code"].as_str()),
        (403, Some("authorization.refused"))
    );
    assert_eq!(
        headers["www-authenticate"],
        r#"Bearer error="insufficient_scope""#
    );
    for content_type in [
        None,
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
    ] {
        let mut r = env
            .http
            .post(format!("{}/v1/runs", env.base))
            .bearer_auth(env.token(PRODUCER))
            .header("idempotency-key", "k-media")
            .body("{}");
        if let Some(t) = content_type {
            r = r.header("content-type", t);
        }
        let resp = r.send().await.unwrap();
        let status = resp.status().as_u16();
        let body: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
        assert_eq!(
            (status, body["code"].as_str()),
            (415, Some("request.unsupported-media-type")),
            "{content_type:?}"
        );
    }
    for content_type in [
        "application/json; charset=utf-8",
        "application/problem+json",
    ] {
        let resp = env
            .http
            .post(format!("{}/v1/runs", env.base))
            .bearer_auth(env.token(PRODUCER))
            .header("idempotency-key", "k-media")
            .header("content-type", content_type)
            .body("[]")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 400, "{content_type}: read as JSON");
    }
    // The issuer's keys cannot be fetched: 503, and the same token is
    // accepted once they can.
    let token = env.token(PRODUCER);
    env.serve_with(KeySource::Uri("http://127.0.0.1:1/jwks".into()))
        .await;
    let (s, headers, body) = env
        .send(reqwest::Method::GET, "/v1/runs", Some(&token), None, None)
        .await;
    assert_eq!(
        (s, body["code"].as_str()),
        (503, Some("service.unavailable")),
        "{body}"
    );
    assert!(headers.get("www-authenticate").is_none());
    env.serve().await;
    let (s, _, _) = env
        .send(reqwest::Method::GET, "/v1/runs", Some(&token), None, None)
        .await;
    assert_eq!(s, 200);
}

/// seed 000 "Codes you see": a reconcile whose lookup finds the product's
/// receipt gone answers 409 `receipt.expired` and the run stays held (not
/// evidence the command was never sent), also when asked again; a
/// reconcile of a run that changed between the read and the commit is 409
/// `reconcile.raced` and applies nothing.
#[tokio::test]
async fn an_expired_receipt_and_a_raced_reconcile_answer_their_codes() {
    let env = Env::new().await;
    env.messaging
        .fake()
        .script("/v1/messages", [Reply::Reset, Reply::Reset]);
    let mut held = Vec::new();
    for (app, key) in [("app-e1", "k-e1"), ("app-e2", "k-e2")] {
        env.breg.put_record(
            "applications",
            app,
            "r1",
            json!({"noticeAllowed": true, "applicantEmail": "applicant@example.org"}),
        );
        let (_, run) = env
            .start(
                PRODUCER,
                key,
                "follow-up",
                json!({"applicationId": app, "sendAfter": "2020-01-01T00:00:00Z"}),
            )
            .await;
        held.push(run["run"].as_str().unwrap().to_owned());
    }
    env.idle().await;
    for id in &held {
        let (_, st) = env.get(OPERATOR, &format!("/v1/runs/{id}")).await;
        assert_eq!(st["state"], "attention", "{st}");
    }
    let reconcile = |id: String| {
        let env = &env;
        async move {
            let path = format!("/v1/runs/{id}/reconcile");
            let token = env.token(OPERATOR);
            env.send(
                reqwest::Method::POST,
                &path,
                Some(&token),
                None,
                Some(json!({"reason": "inc-1"}).to_string()),
            )
            .await
        }
    };
    // The product forgot the first run's key.
    let sent = env.messaging.fake().requests_to("/v1/messages");
    let key = sent[0].header("idempotency-key").unwrap().to_owned();
    env.messaging.fake().expire(&key);
    let (s, _, body) = reconcile(held[0].clone()).await;
    assert_eq!(
        (s, body["code"].as_str()),
        (409, Some("receipt.expired")),
        "{body}"
    );
    let (_, st) = env.get(OPERATOR, &format!("/v1/runs/{}", held[0])).await;
    assert_eq!(st["state"], "attention", "the run stays held: {st}");
    let (s, _, body) = reconcile(held[0].clone()).await;
    assert_eq!(
        (s, body["code"].as_str()),
        (409, Some("receipt.expired")),
        "{body}"
    );
    // The second run changes between the read and the commit.
    env.store.conflict_next_commit();
    let (s, _, body) = reconcile(held[1].clone()).await;
    assert_eq!(
        (s, body["code"].as_str()),
        (409, Some("reconcile.raced")),
        "{body}"
    );
    let (_, st) = env.get(OPERATOR, &format!("/v1/runs/{}", held[1])).await;
    assert_eq!(st["state"], "attention", "nothing was applied: {st}");
    assert_eq!(
        env.messaging.fake().requests_to("/v1/messages").len(),
        2,
        "nothing was sent again"
    );
}

/// A method a path lacks is 405 `method.not-allowed` with `Allow` naming
/// the path's methods, before any check of its body: a `POST` with a
/// non-JSON body to a `GET` route is not 415. A `POST` route still
/// refuses a non-JSON body with 415.
#[tokio::test]
async fn a_method_a_path_lacks_is_405_with_allow_before_any_body_check() {
    let env = Env::new().await;
    let client = reqwest::Client::new();
    for (method, path, allow) in [
        (reqwest::Method::POST, "/v1/runs/some-run", "GET"),
        (reqwest::Method::POST, "/v1/runs/some-run/inspect", "GET"),
        (reqwest::Method::POST, "/v1/doctor", "GET"),
        (reqwest::Method::POST, "/ready", "GET"),
        (reqwest::Method::POST, "/health", "GET"),
        (reqwest::Method::GET, "/v1/restore-hold", "POST"),
        (reqwest::Method::DELETE, "/v1/runs", "GET,POST"),
    ] {
        let r = client
            .request(method.clone(), format!("{}{path}", env.base))
            .header("content-type", "text/plain")
            .body("not json")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 405, "{method} {path}");
        let mut allowed: Vec<String> = r
            .headers()
            .get("allow")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_else(|| panic!("{method} {path}: no Allow header"))
            .split(',')
            .map(|m| m.trim().to_owned())
            .filter(|m| m != "HEAD")
            .collect();
        allowed.sort();
        let mut want: Vec<String> = allow.split(',').map(str::to_owned).collect();
        want.sort();
        assert_eq!(allowed, want, "{method} {path}");
        let body: serde_json::Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
        assert_eq!(body["code"], "method.not-allowed", "{method} {path}");
    }
    let r = client
        .post(format!("{}/v1/runs", env.base))
        .header("content-type", "text/plain")
        .body("not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 415);
}
