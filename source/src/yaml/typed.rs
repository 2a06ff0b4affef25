//! Typed reading: a JSON value read into a Rust type through serde, each
//! fault kept with its kind.
//!
//! serde's derived code reports a fault through the deserializer's error
//! type, by kind (`invalid_type`, `unknown_field`, `missing_field`, …).
//! [`TypedError`] is that error type here: it records the kind it was
//! built with ([`TypedErrorKind`]), so the `coordinator.yaml.*` code of a
//! fault is chosen from the kind, never from serde's wording.
//! [`deserializer::ValueDeserializer`] reads a [`Value`] with it, as
//! `serde_json`'s own reading of a `Value` does (same calls to the
//! visitor, same messages), and [`read_typed`] adds the fault's path
//! (`serde_path_to_error`).
//!
//! A hand-written `Deserialize` that reads a value in two phases (buffer
//! it, look at its `type`, read it as that variant) passes an inner fault
//! up with its pointer and kind through [`read_nested`] and
//! [`nested_error`] (`nested.rs`).
//!
//! A fault raised as a plain message (`de::Error::custom`, as a
//! hand-written `Deserialize` or serde's untagged and flattened enums do)
//! carries no kind; its kind is read from the message
//! ([`TypedErrorKind::of_message`]), the one place serde's English is read.

mod deserializer;
mod nested;

use std::fmt::{self, Display};

use serde::de::{self, DeserializeOwned, Expected, Unexpected};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use deserializer::ValueDeserializer;
pub use nested::{nested_error, read_nested};

use coordinator_ir::pointer::escape_token;

/// What a typed-reading fault is, as serde's derived code reported it.
/// (Serialized only to pass through another deserializer's error: see
/// [`nested_error`].)
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TypedErrorKind {
    /// A mapping has a key the type does not define (`unknown_field`).
    /// `expected` lists the keys it defines as serde words it
    /// (`` `a`, `b` or `c` ``; empty when it defines none).
    UnknownKey { key: String, expected: String },
    /// A required key is absent (`missing_field`).
    MissingKey { key: String },
    /// A word is not one of the enum's (`unknown_variant`); `expected` as
    /// for [`TypedErrorKind::UnknownKey`].
    UnknownValue { value: String, expected: String },
    /// Two keys name one field (`duplicate_field`: a key and its alias).
    DuplicateKey { key: String },
    /// A value of the wrong type, a wrong value or length (`invalid_type`,
    /// `invalid_value`, `invalid_length`), or any other fault.
    WrongType { found: Found, wants: Wants },
}

/// What a wrong-typed value was, where serde says (`invalid_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Found {
    Null,
    String,
    Other,
}

/// What the type wanted instead, read from serde's description of it
/// (only to choose the hint of a wrong-type diagnostic).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Wants {
    Number,
    String,
    Other,
}

/// A typed-reading fault: its kind and serde's sentence for it (the
/// sentence `serde_json` would give for the same fault: "invalid type:
/// null, expected a string", "unknown field `x`, expected `a` or `b`").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypedError {
    kind: TypedErrorKind,
    message: String,
    /// The pointer of the node the fault is about below the node being
    /// read when it was raised (a nested read's; empty otherwise).
    below: String,
}

/// A typed-reading fault with the JSON Pointer of the node it is about,
/// relative to the value read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypedFault {
    pub pointer: String,
    pub error: TypedError,
}

impl TypedError {
    /// The fault's kind.
    pub fn kind(&self) -> &TypedErrorKind {
        &self.kind
    }

    /// serde's sentence for the fault.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// A fault known only by its sentence (a plain `custom` message, or
    /// the text of another deserializer's error): its kind read from it.
    /// A message made by [`nested_error`] gives back its kind and pointer.
    pub fn from_message(message: impl Into<String>) -> TypedError {
        let message = message.into();
        nested::decode(&message).unwrap_or_else(|| TypedError {
            kind: TypedErrorKind::of_message(&message),
            message,
            below: String::new(),
        })
    }

