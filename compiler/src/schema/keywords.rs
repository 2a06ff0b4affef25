//! The keywords an authored schema may use: which are known, the checks
//! of an authored schema (`coordinator.schema.*`), and the normal form
//! (annotations removed, `required` sorted) that the revision hashes.

use coordinator_ir::pointer::escape_token;
use serde_json::{Map, Value};

use super::json_kind;
use crate::codes;

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

/// Checks the schema node at `ptr` (its keywords in order, then their
/// subschemas); nesting past 64 is not followed.
fn validate_node(root: &Value, node: &Value, ptr: &str, depth: usize, out: &mut Vec<SchemaFault>) {
    if depth > 64 {
        return;
    }
    let map = match node {
        Value::Bool(_) => return,
        Value::Object(m) => m,
        other => {
            out.push(SchemaFault {
                code: codes::SCHEMA_INVALID,
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
            out.push(unknown_keyword(k, here));
            continue;
        }
        out.extend(keyword_value_fault(root, k, v, &here));
        validate_subschemas(root, k, v, &here, depth + 1, out);
    }
}

/// The fault for `k`, which is not in [`KNOWN_KEYWORDS`], at `here`; the
/// identifier keywords have their own repair.
fn unknown_keyword(k: &str, here: String) -> SchemaFault {
    let (message, next) = if k == "$id" || k == "$anchor" || k.starts_with("$dynamic") {
        (
            format!("`{k}` is not accepted: schemas are local and refer to their own parts only"),
            format!("Remove `{k}`; use a local `$ref` such as `#/$defs/NAME`."),
        )
    } else {
        (
            format!("`{k}` is not a JSON Schema keyword this format accepts"),
            "Correct the keyword's spelling or remove it; unknown keywords are refused.".into(),
        )
    };
    SchemaFault {
        code: codes::SCHEMA_UNKNOWN_KEYWORD,
        pointer: here,
        message,
        next,
    }
}

/// A fault in the value of keyword `k` (at `here`) of the kinds checked
/// here: `type`, `required`, `enum`, `format`, `$ref` and `$schema`.
/// `$ref` must resolve inside `root`.
fn keyword_value_fault(root: &Value, k: &str, v: &Value, here: &str) -> Option<SchemaFault> {
    let fault = |code: &'static str, message: String, next: &str| SchemaFault {
        code,
        pointer: here.to_owned(),
        message,
        next: next.to_owned(),
    };
    match k {
        "type" if !well_formed_type(v) => Some(fault(
            codes::SCHEMA_INVALID,
            format!(
                "`type` must be one of {} or a list of them",
                TYPE_NAMES.join(", ")
            ),
            "Use a JSON Schema type name.",
        )),
        "required" if !v.as_array().is_some_and(|a| a.iter().all(Value::is_string)) => Some(fault(
            codes::SCHEMA_INVALID,
            "`required` must be a list of member names".into(),
            "List the required member names as strings.",
        )),
        "enum" if v.as_array().is_none_or(|a| a.is_empty()) => Some(fault(
            codes::SCHEMA_INVALID,
            "`enum` must be a non-empty list of values".into(),
            "List the accepted values.",
        )),
        "format" => match v.as_str() {
            Some(f) if FORMATS.contains(&f) => None,
            _ => Some(fault(
                codes::SCHEMA_FORMAT,
                format!(
                    "format {} is not asserted; the accepted formats are date-time, uuid and email",
                    v
                ),
                "Use format date-time, uuid or email, or remove `format` and use `pattern`.",
            )),
        },
        "$ref" => match v.as_str() {
            Some(r) if r.starts_with('#') => root.pointer(&r[1..]).is_none().then(|| {
                fault(
                    codes::SCHEMA_REF,
                    format!("`$ref` {r} names nothing in this schema"),
                    "Point `$ref` at a member of this schema's `$defs`.",
                )
            }),
            _ => Some(fault(
                codes::SCHEMA_REF,
                format!("`$ref` {v} is not local; only `#...` references are accepted"),
                "Copy the schema into `$defs` and refer to it as `#/$defs/NAME`, or use `typeRef`.",
            )),
        },
        "$schema" if v.as_str() != Some("https://json-schema.org/draft/2020-12/schema") => {
            Some(fault(
                codes::SCHEMA_INVALID,
                "only draft 2020-12 schemas are accepted".into(),
                "Remove `$schema` or set it to https://json-schema.org/draft/2020-12/schema.",
            ))
        }
        _ => None,
    }
}

/// A `type` that is a type name or a non-empty list of them.
fn well_formed_type(v: &Value) -> bool {
    match v {
        Value::String(s) => TYPE_NAMES.contains(&s.as_str()),
        Value::Array(a) => {
            !a.is_empty()
                && a.iter()
                    .all(|t| t.as_str().is_some_and(|s| TYPE_NAMES.contains(&s)))
        }
        _ => false,
    }
}

/// Validates the subschemas under keyword `kw` (at `here`, at nesting
/// `depth`): one ([`SUB_ONE`]), a mapping ([`SUB_MAP`]) or a list
/// ([`SUB_ARRAY`]) of them. Other keywords hold no subschema.
fn validate_subschemas(
    root: &Value,
    kw: &str,
    v: &Value,
    here: &str,
    depth: usize,
    out: &mut Vec<SchemaFault>,
) {
    if SUB_ONE.contains(&kw) {
        validate_node(root, v, here, depth, out);
    } else if SUB_MAP.contains(&kw) {
        match v.as_object() {
            Some(m) => {
                for (name, sub) in m {
                    let at = format!("{here}/{}", escape_token(name));
                    validate_node(root, sub, &at, depth, out);
                }
            }
            None => out.push(SchemaFault {
                code: codes::SCHEMA_INVALID,
                pointer: here.to_owned(),
                message: format!("`{kw}` must be a mapping of schemas"),
                next: "Write a mapping from names to schemas.".into(),
            }),
        }
    } else if SUB_ARRAY.contains(&kw) {
        match v.as_array() {
            Some(a) => {
                for (i, sub) in a.iter().enumerate() {
                    validate_node(root, sub, &format!("{here}/{i}"), depth, out);
                }
            }
            None => out.push(SchemaFault {
                code: codes::SCHEMA_INVALID,
                pointer: here.to_owned(),
                message: format!("`{kw}` must be a list of schemas"),
                next: "Write a list of schemas.".into(),
            }),
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
