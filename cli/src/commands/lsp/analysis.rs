//! What the language server knows about a project: the open documents and
//! the checks of `check` run on their unsaved texts (the other files from
//! disk), published at protocol positions ([`super::position`]).
//!
//! The checks are the compiler's own ([`coordinator_compiler::compile_project_with`]),
//! the runtime file's template check against the compiled Program (as
//! `check --runtime-config runtime.yaml`), and the scenario file's reading
//! against the Program (what `test` checks before it runs a case). When
//! the scenarios read cleanly their cases are run too, and each step no
//! case reaches gets a hint in `workflow.yaml` ([`super::hints`]).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use coordinator_source::{diagnostic, Diagnostic, Severity, YamlDocument};
use lsp_types::{CodeDescription, DiagnosticSeverity, NumberOrString, Range, Uri};

use super::position::to_lsp_position;

/// The project files the server checks, in the order they are published.
pub const PROJECT_FILES: [&str; 4] = [
    coordinator_compiler::WORKFLOW_FILE,
    coordinator_compiler::FUNCTIONS_FILE,
    "runtime.yaml",
    "scenarios.yaml",
];

/// An open document: its text as the editor holds it.
#[derive(Clone, Debug)]
pub struct Document {
    pub text: String,
    pub version: i32,
}

/// The open documents, by file path.
#[derive(Default)]
pub struct Documents {
    open: HashMap<PathBuf, Document>,
}

impl Documents {
    /// Opens or replaces a document.
    pub fn set(&mut self, path: PathBuf, doc: Document) {
        self.open.insert(path, doc);
    }

    /// Closes a document (its file is read from disk again).
    pub fn close(&mut self, path: &Path) {
        self.open.remove(path);
    }

    /// An open document.
    pub fn get(&self, path: &Path) -> Option<&Document> {
        self.open.get(path)
    }

    /// The text of `path`: the open document's, else the file's on disk.
    pub fn text(&self, path: &Path) -> Option<String> {
        match self.open.get(path) {
            Some(d) => Some(d.text.clone()),
            None => coordinator_source::read_file(
                path,
                &path.display().to_string(),
                coordinator_source::yaml::MAX_FILE_BYTES,
            )
            .ok(),
        }
    }
}

/// The file path of a `file:` URI, when it names one of [`PROJECT_FILES`]:
/// the project directory and the file's name.
pub fn project_file(uri: &Uri) -> Option<(PathBuf, &'static str)> {
    let path = path_of(uri)?;
    let name = path.file_name()?.to_str()?;
    let name = PROJECT_FILES.into_iter().find(|f| *f == name)?;
    Some((path.parent()?.to_path_buf(), name))
}

/// The file path of a `file:` URI.
pub fn path_of(uri: &Uri) -> Option<PathBuf> {
    url::Url::parse(uri.as_str()).ok()?.to_file_path().ok()
}

/// The `file:` URI of a path.
pub fn uri_of(path: &Path) -> Option<Uri> {
    let url = url::Url::from_file_path(path).ok()?;
    Uri::from_str(url.as_str()).ok()
}

/// The diagnostics of one file of a project, ready to publish.
pub struct FileDiagnostics {
    pub uri: Uri,
    pub version: Option<i32>,
    pub diagnostics: Vec<lsp_types::Diagnostic>,
}

/// Where the error pages (`docs/errors/<code>.md`) are: a directory found
/// once per server.
pub struct ErrorPages {
    dir: Option<PathBuf>,
}

impl ErrorPages {
    /// `explicit` (the client's `initializationOptions.errorPages`, or
    /// `COORDINATOR_ERROR_PAGES`) when given; otherwise the first
    /// `docs/errors` with a `README.md` above the executable (a build of
    /// this repository) or above `start` (a project inside a checkout).
    pub fn find(explicit: Option<PathBuf>, start: Option<&Path>) -> Self {
        if explicit.is_some() {
            return ErrorPages { dir: explicit };
        }
        let exe = std::env::current_exe().ok();
        let found = [exe.as_deref(), start]
            .into_iter()
            .flatten()
            .flat_map(Path::ancestors)
            .map(|a| a.join("docs/errors"))
            .find(|d| d.join("README.md").is_file());
        ErrorPages { dir: found }
    }

    /// The page of `code`, as a `file:` URI.
    pub fn page(&self, code: &str) -> Option<Uri> {
        let page = self.dir.as_ref()?.join(format!("{code}.md"));
        uri_of(&page)
    }
}

