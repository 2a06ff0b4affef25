//! Diagnostic codes as data: one [`DiagnosticCode`] per code, with its
//! severity, its page and what it means, declared once in a table. A crate
//! that raises diagnostics declares its codes with [`diagnostic_codes!`](crate::diagnostic_codes)
//! (this crate's `file.*` and `yaml.*` codes below; the compiler's,
//! the runtime check's, the scenario host's and `coordinatorctl`'s in their
//! own `codes` modules), and its raise sites name the table's constants
//! (`codes::YAML_SYNTAX`), so a code is written out whole in one place.
//! `golden/tests/error_pages.rs` holds every table to `docs/errors/`.

use crate::diagnostic::finding::Severity;

/// One diagnostic code and what it means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiagnosticCode {
    /// The full stable code, `coordinator.<area>.<condition>`.
    pub code: &'static str,
    /// The severity it is raised with.
    pub severity: Severity,
    /// What it means, in one line (the first sentence of its page's cause).
    pub meaning: &'static str,
}

impl DiagnosticCode {
    /// Its page, relative to the workspace root: `docs/errors/<code>.md`.
    pub fn page(&self) -> String {
        format!("docs/errors/{}.md", self.code)
    }
}

/// Declares a table of diagnostic codes: for each row
/// `NAME = ("coordinator.area.condition", Error | Warning, "meaning");`
/// a constant `NAME` holding the code (the `&str` a
/// [`Diagnostic`](crate::Diagnostic) carries), and `ALL`, every row as a
/// [`DiagnosticCode`] in table order.
#[macro_export]
macro_rules! diagnostic_codes {
    ($($name:ident = ($code:literal, $severity:ident, $meaning:literal);)+) => {
        $(
            #[doc = concat!("`", $code, "`: ", $meaning)]
            pub const $name: &str = $code;
        )+
        /// Every code of this table, in table order.
        pub const ALL: &[$crate::codes::DiagnosticCode] = &[$(
            $crate::codes::DiagnosticCode {
                code: $name,
                severity: $crate::Severity::$severity,
                meaning: $meaning,
            }
        ),+];
    };
}

diagnostic_codes! {
    FILE_ENCODING = ("coordinator.file.encoding", Error,
        "The file is not UTF-8 text (invalid bytes or NUL bytes): probably a binary file.");
    FILE_NOT_REGULAR = ("coordinator.file.not-regular", Error,
        "An input path names a directory, a device, a pipe or a socket.");
    FILE_TOO_LARGE = ("coordinator.file.too-large", Error,
        "An authored file is larger than accepted (workflow.yaml 1 MiB, functions.rhai 64 KiB).");
    FILE_UNREADABLE = ("coordinator.file.unreadable", Error,
        "A project file is missing or cannot be read.");
    YAML_ANCHOR = ("coordinator.yaml.anchor", Error,
        "YAML anchors and aliases are refused.");
    YAML_DUPLICATE_KEY = ("coordinator.yaml.duplicate-key", Error,
        "A mapping has the same key twice.");
    YAML_KEY_TYPE = ("coordinator.yaml.key-type", Error,
        "A mapping key is not a scalar.");
    YAML_MERGE_KEY = ("coordinator.yaml.merge-key", Error,
        "YAML merge keys (`<<`) are refused.");
    YAML_MISSING_KEY = ("coordinator.yaml.missing-key", Error,
        "A required key is missing.");
    YAML_MULTIPLE_DOCUMENTS = ("coordinator.yaml.multiple-documents", Error,
        "The file holds more than one YAML document.");
    YAML_NUMBER = ("coordinator.yaml.number", Error,
        "A number is not representable in JSON (`.inf`, `.nan`, an integer outside 64 bits).");
    YAML_SYNTAX = ("coordinator.yaml.syntax", Error,
        "The file is not valid YAML.");
    YAML_TAG = ("coordinator.yaml.tag", Error,
        "YAML tags (`!x`, `!!str`) are refused.");
    YAML_TOO_DEEP = ("coordinator.yaml.too-deep", Error,
        "Nesting deeper than 64 levels.");
    YAML_UNKNOWN_KEY = ("coordinator.yaml.unknown-key", Error,
        "A key the format does not define.");
    YAML_UNKNOWN_VALUE = ("coordinator.yaml.unknown-value", Error,
        "A value outside the accepted set (e.g. a step `type`).");
    YAML_WRONG_TYPE = ("coordinator.yaml.wrong-type", Error,
        "A value of the wrong type; values are never coerced (`version: 1` must be quoted).");
}