    /// A fault of a known `kind` with the sentence `message`, for a
    /// hand-written `Deserialize` that words its own fault (the kind is
    /// taken as given, never read from `message`).
    pub fn with_kind(kind: TypedErrorKind, message: impl Into<String>) -> TypedError {
        TypedError::new(kind, message.into())
    }

    /// The pointer below the node being read when the fault was raised
    /// (a nested read's, carried by its message; empty otherwise).
    pub(crate) fn below(&self) -> &str {
        &self.below
    }

    fn new(kind: TypedErrorKind, message: String) -> TypedError {
        TypedError {
            kind,
            message,
            below: String::new(),
        }
    }
}

impl TypedErrorKind {
    /// The kind of a fault known only by serde's sentence for it: "unknown
    /// field `…`", "missing field `…`", "unknown variant `…`" and
    /// "duplicate field `…`" are theirs, anything else a wrong type. This
    /// is the fallback for messages with no kind (see the module's doc).
    pub fn of_message(message: &str) -> TypedErrorKind {
        let expected = || {
            message
                .split_once(", expected ")
                .map(|(_, e)| e.to_owned())
                .unwrap_or_default()
        };
        if let Some(key) = between(message, "unknown field `", "`") {
            return TypedErrorKind::UnknownKey {
                key: key.to_owned(),
                expected: expected(),
            };
        }
        if let Some(key) = between(message, "missing field `", "`") {
            return TypedErrorKind::MissingKey {
                key: key.to_owned(),
            };
        }
        if let Some(value) = between(message, "unknown variant `", "`") {
            return TypedErrorKind::UnknownValue {
                value: value.to_owned(),
                expected: expected(),
            };
        }
        if let Some(key) = between(message, "duplicate field `", "`") {
            return TypedErrorKind::DuplicateKey {
                key: key.to_owned(),
            };
        }
        let found = if message.contains("invalid type: string") {
            Found::String
        } else if message.contains("invalid type: null") {
            Found::Null
        } else {
            Found::Other
        };
        let asked: Vec<Wants> = message
            .match_indices("expected ")
            .map(|(at, word)| wants(message.get(at + word.len()..).unwrap_or_default()))
            .collect();
        // As a sentence may say both, the one its hint follows: a number
        // for a quoted value, else a string, else a number.
        let wants = if found == Found::String && asked.contains(&Wants::Number) {
            Wants::Number
        } else if asked.contains(&Wants::String) {
            Wants::String
        } else if asked.contains(&Wants::Number) {
            Wants::Number
        } else {
            Wants::Other
        };
        TypedErrorKind::WrongType { found, wants }
    }
}

/// What serde's description of an expected value (`u64`, "a string",
/// "an integer") asks for.
fn wants(expected: &str) -> Wants {
    const NUMBERS: [&str; 9] = [
        "u8", "u16", "u32", "u64", "i32", "i64", "f64", "integer", "number",
    ];
    let names_number = NUMBERS.iter().any(|t| {
        [String::new(), "an ".to_owned(), "a ".to_owned()]
            .iter()
            .any(|article| expected.starts_with(&format!("{article}{t}")))
    });
    if names_number {
        Wants::Number
    } else if expected.starts_with("a string") {
        Wants::String
    } else {
        Wants::Other
    }
}

fn between<'a>(s: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let rest = s.get(s.find(start)? + start.len()..)?;
    rest.get(..rest.find(end)?)
}

/// serde's list of accepted words: `` `a` ``, `` `a` or `b` ``, `` one of
/// `a`, `b`, `c` `` (empty for none).
fn one_of(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    match quoted.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [a, b] => format!("{a} or {b}"),
        all => format!("one of {}", all.join(", ")),
    }
}

