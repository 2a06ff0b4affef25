//! The Python caller: one module, standard library only (`urllib`,
//! `json`, `typing`), `TypedDict`s for the JSON shapes. Targets Python 3.11+
//! (`typing.NotRequired`, `typing.Never`) and passes `mypy --strict`.

use std::collections::BTreeSet;

use coordinator_ir::Program;
use serde_json::Value;

use super::{
    program_types, quote, Field, FieldTy, Ty, PROBLEM_FIELDS, RUN_STATES, RUN_STATUS_FIELDS,
};

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

/// The Python type of a `RunStatus`/`Problem` member other than `outcome`
/// and `output`.
fn field_type(ty: FieldTy) -> &'static str {
    match ty {
        FieldTy::String => "str",
        FieldTy::NullableString => "str | None",
        FieldTy::Integer => "int",
        FieldTy::Boolean => "bool",
        FieldTy::State => "RunState",
        FieldTy::Moves => "list[dict[str, str]]",
        FieldTy::Outcome | FieldTy::Output => "Never",
    }
}

/// A functional `TypedDict` named `name` with the members of `fields`,
/// `outcome` and `output` typed as given.
fn typed_dict(name: &str, fields: &[Field], outcome: &str, output: &str) -> String {
    let members: String = fields
        .iter()
        .map(|f| {
            let ty = match f.ty {
                FieldTy::Outcome => outcome,
                FieldTy::Output => output,
                other => field_type(other),
            };
            let ty = if f.always {
                ty.to_owned()
            } else {
                format!("NotRequired[{ty}]")
            };
            format!("        {}: {ty},\n", quote(f.name))
        })
        .collect();
    format!(
        "{name} = TypedDict(\n    {},\n    {{\n{members}    }},\n)\n",
        quote(name)
    )
}

/// Names the generated module defines or imports, kept from generated
/// `TypedDict`s.
const RESERVED: [&str; 20] = [
    "Any",
    "Callable",
    "Client",
    "CoordinatorProblemError",
    "Final",
    "Literal",
    "Never",
    "NotRequired",
    "OutcomeName",
    "Problem",
    "RunState",
    "RunStatus",
    "RunStatusWithoutOutcome",
    "TypeAlias",
    "TypedDict",
    "TypeGuard",
    "Union",
    "json",
    "urllib",
    "cast",
];

