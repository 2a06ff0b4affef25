//! Every code the project emits has a page under `docs/errors/`, every page
//! names a code the project emits, and `docs/errors/README.md` lists them
//! all (README, SPEC §2.3).
//!
//! The codes are found without running anything: a small lexer reads the
//! string literals of every `.rs` file under `source/`, `compiler/`,
//! `host/*/src/` and `cli/src/` (comments and `#[cfg(test)]` items skipped)
//! and takes each `coordinator.<area>.<condition>` in them. A literal that
//! assembles a code from pieces (`"coordinator.scenario.{code}"`) fails the
//! test: write the whole code where it is raised. Added to those: the
//! runtime checker's `CODES`, the store's `CODES` in the form
//! `coordinatorctl` prints them, and the codes of the diagnostic cases
//! under `golden/diagnostics/` (`CODE.edit` or `CODE/`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// Literals allowed to assemble a code: `StoreError::cli_code` puts the
/// prefix back on a raw store code. Each such code is written whole at the
/// call site that raises it (the constructor strips the prefix), and the
/// store's `CODES` list is checked below in its printed form.
/// `coordinatorctl` prints a service problem's code with the same prefix;
/// those codes are the registry's (`coordinator_api::problems::ALL`), added
/// below.
const ASSEMBLED: &[(&str, &str)] = &[
    ("cli/src/service_client/refusal.rs", "coordinator.{code}"),
    ("cli/src/service_client/refusal.rs", "coordinator.{}"),
    ("host/store/src/lib.rs", "coordinator.{}"),
    ("host/store/src/lib.rs", "coordinator.command.{}"),
];

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

fn starts_with(s: &[char], at: usize, text: &str) -> bool {
    text.chars()
        .enumerate()
        .all(|(k, c)| s.get(at + k) == Some(&c))
}

fn ident_char(c: Option<&char>) -> bool {
    c.is_some_and(|c| c.is_alphanumeric() || *c == '_')
}

/// The number of `#` of a raw string opening at `at` (`r"`, `r#"`, `br"`),
/// or `None` when no raw string opens there.
fn raw_string_hashes(s: &[char], at: usize) -> Option<usize> {
    let start = match s[at] {
        'r' if !ident_char(at.checked_sub(1).and_then(|p| s.get(p))) => at + 1,
        'b' if s.get(at + 1) == Some(&'r')
            && !ident_char(at.checked_sub(1).and_then(|p| s.get(p))) =>
        {
            at + 2
        }
        _ => return None,
    };
    let hashes = s[start..].iter().take_while(|c| **c == '#').count();
    (s.get(start + hashes) == Some(&'"')).then_some(hashes)
}