/// An unexpected value as `serde_json` words it: `null` rather than "unit
/// value", a float in JSON's shortest form.
struct JsonWords<'a>(Unexpected<'a>);

impl Display for JsonWords<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Unexpected::Unit => f.write_str("null"),
            Unexpected::Float(v) => match serde_json::Number::from_f64(v) {
                Some(n) => write!(f, "floating point `{n}`"),
                None => Display::fmt(&self.0, f),
            },
            other => Display::fmt(&other, f),
        }
    }
}

impl Display for TypedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for TypedError {}

impl de::Error for TypedError {
    fn custom<T: Display>(msg: T) -> Self {
        TypedError::from_message(msg.to_string())
    }

    fn invalid_type(unexp: Unexpected<'_>, exp: &dyn Expected) -> Self {
        let found = match unexp {
            Unexpected::Unit => Found::Null,
            Unexpected::Str(_) => Found::String,
            _ => Found::Other,
        };
        let expected = exp.to_string();
        TypedError::new(
            TypedErrorKind::WrongType {
                found,
                wants: wants(&expected),
            },
            format!("invalid type: {}, expected {expected}", JsonWords(unexp)),
        )
    }

    fn invalid_value(unexp: Unexpected<'_>, exp: &dyn Expected) -> Self {
        let expected = exp.to_string();
        TypedError::new(
            TypedErrorKind::WrongType {
                found: Found::Other,
                wants: wants(&expected),
            },
            format!("invalid value: {}, expected {expected}", JsonWords(unexp)),
        )
    }

    fn invalid_length(len: usize, exp: &dyn Expected) -> Self {
        let expected = exp.to_string();
        TypedError::new(
            TypedErrorKind::WrongType {
                found: Found::Other,
                wants: wants(&expected),
            },
            format!("invalid length {len}, expected {expected}"),
        )
    }

    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Self {
        let listed = one_of(expected);
        let message = if expected.is_empty() {
            format!("unknown variant `{variant}`, there are no variants")
        } else {
            format!("unknown variant `{variant}`, expected {listed}")
        };
        TypedError::new(
            TypedErrorKind::UnknownValue {
                value: variant.to_owned(),
                expected: listed,
            },
            message,
        )
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        let listed = one_of(expected);
        let message = if expected.is_empty() {
            format!("unknown field `{field}`, there are no fields")
        } else {
            format!("unknown field `{field}`, expected {listed}")
        };
        TypedError::new(
            TypedErrorKind::UnknownKey {
                key: field.to_owned(),
                expected: listed,
            },
            message,
        )
    }

    fn missing_field(field: &'static str) -> Self {
        TypedError::new(
            TypedErrorKind::MissingKey {
                key: field.to_owned(),
            },
            format!("missing field `{field}`"),
        )
    }

    fn duplicate_field(field: &'static str) -> Self {
        TypedError::new(
            TypedErrorKind::DuplicateKey {
                key: field.to_owned(),
            },
            format!("duplicate field `{field}`"),
        )
    }
}

/// Converts a serde_path_to_error path to a JSON Pointer.
pub fn path_to_pointer(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for seg in path.iter() {
        match seg {
            Segment::Seq { index } => out.push_str(&format!("/{index}")),
            Segment::Map { key } => out.push_str(&format!("/{}", escape_token(key))),
            Segment::Enum { .. } | Segment::Unknown => {}
        }
    }
    out
}

/// Reads `value` into `T`.
///
/// # Errors
/// The first fault, with the pointer of the node it is about (relative to
/// `value`) and its kind.
pub fn read_typed<T: DeserializeOwned>(value: Value) -> Result<T, TypedFault> {
    serde_path_to_error::deserialize(ValueDeserializer::new(value)).map_err(|err| {
        let path = path_to_pointer(err.path());
        let mut error = err.into_inner();
        TypedFault {
            pointer: path + &std::mem::take(&mut error.below),
            error,
        }
    })
}

#[cfg(test)]
mod tests;
