//! `coordinatorctl plan`, `apply` and `deployment-status` as an operator runs
//! them (seed 000 "Apply and start"), against a real PostgreSQL 17 from
//! `scripts/postgres.sh`. Prints a notice and passes when
//! `COORDINATOR_TEST_MIGRATION_URL` / `COORDINATOR_TEST_RUNTIME_URL` are unset.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use coordinator_ir::Definition;
use coordinator_runtime::package::write_package;

struct Fx {
    dir: tempfile::TempDir,
    ns: String,
    digest: String,
    root: String,
}

fn secret(dir: &Path, name: &str, body: &[u8], mode: u32) {
    let p = dir.join(name);
    std::fs::write(&p, body).expect("write");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn fixture() -> Option<Fx> {
    let coordinator_testkit::postgres::Urls {
        migration, runtime, ..
    } = coordinator_testkit::postgres::urls("coordinatorctl deployment tests")?;
    let dir = tempfile::tempdir().expect("tempdir");
    let secrets = dir.path().join("secrets");
    std::fs::create_dir(&secrets).expect("dir");
    secret(&secrets, "runtime-database-url", runtime.as_bytes(), 0o600);
    secret(
        &secrets,
        "migration-database-url",
        migration.as_bytes(),
        0o600,
    );
    secret(&secrets, "state-key-1", &[1; 32], 0o600);
    secret(&secrets, "admission-key", &[2; 32], 0o600);
    secret(&secrets, "audit-key", &[3; 32], 0o600);
    let project = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/delayed-follow-up");
    let compiled = coordinator_compiler::compile_project(&project, "delayed-follow-up");
    let root = dir.path().join("follow-up");
    let digest =
        write_package(&root, &Definition::new(compiled.program.expect("program"))).expect("pkg");
    let ns = format!("coordinator_cli_{}_{:x}", std::process::id(), rand_suffix());
    Some(Fx {
        root: root.display().to_string(),
        dir,
        ns,
        digest,
    })
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

impl Fx {
    fn write(&self, packages: bool) -> PathBuf {
        let template = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../examples/delayed-follow-up/runtime.yaml"),
        )
        .expect("template")
        .replace(
            "namespace: coordinator_follow_up",
            &format!("namespace: {}", self.ns),
        )
        .replace(
            "root: /run/registry-coordinator/secrets",
            &format!("root: {}", self.dir.path().join("secrets").display()),
        );
        let packages = if packages {
            format!(
                "\n  - root: {}\n    expectedDigest: \"{}\"",
                self.root, self.digest
            )
        } else {
            " []".into()
        };
        let text = format!(
            "{template}deployment:\n  databaseId: cli-test\n  runtimeRole: coordinator_runtime\n  packages:{packages}\n  listener:\n    bind: 127.0.0.1:8108\n    tlsTermination: operator-controlled-upstream\n  authentication:\n    issuer: https://login.example.org\n    audience: registry-coordinator\n  auditFile: {}\n  auditKeyRef: secret:file/audit-key\n  stateKeys:\n    \"1\":\n      keyRef: secret:file/state-key-1\n  activeStateKey: 1\n  admissionKeyRef: secret:file/admission-key\n",
            self.dir.path().join("audit.jsonl").display()
        );
        let path = self.dir.path().join("runtime.yaml");
        std::fs::write(&path, text).expect("write runtime.yaml");
        path
    }

    fn ctl(&self, args: &[&str], packages: bool) -> (i32, String, String) {
        let path = self.write(packages);
        self.ctl_on(&path, args)
    }

    /// `coordinatorctl` on the runtime file with `from` replaced by `to`.
    fn ctl_edited(&self, args: &[&str], from: &str, to: &str) -> (i32, String, String) {
        let path = self.write(true);
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(text.contains(from), "no `{from}` in the runtime file");
        std::fs::write(&path, text.replace(from, to)).expect("write");
        self.ctl_on(&path, args)
    }

    fn ctl_on(&self, path: &Path, args: &[&str]) -> (i32, String, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_coordinatorctl"))
            .arg("--runtime-config")
            .arg(path)
            .args(args)
            .output()
            .expect("run coordinatorctl");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

#[test]
fn plan_apply_status_unchanged_and_unlisted_through_the_cli() {
    let Some(fx) = fixture() else { return };
    // Only apply reads the migration URL: without its secret, plan plans
    // and apply says what is missing.
    let migration = fx.dir.path().join("secrets/migration-database-url");
    let kept = std::fs::read(&migration).expect("read");
    std::fs::remove_file(&migration).expect("rm");
    let (code, out, err) = fx.ctl(&["plan"], true);
    assert_eq!((code, out.as_str()), (0, "follow-up: install\n"), "{err}");
    let (code, _, err) = fx.ctl(&["apply"], true);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("error[coordinator.secret.unavailable]") && err.contains("migration"),
        "{err}"
    );
    secret(
        &fx.dir.path().join("secrets"),
        "migration-database-url",
        &kept,
        0o600,
    );

    let (code, out, err) = fx.ctl(&["plan"], true);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out, "follow-up: install\n");
    // The runtime file may also follow the subcommand.
    let path = fx.write(true);
    let after = Command::new(env!("CARGO_BIN_EXE_coordinatorctl"))
        .arg("plan")
        .arg("--runtime-config")
        .arg(&path)
        .output()
        .expect("run coordinatorctl");
    assert_eq!(after.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&after.stdout),
        "follow-up: install\n"
    );

    let (code, out, err) = fx.ctl(&["apply"], true);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("follow-up: install\nstatus: applied\nschemaVersion: 4\n"),
        "{out}"
    );

    let (code, out, err) = fx.ctl(&["deployment-status"], true);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.starts_with("status: checked\nschemaVersion: 4\n"),
        "{out}"
    );
    assert!(
        out.contains(&format!("follow-up: {}\n", fx.digest)),
        "{out}"
    );

    let (code, out, _) = fx.ctl(&["deployment-status", "--format", "json"], true);
    assert_eq!(code, 0);
    let report: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(report["ok"], true);
    assert_eq!(report["status"], "checked");
    assert_eq!(report["schemaVersion"], 4);
    assert_eq!(report["workflows"][0]["packageDigest"], fx.digest.as_str());

    let (code, out, _) = fx.ctl(&["plan"], true);
    assert_eq!((code, out.as_str()), (0, "follow-up: unchanged\n"));

    let (code, _, err) = fx.ctl(&["plan"], false);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("error[coordinator.deployment.workflow-unlisted]"),
        "{err}"
    );
    let (code, _, err) = fx.ctl(&["apply"], false);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("error[coordinator.deployment.workflow-unlisted]"),
        "{err}"
    );
    let (code, out, _) = fx.ctl(&["plan", "--format", "json"], false);
    assert_eq!(code, 1);
    let report: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        report["error"]["code"],
        "coordinator.deployment.workflow-unlisted"
    );

    // Removing it (no runs) is allowed.
    let (code, out, err) = fx.ctl(&["apply", "--remove-workflow", "follow-up"], false);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("follow-up: remove\n"), "{out}");
}

