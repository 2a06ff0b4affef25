//! The offline runtime check: every refusal on a file with that one fault,
//! the starter template, a full deployment with a real package, tampering.

use coordinator_testkit as common;

use std::path::Path;

use coordinator_ir::Definition;
use coordinator_runtime::package::{load_package, write_package, PackageError};
use coordinator_runtime::{check_runtime, check_runtime_file, codes, Mode, RuntimeCheck};

const FILE: &str = "runtime.yaml";

struct Fixture {
    _dir: tempfile::TempDir,
    text: String,
    root: String,
}

/// A full deployment file pinning a freshly written package.
fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("follow-up-package");
    let digest = write_package(&root, &Definition::new(common::program())).expect("write");
    let root = root.display().to_string();
    let text = common::DEPLOYMENT
        .replace("@ROOT@", &root)
        .replace("@DIGEST@", &digest);
    Fixture {
        _dir: dir,
        text,
        root,
    }
}

fn check(text: &str, mode: Mode, with_workflow: bool) -> RuntimeCheck {
    let doc = coordinator_source::parse(FILE, text).expect("YAML parses");
    let program = common::program();
    check_runtime(&doc, with_workflow.then_some(&program), mode)
}

/// Line and column (1-based, in characters) of the `|` marker in `needle`,
/// found in `text` with the marker removed.
fn position(text: &str, needle: &str) -> (u32, u32) {
    let (before, _) = needle.split_once('|').expect("needle has a | marker");
    let plain = needle.replace('|', "");
    let at = text
        .find(&plain)
        .unwrap_or_else(|| panic!("needle {plain:?} not in file"))
        + before.len();
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line = text[..at].matches('\n').count() as u32 + 1;
    let column = text[line_start..at].chars().count() as u32 + 1;
    (line, column)
}

/// Applies `from -> to` once, checks, and asserts exactly one error with
/// `code` at the marker of `needle`.
fn refuses(
    base: &str,
    from: &str,
    to: &str,
    mode: Mode,
    with_workflow: bool,
    code: &str,
    needle: &str,
) -> RuntimeCheck {
    assert!(base.contains(from), "fixture lacks {from:?}");
    let text = base.replacen(from, to, 1);
    let result = check(&text, mode, with_workflow);
    let errors: Vec<_> = result.diagnostics.iter().filter(|d| d.is_error()).collect();
    assert_eq!(
        errors.len(),
        1,
        "{code}: expected one error, got {errors:#?}"
    );
    let d = errors[0];
    assert_eq!(d.code, code, "{d:#?}");
    assert!(
        codes::ALL.iter().any(|c| c.code == code) || code.starts_with("coordinator.yaml."),
        "{code} not listed in coordinator_runtime::codes::ALL"
    );
    assert_eq!(d.file, FILE);
    let (line, column) = position(&text, needle);
    assert_eq!(
        (d.line, d.column),
        (line, column),
        "{code} located at {}:{} ({}), expected {line}:{column}",
        d.line,
        d.column,
        d.pointer
    );
    assert!(!result.is_valid());
    result
}

#[test]
fn starter_template_is_accepted_in_template_mode() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/delayed-follow-up/runtime.yaml");
    let mut program = common::program();
    program.triggers.clear();
    let result = check_runtime_file(
        &path,
        "follow-up/runtime.yaml",
        Some(&program),
        Mode::Template,
    );
    assert!(result.is_valid(), "{:#?}", result.diagnostics);
    assert!(result.diagnostics.is_empty());
    let cfg = result.config.expect("config");
    assert_eq!(cfg.namespace, "coordinator_follow_up");
    assert_eq!(cfg.observation.minimum_interval_seconds, 30);
    assert!(cfg.deployment.is_none());
}

#[test]
fn starter_template_without_deployment_is_refused_in_deployment_mode() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/delayed-follow-up/runtime.yaml");
    let text = std::fs::read_to_string(&path).expect("read");
    let result = check(&text, Mode::Deployment, false);
    let codes: Vec<_> = result.diagnostics.iter().map(|d| d.code.as_str()).collect();
    assert_eq!(codes, ["coordinator.runtime.deployment-missing"]);
    let (line, column) = position(&text, "|apiVersion:");
    assert_eq!(
        (result.diagnostics[0].line, result.diagnostics[0].column),
        (line, column)
    );
}

