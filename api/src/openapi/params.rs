//! The parameters, headers and links the operations of the document
//! share (`Idempotency-Key`, `traceparent`, `Prefer: wait`,
//! `Preference-Applied`, the run's links), and the CloudEvents-shaped body
//! of the event route.

use serde_json::{json, Map, Value};

use crate::problems as p;

pub(super) fn path_param(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "path", "required": true, "description": description,
           "schema": {"type": "string"}})
}

pub(super) fn query_param(name: &str, description: &str, schema: Value) -> Value {
    json!({"name": name, "in": "query", "required": false, "description": description,
           "schema": schema})
}

pub(super) fn header_param(name: &str, description: &str, schema: Value) -> Value {
    json!({"name": name, "in": "header", "required": true, "description": description,
           "schema": schema})
}

/// The `Idempotency-Key` header of a start, from the rule the service
/// checks it with ([`crate::idempotency_key_valid`]).
pub(super) fn idempotency_key_param() -> Value {
    header_param(
        "Idempotency-Key",
        "1 to 255 visible ASCII characters; the same key with the same revision and input returns the same run.",
        json!({"type": "string", "minLength": 1, "maxLength": crate::MAX_IDEMPOTENCY_KEY_BYTES,
               "pattern": crate::IDEMPOTENCY_KEY_PATTERN}),
    )
}

/// The optional W3C Trace Context `traceparent` header of a start (by a
/// caller or by an event): with
/// traces on, the run joins the caller's trace (docs/operations.md
/// "Traces"); an unreadable one is ignored, never refused.
pub(super) fn traceparent_param() -> Value {
    json!({"name": "traceparent", "in": "header", "required": false,
           "description": "W3C Trace Context (`00-<trace id>-<parent span id>-<flags>`): with traces on, the run's admission span is its child. An unreadable value is ignored; the run then starts a trace of its own.",
           "schema": {"type": "string"}})
}

/// The optional RFC 7240 `Prefer` header of `GET /v1/runs/{run}`: its
/// `wait` preference, at most [`crate::MAX_RUN_WAIT_SECONDS`].
pub(super) fn prefer_wait_param() -> Value {
    json!({"name": "Prefer", "in": "header", "required": false,
           "description": format!("RFC 7240 preferences; `wait=N` (N whole seconds, 0 to {max}) answers once the run has ended (`finished`, `failed`, `cancelled`, `cancelled-after-effect`, `expired`; not `attention`) or N seconds have passed, with `Preference-Applied: wait=N`. N over {max} is 400 `{code}`; a `wait` that is not whole seconds, and other preferences, are ignored.", max = crate::MAX_RUN_WAIT_SECONDS, code = p::REQUEST_WAIT_TOO_LONG.code),
           "schema": {"type": "string"},
           "examples": ["wait=30"]})
}

/// The operations whose success answers may carry `Preference-Applied`
/// ([`prefer_wait_param`]).
pub(super) const PREFERENCE_APPLIED_ON: [&str; 1] = ["runStatus"];

/// The `headers` object of an answer to a `Prefer: wait=N` request.
pub(super) fn preference_applied_headers() -> Value {
    json!({"Preference-Applied": {
        "description": "`wait=N` when the service honoured the request's `wait` preference (RFC 7240 §3): the run has ended, or N seconds passed, or it had ended already. Absent when the preference was not applied (none given, not whole seconds, the service's waits all taken, or the service stopping): the run as it was.",
        "schema": {"type": "string", "pattern": "^wait=[0-9]+$"}
    }})
}

/// The operations a start's answer links to (OpenAPI `links`): each reads
/// the run id from the answer's `run`, so a client (and Schemathesis'
/// stateful phase) can chain them.
pub(super) const RUN_LINKS: [(&str, &str); 5] = [
    ("RunStatus", "runStatus"),
    ("InspectRun", "inspectRun"),
    ("CancelRun", "cancelRun"),
    ("RetrySame", "retrySame"),
    ("Reconcile", "reconcile"),
];

/// The operations whose success answers carry [`RUN_LINKS`]: a caller's
/// start (an event's start needs a signature no generic client has).
pub(super) const LINKED_FROM: [&str; 1] = ["startRun"];

/// The `links` object of an answer carrying a [`RunStatus`](crate::RunStatus).
pub(super) fn run_links() -> Value {
    let mut links = Map::new();
    for (name, operation) in RUN_LINKS {
        links.insert(
            name.to_owned(),
            json!({"operationId": operation, "parameters": {"run": "$response.body#/run"}}),
        );
    }
    Value::Object(links)
}

/// The CloudEvents-shaped body of `POST /v1/events/{workflow}/{trigger}`
/// (SPEC §2.4). The server reads it with its own strict checks; other
/// CloudEvents members are kept.
pub(super) fn cloud_event_schema() -> Value {
    json!({
        "type": "object",
        "description": "A CloudEvents-shaped event (SPEC §2.4); signed with HMAC-SHA256 under the event source's key: header `registry-signature: t=<unix seconds>,v1=<hex>` over `<t>.<raw body>`, at most 300 s from the service's clock.",
        "required": ["id", "source", "type"],
        "properties": {
            "id": {"type": "string", "minLength": 1, "description": "The event id (the default idempotency value)."},
            "source": {"type": "string", "description": "Must equal the `source` URI of the trigger's eventSources entry."},
            "type": {"type": "string", "description": "Must equal the trigger's `eventType`."},
            "time": {"type": "string", "format": "date-time"},
            "data": {"description": "Read by the trigger's mappings."}
        }
    })
}
