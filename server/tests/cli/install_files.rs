//! The installation files under `deploy/` checked by the tools their
//! platforms ship (docs/install.md): the systemd unit by
//! `systemd-analyze verify` (no finding at all) and `systemd-analyze
//! security` (an exposure of at most 2.0), offline, against a scratch root
//! holding the built `coordinator` where the unit runs it and the system's
//! own unit files (systemd is not running here).
//! `systemd-analyze` comes from Debian's `systemd` package (scripts/test.sh
//! installs it); without it the test fails.

use std::path::Path;
use std::process::Command;

/// The most exposure `systemd-analyze security` may report, ×10 (its
/// `--threshold` scale).
const MOST_EXPOSURE_TENTHS: u32 = 20;

/// A scratch root for `systemd-analyze --root`: the unit, the built
/// service where its `ExecStart` names it, and the system's unit files.
fn scratch_root(dir: &Path) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let units = dir.join("etc/systemd/system");
    std::fs::create_dir_all(&units).unwrap();
    std::fs::copy(
        repo.join("deploy/systemd/coordinator.service"),
        units.join("coordinator.service"),
    )
    .unwrap();
    let bin = dir.join("usr/local/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_coordinator"), bin.join("coordinator")).unwrap();
    let system = dir.join("usr/lib/systemd");
    std::fs::create_dir_all(&system).unwrap();
    let copied = Command::new("cp")
        .arg("-r")
        .arg("/usr/lib/systemd/system")
        .arg(&system)
        .status()
        .expect("cp runs");
    assert!(
        copied.success(),
        "the system's unit files could not be copied"
    );
}

#[test]
fn the_systemd_unit_verifies_clean_and_is_confined() {
    let dir = tempfile::tempdir().unwrap();
    scratch_root(dir.path());
    let root = format!("--root={}", dir.path().display());
    let verify = Command::new("systemd-analyze")
        .args(["verify", &root, "--man=no", "coordinator.service"])
        .output()
        .expect("systemd-analyze runs (Debian's systemd package; scripts/test.sh installs it)");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
    assert!(verify.status.success() && said.trim().is_empty(), "{said}");

    let security = Command::new("systemd-analyze")
        .args([
            "security",
            &root,
            "--offline=true",
            &format!("--threshold={MOST_EXPOSURE_TENTHS}"),
            "--no-pager",
            "coordinator.service",
        ])
        .output()
        .expect("systemd-analyze runs");
    let report = String::from_utf8_lossy(&security.stdout);
    assert!(
        security.status.success(),
        "exposure above {}: {report}{}",
        f64::from(MOST_EXPOSURE_TENTHS) / 10.0,
        String::from_utf8_lossy(&security.stderr)
    );
    assert!(
        report.contains("Overall exposure level for coordinator.service"),
        "{report}"
    );

    // A unit that drops its confinement is refused by the same check.
    let unit = dir.path().join("etc/systemd/system/coordinator.service");
    let text = std::fs::read_to_string(&unit).unwrap();
    let loose: String = text
        .lines()
        .filter(|l| !l.starts_with("Protect") && !l.starts_with("SystemCallFilter"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&unit, loose).unwrap();
    let loose_security = Command::new("systemd-analyze")
        .args([
            "security",
            &root,
            "--offline=true",
            &format!("--threshold={MOST_EXPOSURE_TENTHS}"),
            "--no-pager",
            "coordinator.service",
        ])
        .output()
        .expect("systemd-analyze runs");
    assert!(!loose_security.status.success(), "a loose unit passed");
}
