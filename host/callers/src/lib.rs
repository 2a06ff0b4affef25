//! `coordinator-callers`: typed callers (SPEC §4, issue 4 item 3): a TypeScript module and a Python
//! module generated from a compiled [`Program`], for applications that start
//! and follow runs over the HTTP API of SPEC §8.
//!
//! Each file holds the workflow name and revision, an `Input` type (from the
//! input schema), the workflow's outcome names (`OutcomeName`) and each
//! outcome's output type, a `RunStatus` type, a `Problem` type, a typed
//! problem error, and a client with `start`, `get` and `cancel`.
//!
//! `RunStatus` is the document the service answers (`coordinator_api::RunStatus`,
//! `docs/openapi.json`): the members of [`RUN_STATUS_FIELDS`], where
//! `outcome` is `null` or one of the outcome names and `output`, beside it,
//! is that outcome's output (`null` while there is no outcome). It is a
//! union of one variant per outcome plus one without an outcome, so code
//! that tests `outcome` gets `output` at the outcome's type. `Problem` is
//! the RFC 9457 document of [`PROBLEM_FIELDS`] (`coordinator_api::Problem`).
//!
//! JSON Schema → type mapping ([`Ty::from_schema`]): `object` with
//! `properties`/`required`/`additionalProperties`, arrays (`items`), `enum`
//! and `const`, `string`/`number`/`integer`/`boolean`/`null`, type arrays,
//! `anyOf`/`oneOf` (unions), `allOf` (TypeScript intersections; Python
//! `Any`), local `$ref` (`#`, `#/$defs/..`, `#/definitions/..`; a recursive
//! reference becomes `unknown`/`Any`). Anything else is `unknown`/`Any`:
//! the generated types never claim more than the schema says.

#![deny(clippy::unwrap_used, clippy::indexing_slicing)]
#![warn(missing_docs)]

mod python;
mod typescript;

pub use python::python;
pub use typescript::typescript;

use coordinator_ir::Program;
use serde_json::Value;

/// A language-neutral type, built from one JSON Schema.
#[derive(Clone, Debug, PartialEq)]
pub enum Ty {
    /// Anything (`unknown` / `Any`).
    Unknown,
    /// No value is valid (schema `false`).
    Never,
    /// A JSON string.
    String,
    /// A JSON number.
    Number,
    /// A JSON number without fraction.
    Integer,
    /// `true` or `false`.
    Boolean,
    /// `null`.
    Null,
    /// Exactly this JSON value (scalar `const`/`enum` members).
    Literal(Value),
    /// An array of the item type.
    Array(Box<Ty>),
    /// An object with declared properties.
    Object(ObjectTy),
    /// An object whose members all have the given type.
    Map(Box<Ty>),
    /// Any one of these.
    Union(Vec<Ty>),
    /// All of these at once.
    Intersection(Vec<Ty>),
}

/// An object with declared properties.
#[derive(Clone, Debug, PartialEq)]
pub struct ObjectTy {
    /// `(name, type, required)` in schema order.
    pub properties: Vec<(String, Ty, bool)>,
    /// Whether undeclared members are allowed (`additionalProperties` not
    /// `false`).
    pub open: bool,
}

impl Ty {
    /// The type of `schema`, whose local `$ref`s resolve against `root`.
    pub fn from_schema(schema: &Value, root: &Value) -> Ty {
        convert(schema, root, &mut Vec::new())
    }
}

