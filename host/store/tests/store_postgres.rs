//! The store against a real PostgreSQL 17 (issue 5 acceptance): plan, apply,
//! deployment-status, the four unsafe runtime-role shapes, PostgreSQL 15,
//! no plaintext input in any column, state key rotation and custody, the
//! audit journal, and the run store (admission, leases, commits, listing).
//!
//! Needs `COORDINATOR_TEST_DATABASE_URL` (superuser), `..._MIGRATION_URL`
//! and `..._RUNTIME_URL` (`eval "$(scripts/postgres.sh start)"`); each test
//! prints a notice and passes when they are unset. Each test uses its own
//! namespace (and its own roles where it needs them), so they run in
//! parallel.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use coordinator_ir::{Definition, Program};
use coordinator_ports::{
    Admitted, Commit, Erasure, Holds, HoldsAndReviews, JobKind, JobQueue, LeaseRequest,
    Maintenance, NewJob, NewRun, Owner, RunAdmission, RunCounts, RunMoves, RunReads,
    StoreError as PortError,
};
use coordinator_runtime::audit::{journal_files, AuditJournal, AuditRecord};
use coordinator_runtime::binding::binding_digests;
use coordinator_runtime::keys::AdmissionKey;
use coordinator_runtime::package::write_package;
use coordinator_runtime::secrets::{load_keys, SecretResolver};
use coordinator_runtime::{check_runtime_file, Mode, RuntimeConfig};
use coordinator_store::{self as store, DatabaseError, PlanAction, Store};
use coordinator_testkit::conformance::{self, committed_at, lease, unix, Fixture};
use coordinator_vm::{DispatchCommand, RunState, RunStatus};
use serde_json::{json, Value};
use sqlx::{Connection, Executor, PgConnection, Row};
use time::OffsetDateTime;

const MARKER: &str = "MARKER-7f3a9c-plaintext-probe";

use coordinator_testkit::postgres::{pg15_url, urls, Urls};

fn suffix() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..12].to_owned()
}

/// `url` with another user and password.
fn with_login(url: &str, user: &str, password: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("scheme");
    let (_, host) = rest.rsplit_once('@').expect("user info");
    format!("{scheme}://{user}:{password}@{host}")
}

fn program() -> Program {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/delayed-follow-up");
    let compiled = coordinator_compiler::compile_project(&dir, "delayed-follow-up");
    assert!(!compiled.has_errors(), "{:#?}", compiled.diagnostics);
    compiled.program.expect("program")
}

fn write_secret(dir: &Path, name: &str, bytes: &[u8]) {
    let p = dir.join(name);
    std::fs::write(&p, bytes).expect("write secret");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).expect("chmod");
}

struct Fx {
    dir: tempfile::TempDir,
    ns: String,
    secrets: PathBuf,
    urls: Urls,
    workflow: String,
    packages: Vec<(String, String)>,
    runtime_role: String,
    database_id: String,
    state_keys: Vec<u32>,
    active: u32,
    /// Text replacements applied to the runtime file (connection edits).
    edits: Vec<(String, String)>,
}

impl Fx {
    fn new(urls: Urls) -> Fx {
        let dir = tempfile::tempdir().expect("tempdir");
        let secrets = dir.path().join("secrets");
        std::fs::create_dir(&secrets).expect("secrets dir");
        std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        write_secret(&secrets, "runtime-database-url", urls.runtime.as_bytes());
        write_secret(
            &secrets,
            "migration-database-url",
            urls.migration.as_bytes(),
        );
        write_secret(&secrets, "state-key-1", &[1; 32]);
        write_secret(&secrets, "state-key-2", &[2; 32]);
        write_secret(&secrets, "admission-key", &[3; 32]);
        write_secret(&secrets, "audit-key", &[4; 32]);
        let program = program();
        let workflow = program.workflow.clone();
        let root = dir.path().join("package-1");
        let digest = write_package(&root, &Definition::new(program)).expect("package");
        let runtime_role = urls
            .runtime
            .split_once("://")
            .and_then(|(_, r)| r.split_once(':'))
            .map(|(u, _)| u.to_owned())
            .expect("runtime user");
        let s = suffix();
        Fx {
            ns: format!("coordinator_t{s}"),
            secrets,
            urls,
            workflow,
            packages: vec![(root.display().to_string(), digest)],
            runtime_role,
            database_id: format!("test-{s}"),
            state_keys: vec![1],
            active: 1,
            edits: vec![],
            dir,
        }
    }

    /// Writes a second package of the same workflow with another revision.
    fn other_package(&self) -> (String, String) {
        let mut p = program();
        p.deadline_seconds -= 1;
        let root = self.dir.path().join(format!("package-{}", suffix()));
        let digest = write_package(&root, &Definition::new(p)).expect("package");
        (root.display().to_string(), digest)
    }

    fn audit_base(&self) -> PathBuf {
        self.dir.path().join("audit.jsonl")
    }

    fn yaml(&self) -> String {
        let template = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../examples/delayed-follow-up/runtime.yaml"),
        )
        .expect("example runtime.yaml")
        .replace(
            "namespace: coordinator_follow_up",
            &format!("namespace: {}", self.ns),
        )
        .replace(
            "root: /run/registry-coordinator/secrets",
            &format!("root: {}", self.secrets.display()),
        );
        let mut y = template;
        y.push_str(&format!(
            "deployment:\n  databaseId: {}\n  runtimeRole: {}\n  packages:\n",
            self.database_id, self.runtime_role
        ));
        for (root, digest) in &self.packages {
            y.push_str(&format!(
                "  - root: {root}\n    expectedDigest: \"{digest}\"\n"
            ));
        }
        y.push_str(&format!(
            "  listener:\n    bind: 127.0.0.1:8108\n    tlsTermination: operator-controlled-upstream\n  authentication:\n    issuer: https://login.example.org\n    audience: registry-coordinator\n  auditFile: {}\n  auditKeyRef: secret:file/audit-key\n  stateKeys:\n",
            self.audit_base().display()
        ));
        for v in &self.state_keys {
            y.push_str(&format!(
                "    \"{v}\":\n      keyRef: secret:file/state-key-{v}\n"
            ));
        }
        y.push_str(&format!(
            "  activeStateKey: {}\n  admissionKeyRef: secret:file/admission-key\n",
            self.active
        ));
        for (from, to) in &self.edits {
            assert!(y.contains(from.as_str()), "no `{from}` in the runtime file");
            y = y.replace(from.as_str(), to);
        }
        y
    }

    /// The runtime file, written and checked offline (Deployment mode).
    fn config(&self) -> RuntimeConfig {
        let path = self.dir.path().join("runtime.yaml");
        std::fs::write(&path, self.yaml()).expect("write runtime.yaml");
        let checked = check_runtime_file(&path, "runtime.yaml", None, Mode::Deployment);
        assert!(checked.is_valid(), "{:#?}", checked.diagnostics);
        checked.config.expect("config")
    }

    fn resolver(&self) -> SecretResolver {
        SecretResolver::new(&self.config().secret_providers)
    }

    async fn plan(&self, remove: &[&str]) -> Result<store::Plan, DatabaseError> {
        let remove: Vec<String> = remove.iter().map(|s| s.to_string()).collect();
        store::plan(&self.config(), &self.resolver(), &remove).await
    }

    async fn apply(&self, remove: &[&str]) -> Result<store::ApplyReport, DatabaseError> {
        let remove: Vec<String> = remove.iter().map(|s| s.to_string()).collect();
        let journal = AuditJournal::open(&self.audit_base()).expect("journal");
        let report = store::apply(&self.config(), &self.resolver(), &remove, &journal).await?;
        // These tests admit runs with made-up binding digests; forget the
        // applied ones, so admission does not compare them (an apply that
        // recorded none is how a store from before the check behaves).
        let mut admin = self.admin().await;
        sqlx::query(&format!(
            "UPDATE {}.deployment SET connection_bindings = '{{}}'::jsonb",
            self.ns
        ))
        .execute(&mut admin)
        .await
        .expect("forget the applied bindings");
        Ok(report)
    }

    async fn status(&self) -> Result<store::DeploymentStatus, DatabaseError> {
        store::deployment_status(&self.config(), &self.resolver()).await
    }

    async fn store(&self) -> Result<Store, DatabaseError> {
        let config = self.config();
        let resolver = self.resolver();
        let keys =
            load_keys(&resolver, config.deployment.as_ref().expect("deployment")).expect("keys");
        let packages = store::deploy::load_pinned_packages(config.deployment.as_ref().expect("d"))
            .expect("packages");
        Store::open(&config, &resolver, &keys, &packages, 4).await
    }

    fn admission_key(&self) -> AdmissionKey {
        AdmissionKey::new(&[3; 32]).expect("key")
    }

    async fn admin(&self) -> PgConnection {
        PgConnection::connect(&self.urls.admin)
            .await
            .expect("admin connection")
    }

    /// A role with `attributes`, allowed to connect; returns (name, URL).
    async fn role(&self, attributes: &str) -> (String, String) {
        let name = format!("coordinator_rt_{}", suffix());
        let password = format!("pw{}", suffix());
        let mut admin = self.admin().await;
        admin
            .execute(
                format!("CREATE ROLE {name} LOGIN PASSWORD '{password}' {attributes}").as_str(),
            )
            .await
            .expect("create role");
        let database: String = sqlx::query("SELECT current_database()::text")
            .fetch_one(&mut admin)
            .await
            .expect("db")
            .get(0);
        admin
            .execute(format!("GRANT CONNECT ON DATABASE {database} TO {name}").as_str())
            .await
            .expect("grant connect");
        (name.clone(), with_login(&self.urls.admin, &name, &password))
    }

    fn use_runtime_role(&mut self, name: &str, url: &str) {
        self.runtime_role = name.to_owned();
        write_secret(&self.secrets, "runtime-database-url", url.as_bytes());
    }

    async fn cleanup(&self, roles: &[&str]) {
        let Ok(mut admin) = PgConnection::connect(&self.urls.admin).await else {
            return;
        };
        let _ = admin
            .execute(format!("DROP SCHEMA IF EXISTS {} CASCADE", self.ns).as_str())
            .await;
        for r in roles {
            let _ = admin.execute(format!("DROP OWNED BY {r}").as_str()).await;
            let _ = admin
                .execute(format!("DROP ROLE IF EXISTS {r}").as_str())
                .await;
        }
    }
}

