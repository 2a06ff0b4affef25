//! One in-process `coordinator` for operator tests, shared by
//! `server/tests/ops.rs` and `server/tests/cli/ops.rs` (included there by path):
//! the engine on an in-memory store and a manual clock, the HTTP adapter
//! against the fake Casework and Messaging, caller tokens from the fake
//! issuer, an audit journal in a temporary directory, the API on
//! 127.0.0.1:0. `reviewed-notice` is the served workflow.

#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use coordinator::auth::{KeySource, Verifier};
use coordinator::{AppState, Completions};
use coordinator_adapters::{HttpAdapter, MemorySecrets};
use coordinator_engine::{Engine, EngineConfig};
use coordinator_fakes::{FakeCasework, FakeIssuer, FakeMessaging, KeyKind, Mint, TestKey};
use coordinator_ir::Definition;
use coordinator_ports::{ManualClock, MemoryRunStore};
use coordinator_runtime::audit::AuditJournal;
use coordinator_runtime::config::{
    Authentication, Authorization, CaseworkConnection, Connection, PlainConnection, Policy,
    SecretRef,
};
use coordinator_runtime::keys::{AdmissionKey, AuditKey};

/// The tokens' audience.
pub const AUDIENCE: &str = "registry-coordinator";
/// A caller: `start`, `status`, `inspect` on `reviewed-notice`.
pub const PRODUCER: &str = "producer-app";
/// An operator: every run action, `doctor`, the holds and `retain`.
pub const OPERATOR: &str = "ops-console";

/// The compiled Definition of `examples/<example>`.
pub fn definition(example: &str) -> Definition {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(example);
    let compiled = coordinator_compiler::compile_project(&dir, example);
    assert!(!compiled.has_errors(), "{:?}", compiled.diagnostics);
    Definition::new(compiled.program.unwrap())
}

/// Connection `name`'s client credentials at the fake issuer.
pub fn auth(issuer: &FakeIssuer, name: &str) -> Authorization {
    Authorization {
        token_endpoint: issuer.token_endpoint(),
        client_id: format!("coordinator-{name}"),
        signing_key_ref: SecretRef(format!("secret:file/{name}-key")),
        scopes: vec![],
        resource: None,
    }
}

/// The two policies: [`PRODUCER`] and [`OPERATOR`].
pub fn policies() -> BTreeMap<String, Policy> {
    let mut policies = BTreeMap::new();
    policies.insert(
        PRODUCER.to_owned(),
        Policy {
            workflows: Some(vec!["reviewed-notice".into()]),
            actions: ["start", "status", "inspect"].map(String::from).to_vec(),
            operator: false,
        },
    );
    policies.insert(
        OPERATOR.to_owned(),
        Policy {
            workflows: None,
            actions: [
                "status",
                "inspect",
                "cancel",
                "retry-same",
                "reconcile",
                "move",
                "doctor",
                "restore-hold",
                "release-restore-hold",
                "complete-execution-recovery",
                "release-admission-hold",
                "retain",
            ]
            .map(String::from)
            .to_vec(),
            operator: true,
        },
    );
    policies
}

/// A serving instance. Dropping it stops the API.
pub struct Instance {
    /// What it was started with ([`start_with`] restarts it).
    pub fakes: Fakes,
    pub issuer: FakeIssuer,
    pub casework: FakeCasework,
    pub messaging: FakeMessaging,
    pub engine: Arc<Engine>,
    pub connections: BTreeMap<String, Connection>,
    /// Holds the audit journal's files.
    pub audit_dir: tempfile::TempDir,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// Dropping it stops the API.
    pub stop: tokio::sync::oneshot::Sender<()>,
    /// The engine's clock.
    pub clock: Arc<ManualClock>,
}

impl Instance {
    /// A caller token for `client`.
    pub fn token(&self, client: &str) -> String {
        self.issuer.mint(&Mint::new(client, AUDIENCE))
    }

    /// Starts a `reviewed-notice` run as the producer under idempotency key
    /// `key` (201 asserted); its id. The run waits for a review, so it
    /// stays `running`.
    pub async fn start_reviewed_notice(&self, key: &str) -> String {
        let revision = self.engine.admission.active_revisions()["reviewed-notice"].clone();
        let answer = reqwest::Client::new()
            .post(format!("{}/v1/runs", self.base))
            .bearer_auth(self.token(PRODUCER))
            .header("idempotency-key", key)
            .header("content-type", "application/json")
            .body(
                serde_json::json!({"workflow": "reviewed-notice", "revision": revision,
                       "input": {"applicationId": "app-7", "applicantEmail": "a@example.org"}})
                .to_string(),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status().as_u16(), 201);
        let body: serde_json::Value = serde_json::from_str(&answer.text().await.unwrap()).unwrap();
        body["run"].as_str().unwrap().to_owned()
    }
}

/// The fakes and connections of an instance: the issuer, Casework,
/// Messaging, the connections' client keys and the connections to them.
/// Cloning shares the fakes (a restarted process meets the same products).
#[derive(Clone)]
pub struct Fakes {
    pub issuer: FakeIssuer,
    pub casework: FakeCasework,
    pub messaging: FakeMessaging,
    pub secrets: MemorySecrets,
    pub connections: BTreeMap<String, Connection>,
}

