//! Building [`ExplainData`] from the authored file, the checker's results
//! and the lowered Program.

use serde_json::{json, Map, Value};

use coordinator_ir::pointer::escape_token;
use coordinator_ir::Program;

use super::{
    ArgumentData, CallData, CaseData, ChooseData, EdgeData, EdgeKind, ExplainData, FieldData,
    FinishData, FunctionData, FunctionInputData, MappingData, OperationData, OutcomeData, ReadData,
    ReadRouteData, StepData, TriggerData, WaitForData, WaitUntilData,
};
use crate::ast::{self, Mapping, Members, ProjectFile, Step};
use crate::check::{Binding, Checked, ReadRoute};
use crate::explain;
use crate::schema::{self, Sch, Ty};

/// The JSON Schema of what `ty` stands for; `None` for a type with an error.
fn ty_schema(ty: &Ty) -> Option<Value> {
    Some(match ty {
        Ty::Error => return None,
        Ty::Any => Value::Bool(true),
        Ty::Schema(list) => match list.as_slice() {
            [one] => schema::materialise(one),
            many => json!({"allOf": many.iter().map(schema::materialise).collect::<Vec<_>>()}),
        },
        Ty::Union(alts) => {
            let alts: Option<Vec<Value>> = alts.iter().map(ty_schema).collect();
            json!({"anyOf": alts?})
        }
        Ty::Literal(v) => json!({"const": v}),
        Ty::Object(members) => {
            let mut props = Map::new();
            for (name, t, _) in members {
                props.insert(name.clone(), ty_schema(t)?);
            }
            let required: Vec<&String> = members.iter().map(|(n, _, _)| n).collect();
            json!({
                "type": "object",
                "properties": props,
                "required": required,
                "additionalProperties": false
            })
        }
    })
}

struct Builder<'a> {
    p: &'a ProjectFile,
    c: &'a Checked,
}

