//! Hover, go-to-definition and completion in `workflow.yaml`, read from the
//! document's nodes and their positions (`coordinator_source`), so they work
//! on a file that does not compile yet.
//!
//! A name under the cursor is one of: a step, an operation alias, a
//! Function, a type, an outcome (each declared under `workflow.steps`,
//! `operations`, `functions`, `types`, `workflow.outcomes`), or a host
//! operation of the catalogue (`uses`). Hover shows the `explain` words:
//! a step's explain line, an alias's host operation, product, effect and
//! recovery.

use coordinator_compiler::ast::ProjectFile;
use coordinator_ir::catalogue;
use coordinator_source::{yaml::Position, YamlDocument};
use lsp_types::{CompletionItem, CompletionItemKind, Position as LspPosition};
use serde_json::Value;

use super::position;

/// What a name names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Step,
    Alias,
    Function,
    Type,
    Outcome,
    /// A host operation of the catalogue (`breg.read-record/v1`).
    Operation,
}

impl Kind {
    /// The JSON Pointer of the mapping that declares names of this kind.
    fn declarations(self) -> Option<&'static str> {
        match self {
            Kind::Step => Some("/workflow/steps"),
            Kind::Alias => Some("/operations"),
            Kind::Function => Some("/functions"),
            Kind::Type => Some("/types"),
            Kind::Outcome => Some("/workflow/outcomes"),
            Kind::Operation => None,
        }
    }
}

/// A name under the cursor: its kind, its text and where it stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameAt {
    pub kind: Kind,
    pub name: String,
    pub start: Position,
    pub end: Position,
}

/// What a key names when it holds a reference in its value.
fn reference_kind(tokens: &[&str]) -> Option<Kind> {
    let last = *tokens.last()?;
    match tokens {
        ["workflow", "start"] => return Some(Kind::Step),
        ["workflow", "steps", _, "next" | "onDeclaredRefusal" | "onTimeout" | "onCancel"] => {
            return Some(Kind::Step)
        }
        ["workflow", "steps", _, "cases", _] => return Some(Kind::Step),
        ["workflow", "steps", _, "outcome"] => return Some(Kind::Outcome),
        ["operations", _, "uses"] => return Some(Kind::Operation),
        _ => {}
    }
    match last {
        "step" => Some(Kind::Step),
        "operation" | "operationOutput" | "operationInput" => Some(Kind::Alias),
        "function" => Some(Kind::Function),
        "typeRef" => Some(Kind::Type),
        _ => None,
    }
}

/// What a key declares, when it is the key of a declaration.
fn declaration_kind(tokens: &[&str]) -> Option<Kind> {
    match tokens {
        ["workflow", "steps", _] => Some(Kind::Step),
        ["operations", _] => Some(Kind::Alias),
        ["functions", _] => Some(Kind::Function),
        ["types", _] => Some(Kind::Type),
        ["workflow", "outcomes", _] => Some(Kind::Outcome),
        _ => None,
    }
}

/// The name at `at` in `doc`, when the cursor is on one.
pub fn name_at(doc: &YamlDocument, at: Position) -> Option<NameAt> {
    let (pointer, on_key) = doc.node_at(at)?;
    let tokens = coordinator_ir::pointer::tokens(&pointer)?;
    let tokens: Vec<&str> = tokens.iter().map(String::as_str).collect();
    let span = doc.span(&pointer)?;
    if on_key {
        let kind = declaration_kind(&tokens)?;
        return Some(NameAt {
            kind,
            name: (*tokens.last()?).to_owned(),
            start: span.key?,
            end: span.key_end?,
        });
    }
    let Some(Value::String(name)) = doc.value.pointer(&pointer) else {
        return None;
    };
    Some(NameAt {
        kind: reference_kind(&tokens)?,
        name: name.clone(),
        start: span.value,
        end: span.value_end,
    })
}

/// Where `name` of `kind` is declared: its key's start and end.
pub fn declaration(doc: &YamlDocument, kind: Kind, name: &str) -> Option<(Position, Position)> {
    let pointer = format!(
        "{}/{}",
        kind.declarations()?,
        coordinator_ir::pointer::escape_token(name)
    );
    let span = doc.span(&pointer)?;
    Some((span.key?, span.key_end?))
}