fn state(input: Value, now: OffsetDateTime, status: RunStatus) -> RunState {
    let instant = |t: OffsetDateTime| {
        let text = t
            .format(&time::format_description::well_known::Rfc3339)
            .expect("format");
        coordinator_ir::instant::Instant::parse(&text).expect("an RFC 3339 instant")
    };
    let t = instant(now);
    let deadline = instant(now + time::Duration::days(30));
    let mut state = RunState::new(status, input, t, deadline, t);
    state.path = vec!["due".into()];
    state
}

async fn admit(
    store: &Store,
    fx: &Fx,
    revision: &str,
    sub: &str,
    key: &str,
    input: Value,
    now: OffsetDateTime,
) -> Admitted {
    let ak = fx.admission_key();
    let identity = ak.start_identity("https://login.example.org", sub, &fx.workflow, key);
    let fingerprint = ak.request_fingerprint(revision, &serde_json::to_vec(&input).expect("json"));
    let st = state(input.clone(), now, RunStatus::Running);
    let command_key = ak.idempotency_key(&fx.database_id, &identity, "notify");
    let t = now.unix_timestamp();
    // What the engine records: the binding digest of each connection the
    // Program uses, from the runtime file as it is now.
    let bindings = binding_digests(&fx.config().connections, &program().connections);
    store
        .admit(NewRun {
            id: uuid::Uuid::new_v4().to_string(),
            workflow: fx.workflow.clone(),
            revision: revision.to_owned(),
            owner: Owner {
                iss: "https://login.example.org".into(),
                sub: sub.into(),
            },
            start_identity: identity,
            request_digest: fingerprint,
            state: st,
            jobs: vec![NewJob {
                kind: JobKind::Dispatch {
                    dispatch: DispatchCommand {
                        step: "notify".into(),
                        operation_id: "messaging.send-message".into(),
                        connection: "notices".into(),
                        action: None,
                        command: json!({"message": {"to": input}}),
                        attempt: 1,
                        resend_safe: false,
                    },
                    idempotency_key: Some(command_key),
                },
                due_at: unix(t),
            }],
            bindings,
            trace_parent: None,
        })
        .await
        .expect("admit")
}

fn created(a: Admitted) -> coordinator_ports::RunRecord {
    match a {
        Admitted::Created(r) => r,
        other => panic!("not created: {other:?}"),
    }
}

fn code<T: std::fmt::Debug>(r: Result<T, DatabaseError>) -> &'static str {
    r.expect_err("refused").code
}

#[tokio::test]
async fn plan_apply_status_unchanged_replace_unlisted_and_remove() {
    let Some(urls) = urls("plan_apply_status") else {
        return;
    };
    let mut fx = Fx::new(urls);
    let digest = fx.packages[0].1.clone();

    let plan = fx.plan(&[]).await.expect("plan");
    assert_eq!(plan.entries.len(), 1);
    assert_eq!(plan.entries[0].workflow, fx.workflow);
    assert_eq!(plan.entries[0].action, PlanAction::Install);
    assert!(plan.refusal.is_none());

    let applied = fx.apply(&[]).await.expect("apply");
    assert!(applied.migrated);
    assert_eq!(applied.schema_version, 4);

    let status = fx.status().await.expect("status");
    assert_eq!(status.schema_version, 4);
    assert_eq!(status.database_id, fx.database_id);
    assert_eq!(status.workflows.len(), 1);
    assert_eq!(status.workflows[0].package_digest, digest);
    assert!(!status.restore_hold && !status.admission_hold);

    let again = fx.plan(&[]).await.expect("plan");
    assert_eq!(again.entries[0].action, PlanAction::Unchanged);
    let reapplied = fx.apply(&[]).await.expect("apply is idempotent");
    assert!(!reapplied.migrated);
    // Apply sets the storage parameters (a namespace an earlier binary
    // made gets them at its next apply).
    let options: Vec<String> = sqlx::query_scalar(
        "SELECT unnest(c.reloptions) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = $1 AND c.relname = 'runs'",
    )
    .bind(&fx.ns)
    .fetch_all(&mut fx.admin().await)
    .await
    .expect("reloptions");
    assert_eq!(options, vec!["fillfactor=60".to_owned()]);

    // A new package of the same workflow: replace; the old revision is kept.
    let first = fx.packages[0].clone();
    fx.packages = vec![fx.other_package()];
    assert_eq!(code(fx.status().await), "deployment.packages-not-applied");
    let plan = fx.plan(&[]).await.expect("plan");
    assert_eq!(plan.entries[0].action, PlanAction::Replace);
    fx.apply(&[]).await.expect("apply replace");
    fx.status().await.expect("status after replace");
    let store = fx.store().await.expect("store");
    let old_revision = coordinator_runtime::package::load_package(Path::new(&first.0), None)
        .expect("load")
        .definition
        .revision;
    assert!(store
        .definition(&old_revision)
        .await
        .expect("read")
        .is_some());

    // Dropping the entry: workflow-unlisted from plan and apply. (The
    // offline check refuses a file without packages; the deployment
    // commands let that one finding through, see cli/src/commands/deploy.rs.)
    let mut config = fx.config();
    config.deployment.as_mut().expect("d").packages.clear();
    let resolver = fx.resolver();
    let plan = store::plan(&config, &resolver, &[]).await.expect("plan");
    assert_eq!(
        plan.refusal.as_ref().map(|e| e.code),
        Some("deployment.workflow-unlisted")
    );
    let journal = AuditJournal::open(&fx.audit_base()).expect("journal");
    assert_eq!(
        code(store::apply(&config, &resolver, &[], &journal).await),
        "deployment.workflow-unlisted"
    );

    // A live run blocks removal; once it has ended, removal succeeds.
    let now = OffsetDateTime::now_utc();
    let revision = store.active_workflows().await.expect("active")[0]
        .revision
        .clone();
    let run = created(
        admit(
            &store,
            &fx,
            &revision,
            "alice",
            "k-1",
            json!({"applicationId": "a"}),
            now,
        )
        .await,
    );
    let remove = vec![fx.workflow.clone()];
    let plan = store::plan(&config, &resolver, &remove)
        .await
        .expect("plan");
    assert_eq!(plan.entries[0].action, PlanAction::Remove);
    assert_eq!(
        plan.refusal.as_ref().map(|e| e.code),
        Some("deployment.workflow-live-runs")
    );
    assert_eq!(
        code(store::apply(&config, &resolver, &remove, &journal).await),
        "deployment.workflow-live-runs"
    );
    let loaded = store.get(&run.id).await.expect("load").expect("run");
    let mut ended = loaded.state.clone();
    ended.status = RunStatus::Cancelled;
    let out = store
        .commit(Commit {
            review: None,
            run_id: run.id.clone(),
            expected_version: loaded.version,
            at: committed_at(&ended),
            state: ended,
            ledger: Default::default(),
            complete: None,
            jobs: vec![],
        })
        .await
        .expect("commit");
    assert_eq!(out, 2);
    let report = store::apply(&config, &resolver, &remove, &journal)
        .await
        .expect("remove");
    assert_eq!(report.entries[0].action, PlanAction::Remove);
    store.close().await;
    fx.cleanup(&[]).await;
}

