//! `coordinatorctl copy-secrets` (docs/install.md "Kubernetes"): the
//! kubelet's Secret layout (files in a timestamped directory, `..data`
//! linking to it, each name a link into `..data/`, group-readable) copied
//! into a new owner-only directory; refused, with nothing written, when an
//! entry links outside, when there is nothing to copy, and when `--to`
//! exists.

use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

use super::ctl;

/// A Secret volume as the kubelet lays it out, with `files`.
fn kubelet_secret(dir: &Path, files: &[(&str, &[u8])]) {
    let stamp = dir.join("..2026_01_01_00_00_00.000000001");
    std::fs::create_dir_all(&stamp).unwrap();
    for (name, bytes) in files {
        let file = stamp.join(name);
        std::fs::write(&file, bytes).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o440)).unwrap();
        symlink(format!("..data/{name}"), dir.join(name)).unwrap();
    }
    symlink("..2026_01_01_00_00_00.000000001", dir.join("..data")).unwrap();
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn copy_secrets_copies_the_kubelets_layout_owner_only() {
    let tmp = tempfile::tempdir().unwrap();
    let from = tmp.path().join("secret");
    kubelet_secret(
        &from,
        &[
            ("state-key-1", &[7; 32]),
            ("runtime-database-url", b"postgres://x"),
        ],
    );
    let out = ctl(
        tmp.path(),
        &["copy-secrets", "--from", "secret", "--to", "copied"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("copied: 2 secret files"),
        "{}",
        text(&out)
    );
    let to = tmp.path().join("copied");
    let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&to), 0o700);
    let mut names: Vec<String> = std::fs::read_dir(&to)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["runtime-database-url", "state-key-1"]);
    for name in &names {
        let file = to.join(name);
        assert!(std::fs::symlink_metadata(&file).unwrap().is_file());
        assert_eq!(mode(&file), 0o600, "{name}");
    }
    assert_eq!(std::fs::read(to.join("state-key-1")).unwrap(), [7; 32]);
    // A second copy to the same place is refused; the first stays whole.
    let again = ctl(
        tmp.path(),
        &["copy-secrets", "--from", "secret", "--to", "copied"],
    );
    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
    assert!(text(&again).contains("error[coordinator.copy-secrets.write]"));
    assert_eq!(std::fs::read_dir(&to).unwrap().count(), 2);
}

#[test]
fn copy_secrets_refuses_a_link_outside_and_an_empty_secret_writing_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let from = tmp.path().join("secret");
    kubelet_secret(&from, &[("admission-key", &[1; 32])]);
    std::fs::write(tmp.path().join("elsewhere"), b"not a secret").unwrap();
    symlink(tmp.path().join("elsewhere"), from.join("audit-key")).unwrap();
    let out = ctl(
        tmp.path(),
        &["copy-secrets", "--from", "secret", "--to", "copied"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("error[coordinator.copy-secrets.source]")
            && text(&out).contains("links outside the directory"),
        "{}",
        text(&out)
    );
    assert!(!tmp.path().join("copied").exists());

    let empty = tmp.path().join("empty");
    kubelet_secret(&empty, &[]);
    let out = ctl(
        tmp.path(),
        &["copy-secrets", "--from", "empty", "--to", "copied"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("holds no secret file"),
        "{}",
        text(&out)
    );
    assert!(!tmp.path().join("copied").exists());
}
