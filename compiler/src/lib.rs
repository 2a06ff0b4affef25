//! `coordinator-compiler`: reads a workflow project (`workflow.yaml`,
//! `functions.rhai`), checks it (SPEC §2.3) and lowers it to a
//! [`coordinator_ir::Program`].
//!
//! Phases: strict YAML with positions ([`coordinator_source`]) → header →
//! typed AST ([`ast`]) → resolution and checks ([`check`]: names, limits,
//! types, operation aliases, Functions, the step graph, the must-dataflow of
//! step outputs, paths and schema fit) → lowering (canonical numbering) →
//! explain (text, and the typed data of [`explain_data`]). The compiler
//! never stops at the first finding: it returns every independent
//! diagnostic, sorted by position; only the CLI turns them into an exit
//! code. Every code it raises is a constant of [`codes`] (with the
//! `file.*` and `yaml.*` codes of `coordinator_source::codes`). Apart from [`compile_project`] and [`compile_project_with`],
//! nothing here does I/O.

#![deny(clippy::unwrap_used, clippy::indexing_slicing)]
#![warn(clippy::wildcard_enum_match_arm)]
// A Diagnostic is the cold path; boxing it would only add noise.
#![allow(clippy::result_large_err)]

pub mod ast;
pub mod check;
pub mod codes;
pub mod explain;
pub mod explain_data;
pub mod functions;
mod lower;
pub mod moves;
pub mod schema;

#[cfg(test)]
mod tests;

use std::path::Path;
use std::sync::Arc;

use coordinator_source::{diagnostic, Diagnostic, ReadError, YamlDocument};
use serde_json::Value;

pub use functions::{FunctionLimits, FUNCTION_LIMITS};

/// The project's workflow file name.
pub const WORKFLOW_FILE: &str = "workflow.yaml";
/// The project's Function source file name.
pub const FUNCTIONS_FILE: &str = "functions.rhai";

/// The result of compiling a project.
#[derive(Clone, Debug, Default)]
pub struct Compiled {
    /// The Program; `Some` only when there are no errors.
    pub program: Option<coordinator_ir::Program>,
    /// Every finding (errors and warnings), sorted by file position.
    pub diagnostics: Vec<Diagnostic>,
    /// `project.id`, when the file could be read that far.
    pub workflow: Option<String>,
    /// `project.version` (a label for people; not part of the revision).
    pub version: Option<String>,
    /// The explain text (`Steps from start:` and one line per step);
    /// `Some` only when there are no errors.
    pub explain: Option<String>,
    /// The typed IR as data ([`explain_data::ExplainData`], what
    /// `explain --format json` carries as `ir` and `graph` draws); `Some`
    /// only when there is a Program.
    pub explain_data: Option<explain_data::ExplainData>,
    /// What the checks read (the parsed file, its typed form, the
    /// Functions), kept for a check that starts from another revision's
    /// state ([`moves::plan_move`]); `None` when the file could not be read
    /// that far.
    pub(crate) analysis: Option<Arc<Analysis>>,
}

/// A project as the checks read it: `workflow.yaml` with the position of
/// every node, its typed form, the Functions `functions.rhai` defines
/// (`None` when it could not be read or parsed) and the implicit bindings
/// its own check made (what its Program binds each Function input omitted
/// under `arguments` to; a check resumed from another revision's state
/// keeps them).
#[derive(Debug)]
pub(crate) struct Analysis {
    pub doc: YamlDocument,
    pub project: ast::ProjectFile,
    pub script: Option<Vec<functions::ScriptFn>>,
    pub bindings: check::Bindings,
}

impl Compiled {
    /// Whether any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// The revision (`sha256:...`) of the Program, when there is one.
    pub fn revision(&self) -> Option<String> {
        self.program.as_ref().map(coordinator_ir::Program::revision)
    }

    fn refused(diags: Vec<Diagnostic>) -> Self {
        Compiled {
            diagnostics: diags,
            ..Compiled::default()
        }
    }
}

/// Joins the `--project` argument as typed with a file name, as diagnostics
/// print it (`follow-up/workflow.yaml`).
pub fn display_path(display_dir: &str, file: &str) -> String {
    if display_dir.is_empty() || display_dir == "." {
        file.to_owned()
    } else {
        format!("{}/{file}", display_dir.trim_end_matches('/'))
    }
}

