//! Every value whose key ends in `Ref`: a well-formed `secret:file/` or
//! `secret:env/` reference whose provider is configured. The value itself is
//! never echoed.

use coordinator_ir::pointer::escape_token;
use serde_json::Value;

use super::Checker;
use crate::codes;
use crate::config::RuntimeConfig;

impl Checker<'_> {
    /// Every member whose key ends in `Ref` holds a secret reference.
    pub(super) fn secret_refs(&mut self, cfg: &RuntimeConfig, value: &Value, at: String) {
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

    /// One secret reference `s`, found at `at`.
    fn secret_ref(&mut self, cfg: &RuntimeConfig, at: &str, s: &str) {
        let malformed = |c: &mut Self, why: &str| {
            // The value is never echoed: a malformed reference may be a
            // secret pasted in by mistake.
            c.err(
                codes::RUNTIME_SECRET_REFERENCE,
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
                    codes::RUNTIME_SECRET_PROVIDER_DISABLED,
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
                    codes::RUNTIME_SECRET_PROVIDER_DISABLED,
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
}
