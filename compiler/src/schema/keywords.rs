//! The keywords an authored schema may use: which are known, the checks
//! of an authored schema (`coordinator.schema.*`), and the normal form
//! (annotations removed, `required` sorted) that the revision hashes.

use coordinator_ir::pointer::escape_token;
use serde_json::{Map, Value};

use super::json_kind;

/// Keywords an authored schema may use (draft 2020-12, no `$id`, no dynamic
/// references). Anything else is refused (`coordinator.schema.unknown-keyword`).
pub const KNOWN_KEYWORDS: &[&str] = &[
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "dependentRequired",
    "dependentSchemas",
    "unevaluatedProperties",
    "items",
    "prefixItems",
    "contains",
    "minContains",
    "maxContains",
    "minItems",
    "maxItems",
    "uniqueItems",
    "unevaluatedItems",
    "$ref",
    "$defs",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "title",
    "description",
    "examples",
    "$comment",
    "default",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$schema",
];

/// Annotations removed before hashing (SPEC §4).
pub const ANNOTATIONS: &[&str] = &["title", "description", "examples", "$comment"];

/// Formats that are asserted (SPEC §2).
pub const FORMATS: &[&str] = &["date-time", "uuid", "email"];

/// The JSON Schema type names.
const TYPE_NAMES: &[&str] = &[
    "null", "boolean", "object", "array", "number", "integer", "string",
];

/// Keywords whose value is one subschema.
pub(super) const SUB_ONE: &[&str] = &[
    "additionalProperties",
    "propertyNames",
    "unevaluatedProperties",
    "items",
    "contains",
    "unevaluatedItems",
    "not",
    "if",
    "then",
    "else",
];
/// Keywords whose value is a map of subschemas.
pub(super) const SUB_MAP: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "dependentSchemas",
];
/// Keywords whose value is an array of subschemas.
pub(super) const SUB_ARRAY: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];

/// A fault in an authored schema: code, pointer suffix inside the schema,
/// message and repair.
#[derive(Debug, Clone)]
pub struct SchemaFault {
    /// The diagnostic code (`coordinator.schema.*`).
    pub code: &'static str,
    /// JSON Pointer of the fault inside the schema (empty: the schema itself).
    pub pointer: String,
    /// What is wrong, as a sentence.
    pub message: String,
    /// The repair (`next:` line).
    pub next: String,
}

/// Checks an authored schema: known keywords, asserted formats, local
/// `$ref`s that resolve, well-formed `type`, `required` and `enum`.
pub fn validate_authored(root: &Value) -> Vec<SchemaFault> {
    let mut out = Vec::new();
    validate_node(root, root, "", 0, &mut out);
    out
}