/// Reads and compiles the project in `dir`. `display_dir` is the directory
/// as the user typed it; diagnostics name files relative to it. A missing or
/// unreadable file gives `coordinator.file.unreadable` (the CLI exits 3).
pub fn compile_project(dir: &Path, display_dir: &str) -> Compiled {
    compile_project_with(dir, display_dir, &|_| None)
}

/// Compiles the project in `dir` as [`compile_project`] does, except that a
/// file for which `unsaved` answers a text (given its name,
/// [`WORKFLOW_FILE`] or [`FUNCTIONS_FILE`]) is read from that text rather
/// than from disk: the language server's unsaved buffers. The checks are
/// the same; only where the text comes from differs. A leading byte order
/// mark is dropped, as from disk.
pub fn compile_project_with(
    dir: &Path,
    display_dir: &str,
    unsaved: &dyn Fn(&str) -> Option<String>,
) -> Compiled {
    let wf_display = display_path(display_dir, WORKFLOW_FILE);
    let text = match unsaved(WORKFLOW_FILE) {
        Some(t) => without_bom(t),
        None => match coordinator_source::read_file(
            &dir.join(WORKFLOW_FILE),
            &wf_display,
            coordinator_source::yaml::MAX_FILE_BYTES,
        ) {
            Ok(t) => t,
            Err(e) => return Compiled::refused(vec![read_diag(e)]),
        },
    };
    let fn_display = display_path(display_dir, FUNCTIONS_FILE);
    let fn_path = dir.join(FUNCTIONS_FILE);
    compile_with(display_dir, &text, &mut || match unsaved(FUNCTIONS_FILE) {
        Some(t) => functions_text(&fn_display, without_bom(t)),
        None => coordinator_source::read_file(
            &fn_path,
            &fn_display,
            functions::MAX_FUNCTION_SOURCE_BYTES,
        )
        .map_err(read_diag),
    })
}

fn without_bom(text: String) -> String {
    match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_owned(),
        None => text,
    }
}

/// The text of `functions.rhai` given in memory, refused as from disk when
/// it is larger than [`functions::MAX_FUNCTION_SOURCE_BYTES`].
fn functions_text(fn_display: &str, t: String) -> Result<String, Diagnostic> {
    if t.len() > functions::MAX_FUNCTION_SOURCE_BYTES {
        Err(Diagnostic::error(
            coordinator_source::codes::FILE_TOO_LARGE,
            coordinator_source::Located {
                file: fn_display.to_owned(),
                line: 1,
                column: 1,
                pointer: String::new(),
            },
            format!(
                "the file is {} bytes; at most {} bytes are accepted",
                t.len(),
                functions::MAX_FUNCTION_SOURCE_BYTES
            ),
            "Split or shorten the file.",
        ))
    } else {
        Ok(t)
    }
}

fn read_diag(e: ReadError) -> Diagnostic {
    match e {
        ReadError::Unavailable(d) | ReadError::Refused(d) => d,
    }
}

/// Compiles a project from text, without I/O: `functions` is the text of
/// `functions.rhai` (`None` when the project has none).
pub fn compile_sources(display_dir: &str, workflow: &str, functions: Option<&str>) -> Compiled {
    let fn_display = display_path(display_dir, FUNCTIONS_FILE);
    compile_with(display_dir, workflow, &mut || match functions {
        Some(t) => functions_text(&fn_display, t.to_owned()),
        None => Err(Diagnostic::error(
            coordinator_source::codes::FILE_UNREADABLE,
            coordinator_source::Located {
                file: fn_display.clone(),
                ..Default::default()
            },
            "cannot read the file: not found",
            "Check that the file exists and is readable.",
        )),
    })
}

