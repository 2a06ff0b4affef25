//! The runtime file's own sections: namespace, secret providers,
//! observation, event sources, telemetry (the connections are
//! `connections.rs`).

use super::{ptr, Checker};
use crate::codes;
use crate::config::{valid_namespace, RuntimeConfig};

impl Checker<'_> {
    /// The sections every runtime file has, template or deployment: the
    /// namespace, the secret providers and every secret reference, the
    /// observation floor, the event sources and the connections.
    pub(super) fn config(&mut self, cfg: &RuntimeConfig) {
        let ns = &cfg.namespace;
        if !valid_namespace(ns) {
            self.err(
                codes::RUNTIME_NAMESPACE,
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
                codes::RUNTIME_OBSERVATION_FLOOR,
                self.doc.locate("/observation/minimumIntervalSeconds"),
                format!("minimumIntervalSeconds is {floor}; it must be between 30 and 86400"),
                "Use at least 30 seconds (the default).",
            );
        }
        self.event_sources(cfg);
        self.connections(cfg);
        if let Some(traces) = cfg.telemetry.as_ref().and_then(|t| t.traces.as_ref()) {
            self.url(
                &ptr(&["telemetry", "traces", "endpoint"]),
                &traces.endpoint,
                true,
            );
        }
    }

    /// Each event source: its name, and a `source` that is an absolute URI.
    fn event_sources(&mut self, cfg: &RuntimeConfig) {
        for (name, src) in &cfg.event_sources {
            let base = ptr(&["eventSources", name]);
            self.name(&base, name, "event source");
            self.uri(
                &format!("{base}/source"),
                &src.source,
                &format!("event source `{name}`: `source`"),
                true,
            );
        }
    }
}
