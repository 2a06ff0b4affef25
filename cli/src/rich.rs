//! The rich form of diagnostics (`check --format rich`): each diagnostic
//! with its source line and its marked stretch, drawn by `ariadne`, then the
//! same count line as the text form. docs/decisions.md ("Rich diagnostics")
//! says when it is the default.
//!
//! The mark is `coordinator_source::diagnostic::mark`, the stretch the
//! language server publishes too. A diagnostic whose file cannot be read
//! again, or that has no position, is printed in the text form of seed 004.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::ops::Range;

use ariadne::{Config, IndexType, Label, Report, ReportKind};
use coordinator_source::{diagnostic, yaml::Position, Diagnostic, Severity};

/// Whether stderr should carry colour: a terminal, `NO_COLOR` unset or
/// empty (no-color.org), and `TERM` not `dumb`.
pub fn colour_wanted() -> bool {
    std::io::stderr().is_terminal() && !no_colour() && !dumb_terminal()
}

/// Whether `check` prints the rich form when `--format` is not given:
/// stderr is a terminal, `NO_COLOR` is unset or empty and `TERM` is not
/// `dumb`. Otherwise (a pipe, a file, CI) the text form of seed 004.
pub fn rich_by_default() -> bool {
    colour_wanted()
}

fn no_colour() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

fn dumb_terminal() -> bool {
    std::env::var_os("TERM").is_some_and(|v| v == "dumb")
}

/// A file's text, and the text read as YAML when it is YAML and reads.
struct Source {
    text: String,
    doc: Option<coordinator_source::YamlDocument>,
}

/// Renders `diags` in the rich form (with ANSI colour when `colour`), the
/// count line last. Files are read again by the name the diagnostics carry
/// (the path as the user typed it).
pub fn render(diags: &[Diagnostic], colour: bool) -> String {
    let mut files: HashMap<String, Option<Source>> = HashMap::new();
    let mut out = String::new();
    for d in diags {
        let source = files.entry(d.file.clone()).or_insert_with(|| read(&d.file));
        match source.as_ref().and_then(|s| one(d, s, colour)) {
            Some(block) => out.push_str(&block),
            None => out.push_str(&diagnostic::render_text(std::slice::from_ref(d))),
        }
    }
    out.push_str(&diagnostic::summary_line(diags));
    out.push('\n');
    out
}

fn read(file: &str) -> Option<Source> {
    let text = coordinator_source::read_file(
        std::path::Path::new(file),
        file,
        coordinator_source::yaml::MAX_FILE_BYTES,
    )
    .ok()?;
    let yaml = file.ends_with(".yaml") || file.ends_with(".yml");
    let doc = yaml
        .then(|| coordinator_source::parse(file, &text).ok())
        .flatten();
    Some(Source { text, doc })
}

/// The character offset of a 1-based line and column in `text`, `None`
/// when the line is not there.
fn offset(text: &str, at: Position) -> Option<usize> {
    let mut before = 0usize;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if i + 1 == at.line as usize {
            let width = line.trim_end_matches(['\n', '\r']).chars().count();
            return Some(before + (at.column as usize).saturating_sub(1).min(width));
        }
        before += line.chars().count();
    }
    None
}

/// One diagnostic drawn by ariadne; `None` when it has no mark in `source`.
fn one(d: &Diagnostic, source: &Source, colour: bool) -> Option<String> {
    let (start, end) = diagnostic::mark(d, &source.text, source.doc.as_ref())?;
    let from = offset(&source.text, start)?;
    let to = offset(&source.text, end)?.max(from);
    let span: (String, Range<usize>) = (d.file.clone(), from..to);
    let kind = match d.severity {
        Severity::Error => ReportKind::Error,
        Severity::Warning => ReportKind::Warning,
    };
    let label = if d.pointer.is_empty() {
        d.message.clone()
    } else {
        d.pointer.clone()
    };
    let report = Report::build(kind, span.clone())
        .with_config(
            Config::default()
                .with_color(colour)
                .with_index_type(IndexType::Char),
        )
        .with_code(&d.code)
        .with_message(&d.message)
        .with_label(Label::new(span).with_message(label))
        .with_help(&d.next)
        .finish();
    let mut bytes = Vec::new();
    let cache = ariadne::sources([(d.file.clone(), source.text.as_str())]);
    // ariadne draws from spans checked above; should it still panic on a
    // text it cannot draw, the diagnostic falls back to the text form
    // rather than ending `check` (its panic message is kept off stderr).
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let drawn = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        report.write(cache, &mut bytes)
    }));
    std::panic::set_hook(previous);
    match drawn {
        Ok(Ok(())) => String::from_utf8(bytes).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_count_characters_and_clamp_to_the_line() {
        let text = "ab\ncé d\r\nx";
        let at = |line, column| offset(text, Position { line, column });
        assert_eq!(at(1, 1), Some(0));
        assert_eq!(at(2, 3), Some(5));
        assert_eq!(at(2, 99), Some(7));
        assert_eq!(at(3, 1), Some(9));
        assert_eq!(at(4, 1), None);
    }
}
