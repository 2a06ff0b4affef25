//! No role holds the whole run store (issue 35; docs/decisions.md "The
//! house's shape as tests"): in `host/engine/src/` and `server/src/` the
//! type name `RunStore` (the union of every narrow store port) is written
//! only where the engine is assembled — the store is upcast there, once,
//! into the narrow ports each role's constructor lists. A role, a handler
//! or a startup step takes the ports it uses (`&dyn RunReads`,
//! `Arc<dyn JobQueue>`, …).
//!
//! [`SHRINKING`] would list a file that names `RunStore` beyond its
//! allowance, with its count of lines; issue 35's re-cut emptied it. A
//! count there may not grow, and a count that falls fails too, so the list
//! is lowered in the same change (a list that only ever shrinks).
//!
//! Lines are counted outside comments and literals; test files and
//! `#[cfg(test)]` modules are not read.

use std::collections::BTreeMap;

use coordinator_golden::rust_text::{
    blank_comments_and_literals, keyword_offsets, line_of, test_module_regions,
};
use coordinator_golden::{is_test_file, relative_path, service_host_sources, workspace};

/// The folders the rule reads.
const READ: [&str; 2] = ["host/engine/src/", "server/src/"];

/// Where the engine is assembled, with the lines that may name `RunStore`
/// there for good.
const ASSEMBLY: &[(&str, usize, &str)] = &[
    (
        "host/engine/src/engine.rs",
        2,
        "the `use` and `Engine::new`'s parameter: the engine takes the store once and hands each role its ports",
    ),
    (
        "server/src/main.rs",
        2,
        "the service opens its store and hands it to `Engine::new`",
    ),
];

/// Breaches tolerated, file and lines beyond its [`ASSEMBLY`] allowance:
/// none since issue 35's re-cut (every role takes its narrow ports). The
/// list stays so a future exception is written down with its reason and
/// can only shrink.
const SHRINKING: &[(&str, usize, &str)] = &[];

/// Per file of `files` (`(relative path, text)`) under [`READ`], the lines
/// that name `RunStore` outside comments, literals and test code.
fn run_store_lines(files: &[(String, String)]) -> BTreeMap<String, Vec<usize>> {
    let mut found = BTreeMap::new();
    for (relative, text) in files {
        if !READ.iter().any(|folder| relative.starts_with(folder)) || is_test_file(relative) {
            continue;
        }
        let code = blank_comments_and_literals(text);
        let tests = test_module_regions(&code);
        let mut lines: Vec<usize> = keyword_offsets(&code, "RunStore")
            .filter(|at| !tests.iter().any(|r| (r.start..r.end).contains(at)))
            .map(|at| line_of(&code, at))
            .collect();
        lines.dedup();
        if !lines.is_empty() {
            found.insert(relative.clone(), lines);
        }
    }
    found
}

/// Every breach of the rule in `found` (from [`run_store_lines`]) against
/// the allowances `assembly` and `shrinking` (file, lines), one line each.
fn run_store_breaches(
    found: &BTreeMap<String, Vec<usize>>,
    assembly: &[(&str, usize, &str)],
    shrinking: &[(&str, usize, &str)],
) -> Vec<String> {
    let allowance = |list: &[(&str, usize, &str)], file: &str| {
        list.iter()
            .filter(|(f, _, _)| *f == file)
            .map(|(_, n, _)| n)
            .sum::<usize>()
    };
    let mut breaches = Vec::new();
    for (file, lines) in found {
        let allowed = allowance(assembly, file) + allowance(shrinking, file);
        if lines.len() > allowed {
            let shown: Vec<String> = lines.iter().map(usize::to_string).collect();
            breaches.push(format!(
                "{file}: {} lines name RunStore (lines {}), {allowed} allowed: take the narrow ports the role uses",
                lines.len(),
                shown.join(", ")
            ));
        }
    }
    for (file, extra, _) in shrinking {
        let named = found.get(*file).map_or(0, Vec::len);
        let allowed = allowance(assembly, file) + extra;
        if named < allowed {
            breaches.push(format!(
                "{file}: {named} lines name RunStore, {allowed} allowed: lower its entry in SHRINKING to {}",
                named.saturating_sub(allowance(assembly, file))
            ));
        }
    }
    breaches
}

#[test]
fn only_the_engine_assembly_names_the_whole_run_store() {
    let root = workspace();
    let files: Vec<(String, String)> = service_host_sources(&root)
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("readable source");
            (relative_path(&root, &path), text)
        })
        .collect();
    let found = run_store_lines(&files);
    let breaches = run_store_breaches(&found, ASSEMBLY, SHRINKING);
    assert!(
        breaches.is_empty(),
        "RunStore outside the engine's assembly (docs/decisions.md \"The house's shape as tests\"):\n{}",
        breaches.join("\n")
    );
    eprintln!("RunStore named in: {found:?}");
}

fn files(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(p, t)| ((*p).to_owned(), (*t).to_owned()))
        .collect()
}

#[test]
fn a_role_holding_the_run_store_is_named_with_its_lines() {
    let found = run_store_lines(&files(&[
        (
            "host/engine/src/worker.rs",
            "//! Not [`RunStore`] in a comment.\nuse coordinator_ports::store::RunStore;\npub struct Worker {\n    store: Arc<dyn RunStore>,\n    reads: Arc<dyn RunStoreReads>,\n}\n#[cfg(test)]\nmod tests {\n    fn t(_: &dyn RunStore) {}\n}\n",
        ),
        (
            "host/engine/src/engine.rs",
            "use x::RunStore;\nfn new(store: Arc<dyn RunStore>) {}\n",
        ),
        ("host/engine/tests/t.rs", "fn t(_: &dyn RunStore) {}\n"),
        ("host/store/src/lib.rs", "impl RunStore for PgStore {}\n"),
    ]));
    let assembly = [("host/engine/src/engine.rs", 2, "assembly")];
    assert_eq!(
        run_store_breaches(&found, &assembly, &[]),
        ["host/engine/src/worker.rs: 2 lines name RunStore (lines 2, 4), 0 allowed: take the narrow ports the role uses"]
    );
    // A shrinking allowance holds today's count, and must fall with it.
    let shrinking = [
        ("host/engine/src/worker.rs", 2, "today"),
        ("server/src/startup.rs", 1, "gone"),
    ];
    assert_eq!(
        run_store_breaches(&found, &assembly, &shrinking),
        ["server/src/startup.rs: 0 lines name RunStore, 1 allowed: lower its entry in SHRINKING to 0"]
    );
}
