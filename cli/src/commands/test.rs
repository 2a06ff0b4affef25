//! `coordinatorctl test --project D [--case ID] [--format text|json]
//! [--coverage] [--fail-under PERCENT] [--cases FILE_OR_DIR]...`: runs the
//! project's scenarios on a virtual clock (SPEC §7), and the cases in the
//! `--cases` files beside them ([`replay`]: cases exported from runs, each
//! failing one with its difference; counted with the others).
//!
//! Prints `PASS id` / `FAIL id` (with the first difference) per case, then
//! `N passed, M failed`, and `, K errors` when K cases were stopped by a
//! fault of the scenario file (each fault printed above as a diagnostic;
//! the JSON report counts `passed`, `failed` and `errors` always). Exit 0
//! when every case passes, 1 on any failure or on a fault of the project
//! or the scenario file, 3 when a file is missing.
//! With `--coverage` (or `--fail-under`), what the cases reached of the
//! workflow follows ([`coverage`], docs/coverage.md); exit 1 as well when
//! it is below `--fail-under`; 2 when `--fail-under` is not a percentage.

pub(crate) mod coverage;
pub mod moves;
pub mod replay;

use std::path::{Path, PathBuf};

use clap::Args;
use coordinator_compiler::explain_data::ExplainData;
use coordinator_ir::Program;
use coordinator_scenario::moves::MoveTargets;
use coordinator_scenario::{file, run};
use coordinator_source::{Diagnostic, YamlDocument};
use serde::Serialize;

use crate::codes;
use crate::report::{self, EXIT_OK, EXIT_REFUSED, EXIT_USAGE};
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
    /// Also report which steps, edges, outcomes and recovery paths the
    /// cases reached, and where each unreached one is in workflow.yaml
    /// (docs/coverage.md).
    #[arg(long)]
    pub coverage: bool,
    /// Exit 1 when the reached items (steps, edges, outcomes and recovery
    /// paths together) are below PERCENT of all of them (0 to 100;
    /// implies --coverage).
    #[arg(long = "fail-under", value_name = "PERCENT")]
    pub fail_under: Option<String>,
    /// Also run the cases in this file (one case or a scenarios document)
    /// or directory (its `*.yaml` files, recursively), such as cases
    /// `scenario export` wrote from runs; a case that differs on this
    /// revision fails with the difference (repeatable).
    #[arg(long = "cases", value_name = "FILE_OR_DIR")]
    pub cases: Vec<PathBuf>,
}

/// The scenarios of a compiled project, all run.
pub struct ScenarioRun {
    pub reports: Vec<run::CaseReport>,
    /// Cases selected to run that a fault of the scenario file stopped
    /// (their diagnostics are in `diagnostics`): neither passed nor failed.
    pub errors: usize,
    pub diagnostics: Vec<Diagnostic>,
    /// The compiled workflow as explain's data (when it compiled).
    pub explain: Option<ExplainData>,
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
                errors: 0,
                diagnostics,
                explain: None,
            },
        );
    };
    let (reports, errors) = match read_scenarios(project, &display, &program) {
        Ok((doc, scenarios, targets)) => {
            let selected = scenarios
                .cases
                .iter()
                .filter(|c| only.is_none_or(|id| id == c.id))
                .count();
            let reports = run_cases(&program, &doc, &scenarios, &targets, only, &mut diagnostics);
            let errors = selected.saturating_sub(reports.len());
            (reports, errors)
        }
        Err(mut d) => {
            diagnostics.append(&mut d);
            (Vec::new(), 0)
        }
    };
    (
        Some(program),
        ScenarioRun {
            reports,
            errors,
            diagnostics,
            explain: compiled.explain_data,
        },
    )
}

fn display_join(display_dir: &str, name: &str) -> String {
    Path::new(display_dir).join(name).display().to_string()
}