/// The explain words of a host operation: `breg read, recovery read-again`.
fn operation_words(uses: &str) -> Option<String> {
    let d = catalogue::lookup(uses)?;
    Some(format!(
        "{} {}, recovery {}",
        d.product.as_str(),
        d.effect.as_str(),
        d.recovery.as_str()
    ))
}

fn string_at<'a>(doc: &'a YamlDocument, pointer: &str) -> Option<&'a str> {
    doc.value.pointer(pointer).and_then(Value::as_str)
}

/// The hover text (Markdown) of the name at `at`. `project` is the typed
/// file when it reads (the current text, or the last that did), for a
/// step's explain line.
pub fn hover(
    doc: &YamlDocument,
    project: Option<&ProjectFile>,
    at: Position,
) -> Option<(NameAt, String)> {
    let found = name_at(doc, at)?;
    let n = &found.name;
    let escaped = coordinator_ir::pointer::escape_token(n);
    let text = match found.kind {
        Kind::Step => {
            let line = project.and_then(|p| {
                let step = p.workflow.steps.get(n)?;
                Some(coordinator_compiler::explain::step_line(p, n, step))
            });
            match line {
                Some(line) => format!("step `{n}`\n\n```text\n{line}\n```"),
                None => {
                    let kind = string_at(doc, &format!("/workflow/steps/{escaped}/type"))?;
                    format!("step `{n}` ({kind}); its explain line needs a file that reads")
                }
            }
        }
        Kind::Alias => {
            let base = format!("/operations/{escaped}");
            let uses = string_at(doc, &format!("{base}/uses"))?;
            let connection = string_at(doc, &format!("{base}/connection")).unwrap_or("?");
            let words = operation_words(uses)
                .map(|w| format!(" ({w})"))
                .unwrap_or_else(|| " (not an operation of the catalogue)".into());
            format!(
                "operation alias `{n}`\n\nhost operation `{uses}` on connection `{connection}`{words}"
            )
        }
        Kind::Operation => {
            let words = operation_words(n)?;
            format!("host operation `{n}` ({words})")
        }
        Kind::Function => {
            let base = format!("/functions/{escaped}");
            let entry = string_at(doc, &format!("{base}/entrypoint")).unwrap_or("?");
            let source = string_at(doc, &format!("{base}/source")).unwrap_or("?");
            format!("Function `{n}`: `{entry}` in `{source}`")
        }
        Kind::Type | Kind::Outcome => {
            let what = if found.kind == Kind::Type {
                "type"
            } else {
                "outcome"
            };
            let pointer = format!("{}/{escaped}", found.kind.declarations()?);
            let schema = doc.value.pointer(&pointer)?;
            let json = serde_json::to_string_pretty(schema).unwrap_or_default();
            let json: Vec<&str> = json.lines().take(40).collect();
            format!("{what} `{n}`\n\n```json\n{}\n```", json.join("\n"))
        }
    };
    Some((found, text))
}

/// The key whose value the cursor is in, and its parent key, read from the
/// text (indentation), so that it works while the line is half typed.
fn context(text: &str, at: LspPosition) -> Option<(String, Option<String>)> {
    let line = position::line(text, at.line as usize)?;
    let cut = line
        .char_indices()
        .scan(0u32, |units, (i, c)| {
            let here = *units;
            *units = units.saturating_add(c.len_utf16() as u32);
            Some((i, here))
        })
        .find(|(_, units)| *units >= at.character)
        .map_or(line.len(), |(i, _)| i);
    let before = line.get(..cut)?;
    let colon = before.rfind(':')?;
    let value = before.get(colon + 1..)?;
    if value.contains(['"', '\'', '#']) {
        return None;
    }
    let head = before.get(..colon)?;
    let key_start = head.rfind([',', '{', '-', ' ']).map_or(0, |i| i + 1);
    let key = head.get(key_start..)?.trim().to_owned();
    let indent = line.len() - line.trim_start().len();
    let parent = (0..at.line as usize).rev().find_map(|i| {
        let l = position::line(text, i)?;
        let t = l.trim_start();
        if t.is_empty() || t.starts_with('#') || l.len() - t.len() >= indent {
            return None;
        }
        Some(t.split(':').next().unwrap_or_default().trim().to_owned())
    });
    Some((key, parent))
}

