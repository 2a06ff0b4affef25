//! OLD's `runtime.yaml` (v1alpha1) → NEW's `runtime.yaml` (v1beta1).
//!
//! `connections` gain `type` (from v1alpha1's `product`);
//! `externalHttpConnections` and `decisionConnections` become connections
//! of type `external-http` and `decision`; an external-http
//! `responseSchema` moves to the workflow (a type narrowing the
//! operation's output). Authority convert cannot carry over (Casework task
//! authority, a decision bearer token) and the operator's `deployment`
//! section are left out and listed for a person: nothing is invented.

use std::collections::BTreeMap;

use coordinator_source::YamlDocument;
use serde_json::{json, Map, Value};

use super::findings::Findings;
use super::{escape, new_name, RUNTIME_API_VERSION};
use crate::codes;

/// NEW's runtime with the response schemas that move to the workflow.
pub struct ConvertedRuntime {
    pub value: Value,
    /// External-http response schemas by OLD connection name.
    pub response_types: BTreeMap<String, Value>,
}

/// Top-level members copied as they are.
const COPIED: [&str; 4] = ["namespace", "secretProviders", "database", "observation"];

/// Converts OLD's runtime.
pub fn convert(doc: &YamlDocument, findings: &mut Findings) -> ConvertedRuntime {
    let mut out = Map::new();
    out.insert("apiVersion".to_owned(), json!(RUNTIME_API_VERSION));
    out.insert("kind".to_owned(), json!("CoordinatorRuntimeConfig"));
    let mut connections = Map::new();
    let mut response_types = BTreeMap::new();
    let Some(old) = doc.value.as_object() else {
        return ConvertedRuntime {
            value: Value::Object(out),
            response_types,
        };
    };
    for (key, value) in old {
        match key.as_str() {
            "apiVersion" | "kind" => {}
            k if COPIED.contains(&k) => {
                out.insert(key.clone(), value.clone());
            }
            "connections" => product_connections(doc, value, &mut connections, findings),
            "externalHttpConnections" => {
                external_connections(doc, value, &mut connections, &mut response_types, findings)
            }
            "decisionConnections" => decision_connections(doc, value, &mut connections, findings),
            other => findings.person(
                codes::CONVERT_RUNTIME_SECTION,
                doc,
                &format!("/{}", escape(other)),
                format!("the section `{other}` was not converted (the v1beta1 form differs: policies, keys and listener are the operator's)"),
                "Complete this section in NEW's runtime.yaml by the v1beta1 runtime reference (docs/runtime.md; `coordinatorctl schema --kind runtime`).",
            ),
        }
    }
    out.insert("connections".to_owned(), Value::Object(connections));
    ConvertedRuntime {
        value: Value::Object(out),
        response_types,
    }
}

/// The connections of a v1alpha1 runtime section (`/SECTION/NAME`): each
/// one's name, JSON Pointer and value (none when the section is not an
/// object).
fn section_connections<'a>(
    value: &'a Value,
    section: &'a str,
) -> impl Iterator<Item = (&'a String, String, &'a Value)> + 'a {
    value
        .as_object()
        .into_iter()
        .flatten()
        .map(move |(name, c)| (name, format!("/{section}/{}", escape(name)), c))
}

fn product_connections(
    doc: &YamlDocument,
    value: &Value,
    out: &mut Map<String, Value>,
    findings: &mut Findings,
) {
    for (name, at, c) in section_connections(value, "connections") {
        let mut new = Map::new();
        let product = c.get("product").and_then(Value::as_str).unwrap_or_default();
        new.insert("type".to_owned(), json!(product));
        for (key, member) in c.as_object().into_iter().flatten() {
            match key.as_str() {
                "product" => {}
                "observationAuthorization" => {
                    task_authority(doc, &format!("{at}/{key}"), name, key, findings)
                }
                "authorization" => {
                    let mut authorization = member.clone();
                    if let Some(a) = authorization.as_object_mut() {
                        if a.remove("taskAuthority").is_some() {
                            task_authority(
                                doc,
                                &format!("{at}/authorization/taskAuthority"),
                                name,
                                "taskAuthority",
                                findings,
                            );
                        }
                    }
                    new.insert(key.clone(), authorization);
                }
                _ => {
                    new.insert(key.clone(), member.clone());
                }
            }
        }
        findings.rule(
            "connection-product-to-type",
            doc,
            &format!("{at}/product"),
            format!("connection `{name}`: `product: {product}` became `type: {product}`"),
            "nothing to do",
        );
        renamed_connection(doc, &at, name, findings);
        out.insert(new_name(name), Value::Object(new));
    }
}

