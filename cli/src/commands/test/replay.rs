//! `test --cases FILE_OR_DIR...`: scenario cases kept outside the project
//! (cases `scenario export` wrote from real runs) run beside
//! `scenarios.yaml` on the project's Program (docs/scenarios.md "Replaying
//! exported cases in CI"). A file holds one case or a scenarios document;
//! a directory is read recursively for `*.yaml` and `*.yml`, in name
//! order.
//!
//! A case whose steps, outcomes or calls this revision no longer has, or
//! whose run goes otherwise, is a [`Difference`]: what the run did then
//! (its `expect`), what this revision does now, and the last step both
//! share. Faults of a file itself (YAML, header, duplicate ids) are
//! diagnostics; a path that is missing or holds no case is
//! `coordinator.test.cases`.

use std::path::{Path, PathBuf};

use coordinator_ir::Program;
use coordinator_scenario::file::{
    self, Case, ExpectedOutcome, SCENARIOS_API_VERSION, SCENARIOS_KIND,
};
use coordinator_scenario::run::{self, CaseReport};
use coordinator_source::{Diagnostic, YamlDocument};
use serde::Serialize;
use serde_json::json;

use crate::codes;

/// One replayed case.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Replayed {
    /// The file it came from, as given (joined under a directory).
    pub file: String,
    /// The case id.
    pub id: String,
    /// Whether it passed on this revision.
    pub passed: bool,
    /// How it differs, when it did not pass.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub difference: Option<Difference>,
}

/// How a replayed case's run differs from the run it was written from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Difference {
    /// What the run did then: its path, state and outcome.
    pub then: String,
    /// What this revision does now: its path, state and outcome, or why
    /// the case no longer runs (a step it names is gone, a call it reaches
    /// is not scripted).
    pub now: String,
    /// The last step of the run then that this revision's run also took,
    /// at the same place in its path; `null` when they share none.
    pub last_shared_step: Option<String>,
}

