//! Prints throughput figures (not a timed test): VM steps per second on a
//! straight-line Program without Functions, and Function calls per second.
//! Run with `cargo bench -p coordinator-vm`.

use std::time::Instant;

use coordinator_ir::catalogue;
use coordinator_ir::{
    Argument, ConstId, Expr, ExprId, Function, FunctionId, FunctionInput, Instr, OperationBinding,
    OperationId, Outcome, OutcomeId, Program, SchemaId, Step, StepId, StepOp, FORMAT_VERSION,
};
use coordinator_vm::{Answer, Event, Vm};
use serde_json::{json, Value};

fn empty() -> Program {
    Program {
        format: FORMAT_VERSION,
        workflow: "bench".into(),
        input: SchemaId(0),
        deadline_seconds: 86_400,
        start: StepId(0),
        steps: Vec::new(),
        outcomes: vec![Outcome {
            name: "done".into(),
            schema: SchemaId(0),
        }],
        operations: Vec::new(),
        functions: Vec::new(),
        function_source: String::new(),
        triggers: Vec::new(),
        connections: vec!["conn".into()],
        exprs: Vec::new(),
        schemas: vec![json!({})],
        constants: Vec::new(),
    }
}

fn push_expr(p: &mut Program, code: Vec<Instr>) -> ExprId {
    p.exprs.push(Expr { code });
    ExprId(p.exprs.len() as u32 - 1)
}

fn push_const(p: &mut Program, v: Value) -> ConstId {
    p.constants.push(v);
    ConstId(p.constants.len() as u32 - 1)
}

/// 62 steps: 30 reads (each reads the previous output), 31 instant
/// wait-untils, then a finish.
fn straight_line() -> Program {
    let mut p = empty();
    let id = "breg.read-record/v1";
    p.schemas
        .push(catalogue::input_schema(id).unwrap_or_default());
    p.schemas
        .push(catalogue::output_schema(id).unwrap_or_default());
    p.operations.push(OperationBinding {
        alias: "read".into(),
        descriptor: catalogue::lookup(id).expect("catalogue"),
        connection: "conn".into(),
        action: None,
        input: SchemaId(1),
        output: SchemaId(2),
        completion: None,
    });
    let collection = push_const(&mut p, json!("applications"));
    let past = push_const(&mut p, json!("2000-01-01T00:00:00Z"));
    let until = push_expr(&mut p, vec![Instr::Const { value: past }]);
    let mut n = 0u32;
    for i in 0..30u32 {
        let input = push_expr(
            &mut p,
            vec![
                Instr::Const { value: collection },
                if i == 0 {
                    Instr::Input {
                        path: Some("/recordId".into()),
                    }
                } else {
                    Instr::StepOutput {
                        step: StepId(n - 2),
                        path: Some("/recordId".into()),
                    }
                },
                Instr::Object {
                    keys: vec!["collection".into(), "recordId".into()],
                },
            ],
        );
        p.steps.push(Step {
            name: format!("read-{i}"),
            op: StepOp::Call {
                operation: OperationId(0),
                input,
                next: StepId(n + 1),
                on_declared_refusal: None,
            },
        });
        n += 1;
        p.steps.push(Step {
            name: format!("pause-{i}"),
            op: StepOp::WaitUntil {
                until,
                next: StepId(n + 1),
            },
        });
        n += 1;
    }
    let out = push_expr(
        &mut p,
        vec![Instr::StepOutput {
            step: StepId(n - 2),
            path: None,
        }],
    );
    p.steps.push(Step {
        name: "done".into(),
        op: StepOp::Finish {
            outcome: OutcomeId(0),
            output: Some(out),
        },
    });
    p
}

fn function_program() -> Program {
    let mut p = empty();
    p.function_source =
        "fn label(record, n) { if record.data.score > n { \"high\" } else { \"low\" } }".into();
    p.schemas
        .push(json!({"type": "object", "required": ["data"]}));
    p.schemas.push(json!({"type": "integer"}));
    p.schemas.push(json!({"enum": ["high", "low"]}));
    p.functions.push(Function {
        name: "label".into(),
        entrypoint: "label".into(),
        inputs: vec![
            FunctionInput {
                name: "record".into(),
                schema: SchemaId(1),
            },
            FunctionInput {
                name: "n".into(),
                schema: SchemaId(2),
            },
        ],
        output: SchemaId(3),
    });
    let n = push_const(&mut p, json!(5));
    let e = push_expr(
        &mut p,
        vec![
            Instr::Const { value: n },
            Instr::Input { path: None },
            Instr::Call {
                function: FunctionId(0),
                args: vec![
                    Argument {
                        name: "n".into(),
                        explicit: true,
                    },
                    Argument {
                        name: "record".into(),
                        explicit: true,
                    },
                ],
            },
        ],
    );
    p.steps.push(Step {
        name: "done".into(),
        op: StepOp::Finish {
            outcome: OutcomeId(0),
            output: Some(e),
        },
    });
    p
}

fn main() {
    let t0 = coordinator_ir::instant::Instant::parse("2026-10-09T09:00:00Z").expect("an instant");
    let vm = Vm::new(&straight_line()).expect("loads");
    let record =
        json!({"collection": "applications", "recordId": "r1", "revision": "1", "data": {}});
    let runs = 300u32;
    let started = Instant::now();
    let mut steps = 0usize;
    for _ in 0..runs {
        let mut r = vm.admit(json!({"recordId": "r1"}), t0).expect("admits");
        for i in 0..30 {
            r = vm
                .resume(
                    &r.state,
                    &Event::CallAnswered {
                        step: format!("read-{i}"),
                        answer: Answer::Success {
                            value: record.clone(),
                        },
                    },
                )
                .expect("applies");
        }
        steps += r.state.path.len();
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "straight line (62 steps, 30 calls, no Functions): {:.0} steps/s, {:.0} events/s, {:.1} µs per run",
        steps as f64 / secs,
        f64::from(runs * 31) / secs,
        secs * 1e6 / f64::from(runs)
    );

    let vm = Vm::new(&function_program()).expect("loads");
    let calls = 20_000u32;
    let started = Instant::now();
    for _ in 0..calls {
        let r = vm.admit(json!({"data": {"score": 7}}), t0).expect("admits");
        assert_eq!(r.state.output, Some(json!("high")));
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "Function calls (2 checked arguments, checked result, inside a one-step run): {:.0} calls/s",
        f64::from(calls) / secs
    );
}
