//! Resolution and checks (SPEC §2.3): names, limits, types, operation
//! aliases, Functions, the step graph, the must-dataflow of step outputs, and
//! every mapping's paths and fit. Collects every independent finding.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use coordinator_ir::catalogue::{self, OperationDescriptor};
use coordinator_ir::instant::Instant;
use coordinator_source::{Diagnostic, Located, YamlDocument};
use serde_json::{json, Value};

use crate::ast::*;
use crate::functions::ScriptFn;
use crate::schema::{self, Fit, Sch, Ty, Walk};

/// Limits of SPEC §2.
pub const MAX_STEPS: usize = 64;
/// Most outcomes.
pub const MAX_OUTCOMES: usize = 64;
/// Most operation aliases.
pub const MAX_ALIASES: usize = 16;
/// Most Functions.
pub const MAX_FUNCTIONS: usize = 128;
/// Most cases per `choose`.
pub const MAX_CASES: usize = 32;
/// Most members per `fields` mapping.
pub const MAX_FIELDS: usize = 64;
/// Most inputs per Function.
pub const MAX_FUNCTION_INPUTS: usize = 16;
/// Largest run deadline, seconds.
pub const MAX_DEADLINE_SECONDS: u64 = 31_536_000;

/// The repair line of every "does not fit" error.
const MISMATCH_NEXT: &str =
    "Map a value of the type the schema declares there, or change the declared type.";

pub(crate) fn esc(t: &str) -> String {
    t.replace('~', "~0").replace('/', "~1")
}

pub(crate) fn valid_name(n: &str) -> bool {
    let mut chars = n.chars();
    matches!(chars.next(), Some('a'..='z'))
        && n.len() <= 64
        && chars.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '-'))
}

/// A resolved operation alias.
pub(crate) struct Alias {
    pub desc: OperationDescriptor,
    pub input: Sch,
    pub output: Sch,
    pub completion: Option<(String, Sch)>,
    pub action: Option<String>,
}

/// A resolved Function.
pub(crate) struct Func {
    pub entrypoint: String,
    /// Declared inputs in declaration order, with their schema when resolved.
    pub inputs: Vec<(String, TypeRef, Option<Sch>)>,
    pub output: Option<Sch>,
    /// The entrypoint's parameters in order, when it was found and matches.
    pub params: Option<Vec<String>>,
}

/// How an omitted Function argument was bound (SPEC §2.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Binding {
    Input,
    Step(String),
}

/// Which output a step has on a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Variant {
    /// A call's `next` route.
    Success,
    /// A call's `onDeclaredRefusal` route.
    Refusal,
    /// A wait-for's `next` route.
    Completion,
}

/// A successor: target step, the authored key, and the output the edge adds.
type Edge = (String, &'static str, Option<(String, Variant)>);

/// Step name -> the outputs it may have here (present = completed on every route).
type Facts = BTreeMap<String, BTreeSet<Variant>>;

/// Where a mapping is evaluated.
#[derive(Clone, Copy)]
enum Env<'a> {
    /// In a step; `None` facts when the step is unreachable (route checks skipped).
    Step(&'a str, Option<&'a Facts>),
    /// In a trigger.
    Trigger,
}

/// Everything the later phases (lowering, explain) need from checking.
pub(crate) struct Checked {
    pub aliases: BTreeMap<String, Alias>,
    pub functions: BTreeMap<String, Func>,
    pub input: Option<Sch>,
    pub outcomes: BTreeMap<String, Sch>,
    /// Mapping pointer -> implicit bindings, in the Function's input order.
    pub bindings: HashMap<String, Vec<(String, Binding)>>,
}

pub(crate) struct Checker<'a> {
    doc: &'a YamlDocument,
    p: &'a ProjectFile,
    pub diags: Vec<Diagnostic>,
    types: BTreeMap<String, Option<Sch>>,
    out: Checked,
    script: Option<Vec<ScriptFn>>,
}

impl<'a> Checker<'a> {
    pub fn new(doc: &'a YamlDocument, p: &'a ProjectFile, script: Option<Vec<ScriptFn>>) -> Self {
        Checker {
            doc,
            p,
            diags: Vec::new(),
            types: BTreeMap::new(),
            out: Checked {
                aliases: BTreeMap::new(),
                functions: BTreeMap::new(),
                input: None,
                outcomes: BTreeMap::new(),
                bindings: HashMap::new(),
            },
            script,
        }
    }

    fn at(&self, ptr: &str) -> Located {
        self.doc.locate(ptr)
    }

    fn err(&mut self, code: &str, ptr: &str, message: impl Into<String>, next: impl Into<String>) {
        let d = Diagnostic::error(code, self.at(ptr), message, next);
        self.diags.push(d);
    }

    fn err_key(
        &mut self,
        code: &str,
        ptr: &str,
        message: impl Into<String>,
        next: impl Into<String>,
    ) {
        let d = Diagnostic::error(code, self.doc.locate_key(ptr), message, next);
        self.diags.push(d);
    }

    fn warn(&mut self, code: &str, ptr: &str, message: impl Into<String>, next: impl Into<String>) {
        let d = Diagnostic::warning(code, self.at(ptr), message, next);
        self.diags.push(d);
    }

    /// Runs every check; returns what lowering needs.
    pub fn run(mut self) -> (Checked, Vec<Diagnostic>) {
        self.names_and_limits();
        self.resolve_types();
        self.resolve_aliases();
        self.resolve_outcomes();
        let input = self.resolve(&self.p.workflow.input.clone(), "/workflow/input", 0);
        self.out.input = input;
        self.resolve_functions();
        self.check_workflow();
        self.check_triggers();
        (self.out, self.diags)
    }

