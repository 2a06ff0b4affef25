//! Every code the project emits has a page under `docs/errors/`, every page
//! names a code the project emits, and `docs/errors/README.md` lists them
//! all (README, SPEC §2.3).
//!
//! The codes are read from their tables, through the crates' public API:
//! the diagnostic codes of `coordinator_source::codes`,
//! `coordinator_compiler::codes`, `coordinator_runtime::codes`,
//! `coordinator_scenario::codes` and `coordinatorctl::codes`, the store's
//! `coordinator_store::codes`, and the service's problems
//! `coordinator_api::problems` (printed with the `coordinator.` prefix).
//! Two small text scans keep the tables honest: every table constant is
//! named outside its table (so every entry is raised somewhere), and no
//! source writes a whole code outside a table (so each code is written
//! once, in its table). The cases under `golden/diagnostics/` (`CODE.edit`
//! or `CODE/`) are named by table codes.

use coordinator_golden::{rust_files, workspace};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// A table of codes: its source file and its codes, in table order.
struct Table {
    file: &'static str,
    codes: Vec<&'static str>,
}

fn diagnostic_table(
    file: &'static str,
    all: &[coordinator_source::codes::DiagnosticCode],
) -> Table {
    Table {
        file,
        codes: all.iter().map(|c| c.code).collect(),
    }
}

/// Every table of codes raised with their constants (not the service's
/// problems: their registry is checked by its own tests below).
fn tables() -> Vec<Table> {
    vec![
        diagnostic_table("source/src/codes.rs", coordinator_source::codes::ALL),
        diagnostic_table("compiler/src/codes.rs", coordinator_compiler::codes::ALL),
        diagnostic_table("host/runtime/src/codes.rs", coordinator_runtime::codes::ALL),
        diagnostic_table(
            "host/scenario/src/codes.rs",
            coordinator_scenario::codes::ALL,
        ),
        diagnostic_table("cli/src/codes.rs", coordinatorctl::codes::ALL),
        Table {
            file: "host/store/src/codes.rs",
            codes: coordinator_store::codes::ALL
                .iter()
                .map(|c| c.code)
                .collect(),
        },
    ]
}

/// Every code the project emits, with the table that declares it. A code
/// declared by two of the tables raised with constants fails; a service
/// problem may share its code (and page) with one of them
/// (`coordinator.deployment.refused` is the deployment commands' refusal
/// and the service's problem alike).
fn emitted_codes() -> BTreeMap<String, String> {
    let mut codes = BTreeMap::new();
    let mut twice = Vec::new();
    for table in tables() {
        for code in &table.codes {
            if let Some(first) = codes.insert((*code).to_owned(), table.file.to_owned()) {
                twice.push(format!("{code} ({first} and {})", table.file));
            }
        }
    }
    assert!(
        twice.is_empty(),
        "codes declared twice:\n  {}",
        twice.join("\n  ")
    );
    for problem in coordinator_api::problems::ALL {
        codes
            .entry(format!("coordinator.{}", problem.code))
            .or_insert_with(|| "api/src/problems.rs".to_owned());
    }
    // A log line's code has its page too, shared with a table's or a
    // problem's code where one says the same (tests/log_codes.rs).
    for log in coordinator_runtime::log_codes::ALL {
        codes
            .entry(format!("coordinator.{}", log.page_code))
            .or_insert_with(|| "host/runtime/src/log_codes.rs".to_owned());
    }
    codes
}

/// The codes that have a page: `docs/errors/<code>.md`.
fn page_codes() -> BTreeSet<String> {
    std::fs::read_dir(workspace().join("docs/errors"))
        .expect("docs/errors")
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".md")
                .filter(|stem| *stem != "README")
                .map(str::to_owned)
        })
        .collect()
}

#[test]
fn every_code_has_a_page_and_every_page_a_code() {
    let codes = emitted_codes();
    let pages = page_codes();
    let missing: Vec<String> = codes
        .iter()
        .filter(|(code, _)| !pages.contains(*code))
        .map(|(code, at)| format!("{code} (in {at})"))
        .collect();
    let stale: Vec<&String> = pages.iter().filter(|p| !codes.contains_key(*p)).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "codes without a docs/errors page:\n  {}\npages for no emitted code (stale):\n  {}",
        missing.join("\n  "),
        stale
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n  ")
    );
}

#[test]
fn every_page_is_titled_with_its_code() {
    for code in page_codes() {
        let text = std::fs::read_to_string(workspace().join(format!("docs/errors/{code}.md")))
            .expect("read a page");
        assert_eq!(
            text.lines().next(),
            Some(format!("# `{code}`").as_str()),
            "docs/errors/{code}.md must start with its code as the title"
        );
        assert!(
            text.contains("**Cause.**") && text.contains("**Fix.**"),
            "docs/errors/{code}.md must say the cause and the fix"
        );
    }
}

