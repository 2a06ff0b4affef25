//! Writing NEW whole: the files go into a new directory beside NEW, which
//! is then renamed to NEW, so NEW is either absent (or left empty) or
//! complete. NEW may exist only as an empty directory (never a file, a
//! link or a directory with anything in it).

use std::path::{Path, PathBuf};

use coordinator_source::Diagnostic;

use super::{whole, Refusal};
use crate::codes;
use crate::report::{EXIT_REFUSED, EXIT_UNAVAILABLE};

/// Refuses a NEW that exists and is not an empty directory.
pub fn refuse_existing(new: &Path) -> Result<(), Refusal> {
    let display = new.display().to_string();
    let Ok(meta) = std::fs::symlink_metadata(new) else {
        return Ok(());
    };
    let empty_dir =
        meta.is_dir() && std::fs::read_dir(new).is_ok_and(|mut entries| entries.next().is_none());
    if empty_dir {
        return Ok(());
    }
    Err((
        EXIT_REFUSED,
        vec![Diagnostic::error(
            codes::CONVERT_OUTPUT_EXISTS,
            whole(&display),
            "the output path exists and is not an empty directory; convert writes only a new project",
            "Choose a new --output directory, or remove the existing one first.",
        )],
    ))
}

fn write_error(display: &str, what: String) -> Refusal {
    (
        EXIT_UNAVAILABLE,
        vec![Diagnostic::error(
            codes::CONVERT_WRITE,
            whole(display),
            what,
            "Check that the output's parent directory exists and is writable.",
        )],
    )
}

/// A staging directory beside `new` that did not exist before.
fn staging_dir(new: &Path) -> Result<PathBuf, Refusal> {
    let display = new.display().to_string();
    let parent = match new.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let base = new
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| write_error(&display, "the output path has no base name".to_owned()))?;
    for n in 0..100 {
        let candidate = parent.join(format!(".{base}.convert-{}-{n}", std::process::id()));
        match std::fs::create_dir(&candidate) {
            Ok(()) => return Ok(candidate),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(write_error(
                    &display,
                    format!("cannot create a directory beside the output: {e}"),
                ))
            }
        }
    }
    Err(write_error(
        &display,
        "cannot find a free name beside the output".to_owned(),
    ))
}

/// Writes `files` into a staging directory and renames it to `new`.
pub fn write_whole(new: &Path, files: &[(&'static str, String)]) -> Result<(), Refusal> {
    let display = new.display().to_string();
    let staging = staging_dir(new)?;
    let written = files
        .iter()
        .try_for_each(|(name, text)| std::fs::write(staging.join(name), text))
        .and_then(|()| std::fs::rename(&staging, new));
    written.map_err(|e| {
        let _ = std::fs::remove_dir_all(&staging);
        write_error(&display, format!("cannot write the project: {e}"))
    })
}
