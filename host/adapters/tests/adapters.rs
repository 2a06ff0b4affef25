//! The product adapters against the in-process fakes, over real sockets
//! (SPEC §6): every operation, every row of the status mapping, transport
//! failures, receipts, external GET rules, and token acquisition.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::sync::Arc;

use coordinator_adapters::{
    mapping, DispatchRequest, HttpAdapter, MemorySecrets, Observation, Outcome, ProductAdapter,
    ReceiptRequest,
};
use coordinator_fakes::{
    ActionBehaviour, FakeBreg, FakeCasework, FakeDirectory, FakeEvaluation, FakeIssuer,
    FakeMessaging, FakeScheduling, Flaw, KeyKind, Mint, Reply, TestKey,
};
use coordinator_runtime::config::{
    Authorization, BregConnection, CaseworkConnection, Connection, DecisionConnection,
    ExternalHttpConnection, PlainConnection, SecretRef,
};
use coordinator_vm::Answer;
use serde_json::{json, Value};

const READ_RECORD: &str = "breg.read-record/v1";
const INVOKE: &str = "breg.invoke-action/v1";
const SUBMIT_MESSAGE: &str = "messaging.submit-message/v1";
const READ_AVAILABILITY: &str = "scheduling.read-availability/v1";
const CREATE_APPOINTMENT: &str = "scheduling.create-appointment/v1";
const SUBMIT_REVIEW: &str = "casework.submit-review-request/v1";
const READ_REVIEW: &str = "casework.read-review-request/v1";
const WITHDRAW_REVIEW: &str = "casework.withdraw-review-request/v1";
const EXTERNAL_GET: &str = "external.get/v1";
const EVALUATE: &str = "evaluation.evaluate/v1";

/// An issuer, one fake per product, a connection to each, and the adapter.
struct Env {
    issuer: FakeIssuer,
    breg: FakeBreg,
    messaging: FakeMessaging,
    scheduling: FakeScheduling,
    casework: FakeCasework,
    directory: FakeDirectory,
    evaluation: FakeEvaluation,
    secrets: MemorySecrets,
    adapter: HttpAdapter,
}

impl Env {
    async fn new() -> Env {
        let issuer = FakeIssuer::start().await.unwrap();
        let env = Env {
            breg: FakeBreg::start().await.unwrap(),
            messaging: FakeMessaging::start().await.unwrap(),
            scheduling: FakeScheduling::start().await.unwrap(),
            casework: FakeCasework::start().await.unwrap(),
            directory: FakeDirectory::start().await.unwrap(),
            evaluation: FakeEvaluation::start().await.unwrap(),
            issuer,
            secrets: MemorySecrets::new(),
            adapter: HttpAdapter::new(Arc::new(MemorySecrets::new())).unwrap(),
        };
        env.with_clients()
    }

    /// Registers one client per product (each key type in turn) and builds
    /// the adapter over their private keys.
    fn with_clients(mut self) -> Env {
        let clients = [
            ("breg", KeyKind::Rs256),
            ("messaging", KeyKind::Es256),
            ("scheduling", KeyKind::EdDsa),
            ("casework", KeyKind::Es256),
            ("directory", KeyKind::EdDsa),
            ("decision", KeyKind::Rs256),
        ];
        for (name, kind) in clients {
            let key = TestKey::generate(kind, &format!("{name}-key"));
            self.issuer
                .register_client(&client_id(name), key.public_jwk.clone(), None);
            self.secrets
                .insert(&key_ref(name), key.private_jwk_text().into_bytes());
        }
        let check = self.issuer.token_check();
        for fake in [
            self.breg.fake(),
            self.messaging.fake(),
            self.scheduling.fake(),
            self.casework.fake(),
            self.directory.fake(),
            self.evaluation.fake(),
        ] {
            fake.require_bearer(check.clone());
        }
        self.adapter = HttpAdapter::new(Arc::new(self.secrets.clone())).unwrap();
        self
    }

    fn auth(&self, name: &str) -> Authorization {
        Authorization {
            token_endpoint: self.issuer.token_endpoint(),
            client_id: client_id(name),
            signing_key_ref: SecretRef(key_ref(name)),
            scopes: vec![format!("{name}:read"), format!("{name}:write")],
            resource: None,
        }
    }

    fn breg_conn(&self) -> Connection {
        Connection::Breg(BregConnection {
            base_url: self.breg.base_url().to_owned(),
            profile: "follow-up-reader".into(),
            authorization: self.auth("breg"),
            request_timeout_milliseconds: Some(2000),
            limits: None,
        })
    }

    fn messaging_conn(&self) -> Connection {
        Connection::Messaging(PlainConnection {
            base_url: self.messaging.base_url().to_owned(),
            authorization: self.auth("messaging"),
            request_timeout_milliseconds: Some(2000),
            limits: None,
        })
    }

    fn scheduling_conn(&self) -> Connection {
        Connection::Scheduling(PlainConnection {
            base_url: self.scheduling.base_url().to_owned(),
            authorization: self.auth("scheduling"),
            request_timeout_milliseconds: Some(2000),
            limits: None,
        })
    }

