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

mod build;

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

pub(crate) use build::build;

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

/// What a step does: the IR's vocabulary, serialised as its word (`call`,
/// `wait-until`, ...).
pub use coordinator_ir::StepKind;

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