fn header(doc: &YamlDocument) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let Value::Object(m) = &doc.value else {
        out.push(Diagnostic::error(
            codes::PROJECT_HEADER,
            doc.locate(""),
            format!(
                "expected a mapping with apiVersion {} and kind {}, found {}",
                ast::PROJECT_API_VERSION,
                ast::PROJECT_KIND,
                schema::json_kind(&doc.value)
            ),
            format!(
                "Start the file with `apiVersion: {}` and `kind: {}`.",
                ast::PROJECT_API_VERSION,
                ast::PROJECT_KIND
            ),
        ));
        return out;
    };
    match m.get("apiVersion") {
        Some(Value::String(v)) if v == ast::PROJECT_API_VERSION => {}
        Some(v) => out.push(Diagnostic::error(
            codes::PROJECT_API_VERSION,
            doc.locate("/apiVersion"),
            format!(
                "apiVersion {v} is not supported; this coordinatorctl reads {}",
                ast::PROJECT_API_VERSION
            ),
            format!(
                "Set `apiVersion: {}` and update the file to that format.",
                ast::PROJECT_API_VERSION
            ),
        )),
        None => out.push(Diagnostic::error(
            codes::PROJECT_API_VERSION,
            doc.locate(""),
            "the file has no apiVersion",
            format!(
                "Add `apiVersion: {}` as the first key.",
                ast::PROJECT_API_VERSION
            ),
        )),
    }
    match m.get("kind") {
        Some(Value::String(v)) if v == ast::PROJECT_KIND => {}
        Some(v) => out.push(Diagnostic::error(
            codes::PROJECT_KIND,
            doc.locate("/kind"),
            format!(
                "kind {v} is not a project; workflow.yaml holds kind {}",
                ast::PROJECT_KIND
            ),
            format!("Set `kind: {}`.", ast::PROJECT_KIND),
        )),
        None => out.push(Diagnostic::error(
            codes::PROJECT_KIND,
            doc.locate(""),
            "the file has no kind",
            format!("Add `kind: {}`.", ast::PROJECT_KIND),
        )),
    }
    out
}

fn typed(doc: &YamlDocument) -> Result<ast::ProjectFile, Diagnostic> {
    coordinator_source::yaml::read_typed(doc.value.clone())
        .map_err(|fault| doc.typed_diagnostic("", &fault))
}

fn compile_with(
    display_dir: &str,
    text: &str,
    read_functions: &mut dyn FnMut() -> Result<String, Diagnostic>,
) -> Compiled {
    let wf_display = display_path(display_dir, WORKFLOW_FILE);
    let doc = match coordinator_source::parse(&wf_display, text) {
        Ok(d) => d,
        Err(d) => return Compiled::refused(vec![d]),
    };
    let head = header(&doc);
    if !head.is_empty() {
        return Compiled::refused(head);
    }
    let project = match typed(&doc) {
        Ok(p) => p,
        Err(d) => return Compiled::refused(vec![d]),
    };
    let mut diags = Vec::new();
    let mut source = String::new();
    let script = if project.functions.is_empty() {
        Some(Vec::new())
    } else {
        match read_functions() {
            Ok(t) => {
                let fn_display = display_path(display_dir, FUNCTIONS_FILE);
                match functions::list_functions(&t, &fn_display) {
                    Ok(list) => {
                        source = t;
                        Some(list)
                    }
                    Err(d) => {
                        diags.push(d);
                        None
                    }
                }
            }
            Err(d) => {
                diags.push(d);
                None
            }
        }
    };
    let (checked, found) = check::Checker::new(&doc, &project, script.clone()).run();
    diags.extend(found);
    diagnostic::sort(&mut diags);
    let mut out = Compiled {
        program: None,
        workflow: Some(project.project.id.clone()),
        version: Some(project.project.version.clone()),
        explain: None,
        explain_data: None,
        diagnostics: diags,
        analysis: None,
    };
    if !out.has_errors() {
        out.program = lower::lower(&project, &checked, &source);
        out.explain = Some(explain::render(&project));
        out.explain_data = out
            .program
            .as_ref()
            .map(|program| explain_data::build(&project, &checked, program));
        if out.program.is_none() {
            out.diagnostics.push(Diagnostic::error(
                codes::COMPILER_INTERNAL,
                doc.locate(""),
                "the compiler could not lower this project although every check passed",
                "Report this as a bug, with the project attached.",
            ));
        }
    }
    out.analysis = Some(Arc::new(Analysis {
        doc,
        project,
        script,
        bindings: checked.bindings,
    }));
    out
}

/// The JSON Schema (draft 2020-12) of `workflow.yaml`, generated from the
/// types that read it ([`ast::ProjectFile`]).
pub fn project_schema() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
    let schema = generator.into_root_schema_for::<ast::ProjectFile>();
    let mut v = schema.to_value();
    if let Value::Object(m) = &mut v {
        m.insert("$id".into(), Value::String(ast::PROJECT_SCHEMA_ID.into()));
    }
    v
}
