//! The `connections` section: what every type shares, then each type's own
//! settings.

use std::collections::BTreeMap;

use super::{ptr, Checker};
use crate::codes;
use crate::config::{
    CallLimits, CaseworkConnection, Connection, ExternalHttpConnection, RuntimeConfig,
    MAX_CALL_LIMIT, MIN_CALLS_PER_SECOND,
};

impl Checker<'_> {
    /// Each connection: what every type shares
    /// ([`Self::connection_shared_settings`]), then its type's own settings;
    /// no two Casework connections share a `recipientBinding`.
    pub(super) fn connections(&mut self, cfg: &RuntimeConfig) {
        let mut bindings: BTreeMap<&str, &str> = BTreeMap::new();
        for (name, conn) in &cfg.connections {
            let base = ptr(&["connections", name]);
            self.connection_shared_settings(&base, name, conn);
            match conn {
                Connection::Breg(b) => self.non_empty(&format!("{base}/profile"), &b.profile),
                Connection::Messaging(_) | Connection::Scheduling(_) => {}
                Connection::CaseworkReviewProducer(cw) => {
                    self.casework_connection(&base, name, cw, &mut bindings);
                }
                Connection::ExternalHttp(x) => self.external_http_connection(&base, x),
                Connection::Decision(d) => self.non_empty(&format!("{base}/model"), &d.model),
            }
        }
    }

    /// What every connection type shares: its name, `baseUrl`, the
    /// `authorization` endpoint, resource indicator and client id,
    /// `requestTimeoutMilliseconds`.
    fn connection_shared_settings(&mut self, base: &str, name: &str, conn: &Connection) {
        self.name(base, name, "connection");
        self.url(&format!("{base}/baseUrl"), conn.base_url(), true);
        if let Some(auth) = conn.authorization() {
            let a = format!("{base}/authorization");
            self.url(&format!("{a}/tokenEndpoint"), &auth.token_endpoint, true);
            if let Some(r) = &auth.resource {
                // RFC 8707: any absolute URI without a fragment; it is
                // sent to the token endpoint, never contacted.
                self.uri(
                    &format!("{a}/resource"),
                    r,
                    &format!("connection `{name}`: `resource`"),
                    false,
                );
            }
            self.non_empty(&format!("{a}/clientId"), &auth.client_id);
        }
        if let Some(limits) = conn.limits() {
            self.call_limits(&format!("{base}/limits"), limits);
        }
        if let Some(ms) = conn.request_timeout_milliseconds() {
            if !(1..=300_000).contains(&ms) {
                self.err(
                    codes::RUNTIME_REQUEST_TIMEOUT,
                    self.doc
                        .locate(&format!("{base}/requestTimeoutMilliseconds")),
                    format!("requestTimeoutMilliseconds is {ms}; it must be between 1 and 300000"),
                    "Use a timeout of at most five minutes, or omit the key for the default.",
                );
            }
        }
    }

    /// A connection's `limits`: `inFlight` and `burst` in 1 ..= 10,000,
    /// `perSecond` a finite number in 0.001 ..= 10,000, `burst` only
    /// beside `perSecond`.
    fn call_limits(&mut self, base: &str, limits: &CallLimits) {
        let max = MAX_CALL_LIMIT;
        for (key, value) in [("inFlight", limits.in_flight), ("burst", limits.burst)] {
            if let Some(v) = value.filter(|v| !(1..=max).contains(v)) {
                self.err(
                    codes::RUNTIME_CALL_LIMITS,
                    self.doc.locate(&format!("{base}/{key}")),
                    format!("limits.{key} is {v}; it must be between 1 and {max}"),
                    "Choose a whole number from 1 to 10000, or omit the key for no such limit.",
                );
            }
        }
        if let Some(rate) = limits.per_second {
            if !rate.is_finite() || !(MIN_CALLS_PER_SECOND..=f64::from(max)).contains(&rate) {
                self.err(
                    codes::RUNTIME_CALL_LIMITS,
                    self.doc.locate(&format!("{base}/perSecond")),
                    format!("limits.perSecond is {rate}; it must be between 0.001 and {max}"),
                    "Take the product's published quota in calls per second (0.5 is one call every 2 s), or omit the key.",
                );
            }
        } else if limits.burst.is_some() {
            self.err(
                codes::RUNTIME_CALL_LIMITS,
                self.doc.locate(&format!("{base}/burst")),
                "limits.burst is set without limits.perSecond",
                "A burst is how far the rate may be exceeded after a quiet spell: set perSecond too, or remove burst.",
            );
        }
    }

    /// A `casework-review-producer` connection: producer, profile,
    /// `resultCheckSeconds`, and a `recipientBinding` not yet in `bindings`
    /// (recipient binding → connection name), which it joins.
    fn casework_connection<'c>(
        &mut self,
        base: &str,
        name: &'c str,
        cw: &'c CaseworkConnection,
        bindings: &mut BTreeMap<&'c str, &'c str>,
    ) {
        self.non_empty(&format!("{base}/producer"), &cw.producer);
        if let Some(p) = &cw.profile {
            self.non_empty(&format!("{base}/profile"), p);
        }
        let s = cw.result_check_seconds;
        if !(60..=86_400).contains(&s) {
            self.err(
                codes::RUNTIME_RESULT_CHECK_SECONDS,
                self.doc.locate(&format!("{base}/resultCheckSeconds")),
                format!("resultCheckSeconds is {s}; it must be between 60 and 86400"),
                "Use a value from 60 to 86400 seconds; 900 is the default.",
            );
        }
        if let Some(comp) = &cw.completion {
            let at = format!("{base}/completion/recipientBinding");
            let b = comp.recipient_binding.as_str();
            if b.is_empty() || b.len() > 256 || !b.bytes().all(|c| (0x21..=0x7e).contains(&c)) {
                self.err(
                    codes::RUNTIME_RECIPIENT_BINDING,
                    self.doc.locate(&at),
                    "recipientBinding must be 1 to 256 visible ASCII characters without spaces",
                    "Write a binding such as `coordinator-v1`, repeated in the Casework project's trustedProducers entry.",
                );
            } else if let Some(first) = bindings.get(b) {
                self.err(
                    codes::RUNTIME_RECIPIENT_BINDING_DUPLICATE,
                    self.doc.locate(&at),
                    format!("recipientBinding `{b}` is already used by connection `{first}`"),
                    "Give each Casework connection its own recipientBinding.",
                );
            } else {
                bindings.insert(b, name);
            }
        }
    }

    /// An `external-http` connection: at least one permitted path, each
    /// without query, fragment or spaces, and bare query parameter names.
    fn external_http_connection(&mut self, base: &str, x: &ExternalHttpConnection) {
        for (i, p) in x.paths.iter().enumerate() {
            if !p.starts_with('/')
                || p.contains(['?', '#'])
                || p.chars().any(|c| c.is_whitespace() || c.is_control())
            {
                self.err(
                    codes::RUNTIME_EXTERNAL_PATH,
                    self.doc.locate(&format!("{base}/paths/{i}")),
                    format!("path `{p}` must start with `/` and hold no query, fragment or spaces"),
                    "Write each permitted path, e.g. `/offices`; list query names under queryParameters.",
                );
            }
        }
        if x.paths.is_empty() {
            self.err(
                codes::RUNTIME_EXTERNAL_PATH,
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
                    codes::RUNTIME_QUERY_PARAMETER,
                    self.doc.locate(&format!("{base}/queryParameters/{i}")),
                    format!(
                        "query parameter name `{q}` is empty or holds `&`, `=`, `#`, `?` or spaces"
                    ),
                    "Write the bare parameter name, e.g. `district`.",
                );
            }
        }
    }
}