    fn casework_conn(&self) -> Connection {
        Connection::CaseworkReviewProducer(CaseworkConnection {
            base_url: self.casework.base_url().to_owned(),
            profile: None,
            producer: "coordinator".into(),
            authorization: self.auth("casework"),
            completion: None,
            result_check_seconds: 900,
            request_timeout_milliseconds: Some(2000),
            limits: None,
        })
    }

    fn directory_conn(&self) -> Connection {
        Connection::ExternalHttp(ExternalHttpConnection {
            base_url: self.directory.base_url().to_owned(),
            paths: vec![
                "/offices".into(),
                "/moved".into(),
                "/v2/offices/list".into(),
            ],
            query_parameters: vec!["district".into()],
            authorization: Some(self.auth("directory")),
            request_timeout_milliseconds: Some(2000),
            limits: None,
        })
    }

    fn decision_conn(&self) -> Connection {
        Connection::Decision(DecisionConnection {
            base_url: self.evaluation.base_url().to_owned(),
            model: "triage-small".into(),
            authorization: self.auth("decision"),
            request_timeout_milliseconds: Some(2000),
            limits: None,
        })
    }

    async fn dispatch(&self, connection: &Connection, request: DispatchRequest) -> Outcome {
        self.adapter.dispatch(connection, &request).await.unwrap()
    }
}

fn client_id(name: &str) -> String {
    format!("coordinator-{name}")
}

fn key_ref(name: &str) -> String {
    format!("secret:file/{name}-client-key")
}

fn request(op: &str, command: Value, key: Option<&str>) -> DispatchRequest {
    DispatchRequest {
        operation_id: op.into(),
        action: None,
        command,
        idempotency_key: key.map(str::to_owned),
    }
}

fn message() -> Value {
    json!({"senderProfile": "notices", "to": {"email": "a@example.org"},
        "template": {"id": "notice", "version": "1"}, "locale": "en", "data": {"name": "A"}})
}

fn success(o: Outcome) -> Value {
    match o {
        Outcome::Answer(Answer::Success { value }) => value,
        other => panic!("expected success, got {other:?}"),
    }
}

fn answer(o: Outcome) -> Answer {
    match o {
        Outcome::Answer(a) => a,
        other => panic!("expected an answer, got {other:?}"),
    }
}

// ------------------------------------------------------------ operations

#[tokio::test]
async fn breg_read_record_sends_profile_and_a_fresh_token() {
    let env = Env::new().await;
    env.breg.require_profile("follow-up-reader");
    env.breg
        .put_record("applications", "app/1", "7", json!({"name": "A"}));
    let value = success(
        env.dispatch(
            &env.breg_conn(),
            request(
                READ_RECORD,
                json!({"collection": "applications", "recordId": "app/1"}),
                None,
            ),
        )
        .await,
    );
    assert_eq!(
        value,
        json!({"collection": "applications", "recordId": "app/1", "revision": "7", "data": {"name": "A"}})
    );
    let recorded = env.breg.fake().requests();
    assert_eq!(recorded.len(), 1);
    let r = &recorded[0];
    assert_eq!(r.method, "GET");
    // The record id is one percent-encoded path segment.
    assert_eq!(r.path, "/v1/collections/applications/records/app%2F1");
    assert_eq!(
        r.header("registry-access-profile"),
        Some("follow-up-reader")
    );
    assert_eq!(r.header("idempotency-key"), None);
    assert!(env.issuer.issued(r.bearer().unwrap()));
    let tokens = env.issuer.token_requests();
    assert_eq!(tokens.len(), 1);
    let t = &tokens[0];
    assert_eq!(t.outcome, Ok(()));
    assert_eq!(t.assertion_alg.as_deref(), Some("RS256"));
    assert_eq!(t.scope.as_deref(), Some("breg:read breg:write"));
    let claims = &t.assertion_claims;
    assert_eq!(claims["iss"], json!(client_id("breg")));
    assert_eq!(claims["sub"], json!(client_id("breg")));
    assert_eq!(claims["aud"], json!(env.issuer.token_endpoint()));
    assert!(claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap() <= 60);
}

#[tokio::test]
async fn breg_read_missing_record_and_refused_profile() {
    let env = Env::new().await;
    env.breg.require_profile("someone-else");
    env.breg.put_record("applications", "1", "1", json!({}));
    let read = || {
        request(
            READ_RECORD,
            json!({"collection": "applications", "recordId": "1"}),
            None,
        )
    };
    assert_eq!(
        answer(env.dispatch(&env.breg_conn(), read()).await),
        Answer::Refused {
            code: mapping::PRODUCT_FORBIDDEN.into()
        }
    );
    let missing = request(
        READ_RECORD,
        json!({"collection": "applications", "recordId": "2"}),
        None,
    );
    env.breg.require_profile("follow-up-reader");
    assert_eq!(
        answer(env.dispatch(&env.breg_conn(), missing).await),
        Answer::Refused {
            code: mapping::PRODUCT_NOT_FOUND.into()
        }
    );
}

