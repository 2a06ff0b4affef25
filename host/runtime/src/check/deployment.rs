//! The `deployment` section as written: identity, pinned package list,
//! listeners, audit file, state keys (authentication is
//! `authentication.rs`; the packages' contents are `packages.rs`).

use std::collections::BTreeSet;
use std::net::SocketAddr;

use super::{ptr, valid_digest, Checker, MAX_PACKAGES};
use crate::codes;
use crate::config::{Deployment, NetworkExposure, RuntimeConfig};
use crate::net::is_private_address;

impl Checker<'_> {
    /// The `deployment` section: databaseId and runtime role, the pinned
    /// package list, the listeners, authentication, the audit file and the
    /// state keys.
    pub(super) fn deployment(&mut self, cfg: &RuntimeConfig, d: &Deployment) {
        self.database_id_and_runtime_role(d);
        self.pinned_package_list(d);
        self.listeners(d);
        self.authentication(cfg, &d.authentication);
        self.absolute("/deployment/auditFile", &d.audit_file);
        self.state_keys(d);
        self.clock_skew_bound(d);
    }

    /// clockSkewBoundMilliseconds: 100 to 10,000 (a bound below the
    /// measurement's own error, or near the lease length, keeps nothing).
    fn clock_skew_bound(&mut self, d: &Deployment) {
        let bound = d.clock_skew_bound_milliseconds;
        if !(100..=10_000).contains(&bound) {
            self.err(
                codes::RUNTIME_CLOCK_SKEW_BOUND,
                self.doc.locate("/deployment/clockSkewBoundMilliseconds"),
                format!("clockSkewBoundMilliseconds is {bound}; it must be between 100 and 10000"),
                "Use 1000 (the default) unless the processes' clocks are known to be kept closer.",
            );
        }
    }

    /// databaseId: 1 to 128 characters without spaces; runtimeRole: a
    /// lowercase PostgreSQL role name.
    fn database_id_and_runtime_role(&mut self, d: &Deployment) {
        let id = &d.database_id;
        if id.is_empty()
            || id.len() > 128
            || id.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            self.err(
                codes::RUNTIME_DATABASE_ID,
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
                codes::RUNTIME_RUNTIME_ROLE,
                self.doc.locate("/deployment/runtimeRole"),
                format!("runtimeRole `{role}` is not a lowercase PostgreSQL role name"),
                "Write the runtime role's name, e.g. `coordinator_runtime`.",
            );
        }
    }

    /// The package list as written (the packages themselves are read in
    /// deployment mode only): at most [`MAX_PACKAGES`], absolute roots, each
    /// listed once, digests in `sha256:` form.
    fn pinned_package_list(&mut self, d: &Deployment) {
        if d.packages.len() > MAX_PACKAGES {
            self.err(
                codes::RUNTIME_TOO_MANY_PACKAGES,
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
                    codes::RUNTIME_DUPLICATE_PACKAGE,
                    self.doc.locate(&format!("{base}/root")),
                    format!("package root `{}` is listed twice", p.root),
                    "List each package once.",
                );
            }
            if !valid_digest(&p.expected_digest) {
                self.err(
                    codes::RUNTIME_DIGEST_FORMAT,
                    self.doc.locate(&format!("{base}/expectedDigest")),
                    "expectedDigest is not `sha256:` followed by 64 lowercase hex digits",
                    "Copy the `package digest:` line that `coordinatorctl package` printed.",
                );
            }
        }
    }

    /// The API listener's and the metrics listener's socket addresses (each
    /// private, unless `networkExposure: container-private`), and that the
    /// metrics listener does not take the API listener's address.
    fn listeners(&mut self, d: &Deployment) {
        self.bind("/deployment/listener/bind", &d.listener.bind, d);
        if let Some(m) = &d.metrics_listener {
            self.bind("/deployment/metricsListener/bind", &m.bind, d);
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
                        codes::RUNTIME_LISTENER_CONFLICT,
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
    }

    /// Refuses (`listener-bind`) a bind that is not `IP:PORT`, and
    /// (`listener-not-private`) one whose address is not private
    /// ([`is_private_address`]) unless `d`'s `networkExposure` is
    /// `container-private`.
    fn bind(&mut self, at: &str, bind: &str, d: &Deployment) {
        let Ok(address) = bind.parse::<SocketAddr>() else {
            self.err(
                codes::RUNTIME_LISTENER_BIND,
                self.doc.locate(at),
                format!("`{bind}` is not a socket address (IP:PORT)"),
                "Write an address and port such as `127.0.0.1:8108` or `[::1]:8108`.",
            );
            return;
        };
        if d.network_exposure == NetworkExposure::ContainerPrivate
            || is_private_address(address.ip())
        {
            return;
        }
        let what = if address.ip().is_unspecified() {
            "listens on every interface of the host"
        } else {
            "is a public address"
        };
        self.err(
            codes::RUNTIME_LISTENER_NOT_PRIVATE,
            self.doc.locate(at),
            format!("`{bind}` {what}, not a private address"),
            "Bind a loopback, RFC 1918 (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16), unique-local (fc00::/7) or link-local address that only your TLS terminator reaches; if the process runs in a container whose network is private by construction, set `deployment.networkExposure: container-private`.",
        );
    }

    /// State key versions are positive decimal numbers, and
    /// `activeStateKey` is one of them.
    fn state_keys(&mut self, d: &Deployment) {
        for version in d.state_keys.keys() {
            let ok = !version.starts_with('0')
                && !version.is_empty()
                && version.len() <= 9
                && version.bytes().all(|b| b.is_ascii_digit());
            if !ok {
                self.err(
                    codes::RUNTIME_STATE_KEY_VERSION,
                    self.doc.locate_key(&ptr(&["deployment", "stateKeys", version])),
                    format!("state key version `{version}` is not a positive decimal number"),
                    "Key each state key by its version number, e.g. `\"1\": {keyRef: secret:file/state-key-1}`.",
                );
            }
        }
        if !d.state_keys.contains_key(&d.active_state_key.to_string()) {
            self.err(
                codes::RUNTIME_ACTIVE_STATE_KEY,
                self.doc.locate("/deployment/activeStateKey"),
                format!(
                    "activeStateKey {} is not a version under stateKeys",
                    d.active_state_key
                ),
                "Add that version under stateKeys, or set activeStateKey to one listed there.",
            );
        }
    }
}