#[test]
fn the_index_links_every_page_once() {
    let index = std::fs::read_to_string(workspace().join("docs/errors/README.md"))
        .expect("docs/errors/README.md");
    let linked: Vec<String> = index
        .match_indices("](")
        .filter_map(|(at, _)| {
            let target = &index[at + 2..];
            target
                .find(')')
                .and_then(|end| target[..end].strip_suffix(".md"))
                .map(str::to_owned)
        })
        .collect();
    let set: BTreeSet<String> = linked.iter().cloned().collect();
    assert_eq!(set.len(), linked.len(), "a page is linked twice");
    let pages = page_codes();
    let unlisted: Vec<&String> = pages.difference(&set).collect();
    let unknown: Vec<&String> = set.difference(&pages).collect();
    assert!(
        unlisted.is_empty() && unknown.is_empty(),
        "docs/errors/README.md: pages not listed: {unlisted:?}; links to no page: {unknown:?}"
    );
}

#[test]
fn every_diagnostic_case_is_named_by_a_table_code() {
    let codes = emitted_codes();
    let mut unknown = Vec::new();
    // A case is `CODE.edit` (an edit of the starter) or a directory `CODE/`.
    for case in std::fs::read_dir(workspace().join("golden/diagnostics"))
        .expect("golden/diagnostics")
        .flatten()
    {
        let name = case.file_name().to_string_lossy().into_owned();
        let code = name.strip_suffix(".edit").unwrap_or(&name);
        if name != "README.md" && !codes.contains_key(code) {
            unknown.push(name);
        }
    }
    assert!(
        unknown.is_empty(),
        "golden/diagnostics cases named by no table's code: {unknown:?}"
    );
}

#[test]
fn every_table_entry_has_a_severity_and_a_meaning() {
    let tables = [
        coordinator_source::codes::ALL,
        coordinator_compiler::codes::ALL,
        coordinator_runtime::codes::ALL,
        coordinator_scenario::codes::ALL,
        coordinatorctl::codes::ALL,
    ];
    for code in tables.iter().flat_map(|t| t.iter()) {
        assert!(
            code.meaning.ends_with('.') && !code.meaning.contains('\n'),
            "{}: the meaning is one line ending in a full stop",
            code.code
        );
        assert!(
            workspace().join(code.page()).is_file(),
            "{}: no page at {}",
            code.code,
            code.page()
        );
    }
    for code in coordinator_store::codes::ALL {
        assert!(code.meaning.ends_with('.'), "{}: no meaning", code.code);
        assert!(workspace().join(code.page()).is_file(), "{}", code.code);
    }
}

/// The sources that raise codes (`source/`, `compiler/`, every `host/*/src`,
/// `cli/src`, `server/src`) as (path relative to the workspace, text),
/// without the code tables themselves.
fn raising_sources() -> Vec<(String, String)> {
    let root = workspace();
    let mut dirs = vec![
        root.join("source/src"),
        root.join("compiler/src"),
        root.join("cli/src"),
        root.join("server/src"),
    ];
    for entry in std::fs::read_dir(root.join("host"))
        .expect("host/")
        .flatten()
    {
        dirs.push(entry.path().join("src"));
    }
    let mut files = Vec::new();
    for dir in &dirs {
        rust_files(dir, &mut files);
    }
    files.sort();
    assert!(files.len() > 20, "too few sources found: {files:?}");
    let tables: BTreeSet<&str> = tables().iter().map(|t| t.file).collect();
    files
        .iter()
        .map(|path| {
            let rel = path
                .strip_prefix(&root)
                .unwrap_or(path)
                .to_string_lossy()
                .replace('\\', "/");
            let text = std::fs::read_to_string(path).expect("read a source");
            (rel, text)
        })
        .filter(|(rel, _)| !tables.contains(rel.as_str()))
        .collect()
}

