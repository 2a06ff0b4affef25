//! `coordinatorctl copy-secrets --from D --to E`: copies the secret files
//! of a directory that another user owns (a Kubernetes Secret volume: the
//! kubelet's root-owned files, group-readable through `fsGroup`, reached
//! through symbolic links into `..data/`) into a new directory of the user
//! running the command, each file owner-only (0600), so that `coordinator`
//! reads them under its one secret rule (`coordinator_runtime::secrets`:
//! a regular file, owned by the reading user, no group or other bits).
//! docs/install.md "Kubernetes" runs it as the Deployment's init step, into
//! an in-memory `emptyDir`; docs/decisions.md "Secret files under
//! Kubernetes" says why.
//!
//! Every entry of `--from` whose name does not start with `..` (the
//! kubelet's own `..data` and timestamped directories) is copied. An entry
//! is taken only when it is, or links to, a regular file inside `--from`,
//! of at most `MAX_SECRET_BYTES`. `--to` must not exist; it is created 0700
//! in an existing parent. Nothing is kept on any failure: the directory
//! this call created is removed again (never one it did not create).

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use coordinator_runtime::secrets::MAX_SECRET_BYTES;

use crate::codes;
use crate::report::{EXIT_OK, EXIT_REFUSED, EXIT_UNAVAILABLE};

/// `copy-secrets`'s arguments.
#[derive(clap::Args, Debug)]
pub struct CopySecretsArgs {
    /// The directory holding the secret files (a mounted Kubernetes Secret).
    #[arg(long)]
    pub from: PathBuf,
    /// The new directory to create (0700) and copy them into (0600 each).
    #[arg(long)]
    pub to: PathBuf,
}

/// One refusal: the code, the path it is about and what is wrong.
struct Refusal {
    code: &'static str,
    path: PathBuf,
    reason: String,
    next: &'static str,
    exit: u8,
}

/// A problem with `--from` or one of its entries (exit 1).
fn source(path: &Path, reason: String) -> Refusal {
    Refusal {
        code: codes::COPY_SECRETS_SOURCE,
        path: path.to_owned(),
        reason,
        next: "Mount the Secret (or the directory) at --from with files the command's user may read (fsGroup and defaultMode 0440 under Kubernetes).",
        exit: EXIT_REFUSED,
    }
}

/// A problem writing `--to` (exit 3, or 1 when it already exists).
fn write(path: &Path, reason: String, exit: u8) -> Refusal {
    Refusal {
        code: codes::COPY_SECRETS_WRITE,
        path: path.to_owned(),
        reason,
        next: "Give --to as a new directory in an existing, writable parent (an emptyDir with medium Memory under Kubernetes).",
        exit,
    }
}

/// Runs `copy-secrets`; returns the exit code.
pub fn run(args: &CopySecretsArgs) -> u8 {
    let sources = match secret_files(&args.from) {
        Ok(sources) => sources,
        Err(refusal) => return report(&refusal),
    };
    if args.to.exists() || args.to.is_symlink() {
        return report(&write(
            &args.to,
            "already exists; copy-secrets writes only into a new directory".into(),
            EXIT_REFUSED,
        ));
    }
    if let Err(e) = std::fs::DirBuilder::new().mode(0o700).create(&args.to) {
        return report(&write(
            &args.to,
            format!("cannot create the directory: {e}"),
            EXIT_UNAVAILABLE,
        ));
    }
    for (name, bytes) in &sources {
        let target = args.to.join(name);
        if let Err(e) = write_owner_only(&target, bytes) {
            let _ = std::fs::remove_dir_all(&args.to);
            return report(&write(
                &target,
                format!("cannot write the copy: {e}; nothing was kept"),
                EXIT_UNAVAILABLE,
            ));
        }
    }
    outln!(
        "copied: {} secret files from {} to {} (owner-only, 0600)",
        sources.len(),
        args.from.display(),
        args.to.display()
    );
    for (name, _) in &sources {
        outln!("  {name}");
    }
    EXIT_OK
}

fn report(refusal: &Refusal) -> u8 {
    errln!(
        "error[{code}] {path}\n  {reason}\n  next: {next}\n1 error, 0 warnings in 1 file",
        code = refusal.code,
        path = refusal.path.display(),
        reason = refusal.reason,
        next = refusal.next
    );
    refusal.exit
}

/// The secret files of `from` (name and content), sorted by name: every
/// entry not named `..*`, each a regular file (through a link that stays
/// inside `from`) of at most `MAX_SECRET_BYTES`. At least one.
fn secret_files(from: &Path) -> Result<Vec<(String, Vec<u8>)>, Refusal> {
    let root = from
        .canonicalize()
        .map_err(|e| source(from, format!("cannot open the directory: {e}")))?;
    let entries =
        std::fs::read_dir(&root).map_err(|e| source(from, format!("cannot list it: {e}")))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| source(from, format!("cannot list it: {e}")))?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            return Err(source(&entry.path(), "its name is not UTF-8".into()));
        };
        if !name.starts_with("..") {
            names.push(name);
        }
    }
    names.sort();
    if names.is_empty() {
        return Err(source(from, "holds no secret file".into()));
    }
    let mut files = Vec::with_capacity(names.len());
    for name in names {
        let path = from.join(&name);
        let real = path
            .canonicalize()
            .map_err(|e| source(&path, format!("cannot be resolved: {e}")))?;
        if !real.starts_with(&root) {
            return Err(source(
                &path,
                format!("links outside the directory, to {}", real.display()),
            ));
        }
        let meta =
            std::fs::metadata(&real).map_err(|e| source(&path, format!("cannot be read: {e}")))?;
        if !meta.is_file() {
            return Err(source(&path, "is not a regular file".into()));
        }
        if meta.len() > MAX_SECRET_BYTES {
            return Err(source(
                &path,
                format!("is larger than {MAX_SECRET_BYTES} bytes"),
            ));
        }
        let bytes =
            std::fs::read(&real).map_err(|e| source(&path, format!("cannot be read: {e}")))?;
        files.push((name, bytes));
    }
    Ok(files)
}

/// Writes `bytes` to the new file `path`, mode 0600, and syncs it.
fn write_owner_only(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}
