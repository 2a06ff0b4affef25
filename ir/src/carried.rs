//! Which step outputs a run keeps when it moves from one revision of a
//! workflow to another (docs/decisions.md "Moving waiting runs"). The rule
//! is stated here once, over two [`Program`]s: the compiler's cross-revision
//! check writes its result into a move certificate (`carried`) and starts
//! its data check from it, the scenario host hands it to the VM's move
//! (`coordinator_vm::MoveTarget`), and the service reads it from the
//! certificate.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::{OperationBinding, Program, SchemaId, StepId, StepOp};

/// The steps of `from` whose outputs (and effects) a run waiting at step
/// `from_wait` keeps when it moves to `to`, by name, sorted.
///
/// A step of `from` is carried when it may have completed before the wait
/// (`from_wait` can be reached from it; `from_wait` itself cannot: a run
/// waiting there has no output of it yet) and its output means the same
/// thing in `to`:
/// - a `call`: `to` has a `call` of the same name on the same catalogue
///   operation, the same BReg action (the same `uses` with another action
///   is another effect) and the same resolved output schema (the Programs'
///   `schemas` entries, compared as JSON);
/// - a `wait-for`: `to` has a `wait-for` of the same name waiting for the
///   same completion name on a call of the same name, that call is itself
///   carried (a completion belongs to its call's effect), and the
///   completion's schema is the same.
///
/// Steps of other kinds have no output and are never carried. An unknown
/// `from_wait` gives an empty list. Whether a carried step completed on
/// *every* route to the wait (what a moved run is certain to have) is the
/// compiler's must-dataflow, not this rule: a run keeps the output of a
/// carried step when it has one.
pub fn carried_steps(from: &Program, to: &Program, from_wait: &str) -> Vec<String> {
    let Some(wait) = from.step_id(from_wait) else {
        return Vec::new();
    };
    let before = reaching(from, wait);
    let candidates: Vec<&str> = from
        .steps
        .iter()
        .enumerate()
        .filter(|(i, _)| before.get(*i).copied().unwrap_or(false))
        .map(|(_, step)| step.name.as_str())
        .collect();
    let calls: BTreeSet<&str> = candidates
        .iter()
        .copied()
        .filter(|name| same_call(from, to, name))
        .collect();
    let waits: Vec<&str> = candidates
        .iter()
        .copied()
        .filter(|name| same_wait_for(from, to, name, &calls))
        .collect();
    let mut carried: Vec<String> = calls.into_iter().chain(waits).map(str::to_owned).collect();
    carried.sort();
    carried
}

/// The operation binding of step `name` of `program`, when it is a call.
fn call_binding<'p>(program: &'p Program, name: &str) -> Option<&'p OperationBinding> {
    match &program.step(program.step_id(name)?)?.op {
        StepOp::Call { operation, .. } => program.operations.get(operation.index()),
        StepOp::Choose { .. }
        | StepOp::WaitUntil { .. }
        | StepOp::WaitFor { .. }
        | StepOp::Finish { .. } => None,
    }
}

/// Schema `id` of `program`.
fn schema(program: &Program, id: SchemaId) -> Option<&Value> {
    program.schemas.get(id.index())
}

/// Whether step `name` is a call in `from` and in `to` with the same
/// catalogue operation, BReg action and output schema.
fn same_call(from: &Program, to: &Program, name: &str) -> bool {
    match (call_binding(from, name), call_binding(to, name)) {
        (Some(a), Some(b)) => {
            a.descriptor.id == b.descriptor.id
                && a.action == b.action
                && schema(from, a.output) == schema(to, b.output)
        }
        _ => false,
    }
}

/// The call a `wait-for` step `name` of `program` waits on (its name) and
/// the completion name, when it is a `wait-for`.
fn wait_for<'p>(program: &'p Program, name: &str) -> Option<(&'p str, &'p str)> {
    match &program.step(program.step_id(name)?)?.op {
        StepOp::WaitFor {
            call, completion, ..
        } => Some((program.step(*call)?.name.as_str(), completion.as_str())),
        StepOp::Call { .. }
        | StepOp::Choose { .. }
        | StepOp::WaitUntil { .. }
        | StepOp::Finish { .. } => None,
    }
}

