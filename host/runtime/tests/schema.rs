//! The runtime JSON Schema: committed copy in sync, example files valid.

use std::path::PathBuf;

use coordinator_runtime::{runtime_schema, runtime_schema_text};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn yaml_value(path: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).expect("read example");
    coordinator_source::parse(&path.display().to_string(), &text)
        .expect("parse example")
        .value
}

#[test]
fn committed_schema_is_in_sync() {
    let path = repo().join("docs/schemas/runtime.v1beta1.schema.json");
    let expected = runtime_schema_text();
    if std::env::var_os("UPDATE_SCHEMAS").is_some() {
        std::fs::write(&path, &expected).expect("write schema");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        committed, expected,
        "docs/schemas/runtime.v1beta1.schema.json is stale; rerun with UPDATE_SCHEMAS=1"
    );
}

#[test]
fn schema_is_draft_2020_12_with_id() {
    let s = runtime_schema();
    assert_eq!(s["$schema"], "https://json-schema.org/draft/2020-12/schema");
    assert_eq!(
        s["$id"],
        "https://id.registrystack.org/schemas/coordinator/runtime/runtime.v1beta1.schema.json"
    );
}

#[test]
fn example_runtime_files_validate_against_the_committed_schema() {
    let text = std::fs::read_to_string(repo().join("docs/schemas/runtime.v1beta1.schema.json"))
        .expect("committed schema");
    let schema: serde_json::Value = serde_json::from_str(&text).expect("schema JSON");
    let validator = jsonschema::draft202012::new(&schema).expect("valid schema");
    let mut seen = 0;
    for entry in std::fs::read_dir(repo().join("examples")).expect("examples") {
        let file = entry.expect("entry").path().join("runtime.yaml");
        if !file.exists() {
            continue;
        }
        seen += 1;
        let value = yaml_value(&file);
        let errors: Vec<String> = validator
            .iter_errors(&value)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{}: {errors:#?}", file.display());
    }
    assert!(seen > 0, "no example runtime.yaml found");
}

#[test]
fn schema_refuses_what_the_reader_refuses() {
    let schema = runtime_schema();
    let validator = jsonschema::draft202012::new(&schema).expect("valid schema");
    let value = yaml_value(&repo().join("examples/delayed-follow-up/runtime.yaml"));
    let mut bad = value.clone();
    bad["apiVersion"] = "id.registrystack.org/formats/coordinator/runtime/v1alpha1".into();
    assert!(!validator.is_valid(&bad));
    let mut bad = value.clone();
    bad["connections"]["applications"]["unknown"] = 1.into();
    assert!(!validator.is_valid(&bad));
    let mut bad = value;
    bad["connections"]["applications"]["type"] = "messaging".into();
    assert!(!validator.is_valid(&bad), "messaging has no profile");
}