#[tokio::test]
async fn breg_invoke_action_results_and_declared_refusal() {
    let env = Env::new().await;
    env.breg.put_action(
        "grant-extension",
        ActionBehaviour::Results(json!({"granted": true})),
    );
    env.breg.put_action(
        "close-file",
        ActionBehaviour::DeclaredRefusal("file-has-open-tasks".into()),
    );
    let mut req = request(INVOKE, json!({"input": {"days": 10}}), Some("key-1"));
    req.action = Some("grant-extension".into());
    assert_eq!(
        success(env.dispatch(&env.breg_conn(), req).await),
        json!({"action": "grant-extension", "results": {"granted": true}})
    );
    let r = &env.breg.fake().requests_to("/v1/actions/grant-extension")[0];
    assert_eq!(r.method, "POST");
    assert_eq!(r.header("idempotency-key"), Some("key-1"));
    assert_eq!(r.json(), json!({"input": {"days": 10}}));
    assert_eq!(env.breg.invocations().len(), 1);

    let mut req = request(INVOKE, json!({"input": {}}), Some("key-2"));
    req.action = Some("close-file".into());
    assert_eq!(
        answer(env.dispatch(&env.breg_conn(), req).await),
        Answer::DeclaredRefusal {
            refusal_code: "file-has-open-tasks".into()
        }
    );

    let mut req = request(INVOKE, json!({"input": {}}), Some("key-3"));
    req.action = Some("no-such-action".into());
    assert_eq!(
        answer(env.dispatch(&env.breg_conn(), req).await),
        Answer::Refused {
            code: mapping::PRODUCT_NOT_FOUND.into()
        }
    );
}

#[tokio::test]
async fn messaging_submit_is_idempotent_by_key() {
    let env = Env::new().await;
    let first = success(
        env.dispatch(
            &env.messaging_conn(),
            request(SUBMIT_MESSAGE, message(), Some("k-1")),
        )
        .await,
    );
    assert_eq!(first["status"], json!("accepted"));
    // Same key, same bytes: the same answer, one effect.
    let again = success(
        env.dispatch(
            &env.messaging_conn(),
            request(SUBMIT_MESSAGE, message(), Some("k-1")),
        )
        .await,
    );
    assert_eq!(first, again);
    let fake = env.messaging.fake();
    assert_eq!(fake.key_count("k-1"), 2);
    assert_eq!(fake.effect_count("k-1"), 1);
    assert_eq!(env.messaging.messages().len(), 1);
    let sent = fake.requests_to("/v1/messages");
    assert_eq!(
        sent[0].body, sent[1].body,
        "every attempt sends the same bytes"
    );
    assert_eq!(sent[0].json(), message());
    assert_eq!(sent[0].header("content-type"), Some("application/json"));
}

#[tokio::test]
async fn scheduling_availability_and_appointment() {
    let env = Env::new().await;
    env.scheduling.add_slot(
        "passport",
        "2026-10-12T09:00:00Z",
        "2026-10-12T09:30:00Z",
        1,
    );
    let value = success(
        env.dispatch(
            &env.scheduling_conn(),
            request(
                READ_AVAILABILITY,
                json!({"offering": "passport", "start": "2026-10-12T00:00:00Z",
                    "end": "2026-10-13T00:00:00Z", "limit": 10}),
                None,
            ),
        )
        .await,
    );
    assert_eq!(value["items"][0]["free"], json!(1));
    let r = &env.scheduling.fake().requests_to("/v1/availability")[0];
    assert_eq!(
        r.query.as_deref(),
        Some("offering=passport&start=2026-10-12T00%3A00%3A00Z&end=2026-10-13T00%3A00%3A00Z&limit=10")
    );
    let appointment = success(
        env.dispatch(
            &env.scheduling_conn(),
            request(
                CREATE_APPOINTMENT,
                json!({"offering": "passport", "start": "2026-10-12T09:00:00Z",
                    "party": {"reference": "p-1"}}),
                Some("a-1"),
            ),
        )
        .await,
    );
    assert_eq!(appointment["end"], json!("2026-10-12T09:30:00Z"));
    // The slot is taken: a definite refusal with the product's code.
    assert_eq!(
        answer(
            env.dispatch(
                &env.scheduling_conn(),
                request(
                    CREATE_APPOINTMENT,
                    json!({"offering": "passport", "start": "2026-10-12T09:00:00Z",
                        "party": {"reference": "p-2"}}),
                    Some("a-2"),
                ),
            )
            .await
        ),
        Answer::Refused {
            code: "appointment.unavailable".into()
        }
    );
}

