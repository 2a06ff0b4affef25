//! OLD's `scenarios.yaml` (v1alpha1) → NEW's `scenarios.yaml` (v1beta1).
//!
//! The cases keep their expectations. Rules applied to scripted replies,
//! each listed where it applied: a `breg.read-record/v1` answer gains
//! `collection` and `recordId` (what the step's request Function sends for
//! the case's input, computed by running it) and `revision` (`"0"`:
//! v1alpha1 answers carried none, and no v1alpha1 Function reads it); an
//! `evaluation.evaluate/v1` answer names its `model` (v1alpha1's
//! `returnedModel`, else `requestedModel`) and gains an empty `usage` when
//! it had none; a bare `receipt-expired` first answer becomes an unknown
//! answer followed by the receipt lookup, with `reconcile` as the
//! operator's action. `deadline-exceeded` is `expired`; names lose `_`.

use std::collections::BTreeMap;

use coordinator_source::YamlDocument;
use serde_json::{json, Map, Value};

use super::findings::Findings;
use super::workflow::StepFacts;
use super::{escape, new_name, SCENARIOS_API_VERSION};
use crate::codes;

/// What the scenario rules read of the converted workflow.
pub struct ScenarioContext<'a> {
    /// By NEW step name.
    pub steps: &'a BTreeMap<String, StepFacts>,
    /// OLD's functions.rhai, to compute what a request Function sends.
    pub old_source: &'a str,
}

/// Converts OLD's scenarios.
pub fn convert(
    doc: &YamlDocument,
    context: &ScenarioContext<'_>,
    findings: &mut Findings,
) -> Value {
    let cases: Vec<Value> = doc
        .value
        .get("cases")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, case)| convert_case(doc, context, &format!("/cases/{i}"), case, findings))
        .collect();
    json!({
        "apiVersion": SCENARIOS_API_VERSION,
        "kind": "CoordinatorScenarios",
        "cases": cases,
    })
}

fn renamed_keys(value: &Value) -> Map<String, Value> {
    value
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (new_name(k), v.clone()))
        .collect()
}

