//! Used by the real-binary journeys (tests/journeys.rs): a deployment of an example
//! (`delayed-follow-up` or `reviewed-notice`) on PostgreSQL 17 with the
//! product and issuer fakes, and the built `coordinator` binary under a
//! kill-on-drop guard.

#![allow(dead_code, clippy::unwrap_used, clippy::indexing_slicing)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use coordinator_fakes::{
    FakeBreg, FakeCasework, FakeIssuer, FakeMessaging, KeyKind, Mint, TestKey,
};
use coordinator_ir::Definition;
use coordinator_runtime::audit::AuditJournal;
use coordinator_runtime::config::RuntimeConfig;
use coordinator_runtime::package::write_package;
use coordinator_runtime::secrets::{load_keys, SecretResolver};
use coordinator_runtime::{check_runtime_file, Mode};
use coordinator_store::deploy::load_pinned_packages;
use coordinator_store::{ApplyReport, DatabaseError, DeploymentStatus, Store};
use serde_json::{json, Value};
use sqlx::{Connection, Executor, PgConnection};

pub const AUDIENCE: &str = "registry-coordinator";
pub const PRODUCER: &str = "producer-app";
pub const OPERATOR: &str = "ops-console";
pub const WORKFLOW: &str = "follow-up";
/// The reviewed-notice workflow (project id).
pub const REVIEW_WORKFLOW: &str = "reviewed-notice";
/// The Casework recipient binding of the `review` connection.
pub const BINDING: &str = "coordinator-v1";
/// The bearer token Casework presents on `/v1/review-completions`.
pub const COMPLETION_TOKEN: &str = "completion-token-for-journeys";
/// The signing key of every event source (`<name>-signing-key`).
pub const EVENT_KEY: [u8; 32] = [6; 32];

/// A connection of an example, bound to one of the fakes.
#[derive(Clone, Debug)]
pub enum Conn {
    /// `breg` against FakeBreg with this profile.
    Breg { profile: String },
    /// `messaging` against FakeMessaging.
    Messaging,
    /// `casework-review-producer` against FakeCasework, with a completion
    /// block (BINDING, COMPLETION_TOKEN).
    CaseworkReview { result_check_seconds: u64 },
}

/// An example project to package and the connections it needs.
#[derive(Clone, Debug)]
pub struct Example {
    /// Directory name under examples/.
    pub name: String,
    /// The workflow (project) id policies grant.
    pub workflow: String,
    /// Connection name and kind.
    pub connections: Vec<(String, Conn)>,
    /// Line edits of workflow.yaml before compiling: every line holding
    /// `key:` gets `value` instead of its own (`timeoutSeconds`,
    /// `deadlineSeconds`).
    pub patches: Vec<(&'static str, u64)>,
    /// `eventSources` entries: name and `source` URI (key: [`EVENT_KEY`]).
    pub event_sources: Vec<(String, String)>,
}

impl Example {
    /// `delayed-follow-up`: `applications` (Breg) and `notices`.
    pub fn follow_up() -> Example {
        Example {
            name: "delayed-follow-up".into(),
            workflow: WORKFLOW.into(),
            connections: vec![
                (
                    "applications".into(),
                    Conn::Breg {
                        profile: "follow-up-reader".into(),
                    },
                ),
                ("notices".into(), Conn::Messaging),
            ],
            patches: Vec::new(),
            event_sources: Vec::new(),
        }
    }

    /// `reviewed-notice`: `review` (Casework, reads every 60 s, the least
    /// allowed) and `notices`.
    pub fn reviewed_notice() -> Example {
        Example {
            name: "reviewed-notice".into(),
            workflow: REVIEW_WORKFLOW.into(),
            connections: vec![
                (
                    "review".into(),
                    Conn::CaseworkReview {
                        result_check_seconds: 60,
                    },
                ),
                ("notices".into(), Conn::Messaging),
            ],
            patches: Vec::new(),
            event_sources: Vec::new(),
        }
    }

    /// `event-follow-up` (server/tests/fixtures): started by a signed
    /// event of `breg-applications`; `applications` (Breg).
    pub fn event_follow_up() -> Example {
        Example {
            name: "../server/tests/fixtures/event-follow-up".into(),
            workflow: "event-follow-up".into(),
            connections: vec![(
                "applications".into(),
                Conn::Breg {
                    profile: "follow-up-reader".into(),
                },
            )],
            patches: Vec::new(),
            event_sources: vec![(
                "breg-applications".into(),
                "https://breg.example.org/applications".into(),
            )],
        }
    }

