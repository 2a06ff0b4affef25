//! Sandboxed Rhai Functions (SPEC §3): the engine, its fixed limits, the
//! JSON ⇄ Rhai conversion, and the size checks on every argument and result.

use std::fmt;

use coordinator_ir::pointer::escape_token;
use rhai::packages::{
    BasicArrayPackage, BasicMapPackage, BasicMathPackage, BasicStringPackage, CorePackage,
    LogicPackage, MoreStringPackage, Package,
};
use rhai::{CallFnOptions, Dynamic, Engine, EvalAltResult, ImmutableString, Scope, AST, INT};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};

use coordinator_ir::instant;

pub use coordinator_ir::limits::{FunctionLimits as Limits, FUNCTION_LIMITS as LIMITS};

/// A Function failed: it names the Function, the input (or `None` for the
/// result and for errors raised while the body ran), the JSON Pointer inside
/// that value (empty for the whole value), and a message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FunctionError {
    /// The Function's declared name.
    pub function: String,
    /// The input parameter at fault; `None` for the result or the body.
    pub input: Option<String>,
    /// JSON Pointer (RFC 6901) inside the input or result.
    pub pointer: String,
    /// What went wrong, with a Rhai position (`line N, position M`) when the
    /// body raised it.
    pub message: String,
}

