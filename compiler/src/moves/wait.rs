//! One wait step of revision A against its target in revision B: the
//! steps carried, then one function per rule of the move (target, the
//! completion of a `wait-for`, effects, skipped calls, data), each
//! returning the findings it makes, located in B.

use std::collections::{BTreeMap, BTreeSet};

use coordinator_ir::carried::carried_steps;
use coordinator_ir::moves::WaitVerdict;
use coordinator_ir::pointer::escape_token;
use coordinator_ir::{Program, SchemaId, Step, StepId, StepOp};
use coordinator_source::Diagnostic;
use serde_json::Value;

use super::is_call;
use crate::check::{check_resumed, Facts, Graph, Resume};
use crate::codes;
use crate::Analysis;

/// The repair line every finding ends with when B cannot be changed.
const OR_DRAIN: &str = "or let the runs on revision A drain";

/// The two revisions, read once for every wait.
pub(super) struct Revisions<'a> {
    a: &'a Program,
    a_graph: Graph,
    /// A's must-dataflow from its start: the steps completed on every
    /// route to each step.
    a_facts: BTreeMap<String, Facts>,
    b: &'a Program,
    b_graph: Graph,
    analysis: &'a Analysis,
    /// B's own diagnostics (warnings: B compiled), as (code, pointer): a
    /// finding of the resumed check that B's own check makes too is not
    /// caused by the move.
    b_own: BTreeSet<(String, String)>,
    /// `--accept-skipped`.
    accepted: &'a BTreeSet<String>,
}

/// The JSON Pointer of step `name` in `workflow.yaml`.
fn step_ptr(name: &str) -> String {
    format!("/workflow/steps/{}", escape_token(name))
}

/// The name of step `id` of `p` (empty when out of range).
fn name_of(p: &Program, id: StepId) -> &str {
    p.steps.get(id.index()).map_or("", |s| s.name.as_str())
}

/// Schema `id` of `p`.
fn schema(p: &Program, id: SchemaId) -> Option<&Value> {
    p.schemas.get(id.index())
}

/// A step's kind word, with its article, for messages.
fn a_kind(op: &StepOp) -> String {
    let kind = op.kind();
    let article = if kind.as_str().starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {kind}")
}

/// A diagnostic's key: (code, pointer).
fn key(d: &Diagnostic) -> (String, String) {
    (d.code.clone(), d.pointer.clone())
}

impl<'a> Revisions<'a> {
    /// Reads A (`a`) and B (`b`, with its project `analysis` and its own
    /// diagnostics `b_diags`).
    pub(super) fn new(
        a: &'a Program,
        b: &'a Program,
        analysis: &'a Analysis,
        b_diags: &[Diagnostic],
        accepted: &'a BTreeSet<String>,
    ) -> Self {
        let a_graph = Graph::from_program(a);
        let a_facts = a_graph.must_complete(name_of(a, a.start));
        Revisions {
            a,
            a_graph,
            a_facts,
            b,
            b_graph: Graph::from_program(b),
            analysis,
            b_own: b_diags.iter().map(key).collect(),
            accepted,
        }
    }

