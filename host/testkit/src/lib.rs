//! `coordinator-testkit`: test support for the hosts (a dev-dependency
//! only): a hand-built Program, a complete deployment file, and
//! [`conformance`], the run store behaviours every store implementation is
//! tested against (the in-memory store in `host/ports/tests`, the
//! PostgreSQL store in `host/store/tests`).

pub mod conformance;

use coordinator_ir::catalogue::lookup;
use coordinator_ir::*;
use serde_json::json;

fn binding(alias: &str, op: &str, connection: &str, input: u32, output: u32) -> OperationBinding {
    OperationBinding {
        alias: alias.into(),
        descriptor: lookup(op).expect("catalogue operation"),
        connection: connection.into(),
        action: None,
        input: SchemaId(input),
        output: SchemaId(output),
        completion: None,
    }
}

/// A small valid Program: workflow `follow-up`, connections `applications`
/// (breg) and `notices` (messaging), a trigger on `breg-applications`, and
/// schemas that exercise the type generators.
pub fn program() -> Program {
    let input = json!({
        "type": "object",
        "properties": {
            "applicationId": {"type": "string", "minLength": 1},
            "sendAfter": {"type": "string", "format": "date-time"},
            "channel": {"enum": ["email", "sms"]},
            "priority": {"type": "integer"},
            "weight": {"type": ["number", "null"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "contact": {"$ref": "#/$defs/contact"},
            "meta": {"type": "object", "additionalProperties": {"type": "boolean"}},
            "class": {"const": "x"},
            "odd-name": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "free": {}
        },
        "required": ["applicationId", "sendAfter", "odd-name"],
        "additionalProperties": false,
        "$defs": {
            "contact": {
                "type": "object",
                "properties": {"email": {"type": "string"}, "phone": {"type": "string"}},
                "oneOf": [{"required": ["email"]}, {"required": ["phone"]}]
            }
        }
    });
    let accepted = json!({
        "type": "object",
        "properties": {"messageId": {"type": "string"}, "when": {"type": "string"}},
        "required": ["messageId"],
        "additionalProperties": false
    });
    let nothing = json!({"type": "null"});
    let open = json!({"type": "object"});
    Program {
        format: FORMAT_VERSION,
        workflow: "follow-up".into(),
        input: SchemaId(0),
        deadline_seconds: 86_400,
        start: StepId(0),
        steps: vec![Step {
            name: "done".into(),
            op: StepOp::Finish {
                outcome: OutcomeId(1),
                output: None,
            },
        }],
        outcomes: vec![
            Outcome {
                name: "message-accepted".into(),
                schema: SchemaId(1),
            },
            Outcome {
                name: "no-current-permission".into(),
                schema: SchemaId(2),
            },
        ],
        operations: vec![
            binding(
                "applications-read-record",
                "breg.read-record/v1",
                "applications",
                3,
                3,
            ),
            binding(
                "notices-submit-message",
                "messaging.submit-message/v1",
                "notices",
                3,
                3,
            ),
        ],
        functions: vec![],
        function_source: String::new(),
        triggers: vec![Trigger {
            name: "application-filed".into(),
            source: "breg-applications".into(),
            event_type: "application.filed".into(),
            idempotency: ExprId(0),
            input: ExprId(0),
        }],
        connections: vec!["applications".into(), "notices".into()],
        exprs: vec![Expr {
            code: vec![Instr::Event { path: None }],
        }],
        schemas: vec![input, accepted, nothing, open],
        constants: vec![],
    }
}

/// A complete deployment file; `@ROOT@` and `@DIGEST@` are replaced with a
/// written package by the caller.
pub const DEPLOYMENT: &str = r#"apiVersion: id.registrystack.org/formats/coordinator/runtime/v1beta1
kind: CoordinatorRuntimeConfig
namespace: coordinator_follow_up
secretProviders:
  file:
    root: /run/registry-coordinator/secrets
database:
  runtimeUrlRef: secret:file/runtime-database-url
  migrationUrlRef: secret:file/migration-database-url
  trustedRootCertificateRef: secret:file/database-root.pem
observation:
  minimumIntervalSeconds: 30
eventSources:
  breg-applications:
    source: https://breg.example.org/applications
    signingKeyRef: secret:file/breg-events-key
connections:
  applications:
    type: breg
    baseUrl: https://breg.example.org
    profile: follow-up-reader
    authorization:
      tokenEndpoint: https://login.example.org/oauth/token
      clientId: coordinator-applications
      signingKeyRef: secret:file/applications-client-key
      scopes:
      - breg:records:read
      resource: https://breg.example.org
    requestTimeoutMilliseconds: 2000
  notices:
    type: messaging
    baseUrl: https://messaging.example.org
    authorization:
      tokenEndpoint: https://login.example.org/oauth/token
      clientId: coordinator-notices
      signingKeyRef: secret:file/notices-client-key
      scopes: [messaging:messages:submit]
  review:
    type: casework-review-producer
    baseUrl: https://casework.example.org
    profile: follow-up-review
    producer: coordinator
    authorization:
      tokenEndpoint: https://login.example.org/oauth/token
      clientId: coordinator-review
      signingKeyRef: secret:file/review-client-key
      scopes: [casework:reviews:write]
    completion:
      recipientBinding: coordinator-v1
      bearerTokenRef: secret:file/review-completion-token
    resultCheckSeconds: 900
  review-two:
    type: casework-review-producer
    baseUrl: https://casework-two.example.org
    producer: coordinator-two
    authorization:
      tokenEndpoint: https://login.example.org/oauth/token
      clientId: coordinator-review-two
      signingKeyRef: secret:file/review-two-client-key
    completion:
      recipientBinding: coordinator-v2
      bearerTokenRef: secret:file/review-two-token
  directory:
    type: external-http
    baseUrl: http://127.0.0.1:9000
    paths: [/offices]
    queryParameters: [district]
  decision:
    type: decision
    baseUrl: https://decision.example.org
    model: triage-1
    authorization:
      tokenEndpoint: https://login.example.org/decision-token
      clientId: coordinator-decision
      signingKeyRef: secret:file/decision-client-key
deployment:
  databaseId: follow-up-pilot-1
  runtimeRole: coordinator_runtime
  packages:
  - root: @ROOT@
    expectedDigest: "@DIGEST@"
  listener:
    bind: 127.0.0.1:8108
    tlsTermination: operator-controlled-upstream
  metricsListener:
    bind: 127.0.0.1:9108
  authentication:
    issuer: https://login.example.org
    audience: registry-coordinator
    jwks:
      uri: https://login.example.org/jwks.json
    policies:
      producer-app:
        workflows: [follow-up]
        actions: [start, status]
      ops-console:
        actions: [doctor, restore-hold, release-restore-hold, release-admission-hold, complete-execution-recovery, retain]
        operator: true
  auditFile: /var/lib/registry-coordinator/audit.jsonl
  auditKeyRef: secret:file/audit-key
  stateKeys:
    "1":
      keyRef: secret:file/state-key-1
  activeStateKey: 1
  admissionKeyRef: secret:file/admission-key
"#;

/// The test PostgreSQL servers, from the variables `scripts/postgres.sh`
/// (and `postgres15.sh`) print. One home for every PostgreSQL-backed test.
pub mod postgres {
    /// The three URLs of the PostgreSQL 17 test server.
    #[derive(Clone, Debug)]
    pub struct Urls {
        /// `COORDINATOR_TEST_DATABASE_URL`: a superuser, for set-up.
        pub admin: String,
        /// `COORDINATOR_TEST_MIGRATION_URL`: the migration role.
        pub migration: String,
        /// `COORDINATOR_TEST_RUNTIME_URL`: the runtime role.
        pub runtime: String,
    }

    fn var(name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }

    /// Skips the calling test (after a notice) when the server is not
    /// configured, except under `CI=true`, where a missing variable is a
    /// broken set-up and fails the test: CI runs scripts/test.sh, which
    /// always starts the servers and sets the variables.
    ///
    /// # Panics
    /// Under `CI=true` when `what` is missing.
    pub fn missing(test: &str, what: &str) {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{test}: {what} not set, and CI=true (run scripts/test.sh)"
        );
        eprintln!("NOTICE: {test} skipped: {what} not set (eval \"$(scripts/postgres.sh start)\")");
    }

    /// The PostgreSQL 17 test server's URLs; `None` after a notice when
    /// they are not set ([`missing`]: a failure under `CI=true`).
    pub fn urls(test: &str) -> Option<Urls> {
        match (
            var("COORDINATOR_TEST_DATABASE_URL"),
            var("COORDINATOR_TEST_MIGRATION_URL"),
            var("COORDINATOR_TEST_RUNTIME_URL"),
        ) {
            (Some(admin), Some(migration), Some(runtime)) => Some(Urls {
                admin,
                migration,
                runtime,
            }),
            _ => {
                missing(
                    test,
                    "COORDINATOR_TEST_DATABASE_URL, _MIGRATION_URL and _RUNTIME_URL are",
                );
                None
            }
        }
    }

    /// The PostgreSQL 15 server's URL (`COORDINATOR_TEST_PG15_URL`, for
    /// the test that an older server is refused); `None` after a notice
    /// ([`missing`]: a failure under `CI=true`).
    pub fn pg15_url(test: &str) -> Option<String> {
        let url = var("COORDINATOR_TEST_PG15_URL");
        if url.is_none() {
            missing(test, "COORDINATOR_TEST_PG15_URL is");
        }
        url
    }
}

/// The tools the typed-caller tests run the generated code with: `tsc`
/// (`TSC`), `mypy` (`MYPY_PATH`), `node` and `python3`. A missing tool
/// skips the check after a printed notice, except under `CI=true`, where it
/// fails the test: CI runs scripts/test.sh, which installs `tsc` and `mypy`
/// and sets the variables.
pub mod tools {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    /// `target/tools` of the workspace, where scripts/test.sh installs the
    /// tools by default.
    fn default_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools")
    }

    /// Skips the calling check (after a notice) when `what` is missing,
    /// except under `CI=true`, where it fails.
    ///
    /// # Panics
    /// Under `CI=true`.
    pub fn missing(test: &str, what: &str) {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{test}: {what} not found, and CI=true (scripts/test.sh installs the tools)"
        );
        eprintln!(
            "NOTICE: {test}: {what} not found, skipping that check (scripts/check-generated-callers.sh installs it)"
        );
    }

    /// `tsc`: `TSC`, else `target/tools/tsc/node_modules/.bin/tsc`; `None`
    /// after [`missing`] when neither exists.
    pub fn tsc(test: &str) -> Option<PathBuf> {
        let found = match std::env::var_os("TSC") {
            Some(p) => Some(PathBuf::from(p)),
            None => Some(default_dir().join("tsc/node_modules/.bin/tsc")),
        }
        .filter(|p| p.exists());
        if found.is_none() {
            missing(test, "tsc (TSC)");
        }
        found
    }

    /// The directory holding the `mypy` package (pip `--target`):
    /// `MYPY_PATH`, else `target/tools/mypy`; `None` after [`missing`]
    /// when it holds no `mypy`.
    pub fn mypy_path(test: &str) -> Option<PathBuf> {
        let found = match std::env::var_os("MYPY_PATH") {
            Some(p) => Some(PathBuf::from(p)),
            None => Some(default_dir().join("mypy")),
        }
        .filter(|p| p.join("mypy").exists());
        if found.is_none() {
            missing(test, "mypy (MYPY_PATH)");
        }
        found
    }

    /// `program` if `program --version` runs and succeeds; `None` after
    /// [`missing`] otherwise.
    pub fn program(test: &str, program: &str) -> Option<String> {
        let runs = Command::new(program)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !runs {
            missing(test, program);
        }
        runs.then(|| program.to_owned())
    }
}
