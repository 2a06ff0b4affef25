//! The Python caller: one module, standard library only (`urllib`,
//! `json`, `typing`), `TypedDict`s for the JSON shapes. Targets Python 3.11+
//! (`typing.NotRequired`, `typing.Never`) and passes `mypy --strict`.

use std::collections::BTreeSet;

use coordinator_ir::Program;
use serde_json::Value;

use super::{program_types, quote, Ty, RUN_STATES};

/// Collects the named `TypedDict`s a module needs, children before parents.
struct Py {
    defs: Vec<String>,
    names: BTreeSet<String>,
}

/// `applications-read record` -> `ApplicationsReadRecord`.
fn pascal(hint: &str) -> String {
    let mut out = String::new();
    for word in hint.split(|c: char| !c.is_ascii_alphanumeric()) {
        let mut chars = word.chars();
        if let Some(f) = chars.next() {
            out.push(f.to_ascii_uppercase());
            out.extend(chars);
        }
    }
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, 'T');
    }
    out
}

impl Py {
    fn fresh(&mut self, hint: &str) -> String {
        let base = pascal(hint);
        let mut name = base.clone();
        let mut n = 2;
        while self.names.contains(&name) {
            name = format!("{base}{n}");
            n += 1;
        }
        self.names.insert(name.clone());
        name
    }

    /// The Python type expression of `ty`; an object with properties becomes
    /// a `TypedDict` named after `hint`.
    fn render(&mut self, ty: &Ty, hint: &str) -> String {
        match ty {
            Ty::Unknown => "Any".into(),
            Ty::Never => "Never".into(),
            Ty::String => "str".into(),
            Ty::Number => "float".into(),
            Ty::Integer => "int".into(),
            Ty::Boolean => "bool".into(),
            Ty::Null => "None".into(),
            Ty::Literal(v) => match v {
                Value::String(s) => format!("Literal[{}]", quote(s)),
                Value::Bool(true) => "Literal[True]".into(),
                Value::Bool(false) => "Literal[False]".into(),
                Value::Number(n) if n.is_i64() || n.is_u64() => format!("Literal[{n}]"),
                Value::Number(_) => "float".into(),
                Value::Null | Value::Array(_) | Value::Object(_) => "Any".into(),
            },
            Ty::Array(item) => format!("list[{}]", self.render(item, &format!("{hint} item"))),
            Ty::Map(value) => format!(
                "dict[str, {}]",
                self.render(value, &format!("{hint} value"))
            ),
            Ty::Union(members) => {
                let parts: Vec<String> = members
                    .iter()
                    .enumerate()
                    .map(|(i, m)| self.render(m, &format!("{hint} {}", i + 1)))
                    .collect();
                format!("Union[{}]", parts.join(", "))
            }
            // Python has no intersection of dict types.
            Ty::Intersection(_) => "Any".into(),
            Ty::Object(obj) => {
                if obj.properties.is_empty() {
                    return if obj.open {
                        "dict[str, Any]".into()
                    } else {
                        "dict[str, Never]".into()
                    };
                }
                let members: Vec<String> = obj
                    .properties
                    .iter()
                    .map(|(name, t, required)| {
                        let inner = self.render(t, &format!("{hint} {name}"));
                        let inner = if *required {
                            inner
                        } else {
                            format!("NotRequired[{inner}]")
                        };
                        format!("    {}: {inner},", quote(name))
                    })
                    .collect();
                let name = self.fresh(hint);
                self.defs.push(format!(
                    "{name} = TypedDict(\n    {},\n    {{\n{}\n    }},\n)\n",
                    quote(&name),
                    members.join("\n")
                ));
                name
            }
        }
    }
}