    fn names_and_limits(&mut self) {
        let p = self.p;
        if !valid_name(&p.project.id) {
            self.err(
                "coordinator.name.invalid",
                "/project/id",
                format!("`{}` is not a valid project id; names match {NAME_PATTERN}", p.project.id),
                "Use lowercase letters, digits and hyphens, starting with a letter (at most 64 characters).",
            );
        }
        let groups: Vec<(&str, Vec<&String>)> = vec![
            ("/types", p.types.iter().map(|(k, _)| k).collect()),
            ("/operations", p.operations.iter().map(|(k, _)| k).collect()),
            ("/functions", p.functions.iter().map(|(k, _)| k).collect()),
            ("/triggers", p.triggers.iter().map(|(k, _)| k).collect()),
            (
                "/workflow/steps",
                p.workflow.steps.iter().map(|(k, _)| k).collect(),
            ),
            (
                "/workflow/outcomes",
                p.workflow.outcomes.iter().map(|(k, _)| k).collect(),
            ),
        ];
        for (base, names) in groups {
            for n in names {
                if !valid_name(n) {
                    self.err_key(
                        "coordinator.name.invalid",
                        &format!("{base}/{}", esc(n)),
                        format!("`{n}` is not a valid name; names match {NAME_PATTERN}"),
                        "Use lowercase letters, digits and hyphens, starting with a letter (at most 64 characters).",
                    );
                }
            }
        }
        let limits = [
            (
                "coordinator.limit.steps",
                "/workflow/steps",
                p.workflow.steps.len(),
                MAX_STEPS,
                "steps",
            ),
            (
                "coordinator.limit.outcomes",
                "/workflow/outcomes",
                p.workflow.outcomes.len(),
                MAX_OUTCOMES,
                "outcomes",
            ),
            (
                "coordinator.limit.operations",
                "/operations",
                p.operations.len(),
                MAX_ALIASES,
                "operation aliases",
            ),
            (
                "coordinator.limit.functions",
                "/functions",
                p.functions.len(),
                MAX_FUNCTIONS,
                "Functions",
            ),
        ];
        for (code, ptr, n, max, what) in limits {
            if n > max {
                self.err(
                    code,
                    ptr,
                    format!("the project declares {n} {what}; at most {max} are accepted"),
                    format!("Split the workflow or merge {what} to stay within {max}."),
                );
            }
        }
        let d = p.workflow.deadline_seconds;
        if d == 0 || d > MAX_DEADLINE_SECONDS {
            self.err(
                "coordinator.workflow.deadline",
                "/workflow/deadlineSeconds",
                format!("deadlineSeconds is {d}; it must be between 1 and {MAX_DEADLINE_SECONDS} (365 days)"),
                "Set deadlineSeconds to at most 31536000.",
            );
        }
    }

    fn report_schema(&mut self, ptr: &str, root: &Value) -> bool {
        let faults = schema::validate_authored(root);
        let ok = faults.is_empty();
        for f in faults {
            self.err(f.code, &format!("{ptr}{}", f.pointer), f.message, f.next);
        }
        ok
    }

    fn resolve_types(&mut self) {
        for (name, s) in self.p.types.iter() {
            let ptr = format!("/types/{}", esc(name));
            let ok = self.report_schema(&ptr, &s.0);
            self.types
                .insert(name.clone(), ok.then(|| Sch::new(s.0.clone())));
        }
    }

