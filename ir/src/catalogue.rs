//! The ten host operations (SPEC §5, decided), as data: product, effect,
//! idempotency key, recovery, receipt capability, exposed completions, and the
//! JSON Schemas (draft 2020-12) of input, output and completion values
//! (SPEC §5.1 and §6).
//!
//! Every object schema here is closed (`additionalProperties: false`) except
//! the members SPEC §5.1 declares `object` or `any` (`data`, `results`,
//! `summary`, `body`, `usage`, answer maps), which are open.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The product family an operation talks to (the first word `explain` prints).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Product {
    Breg,
    Messaging,
    Scheduling,
    Casework,
    ExternalHttp,
    Decision,
}

impl Product {
    /// The name `explain` prints.
    pub fn as_str(self) -> &'static str {
        match self {
            Product::Breg => "breg",
            Product::Messaging => "messaging",
            Product::Scheduling => "scheduling",
            Product::Casework => "casework",
            Product::ExternalHttp => "external-http",
            Product::Decision => "decision",
        }
    }

    /// The `runtime.yaml` connection `type` that serves this product.
    pub fn connection_type(self) -> &'static str {
        match self {
            Product::Breg => "breg",
            Product::Messaging => "messaging",
            Product::Scheduling => "scheduling",
            Product::Casework => "casework-review-producer",
            Product::ExternalHttp => "external-http",
            Product::Decision => "decision",
        }
    }
}

/// What a call does to the product.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Effect {
    /// Safe to repeat.
    Read,
    /// Changes product state; sent with an idempotency key.
    Mutation,
    /// A decision evaluation: never sent twice once it may have been sent.
    Evaluation,
}

impl Effect {
    /// The name `explain` prints.
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Read => "read",
            Effect::Mutation => "mutation",
            Effect::Evaluation => "evaluation",
        }
    }
}

/// How an uncertain or failed call is recovered (SPEC §5 rules).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Recovery {
    /// Read again automatically, within the deadline.
    ReadAgain,
    /// Hold on an unknown effect; an operator may resend the same command.
    SameCommand,
    /// As `SameCommand`, and the product can answer a receipt lookup for the
    /// original idempotency key (`reconcile`).
    SameCommandAndReceipt,
    /// Hold once it may have been sent; never sent again.
    HoldAfterDispatch,
}

impl Recovery {
    /// The name `explain` prints.
    pub fn as_str(self) -> &'static str {
        match self {
            Recovery::ReadAgain => "read-again",
            Recovery::SameCommand => "same-command",
            Recovery::SameCommandAndReceipt => "same-command-and-receipt",
            Recovery::HoldAfterDispatch => "hold-after-dispatch",
        }
    }
}

/// One catalogue operation. Copied into each Program that uses it, so a run
/// keeps the descriptor it was admitted under.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperationDescriptor {
    /// Versioned name, e.g. `breg.read-record/v1`.
    pub id: String,
    pub product: Product,
    pub effect: Effect,
    /// Whether every request carries an `Idempotency-Key`.
    pub idempotency_key: bool,
    pub recovery: Recovery,
    /// Whether the product answers receipt lookups (`reconcile`).
    pub receipt: bool,
    /// Names of the completions the operation exposes (`wait-for`).
    pub completions: Vec<String>,
    /// Whether an alias must name a BReg action (`action: {id, kind}`).
    pub needs_action: bool,
}

/// The member (JSON Pointer) of an accepted call's output that is the
/// product's handle for the completions it exposes (SPEC §6 "Completion of
/// a review": the Casework review request's `id`). A host observes a
/// completion through it.
pub const COMPLETION_HANDLE: &str = "/id";

/// The ten operation names, in SPEC §5 order.
pub const OPERATION_IDS: [&str; 10] = [
    "breg.read-record/v1",
    "breg.invoke-action/v1",
    "messaging.submit-message/v1",
    "scheduling.read-availability/v1",
    "scheduling.create-appointment/v1",
    "casework.submit-review-request/v1",
    "casework.read-review-request/v1",
    "casework.withdraw-review-request/v1",
    "external.get/v1",
    "evaluation.evaluate/v1",
];

