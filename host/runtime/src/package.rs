//! Workflow packages (SPEC §4): a directory holding `definition.json` (the
//! compiled Program in canonical JSON, with its revision) and `SHA256SUMS`
//! (`<hex>  <name>\n` lines, as `sha256sum` writes them, sorted by name).
//!
//! The **package digest** is `sha256:` + the lowercase hex SHA-256 of the
//! exact `SHA256SUMS` bytes, so it covers every byte of every listed file.
//! [`load_package`] refuses a package whose digest differs from the pinned
//! one, whose files do not hash to their lines, that holds a file the sums do
//! not list, or whose definition does not read back
//! ([`coordinator_ir::Definition::from_slice`]).

use std::fmt;
use std::path::{Path, PathBuf};

use coordinator_ir::{sha256_digest, Definition};

/// The definition file's name inside a package.
pub const DEFINITION_FILE: &str = "definition.json";
/// The checksum file's name inside a package.
pub const SUMS_FILE: &str = "SHA256SUMS";

/// A package that passed every check of [`load_package`].
#[derive(Clone, Debug, PartialEq)]
pub struct LoadedPackage {
    /// The verified definition (its revision matches its Program).
    pub definition: Definition,
    /// `sha256:<hex>` of the package's `SHA256SUMS` bytes.
    pub digest: String,
}

/// Why a package was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PackageError {
    /// A file or the directory could not be read (the CLI exits 3).
    Unavailable {
        /// The path that could not be read.
        path: PathBuf,
        /// The operating system's reason.
        reason: String,
    },
    /// The pinned digest differs from the package's digest.
    DigestMismatch {
        /// The pinned `expectedDigest`.
        expected: String,
        /// The digest of the package as found.
        actual: String,
    },
    /// A listed file does not hash to its `SHA256SUMS` line.
    FileChanged {
        /// The file's name inside the package.
        name: String,
    },
    /// `SHA256SUMS` is malformed, lists an unsafe name, misses
    /// `definition.json`, or the directory holds an unlisted file.
    Malformed(String),
    /// `definition.json` does not read back as a valid definition.
    Definition(String),
    /// [`write_package`]: the output directory already exists.
    Exists(PathBuf),
}

impl fmt::Display for PackageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PackageError::Unavailable { path, reason } => {
                write!(f, "{}: {reason}", path.display())
            }
            PackageError::DigestMismatch { expected, actual } => write!(
                f,
                "the package digest is {actual}, but {expected} is pinned"
            ),
            PackageError::FileChanged { name } => {
                write!(f, "`{name}` does not match its SHA256SUMS line")
            }
            PackageError::Malformed(m) => write!(f, "malformed package: {m}"),
            PackageError::Definition(m) => write!(f, "invalid definition: {m}"),
            PackageError::Exists(p) => write!(f, "{} already exists", p.display()),
        }
    }
}

impl std::error::Error for PackageError {}

fn unavailable(path: &Path, e: std::io::Error) -> PackageError {
    PackageError::Unavailable {
        path: path.to_path_buf(),
        reason: format!("cannot read: {e}"),
    }
}

/// A file name a package may list: one path component, no `.`/`..`, no
/// control characters.
fn safe_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\\'])
        && !name.chars().any(char::is_control)
}

/// Parses `SHA256SUMS`: each line `<64 lowercase hex><two spaces><name>\n`,
/// names unique and sorted.
fn parse_sums(text: &str) -> Result<Vec<(String, String)>, PackageError> {
    let mut out: Vec<(String, String)> = Vec::new();
    if !text.ends_with('\n') {
        return Err(PackageError::Malformed(
            "SHA256SUMS does not end with a newline".into(),
        ));
    }
    for (n, line) in text.lines().enumerate() {
        let (hex, name) = line.split_once("  ").ok_or_else(|| {
            PackageError::Malformed(format!("SHA256SUMS line {} is not `<hex>  <name>`", n + 1))
        })?;
        if hex.len() != 64
            || !hex
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        {
            return Err(PackageError::Malformed(format!(
                "SHA256SUMS line {} has no lowercase SHA-256 hex",
                n + 1
            )));
        }
        if !safe_name(name) {
            return Err(PackageError::Malformed(format!(
                "SHA256SUMS line {} names `{name}`, which is not a plain file name",
                n + 1
            )));
        }
        if let Some((prev, _)) = out.last() {
            if prev.as_str() >= name {
                return Err(PackageError::Malformed(
                    "SHA256SUMS names are not sorted and unique".into(),
                ));
            }
        }
        out.push((name.to_owned(), hex.to_owned()));
    }
    Ok(out)
}