/// Admits one run (as the engine would, with the binding digests of the
/// runtime file at `path`) through the library store.
fn admit_live_run(path: &Path) {
    use coordinator_ports::{Admitted, RunAdmission};
    use coordinator_runtime::binding::binding_digests;
    use coordinator_runtime::secrets::{load_keys, SecretResolver};
    use coordinator_runtime::{check_runtime_file, Mode};
    use coordinator_store::{deploy::load_pinned_packages, Store};
    use coordinator_testkit::conformance::{new_run, Fixture};

    let checked = check_runtime_file(path, "runtime.yaml", None, Mode::Deployment);
    let config = checked.config.expect("config");
    let deployment = config.deployment.as_ref().expect("deployment");
    let resolver = SecretResolver::new(&config.secret_providers);
    let keys = load_keys(&resolver, deployment).expect("keys");
    let packages = load_pinned_packages(deployment).expect("packages");
    let program = &packages.first().expect("one package").definition.program;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let store = Store::open(&config, &resolver, &keys, &packages, 1)
            .await
            .expect("store");
        let active = store.active_workflows().await.expect("active");
        let w = active.first().expect("one workflow");
        let fixture = Fixture {
            workflow: w.workflow.clone(),
            revision: w.revision.clone(),
        };
        let mut run = new_run(&fixture, "run-live", "alice", "identity-1", "d");
        run.bindings = binding_digests(&config.connections, &program.connections);
        assert!(matches!(
            store.admit(run).await.expect("admit"),
            Admitted::Created(_)
        ));
        store.close().await;
    });
}

