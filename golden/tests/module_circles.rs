//! No circle between the modules of a crate (docs/decisions.md "The
//! house's shape as tests"): a module that names another through a
//! `crate::…` or `super::…` path depends on it, and those dependencies run
//! one way.
//!
//! Each crate under `src/` is read (the library at `lib.rs`, a binary at
//! `main.rs` or `bin/NAME.rs`, each with its own modules). A file is a
//! module (`a/b.rs` and `a/b/mod.rs` are `a::b`), an inline `mod NAME {…}`
//! is one inside it, and `#[cfg(test)]` modules are test code and left out.
//! Every `crate::` and `super::` path outside comments and literals is an
//! edge — in a `use` tree each leaf is one (`use crate::{a::X, b::Y}` names
//! `a` and `b`) — to the deepest module the path names (`crate::a::b::f`
//! is `a::b` when that module exists, else `a`). A path to the module itself
//! or to one inside it is no edge; a plain `child::X` or `self::…` (a
//! module naming what it holds) is none either, so a child reaching its
//! parent through `super::` makes no circle with it. A circle is named by
//! its modules and the line of each edge.

use std::collections::{BTreeMap, BTreeSet};

use coordinator_golden::rust_text::{
    blank_comments_and_literals, identifier_at, is_identifier_char, keyword_offsets, line_of,
    matching_brace, test_module_regions, Region,
};
use coordinator_golden::{is_test_file, relative_path, workspace, workspace_rust_files};

/// A module's path in its crate, one name per level (`[]` is the root).
type ModulePath = Vec<String>;

/// An edge of a crate's module graph: where the path is written.
#[derive(Clone, Debug)]
struct Edge {
    file: String,
    line: usize,
}

/// One crate's module graph: every module, and per module the modules it
/// names with the first place it names each.
#[derive(Default)]
struct Graph {
    modules: BTreeSet<ModulePath>,
    edges: BTreeMap<ModulePath, BTreeMap<ModulePath, Edge>>,
}

/// The crate a file under `src/` belongs to (`lib`, `main` or `bin/NAME`)
/// and its module path in that crate; `has_lib` says whether `src/lib.rs`
/// exists (the modules' owner when it does).
fn crate_and_module(in_src: &str, has_lib: bool) -> (String, ModulePath) {
    let stem = in_src.strip_suffix(".rs").unwrap_or(in_src);
    let stem = stem.strip_suffix("/mod").unwrap_or(stem);
    let parts: Vec<&str> = stem.split('/').collect();
    match parts.as_slice() {
        ["lib"] => ("lib".into(), vec![]),
        ["main"] => ("main".into(), vec![]),
        ["bin", name] | ["bin", name, "main"] => (format!("bin/{name}"), vec![]),
        ["bin", name, rest @ ..] => (
            format!("bin/{name}"),
            rest.iter().map(|s| (*s).to_owned()).collect(),
        ),
        _ => (
            if has_lib { "lib" } else { "main" }.into(),
            parts.iter().map(|s| (*s).to_owned()).collect(),
        ),
    }
}

/// The inline modules of `code` (blanked text) outside `tests`: each
/// region with the path of names from the file's module down to it.
fn inline_modules(code: &str, tests: &[Region]) -> Vec<(Region, Vec<String>)> {
    let mut found: Vec<(Region, Vec<String>)> = Vec::new();
    for at in keyword_offsets(code, "mod") {
        if tests.iter().any(|r| (r.start..r.end).contains(&at)) {
            continue;
        }
        let rest = code[at + 3..].trim_start();
        let name = identifier_at(rest, 0);
        if name.is_empty() || !rest[name.len()..].trim_start().starts_with('{') {
            continue;
        }
        let open = code.len() - rest[name.len()..].trim_start().len();
        let region = Region {
            start: at,
            end: matching_brace(code, open),
        };
        let mut path = found
            .iter()
            .rev()
            .find(|(outer, _)| outer.start < at && at < outer.end)
            .map(|(_, p)| p.clone())
            .unwrap_or_default();
        path.push(name.to_owned());
        found.push((region, path));
    }
    found
}

/// The paths a `crate::`/`super::` path starting at `at` names: after the
/// keyword's `::`, a path of names, or a `use` tree of them in braces
/// (each leaf one path; `self` in a tree is the prefix itself).
fn paths_from(code: &str, at: usize) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    tree(code, at, Vec::new(), &mut out);
    out
}

/// Reads the path or `use` tree at `at` (after a `::`) under `prefix`
/// into `out`; returns where it ends. A glob (`*`) names the prefix.
fn tree(code: &str, mut at: usize, mut prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    loop {
        at = skip_space(code, at);
        if code[at..].starts_with('{') {
            at += 1;
            loop {
                at = skip_space(code, at);
                if at >= code.len() {
                    return code.len();
                }
                if code[at..].starts_with('}') {
                    return at + 1;
                }
                let start = at;
                at = skip_space(code, tree(code, at, prefix.clone(), out));
                if code[at..].starts_with(',') {
                    at += 1;
                } else if at == start {
                    // Not a path (stray text): step over it.
                    at += code[at..].chars().next().map_or(1, char::len_utf8);
                }
            }
        }
        if code[at..].starts_with('*') {
            out.push(prefix);
            return at + 1;
        }
        let name = identifier_at(code, at);
        if name.is_empty() {
            out.push(prefix);
            return at;
        }
        at += name.len();
        if name != "self" {
            prefix.push(name.to_owned());
        }
        let after = skip_space(code, at);
        if code[after..].starts_with("::") && !code[after + 2..].starts_with('<') {
            at = after + 2;
        } else {
            out.push(prefix);
            return skip_alias(code, after);
        }
    }
}

