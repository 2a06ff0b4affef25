//! One failing project per diagnostic code, one test each (the format is
//! described in golden/diagnostics/README.md). Most cases are an edit of the
//! starter: `golden/diagnostics/CODE.edit`, applied to a copy of
//! examples/delayed-follow-up in a temporary directory. A case that is not
//! the starter with a few lines changed is a whole project in
//! `golden/diagnostics/CODE/`. Each snapshot holds the source followed by the
//! rendered diagnostics, and the test checks that the case's code is reported.
// Test names mirror diagnostic codes, with `__` between area and condition.
#![allow(non_snake_case)]

use std::path::{Path, PathBuf};

use coordinator_source::diagnostic;

/// The files of a project the compiler reads, in the order the snapshot
/// shows them. An edit case copies these from the starter.
const PROJECT_FILES: [&str; 2] = ["workflow.yaml", "functions.rhai"];

/// The starter, relative to the workspace: the base of every edit case.
const STARTER: &str = "examples/delayed-follow-up";

fn cases_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("diagnostics")
}

fn starter_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(STARTER)
}

/// Lines to find in a file (context and removed lines, in order) and the
/// lines that take their place (context and added lines, in order).
#[derive(Debug, Default, PartialEq)]
struct Hunk {
    find: Vec<String>,
    put: Vec<String>,
}

/// The hunks of one file, applied in order.
#[derive(Debug, PartialEq)]
struct FileEdit {
    file: String,
    hunks: Vec<Hunk>,
}

/// Reads an edit: `--- FILE` opens a file, `@@` starts another hunk in it,
/// and each other line is ` ` (context), `-` (removed) or `+` (added)
/// followed by the line itself; an empty line is an empty context line and
/// a line starting with `#` is a comment.
fn parse_edit(text: &str) -> Result<Vec<FileEdit>, String> {
    let mut files: Vec<FileEdit> = Vec::new();
    for (k, line) in text.lines().enumerate() {
        let at = k + 1;
        if line.starts_with('#') {
            continue;
        }
        if let Some(file) = line.strip_prefix("--- ") {
            if !PROJECT_FILES.contains(&file) {
                return Err(format!(
                    "line {at}: `{file}` is not a project file ({})",
                    PROJECT_FILES.join(", ")
                ));
            }
            if files.iter().any(|f| f.file == file) {
                return Err(format!(
                    "line {at}: a second `--- {file}`; use `@@` for another hunk"
                ));
            }
            files.push(FileEdit {
                file: file.to_owned(),
                hunks: vec![Hunk::default()],
            });
            continue;
        }
        let Some(hunks) = files.last_mut().map(|f| &mut f.hunks) else {
            return Err(format!("line {at}: expected `--- FILE` before any change"));
        };
        if line == "@@" {
            hunks.push(Hunk::default());
            continue;
        }
        let Some(hunk) = hunks.last_mut() else {
            return Err(format!("line {at}: no hunk open"));
        };
        let (tag, rest) = match line.chars().next() {
            Some(c) => line.split_at(c.len_utf8()),
            None => (" ", ""),
        };
        match tag {
            " " => {
                hunk.find.push(rest.to_owned());
                hunk.put.push(rest.to_owned());
            }
            "-" => hunk.find.push(rest.to_owned()),
            "+" => hunk.put.push(rest.to_owned()),
            _ => {
                return Err(format!(
                    "line {at}: starts with neither ` `, `-`, `+`, `@@`, `--- ` nor `#`: {line}"
                ))
            }
        }
    }
    for f in &files {
        for (k, hunk) in f.hunks.iter().enumerate() {
            if hunk.find.is_empty() {
                return Err(format!(
                    "{}: hunk {}: nothing to find; add a context line to say where",
                    f.file,
                    k + 1
                ));
            }
        }
    }
    if files.is_empty() {
        return Err("no `--- FILE`: the edit changes nothing".into());
    }
    Ok(files)
}

