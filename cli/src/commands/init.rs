//! `coordinatorctl init --directory D`: writes the starter project of seed
//! 004 (a delayed follow-up) into a new directory.
//!
//! The starter is `examples/delayed-follow-up/`, embedded at build time, so
//! the maintained example and what `init` writes can never drift apart. The
//! project id becomes the directory's base name. Nothing is written when the
//! path exists or the name is not a valid project id; on a write error the
//! directory this call created is removed (never one it did not create).

use std::path::Path;

use coordinator_ir::name::is_name;

use crate::codes;
use crate::report::{EXIT_OK, EXIT_REFUSED, EXIT_UNAVAILABLE, EXIT_USAGE};

/// The starter's files, in the order `init` lists them.
pub const STARTER_FILES: [(&str, &str); 5] = [
    (
        "workflow.yaml",
        include_str!("../../../examples/delayed-follow-up/workflow.yaml"),
    ),
    (
        "functions.rhai",
        include_str!("../../../examples/delayed-follow-up/functions.rhai"),
    ),
    (
        "runtime.yaml",
        include_str!("../../../examples/delayed-follow-up/runtime.yaml"),
    ),
    (
        "scenarios.yaml",
        include_str!("../../../examples/delayed-follow-up/scenarios.yaml"),
    ),
    (
        ".gitignore",
        include_str!("../../../examples/delayed-follow-up/.gitignore"),
    ),
];

/// The project id the embedded starter carries.
const STARTER_ID: &str = "follow-up";

/// The starter's files with the project id (and the runtime namespace)
/// rewritten for `id`.
pub fn starter_for(id: &str) -> Vec<(&'static str, String)> {
    STARTER_FILES
        .iter()
        .map(|(name, text)| {
            let text = match *name {
                "workflow.yaml" => text.replacen(
                    &format!("\n  id: {STARTER_ID}\n"),
                    &format!("\n  id: {id}\n"),
                    1,
                ),
                "runtime.yaml" => text.replacen(
                    "namespace: coordinator_follow_up",
                    &format!("namespace: coordinator_{}", id.replace('-', "_")),
                    1,
                ),
                _ => (*text).to_owned(),
            };
            (*name, text)
        })
        .collect()
}

/// Runs `init`; returns the exit code.
pub fn run(directory: &Path) -> u8 {
    let shown = directory.display().to_string();
    let Some(id) = directory
        .file_name()
        .and_then(|n| n.to_str())
        .map(str::to_owned)
    else {
        errln!("error[{code}] {shown}\n  the directory has no usable base name\n  next: Name a new directory, such as --directory follow-up.\n1 error, 0 warnings in 1 file", code = codes::INIT_DIRECTORY);
        return EXIT_USAGE;
    };
    if !is_name(&id) {
        errln!("error[{code}] {shown}\n  the directory name `{id}` is not a valid project id (lowercase letter, then up to 63 lowercase letters, digits or '-')\n  next: Choose a directory name such as follow-up.\n1 error, 0 warnings in 1 file", code = codes::INIT_PROJECT_ID);
        return EXIT_USAGE;
    }
    if directory.exists() || directory.is_symlink() {
        errln!("error[{code}] {shown}\n  the path already exists; init writes only into a new directory\n  next: Choose a new directory name, or remove this path first.\n1 error, 0 warnings in 1 file", code = codes::INIT_EXISTS);
        return EXIT_REFUSED;
    }
    // Only a directory this call created is ever removed again.
    if let Err(e) = std::fs::create_dir(directory) {
        let (code, exit) = if e.kind() == std::io::ErrorKind::AlreadyExists {
            (codes::INIT_EXISTS, EXIT_REFUSED)
        } else {
            (codes::INIT_WRITE, EXIT_UNAVAILABLE)
        };
        errln!("error[{code}] {shown}\n  cannot create the directory: {e}\n  next: Check that the parent directory exists and is writable.\n1 error, 0 warnings in 1 file");
        return exit;
    }
    if let Err(e) = write_starter(directory, &id) {
        let _ = std::fs::remove_dir_all(directory);
        errln!("error[{code}] {shown}\n  cannot write the project: {e}; nothing was kept\n  next: Check that the disk has room and the directory is writable.\n1 error, 0 warnings in 1 file", code = codes::INIT_WRITE);
        return EXIT_UNAVAILABLE;
    }
    outln!("created: {shown}");
    for (name, _) in STARTER_FILES {
        outln!("  {name}");
    }
    outln!("next: coordinatorctl test --project {shown}");
    EXIT_OK
}

fn write_starter(directory: &Path, id: &str) -> std::io::Result<()> {
    for (name, text) in starter_for(id) {
        std::fs::write(directory.join(name), text)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starter_takes_the_directory_name() {
        let files = starter_for("renewal-notice");
        let workflow = &files[0].1;
        assert!(workflow.contains("\n  id: renewal-notice\n"));
        assert!(!workflow.contains("id: follow-up"));
        assert!(files[2].1.contains("namespace: coordinator_renewal_notice"));
    }
}
