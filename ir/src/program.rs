//! The compiled workflow: a [`Program`] of steps, mapping expressions, and pools.
//!
//! Everything here is plain data. Entities refer to each other by typed `u32`
//! indices into the Program's vectors ([`StepId`] into `steps`, [`ExprId`] into
//! `exprs`, ...). The compiler guarantees every index is in range; the VM
//! validates that once when it loads a Program ([`Program::validate`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::catalogue::OperationDescriptor;
use crate::StepKind;

/// Version of the encoding below. It is the first member of every encoded
/// Program, so that a reader can refuse an encoding it does not know.
pub const FORMAT_VERSION: u32 = 1;

macro_rules! index_type {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub u32);

        impl $name {
            /// The index as a `usize`, for indexing the Program's vector.
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}{}", $prefix, self.0)
            }
        }
    };
}

index_type!(
    /// Index into [`Program::steps`].
    StepId,
    "s"
);
index_type!(
    /// Index into [`Program::outcomes`].
    OutcomeId,
    "o"
);
index_type!(
    /// Index into [`Program::operations`] (one entry per operation alias).
    OperationId,
    "op"
);
index_type!(
    /// Index into [`Program::functions`].
    FunctionId,
    "f"
);
index_type!(
    /// Index into [`Program::exprs`] (a mapping compiled to instructions).
    ExprId,
    "e"
);
index_type!(
    /// Index into [`Program::schemas`] (resolved JSON Schemas).
    SchemaId,
    "t"
);
index_type!(
    /// Index into [`Program::constants`] (literal JSON values).
    ConstId,
    "c"
);

/// A compiled workflow. Its canonical encoding (see [`crate::canonical`]) is
/// what the revision hashes; it holds nothing that does not change execution
/// (no titles, descriptions, project version, comments or source positions).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Program {
    /// Always [`FORMAT_VERSION`] for Programs this crate writes.
    pub format: u32,
    /// The workflow name (`project.id`).
    pub workflow: String,
    /// Schema of the run input.
    pub input: SchemaId,
    /// The run deadline, seconds after admission (1 ..= 31,536,000).
    pub deadline_seconds: u64,
    /// The first step.
    pub start: StepId,
    /// Steps, in the order the compiler assigned (declaration order).
    pub steps: Vec<Step>,
    /// Declared outcomes, in declaration order.
    pub outcomes: Vec<Outcome>,
    /// Operation aliases, each pinned to one catalogue operation.
    pub operations: Vec<OperationBinding>,
    /// Functions (Rhai entrypoints) with their declared types.
    pub functions: Vec<Function>,
    /// Text of `functions.rhai`, line endings normalised to LF; empty when
    /// the project has no Functions.
    pub function_source: String,
    /// Event triggers (SPEC §2.4), in declaration order.
    pub triggers: Vec<Trigger>,
    /// Logical connection names the operations use, sorted, without repeats.
    pub connections: Vec<String>,
    /// Mapping expressions.
    pub exprs: Vec<Expr>,
    /// Resolved JSON Schemas (annotations removed, local `$ref`s kept).
    pub schemas: Vec<Value>,
    /// Literal values used by `Instr::Const`.
    pub constants: Vec<Value>,
}

/// One step of the workflow graph.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// The step's name in `workflow.yaml`.
    pub name: String,
    /// What the step does.
    pub op: StepOp,
}

/// The step instruction: one per step kind (SPEC §2.1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum StepOp {
    /// Run one operation with the mapped input.
    Call {
        operation: OperationId,
        input: ExprId,
        next: StepId,
        /// Route for an owner-declared no-effect refusal (BReg immediate
        /// actions only); its output there is `{refusalCode}`.
        on_declared_refusal: Option<StepId>,
    },
    /// Evaluate `selector` (a Function call returning a case label) and go to
    /// the matching case's step.
    Choose { selector: ExprId, cases: Vec<Case> },
    /// Wait until the RFC 3339 instant `until` evaluates to.
    WaitUntil { until: ExprId, next: StepId },
    /// Wait for completion `completion` exposed by the accepted call `call`.
    WaitFor {
        call: StepId,
        completion: String,
        /// Seconds after the wait begins; shorter than the run deadline.
        timeout_seconds: u64,
        next: StepId,
        on_timeout: Option<StepId>,
        on_cancel: Option<StepId>,
    },
    /// End the run with a declared outcome; `output` absent means `null`.
    Finish {
        outcome: OutcomeId,
        output: Option<ExprId>,
    },
}