/// Reads `project`'s `scenarios.yaml` (shown under `display`), compiles
/// the projects its cases move to, and checks it against `program` and
/// them.
fn read_scenarios(
    project: &Path,
    display: &str,
    program: &Program,
) -> Result<(YamlDocument, file::ScenarioFile, MoveTargets), Vec<Diagnostic>> {
    let shown = display_join(display, "scenarios.yaml");
    let text = coordinator_source::read_file(
        &project.join("scenarios.yaml"),
        &shown,
        coordinator_source::yaml::MAX_FILE_BYTES,
    )
    .map_err(|e| vec![e.diagnostic().clone()])?;
    let doc = coordinator_source::parse(&shown, &text).map_err(|d| vec![d])?;
    let (scenarios, targets) = check_scenarios(project, display, &doc, program)?;
    Ok((doc, scenarios, targets))
}

/// Reads the scenarios document `doc` of the project in `dir` (shown as
/// `display_dir`), compiles the projects its cases move to, and checks it
/// against `program` and them: `test` and the language server read a
/// scenarios file here.
pub(crate) fn check_scenarios(
    dir: &Path,
    display_dir: &str,
    doc: &YamlDocument,
    program: &Program,
) -> Result<(file::ScenarioFile, MoveTargets), Vec<Diagnostic>> {
    let scenarios = file::parse(doc)?;
    let targets = moves::load_move_targets(dir, display_dir, &scenarios);
    let faults = file::check(doc, &scenarios, program, &targets);
    if faults.is_empty() {
        Ok((scenarios, targets))
    } else {
        Err(faults)
    }
}