/// Runs the checks of the project in `dir` on the open texts and the files
/// on disk; returns the diagnostics of each of its files that exists or is
/// open (an empty list clears what was published before).
pub fn check_project(dir: &Path, docs: &Documents, pages: &ErrorPages) -> Vec<FileDiagnostics> {
    let unsaved = |name: &str| docs.get(&dir.join(name)).map(|d| d.text.clone());
    let compiled = coordinator_compiler::compile_project_with(dir, "", &unsaved);
    let mut found: BTreeMap<String, Vec<Diagnostic>> = BTreeMap::new();
    for d in compiled.diagnostics {
        found.entry(d.file.clone()).or_default().push(d);
    }
    let mut texts: HashMap<&str, (String, Option<YamlDocument>)> = HashMap::new();
    let mut hints = Vec::new();
    for name in ["runtime.yaml", "scenarios.yaml"] {
        let Some(text) = docs.text(&dir.join(name)) else {
            continue;
        };
        let doc = match coordinator_source::parse(name, &text) {
            Ok(doc) => doc,
            Err(d) => {
                found.entry(name.into()).or_default().push(d);
                texts.insert(name, (text, None));
                continue;
            }
        };
        let diags = if name == "runtime.yaml" {
            coordinator_runtime::check_runtime(
                &doc,
                compiled.program.as_ref(),
                coordinator_runtime::Mode::Template,
            )
            .diagnostics
        } else {
            match &compiled.program {
                // Display names relative to the project, as the compiler's.
                Some(program) => {
                    match crate::commands::test::check_scenarios(dir, "", &doc, program) {
                        Ok((scenarios, targets)) => {
                            let workflow = docs
                                .text(&dir.join(coordinator_compiler::WORKFLOW_FILE))
                                .unwrap_or_default();
                            if let Some(ir) = &compiled.explain_data {
                                hints = super::hints::unreached_steps(
                                    program, ir, &doc, &scenarios, &targets, &workflow,
                                );
                            }
                            Vec::new()
                        }
                        Err(diags) => diags,
                    }
                }
                // Without a Program the scenarios cannot be checked
                // against it; only their reading as YAML is.
                None => Vec::new(),
            }
        };
        found.entry(name.into()).or_default().extend(diags);
        texts.insert(name, (text, Some(doc)));
    }
    let mut out = Vec::new();
    for name in PROJECT_FILES {
        let path = dir.join(name);
        let open = docs.get(&path);
        let diags = found.remove(name).unwrap_or_default();
        if open.is_none() && diags.is_empty() && !path.is_file() {
            continue;
        }
        let Some(uri) = uri_of(&path) else { continue };
        let (text, doc) = match texts.remove(name) {
            Some((t, d)) => (t, d),
            None => {
                let text = docs.text(&path).unwrap_or_default();
                let doc = name
                    .ends_with(".yaml")
                    .then(|| coordinator_source::parse(name, &text).ok())
                    .flatten();
                (text, doc)
            }
        };
        let mut diagnostics: Vec<lsp_types::Diagnostic> = diags
            .iter()
            .map(|d| to_lsp(d, &text, doc.as_ref(), pages))
            .collect();
        if name == coordinator_compiler::WORKFLOW_FILE {
            diagnostics.append(&mut hints);
        }
        out.push(FileDiagnostics {
            uri,
            version: open.map(|d| d.version),
            diagnostics,
        });
    }
    // A diagnostic naming a file outside the four (none do today) is not lost.
    for (name, diags) in found {
        let path = dir.join(&name);
        let Some(uri) = uri_of(&path) else { continue };
        let text = docs.text(&path).unwrap_or_default();
        out.push(FileDiagnostics {
            uri,
            version: None,
            diagnostics: diags
                .iter()
                .map(|d| to_lsp(d, &text, None, pages))
                .collect(),
        });
    }
    out
}

/// A diagnostic in the protocol's terms: the stretch `check --format rich`
/// marks, the code with its page, the message with the `next:` repair.
pub fn to_lsp(
    d: &Diagnostic,
    text: &str,
    doc: Option<&YamlDocument>,
    pages: &ErrorPages,
) -> lsp_types::Diagnostic {
    let range = diagnostic::mark(d, text, doc)
        .map(|(start, end)| Range {
            start: to_lsp_position(text, start),
            end: to_lsp_position(text, end),
        })
        .unwrap_or_default();
    lsp_types::Diagnostic {
        range,
        severity: Some(match d.severity {
            Severity::Error => DiagnosticSeverity::ERROR,
            Severity::Warning => DiagnosticSeverity::WARNING,
        }),
        code: Some(NumberOrString::String(d.code.clone())),
        code_description: pages.page(&d.code).map(|href| CodeDescription { href }),
        source: Some("coordinatorctl".into()),
        message: format!("{}\nnext: {}", d.message, d.next),
        related_information: None,
        tags: None,
        data: Some(serde_json::json!({"pointer": d.pointer, "next": d.next})),
    }
}
