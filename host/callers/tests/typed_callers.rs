//! Typed callers: generated for a hand-built Program, then compiled with
//! `tsc --strict` and checked with `python3 -m py_compile` and
//! `mypy --strict` (code that reads the declared shapes passes; code that
//! reads a member without narrowing on `outcome` is refused). The declared
//! `RunStatus` and `Problem` members are held to `docs/openapi.json` here and
//! to the api crate's serialised documents in server/tests/typed_callers.rs.
//!
//! The tools come from `scripts/check-generated-callers.sh` or
//! scripts/test.sh (TSC and MYPY_PATH point at them): a missing tool skips
//! its part with a printed notice, and fails the test under `CI=true`
//! (`coordinator_testkit::tools`).

use coordinator_testkit as common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use coordinator_callers::{
    python, typescript, FieldTy, Ty, PROBLEM_FIELDS, RUN_STATES, RUN_STATUS_FIELDS,
};
use coordinator_testkit::tools;
use serde_json::{json, Value};

fn output(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("{cmd:?} did not start: {e}"))
}

fn run(cmd: &mut Command) {
    let out = output(cmd);
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `cmd` expecting it to fail with `needle` in its output.
fn refused(cmd: &mut Command, needle: &str) {
    let out = output(cmd);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{cmd:?} passed:\n{text}");
    assert!(text.contains(needle), "{cmd:?}: no {needle:?} in:\n{text}");
}

/// The member names of the TypeScript `interface NAME { ... }` in `ts`.
fn ts_interface_members(ts: &str, name: &str) -> Vec<String> {
    let open = format!("export interface {name} {{\n");
    let start = ts.find(&open).unwrap_or_else(|| panic!("no {open}")) + open.len();
    let body = &ts[start..];
    let body = &body[..body.find("\n}").unwrap_or(0)];
    body.lines()
        .map(|l| {
            let member = l.trim().split(':').next().unwrap_or_default();
            member.trim_end_matches('?').trim_matches('"').to_owned()
        })
        .collect()
}

/// The member names of the Python functional `NAME = TypedDict(...)` in `py`.
fn py_typed_dict_members(py: &str, name: &str) -> Vec<String> {
    let open = format!("{name} = TypedDict(\n    \"{name}\",\n    {{\n");
    let start = py.find(&open).unwrap_or_else(|| panic!("no {open}")) + open.len();
    let body = &py[start..];
    let body = &body[..body.find("\n    },").unwrap_or(0)];
    body.lines()
        .map(|l| {
            l.trim()
                .split(':')
                .next()
                .unwrap_or_default()
                .trim_matches('"')
                .to_owned()
        })
        .collect()
}

fn names(fields: &[coordinator_callers::Field]) -> Vec<String> {
    fields.iter().map(|f| f.name.to_owned()).collect()
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
    assert!(
        ts.contains("export type OutcomeName = \"message-accepted\" | \"no-current-permission\";")
    );
    assert!(
        ts.contains("  \"message-accepted\": {\n    messageId: string;\n    when?: string;\n  };")
    );
    assert!(ts.contains("  \"no-current-permission\": null;"));
    for variant in [
        "  | (RunStatusCommon & { outcome: null; output: null })",
        "  | (RunStatusCommon & { outcome: \"message-accepted\"; output: Outputs[\"message-accepted\"] })",
        "  | (RunStatusCommon & { outcome: \"no-current-permission\"; output: Outputs[\"no-current-permission\"] });",
    ] {
        assert!(ts.contains(variant), "missing {variant}");
    }
    assert!(ts.contains("\"odd-name\": string | number;"));
    assert!(ts.contains("channel?: \"email\" | \"sms\";"));
    for m in [
        "start(input: Input, idempotencyKey: string)",
        "get(runId: string)",
        "cancel(runId: string, reason: string)",
        "\"Idempotency-Key\"",
        "Bearer ",
        "readonly code: string | null;",
        "readonly status: number;",
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
    assert!(py.contains(
        "OutcomeName: TypeAlias = Literal[\"message-accepted\", \"no-current-permission\"]"
    ));
    assert!(py.contains("OutcomeMessageAcceptedOutput = TypedDict("));
    assert!(py.contains("OutcomeNoCurrentPermissionOutput: TypeAlias = None"));
    assert!(py.contains("        \"outcome\": Literal[\"message-accepted\"],\n        \"output\": OutcomeMessageAcceptedOutput,"));
    assert!(py.contains("        \"outcome\": None,\n        \"output\": None,"));
    assert!(py.contains(
        "RunStatus: TypeAlias = Union[RunStatusWithoutOutcome, RunStatusMessageAccepted, RunStatusNoCurrentPermission]"
    ));
    assert!(py.contains("\"sendAfter\": str,"));
    assert!(py.contains("\"priority\": NotRequired[int],"));
    assert!(py.contains("self.code: str | None ="));
    assert!(py.contains("self.status: int = status"));
    assert_eq!(py, python(&p), "deterministic");
}

/// The generated types declare exactly the members of the field tables, in
/// every `RunStatus` variant.
#[test]
fn generated_run_status_and_problem_declare_the_field_tables() {
    let p = common::program();
    let ts = typescript(&p);
    let common_members: Vec<String> = RUN_STATUS_FIELDS
        .iter()
        .filter(|f| !matches!(f.ty, FieldTy::Outcome | FieldTy::Output))
        .map(|f| f.name.to_owned())
        .collect();
    assert_eq!(ts_interface_members(&ts, "RunStatusCommon"), common_members);
    let variants = ts.matches("(RunStatusCommon & { outcome: ").count();
    assert_eq!(variants, 1 + p.outcomes.len(), "{ts}");
    assert_eq!(
        ts.matches("(RunStatusCommon & { outcome: ").count(),
        ts.matches("; output: ").count(),
        "each variant has outcome and output"
    );
    assert_eq!(ts_interface_members(&ts, "Problem"), names(PROBLEM_FIELDS));

    let py = python(&p);
    for variant in [
        "RunStatusWithoutOutcome",
        "RunStatusMessageAccepted",
        "RunStatusNoCurrentPermission",
    ] {
        assert_eq!(
            py_typed_dict_members(&py, variant),
            names(RUN_STATUS_FIELDS),
            "{variant}"
        );
    }
    assert_eq!(py_typed_dict_members(&py, "Problem"), names(PROBLEM_FIELDS));
}

/// The JSON types a member of this kind may hold (`None`: any).
fn json_types(ty: FieldTy) -> Option<BTreeSet<&'static str>> {
    let set = |t: &[&'static str]| Some(t.iter().copied().collect());
    match ty {
        FieldTy::String | FieldTy::State => set(&["string"]),
        FieldTy::NullableString | FieldTy::Outcome => set(&["string", "null"]),
        FieldTy::Integer => set(&["integer"]),
        FieldTy::Boolean => set(&["boolean"]),
        FieldTy::Moves => set(&["array"]),
        FieldTy::Output => None,
    }
}

/// The field tables the generators render match the `RunStatus` and
/// `Problem` schemas of docs/openapi.json (which a cli test holds to the
/// api crate): the same member names, required members always declared,
/// and the same JSON types (a member that may be absent may be `null` in the
/// schema: serde skips it rather than writing `null`).
#[test]
fn field_tables_match_docs_openapi() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json");
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("docs/openapi.json"))
            .expect("JSON");
    for (schema, fields) in [
        ("RunStatus", RUN_STATUS_FIELDS),
        ("Problem", PROBLEM_FIELDS),
    ] {
        let s = &doc["components"]["schemas"][schema];
        let props = s["properties"].as_object().expect("properties");
        let declared: BTreeSet<&str> = fields.iter().map(|f| f.name).collect();
        let documented: BTreeSet<&str> = props.keys().map(String::as_str).collect();
        assert_eq!(declared, documented, "{schema}: members");
        for r in s["required"].as_array().expect("required") {
            let f = fields.iter().find(|f| r == f.name).expect("declared");
            assert!(
                f.always,
                "{schema}.{}: required but declared optional",
                f.name
            );
        }
        for f in fields {
            let types: BTreeSet<&str> = match &props[f.name]["type"] {
                Value::String(t) => [t.as_str()].into(),
                Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
                _ => BTreeSet::new(),
            };
            match json_types(f.ty) {
                None => assert!(types.is_empty(), "{schema}.{}: {types:?}", f.name),
                Some(want) => {
                    let mut loose = want.clone();
                    if !f.always {
                        loose.insert("null");
                    }
                    assert!(
                        types == want || types == loose,
                        "{schema}.{}: declared {want:?}, documented {types:?}",
                        f.name
                    );
                }
            }
        }
    }
    let states = doc["components"]["schemas"]["RunStatus"]["properties"]["state"]["description"]
        .as_str()
        .expect("state description");
    for state in RUN_STATES {
        assert!(states.contains(&format!("`{state}`")), "{state}: {states}");
    }
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

fn tsc_strict(tsc: &Path) -> Command {
    let mut cmd = Command::new(tsc);
    cmd.args([
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
    ]);
    cmd
}

#[test]
fn generated_typescript_passes_tsc_strict() {
    const TEST: &str = "generated_typescript_passes_tsc_strict";
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write(dir.path(), "follow_up.ts", &typescript(&common::program()));
    let usage = write(
        dir.path(),
        "usage.ts",
        r#"import { Client, Input, Outputs, RunStatus, CoordinatorProblemError, Problem } from "./follow_up";
const input: Input = { applicationId: "a-1", sendAfter: "2026-01-01T00:00:00Z", "odd-name": 3 };
function describe(s: RunStatus): string {
  switch (s.outcome) {
    case "message-accepted": return s.output.messageId + (s.output.when ?? "");
    case "no-current-permission": { const nothing: null = s.output; return String(nothing); }
    case null: { const nothing: null = s.output; return `${s.state} ${s.endedAt ?? ""} ${s.failure ?? ""} ${s.failurePath ?? ""}`; }
  }
}
function accepted(o: Outputs["message-accepted"]): string { return o.messageId; }
async function main(): Promise<void> {
  const client = new Client({ baseUrl: "https://coordinator.example.org", token: () => "t" });
  try {
    const run = await client.start(input, "key-1");
    const again = await client.get(run.run);
    if (again.outcome === "message-accepted") { accepted(again.output); }
    describe(again);
    const extra: [string, string, string | undefined, boolean | undefined, string | undefined] =
      [again.admittedAt, again.deadlineAt, again.refusalCode, again.payloadErased, again.review];
    void extra;
    await client.cancel(run.run, "incident-1");
  } catch (e) {
    if (e instanceof CoordinatorProblemError) {
      const code: string | null = e.code;
      const status: number = e.status;
      const problem: Problem | null = e.problem;
      console.log(code, status, problem?.title, problem?.type, problem?.detail);
    }
  }
}
void main;
"#,
    );
    // Reading the output without testing the outcome, or the old
    // `{name, output}` shape, does not type-check.
    let wrong = write(
        dir.path(),
        "wrong.ts",
        r#"import { RunStatus } from "./follow_up";
export function unnarrowed(s: RunStatus): string { return s.output.messageId; }
"#,
    );
    let old_shape = write(
        dir.path(),
        "old_shape.ts",
        r#"import { RunStatus } from "./follow_up";
export function old(s: RunStatus): unknown { return s.outcome?.name; }
"#,
    );
    let Some(tsc) = tools::tsc(TEST) else {
        return;
    };
    run(tsc_strict(&tsc).arg(&file).arg(&usage));
    refused(tsc_strict(&tsc).arg(&file).arg(&wrong), "wrong.ts(2,");
    refused(
        tsc_strict(&tsc).arg(&file).arg(&old_shape),
        "old_shape.ts(2,",
    );
}

fn mypy_strict(python: &str, mypy: &Path, dir: &Path) -> Command {
    let mut cmd = Command::new(python);
    cmd.env("PYTHONPATH", mypy)
        .env("MYPY_CACHE_DIR", dir.join(".mypy_cache"))
        .current_dir(dir)
        .args([
            "-m",
            "mypy",
            "--strict",
            "--python-version",
            "3.11",
            "follow_up.py",
        ]);
    cmd
}

#[test]
fn generated_python_compiles_and_passes_mypy_strict() {
    const TEST: &str = "generated_python_compiles_and_passes_mypy_strict";
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write(dir.path(), "follow_up.py", &python(&common::program()));
    let usage = write(
        dir.path(),
        "usage.py",
        r#"from follow_up import (
    Client,
    CoordinatorProblemError,
    Input,
    OutcomeMessageAcceptedOutput,
    Problem,
    RunStatus,
)


def describe(s: RunStatus) -> str:
    if s["outcome"] == "message-accepted":
        return s["output"]["messageId"] + s["output"].get("when", "")
    if s["outcome"] == "no-current-permission":
        nothing: None = s["output"]
        return str(nothing)
    none: None = s["output"]
    return f'{s["state"]} {s["endedAt"]} {s["failure"]} {s["failurePath"]} {none}'


def accepted(o: OutcomeMessageAcceptedOutput) -> str:
    return o["messageId"]


def main() -> None:
    client = Client("https://coordinator.example.org", lambda: "t")
    data: Input = {"applicationId": "a-1", "sendAfter": "2026-01-01T00:00:00Z", "odd-name": 3}
    try:
        run = client.start(data, "key-1")
        again = client.get(run["run"])
        if again["outcome"] == "message-accepted":
            accepted(again["output"])
        describe(again)
        extra: tuple[str, str, str | None, bool | None, str | None] = (
            again["admittedAt"],
            again["deadlineAt"],
            again.get("refusalCode"),
            again.get("payloadErased"),
            again.get("review"),
        )
        print(extra)
        client.cancel(run["run"], "incident-1")
    except CoordinatorProblemError as err:
        code: str | None = err.code
        status: int = err.status
        problem: Problem | None = err.problem
        if problem is not None:
            print(problem["title"], problem["type"], problem.get("detail"))
        print(code, status)
"#,
    );
    // Reading the output without testing the outcome, or the old
    // `{name, output}` shape, does not type-check.
    write(
        dir.path(),
        "wrong.py",
        r#"from follow_up import RunStatus


def unnarrowed(s: RunStatus) -> str:
    return s["output"]["messageId"]
"#,
    );
    write(
        dir.path(),
        "old_shape.py",
        r#"from follow_up import RunStatus


def old(s: RunStatus) -> object:
    return s["outcome"]["name"]
"#,
    );
    let Some(python) = tools::program(TEST, "python3") else {
        return;
    };
    run(Command::new(&python)
        .args(["-m", "py_compile"])
        .arg(&file)
        .arg(&usage));
    // The module's definitions run (typing forms evaluated at import).
    run(Command::new(&python)
        .current_dir(dir.path())
        .args(["-c", "import usage"]));
    let Some(mypy) = tools::mypy_path(TEST) else {
        return;
    };
    run(mypy_strict(&python, &mypy, dir.path()).arg("usage.py"));
    refused(
        mypy_strict(&python, &mypy, dir.path()).arg("wrong.py"),
        "wrong.py:5",
    );
    refused(
        mypy_strict(&python, &mypy, dir.path()).arg("old_shape.py"),
        "old_shape.py:5",
    );
}
