//! Hints of what the scenarios never reach: each step of `workflow.yaml`
//! that no case of `scenarios.yaml` enters is marked at its name with a
//! hint (severity hint, no code: it refuses nothing). Computed as `test
//! --coverage` computes it (docs/coverage.md): the cases run by the
//! scenario host on the compiled Program, and only what the VM did counts.

use coordinator_compiler::explain_data::ExplainData;
use coordinator_ir::Program;
use coordinator_scenario::file::ScenarioFile;
use coordinator_scenario::moves::MoveTargets;
use coordinator_source::YamlDocument;
use lsp_types::{DiagnosticSeverity, Range};

use super::position::to_lsp_position;
use crate::commands::test::{coverage, run_cases};

/// The hints for the steps no case reaches, on `workflow` (the text of
/// `workflow.yaml` as compiled to `program`, with explain's data `ir`);
/// none when every step is reached. Cases that stop on a fault of the scenario
/// file count nothing (their faults are `test`'s to report).
pub fn unreached_steps(
    program: &Program,
    ir: &ExplainData,
    scenarios_doc: &YamlDocument,
    scenarios: &ScenarioFile,
    targets: &MoveTargets,
    workflow: &str,
) -> Vec<lsp_types::Diagnostic> {
    let Ok(doc) = coordinator_source::parse(coordinator_compiler::WORKFLOW_FILE, workflow) else {
        return Vec::new();
    };
    let mut faults = Vec::new();
    let reports = run_cases(
        program,
        scenarios_doc,
        scenarios,
        targets,
        None,
        &mut faults,
    );
    let found = coverage::workflow(ir, program, Some(&doc), &doc.file, &reports);
    found
        .items
        .iter()
        .filter(|i| i.kind == coverage::ItemKind::Step && !i.reached)
        .filter_map(|item| {
            let span = doc.span(&item.pointer)?;
            let (start, end) = (span.key?, span.key_end?);
            Some(lsp_types::Diagnostic {
                range: Range {
                    start: to_lsp_position(workflow, start),
                    end: to_lsp_position(workflow, end),
                },
                severity: Some(DiagnosticSeverity::HINT),
                source: Some("coordinatorctl".into()),
                message: format!(
                    "no case of scenarios.yaml reaches step `{}`\nnext: Add a case that takes the route to it (coordinatorctl test --coverage lists what the cases miss).",
                    item.step.as_deref().unwrap_or("")
                ),
                ..Default::default()
            })
        })
        .collect()
}
