//! Strict YAML reading with positions (SPEC §1).
//!
//! A file is parsed by `saphyr-parser` into events; this module builds a JSON
//! value from them under the YAML 1.2 core schema and records the position of
//! every node and key by JSON Pointer. It refuses, each with its own code:
//! more than one document, tags, anchors and aliases, merge keys (`<<`),
//! duplicate keys, non-scalar keys, nesting deeper than [`MAX_DEPTH`],
//! `.inf`/`.nan` (not JSON), and integers outside 64 bits.
//!
//! Typed reading ([`YamlDocument::deserialize`], [`read_typed`]) goes
//! through serde with `serde_path_to_error`, so a wrong type, a missing key
//! or an unknown key is reported at the offending node's position; its
//! code is chosen from the kind of fault serde's derived code reported
//! ([`TypedErrorKind`]), not from serde's wording.

mod builder;
mod core_schema;
mod typed;

use std::collections::BTreeMap;

use coordinator_ir::pointer::escape_token;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::codes;
use crate::diagnostic::finding::{Diagnostic, Located};
use builder::Builder;
pub use core_schema::resolve_plain;
pub use typed::{
    nested_error, path_to_pointer, read_nested, read_typed, Found, TypedError, TypedErrorKind,
    TypedFault, ValueDeserializer, Wants,
};

/// Deepest nesting of sequences and mappings accepted (SPEC §1).
pub const MAX_DEPTH: usize = 64;

/// Largest authored YAML file accepted, in bytes (SPEC §1: 1 MiB).
pub const MAX_FILE_BYTES: usize = 1024 * 1024;

/// A 1-based line and column (Unicode scalar values).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Position {
    pub line: u32,
    pub column: u32,
}

/// Positions of one node: its value, and its key when it is a mapping member.
///
/// `value` and `key` are where each starts; `value_end` and `key_end` where
/// each ends (the position just past its last character, as the parser
/// reports it: for a block mapping or sequence, where the next token starts).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct NodeSpan {
    pub value: Position,
    pub value_end: Position,
    pub key: Option<Position>,
    pub key_end: Option<Position>,
}

/// A YAML file read into JSON, with the position of every node.
#[derive(Clone, Debug)]
pub struct YamlDocument {
    /// The display name used in diagnostics (as the user typed the path).
    pub file: String,
    /// The document as a JSON value (`null` for an empty file).
    pub value: Value,
    spans: BTreeMap<String, NodeSpan>,
}

impl YamlDocument {
    /// Where the node at `pointer` is; falls back to the nearest ancestor
    /// that has a position, then to line 1, column 1.
    pub fn locate(&self, pointer: &str) -> Located {
        let pos = self.position(pointer, false);
        Located {
            file: self.file.clone(),
            line: pos.line,
            column: pos.column,
            pointer: pointer.to_owned(),
        }
    }

    /// Like [`YamlDocument::locate`], but at the member's key when the node is
    /// a mapping member (for "unknown key" and "duplicate" findings).
    pub fn locate_key(&self, pointer: &str) -> Located {
        let pos = self.position(pointer, true);
        Located {
            file: self.file.clone(),
            line: pos.line,
            column: pos.column,
            pointer: pointer.to_owned(),
        }
    }

    fn position(&self, pointer: &str, key: bool) -> Position {
        let mut p = pointer;
        loop {
            if let Some(span) = self.spans.get(p) {
                return match (key, span.key) {
                    (true, Some(k)) => k,
                    _ => span.value,
                };
            }
            match p.rfind('/') {
                Some(i) => p = &p[..i],
                None => return Position { line: 1, column: 1 },
            }
        }
    }

    /// The recorded span of the node at `pointer` (no fallback to an ancestor).
    pub fn span(&self, pointer: &str) -> Option<NodeSpan> {
        self.spans.get(pointer).copied()
    }

    /// Every node's pointer and span, in pointer order.
    pub fn spans(&self) -> impl Iterator<Item = (&str, &NodeSpan)> {
        self.spans.iter().map(|(p, s)| (p.as_str(), s))
    }

    /// The innermost node at `at` (1-based line and column): its pointer, and
    /// whether `at` is on the node's key rather than its value. A position
    /// on a scalar or a key finds it (its end included, so a cursor just
    /// past a word still finds the word); otherwise the innermost mapping or
    /// sequence whose span holds `at`.
    pub fn node_at(&self, at: Position) -> Option<(String, bool)> {
        let holds = |start: Position, end: Position| start <= at && at <= end;
        let mut best: Option<(&str, bool, Position)> = None;
        for (ptr, span) in &self.spans {
            if let (Some(k), Some(ke)) = (span.key, span.key_end) {
                if holds(k, ke) {
                    return Some((ptr.clone(), true));
                }
            }
            if holds(span.value, span.value_end) {
                // The innermost node starts last.
                if best.is_none_or(|(_, _, start)| span.value >= start) {
                    best = Some((ptr.as_str(), false, span.value));
                }
            }
        }
        best.map(|(p, k, _)| (p.to_owned(), k))
    }