    /// The same with the wait's `timeoutSeconds` replaced.
    pub fn with_timeout_seconds(mut self, seconds: u64) -> Example {
        self.patches.push(("timeoutSeconds", seconds));
        self
    }

    /// The same with the run's `deadlineSeconds` replaced (another
    /// revision of the same workflow).
    pub fn with_deadline_seconds(mut self, seconds: u64) -> Example {
        self.patches.push(("deadlineSeconds", seconds));
        self
    }

    /// Compiles the example (a patched copy under `scratch` when a line is
    /// replaced).
    pub fn compile(&self, scratch: &Path) -> Definition {
        let mut source = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../examples")
            .join(&self.name);
        if !self.patches.is_empty() {
            let copy = scratch.join("source");
            std::fs::create_dir_all(&copy).unwrap();
            for entry in std::fs::read_dir(&source).unwrap() {
                let entry = entry.unwrap();
                std::fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
            }
            let wf = copy.join("workflow.yaml");
            let text = std::fs::read_to_string(&wf).unwrap();
            let patched: String = text
                .lines()
                .map(|l| {
                    let edit = self.patches.iter().find_map(|(key, value)| {
                        let (indent, _) = l.split_once(&format!("{key}:"))?;
                        Some(format!("{indent}{key}: {value}\n"))
                    });
                    edit.unwrap_or_else(|| format!("{l}\n"))
                })
                .collect();
            assert_ne!(patched, text, "no line to patch in {}", self.name);
            std::fs::write(&wf, patched).unwrap();
            source = copy;
        }
        let compiled = coordinator_compiler::compile_project(&source, &self.name);
        assert!(!compiled.has_errors(), "{:?}", compiled.diagnostics);
        Definition::new(compiled.program.unwrap())
    }
}

pub use coordinator_testkit::postgres::{urls, Urls};

pub fn suffix() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..12].to_owned()
}

/// A TCP port on 127.0.0.1 that nothing listens on now, for a server a
/// test starts (a coordinator, PostgreSQL, PgBouncer, a TCP hop).
///
/// Taken from 20000..32767, below Linux's ephemeral range (32768..60999):
/// a port the kernel handed out for `bind(0)` can meanwhile become the
/// local end of one of the many outgoing connections the tests make, and
/// a server then fails to listen on it (one CI run lost a PostgreSQL
/// start that way). Each port is handed out once per test process.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_700;
    let start = (std::process::id().wrapping_mul(7_919)) % SPAN;
    loop {
        let step = NEXT.fetch_add(1, Ordering::Relaxed);
        assert!(step < SPAN, "no free port left in 20000..32700");
        let port = (LOW + (start + step) % SPAN) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

pub fn write_secret(dir: &Path, name: &str, bytes: &[u8]) {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
}

pub fn unix_now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

pub fn rfc3339(unix: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(unix)
        .unwrap()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

/// A running `coordinator`; killed (SIGKILL) when dropped.
pub struct Coordinator {
    pub child: Child,
    pub base: String,
    pub log: PathBuf,
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            // A failing test shows the tail of the process's log (the
            // temporary directory holding it is removed next).
            let text = self.log_text();
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(40)..].join("\n");
            eprintln!("--- {} (last 40 lines) ---\n{tail}", self.log.display());
        }
    }
}