/// Completion items where a step, alias, outcome, Function, type or host
/// operation name is expected. Names come from `doc` (the current text, or
/// the last that read as YAML).
pub fn completion(text: &str, doc: Option<&YamlDocument>, at: LspPosition) -> Vec<CompletionItem> {
    let Some((key, parent)) = context(text, at) else {
        return Vec::new();
    };
    let kind = match key.as_str() {
        "next" | "onDeclaredRefusal" | "onTimeout" | "onCancel" | "start" | "step" => Kind::Step,
        "operation" | "operationOutput" | "operationInput" => Kind::Alias,
        "outcome" => Kind::Outcome,
        "uses" => Kind::Operation,
        "function" => Kind::Function,
        "typeRef" => Kind::Type,
        _ if parent.as_deref() == Some("cases") => Kind::Step,
        _ => return Vec::new(),
    };
    if kind == Kind::Operation {
        return catalogue::OPERATION_IDS
            .iter()
            .map(|id| CompletionItem {
                label: (*id).to_owned(),
                kind: Some(CompletionItemKind::ENUM_MEMBER),
                detail: operation_words(id),
                ..CompletionItem::default()
            })
            .collect();
    }
    let Some(doc) = doc else {
        return Vec::new();
    };
    let Some(Value::Object(names)) = kind.declarations().and_then(|p| doc.value.pointer(p)) else {
        return Vec::new();
    };
    names
        .iter()
        .map(|(name, value)| {
            let detail = match kind {
                Kind::Step => value
                    .get("type")
                    .and_then(Value::as_str)
                    .map(|t| format!("{t} step")),
                Kind::Alias => value.get("uses").and_then(Value::as_str).map(str::to_owned),
                Kind::Function => Some("Function".into()),
                Kind::Outcome => Some("outcome".into()),
                Kind::Type => Some("type".into()),
                Kind::Operation => None,
            };
            CompletionItem {
                label: name.clone(),
                kind: Some(match kind {
                    Kind::Function => CompletionItemKind::FUNCTION,
                    Kind::Type => CompletionItemKind::STRUCT,
                    Kind::Outcome => CompletionItemKind::ENUM_MEMBER,
                    _ => CompletionItemKind::REFERENCE,
                }),
                detail,
                ..CompletionItem::default()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const WF: &str = "operations:\n  read-it:\n    uses: breg.read-record/v1\n    connection: apps\nworkflow:\n  start: first\n  steps:\n    first:\n      type: call\n      operation: read-it\n      next: done\n    pick:\n      type: choose\n      cases:\n        a: \n    done:\n      type: finish\n      outcome: ok\n  outcomes:\n    ok:\n      type: \"null\"\n";

    fn at(line: u32, column: u32) -> Position {
        Position { line, column }
    }

    #[test]
    fn names_definitions_hovers_and_completions() {
        let doc = coordinator_source::parse("workflow.yaml", WF).expect("reads");
        let found = name_at(&doc, at(10, 20)).expect("alias");
        assert_eq!((found.kind, found.name.as_str()), (Kind::Alias, "read-it"));
        assert_eq!(
            declaration(&doc, Kind::Alias, "read-it"),
            Some((at(2, 3), at(2, 10)))
        );
        let (_, text) = hover(&doc, None, at(10, 20)).expect("hover");
        assert!(text.contains("host operation `breg.read-record/v1` on connection `apps` (breg read, recovery read-again)"), "{text}");
        let next = name_at(&doc, at(11, 13)).expect("next");
        assert_eq!((next.kind, next.name.as_str()), (Kind::Step, "done"));
        assert_eq!(
            name_at(&doc, at(18, 17)).map(|n| n.kind),
            Some(Kind::Outcome)
        );
        assert_eq!(name_at(&doc, at(8, 6)).map(|n| n.kind), Some(Kind::Step));
        let labels = |line, character| -> Vec<String> {
            completion(WF, Some(&doc), LspPosition { line, character })
                .into_iter()
                .map(|c| c.label)
                .collect()
        };
        assert_eq!(labels(10, 14), ["first", "pick", "done"]);
        assert_eq!(labels(14, 11), ["first", "pick", "done"]);
        assert_eq!(labels(9, 17), ["read-it"]);
        assert_eq!(labels(17, 15), ["ok"]);
        assert_eq!(labels(2, 10).len(), 10);
        assert!(labels(8, 6).is_empty());
    }
}