    /// This document placed inside `outer` at `pointer` (which `outer`
    /// must hold: the node there is replaced by this document's value),
    /// every position kept and every node's pointer prefixed by `pointer`.
    /// A file holding one member of a larger format (one scenario case) is
    /// read and located as that member: diagnostics name this file and
    /// its own lines. `None` when `outer` has no node at `pointer`.
    pub fn placed_in(self, mut outer: Value, pointer: &str) -> Option<YamlDocument> {
        *outer.pointer_mut(pointer)? = self.value;
        let spans = self
            .spans
            .into_iter()
            .map(|(p, span)| (format!("{pointer}{p}"), span))
            .collect();
        Some(YamlDocument {
            file: self.file,
            value: outer,
            spans,
        })
    }

    /// Reads the document into `T` ([`read_typed`]). On failure, returns
    /// one located diagnostic, its code chosen from the fault's kind
    /// ([`YamlDocument::typed_diagnostic`]).
    pub fn deserialize<T: DeserializeOwned>(&self) -> Result<T, Diagnostic> {
        read_typed(self.value.clone()).map_err(|fault| self.typed_diagnostic("", &fault))
    }

    /// The located diagnostic of a typed-reading fault of the node at
    /// `base` (`""` for the whole document; the fault's own pointer is
    /// relative to it).
    pub fn typed_diagnostic(&self, base: &str, fault: &TypedFault) -> Diagnostic {
        self.error_diagnostic(&format!("{base}{}", fault.pointer), &fault.error)
    }

    /// Turns serde's sentence for a fault at `pointer` into a located
    /// diagnostic, its kind read from the sentence
    /// ([`TypedErrorKind::of_message`]): for a reader whose deserializer
    /// is not [`ValueDeserializer`] (its error keeps no kind). Prefer
    /// [`read_typed`] and [`YamlDocument::typed_diagnostic`].
    pub fn serde_diagnostic(&self, pointer: &str, message: &str) -> Diagnostic {
        self.error_diagnostic(pointer, &TypedError::from_message(message))
    }

    /// The diagnostic of `error` at `pointer`: `coordinator.yaml.unknown-key`
    /// (at the key), `coordinator.yaml.missing-key`,
    /// `coordinator.yaml.unknown-value`, `coordinator.yaml.duplicate-key`
    /// (at the key) or `coordinator.yaml.wrong-type` (serde's sentence, its
    /// Rust type names made readable), by the error's kind.
    fn error_diagnostic(&self, pointer: &str, error: &TypedError) -> Diagnostic {
        let pointer = &format!("{pointer}{}", error.below());
        match error.kind() {
            TypedErrorKind::UnknownKey { key, expected } => {
                let token = format!("/{}", escape_token(key));
                let ptr = if pointer.ends_with(&token) {
                    pointer.to_owned()
                } else {
                    format!("{pointer}{token}")
                };
                let expected = if expected.is_empty() {
                    String::new()
                } else {
                    format!(" (expected {expected})")
                };
                Diagnostic::error(
                    codes::YAML_UNKNOWN_KEY,
                    self.locate_key(&ptr),
                    format!("unknown key `{key}`{expected}"),
                    "Remove the key or correct its spelling; this format refuses keys it does not define.",
                )
            }
            TypedErrorKind::MissingKey { key } => Diagnostic::error(
                codes::YAML_MISSING_KEY,
                self.locate(pointer),
                format!("missing required key `{key}`"),
                format!("Add `{key}` here."),
            ),
            TypedErrorKind::UnknownValue { value, expected } => {
                let expected = if expected.is_empty() {
                    String::new()
                } else {
                    format!("; expected {expected}")
                };
                Diagnostic::error(
                    codes::YAML_UNKNOWN_VALUE,
                    self.locate(pointer),
                    format!("`{value}` is not an accepted value{expected}"),
                    "Use one of the accepted values.",
                )
            }
            TypedErrorKind::DuplicateKey { key } => Diagnostic::error(
                codes::YAML_DUPLICATE_KEY,
                self.locate_key(pointer),
                format!("the key `{key}` is given twice (under two of its names)"),
                "Keep one of them.",
            ),
            TypedErrorKind::WrongType { found, wants } => {
                let next = match (found, wants) {
                    (Found::String, Wants::Number) => "Write the number without quotes.",
                    (_, Wants::String) => {
                        "Quote the value to make it a string, e.g. \"1\"; values are never coerced."
                    }
                    _ => "Write a value of the expected type; values are never coerced.",
                };
                let message = if pointer.is_empty() && *found == Found::Null {
                    "the file is empty; expected a mapping with apiVersion and kind".to_owned()
                } else {
                    readable_serde(error.message())
                };
                Diagnostic::error(codes::YAML_WRONG_TYPE, self.locate(pointer), message, next)
            }
        }
    }
}