fn skip_space(code: &str, at: usize) -> usize {
    at + (code[at..].len() - code[at..].trim_start().len())
}

/// Past `as NAME` when it follows, else `at`.
fn skip_alias(code: &str, at: usize) -> usize {
    match code[at..].strip_prefix("as") {
        Some(rest) if rest.starts_with(char::is_whitespace) => {
            let name_at = skip_space(code, at + 2);
            name_at + identifier_at(code, name_at).len()
        }
        _ => at,
    }
}

/// Adds the modules and edges of one file (`relative`, the module
/// `file_module` of its crate) to `graph`.
fn read_file(graph: &mut Graph, relative: &str, file_module: &ModulePath, text: &str) {
    let code = blank_comments_and_literals(text);
    let tests = test_module_regions(&code);
    let inline = inline_modules(&code, &tests);
    graph.modules.insert(file_module.clone());
    for (_, names) in &inline {
        graph
            .modules
            .insert([file_module.clone(), names.clone()].concat());
    }
    let module_at = |at: usize| -> ModulePath {
        let inner = inline
            .iter()
            .rev()
            .find(|(r, _)| r.start < at && at < r.end)
            .map(|(_, names)| names.clone())
            .unwrap_or_default();
        [file_module.clone(), inner].concat()
    };
    for keyword in ["crate", "super"] {
        for at in keyword_offsets(&code, keyword) {
            let before = code[..at].trim_end();
            let after = &code[at + keyword.len()..];
            if !after.starts_with("::")
                || before.ends_with("::")
                || (before.ends_with("in")
                    && !before[..before.len() - 2].ends_with(is_identifier_char))
                || tests.iter().any(|r| (r.start..r.end).contains(&at))
            {
                continue;
            }
            let from = module_at(at);
            let mut base = if keyword == "crate" {
                Vec::new()
            } else {
                from[..from.len().saturating_sub(1)].to_vec()
            };
            let mut rest = at + keyword.len() + 2;
            while code[rest..].starts_with("super::") {
                base.pop();
                rest += "super::".len();
            }
            for path in paths_from(&code, rest) {
                let full = [base.clone(), path].concat();
                graph
                    .edges
                    .entry(from.clone())
                    .or_default()
                    .entry(full)
                    .or_insert(Edge {
                        file: relative.to_owned(),
                        line: line_of(&code, at),
                    });
            }
        }
    }
}

/// The deepest module of `modules` that `path` names (a prefix of it).
fn deepest_module(modules: &BTreeSet<ModulePath>, path: &[String]) -> ModulePath {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|prefix| modules.contains(prefix))
        .unwrap_or_default()
}

/// `graph` with each edge's target resolved to a module, self-edges and
/// edges into the module's own children dropped.
fn resolved(graph: &Graph) -> BTreeMap<ModulePath, BTreeMap<ModulePath, Edge>> {
    let mut out: BTreeMap<ModulePath, BTreeMap<ModulePath, Edge>> = BTreeMap::new();
    for (from, targets) in &graph.edges {
        for (path, edge) in targets {
            let to = deepest_module(&graph.modules, path);
            if to.starts_with(from) {
                continue;
            }
            out.entry(from.clone())
                .or_default()
                .entry(to)
                .or_insert_with(|| edge.clone());
        }
    }
    out
}

/// A shortest way from `start` back to `start` in `edges`, if any.
fn circle_through(
    edges: &BTreeMap<ModulePath, BTreeMap<ModulePath, Edge>>,
    start: &ModulePath,
) -> Option<Vec<ModulePath>> {
    let mut came_from: BTreeMap<ModulePath, ModulePath> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start.clone()]);
    while let Some(module) = queue.pop_front() {
        for next in edges.get(&module).into_iter().flat_map(BTreeMap::keys) {
            if next == start {
                let mut way = vec![module.clone()];
                while let Some(previous) = came_from.get(way.last()?) {
                    way.push(previous.clone());
                }
                way.reverse();
                return Some(way);
            }
            if !came_from.contains_key(next) {
                came_from.insert(next.clone(), module.clone());
                queue.push_back(next.clone());
            }
        }
    }
    None
}

fn shown(module: &ModulePath) -> String {
    if module.is_empty() {
        "crate".to_owned()
    } else {
        module.join("::")
    }
}

/// Every circle between the modules of the crates in `files`
/// (`(path relative to the workspace, text)`; files outside a `src/`
/// folder and test files are skipped), one line each: `CRATE: a → b → a
/// (FILE:LINE, FILE:LINE)`. Each module on a circle is reported once.
fn module_circles(files: &[(String, String)]) -> Vec<String> {
    module_circles_counted(files).0
}