#[tokio::test]
async fn casework_submit_read_decide_withdraw() {
    let env = Env::new().await;
    env.casework.trust_only("coordinator");
    let conn = env.casework_conn();
    let submitted = success(
        env.dispatch(
            &conn,
            request(
                SUBMIT_REVIEW,
                json!({"subject": {"product": "breg", "recordType": "application", "identifier": "1"},
                    "policy": "extension-review", "summary": {"days": 10}}),
                Some("r-1"),
            ),
        )
        .await,
    );
    assert_eq!(submitted["status"], json!("pending"));
    let id = submitted["id"].as_str().unwrap().to_owned();
    let body = env.casework.fake().requests_to("/v1/review-requests")[0].json();
    assert_eq!(
        body["producer"],
        json!("coordinator"),
        "the producer comes from the connection"
    );
    assert_eq!(body["policy"], json!("extension-review"));

    assert_eq!(
        env.adapter.observe(&conn, "result", &id).await.unwrap(),
        Observation::Pending
    );
    assert!(env
        .casework
        .decide(&id, "approved", "2026-10-10T12:00:00Z", Some("fine")));
    assert_eq!(
        env.adapter.observe(&conn, "result", &id).await.unwrap(),
        Observation::Completed {
            value: json!({"outcome": "approved", "decidedAt": "2026-10-10T12:00:00Z", "note": "fine"})
        }
    );
    let read = success(
        env.dispatch(&conn, request(READ_REVIEW, json!({"id": id}), None))
            .await,
    );
    assert_eq!(read["status"], json!("decided"));

    // A second request, withdrawn while pending.
    let second = success(
        env.dispatch(
            &conn,
            request(
                SUBMIT_REVIEW,
                json!({"subject": {"product": "breg", "recordType": "application", "identifier": "2"},
                    "policy": "extension-review", "summary": {}}),
                Some("r-2"),
            ),
        )
        .await,
    );
    let id2 = second["id"].as_str().unwrap().to_owned();
    let withdrawn = success(
        env.dispatch(
            &conn,
            request(
                WITHDRAW_REVIEW,
                json!({"id": id2, "reason": "timeout"}),
                Some("w-1"),
            ),
        )
        .await,
    );
    assert_eq!(withdrawn, json!({"id": id2, "status": "withdrawn"}));
    let w = &env
        .casework
        .fake()
        .requests_to(&format!("/v1/review-requests/{id2}/withdraw"))[0];
    assert_eq!(w.json(), json!({"reason": "timeout"}));
    assert_eq!(w.header("idempotency-key"), Some("w-1"));
    assert_eq!(
        env.adapter.observe(&conn, "result", &id2).await.unwrap(),
        Observation::Withdrawn
    );
}

#[tokio::test]
async fn casework_completion_client_sends_token_and_binding() {
    let directory = FakeDirectory::start().await.unwrap();
    directory.respond("/v1/review-completions", 202, json!({}));
    let url = format!("{}/v1/review-completions", directory.base_url());
    let (status, _) = FakeCasework::post_completion(&url, "t0ken", "coordinator-v1", "rr-1")
        .await
        .unwrap();
    assert_eq!(status, 202);
    let r = &directory.fake().requests()[0];
    assert_eq!(r.header("authorization"), Some("Bearer t0ken"));
    assert_eq!(
        r.header("registry-recipient-binding"),
        Some("coordinator-v1")
    );
    assert_eq!(r.json(), json!({"reviewRequestId": "rr-1"}));
}

#[tokio::test]
async fn evaluation_sends_the_connection_model_without_a_key() {
    let env = Env::new().await;
    let value = success(
        env.dispatch(
            &env.decision_conn(),
            request(
                EVALUATE,
                json!({"state": {"a": 1}, "questions": {"eligible": {"type": "predicate", "instructions": "?"}}}),
                Some("ignored"),
            ),
        )
        .await,
    );
    assert_eq!(value["model"], json!("triage-small"));
    assert_eq!(value["answers"]["eligible"]["value"], json!(true));
    let r = &env.evaluation.fake().requests()[0];
    assert_eq!(r.json()["model"], json!("triage-small"));
    assert_eq!(r.json()["state"], json!({"a": 1}));
    assert_eq!(
        r.header("idempotency-key"),
        None,
        "an evaluation carries no key"
    );
}

// ------------------------------------------------------------- external

#[tokio::test]
async fn external_get_every_status_is_a_success() {
    let env = Env::new().await;
    env.directory
        .respond("/offices", 200, json!([{"id": "o-1"}]));
    let conn = env.directory_conn();
    let value = success(
        env.dispatch(
            &conn,
            request(
                EXTERNAL_GET,
                json!({"path": "/offices", "query": {"district": "north east"}}),
                None,
            ),
        )
        .await,
    );
    assert_eq!(value, json!({"status": 200, "body": [{"id": "o-1"}]}));
    let r = &env.directory.fake().requests()[0];
    assert_eq!(r.path, "/offices");
    assert_eq!(r.query.as_deref(), Some("district=north+east"));
    assert!(env.issuer.issued(r.bearer().unwrap()));
    // A 404 (and a 503) is a success too: the workflow routes on status.
    let value = success(
        env.dispatch(
            &conn,
            request(EXTERNAL_GET, json!({"path": "/v2/offices/list"}), None),
        )
        .await,
    );
    assert_eq!(value["status"], json!(404));
    assert_eq!(env.directory.fake().requests()[1].path, "/v2/offices/list");
    env.directory.fake().script("/offices", [Reply::Retryable]);
    let value = success(
        env.dispatch(
            &conn,
            request(EXTERNAL_GET, json!({"path": "/offices"}), None),
        )
        .await,
    );
    assert_eq!(value["status"], json!(503));
}