/// Rewrites serde's Rust-flavoured type names for authors: `u64` becomes
/// "a whole number", `struct X` becomes "a mapping", and so on.
fn readable_serde(message: &str) -> String {
    let mut out = message.to_owned();
    for (from, to) in [
        ("expected u64", "expected a whole number (0 or more)"),
        ("expected u32", "expected a whole number (0 or more)"),
        ("expected u16", "expected a whole number (0 or more)"),
        ("expected u8", "expected a whole number (0 or more)"),
        ("expected i64", "expected a whole number"),
        ("expected i32", "expected a whole number"),
        ("expected f64", "expected a number"),
        ("invalid type: ", "wrong type: found "),
    ] {
        out = out.replace(from, to);
    }
    if let Some(i) = out.find("expected struct ") {
        out.truncate(i);
        out.push_str("expected a mapping");
    }
    if let Some(i) = out.find("expected a map") {
        out.truncate(i);
        out.push_str("expected a mapping");
    }
    out
}

/// Reads `text` (the content of file `file`) as one strict YAML document.
///
/// Errors: one diagnostic for the first fault found (codes
/// `coordinator.file.too-large`, `coordinator.yaml.syntax`,
/// `coordinator.yaml.multiple-documents`, `coordinator.yaml.tag`,
/// `coordinator.yaml.anchor`, `coordinator.yaml.merge-key`,
/// `coordinator.yaml.duplicate-key`, `coordinator.yaml.key-type`,
/// `coordinator.yaml.too-deep`, `coordinator.yaml.number`).
pub fn parse(file: &str, text: &str) -> Result<YamlDocument, Diagnostic> {
    if text.len() > MAX_FILE_BYTES {
        return Err(Diagnostic::error(
            codes::FILE_TOO_LARGE,
            Located {
                file: file.to_owned(),
                line: 1,
                column: 1,
                pointer: String::new(),
            },
            format!(
                "the file is {} bytes; at most {MAX_FILE_BYTES} bytes are accepted",
                text.len()
            ),
            "Split or shorten the file.",
        ));
    }
    if let Some((line, column, c)) = non_printable(text) {
        return Err(Diagnostic::error(
            codes::YAML_SYNTAX,
            Located {
                file: file.to_owned(),
                line,
                column,
                pointer: String::new(),
            },
            format!(
                "invalid YAML: the control character U+{:04X} is not allowed (YAML 1.2 §5.1 allows only printable characters, tab, line feed and carriage return)",
                u32::from(c)
            ),
            "Remove the character, or write it as an escape in a double-quoted string (\\u0007).",
        ));
    }
    Builder::new(file).run(text)
}

