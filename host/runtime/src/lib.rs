//! `coordinator-runtime`: what a deployment is made of, read and checked.
//!
//! - The runtime file (`runtime.yaml`, `CoordinatorRuntimeConfig`): its
//!   types ([`config`]), its offline check ([`check`]) and its JSON Schema
//!   ([`runtime_schema`]), and a connection's binding and its digest
//!   ([`binding`]). Decisions where SPEC is silent: `docs/runtime.md`.
//! - [`package`]: workflow packages: write, load and verify against a digest.
//! - [`keys`]: the state keyring (AES-256-GCM sealing), admission and audit
//!   keys (HMAC-SHA256).
//! - [`secrets`]: secret references resolved (owner-only files, environment).
//! - [`net`]: the runtime file's `http(s)` URLs parsed (the `url` crate) and
//!   the one loopback rule.
//! - [`telemetry`]: the `telemetry` section and where traces are exported
//!   (the section, else the standard `OTEL_EXPORTER_OTLP_*` variables).
//! - [`audit`]: the audit journal (JSON Lines, one file per process).
//! - [`log_codes`]: the codes log lines carry that are not an HTTP
//!   problem's, each with its page.
//! - [`clock`]: the clock port ([`clock::Clock`], [`clock::SystemClock`],
//!   [`clock::ManualClock`]): the host's one wall-clock read.
//! - [`codes`]: the `runtime.*` and `secret.*` codes as data.
//!
//! Invariant: the check, the config types and the bindings read no secret
//! and open no connection; a secret reference is only ever checked for its
//! form and its provider there. Only [`secrets`] reads secret values.

#![deny(clippy::unwrap_used, clippy::indexing_slicing)]
#![warn(missing_docs)]

pub mod audit;
pub mod binding;
pub mod check;
pub mod clock;
pub mod codes;
pub mod config;
pub mod keys;
pub mod log_codes;
mod mapping;
pub mod net;
pub mod package;
pub mod secrets;
pub mod telemetry;

pub use check::{check_runtime, check_runtime_file, Mode, RuntimeCheck};
pub use config::RuntimeConfig;

use serde_json::Value;

/// The JSON Schema (draft 2020-12) of the runtime format, generated from
/// [`RuntimeConfig`] with `$id` [`config::SCHEMA_ID`] and the header pinned
/// (`apiVersion` and `kind` as `const`). `docs/schemas/runtime.v1beta1.schema.json`
/// is a copy kept equal by a test; `coordinatorctl schema --kind runtime`
/// prints it (pretty JSON plus a newline, see [`runtime_schema_text`]).
pub fn runtime_schema() -> Value {
    let mut schema = schemars::schema_for!(RuntimeConfig).to_value();
    if let Value::Object(map) = &mut schema {
        map.insert("$id".into(), Value::String(config::SCHEMA_ID.into()));
        map.insert(
            "description".into(),
            Value::String(
                "Registry Coordinator runtime file: connections, secret references and the deployment section (SPEC section 9)."
                    .into(),
            ),
        );
        if let Some(Value::Object(props)) = map.get_mut("properties") {
            props.insert(
                "apiVersion".into(),
                serde_json::json!({"const": config::API_VERSION}),
            );
            props.insert("kind".into(), serde_json::json!({"const": config::KIND}));
        }
    }
    schema
}

/// [`runtime_schema`] as the committed file holds it: pretty JSON and a
/// final newline.
pub fn runtime_schema_text() -> String {
    let mut s = serde_json::to_string_pretty(&runtime_schema()).unwrap_or_default();
    s.push('\n');
    s
}
