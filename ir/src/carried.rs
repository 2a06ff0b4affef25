//! Which step outputs a run keeps when it moves from one revision of a
//! workflow to another (docs/decisions.md "Moving waiting runs"). The rule
//! is stated here once, over two [`Program`]s: the compiler's cross-revision
//! check writes its result into a move certificate (`carried`), and the
//! scenario host hands it to the VM's move (`coordinator_vm::MoveTarget`).

use serde_json::Value;

use crate::{Program, StepId, StepOp};

/// The steps of `from` whose outputs (and effects) a run waiting at step
/// `from_wait` keeps when it moves to `to`, by name, sorted.
///
/// A step of `from` is carried when both hold:
/// - it may have completed before the wait: `from_wait` can be reached
///   from it (`from_wait` itself is not: a run waiting there has no
///   output of it yet);
/// - `to` has a step with the same name, of the same kind (`call` or
///   `wait-for`), on the same catalogue operation (a `wait-for`: its
///   call's operation and the same completion name) whose output schema
///   (a `wait-for`: the completion's schema) is the same resolved schema,
///   compared as JSON.
///
/// Steps of other kinds have no output and are never carried. An unknown
/// `from_wait` gives an empty list.
pub fn carried_steps(from: &Program, to: &Program, from_wait: &str) -> Vec<String> {
    let Some(wait) = from.step_id(from_wait) else {
        return Vec::new();
    };
    let before = reaching(from, wait);
    let mut carried: Vec<String> = from
        .steps
        .iter()
        .enumerate()
        .filter(|(i, _)| before.get(*i).copied().unwrap_or(false))
        .filter_map(|(_, step)| {
            let theirs = to.step_id(&step.name)?;
            let ours = output_signature(from, from.step_id(&step.name)?)?;
            (output_signature(to, theirs)? == ours).then(|| step.name.clone())
        })
        .collect();
    carried.sort();
    carried
}

/// What a step's output is, as far as carrying it goes: its kind, the
/// catalogue operation, the completion name (a wait-for) and the schema.
#[derive(PartialEq)]
struct OutputSignature<'p> {
    wait_for: bool,
    operation: &'p str,
    completion: Option<&'p str>,
    schema: Option<&'p Value>,
}

/// The output signature of step `id` of `program`; `None` for a step
/// without an output (choose, wait-until, finish) or an index out of range.
fn output_signature(program: &Program, id: StepId) -> Option<OutputSignature<'_>> {
    let schema = |s: crate::SchemaId| program.schemas.get(s.index());
    match &program.step(id)?.op {
        StepOp::Call { operation, .. } => {
            let binding = program.operations.get(operation.index())?;
            Some(OutputSignature {
                wait_for: false,
                operation: &binding.descriptor.id,
                completion: None,
                schema: schema(binding.output),
            })
        }
        StepOp::WaitFor {
            call, completion, ..
        } => {
            let StepOp::Call { operation, .. } = &program.step(*call)?.op else {
                return None;
            };
            let binding = program.operations.get(operation.index())?;
            Some(OutputSignature {
                wait_for: true,
                operation: &binding.descriptor.id,
                completion: Some(completion),
                schema: binding.completion.and_then(schema),
            })
        }
        StepOp::Choose { .. } | StepOp::WaitUntil { .. } | StepOp::Finish { .. } => None,
    }
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
    use crate::{Expr, Instr, OperationBinding, OperationId, Outcome, SchemaId, Step, StepKind};

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
}
