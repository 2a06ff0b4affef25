//! The typed callers (`coordinatorctl types`) against the service they call
//! (issue 11, item 6): the shapes they declare are held to the api crate's
//! serialised documents, and both generated callers drive the real binary
//! through their declared types. The TypeScript one is compiled with
//! `tsc --strict` and run with `node`, the Python one checked with
//! `mypy --strict` and run with `python3`; each starts a run and reads it
//! until `finished`, reads its outcome and output, gets
//! `idempotency.key-reused` as a typed problem for a reused key, and
//! cancels a waiting run.
//!
//! Tools: `TSC`, `MYPY_PATH`, `node` and `python3`
//! (`coordinator_testkit::tools`): a missing one skips its language after a
//! notice, and fails the test under `CI=true`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use coordinator_callers::{
    python, typescript, FieldTy, PROBLEM_FIELDS, RUN_STATES, RUN_STATUS_FIELDS,
};
use coordinator_ir::Program;
use coordinator_testkit::tools;
use serde_json::{json, Value};

use crate::support::{rfc3339, unix_now, urls, Coordinator, Deployment, OPERATOR, PRODUCER};

/// The member names of a serialised document.
fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .cloned()
        .collect()
}

/// Whether `v` is a JSON value of the declared kind (`null` never is, but
/// for `Output`).
fn of_kind(ty: FieldTy, v: &Value) -> bool {
    match ty {
        FieldTy::String | FieldTy::NullableString | FieldTy::Outcome => v.is_string(),
        FieldTy::Integer => v.is_u64(),
        FieldTy::Boolean => v.is_boolean(),
        FieldTy::State => v.as_str().is_some_and(|s| RUN_STATES.contains(&s)),
        FieldTy::Output => true,
        FieldTy::Moves => v.as_array().is_some_and(|moves| {
            moves.iter().all(|m| {
                m.as_object()
                    .is_some_and(|o| o.values().all(Value::is_string))
            })
        }),
    }
}

/// Holds a field table to two serialisations of an api document: `full`
/// (every optional member set) carries exactly the declared members, each
/// of its kind; `bare` (every optional member unset) carries exactly the
/// members declared always present, the nullable ones `null`.
fn holds(what: &str, fields: &[coordinator_callers::Field], full: &Value, bare: &Value) {
    let declared: BTreeSet<String> = fields.iter().map(|f| f.name.to_owned()).collect();
    let always: BTreeSet<String> = fields
        .iter()
        .filter(|f| f.always)
        .map(|f| f.name.to_owned())
        .collect();
    assert_eq!(keys(full), declared, "{what}: members of {full}");
    assert_eq!(
        keys(bare),
        always,
        "{what}: members always present in {bare}"
    );
    for f in fields {
        assert!(of_kind(f.ty, &full[f.name]), "{what}.{}: {full}", f.name);
        if f.always {
            let nullable = matches!(
                f.ty,
                FieldTy::NullableString | FieldTy::Outcome | FieldTy::Output
            );
            let v = &bare[f.name];
            assert!(
                if nullable {
                    v.is_null()
                } else {
                    of_kind(f.ty, v)
                },
                "{what}.{}: {bare}",
                f.name
            );
        }
    }
}

/// Every member of `doc` is declared by the generated TypeScript and
/// Python of `program`.
fn generated_declare(program: &Program, doc: &Value) {
    let ts = typescript(program);
    let py = python(program);
    for k in keys(doc) {
        let in_ts = match k.as_str() {
            "outcome" => ts.contains("(RunStatusCommon & { outcome: "),
            "output" => ts.contains("; output: "),
            _ => ts.contains(&format!("\n  {k}: ")) || ts.contains(&format!("\n  {k}?: ")),
        };
        assert!(in_ts, "the TypeScript caller does not declare {k}");
        assert!(
            py.contains(&format!("\n        \"{k}\": ")),
            "the Python caller does not declare {k}"
        );
    }
}

