//! The interpreter: [`Vm::admit`] starts a run, [`Vm::resume`] applies one
//! [`Event`](crate::Event) to a [`RunState`]. Both are pure functions of
//! their arguments.
//!
//! The files follow a run's phases: `entry.rs` (the public entry points:
//! admission, one event, a trigger's start), `eval.rs` (mappings and
//! Functions), `run.rs` (one event being applied: bindings, ending,
//! failing), `steps.rs` (entering a step, one function per step kind),
//! `call.rs` (a call's dispatches, receipt lookups and answers, one function
//! per answer kind), `waits.rs` (time: timers due, the deadline, a
//! completion) and `operator.rs` (cancel, retry-same, reconcile).

mod call;
mod entry;
mod eval;
mod operator;
mod run;
mod steps;
mod waits;

use coordinator_ir::validation::{self, Validator};
use coordinator_ir::{Instr, Program, SchemaId, StepId};
use serde_json::Value;

use crate::functions::Sandbox;
use crate::model::{Command, EdgeTaken, RejectCode, Rejected, RunState};
use coordinator_ir::instant::Instant;

/// A Program that failed to load: the sentence says why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadError(pub String);

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LoadError {}

/// What a trigger's mappings make of an event: the admission's
/// idempotency string and the run input.
#[derive(Clone, Debug, PartialEq)]
pub struct TriggerStart {
    pub idempotency: String,
    pub input: Value,
}

/// A loaded Program, ready to run any number of runs. Loading validates the
/// Program once, compiles every schema and `functions.rhai` once, and checks
/// every Function's entrypoint and every call's argument names. `Vm` is
/// `Send + Sync`; it holds no run state.
pub struct Vm {
    program: Program,
    sandbox: Sandbox,
    validators: Vec<Validator>,
}

/// One event being applied to one state.
struct Run<'v> {
    vm: &'v Vm,
    st: RunState,
    commands: Vec<Command>,
    /// The edges taken so far, in order.
    edges: Vec<EdgeTaken>,
}

fn reject(code: RejectCode, message: impl Into<String>) -> Rejected {
    Rejected {
        code,
        message: message.into(),
    }
}

/// `instant` when it can be written (years 0001–9999), else a
/// [`RejectCode::InstantInvalid`] rejection: every instant the VM records
/// in a state or puts in a command passes here, so both always serialize.
fn writable(instant: Instant) -> Result<Instant, Rejected> {
    match instant.format() {
        Ok(_) => Ok(instant),
        Err(e) => Err(reject(RejectCode::InstantInvalid, e.0)),
    }
}

impl Vm {
    /// Loads `program` (cloned into the Vm).
    ///
    /// # Errors
    /// A [`LoadError`] when [`Program::validate`] refuses it, a schema does
    /// not compile, `functions.rhai` does not compile, an entrypoint is
    /// missing or its parameters differ from the declared inputs, or a
    /// Function call's argument names differ from the declared inputs.
    pub fn new(program: &Program) -> Result<Vm, LoadError> {
        program.validate().map_err(LoadError)?;
        let mut validators = Vec::with_capacity(program.schemas.len());
        for (i, schema) in program.schemas.iter().enumerate() {
            let v = validation::validator(schema)
                .map_err(|e| LoadError(format!("schema t{i} does not compile: {e}")))?;
            validators.push(v);
        }
        let sandbox = Sandbox::new(&program.function_source).map_err(LoadError)?;
        check_entrypoints(program, &sandbox)?;
        check_call_arguments(program)?;
        Ok(Vm {
            program: program.clone(),
            sandbox,
            validators,
        })
    }

    /// The loaded Program.
    pub fn program(&self) -> &Program {
        &self.program
    }

    fn step_name(&self, id: StepId) -> &str {
        self.program.step(id).map(|s| s.name.as_str()).unwrap_or("")
    }

