//! From the parser's events to a JSON value and the span of every node:
//! the refusals of the strict reading (tags, anchors, aliases, merge keys,
//! duplicate and non-scalar keys, nesting deeper than [`MAX_DEPTH`], more
//! than one document, numbers JSON cannot hold) are made here, event by event.

use std::collections::BTreeMap;

use coordinator_ir::pointer::escape_token;
use saphyr_parser::{Event, Parser, ScalarStyle, ScanError};
use serde_json::{Map, Value};

use super::core_schema::resolve_plain;
use super::{NodeSpan, Position, YamlDocument, MAX_DEPTH};
use crate::codes;
use crate::diagnostic::finding::{Diagnostic, Located};

/// An open sequence or mapping, with the pointer where it stands.
enum Frame {
    Seq {
        pointer: String,
        items: Vec<Value>,
    },
    Map {
        pointer: String,
        map: Map<String, Value>,
        /// The key read, waiting for its value, with its start and end.
        key: Option<(String, Position, Position)>,
    },
}

/// Builds the JSON value and the span table from the parser's events,
/// refusing what the strict reading does not accept.
pub(super) struct Builder {
    file: String,
    spans: BTreeMap<String, NodeSpan>,
    stack: Vec<Frame>,
    root: Option<Value>,
    documents: usize,
}

/// A parser marker as a 1-based line and column.
fn pos(m: &saphyr_parser::Marker) -> Position {
    Position {
        line: u32::try_from(m.line()).unwrap_or(u32::MAX),
        column: u32::try_from(m.col() + 1).unwrap_or(u32::MAX),
    }
}

impl Builder {
    pub(super) fn new(file: &str) -> Self {
        Builder {
            file: file.to_owned(),
            spans: BTreeMap::new(),
            stack: Vec::new(),
            root: None,
            documents: 0,
        }
    }

    fn err(
        &self,
        code: &str,
        at: Position,
        pointer: &str,
        message: String,
        next: &str,
    ) -> Diagnostic {
        Diagnostic::error(
            code,
            Located {
                file: self.file.clone(),
                line: at.line,
                column: at.column,
                pointer: pointer.to_owned(),
            },
            message,
            next,
        )
    }

    /// The pointer of the node about to be placed, and its key's start and end.
    fn child_pointer(&self) -> (String, Option<(Position, Position)>) {
        match self.stack.last() {
            None => (String::new(), None),
            Some(Frame::Seq { pointer, items }) => (format!("{pointer}/{}", items.len()), None),
            Some(Frame::Map { pointer, key, .. }) => match key {
                Some((k, kp, ke)) => (format!("{pointer}/{}", escape_token(k)), Some((*kp, *ke))),
                None => (pointer.clone(), None),
            },
        }
    }

    fn expecting_key(&self) -> bool {
        matches!(self.stack.last(), Some(Frame::Map { key: None, .. }))
    }

    fn place(&mut self, value: Value) {
        match self.stack.last_mut() {
            None => self.root = Some(value),
            Some(Frame::Seq { items, .. }) => items.push(value),
            Some(Frame::Map { map, key, .. }) => {
                if let Some((k, _, _)) = key.take() {
                    map.insert(k, value);
                }
            }
        }
    }

    /// Reads every event of `text`; the document, or the first fault.
    pub(super) fn run(mut self, text: &str) -> Result<YamlDocument, Diagnostic> {
        for item in Parser::new_from_str(text) {
            let (event, span) = item.map_err(|e| self.syntax_error(&e))?;
            self.on_event(event, pos(&span.start), pos(&span.end))?;
        }
        Ok(YamlDocument {
            file: self.file,
            value: self.root.unwrap_or(Value::Null),
            spans: self.spans,
        })
    }