impl StepOp {
    /// The step's kind (`call`, `choose`, `wait-until`, `wait-for`,
    /// `finish`): the disassembler, inspection and the hosts take it from
    /// here. Its word is also this enum's serde tag (a test holds that).
    pub fn kind(&self) -> StepKind {
        match self {
            StepOp::Call { .. } => StepKind::Call,
            StepOp::Choose { .. } => StepKind::Choose,
            StepOp::WaitUntil { .. } => StepKind::WaitUntil,
            StepOp::WaitFor { .. } => StepKind::WaitFor,
            StepOp::Finish { .. } => StepKind::Finish,
        }
    }
}

/// One `choose` case.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub label: String,
    pub step: StepId,
}

/// A declared outcome and the schema of its output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Outcome {
    pub name: String,
    pub schema: SchemaId,
}

/// An operation alias pinned to one catalogue operation and one connection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperationBinding {
    /// The alias declared under `operations`.
    pub alias: String,
    /// The catalogue entry, copied so the Program is self-contained.
    pub descriptor: OperationDescriptor,
    /// The logical connection name bound in `runtime.yaml`.
    pub connection: String,
    /// The BReg action this alias invokes (`breg.invoke-action/v1` only).
    pub action: Option<String>,
    /// Schema of the operation input.
    pub input: SchemaId,
    /// Effective output schema: the catalogue's, narrowed by the alias's
    /// `output` (as `allOf`) when it has one.
    pub output: SchemaId,
    /// Schema of the exposed completion's value, when the operation has one.
    pub completion: Option<SchemaId>,
}

/// A Function: a pure Rhai entrypoint with declared input and output types.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Function {
    /// The name declared under `functions`.
    pub name: String,
    /// The Rhai function name in `function_source`.
    pub entrypoint: String,
    /// Declared inputs, in the order of the entrypoint's parameters.
    pub inputs: Vec<FunctionInput>,
    /// Schema of the result.
    pub output: SchemaId,
}

/// One declared Function input.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FunctionInput {
    /// Equal to the entrypoint's parameter name.
    pub name: String,
    pub schema: SchemaId,
}

/// An event trigger (SPEC §2.4).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trigger {
    pub name: String,
    /// The `eventSources` entry of `runtime.yaml`.
    pub source: String,
    pub event_type: String,
    /// Evaluates to the string that identifies one admission.
    pub idempotency: ExprId,
    /// Evaluates to the run input.
    pub input: ExprId,
}

/// A mapping compiled to a short stack program: each instruction pushes one
/// value; `Object` and `Call` pop their operands. A well-formed expression
/// leaves exactly one value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expr {
    pub code: Vec<Instr>,
}

/// One instruction of a mapping expression.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "i", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Instr {
    /// Push the run input, or its member at JSON Pointer `path` (RFC 6901).
    Input { path: Option<String> },
    /// Push the output of an earlier `call` or `wait-for` step, or its member
    /// at `path`.
    StepOutput { step: StepId, path: Option<String> },
    /// Push a literal.
    Const { value: ConstId },
    /// Push the triggering event, or its member at `path` (triggers only).
    Event { path: Option<String> },
    /// Pop `keys.len()` values (first key deepest) and push an object.
    Object { keys: Vec<String> },
    /// Pop one value per argument (first argument deepest), call the
    /// Function with arguments by name, and push its result.
    Call {
        function: FunctionId,
        args: Vec<Argument>,
    },
}

/// A Function argument of an `Instr::Call`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Argument {
    /// The parameter name.
    pub name: String,
    /// `true` when the author wrote it under `arguments`; `false` when the
    /// compiler bound it by its declared type (SPEC §2.2).
    pub explicit: bool,
}

impl Program {
    /// The step with this id; `None` only for an id that
    /// [`Program::validate`] refuses.
    pub fn step(&self, id: StepId) -> Option<&Step> {
        self.steps.get(id.index())
    }

    /// Finds a step by name.
    pub fn step_id(&self, name: &str) -> Option<StepId> {
        self.steps
            .iter()
            .position(|s| s.name == name)
            .map(|i| StepId(i as u32))
    }

    /// Successors of a step in the order `explain` walks them: `next`, cases
    /// in declaration order, `onDeclaredRefusal`, `onTimeout`, `onCancel`.
    pub fn successors(&self, id: StepId) -> Vec<StepId> {
        self.step(id)
            .map(|s| self.successors_of(&s.op))
            .unwrap_or_default()
    }