impl Coordinator {
    /// SIGKILL, and wait for the process to be gone.
    pub fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends SIGTERM (as an operator stops the service) and waits up to
    /// `within` for the process to exit; its status.
    pub async fn terminate(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let sent = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(sent.success(), "kill -TERM failed");
        self.exited(within).await
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits up to `within` for the process to exit; its status.
    pub async fn exited(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let start = Instant::now();
        while start.elapsed() < within {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }
}

/// The runtime file at `file`, which must pass `check` in deployment mode.
fn checked_config(file: &Path) -> RuntimeConfig {
    let checked = check_runtime_file(file, "runtime.yaml", None, Mode::Deployment);
    assert!(checked.is_valid(), "{:#?}", checked.diagnostics);
    checked.config.unwrap()
}

/// One deployment: fakes, secrets, a package, a namespace applied.
pub struct Deployment {
    pub dir: tempfile::TempDir,
    pub secrets: PathBuf,
    pub ns: String,
    pub database_id: String,
    pub urls: Urls,
    pub package: (String, String),
    pub revision: String,
    pub issuer: FakeIssuer,
    pub messaging: FakeMessaging,
    pub breg: FakeBreg,
    pub casework: FakeCasework,
    pub http: reqwest::Client,
    pub timeout_ms: u64,
    pub example: Example,
    /// Lines added under `database:` in every runtime file written (e.g.
    /// `  poolingMode: transaction\n`).
    pub database_extra: String,
    /// `limits` of connections in every runtime file written from now on
    /// (connection name, the flow YAML such as `{inFlight: 2}`).
    pub connection_limits: Vec<(String, String)>,
}

impl Deployment {
    /// `delayed-follow-up`.
    pub async fn new(urls: Urls, timeout_ms: u64) -> Deployment {
        Deployment::of(Example::follow_up(), urls, timeout_ms).await
    }

    /// `example` packaged and applied, its connections bound to the fakes.
    pub async fn of(example: Example, urls: Urls, timeout_ms: u64) -> Deployment {
        Deployment::of_with_database(example, urls, timeout_ms, "").await
    }

    /// [`Deployment::of`] with `database_extra` added under `database:` in
    /// every runtime file (the apply included).
    pub async fn of_with_database(
        example: Example,
        urls: Urls,
        timeout_ms: u64,
        database_extra: &str,
    ) -> Deployment {
        let dir = tempfile::tempdir().unwrap();
        let secrets = dir.path().join("secrets");
        std::fs::create_dir(&secrets).unwrap();
        std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o700)).unwrap();
        let issuer = FakeIssuer::start().await.unwrap();
        let messaging = FakeMessaging::start().await.unwrap();
        let breg = FakeBreg::start().await.unwrap();
        let casework = FakeCasework::start().await.unwrap();
        for (name, conn) in &example.connections {
            let kind = match conn {
                Conn::Breg { .. } => KeyKind::Es256,
                Conn::Messaging => KeyKind::EdDsa,
                Conn::CaseworkReview { .. } => KeyKind::Es256,
            };
            let key = TestKey::generate(kind, &format!("{name}-kid"));
            issuer.register_client(&format!("coordinator-{name}"), key.public_jwk.clone(), None);
            write_secret(
                &secrets,
                &format!("{name}-client-key"),
                key.private_jwk_text().as_bytes(),
            );
        }
        let check = issuer.token_check();
        for f in [messaging.fake(), breg.fake(), casework.fake()] {
            f.require_bearer(check.clone());
        }
        for (name, _) in &example.event_sources {
            write_secret(&secrets, &format!("{name}-signing-key"), &EVENT_KEY);
        }
        write_secret(&secrets, "state-key-1", &[1; 32]);
        write_secret(&secrets, "admission-key", &[3; 32]);
        write_secret(&secrets, "audit-key", &[4; 32]);
        write_secret(
            &secrets,
            "review-completion-token",
            COMPLETION_TOKEN.as_bytes(),
        );
        let definition = example.compile(dir.path());
        let revision = definition.revision.clone();
        let root = dir.path().join("package");
        let digest = write_package(&root, &definition).unwrap();
        let s = suffix();
        let d = Deployment {
            ns: format!("coordinator_j{s}"),
            database_id: format!("journey-{s}"),
            package: (root.display().to_string(), digest),
            dir,
            secrets,
            urls,
            revision,
            issuer,
            messaging,
            breg,
            casework,
            http: reqwest::Client::new(),
            timeout_ms,
            example,
            database_extra: database_extra.to_owned(),
            connection_limits: Vec::new(),
        };
        d.set_database(&d.urls.clone());
        d.apply().await;
        d
    }

    /// Points the secret files at another server's URLs.
    pub fn set_database(&self, urls: &Urls) {
        write_secret(
            &self.secrets,
            "runtime-database-url",
            urls.runtime.as_bytes(),
        );
        write_secret(
            &self.secrets,
            "migration-database-url",
            urls.migration.as_bytes(),
        );
    }

    pub fn runtime_role(&self) -> String {
        let (_, rest) = self.urls.runtime.split_once("://").unwrap();
        rest.split_once(':').unwrap().0.to_owned()
    }

    /// Writes a runtime file binding `port` (state key version 1, active);
    /// returns its path.
    pub fn runtime_file(&self, port: u16) -> PathBuf {
        self.runtime_file_with_keys(port, &[1], 1)
    }