/// The `RunStatus` and `Problem` the generated callers declare are the
/// documents the service serialises (`coordinator_api::{RunStatus,
/// Problem}`): the same member names, the same presence (always, or only
/// when set) and the same kinds; and `RunState` lists exactly the VM's run
/// states.
#[test]
fn generated_callers_declare_the_api_documents() {
    let full = serde_json::to_value(coordinator_api::RunStatus {
        run: "r-1".into(),
        workflow: "follow-up".into(),
        revision: "sha256:00".into(),
        state: "finished".into(),
        admitted_at: "2026-01-01T00:00:00Z".into(),
        deadline_at: "2026-02-01T00:00:00Z".into(),
        ended_at: Some("2026-01-01T00:01:00Z".into()),
        outcome: Some("message-accepted".into()),
        output: Some(json!({"messageId": "m-1"})),
        failure: Some("product-refused".into()),
        failure_path: Some("/recipient".into()),
        refusal_code: Some("refused".into()),
        payload_erased: true,
        review: Some("required".into()),
        waiting_for: Some("notices".into()),
        moves: vec![coordinator_api::RunMoveRecord {
            at: "2026-01-01T00:00:30Z".into(),
            from_revision: "sha256:00".into(),
            to_revision: "sha256:01".into(),
            from_step: "due".into(),
            to_step: "due".into(),
            certificate: "sha256:02".into(),
        }],
    })
    .unwrap();
    let bare = serde_json::to_value(coordinator_api::RunStatus {
        run: "r-1".into(),
        workflow: "follow-up".into(),
        revision: "sha256:00".into(),
        state: "running".into(),
        admitted_at: "2026-01-01T00:00:00Z".into(),
        deadline_at: "2026-02-01T00:00:00Z".into(),
        ended_at: None,
        outcome: None,
        output: None,
        failure: None,
        failure_path: None,
        refusal_code: None,
        payload_erased: false,
        review: None,
        waiting_for: None,
        moves: vec![],
    })
    .unwrap();
    holds("RunStatus", RUN_STATUS_FIELDS, &full, &bare);
    let problem = |detail: Option<String>| {
        serde_json::to_value(coordinator_api::Problem::new(
            409,
            "idempotency.key-reused",
            "The key was used with another revision or input",
            detail,
        ))
        .unwrap()
    };
    holds(
        "Problem",
        PROBLEM_FIELDS,
        &problem(Some("detail".into())),
        &problem(None),
    );

    let program = coordinator_testkit::program();
    generated_declare(&program, &full);
    generated_declare(&program, &problem(Some("detail".into())));

    use coordinator_vm::RunStatus as S;
    // A new run state fails to compile here until it is listed.
    let listed = |s: S| match s {
        S::Running
        | S::CancelRequested
        | S::Attention
        | S::Finished
        | S::Failed
        | S::Expired
        | S::Cancelled
        | S::CancelledAfterEffect => s.as_str(),
    };
    let vm: BTreeSet<&str> = [
        S::Running,
        S::CancelRequested,
        S::Attention,
        S::Finished,
        S::Failed,
        S::Expired,
        S::Cancelled,
        S::CancelledAfterEffect,
    ]
    .into_iter()
    .map(listed)
    .collect();
    assert_eq!(vm, RUN_STATES.iter().copied().collect::<BTreeSet<_>>());
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs `cmd` off the runtime (the fakes the service calls are served by
/// this test's runtime); fails the test unless it succeeds. Its stdout.
async fn run(mut cmd: Command, c: &Coordinator) -> String {
    let shown = format!("{cmd:?}");
    let out: Output = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("{shown} did not start: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{shown} failed:\n{stdout}\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        c.log_text()
    );
    stdout
}

/// What a script read through the caller: the finished run and its
/// `messageId`, and the cancelled run.
fn report(stdout: &str) -> (String, String, String) {
    let line = stdout.lines().last().unwrap_or_default();
    let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let s = |k: &str| {
        v[k].as_str()
            .unwrap_or_else(|| panic!("{k}: {v}"))
            .to_owned()
    };
    (s("finished"), s("messageId"), s("cancelled"))
}

/// The values a script is given, as string literals of both languages.
struct Given {
    base: String,
    producer: String,
    operator: String,
    past: String,
    future: String,
}

impl Given {
    fn fill(&self, template: &str, prefix: &str) -> String {
        let q = |s: &str| serde_json::to_string(s).unwrap();
        template
            .replace("@BASE@", &q(&self.base))
            .replace("@PRODUCER@", &q(&self.producer))
            .replace("@OPERATOR@", &q(&self.operator))
            .replace("@PAST@", &q(&self.past))
            .replace("@FUTURE@", &q(&self.future))
            .replace("@P@", prefix)
    }
}

const TS_MAIN: &str = r#"import { Client, CoordinatorProblemError, Input, RunStatus } from "./follow_up.js";

const BASE: string = @BASE@;
const PRODUCER_TOKEN: string = @PRODUCER@;
const OPERATOR_TOKEN: string = @OPERATOR@;
const PAST: string = @PAST@;
const FUTURE: string = @FUTURE@;

function check(ok: boolean, what: string, value: unknown): void {
  if (!ok) {
    throw new Error(`${what}: ${JSON.stringify(value)}`);
  }
}

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Reads the run until its state is `want` (a guard against hanging: 1200 reads). */
async function until(client: Client, run: string, want: string): Promise<RunStatus> {
  for (let i = 0; i < 1200; i++) {
    const s = await client.get(run);
    if (s.state === want) {
      return s;
    }
    await pause(100);
  }
  throw new Error(`run ${run} is not ${want}`);
}

const producer = new Client({ baseUrl: BASE, token: PRODUCER_TOKEN });
const operator = new Client({ baseUrl: BASE, token: () => OPERATOR_TOKEN });

// sendAfter has passed: the run finishes with message-accepted.
const input: Input = { applicationId: "@P@-done", sendAfter: PAST };
const started = await producer.start(input, "@P@-done");
check(started.workflow === "follow-up" && started.revision.startsWith("sha256:"), "started", started);
const done = await until(producer, started.run, "finished");
if (done.outcome !== "message-accepted") {
  throw new Error(`finished without message-accepted: ${JSON.stringify(done)}`);
}
const messageId: string = done.output.messageId;
check(messageId.length > 0 && done.endedAt !== null && done.failure === null, "finished", done);

// The same key and input answer the same run; another input under it is a typed problem.
const again = await producer.start(input, "@P@-done");
check(again.run === started.run, "same key and input", again);
let refused: CoordinatorProblemError | null = null;
try {
  await producer.start({ applicationId: "@P@-other", sendAfter: PAST }, "@P@-done");
} catch (e) {
  if (!(e instanceof CoordinatorProblemError)) {
    throw e;
  }
  refused = e;
}
if (refused === null) {
  throw new Error("a reused key started a run");
}
const code: string | null = refused.code;
const status: number = refused.status;
const problem = refused.problem;
check(code === "idempotency.key-reused" && status === 409, "reused key", [code, status]);
check(problem !== null && problem.status === 409 && problem.code === code && problem.title.length > 0 && problem.type.length > 0, "problem", problem);

// sendAfter far ahead: the run waits, and is cancelled.
const waiting = await producer.start({ applicationId: "@P@-wait", sendAfter: FUTURE }, "@P@-wait");
check(waiting.state === "running" && waiting.outcome === null && waiting.output === null && waiting.endedAt === null, "waiting", waiting);
const asked = await operator.cancel(waiting.run, "incident-@P@");
check(asked.run === waiting.run, "cancel", asked);
const cancelled = await until(operator, waiting.run, "cancelled");
check(cancelled.outcome === null && cancelled.output === null && cancelled.endedAt !== null, "cancelled", cancelled);

console.log(JSON.stringify({ finished: started.run, messageId, cancelled: waiting.run }));
"#;

const PY_MAIN: &str = r#""""Drives the generated caller against the running service."""

import json
import time

from follow_up import Client, CoordinatorProblemError, Input, RunStatus

BASE = @BASE@
PRODUCER_TOKEN = @PRODUCER@
OPERATOR_TOKEN = @OPERATOR@
PAST = @PAST@
FUTURE = @FUTURE@


def check(ok: bool, what: str, value: object) -> None:
    if not ok:
        raise RuntimeError(f"{what}: {value!r}")


def until(client: Client, run: str, want: str) -> RunStatus:
    """Reads the run until its state is ``want`` (a guard against hanging: 1200 reads)."""
    for _ in range(1200):
        s = client.get(run)
        if s["state"] == want:
            return s
        time.sleep(0.1)
    raise RuntimeError(f"run {run} is not {want}")


def main() -> None:
    producer = Client(BASE, PRODUCER_TOKEN)
    operator = Client(BASE, lambda: OPERATOR_TOKEN)

    # sendAfter has passed: the run finishes with message-accepted.
    data: Input = {"applicationId": "@P@-done", "sendAfter": PAST}
    started = producer.start(data, "@P@-done")
    check(
        started["workflow"] == "follow-up" and started["revision"].startswith("sha256:"),
        "started",
        started,
    )
    done = until(producer, started["run"], "finished")
    if done["outcome"] != "message-accepted":
        raise RuntimeError(f"finished without message-accepted: {done!r}")
    message_id: str = done["output"]["messageId"]
    check(
        len(message_id) > 0 and done["endedAt"] is not None and done["failure"] is None,
        "finished",
        done,
    )

    # The same key and input answer the same run; another input under it is
    # a typed problem.
    again = producer.start(data, "@P@-done")
    check(again["run"] == started["run"], "same key and input", again)
    refused: CoordinatorProblemError | None = None
    try:
        producer.start({"applicationId": "@P@-other", "sendAfter": PAST}, "@P@-done")
    except CoordinatorProblemError as err:
        refused = err
    if refused is None:
        raise RuntimeError("a reused key started a run")
    code: str | None = refused.code
    status: int = refused.status
    check(code == "idempotency.key-reused" and status == 409, "reused key", (code, status))
    problem = refused.problem
    if problem is None:
        raise RuntimeError(f"no problem document: {refused.body}")
    check(
        problem["status"] == 409
        and problem["code"] == code
        and len(problem["title"]) > 0
        and len(problem["type"]) > 0,
        "problem",
        problem,
    )

    # sendAfter far ahead: the run waits, and is cancelled.
    waiting = producer.start({"applicationId": "@P@-wait", "sendAfter": FUTURE}, "@P@-wait")
    check(
        waiting["state"] == "running"
        and waiting["outcome"] is None
        and waiting["output"] is None
        and waiting["endedAt"] is None,
        "waiting",
        waiting,
    )
    asked = operator.cancel(waiting["run"], "incident-@P@")
    check(asked["run"] == waiting["run"], "cancel", asked)
    cancelled = until(operator, waiting["run"], "cancelled")
    check(
        cancelled["outcome"] is None
        and cancelled["output"] is None
        and cancelled["endedAt"] is not None,
        "cancelled",
        cancelled,
    )

    print(json.dumps({"finished": started["run"], "messageId": message_id, "cancelled": waiting["run"]}))


main()
"#;

/// The TypeScript caller: compiled with `tsc --strict` (ES modules), run
/// with `node`; what it read.
async fn typescript_journey(
    program: &Program,
    given: &Given,
    tsc: &Path,
    c: &Coordinator,
) -> (String, String, String) {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "follow_up.ts", &typescript(program));
    write(dir.path(), "main.ts", &given.fill(TS_MAIN, "ts"));
    let out = dir.path().join("out");
    let mut compile = Command::new(tsc);
    compile
        .current_dir(dir.path())
        .args([
            "--strict",
            "--target",
            "es2022",
            "--lib",
            "es2022,dom",
            "--module",
            "esnext",
            "--moduleResolution",
            "bundler",
            "--outDir",
        ])
        .arg(&out)
        .args(["follow_up.ts", "main.ts"]);
    run(compile, c).await;
    write(&out, "package.json", "{\"type\": \"module\"}\n");
    let mut node = Command::new("node");
    node.current_dir(&out).arg("main.js");
    report(&run(node, c).await)
}

/// The Python caller: checked with `mypy --strict`, run with `python3`;
/// what it read.
async fn python_journey(
    program: &Program,
    given: &Given,
    mypy: &Path,
    c: &Coordinator,
) -> (String, String, String) {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "follow_up.py", &python(program));
    write(dir.path(), "main.py", &given.fill(PY_MAIN, "py"));
    let mut check = Command::new("python3");
    check
        .current_dir(dir.path())
        .env("PYTHONPATH", mypy)
        .env("MYPY_CACHE_DIR", dir.path().join(".mypy_cache"))
        .args([
            "-m",
            "mypy",
            "--strict",
            "--python-version",
            "3.11",
            "follow_up.py",
            "main.py",
        ]);
    run(check, c).await;
    let mut python = Command::new("python3");
    python
        .current_dir(dir.path())
        .env_remove("PYTHONPATH")
        .arg("main.py");
    report(&run(python, c).await)
}

