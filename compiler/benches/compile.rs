//! Prints the wall time of compiling (every check, lowering, revision) the
//! starter project and a generated 64-step project. Not a timed test:
//! `cargo bench -p coordinator-compiler --bench compile`.

use std::time::Instant;

use coordinator_compiler::compile_sources;

const STARTER_WF: &str = include_str!("../../examples/delayed-follow-up/workflow.yaml");
const STARTER_FN: &str = include_str!("../../examples/delayed-follow-up/functions.rhai");

/// The starter with 58 extra wait-until steps before `due`: 64 steps.
fn sixty_four_steps() -> String {
    let mut steps = String::from("  steps:\n");
    for i in 0..58 {
        let next = if i == 57 {
            "due".to_owned()
        } else {
            format!("w{}", i + 1)
        };
        steps.push_str(&format!(
            "    w{i}:\n      type: wait-until\n      until:\n        type: input\n        path: /sendAfter\n      next: {next}\n"
        ));
    }
    STARTER_WF
        .replacen("  start: due\n", "  start: w0\n", 1)
        .replacen("  steps:\n", &steps, 1)
}

fn measure(name: &str, wf: &str, rounds: u32) {
    let warm = compile_sources("bench", wf, Some(STARTER_FN));
    assert!(!warm.has_errors(), "{:?}", warm.diagnostics);
    let steps = warm.program.as_ref().map(|p| p.steps.len()).unwrap_or(0);
    let start = Instant::now();
    for _ in 0..rounds {
        let c = compile_sources("bench", wf, Some(STARTER_FN));
        std::hint::black_box(c.revision());
    }
    let per = start.elapsed() / rounds;
    println!("{name}: {steps} steps, {per:?} per compile (mean of {rounds})");
}

fn main() {
    measure("starter", STARTER_WF, 200);
    measure("generated", &sixty_four_steps(), 50);
}