/// The first character YAML 1.2 §5.1 does not allow in a stream (C0
/// controls but tab, line feed and carriage return; DEL; C1 controls but
/// NEL; the surrogates cannot occur in a `str`; U+FFFE and U+FFFF), with
/// its 1-based line and column (columns count characters).
fn non_printable(text: &str) -> Option<(u32, u32, char)> {
    let printable = |c: char| {
        matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{7e}' | '\u{85}')
            || ('\u{a0}'..='\u{d7ff}').contains(&c)
            || ('\u{e000}'..='\u{fffd}').contains(&c)
            || c >= '\u{10000}'
    };
    let (mut line, mut column) = (1u32, 1u32);
    for c in text.chars() {
        if !printable(c) {
            return Some((line, column, c));
        }
        if c == '\n' {
            line = line.saturating_add(1);
            column = 1;
        } else {
            column = column.saturating_add(1);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn load(text: &str) -> Result<YamlDocument, Diagnostic> {
        parse("f.yaml", text)
    }

    #[test]
    fn core_schema_scalars() {
        let d =
            load("a: no\nb: on\nc: 0600\nd: 1.0\ne: ~\nf: '1'\ng: 0x1f\nh: true\ni: -3\nj: 1e3\n")
                .expect("loads");
        assert_eq!(
            d.value,
            json!({"a": "no", "b": "on", "c": 600, "d": 1.0, "e": null, "f": "1", "g": 31, "h": true, "i": -3, "j": 1000.0})
        );
    }

    #[test]
    fn positions_of_values_and_keys() {
        let d = load("top:\n  inner:\n    path: /x\n").expect("loads");
        let at = d.locate("/top/inner/path");
        assert_eq!((at.line, at.column), (3, 11));
        let key = d.locate_key("/top/inner/path");
        assert_eq!((key.line, key.column), (3, 5));
        let missing = d.locate("/top/inner/nothing");
        assert_eq!((missing.line, missing.column), (3, 5));
    }

    #[test]
    fn ends_of_values_and_keys_and_the_node_at_a_position() {
        let d = load("top:\n  inner:\n    path: /x-y\n    q: \"a b\"\n  list: [1, two]\n")
            .expect("loads");
        let s = d.span("/top/inner/path").expect("span");
        assert_eq!(
            (s.value, s.value_end),
            (
                Position {
                    line: 3,
                    column: 11
                },
                Position {
                    line: 3,
                    column: 15
                }
            )
        );
        assert_eq!(s.key_end, Some(Position { line: 3, column: 9 }));
        let q = d.span("/top/inner/q").expect("span");
        assert_eq!((q.value.column, q.value_end.column), (8, 13));
        let at = |line, column| d.node_at(Position { line, column });
        assert_eq!(at(3, 12), Some(("/top/inner/path".into(), false)));
        assert_eq!(at(3, 15), Some(("/top/inner/path".into(), false)));
        assert_eq!(at(3, 6), Some(("/top/inner/path".into(), true)));
        assert_eq!(at(5, 14), Some(("/top/list/1".into(), false)));
        assert_eq!(at(5, 12), Some(("/top/list".into(), false)));
        assert_eq!(at(9, 1), None);
    }

    #[test]
    fn control_characters_are_refused_where_they_stand() {
        let e = load("a: 1\nb: x\u{1}y\n").expect_err("control character");
        assert_eq!(
            (e.code.as_str(), e.line, e.column),
            ("coordinator.yaml.syntax", 2, 5)
        );
        assert!(e.message.contains("U+0001"), "{}", e.message);
        assert!(load("a: \"tab\\there\"\nb: \"\\u0007 escaped\"\n").is_ok());
        assert!(load("a: café ✓\n").is_ok());
    }

    #[test]
    fn refusals_have_codes() {
        let cases = [
            ("a: 1\na: 2\n", "coordinator.yaml.duplicate-key"),
            ("a: !!str 1\n", "coordinator.yaml.tag"),
            ("a: &x 1\nb: *x\n", "coordinator.yaml.anchor"),
            ("a: [1, 2\n", "coordinator.yaml.syntax"),
            ("a: 1\n---\nb: 2\n", "coordinator.yaml.multiple-documents"),
            ("a: .inf\n", "coordinator.yaml.number"),
            ("a: 99999999999999999999999\n", "coordinator.yaml.number"),
            ("? [a]\n: 1\n", "coordinator.yaml.key-type"),
            ("a: b\u{7}c\n", "coordinator.yaml.syntax"),
            ("a: b\u{7f}\n", "coordinator.yaml.syntax"),
            ("a: \"b\u{1b}\"\n", "coordinator.yaml.syntax"),
            ("a: b\u{9f}\n", "coordinator.yaml.syntax"),
        ];
        for (text, code) in cases {
            let e = load(text).expect_err(text);
            assert_eq!(e.code, code, "{text}");
            assert!(e.line >= 1, "{text}");
        }
    }

    #[test]
    fn deep_nesting_is_refused_without_overflow() {
        let text = "[".repeat(70);
        let e = load(&text).expect_err("too deep");
        assert_eq!(e.code, "coordinator.yaml.too-deep");
        // Far deeper input is refused by the parser itself, still without a panic.
        assert!(load(&"[".repeat(100_000)).is_err());
        let mut block = String::new();
        for depth in 0..80 {
            block.push_str(&" ".repeat(depth));
            block.push_str("a:\n");
        }
        assert_eq!(
            load(&block).expect_err("block").code,
            "coordinator.yaml.too-deep"
        );
    }

    #[test]
    fn oversized_file_is_refused() {
        let text = format!("a: \"{}\"\n", "x".repeat(2 * 1024 * 1024));
        assert_eq!(
            load(&text).expect_err("big").code,
            "coordinator.file.too-large"
        );
    }

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct T {
        version: String,
        inner: Option<Inner>,
    }
    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        name: String,
    }

    #[test]
    fn typed_reading_locates_faults() {
        let d = load("version: 1\n").expect("loads");
        let e = d.deserialize::<T>().expect_err("wrong type");
        assert_eq!(
            (e.code.as_str(), e.line, e.column),
            ("coordinator.yaml.wrong-type", 1, 10)
        );
        let d = load("version: '1'\ninner:\n  nmae: x\n").expect("loads");
        let e = d.deserialize::<T>().expect_err("unknown");
        assert_eq!(e.code, "coordinator.yaml.unknown-key");
        assert_eq!(
            (e.line, e.column, e.pointer.as_str()),
            (3, 3, "/inner/nmae")
        );
        let d = load("inner: {}\n").expect("loads");
        let e = d.deserialize::<T>().expect_err("missing");
        assert_eq!(e.code, "coordinator.yaml.missing-key");
    }
}