impl fmt::Display for FunctionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "function `{}`", self.function)?;
        match &self.input {
            Some(i) => write!(f, ", input `{i}`")?,
            None => write!(f, ", result")?,
        }
        if !self.pointer.is_empty() {
            write!(f, " at {}", self.pointer)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// A compiled `functions.rhai` inside its sandboxed engine.
pub(crate) struct Sandbox {
    engine: Engine,
    ast: AST,
}

fn refused(name: &'static str) -> Box<EvalAltResult> {
    format!("`{name}` is not available to Functions").into()
}

impl Sandbox {
    /// Builds the engine and compiles `source` once.
    pub(crate) fn new(source: &str) -> Result<Sandbox, String> {
        let mut engine = Engine::new_raw();
        engine.register_global_module(CorePackage::new().as_shared_module());
        engine.register_global_module(BasicArrayPackage::new().as_shared_module());
        engine.register_global_module(BasicMapPackage::new().as_shared_module());
        engine.register_global_module(BasicStringPackage::new().as_shared_module());
        engine.register_global_module(MoreStringPackage::new().as_shared_module());
        engine.register_global_module(BasicMathPackage::new().as_shared_module());
        engine.register_global_module(LogicPackage::new().as_shared_module());
        for symbol in coordinator_ir::limits::DISABLED_SYMBOLS {
            engine.disable_symbol(symbol);
        }
        // Functions of the Core package that observe or wait on the world:
        // shadowed by errors (functions registered here take precedence).
        engine.register_fn("sleep", |_: INT| -> Result<(), Box<EvalAltResult>> {
            Err(refused("sleep"))
        });
        engine.register_fn(
            "sleep",
            |_: rhai::FLOAT| -> Result<(), Box<EvalAltResult>> { Err(refused("sleep")) },
        );
        engine.register_fn(
            "eval",
            |_: ImmutableString| -> Result<(), Box<EvalAltResult>> { Err(refused("eval")) },
        );
        engine.register_fn("print", |_: Dynamic| -> Result<(), Box<EvalAltResult>> {
            Err(refused("print"))
        });
        engine.register_fn("debug", |_: Dynamic| -> Result<(), Box<EvalAltResult>> {
            Err(refused("debug"))
        });
        engine.on_print(|_| {});
        engine.on_debug(|_, _, _| {});
        engine.set_max_operations(LIMITS.max_operations);
        engine.set_max_call_levels(LIMITS.max_call_levels);
        engine.set_max_expr_depths(LIMITS.max_expression_depth, LIMITS.max_expression_depth);
        engine.set_max_string_size(LIMITS.max_string_bytes);
        engine.set_max_array_size(LIMITS.max_array_items);
        engine.set_max_map_size(LIMITS.max_map_entries);
        engine.register_fn(
            "add_seconds",
            |instant: ImmutableString,
             seconds: INT|
             -> Result<ImmutableString, Box<EvalAltResult>> {
                instant::add_seconds(instant.as_str(), seconds)
                    .map(ImmutableString::from)
                    .map_err(|e| format!("add_seconds: {e}").into())
            },
        );
        engine.register_fn(
            "seconds_between",
            |a: ImmutableString, b: ImmutableString| -> Result<INT, Box<EvalAltResult>> {
                instant::seconds_between(a.as_str(), b.as_str())
                    .map_err(|e| format!("seconds_between: {e}").into())
            },
        );
        let ast = engine
            .compile(source)
            .map_err(|e| format!("functions.rhai does not compile: {e}"))?;
        Ok(Sandbox { engine, ast })
    }

    /// The parameter names of script function `name`, when it exists with
    /// exactly one definition.
    pub(crate) fn parameters(&self, name: &str) -> Option<Vec<String>> {
        let mut found = self
            .ast
            .iter_functions()
            .filter(|f| f.name == name)
            .map(|f| f.params.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>());
        let first = found.next()?;
        match found.next() {
            Some(_) => None,
            None => Some(first),
        }
    }

    /// Calls `entrypoint` with positional arguments. Top-level statements of
    /// the script never run.
    pub(crate) fn call(&self, entrypoint: &str, args: Vec<Dynamic>) -> Result<Dynamic, String> {
        let options = CallFnOptions::new().eval_ast(false).rewind_scope(true);
        self.engine
            .call_fn_with_options::<Dynamic>(
                options,
                &mut Scope::new(),
                &self.ast,
                entrypoint,
                args,
            )
            .map_err(|e| describe(&e))
    }
}

/// Calls script function `entrypoint` of the Rhai `source` with the JSON
/// `arguments` in order, in the sandbox a run's Functions use (the same
/// engine, limits and refused symbols), and returns its result as JSON.
/// For tools that evaluate a pure Function outside any run
/// (`coordinatorctl convert` computes what a request Function sends for a
/// scenario's input). `Err` carries a sentence: the source does not
/// compile, an argument is not representable, the call failed (with Rhai's
/// position), or the result is not JSON.
pub fn call_outside_run(
    source: &str,
    entrypoint: &str,
    arguments: &[Value],
) -> Result<Value, String> {
    let sandbox = Sandbox::new(source)?;
    let args = arguments
        .iter()
        .map(to_dynamic)
        .collect::<Result<Vec<_>, _>>()?;
    let result = sandbox.call(entrypoint, args)?;
    from_dynamic(&result)
        .map_err(|(pointer, message)| format!("the result at `{pointer}`: {message}"))
}

fn describe(e: &EvalAltResult) -> String {
    // Rhai's error enum is non-exhaustive: every other error keeps its own
    // message (which carries the position).
    #[allow(clippy::wildcard_enum_match_arm)]
    match e {
        EvalAltResult::ErrorTooManyOperations(pos) => {
            format!("exceeded {} operations ({pos})", LIMITS.max_operations)
        }
        EvalAltResult::ErrorStackOverflow(pos) => {
            format!("exceeded {} call levels ({pos})", LIMITS.max_call_levels)
        }
        other => other.to_string(),
    }
}

/// Checks a value against the size limits; on failure returns the pointer of
/// the offending node and a message.
pub(crate) fn check_size(value: &Value) -> Result<(), (String, String)> {
    let mut nodes = 0usize;
    walk(value, 0, &mut nodes, &mut String::new())?;
    let bytes = coordinator_ir::canonical::to_vec(value).len();
    if bytes > LIMITS.max_value_bytes {
        return Err((
            String::new(),
            format!(
                "{bytes} bytes of canonical JSON exceed the limit of {}",
                LIMITS.max_value_bytes
            ),
        ));
    }
    Ok(())
}

fn walk(
    value: &Value,
    depth: usize,
    nodes: &mut usize,
    at: &mut String,
) -> Result<(), (String, String)> {
    *nodes += 1;
    if *nodes > LIMITS.max_value_nodes {
        return Err((
            at.clone(),
            format!("more than {} JSON nodes", LIMITS.max_value_nodes),
        ));
    }
    let children: Box<dyn Iterator<Item = (String, &Value)>> = match value {
        Value::Array(items) => Box::new(items.iter().enumerate().map(|(i, v)| (i.to_string(), v))),
        Value::Object(map) => Box::new(map.iter().map(|(k, v)| (escape_token(k), v))),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => return Ok(()),
    };
    if depth + 1 > LIMITS.max_value_depth {
        return Err((
            at.clone(),
            format!("nested deeper than {} levels", LIMITS.max_value_depth),
        ));
    }
    for (key, child) in children {
        let len = at.len();
        at.push('/');
        at.push_str(&key);
        walk(child, depth + 1, nodes, at)?;
        at.truncate(len);
    }
    Ok(())
}

/// JSON to Rhai: `null` is `()`, integers are `INT`, other numbers `FLOAT`,
/// objects are maps.
pub(crate) fn to_dynamic(value: &Value) -> Result<Dynamic, String> {
    Ok(match value {
        Value::Null => Dynamic::UNIT,
        Value::Bool(b) => Dynamic::from_bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Dynamic::from_int(i),
            (None, Some(_)) if n.is_u64() => {
                return Err(format!("integer {n} is out of the range of Rhai integers"))
            }
            (None, Some(f)) => Dynamic::from_float(f),
            (None, None) => return Err(format!("number {n} cannot be represented")),
        },
        Value::String(s) => Dynamic::from(ImmutableString::from(s.as_str())),
        Value::Array(items) => {
            let mut out = rhai::Array::with_capacity(items.len());
            for item in items {
                out.push(to_dynamic(item)?);
            }
            Dynamic::from_array(out)
        }
        Value::Object(map) => {
            let mut out = rhai::Map::new();
            for (k, v) in map {
                out.insert(k.as_str().into(), to_dynamic(v)?);
            }
            Dynamic::from_map(out)
        }
    })
}