/// Whether `text` names `codes::NAME` (and not a longer name).
fn names_constant(text: &str, name: &str) -> bool {
    let needle = format!("codes::{name}");
    text.match_indices(&needle).any(|(at, _)| {
        !text[at + needle.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// The constant names of a table's source, in table order: the rows
/// `NAME = ("code", ...`.
fn table_constants(file: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(workspace().join(file)).expect("read a code table");
    text.lines()
        .filter_map(|line| {
            let (name, rest) = line.trim().split_once(" = (\"")?;
            let (code, _) = rest.split_once('"')?;
            name.chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
                .then(|| (name.to_owned(), code.to_owned()))
        })
        .collect()
}

#[test]
fn every_table_entry_is_raised_outside_its_table() {
    let sources = raising_sources();
    let mut names = BTreeSet::new();
    let mut missing = Vec::new();
    for table in tables() {
        let constants = table_constants(table.file);
        let codes: Vec<&str> = constants.iter().map(|(_, c)| c.as_str()).collect();
        assert_eq!(
            codes, table.codes,
            "{}: the rows read from the source are not the table's ALL",
            table.file
        );
        for (name, code) in &constants {
            assert!(
                names.insert(name.clone()),
                "{name}: a constant of two tables"
            );
            if !sources.iter().any(|(_, text)| names_constant(text, name)) {
                missing.push(format!("{code}: no `codes::{name}` outside {}", table.file));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "table entries never raised:\n  {}",
        missing.join("\n  ")
    );
}

/// The whole codes a line writes as a string (`"coordinator.a.b"`) or in a
/// rendered diagnostic (`error[coordinator.a.b]`).
fn written_codes(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for (at, _) in line.match_indices("coordinator.") {
        let opened = line[..at].chars().next_back();
        if !matches!(opened, Some('"' | '[')) {
            continue;
        }
        let rest = &line[at..];
        let end = rest
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-'))
            .unwrap_or(rest.len());
        let closed = rest[end..].chars().next();
        let code = &rest[..end];
        if code.split('.').count() == 3
            && !code.ends_with('.')
            && closed == opened.map(|o| if o == '[' { ']' } else { '"' })
        {
            out.push(code);
        }
    }
    out
}

#[test]
fn no_source_writes_a_code_outside_its_table() {
    let mut written = Vec::new();
    for (rel, text) in raising_sources() {
        if rel.ends_with("/tests.rs") {
            continue;
        }
        // Unit tests (a trailing `#[cfg(test)] mod tests { ... }`) may
        // spell the codes they assert.
        let body = text
            .find("#[cfg(test)]\nmod tests {")
            .map_or(text.as_str(), |at| &text[..at]);
        for (number, line) in body.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for code in written_codes(line) {
                written.push(format!("{rel}:{}: {code}", number + 1));
            }
        }
    }
    assert!(
        written.is_empty(),
        "codes written outside their table (name the table's constant):\n  {}",
        written.join("\n  ")
    );
}

#[test]
fn the_scan_finds_whole_codes_only() {
    assert_eq!(
        written_codes(r#"x("coordinator.a.b", y)"#),
        ["coordinator.a.b"]
    );
    assert_eq!(
        written_codes(r#""error[coordinator.a-b.c2] {x}""#),
        ["coordinator.a-b.c2"]
    );
    assert!(written_codes(r#""coordinator.{code}""#).is_empty());
    assert!(written_codes(r#""coordinator.a.b.c""#).is_empty());
    assert!(written_codes(r#""https://coordinator.example.org/x""#).is_empty());
    assert!(written_codes(r#""see coordinator.a.b""#).is_empty());
    assert!(written_codes(r#""coordinator.a.b]""#).is_empty());
    assert!(names_constant("codes::LIMIT_STEPS,", "LIMIT_STEPS"));
    assert!(!names_constant("codes::LIMIT_STEPS_X", "LIMIT_STEPS"));
}

/// The registry's constants with their codes, read from its source:
/// `NAME = ("code", ...`.
fn registry_constants() -> Vec<(String, String)> {
    table_constants("api/src/problems.rs")
}

fn all_text_under(dirs: &[PathBuf]) -> String {
    let mut files = Vec::new();
    for dir in dirs {
        rust_files(dir, &mut files);
    }
    files
        .iter()
        .map(|f| std::fs::read_to_string(f).expect("read a source"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_problem_page_states_the_registry_status_and_next_line() {
    let mut wrong = Vec::new();
    for problem in coordinator_api::problems::ALL {
        let code = format!("coordinator.{}", problem.code);
        let page = workspace().join(format!("docs/errors/{code}.md"));
        let text = std::fs::read_to_string(&page).unwrap_or_default();
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if !flat.contains(&format!("**Status.** {}", problem.status)) {
            wrong.push(format!("{code}: no `**Status.** {}` line", problem.status));
        }
        let next = problem
            .next
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if !flat.contains(&next) {
            wrong.push(format!(
                "{code}: does not say the registry's next line {next:?}"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "problem pages out of step:\n  {}",
        wrong.join("\n  ")
    );
}

#[test]
fn every_problem_is_raised_by_the_service_and_asserted_by_a_test() {
    let root = workspace();
    let constants = registry_constants();
    assert_eq!(
        constants.len(),
        coordinator_api::problems::ALL.len(),
        "the registry source parse found other constants than ALL holds"
    );
    let mut sources = vec![root.join("server/src")];
    let mut tests = vec![root.join("server/tests")];
    for entry in std::fs::read_dir(root.join("host"))
        .expect("host/")
        .flatten()
    {
        sources.push(entry.path().join("src"));
        tests.push(entry.path().join("tests"));
    }
    let source_text = all_text_under(&sources);
    let test_text = all_text_under(&tests);
    let mut missing = Vec::new();
    for (name, code) in &constants {
        if !source_text.contains(&format!("problems::{name}")) {
            missing.push(format!(
                "{name}: never raised (no `problems::{name}` in the service)"
            ));
        }
        if !test_text.contains(&format!("\"{code}\"")) {
            missing.push(format!(
                "{code}: no test asserts it (no \"{code}\" literal in a test)"
            ));
        }
    }
    assert!(
        missing.is_empty(),
        "registry entries without a raise or a test:\n  {}",
        missing.join("\n  ")
    );
}