impl Fakes {
    /// New fakes with the connections `review` (Casework) and `notices`
    /// (Messaging) registered at the issuer.
    pub async fn start() -> Fakes {
        let issuer = FakeIssuer::start().await.unwrap();
        let casework = FakeCasework::start().await.unwrap();
        let messaging = FakeMessaging::start().await.unwrap();
        let mut secrets = MemorySecrets::new();
        for (name, kind) in [("review", KeyKind::Es256), ("notices", KeyKind::EdDsa)] {
            let key = TestKey::generate(kind, &format!("{name}-kid"));
            issuer.register_client(&format!("coordinator-{name}"), key.public_jwk.clone(), None);
            secrets.insert(
                &format!("secret:file/{name}-key"),
                key.private_jwk_text().into_bytes(),
            );
        }
        let mut connections = BTreeMap::new();
        connections.insert(
            "review".to_owned(),
            Connection::CaseworkReviewProducer(CaseworkConnection {
                base_url: casework.base_url().to_owned(),
                profile: Some("application-review".into()),
                producer: "coordinator".into(),
                authorization: auth(&issuer, "review"),
                completion: None,
                result_check_seconds: 900,
                request_timeout_milliseconds: Some(5_000),
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
        Fakes {
            issuer,
            casework,
            messaging,
            secrets,
            connections,
        }
    }
}

/// Starts an instance on `store` (shared with another instance when
/// given twice). Each instance starts its own fakes, so its connections'
/// `baseUrl` and token endpoint differ from another instance's.
pub async fn start(database_id: &str, recovery_only: bool, store: Arc<MemoryRunStore>) -> Instance {
    start_with(Fakes::start().await, database_id, recovery_only, store).await
}

/// Starts an instance with `fakes` on `store`: with the fakes of another
/// instance, this is that process restarted (the same products, callers
/// and connection bindings), for example with `--recovery-only`.
pub async fn start_with(
    fakes: Fakes,
    database_id: &str,
    recovery_only: bool,
    store: Arc<MemoryRunStore>,
) -> Instance {
    start_journaled(fakes, database_id, recovery_only, store, None).await
}

/// [`start_with`] whose audit journal appends to `/dev/full` when
/// `failing_journal` is true: every audited answer is then withheld
/// (`audit.response-unavailable`), as when the journal's disk is full.
pub async fn start_journaled(
    fakes: Fakes,
    database_id: &str,
    recovery_only: bool,
    store: Arc<MemoryRunStore>,
    failing_journal: Option<bool>,
) -> Instance {
    let served = [definition("reviewed-notice")];
    start_serving(
        fakes,
        database_id,
        recovery_only,
        store,
        failing_journal,
        &served,
    )
    .await
}

/// [`start_journaled`] serving `definitions` (the active revisions) rather
/// than `reviewed-notice`'s example: a process restarted after an `apply`.
pub async fn start_serving(
    fakes: Fakes,
    database_id: &str,
    recovery_only: bool,
    store: Arc<MemoryRunStore>,
    failing_journal: Option<bool>,
    definitions: &[Definition],
) -> Instance {
    let audit_dir = tempfile::tempdir().unwrap();
    let journal = if failing_journal == Some(true) {
        let full = std::fs::OpenOptions::new()
            .append(true)
            .open("/dev/full")
            .unwrap();
        AuditJournal::on_file(Path::new("/dev/full"), full).unwrap()
    } else {
        AuditJournal::open(&audit_dir.path().join("audit.jsonl")).unwrap()
    };
    start_with_journal(
        fakes,
        database_id,
        recovery_only,
        store,
        (journal, audit_dir),
        definitions,
    )
    .await
}

/// [`start_with`] appending to `journal` (its directory is kept with the
/// instance), serving `definitions`.
pub async fn start_with_journal(
    fakes: Fakes,
    database_id: &str,
    recovery_only: bool,
    store: Arc<MemoryRunStore>,
    (journal, audit_dir): (AuditJournal, tempfile::TempDir),
    definitions: &[Definition],
) -> Instance {
    let kept = fakes.clone();
    let Fakes {
        issuer,
        casework,
        messaging,
        secrets,
        connections,
    } = fakes;
    let mut config = EngineConfig::new(database_id, "worker-1");
    config.recovery_only = recovery_only;
    let clock = Arc::new(ManualClock::at("2026-03-02T09:00:00Z"));
    let engine = Engine::new(
        config,
        store.clone(),
        clock.clone(),
        Arc::new(HttpAdapter::new(Arc::new(secrets)).unwrap()),
        AdmissionKey::new(&[7u8; 32]).unwrap(),
        connections.clone(),
        definitions,
    )
    .unwrap()
    .with_audit(Arc::new(journal), AuditKey::new(&[9u8; 32]).unwrap());
    let engine = Arc::new(engine);
    let authentication = Authentication {
        issuer: issuer.issuer().to_owned(),
        audience: AUDIENCE.into(),
        jwks: None,
        policies: policies(),
    };
    let state = AppState {
        engine: engine.clone(),
        clock: clock.clone(),
        counts: store.clone(),
        verifier: Arc::new(Verifier::new(&authentication, KeySource::Discovery)),
        completions: Arc::new(Completions::default()),
        events: Arc::default(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(coordinator::run(listener, state, async move {
        let _ = stopped.await;
    }));
    Instance {
        fakes: kept,
        issuer,
        casework,
        messaging,
        engine,
        connections,
        audit_dir,
        base,
        stop,
        clock,
    }
}
