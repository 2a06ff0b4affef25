//! Lowering a checked project to a [`Program`].
//!
//! Everything is numbered in a canonical order so the revision does not
//! depend on key order: steps, outcomes, aliases, Functions and triggers by
//! name; `fields` members and `choose` cases by name; schemas and constants
//! interned by their canonical JSON in first-use order of that walk.

use std::collections::BTreeMap;

use coordinator_ir::pointer::escape_token;
use coordinator_ir::{
    canonical, Argument, Case, ConstId, Expr, ExprId, Function, FunctionId, FunctionInput, Instr,
    OperationBinding, OperationId, Outcome, OutcomeId, Program, SchemaId, Step, StepId, StepOp,
    Trigger, FORMAT_VERSION,
};
use serde_json::Value;

use crate::ast::{self, Mapping, Named, ProjectFile};
use crate::check::{Binding, Checked};
use crate::schema::{self, Sch};

struct Lower<'a> {
    p: &'a ProjectFile,
    c: &'a Checked,
    steps: BTreeMap<&'a str, StepId>,
    outcomes: BTreeMap<&'a str, OutcomeId>,
    functions: BTreeMap<&'a str, FunctionId>,
    schemas: Vec<Value>,
    schema_ids: BTreeMap<String, SchemaId>,
    constants: Vec<Value>,
    const_ids: BTreeMap<String, ConstId>,
    exprs: Vec<Expr>,
}

/// The id of `name`, which checking resolved; `None` (a compiler bug)
/// makes lowering fail rather than point at a made-up id.
fn index<T: Copy>(map: &BTreeMap<&str, T>, name: &str) -> Option<T> {
    map.get(name).copied()
}

/// Lowers a project that passed every check. `None` only if a resolution
/// that checking guarantees is missing (a compiler bug, never a user error).
///
/// Schemas and constants are interned in the order this walks: the input,
/// the operations, the Functions, the outcomes, the steps, the triggers.
pub(crate) fn lower(p: &ProjectFile, c: &Checked, function_source: &str) -> Option<Program> {
    let step_names = sorted_names(p.workflow.steps.iter().map(|(k, _)| k.as_str()));
    let outcome_names = sorted_names(p.workflow.outcomes.iter().map(|(k, _)| k.as_str()));
    let mut l = Lower {
        p,
        c,
        steps: numbered(step_names.iter().copied(), StepId),
        outcomes: numbered(outcome_names.iter().copied(), OutcomeId),
        functions: numbered(c.functions.keys().map(String::as_str), FunctionId),
        schemas: Vec::new(),
        schema_ids: BTreeMap::new(),
        constants: Vec::new(),
        const_ids: BTreeMap::new(),
        exprs: Vec::new(),
    };
    let input = l.schema(c.input.as_ref()?);
    let operations = l.operation_bindings()?;
    let functions = l.function_signatures()?;
    let outcomes = l.outcome_schemas(&outcome_names)?;
    let alias_ids = numbered(c.aliases.keys().map(String::as_str), OperationId);
    let steps = step_names
        .iter()
        .map(|name| l.step(name, &alias_ids))
        .collect::<Option<Vec<_>>>()?;
    let triggers = l.triggers()?;
    let mut connections: Vec<String> = operations.iter().map(|o| o.connection.clone()).collect();
    connections.sort();
    connections.dedup();
    Some(Program {
        format: FORMAT_VERSION,
        workflow: p.project.id.clone(),
        input,
        deadline_seconds: p.workflow.deadline_seconds,
        start: index(&l.steps, &p.workflow.start)?,
        steps,
        outcomes,
        operations,
        functions,
        function_source: if p.functions.is_empty() {
            String::new()
        } else {
            crate::functions::normalise_source(function_source)
        },
        triggers,
        connections,
        exprs: l.exprs,
        schemas: l.schemas,
        constants: l.constants,
    })
}

/// The names, sorted: the canonical numbering order.
fn sorted_names<'a>(names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut names: Vec<&str> = names.collect();
    names.sort_unstable();
    names
}

/// Numbers `names` in the order given: the `i`th name gets `id(i)`.
fn numbered<'a, T>(names: impl Iterator<Item = &'a str>, id: fn(u32) -> T) -> BTreeMap<&'a str, T> {
    names.enumerate().map(|(i, n)| (n, id(i as u32))).collect()
}