/// Looks up a catalogue operation by its versioned name; `None` when the
/// catalogue has no such operation.
pub fn lookup(id: &str) -> Option<OperationDescriptor> {
    use Effect::*;
    use Product::*;
    use Recovery::*;
    let (product, effect, key, recovery, receipt, completions, needs_action): (
        Product,
        Effect,
        bool,
        Recovery,
        bool,
        &[&str],
        bool,
    ) = match id {
        "breg.read-record/v1" => (Breg, Read, false, ReadAgain, false, &[], false),
        "breg.invoke-action/v1" => (Breg, Mutation, true, SameCommand, false, &[], true),
        "messaging.submit-message/v1" => (
            Messaging,
            Mutation,
            true,
            SameCommandAndReceipt,
            true,
            &[],
            false,
        ),
        "scheduling.read-availability/v1" => {
            (Scheduling, Read, false, ReadAgain, false, &[], false)
        }
        "scheduling.create-appointment/v1" => (
            Scheduling,
            Mutation,
            true,
            SameCommandAndReceipt,
            true,
            &[],
            false,
        ),
        "casework.submit-review-request/v1" => (
            Casework,
            Mutation,
            true,
            SameCommand,
            false,
            &["result"],
            false,
        ),
        "casework.read-review-request/v1" => (Casework, Read, false, ReadAgain, false, &[], false),
        "casework.withdraw-review-request/v1" => {
            (Casework, Mutation, true, SameCommand, false, &[], false)
        }
        "external.get/v1" => (ExternalHttp, Read, false, ReadAgain, false, &[], false),
        "evaluation.evaluate/v1" => (
            Decision,
            Evaluation,
            false,
            HoldAfterDispatch,
            false,
            &[],
            false,
        ),
        _ => return None,
    };
    Some(OperationDescriptor {
        id: id.to_owned(),
        product,
        effect,
        idempotency_key: key,
        recovery,
        receipt,
        completions: completions.iter().map(|c| (*c).to_owned()).collect(),
        needs_action,
    })
}

fn string() -> Value {
    json!({"type": "string"})
}

fn bounded_string(min: u64, max: u64) -> Value {
    json!({"type": "string", "minLength": min, "maxLength": max})
}

fn date_time() -> Value {
    json!({"type": "string", "format": "date-time"})
}

fn open_object() -> Value {
    json!({"type": "object"})
}

/// A closed object schema: `required` lists the required members.
fn closed(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    })
}

fn external_reference() -> Value {
    closed(
        json!({"product": string(), "recordType": string(), "identifier": string()}),
        &["product", "recordType", "identifier"],
    )
}

fn decision() -> Value {
    closed(
        json!({"outcome": string(), "decidedAt": date_time(), "note": string()}),
        &["outcome", "decidedAt"],
    )
}

/// JSON Schema of the operation's input; `None` for an unknown operation.
pub fn input_schema(id: &str) -> Option<Value> {
    Some(match id {
        "breg.read-record/v1" => closed(
            json!({"collection": bounded_string(1, 128), "recordId": bounded_string(1, 512)}),
            &["collection", "recordId"],
        ),
        "breg.invoke-action/v1" => closed(json!({"input": open_object()}), &["input"]),
        "messaging.submit-message/v1" => closed(
            json!({
                "senderProfile": string(),
                "to": {
                    "oneOf": [
                        closed(json!({"email": {"type": "string", "format": "email"}}), &["email"]),
                        closed(json!({"phone": string()}), &["phone"])
                    ]
                },
                "template": closed(json!({"id": string(), "version": string()}), &["id", "version"]),
                "locale": string(),
                "data": open_object(),
                "correlationId": string()
            }),
            &["senderProfile", "to", "template", "locale", "data"],
        ),
        "scheduling.read-availability/v1" => closed(
            json!({
                "offering": string(),
                "start": date_time(),
                "end": date_time(),
                "limit": {"type": "integer", "minimum": 1, "maximum": 100}
            }),
            &["offering", "start", "end", "limit"],
        ),
        "scheduling.create-appointment/v1" => closed(
            json!({
                "offering": string(),
                "start": date_time(),
                "party": closed(json!({"reference": string()}), &["reference"]),
                "externalReference": external_reference()
            }),
            &["offering", "start", "party"],
        ),
        "casework.submit-review-request/v1" => closed(
            json!({"subject": external_reference(), "policy": string(), "summary": open_object()}),
            &["subject", "policy", "summary"],
        ),
        "casework.read-review-request/v1" => closed(json!({"id": string()}), &["id"]),
        "casework.withdraw-review-request/v1" => closed(
            json!({"id": string(), "reason": string()}),
            &["id", "reason"],
        ),
        "external.get/v1" => closed(
            json!({
                "path": {"type": "string", "pattern": "^/"},
                "query": {"type": "object", "additionalProperties": string()}
            }),
            &["path"],
        ),
        "evaluation.evaluate/v1" => closed(
            json!({
                "state": open_object(),
                "questions": {
                    "type": "object",
                    "additionalProperties": closed(
                        json!({
                            "type": {"enum": ["choice", "predicate", "score"]},
                            "instructions": string(),
                            "choices": {"type": "array", "items": string()}
                        }),
                        &["type", "instructions"]
                    )
                }
            }),
            &["state", "questions"],
        ),
        _ => return None,
    })
}