#[test]
fn full_deployment_with_a_real_package_is_accepted() {
    let f = fixture();
    let result = check(&f.text, Mode::Deployment, false);
    assert!(result.is_valid(), "{:#?}", result.diagnostics);
    assert_eq!(result.packages.len(), 1);
    assert_eq!(result.packages[0].definition.program.workflow, "follow-up");
    let cfg = result.config.expect("config");
    let d = cfg.deployment.expect("deployment");
    assert_eq!(result.packages[0].digest, d.packages[0].expected_digest);
    // The same file is also a valid template, with the workflow.
    assert!(check(&f.text, Mode::Template, true).is_valid());
}

#[test]
fn casework_defaults() {
    let f = fixture();
    let cfg = check(&f.text, Mode::Template, false)
        .config
        .expect("config");
    match &cfg.connections["review-two"] {
        coordinator_runtime::config::Connection::CaseworkReviewProducer(c) => {
            assert_eq!(c.result_check_seconds, 900)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn header_refusals_name_the_supported_version() {
    let f = fixture();
    let r = refuses(
        &f.text,
        "runtime/v1beta1",
        "runtime/v1alpha1",
        Mode::Template,
        false,
        "coordinator.runtime.api-version",
        "apiVersion: |id.registrystack",
    );
    assert!(r.diagnostics[0]
        .next
        .contains("id.registrystack.org/formats/coordinator/runtime/v1beta1"));
    refuses(
        &f.text,
        "kind: CoordinatorRuntimeConfig",
        "kind: CoordinatorProject",
        Mode::Template,
        false,
        "coordinator.runtime.kind",
        "kind: |CoordinatorProject",
    );
}

#[test]
fn the_pooling_mode_is_session_or_transaction() {
    let f = fixture();
    let from = "  migrationUrlRef: secret:file/migration-database-url\n";
    for mode in ["session", "transaction"] {
        let text = f
            .text
            .replacen(from, &format!("{from}  poolingMode: {mode}\n"), 1);
        let result = check(&text, Mode::Deployment, false);
        assert!(result.is_valid(), "{mode}: {:#?}", result.diagnostics);
        let config = result.config.expect("config");
        assert_eq!(
            config.database.pooling_mode == coordinator_runtime::config::PoolingMode::Transaction,
            mode == "transaction"
        );
    }
    refuses(
        &f.text,
        from,
        &format!("{from}  poolingMode: statement\n"),
        Mode::Deployment,
        false,
        "coordinator.yaml.unknown-value",
        "poolingMode: |statement",
    );
}

#[test]
fn refuses_a_bad_namespace() {
    let f = fixture();
    refuses(
        &f.text,
        "namespace: coordinator_follow_up",
        "namespace: coordinator-Follow",
        Mode::Deployment,
        false,
        "coordinator.runtime.namespace",
        "namespace: |coordinator-Follow",
    );
}

#[test]
fn refuses_a_reference_to_a_disabled_provider() {
    let f = fixture();
    refuses(
        &f.text,
        "runtimeUrlRef: secret:file/runtime-database-url",
        "runtimeUrlRef: secret:env/RUNTIME_DB",
        Mode::Deployment,
        false,
        "coordinator.runtime.secret-provider-disabled",
        "runtimeUrlRef: |secret:env/RUNTIME_DB",
    );
    // With `environment: {}` the same reference is accepted.
    let text = f
        .text
        .replace(
            "runtimeUrlRef: secret:file/runtime-database-url",
            "runtimeUrlRef: secret:env/RUNTIME_DB",
        )
        .replace(
            "secretProviders:\n",
            "secretProviders:\n  environment: {}\n",
        );
    assert!(check(&text, Mode::Deployment, false).is_valid());
}

#[test]
fn refuses_malformed_secret_references_without_echoing_them() {
    let f = fixture();
    refuses(
        &f.text,
        "signingKeyRef: secret:file/breg-events-key",
        "signingKeyRef: secret:file/../breg-events-key",
        Mode::Deployment,
        false,
        "coordinator.runtime.secret-reference",
        "signingKeyRef: |secret:file/../breg",
    );
    let r = refuses(
        &f.text,
        "auditKeyRef: secret:file/audit-key",
        "auditKeyRef: s3cr3t-value",
        Mode::Deployment,
        false,
        "coordinator.runtime.secret-reference",
        "auditKeyRef: |s3cr3t",
    );
    let d = &r.diagnostics[0];
    assert!(
        !d.message.contains("s3cr3t") && !d.next.contains("s3cr3t"),
        "{d:#?}"
    );
    refuses(
        &f.text,
        "keyRef: secret:file/state-key-1",
        "keyRef: secret:file/keys/state-key-1",
        Mode::Deployment,
        false,
        "coordinator.runtime.secret-reference",
        "keyRef: |secret:file/keys",
    );
}

#[test]
fn refuses_deployment_wide_actions_without_operator() {
    let f = fixture();
    refuses(
        &f.text,
        "actions: [start, status]",
        "actions: [start, status, doctor]",
        Mode::Deployment,
        false,
        "coordinator.runtime.policy-operator-required",
        "status, |doctor]",
    );
    // `move`, a run action, is an operator's too.
    refuses(
        &f.text,
        "actions: [start, status]",
        "actions: [start, status, move]",
        Mode::Deployment,
        false,
        "coordinator.runtime.policy-operator-required",
        "status, |move]",
    );
    // So is `export`, a run's payloads written as a scenario case.
    refuses(
        &f.text,
        "actions: [start, status]",
        "actions: [start, status, export]",
        Mode::Deployment,
        false,
        "coordinator.runtime.policy-operator-required",
        "status, |export]",
    );
    // Without `operator: true`, each deployment-wide action is refused.
    let text = f.text.replacen("        operator: true\n", "", 1);
    let r = check(&text, Mode::Deployment, false);
    assert_eq!(r.diagnostics.len(), 6, "{:#?}", r.diagnostics);
    assert!(r
        .diagnostics
        .iter()
        .all(|d| d.code == "coordinator.runtime.policy-operator-required"));
}

#[test]
fn refuses_workflows_on_a_deployment_wide_policy() {
    let f = fixture();
    refuses(
        &f.text,
        "      ops-console:\n",
        "      ops-console:\n        workflows: [follow-up]\n",
        Mode::Deployment,
        false,
        "coordinator.runtime.policy-workflows-scope",
        "ops-console:\n        |workflows",
    );
}

#[test]
fn refuses_unknown_actions_and_workflows() {
    let f = fixture();
    refuses(
        &f.text,
        "actions: [start, status]",
        "actions: [start, stats]",
        Mode::Deployment,
        false,
        "coordinator.runtime.policy-unknown-action",
        "start, |stats]",
    );
    refuses(
        &f.text,
        "workflows: [follow-up]",
        "workflows: [follow-down]",
        Mode::Deployment,
        false,
        "coordinator.runtime.policy-unknown-workflow",
        "workflows: [|follow-down]",
    );
    refuses(
        &f.text,
        "actions: [start, status]",
        "actions: []",
        Mode::Deployment,
        false,
        "coordinator.runtime.policy-empty",
        "actions: |[]",
    );
}

#[test]
fn refuses_recipient_binding_faults() {
    let f = fixture();
    refuses(
        &f.text,
        "recipientBinding: coordinator-v2",
        "recipientBinding: coordinator-v1",
        Mode::Deployment,
        false,
        "coordinator.runtime.recipient-binding-duplicate",
        "recipientBinding: |coordinator-v1\n      bearerTokenRef: secret:file/review-two-token",
    );
    refuses(
        &f.text,
        "recipientBinding: coordinator-v2",
        "recipientBinding: \"has space\"",
        Mode::Deployment,
        false,
        "coordinator.runtime.recipient-binding",
        "recipientBinding: |\"has space\"",
    );
    let long = "x".repeat(257);
    refuses(
        &f.text,
        "recipientBinding: coordinator-v2",
        &format!("recipientBinding: {long}"),
        Mode::Deployment,
        false,
        "coordinator.runtime.recipient-binding",
        &format!("recipientBinding: |{long}"),
    );
}

#[test]
fn refuses_result_check_seconds_out_of_range() {
    let f = fixture();
    refuses(
        &f.text,
        "resultCheckSeconds: 900",
        "resultCheckSeconds: 59",
        Mode::Deployment,
        false,
        "coordinator.runtime.result-check-seconds",
        "resultCheckSeconds: |59",
    );
    refuses(
        &f.text,
        "resultCheckSeconds: 900",
        "resultCheckSeconds: 86401",
        Mode::Deployment,
        false,
        "coordinator.runtime.result-check-seconds",
        "resultCheckSeconds: |86401",
    );
}

#[test]
fn refuses_more_than_sixteen_packages_and_none_in_deployment_mode() {
    let f = fixture();
    let mut extra = String::new();
    for i in 1..=16 {
        extra.push_str(&format!(
            "  - {{root: /srv/p/{i}, expectedDigest: \"sha256:{}\"}}\n",
            "0".repeat(64)
        ));
    }
    let from = "  listener:\n";
    refuses(
        &f.text,
        from,
        &format!("{extra}{from}"),
        Mode::Template,
        false,
        "coordinator.runtime.too-many-packages",
        "|{root: /srv/p/16,",
    );
    let pin = format!("\n  - root: {}\n    expectedDigest: ", f.root);
    let start = f.text.find(&pin).expect("pin");
    let end = start + f.text[start..].find("\n  listener:").expect("listener");
    let without = format!("{} []{}", &f.text[..start], &f.text[end..]);
    let r = refuses(
        &without,
        "x",
        "x",
        Mode::Deployment,
        false,
        "coordinator.runtime.no-packages",
        "packages: |[]",
    );
    assert!(r.packages.is_empty());
    // A template may pin nothing.
    assert!(check(&without, Mode::Template, false).is_valid());
}

#[test]
fn refuses_an_active_state_key_not_in_state_keys() {
    let f = fixture();
    refuses(
        &f.text,
        "activeStateKey: 1",
        "activeStateKey: 2",
        Mode::Deployment,
        false,
        "coordinator.runtime.active-state-key",
        "activeStateKey: |2",
    );
}

#[test]
fn refuses_missing_and_mistyped_connections_the_workflow_uses() {
    let f = fixture();
    refuses(
        &f.text,
        "  notices:\n",
        "  notices-old:\n",
        Mode::Template,
        true,
        "coordinator.runtime.connection-missing",
        "|connections:",
    );
    refuses(
        &f.text,
        "type: messaging",
        "type: scheduling",
        Mode::Template,
        true,
        "coordinator.runtime.connection-type",
        "type: |scheduling",
    );
    // In deployment mode, the pinned package's workflow is checked the same way.
    refuses(
        &f.text,
        "type: messaging",
        "type: scheduling",
        Mode::Deployment,
        false,
        "coordinator.runtime.connection-type",
        "type: |scheduling",
    );
    refuses(
        &f.text,
        "  breg-applications:\n",
        "  breg-apps:\n",
        Mode::Template,
        true,
        "coordinator.runtime.event-source-missing",
        "|eventSources:",
    );
}

#[test]
fn refuses_plaintext_http_to_a_non_loopback_host() {
    let f = fixture();
    refuses(
        &f.text,
        "baseUrl: https://messaging.example.org",
        "baseUrl: http://messaging.example.org",
        Mode::Deployment,
        false,
        "coordinator.runtime.insecure-url",
        "baseUrl: |http://messaging",
    );
    refuses(
        &f.text,
        "tokenEndpoint: https://login.example.org/decision-token",
        "tokenEndpoint: http://login.example.org/decision-token",
        Mode::Deployment,
        false,
        "coordinator.runtime.insecure-url",
        "tokenEndpoint: |http://login.example.org/decision-token",
    );
    refuses(
        &f.text,
        "baseUrl: https://messaging.example.org",
        "baseUrl: ftp://messaging.example.org",
        Mode::Deployment,
        false,
        "coordinator.runtime.url",
        "baseUrl: |ftp://",
    );
    // URLs are parsed by the `url` crate, as reqwest reads them: a port
    // out of range is refused here, not at the first dispatch.
    let r = refuses(
        &f.text,
        "baseUrl: https://messaging.example.org",
        "baseUrl: https://messaging.example.org:99999",
        Mode::Deployment,
        false,
        "coordinator.runtime.url",
        "baseUrl: |https://messaging.example.org:99999",
    );
    assert!(
        r.diagnostics[0].message.contains("port"),
        "{:?}",
        r.diagnostics[0]
    );
    // A loopback name before `@` is user information, not the host.
    refuses(
        &f.text,
        "baseUrl: https://messaging.example.org",
        "baseUrl: http://localhost@messaging.example.org",
        Mode::Deployment,
        false,
        "coordinator.runtime.url",
        "baseUrl: |http://localhost@",
    );
    // Loopback http is accepted (the fixture's directory connection uses
    // it), whatever the spelling of the loopback address.
    assert!(f.text.contains("http://127.0.0.1:9000"));
    for loopback in [
        "http://localhost:9000",
        "http://[::1]:9000",
        "http://[0:0:0:0:0:0:0:1]:9000",
    ] {
        let text = f.text.replace("http://127.0.0.1:9000", loopback);
        let result = check(&text, Mode::Deployment, false);
        assert!(result.is_valid(), "{loopback}: {:#?}", result.diagnostics);
    }
}

/// Seed 000: the service listener is bound to a private address. A
/// wildcard or public `bind` (API or metrics listener) is refused, located
/// at the value, unless `networkExposure: container-private` vouches for
/// the network; private addresses of every kind pass.
#[test]
fn a_listener_on_an_address_that_is_not_private_is_refused() {
    let f = fixture();
    for (from, exposed) in [
        ("bind: 127.0.0.1:8108", "0.0.0.0:8108"),
        ("bind: 127.0.0.1:8108", "[::]:8108"),
        ("bind: 127.0.0.1:8108", "203.0.113.7:8108"),
        ("bind: 127.0.0.1:9108", "0.0.0.0:9108"),
        ("bind: 127.0.0.1:9108", "[2001:db8::7]:9108"),
    ] {
        let r = refuses(
            &f.text,
            from,
            &format!("bind: \"{exposed}\""),
            Mode::Deployment,
            false,
            "coordinator.runtime.listener-not-private",
            &format!("bind: |\"{exposed}\""),
        );
        assert!(
            r.diagnostics[0]
                .next
                .contains("networkExposure: container-private"),
            "{:?}",
            r.diagnostics[0]
        );
        let vouched = f
            .text
            .replacen(from, &format!("bind: \"{exposed}\""), 1)
            .replace(
                "  listener:\n",
                "  networkExposure: container-private\n  listener:\n",
            );
        let result = check(&vouched, Mode::Deployment, false);
        assert!(result.is_valid(), "{exposed}: {:#?}", result.diagnostics);
    }
    for private in [
        "10.0.0.5:8108",
        "172.20.1.1:8108",
        "192.168.10.2:8108",
        "169.254.1.1:8108",
        "[::1]:8108",
        "[fd00::5]:8108",
        "[fe80::1]:8108",
    ] {
        let text = f
            .text
            .replacen("bind: 127.0.0.1:8108", &format!("bind: \"{private}\""), 1);
        let result = check(&text, Mode::Deployment, false);
        assert!(result.is_valid(), "{private}: {:#?}", result.diagnostics);
    }
    refuses(
        &f.text,
        "  listener:\n",
        "  networkExposure: public\n  listener:\n",
        Mode::Deployment,
        false,
        "coordinator.yaml.unknown-value",
        "networkExposure: |public",
    );
}

/// RFC 8707: a connection's `resource` is any absolute URI (the earlier
/// product's runtime files use `urn:` ones), never contacted, so plaintext
/// `http` to any host is no fault; a fragment or a relative reference is.
#[test]
fn a_resource_indicator_is_any_absolute_uri() {
    let f = fixture();
    let from = "resource: https://breg.example.org";
    assert!(f.text.contains(from));
    for resource in [
        "urn:example:applications",
        "http://breg.example.org",
        "https://breg.example.org/api?tenant=a",
        "tag:example.org,2026:applications",
    ] {
        let text = f.text.replace(from, &format!("resource: {resource}"));
        let result = check(&text, Mode::Deployment, false);
        assert!(result.is_valid(), "{resource}: {:#?}", result.diagnostics);
    }
    let r = refuses(
        &f.text,
        from,
        "resource: https://breg.example.org/#applications",
        Mode::Deployment,
        false,
        "coordinator.runtime.url",
        "resource: |https://breg.example.org/#applications",
    );
    assert!(
        r.diagnostics[0].message.contains("fragment"),
        "{:?}",
        r.diagnostics[0]
    );
    refuses(
        &f.text,
        from,
        "resource: applications",
        Mode::Deployment,
        false,
        "coordinator.runtime.url",
        "resource: |applications",
    );
}

#[test]
fn refuses_a_bad_listener_bind_and_digest_format() {
    let f = fixture();
    refuses(
        &f.text,
        "bind: 127.0.0.1:8108",
        "bind: localhost:8108",
        Mode::Deployment,
        false,
        "coordinator.runtime.listener-bind",
        "bind: |localhost:8108",
    );
    let r = refuses(
        &f.text,
        "expectedDigest: \"sha256:",
        "expectedDigest: \"sha256:Z",
        Mode::Deployment,
        false,
        "coordinator.runtime.digest-format",
        "expectedDigest: |\"sha256:Z",
    );
    assert!(r.packages.is_empty());
    // The metrics listener on the API listener's address (the wildcard,
    // accepted in a network private by construction).
    let container = f.text.replace(
        "  listener:\n",
        "  networkExposure: container-private\n  listener:\n",
    );
    refuses(
        &container,
        "bind: 127.0.0.1:9108",
        "bind: 0.0.0.0:8108",
        Mode::Deployment,
        false,
        "coordinator.runtime.listener-conflict",
        "bind: |0.0.0.0:8108",
    );
    // An event source named by the token issuer's URI.
    refuses(
        &f.text,
        "source: https://breg.example.org/applications",
        "source: https://login.example.org",
        Mode::Deployment,
        false,
        "coordinator.runtime.event-source-issuer",
        "source: |https://login.example.org",
    );
}

#[test]
fn refuses_other_faults_each_with_its_code() {
    let f = fixture();
    refuses(
        &f.text,
        "minimumIntervalSeconds: 30",
        "minimumIntervalSeconds: 10",
        Mode::Deployment,
        false,
        "coordinator.runtime.observation-floor",
        "minimumIntervalSeconds: |10",
    );
    // A clock skew bound below the measurement's own error.
    refuses(
        &f.text,
        "auditFile: /var/lib",
        "clockSkewBoundMilliseconds: 20\n  auditFile: /var/lib",
        Mode::Deployment,
        false,
        "coordinator.runtime.clock-skew-bound",
        "clockSkewBoundMilliseconds: |20",
    );
    refuses(
        &f.text,
        "auditFile: /var/lib",
        "auditFile: var/lib",
        Mode::Deployment,
        false,
        "coordinator.runtime.relative-path",
        "auditFile: |var/lib",
    );
    refuses(
        &f.text,
        "requestTimeoutMilliseconds: 2000",
        "requestTimeoutMilliseconds: 0",
        Mode::Deployment,
        false,
        "coordinator.runtime.request-timeout",
        "requestTimeoutMilliseconds: |0",
    );
    refuses(
        &f.text,
        "paths: [/offices]",
        "paths: [offices]",
        Mode::Deployment,
        false,
        "coordinator.runtime.external-path",
        "paths: [|offices]",
    );
    refuses(
        &f.text,
        "runtimeRole: coordinator_runtime",
        "runtimeRole: Coordinator",
        Mode::Deployment,
        false,
        "coordinator.runtime.runtime-role",
        "runtimeRole: |Coordinator",
    );
    refuses(
        &f.text,
        "  activeStateKey: 1",
        "    \"01\":\n      keyRef: secret:file/state-key-01\n  activeStateKey: 1",
        Mode::Template,
        false,
        "coordinator.runtime.state-key-version",
        "|\"01\":",
    );
}

#[test]
fn typed_reading_faults_are_located_inside_connections() {
    let f = fixture();
    refuses(
        &f.text,
        "      clientId: coordinator-notices\n",
        "      clientId: coordinator-notices\n      clientSecret: x\n",
        Mode::Template,
        false,
        "coordinator.yaml.unknown-key",
        "|clientSecret: x",
    );
    refuses(
        &f.text,
        "type: decision",
        "type: decider",
        Mode::Template,
        false,
        "coordinator.yaml.unknown-value",
        "type: |decider",
    );
    refuses(
        &f.text,
        "resultCheckSeconds: 900",
        "resultCheckSeconds: \"900\"",
        Mode::Template,
        false,
        "coordinator.yaml.wrong-type",
        "resultCheckSeconds: |\"900\"",
    );
}

#[test]
fn tampered_packages_are_refused() {
    let f = fixture();
    let root = Path::new(&f.root);
    // One changed byte in definition.json.
    let def = root.join("definition.json");
    let mut bytes = std::fs::read(&def).expect("read");
    let i = bytes.iter().position(|b| *b == b'f').expect("an f");
    bytes[i] = b'g';
    std::fs::write(&def, &bytes).expect("write");
    refuses(
        &f.text,
        "x",
        "x",
        Mode::Deployment,
        false,
        "coordinator.runtime.package-refused",
        "  - |root: /",
    );
    assert!(matches!(
        load_package(root, None),
        Err(PackageError::FileChanged { .. })
    ));

    // A changed SHA256SUMS moves the digest.
    let f = fixture();
    let root = Path::new(&f.root);
    let sums = root.join("SHA256SUMS");
    let text = std::fs::read_to_string(&sums).expect("read");
    let flipped = if text.starts_with('a') { "b" } else { "a" };
    std::fs::write(&sums, format!("{flipped}{}", &text[1..])).expect("write");
    let r = refuses(
        &f.text,
        "x",
        "x",
        Mode::Deployment,
        false,
        "coordinator.runtime.package-digest",
        "  - |root: /",
    );
    assert!(!r.resource_unavailable);

    // An unlisted file.
    let f = fixture();
    std::fs::write(Path::new(&f.root).join("extra.txt"), "x").expect("write");
    refuses(
        &f.text,
        "x",
        "x",
        Mode::Deployment,
        false,
        "coordinator.runtime.package-refused",
        "  - |root: /",
    );
}

#[test]
fn unreadable_inputs_are_resource_unavailable() {
    let f = fixture();
    std::fs::remove_dir_all(&f.root).expect("remove");
    let r = refuses(
        &f.text,
        "x",
        "x",
        Mode::Deployment,
        false,
        "coordinator.runtime.package-unreadable",
        "  - |root: /",
    );
    assert!(r.resource_unavailable);
    let r = check_runtime_file(
        Path::new("/nonexistent/runtime.yaml"),
        "missing.yaml",
        None,
        Mode::Template,
    );
    assert!(r.resource_unavailable && !r.is_valid());
    assert_eq!(r.diagnostics[0].code, "coordinator.file.unreadable");
}

#[test]
fn write_package_is_deterministic_and_refuses_an_existing_dir() {
    let dir = tempfile::tempdir().expect("tempdir");
    let def = Definition::new(common::program());
    let a = write_package(&dir.path().join("a"), &def).expect("a");
    let b = write_package(&dir.path().join("b"), &def).expect("b");
    assert_eq!(a, b);
    assert!(matches!(
        write_package(&dir.path().join("a"), &def),
        Err(PackageError::Exists(_))
    ));
    let sums = std::fs::read_to_string(dir.path().join("a/SHA256SUMS")).expect("sums");
    assert!(
        sums.ends_with("  definition.json\n") && sums.len() == 64 + 2 + 15 + 1,
        "{sums:?}"
    );
    let loaded = load_package(&dir.path().join("a"), Some(&a)).expect("load");
    assert_eq!(loaded.definition, def);
    assert_eq!(loaded.digest, a);
}

/// `limits` of a connection: accepted in range, each fault refused at its
/// key with `coordinator.runtime.call-limits`.
#[test]
fn checks_a_connections_call_limits() {
    let f = fixture();
    let from = "requestTimeoutMilliseconds: 2000";
    let with = |limits: &str| {
        f.text
            .replacen(from, &format!("{from}\n    limits: {limits}"), 1)
    };
    for fine in [
        "{inFlight: 2, perSecond: 5, burst: 5}",
        "{perSecond: 0.5}",
        "{inFlight: 10000}",
        "{}",
    ] {
        let result = check(&with(fine), Mode::Deployment, false);
        let errors: Vec<_> = result.diagnostics.iter().filter(|d| d.is_error()).collect();
        assert!(errors.is_empty(), "{fine}: {errors:#?}");
    }
    for (limits, needle) in [
        ("{inFlight: 0}", "limits: {inFlight: |0}"),
        ("{inFlight: 10001}", "limits: {inFlight: |10001}"),
        ("{perSecond: 0}", "limits: {perSecond: |0}"),
        ("{perSecond: 20000}", "limits: {perSecond: |20000}"),
        (
            "{perSecond: 5, burst: 0}",
            "limits: {perSecond: 5, burst: |0}",
        ),
        ("{burst: 5}", "limits: {burst: |5}"),
    ] {
        refuses(
            &with("{}"),
            "limits: {}",
            &format!("limits: {limits}"),
            Mode::Deployment,
            false,
            "coordinator.runtime.call-limits",
            needle,
        );
    } // A list is not read by position as the members (serde's sequence
      // form of a struct): the section must be a mapping.
    for list in ["[2, 5, 5]", "[]"] {
        refuses(
            &with("{}"),
            "limits: {}",
            &format!("limits: {list}"),
            Mode::Deployment,
            false,
            "coordinator.yaml.wrong-type",
            &format!("limits: |{list}"),
        );
    }
}

#[test]
fn the_telemetry_section_names_an_otlp_endpoint_checked_like_every_url() {
    let f = fixture();
    let with = |endpoint: &str| {
        format!(
            "{}\ntelemetry:\n  traces:\n    endpoint: {endpoint}\n",
            f.text
        )
    };
    let good = with("https://collector.example.org:4318/v1/traces");
    let result = check(&good, Mode::Deployment, false);
    assert!(result.is_valid(), "{:#?}", result.diagnostics);
    let traces = result
        .config
        .and_then(|c| c.telemetry)
        .and_then(|t| t.traces)
        .expect("the section is read");
    assert_eq!(
        traces.endpoint,
        "https://collector.example.org:4318/v1/traces"
    );
    // A collector beside the service may be reached in plaintext.
    assert!(check(
        &with("http://127.0.0.1:4318/v1/traces"),
        Mode::Template,
        true
    )
    .is_valid());
    refuses(
        &good,
        "endpoint: https://collector",
        "endpoint: http://collector",
        Mode::Deployment,
        false,
        "coordinator.runtime.insecure-url",
        "endpoint: |http://collector",
    );
    refuses(
        &good,
        "4318/v1/traces",
        "4318/v1/traces?tenant=a",
        Mode::Deployment,
        false,
        "coordinator.runtime.url",
        "endpoint: |https://collector",
    );
    refuses(
        &good,
        "  traces:\n",
        "  trace:\n",
        Mode::Deployment,
        false,
        "coordinator.yaml.unknown-key",
        "|trace:",
    );
}
