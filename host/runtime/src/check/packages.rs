//! Deployment mode: every pinned package loaded and verified against its
//! digest, one package per workflow, and what each Program needs of the
//! runtime file (its connections and event sources), also checked in
//! template mode against the project's Program.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use coordinator_ir::Program;

use super::{ptr, valid_digest, Checker, MAX_PACKAGES};
use crate::codes;
use crate::config::{Deployment, RuntimeConfig};
use crate::package::{load_package, LoadedPackage, PackageError};

impl Checker<'_> {
    /// Deployment mode: verify every pinned package and check its
    /// connections.
    pub(super) fn packages(&mut self, cfg: &RuntimeConfig, d: &Deployment) -> Vec<LoadedPackage> {
        let mut loaded: Vec<LoadedPackage> = Vec::new();
        let mut workflows: BTreeMap<String, usize> = BTreeMap::new();
        if d.packages.is_empty() {
            self.err(
                codes::RUNTIME_NO_PACKAGES,
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
                            codes::RUNTIME_DUPLICATE_WORKFLOW,
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
                            codes::RUNTIME_PACKAGE_UNREADABLE
                        }
                        PackageError::DigestMismatch { .. } => codes::RUNTIME_PACKAGE_DIGEST,
                        PackageError::FileChanged { .. }
                        | PackageError::Malformed(_)
                        | PackageError::Definition(_)
                        | PackageError::Exists(_) => codes::RUNTIME_PACKAGE_REFUSED,
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
                            codes::RUNTIME_POLICY_UNKNOWN_WORKFLOW,
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

    /// The connections and event sources a Program needs.
    pub(super) fn workflow(&mut self, cfg: &RuntimeConfig, program: &Program, pin: Option<usize>) {
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
                        codes::RUNTIME_CONNECTION_MISSING,
                        at,
                        format!("{whose} uses connection `{}` (operation `{}`, {}), which this file does not define", op.connection, op.alias, op.descriptor.id),
                        format!("Add `connections: {{{}: {{type: {want}, ...}}}}`.", op.connection),
                    );
                }
                Some(conn) if conn.type_name() != want => self.err(
                    codes::RUNTIME_CONNECTION_TYPE,
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
                    codes::RUNTIME_EVENT_SOURCE_MISSING,
                    at,
                    format!("{whose} has trigger `{}` on event source `{}`, which this file does not define", t.name, t.source),
                    format!("Add `eventSources: {{{}: {{source: URI, signingKeyRef: secret:file/NAME}}}}`.", t.source),
                );
            }
        }
    }
}