#[tokio::test]
async fn external_get_refuses_redirects_and_undeclared_paths_and_queries() {
    let env = Env::new().await;
    env.directory.redirect("/moved", "/offices");
    env.directory.respond("/offices", 200, json!([]));
    let conn = env.directory_conn();
    assert_eq!(
        answer(
            env.dispatch(
                &conn,
                request(EXTERNAL_GET, json!({"path": "/moved"}), None)
            )
            .await
        ),
        Answer::Refused {
            code: mapping::REDIRECT_REFUSED.into()
        }
    );
    assert_eq!(
        env.directory.fake().requests_to("/offices").len(),
        0,
        "the redirect is not followed"
    );
    let before = env.directory.fake().requests().len();
    let tokens_before = env.issuer.token_requests().len();
    assert!(matches!(
        env.dispatch(
            &conn,
            request(EXTERNAL_GET, json!({"path": "/admin"}), None)
        )
        .await,
        Outcome::InvalidCommand { status: None, .. }
    ));
    assert!(matches!(
        env.dispatch(
            &conn,
            request(
                EXTERNAL_GET,
                json!({"path": "/offices", "query": {"secret": "x"}}),
                None
            )
        )
        .await,
        Outcome::InvalidCommand { status: None, .. }
    ));
    assert_eq!(
        env.directory.fake().requests().len(),
        before,
        "nothing was sent"
    );
    assert_eq!(
        env.issuer.token_requests().len(),
        tokens_before,
        "no token either"
    );
}

// -------------------------------------------------------- status mapping

#[tokio::test]
async fn status_mapping_rows_over_sockets() {
    let env = Env::new().await;
    let conn = env.messaging_conn();
    let rows: Vec<(Reply, Outcome)> = vec![
        (
            Reply::refuse(401, "authentication.refused"),
            refused(mapping::PRODUCT_FORBIDDEN),
        ),
        (
            Reply::refuse(403, "forbidden"),
            refused(mapping::PRODUCT_FORBIDDEN),
        ),
        (
            Reply::refuse(404, "whatever"),
            refused(mapping::PRODUCT_NOT_FOUND),
        ),
        (
            Reply::refuse(409, "template.retired"),
            refused("template.retired"),
        ),
        (
            Reply::refuse(422, "recipient.invalid"),
            refused("recipient.invalid"),
        ),
        (
            Reply::refuse(400, "request.invalid"),
            Outcome::InvalidCommand {
                status: Some(400),
                code: Some("request.invalid".into()),
            },
        ),
        (
            Reply::refuse(413, "too-large"),
            Outcome::InvalidCommand {
                status: Some(413),
                code: Some("too-large".into()),
            },
        ),
        (Reply::refuse(408, "timeout"), retryable("http-408")),
        (Reply::refuse(429, "slow-down"), retryable("http-429")),
        (Reply::Retryable, retryable("http-503")),
        (Reply::refuse(500, "oops"), uncertain("http-500")),
        (Reply::refuse(502, "oops"), uncertain("http-502")),
        (Reply::refuse(504, "oops"), uncertain("http-504")),
        (
            Reply::Raw {
                status: 202,
                content_type: "text/html".into(),
                body: b"<p>ok</p>".to_vec(),
            },
            Outcome::InvalidResponse { status: 202 },
        ),
        // A JSON body of the wrong shape is left to the VM's schema check.
        (
            Reply::Json {
                status: 202,
                body: json!({"unexpected": true}),
            },
            Outcome::Answer(Answer::Success {
                value: json!({"unexpected": true}),
            }),
        ),
    ];
    for (i, (reply, expected)) in rows.into_iter().enumerate() {
        env.messaging.fake().script("/v1/messages", [reply.clone()]);
        let key = format!("row-{i}");
        let got = env
            .dispatch(&conn, request(SUBMIT_MESSAGE, message(), Some(&key)))
            .await;
        assert_eq!(got, expected, "row {i}: {reply:?}");
    }
    assert_eq!(
        env.messaging.messages().len(),
        0,
        "no scripted row took effect"
    );
}

#[tokio::test]
async fn declared_refusal_code_only_counts_for_actions() {
    let env = Env::new().await;
    env.messaging.fake().script(
        "/v1/messages",
        [Reply::refuse(409, "action.declared-refusal")],
    );
    assert_eq!(
        env.dispatch(
            &env.messaging_conn(),
            request(SUBMIT_MESSAGE, message(), Some("k"))
        )
        .await,
        refused(mapping::DECLARED_REFUSAL)
    );
}

fn refused(code: &str) -> Outcome {
    Outcome::Answer(Answer::Refused { code: code.into() })
}

fn retryable(code: &str) -> Outcome {
    Outcome::Answer(Answer::Retryable { code: code.into() })
}

fn uncertain(code: &str) -> Outcome {
    Outcome::Answer(Answer::Uncertain { code: code.into() })
}

// ----------------------------------------------------- transport failures

#[tokio::test]
async fn a_hang_past_the_timeout_is_uncertain() {
    let env = Env::new().await;
    env.messaging.fake().script("/v1/messages", [Reply::Hang]);
    let mut conn = env.messaging_conn();
    if let Connection::Messaging(c) = &mut conn {
        c.request_timeout_milliseconds = Some(800);
    }
    let started = std::time::Instant::now();
    let got = env
        .dispatch(&conn, request(SUBMIT_MESSAGE, message(), Some("h-1")))
        .await;
    assert_eq!(got, uncertain(mapping::TRANSPORT_TIMEOUT));
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert_eq!(
        env.messaging.fake().key_count("h-1"),
        1,
        "received exactly once"
    );
}

#[tokio::test]
async fn a_reset_after_reading_is_uncertain() {
    let env = Env::new().await;
    env.breg.fake().script("/v1/actions/grant", [Reply::Reset]);
    env.breg
        .put_action("grant", ActionBehaviour::Results(json!({})));
    let mut req = request(INVOKE, json!({"input": {}}), Some("reset-1"));
    req.action = Some("grant".into());
    let got = env.dispatch(&env.breg_conn(), req).await;
    assert_eq!(got, uncertain(mapping::TRANSPORT_RESET));
    assert_eq!(
        env.breg.fake().key_count("reset-1"),
        1,
        "not resent by the client"
    );
    assert_eq!(env.breg.invocations().len(), 0);
}

