//! A fit check's verdict ([`Fit`]) and the words its messages use for
//! types and values: shared by the schema-to-schema fit (`fit.rs`) and a
//! literal's fit (`literal.rs`).

use serde_json::Value;

/// Result of a fit check.
#[derive(Clone, Debug)]
pub enum Fit {
    /// Every value of the source type is valid under the target.
    Ok,
    /// Not decidable here: `(mapping pointer, reason)`.
    Unchecked(String, String),
    /// Does not fit: `(mapping pointer, target member pointer, message)`.
    Mismatch(String, String, String),
}

/// A JSON Schema type name as a message says it (`a list`, `an object`).
fn type_word(t: &str) -> String {
    match t {
        "object" => "an object".into(),
        "array" => "a list".into(),
        "integer" => "an integer".into(),
        "null" => "null".into(),
        other => format!("a {other}"),
    }
}

/// Type names joined with "or" as a message says them.
pub(super) fn describe_types(ts: &[String]) -> String {
    ts.iter()
        .map(|t| type_word(t))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// Enumerated values as a message lists them, comma-separated JSON.
pub(super) fn list_values(e: &[Value]) -> String {
    e.iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
