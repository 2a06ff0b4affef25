//! The one JSON Schema validator of the workspace. The VM validates every
//! run-time value (run input, call commands, answers, Function arguments and
//! results, outcomes) with validators built here, and the compiler checks
//! every literal against the schema it feeds with the same construction, so
//! `check` and a run can never disagree on whether a value fits (formats
//! such as `email` included).
//!
//! Options: draft 2020-12, format assertions on (`date-time`, `uuid`,
//! `email` and every other format the `jsonschema` crate knows), no remote
//! references (the crate is built without its HTTP client; Program schemas
//! are self-contained). Why this lives in `ir/`: docs/decisions.md,
//! "Schema validation".

use serde_json::Value;

pub use jsonschema::error::{TypeKind, ValidationErrorKind};
pub use jsonschema::{ValidationError, Validator};

/// Compiles `schema` (a JSON Schema document, draft 2020-12, self-contained:
/// local `$ref`s only) into a [`Validator`] with format assertions on.
///
/// # Errors
/// The `jsonschema` crate's sentence when the schema does not compile (an
/// unknown `type`, a `pattern` that is not a regular expression, a `$ref`
/// that resolves to nothing, ...).
pub fn validator(schema: &Value) -> Result<Validator, String> {
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(true)
        .build(schema)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn formats_are_asserted() {
        let v = validator(&json!({"type": "string", "format": "email"})).expect("compiles");
        assert!(v.is_valid(&json!("someone@example.org")));
        assert!(!v.is_valid(&json!("first..last@example.org")));
        let v = validator(&json!({"type": "string", "format": "date-time"})).expect("compiles");
        assert!(v.is_valid(&json!("2026-10-09T09:00:00Z")));
        assert!(!v.is_valid(&json!("noon:60")));
    }

    #[test]
    fn a_schema_that_does_not_compile_is_an_error() {
        assert!(validator(&json!({"type": "string", "pattern": "("})).is_err());
        assert!(validator(&json!({"$ref": "#/$defs/missing"})).is_err());
    }
}
