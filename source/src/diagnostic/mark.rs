//! The stretch of its file a diagnostic marks ([`mark`]): the rich form of
//! `check` draws it, the language server publishes it as its range.

use super::finding::Diagnostic;
use crate::yaml::{Position, YamlDocument};

/// The stretch of its file a diagnostic marks: from `start` to `end`
/// (exclusive), 1-based lines and columns counted in Unicode scalar values.
/// `None` for a diagnostic without a position (a file that could not be read)
/// or one whose line is not in `text`.
///
/// With `doc` (the same text read as YAML), a diagnostic at a scalar or a key
/// marks the whole scalar or key as the parser saw it (quotes included);
/// anything else marks the word at its position (up to the next white
/// space), or one character when there is no word there. The mark always
/// starts at the diagnostic's own position, so the text form and the
/// marked form point at the same place.
pub fn mark(
    d: &Diagnostic,
    text: &str,
    doc: Option<&YamlDocument>,
) -> Option<(Position, Position)> {
    if d.line == 0 {
        return None;
    }
    let line_text = text.lines().nth((d.line - 1) as usize)?;
    let width = u32::try_from(line_text.chars().count()).unwrap_or(u32::MAX);
    let start = Position {
        line: d.line,
        column: d.column.clamp(1, width.saturating_add(1)),
    };
    if let Some(span) = doc.and_then(|doc| {
        let span = doc.span(&d.pointer)?;
        if span.key == Some(start) {
            return span.key_end.map(|end| (start, end));
        }
        let scalar = !matches!(
            doc.value.pointer(&d.pointer),
            Some(serde_json::Value::Object(_) | serde_json::Value::Array(_)) | None
        );
        (scalar && span.value == start).then_some((start, span.value_end))
    }) {
        if span.1 > span.0 {
            return Some(span);
        }
    }
    let rest = line_text.chars().skip((start.column - 1) as usize);
    let word = u32::try_from(rest.take_while(|c| !c.is_whitespace()).count()).unwrap_or(0);
    let end_column = if word > 0 {
        start.column.saturating_add(word)
    } else {
        start.column.saturating_add(1).min(width.saturating_add(1))
    };
    Some((
        start,
        Position {
            line: d.line,
            column: end_column,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostic::finding::Located;

    #[test]
    fn marks_scalars_keys_and_words() {
        let text = "a:\n  path: \"/x y\"\n  other: 1\n";
        let doc = crate::yaml::parse("f.yaml", text).ok();
        assert!(doc.is_some());
        let rhai = "\n\n\nfn f(x) { bad here }\n";
        let d = |line, column, pointer: &str| Diagnostic {
            line,
            column,
            pointer: pointer.into(),
            ..Diagnostic::error(
                "c.a.b",
                Located {
                    file: "f.yaml".into(),
                    ..Located::default()
                },
                "m",
                "n",
            )
        };
        let cols = |m: Option<(Position, Position)>| m.map(|(s, e)| (s.line, s.column, e.column));
        assert_eq!(
            cols(mark(&d(2, 9, "/a/path"), text, doc.as_ref())),
            Some((2, 9, 15))
        );
        assert_eq!(
            cols(mark(&d(2, 3, "/a/path"), text, doc.as_ref())),
            Some((2, 3, 7))
        );
        assert_eq!(
            cols(mark(&d(2, 3, "/a"), text, doc.as_ref())),
            Some((2, 3, 8))
        );
        assert_eq!(cols(mark(&d(4, 11, ""), rhai, None)), Some((4, 11, 14)));
        assert_eq!(cols(mark(&d(4, 99, ""), rhai, None)), Some((4, 21, 21)));
        assert_eq!(mark(&d(0, 0, ""), text, None), None);
        assert_eq!(mark(&d(40, 1, ""), text, None), None);
    }
}
