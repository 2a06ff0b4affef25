//! Positions in a document's text: the compiler's (1-based lines, columns
//! in Unicode scalar values) converted to and from the protocol's (0-based
//! lines, UTF-16 code units), byte offsets of protocol positions, and a
//! content change applied to a text.

use coordinator_source::yaml::Position;
use lsp_types::Position as LspPosition;

/// The line of `text` at 0-based `index` (without its line break).
pub fn line(text: &str, index: usize) -> Option<&str> {
    text.split('\n')
        .nth(index)
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
}

/// A 1-based line and column (Unicode scalar values) as a protocol
/// position (0-based line, UTF-16 code units).
pub fn to_lsp_position(text: &str, at: Position) -> LspPosition {
    let index = at.line.saturating_sub(1) as usize;
    let units = line(text, index)
        .map(|l| {
            l.chars()
                .take(at.column.saturating_sub(1) as usize)
                .map(char::len_utf16)
                .sum::<usize>()
        })
        .unwrap_or(0);
    LspPosition {
        line: at.line.saturating_sub(1),
        character: u32::try_from(units).unwrap_or(u32::MAX),
    }
}

/// A protocol position as a 1-based line and column (Unicode scalar
/// values); a position inside a surrogate pair or past the end of its line
/// is moved to the next character boundary or the line's end.
pub fn from_lsp_position(text: &str, at: LspPosition) -> Position {
    let mut column = 1u32;
    if let Some(l) = line(text, at.line as usize) {
        let mut units = 0u32;
        for c in l.chars() {
            if units >= at.character {
                break;
            }
            units = units.saturating_add(c.len_utf16() as u32);
            column = column.saturating_add(1);
        }
    }
    Position {
        line: at.line.saturating_add(1),
        column,
    }
}

/// The byte offset of a protocol position in `text` (clamped to the text).
pub fn byte_offset(text: &str, at: LspPosition) -> usize {
    let mut offset = 0usize;
    for (i, l) in text.split_inclusive('\n').enumerate() {
        if i == at.line as usize {
            let body = l.trim_end_matches(['\n', '\r']);
            let mut units = 0u32;
            for (b, c) in body.char_indices() {
                if units >= at.character {
                    return offset + b;
                }
                units = units.saturating_add(c.len_utf16() as u32);
            }
            return offset + body.len();
        }
        offset += l.len();
    }
    text.len()
}

/// Applies one content change to a document's text: the whole text when
/// the change has no range, else the range replaced.
pub fn apply_change(text: &mut String, change: &lsp_types::TextDocumentContentChangeEvent) {
    match change.range {
        None => text.clone_from(&change.text),
        Some(range) => {
            let start = byte_offset(text, range.start);
            let end = byte_offset(text, range.end).max(start);
            text.replace_range(start..end, &change.text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lsp_types::Range;

    #[test]
    fn positions_convert_both_ways_in_utf16() {
        let text = "a: 1\nb: \"😀é\" x\r\nlast";
        let p = Position { line: 2, column: 8 };
        let l = to_lsp_position(text, p);
        assert_eq!((l.line, l.character), (1, 8));
        assert_eq!(from_lsp_position(text, l), p);
        // Inside the surrogate pair: the next boundary.
        let mid = from_lsp_position(
            text,
            LspPosition {
                line: 1,
                character: 5,
            },
        );
        assert_eq!(mid.column, 6);
        assert_eq!(
            byte_offset(
                text,
                LspPosition {
                    line: 1,
                    character: 99
                }
            ),
            18
        );
        assert_eq!(
            byte_offset(
                text,
                LspPosition {
                    line: 9,
                    character: 0
                }
            ),
            text.len()
        );
        let mut t = String::from("ab\ncd");
        apply_change(
            &mut t,
            &lsp_types::TextDocumentContentChangeEvent {
                range: Some(Range {
                    start: LspPosition {
                        line: 1,
                        character: 1,
                    },
                    end: LspPosition {
                        line: 0,
                        character: 0,
                    },
                }),
                range_length: None,
                text: "X".into(),
            },
        );
        assert_eq!(t, "ab\ncXd");
    }
}