/// The cases under `paths` (only the one with id `only`, when given), run
/// on `program`; faults of the files go to `diagnostics`.
pub(crate) fn replay(
    paths: &[PathBuf],
    program: &Program,
    only: Option<&str>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<Replayed> {
    let mut out = Vec::new();
    for path in paths {
        match case_files(path) {
            Ok(files) if files.is_empty() => {
                diagnostics.push(about(path, "the directory holds no *.yaml file".into()))
            }
            Ok(files) => {
                for f in files {
                    out.extend(replay_file(&f, program, only, diagnostics));
                }
            }
            Err(d) => diagnostics.push(d),
        }
    }
    out
}

fn about(path: &Path, message: String) -> Diagnostic {
    crate::report::path_error(
        path,
        codes::TEST_CASES,
        message,
        "Give --cases a file holding one case or a scenarios document, or a directory of them.",
    )
}

/// `path` itself when it is a file; the `*.yaml` and `*.yml` files under
/// it, recursively (links to directories not followed), in name order,
/// when it is a directory.
fn case_files(path: &Path) -> Result<Vec<PathBuf>, Diagnostic> {
    let meta =
        std::fs::metadata(path).map_err(|e| about(path, format!("--cases cannot be read: {e}")))?;
    if meta.is_file() {
        return Ok(vec![path.to_owned()]);
    }
    let mut files = Vec::new();
    let mut dirs = vec![path.to_owned()];
    while let Some(dir) = dirs.pop() {
        let entries =
            std::fs::read_dir(&dir).map_err(|e| about(&dir, format!("cannot be listed: {e}")))?;
        for entry in entries {
            let entry = entry.map_err(|e| about(&dir, format!("cannot be listed: {e}")))?;
            let p = entry.path();
            // A link to a directory is not followed (a link to its own
            // parent would list the same cases again and again).
            let real_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if real_dir {
                dirs.push(p);
            } else if p.is_dir() {
                continue;
            } else if p.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                files.push(p);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Reads `path` as a scenarios document, or as one case placed in one.
fn read_cases(path: &Path) -> Result<YamlDocument, Diagnostic> {
    let shown = path.display().to_string();
    let text =
        coordinator_source::read_file(path, &shown, coordinator_source::yaml::MAX_FILE_BYTES)
            .map_err(|e| e.diagnostic().clone())?;
    let doc = coordinator_source::parse(&shown, &text)?;
    let is_document = doc.value.get("cases").is_some() || doc.value.get("apiVersion").is_some();
    if is_document {
        return Ok(doc);
    }
    if doc.value.get("id").is_none() {
        return Err(about(
            path,
            "neither a scenarios document (`apiVersion`, `kind`, `cases`) nor one case (`id`, `admittedAt`, `input`, `expect`)".into(),
        ));
    }
    let outer =
        json!({"apiVersion": SCENARIOS_API_VERSION, "kind": SCENARIOS_KIND, "cases": [null]});
    doc.placed_in(outer, "/cases/0")
        .ok_or_else(|| about(path, "cannot be read as one case".into()))
}

fn replay_file(
    path: &Path,
    program: &Program,
    only: Option<&str>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<Replayed> {
    let doc = match read_cases(path) {
        Ok(doc) => doc,
        Err(d) => {
            diagnostics.push(d);
            return Vec::new();
        }
    };
    let scenarios = match file::parse(&doc) {
        Ok(s) => s,
        Err(mut d) => {
            diagnostics.append(&mut d);
            return Vec::new();
        }
    };
    let vm = match run::load_vm(program, &doc.file) {
        Ok(vm) => vm,
        Err(d) => {
            diagnostics.push(d);
            return Vec::new();
        }
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let targets = super::moves::load_move_targets(dir, &dir.display().to_string(), &scenarios);
    let faults = file::check(&doc, &scenarios, program, &targets);
    // A fault inside a case is this revision's drift from the run (a step
    // it names is gone); any other is the file's own.
    let (mut own, per_case): (Vec<Diagnostic>, Vec<Diagnostic>) = faults
        .into_iter()
        .partition(|d| case_index(&d.pointer).is_none());
    if !own.is_empty() {
        diagnostics.append(&mut own);
        return Vec::new();
    }
    let mut out = Vec::new();
    for (i, case) in scenarios.cases.iter().enumerate() {
        if only.is_some_and(|id| id != case.id) {
            continue;
        }
        let drift: Vec<&Diagnostic> = per_case
            .iter()
            .filter(|d| case_index(&d.pointer) == Some(i))
            .collect();
        let result = if drift.is_empty() {
            run::run_case_with_moves(&vm, &targets, &doc, i, case)
        } else {
            Err(drift.into_iter().cloned().collect())
        };
        out.push(replayed(path, program, case, result));
    }
    out
}

/// The case number a pointer under `/cases/N/...` names.
fn case_index(pointer: &str) -> Option<usize> {
    let rest = pointer.strip_prefix("/cases/")?;
    rest.split('/')
        .next()?
        .parse()
        .ok()
        .filter(|_| rest.contains('/'))
}

fn replayed(
    path: &Path,
    program: &Program,
    case: &Case,
    result: Result<CaseReport, Vec<Diagnostic>>,
) -> Replayed {
    let difference = match result {
        Ok(report) if report.passed => None,
        Ok(report) => Some(Difference {
            then: then(case),
            now: format!(
                "path [{}], state {}, outcome {}",
                report.path.join(", "),
                report.state,
                report.outcome.as_deref().unwrap_or("none")
            ),
            last_shared_step: shared_prefix(&case.expect.path, &report.path),
        }),
        Err(faults) => {
            let mut said: Vec<String> = Vec::new();
            for d in &faults {
                let line = format!("{} ({})", d.message, d.code);
                if !said.contains(&line) {
                    said.push(line);
                }
            }
            let now = said.join("; ");
            // A case naming a step this revision lacks shares the steps of
            // its path that still exist, up to the first that does not; a
            // case refused before its first step (an input the revision
            // refuses, a repeated id) shares none.
            let unknown_step = faults
                .iter()
                .any(|d| d.code == coordinator_scenario::codes::SCENARIO_UNKNOWN_STEP);
            let existing: Vec<String> = case
                .expect
                .path
                .iter()
                .take_while(|s| unknown_step && program.step_id(s).is_some())
                .cloned()
                .collect();
            Some(Difference {
                then: then(case),
                now,
                last_shared_step: existing.last().cloned(),
            })
        }
    };
    Replayed {
        file: path.display().to_string(),
        id: case.id.clone(),
        passed: difference.is_none(),
        difference,
    }
}

fn then(case: &Case) -> String {
    let outcome = match &case.expect.outcome {
        ExpectedOutcome::Named { value } => value.as_str(),
        ExpectedOutcome::None => "none",
    };
    format!(
        "path [{}], state {}, outcome {outcome}",
        case.expect.path.join(", "),
        case.expect.state.as_str()
    )
}

/// The last step of the longest common prefix of the two paths.
fn shared_prefix(then: &[String], now: &[String]) -> Option<String> {
    then.iter()
        .zip(now)
        .take_while(|(a, b)| a == b)
        .last()
        .map(|(a, _)| a.clone())
}

/// The text lines of the replayed cases (`PASS`/`FAIL` with the
/// difference).
pub(crate) fn render_text(replayed: &[Replayed]) -> Vec<String> {
    let mut lines = Vec::new();
    for r in replayed {
        match &r.difference {
            None => lines.push(format!("PASS {} ({})", r.id, r.file)),
            Some(d) => {
                lines.push(format!("FAIL {} ({})", r.id, r.file));
                lines.push(format!("  then: {}", d.then));
                lines.push(format!("  now:  {}", d.now));
                lines.push(format!(
                    "  last shared step: {}",
                    d.last_shared_step.as_deref().unwrap_or("none")
                ));
            }
        }
    }
    lines
}
