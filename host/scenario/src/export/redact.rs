//! `--redact POINTER`: a member of the run's input replaced by a
//! placeholder of its type, and every copy of its values in the case's
//! payloads too (an answer that echoes an id), so the real value appears
//! nowhere in the exported file (docs/scenarios.md "Redaction").
//!
//! Placeholders: each distinct string becomes `redacted-N` (N from 1, in
//! the order found), a number `0`, a boolean `false`; objects and arrays
//! keep their shape with their leaves replaced. Copies are replaced in the
//! payloads only (the input, each reply's `value`, `code` and
//! `refusalCode`, each completion's `value`, `expect.output`): a string
//! wherever it occurs inside a string or a member name, a number where an
//! equal number is.

use serde_json::{Map, Number, Value};

use super::ExportRefused;

/// A case with its redactions applied, and the strings it hides.
pub(super) struct Redacted {
    /// The case.
    pub(super) case: Value,
    /// The real strings replaced, with the pointer each came from (for
    /// [`check_hidden`]).
    pub(super) hidden: Vec<(String, String)>,
}

/// What one real leaf becomes.
struct Replacements {
    strings: Vec<(String, String, String)>,
    numbers: Vec<Number>,
}

impl Replacements {
    fn placeholder_of(&mut self, pointer: &str, s: &str) -> String {
        if let Some((_, _, p)) = self.strings.iter().find(|(real, _, _)| real == s) {
            return p.clone();
        }
        let p = format!("redacted-{}", self.strings.len() + 1);
        self.strings
            .push((s.to_owned(), pointer.to_owned(), p.clone()));
        p
    }

    /// `v` with its leaves replaced, recording each.
    fn replace_leaves(&mut self, pointer: &str, v: &Value) -> Value {
        match v {
            Value::String(s) if !s.is_empty() => Value::String(self.placeholder_of(pointer, s)),
            Value::Number(n) => {
                if !self.numbers.contains(n) {
                    self.numbers.push(n.clone());
                }
                Value::Number(Number::from(0))
            }
            Value::Bool(_) => Value::Bool(false),
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|item| self.replace_leaves(pointer, item))
                    .collect(),
            ),
            Value::Object(members) => Value::Object(
                members
                    .iter()
                    .map(|(k, item)| (k.clone(), self.replace_leaves(pointer, item)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    /// `v` with every copy of a replaced value replaced.
    fn replace_copies(&self, v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(self.replace_in(s)),
            Value::Number(n) if self.numbers.contains(n) => Value::Number(Number::from(0)),
            Value::Array(items) => {
                Value::Array(items.iter().map(|item| self.replace_copies(item)).collect())
            }
            Value::Object(members) => Value::Object(
                members
                    .iter()
                    .map(|(k, item)| (self.replace_in(k), self.replace_copies(item)))
                    .collect::<Map<_, _>>(),
            ),
            other => other.clone(),
        }
    }

    /// `s` with each real string replaced by its placeholder, the longest
    /// first (so a value that contains another is replaced whole).
    fn replace_in(&self, s: &str) -> String {
        let mut order: Vec<&(String, String, String)> = self.strings.iter().collect();
        order.sort_by_key(|(real, _, _)| std::cmp::Reverse(real.len()));
        order.into_iter().fold(s.to_owned(), |acc, (real, _, p)| {
            acc.replace(real.as_str(), p)
        })
    }
}

/// `case` with each input member `pointers` names replaced, and the copies
/// of its values in the payloads.
///
/// # Errors
/// [`ExportRefused::RedactInvalid`] for a pointer that is not a JSON
/// Pointer to a member of the input (`""`, the whole input, is refused
/// too: name its members).
pub(super) fn redact_case(mut case: Value, pointers: &[String]) -> Result<Redacted, ExportRefused> {
    let mut replacements = Replacements {
        strings: Vec::new(),
        numbers: Vec::new(),
    };
    for pointer in pointers {
        let invalid = |reason: &str| ExportRefused::RedactInvalid {
            pointer: pointer.clone(),
            reason: reason.to_owned(),
        };
        if !pointer.starts_with('/') {
            return Err(invalid(
                "not a JSON Pointer to a member of the input (it starts with `/`, as /applicationId)",
            ));
        }
        let slot = case
            .get_mut("input")
            .and_then(|input| input.pointer_mut(pointer))
            .ok_or_else(|| invalid("the run's input has no member there"))?;
        let replaced = replacements.replace_leaves(pointer, slot);
        *slot = replaced;
    }
    for area in payload_areas(&mut case) {
        *area = replacements.replace_copies(area);
    }
    Ok(Redacted {
        case,
        hidden: replacements
            .strings
            .into_iter()
            .map(|(real, pointer, _)| (real, pointer))
            .collect(),
    })
}

/// The payloads of `case` copies of an input value may be in.
fn payload_areas(case: &mut Value) -> Vec<&mut Value> {
    let Some(case) = case.as_object_mut() else {
        return Vec::new();
    };
    let mut areas = Vec::new();
    for (key, member) in case.iter_mut() {
        match key.as_str() {
            "input" => areas.push(member),
            "replies" => {
                for reply in member
                    .as_object_mut()
                    .into_iter()
                    .flat_map(|m| m.values_mut())
                    .filter_map(Value::as_array_mut)
                    .flatten()
                    .filter_map(Value::as_object_mut)
                {
                    for (k, v) in reply.iter_mut() {
                        if matches!(k.as_str(), "value" | "code" | "refusalCode") {
                            areas.push(v);
                        }
                    }
                }
            }
            "completions" => areas.extend(
                member
                    .as_object_mut()
                    .into_iter()
                    .flat_map(|m| m.values_mut())
                    .filter_map(|c| c.get_mut("value")),
            ),
            "expect" => areas.extend(member.get_mut("output")),
            _ => {}
        }
    }
    areas
}

/// Refuses a file `text` in which a hidden string still appears (outside
/// the placeholders): it is also a step name, an outcome, a code word or
/// part of the file's fixed text, which no placeholder may replace. The
/// refusal names the pointer, never the value.
pub(super) fn check_hidden(text: &str, hidden: &[(String, String)]) -> Result<(), ExportRefused> {
    let stripped = strip_placeholders(text);
    for (real, pointer) in hidden {
        let escaped = serde_json::to_string(real).unwrap_or_default();
        let inner = escaped.trim_matches('"');
        if stripped.contains(real.as_str()) || stripped.contains(inner) {
            return Err(ExportRefused::RedactInvalid {
                pointer: pointer.clone(),
                reason: "a value there also appears in the case where no placeholder may stand (a step or outcome name, a word of the format, the run id): it cannot be hidden".to_owned(),
            });
        }
    }
    Ok(())
}

/// `text` with every `redacted-N` placeholder removed.
fn strip_placeholders(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some((before, after)) = rest.split_once("redacted-") {
        out.push_str(before);
        rest = after.trim_start_matches(|c: char| c.is_ascii_digit());
    }
    out.push_str(rest);
    out
}