fn convert(schema: &Value, root: &Value, refs: &mut Vec<String>) -> Ty {
    let map = match schema {
        Value::Bool(true) => return Ty::Unknown,
        Value::Bool(false) => return Ty::Never,
        Value::Object(m) => m,
        _ => return Ty::Unknown,
    };
    if let Some(Value::String(r)) = map.get("$ref") {
        let Some(pointer) = r.strip_prefix('#') else {
            return Ty::Unknown;
        };
        if refs.iter().any(|x| x == r) {
            return Ty::Unknown;
        }
        let Some(target) = root.pointer(pointer) else {
            return Ty::Unknown;
        };
        refs.push(r.clone());
        let t = convert(target, root, refs);
        refs.pop();
        return t;
    }
    if let Some(c) = map.get("const") {
        return literal(c);
    }
    if let Some(Value::Array(values)) = map.get("enum") {
        return union(values.iter().map(literal).collect());
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(options)) = map.get(key) {
            // `oneOf` of bare `required` lists (no type of their own) only
            // narrows the object around it: keep the object.
            if options.iter().all(|o| {
                o.get("type").is_some()
                    || o.get("$ref").is_some()
                    || o.get("enum").is_some()
                    || o.get("const").is_some()
            }) {
                return union(options.iter().map(|o| convert(o, root, refs)).collect());
            }
        }
    }
    if let Some(Value::Array(parts)) = map.get("allOf") {
        let mut all: Vec<Ty> = parts.iter().map(|p| convert(p, root, refs)).collect();
        let mut rest = map.clone();
        rest.remove("allOf");
        if rest
            .keys()
            .any(|k| k != "$defs" && k != "$schema" && k != "$id")
        {
            all.push(convert(&Value::Object(rest), root, refs));
        }
        all.retain(|t| *t != Ty::Unknown);
        return match all.len() {
            0 => Ty::Unknown,
            1 => all.pop().unwrap_or(Ty::Unknown),
            _ => Ty::Intersection(all),
        };
    }
    match map.get("type") {
        Some(Value::String(t)) => of_type(t, map, root, refs),
        Some(Value::Array(types)) => union(
            types
                .iter()
                .filter_map(Value::as_str)
                .map(|t| of_type(t, map, root, refs))
                .collect(),
        ),
        _ if map.contains_key("properties") => of_type("object", map, root, refs),
        _ => Ty::Unknown,
    }
}