impl Lower<'_> {
    /// One binding per alias, in alias order, with its schemas interned.
    fn operation_bindings(&mut self) -> Option<Vec<OperationBinding>> {
        let (p, c) = (self.p, self.c);
        let mut operations = Vec::new();
        for (name, a) in &c.aliases {
            let decl = p.operations.get(name)?;
            operations.push(OperationBinding {
                alias: name.clone(),
                descriptor: a.desc.clone(),
                connection: decl.connection.clone(),
                action: a.action.clone(),
                input: self.schema(&a.input),
                output: self.schema(&a.output),
                completion: a.completion.as_ref().map(|(_, s)| self.schema(s)),
            });
        }
        Some(operations)
    }

    /// One signature per Function, in name order: its inputs in parameter
    /// order, then its output.
    fn function_signatures(&mut self) -> Option<Vec<Function>> {
        let c = self.c;
        let mut funcs = Vec::new();
        for (name, f) in &c.functions {
            let params = f.params.as_ref()?;
            let mut inputs = Vec::new();
            for param in params {
                let (_, _, s) = f.inputs.iter().find(|(n, _, _)| n == param)?;
                inputs.push(FunctionInput {
                    name: param.clone(),
                    schema: self.schema(s.as_ref()?),
                });
            }
            funcs.push(Function {
                name: name.clone(),
                entrypoint: f.entrypoint.clone(),
                inputs,
                output: self.schema(f.output.as_ref()?),
            });
        }
        Some(funcs)
    }

    /// One outcome per name, in the order given (sorted by the caller).
    fn outcome_schemas(&mut self, outcome_names: &[&str]) -> Option<Vec<Outcome>> {
        let c = self.c;
        let mut outs = Vec::new();
        for n in outcome_names {
            outs.push(Outcome {
                name: (*n).to_owned(),
                schema: self.schema(c.outcomes.get(*n)?),
            });
        }
        Some(outs)
    }

    /// The step `name` with its routes numbered and its mappings emitted.
    fn step(&mut self, name: &str, alias_ids: &BTreeMap<&str, OperationId>) -> Option<Step> {
        let p = self.p;
        let step = p.workflow.steps.get(name)?;
        let sp = format!("/workflow/steps/{}", escape_token(name));
        let step_ids = self.steps.clone();
        let s = |name: &str| index(&step_ids, name);
        // An optional route: `Some(None)` when absent, `None` when named but
        // unresolved (a compiler bug).
        let route = |name: Option<&str>| match name {
            None => Some(None),
            Some(n) => index(&step_ids, n).map(Some),
        };
        let op = match step {
            ast::Step::Call(call) => StepOp::Call {
                operation: *alias_ids.get(call.operation.as_str())?,
                input: self.expr(&call.input, &format!("{sp}/input"))?,
                next: s(&call.next)?,
                on_declared_refusal: route(call.on_declared_refusal.as_deref())?,
            },
            ast::Step::Choose(ch) => self.choose(ch, &sp)?,
            ast::Step::WaitUntil(w) => StepOp::WaitUntil {
                until: self.expr(&w.until, &format!("{sp}/until"))?,
                next: s(&w.next)?,
            },
            ast::Step::WaitFor(w) => StepOp::WaitFor {
                call: s(&w.completion.step)?,
                completion: w.completion.name.clone(),
                timeout_seconds: w.timeout_seconds,
                next: s(&w.next)?,
                on_timeout: route(w.on_timeout.as_deref())?,
                on_cancel: route(w.on_cancel.as_deref())?,
            },
            ast::Step::Finish(f) => StepOp::Finish {
                outcome: index(&self.outcomes, &f.outcome)?,
                output: match &f.output {
                    Some(m) => Some(self.expr(m, &format!("{sp}/output"))?),
                    None => None,
                },
            },
        };
        Some(Step {
            name: name.to_owned(),
            op,
        })
    }

    /// A `choose` step at pointer `sp`: its cases sorted by label, its
    /// selector the Function call.
    fn choose(&mut self, ch: &ast::ChooseStep, sp: &str) -> Option<StepOp> {
        let mut cases: Vec<Case> = ch
            .cases
            .iter()
            .map(|(label, to)| {
                Some(Case {
                    label: label.clone(),
                    step: index(&self.steps, to)?,
                })
            })
            .collect::<Option<_>>()?;
        cases.sort_by(|a, b| a.label.cmp(&b.label));
        let mut code = Vec::new();
        self.call(&ch.function, ch.arguments.as_deref(), sp, &mut code)?;
        Some(StepOp::Choose {
            selector: self.push_expr(code),
            cases,
        })
    }

    /// The triggers in name order; a trigger without `idempotency` keys on
    /// the event's `/id`.
    fn triggers(&mut self) -> Option<Vec<Trigger>> {
        let p = self.p;
        let mut tnames: Vec<&String> = p.triggers.iter().map(|(k, _)| k).collect();
        tnames.sort();
        let mut triggers = Vec::new();
        for n in tnames {
            let t = p.triggers.get(n)?;
            let tp = format!("/triggers/{}", escape_token(n));
            let idempotency = match &t.idempotency {
                Some(m) => self.expr(m, &format!("{tp}/idempotency"))?,
                None => self.push_expr(vec![Instr::Event {
                    path: Some("/id".into()),
                }]),
            };
            let input = self.expr(&t.input, &format!("{tp}/input"))?;
            triggers.push(Trigger {
                name: n.clone(),
                source: t.source.clone(),
                event_type: t.event_type.clone(),
                idempotency,
                input,
            });
        }
        Some(triggers)
    }
}

