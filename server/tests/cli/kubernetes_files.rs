//! The Kubernetes manifests under `deploy/kubernetes/` (docs/install.md
//! "Kubernetes"): validated against the API schema of a pinned Kubernetes
//! version by PyPI's `kubernetes-validate` (pinned; scripts/test.sh
//! installs it into `target/tools/kubernetes-validate`, or
//! `KUBERNETES_VALIDATE_PATH` names it), strictly (an unknown field fails:
//! a misspelt copy is shown to fail), and linted for the security settings
//! the issue asks for. The YAML is read by the PyYAML that comes with
//! `kubernetes-validate` and handed over as JSON. Without the tool the
//! tests fail under `CI=true`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The Kubernetes version whose API schema the manifests must meet.
const KUBERNETES_VERSION: &str = "1.37.0";
/// The pinned `kubernetes-validate` (scripts/test.sh installs this one).
const TOOL_DIST_INFO: &str = "kubernetes_validate-1.37.0.dist-info";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every manifest of `deploy/kubernetes` (kustomizations left out: they
/// are kustomize's files, not API objects).
fn manifests() -> Vec<PathBuf> {
    let dir = repo().join("deploy/kubernetes");
    let mut files = Vec::new();
    for sub in [dir.clone(), dir.join("apply")] {
        for entry in std::fs::read_dir(&sub).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".yaml") && name != "kustomization.yaml" {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// Where `kubernetes-validate` is installed; `None` after a notice (a
/// failure under `CI=true`).
fn tool(test: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("KUBERNETES_VALIDATE_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/tools/kubernetes-validate"));
    if dir.join("kubernetes_validate").is_dir() {
        assert!(
            dir.join(TOOL_DIST_INFO).is_dir(),
            "{} holds another kubernetes-validate than the pinned {TOOL_DIST_INFO}",
            dir.display()
        );
        return Some(dir);
    }
    coordinator_testkit::tools::missing(test, "kubernetes-validate (PyPI)");
    None
}

fn validate(tool: &Path, files: &[PathBuf]) -> Output {
    Command::new("python3")
        .args([
            "-m",
            "kubernetes_validate",
            "--strict",
            "--kubernetes-version",
        ])
        .arg(KUBERNETES_VERSION)
        .args(files)
        .env("PYTHONPATH", tool)
        .output()
        .expect("python3 runs")
}

fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn the_kubernetes_manifests_validate_against_the_pinned_api_schema() {
    let Some(tool) = tool("the_kubernetes_manifests_validate") else {
        return;
    };
    let files = manifests();
    assert!(files.len() >= 5, "{files:?}");
    let out = validate(&tool, &files);
    assert!(out.status.success(), "{}", said(&out));
    // The same Deployment with one field misspelt fails: the check is strict.
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(repo().join("deploy/kubernetes/deployment.yaml")).unwrap();
    let misspelt = text.replacen("readOnlyRootFilesystem", "readOnlyRootFilesytem", 1);
    assert_ne!(misspelt, text);
    let copy = dir.path().join("deployment.yaml");
    std::fs::write(&copy, misspelt).unwrap();
    let out = validate(&tool, &[copy]);
    assert!(!out.status.success(), "{}", said(&out));
}

/// Every document of `file`, as JSON.
fn documents(tool: &Path, file: &Path) -> Vec<Value> {
    let out = Command::new("python3")
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))",
        ])
        .arg(file)
        .env("PYTHONPATH", tool)
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "{}", said(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The pod template's checks: the pod's and each container's security
/// settings, resources, and Secret volumes (0440, read by the init step
/// only, never by the service's container).
fn check_pod(name: &str, pod: &Value) {
    let security = &pod["securityContext"];
    assert_eq!(security["runAsNonRoot"], true, "{name}");
    assert_eq!(security["runAsUser"], 10001, "{name}");
    assert_eq!(security["fsGroup"], 10001, "{name}");
    assert_eq!(
        security["seccompProfile"]["type"], "RuntimeDefault",
        "{name}"
    );
    assert_eq!(pod["automountServiceAccountToken"], false, "{name}");
    let mut secret_volumes = Vec::new();
    for volume in pod["volumes"].as_array().unwrap() {
        if let Some(secret) = volume.get("secret") {
            assert_eq!(secret["defaultMode"], 0o440, "{name}: {volume}");
            assert!(secret.get("items").is_none(), "{name}: {volume}");
            secret_volumes.push(volume["name"].as_str().unwrap().to_owned());
        }
    }
    assert!(!secret_volumes.is_empty(), "{name}");
    let init = pod["initContainers"].as_array().unwrap();
    assert_eq!(init.len(), 1, "{name}");
    assert_eq!(init[0]["command"][1], "copy-secrets", "{name}");
    let containers = pod["containers"].as_array().unwrap();
    for container in init.iter().chain(containers) {
        let c = container["name"].as_str().unwrap();
        let security = &container["securityContext"];
        assert_eq!(security["allowPrivilegeEscalation"], false, "{name}/{c}");
        assert_eq!(security["readOnlyRootFilesystem"], true, "{name}/{c}");
        assert_eq!(
            security["capabilities"]["drop"],
            serde_json::json!(["ALL"]),
            "{name}/{c}"
        );
        assert!(security.get("privileged").is_none(), "{name}/{c}");
        assert!(security["capabilities"].get("add").is_none(), "{name}/{c}");
        let resources = &container["resources"];
        assert!(resources["requests"]["cpu"].is_string(), "{name}/{c}");
        assert!(resources["requests"]["memory"].is_string(), "{name}/{c}");
        assert!(resources["limits"]["memory"].is_string(), "{name}/{c}");
        assert!(
            container.get("env").is_none(),
            "{name}/{c}: no value in env"
        );
    }
    for container in containers {
        for mount in container["volumeMounts"].as_array().unwrap() {
            assert!(
                !secret_volumes.iter().any(|v| mount["name"] == v.as_str()),
                "{name}: the Secret is mounted in {container}; only the init step reads it"
            );
        }
    }
}

#[test]
fn the_kubernetes_manifests_hold_the_security_settings() {
    let Some(tool) = tool("the_kubernetes_manifests_hold_the_security_settings") else {
        return;
    };
    let mut kinds = Vec::new();
    for file in manifests() {
        for doc in documents(&tool, &file) {
            let kind = doc["kind"].as_str().unwrap().to_owned();
            // Secrets by reference only: no manifest carries one.
            assert!(
                !matches!(kind.as_str(), "Secret" | "ConfigMap"),
                "{}: {kind}",
                file.display()
            );
            match kind.as_str() {
                "Deployment" => {
                    let pod = &doc["spec"]["template"]["spec"];
                    check_pod("Deployment", pod);
                    assert!(pod["terminationGracePeriodSeconds"].as_u64().unwrap() > 15);
                    let service = &pod["containers"][0];
                    assert_eq!(service["livenessProbe"]["httpGet"]["path"], "/health");
                    assert_eq!(service["readinessProbe"]["httpGet"]["path"], "/ready");
                    assert_eq!(
                        doc["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"],
                        0
                    );
                }
                "Job" => {
                    let pod = &doc["spec"]["template"]["spec"];
                    check_pod("Job", pod);
                    let command = pod["containers"][0]["command"].as_array().unwrap();
                    assert_eq!(command.last().unwrap(), "apply");
                }
                _ => {}
            }
            kinds.push(kind);
        }
    }
    kinds.sort();
    assert_eq!(
        kinds,
        ["Deployment", "Job", "Service", "Service", "ServiceAccount"]
    );
    // Each kustomization lists the files beside it that it deploys.
    let dir = repo().join("deploy/kubernetes");
    for (kustomization, expected) in [
        (
            dir.join("kustomization.yaml"),
            vec![
                "apply/serviceaccount.yaml",
                "deployment.yaml",
                "service.yaml",
                "service-metrics.yaml",
            ],
        ),
        (
            dir.join("apply/kustomization.yaml"),
            vec!["serviceaccount.yaml", "job.yaml"],
        ),
    ] {
        let doc = &documents(&tool, &kustomization)[0];
        assert_eq!(doc["resources"], serde_json::json!(expected));
        for file in expected {
            assert!(
                kustomization.parent().unwrap().join(file).is_file(),
                "{file}"
            );
            // kustomize loads nothing outside a kustomization's directory
            // unless told (`--load-restrictor`), so `kubectl apply -k`
            // refuses a `..` path.
            assert!(
                !Path::new(file)
                    .components()
                    .any(|c| c == std::path::Component::ParentDir),
                "{}: {file} is outside its directory",
                kustomization.display()
            );
        }
    }
}
