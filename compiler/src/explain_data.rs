//! `explain`'s data: the checked workflow as typed data, for tools that
//! read the IR rather than text (`coordinatorctl explain --format json`
//! carries it as `ir`; `coordinatorctl graph` draws it; the JSON Schema is
//! `coordinatorctl schema --kind explain`). docs/explain.md lists the
//! members.
//!
//! Built once per accepted project from what the compiler already has: the
//! authored file (names, declaration order, mappings as written), the
//! checker's results (resolved aliases and Functions, arguments bound by
//! type, and the type of what each mapping reads as the route-sensitive
//! check computed it) and the lowered Program (revision, step indices,
//! pinned operations and schemas). Schemas are given in the Program's form
//! (annotations removed, self-contained).

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{json, Map, Value};

use coordinator_ir::pointer::escape_token;
use coordinator_ir::Program;

use crate::ast::{self, Mapping, Members, ProjectFile, Step};
use crate::check::{Binding, Checked, ReadRoute};
use crate::explain;
use crate::schema::{self, Sch, Ty};

/// The typed IR of one accepted workflow.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExplainData {
    /// The workflow name (`project.id`).
    pub workflow: String,
    /// The revision (`sha256:<hex>`): SHA-256 of the Program's canonical JSON.
    pub revision: String,
    /// The first step.
    pub start: String,
    /// Seconds from admission to the run deadline.
    pub deadline_seconds: u64,
    /// The run input's JSON Schema.
    pub input: Value,
    /// Every step, breadth-first from `start` (the order of the explain
    /// lines); a step no route reaches would follow in declaration order.
    pub steps: Vec<StepData>,
    /// The operation aliases, in declaration order.
    pub operations: Vec<OperationData>,
    /// The Functions, in declaration order.
    pub functions: Vec<FunctionData>,
    /// The outcomes, in declaration order, each with the finish steps that end with it.
    pub outcomes: Vec<OutcomeData>,
    /// The event triggers, in declaration order.
    pub triggers: Vec<TriggerData>,
}

/// What a step does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum StepKind {
    /// Runs one operation.
    Call,
    /// Routes by a Function's result.
    Choose,
    /// Waits until an instant.
    WaitUntil,
    /// Waits for a completion of an earlier call.
    WaitFor,
    /// Ends the run with an outcome.
    Finish,
}

impl StepKind {
    /// The kind as written in `workflow.yaml` (`call`, `wait-until`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            StepKind::Call => "call",
            StepKind::Choose => "choose",
            StepKind::WaitUntil => "wait-until",
            StepKind::WaitFor => "wait-for",
            StepKind::Finish => "finish",
        }
    }
}

/// One step.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepData {
    /// The step's name in `workflow.yaml`.
    pub id: String,
    /// The step's index in the Program (`s0`, `s1`, ...: the names
    /// `explain --bytecode` prints).
    pub program_step: String,
    /// What the step does.
    pub kind: StepKind,
    /// The step's explain line (`NAME: ...`, docs/explain.md).
    pub line: String,
    /// The authored description, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The edges out of the step, in explain order: `next`, the cases in
    /// declaration order, `onDeclaredRefusal`, `onTimeout`, `onCancel`.
    pub successors: Vec<EdgeData>,
    /// For a call: the operation and its input mapping.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<CallData>,
    /// For a choose: the Function and the cases.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub choose: Option<ChooseData>,
    /// For a wait-until: the instant.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_until: Option<WaitUntilData>,
    /// For a wait-for: the completion and the timeout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_for: Option<WaitForData>,
    /// For a finish: the outcome and its output mapping.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finish: Option<FinishData>,
}

/// Which authored member an edge comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum EdgeKind {
    /// `next` of a call, wait-until or wait-for.
    Next,
    /// A case of a choose.
    Case,
    /// `onDeclaredRefusal` of a call.
    OnDeclaredRefusal,
    /// `onTimeout` of a wait-for.
    OnTimeout,
    /// `onCancel` of a wait-for.
    OnCancel,
}

/// One labelled edge.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EdgeData {
    /// The authored member.
    pub kind: EdgeKind,
    /// The label: the case label for a case, else the member name
    /// (`next`, `onDeclaredRefusal`, `onTimeout`, `onCancel`).
    pub label: String,
    /// The step it leads to.
    pub to: String,
}

