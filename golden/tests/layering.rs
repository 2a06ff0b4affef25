//! Keeps DESIGN.md's layering invariants true by reading the workspace's
//! dependency graph (`cargo metadata`), including transitive dependencies.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

/// Crates that must never reach an async runtime, database, HTTP stack or clock source.
const PURE: [&str; 3] = ["coordinator-ir", "coordinator-compiler", "coordinator-vm"];
const FORBIDDEN: [&str; 6] = ["tokio", "sqlx", "axum", "reqwest", "hyper", "async-std"];

/// Allowed project-internal dependencies per crate (DESIGN.md, "Layering
/// invariants"; ARCHITECTURE.md "host/"). The hosts' crates: the scenario
/// host reaches no store, adapter or engine; the adapters and the store see
/// the engine only through its ports; the engine knows no store or
/// adapter implementation.
fn allowed() -> BTreeMap<&'static str, Vec<&'static str>> {
    BTreeMap::from([
        ("coordinator-ir", vec![]),
        // `ir` for its one JSON Pointer escape (`ir::pointer`) only.
        ("coordinator-source", vec!["coordinator-ir"]),
        ("coordinator-api", vec![]),
        (
            "coordinator-compiler",
            vec!["coordinator-ir", "coordinator-source"],
        ),
        ("coordinator-vm", vec!["coordinator-ir"]),
        (
            "coordinator-runtime",
            vec!["coordinator-ir", "coordinator-source"],
        ),
        // `api` for the run states the generated callers' types spell.
        (
            "coordinator-callers",
            vec!["coordinator-ir", "coordinator-api"],
        ),
        (
            "coordinator-scenario",
            vec!["coordinator-ir", "coordinator-vm", "coordinator-source"],
        ),
        (
            "coordinator-ports",
            vec!["coordinator-ir", "coordinator-vm", "coordinator-runtime"],
        ),
        (
            "coordinator-adapters",
            vec![
                "coordinator-ir",
                "coordinator-vm",
                "coordinator-runtime",
                "coordinator-ports",
            ],
        ),
        (
            "coordinator-store",
            vec![
                "coordinator-ir",
                "coordinator-vm",
                "coordinator-runtime",
                "coordinator-ports",
            ],
        ),
        (
            "coordinator-engine",
            vec![
                "coordinator-ir",
                "coordinator-vm",
                "coordinator-runtime",
                "coordinator-ports",
            ],
        ),
        // Test support: a Program by hand, and the run store conformance
        // checks every store implementation runs (so it names the port).
        (
            "coordinator-testkit",
            vec![
                "coordinator-ir",
                "coordinator-vm",
                "coordinator-runtime",
                "coordinator-ports",
            ],
        ),
        ("coordinator-fakes", vec![]),
        ("coordinator-golden", vec![]),
        (
            "coordinatorctl",
            vec![
                "coordinator-compiler",
                "coordinator-runtime",
                "coordinator-callers",
                "coordinator-scenario",
                "coordinator-store",
                "coordinator-api",
                "coordinator-ir",
                "coordinator-source",
            ],
        ),
        (
            // The product package: the service (its library, `coordinator`)
            // and both binaries, so it also depends on the
            // `coordinatorctl` library for that binary's command line.
            "registry-coordinator",
            vec![
                "coordinatorctl",
                "coordinator-runtime",
                "coordinator-ports",
                "coordinator-adapters",
                "coordinator-store",
                "coordinator-engine",
                "coordinator-api",
                "coordinator-ir",
                "coordinator-source",
                // An exported run's case runs on its Program before it is
                // answered (docs/decisions.md "Exporting a run as a case").
                "coordinator-scenario",
            ],
        ),
    ])
}

fn metadata() -> Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1"])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("metadata is JSON")
}

/// package name -> names of its normal (non-dev, non-build) dependencies, from the resolve graph.
fn graph(meta: &Value) -> BTreeMap<String, BTreeSet<String>> {
    let mut names = BTreeMap::new();
    for p in meta["packages"].as_array().expect("packages") {
        names.insert(
            p["id"].as_str().expect("id").to_owned(),
            p["name"].as_str().expect("name").to_owned(),
        );
    }
    let mut g = BTreeMap::new();
    for node in meta["resolve"]["nodes"].as_array().expect("nodes") {
        let name = names[node["id"].as_str().expect("id")].clone();
        let deps: BTreeSet<String> = node["deps"]
            .as_array()
            .expect("deps")
            .iter()
            .filter(|d| {
                d["dep_kinds"]
                    .as_array()
                    .expect("dep_kinds")
                    .iter()
                    .any(|k| k["kind"].is_null())
            })
            .map(|d| names[d["pkg"].as_str().expect("pkg")].clone())
            .collect();
        g.insert(name, deps);
    }
    g
}

fn transitive(g: &BTreeMap<String, BTreeSet<String>>, root: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![root.to_owned()];
    while let Some(n) = stack.pop() {
        for d in g.get(&n).into_iter().flatten() {
            if seen.insert(d.clone()) {
                stack.push(d.clone());
            }
        }
    }
    seen
}

#[test]
fn pure_crates_pull_in_no_runtime_database_or_http() {
    let g = graph(&metadata());
    for krate in PURE {
        let deps = transitive(&g, krate);
        for bad in FORBIDDEN {
            assert!(
                !deps.contains(bad),
                "{krate} depends (transitively) on {bad}"
            );
        }
    }
}

#[test]
fn internal_dependencies_follow_the_layering() {
    let g = graph(&metadata());
    for (krate, allowed) in allowed() {
        let direct = g
            .get(krate)
            .unwrap_or_else(|| panic!("{krate} is in the workspace"));
        for dep in direct.iter().filter(|d| d.starts_with("coordinator")) {
            assert!(
                allowed.contains(&dep.as_str()),
                "{krate} must not depend on {dep}"
            );
        }
    }
    for (krate, deps) in &g {
        assert!(
            !deps.contains("registry-coordinator")
                && (krate == "registry-coordinator" || !deps.contains("coordinatorctl")),
            "{krate} depends on the product package or the command line"
        );
    }
}

#[test]
fn every_workspace_crate_has_a_layer() {
    let meta = metadata();
    let members: BTreeSet<&str> = meta["workspace_members"]
        .as_array()
        .expect("workspace_members")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let layers = allowed();
    for p in meta["packages"].as_array().expect("packages") {
        let (id, name) = (
            p["id"].as_str().expect("id"),
            p["name"].as_str().expect("name"),
        );
        if members.contains(id) {
            assert!(
                layers.contains_key(name),
                "workspace crate {name} has no entry in the layering table"
            );
        }
    }
}