/// Generates the Python module for `program`: `WORKFLOW`,
/// `WORKFLOW_REVISION`, `Input`, `OutcomeName` (a `Literal` of the outcome
/// names), one output type per outcome (`Outcome<Name>Output`), `RunState`,
/// `RunStatus` (a `Union` of `TypedDict`s with the members of
/// [`RUN_STATUS_FIELDS`]: `RunStatusWithoutOutcome` with `outcome` and
/// `output` `None`, and per outcome `N` a `RunStatus<N>` with `outcome:
/// Literal["N"]` and `output` its output type, so `s["outcome"] == "N"`
/// narrows `s["output"]`), `Problem` (a `TypedDict` of
/// [`PROBLEM_FIELDS`]), `CoordinatorProblemError` (`status`, `code`,
/// `problem`) and `Client` with `start(input, idempotency_key)`,
/// `get(run_id)` and `cancel(run_id, reason)`. Deterministic: same
/// Program, same text.
pub fn python(program: &Program) -> String {
    let (input, outcomes) = program_types(program);
    let mut py = Py {
        defs: Vec::new(),
        names: RESERVED.into_iter().map(String::from).collect(),
    };
    let input_expr = py.render(&input, "Input");
    let mut aliases = String::new();
    if input_expr != "Input" {
        aliases.push_str(&format!("Input: TypeAlias = {input_expr}\n"));
    }
    // Each outcome's output type, by a name of its own.
    let mut outputs = Vec::new();
    for (name, ty) in &outcomes {
        let hint = format!("Outcome {name} output");
        let expr = py.render(ty, &hint);
        let output = if matches!(ty, Ty::Object(o) if !o.properties.is_empty()) {
            expr
        } else {
            let alias = py.fresh(&hint);
            aliases.push_str(&format!("{alias}: TypeAlias = {expr}\n"));
            alias
        };
        outputs.push((name, output));
    }
    let mut variants = vec![typed_dict(
        "RunStatusWithoutOutcome",
        RUN_STATUS_FIELDS,
        "None",
        "None",
    )];
    let mut members = vec!["RunStatusWithoutOutcome".to_owned()];
    for (name, output) in &outputs {
        let variant = py.fresh(&format!("RunStatus {name}"));
        variants.push(typed_dict(
            &variant,
            RUN_STATUS_FIELDS,
            &format!("Literal[{}]", quote(name)),
            output,
        ));
        members.push(variant);
    }
    let run_status = match members.len() {
        1 => members.join(""),
        _ => format!("Union[{}]", members.join(", ")),
    };
    let names = if outcomes.is_empty() {
        "Never".to_owned()
    } else {
        format!(
            "Literal[{}]",
            outcomes
                .iter()
                .map(|(n, _)| quote(n))
                .collect::<Vec<_>>()
                .join(", ")
        )
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
         from typing import (\n    Any,\n    Callable,\n    Final,\n    Literal,\n    Never,\n    NotRequired,\n    TypeAlias,\n    TypedDict,\n    TypeGuard,\n    Union,\n    cast,\n)\n\n",
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
    out.push_str(&format!(
        "# The workflow's outcome names: RunStatus[\"outcome\"] once a finish was reached.\nOutcomeName: TypeAlias = {names}\n"
    ));
    out.push_str(&format!(
        "# Run states (SPEC section 8): RunStatus[\"state\"].\nRunState: TypeAlias = Literal[{states}]\n\n"
    ));
    out.push_str(
        "# A run's status as GET /v1/runs/{run} (and a start or a cancel) answers it:\n\
         # \"outcome\" is None until a finish was reached (and after retention erased\n\
         # it); \"output\", beside it, is that outcome's output. Compare\n\
         # s[\"outcome\"] with an outcome name to narrow s[\"output\"].\n",
    );
    for v in &variants {
        out.push_str(v);
        out.push('\n');
    }
    out.push_str(&format!("RunStatus: TypeAlias = {run_status}\n\n"));
    out.push_str("# An RFC 9457 problem document: every non-2xx answer of the service.\n");
    out.push_str(&typed_dict("Problem", PROBLEM_FIELDS, "Never", "Never"));
    out.push_str("\n\n");
    out.push_str(PY_RUNTIME);
    out
}

const PY_RUNTIME: &str = r#"def _is_problem(value: object) -> TypeGuard[Problem]:
    """Whether ``value`` is a problem document (its required members are there)."""
    if not isinstance(value, dict):
        return False
    return (
        isinstance(value.get("type"), str)
        and isinstance(value.get("title"), str)
        and isinstance(value.get("status"), int)
        and isinstance(value.get("code"), str)
    )


class CoordinatorProblemError(Exception):
    """Raised for every non-2xx answer.

    ``status`` is the HTTP status; ``code`` the problem's stable code (e.g.
    ``idempotency.key-reused``) and ``problem`` the document, both ``None``
    only when the answer was not a problem document (e.g. a proxy's error
    page, then in ``body``).
    """

    def __init__(self, status: int, problem: Problem | None, body: str) -> None:
        self.status: int = status
        self.code: str | None = problem["code"] if problem is not None else None
        self.problem: Problem | None = problem
        self.body: str = body
        label = self.code if self.code is not None else "(not a problem document)"
        detail = problem.get("detail") if problem is not None else None
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
            text = raw.decode("utf-8", "replace")
            try:
                parsed: object = json.loads(raw) if raw else None
            except ValueError:
                parsed = None
            problem = parsed if _is_problem(parsed) else None
            raise CoordinatorProblemError(err.code, problem, text) from None
        return cast(RunStatus, json.loads(payload))
"#;