#[tokio::test]
async fn a_read_reset_is_uncertain_too() {
    // The VM reads again on any uncertain read; the adapter reports it the same.
    let env = Env::new().await;
    env.breg
        .fake()
        .script("/v1/collections/c/records/1", [Reply::Reset]);
    let got = env
        .dispatch(
            &env.breg_conn(),
            request(
                READ_RECORD,
                json!({"collection": "c", "recordId": "1"}),
                None,
            ),
        )
        .await;
    assert_eq!(got, uncertain(mapping::TRANSPORT_RESET));
}

#[tokio::test]
async fn connection_refused_before_sending_is_retryable() {
    let env = Env::new().await;
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut conn = env.messaging_conn();
    if let Connection::Messaging(c) = &mut conn {
        c.base_url = format!("http://127.0.0.1:{port}");
    }
    let got = env
        .dispatch(&conn, request(SUBMIT_MESSAGE, message(), Some("c-1")))
        .await;
    assert_eq!(got, retryable(mapping::CONNECTION_REFUSED));
}

// ------------------------------------------------------------- receipts

#[tokio::test]
async fn receipts_original_unresolved_expired() {
    let env = Env::new().await;
    let conn = env.messaging_conn();
    // The product takes the message, then the connection breaks.
    env.messaging
        .fake()
        .script("/v1/messages", [Reply::ResetAfterEffect]);
    assert_eq!(
        env.dispatch(&conn, request(SUBMIT_MESSAGE, message(), Some("m-1")))
            .await,
        uncertain(mapping::TRANSPORT_RESET)
    );
    assert_eq!(env.messaging.messages().len(), 1);
    let lookup = |key: &str| ReceiptRequest {
        operation_id: SUBMIT_MESSAGE.into(),
        idempotency_key: key.into(),
    };
    let original = success(
        env.adapter
            .lookup_receipt(&conn, &lookup("m-1"))
            .await
            .unwrap(),
    );
    assert_eq!(original["status"], json!("accepted"));
    let r = env.messaging.fake().requests_to("/v1/message-receipts/m-1");
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].method, "GET");
    assert_eq!(r[0].header("idempotency-key"), None);
    assert_eq!(
        answer(
            env.adapter
                .lookup_receipt(&conn, &lookup("never-sent"))
                .await
                .unwrap()
        ),
        Answer::ReceiptUnresolved
    );
    env.messaging.fake().expire("m-1");
    assert_eq!(
        answer(
            env.adapter
                .lookup_receipt(&conn, &lookup("m-1"))
                .await
                .unwrap()
        ),
        Answer::ReceiptExpired
    );

    // Scheduling receipts follow the same contract.
    env.scheduling.add_slot(
        "passport",
        "2026-10-12T09:00:00Z",
        "2026-10-12T09:30:00Z",
        1,
    );
    let sconn = env.scheduling_conn();
    env.scheduling
        .fake()
        .script("/v1/appointments", [Reply::ResetAfterEffect]);
    let cmd = json!({"offering": "passport", "start": "2026-10-12T09:00:00Z", "party": {"reference": "p"}});
    assert_eq!(
        env.dispatch(&sconn, request(CREATE_APPOINTMENT, cmd, Some("s-1")))
            .await,
        uncertain(mapping::TRANSPORT_RESET)
    );
    let receipt = success(
        env.adapter
            .lookup_receipt(
                &sconn,
                &ReceiptRequest {
                    operation_id: CREATE_APPOINTMENT.into(),
                    idempotency_key: "s-1".into(),
                },
            )
            .await
            .unwrap(),
    );
    assert_eq!(receipt["offering"], json!("passport"));
    assert_eq!(
        env.scheduling
            .fake()
            .requests_to("/v1/appointment-receipts/s-1")
            .len(),
        1
    );
}

#[tokio::test]
async fn receipts_only_for_receipt_capable_operations() {
    let env = Env::new().await;
    assert!(env
        .adapter
        .lookup_receipt(
            &env.breg_conn(),
            &ReceiptRequest {
                operation_id: INVOKE.into(),
                idempotency_key: "k".into()
            },
        )
        .await
        .is_err());
}

// ------------------------------------------------------------- tokens

#[tokio::test]
async fn one_token_per_attempt_each_with_a_fresh_assertion() {
    let env = Env::new().await;
    env.messaging
        .fake()
        .script("/v1/messages", [Reply::Retryable]);
    let conn = env.messaging_conn();
    assert_eq!(
        env.dispatch(&conn, request(SUBMIT_MESSAGE, message(), Some("t-1")))
            .await,
        retryable("http-503")
    );
    success(
        env.dispatch(&conn, request(SUBMIT_MESSAGE, message(), Some("t-1")))
            .await,
    );
    let tokens = env.issuer.token_requests();
    assert_eq!(tokens.len(), 2, "one token request per attempt");
    assert!(tokens.iter().all(|t| t.outcome.is_ok()));
    assert_ne!(
        tokens[0].assertion_claims["jti"],
        tokens[1].assertion_claims["jti"]
    );
    assert_eq!(tokens[0].assertion_alg.as_deref(), Some("ES256"));
    let sent = env.messaging.fake().requests_to("/v1/messages");
    assert_ne!(
        sent[0].bearer(),
        sent[1].bearer(),
        "a fresh token for each attempt"
    );
    assert_eq!(sent[0].body, sent[1].body);
    assert_eq!(
        sent[0].header("idempotency-key"),
        sent[1].header("idempotency-key")
    );
}

