//! Evaluating a mapping's expression: the stack machine over run data (and
//! a trigger's event), and the sandboxed Function calls in it.

use coordinator_ir::{Argument, ExprId, FunctionId, Instr};
use serde_json::{Map, Value};

use super::Vm;
use crate::functions::{self, FunctionError};
use crate::model::RunState;

/// Why an expression could not be evaluated.
pub(super) enum EvalError {
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

fn lookup(value: &Value, path: Option<&String>) -> Option<Value> {
    match path {
        None => Some(value.clone()),
        Some(p) => value.pointer(p).cloned(),
    }
}

impl Vm {
    /// Evaluates expression `expr` over the run state `st` (and a trigger's
    /// `event`, when there is one).
    pub(super) fn eval(
        &self,
        expr: ExprId,
        st: &RunState,
        event: Option<&Value>,
    ) -> Result<Value, EvalError> {
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
