//! The interpreter: [`Vm::admit`] starts a run, [`Vm::resume`] applies one
//! [`Event`] to a [`RunState`]. Both are pure functions of their arguments.

use coordinator_ir::catalogue::Effect;
use coordinator_ir::validation::{self, Validator};
use coordinator_ir::{
    Argument, ExprId, FunctionId, Instr, OperationBinding, Program, SchemaId, StepId, StepOp,
};
use serde_json::{json, Map, Value};

use crate::functions::{self, FunctionError, Sandbox};
use crate::model::{
    Answer, CallPhase, CancelMode, CancelRecord, Command, EffectState, Event, Failure, FailureCode,
    Pending, RejectCode, Rejected, Resumed, RunState, RunStatus, WakeKind,
};
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

enum EvalError {
    Mapping(String),
    /// A mapping read a member the value lacks (`message` says which value;
    /// `path` is the JSON Pointer read).
    MissingMember {
        message: String,
        path: String,
    },
    /// A trigger mapping read an event member the event lacks (its path).
    EventMember(String),
    Function(FunctionError),
}

fn reject(code: RejectCode, message: impl Into<String>) -> Rejected {
    Rejected {
        code,
        message: message.into(),
    }
}

fn parse(text: &str) -> Result<Instant, Rejected> {
    Instant::parse(text).map_err(|e| reject(RejectCode::InstantInvalid, e.0))
}

fn format(instant: &Instant) -> Result<String, Rejected> {
    instant
        .format()
        .map_err(|e| reject(RejectCode::InstantInvalid, e.0))
}