#[tokio::test]
async fn every_key_type_signs_an_accepted_assertion() {
    let env = Env::new().await;
    // breg: RS256, scheduling: EdDSA, casework: ES256.
    env.breg.put_record("c", "1", "1", json!({}));
    success(
        env.dispatch(
            &env.breg_conn(),
            request(
                READ_RECORD,
                json!({"collection": "c", "recordId": "1"}),
                None,
            ),
        )
        .await,
    );
    success(
        env.dispatch(
            &env.scheduling_conn(),
            request(
                READ_AVAILABILITY,
                json!({"offering": "x", "start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z", "limit": 1}),
                None,
            ),
        )
        .await,
    );
    let algs: Vec<_> = env
        .issuer
        .token_requests()
        .into_iter()
        .map(|t| (t.assertion_alg.unwrap(), t.outcome))
        .collect();
    assert_eq!(
        algs,
        vec![("RS256".to_owned(), Ok(())), ("EdDSA".to_owned(), Ok(()))]
    );
}

#[tokio::test]
async fn a_refused_client_is_refused_and_nothing_is_sent() {
    let env = Env::new().await;
    // A key the issuer does not know for this client.
    let mut secrets = env.secrets.clone();
    secrets.insert(
        &key_ref("messaging"),
        TestKey::generate(KeyKind::Es256, "other")
            .private_jwk_text()
            .into_bytes(),
    );
    let adapter = HttpAdapter::new(Arc::new(secrets)).unwrap();
    let got = adapter
        .dispatch(
            &env.messaging_conn(),
            &request(SUBMIT_MESSAGE, message(), Some("x")),
        )
        .await
        .unwrap();
    assert_eq!(got, refused(mapping::TOKEN_REFUSED));
    assert!(env.issuer.token_requests()[0].outcome.is_err());
    assert_eq!(env.messaging.fake().requests().len(), 0);
}

#[tokio::test]
async fn an_unavailable_token_endpoint_is_retryable_and_nothing_is_sent() {
    let env = Env::new().await;
    env.issuer.fake().script("/token", [Reply::Retryable]);
    let got = env
        .dispatch(
            &env.messaging_conn(),
            request(SUBMIT_MESSAGE, message(), Some("x")),
        )
        .await;
    assert_eq!(got, retryable(mapping::TOKEN_UNAVAILABLE));
    assert_eq!(env.messaging.fake().requests().len(), 0);
}

#[tokio::test]
async fn a_missing_signing_key_is_an_adapter_error() {
    let env = Env::new().await;
    let adapter = HttpAdapter::new(Arc::new(MemorySecrets::new())).unwrap();
    let err = adapter
        .dispatch(
            &env.messaging_conn(),
            &request(SUBMIT_MESSAGE, message(), Some("x")),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("secret:file/messaging-client-key"),
        "{err}"
    );
    assert_eq!(env.messaging.fake().requests().len(), 0);
}

#[tokio::test]
async fn resource_is_sent_when_configured() {
    let env = Env::new().await;
    let mut conn = env.messaging_conn();
    if let Connection::Messaging(c) = &mut conn {
        c.authorization.resource = Some("https://messaging.example.org".into());
        c.authorization.scopes = vec![];
    }
    success(
        env.dispatch(&conn, request(SUBMIT_MESSAGE, message(), Some("r")))
            .await,
    );
    let t = &env.issuer.token_requests()[0];
    assert_eq!(t.resource.as_deref(), Some("https://messaging.example.org"));
    assert_eq!(t.scope, None, "no scopes: no scope parameter");
}

// ----------------------------------------------------- idempotency keys

