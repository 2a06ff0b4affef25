//! The offline check of a runtime file (issue 4 item 2; SPEC §9; seed 000
//! "Write the runtime file" and "Let Casework wake waiting runs").
//!
//! The check reads no secret and contacts nothing. It collects every finding
//! it can (it does not stop at the first) and locates each one at the
//! offending node. Each refusal has its own code; see [`crate::codes`].
//!
//! One file per part of the runtime file checked, each adding its methods to
//! the one `Checker`: `reading.rs` (header, typed reading), `sections.rs`
//! (namespace, secret providers, observation, event sources),
//! `connections.rs`, `secret_refs.rs` (every `...Ref` value), `values.rs`
//! (the rules for absolute paths, names, non-empty values and http(s) URLs),
//! `deployment.rs` (databaseId, runtime role, pinned packages, listeners,
//! audit file, state keys), `authentication.rs` (issuer, JWKS, policies),
//! `packages.rs` (deployment mode: every pinned package verified, and what
//! each Program needs of the file).

use std::path::Path;

use coordinator_ir::pointer::escape_token;
use coordinator_ir::Program;
use coordinator_source::{Diagnostic, ReadError, YamlDocument};

use crate::codes;
use crate::config::RuntimeConfig;
use crate::package::LoadedPackage;

mod authentication;
mod connections;
mod deployment;
mod packages;
mod reading;
mod secret_refs;
mod sections;
mod values;

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

/// Run actions a policy may grant, scoped by its `workflows` (seed 000;
/// `move`, issue 34; `export`, issue 38).
pub const RUN_ACTIONS: [&str; 8] = [
    "start",
    "status",
    "inspect",
    "retry-same",
    "cancel",
    "reconcile",
    "move",
    "export",
];

/// The run actions that also need `operator: true`: moving a waiting run
/// to another revision (`POST /v1/runs/{run}/move`) is an operator's
/// decision over every run of a workflow, never a caller's over its own;
/// so is exporting a run's payloads as a scenario case
/// (`POST /v1/runs/{run}/export`: personal data, audited).
pub const OPERATOR_RUN_ACTIONS: [&str; 2] = ["move", "export"];

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
                codes::RUNTIME_DEPLOYMENT_MISSING,
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

/// The one collector of a check's findings; each file of this module adds
/// the methods of what it checks.
struct Checker<'a> {
    doc: &'a YamlDocument,
    diags: Vec<Diagnostic>,
    unavailable: bool,
}

/// The JSON pointer of `parts` (each escaped).
fn ptr(parts: &[&str]) -> String {
    parts
        .iter()
        .map(|p| format!("/{}", escape_token(p)))
        .collect()
}

/// `sha256:` followed by 64 lowercase hex digits.
fn valid_digest(d: &str) -> bool {
    d.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

impl Checker<'_> {
    /// Adds an error-severity finding at `at`.
    fn err(
        &mut self,
        code: &str,
        at: coordinator_source::Located,
        message: impl Into<String>,
        next: impl Into<String>,
    ) {
        self.diags.push(Diagnostic::error(code, at, message, next));
    }
}
