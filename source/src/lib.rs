//! `coordinator-source`: reading authored files.
//!
//! - [`yaml`]: strict YAML 1.2 (core schema) into JSON values with the
//!   position of every node, and typed reading with located errors.
//! - [`diagnostic`]: the [`Diagnostic`] type and its text rendering (seed 004).
//! - [`codes`]: diagnostic codes as data ([`diagnostic_codes!`] declares a
//!   table; this crate's `file.*` and `yaml.*` codes are one).
//! - [`read_file`]: reading a file with size and encoding limits.
//!
//! This crate knows nothing of workflows; compiler, hosts and CLI share it.
//! Its one dependency of ours is `coordinator-ir`, for the JSON Pointer
//! escape (`coordinator_ir::pointer`) every crate shares.

#![deny(clippy::unwrap_used, clippy::indexing_slicing)]
// A Diagnostic is the cold path; boxing it would only add noise.
#![allow(clippy::result_large_err)]

pub mod codes;
pub mod diagnostic;
pub mod yaml;

pub use diagnostic::{Diagnostic, Located, Severity};
pub use yaml::{parse, YamlDocument};

use std::io::Read;
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
    // `metadata` follows links: a link to a device or pipe is refused below.
    let meta = std::fs::metadata(path).map_err(|e| {
        ReadError::Unavailable(Diagnostic::error(
            codes::FILE_UNREADABLE,
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
    if !meta.is_file() {
        return Err(ReadError::Refused(Diagnostic::error(
            codes::FILE_NOT_REGULAR,
            located(),
            "the path is not a regular file (a directory, device, pipe or socket)",
            "Point at a regular text file.",
        )));
    }
    let too_large = |size: String| {
        ReadError::Refused(Diagnostic::error(
            codes::FILE_TOO_LARGE,
            located(),
            format!("the file is {size} bytes; at most {max_bytes} bytes are accepted"),
            "Split or shorten the file.",
        ))
    };
    if meta.len() > max_bytes as u64 {
        return Err(too_large(meta.len().to_string()));
    }
    let unreadable = |e: std::io::Error| {
        ReadError::Unavailable(Diagnostic::error(
            codes::FILE_UNREADABLE,
            whole_file(display),
            format!("cannot read the file: {e}"),
            "Check that the file exists and is readable.",
        ))
    };
    // Read at most one byte past the limit, so a file that grows after the
    // size check is still refused without being read whole.
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(max_bytes as u64 + 1).read_to_end(&mut bytes))
        .map_err(unreadable)?;
    if bytes.len() > max_bytes {
        return Err(too_large(format!("more than {max_bytes}")));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        ReadError::Refused(Diagnostic::error(
            codes::FILE_ENCODING,
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
            codes::FILE_ENCODING,
            located(),
            format!("the file holds a NUL byte at offset {offset}; it is not a text file"),
            "Save the file as UTF-8 text.",
        )));
    }
    Ok(text.strip_prefix('\u{feff}').unwrap_or(&text).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(r: Result<String, ReadError>) -> String {
        match r {
            Ok(_) => "ok".into(),
            Err(e) => e.diagnostic().code.clone(),
        }
    }

    #[test]
    fn devices_pipes_and_directories_are_refused_without_reading() {
        let dir = std::env::temp_dir().join(format!("coordinator-source-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let link = dir.join("zero.yaml");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("/dev/zero", &link).expect("symlink");
        assert_eq!(
            code(read_file(&link, "zero.yaml", 1024)),
            "coordinator.file.not-regular"
        );
        assert_eq!(
            code(read_file(&dir, "dir", 1024)),
            "coordinator.file.not-regular"
        );
        let fifo = dir.join("pipe.yaml");
        let _ = std::fs::remove_file(&fifo);
        if std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .is_ok_and(|s| s.success())
        {
            assert_eq!(
                code(read_file(&fifo, "pipe.yaml", 1024)),
                "coordinator.file.not-regular"
            );
        }
        let big = dir.join("big.yaml");
        std::fs::write(&big, vec![b'a'; 2048]).expect("write");
        assert_eq!(
            code(read_file(&big, "big.yaml", 1024)),
            "coordinator.file.too-large"
        );
        assert_eq!(
            code(read_file(&dir.join("missing"), "m", 1024)),
            "coordinator.file.unreadable"
        );
        std::fs::write(&big, "a: 1\n").expect("write");
        assert_eq!(code(read_file(&big, "big.yaml", 1024)), "ok");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