fn convert_case(
    doc: &YamlDocument,
    context: &ScenarioContext<'_>,
    at: &str,
    case: &Value,
    findings: &mut Findings,
) -> Value {
    let mut out = Map::new();
    let input = case.get("input").cloned().unwrap_or(Value::Null);
    let mut recovery = case.get("recovery").map(renamed_keys).unwrap_or_default();
    for (key, value) in case.as_object().into_iter().flatten() {
        match key.as_str() {
            "id" => {
                out.insert(
                    key.clone(),
                    json!(new_name(value.as_str().unwrap_or_default())),
                );
            }
            "replies" => {
                let mut replies = Map::new();
                for (step, list) in value.as_object().into_iter().flatten() {
                    let reply_at = format!("{at}/replies/{}", escape(step));
                    let new_step = new_name(step);
                    let facts = context.steps.get(&new_step).cloned().unwrap_or_default();
                    let list =
                        convert_replies(doc, context, &reply_at, &facts, &input, list, findings);
                    if list.first().and_then(|r| r.get("type")) == Some(&json!("uncertain"))
                        && list.get(1).and_then(|r| r.get("type"))
                            == Some(&json!("receipt-expired"))
                        && value[step].get(0).and_then(|r| r.get("type"))
                            == Some(&json!("receipt-expired"))
                    {
                        recovery
                            .entry(new_step.clone())
                            .or_insert_with(|| json!("reconcile"));
                    }
                    replies.insert(new_step, Value::Array(list));
                }
                out.insert(key.clone(), Value::Object(replies));
            }
            "recovery" => {}
            "completions" => {
                out.insert(key.clone(), Value::Object(renamed_keys(value)));
            }
            "expect" => {
                out.insert(
                    key.clone(),
                    convert_expect(doc, &format!("{at}/expect"), value, findings),
                );
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    if !recovery.is_empty() {
        out.insert("recovery".to_owned(), Value::Object(recovery));
    }
    Value::Object(out)
}

fn convert_expect(doc: &YamlDocument, at: &str, expect: &Value, findings: &mut Findings) -> Value {
    let mut out = expect.clone();
    if let Some(path) = expect.get("path").and_then(Value::as_array) {
        out["path"] = path
            .iter()
            .map(|s| json!(new_name(s.as_str().unwrap_or_default())))
            .collect();
    }
    if expect.get("state") == Some(&json!("deadline-exceeded")) {
        out["state"] = json!("expired");
        findings.rule(
            "deadline-exceeded-to-expired",
            doc,
            &format!("{at}/state"),
            "`deadline-exceeded` is the state `expired`",
            "nothing to do",
        );
    }
    if let Some(name) = expect.pointer("/outcome/value").and_then(Value::as_str) {
        out["outcome"]["value"] = json!(new_name(name));
    }
    out
}

fn convert_replies(
    doc: &YamlDocument,
    context: &ScenarioContext<'_>,
    at: &str,
    facts: &StepFacts,
    input: &Value,
    list: &Value,
    findings: &mut Findings,
) -> Vec<Value> {
    let mut out = Vec::new();
    for (i, reply) in list.as_array().into_iter().flatten().enumerate() {
        let reply_at = format!("{at}/{i}");
        if i == 0 && reply.get("type") == Some(&json!("receipt-expired")) {
            findings.rule(
                "receipt-expired-first",
                doc,
                &reply_at,
                "a bare `receipt-expired` first answer became an unknown answer (`uncertain`, `transport-uncertain`) and the receipt lookup, with `reconcile` as the operator's action",
                "nothing to do: the case still ends `uncertain`",
            );
            out.push(json!({"type": "uncertain", "code": "transport-uncertain"}));
            out.push(reply.clone());
            continue;
        }
        if reply.get("type") != Some(&json!("success")) {
            out.push(reply.clone());
            continue;
        }
        let mut reply = reply.clone();
        match facts.operation.as_deref() {
            Some("breg.read-record/v1") => {
                read_record_answer(doc, context, &reply_at, facts, input, &mut reply, findings)
            }
            Some("evaluation.evaluate/v1") => {
                evaluation_answer(doc, &reply_at, &mut reply, findings)
            }
            _ => {}
        }
        out.push(reply);
    }
    out
}

fn read_record_answer(
    doc: &YamlDocument,
    context: &ScenarioContext<'_>,
    at: &str,
    facts: &StepFacts,
    input: &Value,
    reply: &mut Value,
    findings: &mut Findings,
) {
    let Some(value) = reply.get_mut("value").and_then(Value::as_object_mut) else {
        return;
    };
    let mut added = Vec::new();
    if !value.contains_key("collection") || !value.contains_key("recordId") {
        match request_sent(context, facts, input) {
            Ok(request) => {
                for member in ["collection", "recordId"] {
                    if let (false, Some(v)) = (value.contains_key(member), request.get(member)) {
                        value.insert(member.to_owned(), v.clone());
                        added.push(member);
                    }
                }
            }
            Err(reason) => findings.person(
                codes::CONVERT_REPLY,
                doc,
                at,
                format!("the answer needs `collection` and `recordId`, and what the request Function sends could not be computed: {reason}"),
                "Add `collection` and `recordId` to this answer in NEW's scenarios.yaml, as the step's request names them.",
            ),
        }
    }
    if !value.contains_key("revision") {
        value.insert("revision".to_owned(), json!("0"));
        added.push("revision");
    }
    if !added.is_empty() {
        findings.rule(
            "read-record-answer",
            doc,
            at,
            format!("the read-record answer gained {} (the request's own values; `revision` \"0\": v1alpha1 answers carried none)", added.join(", ")),
            "review the answer in NEW's scenarios.yaml if a Function reads `revision`",
        );
    }
}

/// What the step's request Function sends for the case's input (only
/// when its arguments are the run input).
fn request_sent(
    context: &ScenarioContext<'_>,
    facts: &StepFacts,
    input: &Value,
) -> Result<Value, String> {
    let Some((entry, args)) = &facts.request else {
        return Err("the step's input is not a Function".to_owned());
    };
    let mut values = Vec::new();
    for arg in args {
        match (
            arg.get("type").and_then(Value::as_str),
            arg.get("path").and_then(Value::as_str),
        ) {
            (Some("input"), None) => values.push(input.clone()),
            (Some("input"), Some(p)) => {
                values.push(input.pointer(p).cloned().unwrap_or(Value::Null))
            }
            _ => return Err(format!("`{entry}` takes more than the run input")),
        }
    }
    coordinator_scenario::call_outside_run(context.old_source, entry, &values)
}

fn evaluation_answer(doc: &YamlDocument, at: &str, reply: &mut Value, findings: &mut Findings) {
    let Some(value) = reply.get_mut("value").and_then(Value::as_object_mut) else {
        return;
    };
    let mut changes = Vec::new();
    if !value.contains_key("model") {
        let model = value
            .get("returnedModel")
            .or_else(|| value.get("requestedModel"))
            .cloned();
        if let Some(model) = model {
            value.insert("model".to_owned(), model);
            changes.push("`model` from `returnedModel` (else `requestedModel`)");
        }
    }
    for old in ["protocol", "requestedModel", "returnedModel"] {
        if value.remove(old).is_some() {
            changes.push(match old {
                "protocol" => "`protocol` dropped",
                "requestedModel" => "`requestedModel` dropped",
                _ => "`returnedModel` dropped",
            });
        }
    }
    if !value.contains_key("usage") {
        value.insert("usage".to_owned(), json!({}));
        changes.push("an empty `usage`");
    }
    if !changes.is_empty() {
        findings.rule(
            "evaluation-answer",
            doc,
            at,
            format!("the evaluation answer: {}", changes.join(", ")),
            "nothing to do unless a Function reads the dropped members",
        );
    }
}
