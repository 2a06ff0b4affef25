//! The OCI image journey (issue 39 items 1 and 2; docs/install.md "An OCI
//! image"): `scripts/image.sh` builds the image twice from the debug
//! binaries the tests already build (no release build in CI), with the
//! same digest; the image runs as uid 10001 and has no shell; then
//! `scripts/image-journey.sh` serves the starter from it with Podman
//! against the test PostgreSQL 17: plan, apply and deployment-status from
//! the image, the service non-root on a read-only root file system, one run
//! finished, `podman stop` ending it by its SIGTERM drain (exit code 0, not
//! 137), a second container on the same audit volume serving the same run
//! from secrets laid out as the kubelet mounts a Secret, which the service
//! refuses as they are and reads once `coordinatorctl copy-secrets` (the
//! Deployment's init step) copied them.
//! Prints the wall times. Needs Podman and buildah (scripts/test.sh
//! installs them); without them the test fails under `CI=true`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use sqlx::{Connection, Executor, PgConnection};

use crate::support::urls;
use crate::tutorial::binaries;

/// The workspace root.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// Whether `podman` and `buildah` answer `--version`; a notice (a failure
/// under `CI=true`) when not.
fn container_tools(test: &str) -> bool {
    let answers = |tool: &str| {
        Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if answers("podman") && answers("buildah") {
        return true;
    }
    coordinator_testkit::tools::missing(test, "podman or buildah (Debian packages)");
    false
}

/// Standard output and error of a finished command, for messages.
fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `scripts/image.sh --tag TAG` over the binaries in `bin`; the digest it
/// printed.
fn build_image(bin: &Path, tag: &str) -> String {
    let out = Command::new("bash")
        .arg(workspace().join("scripts/image.sh"))
        .args(["--tag", tag])
        .env("COORDINATOR_IMAGE_BIN_DIR", bin)
        .output()
        .unwrap();
    assert!(out.status.success(), "scripts/image.sh: {}", said(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let digest = text
        .lines()
        .find_map(|l| l.strip_prefix("digest: "))
        .unwrap_or_else(|| panic!("no digest printed: {text}"));
    assert!(
        text.lines().any(|l| l.starts_with("size: ")),
        "no size printed: {text}"
    );
    digest.to_owned()
}

/// `podman ARGS`.
fn podman(args: &[&str]) -> Output {
    Command::new("podman").args(args).output().unwrap()
}

/// Removes the test's image when dropped, also after a failure.
struct TaggedImage(String);

impl Drop for TaggedImage {
    fn drop(&mut self) {
        let _ = podman(&["rmi", "--force", &self.0]);
    }
}

/// Drops the namespace the journey's runtime file names.
async fn drop_namespace(admin_url: &str, work: &Path) {
    let Ok(runtime) = std::fs::read_to_string(work.join("runtime.yaml")) else {
        return;
    };
    let Some(namespace) = runtime
        .lines()
        .find_map(|l| l.strip_prefix("namespace: "))
        .filter(|n| n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
    else {
        return;
    };
    if let Ok(mut admin) = PgConnection::connect(admin_url).await {
        let _ = admin
            .execute(format!("DROP SCHEMA IF EXISTS {namespace} CASCADE").as_str())
            .await;
    }
}

/// The image's configuration as `podman image inspect` prints FORMAT.
fn inspect(tag: &str, format: &str) -> String {
    let out = podman(&["image", "inspect", "--format", format, tag]);
    assert!(out.status.success(), "{}", said(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[tokio::test]
async fn the_image_serves_the_starter_under_podman_and_stops_on_sigterm() {
    let test = "the_image_serves_the_starter_under_podman";
    let Some(urls) = urls(test) else { return };
    let Some(bin) = binaries(test) else { return };
    if !container_tools(test) {
        return;
    }
    let tag = format!(
        "localhost/registry-coordinator:journey-{}",
        std::process::id()
    );
    let image = TaggedImage(tag.clone());

    // Built twice from the same binaries: the same digest.
    let started = Instant::now();
    let first = build_image(&bin, &tag);
    let built = started.elapsed().as_secs_f64();
    let second = build_image(&bin, &tag);
    assert_eq!(first, second, "two builds of the same binaries differ");
    assert_eq!(inspect(&tag, "{{.User}}"), "10001:10001");
    assert_eq!(
        inspect(&tag, "{{.Config.Entrypoint}}"),
        "[/usr/local/bin/coordinator]"
    );
    for label in ["version", "revision", "source", "licenses"] {
        let value = inspect(
            &tag,
            &format!("{{{{index .Labels \"org.opencontainers.image.{label}\"}}}}"),
        );
        assert!(!value.is_empty() && value != "<no value>", "{label}");
    }
    // No shell: starting one fails as a missing command (127).
    let shell = podman(&[
        "run",
        "--rm",
        "--ulimit",
        "nofile=1024:1024",
        "--ulimit",
        "nproc=1024:1024",
        "--network",
        "none",
        "--entrypoint",
        "/bin/sh",
        &tag,
        "-c",
        "true",
    ]);
    assert_eq!(shell.status.code(), Some(127), "{}", said(&shell));

    let scratch = tempfile::tempdir().unwrap();
    let work = scratch.path().join("image-journey");
    let journey_started = Instant::now();
    let out = Command::new("bash")
        .arg(workspace().join("scripts/image-journey.sh"))
        .arg(&tag)
        .arg(&work)
        .env("COORDINATOR_RUN_BIN_DIR", &bin)
        .env("COORDINATOR_TEST_RUNTIME_URL", &urls.runtime)
        .env("COORDINATOR_TEST_MIGRATION_URL", &urls.migration)
        .output()
        .unwrap();
    let journey = journey_started.elapsed().as_secs_f64();
    drop_namespace(&urls.admin, &work).await;
    let text = said(&out);
    eprintln!(
        "{test}: image built in {built:.1} s (digest {first}); journey {journey:.1} s\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(out.status.success(), "scripts/image-journey.sh:\n{text}");
    for command in ["plan", "apply", "deployment-status"] {
        assert!(
            text.contains(&format!("image-journey: {command} from the image: exit 0")),
            "{text}"
        );
    }
    for container in ["1", "2"] {
        assert!(
            text.contains(&format!("image-journey: container {container} /ready 200")),
            "{text}"
        );
        assert!(
            text.contains(&format!("finished through container {container}")),
            "{text}"
        );
        // Stopped by its own drain on SIGTERM (exit 0), never by
        // podman's SIGKILL after 30 s (137).
        let stopped = text
            .lines()
            .find(|l| l.starts_with(&format!("image-journey: container {container} stopped in ")))
            .unwrap_or_else(|| panic!("container {container} not stopped: {text}"));
        assert!(stopped.ends_with(", exit code 0"), "{stopped}");
    }
    assert_eq!(
        text.matches("image-journey: outcome: message-accepted")
            .count(),
        2,
        "{text}"
    );
    let journals = text
        .lines()
        .find_map(|l| {
            l.strip_prefix(
                "image-journey: audit journal files owned by 10001, 0600, on the volume: ",
            )
        })
        .and_then(|n| n.trim().parse::<usize>().ok())
        .unwrap_or(0);
    assert!(journals >= 2, "{text}");
    drop(image);
}
