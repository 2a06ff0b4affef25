//! Typed callers: generated for a hand-built Program, then compiled with
//! `tsc --strict` and checked with `python3 -m py_compile` and
//! `mypy --strict`. The tools come from `scripts/check-generated-callers.sh`
//! (TSC and MYPY_PATH point at them); a missing tool skips its part with a
//! printed notice.

use coordinator_testkit as common;

use std::path::{Path, PathBuf};
use std::process::Command;

use coordinator_callers::{python, typescript, Ty};
use serde_json::json;

fn tsc() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("TSC").map(PathBuf::from),
        Some(PathBuf::from("/tmp/tsc/node_modules/.bin/tsc")),
    ];
    candidates.into_iter().flatten().find(|p| p.exists())
}

/// A directory holding the `mypy` package (pip --target), or none.
fn mypy_path() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("MYPY_PATH").map(PathBuf::from),
        Some(PathBuf::from("/tmp/mypy")),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|p| p.join("mypy").exists())
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn typescript_names_the_workflow_and_each_outcome() {
    let p = common::program();
    let ts = typescript(&p);
    assert!(ts.contains("export const WORKFLOW = \"follow-up\" as const;"));
    assert!(ts.contains(&format!(
        "export const WORKFLOW_REVISION = \"{}\" as const;",
        p.revision()
    )));
    assert!(ts.contains("export type Input = {"));
    assert!(ts.contains("| { name: \"message-accepted\"; output: {"));
    assert!(ts.contains("| { name: \"no-current-permission\"; output: null };"));
    assert!(ts.contains("\"odd-name\": string | number;"));
    assert!(ts.contains("channel?: \"email\" | \"sms\";"));
    for m in [
        "start(input: Input, idempotencyKey: string)",
        "get(runId: string)",
        "cancel(runId: string, reason: string)",
        "\"Idempotency-Key\"",
        "Bearer ",
    ] {
        assert!(ts.contains(m), "missing {m}");
    }
    assert_eq!(ts, typescript(&p), "deterministic");
}

#[test]
fn python_names_the_workflow_and_each_outcome() {
    let p = common::program();
    let py = python(&p);
    assert!(py.contains("WORKFLOW: Final = \"follow-up\""));
    assert!(py.contains("Input = TypedDict("));
    assert!(py.contains("\"name\": Literal[\"message-accepted\"]"));
    assert!(py.contains("\"output\": None"));
    assert!(py.contains("Outcome = Union[OutcomeMessageAccepted, OutcomeNoCurrentPermission]"));
    assert!(py.contains("\"sendAfter\": str,"));
    assert!(py.contains("\"priority\": NotRequired[int],"));
    assert_eq!(py, python(&p), "deterministic");
}

#[test]
fn schema_mapping() {
    let root = json!({"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}}});
    assert_eq!(
        Ty::from_schema(&json!({"$ref": "#/$defs/n"}), &root),
        Ty::Array(Box::new(Ty::Unknown))
    );
    assert_eq!(
        Ty::from_schema(&json!({"type": ["string", "null"]}), &root),
        Ty::Union(vec![Ty::String, Ty::Null])
    );
    assert_eq!(Ty::from_schema(&json!({"not": {}}), &root), Ty::Unknown);
    assert_eq!(
        Ty::from_schema(&json!({"anyOf": [{"type": "string"}, {}]}), &root),
        Ty::Unknown
    );
    assert_eq!(
        Ty::from_schema(&json!({"enum": ["a", 1, null]}), &root),
        Ty::Union(vec![
            Ty::Literal(json!("a")),
            Ty::Literal(json!(1)),
            Ty::Null
        ])
    );
    assert_eq!(
        Ty::from_schema(
            &json!({"type": "object", "additionalProperties": {"type": "integer"}}),
            &root
        ),
        Ty::Map(Box::new(Ty::Integer))
    );
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path
}

#[test]
fn generated_typescript_passes_tsc_strict() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write(dir.path(), "follow_up.ts", &typescript(&common::program()));
    let usage = write(
        dir.path(),
        "usage.ts",
        r#"import { Client, Input, Outcome, CoordinatorProblemError } from "./follow_up";
const input: Input = { applicationId: "a-1", sendAfter: "2026-01-01T00:00:00Z", "odd-name": 3 };
function describe(o: Outcome): string {
  switch (o.name) {
    case "message-accepted": return o.output.messageId;
    case "no-current-permission": return String(o.output);
  }
}
async function main(): Promise<void> {
  const client = new Client({ baseUrl: "https://coordinator.example.org", token: () => "t" });
  try {
    const run = await client.start(input, "key-1");
    const again = await client.get(run.run);
    if (again.outcome) { describe(again.outcome); }
    await client.cancel(run.run, "incident-1");
  } catch (e) {
    if (e instanceof CoordinatorProblemError) { console.log(e.code, e.status); }
  }
}
void main;
"#,
    );
    let Some(tsc) = tsc() else {
        eprintln!("notice: tsc not found (run scripts/check-generated-callers.sh); skipping the tsc check");
        return;
    };
    run(Command::new(tsc)
        .args([
            "--strict",
            "--noEmit",
            "--target",
            "es2020",
            "--lib",
            "es2020,dom",
            "--module",
            "esnext",
            "--moduleResolution",
            "bundler",
        ])
        .arg(&file)
        .arg(&usage));
}

#[test]
fn generated_python_compiles_and_passes_mypy_strict() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write(dir.path(), "follow_up.py", &python(&common::program()));
    let usage = write(
        dir.path(),
        "usage.py",
        r#"from follow_up import Client, CoordinatorProblemError, Input, Outcome


def describe(o: Outcome) -> str:
    if o["name"] == "message-accepted":
        return o["output"]["messageId"]
    return str(o["output"])


def main() -> None:
    client = Client("https://coordinator.example.org", lambda: "t")
    data: Input = {"applicationId": "a-1", "sendAfter": "2026-01-01T00:00:00Z", "odd-name": 3}
    try:
        run = client.start(data, "key-1")
        again = client.get(run["run"])
        if "outcome" in again:
            describe(again["outcome"])
        client.cancel(run["run"], "incident-1")
    except CoordinatorProblemError as err:
        print(err.code, err.status)
"#,
    );
    let python = if Command::new("python3").arg("--version").output().is_ok() {
        "python3"
    } else {
        eprintln!("notice: python3 not found; skipping the Python checks");
        return;
    };
    run(Command::new(python)
        .args(["-m", "py_compile"])
        .arg(&file)
        .arg(&usage));
    let Some(mypy) = mypy_path() else {
        eprintln!("notice: mypy not found (run scripts/check-generated-callers.sh); skipping the mypy check");
        return;
    };
    run(Command::new(python)
        .env("PYTHONPATH", &mypy)
        .env("MYPY_CACHE_DIR", dir.path().join(".mypy_cache"))
        .current_dir(dir.path())
        .args([
            "-m",
            "mypy",
            "--strict",
            "--python-version",
            "3.11",
            "follow_up.py",
            "usage.py",
        ]));
}
