//! Golden tests live in tests/; this crate holds only what several of them
//! share to read the workspace's sources: where the workspace is, its
//! `.rs` files, a source line without its comment, and Rust text with its
//! comments and literals blanked out ([`rust_text`], for the shape tests).

use std::path::{Path, PathBuf};

pub mod rust_text;

/// The workspace root (the parent of this crate's folder).
///
/// # Panics
/// When this crate's folder has no parent (never in a checkout).
#[allow(clippy::expect_used)]
pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// Appends the `.rs` files under `dir`, recursively, to `out` (nothing
/// for a folder that does not exist or cannot be read). Build output
/// (`target/`) and hidden folders (`.git/`) are not walked.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name == "target" || name.starts_with('.') {
                continue;
            }
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The `.rs` files of the service host under `root`: every `host/*/src`
/// and `server/src`, sorted (empty when `root` has neither).
pub fn service_host_sources(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    if let Ok(crates) = std::fs::read_dir(root.join("host")) {
        for entry in crates.flatten() {
            rust_files(&entry.path().join("src"), &mut files);
        }
    }
    rust_files(&root.join("server/src"), &mut files);
    files.sort();
    files
}

/// Every `.rs` file of the workspace under `root` (sources, tests,
/// benches; not `target/`), sorted.
pub fn workspace_rust_files(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    files.sort();
    files
}

/// `path` relative to `root`, with `/` between its parts (the form the
/// tests print and their allow-lists hold).
pub fn relative_path(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

/// Whether the file at `relative` (a path from [`relative_path`]) is test
/// code as a whole: under a `tests/` folder, or named `tests.rs`. (Inline
/// `#[cfg(test)]` modules are test code too: see
/// [`rust_text::test_module_regions`].)
pub fn is_test_file(relative: &str) -> bool {
    let mut parts = relative.split('/').peekable();
    while let Some(part) = parts.next() {
        let is_folder = parts.peek().is_some();
        if (is_folder && part == "tests") || (!is_folder && part == "tests.rs") {
            return true;
        }
    }
    false
}

/// The code of a source line: the part before a `//` comment (a `//`
/// inside a string literal is rare enough in these files to ignore).
pub fn code(line: &str) -> &str {
    line.split_once("//").map_or(line, |(code, _)| code)
}
