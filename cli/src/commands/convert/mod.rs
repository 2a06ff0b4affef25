//! `coordinatorctl convert --from v1alpha1 --project OLD --output NEW
//! [--format json]`: translates a project of the earlier implementation's
//! format (v1alpha1) into this one (docs/convert.md).
//!
//! Reads OLD's `workflow.yaml`, its functions file, `scenarios.yaml` and
//! `runtime.yaml` (the last two optional) with the strict located reader;
//! converts each (`workflow.rs`, `scenarios.rs`, `runtime.rs`), writing
//! small Rhai wrappers where an older Function only needs its data
//! reshaped (`rhai_source.rs`); writes the four files into a new directory
//! beside NEW and renames it to NEW (nothing is left half-written), then
//! runs `test` on NEW and points each failing case at the Function to edit.
//! Every rule applied and every item left for a person is reported with
//! its place in OLD (`findings.rs`). Exit 0 when NEW was written (items for
//! a person and failing cases included), 1 when OLD is not a v1alpha1
//! project or NEW exists and is not empty, 3 when a file cannot be read or
//! written.

mod findings;
mod rhai_source;
mod runtime;
mod scenarios;
#[cfg(test)]
mod tests;
mod workflow;
mod write;
mod yaml_out;

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use coordinator_source::{Diagnostic, Located, YamlDocument};
use serde::Serialize;
use serde_json::Value;

use crate::codes;
use crate::report::{self, EXIT_OK, EXIT_REFUSED, EXIT_UNAVAILABLE};
use crate::Format;
use findings::{AppliedRule, Findings};

/// `apiVersion` of v1beta1 project files.
const PROJECT_API_VERSION: &str = "id.registrystack.org/formats/coordinator/project/v1beta1";
/// `apiVersion` of v1beta1 scenario files.
const SCENARIOS_API_VERSION: &str = "id.registrystack.org/formats/coordinator/scenarios/v1beta1";
/// `apiVersion` of v1beta1 runtime files.
const RUNTIME_API_VERSION: &str = "id.registrystack.org/formats/coordinator/runtime/v1beta1";

/// The formats `convert` reads.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum FromFormat {
    /// The earlier implementation's format (`.../v1alpha1`).
    V1alpha1,
}