impl Lower<'_> {
    fn schema(&mut self, s: &Sch) -> SchemaId {
        let v = schema::materialise(s);
        let key = canonical::to_string(&v);
        if let Some(id) = self.schema_ids.get(&key) {
            return *id;
        }
        let id = SchemaId(self.schemas.len() as u32);
        self.schemas.push(v);
        self.schema_ids.insert(key, id);
        id
    }

    fn constant(&mut self, v: &Value) -> ConstId {
        let key = canonical::to_string(v);
        if let Some(id) = self.const_ids.get(&key) {
            return *id;
        }
        let id = ConstId(self.constants.len() as u32);
        self.constants.push(v.clone());
        self.const_ids.insert(key, id);
        id
    }

    fn push_expr(&mut self, code: Vec<Instr>) -> ExprId {
        let id = ExprId(self.exprs.len() as u32);
        self.exprs.push(Expr { code });
        id
    }

    fn expr(&mut self, m: &Mapping, ptr: &str) -> Option<ExprId> {
        let mut code = Vec::new();
        self.emit(m, ptr, &mut code)?;
        Some(self.push_expr(code))
    }

    fn emit(&mut self, m: &Mapping, ptr: &str, code: &mut Vec<Instr>) -> Option<()> {
        match m {
            Mapping::Input(p) => code.push(Instr::Input {
                path: p.path.clone(),
            }),
            Mapping::Event(p) => code.push(Instr::Event {
                path: p.path.clone(),
            }),
            Mapping::Step(s) => code.push(Instr::StepOutput {
                step: *self.steps.get(s.step.as_str())?,
                path: s.path.clone(),
            }),
            Mapping::Literal(l) => {
                let value = self.constant(&l.value);
                code.push(Instr::Const { value });
            }
            Mapping::Fields(f) => {
                let mut keys: Vec<&String> = f.fields.iter().map(|(k, _)| k).collect();
                keys.sort();
                for k in &keys {
                    let sub = f.fields.get(k)?;
                    self.emit(sub, &format!("{ptr}/fields/{}", escape_token(k)), code)?;
                }
                code.push(Instr::Object {
                    keys: keys.into_iter().cloned().collect(),
                });
            }
            Mapping::Function(f) => self.call(&f.function, f.arguments.as_deref(), ptr, code)?,
        }
        Some(())
    }

    fn call(
        &mut self,
        fname: &str,
        args: Option<&Named<Mapping>>,
        ptr: &str,
        code: &mut Vec<Instr>,
    ) -> Option<()> {
        let c = self.c;
        let func = c.functions.get(fname)?;
        let bindings = c.bindings.get(ptr)?;
        let mut out_args = Vec::new();
        for param in func.params.as_ref()? {
            match args.and_then(|a| a.get(param)) {
                Some(m) => {
                    self.emit(m, &format!("{ptr}/arguments/{}", escape_token(param)), code)?;
                    out_args.push(Argument {
                        name: param.clone(),
                        explicit: true,
                    });
                }
                None => {
                    let (_, b) = bindings.iter().find(|(n, _)| n == param)?;
                    code.push(match b {
                        Binding::Input => Instr::Input { path: None },
                        Binding::Step(s) => Instr::StepOutput {
                            step: *self.steps.get(s.as_str())?,
                            path: None,
                        },
                    });
                    out_args.push(Argument {
                        name: param.clone(),
                        explicit: false,
                    });
                }
            }
        }
        code.push(Instr::Call {
            function: *self.functions.get(fname)?,
            args: out_args,
        });
        let _ = self.p;
        Some(())
    }
}