    fn check_schema(&self, id: SchemaId, value: &Value) -> Result<(), (String, String)> {
        match self.validators.get(id.index()) {
            Some(v) => v
                .validate(value)
                .map_err(|e| (e.instance_path().to_string(), schema_fault(e.kind()))),
            None => Err((String::new(), format!("no schema {id}"))),
        }
    }
}

/// A JSON Pointer as a message shows it: the root (the empty pointer) as
/// `/`, so a whole value refused reads "at `/`", never "at ``". Only for
/// text: a pointer kept as data (a [`FunctionError`](crate::FunctionError)'s)
/// stays empty at the root.
pub(crate) fn shown_pointer(pointer: &str) -> String {
    if pointer.is_empty() {
        "/".to_owned()
    } else {
        pointer.to_owned()
    }
}

/// Every Function's entrypoint exists once in `functions.rhai`, with the
/// declared inputs as its parameters, in order.
fn check_entrypoints(program: &Program, sandbox: &Sandbox) -> Result<(), LoadError> {
    for f in &program.functions {
        let declared: Vec<&str> = f.inputs.iter().map(|i| i.name.as_str()).collect();
        match sandbox.parameters(&f.entrypoint) {
            Some(params)
                if params
                    .iter()
                    .map(String::as_str)
                    .eq(declared.iter().copied()) => {}
            Some(params) => {
                return Err(LoadError(format!(
                    "function `{}`: entrypoint `{}` takes ({}) but the declared inputs are ({})",
                    f.name,
                    f.entrypoint,
                    params.join(", "),
                    declared.join(", ")
                )))
            }
            None => {
                return Err(LoadError(format!(
                    "function `{}`: functions.rhai has no single entrypoint `{}`",
                    f.name, f.entrypoint
                )))
            }
        }
    }
    Ok(())
}

/// Every Function call in an expression passes exactly the declared input
/// names (in any order).
fn check_call_arguments(program: &Program) -> Result<(), LoadError> {
    for (n, expr) in program.exprs.iter().enumerate() {
        for instr in &expr.code {
            if let Instr::Call { function, args } = instr {
                let f = program
                    .functions
                    .get(function.index())
                    .ok_or_else(|| LoadError(format!("expression e{n}: no function {function}")))?;
                let mut given: Vec<&str> = args.iter().map(|a| a.name.as_str()).collect();
                let mut wanted: Vec<&str> = f.inputs.iter().map(|i| i.name.as_str()).collect();
                given.sort_unstable();
                wanted.sort_unstable();
                if given != wanted {
                    return Err(LoadError(format!(
                        "expression e{n}: call of `{}` passes ({}) but it declares ({})",
                        f.name,
                        given.join(", "),
                        wanted.join(", ")
                    )));
                }
            }
        }
    }
    Ok(())
}

impl std::fmt::Debug for Vm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vm")
            .field("workflow", &self.program.workflow)
            .field("steps", &self.program.steps.len())
            .finish_non_exhaustive()
    }
}

/// What a schema refused, without the refused value (SPEC §8: problem
/// details never echo input; the value may be personal data). Member names
/// and the schema's own constants (formats, limits) are named.
// The kinds are jsonschema's, and grow with it: every other kind is named
// by its keyword, so a catch-all arm is the intent here.
#[allow(clippy::wildcard_enum_match_arm)]
fn schema_fault(kind: &validation::ValidationErrorKind) -> String {
    use validation::{TypeKind, ValidationErrorKind as K};
    match kind {
        K::Required { property } => format!("the member {property} is required"),
        K::AdditionalProperties { unexpected } => {
            format!(
                "the member(s) `{}` are not allowed",
                unexpected.join("`, `")
            )
        }
        K::Type {
            kind: TypeKind::Single(t),
        } => format!("is not of type {t}"),
        K::Format { format } => format!("is not a valid `{format}`"),
        K::MaxLength { limit } => format!("is longer than {limit} characters"),
        K::MinLength { limit } => format!("is shorter than {limit} characters"),
        other => format!("does not satisfy the schema's `{}`", other.keyword()),
    }
}
