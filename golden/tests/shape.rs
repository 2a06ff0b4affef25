//! The house's size rules (docs/decisions.md "The house's shape as
//! tests"), over every `.rs` file of the workspace that is not test code
//! (not under a `tests/` folder, not a `tests.rs`; `src/`, `benches/` and
//! build scripts are all read):
//!
//! - no file over [`MAX_FILE_LINES`] lines (the whole file, its inline
//!   test module included);
//! - no function over [`MAX_FUNCTION_LINES`] lines, from the line of its
//!   `fn` to the line of its closing brace (functions in `#[cfg(test)]`
//!   modules are test code and skipped; a nested function is measured on
//!   its own and inside its parent);
//! - no port trait over [`MAX_PORT_METHODS`] methods: every trait in
//!   `host/ports/src/`, and every `pub trait` of a crate whose folder is
//!   named `ports`.
//!
//! Comments and literals are blanked first (`coordinator_golden::rust_text`)
//! so a brace or `fn` inside them does not count. A failing rule names the
//! file, the line and the number.

use coordinator_golden::rust_text::{
    blank_comments_and_literals, identifier_at, keyword_offsets, line_of, matching_brace,
    test_module_regions,
};
use coordinator_golden::{is_test_file, relative_path, workspace, workspace_rust_files};

/// The longest a non-test source file may be, in lines.
const MAX_FILE_LINES: usize = 800;
/// The longest a non-test function may be, in lines.
const MAX_FUNCTION_LINES: usize = 120;
/// The most methods a port trait may declare.
const MAX_PORT_METHODS: usize = 12;

/// A function of a source file: its name, the line of its `fn` and its
/// length in lines (from that line to its closing brace's, both counted).
#[derive(Debug, PartialEq, Eq)]
struct Function {
    name: String,
    line: usize,
    lines: usize,
}

/// A trait of a source file: its name, the line of its `trait` keyword,
/// whether it is `pub`, and how many `fn` items its body declares.
#[derive(Debug, PartialEq, Eq)]
struct Trait {
    name: String,
    line: usize,
    public: bool,
    methods: usize,
}

/// The functions with a body in `text` (a whole `.rs` file), outside
/// `#[cfg(test)]` modules. A declaration without a body (`fn f();` in a
/// trait) is no function here.
fn functions(text: &str) -> Vec<Function> {
    let code = blank_comments_and_literals(text);
    let tests = test_module_regions(&code);
    let mut found = Vec::new();
    for at in keyword_offsets(&code, "fn") {
        if tests.iter().any(|r| (r.start..r.end).contains(&at)) {
            continue;
        }
        let after = &code[at + 2..];
        let name = identifier_at(after.trim_start(), 0);
        if name.is_empty() || after.len() == after.trim_start().len() {
            continue; // `fn(u8) -> u8`, a function pointer type
        }
        let Some(open) = body_start(&code, at) else {
            continue;
        };
        let end = matching_brace(&code, open);
        let line = line_of(&code, at);
        found.push(Function {
            name: name.to_owned(),
            line,
            lines: line_of(&code, end.saturating_sub(1)) - line + 1,
        });
    }
    found
}

/// Where the body of the function whose `fn` is at `at` opens: the first
/// `{` outside parentheses and brackets, unless a `;` comes first (a
/// declaration without a body).
fn body_start(code: &str, at: usize) -> Option<usize> {
    let mut nesting = 0usize;
    for (offset, c) in code[at..].char_indices() {
        match c {
            '(' | '[' => nesting += 1,
            ')' | ']' => nesting = nesting.saturating_sub(1),
            '{' if nesting == 0 => return Some(at + offset),
            ';' if nesting == 0 => return None,
            _ => {}
        }
    }
    None
}

/// The traits declared in `text` (a whole `.rs` file) with the number of
/// functions each declares directly in its body (provided methods
/// included; functions inside a method's body not).
fn traits(text: &str) -> Vec<Trait> {
    let code = blank_comments_and_literals(text);
    let mut found = Vec::new();
    for at in keyword_offsets(&code, "trait") {
        let name = identifier_at(code[at + "trait".len()..].trim_start(), 0);
        let Some(open) = code[at..].find(['{', ';']).map(|i| at + i) else {
            continue;
        };
        if name.is_empty() || !code[open..].starts_with('{') {
            continue;
        }
        let body = &code[open + 1..matching_brace(&code, open).saturating_sub(1)];
        let mut depth = 0usize;
        let mut methods = 0;
        let mut fns = keyword_offsets(body, "fn").peekable();
        for (offset, c) in body.char_indices() {
            if fns.peek() == Some(&offset) {
                fns.next();
                methods += usize::from(depth == 0);
            }
            match c {
                '{' => depth += 1,
                '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        let before = code[..at].trim_end();
        found.push(Trait {
            name: name.to_owned(),
            line: line_of(&code, at),
            public: before.ends_with("pub") || before.ends_with("pub unsafe"),
            methods,
        });
    }
    found
}

/// Whether the traits of the file at `relative` are ports: every trait of
/// `host/ports/src/`, and the public ones of any crate folder named `ports`.
fn holds_ports(relative: &str, public: bool) -> bool {
    relative.starts_with("host/ports/src/")
        || (public && relative.split('/').any(|part| part == "ports") && relative.contains("/src/"))
}

/// Every breach of the three size rules in the files `(relative path,
/// text)` given, one line each: `path: N lines`, `path:LINE fn NAME: N
/// lines`, `path:LINE trait NAME: N methods`.
fn size_breaches(files: &[(String, String)]) -> Vec<String> {
    let mut found = Vec::new();
    for (relative, text) in files {
        if is_test_file(relative) {
            continue;
        }
        let lines = text.lines().count();
        if lines > MAX_FILE_LINES {
            found.push(format!(
                "{relative}: {lines} lines (at most {MAX_FILE_LINES})"
            ));
        }
        for f in functions(text) {
            if f.lines > MAX_FUNCTION_LINES {
                found.push(format!(
                    "{relative}:{} fn {}: {} lines (at most {MAX_FUNCTION_LINES})",
                    f.line, f.name, f.lines
                ));
            }
        }
        for t in traits(text) {
            if holds_ports(relative, t.public) && t.methods > MAX_PORT_METHODS {
                found.push(format!(
                    "{relative}:{} trait {}: {} methods (at most {MAX_PORT_METHODS})",
                    t.line, t.name, t.methods
                ));
            }
        }
    }
    found
}

/// Every `.rs` file of the workspace, as `(relative path, text)`.
fn workspace_sources() -> Vec<(String, String)> {
    let root = workspace();
    workspace_rust_files(&root)
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("readable source");
            (relative_path(&root, &path), text)
        })
        .collect()
}

