//! `coordinator-source`: reading authored files.
//!
//! - [`yaml`]: strict YAML 1.2 (core schema) into JSON values with the
//!   position of every node, and typed reading with located errors.
//! - [`diagnostic`]: the [`Diagnostic`] type and its text rendering (seed 004).
//! - [`read_file`]: reading a file with size and encoding limits.
//!
//! This crate knows nothing of workflows; compiler, hosts and CLI share it.

#![deny(clippy::unwrap_used, clippy::indexing_slicing)]
// A Diagnostic is the cold path; boxing it would only add noise.
#![allow(clippy::result_large_err)]

pub mod diagnostic;
pub mod yaml;

pub use diagnostic::{Diagnostic, Located, Severity};
pub use yaml::{parse, YamlDocument};

use std::path::Path;

/// Why a file could not be read as text.
#[derive(Debug)]
pub enum ReadError {
    /// The file is missing or unreadable: the CLI exits 3 (resource
    /// unavailable). Carries the diagnostic `coordinator.file.unreadable`.
    Unavailable(Diagnostic),
    /// The file was read but refused (too large, not UTF-8, NUL bytes): exit 1.
    Refused(Diagnostic),
}

impl ReadError {
    /// The diagnostic either way.
    pub fn diagnostic(&self) -> &Diagnostic {
        match self {
            ReadError::Unavailable(d) | ReadError::Refused(d) => d,
        }
    }
}

fn whole_file(display: &str) -> Located {
    Located {
        file: display.to_owned(),
        line: 0,
        column: 0,
        pointer: String::new(),
    }
}

/// Reads `path` as UTF-8 text of at most `max_bytes` bytes. `display` is the
/// name diagnostics print. A leading byte order mark is dropped.
pub fn read_file(path: &Path, display: &str, max_bytes: usize) -> Result<String, ReadError> {
    let meta = std::fs::metadata(path).map_err(|e| {
        ReadError::Unavailable(Diagnostic::error(
            "coordinator.file.unreadable",
            whole_file(display),
            format!("cannot read the file: {e}"),
            "Check that the file exists and is readable.",
        ))
    })?;
    let located = || Located {
        file: display.to_owned(),
        line: 1,
        column: 1,
        pointer: String::new(),
    };
    if meta.len() > max_bytes as u64 {
        return Err(ReadError::Refused(Diagnostic::error(
            "coordinator.file.too-large",
            located(),
            format!(
                "the file is {} bytes; at most {max_bytes} bytes are accepted",
                meta.len()
            ),
            "Split or shorten the file.",
        )));
    }
    let bytes = std::fs::read(path).map_err(|e| {
        ReadError::Unavailable(Diagnostic::error(
            "coordinator.file.unreadable",
            whole_file(display),
            format!("cannot read the file: {e}"),
            "Check that the file exists and is readable.",
        ))
    })?;
    let text = String::from_utf8(bytes).map_err(|e| {
        ReadError::Refused(Diagnostic::error(
            "coordinator.file.encoding",
            located(),
            format!(
                "the file is not UTF-8 text (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
            "Save the file as UTF-8 text.",
        ))
    })?;
    if let Some(offset) = text.find('\0') {
        return Err(ReadError::Refused(Diagnostic::error(
            "coordinator.file.encoding",
            located(),
            format!("the file holds a NUL byte at offset {offset}; it is not a text file"),
            "Save the file as UTF-8 text.",
        )));
    }
    Ok(text.strip_prefix('\u{feff}').unwrap_or(&text).to_owned())
}