    /// Resolves a type reference or inline schema at `ptr`.
    fn resolve(&mut self, t: &TypeRef, ptr: &str, depth: usize) -> Option<Sch> {
        let Some((key, name)) = t.reference() else {
            if self.report_schema(ptr, &t.0) {
                return Some(Sch::new(t.0.clone()));
            }
            return None;
        };
        let kptr = format!("{ptr}/{key}");
        let Some(name) = name.as_str() else {
            self.err(
                "coordinator.type.unknown",
                &kptr,
                format!(
                    "`{key}` must name a declaration, found {}",
                    schema::json_kind(name)
                ),
                "Write the name as a string.",
            );
            return None;
        };
        let unknown = |what: &str, list: Vec<&String>| {
            (
                format!("`{key}: {name}` names no {what}"),
                if list.is_empty() {
                    format!("Declare the {what} first.")
                } else {
                    format!(
                        "Use one of: {}.",
                        list.iter()
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                },
            )
        };
        match key {
            "typeRef" => match self.types.get(name) {
                Some(s) => s.clone(),
                None => {
                    let (m, n) = unknown(
                        "entry under `types`",
                        self.p.types.iter().map(|(k, _)| k).collect(),
                    );
                    self.err("coordinator.type.unknown", &kptr, m, n);
                    None
                }
            },
            "operationInput" | "operationOutput" | "completion" => {
                if let Some(a) = self.out.aliases.get(name) {
                    return match key {
                        "operationInput" => Some(a.input.clone()),
                        "operationOutput" => Some(a.output.clone()),
                        _ => match &a.completion {
                            Some((_, s)) => Some(s.clone()),
                            None => {
                                let id = a.desc.id.clone();
                                self.err(
                                    "coordinator.type.no-completion",
                                    &kptr,
                                    format!("operation alias `{name}` uses {id}, which exposes no completion"),
                                    "Name an alias of an operation that exposes a completion, such as casework.submit-review-request/v1.",
                                );
                                None
                            }
                        },
                    };
                }
                if self.p.operations.contains(name) {
                    return None; // the alias has its own error
                }
                let (m, n) = unknown(
                    "operation alias",
                    self.p.operations.iter().map(|(k, _)| k).collect(),
                );
                self.err("coordinator.type.unknown", &kptr, m, n);
                None
            }
            "outcome" => {
                if let Some(s) = self.out.outcomes.get(name) {
                    return Some(s.clone());
                }
                match self.p.workflow.outcomes.get(name) {
                    Some(t) if depth < 8 => {
                        let t = t.clone();
                        self.resolve(&t, &format!("/workflow/outcomes/{}", esc(name)), depth + 1)
                    }
                    Some(_) => None,
                    None => {
                        let (m, n) = unknown(
                            "outcome",
                            self.p.workflow.outcomes.iter().map(|(k, _)| k).collect(),
                        );
                        self.err("coordinator.type.unknown", &kptr, m, n);
                        None
                    }
                }
            }
            _ => None,
        }
    }

    fn resolve_aliases(&mut self) {
        let ops: Vec<(String, OperationAlias)> = self
            .p
            .operations
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (name, a) in ops {
            let ptr = format!("/operations/{}", esc(&name));
            if !valid_name(&a.connection) {
                self.err(
                    "coordinator.name.invalid",
                    &format!("{ptr}/connection"),
                    format!(
                        "`{}` is not a valid connection name; names match {NAME_PATTERN}",
                        a.connection
                    ),
                    "Use lowercase letters, digits and hyphens, starting with a letter.",
                );
            }
            let Some(desc) = catalogue::lookup(&a.uses) else {
                self.err(
                    "coordinator.operation.unknown",
                    &format!("{ptr}/uses"),
                    format!("`{}` is not a host operation", a.uses),
                    format!("Use one of: {}.", catalogue::OPERATION_IDS.join(", ")),
                );
                continue;
            };
            let mut ok = true;
            let action = match (&a.action, desc.needs_action) {
                (None, true) => {
                    self.err(
                        "coordinator.operation.action-required",
                        &ptr,
                        format!("{} needs the BReg action it invokes", desc.id),
                        "Add `action: {id: ACTION, kind: immediate}` to the alias.",
                    );
                    ok = false;
                    None
                }
                (Some(_), false) => {
                    self.err(
                        "coordinator.operation.action-not-allowed",
                        &format!("{ptr}/action"),
                        format!(
                            "{} takes no action; only breg.invoke-action/v1 does",
                            desc.id
                        ),
                        "Remove `action` from this alias.",
                    );
                    ok = false;
                    None
                }
                (Some(act), true) => {
                    if act.kind == ActionKind::Proposal {
                        self.err(
                            "coordinator.operation.proposal-action",
                            &format!("{ptr}/action/kind"),
                            format!("action `{}` is a BReg Proposal; a workflow may invoke immediate actions only", act.id),
                            "Invoke an immediate action, or submit the proposal for review outside the workflow.",
                        );
                        ok = false;
                    }
                    Some(act.id.clone())
                }
                (None, false) => None,
            };
            let base = catalogue::output_schema(&desc.id).unwrap_or(Value::Bool(true));
            let output = match &a.output {
                None => Some(Sch::new(base)),
                Some(t) => {
                    if t.reference().is_some_and(|(k, _)| k != "typeRef") {
                        self.err(
                            "coordinator.type.reference-kind",
                            &format!("{ptr}/output"),
                            "an alias's output may narrow the operation output with `typeRef` or an inline schema only",
                            "Use `typeRef: NAME` or an inline schema.",
                        );
                        None
                    } else {
                        self.resolve(t, &format!("{ptr}/output"), 0).map(|narrow| {
                            let rebased = schema::rebase(narrow.node(), "/allOf/1");
                            Sch::new(json!({"allOf": [base, rebased]}))
                        })
                    }
                }
            };
            let (Some(output), true) = (output, ok) else {
                continue;
            };
            let completion = desc.completions.first().and_then(|c| {
                catalogue::completion_schema(&desc.id, c).map(|s| (c.clone(), Sch::new(s)))
            });
            let input = Sch::new(catalogue::input_schema(&desc.id).unwrap_or(Value::Bool(true)));
            self.out.aliases.insert(
                name,
                Alias {
                    desc,
                    input,
                    output,
                    completion,
                    action,
                },
            );
        }
    }

    fn resolve_outcomes(&mut self) {
        let outs: Vec<(String, TypeRef)> = self
            .p
            .workflow
            .outcomes
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (name, t) in outs {
            let ptr = format!("/workflow/outcomes/{}", esc(&name));
            if let Some(s) = self.resolve(&t, &ptr, 0) {
                self.out.outcomes.insert(name, s);
            }
        }
    }

    fn resolve_functions(&mut self) {
        let fns: Vec<(String, FunctionDecl)> = self
            .p
            .functions
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (name, f) in fns {
            let ptr = format!("/functions/{}", esc(&name));
            if f.source != crate::FUNCTIONS_FILE {
                self.err(
                    "coordinator.function.source",
                    &format!("{ptr}/source"),
                    format!(
                        "Function source `{}` is not accepted; every Function lives in {}",
                        f.source,
                        crate::FUNCTIONS_FILE
                    ),
                    format!(
                        "Move the entrypoint into {} and set `source: {}`.",
                        crate::FUNCTIONS_FILE,
                        crate::FUNCTIONS_FILE
                    ),
                );
            }
            if f.inputs.len() > MAX_FUNCTION_INPUTS {
                self.err(
                    "coordinator.limit.function-inputs",
                    &format!("{ptr}/inputs"),
                    format!("Function `{name}` declares {} inputs; at most {MAX_FUNCTION_INPUTS} are accepted", f.inputs.len()),
                    "Pass fewer, larger inputs (an object) instead.",
                );
            }
            let mut inputs = Vec::new();
            for (iname, t) in f.inputs.iter() {
                let s = self.resolve(t, &format!("{ptr}/inputs/{}", esc(iname)), 0);
                inputs.push((iname.clone(), t.clone(), s));
            }
            let output = self.resolve(&f.output, &format!("{ptr}/output"), 0);
            let params = match &self.script {
                None => None, // the source did not parse: reported already
                Some(fns) => {
                    let candidates: Vec<&ScriptFn> =
                        fns.iter().filter(|s| s.name == f.entrypoint).collect();
                    let declared: BTreeSet<&str> =
                        f.inputs.iter().map(|(k, _)| k.as_str()).collect();
                    if candidates.is_empty() {
                        let known: Vec<&str> = fns.iter().map(|s| s.name.as_str()).collect();
                        self.err(
                            "coordinator.function.entrypoint",
                            &format!("{ptr}/entrypoint"),
                            format!(
                                "{} defines no function `{}`",
                                crate::FUNCTIONS_FILE,
                                f.entrypoint
                            ),
                            if known.is_empty() {
                                format!(
                                    "Define `fn {}(...)` in {}.",
                                    f.entrypoint,
                                    crate::FUNCTIONS_FILE
                                )
                            } else {
                                format!(
                                    "Define `fn {}(...)` in {}, or name one of: {}.",
                                    f.entrypoint,
                                    crate::FUNCTIONS_FILE,
                                    known.join(", ")
                                )
                            },
                        );
                        None
                    } else if let Some(c) = candidates.iter().find(|c| {
                        c.params.iter().map(String::as_str).collect::<BTreeSet<_>>() == declared
                            && c.params.len() == declared.len()
                    }) {
                        Some(c.params.clone())
                    } else {
                        let params = candidates
                            .first()
                            .map(|c| c.params.clone())
                            .unwrap_or_default();
                        let extra: Vec<&str> = declared
                            .iter()
                            .filter(|d| !params.iter().any(|p| p == *d))
                            .copied()
                            .collect();
                        let missing: Vec<&str> = params
                            .iter()
                            .map(String::as_str)
                            .filter(|p| !declared.contains(p))
                            .collect();
                        let mut parts = Vec::new();
                        if !extra.is_empty() {
                            parts.push(format!(
                                "declared input {} is not a parameter of `{}`",
                                quote_list(&extra),
                                f.entrypoint
                            ));
                        }
                        if !missing.is_empty() {
                            parts.push(format!(
                                "parameter {} of `{}` is not a declared input",
                                quote_list(&missing),
                                f.entrypoint
                            ));
                        }
                        if parts.is_empty() {
                            parts.push(format!("`{}` repeats a parameter name", f.entrypoint));
                        }
                        let at = extra
                            .first()
                            .map(|e| format!("{ptr}/inputs/{}", esc(e)))
                            .unwrap_or_else(|| format!("{ptr}/inputs"));
                        self.err_key(
                            "coordinator.function.parameters",
                            &at,
                            format!("{}; arguments are passed by name, so the names must match (`fn {}({})`)", parts.join("; "), f.entrypoint, params.join(", ")),
                            "Rename the declared inputs or the Rhai parameters so the two sets are equal.",
                        );
                        None
                    }
                }
            };
            self.out.functions.insert(
                name,
                Func {
                    entrypoint: f.entrypoint.clone(),
                    inputs,
                    output,
                    params,
                },
            );
        }
    }

    fn step_ptr(name: &str) -> String {
        format!("/workflow/steps/{}", esc(name))
    }

    /// Successors with the fact each edge adds, in explain order.
    fn edges(name: &str, step: &Step) -> Vec<Edge> {
        let me = name.to_owned();
        match step {
            Step::Call(c) => {
                let mut v = vec![(c.next.clone(), "next", Some((me.clone(), Variant::Success)))];
                if let Some(r) = &c.on_declared_refusal {
                    v.push((r.clone(), "onDeclaredRefusal", Some((me, Variant::Refusal))));
                }
                v
            }
            Step::Choose(c) => c
                .cases
                .iter()
                .map(|(label, s)| (s.clone(), "cases", Some((label.clone(), Variant::Success))))
                .map(|(s, k, _)| (s, k, None))
                .collect(),
            Step::WaitUntil(w) => vec![(w.next.clone(), "next", None)],
            Step::WaitFor(w) => {
                let mut v = vec![(w.next.clone(), "next", Some((me, Variant::Completion)))];
                if let Some(t) = &w.on_timeout {
                    v.push((t.clone(), "onTimeout", None));
                }
                if let Some(t) = &w.on_cancel {
                    v.push((t.clone(), "onCancel", None));
                }
                v
            }
            Step::Finish(_) => Vec::new(),
        }
    }

    fn check_workflow(&mut self) {
        let p: &'a ProjectFile = self.p;
        let wf = &p.workflow;
        let steps = &wf.steps;
        // References to steps.
        if !steps.contains(&wf.start) {
            self.err(
                "coordinator.step.unknown",
                "/workflow/start",
                format!("start names no step: `{}`", wf.start),
                format!(
                    "Set start to one of: {}.",
                    names(steps.iter().map(|(k, _)| k))
                ),
            );
        }
        for (name, step) in steps.iter() {
            let sp = Self::step_ptr(name);
            let refs: Vec<(String, String)> = match step {
                Step::Call(c) => {
                    let mut v = vec![(format!("{sp}/next"), c.next.clone())];
                    if let Some(r) = &c.on_declared_refusal {
                        v.push((format!("{sp}/onDeclaredRefusal"), r.clone()));
                    }
                    v
                }
                Step::Choose(c) => c
                    .cases
                    .iter()
                    .map(|(l, s)| (format!("{sp}/cases/{}", esc(l)), s.clone()))
                    .collect(),
                Step::WaitUntil(w) => vec![(format!("{sp}/next"), w.next.clone())],
                Step::WaitFor(w) => {
                    let mut v = vec![(format!("{sp}/next"), w.next.clone())];
                    if let Some(t) = &w.on_timeout {
                        v.push((format!("{sp}/onTimeout"), t.clone()));
                    }
                    if let Some(t) = &w.on_cancel {
                        v.push((format!("{sp}/onCancel"), t.clone()));
                    }
                    v
                }
                Step::Finish(_) => Vec::new(),
            };
            for (ptr, target) in refs {
                if !steps.contains(&target) {
                    self.err(
                        "coordinator.step.unknown",
                        &ptr,
                        format!("`{target}` is not a step of this workflow"),
                        format!(
                            "Name one of the declared steps: {}.",
                            names(steps.iter().map(|(k, _)| k))
                        ),
                    );
                }
            }
        }
        let broken_refs = self
            .diags
            .iter()
            .any(|d| d.code == "coordinator.step.unknown");
        // Reachability.
        let mut reach: Vec<String> = Vec::new();
        let mut seen = BTreeSet::new();
        let mut queue = VecDeque::new();
        if steps.contains(&wf.start) {
            queue.push_back(wf.start.clone());
        }
        while let Some(n) = queue.pop_front() {
            if !seen.insert(n.clone()) {
                continue;
            }
            reach.push(n.clone());
            if let Some(s) = steps.get(&n) {
                for (t, _, _) in Self::edges(&n, s) {
                    if steps.contains(&t) {
                        queue.push_back(t);
                    }
                }
            }
        }
        if steps.contains(&wf.start) && !broken_refs {
            for (name, _) in steps.iter() {
                if !seen.contains(name) {
                    self.err_key(
                        "coordinator.graph.unreachable",
                        &Self::step_ptr(name),
                        format!("step `{name}` is not reachable from start `{}`", wf.start),
                        "Route to the step from an earlier step, or remove it.",
                    );
                }
            }
        }
        // Cycles (each back edge once).
        let mut color: BTreeMap<String, u8> = BTreeMap::new();
        let mut stack: Vec<String> = Vec::new();
        let order: Vec<String> = steps.iter().map(|(k, _)| k.clone()).collect();
        for root in &order {
            if color.get(root).copied().unwrap_or(0) == 0 {
                self.dfs(root, &mut color, &mut stack);
            }
        }
        // Every route ends in a finish.
        let mut ends: BTreeSet<String> = steps
            .iter()
            .filter(|(_, s)| matches!(s, Step::Finish(_)))
            .map(|(k, _)| k.clone())
            .collect();
        loop {
            let before = ends.len();
            for (name, s) in steps.iter() {
                if !ends.contains(name)
                    && Self::edges(name, s)
                        .iter()
                        .any(|(t, _, _)| ends.contains(t))
                {
                    ends.insert(name.clone());
                }
            }
            if ends.len() == before {
                break;
            }
        }
        for name in reach.iter().filter(|_| !broken_refs) {
            if !ends.contains(name) {
                self.err_key(
                    "coordinator.graph.no-finish",
                    &Self::step_ptr(name),
                    format!("no route from step `{name}` reaches a finish"),
                    "Route every path to a `finish` step.",
                );
            }
        }
        // Outcomes used.
        let used: BTreeSet<&str> = steps
            .iter()
            .filter_map(|(_, s)| match s {
                Step::Finish(f) => Some(f.outcome.as_str()),
                Step::Call(_) | Step::Choose(_) | Step::WaitUntil(_) | Step::WaitFor(_) => None,
            })
            .collect();
        for (name, _) in wf.outcomes.iter() {
            if !used.contains(name.as_str()) {
                self.err_key(
                    "coordinator.outcome.unused",
                    &format!("/workflow/outcomes/{}", esc(name)),
                    format!("outcome `{name}` is declared but no finish step ends with it"),
                    "Finish with the outcome on some route, or remove it.",
                );
            }
        }
        // Must-dataflow: greatest fixpoint from start.
        let facts = self.dataflow(&reach);
        for (name, step) in steps.iter() {
            let f = facts.get(name);
            self.check_step(name, step, f, &facts);
        }
    }

    fn dfs(&mut self, n: &str, color: &mut BTreeMap<String, u8>, stack: &mut Vec<String>) {
        let p: &'a ProjectFile = self.p;
        let steps = &p.workflow.steps;
        color.insert(n.to_owned(), 1);
        stack.push(n.to_owned());
        if let Some(s) = steps.get(n) {
            for (t, key, _) in Self::edges(n, s) {
                if !steps.contains(&t) {
                    continue;
                }
                match color.get(&t).copied().unwrap_or(0) {
                    0 => self.dfs(&t, color, stack),
                    1 => {
                        let from = stack.iter().position(|x| *x == t).unwrap_or(0);
                        let mut route: Vec<String> = stack
                            .get(from..)
                            .map(<[String]>::to_vec)
                            .unwrap_or_default();
                        route.push(t.clone());
                        let ptr = if key == "cases" {
                            let label = match s {
                                Step::Choose(c) => c
                                    .cases
                                    .iter()
                                    .find(|(_, v)| **v == t)
                                    .map(|(l, _)| l.clone()),
                                Step::Call(_)
                                | Step::WaitUntil(_)
                                | Step::WaitFor(_)
                                | Step::Finish(_) => None,
                            };
                            format!(
                                "{}/cases/{}",
                                Self::step_ptr(n),
                                esc(&label.unwrap_or_default())
                            )
                        } else {
                            format!("{}/{key}", Self::step_ptr(n))
                        };
                        self.err(
                            "coordinator.graph.cycle",
                            &ptr,
                            format!(
                                "the route {} returns to `{t}`; a workflow must be acyclic",
                                route.join(" -> ")
                            ),
                            "Route forward to a later step; to repeat work, start another run.",
                        );
                    }
                    _ => {}
                }
            }
        }
        stack.pop();
        color.insert(n.to_owned(), 2);
    }

    fn dataflow(&self, reach: &[String]) -> BTreeMap<String, Facts> {
        let steps = &self.p.workflow.steps;
        let mut facts: BTreeMap<String, Facts> = BTreeMap::new();
        if reach.is_empty() {
            return facts;
        }
        facts.insert(self.p.workflow.start.clone(), Facts::new());
        let mut changed = true;
        let mut rounds = 0;
        while changed && rounds < 1000 {
            changed = false;
            rounds += 1;
            for n in reach {
                let Some(cur) = facts.get(n).cloned() else {
                    continue;
                };
                let Some(s) = steps.get(n) else { continue };
                for (t, _, add) in Self::edges(n, s) {
                    if !steps.contains(&t) {
                        continue;
                    }
                    let mut out = cur.clone();
                    if let Some((k, v)) = add {
                        out.insert(k, BTreeSet::from([v]));
                    }
                    let next = match facts.get(&t) {
                        None => out,
                        Some(old) => meet(old, &out),
                    };
                    if t == self.p.workflow.start {
                        // The start has no route before it.
                        continue;
                    }
                    if facts.get(&t) != Some(&next) {
                        facts.insert(t, next);
                        changed = true;
                    }
                }
            }
        }
        facts
    }

    /// One route from start to `target` on which `missing` did not complete.
    fn route_without(&self, target: &str, missing: &str) -> String {
        let steps = &self.p.workflow.steps;
        let start = self.p.workflow.start.clone();
        let mut parent: BTreeMap<String, String> = BTreeMap::new();
        let mut queue = VecDeque::from([start.clone()]);
        let mut seen = BTreeSet::from([start.clone()]);
        while let Some(n) = queue.pop_front() {
            if n == target {
                let mut route = vec![n.clone()];
                let mut cur = n;
                while let Some(p) = parent.get(&cur) {
                    route.push(p.clone());
                    cur = p.clone();
                }
                route.reverse();
                return route.join(" -> ");
            }
            let Some(s) = steps.get(&n) else { continue };
            for (t, _, add) in Self::edges(&n, s) {
                if add.as_ref().is_some_and(|(k, _)| k == missing) {
                    continue;
                }
                if seen.insert(t.clone()) {
                    parent.insert(t.clone(), n.clone());
                    queue.push_back(t);
                }
            }
        }
        target.to_owned()
    }

    fn check_step(
        &mut self,
        name: &str,
        step: &Step,
        facts: Option<&Facts>,
        _all: &BTreeMap<String, Facts>,
    ) {
        let sp = Self::step_ptr(name);
        let env = Env::Step(name, facts);
        match step {
            Step::Call(c) => {
                let alias = self
                    .out
                    .aliases
                    .get(&c.operation)
                    .map(|a| (a.input.clone(), a.desc.id.clone(), a.desc.needs_action));
                let ty = self.mapping(&c.input, &format!("{sp}/input"), env);
                match alias {
                    Some((input, id, invoke)) => {
                        self.fit_report(
                            &ty,
                            &input,
                            &format!("{sp}/input"),
                            &format!("the input of operation alias `{}` ({id})", c.operation),
                            "coordinator.mapping.type",
                        );
                        if c.on_declared_refusal.is_some() && !invoke {
                            self.err(
                                "coordinator.call.declared-refusal",
                                &format!("{sp}/onDeclaredRefusal"),
                                format!("{id} has no declared refusals; onDeclaredRefusal applies to breg.invoke-action/v1 immediate actions only"),
                                "Remove onDeclaredRefusal from this step.",
                            );
                        }
                    }
                    None => {
                        if !self.p.operations.contains(&c.operation) {
                            self.err(
                                "coordinator.operation.unknown-alias",
                                &format!("{sp}/operation"),
                                format!(
                                    "`{}` is not an operation alias of this project",
                                    c.operation
                                ),
                                format!(
                                    "Declare it under `operations`, or use one of: {}.",
                                    names(self.p.operations.iter().map(|(k, _)| k))
                                ),
                            );
                        }
                    }
                }
            }
            Step::Choose(c) => {
                if c.cases.is_empty() {
                    self.err(
                        "coordinator.choose.labels",
                        &format!("{sp}/cases"),
                        "a choose step needs at least one case",
                        "Add the cases the Function returns.",
                    );
                }
                if c.cases.len() > MAX_CASES {
                    self.err(
                        "coordinator.limit.cases",
                        &format!("{sp}/cases"),
                        format!(
                            "the step has {} cases; at most {MAX_CASES} are accepted",
                            c.cases.len()
                        ),
                        "Split the decision into several choose steps.",
                    );
                }
                for (label, _) in c.cases.iter() {
                    if !valid_name(label) {
                        self.err_key(
                            "coordinator.name.invalid",
                            &format!("{sp}/cases/{}", esc(label)),
                            format!(
                                "`{label}` is not a valid case label; names match {NAME_PATTERN}"
                            ),
                            "Use lowercase letters, digits and hyphens, starting with a letter.",
                        );
                    }
                }
                let _ = self.function_call(&c.function, c.arguments.as_deref(), &sp, env);
                if let Some(out) = self
                    .out
                    .functions
                    .get(&c.function)
                    .and_then(|f| f.output.clone())
                {
                    let node = out.deref();
                    let n = node.node();
                    let labels: BTreeSet<&str> = c.cases.iter().map(|(k, _)| k.as_str()).collect();
                    let is_string = n.get("type").and_then(Value::as_str) == Some("string");
                    let en: Option<BTreeSet<&str>> =
                        n.get("enum").and_then(Value::as_array).and_then(|a| {
                            a.iter()
                                .map(Value::as_str)
                                .collect::<Option<BTreeSet<&str>>>()
                        });
                    let ok = is_string && en.as_ref() == Some(&labels);
                    if !ok {
                        let found = match (&en, is_string) {
                            (Some(e), true) => format!(
                                "its output is the string enum [{}]",
                                e.iter().copied().collect::<Vec<_>>().join(", ")
                            ),
                            _ => "its output is not a string enum".to_owned(),
                        };
                        self.err(
                            "coordinator.choose.labels",
                            &format!("{sp}/cases"),
                            format!(
                                "expected Function `{}` to return exactly the case labels [{}]; {found}",
                                c.function,
                                labels.iter().copied().collect::<Vec<_>>().join(", ")
                            ),
                            "Declare the Function's output as `{type: string, enum: [...]}` listing exactly the case labels.",
                        );
                    }
                }
            }
            Step::WaitUntil(w) => {
                let up = format!("{sp}/until");
                let ty = self.mapping(&w.until, &up, env);
                let desc = "an RFC 3339 instant (a string with format date-time)";
                // The VM reads `until` with `Instant::parse`, not with a
                // schema: a literal is checked the same way, so check and run
                // agree on it (`noon:60` included).
                if let Ty::Literal(Value::String(text)) = &ty {
                    if Instant::parse(text).is_err() {
                        self.err(
                            "coordinator.wait-until.instant",
                            &up,
                            format!("this mapping does not fit {desc}: expected a date-time string at the top level, found {}", Value::String(text.clone())),
                            MISMATCH_NEXT,
                        );
                    }
                } else {
                    let instant = Sch::new(json!({"type": "string", "format": "date-time"}));
                    self.fit_report(&ty, &instant, &up, desc, "coordinator.wait-until.instant");
                }
            }
            Step::WaitFor(w) => {
                let cp = format!("{sp}/completion");
                match self.p.workflow.steps.get(&w.completion.step) {
                    None => self.err(
                        "coordinator.step.unknown",
                        &format!("{cp}/step"),
                        format!("`{}` is not a step of this workflow", w.completion.step),
                        "Name the call step whose completion this step waits for.",
                    ),
                    Some(Step::Call(call)) => {
                        if let Some(a) = self.out.aliases.get(&call.operation) {
                            if !a.desc.completions.contains(&w.completion.name) {
                                let id = a.desc.id.clone();
                                let msg = if a.desc.completions.is_empty() {
                                    format!(
                                        "step `{}` calls {id}, which exposes no completion",
                                        w.completion.step
                                    )
                                } else {
                                    format!("step `{}` calls {id}, which exposes no completion `{}` (it exposes {})", w.completion.step, w.completion.name, a.desc.completions.join(", "))
                                };
                                self.err(
                                    "coordinator.wait-for.completion",
                                    &format!("{cp}/name"),
                                    msg,
                                    "Wait for a completion the call's operation exposes, such as `result` of casework.submit-review-request/v1.",
                                );
                            }
                        }
                        if let Some(f) = facts {
                            let ok = f
                                .get(&w.completion.step)
                                .is_some_and(|v| v.iter().all(|x| *x == Variant::Success));
                            if !ok {
                                let route = self.route_without(name, &w.completion.step);
                                self.err(
                                    "coordinator.wait-for.dominance",
                                    &format!("{cp}/step"),
                                    format!("expected call `{}` to have been accepted on every route that reaches this wait; it was not on the route {route}", w.completion.step),
                                    "Wait only after the call on every route, or move the wait after it.",
                                );
                            }
                        }
                    }
                    Some(_) => self.err(
                        "coordinator.wait-for.step",
                        &format!("{cp}/step"),
                        format!(
                            "step `{}` is not a call; a wait-for waits for a completion of a call",
                            w.completion.step
                        ),
                        "Name a call step whose operation exposes the completion.",
                    ),
                }
                let d = self.p.workflow.deadline_seconds;
                if w.timeout_seconds == 0 || w.timeout_seconds >= d {
                    self.err(
                        "coordinator.wait-for.timeout",
                        &format!("{sp}/timeoutSeconds"),
                        format!("timeoutSeconds is {}; it must be at least 1 and shorter than the run deadline ({d} seconds)", w.timeout_seconds),
                        format!("Set timeoutSeconds below {d}, or raise workflow.deadlineSeconds."),
                    );
                }
            }
            Step::Finish(f) => {
                let schema = self.out.outcomes.get(&f.outcome).cloned();
                if !self.p.workflow.outcomes.contains(&f.outcome) {
                    self.err(
                        "coordinator.outcome.unknown",
                        &format!("{sp}/outcome"),
                        format!("`{}` is not a declared outcome", f.outcome),
                        format!(
                            "Declare it under workflow.outcomes, or use one of: {}.",
                            names(self.p.workflow.outcomes.iter().map(|(k, _)| k))
                        ),
                    );
                }
                let desc = format!("the schema of outcome `{}`", f.outcome);
                match &f.output {
                    Some(m) => {
                        let ty = self.mapping(m, &format!("{sp}/output"), env);
                        if let Some(s) = schema {
                            self.fit_report(
                                &ty,
                                &s,
                                &format!("{sp}/output"),
                                &desc,
                                "coordinator.mapping.type",
                            );
                        }
                    }
                    None => {
                        if let Some(s) = schema {
                            if let Fit::Mismatch(..) =
                                schema::fit(&Ty::Literal(Value::Null), &s, &sp, "")
                            {
                                self.err(
                                    "coordinator.outcome.null-output",
                                    &sp,
                                    format!("this finish has no output, so its output is null, which {desc} does not accept"),
                                    "Add an `output` mapping, or declare the outcome as `{type: \"null\"}`.",
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    fn check_triggers(&mut self) {
        let trig: Vec<(String, TriggerDecl)> = self
            .p
            .triggers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (name, t) in trig {
            let tp = format!("/triggers/{}", esc(&name));
            if !valid_name(&t.source) {
                self.err(
                    "coordinator.name.invalid",
                    &format!("{tp}/source"),
                    format!(
                        "`{}` is not a valid event source name; names match {NAME_PATTERN}",
                        t.source
                    ),
                    "Use lowercase letters, digits and hyphens, starting with a letter.",
                );
            }
            if t.event_type.is_empty() {
                self.err(
                    "coordinator.trigger.event-type",
                    &format!("{tp}/eventType"),
                    "eventType is empty",
                    "Name the event type, e.g. breg.record.created/v1.",
                );
            }
            if let Some(m) = &t.idempotency {
                let ty = self.mapping(m, &format!("{tp}/idempotency"), Env::Trigger);
                let s = Sch::new(json!({"type": "string", "minLength": 1}));
                self.fit_report(
                    &ty,
                    &s,
                    &format!("{tp}/idempotency"),
                    "an idempotency string",
                    "coordinator.mapping.type",
                );
            }
            let ty = self.mapping(&t.input, &format!("{tp}/input"), Env::Trigger);
            if let Some(s) = self.out.input.clone() {
                self.fit_report(
                    &ty,
                    &s,
                    &format!("{tp}/input"),
                    "the workflow input schema",
                    "coordinator.mapping.type",
                );
            }
        }
    }

    fn fit_report(&mut self, ty: &Ty, tgt: &Sch, at: &str, desc: &str, code: &str) {
        match schema::fit(ty, tgt, at, "") {
            Fit::Ok => {}
            Fit::Unchecked(p, why) => self.warn(
                "coordinator.mapping.fit-unchecked",
                &p,
                format!("check cannot prove that this value fits {desc}: {why}; the host validates it at run time"),
                "Nothing to do; to have it proven offline, declare a narrower type for the source.",
            ),
            Fit::Mismatch(p, _member, msg) => self.err(
                code,
                &p,
                format!("this mapping does not fit {desc}: {msg}"),
                MISMATCH_NEXT,
            ),
        }
    }

    /// Checks a JSON Pointer's syntax; returns its tokens.
    fn tokens(&mut self, path: &str, ptr: &str) -> Option<Vec<String>> {
        match schema::pointer_tokens(path) {
            Some(t) if !path.is_empty() => Some(t),
            _ => {
                self.err(
                    "coordinator.mapping.pointer",
                    ptr,
                    format!("`{path}` is not a JSON Pointer (it must start with `/`; `~` is written `~0` and `/` in a name `~1`)"),
                    "Write the path as a JSON Pointer such as /applicationId, or omit path to use the whole value.",
                );
                None
            }
        }
    }

    /// Walks `path` through `src` (described as `desc`) and reports.
    fn typed_path(&mut self, src: Vec<Sch>, path: Option<&String>, ptr: &str, desc: &str) -> Ty {
        let Some(path) = path else {
            return Ty::Schema(src);
        };
        let pptr = format!("{ptr}/path");
        let Some(tokens) = self.tokens(path, &pptr) else {
            return Ty::Error;
        };
        let mut found = Vec::new();
        for s in &src {
            match schema::walk(s, &tokens) {
                Walk::Found(v) => found.extend(v),
                Walk::Missing(at) => {
                    self.err(
                        "coordinator.mapping.path",
                        &pptr,
                        format!("expected a path that {desc} declares; it declares nothing at {at}"),
                        format!("Correct the path to a member {desc} declares, or omit path to use the whole value."),
                    );
                    return Ty::Error;
                }
                Walk::Unchecked(at) => {
                    self.warn(
                        "coordinator.mapping.path-unchecked",
                        &pptr,
                        format!(
                            "{desc} leaves {} open, so check cannot prove that {path} exists; the value is checked at run time",
                            if at.is_empty() { "its top level".to_owned() } else { at.clone() }
                        ),
                        format!("Nothing to do; to have it proven offline, declare {path} in the schema."),
                    );
                    // Reported once here; the fit of this value is left to run time.
                    return Ty::Error;
                }
            }
        }
        Ty::Schema(found)
    }

    fn mapping(&mut self, m: &Mapping, ptr: &str, env: Env) -> Ty {
        match m {
            Mapping::Input(p) => {
                if matches!(env, Env::Trigger) {
                    self.err(
                        "coordinator.mapping.context",
                        &format!("{ptr}/type"),
                        "a trigger builds the run input, so it cannot read it",
                        "Read the event with `type: event` instead.",
                    );
                    return Ty::Error;
                }
                match self.out.input.clone() {
                    Some(s) => {
                        self.typed_path(vec![s], p.path.as_ref(), ptr, "the workflow input schema")
                    }
                    None => Ty::Error,
                }
            }
            Mapping::Event(p) => {
                if !matches!(env, Env::Trigger) {
                    self.err(
                        "coordinator.mapping.context",
                        &format!("{ptr}/type"),
                        "`type: event` is available only inside a trigger",
                        "Read the run input with `type: input` instead.",
                    );
                    return Ty::Error;
                }
                let ev = Sch::new(json!({
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "minLength": 1},
                        "source": {"type": "string"},
                        "type": {"type": "string"},
                        "time": {"type": "string", "format": "date-time"},
                        "data": {}
                    },
                    "required": ["id", "source", "type"],
                    "additionalProperties": false
                }));
                self.typed_path(vec![ev], p.path.as_ref(), ptr, "the event")
            }
            Mapping::Literal(l) => Ty::Literal(l.value.clone()),
            Mapping::Fields(f) => {
                if f.fields.len() > MAX_FIELDS {
                    self.err(
                        "coordinator.limit.fields",
                        &format!("{ptr}/fields"),
                        format!(
                            "the mapping builds {} members; at most {MAX_FIELDS} are accepted",
                            f.fields.len()
                        ),
                        "Group members into nested `fields` mappings.",
                    );
                }
                let mut members = Vec::new();
                for (k, sub) in f.fields.iter() {
                    let sp = format!("{ptr}/fields/{}", esc(k));
                    let ty = self.mapping(sub, &sp, env);
                    members.push((k.clone(), ty, sp));
                }
                Ty::Object(members)
            }
            Mapping::Step(s) => {
                let Env::Step(here, facts) = env else {
                    self.err(
                        "coordinator.mapping.context",
                        &format!("{ptr}/type"),
                        "a trigger runs before any step, so it cannot read a step's output",
                        "Read the event with `type: event` instead.",
                    );
                    return Ty::Error;
                };
                let sptr = format!("{ptr}/step");
                let Some(target) = self.p.workflow.steps.get(&s.step) else {
                    self.err(
                        "coordinator.mapping.unknown-step",
                        &sptr,
                        format!("`{}` is not a step of this workflow", s.step),
                        "Name an earlier call or wait-for step.",
                    );
                    return Ty::Error;
                };
                if !matches!(target, Step::Call(_) | Step::WaitFor(_)) {
                    self.err(
                        "coordinator.mapping.step-kind",
                        &sptr,
                        format!(
                            "step `{}` has no output; only call and wait-for steps do",
                            s.step
                        ),
                        "Read the output of a call or wait-for step.",
                    );
                    return Ty::Error;
                }
                let Some(facts) = facts else { return Ty::Error };
                let Some(variants) = facts.get(&s.step).cloned() else {
                    let route = self.route_without(here, &s.step);
                    self.err(
                        "coordinator.mapping.step-not-completed",
                        &sptr,
                        format!("expected step `{}` to have completed on every route that reaches this mapping; it has not on the route {route}", s.step),
                        format!("Read `{}` only on routes that pass through it, or compute the value with a Function that takes it as an input.", s.step),
                    );
                    return Ty::Error;
                };
                let mut alts = Vec::new();
                for v in variants {
                    let (sch, desc) =
                        match (target, v) {
                            (Step::Call(c), Variant::Success) => (
                                self.out.aliases.get(&c.operation).map(|a| a.output.clone()),
                                format!("the output of step `{}`", s.step),
                            ),
                            (Step::Call(_), Variant::Refusal) => (
                                Some(Sch::new(catalogue::declared_refusal_schema())),
                                format!(
                                    "the output of step `{}` on its declared-refusal route",
                                    s.step
                                ),
                            ),
                            (Step::WaitFor(w), _) => (
                                self.p.workflow.steps.get(&w.completion.step).and_then(
                                    |c| match c {
                                        Step::Call(c) => {
                                            self.out.aliases.get(&c.operation).and_then(|a| {
                                                a.completion.as_ref().map(|x| x.1.clone())
                                            })
                                        }
                                        Step::Choose(_)
                                        | Step::WaitUntil(_)
                                        | Step::WaitFor(_)
                                        | Step::Finish(_) => None,
                                    },
                                ),
                                format!("the completion that step `{}` waits for", s.step),
                            ),
                            (Step::Call(_), Variant::Completion)
                            | (Step::Choose(_) | Step::WaitUntil(_) | Step::Finish(_), _) => {
                                (None, String::new())
                            }
                        };
                    let Some(sch) = sch else { return Ty::Error };
                    match self.typed_path(vec![sch], s.path.as_ref(), ptr, &desc) {
                        Ty::Error => return Ty::Error,
                        t @ (Ty::Any
                        | Ty::Schema(_)
                        | Ty::Union(_)
                        | Ty::Literal(_)
                        | Ty::Object(_)) => alts.push(t),
                    }
                }
                if alts.len() == 1 {
                    alts.pop().unwrap_or(Ty::Error)
                } else {
                    Ty::Union(alts)
                }
            }
            Mapping::Function(f) => {
                self.function_call(&f.function, f.arguments.as_deref(), ptr, env)
            }
        }
    }

    /// Checks a Function call (mapping or choose) at `ptr`; returns its type.
    fn function_call(
        &mut self,
        fname: &str,
        args: Option<&Named<Mapping>>,
        ptr: &str,
        env: Env,
    ) -> Ty {
        let Some(func) = self.out.functions.get(fname) else {
            self.err(
                "coordinator.function.unknown",
                &format!("{ptr}/function"),
                format!("`{fname}` is not a declared Function"),
                format!(
                    "Declare it under `functions`, or use one of: {}.",
                    names(self.p.functions.iter().map(|(k, _)| k))
                ),
            );
            return Ty::Error;
        };
        let inputs = func.inputs.clone();
        let output = func.output.clone();
        let workflow_input = self.p.workflow.input.clone();
        let mut bindings = Vec::new();
        let mut unbound: Vec<(String, String)> = Vec::new();
        // A Function whose entrypoint or parameters are refused, or a call to
        // an unknown alias, already explains why binding may fail.
        let quiet = func.params.is_none()
            || self.p.workflow.steps.iter().any(
                |(_, s)| matches!(s, Step::Call(c) if !self.out.aliases.contains_key(&c.operation)),
            );
        if let Some(args) = args {
            for (aname, _) in args.iter() {
                if !inputs.iter().any(|(n, _, _)| n == aname) {
                    self.err_key(
                        "coordinator.function.unknown-argument",
                        &format!("{ptr}/arguments/{}", esc(aname)),
                        format!("Function `{fname}` declares no input `{aname}`"),
                        format!(
                            "Pass only declared inputs: {}.",
                            inputs
                                .iter()
                                .map(|(n, _, _)| n.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    );
                }
            }
        }
        for (iname, tref, sch) in &inputs {
            let explicit = args.and_then(|a| a.get(iname));
            let ty = match explicit {
                Some(m) => self.mapping(m, &format!("{ptr}/arguments/{}", esc(iname)), env),
                None => {
                    let bound = match (tref.reference(), env) {
                        (Some(("typeRef", _)), Env::Step(..)) if *tref == workflow_input => {
                            Some(Binding::Input)
                        }
                        (Some(("operationOutput", Value::String(alias))), Env::Step(_, facts)) => {
                            let calls: Vec<String> = match facts {
                                Some(facts) => self
                                    .p
                                    .workflow
                                    .steps
                                    .iter()
                                    .filter(|(n, s)| {
                                        matches!(s, Step::Call(c) if c.operation == *alias)
                                            && facts.get(*n).is_some_and(|v| {
                                                v.iter().all(|x| *x == Variant::Success)
                                            })
                                    })
                                    .map(|(n, _)| n.clone())
                                    .collect(),
                                None => vec![String::new()],
                            };
                            match calls.len() {
                                1 => calls.into_iter().next().map(Binding::Step),
                                _ => None,
                            }
                        }
                        _ => None,
                    };
                    match bound {
                        Some(b) => {
                            let ty = match &b {
                                Binding::Input => self
                                    .out
                                    .input
                                    .clone()
                                    .map(|s| Ty::Schema(vec![s]))
                                    .unwrap_or(Ty::Error),
                                Binding::Step(_) => sch
                                    .clone()
                                    .map(|s| Ty::Schema(vec![s]))
                                    .unwrap_or(Ty::Error),
                            };
                            bindings.push((iname.clone(), b));
                            ty
                        }
                        None => {
                            if !matches!(env, Env::Step(_, None)) && !quiet {
                                let why = match tref.reference() {
                                    Some(("operationOutput", a)) => format!(
                                        "`{iname}` is declared `operationOutput: {}`, and not exactly one call using that alias completed on every route reaching here",
                                        a.as_str().unwrap_or("?"),
                                    ),
                                    _ => format!("`{iname}` is declared neither as the workflow input's type nor as an operationOutput"),
                                };
                                unbound.push((iname.clone(), why));
                            }
                            Ty::Error
                        }
                    }
                }
            };
            if let Some(s) = sch {
                let at = if explicit.is_some() {
                    format!("{ptr}/arguments/{}", esc(iname))
                } else {
                    ptr.to_owned()
                };
                self.fit_report(
                    &ty,
                    s,
                    &at,
                    &format!("input `{iname}` of Function `{fname}`"),
                    "coordinator.mapping.type",
                );
            }
        }
        if !unbound.is_empty() {
            let names: Vec<&str> = unbound.iter().map(|(n, _)| n.as_str()).collect();
            let whys: Vec<&str> = unbound.iter().map(|(_, w)| w.as_str()).collect();
            self.err(
                "coordinator.function.argument-required",
                ptr,
                format!(
                    "Function `{fname}` needs {} that cannot be bound by type: {}",
                    quote_list(&names),
                    whys.join("; ")
                ),
                format!(
                    "Pass {} explicitly under `arguments`, e.g. `arguments: {{{}: MAPPING}}`.",
                    quote_list(&names),
                    names.first().copied().unwrap_or_default()
                ),
            );
        }
        self.out.bindings.insert(ptr.to_owned(), bindings);
        output.map(|s| Ty::Schema(vec![s])).unwrap_or(Ty::Error)
    }
}

fn meet(a: &Facts, b: &Facts) -> Facts {
    let mut out = Facts::new();
    for (k, va) in a {
        if let Some(vb) = b.get(k) {
            out.insert(k.clone(), va.union(vb).copied().collect());
        }
    }
    out
}

fn names<'x>(it: impl Iterator<Item = &'x String>) -> String {
    let v: Vec<&str> = it.map(String::as_str).collect();
    if v.is_empty() {
        "(none declared)".into()
    } else {
        v.join(", ")
    }
}

fn quote_list(v: &[&str]) -> String {
    v.iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}
