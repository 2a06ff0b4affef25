//! ARCHITECTURE.md's invariant "the service host never reads the system
//! clock": every wall-clock instant the hosts use comes through the clock
//! port (`coordinator_runtime::clock`: `Clock`, whose one production
//! implementation `SystemClock` is the only wall-clock read), so a
//! `ManualClock` drives leases, due times and stamps in tests.
//!
//! This test reads the sources of every crate under `host/` and of
//! `server/src/` (comments skipped) and fails on a wall-clock read outside
//! the clock port. Monotonic `std::time::Instant::now()` (how long
//! something took) is not a wall-clock read and is allowed.

use coordinator_golden::{code, service_host_sources, workspace};
use std::path::Path;

/// Calls that read the wall clock.
const WALL_CLOCK_READS: [&str; 5] = [
    "SystemTime::now",
    "now_utc(",
    "Utc::now",
    "Local::now",
    "get_current_timestamp",
];

/// (file, reason) pairs allowed to read the wall clock.
const ALLOWED: &[(&str, &str)] = &[
    (
        "host/runtime/src/clock.rs",
        "the clock port itself: SystemClock is the one wall-clock read",
    ),
    (
        "server/src/main.rs",
        "a unique suffix for this process's default owner name, not an instant the service acts on",
    ),
];

/// Every `file:line: call` that reads the wall clock outside [`ALLOWED`],
/// in the `src/` folders of the host crates and the server.
fn wall_clock_reads(root: &Path) -> Vec<String> {
    let files = service_host_sources(root);
    let mut found = Vec::new();
    for file in files {
        let relative = file
            .strip_prefix(root)
            .expect("under the workspace")
            .to_string_lossy()
            .replace('\\', "/");
        if ALLOWED.iter().any(|(allowed, _)| *allowed == relative) {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("readable source");
        for (number, line) in text.lines().enumerate() {
            for call in WALL_CLOCK_READS {
                if code(line).contains(call) {
                    found.push(format!("{relative}:{}: {call}", number + 1));
                }
            }
        }
    }
    found
}

#[test]
fn the_service_host_reads_the_wall_clock_only_through_the_clock_port() {
    let found = wall_clock_reads(&workspace());
    assert!(
        found.is_empty(),
        "wall-clock reads outside the clock port (take a `Clock`):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scan_finds_a_wall_clock_read() {
    let dir = std::env::temp_dir().join(format!("clock-reads-{}", std::process::id()));
    let src = dir.join("host/engine/src");
    std::fs::create_dir_all(&src).expect("temp dir");
    std::fs::create_dir_all(dir.join("server/src")).expect("temp dir");
    std::fs::write(
        src.join("late.rs"),
        "// SystemTime::now() in a comment is fine\nlet t = std::time::SystemTime::now();\n",
    )
    .expect("write");
    let found = wall_clock_reads(&dir);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(found, ["host/engine/src/late.rs:2: SystemTime::now"]);
}
