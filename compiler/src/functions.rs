//! Reading `functions.rhai`: parse with a raw Rhai engine and list the script
//! functions with their parameter names. Nothing is run here.

use coordinator_source::{Diagnostic, Located};

/// The fixed Function limits (SPEC §3), shared by `check --explain` and the VM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FunctionLimits {
    /// Rhai operations per call.
    pub max_operations: u64,
    /// Nested call levels.
    pub max_call_levels: usize,
    /// Expression nesting depth.
    pub max_expr_depth: usize,
    /// Largest string, in bytes.
    pub max_string_bytes: usize,
    /// Most array items.
    pub max_array_items: usize,
    /// Most map entries.
    pub max_map_entries: usize,
    /// Largest argument or result, in bytes of canonical JSON.
    pub max_value_bytes: usize,
    /// Deepest argument or result.
    pub max_value_depth: usize,
    /// Most nodes in an argument or result.
    pub max_value_nodes: usize,
}

/// The limits every Function runs under (SPEC §3).
pub const FUNCTION_LIMITS: FunctionLimits = FunctionLimits {
    max_operations: 100_000,
    max_call_levels: 32,
    max_expr_depth: 64,
    max_string_bytes: 16 * 1024,
    max_array_items: 256,
    max_map_entries: 256,
    max_value_bytes: 128 * 1024,
    max_value_depth: 32,
    max_value_nodes: 4096,
};

/// The lines `check --explain` prints after the steps.
pub const FUNCTION_LIMITS_TEXT: &str = "Function limits:
  operations: 100,000
  call levels: 32
  expression depth: 64
  string length: 16 KiB
  array items: 256
  map entries: 256
  each argument and result: 128 KiB as canonical JSON, depth 32, 4,096 nodes
";

/// Largest `functions.rhai` accepted (SPEC §1).
pub const MAX_FUNCTION_SOURCE_BYTES: usize = 64 * 1024;

/// One script function: name and parameter names in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptFn {
    pub name: String,
    pub params: Vec<String>,
}

/// Parses Rhai source and lists its functions, or returns a located syntax
/// diagnostic in `display` (the file name diagnostics print).
pub fn list_functions(source: &str, display: &str) -> Result<Vec<ScriptFn>, Diagnostic> {
    let mut engine = rhai::Engine::new_raw();
    engine.set_max_expr_depths(
        FUNCTION_LIMITS.max_expr_depth,
        FUNCTION_LIMITS.max_expr_depth,
    );
    match engine.compile(source) {
        Ok(ast) => {
            let mut fns: Vec<ScriptFn> = ast
                .iter_functions()
                .map(|f| ScriptFn {
                    name: f.name.to_owned(),
                    params: f.params.iter().map(|p| (*p).to_owned()).collect(),
                })
                .collect();
            // Rhai keeps functions in a hash map: sort so diagnostics are stable.
            fns.sort_by(|a, b| (&a.name, &a.params).cmp(&(&b.name, &b.params)));
            Ok(fns)
        }
        Err(e) => {
            let pos = e.position();
            Err(Diagnostic::error(
                "coordinator.function.syntax",
                Located {
                    file: display.to_owned(),
                    line: pos.line().and_then(|l| u32::try_from(l).ok()).unwrap_or(1),
                    column: pos
                        .position()
                        .and_then(|c| u32::try_from(c).ok())
                        .unwrap_or(1),
                    pointer: String::new(),
                },
                format!("the Rhai source does not parse: {}", e.err_type()),
                "Correct the Rhai syntax at this position.",
            ))
        }
    }
}

/// Normalises line endings to LF (SPEC §4).
pub fn normalise_source(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_functions_and_params() {
        let f = list_functions("fn a(x, y) { x }\nfn b() { 1 }", "f.rhai").expect("parses");
        assert!(f.contains(&ScriptFn {
            name: "a".into(),
            params: vec!["x".into(), "y".into()]
        }));
        let e = list_functions("fn a(x { x }", "f.rhai").expect_err("syntax");
        assert_eq!(e.code, "coordinator.function.syntax");
        assert_eq!(e.line, 1);
    }
}