/// A call step.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CallData {
    /// The operation alias.
    pub alias: String,
    /// The host operation the alias uses (`breg.read-record/v1`, ...).
    pub host_operation: String,
    /// The logical connection (bound in `runtime.yaml`).
    pub connection: String,
    /// The product (`breg`, `messaging`, `scheduling`, `casework`).
    pub product: String,
    /// The effect (`read`, `mutation`, `evaluation`).
    pub effect: String,
    /// What a lost answer leads to (`read-again`, `same-command`, ...).
    pub recovery: String,
    /// The BReg action, for `breg.invoke-action/v1`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// The operation input.
    pub input: MappingData,
}

/// A choose step.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChooseData {
    /// The Function returning a case label.
    pub function: String,
    /// Its arguments, in the Function's input order.
    pub arguments: Vec<ArgumentData>,
    /// The cases, in declaration order.
    pub cases: Vec<CaseData>,
}

/// One case of a choose.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CaseData {
    /// The label the Function returns.
    pub label: String,
    /// The step it leads to.
    pub step: String,
}

/// A wait-until step.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaitUntilData {
    /// The instant (an RFC 3339 date-time) waited for.
    pub until: MappingData,
}

/// A wait-for step.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaitForData {
    /// The call step whose completion is waited for.
    pub step: String,
    /// The completion's name (e.g. `result`).
    pub completion: String,
    /// Seconds until the timeout.
    pub timeout_seconds: u64,
    /// The step after a timeout; absent: the run ends `expired`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_timeout: Option<String>,
    /// The step after a cancel while waiting here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_cancel: Option<String>,
}

/// A finish step.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FinishData {
    /// The outcome.
    pub outcome: String,
    /// The outcome output; absent: `null`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<MappingData>,
}

/// A mapping, as authored, with the types of what it reads.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum MappingData {
    /// The run input or a member of it.
    Input {
        /// A JSON Pointer into the input.
        #[serde(skip_serializing_if = "Option::is_none")]
        path: Option<String>,
        /// What it reads (empty when the check left its type to run time).
        reads: Vec<ReadData>,
    },
    /// The triggering event or a member of it (triggers only).
    Event {
        /// A JSON Pointer into the event.
        #[serde(skip_serializing_if = "Option::is_none")]
        path: Option<String>,
        /// What it reads (empty when the check left its type to run time).
        reads: Vec<ReadData>,
    },
    /// An earlier step's output or a member of it.
    Step {
        /// The call or wait-for step read.
        step: String,
        /// A JSON Pointer into its output.
        #[serde(skip_serializing_if = "Option::is_none")]
        path: Option<String>,
        /// What it reads: one entry per output the step may have on the
        /// routes reaching here (empty when the check left its type to
        /// run time).
        reads: Vec<ReadData>,
    },
    /// A fixed value.
    Literal {
        /// The value.
        value: Value,
    },
    /// An object of mapped members.
    Fields {
        /// The members, in declaration order.
        fields: Vec<FieldData>,
    },
    /// A Function's result.
    Function {
        /// The Function.
        function: String,
        /// Its arguments, in the Function's input order.
        arguments: Vec<ArgumentData>,
    },
}

/// One member of a `fields` mapping.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FieldData {
    /// The member name.
    pub name: String,
    /// Its mapping.
    pub mapping: MappingData,
}

/// One argument of a Function call.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArgumentData {
    /// The Function input.
    pub name: String,
    /// Whether the argument was omitted and bound by type (SPEC §2.2): then
    /// `mapping` is the run input or the output of the call it was bound to.
    pub bound_by_type: bool,
    /// The value passed.
    pub mapping: MappingData,
}

/// Which output of a step a mapping reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ReadRouteData {
    /// A call's output (its `next` route).
    Success,
    /// A call's `{refusalCode}` (its `onDeclaredRefusal` route).
    DeclaredRefusal,
    /// The completion a wait-for step received.
    Completion,
}

/// The type of a value a mapping reads, as the route-sensitive check
/// computed it.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReadData {
    /// For a `step` mapping: which output of the step this is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route: Option<ReadRouteData>,
    /// A JSON Schema every value read there is valid under (after `path`).
    pub schema: Value,
}