/// JSON Schema of the operation's success output (before an alias narrows
/// it); `None` for an unknown operation.
pub fn output_schema(id: &str) -> Option<Value> {
    Some(match id {
        "breg.read-record/v1" => closed(
            json!({"collection": string(), "recordId": string(), "revision": string(), "data": open_object()}),
            &["collection", "recordId", "revision", "data"],
        ),
        "breg.invoke-action/v1" => closed(
            json!({"action": string(), "results": open_object()}),
            &["action", "results"],
        ),
        "messaging.submit-message/v1" => closed(
            json!({"id": {"type": "string", "format": "uuid"}, "status": string()}),
            &["id", "status"],
        ),
        "scheduling.read-availability/v1" => closed(
            json!({
                "items": {
                    "type": "array",
                    "items": closed(
                        json!({"start": date_time(), "end": date_time(), "free": {"type": "integer"}}),
                        &["start", "end", "free"]
                    )
                },
                "nextCursor": {"type": ["string", "null"]}
            }),
            &["items", "nextCursor"],
        ),
        "scheduling.create-appointment/v1" => closed(
            json!({"appointmentId": string(), "offering": string(), "start": date_time(), "end": date_time()}),
            &["appointmentId", "offering", "start", "end"],
        ),
        "casework.submit-review-request/v1" => closed(
            json!({"id": string(), "status": {"const": "pending"}}),
            &["id", "status"],
        ),
        "casework.read-review-request/v1" => closed(
            json!({
                "id": string(),
                "status": {"enum": ["pending", "decided", "withdrawn"]},
                "decision": decision()
            }),
            &["id", "status"],
        ),
        "casework.withdraw-review-request/v1" => closed(
            json!({"id": string(), "status": string()}),
            &["id", "status"],
        ),
        "external.get/v1" => closed(
            json!({"status": {"type": "integer"}, "body": {}}),
            &["status", "body"],
        ),
        "evaluation.evaluate/v1" => closed(
            json!({
                "model": string(),
                "answers": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "object",
                        "properties": {
                            "type": {"enum": ["choice", "predicate", "score", "refusal"]},
                            "choice": string(),
                            "value": {"type": "boolean"},
                            "score": {"type": "number"},
                            "confidence": {"type": "number"}
                        },
                        "required": ["type"]
                    }
                },
                "usage": open_object()
            }),
            &["model", "answers", "usage"],
        ),
        _ => return None,
    })
}

/// JSON Schema of the output on a declared-refusal route (`onDeclaredRefusal`,
/// `breg.invoke-action/v1` only): `{refusalCode}`.
pub fn declared_refusal_schema() -> Value {
    closed(json!({"refusalCode": string()}), &["refusalCode"])
}

/// JSON Schema of the value of completion `name` of operation `id`; `None`
/// when the operation exposes no such completion.
pub fn completion_schema(id: &str, name: &str) -> Option<Value> {
    match (id, name) {
        ("casework.submit-review-request/v1", "result") => Some(decision()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_has_descriptor_and_schemas() {
        for id in OPERATION_IDS {
            let d = lookup(id).expect("descriptor");
            assert_eq!(d.id, id);
            assert!(input_schema(id).is_some(), "{id} input");
            assert!(output_schema(id).is_some(), "{id} output");
            assert_eq!(d.idempotency_key, d.effect == Effect::Mutation, "{id}");
            assert_eq!(d.receipt, d.recovery == Recovery::SameCommandAndReceipt);
            for c in &d.completions {
                assert!(completion_schema(id, c).is_some());
            }
        }
        assert!(lookup("breg.read-record/v2").is_none());
    }

    #[test]
    fn explain_names_match_spec() {
        let d = lookup("messaging.submit-message/v1").expect("descriptor");
        assert_eq!(
            format!(
                "({} {}, recovery {})",
                d.product.as_str(),
                d.effect.as_str(),
                d.recovery.as_str()
            ),
            "(messaging mutation, recovery same-command-and-receipt)"
        );
    }
}
