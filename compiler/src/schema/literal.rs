//! A literal's fit, decided by the run's own validator
//! ([`coordinator_ir::validation`]) rather than on the decidable subset:
//! a literal is known whole at check time, so it either fits or is an
//! error, and `check` and a run cannot disagree about it.

use coordinator_ir::validation::{self, TypeKind, ValidationErrorKind};
use serde_json::Value;

use super::verdict::{describe_types, list_values, Fit};
use super::{json_kind, materialise, show, Sch};

/// A literal's fit, decided by the run-time validator
/// ([`coordinator_ir::validation`]) against the schema exactly as the
/// Program stores it ([`materialise`]): a literal is never left unchecked,
/// so `check` and a run cannot disagree about it. When several faults are
/// found, the one nearest the literal's top level is reported.
pub(super) fn fit_literal(v: &Value, tgt: &Sch, at: &str, member: &str) -> Fit {
    let validator = match validation::validator(&materialise(tgt)) {
        Ok(x) => x,
        Err(e) => {
            return Fit::Unchecked(at.to_owned(), format!("the schema does not compile ({e})"))
        }
    };
    let fault = validator
        .iter_errors(v)
        .min_by_key(|e| e.instance_path().as_str().matches('/').count());
    match fault {
        None => Fit::Ok,
        Some(e) => {
            let here = format!("{member}{}", e.instance_path().as_str());
            let message = literal_fault(e.kind(), e.instance(), &here);
            Fit::Mismatch(at.to_owned(), here, message)
        }
    }
}

/// A validator's finding about a literal, in the words of `check`'s other
/// fit messages (`expected ... at MEMBER, found ...`). The literal is the
/// author's own text, so unlike the VM's run-time messages it is quoted.
// The kinds are jsonschema's, and grow with it: every other kind is named
// by its keyword, so a catch-all arm is the intent here.
#[allow(clippy::wildcard_enum_match_arm)]
fn literal_fault(kind: &ValidationErrorKind, found: &Value, member: &str) -> String {
    use ValidationErrorKind as K;
    let at = show(member);
    match kind {
        K::Type { kind } => {
            let ts: Vec<String> = match kind {
                TypeKind::Single(t) => vec![t.as_str().to_owned()],
                TypeKind::Multiple(set) => set.iter().map(|t| t.as_str().to_owned()).collect(),
            };
            format!(
                "expected {} at {at}, found {}",
                describe_types(&ts),
                json_kind(found)
            )
        }
        K::Enum { options } => {
            let listed = match options.as_ref() {
                Value::Array(a) => list_values(a),
                other => other.to_string(),
            };
            format!("expected one of {listed} at {at}, found {found}")
        }
        K::Constant { expected_value } => {
            format!("expected {expected_value} at {at}, found {found}")
        }
        K::MinLength { limit } => {
            format!("expected a string of at least {limit} characters at {at}")
        }
        K::MaxLength { limit } => {
            format!("expected a string of at most {limit} characters at {at}")
        }
        K::Format { format } => format!("expected a {format} string at {at}, found {found}"),
        K::Pattern { pattern } => {
            format!("expected a string matching `{pattern}` at {at}, found {found}")
        }
        K::Minimum { .. }
        | K::Maximum { .. }
        | K::ExclusiveMinimum { .. }
        | K::ExclusiveMaximum { .. } => {
            format!("the number {found} is out of the bounds the schema sets at {at}")
        }
        K::Required { property } => {
            let name = property
                .as_str()
                .map_or_else(|| property.to_string(), str::to_owned);
            format!("expected member `{name}` at {at}, which the schema requires")
        }
        K::AdditionalProperties { unexpected } => format!(
            "expected only members the schema declares at {at}; it declares no `{}`",
            unexpected.first().map(String::as_str).unwrap_or_default()
        ),
        K::MinItems { .. } | K::MaxItems { .. } => format!(
            "the list has {} items, out of the bounds the schema sets at {at}",
            found.as_array().map_or(0, Vec::len)
        ),
        K::AnyOf { .. } => format!("the value matches none of the `anyOf` alternatives at {at}"),
        K::OneOfNotValid { .. } => {
            format!("the value matches none of the `oneOf` alternatives at {at}")
        }
        K::OneOfMultipleValid { .. } => {
            format!("the value matches more than one `oneOf` alternative at {at}")
        }
        K::FalseSchema => format!("no value is accepted at {at}"),
        other => format!(
            "the value does not satisfy the schema's `{}` at {at}",
            other.keyword()
        ),
    }
}