/// An operation alias.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperationData {
    /// The alias.
    pub alias: String,
    /// The host operation (`breg.read-record/v1`, ...).
    pub host_operation: String,
    /// The logical connection.
    pub connection: String,
    /// The product.
    pub product: String,
    /// The effect.
    pub effect: String,
    /// The recovery.
    pub recovery: String,
    /// Whether every request carries an `Idempotency-Key`.
    pub idempotency_key: bool,
    /// Whether the product answers receipt lookups (`reconcile`).
    pub receipt: bool,
    /// The completions the operation exposes (for `wait-for`).
    pub completions: Vec<String>,
    /// The BReg action, for `breg.invoke-action/v1`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// The operation input's JSON Schema.
    pub input: Value,
    /// The output's JSON Schema (narrowed by the alias's `output`).
    pub output: Value,
    /// The exposed completion's JSON Schema.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion: Option<Value>,
}

/// A Function.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FunctionData {
    /// The name declared under `functions`.
    pub name: String,
    /// The Rhai function in `functions.rhai`.
    pub entrypoint: String,
    /// The inputs, in the entrypoint's parameter order.
    pub inputs: Vec<FunctionInputData>,
    /// The result's JSON Schema.
    pub output: Value,
}

/// One Function input.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FunctionInputData {
    /// The parameter name.
    pub name: String,
    /// Its JSON Schema.
    pub schema: Value,
}

/// An outcome.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OutcomeData {
    /// The outcome name.
    pub name: String,
    /// Its output's JSON Schema.
    pub schema: Value,
    /// The finish steps that end with it, in step order.
    pub finishes: Vec<String>,
}

/// An event trigger.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TriggerData {
    /// The trigger name.
    pub name: String,
    /// The `eventSources` entry of `runtime.yaml`.
    pub source: String,
    /// The event type.
    pub event_type: String,
    /// What identifies one admission; absent: the event's `/id`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotency: Option<MappingData>,
    /// The run input.
    pub input: MappingData,
}

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
        let edge = |kind, label: &str, to: &str| EdgeData {
            kind,
            label: label.to_owned(),
            to: to.to_owned(),
        };
        let program_step = program
            .steps
            .iter()
            .position(|s| s.name == name)
            .map(|i| format!("s{i}"))
            .unwrap_or_default();
        let mut data = StepData {
            id: name.to_owned(),
            program_step,
            kind: StepKind::Finish,
            line: explain::step_line(self.p, name, step),
            description: None,
            successors: Vec::new(),
            call: None,
            choose: None,
            wait_until: None,
            wait_for: None,
            finish: None,
        };
        match step {
            Step::Call(c) => {
                data.kind = StepKind::Call;
                data.description = c.description.clone();
                data.successors.push(edge(EdgeKind::Next, "next", &c.next));
                if let Some(r) = &c.on_declared_refusal {
                    data.successors
                        .push(edge(EdgeKind::OnDeclaredRefusal, "onDeclaredRefusal", r));
                }
                let alias = self.c.aliases.get(&c.operation);
                data.call = Some(CallData {
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
                });
            }
            Step::Choose(c) => {
                data.kind = StepKind::Choose;
                data.description = c.description.clone();
                for (label, to) in c.cases.iter() {
                    data.successors.push(edge(EdgeKind::Case, label, to));
                }
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
                data.kind = StepKind::WaitUntil;
                data.description = w.description.clone();
                data.successors.push(edge(EdgeKind::Next, "next", &w.next));
                data.wait_until = Some(WaitUntilData {
                    until: self.mapping(&w.until, &format!("{sp}/until")),
                });
            }
            Step::WaitFor(w) => {
                data.kind = StepKind::WaitFor;
                data.description = w.description.clone();
                data.successors.push(edge(EdgeKind::Next, "next", &w.next));
                if let Some(t) = &w.on_timeout {
                    data.successors
                        .push(edge(EdgeKind::OnTimeout, "onTimeout", t));
                }
                if let Some(t) = &w.on_cancel {
                    data.successors
                        .push(edge(EdgeKind::OnCancel, "onCancel", t));
                }
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
    let operations = p
        .operations
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
        .collect();
    let functions = p
        .functions
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
        .collect();
    let outcomes = p
        .workflow
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
        .collect();
    let triggers = p
        .triggers
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
        .collect();
    ExplainData {
        workflow: program.workflow.clone(),
        revision: program.revision(),
        start: p.workflow.start.clone(),
        deadline_seconds: p.workflow.deadline_seconds,
        input: pooled(program, program.input),
        steps,
        operations,
        functions,
        outcomes,
        triggers,
    }
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
