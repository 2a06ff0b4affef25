//! The OpenAPI 3.1 document of the coordinator HTTP API (SPEC §8),
//! generated from the request and response types of this crate, so the
//! document cannot drift from what the server reads and writes.
//! `coordinatorctl openapi` prints it; `docs/openapi.json` keeps a copy that
//! a test holds equal, and the server's tests check that every path and
//! method it lists is routed.
//!
//! Schemas are JSON Schema draft 2020-12 (OpenAPI 3.1's dialect) under
//! `#/components/schemas`. Error answers are RFC 9457 problem documents
//! (`application/problem+json`, [`Problem`]); each operation lists, per
//! status, the `code`s it can answer, taken from [`crate::problems`] (the
//! schema of that status's `code` is an `enum` of them). `route.not-found`
//! and `method.not-allowed`, answered for paths and methods no operation
//! routes, are in the document's `x-problem-codes` with every other code.

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{json, Map, Value};

use crate::problems::{self as p, ProblemType};
use crate::{
    AdmissionRecovery, Doctor, ExecutionRecovery, ExportRun, ExportedCase, HoldReason, Holds,
    Inspection, MoveRun, Problem, Ready, Recovery, Retained, Retention, ReviewCompletion, RunList,
    RunStatus, StartRun,
};

/// The OpenAPI version the document declares.
pub const OPENAPI_VERSION: &str = "3.1.0";

/// How a route authenticates its caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Security {
    /// None (`/ready`, `/health`).
    None,
    /// An RFC 9068 access token as a bearer token (callers and operators).
    Caller,
    /// The Casework completion credential: a bearer token plus the
    /// `registry-recipient-binding` header.
    Completion,
    /// The `registry-signature` HMAC header of an event source (SPEC §2.4).
    EventSignature,
}