/// Rhai to JSON, refusing values that are not JSON (functions, non-finite
/// floats, ...) and stopping early past the depth and node limits.
pub(crate) fn from_dynamic(value: &Dynamic) -> Result<Value, (String, String)> {
    let mut nodes = 0usize;
    convert(value, 0, &mut nodes, &mut String::new())
}

fn convert(
    value: &Dynamic,
    depth: usize,
    nodes: &mut usize,
    at: &mut String,
) -> Result<Value, (String, String)> {
    *nodes += 1;
    if *nodes > LIMITS.max_value_nodes {
        return Err((
            at.clone(),
            format!("more than {} JSON nodes", LIMITS.max_value_nodes),
        ));
    }
    if depth > LIMITS.max_value_depth {
        return Err((
            at.clone(),
            format!("nested deeper than {} levels", LIMITS.max_value_depth),
        ));
    }
    if value.is_unit() {
        return Ok(Value::Null);
    }
    if let Ok(b) = value.as_bool() {
        return Ok(Value::Bool(b));
    }
    if let Ok(i) = value.as_int() {
        return Ok(Value::Number(i.into()));
    }
    if let Ok(f) = value.as_float() {
        return Number::from_f64(f)
            .map(Value::Number)
            .ok_or_else(|| (at.clone(), format!("{f} is not a JSON number")));
    }
    if let Ok(c) = value.as_char() {
        return Ok(Value::String(c.to_string()));
    }
    if value.is_string() {
        return Ok(Value::String(value.to_string()));
    }
    if value.is_array() {
        let items = value
            .read_lock::<rhai::Array>()
            .map(|a| a.clone())
            .unwrap_or_default();
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let len = at.len();
            at.push('/');
            at.push_str(&i.to_string());
            out.push(convert(item, depth + 1, nodes, at)?);
            at.truncate(len);
        }
        return Ok(Value::Array(out));
    }
    if value.is_map() {
        let map = value
            .read_lock::<rhai::Map>()
            .map(|m| m.clone())
            .unwrap_or_default();
        let mut out = Map::new();
        for (k, v) in &map {
            let len = at.len();
            at.push('/');
            at.push_str(&escape_token(k));
            out.insert(k.to_string(), convert(v, depth + 1, nodes, at)?);
            at.truncate(len);
        }
        return Ok(Value::Object(out));
    }
    Err((
        at.clone(),
        format!("a Rhai `{}` is not a JSON value", value.type_name()),
    ))
}
