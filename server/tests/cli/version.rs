//! `coordinator --version` and `coordinatorctl --version` (seed 000:
//! install both "from one source version"): each prints its name, the
//! package version and the source revision it was built from, the git
//! commit of this checkout (or `unknown` outside one), and the two agree.

use std::path::Path;
use std::process::Command;

fn version_line(binary: &str) -> String {
    let out = Command::new(binary)
        .arg("--version")
        .output()
        .expect("the binary runs");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn both_binaries_print_one_version_and_source_revision() {
    let service = version_line(env!("CARGO_BIN_EXE_coordinator"));
    let ctl = version_line(env!("CARGO_BIN_EXE_coordinatorctl"));
    let revision = service
        .strip_prefix(&format!(
            "coordinator {} (source ",
            env!("CARGO_PKG_VERSION")
        ))
        .and_then(|rest| rest.strip_suffix(")\n"))
        .unwrap_or_else(|| panic!("{service:?}"));
    assert_eq!(
        ctl,
        format!(
            "coordinatorctl {} (source {revision})\n",
            env!("CARGO_PKG_VERSION")
        )
    );
    assert_eq!(revision, coordinator::version::SOURCE_REVISION);
    // Built in this checkout: the commit it has checked out (cargo builds
    // the binaries again when HEAD moves); `unknown` only without git.
    let head = Command::new("git")
        .arg("-C")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")))
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    match head {
        Some(head) => assert_eq!(revision, head),
        None => assert_eq!(revision, "unknown"),
    }
}
