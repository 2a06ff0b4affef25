//! Prints milliseconds per scenario case for every example project: compile
//! once, then run each case of `scenarios.yaml` repeatedly through the
//! scenario host (the same path as `coordinatorctl test`). Figures, not
//! assertions: run with `cargo bench -p coordinator-scenario --bench scenarios`.

use std::path::Path;
use std::time::Instant;

use coordinator_scenario::{file, run};

fn main() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut dirs: Vec<_> = std::fs::read_dir(&examples)
        .expect("examples")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("scenarios.yaml").exists())
        .collect();
    dirs.sort();
    println!(
        "{:<24} {:>6} {:>12} {:>14}",
        "example", "cases", "ms per case", "cases per s"
    );
    for dir in dirs {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let compiled = coordinator_compiler::compile_project(&dir, &name);
        let Some(program) = compiled.program else {
            println!("{name:<24} does not compile");
            continue;
        };
        let text = std::fs::read_to_string(dir.join("scenarios.yaml")).expect("scenarios");
        let doc = coordinator_source::parse("scenarios.yaml", &text).expect("scenarios parse");
        let scenarios = file::read(&doc, &program).expect("scenarios read");
        let vm = run::load_vm(&program, "scenarios.yaml").expect("vm");
        let rounds = 50;
        let start = Instant::now();
        let mut ran = 0u64;
        for _ in 0..rounds {
            for (i, case) in scenarios.cases.iter().enumerate() {
                let report = run::run_case(&vm, &doc, i, case).expect("case runs");
                assert!(report.passed, "{name}/{}", case.id);
                ran += 1;
            }
        }
        let elapsed = start.elapsed().as_secs_f64();
        println!(
            "{name:<24} {:>6} {:>12.3} {:>14.0}",
            scenarios.cases.len(),
            elapsed * 1000.0 / ran as f64,
            ran as f64 / elapsed
        );
    }
}