/// Applies hunks in order to `text`: each hunk's lines must occur exactly
/// once, whole and consecutive, in the text as the hunks before left it.
fn apply(hunks: &[Hunk], text: &str) -> Result<String, String> {
    let (body, newline) = match text.strip_suffix('\n') {
        Some(body) => (body, true),
        None => (text, false),
    };
    let mut lines: Vec<String> = body.split('\n').map(str::to_owned).collect();
    for (k, hunk) in hunks.iter().enumerate() {
        let n = hunk.find.len();
        let found: Vec<usize> = (0..lines.len())
            .filter(|&i| lines.get(i..i + n) == Some(hunk.find.as_slice()))
            .collect();
        let shown = || {
            hunk.find
                .iter()
                .map(|l| format!("    |{l}"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        match found.as_slice() {
            [at] => {
                lines.splice(*at..*at + n, hunk.put.iter().cloned());
            }
            [] => {
                return Err(format!(
                    "hunk {}: these lines are not in the file:\n{}",
                    k + 1,
                    shown()
                ))
            }
            many => {
                return Err(format!(
                    "hunk {}: these lines occur {} times (at lines {}); add a context line:\n{}",
                    k + 1,
                    many.len(),
                    many.iter()
                        .map(|i| (i + 1).to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                    shown()
                ))
            }
        }
    }
    let mut out = lines.join("\n");
    if newline {
        out.push('\n');
    }
    Ok(out)
}

/// The starter's project files, with `edit` (the text of `CODE.edit`)
/// applied, in a new temporary directory; an error names the case and,
/// when the edit no longer applies, the lines it did not find.
fn edited_starter(code: &str, edit: &str) -> Result<tempfile::TempDir, String> {
    let edits = parse_edit(edit).map_err(|e| format!("{code}.edit: {e}"))?;
    let tmp = tempfile::tempdir().map_err(|e| format!("{code}: temporary directory: {e}"))?;
    for file in PROJECT_FILES {
        let base = std::fs::read_to_string(starter_dir().join(file))
            .map_err(|e| format!("{code}: cannot read {STARTER}/{file}: {e}"))?;
        let edited = match edits.iter().find(|f| f.file == file) {
            Some(edit) => apply(&edit.hunks, &base)
                .map_err(|e| format!("{code}.edit no longer applies to {STARTER}/{file}: {e}"))?,
            None => base,
        };
        std::fs::write(tmp.path().join(file), edited)
            .map_err(|e| format!("{code}: cannot write {file}: {e}"))?;
    }
    Ok(tmp)
}

/// The project of a case: its own directory `CODE/`, or the starter edited
/// by `CODE.edit` in a temporary directory, removed when the returned guard
/// drops. The starter itself is never written.
fn project(code: &str) -> (PathBuf, Option<tempfile::TempDir>) {
    let dir = cases_dir().join(code);
    let edit = cases_dir().join(format!("{code}.edit"));
    match (dir.is_dir(), edit.is_file()) {
        (true, false) => (dir, None),
        (false, true) => {
            let text = std::fs::read_to_string(&edit)
                .unwrap_or_else(|e| panic!("{code}: cannot read {}: {e}", edit.display()));
            let tmp = edited_starter(code, &text).unwrap_or_else(|e| panic!("{e}"));
            (tmp.path().to_path_buf(), Some(tmp))
        }
        (true, true) => panic!("{code}: both {code}/ and {code}.edit exist; keep one"),
        (false, false) => panic!("{code}: no case (neither {code}/ nor {code}.edit)"),
    }
}

fn fixture(code: &str) {
    let (dir, _tmp) = project(code);
    let compiled = coordinator_compiler::compile_project(&dir, "fixture");
    let mut out = String::new();
    for file in PROJECT_FILES {
        if let Ok(text) = std::fs::read_to_string(dir.join(file)) {
            out.push_str(&format!("--- fixture/{file}\n{text}"));
        }
    }
    out.push_str("--- diagnostics\n");
    out.push_str(&diagnostic::render_text(&compiled.diagnostics));
    out.push_str(&diagnostic::summary_line(&compiled.diagnostics));
    out.push('\n');
    assert!(
        compiled.diagnostics.iter().any(|d| d.code == code),
        "{code} not reported:\n{out}"
    );
    if compiled
        .diagnostics
        .iter()
        .any(|d| d.code == code && d.is_error())
    {
        assert!(
            compiled.program.is_none(),
            "{code}: a refused project has no Program"
        );
    }
    insta::assert_snapshot!(code, out);
}

/// The code of an entry of golden/diagnostics/: `CODE.edit` or `CODE/`;
/// `None` for the README; an error for anything else.
fn case_code(path: &Path) -> Result<Option<String>, String> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name == "README.md" {
        Ok(None)
    } else if path.is_dir() {
        Ok(Some(name))
    } else if let Some(code) = name.strip_suffix(".edit") {
        Ok(Some(code.to_owned()))
    } else {
        Err(format!(
            "golden/diagnostics/{name}: a case is CODE.edit or a directory CODE/"
        ))
    }
}

macro_rules! fixtures {
    ($($name:ident => $code:literal,)*) => {
        $(
            #[test]
            fn $name() {
                fixture($code);
            }
        )*

        /// Every case under golden/diagnostics/ has a test above (and each
        /// test above finds its case, or fails naming it).
        #[test]
        fn every_case_has_a_test() {
            let listed = [$($code),*];
            for entry in std::fs::read_dir(cases_dir()).expect("diagnostics dir").flatten() {
                let code = case_code(&entry.path()).unwrap_or_else(|e| panic!("{e}"));
                if let Some(code) = code {
                    assert!(listed.contains(&code.as_str()), "no test for case {code}");
                }
            }
        }
    };
}

fixtures! {
    call__declared_refusal => "coordinator.call.declared-refusal",
    choose__labels => "coordinator.choose.labels",
    function__argument_required => "coordinator.function.argument-required",
    function__entrypoint => "coordinator.function.entrypoint",
    function__parameters => "coordinator.function.parameters",
    function__source => "coordinator.function.source",
    function__syntax => "coordinator.function.syntax",
    function__unknown => "coordinator.function.unknown",
    function__unknown_argument => "coordinator.function.unknown-argument",
    graph__cycle => "coordinator.graph.cycle",
    graph__no_finish => "coordinator.graph.no-finish",
    graph__unreachable => "coordinator.graph.unreachable",
    limit__fields => "coordinator.limit.fields",
    limit__function_inputs => "coordinator.limit.function-inputs",
    limit__steps => "coordinator.limit.steps",
    mapping__context => "coordinator.mapping.context",
    mapping__fit_unchecked => "coordinator.mapping.fit-unchecked",
    mapping__path => "coordinator.mapping.path",
    mapping__path_unchecked => "coordinator.mapping.path-unchecked",
    mapping__pointer => "coordinator.mapping.pointer",
    mapping__step_kind => "coordinator.mapping.step-kind",
    mapping__step_not_completed => "coordinator.mapping.step-not-completed",
    mapping__type => "coordinator.mapping.type",
    mapping__unknown_step => "coordinator.mapping.unknown-step",
    name__invalid => "coordinator.name.invalid",
    operation__action_not_allowed => "coordinator.operation.action-not-allowed",
    operation__action_required => "coordinator.operation.action-required",
    operation__proposal_action => "coordinator.operation.proposal-action",
    operation__unknown => "coordinator.operation.unknown",
    operation__unknown_alias => "coordinator.operation.unknown-alias",
    outcome__null_output => "coordinator.outcome.null-output",
    outcome__unknown => "coordinator.outcome.unknown",
    outcome__unused => "coordinator.outcome.unused",
    project__api_version => "coordinator.project.api-version",
    project__header => "coordinator.project.header",
    project__kind => "coordinator.project.kind",
    schema__format => "coordinator.schema.format",
    schema__invalid => "coordinator.schema.invalid",
    schema__ref => "coordinator.schema.ref",
    schema__unknown_keyword => "coordinator.schema.unknown-keyword",
    step__unknown => "coordinator.step.unknown",
    trigger__event_type => "coordinator.trigger.event-type",
    type__no_completion => "coordinator.type.no-completion",
    type__reference_kind => "coordinator.type.reference-kind",
    type__unknown => "coordinator.type.unknown",
    wait_for__completion => "coordinator.wait-for.completion",
    wait_for__dominance => "coordinator.wait-for.dominance",
    wait_for__step => "coordinator.wait-for.step",
    wait_for__timeout => "coordinator.wait-for.timeout",
    wait_until__instant => "coordinator.wait-until.instant",
    workflow__deadline => "coordinator.workflow.deadline",
    yaml__anchor => "coordinator.yaml.anchor",
    yaml__duplicate_key => "coordinator.yaml.duplicate-key",
    yaml__missing_key => "coordinator.yaml.missing-key",
    yaml__syntax => "coordinator.yaml.syntax",
    yaml__tag => "coordinator.yaml.tag",
    yaml__too_deep => "coordinator.yaml.too-deep",
    yaml__unknown_key => "coordinator.yaml.unknown-key",
    yaml__unknown_value => "coordinator.yaml.unknown-value",
    yaml__wrong_type => "coordinator.yaml.wrong-type",
}

// The edit format itself.

#[test]
fn an_edit_replaces_inserts_and_deletes_lines() {
    let edit = "# a comment\n--- workflow.yaml\n-b\n+B  # error: here\n@@\n c\n+c2\n@@\n-e\n";
    let edits = parse_edit(edit).expect("parses");
    let [only] = edits.as_slice() else {
        panic!("one file: {edits:?}")
    };
    assert_eq!(only.file, "workflow.yaml");
    assert_eq!(
        apply(&only.hunks, "a\nb\nc\nd\ne\n").as_deref(),
        Ok("a\nB  # error: here\nc\nc2\nd\n")
    );
}

#[test]
fn an_edit_whose_lines_are_gone_fails_naming_the_case_and_the_lines() {
    let edit = "--- workflow.yaml\n-  start: nowhere\n+  start: due\n";
    let err = edited_starter("coordinator.example.case", edit).expect_err("must not apply");
    assert!(
        err.contains("coordinator.example.case.edit no longer applies")
            && err.contains("examples/delayed-follow-up/workflow.yaml")
            && err.contains("not in the file")
            && err.contains("|  start: nowhere"),
        "{err}"
    );
}

#[test]
fn an_edit_whose_lines_occur_twice_fails() {
    let edit = "--- workflow.yaml\n-      type: finish\n+      type: call\n";
    let err = edited_starter("coordinator.example.case", edit).expect_err("ambiguous");
    assert!(
        err.contains("coordinator.example.case.edit") && err.contains("occur 2 times"),
        "{err}"
    );
}

#[test]
fn a_malformed_edit_is_refused() {
    for (edit, says) in [
        ("-a\n", "expected `--- FILE`"),
        ("--- runtime.yaml\n-a\n", "not a project file"),
        ("--- workflow.yaml\n+a\n", "nothing to find"),
        ("--- workflow.yaml\n*a\n", "starts with neither"),
        ("--- workflow.yaml\n-a\n--- workflow.yaml\n-b\n", "a second"),
        ("# only a comment\n", "changes nothing"),
    ] {
        let err = parse_edit(edit).expect_err(edit);
        assert!(err.contains(says), "{edit:?}: {err}");
    }
}
