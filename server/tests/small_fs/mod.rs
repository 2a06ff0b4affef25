//! A small file system that fills up, for an audit journal on a full
//! disk (tests/ops.rs, tests/journeys.rs).

/// A tmpfs of 64 KiB mounted on a temporary directory, unmounted on drop:
/// a file system that fills up, for an audit journal on a full disk.
/// Mounting needs root (scripts/test.sh runs as root); without it the
/// test is skipped, and fails under `CI`.
pub struct SmallFileSystem {
    /// Where it is mounted.
    pub dir: tempfile::TempDir,
}

impl SmallFileSystem {
    pub fn mount(test: &str) -> Option<SmallFileSystem> {
        let dir = tempfile::tempdir().unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if mounted {
            return Some(SmallFileSystem { dir });
        }
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: cannot mount a tmpfs (run as root)"
        );
        eprintln!("{test}: skipped: cannot mount a tmpfs (run as root)");
        None
    }

    /// Writes a file until the file system has no room left.
    pub fn fill(&self) {
        use std::io::Write;
        let mut filler = std::fs::File::create(self.dir.path().join("filler")).unwrap();
        let chunk = [0u8; 4096];
        while matches!(filler.write(&chunk), Ok(n) if n > 0) {}
    }

    /// Removes what [`SmallFileSystem::fill`] wrote.
    pub fn free(&self) {
        std::fs::remove_file(self.dir.path().join("filler")).unwrap();
    }
}

impl Drop for SmallFileSystem {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}