/// Runs the cases of `scenarios` (read from `doc`) on `program`, moving
/// a case's run to its revision in `targets` when it has a `move`, only
/// case `only` when given; a case's faults and an unknown `only` go to
/// `diagnostics`. `test` and the language server's coverage hints run
/// cases here.
pub(crate) fn run_cases(
    program: &Program,
    doc: &YamlDocument,
    scenarios: &file::ScenarioFile,
    targets: &MoveTargets,
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
        match run::run_case_with_moves(&vm, targets, doc, i, case) {
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
                "Name a case id of scenarios.yaml or of the --cases files, or omit --case.",
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
    /// Cases a fault of the scenario file stopped.
    errors: usize,
    cases: &'a [run::CaseReport],
    /// Only with `--coverage` or `--fail-under`.
    #[serde(skip_serializing_if = "Option::is_none")]
    coverage: Option<&'a coverage::Coverage>,
    /// Only with `--cases`: the cases run from those files.
    #[serde(skip_serializing_if = "Option::is_none")]
    replayed: Option<&'a [replay::Replayed]>,
}

/// `--fail-under`'s value: a percentage from 0 to 100 (a decimal number
/// such as `80` or `92.5`), else a diagnostic on the flag.
fn fail_under(text: &str) -> Result<f64, Diagnostic> {
    match text.trim().parse::<f64>() {
        Ok(p) if p.is_finite() && (0.0..=100.0).contains(&p) => Ok(p),
        _ => Err(Diagnostic::error(
            codes::TEST_FAIL_UNDER,
            coordinator_source::Located {
                file: "--fail-under".into(),
                ..Default::default()
            },
            format!("`{text}` is not a percentage from 0 to 100"),
            "Give a number from 0 to 100, such as --fail-under 80.",
        )),
    }
}

/// The coverage of `outcome`'s cases, held to `threshold`; `None` when the
/// project did not compile.
fn coverage_of(
    project: &Path,
    outcome: &ScenarioRun,
    program: Option<&Program>,
    threshold: Option<f64>,
) -> Option<coverage::Coverage> {
    let (ir, program) = (outcome.explain.as_ref()?, program?);
    let display = project.display().to_string();
    let shown = display_join(&display, coordinator_compiler::WORKFLOW_FILE);
    // Positions only: the file compiled a moment ago; unreadable now, the
    // positions are 0.
    let doc = coordinator_source::read_file(
        &project.join(coordinator_compiler::WORKFLOW_FILE),
        &shown,
        coordinator_source::yaml::MAX_FILE_BYTES,
    )
    .ok()
    .and_then(|text| coordinator_source::parse(&shown, &text).ok());
    let workflow = coverage::workflow(ir, program, doc.as_ref(), &shown, &outcome.reports);
    Some(coverage::project(vec![workflow], threshold))
}

/// Runs `test`; returns the exit code.
pub fn run(args: TestArgs) -> u8 {
    let threshold = match args.fail_under.as_deref().map(fail_under).transpose() {
        Ok(t) => t,
        Err(d) => {
            let diagnostics = [d];
            match args.format {
                Format::Json => {
                    report::print_json("test", false, "failed", &diagnostics, serde_json::json!({}))
                }
                Format::Text => report::print_diagnostics(&diagnostics),
            }
            return EXIT_USAGE;
        }
    };
    let (program, mut outcome) = compile_and_run(&args.project, args.case.as_deref());
    let replayed = match (&program, args.cases.is_empty()) {
        (Some(p), false) => Some(replay::replay(
            &args.cases,
            p,
            args.case.as_deref(),
            &mut outcome.diagnostics,
        )),
        _ => None,
    };
    // `--case` names a case of scenarios.yaml or of `--cases`: found among
    // the replayed ones, it is no unknown case.
    if replayed.as_ref().is_some_and(|r| !r.is_empty()) && args.case.is_some() {
        outcome
            .diagnostics
            .retain(|d| d.code != codes::SCENARIO_UNKNOWN_CASE);
    }
    let replay_failed = replayed.iter().flatten().filter(|r| !r.passed).count();
    let coverage = (args.coverage || threshold.is_some())
        .then(|| coverage_of(&args.project, &outcome, program.as_ref(), threshold))
        .flatten();
    let passed = outcome.reports.iter().filter(|r| r.passed).count();
    let failed = outcome.reports.len() - passed + replay_failed;
    let passed = passed + replayed.iter().flatten().filter(|r| r.passed).count();
    let code = match report::exit_code(&outcome.diagnostics) {
        EXIT_OK if failed > 0 || coverage.as_ref().is_some_and(|c| c.below_fail_under) => {
            EXIT_REFUSED
        }
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
                    errors: outcome.errors,
                    cases: &outcome.reports,
                    coverage: coverage.as_ref(),
                    replayed: replayed.as_deref(),
                },
            );
        }
        Format::Text => {
            print_text(
                &outcome,
                replayed.as_deref().unwrap_or_default(),
                passed,
                failed,
            );
            if let Some(c) = &coverage {
                out!("{}", coverage::render_text(c));
            }
        }
    }
    code
}

fn print_text(outcome: &ScenarioRun, replayed: &[replay::Replayed], passed: usize, failed: usize) {
    report::print_diagnostics(&outcome.diagnostics);
    for r in &outcome.reports {
        if r.passed {
            outln!("PASS {}", r.id);
        } else {
            outln!("FAIL {}", r.id);
            for line in r.problem().lines() {
                outln!("  {line}");
            }
            if let (Some(m), None) = (&r.moved, &r.failure) {
                outln!(
                    "  the run moved at `{}` to {} (step `{}`)",
                    m.step,
                    m.project,
                    m.to
                );
            }
        }
    }
    for line in replay::render_text(replayed) {
        outln!("{line}");
    }
    if !outcome.reports.is_empty()
        || !replayed.is_empty()
        || outcome.errors > 0
        || outcome.diagnostics.is_empty()
    {
        match outcome.errors {
            0 => outln!("{passed} passed, {failed} failed"),
            1 => outln!("{passed} passed, {failed} failed, 1 error"),
            errors => outln!("{passed} passed, {failed} failed, {errors} errors"),
        }
    }
}
