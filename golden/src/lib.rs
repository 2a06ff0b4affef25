//! Golden tests live in tests/; this crate holds only what several of them
//! share to read the workspace's sources: where the workspace is, its
//! `.rs` files, and a source line without its comment.

use std::path::{Path, PathBuf};

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
/// for a folder that does not exist or cannot be read).
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
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

/// The code of a source line: the part before a `//` comment (a `//`
/// inside a string literal is rare enough in these files to ignore).
pub fn code(line: &str) -> &str {
    line.split_once("//").map_or(line, |(code, _)| code)
}
