//! The VM boundary (DESIGN.md: "the VM is the only place where workflow
//! semantics live"): no host crate reads the VM's record of pending work or
//! the step bytecode or the operation catalogue to decide anything. A host
//! learns what it needs from the VM's commands (a dispatch says whether it
//! needs a key and whether a resend is safe; an observation names its
//! connection and handle), its rejections (structured codes) and its
//! queries (`Vm::expects`, `current_wait`, `held_call`, `step_kind`,
//! `recovery_support`, `SAME_INSTANT_ORDER`).
//!
//! This test reads the sources of every crate under `host/` (`src/` and
//! `tests/`) and of `server/src/` (comments skipped) and fails when one
//! names a VM-internal item, or writes a VM-internal field of a run state
//! in a struct literal (`pending: None`: a host builds a state with
//! `RunState::new`), outside the short allow-list below. The compiler
//! refuses most of this already (the VM exports none of it); the scan
//! keeps the intent readable and catches a path that would re-export it.
//!
//! Time crosses the boundary typed: no field of `vm/src/model.rs` that
//! holds an instant (`*_at`, `at`, `now`, `until`, `due`) is a `String` or
//! an `Option<String>`; it is an `ir::instant::Instant`, whose serde form
//! is its RFC 3339 text.

use coordinator_golden::{code, rust_files, workspace};
use std::path::Path;

/// What a host must not name: the step bytecode, the VM's pending-work
/// record (its type, its variants, the state's field), its cancel record
/// and the operation catalogue.
const INTERNAL: [&str; 7] = [
    "StepOp",
    "Pending::",
    "CallPhase",
    "CancelRecord",
    "CancelMode",
    "catalogue",
    ".pending",
];

/// Fields of the VM's run state that are the VM's own: a host writing one
/// (`pending: None` in a struct literal) builds VM internals by hand.
const INTERNAL_FIELDS: [&str; 1] = ["pending"];

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

/// Whether `code` writes field `field` as a struct literal does (`field:`
/// at the start of the line, or after `{` or `,`), not in a function's
/// parameters (a line with `fn `) and not as a path (`field::`).
fn writes_field(code: &str, field: &str) -> bool {
    if code.contains("fn ") {
        return false;
    }
    let written = format!("{field}:");
    code.match_indices(&written).any(|(at, _)| {
        let before = code[..at].trim_end();
        let after = &code[at + written.len()..];
        let starts_a_field = before.is_empty() || before.ends_with('{') || before.ends_with(',');
        let whole_name = !before.ends_with(|c: char| c.is_alphanumeric() || c == '_');
        starts_a_field && whole_name && !after.starts_with(':')
    })
}

/// Every (file, line number, item) where a host crate names an internal
/// item or writes an internal field, allowed ones left out.
fn violations(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(root.join("host"))
        .expect("host/")
        .flatten()
    {
        rust_files(&entry.path().join("src"), &mut files);
        rust_files(&entry.path().join("tests"), &mut files);
    }
    rust_files(&root.join("server/src"), &mut files);
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
        let allowed = |item: &str| ALLOWED.iter().any(|(f, i, _)| *f == rel && *i == item);
        for (n, line) in text.lines().enumerate() {
            for item in INTERNAL {
                if code(line).contains(item) && !allowed(item) {
                    found.push(format!("{rel}:{}: names `{item}`", n + 1));
                }
            }
            for field in INTERNAL_FIELDS {
                if writes_field(code(line), field) && !allowed(&format!("{field}:")) {
                    found.push(format!("{rel}:{}: writes `{field}:`", n + 1));
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
    let write = |rel: &str, text: &str| {
        let path = dir.path().join(rel);
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("dirs");
        std::fs::write(path, text).expect("write");
    };
    for i in 0..21 {
        write(&format!("host/engine/src/f{i}.rs"), "// filler\n");
    }
    write(
        "host/engine/src/bad.rs",
        "// StepOp in a comment is fine\nfn f(s: &RunState) -> bool { matches!(s.pending, Some(Pending::Wake { .. })) }\n",
    );
    write(
        "host/store/tests/literal.rs",
        "fn state() -> RunState {\n    RunState {\n        status,\n        pending: None,\n        cancel: Some(CancelRecord { at, mode }),\n    }\n}\nlet one_line = RunState { status, pending: None };\n",
    );
    write(
        "server/src/fine.rs",
        "fn waiting(marker: &str, pending: Value) -> RunState { todo!() }\nstruct Queue { still_pending: u32 }\nfn g(o: Observation) -> bool { matches!(o, Observation::Pending) }\nuse x::pending::y;\n",
    );
    let found = violations(dir.path());
    assert_eq!(
        found,
        [
            "host/engine/src/bad.rs:2: names `Pending::`",
            "host/engine/src/bad.rs:2: names `.pending`",
            "host/store/tests/literal.rs:4: writes `pending:`",
            "host/store/tests/literal.rs:5: names `CancelRecord`",
            "host/store/tests/literal.rs:8: writes `pending:`",
        ]
    );
}

/// Whether `name` is the name of a field that holds an instant.
fn names_an_instant(name: &str) -> bool {
    name.ends_with("_at") || ["at", "now", "until", "due"].contains(&name)
}

/// Every (line number, field) of `text` (Rust source) where a field that
/// holds an instant is typed `String` or `Option<String>`.
fn string_instants(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = code(line);
        for (colon, _) in code.match_indices(':') {
            let before = &code[..colon];
            let after = &code[colon + 1..];
            if before.ends_with(':') || after.starts_with(':') {
                continue; // a path (`a::b`), not a field
            }
            let name_starts = before
                .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
                .map_or(0, |i| i + 1);
            let name = &before[name_starts..];
            let ty: String = after.chars().filter(|c| !c.is_whitespace()).collect();
            let is_string = ["String", "Option<String>"].iter().any(|t| {
                ty.strip_prefix(t)
                    .is_some_and(|rest| !rest.starts_with(|c: char| c.is_alphanumeric()))
            });
            if names_an_instant(name) && is_string {
                found.push(format!("{}: `{name}`", n + 1));
            }
        }
    }
    found
}

#[test]
fn no_instant_of_the_vm_model_is_a_string() {
    let model = workspace().join("vm/src/model.rs");
    let text = std::fs::read_to_string(&model).expect("vm/src/model.rs");
    let found = string_instants(&text);
    assert!(
        found.is_empty(),
        "vm/src/model.rs holds instants as text (use coordinator_ir::instant::Instant):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_instant_scan_sees_a_string_instant() {
    let text = "pub struct S {\n    pub admitted_at: String,\n    pub ended_at: Option<String>,\n    // at: String in a comment is fine\n    pub now: Instant,\n    pub chat: String,\n    pub at_most: String,\n}\nenum E { TimerFired { at: String }, Wake { step: StepId, until: String } }\nfn f(due: &str, x: std::string::String) {}\n";
    assert_eq!(
        string_instants(text),
        ["2: `admitted_at`", "3: `ended_at`", "9: `at`", "9: `until`",]
    );
}