    /// `coordinator.yaml.syntax` at the parser's position.
    fn syntax_error(&self, e: &ScanError) -> Diagnostic {
        self.err(
            codes::YAML_SYNTAX,
            pos(e.marker()),
            "",
            format!("invalid YAML: {}", e.info()),
            if e.info().contains("tab") {
                "YAML does not allow tabs for indentation: indent with spaces."
            } else {
                "Correct the YAML syntax at this position."
            },
        )
    }

    /// One event, which starts at `at` and ends at `end`.
    fn on_event(
        &mut self,
        event: Event<'_>,
        at: Position,
        end: Position,
    ) -> Result<(), Diagnostic> {
        match event {
            Event::StreamStart | Event::StreamEnd | Event::Nothing | Event::DocumentEnd => Ok(()),
            Event::DocumentStart(_) => self.on_document_start(at),
            Event::Alias(_) => {
                let (ptr, _) = self.child_pointer();
                Err(self.err(
                    codes::YAML_ANCHOR,
                    at,
                    &ptr,
                    "aliases (`*name`) are not accepted".into(),
                    "Write the value out in full; anchors and aliases are refused.",
                ))
            }
            Event::Scalar(text, style, anchor, tag) => {
                let (ptr, span) = self.untagged_node(anchor, tag.is_some(), at, end)?;
                self.on_scalar(text.into_owned(), style, ptr, span)
            }
            Event::SequenceStart(anchor, ref tag) => {
                let (ptr, span) = self.untagged_node(anchor, tag.is_some(), at, end)?;
                self.on_collection_start(false, ptr, span)
            }
            Event::MappingStart(anchor, ref tag) => {
                let (ptr, span) = self.untagged_node(anchor, tag.is_some(), at, end)?;
                self.on_collection_start(true, ptr, span)
            }
            Event::SequenceEnd | Event::MappingEnd => {
                self.on_collection_end(end);
                Ok(())
            }
        }
    }

    /// Counts documents; a second one is refused.
    fn on_document_start(&mut self, at: Position) -> Result<(), Diagnostic> {
        self.documents += 1;
        if self.documents > 1 {
            return Err(self.err(
                codes::YAML_MULTIPLE_DOCUMENTS,
                at,
                "",
                "the file holds more than one YAML document".into(),
                "Keep one document per file; remove the extra `---` section.",
            ));
        }
        Ok(())
    }

    /// The pointer and span of the node about to be placed, which starts at
    /// `at` and ends at `end`; an anchor or a tag on it is refused.
    fn untagged_node(
        &self,
        anchor: usize,
        tagged: bool,
        at: Position,
        end: Position,
    ) -> Result<(String, NodeSpan), Diagnostic> {
        let (ptr, key_pos) = self.child_pointer();
        self.refuse_anchor_or_tag(anchor, tagged, at, &ptr)?;
        Ok((ptr, node_span(at, end, key_pos)))
    }

    /// A scalar at `ptr`: a mapping's key when one is awaited, otherwise a
    /// value placed with its span.
    fn on_scalar(
        &mut self,
        text: String,
        style: ScalarStyle,
        ptr: String,
        span: NodeSpan,
    ) -> Result<(), Diagnostic> {
        if self.expecting_key() {
            return self.key(text, style, span.value, span.value_end);
        }
        let value = self.scalar(&text, style, span.value, &ptr)?;
        self.spans.insert(ptr, span);
        self.place(value);
        Ok(())
    }

    /// The start of a mapping (`is_map`) or a sequence at `ptr`: refused as
    /// a key or beyond [`MAX_DEPTH`], otherwise opened as a frame with its span.
    fn on_collection_start(
        &mut self,
        is_map: bool,
        ptr: String,
        span: NodeSpan,
    ) -> Result<(), Diagnostic> {
        let at = span.value;
        if self.expecting_key() {
            return Err(self.err(
                codes::YAML_KEY_TYPE,
                at,
                &ptr,
                "a mapping key must be a scalar".into(),
                "Use a plain string as the key.",
            ));
        }
        if self.stack.len() >= MAX_DEPTH {
            return Err(self.err(
                codes::YAML_TOO_DEEP,
                at,
                &ptr,
                format!("nesting deeper than {MAX_DEPTH} levels is not accepted"),
                "Flatten the structure.",
            ));
        }
        self.spans.insert(ptr.clone(), span);
        self.stack.push(if is_map {
            Frame::Map {
                pointer: ptr,
                map: Map::new(),
                key: None,
            }
        } else {
            Frame::Seq {
                pointer: ptr,
                items: Vec::new(),
            }
        });
        Ok(())
    }