#[test]
fn a_changed_binding_under_a_live_run_is_refused_through_the_cli() {
    let Some(fx) = fixture() else { return };
    let (code, out, err) = fx.ctl(&["apply"], true);
    assert_eq!(code, 0, "{out}{err}");
    admit_live_run(&fx.write(true));

    let moved = (
        "baseUrl: https://messaging.example.org",
        "baseUrl: https://messaging-2.example.org",
    );
    for command in ["plan", "apply", "deployment-status"] {
        let (code, out, err) = fx.ctl_edited(&[command], moved.0, moved.1);
        assert_eq!(code, 1, "{command}: {out}{err}");
        assert!(
            err.contains("error[coordinator.command.live-binding-conflict]")
                && err.contains("`notices` (1 run)"),
            "{command}: {err}"
        );
    }
    let (code, out, _) = fx.ctl_edited(&["apply", "--format", "json"], moved.0, moved.1);
    assert_eq!(code, 1);
    let report: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        report["error"]["code"],
        "coordinator.command.live-binding-conflict"
    );
    // The original file still checks; a timeout alone is no binding change.
    let (code, out, err) = fx.ctl(&["deployment-status"], true);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = fx.ctl_edited(
        &["apply"],
        moved.0,
        &format!("{}\n    requestTimeoutMilliseconds: 5000", moved.0),
    );
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn usage_secrets_and_an_unreachable_database_have_their_exit_codes() {
    let Some(fx) = fixture() else { return };
    let out = Command::new(env!("CARGO_BIN_EXE_coordinatorctl"))
        .arg("plan")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));

    let secrets = fx.dir.path().join("secrets");
    let url = std::fs::read(secrets.join("runtime-database-url")).expect("read");
    secret(&secrets, "runtime-database-url", &url, 0o644);
    let (code, _, err) = fx.ctl(&["plan"], true);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("error[coordinator.deployment.refused]")
            && err.contains("reason: coordinator.secret.permissions"),
        "{err}"
    );
    assert!(
        !err.contains("postgres://"),
        "a secret value was printed: {err}"
    );

    secret(
        &secrets,
        "runtime-database-url",
        b"postgres://nobody:secret-pw@127.0.0.1:1/coordinator",
        0o600,
    );
    let (code, _, err) = fx.ctl(&["deployment-status"], true);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("error[coordinator.command.store-unavailable]"),
        "{err}"
    );
    assert!(!err.contains("secret-pw"), "{err}");
    assert!(err.contains("127.0.0.1:1"), "names the address: {err}");

    // A wrong password is a configuration fault (exit 1), named as a login
    // refusal; the password is never echoed.
    let good = String::from_utf8(url.clone()).expect("utf-8 url");
    let (scheme, rest) = good.split_once("://").expect("url scheme");
    let (userinfo, host_and_db) = rest.split_once('@').expect("url userinfo");
    let user = userinfo.split(':').next().expect("user");
    let wrong = format!("{scheme}://{user}:wrong-pw-123@{host_and_db}");
    secret(&secrets, "runtime-database-url", wrong.as_bytes(), 0o600);
    let (code, _, err) = fx.ctl(&["deployment-status"], true);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("error[coordinator.deployment.refused]"),
        "{err}"
    );
    assert!(err.contains("reason: coordinator.database.login"), "{err}");
    assert!(err.contains(user), "names the role: {err}");
    assert!(!err.contains("wrong-pw-123"), "{err}");

    let (before_db, _) = host_and_db.rsplit_once('/').expect("url database");
    let missing = format!("{scheme}://{userinfo}@{before_db}/no_such_database_here");
    secret(&secrets, "runtime-database-url", missing.as_bytes(), 0o600);
    let (code, _, err) = fx.ctl(&["deployment-status"], true);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("error[coordinator.deployment.refused]"),
        "{err}"
    );
    assert!(
        err.contains("reason: coordinator.database.missing"),
        "{err}"
    );
    assert!(err.contains("no_such_database_here"), "{err}");

    // A refused apply leaves no (empty) audit journal file behind.
    let migration = std::fs::read(secrets.join("migration-database-url")).expect("read");
    let migration = String::from_utf8(migration).expect("utf-8 url");
    let (m_scheme, m_rest) = migration.split_once("://").expect("url scheme");
    let (m_user, m_host) = m_rest.split_once('@').expect("url userinfo");
    let m_user = m_user.split(':').next().expect("user");
    let wrong = format!("{m_scheme}://{m_user}:wrong-pw-456@{m_host}");
    secret(&secrets, "migration-database-url", wrong.as_bytes(), 0o600);
    let (code, _, err) = fx.ctl(&["apply"], true);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("error[coordinator.deployment.refused]"),
        "{err}"
    );
    assert!(err.contains("reason: coordinator.database.login"), "{err}");
    let journals: Vec<_> = std::fs::read_dir(fx.dir.path())
        .expect("list")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("audit.jsonl."))
        .collect();
    assert!(journals.is_empty(), "left {journals:?}");

    std::fs::remove_file(secrets.join("runtime-database-url")).expect("rm");
    let (code, _, err) = fx.ctl(&["plan"], true);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("coordinator.secret.unavailable"), "{err}");
}