/// What the caller read is what the service holds: the finished run's
/// outcome and `messageId`, and the cancelled run.
async fn the_service_agrees(d: &Deployment, c: &Coordinator, read: &(String, String, String)) {
    let (finished, message_id, cancelled) = read;
    let v = d.get(c, &format!("/v1/runs/{finished}")).await.unwrap();
    assert_eq!(v["state"], "finished", "{v}");
    assert_eq!(v["outcome"], "message-accepted", "{v}");
    assert_eq!(v["output"]["messageId"], message_id.as_str(), "{v}");
    let v = d.get(c, &format!("/v1/runs/{cancelled}")).await.unwrap();
    assert_eq!(v["state"], "cancelled", "{v}");
    assert!(v["outcome"].is_null(), "{v}");
}

#[tokio::test]
async fn generated_callers_drive_the_real_service() {
    const TEST: &str = "generated_callers_drive_the_real_service";
    let Some(urls) = urls(TEST) else {
        return;
    };
    // Each language runs when its tools are there (under CI=true they must be).
    let ts_tools = tools::tsc(TEST).filter(|_| tools::program(TEST, "node").is_some());
    let py_tools = tools::program(TEST, "python3").and_then(|_| tools::mypy_path(TEST));
    if ts_tools.is_none() && py_tools.is_none() {
        return;
    }
    let d = Deployment::new(urls, 2_000).await;
    let definition = d.example.compile(d.dir.path());
    assert_eq!(definition.revision, d.revision, "the deployed revision");
    let program = definition.program;
    let c = d.spawn().await;
    for app in ["ts-done", "py-done"] {
        d.record(app);
    }
    let given = Given {
        base: c.base.clone(),
        producer: d.token(PRODUCER),
        operator: d.token(OPERATOR),
        past: rfc3339(unix_now() - 60),
        future: rfc3339(unix_now() + 86_400),
    };
    let mut sent = 0;
    if let Some(tsc) = &ts_tools {
        let read = typescript_journey(&program, &given, tsc, &c).await;
        the_service_agrees(&d, &c, &read).await;
        sent += 1;
    }
    if let Some(mypy) = &py_tools {
        let read = python_journey(&program, &given, mypy, &c).await;
        the_service_agrees(&d, &c, &read).await;
        sent += 1;
    }
    // One message per finished run: the reused key and the cancelled
    // waits sent nothing.
    assert_eq!(d.messaging.messages().len(), sent);
    drop(c);
    d.cleanup().await;
}