fn validate_node(root: &Value, node: &Value, ptr: &str, depth: usize, out: &mut Vec<SchemaFault>) {
    if depth > 64 {
        return;
    }
    let map = match node {
        Value::Bool(_) => return,
        Value::Object(m) => m,
        other => {
            out.push(SchemaFault {
                code: "coordinator.schema.invalid",
                pointer: ptr.to_owned(),
                message: format!(
                    "expected a JSON Schema (a mapping or a boolean), found {}",
                    json_kind(other)
                ),
                next: "Write a schema object such as `{type: string}`.".into(),
            });
            return;
        }
    };
    for (k, v) in map {
        let here = format!("{ptr}/{}", escape_token(k));
        if !KNOWN_KEYWORDS.contains(&k.as_str()) {
            let (message, next) = if k == "$id" || k == "$anchor" || k.starts_with("$dynamic") {
                (
                    format!("`{k}` is not accepted: schemas are local and refer to their own parts only"),
                    format!("Remove `{k}`; use a local `$ref` such as `#/$defs/NAME`."),
                )
            } else {
                (
                    format!("`{k}` is not a JSON Schema keyword this format accepts"),
                    "Correct the keyword's spelling or remove it; unknown keywords are refused."
                        .into(),
                )
            };
            out.push(SchemaFault {
                code: "coordinator.schema.unknown-keyword",
                pointer: here,
                message,
                next,
            });
            continue;
        }
        match k.as_str() {
            "type" => {
                let ok = match v {
                    Value::String(s) => TYPE_NAMES.contains(&s.as_str()),
                    Value::Array(a) => {
                        !a.is_empty()
                            && a.iter()
                                .all(|t| t.as_str().is_some_and(|s| TYPE_NAMES.contains(&s)))
                    }
                    _ => false,
                };
                if !ok {
                    out.push(SchemaFault {
                        code: "coordinator.schema.invalid",
                        pointer: here,
                        message: format!("`type` must be one of {} or a list of them", TYPE_NAMES.join(", ")),
                        next: "Use a JSON Schema type name.".into(),
                    });
                }
            }
            "required" => {
                let ok = v.as_array().is_some_and(|a| a.iter().all(Value::is_string));
                if !ok {
                    out.push(SchemaFault {
                        code: "coordinator.schema.invalid",
                        pointer: here,
                        message: "`required` must be a list of member names".into(),
                        next: "List the required member names as strings.".into(),
                    });
                }
            }
            "enum" if v.as_array().is_none_or(|a| a.is_empty()) => {
                {
                    out.push(SchemaFault {
                        code: "coordinator.schema.invalid",
                        pointer: here,
                        message: "`enum` must be a non-empty list of values".into(),
                        next: "List the accepted values.".into(),
                    });
                }
            }
            "format" => match v.as_str() {
                Some(f) if FORMATS.contains(&f) => {}
                _ => out.push(SchemaFault {
                    code: "coordinator.schema.format",
                    pointer: here,
                    message: format!(
                        "format {} is not asserted; the accepted formats are date-time, uuid and email",
                        v
                    ),
                    next: "Use format date-time, uuid or email, or remove `format` and use `pattern`.".into(),
                }),
            },
            "$ref" => match v.as_str() {
                Some(r) if r.starts_with('#') => {
                    if root.pointer(&r[1..]).is_none() {
                        out.push(SchemaFault {
                            code: "coordinator.schema.ref",
                            pointer: here,
                            message: format!("`$ref` {r} names nothing in this schema"),
                            next: "Point `$ref` at a member of this schema's `$defs`.".into(),
                        });
                    }
                }
                _ => out.push(SchemaFault {
                    code: "coordinator.schema.ref",
                    pointer: here,
                    message: format!("`$ref` {v} is not local; only `#...` references are accepted"),
                    next: "Copy the schema into `$defs` and refer to it as `#/$defs/NAME`, or use `typeRef`.".into(),
                }),
            },
            "$schema" if v.as_str() != Some("https://json-schema.org/draft/2020-12/schema") => {
                {
                    out.push(SchemaFault {
                        code: "coordinator.schema.invalid",
                        pointer: here,
                        message: "only draft 2020-12 schemas are accepted".into(),
                        next: "Remove `$schema` or set it to https://json-schema.org/draft/2020-12/schema."
                            .into(),
                    });
                }
            }
            kw if SUB_ONE.contains(&kw) => validate_node(root, v, &here, depth + 1, out),
            kw if SUB_MAP.contains(&kw) => match v.as_object() {
                Some(m) => {
                    for (name, sub) in m {
                        validate_node(root, sub, &format!("{here}/{}", escape_token(name)), depth + 1, out);
                    }
                }
                None => out.push(SchemaFault {
                    code: "coordinator.schema.invalid",
                    pointer: here,
                    message: format!("`{kw}` must be a mapping of schemas"),
                    next: "Write a mapping from names to schemas.".into(),
                }),
            },
            kw if SUB_ARRAY.contains(&kw) => match v.as_array() {
                Some(a) => {
                    for (i, sub) in a.iter().enumerate() {
                        validate_node(root, sub, &format!("{here}/{i}"), depth + 1, out);
                    }
                }
                None => out.push(SchemaFault {
                    code: "coordinator.schema.invalid",
                    pointer: here,
                    message: format!("`{kw}` must be a list of schemas"),
                    next: "Write a list of schemas.".into(),
                }),
            },
            _ => {}
        }
    }
}

/// Removes annotations (SPEC §4) from schema positions and sorts `required`,
/// so that neither moves the revision.
pub fn normalise(node: &Value) -> Value {
    match node {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                if ANNOTATIONS.contains(&k.as_str()) {
                    continue;
                }
                let nv = if SUB_ONE.contains(&k.as_str()) {
                    normalise(v)
                } else if SUB_MAP.contains(&k.as_str()) {
                    match v {
                        Value::Object(sm) => Value::Object(
                            sm.iter().map(|(n, s)| (n.clone(), normalise(s))).collect(),
                        ),
                        other => other.clone(),
                    }
                } else if SUB_ARRAY.contains(&k.as_str()) {
                    match v {
                        Value::Array(a) => Value::Array(a.iter().map(normalise).collect()),
                        other => other.clone(),
                    }
                } else if k == "required" {
                    match v {
                        Value::Array(a) => {
                            let mut names: Vec<Value> = a.clone();
                            names.sort_by(|x, y| x.as_str().cmp(&y.as_str()));
                            names.dedup();
                            Value::Array(names)
                        }
                        other => other.clone(),
                    }
                } else {
                    v.clone()
                };
                out.insert(k.clone(), nv);
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}