/// Whether step `name` is a `wait-for` in `from` and in `to` waiting for
/// the same completion of the same call, carried (in `calls`), with the
/// same completion schema.
fn same_wait_for(from: &Program, to: &Program, name: &str, calls: &BTreeSet<&str>) -> bool {
    let (Some((call_a, completion_a)), Some((call_b, completion_b))) =
        (wait_for(from, name), wait_for(to, name))
    else {
        return false;
    };
    let completion_schema = |program: &Program, call: &str| {
        call_binding(program, call)
            .and_then(|b| b.completion)
            .and_then(|s| schema(program, s).cloned())
    };
    call_a == call_b
        && completion_a == completion_b
        && calls.contains(call_a)
        && completion_schema(from, call_a) == completion_schema(to, call_b)
}

/// Per step of `program`, whether `target` can be reached from it by one
/// or more edges (`target` itself only on a cycle, which a checked Program
/// never has).
fn reaching(program: &Program, target: StepId) -> Vec<bool> {
    let mut predecessors: Vec<Vec<StepId>> = vec![Vec::new(); program.steps.len()];
    for i in 0..program.steps.len() {
        let id = StepId(u32::try_from(i).unwrap_or(u32::MAX));
        for next in program.successors(id) {
            if let Some(list) = predecessors.get_mut(next.index()) {
                list.push(id);
            }
        }
    }
    let mut seen = vec![false; program.steps.len()];
    let mut stack = vec![target];
    while let Some(id) = stack.pop() {
        for &p in predecessors
            .get(id.index())
            .map(Vec::as_slice)
            .unwrap_or(&[])
        {
            if let Some(flag) = seen.get_mut(p.index()) {
                if !*flag {
                    *flag = true;
                    stack.push(p);
                }
            }
        }
    }
    seen
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    use crate::catalogue::lookup;
    use crate::{Expr, Instr, OperationId, Outcome, Step, StepKind};

    fn call(name: &str, operation: u32, next: u32) -> Step {
        Step {
            name: name.into(),
            op: StepOp::Call {
                operation: OperationId(operation),
                input: crate::ExprId(0),
                next: StepId(next),
                on_declared_refusal: None,
            },
        }
    }

    /// read → review → decided (wait-for on review) → `due_name`
    /// (wait-until) → done. Operations: `read` (breg.read-record/v1, output
    /// t1 = `read_output`) and `review` (casework's review request, output
    /// t2, completion t3).
    fn program(due_name: &str, read_output: Value) -> Program {
        let binding =
            |alias: &str, id: &str, output: u32, completion: Option<u32>| OperationBinding {
                alias: alias.into(),
                descriptor: lookup(id).unwrap(),
                connection: "c".into(),
                action: None,
                input: SchemaId(0),
                output: SchemaId(output),
                completion: completion.map(SchemaId),
            };
        let steps = vec![
            call("read", 0, 1),
            call("review", 1, 2),
            Step {
                name: "decided".into(),
                op: StepOp::WaitFor {
                    call: StepId(1),
                    completion: "decided".into(),
                    timeout_seconds: 10,
                    next: StepId(3),
                    on_timeout: None,
                    on_cancel: None,
                },
            },
            Step {
                name: due_name.into(),
                op: StepOp::WaitUntil {
                    until: crate::ExprId(0),
                    next: StepId(4),
                },
            },
            Step {
                name: "done".into(),
                op: StepOp::Finish {
                    outcome: crate::OutcomeId(0),
                    output: None,
                },
            },
        ];
        Program {
            format: crate::FORMAT_VERSION,
            workflow: "w".into(),
            input: SchemaId(0),
            deadline_seconds: 100,
            start: StepId(0),
            steps,
            outcomes: vec![Outcome {
                name: "done".into(),
                schema: SchemaId(0),
            }],
            operations: vec![
                binding("read", "breg.read-record/v1", 1, None),
                binding("review", "casework.submit-review-request/v1", 2, Some(3)),
            ],
            functions: Vec::new(),
            function_source: String::new(),
            triggers: Vec::new(),
            connections: vec!["c".into()],
            exprs: vec![Expr {
                code: vec![Instr::Input { path: None }],
            }],
            schemas: vec![
                json!({}),
                read_output,
                json!({"type": "object"}),
                json!({"type": "object", "required": ["decision"]}),
            ],
            constants: Vec::new(),
        }
    }

    #[test]
    fn the_same_steps_are_carried_and_only_those_before_the_wait() {
        let a = program("due", json!({"type": "object"}));
        let b = program("due", json!({"type": "object"}));
        assert_eq!(a.validate(), Ok(()));
        assert_eq!(carried_steps(&a, &b, "due"), ["decided", "read", "review"]);
        // Waiting at `decided`, its own output does not exist yet.
        assert_eq!(carried_steps(&a, &b, "decided"), ["read", "review"]);
        assert!(carried_steps(&a, &b, "read").is_empty());
        assert!(carried_steps(&a, &b, "nowhere").is_empty());
    }

    #[test]
    fn another_output_schema_operation_or_kind_is_not_carried() {
        let a = program("due", json!({"type": "object"}));
        let narrower = program("due", json!({"type": "object", "required": ["data"]}));
        assert_eq!(
            carried_steps(&a, &narrower, "due"),
            ["decided", "review"],
            "read's output schema differs"
        );
        let mut swapped = a.clone();
        swapped.steps[0] = call("read", 1, 1);
        assert_eq!(carried_steps(&a, &swapped, "due"), ["decided", "review"]);
        let mut choose = a.clone();
        choose.steps[0].op = StepOp::Choose {
            selector: crate::ExprId(0),
            cases: vec![crate::Case {
                label: "on".into(),
                step: StepId(1),
            }],
        };
        assert_eq!(choose.steps[0].op.kind(), StepKind::Choose);
        assert_eq!(carried_steps(&a, &choose, "due"), ["decided", "review"]);
        let mut other_completion = a.clone();
        if let StepOp::WaitFor { completion, .. } = &mut other_completion.steps[2].op {
            *completion = "withdrawn".into();
        }
        assert_eq!(
            carried_steps(&a, &other_completion, "due"),
            ["read", "review"]
        );
        let mut renamed = a.clone();
        renamed.steps[0].name = "read-again".into();
        assert_eq!(carried_steps(&a, &renamed, "due"), ["decided", "review"]);
    }

    #[test]
    fn another_breg_action_is_another_effect() {
        let mut a = program("due", json!({"type": "object"}));
        a.operations[0].descriptor = lookup("breg.invoke-action/v1").unwrap();
        a.operations[0].action = Some("close-case".into());
        let mut b = a.clone();
        assert_eq!(carried_steps(&a, &b, "due"), ["decided", "read", "review"]);
        b.operations[0].action = Some("reopen-case".into());
        assert_eq!(carried_steps(&a, &b, "due"), ["decided", "review"]);
    }

    #[test]
    fn a_wait_for_is_carried_only_with_its_call() {
        let a = program("due", json!({"type": "object"}));
        // The review call's output differs in B: neither the call nor the
        // completion awaited on it means the same thing there.
        let mut narrower = a.clone();
        narrower.schemas[2] = json!({"type": "object", "required": ["id"]});
        assert_eq!(carried_steps(&a, &narrower, "due"), ["read"]);
        // B's `decided` waits on `read` (the same completion name): another
        // call's completion.
        let mut other_call = a.clone();
        if let StepOp::WaitFor { call, .. } = &mut other_call.steps[2].op {
            *call = StepId(0);
        }
        assert_eq!(carried_steps(&a, &other_call, "due"), ["read", "review"]);
        // The completion's schema differs.
        let mut other_schema = a.clone();
        other_schema.schemas[3] = json!({"type": "object"});
        assert_eq!(carried_steps(&a, &other_schema, "due"), ["read", "review"]);
    }
}