/// One routed operation: what the server answers at `method path`.
#[derive(Clone, Debug)]
pub struct Operation {
    /// `get` or `post`.
    pub method: &'static str,
    /// The path template, e.g. `/v1/runs/{run}`.
    pub path: &'static str,
    /// A unique, stable id.
    pub id: &'static str,
    /// One line for people.
    pub summary: &'static str,
    /// How the caller authenticates.
    pub security: Security,
    /// The request body's schema, when the route takes one.
    request: Option<Value>,
    /// Success statuses and their body schemas.
    success: Vec<(u16, &'static str, Value)>,
    /// The problem codes the route can answer (their statuses are the
    /// route's problem statuses).
    problems: Vec<&'static ProblemType>,
    /// Parameters (path, query, header), as OpenAPI objects.
    parameters: Vec<Value>,
}

mod params;

use params::*;

/// Codes of every route that reads the store: an outage, and a stored value
/// this process's runtime file cannot open.
const STORE: [&ProblemType; 2] = [&p::SERVICE_UNAVAILABLE, &p::DEPLOYMENT_REFUSED];
/// Codes of every route that reads a JSON body.
const BODY: [&ProblemType; 3] = [
    &p::REQUEST_INVALID,
    &p::REQUEST_TOO_LARGE,
    &p::REQUEST_UNSUPPORTED_MEDIA_TYPE,
];
/// Codes of every route a caller's access token opens.
const CALLER: [&ProblemType; 2] = [&p::AUTHENTICATION_REFUSED, &p::AUTHORIZATION_REFUSED];
/// Codes of an admission, whether a caller's start or an event's.
const ADMISSION: [&ProblemType; 9] = [
    &p::WORKFLOW_NOT_FOUND,
    &p::IDEMPOTENCY_KEY_REUSED,
    &p::REVISION_NOT_ACTIVE,
    &p::ADMISSION_HELD,
    &p::ADMISSION_RECOVERY_ONLY,
    &p::DEPLOYMENT_ACTIVATION_CHANGED,
    &p::BINDING_CONFLICT,
    &p::AUDIT_RESPONSE_UNAVAILABLE,
    &p::INPUT_INVALID,
];

/// The codes of `groups` and `more`, without repeats, in code order.
fn codes(
    groups: &[&[&'static ProblemType]],
    more: &[&'static ProblemType],
) -> Vec<&'static ProblemType> {
    let mut all: Vec<&'static ProblemType> =
        groups.iter().flat_map(|g| g.iter().copied()).collect();
    all.extend_from_slice(more);
    all.sort_by_key(|t| t.code);
    all.dedup_by_key(|t| t.code);
    all
}

/// Every operation the service routes, in the order of SPEC §8's table.
/// `generator` collects the component schemas (in the order the operations
/// first name them, which is the order of the document's components).
pub fn operations(generator: &mut SchemaGenerator) -> Vec<Operation> {
    let status = schema_of::<RunStatus>(generator);
    let holds = schema_of::<Holds>(generator);
    let ready = schema_of::<Ready>(generator);
    let mut all = probe_operations(ready);
    all.extend(run_operations(generator, &status));
    all.extend(inbound_operations(generator, &status));
    all.extend(operator_operations(generator, &holds));
    all.push(served_document_operation());
    all
}

/// `GET /v1/openapi.json`: the document as the serving process admits
/// starts ([`served_document`]).
fn served_document_operation() -> Operation {
    Operation {
        method: "get",
        path: SERVED_DOCUMENT_PATH,
        id: "openApiDocument",
        summary: "This document as this process serves it: the start's body one variant per active workflow, with that revision's input schema.",
        security: Security::Caller,
        request: None,
        success: vec![(
            200,
            "The OpenAPI 3.1 document.",
            json!({"type": "object", "required": ["openapi", "paths"]}),
        )],
        problems: codes(&[&STORE, &CALLER], &[]),
        parameters: vec![],
    }
}

/// Where a service serves [`served_document`].
pub const SERVED_DOCUMENT_PATH: &str = "/v1/openapi.json";

/// A workflow as a serving process admits it: one variant of the start's
/// body in [`served_document`].
#[derive(Clone, Copy, Debug)]
pub struct ServedWorkflow<'a> {
    /// The workflow name.
    pub workflow: &'a str,
    /// Its active revision (`sha256:<hex>`).
    pub revision: &'a str,
    /// That revision's input schema (JSON Schema, self-contained: the
    /// Program's resolved schema).
    pub input: &'a Value,
}

/// The document a service serves at [`SERVED_DOCUMENT_PATH`]: [`document`]
/// with the start's request body (`POST /v1/runs`) narrowed to one
/// variant per workflow in `workflows` (`workflow` and `revision` as
/// constants, `input` as that revision's input schema), so a client
/// generated from it is typed per workflow and a generator of requests
/// sends only starts the service could accept. With no workflow (a caller
/// granted no start) it is [`document`] unchanged.
pub fn served_document(workflows: &[ServedWorkflow<'_>]) -> Value {
    let mut doc = document();
    if workflows.is_empty() {
        return doc;
    }
    let variants: Vec<Value> = workflows
        .iter()
        .map(|w| {
            json!({
                "type": "object",
                "title": format!("Start {}", w.workflow),
                "additionalProperties": false,
                "required": ["workflow", "revision", "input"],
                "properties": {
                    "workflow": {"const": w.workflow, "description": "The workflow name."},
                    "revision": {"const": w.revision, "description": "Its active revision."},
                    "input": w.input,
                },
            })
        })
        .collect();
    doc["paths"]["/v1/runs"]["post"]["requestBody"]["content"]["application/json"]["schema"] =
        json!({"oneOf": variants});
    doc
}

/// The schema of `T`, as a reference into the generator's components.
fn schema_of<T: JsonSchema>(generator: &mut SchemaGenerator) -> Value {
    generator.subschema_for::<T>().to_value()
}

/// `/ready` and `/health`, which need no credentials.
fn probe_operations(ready: Value) -> Vec<Operation> {
    vec![
        Operation {
            method: "get",
            path: "/ready",
            id: "ready",
            summary: "Readiness: 503 while the store is unavailable.",
            security: Security::None,
            request: None,
            success: vec![
                (200, "The store answered.", ready.clone()),
                (503, "The store did not answer.", ready),
            ],
            problems: vec![],
            parameters: vec![],
        },
        Operation {
            method: "get",
            path: "/health",
            id: "health",
            summary: "Liveness.",
            security: Security::None,
            request: None,
            success: vec![(
                200,
                "The process is up.",
                json!({"type": "object", "properties": {"live": {"type": "boolean"}}, "required": ["live"]}),
            )],
            problems: vec![],
            parameters: vec![],
        },
    ]
}

/// A caller's routes under `/v1/runs`: start, list, status, inspect and the
/// three recovery actions. `status` is the `RunStatus` schema.
fn run_operations(generator: &mut SchemaGenerator, status: &Value) -> Vec<Operation> {
    let run = path_param("run", "The run id.");
    vec![
        Operation {
            method: "post",
            path: "/v1/runs",
            id: "startRun",
            summary: "Start a run of a workflow's active revision (action `start`).",
            security: Security::Caller,
            request: Some(schema_of::<StartRun>(generator)),
            success: vec![
                (201, "A new run.", status.clone()),
                (200, "The run this key, revision and input already started.", status.clone()),
            ],
            problems: codes(
                &[&STORE, &BODY, &CALLER, &ADMISSION],
                &[&p::IDEMPOTENCY_KEY_REQUIRED],
            ),
            parameters: vec![idempotency_key_param(), traceparent_param()],
        },
        Operation {
            method: "get",
            path: "/v1/runs",
            id: "listRuns",
            summary: "List runs, newest first (action `status`; non-operators see their own).",
            security: Security::Caller,
            request: None,
            success: vec![(200, "A page of runs.", schema_of::<RunList>(generator))],
            problems: codes(&[&STORE, &CALLER], &[&p::REQUEST_INVALID]),
            parameters: vec![
                query_param("workflow", "Only this workflow.", json!({"type": "string"})),
                query_param("state", "Only runs in this state.", json!({"type": "string", "enum": crate::RUN_STATES})),
                query_param("attention", "Only runs that do (or do not) need an operator.", json!({"type": "boolean"})),
                query_param("admittedBefore", "Only runs admitted before this RFC 3339 instant.", json!({"type": "string", "format": "date-time"})),
                query_param("step", "Only runs whose current step (the last they visited) is this one. With `step` or `effect` a page may hold fewer than `limit` runs, or none, while `nextCursor` is set: follow it to the end.", json!({"type": "string"})),
                query_param("effect", "Only runs whose current step's effect is this one (a mutation or evaluation call).", json!({"type": "string", "enum": crate::EFFECT_STATES})),
                query_param("limit", "Page size (default 20).", json!({"type": "integer", "minimum": 1, "maximum": crate::MAX_LIST_LIMIT, "default": crate::DEFAULT_LIST_LIMIT})),
                query_param("cursor", "The `nextCursor` of the previous page.", json!({"type": "string", "pattern": crate::LIST_CURSOR_PATTERN})),
            ],
        },
        Operation {
            method: "get",
            path: "/v1/runs/{run}",
            id: "runStatus",
            summary: "A run's status (action `status`).",
            security: Security::Caller,
            request: None,
            success: vec![(200, "The run; with `Prefer: wait=N`, once it has ended or N seconds have passed.", status.clone())],
            problems: codes(&[&STORE, &CALLER], &[&p::RUN_NOT_FOUND, &p::REQUEST_WAIT_TOO_LONG]),
            parameters: vec![run.clone(), prefer_wait_param()],
        },
        Operation {
            method: "get",
            path: "/v1/runs/{run}/inspect",
            id: "inspectRun",
            summary: "A run's steps, effects and waits; never inputs, responses or commands (action `inspect`).",
            security: Security::Caller,
            request: None,
            success: vec![(200, "The inspection.", schema_of::<Inspection>(generator))],
            problems: codes(&[&STORE, &CALLER], &[&p::RUN_NOT_FOUND]),
            parameters: vec![run],
        },
        recovery_operation("/v1/runs/{run}/cancel", "cancelRun", "Cancel a run (action `cancel`); never undoes an accepted effect.", generator, status),
        recovery_operation("/v1/runs/{run}/retry-same", "retrySame", "Send an uncertain call again with the same bytes and key (action `retry-same`).", generator, status),
        recovery_operation("/v1/runs/{run}/reconcile", "reconcile", "Settle an uncertain call from the product's receipt (action `reconcile`).", generator, status),
        move_operation(generator, status),
        export_operation(generator),
    ]
}

/// `POST /v1/runs/{run}/export`: the run written as one scenario case
/// (action `export`, operators only; audited as `run.export`).
fn export_operation(generator: &mut SchemaGenerator) -> Operation {
    caller_action(
        (
            "/v1/runs/{run}/export",
            "exportRun",
            "Write an ended run as one scenario case that passes on its revision, input members redacted (action `export`, operators only).",
        ),
        schema_of::<ExportRun>(generator),
        ("The case.", schema_of::<ExportedCase>(generator)),
        &[
            &p::RUN_NOT_FOUND,
            &p::AUDIT_RESPONSE_UNAVAILABLE,
            &p::EXPORT_NOT_REPRODUCIBLE,
            &p::EXPORT_PAYLOAD_ERASED,
            &p::EXPORT_REDACT_INVALID,
        ],
        vec![path_param("run", "The run id.")],
    )
}

/// `POST /v1/runs/{run}/move`: a waiting run moved to the revision a move
/// certificate names (action `move`, operators only); the run's `status`
/// after it. Its body may be up to [`crate::MAX_MOVE_BODY_BYTES`].
fn move_operation(generator: &mut SchemaGenerator, status: &Value) -> Operation {
    caller_action(
        (
            "/v1/runs/{run}/move",
            "moveRun",
            "Move a waiting run to the revision a move certificate names (action `move`, operators only; a body of at most 1 MiB).",
        ),
        schema_of::<MoveRun>(generator),
        ("The run on its new revision, the move listed in `moves`.", status.clone()),
        &[
            &p::RUN_NOT_FOUND,
            &p::EXECUTION_HELD,
            &p::BINDING_LIVE_CONFLICT,
            &p::RESTORE_LEASE_INCOMPATIBLE,
            &p::AUDIT_RESPONSE_UNAVAILABLE,
            &p::MOVE_CERTIFICATE_INVALID,
            &p::MOVE_RACED,
            &p::MOVE_REVISION_DIFFERS,
            &p::MOVE_RUN_ENDED,
            &p::MOVE_RUN_HELD,
            &p::MOVE_RUN_NOT_WAITING,
            &p::MOVE_TARGET_NOT_ACTIVE,
            &p::MOVE_WAIT_REFUSED,
        ],
        vec![path_param("run", "The run id.")],
    )
}

/// A recovery action on one run at `path` (`cancel`, `retry-same`,
/// `reconcile`): a `Recovery` body, the run's `status` after it.
fn recovery_operation(
    path: &'static str,
    id: &'static str,
    summary: &'static str,
    generator: &mut SchemaGenerator,
    status: &Value,
) -> Operation {
    caller_action(
        (path, id, summary),
        schema_of::<Recovery>(generator),
        ("The run after the action.", status.clone()),
        &[
            &p::RUN_NOT_FOUND,
            &p::RUN_PAYLOAD_ERASED,
            &p::EXECUTION_HELD,
            &p::BINDING_LIVE_CONFLICT,
            &p::RECEIPT_EXPIRED,
            &p::RECONCILE_RACED,
            &p::RECONCILE_REFUSED,
            &p::RECONCILE_UNSUPPORTED,
            &p::RETRY_REFUSED,
            &p::RESTORE_LEASE_INCOMPATIBLE,
            &p::AUDIT_RESPONSE_UNAVAILABLE,
        ],
        vec![path_param("run", "The run id.")],
    )
}

/// A `post` that a caller's access token opens, named by its `path`, `id`
/// and `summary`: it reads `request` and answers 200 with `answer` (a
/// description and a schema); it can answer the codes of the store, of a
/// body and of a caller, and `more`.
fn caller_action(
    (path, id, summary): (&'static str, &'static str, &'static str),
    request: Value,
    answer: (&'static str, Value),
    more: &[&'static ProblemType],
    parameters: Vec<Value>,
) -> Operation {
    Operation {
        method: "post",
        path,
        id,
        summary,
        security: Security::Caller,
        request: Some(request),
        success: vec![(200, answer.0, answer.1)],
        problems: codes(&[&STORE, &BODY, &CALLER], more),
        parameters,
    }
}

/// What products send in: a signed event that starts a run, and Casework's
/// review wake-up. `status` is the `RunStatus` schema.
fn inbound_operations(generator: &mut SchemaGenerator, status: &Value) -> Vec<Operation> {
    vec![
        Operation {
            method: "post",
            path: "/v1/events/{workflow}/{trigger}",
            id: "eventStart",
            summary: "Start a run from a signed product event (SPEC §2.4).",
            security: Security::EventSignature,
            request: Some(cloud_event_schema()),
            success: vec![
                (201, "A new run.", status.clone()),
                (200, "The run this event already started.", status.clone()),
            ],
            problems: codes(
                &[&STORE, &BODY, &ADMISSION],
                &[
                    &p::AUTHENTICATION_REFUSED,
                    &p::TRIGGER_NOT_FOUND,
                    &p::EVENT_SOURCE_MISMATCH,
                    &p::EVENT_TYPE_MISMATCH,
                    &p::EVENT_DATA_INVALID,
                ],
            ),
            parameters: vec![
                path_param("workflow", "The workflow name."),
                path_param("trigger", "The trigger name."),
                header_param(
                    "registry-signature",
                    "`t=<unix seconds>,v1=<hex HMAC-SHA256>`.",
                    json!({"type": "string"}),
                ),
                traceparent_param(),
            ],
        },
        Operation {
            method: "post",
            path: "/v1/review-completions",
            id: "reviewCompletion",
            summary: "Casework wake-up: brings the next read of a waiting review forward.",
            security: Security::Completion,
            request: Some(schema_of::<ReviewCompletion>(generator)),
            success: vec![(202, "Accepted.", json!({"type": "object"}))],
            problems: codes(
                &[&STORE, &BODY],
                &[&p::AUTHENTICATION_REFUSED, &p::EVENT_RECOVERY_ONLY],
            ),
            parameters: vec![header_param(
                "registry-recipient-binding",
                "The recipient binding of the connection's `completion` block.",
                json!({"type": "string"}),
            )],
        },
    ]
}

/// The operator's routes: doctor, the restore and admission holds, and
/// retention. `holds` is the `Holds` schema.
fn operator_operations(generator: &mut SchemaGenerator, holds: &Value) -> Vec<Operation> {
    vec![
        Operation {
            method: "get",
            path: "/v1/doctor",
            id: "doctor",
            summary: "Activation, audit, store, holds and uncertain work (operator).",
            security: Security::Caller,
            request: None,
            success: vec![(200, "The report.", schema_of::<Doctor>(generator))],
            problems: codes(&[&STORE, &CALLER], &[]),
            parameters: vec![],
        },
        hold_operation("/v1/restore-hold", "restoreHold", "Place the restore hold (and the admission hold) (operator).", schema_of::<HoldReason>(generator), holds),
        hold_operation("/v1/release-restore-hold", "releaseRestoreHold", "Release the restore hold once held work is resolved or attested (operator).", schema_of::<HoldReason>(generator), holds),
        hold_operation("/v1/complete-execution-recovery", "completeExecutionRecovery", "Attest the execution history under the restore hold (operator).", schema_of::<ExecutionRecovery>(generator), holds),
        hold_operation("/v1/release-admission-hold", "releaseAdmissionHold", "Release the admission hold with attestations (operator).", schema_of::<AdmissionRecovery>(generator), holds),
        Operation {
            method: "post",
            path: "/v1/retention",
            id: "retain",
            summary: "Erase the payloads of runs that ended before a cutoff, at most 100 per call (operator).",
            security: Security::Caller,
            request: Some(schema_of::<Retention>(generator)),
            success: vec![(200, "What was erased.", schema_of::<Retained>(generator))],
            problems: codes(&[&STORE, &BODY, &CALLER], &[]),
            parameters: vec![],
        },
    ]
}

/// A hold action at `path` taking a `request` body and answering the
/// `holds` after it.
fn hold_operation(
    path: &'static str,
    id: &'static str,
    summary: &'static str,
    request: Value,
    holds: &Value,
) -> Operation {
    caller_action(
        (path, id, summary),
        request,
        ("The holds after the action.", holds.clone()),
        &[
            &p::RESTORE_HOLD_REQUIRED,
            &p::RESTORE_REVIEW_REQUIRED,
            &p::RESTORE_UNRESOLVED,
            &p::AUDIT_RESPONSE_UNAVAILABLE,
        ],
        vec![],
    )
}

/// The OpenAPI 3.1 document of the API.
pub fn document() -> Value {
    let mut generator = SchemaSettings::draft2020_12()
        .with(|s| s.definitions_path = "/components/schemas".into())
        .into_generator();
    let problem = generator.subschema_for::<Problem>().to_value();
    let operations = operations(&mut generator);
    let mut paths = Map::new();
    for op in operations {
        let mut responses = Map::new();
        for (code, description, schema) in &op.success {
            let mut response = json!({"description": description,
                   "content": {"application/json": {"schema": schema}}});
            if LINKED_FROM.contains(&op.id) {
                response["links"] = run_links();
            }
            if PREFERENCE_APPLIED_ON.contains(&op.id) {
                response["headers"] = preference_applied_headers();
            }
            responses.insert(code.to_string(), response);
        }
        let mut statuses: Vec<u16> = op.problems.iter().map(|t| t.status).collect();
        statuses.sort_unstable();
        statuses.dedup();
        for status in statuses {
            let of_status: Vec<&ProblemType> = op
                .problems
                .iter()
                .copied()
                .filter(|t| t.status == status)
                .collect();
            let description = of_status
                .iter()
                .map(|t| format!("`{}`: {}.", t.code, t.title))
                .collect::<Vec<_>>()
                .join(" ");
            let codes: Vec<&str> = of_status.iter().map(|t| t.code).collect();
            responses.insert(
                status.to_string(),
                json!({"description": description,
                "content": {"application/problem+json": {"schema": {
                    "allOf": [problem],
                    "properties": {"code": {"enum": codes}}
                }}}}),
            );
        }
        let mut operation = json!({
            "operationId": op.id,
            "summary": op.summary,
            "responses": responses,
        });
        if !op.parameters.is_empty() {
            operation["parameters"] = Value::Array(op.parameters.clone());
        }
        if let Some(request) = &op.request {
            operation["requestBody"] = json!({
                "required": true,
                "content": {"application/json": {"schema": request}}
            });
        }
        operation["security"] = match op.security {
            Security::None | Security::EventSignature => json!([]),
            Security::Caller => json!([{"accessToken": []}]),
            Security::Completion => json!([{"completionToken": []}]),
        };
        let item = paths
            .entry(op.path.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        item[op.method] = operation;
    }
    let schemas: Map<String, Value> = generator.definitions().clone();
    json!({
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "Registry Coordinator",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The coordinator service API (SPEC §8). JSON bodies of at most 64 KiB (1 MiB for a run's move); a duplicate member is refused (400); every answer carries `Cache-Control: no-store`; errors are RFC 9457 problem documents with a stable `code`."
        },
        "paths": paths,
        "x-problem-codes": p::ALL.iter().map(|t| json!({
            "code": t.code, "status": t.status, "title": t.title, "next": t.next,
        })).collect::<Vec<_>>(),
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "accessToken": {
                    "type": "http", "scheme": "bearer", "bearerFormat": "JWT",
                    "description": "An RFC 9068 access token (`typ: at+jwt`) of the configured issuer and audience; policies keyed by `client_id` grant actions."
                },
                "completionToken": {
                    "type": "http", "scheme": "bearer",
                    "description": format!("The Casework completion token of a connection's `completion` block (1 to {} bytes), with the `registry-recipient-binding` header.", crate::MAX_COMPLETION_TOKEN_BYTES)
                }
            }
        }
    })
}

/// `(method, path)` of every routed operation, for route checks.
pub fn routes() -> Vec<(&'static str, &'static str)> {
    let mut generator = SchemaGenerator::default();
    operations(&mut generator)
        .into_iter()
        .map(|op| (op.method, op.path))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reference_resolves_and_every_operation_has_an_id() {
        let doc = document();
        let text = doc.to_string();
        let schemas = doc["components"]["schemas"].as_object().expect("schemas");
        let prefix = "\"$ref\":\"#/components/schemas/";
        for (i, _) in text.match_indices(prefix) {
            let rest = text.get(i + prefix.len()..).unwrap_or_default();
            let name = rest.split('"').next().unwrap_or_default();
            assert!(schemas.contains_key(name), "unresolved $ref {name}");
        }
        let mut ids = std::collections::BTreeSet::new();
        for (_, item) in doc["paths"].as_object().expect("paths") {
            for (_, op) in item.as_object().expect("path item") {
                let id = op["operationId"].as_str().expect("operationId");
                assert!(ids.insert(id.to_owned()), "duplicate operationId {id}");
                assert!(op["responses"].as_object().is_some_and(|r| !r.is_empty()));
            }
        }
        assert_eq!(ids.len(), routes().len());
        assert!(schemas.contains_key("RunStatus") && schemas.contains_key("Problem"));
        // Every link names an operation of the document, and each linked
        // operation takes the `run` the link fills in.
        let start = &doc["paths"]["/v1/runs"]["post"]["responses"];
        for status in ["200", "201"] {
            let links = start[status]["links"].as_object().expect("links");
            assert_eq!(links.len(), RUN_LINKS.len());
            for (_, link) in links {
                let id = link["operationId"].as_str().expect("operationId");
                assert!(ids.contains(id), "link to unknown {id}");
                assert_eq!(link["parameters"]["run"], "$response.body#/run");
            }
        }
    }

    /// Every registry code is answered by some operation (or, for
    /// `route.not-found` and `method.not-allowed`, by any unrouted path or
    /// method), every listed code is the registry's, under its status.
    #[test]
    fn each_operation_lists_its_codes_from_the_registry() {
        let doc = document();
        let mut listed = std::collections::BTreeSet::new();
        for (path, item) in doc["paths"].as_object().expect("paths") {
            for (method, op) in item.as_object().expect("path item") {
                for (status, response) in op["responses"].as_object().expect("responses") {
                    let Some(schema) = response["content"].get("application/problem+json") else {
                        continue;
                    };
                    let codes = schema["schema"]["properties"]["code"]["enum"]
                        .as_array()
                        .expect("a problem status lists its codes");
                    assert!(!codes.is_empty(), "{method} {path} {status}");
                    for code in codes {
                        let code = code.as_str().expect("code");
                        let known = p::ALL.iter().find(|t| t.code == code).expect(code);
                        assert_eq!(
                            known.status.to_string(),
                            *status,
                            "{code} at {method} {path}"
                        );
                        listed.insert(code.to_owned());
                    }
                }
            }
        }
        for t in p::ALL {
            assert!(
                listed.contains(t.code)
                    || ["route.not-found", "method.not-allowed"].contains(&t.code),
                "`{}` is answered by no operation in the document",
                t.code
            );
        }
        assert_eq!(
            doc["x-problem-codes"].as_array().map(Vec::len),
            Some(p::ALL.len())
        );
        // The start route names the seed's key-reuse code under 409.
        let start = &doc["paths"]["/v1/runs"]["post"]["responses"]["409"];
        let text = start.to_string();
        assert!(text.contains("idempotency.key-reused"), "{text}");
    }
}