/// Records the rule when a connection's name loses `_`.
fn renamed_connection(doc: &YamlDocument, at: &str, name: &str, findings: &mut Findings) {
    if new_name(name) != name {
        findings.rule(
            "name-without-underscore",
            doc,
            at,
            format!(
                "connection `{name}` is named `{}` (names have no `_`)",
                new_name(name)
            ),
            "nothing to do: the operations name it so too",
        );
    }
}

fn task_authority(doc: &YamlDocument, at: &str, name: &str, key: &str, findings: &mut Findings) {
    findings.person(
        codes::CONVERT_TASK_AUTHORITY,
        doc,
        at,
        format!("connection `{name}`'s `{key}` (Casework task authority and grants) has no v1beta1 counterpart and was left out"),
        "Decide with the owner of the Scheduling and Casework policies which client credentials carry this authority now, and write them in `authorization`.",
    );
}

fn external_connections(
    doc: &YamlDocument,
    value: &Value,
    out: &mut Map<String, Value>,
    response_types: &mut BTreeMap<String, Value>,
    findings: &mut Findings,
) {
    for (name, at, c) in section_connections(value, "externalHttpConnections") {
        let mut new = Map::new();
        new.insert("type".to_owned(), json!("external-http"));
        for (key, member) in c.as_object().into_iter().flatten() {
            match key.as_str() {
                "paths" => {
                    let paths: Vec<Value> = member
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|p| {
                            let p = p.as_str().unwrap_or_default();
                            json!(if p.starts_with('/') {
                                p.to_owned()
                            } else {
                                format!("/{p}")
                            })
                        })
                        .collect();
                    if paths != member.as_array().cloned().unwrap_or_default() {
                        findings.rule(
                            "external-path-slash",
                            doc,
                            &format!("{at}/paths"),
                            format!("connection `{name}`: each path gained a leading `/`"),
                            "nothing to do",
                        );
                    }
                    new.insert(key.clone(), Value::Array(paths));
                }
                "responseSchema" => {
                    response_types.insert(name.clone(), member.clone());
                    findings.rule(
                        "response-schema-to-type",
                        doc,
                        &format!("{at}/responseSchema"),
                        format!("connection `{name}`'s `responseSchema` became the workflow type `{}-response`, which narrows the operation's output", new_name(name)),
                        "nothing to do",
                    );
                }
                _ => {
                    new.insert(key.clone(), member.clone());
                }
            }
        }
        findings.rule(
            "external-http-connection",
            doc,
            &at,
            format!("`externalHttpConnections.{name}` became a connection of type `external-http`"),
            "nothing to do",
        );
        out.insert(new_name(name), Value::Object(new));
    }
}

fn decision_connections(
    doc: &YamlDocument,
    value: &Value,
    out: &mut Map<String, Value>,
    findings: &mut Findings,
) {
    for (name, at, c) in section_connections(value, "decisionConnections") {
        let mut new = Map::new();
        new.insert("type".to_owned(), json!("decision"));
        for (key, member) in c.as_object().into_iter().flatten() {
            match key.as_str() {
                "protocol" => findings.rule(
                    "decision-protocol-dropped",
                    doc,
                    &format!("{at}/protocol"),
                    format!("connection `{name}`: `protocol` was dropped (the decision service's protocol is not configured per connection)"),
                    "nothing to do",
                ),
                "authorization" if member.get("bearer").is_some() => findings.person(
                    codes::CONVERT_DECISION_BEARER,
                    doc,
                    &format!("{at}/authorization/bearer"),
                    format!("connection `{name}` authenticates with a bearer token; v1beta1 decision connections use OAuth client credentials, so `authorization` was left out"),
                    "Register a client for the Coordinator at the decision service's issuer and write `authorization: {tokenEndpoint, clientId, signingKeyRef, scopes}`.",
                ),
                _ => {
                    new.insert(key.clone(), member.clone());
                }
            }
        }
        findings.rule(
            "decision-connection",
            doc,
            &at,
            format!("`decisionConnections.{name}` became a connection of type `decision`"),
            "nothing to do",
        );
        out.insert(new_name(name), Value::Object(new));
    }
}