    /// Writes a runtime file binding `port` whose `stateKeys` are
    /// `versions` (version `v` in the secret file `state-key-<v>`) and whose
    /// `activeStateKey` is `active`; returns its path.
    pub fn runtime_file_with_keys(&self, port: u16, versions: &[u32], active: u32) -> PathBuf {
        let state_keys: String = versions
            .iter()
            .map(|v| format!("    \"{v}\":\n      keyRef: secret:file/state-key-{v}\n"))
            .collect();
        let (root, digest) = &self.package;
        let yaml = format!(
            r#"apiVersion: id.registrystack.org/formats/coordinator/runtime/v1beta1
kind: CoordinatorRuntimeConfig
namespace: {ns}
secretProviders:
  file:
    root: {secrets}
database:
  runtimeUrlRef: secret:file/runtime-database-url
  migrationUrlRef: secret:file/migration-database-url
{database_extra}observation:
  minimumIntervalSeconds: 30
{event_sources}connections:
{connections}deployment:
  databaseId: {db}
  runtimeRole: {role}
  packages:
  - root: {root}
    expectedDigest: "{digest}"
  listener:
    bind: 127.0.0.1:{port}
    tlsTermination: operator-controlled-upstream
  authentication:
    issuer: {issuer}
    audience: {AUDIENCE}
    policies:
      {PRODUCER}:
        workflows: [{workflow}]
        actions: [start, status, inspect]
      {OPERATOR}:
        actions: [status, inspect, cancel, retry-same, reconcile, move, export, doctor, restore-hold,
          release-restore-hold, complete-execution-recovery, release-admission-hold]
        operator: true
  auditFile: {audit}
  auditKeyRef: secret:file/audit-key
  stateKeys:
{state_keys}  activeStateKey: {active}
  admissionKeyRef: secret:file/admission-key
"#,
            ns = self.ns,
            secrets = self.secrets.display(),
            connections = self.connections_yaml(),
            event_sources = self.event_sources_yaml(),
            workflow = self.example.workflow,
            db = self.database_id,
            role = self.runtime_role(),
            issuer = self.issuer.issuer(),
            audit = self.dir.path().join("audit.jsonl").display(),
            database_extra = self.database_extra,
        );
        let path = self.dir.path().join(format!("runtime-{port}.yaml"));
        std::fs::write(&path, yaml).unwrap();
        path
    }

    /// The `eventSources:` block of the example (empty when it has none).
    fn event_sources_yaml(&self) -> String {
        if self.example.event_sources.is_empty() {
            return String::new();
        }
        let mut out = "eventSources:\n".to_owned();
        for (name, uri) in &self.example.event_sources {
            out.push_str(&format!(
                "  {name}:\n    source: \"{uri}\"\n    signingKeyRef: secret:file/{name}-signing-key\n"
            ));
        }
        out
    }

    /// The `connections:` entries of the example, bound to the fakes.
    fn connections_yaml(&self) -> String {
        let token = self.issuer.token_endpoint();
        let timeout = self.timeout_ms;
        let mut out = String::new();
        for (name, conn) in &self.example.connections {
            let (kind, base, extra) = match conn {
                Conn::Breg { profile } => (
                    "breg",
                    self.breg.base_url().to_owned(),
                    format!("    profile: {profile}\n"),
                ),
                Conn::Messaging => ("messaging", self.messaging.base_url().to_owned(), String::new()),
                Conn::CaseworkReview {
                    result_check_seconds,
                } => (
                    "casework-review-producer",
                    self.casework.base_url().to_owned(),
                    format!(
                        "    profile: application-review\n    producer: coordinator\n    completion:\n      recipientBinding: {BINDING}\n      bearerTokenRef: secret:file/review-completion-token\n    resultCheckSeconds: {result_check_seconds}\n"
                    ),
                ),
            };
            out.push_str(&format!(
                "  {name}:\n    type: {kind}\n    baseUrl: {base}\n{extra}    requestTimeoutMilliseconds: {timeout}\n    authorization:\n      tokenEndpoint: {token}\n      clientId: coordinator-{name}\n      signingKeyRef: secret:file/{name}-client-key\n"
            ));
            if let Some((_, limits)) = self.connection_limits.iter().find(|(c, _)| c == name) {
                out.push_str(&format!("    limits: {limits}\n"));
            }
        }
        out
    }

    /// `coordinatorctl apply` through the library.
    pub async fn apply(&self) {
        self.apply_file(&self.runtime_file(free_port()))
            .await
            .expect("apply");
    }

    /// `coordinatorctl --runtime-config FILE apply` through the library
    /// (the file must pass `check`).
    pub async fn apply_file(&self, file: &Path) -> Result<ApplyReport, DatabaseError> {
        let config = checked_config(file);
        let resolver = SecretResolver::new(&config.secret_providers);
        let journal = AuditJournal::open(&self.dir.path().join("audit.jsonl")).unwrap();
        let applied = coordinator_store::apply(&config, &resolver, &[], &journal).await;
        // A refused apply leaves no empty journal file (as the CLI).
        let _ = journal.discard_if_empty();
        applied
    }