/// Arguments of `convert`.
#[derive(Args, Debug)]
pub struct ConvertArgs {
    /// The format of the project to convert.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub from: FromFormat,
    /// The project directory to convert (OLD); read only.
    #[arg(long, value_name = "DIR")]
    pub project: PathBuf,
    /// The directory to write (NEW): must not exist, or be empty.
    #[arg(long, value_name = "DIR")]
    pub output: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// A v1alpha1 name as a v1beta1 name: `_` becomes `-`.
fn new_name(old: &str) -> String {
    old.replace('_', "-")
}

/// A JSON Pointer token for `name`.
fn escape(name: &str) -> String {
    coordinator_ir::pointer::escape_token(name)
}

/// NEW's four files, converted, with the findings.
struct Converted {
    files: Vec<(&'static str, String)>,
    findings: Findings,
    /// NEW Function declaration by NEW step, and each declaration's
    /// entrypoint, to point a failing case at what to edit.
    step_functions: std::collections::BTreeMap<String, Vec<String>>,
    entrypoints: std::collections::BTreeMap<String, String>,
}

/// One case of `test` on NEW, with the Function to edit when it failed.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CaseResult {
    id: String,
    passed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    problem: Option<String>,
    /// The NEW Function declaration of the last step the run reached that
    /// uses one, and its entrypoint in functions.rhai.
    #[serde(skip_serializing_if = "Option::is_none")]
    edit: Option<EditHint>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EditHint {
    step: String,
    function: String,
    entrypoint: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TestSummary {
    passed: usize,
    failed: usize,
    errors: usize,
    diagnostics: Vec<Diagnostic>,
    cases: Vec<CaseResult>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ConvertExtra<'a> {
    output: String,
    files: Vec<&'static str>,
    rules: &'a [AppliedRule],
    test: Option<TestSummary>,
}

/// Runs `convert`; returns the exit code.
pub fn run(args: ConvertArgs) -> u8 {
    let FromFormat::V1alpha1 = args.from;
    let converted =
        match write::refuse_existing(&args.output).and_then(|()| convert_project(&args.project)) {
            Ok(c) => c,
            Err((code, diagnostics)) => return refuse(&args, code, &diagnostics),
        };
    if let Err((code, diagnostics)) = write::write_whole(&args.output, &converted.files) {
        return refuse(&args, code, &diagnostics);
    }
    let summary = test_new(&args.output, &converted);
    let extra = ConvertExtra {
        output: args.output.display().to_string(),
        files: converted.files.iter().map(|(n, _)| *n).collect(),
        rules: &converted.findings.rules,
        test: Some(summary),
    };
    match args.format {
        Format::Json => report::print_json(
            "convert",
            true,
            "written",
            &converted.findings.people,
            &extra,
        ),
        Format::Text => print_text(&extra, &converted.findings.people),
    }
    EXIT_OK
}

fn refuse(args: &ConvertArgs, code: u8, diagnostics: &[Diagnostic]) -> u8 {
    match args.format {
        Format::Json => report::print_json(
            "convert",
            false,
            "refused",
            diagnostics,
            ConvertExtra {
                output: args.output.display().to_string(),
                files: Vec::new(),
                rules: &[],
                test: None,
            },
        ),
        Format::Text => report::print_diagnostics(diagnostics),
    }
    code
}

type Refusal = (u8, Vec<Diagnostic>);

/// Reads OLD's file `name`; `None` when it is optional and missing.
fn read_old(
    dir: &Path,
    name: &str,
    optional: bool,
    max: usize,
) -> Result<Option<(String, String)>, Refusal> {
    let path = dir.join(name);
    let display = path.display().to_string();
    if optional && !path.exists() {
        return Ok(None);
    }
    match coordinator_source::read_file(&path, &display, max) {
        Ok(text) => Ok(Some((display, text))),
        Err(coordinator_source::ReadError::Unavailable(d)) => Err((EXIT_UNAVAILABLE, vec![d])),
        Err(coordinator_source::ReadError::Refused(d)) => Err((EXIT_REFUSED, vec![d])),
    }
}

/// Parses an OLD YAML file and checks it is of the v1alpha1 `kind`.
fn parse_old(display: &str, text: &str, kind: &str) -> Result<YamlDocument, Refusal> {
    let doc = coordinator_source::parse(display, text).map_err(|d| (EXIT_REFUSED, vec![d]))?;
    let wanted = format!("id.registrystack.org/formats/coordinator/{kind}/v1alpha1");
    if doc.value.get("apiVersion").and_then(Value::as_str) != Some(wanted.as_str()) {
        let at = doc.locate("/apiVersion");
        return Err((
            EXIT_REFUSED,
            vec![Diagnostic::error(
                codes::CONVERT_NOT_V1ALPHA1,
                at,
                format!("the file is not a v1alpha1 {kind} file (`apiVersion` is not `{wanted}`)"),
                "Point --project at a project of the earlier format; a v1beta1 project needs no conversion.",
            )],
        ));
    }
    Ok(doc)
}

/// Refuses OLD when two of its steps, or two of its outcomes, have one
/// name once `_` is dropped ([`new_name`]): one would replace the other.
fn refuse_name_collisions(wf: &YamlDocument) -> Result<(), Refusal> {
    let mut diagnostics = Vec::new();
    for section in ["steps", "outcomes"] {
        let Some(Value::Object(names)) = wf.value.get(section) else {
            continue;
        };
        let mut seen: std::collections::BTreeMap<String, &str> = std::collections::BTreeMap::new();
        for old in names.keys() {
            let new = new_name(old);
            if let Some(first) = seen.insert(new.clone(), old) {
                diagnostics.push(Diagnostic::error(
                    codes::CONVERT_NAME_COLLISION,
                    wf.locate(&format!("/{section}/{}", escape(old))),
                    format!("`{first}` and `{old}` are both named `{new}` once `_` is dropped"),
                    "Rename one of them in OLD (and where it is named), then convert again.",
                ));
            }
        }
    }
    if diagnostics.is_empty() {
        Ok(())
    } else {
        Err((EXIT_REFUSED, diagnostics))
    }
}

fn convert_project(old: &Path) -> Result<Converted, Refusal> {
    let max = coordinator_source::yaml::MAX_FILE_BYTES;
    let Some((wf_display, wf_text)) = read_old(old, "workflow.yaml", false, max)? else {
        return Err((EXIT_UNAVAILABLE, Vec::new()));
    };
    let wf = parse_old(&wf_display, &wf_text, "project")?;
    refuse_name_collisions(&wf)?;
    let functions_file = wf
        .value
        .get("functionsFile")
        .and_then(Value::as_str)
        .unwrap_or("functions.rhai")
        .to_owned();
    let plain_name = {
        let mut parts = Path::new(&functions_file).components();
        matches!(
            (parts.next(), parts.next()),
            (Some(std::path::Component::Normal(_)), None)
        )
    };
    if !plain_name {
        return Err((
            EXIT_REFUSED,
            vec![Diagnostic::error(
                codes::CONVERT_FUNCTIONS_FILE,
                wf.locate("/functionsFile"),
                format!("`functionsFile` `{functions_file}` is not a file name in OLD's directory"),
                "Copy the Functions into OLD's directory and name that file, then convert again.",
            )],
        ));
    }
    let rhai_max = coordinator_compiler::functions::MAX_FUNCTION_SOURCE_BYTES;
    let Some((rhai_display, rhai_text)) = read_old(old, &functions_file, false, rhai_max)? else {
        return Err((EXIT_UNAVAILABLE, Vec::new()));
    };
    let mut rhai = rhai_source::RhaiSource::read(&rhai_display, rhai_text)
        .map_err(|d| (EXIT_REFUSED, vec![d]))?;
    let runtime_doc = match read_old(old, "runtime.yaml", true, max)? {
        Some((d, t)) => Some(parse_old(&d, &t, "runtime")?),
        None => None,
    };
    let scenarios_doc = match read_old(old, "scenarios.yaml", true, max)? {
        Some((d, t)) => Some(parse_old(&d, &t, "scenarios")?),
        None => None,
    };
    let mut findings = Findings::default();
    let runtime = runtime_doc
        .as_ref()
        .map(|d| runtime::convert(d, &mut findings));
    let empty = std::collections::BTreeMap::new();
    let response_types = runtime.as_ref().map_or(&empty, |r| &r.response_types);
    let mut converted = workflow::convert(&wf, &mut rhai, response_types, &mut findings);
    workflow::add_response_types(&mut converted.value, response_types);
    let scenarios = scenarios_doc.as_ref().map(|d| {
        let context = scenarios::ScenarioContext {
            steps: &converted.steps,
            old_source: &rhai.text,
        };
        scenarios::convert(d, &context, &mut findings)
    });
    let files = new_files(
        old,
        &wf,
        &converted.value,
        &rhai,
        scenarios.as_ref(),
        runtime.as_ref().map(|r| &r.value),
        &mut findings,
    );
    Ok(Converted {
        files,
        findings,
        step_functions: converted
            .steps
            .iter()
            .map(|(k, v)| (k.clone(), v.functions.clone()))
            .collect(),
        entrypoints: converted.entrypoints,
    })
}

fn new_files(
    old: &Path,
    wf: &YamlDocument,
    workflow: &Value,
    rhai: &rhai_source::RhaiSource,
    scenarios: Option<&Value>,
    runtime: Option<&Value>,
    findings: &mut Findings,
) -> Vec<(&'static str, String)> {
    let header = |kind: &str| {
        vec![
            format!("yaml-language-server: $schema=https://id.registrystack.org/schemas/coordinator/{kind}/{kind}.v1beta1.schema.json"),
            format!("Converted by `coordinatorctl convert --from v1alpha1` from {}.", old.display()),
        ]
    };
    let scenarios = scenarios.cloned().unwrap_or_else(|| {
        serde_json::json!({"apiVersion": SCENARIOS_API_VERSION, "kind": "CoordinatorScenarios", "cases": []})
    });
    let runtime = runtime.cloned().unwrap_or_else(|| {
        findings.person(
            codes::CONVERT_RUNTIME_SECTION,
            wf,
            "",
            "OLD has no runtime.yaml; NEW's runtime.yaml names no connection",
            "Write the connections the operations use in NEW's runtime.yaml (docs/runtime.md).",
        );
        let id = workflow
            .pointer("/project/id")
            .and_then(Value::as_str)
            .unwrap_or("converted");
        serde_json::json!({
            "apiVersion": RUNTIME_API_VERSION,
            "kind": "CoordinatorRuntimeConfig",
            "namespace": format!("coordinator_{}", id.replace('-', "_")),
            "connections": {},
        })
    });
    vec![
        (
            "workflow.yaml",
            yaml_out::to_yaml(&header("project"), workflow),
        ),
        ("functions.rhai", rhai.new_text()),
        (
            "scenarios.yaml",
            yaml_out::to_yaml(&header("scenarios"), &scenarios),
        ),
        (
            "runtime.yaml",
            yaml_out::to_yaml(&header("runtime"), &runtime),
        ),
    ]
}

/// Runs `test` on NEW and points each failing case at a Function.
fn test_new(new: &Path, converted: &Converted) -> TestSummary {
    let (_, run) = crate::commands::test::compile_and_run(new, None);
    let cases = run
        .reports
        .iter()
        .map(|r| CaseResult {
            id: r.id.clone(),
            passed: r.passed,
            problem: (!r.passed).then(|| r.problem()),
            edit: (!r.passed).then(|| edit_hint(&r.path, converted)).flatten(),
        })
        .collect::<Vec<_>>();
    let passed = cases.iter().filter(|c| c.passed).count();
    TestSummary {
        passed,
        failed: cases.len() - passed,
        errors: run.errors,
        diagnostics: run.diagnostics,
        cases,
    }
}

/// The last step of `path` that uses a Function, with that Function.
fn edit_hint(path: &[String], converted: &Converted) -> Option<EditHint> {
    path.iter().rev().find_map(|step| {
        let function = converted.step_functions.get(step)?.last()?.clone();
        Some(EditHint {
            step: step.clone(),
            entrypoint: converted
                .entrypoints
                .get(&function)
                .cloned()
                .unwrap_or_default(),
            function,
        })
    })
}

fn print_text(extra: &ConvertExtra<'_>, people: &[Diagnostic]) {
    outln!("wrote {} ({})", extra.output, extra.files.join(", "));
    out!("{}", findings::render_rules(extra.rules));
    report::print_diagnostics(people);
    if let Some(t) = &extra.test {
        outln!("test on {}:", extra.output);
        report::print_diagnostics(&t.diagnostics);
        for c in &t.cases {
            outln!("{} {}", if c.passed { "PASS" } else { "FAIL" }, c.id);
            for line in c.problem.iter().flat_map(|p| p.lines()) {
                outln!("  {line}");
            }
            if let Some(e) = &c.edit {
                outln!(
                    "  edit: Function `{}` (`fn {}` in {}/functions.rhai), used at step `{}`",
                    e.function,
                    e.entrypoint,
                    extra.output,
                    e.step
                );
            }
        }
        outln!("{} passed, {} failed", t.passed, t.failed);
    }
    outln!(
        "{} rules applied, {} items for a person",
        extra.rules.len(),
        people.len()
    );
}

/// Where a whole file is (for a diagnostic about a path, not a node).
fn whole(display: &str) -> Located {
    Located {
        file: display.to_owned(),
        line: 0,
        column: 0,
        pointer: String::new(),
    }
}
