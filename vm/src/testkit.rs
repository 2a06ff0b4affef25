//! Hand-built Programs and a tiny driver for the unit tests.

use coordinator_ir::catalogue;
use coordinator_ir::instant::Instant;
use coordinator_ir::{
    Argument, Case, ConstId, Expr, ExprId, Function, FunctionId, FunctionInput, Instr,
    OperationBinding, OperationId, Outcome, OutcomeId, Program, SchemaId, Step, StepId, StepOp,
    FORMAT_VERSION,
};
use serde_json::{json, Value};

use crate::{Event, Resumed, Vm};

/// Builds a Program step by step. Steps get ids in the order they are added.
pub struct ProgramBuilder {
    p: Program,
}

impl ProgramBuilder {
    pub fn new(deadline_seconds: u64) -> Self {
        ProgramBuilder {
            p: Program {
                format: FORMAT_VERSION,
                workflow: "test".into(),
                input: SchemaId(0),
                deadline_seconds,
                start: StepId(0),
                steps: Vec::new(),
                outcomes: Vec::new(),
                operations: Vec::new(),
                functions: Vec::new(),
                function_source: String::new(),
                triggers: Vec::new(),
                connections: Vec::new(),
                exprs: Vec::new(),
                schemas: vec![json!({})],
                constants: Vec::new(),
            },
        }
    }

    pub fn schema(&mut self, v: Value) -> SchemaId {
        self.p.schemas.push(v);
        SchemaId(self.p.schemas.len() as u32 - 1)
    }

    pub fn input_schema(&mut self, v: Value) {
        self.p.input = self.schema(v);
    }

    pub fn op(&mut self, alias: &str, id: &str) -> OperationId {
        let descriptor = catalogue::lookup(id).expect("catalogue operation");
        let input = self.schema(catalogue::input_schema(id).expect("input schema"));
        let output = self.schema(catalogue::output_schema(id).expect("output schema"));
        let completion = descriptor
            .completions
            .first()
            .and_then(|c| catalogue::completion_schema(id, c))
            .map(|s| self.schema(s));
        self.p.operations.push(OperationBinding {
            alias: alias.into(),
            action: descriptor.needs_action.then(|| "act".to_owned()),
            descriptor,
            connection: "conn".into(),
            input,
            output,
            completion,
        });
        OperationId(self.p.operations.len() as u32 - 1)
    }

    pub fn expr(&mut self, code: Vec<Instr>) -> ExprId {
        self.p.exprs.push(Expr { code });
        ExprId(self.p.exprs.len() as u32 - 1)
    }

    pub fn constant(&mut self, v: Value) -> ConstId {
        self.p.constants.push(v);
        ConstId(self.p.constants.len() as u32 - 1)
    }

    pub fn lit(&mut self, v: Value) -> ExprId {
        let c = self.constant(v);
        self.expr(vec![Instr::Const { value: c }])
    }

    pub fn input(&mut self, path: Option<&str>) -> ExprId {
        self.expr(vec![Instr::Input {
            path: path.map(str::to_owned),
        }])
    }

    pub fn output_of(&mut self, step: u32, path: Option<&str>) -> ExprId {
        self.expr(vec![Instr::StepOutput {
            step: StepId(step),
            path: path.map(str::to_owned),
        }])
    }

    /// A Function call expression whose arguments are literals.
    pub fn call(&mut self, f: FunctionId, args: &[(&str, Value)]) -> ExprId {
        let mut code = Vec::new();
        for (_, v) in args {
            let c = self.constant(v.clone());
            code.push(Instr::Const { value: c });
        }
        code.push(Instr::Call {
            function: f,
            args: args
                .iter()
                .map(|(n, _)| Argument {
                    name: (*n).to_owned(),
                    explicit: true,
                })
                .collect(),
        });
        self.expr(code)
    }

    pub fn step(&mut self, name: &str, op: StepOp) -> StepId {
        self.p.steps.push(Step {
            name: name.into(),
            op,
        });
        StepId(self.p.steps.len() as u32 - 1)
    }

    pub fn outcome(&mut self, name: &str, schema: Value) -> OutcomeId {
        let schema = self.schema(schema);
        self.p.outcomes.push(Outcome {
            name: name.into(),
            schema,
        });
        OutcomeId(self.p.outcomes.len() as u32 - 1)
    }

    pub fn source(&mut self, src: &str) {
        self.p.function_source = src.into();
    }

    pub fn function(
        &mut self,
        name: &str,
        entrypoint: &str,
        inputs: &[(&str, Value)],
        output: Value,
    ) -> FunctionId {
        let inputs = inputs
            .iter()
            .map(|(n, s)| FunctionInput {
                name: (*n).to_owned(),
                schema: self.schema(s.clone()),
            })
            .collect();
        let output = self.schema(output);
        self.p.functions.push(Function {
            name: name.into(),
            entrypoint: entrypoint.into(),
            inputs,
            output,
        });
        FunctionId(self.p.functions.len() as u32 - 1)
    }

    pub fn build(self) -> Program {
        self.p
    }
}

pub fn call(operation: OperationId, input: ExprId, next: u32) -> StepOp {
    StepOp::Call {
        operation,
        input,
        next: StepId(next),
        on_declared_refusal: None,
    }
}

pub fn finish(outcome: OutcomeId, output: Option<ExprId>) -> StepOp {
    StepOp::Finish { outcome, output }
}

pub fn choose(selector: ExprId, cases: &[(&str, u32)]) -> StepOp {
    StepOp::Choose {
        selector,
        cases: cases
            .iter()
            .map(|(l, s)| Case {
                label: (*l).to_owned(),
                step: StepId(*s),
            })
            .collect(),
    }
}

pub const T0: &str = "2026-10-09T09:00:00Z";

/// The RFC 3339 instant `text` (a test writes it).
pub fn instant(text: &str) -> Instant {
    Instant::parse(text).expect("an RFC 3339 instant")
}

/// [`T0`] as an instant: when every test run is admitted.
pub fn t0() -> Instant {
    instant(T0)
}

/// Drives one run and keeps every intermediate result.
pub struct Driver {
    pub vm: Vm,
    pub last: Resumed,
    pub commands: Vec<crate::Command>,
}

impl Driver {
    pub fn admit(program: &Program, input: Value) -> Driver {
        let vm = Vm::new(program).expect("program loads");
        let last = vm.admit(input, t0()).expect("admitted");
        Driver {
            commands: last.commands.clone(),
            vm,
            last,
        }
    }

    pub fn feed(&mut self, event: Event) -> &Resumed {
        self.last = self
            .vm
            .resume(&self.last.state, &event)
            .expect("event applies");
        self.commands.extend(self.last.commands.clone());
        &self.last
    }

    pub fn try_feed(&mut self, event: Event) -> Result<(), crate::Rejected> {
        let r = self.vm.resume(&self.last.state, &event)?;
        self.commands.extend(r.commands.clone());
        self.last = r;
        Ok(())
    }

    pub fn path(&self) -> Vec<&str> {
        self.last.state.path.iter().map(String::as_str).collect()
    }
}

/// `seconds` after [`T0`].
pub fn at(seconds: i64) -> Instant {
    t0().plus_seconds(seconds).expect("an instant")
}