    /// The end of the innermost collection: its span is stretched to `end`
    /// and its value placed in its parent.
    fn on_collection_end(&mut self, end: Position) {
        let (pointer, value) = match self.stack.pop() {
            Some(Frame::Seq { pointer, items }) => (pointer, Value::Array(items)),
            Some(Frame::Map { pointer, map, .. }) => (pointer, Value::Object(map)),
            None => (String::new(), Value::Null),
        };
        if let Some(span) = self.spans.get_mut(&pointer) {
            span.value_end = span.value_end.max(end);
        }
        self.place(value);
    }

    fn refuse_anchor_or_tag(
        &self,
        anchor: usize,
        tagged: bool,
        at: Position,
        ptr: &str,
    ) -> Result<(), Diagnostic> {
        if anchor != 0 {
            return Err(self.err(
                codes::YAML_ANCHOR,
                at,
                ptr,
                "anchors (`&name`) are not accepted".into(),
                "Write the value out in full; anchors and aliases are refused.",
            ));
        }
        if tagged {
            return Err(self.err(
                codes::YAML_TAG,
                at,
                ptr,
                "YAML tags (`!name`, `!!type`) are not accepted".into(),
                "Remove the tag; values are typed by the format, not by tags.",
            ));
        }
        Ok(())
    }

    fn key(
        &mut self,
        key: String,
        style: ScalarStyle,
        at: Position,
        end: Position,
    ) -> Result<(), Diagnostic> {
        let Some(Frame::Map {
            pointer,
            map,
            key: slot,
        }) = self.stack.last_mut()
        else {
            return Ok(());
        };
        let ptr = format!("{pointer}/{}", escape_token(&key));
        if key == "<<" && style == ScalarStyle::Plain {
            let e = self.err(
                codes::YAML_MERGE_KEY,
                at,
                &ptr,
                "merge keys (`<<`) are not accepted".into(),
                "Write the members out in full.",
            );
            return Err(e);
        }
        if map.contains_key(&key) {
            let first = self.spans.get(&ptr).and_then(|s| s.key).unwrap_or_default();
            return Err(self.err(
                codes::YAML_DUPLICATE_KEY,
                at,
                &ptr,
                format!(
                    "duplicate key `{key}` (first at line {}, column {})",
                    first.line, first.column
                ),
                "Remove one of the two entries.",
            ));
        }
        *slot = Some((key, at, end));
        Ok(())
    }

    fn scalar(
        &self,
        text: &str,
        style: ScalarStyle,
        at: Position,
        ptr: &str,
    ) -> Result<Value, Diagnostic> {
        if style != ScalarStyle::Plain {
            return Ok(Value::String(text.to_owned()));
        }
        match resolve_plain(text) {
            Ok(v) => Ok(v),
            Err(message) => Err(self.err(
                codes::YAML_NUMBER,
                at,
                ptr,
                message,
                "Write a finite number within 64-bit range, or quote the value to make it a string.",
            )),
        }
    }
}

/// The span of a node from `at` to `end`, with its key's start and end when
/// it is a mapping member.
fn node_span(at: Position, end: Position, key_pos: Option<(Position, Position)>) -> NodeSpan {
    NodeSpan {
        value: at,
        value_end: end,
        key: key_pos.map(|k| k.0),
        key_end: key_pos.map(|k| k.1),
    }
}
