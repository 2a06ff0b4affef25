//! JSON Schema support for `check`, one file per concern:
//!
//! - `keywords.rs`: the keywords an authored schema may use, their checks
//!   (`coordinator.schema.*`) and the normal form the revision hashes;
//! - `walk.rs`: walking a mapping's JSON Pointer `path` through a schema;
//! - `fit.rs`: whether a mapping's value fits the schema it feeds, on the
//!   decidable subset of SPEC §2;
//! - `literal.rs`: a literal's fit, decided by the run's own validator.
//!
//! This file holds what they share: [`Sch`], a node inside a schema
//! document, and the Program form of a node (`materialise`).

// Matches here are over `serde_json::Value`, a foreign enum whose variants are
// the JSON data model and will not grow; listing them all would add nothing.
#![allow(clippy::wildcard_enum_match_arm)]

mod fit;
mod keywords;
mod literal;
mod verdict;
mod walk;

use std::rc::Rc;

use serde_json::{json, Map, Value};

pub use fit::{fit, Fit, Ty};
pub use keywords::{
    normalise, validate_authored, SchemaFault, ANNOTATIONS, FORMATS, KNOWN_KEYWORDS,
};
pub use walk::{walk, Walk};

/// A JSON kind name for messages.
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The JSON Schema type name of a value.
pub fn value_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The `type` keyword of a schema node as a list of type names; `None`
/// when the node has no `type`.
fn types_of(node: &Value) -> Option<Vec<String>> {
    match node.get("type")? {
        Value::String(s) => Some(vec![s.clone()]),
        Value::Array(a) => Some(
            a.iter()
                .filter_map(|t| t.as_str().map(str::to_owned))
                .collect(),
        ),
        _ => None,
    }
}

/// Renders a target member pointer for messages (`/` for the whole value).
pub fn show(member: &str) -> String {
    if member.is_empty() {
        "the top level".into()
    } else {
        member.to_owned()
    }
}

/// A schema node inside a schema document (for local `$ref`).
#[derive(Clone, Debug)]
pub struct Sch {
    /// The whole schema document.
    pub root: Rc<Value>,
    /// JSON Pointer of the node inside `root`.
    pub ptr: String,
}

static TRUE: Value = Value::Bool(true);

impl Sch {
    /// A schema document's root.
    pub fn new(root: Value) -> Self {
        Sch {
            root: Rc::new(root),
            ptr: String::new(),
        }
    }
    /// The node (after no `$ref` resolution).
    pub fn node(&self) -> &Value {
        self.root.pointer(&self.ptr).unwrap_or(&TRUE)
    }
    pub(super) fn at(&self, suffix: &str) -> Sch {
        Sch {
            root: self.root.clone(),
            ptr: format!("{}{suffix}", self.ptr),
        }
    }
    /// Follows `$ref` when the node is only a reference; up to 32 hops.
    pub fn deref(&self) -> Sch {
        let mut cur = self.clone();
        for _ in 0..32 {
            match cur.node().get("$ref").and_then(Value::as_str) {
                Some(r)
                    if r.starts_with('#')
                        && cur.node().as_object().is_some_and(|m| m.len() == 1) =>
                {
                    cur = Sch {
                        root: cur.root.clone(),
                        ptr: r.get(1..).unwrap_or("").to_owned(),
                    }
                }
                _ => break,
            }
        }
        cur
    }
    pub(super) fn obj(&self) -> Option<&Map<String, Value>> {
        self.node().as_object()
    }
    /// Subschemas of a combinator keyword.
    pub(super) fn list(&self, kw: &str) -> Vec<Sch> {
        match self.obj().and_then(|m| m.get(kw)).and_then(Value::as_array) {
            Some(a) => (0..a.len())
                .map(|i| self.at(&format!("/{kw}/{i}")))
                .collect(),
            None => Vec::new(),
        }
    }
    /// The `$ref` target when the node has a `$ref` beside other keywords.
    pub(super) fn side_ref(&self) -> Option<Sch> {
        let r = self.obj()?.get("$ref")?.as_str()?;
        Some(Sch {
            root: self.root.clone(),
            ptr: r.get(1..)?.to_owned(),
        })
    }
    /// Whether this is the "anything" schema.
    pub fn is_any(&self) -> bool {
        match self.node() {
            Value::Bool(b) => *b,
            Value::Object(m) => m
                .keys()
                .all(|k| ANNOTATIONS.contains(&k.as_str()) || k == "default"),
            _ => false,
        }
    }
    /// Whether it is structurally the same schema as `other`.
    pub fn same_as(&self, other: &Sch) -> bool {
        (Rc::ptr_eq(&self.root, &other.root) && self.ptr == other.ptr)
            || (self.node() == other.node() && self.root == other.root)
    }
}

/// A schema as the Program stores it: self-contained, annotations removed.
/// A node inside a document becomes a `$ref` into the document, carried
/// under `$defs/root`, so its local references still resolve.
pub(crate) fn materialise(s: &Sch) -> Value {
    let node = normalise(s.node());
    if s.ptr.is_empty() {
        return node;
    }
    let root = rebase(&normalise(&s.root), "/$defs/root");
    json!({"$ref": format!("#/$defs/root{}", s.ptr), "$defs": {"root": root}})
}

/// Rewrites local `$ref`s of a schema placed at `prefix` inside a new root.
pub(crate) fn rebase(v: &Value, prefix: &str) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| {
                    let nx = match (k.as_str(), x) {
                        ("$ref", Value::String(r)) if r.starts_with('#') => {
                            Value::String(format!("#{prefix}{}", r.get(1..).unwrap_or("")))
                        }
                        _ => rebase(x, prefix),
                    };
                    (k.clone(), nx)
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(|x| rebase(x, prefix)).collect()),
        other @ (Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_)) => {
            other.clone()
        }
    }
}
