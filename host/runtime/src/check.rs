//! The offline check of a runtime file (issue 4 item 2; SPEC §9; seed 000
//! "Write the runtime file" and "Let Casework wake waiting runs").
//!
//! The check reads no secret and contacts nothing. It collects every finding
//! it can (it does not stop at the first) and locates each one at the
//! offending node. Each refusal has its own code; see [`CODES`].

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;

use coordinator_ir::name::{is_name, NAME_PATTERN};
use coordinator_ir::pointer::escape_token;
use coordinator_ir::Program;
use coordinator_source::{Diagnostic, ReadError, YamlDocument};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::config::*;
use crate::net::{http_url, UrlFault};
use crate::package::{load_package, LoadedPackage, PackageError};

/// What the file is checked as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The author's template (`check --project D --runtime-config F`):
    /// `deployment` may be absent; packages are not read.
    Template,
    /// The operator's file (`--runtime-config F check`): `deployment` is
    /// required and every pinned package is verified against its digest.
    Deployment,
}

/// Run actions a policy may grant, scoped by its `workflows` (seed 000).
pub const RUN_ACTIONS: [&str; 6] = [
    "start",
    "status",
    "inspect",
    "retry-same",
    "cancel",
    "reconcile",
];

/// Deployment-wide actions; they need `operator: true` (seed 000).
pub const DEPLOYMENT_ACTIONS: [&str; 6] = [
    "doctor",
    "restore-hold",
    "release-restore-hold",
    "release-admission-hold",
    "complete-execution-recovery",
    "retain",
];

/// Most packages one deployment serves (seed 000).
pub const MAX_PACKAGES: usize = 16;

/// Every code this check emits besides the `coordinator.yaml.*` and
/// `coordinator.file.*` codes of `coordinator-source`.
pub const CODES: &[&str] = &[
    "coordinator.runtime.api-version",
    "coordinator.runtime.kind",
    "coordinator.runtime.namespace",
    "coordinator.runtime.secret-reference",
    "coordinator.runtime.secret-provider-disabled",
    "coordinator.runtime.relative-path",
    "coordinator.runtime.url",
    "coordinator.runtime.insecure-url",
    "coordinator.runtime.name",
    "coordinator.runtime.empty-value",
    "coordinator.runtime.observation-floor",
    "coordinator.runtime.request-timeout",
    "coordinator.runtime.result-check-seconds",
    "coordinator.runtime.recipient-binding",
    "coordinator.runtime.recipient-binding-duplicate",
    "coordinator.runtime.external-path",
    "coordinator.runtime.query-parameter",
    "coordinator.runtime.connection-missing",
    "coordinator.runtime.connection-type",
    "coordinator.runtime.event-source-missing",
    "coordinator.runtime.deployment-missing",
    "coordinator.runtime.database-id",
    "coordinator.runtime.runtime-role",
    "coordinator.runtime.too-many-packages",
    "coordinator.runtime.no-packages",
    "coordinator.runtime.digest-format",
    "coordinator.runtime.duplicate-package",
    "coordinator.runtime.listener-bind",
    "coordinator.runtime.listener-conflict",
    "coordinator.runtime.event-source-issuer",
    "coordinator.runtime.policy-empty",
    "coordinator.runtime.policy-unknown-action",
    "coordinator.runtime.policy-operator-required",
    "coordinator.runtime.policy-workflows-scope",
    "coordinator.runtime.policy-unknown-workflow",
    "coordinator.runtime.state-key-version",
    "coordinator.runtime.active-state-key",
    "coordinator.runtime.package-unreadable",
    "coordinator.runtime.package-digest",
    "coordinator.runtime.package-refused",
    "coordinator.runtime.duplicate-workflow",
];

/// The result of a check.
#[derive(Clone, Debug, Default)]
pub struct RuntimeCheck {
    /// The typed file, when it could be read (even if later rules refused it).
    pub config: Option<RuntimeConfig>,
    /// Deployment mode: the packages that passed verification, in file order.
    pub packages: Vec<LoadedPackage>,
    /// Every finding, sorted by file, position, code.
    pub diagnostics: Vec<Diagnostic>,
    /// `true` when the runtime file or a pinned package could not be read at
    /// all: the CLI exits 3 instead of 1.
    pub resource_unavailable: bool,
}