fn of_type(
    t: &str,
    map: &serde_json::Map<String, Value>,
    root: &Value,
    refs: &mut Vec<String>,
) -> Ty {
    match t {
        "string" => Ty::String,
        "number" => Ty::Number,
        "integer" => Ty::Integer,
        "boolean" => Ty::Boolean,
        "null" => Ty::Null,
        "array" => Ty::Array(Box::new(
            map.get("items")
                .map(|i| convert(i, root, refs))
                .unwrap_or(Ty::Unknown),
        )),
        "object" => {
            let required: Vec<&str> = map
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let additional = map.get("additionalProperties");
            let properties: Vec<(String, Ty, bool)> = map
                .get("properties")
                .and_then(Value::as_object)
                .map(|p| {
                    p.iter()
                        .map(|(k, v)| {
                            (
                                k.clone(),
                                convert(v, root, refs),
                                required.contains(&k.as_str()),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            if properties.is_empty() {
                return match additional {
                    Some(Value::Bool(false)) => Ty::Object(ObjectTy {
                        properties,
                        open: false,
                    }),
                    Some(schema) => Ty::Map(Box::new(convert(schema, root, refs))),
                    None => Ty::Map(Box::new(Ty::Unknown)),
                };
            }
            Ty::Object(ObjectTy {
                properties,
                open: !matches!(additional, Some(Value::Bool(false))),
            })
        }
        _ => Ty::Unknown,
    }
}

fn literal(v: &Value) -> Ty {
    match v {
        Value::Null => Ty::Null,
        Value::String(_) | Value::Bool(_) | Value::Number(_) => Ty::Literal(v.clone()),
        Value::Array(_) => Ty::Array(Box::new(Ty::Unknown)),
        Value::Object(_) => Ty::Map(Box::new(Ty::Unknown)),
    }
}

fn union(mut members: Vec<Ty>) -> Ty {
    if members.contains(&Ty::Unknown) {
        return Ty::Unknown;
    }
    let mut flat = Vec::new();
    for m in members.drain(..) {
        match m {
            Ty::Union(inner) => flat.extend(inner),
            Ty::Never => {}
            other => flat.push(other),
        }
    }
    let mut unique: Vec<Ty> = Vec::new();
    for m in flat {
        if !unique.contains(&m) {
            unique.push(m);
        }
    }
    match unique.len() {
        0 => Ty::Never,
        1 => unique.pop().unwrap_or(Ty::Never),
        _ => Ty::Union(unique),
    }
}

/// The schema with this id, or `true` (anything) for an id out of range.
fn schema_of(program: &Program, id: coordinator_ir::SchemaId) -> Value {
    program
        .schemas
        .get(id.index())
        .cloned()
        .unwrap_or(Value::Bool(true))
}

/// The run input type and each outcome's `(name, output type)`.
fn program_types(program: &Program) -> (Ty, Vec<(String, Ty)>) {
    let input = schema_of(program, program.input);
    let outcomes = program
        .outcomes
        .iter()
        .map(|o| {
            let s = schema_of(program, o.schema);
            (o.name.clone(), Ty::from_schema(&s, &s))
        })
        .collect();
    (Ty::from_schema(&input, &input), outcomes)
}

/// A JSON string literal, valid in TypeScript and Python source.
fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// Run states of SPEC §8: the values of `RunStatus.state` (the api
/// crate's list, which the OpenAPI document's `enum` is made from).
pub use coordinator_api::RUN_STATES;

/// How a member of a response document is typed in the generated callers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldTy {
    /// A string (`string` / `str`).
    String,
    /// A string or `null` (`string | null` / `str | None`).
    NullableString,
    /// An integer (`number` / `int`).
    Integer,
    /// `true` or `false` (`boolean` / `bool`).
    Boolean,
    /// One of the run states (`RunState`).
    State,
    /// The discriminant of `RunStatus`: `null` (`None`) in the variant
    /// without an outcome, else one outcome name (a string literal).
    Outcome,
    /// The output of the outcome beside it: that outcome's output type, or
    /// `null` (`None`) in the variant without an outcome.
    Output,
    /// A list of a run's moves (`coordinator_api::RunMoveRecord`: objects
    /// of string members `at`, `fromRevision`, `toRevision`, `fromStep`,
    /// `toStep`, `certificate`).
    Moves,
}

/// One member of a response document as the generated callers declare it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// The JSON member name (camelCase, as the service writes it).
    pub name: &'static str,
    /// Its type.
    pub ty: FieldTy,
    /// Whether every document carries it (a nullable member is present and
    /// `null`); otherwise it may be absent (`?:` / `NotRequired`).
    pub always: bool,
}

const fn field(name: &'static str, ty: FieldTy, always: bool) -> Field {
    Field { name, ty, always }
}

/// The members of `RunStatus`, as `coordinator_api::RunStatus` serialises
/// them (`GET /v1/runs/{run}`, and the answer to a start and a cancel):
/// `run`, `workflow`, `revision` (strings), `state` (a [`RUN_STATES`]
/// member), `admittedAt`, `deadlineAt` (RFC 3339), `endedAt`, `failure`,
/// `failurePath` (string or `null`), `outcome` and `output` (always
/// present, `null` until a finish was reached or after retention erased
/// them), and, only when they apply, `refusalCode` (string),
/// `payloadErased` (`true`), `review` and `waitingFor` (strings), `moves`
/// (a list of the run's moves to another revision). A test holds this list
/// to the api crate and to `docs/openapi.json`.
pub const RUN_STATUS_FIELDS: &[Field] = &[
    field("run", FieldTy::String, true),
    field("workflow", FieldTy::String, true),
    field("revision", FieldTy::String, true),
    field("state", FieldTy::State, true),
    field("admittedAt", FieldTy::String, true),
    field("deadlineAt", FieldTy::String, true),
    field("endedAt", FieldTy::NullableString, true),
    field("outcome", FieldTy::Outcome, true),
    field("output", FieldTy::Output, true),
    field("failure", FieldTy::NullableString, true),
    field("failurePath", FieldTy::NullableString, true),
    field("refusalCode", FieldTy::String, false),
    field("payloadErased", FieldTy::Boolean, false),
    field("review", FieldTy::String, false),
    field("waitingFor", FieldTy::String, false),
    field("moves", FieldTy::Moves, false),
];

/// The members of `Problem`, the RFC 9457 document of every non-2xx answer,
/// as `coordinator_api::Problem` serialises them: `type`, `title`, `code`
/// (strings), `status` (integer) and, when there is one, `detail` (string).
pub const PROBLEM_FIELDS: &[Field] = &[
    field("type", FieldTy::String, true),
    field("title", FieldTy::String, true),
    field("status", FieldTy::Integer, true),
    field("code", FieldTy::String, true),
    field("detail", FieldTy::String, false),
];