/// Loads and verifies the package at `root`.
///
/// With `expected_digest`, the package digest must equal it exactly (checked
/// first). Then every `SHA256SUMS` line must match its file, the directory
/// must hold no other regular file than those listed and `SHA256SUMS`, and
/// `definition.json` must be listed and pass
/// [`Definition::from_slice`]. Reads only `root`; contacts nothing.
pub fn load_package(
    root: &Path,
    expected_digest: Option<&str>,
) -> Result<LoadedPackage, PackageError> {
    let sums_path = root.join(SUMS_FILE);
    let sums = std::fs::read(&sums_path).map_err(|e| unavailable(&sums_path, e))?;
    let digest = sha256_digest(&sums);
    if let Some(expected) = expected_digest {
        if expected != digest {
            return Err(PackageError::DigestMismatch {
                expected: expected.to_owned(),
                actual: digest,
            });
        }
    }
    let text = String::from_utf8(sums)
        .map_err(|_| PackageError::Malformed("SHA256SUMS is not UTF-8".into()))?;
    let lines = parse_sums(&text)?;
    let mut definition_bytes = None;
    for (name, hex) in &lines {
        let path = root.join(name);
        let bytes = std::fs::read(&path).map_err(|e| unavailable(&path, e))?;
        if &sha256_digest(&bytes)[coordinator_ir::SHA256_PREFIX.len()..] != hex.as_str() {
            return Err(PackageError::FileChanged { name: name.clone() });
        }
        if name == DEFINITION_FILE {
            definition_bytes = Some(bytes);
        }
    }
    let entries = std::fs::read_dir(root).map_err(|e| unavailable(root, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| unavailable(root, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name != SUMS_FILE && !lines.iter().any(|(n, _)| *n == name) {
            return Err(PackageError::Malformed(format!(
                "`{name}` is in the package directory but not in SHA256SUMS"
            )));
        }
    }
    let bytes = definition_bytes.ok_or_else(|| {
        PackageError::Malformed(format!("SHA256SUMS does not list {DEFINITION_FILE}"))
    })?;
    let definition = Definition::from_slice(&bytes).map_err(PackageError::Definition)?;
    Ok(LoadedPackage { definition, digest })
}

/// Writes a new package directory `dir` for `definition`: `definition.json`
/// ([`Definition::canonical_bytes`]) and `SHA256SUMS`, and returns the package
/// digest (`sha256:<hex>`). Refuses an existing `dir`
/// ([`PackageError::Exists`]) and a missing parent directory
/// ([`PackageError::Unavailable`]). The files are written into a temporary
/// sibling that is renamed into place, so a failure leaves nothing behind.
/// Same definition, same bytes, same digest.
pub fn write_package(dir: &Path, definition: &Definition) -> Result<String, PackageError> {
    if dir.exists() || dir.is_symlink() {
        return Err(PackageError::Exists(dir.to_path_buf()));
    }
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !parent.is_dir() {
        return Err(PackageError::Unavailable {
            path: parent.to_path_buf(),
            reason: "the parent directory does not exist".into(),
        });
    }
    // Written whole into a temporary sibling, then renamed: a failure never
    // leaves a partial package under `dir`.
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "package".into());
    let tmp = parent.join(format!(".{name}.partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let result = write_files(&tmp, definition).and_then(|digest| {
        std::fs::rename(&tmp, dir)
            .map(|()| digest)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists | std::io::ErrorKind::DirectoryNotEmpty => {
                    PackageError::Exists(dir.to_path_buf())
                }
                _ => unwritable(dir, e),
            })
    });
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result
}

fn unwritable(path: &Path, e: std::io::Error) -> PackageError {
    PackageError::Unavailable {
        path: path.to_path_buf(),
        reason: format!("cannot write: {e}"),
    }
}

fn write_files(dir: &Path, definition: &Definition) -> Result<String, PackageError> {
    std::fs::create_dir(dir).map_err(|e| unwritable(dir, e))?;
    let files = [(DEFINITION_FILE, definition.canonical_bytes())];
    let mut sums = String::new();
    // `files` is sorted by name; keep it so when adding entries.
    for (name, bytes) in &files {
        let path = dir.join(name);
        std::fs::write(&path, bytes).map_err(|e| unwritable(&path, e))?;
        let digest = sha256_digest(bytes);
        sums.push_str(&digest[coordinator_ir::SHA256_PREFIX.len()..]);
        sums.push_str("  ");
        sums.push_str(name);
        sums.push('\n');
    }
    let sums_path = dir.join(SUMS_FILE);
    std::fs::write(&sums_path, sums.as_bytes()).map_err(|e| unwritable(&sums_path, e))?;
    Ok(sha256_digest(sums.as_bytes()))
}