impl RuntimeCheck {
    /// No error-severity finding: the CLI prints `Valid runtime configuration`.
    pub fn is_valid(&self) -> bool {
        !self.resource_unavailable && !self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// Reads `path` (shown as `display`) and checks it; an unreadable file gives
/// one `coordinator.file.unreadable` diagnostic with `resource_unavailable`
/// set (exit 3); a refused file (too large, not UTF-8) or YAML fault gives its
/// diagnostic (exit 1).
pub fn check_runtime_file(
    path: &Path,
    display: &str,
    workflow: Option<&Program>,
    mode: Mode,
) -> RuntimeCheck {
    let text = match coordinator_source::read_file(
        path,
        display,
        coordinator_source::yaml::MAX_FILE_BYTES,
    ) {
        Ok(t) => t,
        Err(e) => {
            return RuntimeCheck {
                resource_unavailable: matches!(e, ReadError::Unavailable(_)),
                diagnostics: vec![e.diagnostic().clone()],
                ..RuntimeCheck::default()
            }
        }
    };
    match coordinator_source::parse(display, &text) {
        Ok(doc) => check_runtime(&doc, workflow, mode),
        Err(d) => RuntimeCheck {
            diagnostics: vec![d],
            ..RuntimeCheck::default()
        },
    }
}

/// Checks a parsed runtime file. `workflow` (Template mode with a project)
/// adds the connection and event-source checks against that Program; in
/// Deployment mode the same checks run against every verified package.
pub fn check_runtime(doc: &YamlDocument, workflow: Option<&Program>, mode: Mode) -> RuntimeCheck {
    let mut c = Checker {
        doc,
        diags: Vec::new(),
        unavailable: false,
    };
    let config = c.read(doc);
    let mut packages = Vec::new();
    if let Some(cfg) = &config {
        c.config(cfg);
        if let Some(program) = workflow {
            c.workflow(cfg, program, None);
        }
        match (&cfg.deployment, mode) {
            (None, Mode::Deployment) => c.err(
                "coordinator.runtime.deployment-missing",
                c.doc.locate(""),
                "the file has no `deployment` section",
                "Complete the `deployment` section (databaseId, runtimeRole, packages, listener, authentication, audit file and keys) before checking it as a deployment.",
            ),
            (Some(d), _) => {
                c.deployment(cfg, d);
                if mode == Mode::Deployment {
                    packages = c.packages(cfg, d);
                }
            }
            (None, Mode::Template) => {}
        }
    }
    coordinator_source::diagnostic::sort(&mut c.diags);
    RuntimeCheck {
        config,
        packages,
        diagnostics: c.diags,
        resource_unavailable: c.unavailable,
    }
}

struct Checker<'a> {
    doc: &'a YamlDocument,
    diags: Vec<Diagnostic>,
    unavailable: bool,
}

fn ptr(parts: &[&str]) -> String {
    parts
        .iter()
        .map(|p| format!("/{}", escape_token(p)))
        .collect()
}

fn valid_digest(d: &str) -> bool {
    d.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

impl Checker<'_> {
    fn err(
        &mut self,
        code: &str,
        at: coordinator_source::Located,
        message: impl Into<String>,
        next: impl Into<String>,
    ) {
        self.diags.push(Diagnostic::error(code, at, message, next));
    }

    /// Header, then typed reading.
    fn read(&mut self, doc: &YamlDocument) -> Option<RuntimeConfig> {
        if let Value::Object(map) = &doc.value {
            let mut header_ok = true;
            for (key, expected, code) in [
                ("apiVersion", API_VERSION, "coordinator.runtime.api-version"),
                ("kind", KIND, "coordinator.runtime.kind"),
            ] {
                match map.get(key) {
                    Some(Value::String(s)) if s == expected => {}
                    Some(other) => {
                        header_ok = false;
                        let shown = match other {
                            Value::String(s) => format!("`{s}`"),
                            _ => "a non-string value".to_owned(),
                        };
                        self.err(
                            code,
                            doc.locate(&format!("/{key}")),
                            format!("`{key}` is {shown}; this reader supports only `{expected}`"),
                            format!("Write `{key}: {expected}` and bring the file to that format."),
                        );
                    }
                    None => {}
                }
            }
            if !header_ok {
                return None;
            }
        }
        match doc.deserialize::<RuntimeConfig>() {
            Ok(cfg) => Some(cfg),
            Err(d) => {
                let d = self.refine_connection_error(d);
                self.diags.push(d);
                None
            }
        }
    }

    /// serde reads `connections` through an internally tagged enum, which
    /// loses the path below the connection; read that one connection again
    /// as its variant to locate the fault precisely.
    fn refine_connection_error(&self, d: Diagnostic) -> Diagnostic {
        let Some(rest) = d.pointer.strip_prefix("/connections/") else {
            return d;
        };
        let name_token = rest.split('/').next().unwrap_or_default();
        let base = format!("/connections/{name_token}");
        let Some(Value::Object(conn)) = self.doc.value.pointer(&base) else {
            return d;
        };
        let mut body = conn.clone();
        let ty = body.remove("type");
        let body = Value::Object(body);
        let refined = match ty.as_ref().and_then(Value::as_str) {
            Some("breg") => self.reread::<BregConnection>(&base, body),
            Some("messaging" | "scheduling") => self.reread::<PlainConnection>(&base, body),
            Some("casework-review-producer") => self.reread::<CaseworkConnection>(&base, body),
            Some("external-http") => self.reread::<ExternalHttpConnection>(&base, body),
            Some("decision") => self.reread::<DecisionConnection>(&base, body),
            Some(_) => {
                let mut d = d;
                let at = self.doc.locate(&format!("{base}/type"));
                d.pointer = at.pointer;
                d.line = at.line;
                d.column = at.column;
                return d;
            }
            None => None,
        };
        refined.unwrap_or(d)
    }

    fn reread<T: DeserializeOwned>(&self, base: &str, body: Value) -> Option<Diagnostic> {
        match serde_path_to_error::deserialize::<_, T>(body) {
            Ok(_) => None,
            Err(e) => {
                let p = coordinator_source::yaml::path_to_pointer(e.path());
                Some(
                    self.doc
                        .serde_diagnostic(&format!("{base}{p}"), &e.into_inner().to_string()),
                )
            }
        }
    }

    fn config(&mut self, cfg: &RuntimeConfig) {
        let ns = &cfg.namespace;
        if !valid_namespace(ns) {
            self.err(
                "coordinator.runtime.namespace",
                self.doc.locate("/namespace"),
                format!("namespace `{ns}` is not `coordinator_` followed by lowercase letters, digits or `_` (at most 63 bytes)"),
                "Write a namespace such as `coordinator_follow_up`.",
            );
        }
        if let Some(file) = &cfg.secret_providers.file {
            self.absolute(&ptr(&["secretProviders", "file", "root"]), &file.root);
        }
        let doc = self.doc;
        self.secret_refs(cfg, &doc.value, String::new());
        let floor = cfg.observation.minimum_interval_seconds;
        if !(30..=86_400).contains(&floor) {
            self.err(
                "coordinator.runtime.observation-floor",
                self.doc.locate("/observation/minimumIntervalSeconds"),
                format!("minimumIntervalSeconds is {floor}; it must be between 30 and 86400"),
                "Use at least 30 seconds (the default).",
            );
        }
        for (name, src) in &cfg.event_sources {
            let base = ptr(&["eventSources", name]);
            self.name(&base, name, "event source");
            let scheme_ok = src.source.split_once(':').is_some_and(|(s, rest)| {
                !rest.is_empty()
                    && s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
            });
            if !scheme_ok {
                self.err(
                    "coordinator.runtime.url",
                    self.doc.locate(&format!("{base}/source")),
                    format!("event source `{name}`: `source` is not an absolute URI"),
                    "Write the producer's source URI exactly as its events carry it, e.g. `https://breg.example.org/applications`.",
                );
            }
        }
        let mut bindings: BTreeMap<&str, &str> = BTreeMap::new();
        for (name, conn) in &cfg.connections {
            let base = ptr(&["connections", name]);
            self.name(&base, name, "connection");
            self.url(&format!("{base}/baseUrl"), conn.base_url(), true);
            if let Some(auth) = conn.authorization() {
                let a = format!("{base}/authorization");
                self.url(&format!("{a}/tokenEndpoint"), &auth.token_endpoint, true);
                if let Some(r) = &auth.resource {
                    self.url(&format!("{a}/resource"), r, false);
                }
                self.non_empty(&format!("{a}/clientId"), &auth.client_id);
            }
            if let Some(ms) = conn.request_timeout_milliseconds() {
                if !(1..=300_000).contains(&ms) {
                    self.err(
                        "coordinator.runtime.request-timeout",
                        self.doc
                            .locate(&format!("{base}/requestTimeoutMilliseconds")),
                        format!(
                            "requestTimeoutMilliseconds is {ms}; it must be between 1 and 300000"
                        ),
                        "Use a timeout of at most five minutes, or omit the key for the default.",
                    );
                }
            }
            match conn {
                Connection::Breg(b) => self.non_empty(&format!("{base}/profile"), &b.profile),
                Connection::Messaging(_) | Connection::Scheduling(_) => {}
                Connection::CaseworkReviewProducer(cw) => {
                    self.non_empty(&format!("{base}/producer"), &cw.producer);
                    if let Some(p) = &cw.profile {
                        self.non_empty(&format!("{base}/profile"), p);
                    }
                    let s = cw.result_check_seconds;
                    if !(60..=86_400).contains(&s) {
                        self.err(
                            "coordinator.runtime.result-check-seconds",
                            self.doc.locate(&format!("{base}/resultCheckSeconds")),
                            format!("resultCheckSeconds is {s}; it must be between 60 and 86400"),
                            "Use a value from 60 to 86400 seconds; 900 is the default.",
                        );
                    }
                    if let Some(comp) = &cw.completion {
                        let at = format!("{base}/completion/recipientBinding");
                        let b = comp.recipient_binding.as_str();
                        if b.is_empty()
                            || b.len() > 256
                            || !b.bytes().all(|c| (0x21..=0x7e).contains(&c))
                        {
                            self.err(
                                "coordinator.runtime.recipient-binding",
                                self.doc.locate(&at),
                                "recipientBinding must be 1 to 256 visible ASCII characters without spaces",
                                "Write a binding such as `coordinator-v1`, repeated in the Casework project's trustedProducers entry.",
                            );
                        } else if let Some(first) = bindings.get(b) {
                            self.err(
                                "coordinator.runtime.recipient-binding-duplicate",
                                self.doc.locate(&at),
                                format!("recipientBinding `{b}` is already used by connection `{first}`"),
                                "Give each Casework connection its own recipientBinding.",
                            );
                        } else {
                            bindings.insert(b, name.as_str());
                        }
                    }
                }
                Connection::ExternalHttp(x) => {
                    for (i, p) in x.paths.iter().enumerate() {
                        if !p.starts_with('/')
                            || p.contains(['?', '#'])
                            || p.chars().any(|c| c.is_whitespace() || c.is_control())
                        {
                            self.err(
                                "coordinator.runtime.external-path",
                                self.doc.locate(&format!("{base}/paths/{i}")),
                                format!("path `{p}` must start with `/` and hold no query, fragment or spaces"),
                                "Write each permitted path, e.g. `/offices`; list query names under queryParameters.",
                            );
                        }
                    }
                    if x.paths.is_empty() {
                        self.err(
                            "coordinator.runtime.external-path",
                            self.doc.locate(&format!("{base}/paths")),
                            "an external-http connection permits no path",
                            "List at least one permitted path under `paths`.",
                        );
                    }
                    for (i, q) in x.query_parameters.iter().enumerate() {
                        if q.is_empty()
                            || q.chars()
                                .any(|c| "&=#?".contains(c) || c.is_whitespace() || c.is_control())
                        {
                            self.err(
                                "coordinator.runtime.query-parameter",
                                self.doc.locate(&format!("{base}/queryParameters/{i}")),
                                format!("query parameter name `{q}` is empty or holds `&`, `=`, `#`, `?` or spaces"),
                                "Write the bare parameter name, e.g. `district`.",
                            );
                        }
                    }
                }
                Connection::Decision(d) => self.non_empty(&format!("{base}/model"), &d.model),
            }
        }
    }

    /// Every member whose key ends in `Ref` holds a secret reference.
    fn secret_refs(&mut self, cfg: &RuntimeConfig, value: &Value, at: String) {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    let p = format!("{at}/{}", escape_token(k));
                    match v {
                        Value::String(s) if k.ends_with("Ref") => self.secret_ref(cfg, &p, s),
                        _ => self.secret_refs(cfg, v, p),
                    }
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    self.secret_refs(cfg, v, format!("{at}/{i}"));
                }
            }
            _ => {}
        }
    }

    fn secret_ref(&mut self, cfg: &RuntimeConfig, at: &str, s: &str) {
        let malformed = |c: &mut Self, why: &str| {
            // The value is never echoed: a malformed reference may be a
            // secret pasted in by mistake.
            c.err(
                "coordinator.runtime.secret-reference",
                c.doc.locate(at),
                format!("this value is not a secret reference: {why}"),
                "Write `secret:file/<name>` (a file directly under secretProviders.file.root) or `secret:env/<NAME>`; never the secret itself.",
            );
        };
        if let Some(name) = s.strip_prefix("secret:file/") {
            if name.is_empty()
                || name == "."
                || name == ".."
                || name.contains(['/', '\\'])
                || name.chars().any(char::is_control)
            {
                return malformed(
                    self,
                    "a file reference names one file directly under the root, without `/` or `..`",
                );
            }
            if cfg.secret_providers.file.is_none() {
                self.err(
                    "coordinator.runtime.secret-provider-disabled",
                    self.doc.locate(at),
                    "this `secret:file/` reference needs the file provider, which is not configured",
                    "Add `secretProviders: {file: {root: /run/registry-coordinator/secrets}}`.",
                );
            }
        } else if let Some(name) = s.strip_prefix("secret:env/") {
            let mut chars = name.chars();
            let ok = chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok {
                return malformed(
                    self,
                    "an environment reference names a variable of letters, digits and `_`",
                );
            }
            if cfg.secret_providers.environment.is_none() {
                self.err(
                    "coordinator.runtime.secret-provider-disabled",
                    self.doc.locate(at),
                    "this `secret:env/` reference needs the environment provider, which is disabled",
                    "Add `environment: {}` under `secretProviders`, or use a `secret:file/` reference.",
                );
            }
        } else {
            malformed(
                self,
                "it does not start with `secret:file/` or `secret:env/`",
            );
        }
    }

    fn absolute(&mut self, at: &str, path: &str) {
        if !path.starts_with('/') {
            self.err(
                "coordinator.runtime.relative-path",
                self.doc.locate(at),
                format!("`{path}` is not an absolute path"),
                "Write an absolute path; the service does not resolve paths against its working directory.",
            );
        }
    }

    fn non_empty(&mut self, at: &str, v: &str) {
        if v.trim().is_empty() {
            self.err(
                "coordinator.runtime.empty-value",
                self.doc.locate(at),
                "this value is empty",
                "Write the value this key names.",
            );
        }
    }

    fn name(&mut self, at: &str, name: &str, what: &str) {
        if !is_name(name) {
            self.err(
                "coordinator.runtime.name",
                self.doc.locate_key(at),
                format!("{what} name `{name}` does not match {NAME_PATTERN}"),
                "Use lowercase letters, digits and `-`, starting with a letter.",
            );
        }
    }

    /// An `http(s)` URL the service contacts ([`http_url`]): https, or http
    /// only to a loopback host; when `endpoint`, without a query string.
    fn url(&mut self, at: &str, url: &str, endpoint: bool) {
        match http_url(url, endpoint) {
            Ok(_) => {}
            Err(UrlFault::Plaintext { host }) => self.err(
                "coordinator.runtime.insecure-url",
                self.doc.locate(at),
                format!("`{url}` uses plaintext http to `{host}`, which is not a loopback host"),
                "Use https; plaintext http is accepted only to localhost, 127.0.0.0/8 or [::1].",
            ),
            Err(UrlFault::Query) => self.err(
                "coordinator.runtime.url",
                self.doc.locate(at),
                format!("`{url}` carries a query string"),
                "Remove the query string from the URL.",
            ),
            Err(why) => self.err(
                "coordinator.runtime.url",
                self.doc.locate(at),
                format!("`{url}` is not a usable URL: {why}"),
                "Write an absolute https URL, e.g. `https://breg.example.org`.",
            ),
        }
    }

    /// The connections and event sources a Program needs.
    fn workflow(&mut self, cfg: &RuntimeConfig, program: &Program, pin: Option<usize>) {
        let whose = match pin {
            Some(i) => format!(
                "the package at deployment.packages[{i}] (workflow `{}`)",
                program.workflow
            ),
            None => format!("workflow `{}`", program.workflow),
        };
        let mut seen = BTreeSet::new();
        for op in &program.operations {
            let want = op.descriptor.product.connection_type();
            if !seen.insert((op.connection.clone(), want)) {
                continue;
            }
            match cfg.connections.get(&op.connection) {
                None => {
                    let at = match pin {
                        Some(i) => self.doc.locate(&format!("/deployment/packages/{i}")),
                        None if cfg.connections.is_empty() => self.doc.locate(""),
                        None => self.doc.locate_key("/connections"),
                    };
                    self.err(
                        "coordinator.runtime.connection-missing",
                        at,
                        format!("{whose} uses connection `{}` (operation `{}`, {}), which this file does not define", op.connection, op.alias, op.descriptor.id),
                        format!("Add `connections: {{{}: {{type: {want}, ...}}}}`.", op.connection),
                    );
                }
                Some(conn) if conn.type_name() != want => self.err(
                    "coordinator.runtime.connection-type",
                    self.doc.locate(&ptr(&["connections", &op.connection, "type"])),
                    format!("connection `{}` has type `{}`, but {whose} calls {} on it, which needs `{want}`", op.connection, conn.type_name(), op.descriptor.id),
                    format!("Set `type: {want}` on this connection, or bind the operation to another connection."),
                ),
                Some(_) => {}
            }
        }
        for t in &program.triggers {
            if !cfg.event_sources.contains_key(&t.source) {
                let at = match pin {
                    Some(i) => self.doc.locate(&format!("/deployment/packages/{i}")),
                    None if cfg.event_sources.is_empty() => self.doc.locate(""),
                    None => self.doc.locate_key("/eventSources"),
                };
                self.err(
                    "coordinator.runtime.event-source-missing",
                    at,
                    format!("{whose} has trigger `{}` on event source `{}`, which this file does not define", t.name, t.source),
                    format!("Add `eventSources: {{{}: {{source: URI, signingKeyRef: secret:file/NAME}}}}`.", t.source),
                );
            }
        }
    }

    fn deployment(&mut self, cfg: &RuntimeConfig, d: &Deployment) {
        let id = &d.database_id;
        if id.is_empty()
            || id.len() > 128
            || id.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            self.err(
                "coordinator.runtime.database-id",
                self.doc.locate("/deployment/databaseId"),
                "databaseId must be 1 to 128 characters without spaces",
                "Write the deployment's durable identity, e.g. `follow-up-pilot-1`.",
            );
        }
        let role = &d.runtime_role;
        let mut rc = role.chars();
        let role_ok = rc
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
            && rc.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            && role.len() <= 63;
        if !role_ok {
            self.err(
                "coordinator.runtime.runtime-role",
                self.doc.locate("/deployment/runtimeRole"),
                format!("runtimeRole `{role}` is not a lowercase PostgreSQL role name"),
                "Write the runtime role's name, e.g. `coordinator_runtime`.",
            );
        }
        if d.packages.len() > MAX_PACKAGES {
            self.err(
                "coordinator.runtime.too-many-packages",
                self.doc
                    .locate(&format!("/deployment/packages/{MAX_PACKAGES}")),
                format!(
                    "{} packages are listed; one deployment serves at most {MAX_PACKAGES}",
                    d.packages.len()
                ),
                "Split the workflows across deployments.",
            );
        }
        let mut roots: BTreeSet<&str> = BTreeSet::new();
        for (i, p) in d.packages.iter().enumerate() {
            let base = format!("/deployment/packages/{i}");
            self.absolute(&format!("{base}/root"), &p.root);
            if !roots.insert(p.root.trim_end_matches('/')) {
                self.err(
                    "coordinator.runtime.duplicate-package",
                    self.doc.locate(&format!("{base}/root")),
                    format!("package root `{}` is listed twice", p.root),
                    "List each package once.",
                );
            }
            if !valid_digest(&p.expected_digest) {
                self.err(
                    "coordinator.runtime.digest-format",
                    self.doc.locate(&format!("{base}/expectedDigest")),
                    "expectedDigest is not `sha256:` followed by 64 lowercase hex digits",
                    "Copy the `package digest:` line that `coordinatorctl package` printed.",
                );
            }
        }
        self.bind("/deployment/listener/bind", &d.listener.bind);
        if let Some(m) = &d.metrics_listener {
            self.bind("/deployment/metricsListener/bind", &m.bind);
            let (api, metrics) = (
                d.listener.bind.parse::<SocketAddr>(),
                m.bind.parse::<SocketAddr>(),
            );
            if let (Ok(api), Ok(metrics)) = (api, metrics) {
                if api.port() == metrics.port()
                    && (api.ip() == metrics.ip()
                        || api.ip().is_unspecified()
                        || metrics.ip().is_unspecified())
                {
                    self.err(
                        "coordinator.runtime.listener-conflict",
                        self.doc.locate("/deployment/metricsListener/bind"),
                        format!(
                            "the metrics listener `{}` takes the API listener's address `{}`",
                            m.bind, d.listener.bind
                        ),
                        "Give the metrics listener its own port, e.g. 127.0.0.1:9108.",
                    );
                }
            }
        }
        let auth = &d.authentication;
        self.url("/deployment/authentication/issuer", &auth.issuer, true);
        for (name, source) in &cfg.event_sources {
            if source.source == auth.issuer {
                self.err(
                    "coordinator.runtime.event-source-issuer",
                    self.doc.locate(&ptr(&["eventSources", name, "source"])),
                    format!("event source `{name}` has the token issuer's URI as its `source`; its runs would share an owner with that issuer's token callers"),
                    "Use the producer's own source URI (the CloudEvents `source` it sends).",
                );
            }
        }
        self.non_empty("/deployment/authentication/audience", &auth.audience);
        match &auth.jwks {
            Some(Jwks::Uri(u)) => self.url("/deployment/authentication/jwks/uri", u, false),
            Some(Jwks::File(f)) => self.absolute("/deployment/authentication/jwks/file", f),
            None => {}
        }
        for (client, policy) in &auth.policies {
            self.policy(client, policy);
        }
        self.absolute("/deployment/auditFile", &d.audit_file);
        for version in d.state_keys.keys() {
            let ok = !version.starts_with('0')
                && !version.is_empty()
                && version.len() <= 9
                && version.bytes().all(|b| b.is_ascii_digit());
            if !ok {
                self.err(
                    "coordinator.runtime.state-key-version",
                    self.doc.locate_key(&ptr(&["deployment", "stateKeys", version])),
                    format!("state key version `{version}` is not a positive decimal number"),
                    "Key each state key by its version number, e.g. `\"1\": {keyRef: secret:file/state-key-1}`.",
                );
            }
        }
        if !d.state_keys.contains_key(&d.active_state_key.to_string()) {
            self.err(
                "coordinator.runtime.active-state-key",
                self.doc.locate("/deployment/activeStateKey"),
                format!(
                    "activeStateKey {} is not a version under stateKeys",
                    d.active_state_key
                ),
                "Add that version under stateKeys, or set activeStateKey to one listed there.",
            );
        }
    }

    fn bind(&mut self, at: &str, bind: &str) {
        if bind.parse::<SocketAddr>().is_err() {
            self.err(
                "coordinator.runtime.listener-bind",
                self.doc.locate(at),
                format!("`{bind}` is not a socket address (IP:PORT)"),
                "Write an address and port such as `127.0.0.1:8108` or `[::1]:8108`.",
            );
        }
    }

    fn policy(&mut self, client: &str, policy: &Policy) {
        let base = ptr(&["deployment", "authentication", "policies", client]);
        if policy.actions.is_empty() {
            self.err(
                "coordinator.runtime.policy-empty",
                self.doc.locate(&format!("{base}/actions")),
                format!("policy `{client}` grants no action"),
                "List the actions this client needs, or remove the policy.",
            );
        }
        let mut run_actions = 0;
        for (i, a) in policy.actions.iter().enumerate() {
            let at = self.doc.locate(&format!("{base}/actions/{i}"));
            if RUN_ACTIONS.contains(&a.as_str()) {
                run_actions += 1;
            } else if DEPLOYMENT_ACTIONS.contains(&a.as_str()) {
                if !policy.operator {
                    self.err(
                        "coordinator.runtime.policy-operator-required",
                        at,
                        format!("policy `{client}` grants the deployment-wide action `{a}` without `operator: true`"),
                        "Add `operator: true` to an operator's policy, keeping producers and operators in separate policies.",
                    );
                }
            } else {
                self.err(
                    "coordinator.runtime.policy-unknown-action",
                    at,
                    format!("policy `{client}` grants `{a}`, which is not an action"),
                    format!(
                        "Use run actions ({}) or deployment-wide actions ({}).",
                        RUN_ACTIONS.join(", "),
                        DEPLOYMENT_ACTIONS.join(", ")
                    ),
                );
                run_actions += 1; // do not also report a workflows scope fault
            }
        }
        if policy.workflows.is_some() && run_actions == 0 && !policy.actions.is_empty() {
            self.err(
                "coordinator.runtime.policy-workflows-scope",
                self.doc.locate_key(&format!("{base}/workflows")),
                format!("policy `{client}` sets `workflows` but lists only deployment-wide actions, which act on every workflow at once"),
                "Remove `workflows` from this policy.",
            );
        }
    }

    /// Deployment mode: verify every pinned package and check its
    /// connections.
    fn packages(&mut self, cfg: &RuntimeConfig, d: &Deployment) -> Vec<LoadedPackage> {
        let mut loaded: Vec<LoadedPackage> = Vec::new();
        let mut workflows: BTreeMap<String, usize> = BTreeMap::new();
        if d.packages.is_empty() {
            self.err(
                "coordinator.runtime.no-packages",
                self.doc.locate("/deployment/packages"),
                "the deployment pins no package",
                "List each workflow's package under `packages` with its `root` and `expectedDigest`.",
            );
        }
        for (i, p) in d.packages.iter().enumerate().take(MAX_PACKAGES) {
            if !p.root.starts_with('/') || !valid_digest(&p.expected_digest) {
                continue; // already refused
            }
            let at = self.doc.locate(&format!("/deployment/packages/{i}"));
            match load_package(Path::new(&p.root), Some(&p.expected_digest)) {
                Ok(pkg) => {
                    let name = pkg.definition.program.workflow.clone();
                    if let Some(first) = workflows.get(&name) {
                        self.err(
                            "coordinator.runtime.duplicate-workflow",
                            at,
                            format!("workflow `{name}` is already served by deployment.packages[{first}]"),
                            "Pin one package per workflow.",
                        );
                        continue;
                    }
                    workflows.insert(name, i);
                    self.workflow(cfg, &pkg.definition.program, Some(i));
                    loaded.push(pkg);
                }
                Err(e) => {
                    let code = match &e {
                        PackageError::Unavailable { .. } => {
                            self.unavailable = true;
                            "coordinator.runtime.package-unreadable"
                        }
                        PackageError::DigestMismatch { .. } => "coordinator.runtime.package-digest",
                        PackageError::FileChanged { .. }
                        | PackageError::Malformed(_)
                        | PackageError::Definition(_)
                        | PackageError::Exists(_) => "coordinator.runtime.package-refused",
                    };
                    self.err(
                        code,
                        at,
                        format!("package `{}`: {e}", p.root),
                        "Pin the digest `coordinatorctl package` printed for this exact package, and copy the package unchanged.",
                    );
                }
            }
        }
        if loaded.len() == d.packages.len() && !loaded.is_empty() {
            for (client, policy) in &d.authentication.policies {
                for (i, w) in policy.workflows.iter().flatten().enumerate() {
                    if !workflows.contains_key(w) {
                        self.err(
                            "coordinator.runtime.policy-unknown-workflow",
                            self.doc.locate(&ptr(&["deployment", "authentication", "policies", client, "workflows", &i.to_string()])),
                            format!("policy `{client}` names workflow `{w}`, which no pinned package serves"),
                            "Name a workflow of a listed package.",
                        );
                    }
                }
            }
        }
        loaded
    }
}