#[test]
fn no_file_function_or_port_trait_is_over_its_size() {
    let files = workspace_sources();
    assert!(files.len() > 100, "the walk found the workspace's sources");
    let found = size_breaches(&files);
    assert!(
        found.is_empty(),
        "over the house's sizes (docs/decisions.md \"The house's shape as tests\"):\n{}",
        found.join("\n")
    );
    // The largest of each, for the record (`cargo test -- --nocapture`).
    let production: Vec<_> = files.iter().filter(|(p, _)| !is_test_file(p)).collect();
    let longest_file = production.iter().map(|(p, t)| (t.lines().count(), p)).max();
    let longest_function = production
        .iter()
        .flat_map(|(p, t)| functions(t).into_iter().map(move |f| (f.lines, p, f.name)))
        .max();
    let widest_port = production
        .iter()
        .flat_map(|(p, t)| {
            traits(t)
                .into_iter()
                .filter(|t| holds_ports(p, t.public))
                .map(move |t| (t.methods, p, t.name))
        })
        .max();
    eprintln!(
        "{} files read; longest file {longest_file:?}; longest function {longest_function:?}; widest port {widest_port:?}",
        production.len()
    );
}

#[test]
fn a_long_file_is_named_with_its_length() {
    let long = "fn a() {}\n".repeat(MAX_FILE_LINES + 1);
    let files = [
        ("host/engine/src/big.rs".to_owned(), long.clone()),
        ("host/engine/tests/big.rs".to_owned(), long.clone()),
        ("host/engine/src/big/tests.rs".to_owned(), long.clone()),
        (
            "host/engine/src/fits.rs".to_owned(),
            "fn a() {}\n".repeat(MAX_FILE_LINES),
        ),
    ];
    assert_eq!(
        size_breaches(&files),
        ["host/engine/src/big.rs: 801 lines (at most 800)"]
    );
}

#[test]
fn a_long_function_is_named_with_its_line_and_length() {
    let body = "    let x = \"}\"; // }\n".repeat(MAX_FUNCTION_LINES - 2);
    let text = format!(
        "//! fn in a comment {{\nfn fits() {{\n{body}}}\n\npub(crate) async fn too_long(\n    a: [u8; 2],\n) -> u8 {{\n{body}}}\ntrait T {{ fn declared(&self); }}\n#[cfg(test)]\nmod tests {{\n    fn long_test() {{\n{body}{body}    }}\n}}\n"
    );
    let files = [("vm/src/step.rs".to_owned(), text)];
    assert_eq!(
        size_breaches(&files),
        [format!(
            "vm/src/step.rs:{} fn too_long: 122 lines (at most 120)",
            MAX_FUNCTION_LINES + 3
        )]
    );
}

#[test]
fn functions_are_measured_as_the_script_measures_them() {
    let text = "fn one_line() {}\nfn outer() {\n    fn inner() {\n    }\n}\nimpl X {\n    pub const fn f(&self) -> fn(u8) -> u8 {\n        g\n    }\n}\n";
    let found: Vec<_> = functions(text)
        .into_iter()
        .map(|f| (f.name, f.line, f.lines))
        .collect();
    assert_eq!(
        found,
        [
            ("one_line".to_owned(), 1, 1),
            ("outer".to_owned(), 2, 4),
            ("inner".to_owned(), 3, 2),
            ("f".to_owned(), 7, 3),
        ]
    );
}

#[test]
fn a_wide_port_trait_is_named_with_its_method_count() {
    let methods: String = (0..=MAX_PORT_METHODS)
        .map(|i| format!("    fn m{i}(&self) -> u8 {{ fn helper() {{}} 0 }}\n"))
        .collect();
    let wide = format!("pub trait Wide: Send + Sync {{\n    type Item;\n{methods}}}\n");
    let files = [
        ("host/ports/src/wide.rs".to_owned(), wide.clone()),
        ("host/adapters/ports/src/lib.rs".to_owned(), wide.clone()),
        // Not ports: an engine's own trait, a private trait outside host/ports.
        ("host/engine/src/wide.rs".to_owned(), wide.clone()),
        (
            "host/adapters/ports/src/private.rs".to_owned(),
            wide.replace("pub trait", "trait"),
        ),
        (
            "host/ports/src/narrow.rs".to_owned(),
            "pub trait Narrow {\n    fn one(&self);\n}\n".to_owned(),
        ),
    ];
    assert_eq!(
        size_breaches(&files),
        [
            "host/ports/src/wide.rs:1 trait Wide: 13 methods (at most 12)",
            "host/adapters/ports/src/lib.rs:1 trait Wide: 13 methods (at most 12)",
        ]
    );
}
