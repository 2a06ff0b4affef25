//! `coordinatorctl test --project D [--case ID] [--format text|json]`: runs
//! the project's scenarios on a virtual clock (SPEC §7).
//!
//! Prints `PASS id` / `FAIL id` (with the first difference) per case, then
//! `N passed, M failed`. Exit 0 when every case passes, 1 on any failure or
//! on a fault of the project or the scenario file, 3 when a file is missing.

use std::path::{Path, PathBuf};

use clap::Args;
use coordinator_ir::Program;
use coordinator_scenario::{file, run};
use coordinator_source::{Diagnostic, YamlDocument};
use serde::Serialize;

use crate::codes;
use crate::report::{self, EXIT_OK, EXIT_REFUSED};
use crate::Format;

/// Arguments of `test`.
#[derive(Args, Debug)]
pub struct TestArgs {
    /// The project directory.
    #[arg(long, value_name = "DIR")]
    pub project: PathBuf,
    /// Run only the case with this id.
    #[arg(long = "case", value_name = "ID")]
    pub case: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// The scenarios of a compiled project, all run.
pub struct ScenarioRun {
    pub reports: Vec<run::CaseReport>,
    pub diagnostics: Vec<Diagnostic>,
}

impl ScenarioRun {
    /// Whether every case ran and passed.
    pub fn all_passed(&self) -> bool {
        !self.diagnostics.iter().any(Diagnostic::is_error) && self.reports.iter().all(|r| r.passed)
    }
}

/// Compiles the project and runs its scenarios (only `only` when given).
/// Returns the Program (when it compiled) with the run.
pub fn compile_and_run(project: &Path, only: Option<&str>) -> (Option<Program>, ScenarioRun) {
    let display = project.display().to_string();
    let compiled = coordinator_compiler::compile_project(project, &display);
    let mut diagnostics = compiled.diagnostics;
    let Some(program) = compiled.program else {
        return (
            None,
            ScenarioRun {
                reports: Vec::new(),
                diagnostics,
            },
        );
    };
    let reports = match read_scenarios(project, &display, &program) {
        Ok((doc, scenarios)) => run_cases(&program, &doc, &scenarios, only, &mut diagnostics),
        Err(mut d) => {
            diagnostics.append(&mut d);
            Vec::new()
        }
    };
    (
        Some(program),
        ScenarioRun {
            reports,
            diagnostics,
        },
    )
}

fn display_join(display_dir: &str, name: &str) -> String {
    Path::new(display_dir).join(name).display().to_string()
}

fn read_scenarios(
    project: &Path,
    display: &str,
    program: &Program,
) -> Result<(YamlDocument, file::ScenarioFile), Vec<Diagnostic>> {
    let shown = display_join(display, "scenarios.yaml");
    let text = coordinator_source::read_file(
        &project.join("scenarios.yaml"),
        &shown,
        coordinator_source::yaml::MAX_FILE_BYTES,
    )
    .map_err(|e| vec![e.diagnostic().clone()])?;
    let doc = coordinator_source::parse(&shown, &text).map_err(|d| vec![d])?;
    let scenarios = file::read(&doc, program)?;
    Ok((doc, scenarios))
}

fn run_cases(
    program: &Program,
    doc: &YamlDocument,
    scenarios: &file::ScenarioFile,
    only: Option<&str>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<run::CaseReport> {
    let vm = match run::load_vm(program, &doc.file) {
        Ok(vm) => vm,
        Err(d) => {
            diagnostics.push(d);
            return Vec::new();
        }
    };
    let mut reports = Vec::new();
    for (i, case) in scenarios.cases.iter().enumerate() {
        if only.is_some_and(|id| id != case.id) {
            continue;
        }
        match run::run_case(&vm, doc, i, case) {
            Ok(r) => reports.push(r),
            Err(mut d) => diagnostics.append(&mut d),
        }
    }
    if let Some(id) = only {
        if !scenarios.cases.iter().any(|c| c.id == id) {
            diagnostics.push(Diagnostic::error(
                codes::SCENARIO_UNKNOWN_CASE,
                doc.locate("/cases"),
                format!("no case has the id `{id}`"),
                "Name a case id of scenarios.yaml, or omit --case.",
            ));
        }
    }
    reports
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TestExtra<'a> {
    passed: usize,
    failed: usize,
    cases: &'a [run::CaseReport],
}

/// Runs `test`; returns the exit code.
pub fn run(args: TestArgs) -> u8 {
    let (_, outcome) = compile_and_run(&args.project, args.case.as_deref());
    let passed = outcome.reports.iter().filter(|r| r.passed).count();
    let failed = outcome.reports.len() - passed;
    let code = match report::exit_code(&outcome.diagnostics) {
        EXIT_OK if failed > 0 => EXIT_REFUSED,
        c => c,
    };
    match args.format {
        Format::Json => {
            report::print_json(
                "test",
                code == EXIT_OK,
                if code == EXIT_OK { "passed" } else { "failed" },
                &outcome.diagnostics,
                TestExtra {
                    passed,
                    failed,
                    cases: &outcome.reports,
                },
            );
        }
        Format::Text => {
            report::print_diagnostics(&outcome.diagnostics);
            for r in &outcome.reports {
                if r.passed {
                    outln!("PASS {}", r.id);
                } else {
                    outln!("FAIL {}", r.id);
                    if let Some(d) = &r.difference {
                        outln!("  {d}");
                    }
                    if let (Some(code), Some(detail)) = (&r.failure, &r.failure_detail) {
                        outln!("  the run failed {code} at {detail}");
                    }
                }
            }
            if !outcome.reports.is_empty() || outcome.diagnostics.is_empty() {
                outln!("{passed} passed, {failed} failed");
            }
        }
    }
    code
}