impl Builder<'_> {
    fn reads(&self, ptr: &str) -> Vec<ReadData> {
        self.c
            .reads
            .get(ptr)
            .map(|reads| {
                reads
                    .iter()
                    .filter_map(|r| {
                        Some(ReadData {
                            route: r.route.map(|x| match x {
                                ReadRoute::Success => ReadRouteData::Success,
                                ReadRoute::DeclaredRefusal => ReadRouteData::DeclaredRefusal,
                                ReadRoute::Completion => ReadRouteData::Completion,
                            }),
                            schema: ty_schema(&r.ty)?,
                        })
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    fn mapping(&self, m: &Mapping, ptr: &str) -> MappingData {
        match m {
            Mapping::Input(x) => MappingData::Input {
                path: x.path.clone(),
                reads: self.reads(ptr),
            },
            Mapping::Event(x) => MappingData::Event {
                path: x.path.clone(),
                reads: self.reads(ptr),
            },
            Mapping::Step(x) => MappingData::Step {
                step: x.step.clone(),
                path: x.path.clone(),
                reads: self.reads(ptr),
            },
            Mapping::Literal(l) => MappingData::Literal {
                value: l.value.clone(),
            },
            Mapping::Fields(f) => MappingData::Fields {
                fields: f
                    .fields
                    .iter()
                    .map(|(k, v)| FieldData {
                        name: k.clone(),
                        mapping: self.mapping(v, &format!("{ptr}/fields/{}", escape_token(k))),
                    })
                    .collect(),
            },
            Mapping::Function(f) => MappingData::Function {
                function: f.function.clone(),
                arguments: self.arguments(&f.function, f.arguments.as_ref(), ptr),
            },
        }
    }

    /// The arguments of a call of `function` at `ptr`, in the Function's
    /// input order: explicit ones as authored, the others as bound by type.
    fn arguments(
        &self,
        function: &str,
        explicit: Option<&Members<Mapping>>,
        ptr: &str,
    ) -> Vec<ArgumentData> {
        let Some(func) = self.c.functions.get(function) else {
            return Vec::new();
        };
        let bound = self.c.bindings.get(ptr);
        let mut out = Vec::new();
        for (name, _, sch) in &func.inputs {
            if let Some(m) = explicit.and_then(|a| a.get(name)) {
                out.push(ArgumentData {
                    name: name.clone(),
                    bound_by_type: false,
                    mapping: self.mapping(m, &format!("{ptr}/arguments/{}", escape_token(name))),
                });
                continue;
            }
            let Some((_, binding)) = bound.and_then(|b| b.iter().find(|(n, _)| n == name)) else {
                continue;
            };
            let read = |s: Option<&Sch>, route| {
                s.map(|s| ReadData {
                    route,
                    schema: schema::materialise(s),
                })
                .into_iter()
                .collect()
            };
            let mapping = match binding {
                Binding::Input => MappingData::Input {
                    path: None,
                    reads: read(self.c.input.as_ref(), None),
                },
                Binding::Step(step) => MappingData::Step {
                    step: step.clone(),
                    path: None,
                    reads: read(sch.as_ref(), Some(ReadRouteData::Success)),
                },
            };
            out.push(ArgumentData {
                name: name.clone(),
                bound_by_type: true,
                mapping,
            });
        }
        out
    }

    fn step(&self, name: &str, step: &Step, program: &Program) -> StepData {
        let sp = format!("/workflow/steps/{}", escape_token(name));
        let program_step = program
            .steps
            .iter()
            .position(|s| s.name == name)
            .map(|i| format!("s{i}"))
            .unwrap_or_default();
        let mut data = StepData {
            id: name.to_owned(),
            program_step,
            kind: step.kind(),
            line: explain::step_line(self.p, name, step),
            description: None,
            successors: successors(step),
            call: None,
            choose: None,
            wait_until: None,
            wait_for: None,
            finish: None,
        };
        match step {
            Step::Call(c) => {
                data.description = c.description.clone();
                data.call = Some(self.call(c, &sp));
            }
            Step::Choose(c) => {
                data.description = c.description.clone();
                data.choose = Some(ChooseData {
                    function: c.function.clone(),
                    arguments: self.arguments(&c.function, c.arguments.as_ref(), &sp),
                    cases: c
                        .cases
                        .iter()
                        .map(|(label, step)| CaseData {
                            label: label.clone(),
                            step: step.clone(),
                        })
                        .collect(),
                });
            }
            Step::WaitUntil(w) => {
                data.description = w.description.clone();
                data.wait_until = Some(WaitUntilData {
                    until: self.mapping(&w.until, &format!("{sp}/until")),
                });
            }
            Step::WaitFor(w) => {
                data.description = w.description.clone();
                data.wait_for = Some(WaitForData {
                    step: w.completion.step.clone(),
                    completion: w.completion.name.clone(),
                    timeout_seconds: w.timeout_seconds,
                    on_timeout: w.on_timeout.clone(),
                    on_cancel: w.on_cancel.clone(),
                });
            }
            Step::Finish(f) => {
                data.description = f.description.clone();
                data.finish = Some(FinishData {
                    outcome: f.outcome.clone(),
                    output: f
                        .output
                        .as_ref()
                        .map(|m| self.mapping(m, &format!("{sp}/output"))),
                });
            }
        }
        data
    }

    /// What a call step at `sp` runs: its alias as resolved by the checker,
    /// its connection and its input mapping.
    fn call(&self, c: &ast::CallStep, sp: &str) -> CallData {
        let alias = self.c.aliases.get(&c.operation);
        CallData {
            alias: c.operation.clone(),
            host_operation: alias.map(|a| a.desc.id.clone()).unwrap_or_default(),
            connection: self
                .p
                .operations
                .get(&c.operation)
                .map(|o| o.connection.clone())
                .unwrap_or_default(),
            product: alias
                .map(|a| a.desc.product.as_str().to_owned())
                .unwrap_or_default(),
            effect: alias
                .map(|a| a.desc.effect.as_str().to_owned())
                .unwrap_or_default(),
            recovery: alias
                .map(|a| a.desc.recovery.as_str().to_owned())
                .unwrap_or_default(),
            action: alias.and_then(|a| a.action.clone()),
            input: self.mapping(&c.input, &format!("{sp}/input")),
        }
    }
}

/// The edges out of `step`, in the order `graph` draws them: `next`
/// first, then the step's other routes as authored.
fn successors(step: &Step) -> Vec<EdgeData> {
    let edge = |kind, label: &str, to: &str| EdgeData {
        kind,
        label: label.to_owned(),
        to: to.to_owned(),
    };
    let mut out = Vec::new();
    match step {
        Step::Call(c) => {
            out.push(edge(EdgeKind::Next, "next", &c.next));
            if let Some(r) = &c.on_declared_refusal {
                out.push(edge(EdgeKind::OnDeclaredRefusal, "onDeclaredRefusal", r));
            }
        }
        Step::Choose(c) => {
            for (label, to) in c.cases.iter() {
                out.push(edge(EdgeKind::Case, label, to));
            }
        }
        Step::WaitUntil(w) => out.push(edge(EdgeKind::Next, "next", &w.next)),
        Step::WaitFor(w) => {
            out.push(edge(EdgeKind::Next, "next", &w.next));
            if let Some(t) = &w.on_timeout {
                out.push(edge(EdgeKind::OnTimeout, "onTimeout", t));
            }
            if let Some(t) = &w.on_cancel {
                out.push(edge(EdgeKind::OnCancel, "onCancel", t));
            }
        }
        Step::Finish(_) => {}
    }
    out
}

/// A schema of the Program's pool; `true` for an index out of range (a
/// Program this compiler lowered has none).
fn pooled(program: &Program, id: coordinator_ir::SchemaId) -> Value {
    program
        .schemas
        .get(id.0 as usize)
        .cloned()
        .unwrap_or(Value::Bool(true))
}

/// Builds the data of an accepted project from its authored file, the
/// checker's results and its Program.
pub(crate) fn build(p: &ProjectFile, c: &Checked, program: &Program) -> ExplainData {
    let b = Builder { p, c };
    let mut order = explain::order(p);
    for (name, _) in p.workflow.steps.iter() {
        if !order.contains(name) {
            order.push(name.clone());
        }
    }
    let steps = order
        .iter()
        .filter_map(|n| Some(b.step(n, p.workflow.steps.get(n)?, program)))
        .collect();
    ExplainData {
        workflow: program.workflow.clone(),
        revision: program.revision(),
        start: p.workflow.start.clone(),
        deadline_seconds: p.workflow.deadline_seconds,
        input: pooled(program, program.input),
        steps,
        operations: operations(p, program),
        functions: functions(p, program),
        outcomes: outcomes(p, program, &order),
        triggers: triggers(&b),
    }
}

/// The declared operations, in declaration order, as the Program pins them.
fn operations(p: &ProjectFile, program: &Program) -> Vec<OperationData> {
    p.operations
        .iter()
        .filter_map(|(alias, _)| {
            let op = program.operations.iter().find(|o| &o.alias == alias)?;
            let d = &op.descriptor;
            Some(OperationData {
                alias: alias.clone(),
                host_operation: d.id.clone(),
                connection: op.connection.clone(),
                product: d.product.as_str().to_owned(),
                effect: d.effect.as_str().to_owned(),
                recovery: d.recovery.as_str().to_owned(),
                idempotency_key: d.idempotency_key,
                receipt: d.receipt,
                completions: d.completions.clone(),
                action: op.action.clone(),
                input: pooled(program, op.input),
                output: pooled(program, op.output),
                completion: op.completion.map(|s| pooled(program, s)),
            })
        })
        .collect()
}

/// The declared Functions, in declaration order, with their input and
/// output schemas from the Program.
fn functions(p: &ProjectFile, program: &Program) -> Vec<FunctionData> {
    p.functions
        .iter()
        .filter_map(|(name, _)| {
            let f = program.functions.iter().find(|f| &f.name == name)?;
            Some(FunctionData {
                name: name.clone(),
                entrypoint: f.entrypoint.clone(),
                inputs: f
                    .inputs
                    .iter()
                    .map(|i| FunctionInputData {
                        name: i.name.clone(),
                        schema: pooled(program, i.schema),
                    })
                    .collect(),
                output: pooled(program, f.output),
            })
        })
        .collect()
}

/// The declared outcomes, each with its schema and the finish steps (in
/// step `order`) that end in it.
fn outcomes(p: &ProjectFile, program: &Program, order: &[String]) -> Vec<OutcomeData> {
    p.workflow
        .outcomes
        .iter()
        .filter_map(|(name, _)| {
            let o = program.outcomes.iter().find(|o| &o.name == name)?;
            Some(OutcomeData {
                name: name.clone(),
                schema: pooled(program, o.schema),
                finishes: order
                    .iter()
                    .filter(|s| {
                        matches!(p.workflow.steps.get(s), Some(Step::Finish(f)) if &f.outcome == name)
                    })
                    .cloned()
                    .collect(),
            })
        })
        .collect()
}

/// The declared triggers, with their idempotency and input mappings.
fn triggers(b: &Builder<'_>) -> Vec<TriggerData> {
    b.p.triggers
        .iter()
        .map(|(name, t): (&String, &ast::TriggerDecl)| {
            let tp = format!("/triggers/{}", escape_token(name));
            TriggerData {
                name: name.clone(),
                source: t.source.clone(),
                event_type: t.event_type.clone(),
                idempotency: t
                    .idempotency
                    .as_ref()
                    .map(|m| b.mapping(m, &format!("{tp}/idempotency"))),
                input: b.mapping(&t.input, &format!("{tp}/input")),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_join_of_routes_reads_as_any_of_their_types() {
        let joined = Ty::Union(vec![Ty::Literal(json!("a")), Ty::Any]);
        assert_eq!(
            ty_schema(&joined),
            Some(json!({"anyOf": [{"const": "a"}, true]}))
        );
        assert_eq!(ty_schema(&Ty::Union(vec![Ty::Any, Ty::Error])), None);
    }

    #[test]
    fn fields_read_as_a_closed_object_of_their_members() {
        let obj = Ty::Object(vec![
            ("b".into(), Ty::Literal(json!(1)), "/x/fields/b".into()),
            ("a".into(), Ty::Any, "/x/fields/a".into()),
        ]);
        assert_eq!(
            ty_schema(&obj),
            Some(json!({
                "type": "object",
                "properties": {"b": {"const": 1}, "a": true},
                "required": ["b", "a"],
                "additionalProperties": false
            }))
        );
    }

    #[test]
    fn several_schemas_read_as_all_of_them() {
        let one = Sch::new(json!({"type": "string"}));
        let two = Sch::new(json!({"minLength": 1}));
        assert_eq!(
            ty_schema(&Ty::Schema(vec![one.clone()])),
            Some(json!({"type": "string"}))
        );
        assert_eq!(
            ty_schema(&Ty::Schema(vec![one, two])),
            Some(json!({"allOf": [{"type": "string"}, {"minLength": 1}]}))
        );
    }
}