    fn a_step(&self, name: &str) -> Option<&'a Step> {
        self.a.steps.iter().find(|s| s.name == name)
    }

    fn b_step(&self, name: &str) -> Option<&'a Step> {
        self.b.steps.iter().find(|s| s.name == name)
    }

    fn at(&self, ptr: &str) -> coordinator_source::Located {
        self.analysis.doc.locate(ptr)
    }

    fn at_key(&self, ptr: &str) -> coordinator_source::Located {
        self.analysis.doc.locate_key(ptr)
    }

    /// The verdict on A's wait step `wait` moving to B's step `target`
    /// (`movable` and `findings` left to the caller), and its findings.
    pub(super) fn decide(&self, wait: &Step, target: &str) -> (WaitVerdict, Vec<Diagnostic>) {
        let (kept, carried) = self.carried(&wait.name);
        let verdict = WaitVerdict {
            from: wait.name.clone(),
            to: target.to_owned(),
            kind: wait.op.kind(),
            movable: false,
            carried: kept,
            findings: Vec::new(),
        };
        let mut found = Vec::new();
        match self.b_step(target) {
            None => found.push(self.target_missing(&wait.name, target)),
            Some(t) if t.op.kind() != wait.op.kind() => {
                found.push(self.target_kind(wait, t));
            }
            Some(t) => {
                found.extend(self.completion(wait, t, &carried));
                found.extend(self.effects(&wait.name, target));
                found.extend(self.skipped(&wait.name, target, &carried));
                found.extend(self.data(&wait.name, target, &carried));
            }
        }
        (verdict, found)
    }

    /// The steps a run moved from `wait` keeps, by the one rule
    /// ([`carried_steps`]: it may have completed before the wait, and B has
    /// it with the same meaning), for the certificate; and of those, the
    /// ones completed on every route to `wait`, with the outputs they may
    /// have there: what a moved run is certain to have, the state the
    /// other rules and the resumed data check start from.
    pub(super) fn carried(&self, wait: &str) -> (Vec<String>, Facts) {
        let kept = carried_steps(self.a, self.b, wait);
        let certain = self
            .a_facts
            .get(wait)
            .map(|facts| {
                facts
                    .iter()
                    .filter(|(id, _)| kept.contains(id))
                    .map(|(id, v)| (id.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default();
        (kept, certain)
    }

    /// The completion schema of call `call` of `p`, when it exposes one.
    fn completion_schema(p: &'a Program, call: StepId) -> Option<&'a Value> {
        match &p.steps.get(call.index())?.op {
            StepOp::Call { operation, .. } => {
                schema(p, p.operations.get(operation.index())?.completion?)
            }
            StepOp::Choose { .. }
            | StepOp::WaitUntil { .. }
            | StepOp::WaitFor { .. }
            | StepOp::Finish { .. } => None,
        }
    }

    fn target_missing(&self, wait: &str, target: &str) -> Diagnostic {
        Diagnostic::error(
            codes::MOVE_TARGET_MISSING,
            self.at_key("/workflow/steps"),
            format!(
                "revision B has no step `{target}`, where a run waiting at `{wait}` of revision A would resume"
            ),
            format!("Name the step of B it resumes at with --map {wait}=STEP, keep a step `{target}` in B, {OR_DRAIN}."),
        )
    }

    fn target_kind(&self, wait: &Step, target: &Step) -> Diagnostic {
        Diagnostic::error(
            codes::MOVE_TARGET_KIND,
            self.at(&format!("{}/type", step_ptr(&target.name))),
            format!(
                "step `{}` of revision B is {}; a run waiting at `{}`, {} of revision A, resumes only at {}",
                target.name,
                a_kind(&target.op),
                wait.name,
                a_kind(&wait.op),
                a_kind(&wait.op)
            ),
            format!(
                "Map the wait to {} step of B with --map {}=STEP, {OR_DRAIN}.",
                a_kind(&wait.op),
                wait.name
            ),
        )
    }

    /// A wait-for's target waits for the same completion name, on the same
    /// call, which is carried, with the same completion schema.
    fn completion(&self, wait: &Step, target: &Step, carried: &Facts) -> Vec<Diagnostic> {
        let (
            StepOp::WaitFor {
                call: ca,
                completion: na,
                ..
            },
            StepOp::WaitFor {
                call: cb,
                completion: nb,
                ..
            },
        ) = (&wait.op, &target.op)
        else {
            return Vec::new();
        };
        let (call_a, call_b) = (name_of(self.a, *ca), name_of(self.b, *cb));
        let cp = format!("{}/completion", step_ptr(&target.name));
        let next = format!(
            "Keep the wait's completion in B (the call `{call_a}` with the same operation and output, and completion `{na}`), {OR_DRAIN}."
        );
        let mut found = Vec::new();
        let mut differs = |ptr: String, message: String| {
            found.push(Diagnostic::error(
                codes::MOVE_COMPLETION_DIFFERS,
                self.at(&ptr),
                message,
                next.clone(),
            ));
        };
        let (w, t) = (&wait.name, &target.name);
        if na != nb {
            differs(format!("{cp}/name"), format!("step `{t}` of revision B waits for completion `{nb}`; a run waiting at `{w}` of revision A waits for completion `{na}`"));
        }
        if call_a != call_b {
            differs(format!("{cp}/step"), format!("step `{t}` of revision B waits on call `{call_b}`; a run waiting at `{w}` of revision A waits on call `{call_a}`"));
        } else if !carried.contains_key(call_a) {
            differs(format!("{cp}/step"), format!("call `{call_a}` is not carried to revision B (its operation, BReg action or output differs there), so the completion a run waiting at `{w}` awaits belongs to no call of B"));
        } else if Self::completion_schema(self.a, *ca) != Self::completion_schema(self.b, *cb) {
            differs(format!("{cp}/name"), format!("completion `{na}` of call `{call_a}` has another schema in revision B than the one a run waiting at `{w}` of revision A awaits"));
        }
        found
    }

    /// No step of B after `target` has the id of a call of A before `wait`
    /// (one A may already have performed).
    fn effects(&self, wait: &str, target: &str) -> Vec<Diagnostic> {
        let performed: BTreeSet<String> = self
            .a_graph
            .leading_to(wait)
            .into_iter()
            .filter(|s| self.a_step(s).is_some_and(|s| is_call(&s.op)))
            .collect();
        self.b_graph
            .reachable(target)
            .iter()
            .filter(|s| s.as_str() != target && performed.contains(s.as_str()))
            .map(|s| {
                Diagnostic::error(
                    codes::MOVE_EFFECT_REPEATS,
                    self.at_key(&step_ptr(s)),
                    format!(
                        "step `{s}` comes after `{target}` in revision B, and a run waiting at `{wait}` of revision A may already have performed its call `{s}`: the step's idempotency key would repeat"
                    ),
                    format!("Give B's step another id, {OR_DRAIN}."),
                )
            })
            .collect()
    }

    /// No call of B before `target` is skipped by a moved run (not carried
    /// from A), unless accepted.
    fn skipped(&self, wait: &str, target: &str, carried: &Facts) -> Vec<Diagnostic> {
        let before = self.b_graph.leading_to(target);
        before
            .iter()
            .filter(|s| self.b_step(s).is_some_and(|s| is_call(&s.op)))
            .filter(|s| !carried.contains_key(s.as_str()) && !self.accepted.contains(s.as_str()))
            .map(|s| {
                let why = match self.a_step(s) {
                    None => format!("revision A has no step `{s}`"),
                    Some(_) if !self.a_facts.get(wait).is_some_and(|f| f.contains_key(s)) => {
                        format!("`{s}` of revision A is not completed on every route to `{wait}`")
                    }
                    Some(_) => format!(
                        "`{s}` of revision A has another kind, operation, BReg action or output type"
                    ),
                };
                Diagnostic::error(
                    codes::MOVE_CALL_SKIPPED,
                    self.at_key(&step_ptr(s)),
                    format!(
                        "call `{s}` comes before `{target}` in revision B, and a run moved from `{wait}` of revision A has not performed it: {why}"
                    ),
                    format!(
                        "If no step after `{target}` reads `{s}`, accept the skip with --accept-skipped {s}; {OR_DRAIN}."
                    ),
                )
            })
            .collect()
    }

    /// B's own step checks from `target`, with the steps `carried` and A's
    /// input schema; what they find that B's own check does not is caused by
    /// the move. A finding that B's input schema in place of A's finds too
    /// comes from the outputs the run lacks (`read-unavailable`); the rest
    /// from A's input (`input-missing`).
    fn data(&self, wait: &str, target: &str, carried: &Facts) -> Vec<Diagnostic> {
        let resume = |input: Option<Value>| Resume {
            step: target,
            completed: carried.clone(),
            input,
        };
        let with_b_input = check_resumed(self.analysis, &resume(None));
        let a_input = schema(self.a, self.a.input);
        let moved = if a_input.is_none() || a_input == schema(self.b, self.b.input) {
            with_b_input.clone()
        } else {
            check_resumed(self.analysis, &resume(a_input.cloned()))
        };
        let from_outputs: BTreeSet<(String, String)> = with_b_input.iter().map(key).collect();
        let kept = if carried.is_empty() {
            "a moved run keeps no output of revision A's steps".to_owned()
        } else {
            let names: Vec<&str> = carried.keys().map(String::as_str).collect();
            format!(
                "a moved run keeps the outputs of A's steps {}",
                names.join(", ")
            )
        };
        moved
            .into_iter()
            .filter(|d| !self.b_own.contains(&key(d)))
            .map(|d| {
                let at = coordinator_source::Located {
                    file: d.file.clone(),
                    line: d.line,
                    column: d.column,
                    pointer: d.pointer.clone(),
                };
                if from_outputs.contains(&key(&d)) {
                    Diagnostic::error(
                        codes::MOVE_READ_UNAVAILABLE,
                        at,
                        format!(
                            "after a move from `{wait}` of revision A to `{target}`: {} ({kept})",
                            d.message
                        ),
                        format!("Read only outputs a moved run has (steps carried from A, or B's steps after `{target}`), {OR_DRAIN}."),
                    )
                } else {
                    Diagnostic::error(
                        codes::MOVE_INPUT_MISSING,
                        at,
                        format!(
                            "after a move from `{wait}` of revision A to `{target}`, the run input is the one A admitted: {}",
                            d.message
                        ),
                        format!("Read only what revision A's input type guarantees after `{target}`, {OR_DRAIN}."),
                    )
                }
            })
            .collect()
    }
}