fn lookup(value: &Value, path: Option<&String>) -> Option<Value> {
    match path {
        None => Some(value.clone()),
        Some(p) => value.pointer(p).cloned(),
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
        for (n, expr) in program.exprs.iter().enumerate() {
            for instr in &expr.code {
                if let Instr::Call { function, args } = instr {
                    let f = program.functions.get(function.index()).ok_or_else(|| {
                        LoadError(format!("expression e{n}: no function {function}"))
                    })?;
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

    /// Admits a run: checks `input` against the workflow input schema, sets
    /// the deadline to `admitted_at` + `deadline_seconds`, and runs from
    /// `start` until the first call or wait. The first command is always
    /// `ScheduleWake { at: deadline, kind: Deadline }`.
    ///
    /// # Errors
    /// [`RejectCode::InputInvalid`] (the message names the JSON Pointer) or
    /// [`RejectCode::InstantInvalid`].
    pub fn admit(&self, input: Value, admitted_at: &str) -> Result<Resumed, Rejected> {
        if let Err((pointer, message)) = self.check_schema(self.program.input, &input) {
            return Err(reject(
                RejectCode::InputInvalid,
                format!("input at `{pointer}`: {message}"),
            ));
        }
        let admitted = parse(admitted_at)?;
        let deadline = admitted
            .plus_seconds(i64::try_from(self.program.deadline_seconds).unwrap_or(i64::MAX))
            .ok_or_else(|| reject(RejectCode::InstantInvalid, "deadline out of range"))?;
        let admitted_text = format(&admitted)?;
        let deadline_text = format(&deadline)?;
        let state = RunState {
            status: RunStatus::Running,
            input,
            admitted_at: admitted_text.clone(),
            deadline_at: deadline_text.clone(),
            now: admitted_text,
            elapsed_seconds: 0,
            path: Vec::new(),
            outputs: Default::default(),
            effects: Default::default(),
            pending: None,
            cancel: None,
            outcome: None,
            output: None,
            failure: None,
            ended_at: None,
        };
        let mut run = Run::new(self, state)?;
        run.commands.push(Command::ScheduleWake {
            at: deadline_text,
            kind: WakeKind::Deadline,
        });
        run.advance(self.program.start)?;
        Ok(run.finish())
    }

    /// Applies one event to a run. Pure: the same state and event always
    /// give the same result, bit for bit.
    ///
    /// Time: an instant earlier than `state.now` counts as `state.now`.
    /// Before a timed event at instant T is applied, every timer due before
    /// T fires first (wakes and timeouts; the deadline at T itself comes
    /// first, then the event, and only a [`Event::TimerFired`] fires timers
    /// due exactly at T). An event at or past the deadline ends the run
    /// `expired` at the deadline once earlier timers have fired, and is
    /// then moot.
    ///
    /// # Errors
    /// [`Rejected`] when the event does not apply (the state is unchanged):
    /// the run has ended, an answer for a step that is not in flight, a
    /// receipt answer without a lookup, a completion for another step,
    /// retry-same or reconcile on a run that is not held or cannot be
    /// recovered that way, a malformed instant.
    pub fn resume(&self, state: &RunState, event: &Event) -> Result<Resumed, Rejected> {
        if state.status.is_terminal() {
            return Err(reject(
                RejectCode::RunEnded,
                format!("the run has ended ({})", state.status.as_str()),
            ));
        }
        let mut run = Run::new(self, state.clone())?;
        match event {
            Event::CallAnswered { step, answer } => run.on_answer(step, answer)?,
            Event::TimerFired { at } => {
                run.tick(at, true)?;
            }
            Event::CompletionObserved { step, value, at } => {
                let wanted = run.waiting_completion();
                if wanted.map(|id| self.step_name(id)) != Some(step.as_str()) {
                    return Err(reject(
                        RejectCode::Unexpected,
                        format!("the run is not waiting for a completion at step `{step}`"),
                    ));
                }
                if !run.tick(at, false)? && run.waiting_completion() == wanted {
                    if let Some(id) = wanted {
                        run.on_completion(id, value)?;
                    }
                }
            }
            Event::CancelRequested { at } => {
                if !run.tick(at, false)? {
                    run.on_cancel(at)?;
                }
            }
            Event::RetrySame { at } => {
                run.check_recovery(false)?;
                if !run.tick(at, false)? {
                    run.retry_same()?;
                }
            }
            Event::Reconcile { at } => {
                run.check_recovery(true)?;
                if !run.tick(at, false)? {
                    run.reconcile()?;
                }
            }
        }
        Ok(run.finish())
    }

    /// Evaluates trigger `trigger`'s mappings over a CloudEvents-shaped
    /// `event` (SPEC §2.4): the idempotency string and the run input.
    ///
    /// # Errors
    /// [`RejectCode::Unexpected`] for an unknown trigger, a mapping that
    /// fails, or an idempotency value that is not a string.
    pub fn trigger_start(&self, trigger: &str, event: &Value) -> Result<TriggerStart, Rejected> {
        let t = self
            .program
            .triggers
            .iter()
            .find(|t| t.name == trigger)
            .ok_or_else(|| reject(RejectCode::Unexpected, format!("no trigger `{trigger}`")))?;
        let empty = RunState {
            status: RunStatus::Running,
            input: Value::Null,
            admitted_at: String::new(),
            deadline_at: String::new(),
            now: String::new(),
            elapsed_seconds: 0,
            path: Vec::new(),
            outputs: Default::default(),
            effects: Default::default(),
            pending: None,
            cancel: None,
            outcome: None,
            output: None,
            failure: None,
            ended_at: None,
        };
        let describe = |e: EvalError| match e {
            EvalError::Mapping(m) | EvalError::MissingMember { message: m, .. } => {
                reject(RejectCode::Unexpected, m)
            }
            EvalError::EventMember(path) => reject(
                RejectCode::EventMemberMissing,
                format!("the event has no member at `{path}`"),
            ),
            EvalError::Function(f) => reject(RejectCode::Unexpected, f.to_string()),
        };
        let idempotency = match self
            .eval(t.idempotency, &empty, Some(event))
            .map_err(describe)?
        {
            Value::String(s) => s,
            other @ (Value::Null
            | Value::Bool(_)
            | Value::Number(_)
            | Value::Array(_)
            | Value::Object(_)) => {
                return Err(reject(
                    RejectCode::Unexpected,
                    format!("the idempotency value {other} is not a string"),
                ))
            }
        };
        let input = self.eval(t.input, &empty, Some(event)).map_err(describe)?;
        Ok(TriggerStart { idempotency, input })
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

    fn eval(&self, expr: ExprId, st: &RunState, event: Option<&Value>) -> Result<Value, EvalError> {
        let code = self
            .program
            .exprs
            .get(expr.index())
            .map(|e| e.code.as_slice())
            .unwrap_or_default();
        let mut stack: Vec<Value> = Vec::new();
        for instr in code {
            let value = match instr {
                Instr::Input { path } => lookup(&st.input, path.as_ref()).ok_or_else(|| {
                    let path = path.as_deref().unwrap_or("").to_owned();
                    EvalError::MissingMember {
                        message: format!("the run input has no member at `{path}`"),
                        path,
                    }
                })?,
                Instr::StepOutput { step, path } => {
                    let name = self.step_name(*step);
                    let output = st.outputs.get(name).ok_or_else(|| {
                        EvalError::Mapping(format!("step `{name}` has no output on this route"))
                    })?;
                    lookup(output, path.as_ref()).ok_or_else(|| {
                        let path = path.as_deref().unwrap_or("").to_owned();
                        EvalError::MissingMember {
                            message: format!(
                                "the output of step `{name}` has no member at `{path}`"
                            ),
                            path,
                        }
                    })?
                }
                Instr::Const { value } => self
                    .program
                    .constants
                    .get(value.index())
                    .cloned()
                    .ok_or_else(|| EvalError::Mapping(format!("no constant {value}")))?,
                Instr::Event { path } => {
                    let event = event.ok_or_else(|| {
                        EvalError::Mapping("an event mapping outside a trigger".into())
                    })?;
                    lookup(event, path.as_ref()).ok_or_else(|| {
                        EvalError::EventMember(path.as_deref().unwrap_or("").to_owned())
                    })?
                }
                Instr::Object { keys } => {
                    let values = pop(&mut stack, keys.len())?;
                    let mut map = Map::new();
                    for (k, v) in keys.iter().zip(values) {
                        map.insert(k.clone(), v);
                    }
                    Value::Object(map)
                }
                Instr::Call { function, args } => {
                    let values = pop(&mut stack, args.len())?;
                    self.call_function(*function, args, values)
                        .map_err(EvalError::Function)?
                }
            };
            stack.push(value);
        }
        match (stack.pop(), stack.is_empty()) {
            (Some(v), true) => Ok(v),
            _ => Err(EvalError::Mapping(format!(
                "expression {expr} is malformed"
            ))),
        }
    }

    /// Calls Function `function` with `values` (in the order of `args`),
    /// checking every argument and the result against limits and schemas.
    fn call_function(
        &self,
        function: FunctionId,
        args: &[Argument],
        values: Vec<Value>,
    ) -> Result<Value, FunctionError> {
        let Some(f) = self.program.functions.get(function.index()) else {
            return Err(FunctionError {
                function: function.to_string(),
                input: None,
                pointer: String::new(),
                message: "no such function".into(),
            });
        };
        let error = |input: Option<&str>, pointer: String, message: String| FunctionError {
            function: f.name.clone(),
            input: input.map(str::to_owned),
            pointer,
            message,
        };
        let mut ordered = Vec::with_capacity(f.inputs.len());
        for input in &f.inputs {
            let name = Some(input.name.as_str());
            let value = args
                .iter()
                .position(|a| a.name == input.name)
                .and_then(|i| values.get(i))
                .ok_or_else(|| error(name, String::new(), "no argument".into()))?;
            functions::check_size(value).map_err(|(p, m)| error(name, p, m))?;
            self.check_schema(input.schema, value)
                .map_err(|(p, m)| error(name, p, m))?;
            ordered.push(functions::to_dynamic(value).map_err(|m| error(name, String::new(), m))?);
        }
        let result = self
            .sandbox
            .call(&f.entrypoint, ordered)
            .map_err(|m| error(None, String::new(), m))?;
        let value = functions::from_dynamic(&result).map_err(|(p, m)| error(None, p, m))?;
        functions::check_size(&value).map_err(|(p, m)| error(None, p, m))?;
        self.check_schema(f.output, &value)
            .map_err(|(p, m)| error(None, p, m))?;
        Ok(value)
    }
}

fn pop(stack: &mut Vec<Value>, n: usize) -> Result<Vec<Value>, EvalError> {
    let start = stack
        .len()
        .checked_sub(n)
        .ok_or_else(|| EvalError::Mapping("expression pops an empty stack".into()))?;
    Ok(stack.split_off(start))
}

/// One event being applied to one state.
struct Run<'v> {
    vm: &'v Vm,
    st: RunState,
    commands: Vec<Command>,
    admitted: Instant,
    deadline: Instant,
}

impl<'v> Run<'v> {
    fn new(vm: &'v Vm, st: RunState) -> Result<Self, Rejected> {
        Ok(Run {
            vm,
            admitted: parse(&st.admitted_at)?,
            deadline: parse(&st.deadline_at)?,
            st,
            commands: Vec::new(),
        })
    }

    fn finish(self) -> Resumed {
        Resumed {
            status: self.st.status,
            state: self.st,
            commands: self.commands,
        }
    }

    fn program(&self) -> &'v Program {
        &self.vm.program
    }

    fn now(&self) -> Result<Instant, Rejected> {
        parse(&self.st.now)
    }

    fn set_now(&mut self, t: &Instant) -> Result<(), Rejected> {
        self.st.now = format(t)?;
        self.st.elapsed_seconds = u64::try_from(self.admitted.seconds_until(t)).unwrap_or(0);
        Ok(())
    }

    fn waiting_completion(&self) -> Option<StepId> {
        match &self.st.pending {
            Some(Pending::Completion { step, .. }) => Some(*step),
            Some(Pending::Call { .. }) | Some(Pending::Wake { .. }) | None => None,
        }
    }

    fn binding(
        &self,
        step: StepId,
    ) -> Result<(&'v OperationBinding, StepId, Option<StepId>), Rejected> {
        match self.program().step(step).map(|s| &s.op) {
            Some(StepOp::Call {
                operation,
                next,
                on_declared_refusal,
                ..
            }) => self
                .program()
                .operations
                .get(operation.index())
                .map(|b| (b, *next, *on_declared_refusal))
                .ok_or_else(|| reject(RejectCode::Unexpected, "no such operation")),
            _ => Err(reject(
                RejectCode::Unexpected,
                format!("step {step} is not a call"),
            )),
        }
    }

    /// Moves time to `at`, firing timers due before it (or at it, when
    /// `inclusive`), and expiring the run at the deadline. Returns whether
    /// the run has ended.
    fn tick(&mut self, at: &str, inclusive: bool) -> Result<bool, Rejected> {
        let now = self.now()?;
        let t = parse(at)?.max(now);
        let past_deadline = t >= self.deadline;
        let limit = if past_deadline { self.deadline } else { t };
        self.catch_up(&limit, inclusive && !past_deadline)?;
        if self.st.status.is_terminal() {
            return Ok(true);
        }
        if past_deadline {
            self.expire()?;
            return Ok(true);
        }
        self.set_now(&t)?;
        Ok(false)
    }

    fn catch_up(&mut self, limit: &Instant, inclusive: bool) -> Result<(), Rejected> {
        let due = |at: &Instant| if inclusive { at <= limit } else { at < limit };
        loop {
            if self.st.status.is_terminal() {
                return Ok(());
            }
            match self.st.pending.clone() {
                Some(Pending::Wake { step, at }) => {
                    let at = parse(&at)?;
                    if !due(&at) {
                        return Ok(());
                    }
                    self.set_now(&at)?;
                    self.st.pending = None;
                    match self.program().step(step).map(|s| &s.op) {
                        Some(StepOp::WaitUntil { next, .. }) => self.advance(*next)?,
                        _ => {
                            return Err(reject(RejectCode::Unexpected, "wake outside a wait-until"))
                        }
                    }
                }
                Some(Pending::Completion { step, timeout_at }) => {
                    let at = parse(&timeout_at)?;
                    if !due(&at) {
                        return Ok(());
                    }
                    self.set_now(&at)?;
                    self.st.pending = None;
                    match self.program().step(step).map(|s| &s.op) {
                        Some(StepOp::WaitFor {
                            on_timeout: Some(route),
                            ..
                        }) => self.advance(*route)?,
                        Some(StepOp::WaitFor {
                            on_timeout: None, ..
                        }) => self.end(RunStatus::Expired),
                        _ => {
                            return Err(reject(
                                RejectCode::Unexpected,
                                "timeout outside a wait-for",
                            ))
                        }
                    }
                }
                Some(Pending::Call { .. }) | None => return Ok(()),
            }
        }
    }

    fn expire(&mut self) -> Result<(), Rejected> {
        if let Some(Pending::Call { step, phase, .. }) = self.st.pending.clone() {
            let (binding, _, _) = self.binding(step)?;
            let name = self.vm.step_name(step).to_owned();
            if binding.descriptor.effect != Effect::Read
                && phase == CallPhase::Dispatched
                && !self.st.effects.contains_key(&name)
            {
                self.st.effects.insert(name, EffectState::Unknown);
            }
        }
        let deadline = self.deadline;
        self.set_now(&deadline)?;
        self.end(RunStatus::Expired);
        Ok(())
    }

    fn end(&mut self, status: RunStatus) {
        self.st.status = status;
        self.st.pending = None;
        self.st.ended_at = Some(self.st.now.clone());
        self.commands.push(Command::Ended { status });
    }

    fn end_cancelled(&mut self) {
        let program = self.program();
        let after_effect = self.st.effects.iter().any(|(name, effect)| {
            *effect == EffectState::Accepted
                && program.step_id(name).is_some_and(|id| {
                    self.binding(id)
                        .is_ok_and(|(b, _, _)| b.descriptor.effect == Effect::Mutation)
                })
        });
        self.end(if after_effect {
            RunStatus::CancelledAfterEffect
        } else {
            RunStatus::Cancelled
        });
    }

    fn fail(
        &mut self,
        step: StepId,
        code: FailureCode,
        message: String,
        product_code: Option<String>,
        function: Option<FunctionError>,
    ) {
        self.st.failure = Some(Failure {
            code,
            step: self.vm.step_name(step).to_owned(),
            product_code,
            function,
            message,
            path: None,
        });
        self.end(RunStatus::Failed);
    }

    /// [`Self::fail`] with the failure's JSON Pointer ([`Failure::path`]).
    fn fail_at(&mut self, step: StepId, code: FailureCode, message: String, path: String) {
        self.fail(step, code, message, None, None);
        if let Some(f) = self.st.failure.as_mut() {
            f.path = Some(path);
        }
    }

    fn fail_eval(&mut self, step: StepId, e: EvalError) {
        match e {
            EvalError::Mapping(m) => self.fail(step, FailureCode::MappingInvalid, m, None, None),
            EvalError::MissingMember { message, path } => {
                self.fail_at(step, FailureCode::MappingInvalid, message, path)
            }
            EvalError::EventMember(path) => self.fail_at(
                step,
                FailureCode::MappingInvalid,
                format!("the event has no member at `{path}`"),
                path,
            ),
            EvalError::Function(f) => self.fail(
                step,
                FailureCode::FunctionError,
                f.to_string(),
                None,
                Some(f),
            ),
        }
    }

    /// Runs steps from `id` until a call, a wait or a finish.
    fn advance(&mut self, mut id: StepId) -> Result<(), Rejected> {
        let program = self.program();
        loop {
            let step = program
                .step(id)
                .ok_or_else(|| reject(RejectCode::Unexpected, format!("no step {id}")))?;
            self.st.path.push(step.name.clone());
            match &step.op {
                StepOp::Call {
                    operation, input, ..
                } => {
                    let binding = program
                        .operations
                        .get(operation.index())
                        .ok_or_else(|| reject(RejectCode::Unexpected, "no such operation"))?;
                    let command = match self.vm.eval(*input, &self.st, None) {
                        Ok(v) => v,
                        Err(e) => {
                            self.fail_eval(id, e);
                            return Ok(());
                        }
                    };
                    if let Err((pointer, message)) = self.vm.check_schema(binding.input, &command) {
                        self.fail_at(
                            id,
                            FailureCode::InvalidCommand,
                            format!("the input of `{}` at `{pointer}`: {message}", binding.alias),
                            pointer,
                        );
                        return Ok(());
                    }
                    self.st.pending = Some(Pending::Call {
                        step: id,
                        command,
                        attempt: 0,
                        lookups: 0,
                        phase: CallPhase::Dispatched,
                        unknown: false,
                        receipt_expired: false,
                        last_answer: None,
                    });
                    self.dispatch()?;
                    return Ok(());
                }
                StepOp::Choose { selector, cases } => {
                    let label = match self.vm.eval(*selector, &self.st, None) {
                        Ok(v) => v,
                        Err(e) => {
                            self.fail_eval(id, e);
                            return Ok(());
                        }
                    };
                    match cases
                        .iter()
                        .find(|c| Some(c.label.as_str()) == label.as_str())
                    {
                        Some(case) => id = case.step,
                        None => {
                            self.fail(
                                id,
                                FailureCode::MappingInvalid,
                                format!("the selector returned {label}, which is not a case label"),
                                None,
                                None,
                            );
                            return Ok(());
                        }
                    }
                }
                StepOp::WaitUntil { until, next } => {
                    let value = match self.vm.eval(*until, &self.st, None) {
                        Ok(v) => v,
                        Err(e) => {
                            self.fail_eval(id, e);
                            return Ok(());
                        }
                    };
                    let at = match value.as_str().map(Instant::parse) {
                        Some(Ok(at)) => at,
                        Some(Err(e)) => {
                            self.fail(
                                id,
                                FailureCode::MappingInvalid,
                                format!("until: {e}"),
                                None,
                                None,
                            );
                            return Ok(());
                        }
                        None => {
                            self.fail(
                                id,
                                FailureCode::MappingInvalid,
                                format!("until: {value} is not an RFC 3339 string"),
                                None,
                                None,
                            );
                            return Ok(());
                        }
                    };
                    if at >= self.deadline {
                        // Ends `expired` when the deadline timer fires.
                        self.st.pending = Some(Pending::Wake {
                            step: id,
                            at: self.st.deadline_at.clone(),
                        });
                        return Ok(());
                    }
                    if at <= self.now()? {
                        id = *next;
                        continue;
                    }
                    let at = format(&at)?;
                    self.st.pending = Some(Pending::Wake {
                        step: id,
                        at: at.clone(),
                    });
                    self.commands.push(Command::ScheduleWake {
                        at,
                        kind: WakeKind::Wake,
                    });
                    return Ok(());
                }
                StepOp::WaitFor {
                    call,
                    completion,
                    timeout_seconds,
                    ..
                } => {
                    let timeout_at = self
                        .now()?
                        .plus_seconds(i64::try_from(*timeout_seconds).unwrap_or(i64::MAX))
                        .map(|t| t.min(self.deadline))
                        .unwrap_or(self.deadline);
                    let timeout_at = format(&timeout_at)?;
                    let call_name = self.vm.step_name(*call).to_owned();
                    let (binding, _, _) = self.binding(*call)?;
                    let connection = binding.connection.clone();
                    let handle = self
                        .st
                        .outputs
                        .get(&call_name)
                        .and_then(|o| o.pointer(coordinator_ir::catalogue::COMPLETION_HANDLE))
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                    self.st.pending = Some(Pending::Completion {
                        step: id,
                        timeout_at: timeout_at.clone(),
                    });
                    self.commands.push(Command::ObserveCompletion {
                        step: step.name.clone(),
                        call: call_name,
                        completion: completion.clone(),
                        connection,
                        handle,
                        timeout_at,
                    });
                    return Ok(());
                }
                StepOp::Finish { outcome, output } => {
                    let value = match output {
                        Some(e) => match self.vm.eval(*e, &self.st, None) {
                            Ok(v) => v,
                            Err(e) => {
                                self.fail_eval(id, e);
                                return Ok(());
                            }
                        },
                        None => Value::Null,
                    };
                    let outcome = program
                        .outcomes
                        .get(outcome.index())
                        .ok_or_else(|| reject(RejectCode::Unexpected, "no such outcome"))?;
                    if let Err((pointer, message)) = self.vm.check_schema(outcome.schema, &value) {
                        self.fail_at(
                            id,
                            FailureCode::MappingInvalid,
                            format!(
                                "the output of outcome `{}` at `{pointer}`: {message}",
                                outcome.name
                            ),
                            pointer,
                        );
                        return Ok(());
                    }
                    self.st.outcome = Some(outcome.name.clone());
                    self.st.output = Some(value);
                    let cancelled = matches!(
                        self.st.cancel,
                        Some(CancelRecord {
                            mode: CancelMode::Route,
                            ..
                        })
                    );
                    self.end(if cancelled {
                        RunStatus::Cancelled
                    } else {
                        RunStatus::Finished
                    });
                    return Ok(());
                }
            }
        }
    }

    /// Sends (again) the frozen command of the pending call.
    fn dispatch(&mut self) -> Result<(), Rejected> {
        let Some(Pending::Call {
            step,
            command,
            attempt,
            phase,
            ..
        }) = self.st.pending.as_mut()
        else {
            return Err(reject(RejectCode::Unexpected, "no call in progress"));
        };
        *attempt += 1;
        *phase = CallPhase::Dispatched;
        let (step, command, attempt) = (*step, command.clone(), *attempt);
        let (binding, _, _) = self.binding(step)?;
        self.commands.push(Command::Dispatch {
            step: self.vm.step_name(step).to_owned(),
            operation: binding.alias.clone(),
            operation_id: binding.descriptor.id.clone(),
            connection: binding.connection.clone(),
            action: binding.action.clone(),
            command,
            attempt,
            needs_idempotency_key: binding.descriptor.idempotency_key,
            resend_safe: binding.descriptor.effect == Effect::Read,
        });
        if self.st.cancel.is_none() {
            self.st.status = RunStatus::Running;
        }
        Ok(())
    }

    fn lookup_receipt(&mut self) -> Result<(), Rejected> {
        let Some(Pending::Call {
            step,
            lookups,
            phase,
            ..
        }) = self.st.pending.as_mut()
        else {
            return Err(reject(RejectCode::Unexpected, "no call in progress"));
        };
        *lookups += 1;
        *phase = CallPhase::LookingUpReceipt;
        let (step, lookup) = (*step, *lookups);
        let (binding, _, _) = self.binding(step)?;
        self.commands.push(Command::LookupReceipt {
            step: self.vm.step_name(step).to_owned(),
            operation: binding.alias.clone(),
            operation_id: binding.descriptor.id.clone(),
            connection: binding.connection.clone(),
            lookup,
        });
        self.st.status = RunStatus::Running;
        Ok(())
    }

    /// Holds the pending call: effect unknown, status attention.
    fn hold(&mut self, step: StepId) {
        if let Some(Pending::Call { phase, unknown, .. }) = self.st.pending.as_mut() {
            *phase = CallPhase::Held;
            *unknown = true;
        }
        self.st
            .effects
            .insert(self.vm.step_name(step).to_owned(), EffectState::Unknown);
        self.st.status = RunStatus::Attention;
    }

    fn on_answer(&mut self, step_name: &str, answer: &Answer) -> Result<(), Rejected> {
        let Some(Pending::Call {
            step,
            phase,
            unknown,
            last_answer,
            receipt_expired,
            ..
        }) = self.st.pending.as_mut()
        else {
            return Err(reject(
                RejectCode::Unexpected,
                format!("no call of step `{step_name}` is in flight"),
            ));
        };
        let step = *step;
        if self.vm.step_name(step) != step_name || *phase == CallPhase::Held {
            return Err(reject(
                RejectCode::Unexpected,
                format!("no call of step `{step_name}` is in flight"),
            ));
        }
        let receipt_answer = matches!(answer, Answer::ReceiptExpired | Answer::ReceiptUnresolved);
        if receipt_answer && *phase != CallPhase::LookingUpReceipt {
            return Err(reject(
                RejectCode::Unexpected,
                "a receipt answer arrived but no receipt lookup is out",
            ));
        }
        *last_answer = Some(match answer {
            Answer::Retryable { code }
            | Answer::Refused { code }
            | Answer::Uncertain { code }
            | Answer::InvalidCommand { code }
            | Answer::InvalidResponse { code } => format!("{} {code}", answer.kind()),
            Answer::DeclaredRefusal { refusal_code } => format!("{} {refusal_code}", answer.kind()),
            Answer::Success { .. } | Answer::ReceiptExpired | Answer::ReceiptUnresolved => {
                answer.kind().to_owned()
            }
        });
        if matches!(answer, Answer::ReceiptExpired) {
            *receipt_expired = true;
        }
        let (phase, unknown) = (*phase, *unknown);
        let (binding, next, on_refusal) = self.binding(step)?;
        let effect = binding.descriptor.effect;
        let name = step_name.to_owned();
        let cancelling = matches!(
            self.st.cancel,
            Some(CancelRecord {
                mode: CancelMode::InFlight,
                ..
            })
        );
        if let Answer::Success { value } = answer {
            self.st.pending = None;
            if effect != Effect::Read {
                self.st.effects.insert(name.clone(), EffectState::Accepted);
            }
            if let Err((pointer, message)) = self.vm.check_schema(binding.output, value) {
                self.fail(
                    step,
                    FailureCode::InvalidResponse,
                    format!(
                        "the response of `{}` at `{pointer}`: {message}",
                        binding.alias
                    ),
                    None,
                    None,
                );
                return Ok(());
            }
            self.st.outputs.insert(name, value.clone());
            if cancelling {
                self.end_cancelled();
                return Ok(());
            }
            return self.advance(next);
        }
        if phase == CallPhase::LookingUpReceipt {
            // Anything but the original response leaves the effect unknown.
            if cancelling {
                self.end_cancelled();
            } else if matches!(answer, Answer::Retryable { .. }) {
                self.lookup_receipt()?;
            } else {
                self.hold(step);
            }
            return Ok(());
        }
        match answer {
            Answer::Retryable { .. } => {
                if cancelling {
                    self.end_cancelled();
                } else {
                    self.dispatch()?;
                }
            }
            Answer::Uncertain { .. } => match effect {
                Effect::Read if cancelling => self.end_cancelled(),
                Effect::Read => self.dispatch()?,
                Effect::Mutation | Effect::Evaluation => {
                    self.hold(step);
                    if cancelling {
                        self.end_cancelled();
                    }
                }
            },
            Answer::Refused { code } if effect == Effect::Read => {
                self.product_refused(step, code, cancelling)
            }
            Answer::Refused { .. }
            | Answer::DeclaredRefusal { .. }
            | Answer::InvalidCommand { .. }
                if unknown =>
            {
                // A refusal after an unknown answer proves nothing.
                self.hold(step);
                if cancelling {
                    self.end_cancelled();
                }
            }
            Answer::Refused { code } => self.product_refused(step, code, cancelling),
            Answer::DeclaredRefusal { refusal_code } => match on_refusal {
                Some(_) if cancelling => self.end_cancelled(),
                Some(route) => {
                    self.st.pending = None;
                    self.st
                        .outputs
                        .insert(name, json!({ "refusalCode": refusal_code }));
                    self.advance(route)?;
                }
                None => self.product_refused(step, refusal_code, cancelling),
            },
            Answer::InvalidCommand { code } => {
                if cancelling {
                    self.end_cancelled();
                } else {
                    self.fail(
                        step,
                        FailureCode::InvalidCommand,
                        format!("the product refused the command as invalid (`{code}`)"),
                        Some(code.clone()),
                        None,
                    );
                }
            }
            Answer::InvalidResponse { code } => {
                self.st.pending = None;
                if effect != Effect::Read {
                    self.st.effects.insert(name, EffectState::Accepted);
                }
                self.fail(
                    step,
                    FailureCode::InvalidResponse,
                    format!(
                        "the response of `{}` is not its declared output (`{code}`)",
                        binding.alias
                    ),
                    None,
                    None,
                );
            }
            Answer::Success { .. } | Answer::ReceiptExpired | Answer::ReceiptUnresolved => {}
        }
        Ok(())
    }

    fn product_refused(&mut self, step: StepId, code: &str, cancelling: bool) {
        if cancelling {
            self.end_cancelled();
            return;
        }
        self.fail(
            step,
            FailureCode::ProductRefused,
            format!("the product refused with `{code}`"),
            Some(code.to_owned()),
            None,
        );
    }

    fn on_completion(&mut self, step: StepId, value: &Value) -> Result<(), Rejected> {
        let Some(StepOp::WaitFor { call, next, .. }) = self.program().step(step).map(|s| &s.op)
        else {
            return Err(reject(RejectCode::Unexpected, "not a wait-for"));
        };
        self.st.pending = None;
        let (binding, _, _) = self.binding(*call)?;
        if let Some(schema) = binding.completion {
            if let Err((pointer, message)) = self.vm.check_schema(schema, value) {
                self.fail(
                    step,
                    FailureCode::InvalidResponse,
                    format!("the completion value at `{pointer}`: {message}"),
                    None,
                    None,
                );
                return Ok(());
            }
        }
        self.st
            .outputs
            .insert(self.vm.step_name(step).to_owned(), value.clone());
        self.advance(*next)
    }

    fn on_cancel(&mut self, at: &str) -> Result<(), Rejected> {
        if self.st.cancel.is_some() {
            return Ok(());
        }
        let at = format(&parse(at)?.max(self.now()?))?;
        match self.st.pending.clone() {
            Some(Pending::Completion { step, .. }) => {
                if let Some(StepOp::WaitFor {
                    on_cancel: Some(route),
                    ..
                }) = self.program().step(step).map(|s| &s.op)
                {
                    self.st.cancel = Some(CancelRecord {
                        at,
                        mode: CancelMode::Route,
                    });
                    self.st.pending = None;
                    return self.advance(*route);
                }
                self.end_cancelled();
            }
            Some(Pending::Call {
                phase: CallPhase::Dispatched | CallPhase::LookingUpReceipt,
                ..
            }) => {
                self.st.cancel = Some(CancelRecord {
                    at,
                    mode: CancelMode::InFlight,
                });
                self.st.status = RunStatus::CancelRequested;
            }
            Some(Pending::Call {
                phase: CallPhase::Held,
                ..
            })
            | Some(Pending::Wake { .. })
            | None => self.end_cancelled(),
        }
        Ok(())
    }

    /// Checks that the run is held and may be recovered by retry-same
    /// (`reconcile == false`) or reconcile.
    fn check_recovery(&self, reconcile: bool) -> Result<(), Rejected> {
        let Some(Pending::Call {
            step,
            phase: CallPhase::Held,
            receipt_expired,
            ..
        }) = &self.st.pending
        else {
            return Err(reject(
                RejectCode::NotHeld,
                "the run is not held with an unknown effect",
            ));
        };
        let (binding, _, _) = self.binding(*step)?;
        if *receipt_expired {
            return Err(reject(
                if reconcile {
                    RejectCode::ReceiptExpired
                } else {
                    RejectCode::NotResendable
                },
                "the receipt expired: nothing may be sent or looked up for this call any more",
            ));
        }
        let support = crate::view::RecoverySupport::of(&binding.descriptor);
        if reconcile && !support.reconcile {
            return Err(reject(
                RejectCode::NoReceipt,
                format!("`{}` has no receipts to reconcile", binding.descriptor.id),
            ));
        }
        if !reconcile && !support.retry_same {
            return Err(reject(
                RejectCode::NotResendable,
                "an evaluation that may have been sent is never sent again",
            ));
        }
        Ok(())
    }

    fn retry_same(&mut self) -> Result<(), Rejected> {
        self.dispatch()
    }

    fn reconcile(&mut self) -> Result<(), Rejected> {
        self.lookup_receipt()
    }
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
