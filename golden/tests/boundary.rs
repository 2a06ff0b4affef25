//! The VM boundary (DESIGN.md: "the VM is the only place where workflow
//! semantics live"): no host crate reads the VM's record of pending work or
//! the step bytecode or the operation catalogue to decide anything. A host
//! learns what it needs from the VM's commands (a dispatch says whether it
//! needs a key and whether a resend is safe; an observation names its
//! connection and handle), its rejections (structured codes) and its
//! queries (`Vm::expects`, `current_wait`, `held_call`, `step_kind`,
//! `recovery_support`, `SAME_INSTANT_ORDER`).
//!
//! This test reads the sources of every crate under `host/` (comments
//! skipped) and fails when one names a VM-internal item outside the short
//! allow-list below.

use std::path::{Path, PathBuf};

/// What a host must not name: the step bytecode, the VM's pending-work
/// record (its type, its variants, the state's field) and the operation
/// catalogue.
const INTERNAL: [&str; 5] = ["StepOp", "Pending::", "CallPhase", "catalogue", ".pending"];

/// (file, item) pairs allowed to name an internal item, with the reason.
const ALLOWED: &[(&str, &str, &str)] = &[
    (
        "host/adapters/src/http.rs",
        "catalogue",
        "the HTTP adapter maps an operation to its product's endpoint (SPEC §6): that is an adapter's knowledge, not workflow semantics",
    ),
    (
        "host/testkit/src/lib.rs",
        "catalogue",
        "test support builds a Program by hand",
    ),
    (
        "host/testkit/src/lib.rs",
        "StepOp",
        "test support builds a Program by hand",
    ),
];

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a source line: the part before a `//` comment (a `//`
/// inside a string literal is rare enough in these files to ignore).
fn code(line: &str) -> &str {
    match line.find("//") {
        Some(i) => &line[..i],
        None => line,
    }
}

/// Every (file, line number, item) where a host crate names an internal
/// item, allowed ones left out.
fn violations(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(root.join("host"))
        .expect("host/")
        .flatten()
    {
        rust_files(&entry.path().join("src"), &mut files);
    }
    files.sort();
    assert!(files.len() > 20, "too few host sources: {files:?}");
    let mut found = Vec::new();
    for path in &files {
        let rel = path
            .strip_prefix(root)
            .unwrap_or(path)
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(path).expect("read a source");
        for (n, line) in text.lines().enumerate() {
            for item in INTERNAL {
                if code(line).contains(item)
                    && !ALLOWED.iter().any(|(f, i, _)| *f == rel && *i == item)
                {
                    found.push(format!("{rel}:{}: names `{item}`", n + 1));
                }
            }
        }
    }
    found
}

#[test]
fn no_host_crate_reads_vm_internals() {
    let found = violations(&workspace());
    assert!(
        found.is_empty(),
        "host code reads VM internals (use the VM's commands, rejections and queries):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_boundary_scan_sees_an_internal_item() {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path().join("host/engine/src");
    std::fs::create_dir_all(&src).expect("dirs");
    let filler = "// filler\n";
    for i in 0..21 {
        std::fs::write(src.join(format!("f{i}.rs")), filler).expect("write");
    }
    std::fs::write(
        src.join("bad.rs"),
        "// StepOp in a comment is fine\nfn f(s: &RunState) -> bool { matches!(s.pending, Some(Pending::Wake { .. })) }\n",
    )
    .expect("write");
    let found = violations(dir.path());
    assert_eq!(
        found,
        [
            "host/engine/src/bad.rs:2: names `Pending::`",
            "host/engine/src/bad.rs:2: names `.pending`"
        ]
    );
}