/// Generates the Python module for `program`: `WORKFLOW`,
/// `WORKFLOW_REVISION`, `Input`, `Outcome` (a union of one `TypedDict`
/// `{name, output}` per outcome), `RunState`, `RunStatus`,
/// `CoordinatorProblemError`, and `Client` with `start(input,
/// idempotency_key)`, `get(run_id)` and `cancel(run_id, reason)`.
/// Deterministic: same Program, same text.
pub fn python(program: &Program) -> String {
    let (input, outcomes) = program_types(program);
    let mut py = Py {
        defs: Vec::new(),
        names: [
            "Client",
            "CoordinatorProblemError",
            "RunStatus",
            "RunState",
            "Outcome",
        ]
        .into_iter()
        .map(String::from)
        .collect(),
    };
    let input_expr = py.render(&input, "Input");
    let mut aliases = String::new();
    if input_expr != "Input" {
        aliases.push_str(&format!("Input = {input_expr}\n"));
    }
    let mut members = Vec::new();
    for (name, ty) in &outcomes {
        let output = py.render(ty, &format!("Outcome {name} output"));
        let member = py.fresh(&format!("Outcome {name}"));
        py.defs.push(format!(
            "{member} = TypedDict(\n    {},\n    {{\"name\": Literal[{}], \"output\": {output}}},\n)\n",
            quote(&member),
            quote(name)
        ));
        members.push(member);
    }
    let outcome = match members.len() {
        0 => "Never".to_owned(),
        1 => members.join(""),
        _ => format!("Union[{}]", members.join(", ")),
    };
    let states = RUN_STATES
        .iter()
        .map(|s| quote(s))
        .collect::<Vec<_>>()
        .join(", ");
    let mut out = String::new();
    out.push_str(&format!(
        "# Generated by `coordinatorctl types` from workflow {} revision {}.\n\
         # Do not edit: regenerate after any change that moves the revision.\n\
         \"\"\"Typed caller for workflow {}.\"\"\"\n\n",
        program.workflow,
        program.revision(),
        quote(&program.workflow)
    ));
    out.push_str(
        "from __future__ import annotations\n\n\
         import json\n\
         import urllib.error\n\
         import urllib.parse\n\
         import urllib.request\n\
         from typing import Any, Callable, Final, Literal, Never, NotRequired, TypedDict, Union, cast\n\n",
    );
    out.push_str(&format!(
        "WORKFLOW: Final = {}\nWORKFLOW_REVISION: Final = {}\n\n",
        quote(&program.workflow),
        quote(&program.revision())
    ));
    for d in &py.defs {
        out.push_str(d);
        out.push('\n');
    }
    out.push_str(&aliases);
    out.push_str(&format!("Outcome = {outcome}\n"));
    out.push_str(&format!("RunState = Literal[{states}]\n\n"));
    out.push_str(PY_RUNTIME);
    out
}

const PY_RUNTIME: &str = r#"RunStatus = TypedDict(
    "RunStatus",
    {
        "run": str,
        "workflow": str,
        "revision": str,
        "state": RunState,
        "attention": NotRequired[bool],
        "outcome": NotRequired[Outcome],
    },
)


class CoordinatorProblemError(Exception):
    """An RFC 9457 problem answer; ``code`` is its stable code."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        code = problem.get("code")
        self.status: int = status
        self.code: str | None = code if isinstance(code, str) else None
        self.problem: dict[str, Any] = problem
        detail = problem.get("detail")
        label = self.code or problem.get("title") or "problem"
        super().__init__(f"{status} {label}" + (f": {detail}" if detail else ""))


class Client:
    """Starts and follows runs of this workflow over the service's HTTP API."""

    def __init__(
        self,
        base_url: str,
        token: str | Callable[[], str],
        timeout: float = 30.0,
    ) -> None:
        self._base_url = base_url.rstrip("/")
        self._token = token
        self._timeout = timeout

    def start(self, input: Input, idempotency_key: str) -> RunStatus:
        """Starts a run (201), or returns the run this key already started (200)."""
        body = {"workflow": WORKFLOW, "revision": WORKFLOW_REVISION, "input": input}
        return self._request("POST", "/v1/runs", body, {"Idempotency-Key": idempotency_key})

    def get(self, run_id: str) -> RunStatus:
        """Reads a run's status."""
        return self._request("GET", "/v1/runs/" + urllib.parse.quote(run_id, safe=""))

    def cancel(self, run_id: str, reason: str) -> RunStatus:
        """Asks to cancel a run; ``reason`` is an investigation reference."""
        path = "/v1/runs/" + urllib.parse.quote(run_id, safe="") + "/cancel"
        return self._request("POST", path, {"reason": reason})

    def _request(
        self,
        method: str,
        path: str,
        body: object = None,
        extra: dict[str, str] | None = None,
    ) -> RunStatus:
        token = self._token if isinstance(self._token, str) else self._token()
        headers = {"Accept": "application/json", "Authorization": "Bearer " + token}
        headers.update(extra or {})
        data = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            data = json.dumps(body).encode("utf-8")
        request = urllib.request.Request(
            self._base_url + path, data=data, headers=headers, method=method
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                payload: bytes = response.read()
        except urllib.error.HTTPError as err:
            raw: bytes = err.read()
            try:
                parsed: object = json.loads(raw) if raw else None
            except ValueError:
                parsed = None
            problem: dict[str, Any] = (
                cast(dict[str, Any], parsed)
                if isinstance(parsed, dict)
                else {"status": err.code, "detail": raw.decode("utf-8", "replace")}
            )
            raise CoordinatorProblemError(err.code, problem) from None
        return cast(RunStatus, json.loads(payload))
"#;
