//! What `convert` reports: the rules it applied (each where it applied it
//! in the OLD project) and the items a person must settle (warnings with a
//! code of `codes.rs`, their location in OLD and the next step).

use coordinator_source::{Diagnostic, Located, YamlDocument};
use serde::Serialize;

/// One rule applied to the OLD project: its name, where in OLD, what it
/// did, and what to look at in NEW.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AppliedRule {
    /// The rule's name (`input-schema-to-type`, `read-record-answer`, ...;
    /// docs/convert.md lists them).
    pub rule: &'static str,
    /// OLD's file as given on the command line.
    pub file: String,
    /// 1-based line in OLD's file.
    pub line: u32,
    /// 1-based column in OLD's file.
    pub column: u32,
    /// JSON Pointer of the node in OLD's file.
    pub pointer: String,
    /// What the rule did, naming the item.
    pub detail: String,
    /// What to review in NEW.
    pub next: String,
}

/// The rules applied and the items left for a person, in the order found.
#[derive(Default, Debug)]
pub struct Findings {
    pub rules: Vec<AppliedRule>,
    pub people: Vec<Diagnostic>,
}

impl Findings {
    /// Records rule `rule` applied at `pointer` of `doc`.
    pub fn rule(
        &mut self,
        rule: &'static str,
        doc: &YamlDocument,
        pointer: &str,
        detail: impl Into<String>,
        next: impl Into<String>,
    ) {
        let at = doc.locate(pointer);
        self.rules.push(AppliedRule {
            rule,
            file: at.file,
            line: at.line,
            column: at.column,
            pointer: at.pointer,
            detail: detail.into(),
            next: next.into(),
        });
    }

    /// Records an item for a person (code `code`) at `pointer` of `doc`.
    pub fn person(
        &mut self,
        code: &str,
        doc: &YamlDocument,
        pointer: &str,
        message: impl Into<String>,
        next: impl Into<String>,
    ) {
        self.people.push(Diagnostic::warning(
            code,
            doc.locate(pointer),
            message,
            next,
        ));
    }

    /// Records an item for a person at a place that is not a YAML node
    /// (a line of functions.rhai).
    pub fn person_at(
        &mut self,
        code: &str,
        at: Located,
        message: impl Into<String>,
        next: impl Into<String>,
    ) {
        self.people
            .push(Diagnostic::warning(code, at, message, next));
    }
}

/// The text lines of the rules applied: `rule NAME FILE:LINE:COLUMN POINTER`
/// then the detail and the next step, indented.
pub fn render_rules(rules: &[AppliedRule]) -> String {
    let mut out = String::new();
    for r in rules {
        out.push_str(&format!(
            "rule {} {}:{}:{} {}\n  {}\n  next: {}\n",
            r.rule,
            r.file,
            r.line,
            r.column,
            if r.pointer.is_empty() {
                "/"
            } else {
                &r.pointer
            },
            r.detail,
            r.next
        ));
    }
    out
}
