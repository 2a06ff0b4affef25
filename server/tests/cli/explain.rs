//! `explain --format json`'s typed IR (`ir`) and `explain --bytecode`
//! through the real binary: every example's report validates against the
//! committed schema (`docs/schemas/explain.v1beta1.schema.json`) and names
//! every step, edge and operation of its `workflow.yaml`; so does a refused
//! project's report.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::ctl;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every project under `examples/`, sorted.
pub(crate) fn examples() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root().join("examples"))
        .expect("examples/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.join("workflow.yaml").is_file())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 6, "examples missing: {dirs:?}");
    dirs
}

fn validator() -> coordinator_ir::validation::Validator {
    let text = std::fs::read_to_string(root().join("docs/schemas/explain.v1beta1.schema.json"))
        .expect("the committed explain schema");
    let schema: Value = serde_json::from_str(&text).expect("schema JSON");
    coordinator_ir::validation::validator(&schema).expect("the schema compiles")
}

fn assert_valid(validator: &coordinator_ir::validation::Validator, report: &Value, what: &str) {
    let errors: Vec<String> = validator
        .iter_errors(report)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{what}: {errors:#?}");
}

fn explain_json(dir: &Path, extra: &[&str]) -> (Option<i32>, Value) {
    let project = dir.to_str().expect("UTF-8 path");
    let mut args = vec!["explain", "--project", project, "--format", "json"];
    args.extend_from_slice(extra);
    let out = ctl(&root(), &args);
    let report = serde_json::from_slice(&out.stdout).expect("one JSON report");
    (out.status.code(), report)
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// The edges authored in `workflow.yaml` as (from, label, to).
fn authored_edges(steps: &Value) -> BTreeSet<(String, String, String)> {
    let mut out = BTreeSet::new();
    for (name, step) in steps.as_object().expect("steps") {
        for member in ["next", "onDeclaredRefusal", "onTimeout", "onCancel"] {
            if let Some(to) = step.get(member).and_then(Value::as_str) {
                out.insert((name.clone(), member.to_owned(), to.to_owned()));
            }
        }
        if let Some(cases) = step.get("cases").and_then(Value::as_object) {
            for (label, to) in cases {
                let to = to.as_str().expect("case target");
                out.insert((name.clone(), label.clone(), to.to_owned()));
            }
        }
    }
    out
}

#[test]
fn explain_json_of_every_example_validates_and_names_every_step_edge_and_operation() {
    let validator = validator();
    for dir in examples() {
        let name = dir.display().to_string();
        let (code, report) = explain_json(&dir, &[]);
        assert_eq!(code, Some(0), "{name}");
        assert_valid(&validator, &report, &name);
        let source = std::fs::read_to_string(dir.join("workflow.yaml")).expect("workflow.yaml");
        let doc = coordinator_source::parse("workflow.yaml", &source).expect("YAML");
        let authored = &doc.value;
        let ir = &report["ir"];
        assert_eq!(ir["revision"], report["revision"], "{name}");

        let steps: BTreeSet<String> = ir["steps"]
            .as_array()
            .expect("ir.steps")
            .iter()
            .map(|s| s["id"].as_str().expect("id").to_owned())
            .collect();
        assert_eq!(steps, keys(&authored["workflow"]["steps"]), "{name}: steps");
        assert_eq!(
            ir["steps"].as_array().map(Vec::len),
            report["steps"].as_array().map(Vec::len),
            "{name}: one text line per step"
        );

        let mut edges = BTreeSet::new();
        for step in ir["steps"].as_array().expect("steps") {
            for e in step["successors"].as_array().expect("successors") {
                let label = e["label"].as_str().expect("label").to_owned();
                let kind = e["kind"].as_str().expect("kind");
                assert!(
                    kind == "case" || kind == label,
                    "{name}: edge kind {kind} labelled {label}"
                );
                edges.insert((
                    step["id"].as_str().expect("id").to_owned(),
                    label,
                    e["to"].as_str().expect("to").to_owned(),
                ));
            }
        }
        assert_eq!(
            edges,
            authored_edges(&authored["workflow"]["steps"]),
            "{name}: edges"
        );

        let aliases: BTreeSet<String> = ir["operations"]
            .as_array()
            .expect("operations")
            .iter()
            .map(|o| {
                let host = o["hostOperation"].as_str().expect("hostOperation");
                assert!(
                    coordinator_ir::catalogue::lookup(host).is_some(),
                    "{name}: {host}"
                );
                o["alias"].as_str().expect("alias").to_owned()
            })
            .collect();
        assert_eq!(aliases, keys(&authored["operations"]), "{name}: operations");
        for step in ir["steps"].as_array().expect("steps") {
            if step["kind"] == "call" {
                let call = &step["call"];
                let alias = call["alias"].as_str().expect("alias");
                assert_eq!(
                    authored["workflow"]["steps"][step["id"].as_str().expect("id")]["operation"],
                    alias
                );
                let op = ir["operations"]
                    .as_array()
                    .expect("operations")
                    .iter()
                    .find(|o| o["alias"] == alias)
                    .expect("the call's alias is listed");
                for member in ["hostOperation", "product", "effect", "recovery"] {
                    assert_eq!(call[member], op[member], "{name}: {member}");
                }
            }
        }
        let outcomes: BTreeSet<String> = ir["outcomes"]
            .as_array()
            .expect("outcomes")
            .iter()
            .map(|o| o["name"].as_str().expect("name").to_owned())
            .collect();
        assert_eq!(outcomes, keys(&authored["workflow"]["outcomes"]), "{name}");
    }
}

#[test]
fn explain_json_carries_the_route_sensitive_types_of_what_mappings_read() {
    let (_, report) = explain_json(&root().join("examples/governed-action"), &[]);
    let steps = report["ir"]["steps"].as_array().expect("steps");
    let declined = steps
        .iter()
        .find(|s| s["id"] == "declined")
        .expect("declined");
    let read = &declined["finish"]["output"]["fields"][0]["mapping"];
    assert_eq!(read["type"], "step");
    assert_eq!(read["reads"][0]["route"], "declared-refusal", "{read:#}");
    let notify = steps.iter().find(|s| s["id"] == "notify").expect("notify");
    let args = notify["call"]["input"]["arguments"]
        .as_array()
        .expect("arguments");
    assert!(args.iter().all(|a| a["boundByType"] == true), "{args:#?}");
}

#[test]
fn explain_json_of_a_refused_project_validates_and_has_no_ir() {
    let tmp = tempfile::tempdir().expect("temp dir");
    assert!(ctl(tmp.path(), &["init", "--directory", "follow-up"])
        .status
        .success());
    let wf = tmp.path().join("follow-up/workflow.yaml");
    let text = std::fs::read_to_string(&wf).expect("read");
    assert!(text.contains("/applicationId"));
    std::fs::write(&wf, text.replacen("/applicationId", "/applicationID", 1)).expect("write");
    let (code, report) = explain_json(&tmp.path().join("follow-up"), &["--bytecode"]);
    assert_eq!(code, Some(1));
    assert_valid(&validator(), &report, "refused");
    assert_eq!(report["status"], "refused");
    assert!(report.get("ir").is_none() && report.get("bytecode").is_none());
    assert_eq!(report["diagnostics"][0]["code"], "coordinator.mapping.path");
}

#[test]
fn explain_bytecode_prints_the_programs_disassembly() {
    let dir = root().join("examples/delayed-follow-up");
    let compiled = coordinator_compiler::compile_project(&dir, "delayed-follow-up");
    let program = compiled.program.expect("compiles");
    let expected = coordinator_ir::disasm::disassemble(&program);
    let out = ctl(
        &root(),
        &[
            "explain",
            "--project",
            "examples/delayed-follow-up",
            "--bytecode",
        ],
    );
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected);
    let (_, report) = explain_json(&dir, &["--bytecode"]);
    assert_eq!(report["bytecode"], expected.as_str());
    assert_valid(&validator(), &report, "bytecode");
}