/// `plan` previews `apply` as far as the runtime credential sees: each
/// fault `apply` refuses on an applied namespace that needs no migration
/// login (a group-readable state key, a superuser runtime role, a state
/// key that is not the recorded one, a wrong runtime password, a runtime
/// URL that is not `runtimeRole`'s) is refused by `plan` with the same
/// code, and `apply` logs in with the runtime URL before it changes
/// anything. Only `apply` reads the migration URL: with its secret wrong or
/// absent, `plan` still plans and `apply` refuses.
#[tokio::test]
async fn plan_refuses_each_fault_apply_refuses_and_only_apply_reads_the_migration_url() {
    let Some(urls) = urls("plan_previews_apply") else {
        return;
    };
    // A wrong runtime password: apply changes nothing (no namespace made).
    let fresh = Fx::new(urls.clone());
    let runtime_url = fresh.urls.runtime.clone();
    let wrong = |url: &str| {
        let (head, rest) = url.split_once("://").expect("url");
        let (user, after) = rest.split_once(':').expect("user");
        let (_, host) = after.split_once('@').expect("host");
        format!("{head}://{user}:wrong-password@{host}")
    };
    write_secret(
        &fresh.secrets,
        "runtime-database-url",
        wrong(&runtime_url).as_bytes(),
    );
    assert_eq!(code(fresh.plan(&[]).await), "database.login");
    assert_eq!(code(fresh.apply(&[]).await), "database.login");
    let mut admin = fresh.admin().await;
    let exists: bool = sqlx::query("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
        .bind(&fresh.ns)
        .fetch_one(&mut admin)
        .await
        .expect("q")
        .get(0);
    assert!(
        !exists,
        "an apply refused for the runtime login changed the database"
    );
    write_secret(
        &fresh.secrets,
        "runtime-database-url",
        runtime_url.as_bytes(),
    );
    fresh.cleanup(&[]).await;

    // Only apply reads the migration URL: a fresh database whose migration
    // secret is wrong or absent still gets a plan (every workflow
    // `install`); apply is refused and changes nothing.
    let mut fx = Fx::new(urls);
    let migration_url = fx.urls.migration.clone();
    let migration_file = fx.secrets.join("migration-database-url");
    write_secret(
        &fx.secrets,
        "migration-database-url",
        wrong(&migration_url).as_bytes(),
    );
    let plan = fx
        .plan(&[])
        .await
        .expect("plan without the migration login");
    assert_eq!(plan.entries[0].action, PlanAction::Install);
    assert!(plan.refusal.is_none());
    assert_eq!(code(fx.apply(&[]).await), "database.login");
    std::fs::remove_file(&migration_file).expect("remove the migration secret");
    let plan = fx
        .plan(&[])
        .await
        .expect("plan without the migration secret");
    assert_eq!(plan.entries[0].action, PlanAction::Install);
    assert_eq!(code(fx.apply(&[]).await), "secret.unavailable");
    write_secret(
        &fx.secrets,
        "migration-database-url",
        migration_url.as_bytes(),
    );
    fx.apply(&[]).await.expect("apply");
    fx.plan(&[]).await.expect("plan");
    std::fs::remove_file(&migration_file).expect("remove the migration secret");
    let plan = fx.plan(&[]).await.expect("plan of an applied namespace");
    assert_eq!(plan.entries[0].action, PlanAction::Unchanged);
    write_secret(
        &fx.secrets,
        "migration-database-url",
        migration_url.as_bytes(),
    );
    // A runtime URL that logs in as another role than runtimeRole: refused
    // by both, before apply changes anything.
    let kept_role = fx.runtime_role.clone();
    fx.runtime_role = "coordinator_someone_else".into();
    assert_eq!(code(fx.plan(&[]).await), "deployment.runtime-role-mismatch");
    assert_eq!(
        code(fx.apply(&[]).await),
        "deployment.runtime-role-mismatch"
    );
    fx.runtime_role = kept_role;
    // A group-readable state key.
    let key = fx.secrets.join("state-key-1");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    assert_eq!(code(fx.plan(&[]).await), "secret.permissions");
    assert_eq!(code(fx.apply(&[]).await), "secret.permissions");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    // Another key under a recorded version: custody.
    write_secret(&fx.secrets, "state-key-1", &[9; 32]);
    assert_eq!(code(fx.plan(&[]).await), "state-key-custody");
    assert_eq!(code(fx.apply(&[]).await), "state-key-custody");
    write_secret(&fx.secrets, "state-key-1", &[1; 32]);
    // A superuser runtime role.
    let (name, url) = fx.role("SUPERUSER").await;
    let (kept_role, kept_url) = (fx.runtime_role.clone(), runtime_url.clone());
    fx.use_runtime_role(&name, &url);
    assert_eq!(
        code(fx.plan(&[]).await),
        "deployment.runtime-role-superuser"
    );
    assert_eq!(
        code(fx.apply(&[]).await),
        "deployment.runtime-role-superuser"
    );
    fx.use_runtime_role(&kept_role, &kept_url);
    fx.plan(&[]).await.expect("plan again");
    fx.cleanup(&[&name]).await;
}

/// `apply` and `deployment-status` never disagree about where the
/// deployment is: when the runtime URL reaches another database than the
/// migration URL, `apply` refuses (`deployment.database-urls-differ`)
/// before it changes anything, rather than migrating a database the
/// service does not serve.
#[tokio::test]
async fn apply_refuses_a_runtime_url_that_reaches_another_database() {
    let Some(urls) = urls("database_urls_differ") else {
        return;
    };
    let fx = Fx::new(urls);
    let other = format!("coordinator_other_{}", suffix());
    let mut admin = fx.admin().await;
    admin
        .execute(format!("CREATE DATABASE {other}").as_str())
        .await
        .expect("create the other database");
    let (head, _) = fx.urls.runtime.rsplit_once('/').expect("url database");
    write_secret(
        &fx.secrets,
        "runtime-database-url",
        format!("{head}/{other}").as_bytes(),
    );
    let refused = fx.apply(&[]).await.expect_err("refused");
    assert_eq!(refused.code, "deployment.database-urls-differ", "{refused}");
    assert!(refused.message.contains(&other), "{}", refused.message);
    let exists: bool = sqlx::query("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
        .bind(&fx.ns)
        .fetch_one(&mut admin)
        .await
        .expect("q")
        .get(0);
    assert!(
        !exists,
        "a refused apply changed the migration URL's database"
    );
    // Pointed at the same database again, apply and deployment-status agree.
    write_secret(
        &fx.secrets,
        "runtime-database-url",
        fx.urls.runtime.as_bytes(),
    );
    fx.apply(&[]).await.expect("apply");
    fx.status().await.expect("status");
    admin
        .execute(format!("DROP DATABASE {other}").as_str())
        .await
        .expect("drop the other database");
    fx.cleanup(&[]).await;
}

#[tokio::test]
async fn each_unsafe_runtime_role_shape_is_refused_with_its_own_code() {
    let Some(urls) = urls("unsafe_runtime_roles") else {
        return;
    };
    let mut fx = Fx::new(urls);
    let mut roles = Vec::new();
    let migration_user = fx
        .urls
        .migration
        .split_once("://")
        .and_then(|(_, r)| r.split_once(':'))
        .map(|(u, _)| u.to_owned())
        .expect("migration user");
    for (attributes, grant_migration, expected) in [
        ("SUPERUSER", false, "deployment.runtime-role-superuser"),
        ("BYPASSRLS", false, "deployment.runtime-role-bypassrls"),
        ("", true, "deployment.runtime-role-member"),
    ] {
        let (name, url) = fx.role(attributes).await;
        if grant_migration {
            fx.admin()
                .await
                .execute(format!("GRANT {migration_user} TO {name}").as_str())
                .await
                .expect("grant membership");
        }
        fx.use_runtime_role(&name, &url);
        assert_eq!(code(fx.apply(&[]).await), expected, "{attributes}");
        roles.push(name);
    }
    // Nothing of a refused apply stays: the namespace was rolled back.
    let mut admin = fx.admin().await;
    let exists: bool = sqlx::query("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
        .bind(&fx.ns)
        .fetch_one(&mut admin)
        .await
        .expect("q")
        .get(0);
    assert!(!exists, "a refused apply left the namespace behind");

    // A safe role applies; given CREATE on the schema, apply and startup refuse.
    let (name, url) = fx.role("").await;
    fx.use_runtime_role(&name, &url);
    fx.apply(&[]).await.expect("safe role applies");
    fx.status().await.expect("safe role serves");
    admin
        .execute(format!("GRANT CREATE ON SCHEMA {} TO {name}", fx.ns).as_str())
        .await
        .expect("grant create");
    assert_eq!(code(fx.status().await), "deployment.runtime-role-create");
    assert_eq!(
        code(fx.store().await.map(|_| ())),
        "deployment.runtime-role-create"
    );
    assert_eq!(code(fx.apply(&[]).await), "deployment.runtime-role-create");
    // The URL's role must be the configured runtimeRole.
    fx.runtime_role = roles[0].clone();
    assert_eq!(code(fx.status().await), "deployment.runtime-role-mismatch");
    roles.push(name);
    let refs: Vec<&str> = roles.iter().map(String::as_str).collect();
    fx.cleanup(&refs).await;
}

#[tokio::test]
async fn postgresql_15_is_refused() {
    let Some(urls) = urls("postgresql_15") else {
        return;
    };
    let Some(pg15) = pg15_url("postgresql_15_is_refused") else {
        return;
    };
    let fx = Fx::new(urls);
    write_secret(&fx.secrets, "runtime-database-url", pg15.as_bytes());
    write_secret(&fx.secrets, "migration-database-url", pg15.as_bytes());
    assert_eq!(code(fx.plan(&[]).await), "deployment.database-version");
    assert_eq!(code(fx.apply(&[]).await), "deployment.database-version");
    assert_eq!(code(fx.status().await), "deployment.database-version");
}

#[tokio::test]
async fn no_column_of_the_namespace_holds_the_input_in_plaintext() {
    let Some(urls) = urls("no_plaintext") else {
        return;
    };
    let fx = Fx::new(urls);
    fx.apply(&[]).await.expect("apply");
    let store = fx.store().await.expect("store");
    let revision = store.active_workflows().await.expect("active")[0]
        .revision
        .clone();
    let now = OffsetDateTime::now_utc();
    let input = json!({"applicationId": MARKER, "sendAfter": "2026-01-01T00:00:00Z"});
    let run = created(admit(&store, &fx, &revision, "alice", "k-1", input.clone(), now).await);
    // The sealed values open again.
    let loaded = store.get(&run.id).await.expect("load").expect("run");
    assert_eq!(loaded.state.input, input);
    assert_eq!(loaded.owner.sub, "alice");
    assert_eq!(
        store.load_input(&run.id).await.expect("input"),
        Some(input.clone())
    );
    let jobs = store.jobs(&run.id).await.expect("jobs");
    assert!(jobs.iter().any(|j| matches!(&j.kind,
        JobKind::Dispatch { dispatch, .. } if dispatch.command["message"]["to"]["applicationId"] == MARKER)));

    let mut admin = fx.admin().await;
    let tables: Vec<String> = sqlx::query(
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1",
    )
    .bind(&fx.ns)
    .fetch_all(&mut admin)
    .await
    .expect("tables")
    .into_iter()
    .map(|r| r.get(0))
    .collect();
    assert_eq!(tables.len(), store::schema::TABLES.len());
    let hex_marker = hex::encode(MARKER);
    let mut rows_seen = 0;
    for table in &tables {
        let rows = sqlx::query(&format!("SELECT t::text FROM {}.{table} t", fx.ns))
            .fetch_all(&mut admin)
            .await
            .expect("rows");
        for row in rows {
            let text: String = row.get(0);
            rows_seen += 1;
            assert!(
                !text.contains(MARKER),
                "{table} holds the input in plaintext"
            );
            assert!(
                !text.contains(&hex_marker),
                "{table} holds the input as plain bytes"
            );
            assert!(
                !text.contains("alice"),
                "{table} holds the caller's subject"
            );
        }
    }
    assert!(rows_seen >= 8, "every table was read ({rows_seen} rows)");
    store.close().await;
    fx.cleanup(&[]).await;
}

#[tokio::test]
async fn rotation_keeps_old_runs_readable_and_a_removed_version_is_custody() {
    let Some(urls) = urls("rotation") else { return };
    let mut fx = Fx::new(urls);
    fx.apply(&[]).await.expect("apply");
    let store = fx.store().await.expect("store");
    let revision = store.active_workflows().await.expect("active")[0]
        .revision
        .clone();
    let now = OffsetDateTime::now_utc();
    let old = created(admit(&store, &fx, &revision, "alice", "k-1", json!({"n": 1}), now).await);
    store.close().await;

    // Rotate: add version 2, keep 1, activate 2, apply.
    fx.state_keys = vec![1, 2];
    fx.active = 2;
    // Before apply, the active version has no custody record.
    assert_eq!(code(fx.status().await), "state-key-custody");
    fx.apply(&[]).await.expect("apply rotation");
    let status = fx.status().await.expect("status");
    assert_eq!(status.state_key_versions, vec![1, 2]);
    // Apply re-sealed the definition under the active version, so only the
    // runs keep version 1 in use.
    let mut admin = fx.admin().await;
    let (_, version) = stored_definition(&mut admin, &fx.ns, &revision).await;
    assert_eq!(version, Some(2));
    let store = fx.store().await.expect("store");
    let loaded = store
        .get(&old.id)
        .await
        .expect("old readable")
        .expect("run");
    assert_eq!(loaded.state.input, json!({"n": 1}));
    let new = created(admit(&store, &fx, &revision, "alice", "k-2", json!({"n": 2}), now).await);
    assert!(store.get(&new.id).await.expect("new").is_some());
    store.close().await;

    // Remove version 1 while runs use it: custody refuses.
    fx.state_keys = vec![2];
    assert_eq!(code(fx.status().await), "state-key-custody");
    assert_eq!(code(fx.store().await.map(|_| ())), "state-key-custody");
    assert_eq!(code(fx.apply(&[]).await), "state-key-custody");
    let err = fx.status().await.expect_err("custody");
    assert_eq!(err.cli_code(), "coordinator.command.state-key-custody");

    // A different key file under a recorded version is custody too.
    fx.state_keys = vec![1, 2];
    write_secret(&fx.secrets, "state-key-1", &[9; 32]);
    assert_eq!(code(fx.status().await), "state-key-custody");
    fx.cleanup(&[]).await;
}

/// The admission key is in custody like the state keys: start identities
/// are keyed by it, so another key would let a repeated start create a
/// second run. Startup, `deployment-status` and `apply` refuse it.
#[tokio::test]
async fn a_replaced_admission_key_is_custody() {
    let Some(urls) = urls("admission_custody") else {
        return;
    };
    let fx = Fx::new(urls);
    fx.apply(&[]).await.expect("apply");
    fx.status().await.expect("status with the recorded key");
    write_secret(&fx.secrets, "admission-key", &[8; 32]);
    assert_eq!(code(fx.status().await), "state-key-custody");
    assert_eq!(code(fx.store().await.map(|_| ())), "state-key-custody");
    let err = fx.apply(&[]).await.expect_err("apply refuses");
    assert_eq!(err.code, "state-key-custody");
    assert!(err.message.contains("admission key"), "{}", err.message);
    write_secret(&fx.secrets, "admission-key", &[3; 32]);
    fx.status()
        .await
        .expect("the original key is accepted again");
    fx.cleanup(&[]).await;
}

#[tokio::test]
async fn the_audit_journal_has_one_line_per_action_and_no_input() {
    let Some(urls) = urls("audit_journal") else {
        return;
    };
    let fx = Fx::new(urls);
    fx.apply(&[]).await.expect("apply 1");
    fx.apply(&[]).await.expect("apply 2");
    let store = fx.store().await.expect("store");
    let revision = store.active_workflows().await.expect("active")[0]
        .revision
        .clone();
    // The service's admission path: commit, then audit (fsync), then answer.
    let audit_key = coordinator_runtime::keys::AuditKey::new(&[4; 32]).expect("key");
    let journal = AuditJournal::open(&fx.audit_base()).expect("journal");
    let now = OffsetDateTime::now_utc();
    for i in 0..3 {
        let outcome = admit(
            &store,
            &fx,
            &revision,
            "alice",
            &format!("k-{i}"),
            json!({"applicationId": MARKER}),
            now,
        )
        .await;
        let run = created(outcome);
        journal
            .append(
                &AuditRecord::new("run.admit", "accepted")
                    .reference(&audit_key, "run", &run.id)
                    .reference(&audit_key, "principal", "https://login.example.org alice"),
            )
            .expect("audit");
    }
    let files = journal_files(&fx.audit_base()).expect("files");
    assert_eq!(
        files.len(),
        3,
        "one file per process (each apply and the service)"
    );
    let mut lines = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("read");
        assert!(!text.contains(MARKER));
        assert!(!text.contains("alice"));
        assert!(
            !text.contains(&fx.database_id),
            "database id only as a keyed reference"
        );
        for l in text.lines() {
            lines.push(serde_json::from_str::<Value>(l).expect("JSON line"));
        }
    }
    let applies = lines
        .iter()
        .filter(|l| l["action"] == "deployment.apply")
        .count();
    let admits = lines.iter().filter(|l| l["action"] == "run.admit").count();
    assert_eq!((applies, admits, lines.len()), (2, 3, 5));
    store.close().await;
    fx.cleanup(&[]).await;
}

/// A fresh namespace with the example applied, its store, and the
/// conformance fixture (the active workflow and revision).
async fn fresh(test: &str) -> Option<(Fx, Store, Fixture)> {
    let fx = Fx::new(urls(test)?);
    fx.apply(&[]).await.expect("apply");
    let store = fx.store().await.expect("store");
    let active = store.active_workflows().await.expect("active");
    let first = active.first().expect("one workflow");
    let fixture = Fixture {
        workflow: first.workflow.clone(),
        revision: first.revision.clone(),
    };
    Some((fx, store, fixture))
}

// The service's store behaviours, the same checks as the in-memory store's
// (host/ports/src/conformance.rs), each on a fresh namespace.

/// One `#[tokio::test]` per conformance check: `test => namespace label,
/// check(ports)`, the store passed for each port the check takes.
macro_rules! conformance_tests {
    ($($test:ident => $label:literal, $check:ident($($port:ident),+);)+) => {$(
        #[tokio::test]
        async fn $test() {
            let Some((fx, s, fixture)) = fresh($label).await else {
                return;
            };
            conformance::$check($({
                let $port = &s;
                $port
            }),+, &fixture)
            .await;
            s.close().await;
            fx.cleanup(&[]).await;
        }
    )+};
}

conformance_tests! {
    run_store_admission_is_keyed_by_start_identity => "run_store_admission", admission_is_keyed_by_start_identity(admission, reads);
    run_store_records_round_trip => "run_store_round_trip", records_round_trip(admission, queue, reads);
    run_store_leases_expire_and_commits_check_versions => "run_store_leases", leases_expire_and_commits_check_versions(admission, queue, reads);
    run_store_commits_lease_new_due_jobs => "run_store_lease_on_insert", commits_lease_new_due_jobs_to_the_committer(admission, queue, reads, holds);
    run_store_group_commits_answer_each_commit_as_alone => "run_store_group_commit", group_commits_answer_each_commit_as_alone(admission, queue, reads);
    run_store_group_admissions_answer_each_start_as_alone => "run_store_group_admission", group_admissions_answer_each_start_as_alone(admission, reads);
    run_store_deadlines_become_timer_jobs => "run_store_deadlines", deadlines_become_timer_jobs_once_when_due(admission, queue, reads);
    run_store_release_and_discard => "run_store_release", release_and_discard(admission, queue, reads);
    run_store_bring_forward_and_listing => "run_store_listing", bring_forward_respects_the_floor_and_lists_page(admission, queue, reads, maintenance);
    run_store_live_bindings_count_runs_that_have_not_ended => "run_store_live_bindings", live_bindings_count_runs_that_have_not_ended(admission, queue, reads);
    run_store_retention_erases_only_ended_payloads => "run_store_retention", retention_erases_only_ended_payloads(admission, queue, reads, maintenance);
    run_store_restore_hold_leases_lookups_only => "run_store_restore_hold", restore_hold_leases_lookups_only_and_fences_old_epochs(admission, queue, holds);
    run_store_reviews_are_recorded_and_attested => "run_store_reviews", reviews_are_recorded_surveyed_and_attested(admission, queue, reads, holds);
    run_store_moves_are_fenced_by_version_and_revision => "run_store_moves", moves_are_fenced_by_version_and_revision(admission, queue, reads, moves);
}

/// Every store behaviour again with `database.poolingMode: transaction`
/// (each statement unnamed, in a transaction of its own; those of a
/// transaction unnamed): the same answers as in session mode, on a plain
/// PostgreSQL (the journey through PgBouncer is server/tests/production.rs).
#[tokio::test]
async fn run_store_behaves_the_same_in_transaction_pooling_mode() {
    macro_rules! in_transaction_mode {
        ($($check:ident($($port:ident),+)),+ $(,)?) => {$({
            let Some(urls) = urls("run_store_transaction_pooling") else {
                return;
            };
            let mut fx = Fx::new(urls);
            fx.edits.push((
                "  migrationUrlRef: secret:file/migration-database-url\n".into(),
                "  migrationUrlRef: secret:file/migration-database-url\n  poolingMode: transaction\n".into(),
            ));
            assert!(fx.yaml().contains("poolingMode: transaction"));
            fx.apply(&[]).await.expect("apply");
            let s = fx.store().await.expect("store");
            assert_eq!(
                s.database().pooling(),
                coordinator_runtime::config::PoolingMode::Transaction
            );
            let active = s.active_workflows().await.expect("active");
            let first = active.first().expect("one workflow");
            let fixture = Fixture {
                workflow: first.workflow.clone(),
                revision: first.revision.clone(),
            };
            conformance::$check($({
                let $port = &s;
                $port
            }),+, &fixture)
            .await;
            s.close().await;
            fx.cleanup(&[]).await;
        })+};
    }
    in_transaction_mode!(
        admission_is_keyed_by_start_identity(admission, reads),
        records_round_trip(admission, queue, reads),
        leases_expire_and_commits_check_versions(admission, queue, reads),
        commits_lease_new_due_jobs_to_the_committer(admission, queue, reads, holds),
        group_commits_answer_each_commit_as_alone(admission, queue, reads),
        group_admissions_answer_each_start_as_alone(admission, reads),
        deadlines_become_timer_jobs_once_when_due(admission, queue, reads),
        release_and_discard(admission, queue, reads),
        bring_forward_respects_the_floor_and_lists_page(admission, queue, reads, maintenance),
        retention_erases_only_ended_payloads(admission, queue, reads, maintenance),
        reviews_are_recorded_surveyed_and_attested(admission, queue, reads, holds),
        moves_are_fenced_by_version_and_revision(admission, queue, reads, moves),
    );
}

/// Every sealed value of `run` (input, state, output, owner, and its jobs'
/// prepared commands) as the `\x...` text PostgreSQL renders bytea in.
async fn sealed_of(admin: &mut PgConnection, ns: &str, run: &str) -> Vec<String> {
    let mut out = Vec::new();
    let row = sqlx::query(&format!(
        "SELECT sealed_input, sealed_state, sealed_output, sealed_owner FROM {ns}.runs
          WHERE run_id = $1"
    ))
    .bind(run)
    .fetch_one(&mut *admin)
    .await
    .expect("run row");
    for i in 0..4 {
        if let Some(b) = row.get::<Option<Vec<u8>>, _>(i) {
            out.push(hex::encode(b));
        }
    }
    for row in sqlx::query(&format!(
        "SELECT sealed_command FROM {ns}.jobs WHERE run_id = $1 AND sealed_command IS NOT NULL"
    ))
    .bind(run)
    .fetch_all(&mut *admin)
    .await
    .expect("job rows")
    {
        out.push(hex::encode(row.get::<Vec<u8>, _>(0)));
    }
    out
}

/// Every row of every table of the namespace, as text.
async fn every_row(admin: &mut PgConnection, ns: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for table in store::schema::TABLES {
        for row in sqlx::query(&format!("SELECT t::text FROM {ns}.{table} t"))
            .fetch_all(&mut *admin)
            .await
            .expect("rows")
        {
            out.push((table.to_owned(), row.get(0)));
        }
    }
    out
}

#[tokio::test]
async fn retention_leaves_no_byte_of_an_erased_payload_in_any_table() {
    let Some((fx, store, fixture)) = fresh("retention_bytes").await else {
        return;
    };
    let now = OffsetDateTime::now_utc();
    let input = json!({"applicationId": MARKER});
    let run = created(
        admit(
            &store,
            &fx,
            &fixture.revision,
            "alice",
            "k-1",
            input.clone(),
            now,
        )
        .await,
    );
    let live = created(
        admit(
            &store,
            &fx,
            &fixture.revision,
            "bob",
            "k-2",
            json!({"n": 2}),
            now,
        )
        .await,
    );
    let mut admin = fx.admin().await;
    // The prepared command exists only while the run is live.
    let mut sealed = sealed_of(&mut admin, &fx.ns, &run.id).await;
    assert_eq!(sealed.len(), 4, "input, state, owner and one command");
    let mut ended = run.state.clone();
    ended.status = RunStatus::Finished;
    ended.outcome = Some("sent".into());
    ended.output = Some(json!({"receipt": MARKER}));
    ended.ended_at = Some(ended.now);
    store
        .commit(Commit {
            review: None,
            run_id: run.id.clone(),
            expected_version: 1,
            at: committed_at(&ended),
            state: ended,
            ledger: Default::default(),
            complete: None,
            jobs: vec![],
        })
        .await
        .expect("end the run");
    sealed.extend(sealed_of(&mut admin, &fx.ns, &run.id).await);
    let live_sealed = sealed_of(&mut admin, &fx.ns, &live.id).await;
    let spent_before = every_row(&mut admin, &fx.ns)
        .await
        .into_iter()
        .filter(|(t, _)| t == "spent_keys")
        .count();

    let t = now.unix_timestamp();
    assert_eq!(
        store.erase_payloads(unix(t + 1), 100, unix(t + 2)).await,
        Ok(Erasure {
            erased: 1,
            more: false
        })
    );
    let rows = every_row(&mut admin, &fx.ns).await;
    assert!(
        rows.len() >= 8,
        "every table was read ({} rows)",
        rows.len()
    );
    for (table, text) in &rows {
        for value in &sealed {
            assert!(
                !text.contains(value.as_str()),
                "{table} still holds sealed bytes of the erased run"
            );
        }
        assert!(!text.contains(MARKER) && !text.contains("alice"));
    }
    // The live run keeps every sealed value; the spent identities stay.
    for value in &live_sealed {
        assert!(rows.iter().any(|(_, text)| text.contains(value.as_str())));
    }
    assert_eq!(
        rows.iter().filter(|(t, _)| t == "spent_keys").count(),
        spent_before,
        "the start and command identities are tombstones"
    );
    let row = sqlx::query(&format!(
        "SELECT sealed_input IS NULL AND sealed_state IS NULL AND sealed_output IS NULL,
                payload_erased_at IS NOT NULL, sealed_owner IS NOT NULL
           FROM {}.runs WHERE run_id = $1",
        fx.ns
    ))
    .bind(&run.id)
    .fetch_one(&mut admin)
    .await
    .expect("row");
    assert_eq!(
        (
            row.get::<bool, _>(0),
            row.get::<bool, _>(1),
            row.get::<bool, _>(2)
        ),
        (true, true, true)
    );
    // What still answers, and what no longer can.
    let got = store.get(&run.id).await.expect("get").expect("the run");
    assert!(got.payload_erased);
    assert_eq!(
        (got.status(), got.owner.sub.as_str()),
        (RunStatus::Finished, "alice")
    );
    assert_eq!(got.state.input, Value::Null);
    assert!(matches!(
        store.load_input(&run.id).await,
        Err(e) if e.code == "run.payload-erased"
    ));
    assert!(matches!(
        admit(&store, &fx, &fixture.revision, "alice", "k-1", input, now).await,
        Admitted::Existing(r) if r.id == run.id && r.payload_erased
    ));
    store.close().await;
    fx.cleanup(&[]).await;
}

#[tokio::test]
async fn the_service_reads_jobs_by_id_through_the_index_even_when_the_table_is_small() {
    let Some((fx, store, _fixture)) = fresh("jobs_by_index").await else {
        return;
    };
    // Every pooled connection starts with the service's session settings.
    let mut a = store.pool().acquire().await.expect("connection");
    let mut b = store.pool().acquire().await.expect("second connection");
    for conn in [&mut a, &mut b] {
        let setting: String = sqlx::query_scalar("SHOW enable_seqscan")
            .fetch_one(&mut **conn)
            .await
            .expect("show");
        assert_eq!(setting, "off");
    }
    // An empty queue table is where a kept plan would choose to read it
    // whole: the lookup by job ids still uses the primary key.
    let plan: Vec<String> = sqlx::query_scalar(&format!(
        "EXPLAIN SELECT job_id FROM {}.jobs WHERE job_id = ANY('{{1,2,3}}'::bigint[])",
        fx.ns
    ))
    .fetch_all(&mut *a)
    .await
    .expect("explain");
    let plan = plan.join("\n");
    assert!(plan.contains("jobs_pkey"), "{plan}");
    assert!(!plan.contains("Seq Scan"), "{plan}");
    drop((a, b));
    fx.cleanup(&[]).await;
}

#[tokio::test]
async fn run_store_holds_revisions_and_concurrent_leases() {
    let Some((fx, store, fixture)) = fresh("run_store_holds").await else {
        return;
    };
    let now = OffsetDateTime::now_utc();
    let stale_rev = format!("sha256:{}", "0".repeat(64));
    assert!(matches!(
        admit(&store, &fx, &stale_rev, "alice", "k-9", json!({}), now).await,
        Admitted::RevisionNotActive { active: Some(a) } if a == fixture.revision
    ));
    // Two workers lease concurrently: every due job goes to exactly one.
    for i in 0..40 {
        created(
            admit(
                &store,
                &fx,
                &fixture.revision,
                "bob",
                &format!("k-{i}"),
                json!({"i": i}),
                now,
            )
            .await,
        );
    }
    let t = now.unix_timestamp();
    let (a, b) = tokio::join!(
        lease(&store, "w1", t, t + 60, 25),
        lease(&store, "w2", t, t + 60, 25)
    );
    let (a, b) = (a.expect("lease"), b.expect("lease"));
    let mut ids: Vec<u64> = a.iter().chain(b.iter()).map(|j| j.id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(
        (a.len() + b.len(), ids.len()),
        (40, 40),
        "each due dispatch once"
    );
    // The restore hold leases nothing; the admission hold admits nothing.
    let mut admin = fx.admin().await;
    admin
        .execute(format!("UPDATE {}.deployment SET restore_hold = true", fx.ns).as_str())
        .await
        .expect("hold");
    assert_eq!(lease(&store, "w3", t + 61, t + 120, 100).await, Ok(vec![]));
    admin
        .execute(format!("UPDATE {}.deployment SET admission_hold = true", fx.ns).as_str())
        .await
        .expect("hold");
    assert_eq!(
        admit(&store, &fx, &fixture.revision, "carol", "k", json!({}), now).await,
        Admitted::AdmissionHeld
    );
    // A tampered state is refused with its code, never read as plain data.
    let run = a.first().expect("a job").run_id.clone();
    admin
        .execute(
            format!(
                "UPDATE {}.runs SET sealed_state = sealed_owner WHERE run_id = '{run}'",
                fx.ns
            )
            .as_str(),
        )
        .await
        .expect("tamper");
    assert!(matches!(
        store.get(&run).await,
        Err(PortError::Refused {
            code: "state-tampered",
            ..
        })
    ));
    store.close().await;
    fx.cleanup(&[]).await;
}

#[tokio::test]
async fn earlier_layouts_unknown_layouts_and_another_database_id_are_refused() {
    let Some(urls) = urls("layouts") else { return };
    let mut fx = Fx::new(urls);
    fx.apply(&[]).await.expect("apply");
    let mut admin = fx.admin().await;
    admin
        .execute(format!("UPDATE {}.deployment SET schema_version = 3", fx.ns).as_str())
        .await
        .expect("downgrade");
    assert_eq!(code(fx.plan(&[]).await), "deployment.schema-version");
    assert_eq!(code(fx.apply(&[]).await), "deployment.schema-version");
    assert_eq!(code(fx.status().await), "deployment.schema-version");
    admin
        .execute(format!("UPDATE {}.deployment SET schema_version = 4", fx.ns).as_str())
        .await
        .expect("restore");
    let original = fx.database_id.clone();
    fx.database_id = "another-deployment".into();
    assert_eq!(code(fx.plan(&[]).await), "deployment.database-id");
    assert_eq!(code(fx.apply(&[]).await), "deployment.database-id");
    assert_eq!(code(fx.status().await), "deployment.database-id");
    fx.database_id = original;
    // A namespace laid out before `runs.trace_parent` existed: the service
    // refuses it until `apply` adds the column (runs and all).
    admin
        .execute(format!("ALTER TABLE {}.runs DROP COLUMN trace_parent", fx.ns).as_str())
        .await
        .expect("an earlier layout");
    assert_eq!(code(fx.store().await), "deployment.schema-version");
    fx.apply(&[]).await.expect("apply amends it");
    assert!(fx.store().await.is_ok());
    fx.cleanup(&[]).await;

    // A namespace holding something else.
    admin
        .execute(format!("CREATE SCHEMA {}", fx.ns).as_str())
        .await
        .expect("schema");
    admin
        .execute(format!("CREATE TABLE {}.runs (id int)", fx.ns).as_str())
        .await
        .expect("table");
    assert_eq!(code(fx.apply(&[]).await), "deployment.schema-version");
    fx.cleanup(&[]).await;
}

/// The stored bytes and key version of `revision`'s definition.
async fn stored_definition(
    admin: &mut PgConnection,
    ns: &str,
    revision: &str,
) -> (Vec<u8>, Option<i32>) {
    let row = sqlx::query(&format!(
        "SELECT definition, key_version FROM {ns}.definitions WHERE revision = $1"
    ))
    .bind(revision)
    .fetch_one(admin)
    .await
    .expect("row");
    (row.get(0), row.get(1))
}

/// A stored definition is sealed with the payload state key (no Program
/// text in the row, the key version recorded), opens only under its own
/// revision, and a namespace whose definitions an earlier build stored in
/// plaintext (no `key_version` column) is refused by the service until
/// `apply` seals them in place.
#[tokio::test]
async fn definitions_are_sealed_and_apply_seals_an_earlier_namespace() {
    let Some((fx, s, fixture)) = fresh("sealed_definitions").await else {
        return;
    };
    let plaintext = s
        .definition(&fixture.revision)
        .await
        .expect("read")
        .expect("recorded")
        .canonical_bytes();
    s.close().await;
    let mut admin = fx.admin().await;
    let (sealed, version) = stored_definition(&mut admin, &fx.ns, &fixture.revision).await;
    assert_eq!(version, Some(1));
    assert_ne!(sealed, plaintext);
    let workflow = fixture.workflow.as_bytes();
    assert!(!sealed.windows(workflow.len()).any(|w| w == workflow));

    // A flipped byte does not open.
    admin
        .execute(
            format!(
                "UPDATE {}.definitions SET definition = overlay(definition placing '\\x00'::bytea from 40 for 1)",
                fx.ns
            )
            .as_str(),
        )
        .await
        .expect("tamper");
    let s = fx.store().await.expect("store");
    let tampered = s.definition(&fixture.revision).await.expect_err("tampered");
    assert_eq!(tampered.code, "state-tampered", "{tampered:?}");
    s.close().await;

    // As an earlier build left it: plaintext, no key_version column.
    admin
        .execute(format!("ALTER TABLE {}.definitions DROP COLUMN key_version", fx.ns).as_str())
        .await
        .expect("an earlier layout");
    sqlx::query(&format!("UPDATE {}.definitions SET definition = $1", fx.ns))
        .bind(&plaintext)
        .execute(&mut admin)
        .await
        .expect("plaintext");
    assert_eq!(code(fx.store().await), "deployment.schema-version");
    fx.apply(&[]).await.expect("apply seals it");
    let (sealed, version) = stored_definition(&mut admin, &fx.ns, &fixture.revision).await;
    assert_eq!(version, Some(1));
    assert_ne!(sealed, plaintext);
    let s = fx.store().await.expect("store");
    let read = s
        .definition(&fixture.revision)
        .await
        .expect("read")
        .expect("recorded");
    assert_eq!(read.canonical_bytes(), plaintext);
    s.close().await;
    fx.cleanup(&[]).await;
}

/// One `#[tokio::test]` per flow-control conformance check, each on a
/// fresh namespace.
macro_rules! flow_conformance_tests {
    ($($test:ident => $label:literal, $check:ident;)+) => {$(
        #[tokio::test]
        async fn $test() {
            let Some((fx, s, _)) = fresh($label).await else {
                return;
            };
            conformance::$check(&s).await;
            s.close().await;
            fx.cleanup(&[]).await;
        }
    )+};
}

flow_conformance_tests! {
    flow_in_flight_slots => "flow_in_flight", in_flight_slots_are_held_until_given_back_or_their_lease_ends;
    flow_rate => "flow_rate", the_rate_lets_a_burst_go_then_one_call_per_token;
    flow_all_or_nothing => "flow_all_or_nothing", a_call_held_back_by_its_rate_takes_no_slot;
    flow_retry_after => "flow_retry_after", retry_after_holds_every_call_back_and_a_later_hold_wins;
}

#[tokio::test]
async fn run_store_counts_follow_every_change() {
    let Some((fx, s, fixture)) = fresh("run_store_counts").await else {
        return;
    };
    conformance::counts_follow_every_change(&s, &s, &s, &fixture).await;
    s.close().await;
    fx.cleanup(&[]).await;
}

/// A fresh namespace where the example's workflow has two revisions: the
/// active one (the fixture's) and an earlier one it replaced (kept, as
/// every revision ever applied), which is returned too.
async fn fresh_with_an_earlier_revision(test: &str) -> Option<(Fx, Store, Fixture, String)> {
    let mut fx = Fx::new(urls(test)?);
    let first = fx.packages[0].clone();
    let earlier = fx.other_package();
    fx.packages = vec![earlier.clone()];
    fx.apply(&[]).await.expect("apply the earlier revision");
    fx.packages = vec![first];
    fx.apply(&[]).await.expect("apply the active revision");
    let store = fx.store().await.expect("store");
    let active = store.active_workflows().await.expect("active");
    let first = active.first().expect("one workflow");
    let fixture = Fixture {
        workflow: first.workflow.clone(),
        revision: first.revision.clone(),
    };
    let earlier = coordinator_runtime::package::load_package(Path::new(&earlier.0), None)
        .expect("load")
        .definition
        .revision;
    assert_ne!(earlier, fixture.revision);
    Some((fx, store, fixture, earlier))
}

#[tokio::test]
async fn run_store_live_runs_by_revision_follow_admissions_ends_and_moves() {
    let Some((fx, s, fixture, earlier)) =
        fresh_with_an_earlier_revision("run_store_live_revisions").await
    else {
        return;
    };
    conformance::live_runs_by_revision_follow_admissions_ends_and_moves(
        &s, &s, &s, &s, &fixture, &earlier,
    )
    .await;
    s.close().await;
    fx.cleanup(&[]).await;
}

/// Lays `fx`'s namespace out as a build without `revision_counts` did:
/// the table dropped and each count trigger's function without the
/// statement that keeps it (as the functions read before it).
async fn lay_out_without_revision_counts(fx: &Fx) {
    let mut admin = fx.admin().await;
    let ns = &fx.ns;
    for event in ["insert", "update", "delete"] {
        let definition: String = sqlx::query_scalar(&format!(
            "SELECT pg_get_functiondef('{ns}.count_runs_{event}'::regproc)"
        ))
        .fetch_one(&mut admin)
        .await
        .expect("the count function");
        let start = definition
            .find(&format!("INSERT INTO {ns}.revision_counts"))
            .expect("the revision counts statement");
        let end = start + definition[start..].find("RETURN NULL").expect("its end");
        let earlier = format!("{}{}", &definition[..start], &definition[end..]);
        admin
            .execute(earlier.as_str())
            .await
            .expect("the earlier function");
    }
    admin
        .execute(format!("DROP TABLE {ns}.revision_counts").as_str())
        .await
        .expect("an earlier layout");
}

/// A namespace laid out before `revision_counts` existed, with live and
/// ended runs: the service refuses it until `apply` amends it; `apply`
/// counts the live runs as they are, and from then on the triggers keep
/// the counts (an admission, a move).
#[tokio::test]
async fn apply_carries_a_namespace_without_revision_counts_through() {
    let Some((fx, s, fixture, earlier)) =
        fresh_with_an_earlier_revision("revision_counts_amended").await
    else {
        return;
    };
    lay_out_without_revision_counts(&fx).await;
    let mut ids = Vec::new();
    for marker in ["old-a", "old-b", "old-c"] {
        let mut run = conformance::new_run(&fixture, marker, "alice", &format!("id-{marker}"), "d");
        // No binding recorded: `apply` below compares none with its file.
        run.bindings.clear();
        match s.admit(run).await.expect("admit on the earlier layout") {
            Admitted::Created(r) => ids.push(r.id),
            other => panic!("not created: {other:?}"),
        }
    }
    let mut done = conformance::state(&ids[2]);
    done.status = RunStatus::Finished;
    done.output = Some(json!({}));
    done.ended_at = Some(unix(100));
    s.commit(Commit {
        review: None,
        run_id: ids[2].clone(),
        expected_version: 1,
        at: unix(100),
        state: done,
        ledger: Default::default(),
        complete: None,
        jobs: vec![],
    })
    .await
    .expect("end one run");
    s.close().await;
    assert_eq!(code(fx.store().await), "deployment.schema-version");

    fx.apply(&[]).await.expect("apply amends it");
    let s = fx.store().await.expect("store");
    let live = |revision: &str, live: u64| coordinator_ports::RevisionLiveRuns {
        workflow: fixture.workflow.clone(),
        revision: revision.to_owned(),
        live,
    };
    assert_eq!(
        s.live_runs_by_revision().await.expect("counts"),
        vec![live(&fixture.revision, 2)],
        "the live runs as they were"
    );
    s.admit(conformance::new_run(
        &fixture, "new-d", "alice", "id-new-d", "d",
    ))
    .await
    .expect("admit");
    s.commit_move(&coordinator_ports::RunMove {
        run_id: ids[0].clone(),
        at: unix(30),
        expected_version: 1,
        from_revision: fixture.revision.clone(),
        to_revision: earlier.clone(),
        from_step: "due".into(),
        to_step: "due".into(),
        state: conformance::state(&ids[0]),
        ledger: Default::default(),
        bindings: Default::default(),
    })
    .await
    .expect("move");
    let mut expected = vec![live(&fixture.revision, 2), live(&earlier, 1)];
    expected.sort();
    assert_eq!(s.live_runs_by_revision().await.expect("counts"), expected);
    s.close().await;
    fx.cleanup(&[]).await;
}

#[tokio::test]
async fn run_store_holds_are_persisted_for_every_process() {
    let Some((fx, a, fixture)) = fresh("run_store_holds_persisted").await else {
        return;
    };
    conformance::holds_are_swapped_only_from_what_was_read(&a).await;
    // Another process on the same database (its own pool) reads the holds
    // the first one placed, and obeys them: no lease, no admission.
    let b = fx.store().await.expect("second store");
    let held = HoldsAndReviews::holds(&b).await.expect("holds");
    assert!(held.restore && held.admission && held.execution_recovery_completed);
    let now = OffsetDateTime::now_utc();
    let t = now.unix_timestamp();
    assert_eq!(
        b.lease(&LeaseRequest {
            owner: "w-b",
            now: unix(t + 600),
            lease_until: unix(t + 660),
            limit: 100,
            epoch: Some(1),
            run_id: None,
            receipt_lookups_only: false,
        })
        .await,
        Ok(vec![])
    );
    assert_eq!(
        admit(&b, &fx, &fixture.revision, "dave", "k-held", json!({}), now).await,
        Admitted::AdmissionHeld
    );
    // Released by the second process: the first sees it, and admits again.
    assert_eq!(b.swap_holds(&held, &Holds::default()).await, Ok(true));
    assert_eq!(HoldsAndReviews::holds(&a).await, Ok(Holds::default()));
    created(admit(&a, &fx, &fixture.revision, "dave", "k-free", json!({}), now).await);
    a.close().await;
    b.close().await;
    fx.cleanup(&[]).await;
}

const NOTICES_URL: &str = "baseUrl: https://messaging.example.org\n";

/// seed 000 "Apply and start": a runtime file that changes a live run's
/// connection binding is refused by plan, apply and deployment-status
/// (`coordinator.command.live-binding-conflict`), and apply changes
/// nothing; a timeout is no binding; once the run ended the change is
/// accepted.
#[tokio::test]
async fn a_changed_binding_is_refused_while_a_run_is_live() {
    let Some((mut fx, store, fixture)) = fresh("live_binding_conflict").await else {
        return;
    };
    let now = OffsetDateTime::now_utc();
    let run = created(
        admit(
            &store,
            &fx,
            &fixture.revision,
            "alice",
            "k-1",
            json!({}),
            now,
        )
        .await,
    );
    assert!(run.bindings.contains_key("notices"), "{:?}", run.bindings);
    assert!(
        run.bindings.contains_key("applications"),
        "{:?}",
        run.bindings
    );
    let original = fx.packages.clone();

    // Another endpoint for `notices`, together with a new package: refused,
    // and nothing of it is applied.
    fx.edits = vec![(
        NOTICES_URL.into(),
        "baseUrl: https://messaging-2.example.org\n".into(),
    )];
    fx.packages = vec![fx.other_package()];
    let err = fx.apply(&[]).await.expect_err("apply refused");
    assert_eq!(err.code, "live-binding-conflict");
    assert_eq!(err.cli_code(), "coordinator.command.live-binding-conflict");
    assert_eq!(err.kind, store::ErrorKind::Refused);
    assert!(
        err.message.contains("`notices` (1 run)") && !err.message.contains("applications"),
        "{}",
        err.message
    );
    assert!(!err.message.contains("messaging-2"), "{}", err.message);
    let plan = fx.plan(&[]).await.expect("plan");
    assert_eq!(
        plan.refusal.map(|r| r.code),
        Some("live-binding-conflict"),
        "plan says apply would refuse"
    );
    fx.packages = original.clone();
    assert_eq!(code(fx.status().await), "live-binding-conflict");
    fx.edits.clear();
    fx.status()
        .await
        .expect("the refused apply activated nothing: the original file still checks");

    // Another identity or more scopes: refused too.
    for (from, to) in [
        (
            "clientId: coordinator-notices",
            "clientId: coordinator-other",
        ),
        (
            "      - messaging:messages:submit\n",
            "      - messaging:messages:submit\n      - messaging:messages:read\n",
        ),
    ] {
        fx.edits = vec![(from.into(), to.into())];
        assert_eq!(code(fx.apply(&[]).await), "live-binding-conflict", "{to}");
    }

    // Only a timeout changed: no binding change, accepted.
    fx.edits = vec![(
        NOTICES_URL.into(),
        format!("{NOTICES_URL}    requestTimeoutMilliseconds: 5000\n"),
    )];
    fx.apply(&[])
        .await
        .expect("a timeout is not part of the binding");
    fx.status().await.expect("status with the new timeout");

    // The run ends: the endpoint may change.
    store
        .commit(Commit {
            review: None,
            run_id: run.id.clone(),
            expected_version: run.version,
            at: unix(now.unix_timestamp()),
            state: {
                let mut s = state(json!({}), now, RunStatus::Cancelled);
                s.ended_at = Some(s.now);
                s
            },
            ledger: Default::default(),
            complete: None,
            jobs: vec![],
        })
        .await
        .expect("end the run");
    fx.edits = vec![(
        NOTICES_URL.into(),
        "baseUrl: https://messaging-2.example.org\n".into(),
    )];
    assert_eq!(RunReads::live_bindings(&store).await, Ok(vec![]));
    fx.status().await.expect("no live run: status accepts");
    fx.apply(&[]).await.expect("no live run: apply accepts");
    store.close().await;
    fx.cleanup(&[]).await;
}

#[tokio::test]
async fn the_database_clock_is_sampled_with_round_trips_and_stands_near_this_host() {
    use coordinator_ports::store::Maintenance;
    use coordinator_runtime::clock::{ClockOffset, SystemClock};
    let Some(urls) = urls("database_clock") else {
        return;
    };
    let fx = Fx::new(urls);
    fx.apply(&[]).await.expect("apply");
    let store = fx.store().await.expect("store");
    let samples = store
        .sample_database_clock(&SystemClock, 3)
        .await
        .expect("samples");
    assert_eq!(samples.len(), 3);
    // PostgreSQL runs on this host: one clock, so the measured offset is
    // within a second (it is the round trip's half at most, plus the
    // microseconds PostgreSQL rounds to).
    let offset = ClockOffset::best_of(&samples).expect("an offset");
    assert!(
        offset.within(std::time::Duration::from_secs(1)),
        "{offset:?}"
    );
    assert!(samples.iter().all(|s| s.round_trip >= offset.round_trip));
}