#[tokio::test]
async fn idempotency_key_exactly_on_mutations() {
    let env = Env::new().await;
    env.breg.put_record("c", "1", "1", json!({}));
    env.breg
        .put_action("a", ActionBehaviour::Results(json!({})));
    env.scheduling
        .add_slot("o", "2026-10-12T09:00:00Z", "2026-10-12T09:30:00Z", 1);
    env.directory.respond("/offices", 200, json!([]));
    let review = success(
        env.dispatch(
            &env.casework_conn(),
            request(
                SUBMIT_REVIEW,
                json!({"subject": {"product": "p", "recordType": "r", "identifier": "i"}, "policy": "p", "summary": {}}),
                Some("key"),
            ),
        )
        .await,
    );
    let id = review["id"].as_str().unwrap().to_owned();
    let mut invoke = request(INVOKE, json!({"input": {}}), Some("key"));
    invoke.action = Some("a".into());
    let calls: Vec<(Connection, DispatchRequest)> = vec![
        (
            env.breg_conn(),
            request(
                READ_RECORD,
                json!({"collection": "c", "recordId": "1"}),
                Some("key"),
            ),
        ),
        (env.breg_conn(), invoke),
        (
            env.messaging_conn(),
            request(SUBMIT_MESSAGE, message(), Some("key")),
        ),
        (
            env.scheduling_conn(),
            request(
                READ_AVAILABILITY,
                json!({"offering": "o", "start": "2026-10-12T00:00:00Z", "end": "2026-10-13T00:00:00Z", "limit": 5}),
                Some("key"),
            ),
        ),
        (
            env.scheduling_conn(),
            request(
                CREATE_APPOINTMENT,
                json!({"offering": "o", "start": "2026-10-12T09:00:00Z", "party": {"reference": "p"}}),
                Some("key"),
            ),
        ),
        (
            env.casework_conn(),
            request(READ_REVIEW, json!({"id": id}), Some("key")),
        ),
        (
            env.casework_conn(),
            request(
                WITHDRAW_REVIEW,
                json!({"id": id, "reason": "r"}),
                Some("key"),
            ),
        ),
        (
            env.directory_conn(),
            request(EXTERNAL_GET, json!({"path": "/offices"}), Some("key")),
        ),
        (
            env.decision_conn(),
            request(EVALUATE, json!({"state": {}, "questions": {}}), Some("key")),
        ),
    ];
    for (conn, req) in &calls {
        success(env.dispatch(conn, req.clone()).await);
    }
    // Among these products, the mutations are exactly the POSTs.
    let mut seen = 0;
    for fake in [
        env.breg.fake(),
        env.messaging.fake(),
        env.scheduling.fake(),
        env.casework.fake(),
        env.directory.fake(),
    ] {
        for r in fake.requests() {
            seen += 1;
            assert_eq!(
                r.header("idempotency-key").is_some(),
                r.method == "POST",
                "{} {}",
                r.method,
                r.path
            );
        }
    }
    assert_eq!(seen, 9);
    // The evaluation is a POST without a key.
    assert_eq!(
        env.evaluation.fake().requests()[0].header("idempotency-key"),
        None
    );
}

#[tokio::test]
async fn a_mutation_without_a_key_or_on_the_wrong_connection_is_not_sent() {
    let env = Env::new().await;
    assert!(env
        .adapter
        .dispatch(
            &env.messaging_conn(),
            &request(SUBMIT_MESSAGE, message(), None)
        )
        .await
        .is_err());
    assert!(env
        .adapter
        .dispatch(
            &env.breg_conn(),
            &request(SUBMIT_MESSAGE, message(), Some("k"))
        )
        .await
        .is_err());
    assert_eq!(env.messaging.fake().requests().len(), 0);
    assert_eq!(env.breg.fake().requests().len(), 0);
}

// ------------------------------------------------- caller tokens (fakes)

#[tokio::test]
async fn issuer_mints_valid_and_broken_caller_tokens() {
    use jsonwebtoken::{decode, decode_header, jwk::JwkSet, DecodingKey, Validation};
    let issuer = FakeIssuer::start().await.unwrap();
    let fetch = |url: String| async move {
        let bytes = reqwest::get(url).await.unwrap().bytes().await.unwrap();
        serde_json::from_slice::<Value>(&bytes).unwrap()
    };
    let jwks: JwkSet = serde_json::from_value(fetch(issuer.jwks_uri()).await).unwrap();
    let discovery = fetch(format!(
        "{}/.well-known/openid-configuration",
        issuer.issuer()
    ))
    .await;
    assert_eq!(discovery["issuer"], json!(issuer.issuer()));
    assert_eq!(discovery["jwks_uri"], json!(issuer.jwks_uri()));
    let verify = |token: &str| -> Result<(), String> {
        let header = decode_header(token).map_err(|e| e.to_string())?;
        if header.typ.as_deref() != Some("at+jwt") {
            return Err("typ".into());
        }
        let kid = header.kid.ok_or("kid")?;
        let jwk = jwks.find(&kid).ok_or("unknown kid")?;
        let key = DecodingKey::from_jwk(jwk).map_err(|e| e.to_string())?;
        let mut v = Validation::new(header.alg);
        v.set_issuer(&[issuer.issuer()]);
        v.set_audience(&["registry-coordinator"]);
        v.leeway = 0;
        decode::<Value>(token, &key, &v)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    for kind in [KeyKind::Es256, KeyKind::Rs256] {
        let mut spec = Mint::new("producer-app", "registry-coordinator");
        spec.kind = kind;
        let token = issuer.mint(&spec);
        verify(&token).unwrap();
        let claims: Value = {
            use base64::Engine;
            let p = token.split('.').nth(1).unwrap();
            serde_json::from_slice(
                &base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(p)
                    .unwrap(),
            )
            .unwrap()
        };
        for claim in ["iss", "aud", "sub", "client_id", "exp", "iat", "jti"] {
            assert!(claims.get(claim).is_some(), "{claim}");
        }
    }
    for flaw in [
        Flaw::Expired,
        Flaw::WrongTyp,
        Flaw::WrongIssuer,
        Flaw::WrongAudience,
        Flaw::UnknownKid,
        Flaw::AlgNone,
    ] {
        let mut spec = Mint::new("producer-app", "registry-coordinator");
        spec.flaw = Some(flaw);
        assert!(
            verify(&issuer.mint(&spec)).is_err(),
            "{flaw:?} must not verify"
        );
    }
}
