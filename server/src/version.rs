//! The build both binaries report (seed 000: "Install `coordinator` and
//! `coordinatorctl` from one source version"): the package version and the
//! source revision, the git commit recorded by `server/build.rs` at build
//! time (`unknown` when built outside a checkout). `coordinator --version`
//! and `coordinatorctl --version` print [`VERSION_LINE`] after their name,
//! the service logs both at startup and doctor answers them
//! ([`build_version`]), so an operator can see that the two binaries and
//! the running service match.

/// The package version (`Cargo.toml`'s, shared by the workspace).
pub const PACKAGE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The source revision: the 40 (or 64) lowercase hex digits of the git
/// commit the binaries were built from, or `unknown`.
pub const SOURCE_REVISION: &str = env!("COORDINATOR_SOURCE_REVISION");

/// What `--version` prints after the binary's name:
/// `0.1.0 (source 1f3a…)`.
pub const VERSION_LINE: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (source ",
    env!("COORDINATOR_SOURCE_REVISION"),
    ")"
);

/// The build as doctor answers it.
pub fn build_version() -> coordinator_api::BuildVersion {
    coordinator_api::BuildVersion {
        package: PACKAGE_VERSION.to_owned(),
        source_revision: SOURCE_REVISION.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_holds_the_version_and_a_revision() {
        assert_eq!(
            VERSION_LINE,
            format!("{PACKAGE_VERSION} (source {SOURCE_REVISION})")
        );
        let hex = SOURCE_REVISION
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        assert!(
            SOURCE_REVISION == "unknown" || (hex && matches!(SOURCE_REVISION.len(), 40 | 64)),
            "{SOURCE_REVISION}"
        );
    }
}
