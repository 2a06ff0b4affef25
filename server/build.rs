//! Build script of the product package: records the source revision the
//! two binaries are built from, as `COORDINATOR_SOURCE_REVISION` for
//! `coordinator::version` (`coordinator --version`, `coordinatorctl
//! --version`, the service's startup line and doctor).
//!
//! The revision is the git commit checked out (`git rev-parse HEAD`), or
//! `unknown` when the sources are not this repository's own checkout: no
//! `git` on the machine, no repository (a source archive), or a copy of the
//! sources inside another repository. Nothing here fails the build: every
//! fault gives `unknown`. Cargo runs this again when HEAD moves (a commit,
//! a checkout, a reset), so the revision follows the sources.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where this package lies in its repository, as `git rev-parse
/// --show-prefix` prints it from the package's directory.
const PACKAGE_PREFIX: &str = "server/";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let revision = source_revision().unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=COORDINATOR_SOURCE_REVISION={revision}");
}

/// `git ARGS` run in the package's directory: its trimmed output, `None`
/// when git is missing or fails.
fn git(args: &[&str]) -> Option<String> {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")?;
    let out = Command::new("git")
        .arg("-C")
        .arg(&dir)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8(out.stdout).ok()?.trim().to_owned())
}

/// The commit checked out, when the package is in this repository's own
/// checkout; registers the files whose change moves it.
fn source_revision() -> Option<String> {
    if git(&["rev-parse", "--show-prefix"])? != PACKAGE_PREFIX {
        return None;
    }
    let commit = git(&["rev-parse", "--verify", "HEAD^{commit}"])?;
    let hex = commit.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex || !(commit.len() == 40 || commit.len() == 64) {
        return None;
    }
    watch_head();
    Some(commit.to_ascii_lowercase())
}

/// Asks Cargo to run this script again when HEAD moves: HEAD itself and
/// its log (per worktree), the branch it names and the packed refs (shared
/// by the worktrees). Only files that exist are named: Cargo reruns a
/// script at every build for a file that does not.
fn watch_head() {
    let Some(git_dir) = git(&["rev-parse", "--absolute-git-dir"]) else {
        return;
    };
    let git_dir = PathBuf::from(git_dir);
    let common = git(&["rev-parse", "--git-common-dir"])
        .map(|c| absolute(&git_dir, &c))
        .unwrap_or_else(|| git_dir.clone());
    watch(&git_dir.join("HEAD"));
    watch(&git_dir.join("logs").join("HEAD"));
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch(&common.join(branch));
    }
    watch(&common.join("packed-refs"));
}

/// `path` as git printed it: relative paths are relative to the package's
/// directory (where git ran); `git_dir` when that is unknown.
fn absolute(git_dir: &Path, path: &str) -> PathBuf {
    let path = Path::new(path);
    if path.is_absolute() {
        return path.to_owned();
    }
    match std::env::var_os("CARGO_MANIFEST_DIR") {
        Some(dir) => Path::new(&dir).join(path),
        None => git_dir.to_owned(),
    }
}

fn watch(path: &Path) {
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}