/// The contents of the string literals of a Rust source, outside comments
/// and outside items marked `#[cfg(test)]`.
fn literals(src: &str) -> Vec<String> {
    let s: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut depth = 0usize;
    // After `#[cfg(test)]`, before the item's body opens.
    let mut test_item = false;
    // Inside a test item's body: the brace depth it closes back to.
    let mut skip_to: Option<usize> = None;
    while i < s.len() {
        let c = s[i];
        if starts_with(&s, i, "//") {
            while i < s.len() && s[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if starts_with(&s, i, "/*") {
            let mut nest = 0usize;
            while i < s.len() {
                if starts_with(&s, i, "/*") {
                    nest += 1;
                    i += 2;
                } else if starts_with(&s, i, "*/") {
                    nest -= 1;
                    i += 2;
                    if nest == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            continue;
        }
        if let Some(hashes) = raw_string_hashes(&s, i) {
            let open = s[i..].iter().position(|c| *c == '"').unwrap_or(0) + i + 1;
            let close: String = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            let mut j = open;
            while j < s.len() && !starts_with(&s, j, &close) {
                j += 1;
            }
            if skip_to.is_none() {
                out.push(s[open..j.min(s.len())].iter().collect());
            }
            i = j + close.chars().count();
            continue;
        }
        if c == '"' {
            let mut j = i + 1;
            while j < s.len() && s[j] != '"' {
                j += if s[j] == '\\' { 2 } else { 1 };
            }
            if skip_to.is_none() {
                out.push(s[i + 1..j.min(s.len())].iter().collect());
            }
            i = j + 1;
            continue;
        }
        if c == '\'' {
            // A char literal ('x', '\n', '\u{7f}') or a lifetime ('a).
            if s.get(i + 1) == Some(&'\\') {
                let mut j = i + 3;
                while j < s.len() && s[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
            } else if s.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
            }
            continue;
        }
        if starts_with(&s, i, "#[cfg(test)]") {
            test_item = skip_to.is_none();
            i += "#[cfg(test)]".len();
            continue;
        }
        match c {
            '{' => {
                if test_item {
                    skip_to = Some(depth);
                    test_item = false;
                }
                depth += 1;
            }
            '}' => {
                depth = depth.saturating_sub(1);
                if skip_to == Some(depth) {
                    skip_to = None;
                }
            }
            ';' => test_item = false,
            _ => {}
        }
        i += 1;
    }
    out
}

fn segment(rest: &str) -> &str {
    let end = rest
        .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
        .unwrap_or(rest.len());
    let seg = &rest[..end];
    if seg.starts_with(|c: char| c.is_ascii_lowercase()) {
        seg
    } else {
        ""
    }
}

/// What a literal holds: whole codes, and whether it assembles one.
#[derive(Default)]
struct Found {
    codes: BTreeSet<String>,
    assembled: bool,
}

fn codes_in(literal: &str) -> Found {
    let mut found = Found::default();
    for (at, _) in literal.match_indices("coordinator.") {
        let before = literal[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || "-_./".contains(c)) {
            continue;
        }
        let rest = &literal[at + "coordinator.".len()..];
        if rest.starts_with('{') {
            found.assembled = true;
            continue;
        }
        let area = segment(rest);
        if area.is_empty() || !rest[area.len()..].starts_with('.') {
            continue;
        }
        let rest = &rest[area.len() + 1..];
        if rest.starts_with('{') {
            found.assembled = true;
            continue;
        }
        let condition = segment(rest);
        if condition.is_empty() {
            continue;
        }
        let after = &rest[condition.len()..];
        let mut tail = after.chars();
        match tail.next() {
            Some('{') => found.assembled = true,
            Some('_') => {}
            // `coordinator.a.b.c` is no code; a sentence's full stop is.
            Some('.') if tail.next().is_some_and(|c| c.is_alphanumeric()) => {}
            Some(c) if c.is_alphanumeric() => {}
            _ => {
                found
                    .codes
                    .insert(format!("coordinator.{area}.{condition}"));
            }
        }
    }
    found
}

/// Every code the sources emit, with the first file that writes it.
fn emitted_codes() -> BTreeMap<String, String> {
    let root = workspace();
    let mut files = Vec::new();
    let mut dirs = vec![
        root.join("source"),
        root.join("compiler"),
        root.join("cli/src"),
    ];
    // Every crate of host/: its src/ only (its tests and benches raise
    // nothing).
    for entry in std::fs::read_dir(root.join("host"))
        .expect("host/")
        .flatten()
    {
        dirs.push(entry.path().join("src"));
    }
    for dir in &dirs {
        rust_files(dir, &mut files);
    }
    files.sort();
    assert!(files.len() > 20, "too few sources found: {files:?}");
    let mut codes = BTreeMap::new();
    let mut assembled = Vec::new();
    for path in &files {
        let rel = path
            .strip_prefix(&root)
            .unwrap_or(path)
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(path).expect("read a source");
        for literal in literals(&text) {
            let found = codes_in(&literal);
            if found.assembled && !ASSEMBLED.contains(&(rel.as_str(), literal.as_str())) {
                assembled.push(format!("{rel}: \"{literal}\""));
            }
            for code in found.codes {
                codes.entry(code).or_insert_with(|| rel.clone());
            }
        }
    }
    assert!(
        assembled.is_empty(),
        "codes assembled from pieces (write each code whole where it is raised):\n  {}",
        assembled.join("\n  ")
    );
    for code in coordinator_runtime::CODES {
        codes
            .entry((*code).to_owned())
            .or_insert_with(|| "coordinator_runtime::CODES".into());
    }
    for code in coordinator_store::CODES {
        let printed = coordinator_store::StoreError::refused(code, "", "").cli_code();
        codes
            .entry(printed)
            .or_insert_with(|| "coordinator_store::CODES".into());
    }
    // The service's HTTP problems: the registry is their one home.
    for problem in coordinator_api::problems::ALL {
        codes
            .entry(format!("coordinator.{}", problem.code))
            .or_insert_with(|| "coordinator_api::problems::ALL".into());
    }
    // A case is `CODE.edit` (an edit of the starter) or a directory `CODE/`.
    for case in std::fs::read_dir(root.join("golden/diagnostics"))
        .expect("golden/diagnostics")
        .flatten()
    {
        let name = case.file_name().to_string_lossy().into_owned();
        if name == "README.md" {
            continue;
        }
        let code = name.strip_suffix(".edit").unwrap_or(&name).to_owned();
        codes
            .entry(code)
            .or_insert_with(|| "golden/diagnostics".into());
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
fn the_scanner_finds_whole_codes_and_refuses_assembled_ones() {
    let src = r####"
        // "coordinator.comment.ignored"
        /* "coordinator.block.ignored" */
        fn f<'a>(x: &'a str) -> char { let _ = "error[coordinator.init.write] {shown}"; '"' }
        const R: &str = r#"a "quoted" coordinator.raw.kept."#;
        fn g() { format!("coordinator.scenario.{code}"); "coordinator.a.b.c"; "coordinator.yaml.*"; }
        #[cfg(test)]
        mod tests { const X: &str = "coordinator.x.y"; }
        const AFTER: &str = "coordinator.after.kept";
    "####;
    let mut codes = BTreeSet::new();
    let mut assembled = 0;
    for literal in literals(src) {
        let found = codes_in(&literal);
        assembled += usize::from(found.assembled);
        codes.extend(found.codes);
    }
    let expected: BTreeSet<String> = [
        "coordinator.after.kept",
        "coordinator.init.write",
        "coordinator.raw.kept",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(codes, expected);
    assert_eq!(assembled, 1);
}

/// The registry's constants with their codes, read from its source:
/// `NAME = ("code", ...`.
fn registry_constants() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(workspace().join("api/src/problems.rs"))
        .expect("api/src/problems.rs");
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((name, rest)) = line.trim().split_once(" = (\"") else {
            continue;
        };
        let Some((code, _)) = rest.split_once('"') else {
            continue;
        };
        if name.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
            out.push((name.to_owned(), code.to_owned()));
        }
    }
    out
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