    /// Step ids breadth-first from `start`, each once.
    pub fn breadth_first(&self) -> Vec<StepId> {
        let mut seen = vec![false; self.steps.len()];
        let mut order = Vec::new();
        let mut queue = std::collections::VecDeque::from([self.start]);
        while let Some(id) = queue.pop_front() {
            match seen.get_mut(id.index()) {
                Some(flag) if !*flag => *flag = true,
                _ => continue,
            }
            order.push(id);
            queue.extend(self.successors(id));
        }
        order
    }

    /// Checks that every index is in range and every expression leaves one
    /// value. Returns the first problem found, as a sentence.
    pub fn validate(&self) -> Result<(), String> {
        if self.format != FORMAT_VERSION {
            return Err(format!(
                "program format {} is not supported (expected {FORMAT_VERSION})",
                self.format
            ));
        }
        let steps = self.steps.len();
        let check = |what: &str, i: usize, len: usize| {
            if i < len {
                Ok(())
            } else {
                Err(format!("{what} index {i} is out of range (len {len})"))
            }
        };
        check("start step", self.start.index(), steps)?;
        check("input schema", self.input.index(), self.schemas.len())?;
        for step in &self.steps {
            for succ in self.successors_of(&step.op) {
                check("step", succ.index(), steps)?;
            }
            match &step.op {
                StepOp::Call {
                    operation, input, ..
                } => {
                    check("operation", operation.index(), self.operations.len())?;
                    check("expression", input.index(), self.exprs.len())?;
                }
                StepOp::Choose { selector, .. } => {
                    check("expression", selector.index(), self.exprs.len())?
                }
                StepOp::WaitUntil { until, .. } => {
                    check("expression", until.index(), self.exprs.len())?
                }
                StepOp::WaitFor { call, .. } => check("step", call.index(), steps)?,
                StepOp::Finish { outcome, output } => {
                    check("outcome", outcome.index(), self.outcomes.len())?;
                    if let Some(e) = output {
                        check("expression", e.index(), self.exprs.len())?;
                    }
                }
            }
        }
        for o in &self.outcomes {
            check("schema", o.schema.index(), self.schemas.len())?;
        }
        for op in &self.operations {
            check("schema", op.input.index(), self.schemas.len())?;
            check("schema", op.output.index(), self.schemas.len())?;
            if let Some(c) = op.completion {
                check("schema", c.index(), self.schemas.len())?;
            }
        }
        for f in &self.functions {
            check("schema", f.output.index(), self.schemas.len())?;
            for i in &f.inputs {
                check("schema", i.schema.index(), self.schemas.len())?;
            }
        }
        for t in &self.triggers {
            check("expression", t.idempotency.index(), self.exprs.len())?;
            check("expression", t.input.index(), self.exprs.len())?;
        }
        for (n, e) in self.exprs.iter().enumerate() {
            let mut depth: usize = 0;
            for instr in &e.code {
                let (pops, pushes) = match instr {
                    Instr::Input { .. } | Instr::Event { .. } => (0, 1),
                    Instr::StepOutput { step, .. } => {
                        check("step", step.index(), steps)?;
                        (0, 1)
                    }
                    Instr::Const { value } => {
                        check("constant", value.index(), self.constants.len())?;
                        (0, 1)
                    }
                    Instr::Object { keys } => (keys.len(), 1),
                    Instr::Call { function, args } => {
                        check("function", function.index(), self.functions.len())?;
                        (args.len(), 1)
                    }
                };
                depth = depth
                    .checked_sub(pops)
                    .ok_or_else(|| format!("expression e{n} pops an empty stack"))?
                    + pushes;
            }
            if depth != 1 {
                return Err(format!("expression e{n} leaves {depth} values, not 1"));
            }
        }
        Ok(())
    }

    fn successors_of(&self, op: &StepOp) -> Vec<StepId> {
        match op {
            StepOp::Call {
                next,
                on_declared_refusal,
                ..
            } => std::iter::once(*next)
                .chain(on_declared_refusal.iter().copied())
                .collect(),
            StepOp::Choose { cases, .. } => cases.iter().map(|c| c.step).collect(),
            StepOp::WaitUntil { next, .. } => vec![*next],
            StepOp::WaitFor {
                next,
                on_timeout,
                on_cancel,
                ..
            } => std::iter::once(*next)
                .chain(on_timeout.iter().copied())
                .chain(on_cancel.iter().copied())
                .collect(),
            StepOp::Finish { .. } => Vec::new(),
        }
    }
}
