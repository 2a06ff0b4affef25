//! `--token-file`: the access token, read from a regular, owner-only file
//! and never printed.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::codes;
use crate::report::{EXIT_REFUSED, EXIT_UNAVAILABLE};

/// Largest token file read, in bytes.
pub(crate) const MAX_TOKEN_BYTES: u64 = 16 * 1024;

/// Why a token file was not read: the exit code
/// ([`EXIT_UNAVAILABLE`] or, for an unsafe mode, [`EXIT_REFUSED`]), the
/// code (`coordinator.command.token-file-…`), the title and the `next:`
/// step. None of it holds the file's content.
pub(crate) type TokenFileRefusal = (u8, &'static str, String, String);

/// Reads the token file: a regular, owner-only file of at most
/// [`MAX_TOKEN_BYTES`], holding one token (surrounding whitespace dropped).
/// Returns the exit code and the failure on refusal; never echoes content.
pub(crate) fn read_token(path: &Path) -> Result<String, TokenFileRefusal> {
    let shown = path.display().to_string();
    let unreadable = |why: String| {
        (
            EXIT_UNAVAILABLE,
            codes::COMMAND_TOKEN_FILE_UNREADABLE,
            why,
            "write the access token to an owner-only file and pass its path with --token-file"
                .to_owned(),
        )
    };
    let meta = std::fs::symlink_metadata(path).map_err(|e| {
        unreadable(match e.kind() {
            std::io::ErrorKind::NotFound => format!("token file {shown} does not exist"),
            kind => format!("token file {shown}: {kind}"),
        })
    })?;
    if meta.file_type().is_symlink() {
        return Err(unreadable(format!(
            "token file {shown} is a symbolic link; pass the file itself"
        )));
    }
    if !meta.is_file() {
        return Err(unreadable(format!(
            "token file {shown} is not a regular file"
        )));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err((
            EXIT_REFUSED,
            codes::COMMAND_TOKEN_FILE_PERMISSIONS,
            format!("token file {shown} has mode {mode:04o}; it must be owner-only"),
            format!("chmod 0600 {shown}"),
        ));
    }
    if meta.len() > MAX_TOKEN_BYTES {
        return Err(unreadable(format!(
            "token file {shown} is larger than 16 KiB"
        )));
    }
    let bytes =
        std::fs::read(path).map_err(|e| unreadable(format!("token file {shown}: {}", e.kind())))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| unreadable(format!("token file {shown} is not UTF-8 text")))?;
    let token = text.trim();
    if token.is_empty() || token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(unreadable(format!(
            "token file {shown} must hold exactly one token"
        )));
    }
    Ok(token.to_owned())
}
