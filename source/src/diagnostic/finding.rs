//! A diagnostic itself: its severity, stable code, location, message and
//! repair line, and its text form (seed 004). It takes nothing from the
//! rest of this crate, so `codes.rs` and `yaml.rs` take it from here.

use serde::{Deserialize, Serialize};

/// How bad a diagnostic is. Errors refuse the input; warnings do not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    /// `error` or `warning`, as the text form prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// One finding about an input file.
///
/// `code` is the full stable code (`coordinator.<area>.<condition>`); every
/// code has a page under `docs/errors/`. `line` and `column` are 1-based,
/// columns counted in Unicode scalar values; both are 0 when the finding has no
/// position (a file that could not be read). `pointer` is the JSON Pointer of
/// the offending node in the file's document (`""` for the whole file).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    pub severity: Severity,
    pub code: String,
    pub file: String,
    pub line: u32,
    pub column: u32,
    pub pointer: String,
    pub message: String,
    pub next: String,
}

impl Diagnostic {
    /// An error diagnostic.
    pub fn error(
        code: impl Into<String>,
        at: Located,
        message: impl Into<String>,
        next: impl Into<String>,
    ) -> Self {
        Self::new(Severity::Error, code, at, message, next)
    }

    /// A warning diagnostic.
    pub fn warning(
        code: impl Into<String>,
        at: Located,
        message: impl Into<String>,
        next: impl Into<String>,
    ) -> Self {
        Self::new(Severity::Warning, code, at, message, next)
    }

    fn new(
        severity: Severity,
        code: impl Into<String>,
        at: Located,
        message: impl Into<String>,
        next: impl Into<String>,
    ) -> Self {
        Diagnostic {
            severity,
            code: code.into(),
            file: at.file,
            line: at.line,
            column: at.column,
            pointer: at.pointer,
            message: message.into(),
            next: next.into(),
        }
    }

    /// Whether this is an error (not a warning).
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// A place in a file: display name, 1-based line and column, JSON Pointer.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Located {
    pub file: String,
    pub line: u32,
    pub column: u32,
    pub pointer: String,
}

/// Sorts diagnostics by file, then position, then code, so output is stable.
pub fn sort(diags: &mut [Diagnostic]) {
    diags.sort_by(|a, b| {
        (
            a.file.as_str(),
            a.line,
            a.column,
            a.code.as_str(),
            a.pointer.as_str(),
        )
            .cmp(&(
                b.file.as_str(),
                b.line,
                b.column,
                b.code.as_str(),
                b.pointer.as_str(),
            ))
    });
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// Renders diagnostics in the text form of seed 004:
///
/// ```text
/// error[CODE] FILE:LINE:COLUMN POINTER
///   MESSAGE
///   next: REPAIR
/// ```
///
/// one block per diagnostic, in the given order. A diagnostic without a
/// position prints `FILE` alone.
pub fn render_text(diags: &[Diagnostic]) -> String {
    let mut out = String::new();
    for d in diags {
        let place = if d.line == 0 {
            d.file.clone()
        } else {
            format!("{}:{}:{}", d.file, d.line, d.column)
        };
        let pointer = if d.pointer.is_empty() {
            String::new()
        } else {
            format!(" {}", d.pointer)
        };
        out.push_str(&format!(
            "{}[{}] {place}{pointer}\n  {}\n  next: {}\n",
            d.severity.as_str(),
            d.code,
            d.message,
            d.next
        ));
    }
    out
}

/// The closing count line: `N errors, M warnings in K files`, where K counts
/// the files that have at least one diagnostic (singular forms for 1).
pub fn summary_line(diags: &[Diagnostic]) -> String {
    let errors = diags.iter().filter(|d| d.is_error()).count();
    let warnings = diags.len() - errors;
    let mut files: Vec<&str> = diags.iter().map(|d| d.file.as_str()).collect();
    files.sort_unstable();
    files.dedup();
    format!(
        "{}, {} in {}",
        plural(errors, "error"),
        plural(warnings, "warning"),
        plural(files.len(), "file")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(file: &str, line: u32) -> Located {
        Located {
            file: file.into(),
            line,
            column: 9,
            pointer: "/a".into(),
        }
    }

    #[test]
    fn renders_seed_form_and_counts() {
        let d = vec![Diagnostic::error(
            "coordinator.x.y",
            at("p/w.yaml", 3),
            "msg",
            "fix",
        )];
        assert_eq!(
            render_text(&d),
            "error[coordinator.x.y] p/w.yaml:3:9 /a\n  msg\n  next: fix\n"
        );
        assert_eq!(summary_line(&d), "1 error, 0 warnings in 1 file");
        let two = vec![
            Diagnostic::warning("c.a.b", at("a", 1), "m", "n"),
            Diagnostic::error("c.a.b", at("b", 1), "m", "n"),
            Diagnostic::error("c.a.b", at("b", 2), "m", "n"),
        ];
        assert_eq!(summary_line(&two), "2 errors, 1 warning in 2 files");
    }
}