    /// The run store as the service opens it with the runtime file at
    /// `file` (custody and activation checked), for what the test does
    /// through the library (retention).
    pub async fn open_store(&self, file: &Path) -> Result<Store, DatabaseError> {
        let config = checked_config(file);
        let resolver = SecretResolver::new(&config.secret_providers);
        let deployment = config.deployment.as_ref().unwrap();
        let keys = load_keys(&resolver, deployment).unwrap();
        let packages = load_pinned_packages(deployment)?;
        Store::open(&config, &resolver, &keys, &packages, 1).await
    }

    /// `coordinatorctl --runtime-config FILE deployment-status` through the
    /// library (the file must pass `check`).
    pub async fn status_file(&self, file: &Path) -> Result<DeploymentStatus, DatabaseError> {
        let config = checked_config(file);
        let resolver = SecretResolver::new(&config.secret_providers);
        coordinator_store::deployment_status(&config, &resolver).await
    }

    /// Runs the built binary expecting it to refuse to start; its exit code
    /// and stderr (it must exit within 30 s).
    pub fn spawn_refused(&self) -> (Option<i32>, String) {
        let file = self.runtime_file(free_port());
        let mut child = Command::new(env!("CARGO_BIN_EXE_coordinator"))
            .arg("--runtime-config")
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let start = Instant::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                let mut err = String::new();
                std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
                return (status.code(), err);
            }
            if start.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("coordinator did not refuse to start within 30 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Spawns the built binary and waits until `/ready` answers 200.
    pub async fn spawn(&self) -> Coordinator {
        let port = free_port();
        let file = self.runtime_file(port);
        self.spawn_with(&file, port, &[]).await
    }

    /// Starts the built binary on runtime file `file` (listening on
    /// `port`) with `args`, without waiting for it.
    pub fn launch(&self, file: &Path, port: u16, args: &[&str]) -> Coordinator {
        self.launch_env(file, port, args, &[])
    }

    /// [`Deployment::launch`] with the variables `env` set (e.g. the
    /// `OTEL_*` ones).
    pub fn launch_env(
        &self,
        file: &Path,
        port: u16,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Coordinator {
        let log = self.dir.path().join(format!("coordinator-{port}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_coordinator"))
            .arg("--runtime-config")
            .arg(file)
            .args(args)
            .envs(env.iter().copied())
            .env("RUST_LOG", "info,sqlx=warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Coordinator {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
        }
    }

    /// [`Deployment::launch`], then waits until it serves: `/ready` answers
    /// 200 (also while a hold is in place: it then names the hold).
    pub async fn spawn_with(&self, file: &Path, port: u16, args: &[&str]) -> Coordinator {
        self.spawn_env(file, port, args, &[]).await
    }

    /// [`Deployment::spawn_with`] with the variables `env` set.
    pub async fn spawn_env(
        &self,
        file: &Path,
        port: u16,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Coordinator {
        let mut c = self.launch_env(file, port, args, env);
        let start = Instant::now();
        loop {
            assert!(c.alive(), "coordinator exited:\n{}", c.log_text());
            if self.serving(&c).await {
                return c;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "not ready in 30 s:\n{}",
                c.log_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Whether `/ready` says the process serves: 200. A 503 never counts,
    /// whatever its reason: the process cannot serve then.
    pub async fn serving(&self, c: &Coordinator) -> bool {
        let Ok(r) = self
            .http
            .get(format!("{}/ready", c.base))
            .timeout(Duration::from_secs(5))
            .send()
            .await
        else {
            return false;
        };
        r.status().as_u16() == 200
    }

    /// `/ready`'s status and JSON body.
    pub async fn ready_answer(&self, c: &Coordinator) -> (u16, Value) {
        let r = self
            .http
            .get(format!("{}/ready", c.base))
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (
            status,
            serde_json::from_str(&r.text().await.unwrap()).unwrap(),
        )
    }

    pub async fn ready(&self, c: &Coordinator) -> Option<u16> {
        self.http
            .get(format!("{}/ready", c.base))
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .ok()
            .map(|r| r.status().as_u16())
    }

    pub fn token(&self, client: &str) -> String {
        self.issuer.mint(&Mint::new(client, AUDIENCE))
    }

    pub fn record(&self, app: &str) {
        self.breg.put_record(
            "applications",
            app,
            "r1",
            json!({"noticeAllowed": true, "applicantEmail": format!("{app}@example.org")}),
        );
    }

    /// Starts a follow-up of `app` (its record put first); the run id.
    pub async fn start(&self, c: &Coordinator, app: &str, send_after: &str) -> String {
        self.record(app);
        let body = json!({"workflow": WORKFLOW, "revision": self.revision,
            "input": {"applicationId": app, "sendAfter": send_after}});
        self.post_start(c, &format!("start-{app}"), &body).await
    }

    /// Starts a run of the example's workflow with `input` under `key`;
    /// the run id.
    pub async fn start_input(&self, c: &Coordinator, key: &str, input: Value) -> String {
        let body = json!({"workflow": self.example.workflow, "revision": self.revision,
            "input": input});
        self.post_start(c, key, &body).await
    }

    /// `POST /v1/runs` under idempotency key `key`; the run id of a 201 or
    /// 200 answer (anything else fails the test).
    async fn post_start(&self, c: &Coordinator, key: &str, body: &Value) -> String {
        let (status, v) = self.try_post_start(c, key, body).await;
        assert!(status == 201 || status == 200, "{status} {v}");
        v["run"].as_str().unwrap().to_owned()
    }

    /// A follow-up of `app` at `revision` under key `start-{app}` (its
    /// record put first): the status and the answer, whatever they are.
    pub async fn try_start(
        &self,
        c: &Coordinator,
        app: &str,
        revision: &str,
        send_after: &str,
    ) -> (u16, Value) {
        self.record(app);
        let body = json!({"workflow": WORKFLOW, "revision": revision,
            "input": {"applicationId": app, "sendAfter": send_after}});
        self.try_post_start(c, &format!("start-{app}"), &body).await
    }

    /// `POST /v1/runs` under idempotency key `key`: the status and the
    /// answer. A transport failure (e.g. a pooled connection the server
    /// closed as the request left) is retried with the same key, as a
    /// client should: admission is idempotent, so a retry answers the same
    /// run (200) or creates it (201).
    pub async fn try_post_start(&self, c: &Coordinator, key: &str, body: &Value) -> (u16, Value) {
        let mut last_error = String::new();
        for _ in 0..3 {
            let sent = self
                .http
                .post(format!("{}/v1/runs", c.base))
                .bearer_auth(self.token(PRODUCER))
                .header("idempotency-key", key)
                .header("content-type", "application/json")
                .body(body.to_string())
                .send()
                .await;
            let r = match sent {
                Ok(r) => r,
                Err(e) => {
                    last_error = e.to_string();
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let status = r.status().as_u16();
            let v: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
            return (status, v);
        }
        panic!(
            "POST /v1/runs failed three times: {last_error}\n{}",
            c.log_text()
        );
    }

    /// Waits until FakeCasework holds one review request; its id.
    pub async fn review_id(&self, c: &Coordinator) -> String {
        let start = Instant::now();
        loop {
            let reqs = self.casework.review_requests();
            if let Some(r) = reqs.first() {
                assert_eq!(reqs.len(), 1, "one review request: {reqs:?}");
                return r["id"].as_str().unwrap().to_owned();
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "no review request:\n{}",
                c.log_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn get(&self, c: &Coordinator, path: &str) -> Option<Value> {
        let r = self
            .http
            .get(format!("{}{path}", c.base))
            .bearer_auth(self.token(OPERATOR))
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .ok()?;
        if r.status().as_u16() != 200 {
            return None;
        }
        serde_json::from_str(&r.text().await.ok()?).ok()
    }

    /// `POST path` with `body` as the operator; the status and the JSON
    /// answer.
    pub async fn operate(&self, c: &Coordinator, path: &str, body: Value) -> (u16, Value) {
        let r = self
            .http
            .post(format!("{}{path}", c.base))
            .bearer_auth(self.token(OPERATOR))
            .header("content-type", "application/json")
            .body(body.to_string())
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST {path}: {e}\n{}", c.log_text()));
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// Polls the run until its state is `want` (or `limit` passes).
    pub async fn wait_state(
        &self,
        c: &Coordinator,
        run: &str,
        want: &str,
        limit: Duration,
    ) -> Value {
        let start = Instant::now();
        loop {
            if let Some(v) = self.get(c, &format!("/v1/runs/{run}")).await {
                if v["state"] == want {
                    return v;
                }
                assert!(
                    start.elapsed() < limit,
                    "run {run} is {} after {limit:?}, not {want}:\n{v}\n{}",
                    v["state"],
                    c.log_text()
                );
            } else {
                assert!(
                    start.elapsed() < limit,
                    "run {run} unreadable:\n{}",
                    c.log_text()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Messaging requests carrying `key`'s idempotency key, by key.
    pub fn messages_per_key(&self) -> std::collections::BTreeMap<String, usize> {
        let mut per = std::collections::BTreeMap::new();
        for r in self.messaging.fake().requests_to("/v1/messages") {
            let key = r.header("idempotency-key").unwrap_or("").to_owned();
            *per.entry(key).or_insert(0) += 1;
        }
        per
    }

    pub async fn cleanup(&self) {
        if let Ok(mut admin) = PgConnection::connect(&self.urls.admin).await {
            let _ = admin
                .execute(format!("DROP SCHEMA IF EXISTS {} CASCADE", self.ns).as_str())
                .await;
        }
    }
}

/// A dedicated PostgreSQL 17 cluster (scripts/postgres.sh on its own port
/// and directory), destroyed when dropped.
pub struct Cluster {
    pub port: u16,
    pub dir: PathBuf,
}

impl Cluster {
    pub fn script(&self, command: &str) -> std::process::Output {
        self.script_with(command, &[])
    }

    pub fn start(&self) -> Urls {
        let out = self.script("start");
        assert!(
            out.status.success(),
            "postgres.sh start failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Cluster::urls_of(&out)
    }

    /// `postgres.sh backup --to to`: a physical copy of the cleanly stopped
    /// cluster (started again afterwards).
    pub fn backup(&self, to: &Path) {
        let out = self.script_with("backup", &["--to", &to.display().to_string()]);
        assert!(
            out.status.success(),
            "postgres.sh backup failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `postgres.sh restore --from from`: the cluster's data replaced by
    /// the backup's, started on the same port; its URLs.
    pub fn restore(&self, from: &Path) -> Urls {
        let out = self.script_with("restore", &["--from", &from.display().to_string()]);
        assert!(
            out.status.success(),
            "postgres.sh restore failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Cluster::urls_of(&out)
    }

    /// Runs `postgres.sh command args --port P --dir D` for this cluster
    /// (never on the server the test variables name).
    fn script_with(&self, command: &str, args: &[&str]) -> std::process::Output {
        Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/postgres.sh"))
            .arg(command)
            .args(args)
            .arg("--port")
            .arg(self.port.to_string())
            .arg("--dir")
            .arg(&self.dir)
            .env_remove("COORDINATOR_TEST_DATABASE_URL")
            .env_remove("COORDINATOR_TEST_MIGRATION_URL")
            // The script leaves a server given by these variables alone.
            .env_remove("COORDINATOR_TEST_RUNTIME_URL")
            .output()
            .unwrap()
    }

    fn urls_of(out: &std::process::Output) -> Urls {
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let var = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("export {name}=")))
                .map(|v| v.trim_matches('\'').trim_matches('"').to_owned())
                .unwrap_or_else(|| panic!("{name} missing from: {text}"))
        };
        Urls {
            admin: var("COORDINATOR_TEST_DATABASE_URL"),
            migration: var("COORDINATOR_TEST_MIGRATION_URL"),
            runtime: var("COORDINATOR_TEST_RUNTIME_URL"),
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.script("destroy");
    }
}

impl Cluster {
    /// `postgres.sh standby --primary-dir P [--synchronous]`: this cluster
    /// (its port and directory) made a streaming standby of the running
    /// `primary` and started; its URLs.
    pub fn standby_of(&self, primary: &Cluster, synchronous: bool) -> Urls {
        let primary_dir = primary.dir.display().to_string();
        let mut args = vec!["--primary-dir", primary_dir.as_str()];
        if synchronous {
            args.push("--synchronous");
        }
        let out = self.script_with("standby", &args);
        assert!(
            out.status.success(),
            "postgres.sh standby failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Cluster::urls_of(&out)
    }

    /// `postgres.sh promote`: this standby becomes a primary; its URLs.
    pub fn promote(&self) -> Urls {
        let out = self.script("promote");
        assert!(
            out.status.success(),
            "postgres.sh promote failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Cluster::urls_of(&out)
    }

    /// SIGKILL to the server's postmaster (its children exit with it), as
    /// when the machine of a primary dies.
    pub fn kill9(&self) {
        let pid_file = self.dir.join("data/postmaster.pid");
        let text = std::fs::read_to_string(&pid_file).unwrap();
        let pid = text.lines().next().unwrap().trim().to_owned();
        let killed = Command::new("kill")
            .arg("-KILL")
            .arg(&pid)
            .status()
            .unwrap();
        assert!(killed.success(), "kill -9 {pid}");
        // The children go when they find their postmaster gone.
        let start = Instant::now();
        while Command::new("kill")
            .arg("-0")
            .arg(&pid)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
        {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "postmaster {pid} lives on"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A TCP hop on 127.0.0.1 standing for an address that moves (a virtual
/// IP, HAProxy, a Kubernetes `-rw` Service): each connection is forwarded
/// to the port the hop points at when the connection arrives;
/// [`Hop::point_at`] moves it and cuts the connections it carried, as a
/// moved address does.
pub struct Hop {
    pub port: u16,
    target: std::sync::Arc<std::sync::atomic::AtomicU16>,
    carried: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::AbortHandle>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Hop {
    /// A hop pointing at 127.0.0.1:`target`.
    pub async fn start(target: u16) -> Hop {
        use std::sync::atomic::{AtomicU16, Ordering};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let target = std::sync::Arc::new(AtomicU16::new(target));
        let carried: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::AbortHandle>>> =
            std::sync::Arc::default();
        let (to, list) = (target.clone(), carried.clone());
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let port = to.load(Ordering::SeqCst);
                let task = tokio::spawn(async move {
                    if let Ok(mut outbound) =
                        tokio::net::TcpStream::connect(("127.0.0.1", port)).await
                    {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                let mut list = list.lock().unwrap();
                list.retain(|t| !t.is_finished());
                list.push(task.abort_handle());
            }
        });
        Hop {
            port,
            target,
            carried,
            accept,
        }
    }

    /// Points the hop at 127.0.0.1:`target` and cuts every connection it
    /// carried.
    pub fn point_at(&self, target: u16) {
        self.target
            .store(target, std::sync::atomic::Ordering::SeqCst);
        for task in self.carried.lock().unwrap().drain(..) {
            task.abort();
        }
    }

    /// `urls` with every `127.0.0.1:PORT` replaced by the hop's address.
    pub fn urls(&self, urls: &Urls, port: u16) -> Urls {
        let swap = |u: &str| {
            u.replace(
                &format!("127.0.0.1:{port}/"),
                &format!("127.0.0.1:{}/", self.port),
            )
        };
        Urls {
            admin: swap(&urls.admin),
            migration: swap(&urls.migration),
            runtime: swap(&urls.runtime),
        }
    }
}

impl Drop for Hop {
    fn drop(&mut self) {
        self.accept.abort();
        for task in self.carried.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

/// PgBouncer in transaction pooling mode in front of a [`Cluster`]
/// (scripts/pgbouncer.sh), stopped when dropped.
pub struct Pooler {
    pub port: u16,
    pub dir: PathBuf,
}

impl Pooler {
    /// Starts PgBouncer on a free port in front of `cluster`; the pooler
    /// and its URLs (admin, migration, runtime through the pooler).
    pub fn start(cluster: &Cluster) -> (Pooler, Urls) {
        let port = free_port();
        let pooler = Pooler {
            port,
            dir: PathBuf::from(format!("/tmp/coordinator-pgbouncer-journey-{port}")),
        };
        let out = pooler.script(&["start", "--pg-dir", &cluster.dir.display().to_string()]);
        assert!(
            out.status.success(),
            "pgbouncer.sh start failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let var = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("export {name}=")))
                .map(|v| v.trim_matches('\'').trim_matches('"').to_owned())
                .unwrap_or_else(|| panic!("{name} missing from: {text}"))
        };
        let urls = Urls {
            admin: var("COORDINATOR_POOLER_DATABASE_URL"),
            migration: var("COORDINATOR_POOLER_MIGRATION_URL"),
            runtime: var("COORDINATOR_POOLER_RUNTIME_URL"),
        };
        (pooler, urls)
    }

    fn script(&self, args: &[&str]) -> std::process::Output {
        Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/pgbouncer.sh"))
            .args(args)
            .arg("--port")
            .arg(self.port.to_string())
            .arg("--dir")
            .arg(&self.dir)
            .env_remove("COORDINATOR_POOLER_DATABASE_URL")
            .output()
            .unwrap()
    }
}

impl Drop for Pooler {
    fn drop(&mut self) {
        let _ = self.script(&["stop"]);
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_file(self.dir.with_extension("lock"));
    }
}