/// How much [`module_circles_counted`] read: crates, modules, and edges
/// between two modules.
#[derive(Default)]
struct Read {
    crates: usize,
    modules: usize,
    edges: usize,
}

/// [`module_circles`], and how much it read.
fn module_circles_counted(files: &[(String, String)]) -> (Vec<String>, Read) {
    let mut graphs: BTreeMap<String, Graph> = BTreeMap::new();
    let libraries: BTreeSet<&str> = files
        .iter()
        .filter_map(|(p, _)| p.strip_suffix("/src/lib.rs"))
        .collect();
    for (relative, text) in files {
        let Some((package, in_src)) = relative.split_once("/src/") else {
            continue;
        };
        if is_test_file(relative) {
            continue;
        }
        let (krate, module) = crate_and_module(in_src, libraries.contains(package));
        let graph = graphs.entry(format!("{package} ({krate})")).or_default();
        read_file(graph, relative, &module, text);
    }
    let mut found = Vec::new();
    let mut read = Read {
        crates: graphs.len(),
        ..Read::default()
    };
    for (krate, graph) in &graphs {
        let edges = resolved(graph);
        read.modules += graph.modules.len();
        read.edges += edges.values().map(BTreeMap::len).sum::<usize>();
        let mut reported: BTreeSet<ModulePath> = BTreeSet::new();
        for module in &graph.modules {
            if reported.contains(module) {
                continue;
            }
            let Some(way) = circle_through(&edges, module) else {
                continue;
            };
            let places: Vec<String> = way
                .iter()
                .zip(way.iter().cycle().skip(1))
                .map(|(from, to)| {
                    let edge = &edges[from][to];
                    format!("{}:{}", edge.file, edge.line)
                })
                .collect();
            let names: Vec<String> = way.iter().chain([module]).map(shown).collect();
            found.push(format!(
                "{krate}: {} ({})",
                names.join(" → "),
                places.join(", ")
            ));
            reported.extend(way);
        }
    }
    (found, read)
}

#[test]
fn no_crate_has_a_circle_between_its_modules() {
    let root = workspace();
    let files: Vec<(String, String)> = workspace_rust_files(&root)
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("readable source");
            (relative_path(&root, &path), text)
        })
        .collect();
    let (found, read) = module_circles_counted(&files);
    assert!(
        found.is_empty(),
        "circles between modules (docs/decisions.md \"The house's shape as tests\"):\n{}",
        found.join("\n")
    );
    let counts = format!(
        "{} crates, {} modules, {} edges",
        read.crates, read.modules, read.edges
    );
    assert!(
        read.edges > 100,
        "the scan found the crates' imports: {counts}"
    );
    eprintln!("{counts}");
}

fn files(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(p, t)| ((*p).to_owned(), (*t).to_owned()))
        .collect()
}

#[test]
fn a_circle_between_two_modules_is_named_with_its_lines() {
    let found = module_circles(&files(&[
        ("vm/src/lib.rs", "mod a;\nmod b;\n"),
        (
            "vm/src/a.rs",
            "//! crate::b::x in a comment\nuse crate::b::c::C;\n",
        ),
        (
            "vm/src/b/mod.rs",
            "mod c;\nfn f() {\n    let s = \"crate::a\";\n}\n",
        ),
        (
            "vm/src/b/c.rs",
            "\nuse super::super::{\n    a::{self, A},\n    b::*,\n    x::{*, ?},\n};\nuse crate::{",
        ),
    ]));
    assert_eq!(
        found,
        ["vm (lib): a → b::c → a (vm/src/a.rs:2, vm/src/b/c.rs:2)"]
    );
}

#[test]
fn a_child_using_its_parent_and_test_modules_make_no_circle() {
    let found = module_circles(&files(&[
        ("vm/src/lib.rs", "pub mod a;\npub use a::A;\n"),
        (
            "vm/src/a/mod.rs",
            "mod b;\npub struct A;\npub(crate) use self::b::B;\npub(in crate::a) fn f() {}\n",
        ),
        (
            "vm/src/a/b.rs",
            "use super::A;\nuse crate::A as Root;\npub struct B;\n#[cfg(test)]\nmod tests {\n    use crate::a::b::B;\n}\n",
        ),
        ("vm/tests/t.rs", "use crate::x;\n"),
    ]));
    assert_eq!(found, Vec::<String>::new());
}

#[test]
fn inline_modules_and_binaries_are_modules_of_their_own() {
    let found = module_circles(&files(&[
        ("server/src/lib.rs", "mod x;\n"),
        ("server/src/x.rs", "use crate::y;\n"),
        (
            "server/src/main.rs",
            "mod run {\n    pub fn go() { crate::stop::now(); }\n}\nmod stop {\n    pub fn now() { super::run::go(); }\n}\n",
        ),
    ]));
    assert_eq!(
        found,
        ["server (main): run → stop → run (server/src/main.rs:2, server/src/main.rs:5)"]
    );
}
