//! Reading `functions.rhai`: parse with a raw Rhai engine and list the script
//! functions with their parameter names. Nothing is run here.

use coordinator_source::{Diagnostic, Located};

use crate::codes;

pub use coordinator_ir::limits::{FunctionLimits, FUNCTION_LIMITS};

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
    for symbol in coordinator_ir::limits::DISABLED_SYMBOLS {
        engine.disable_symbol(symbol);
    }
    engine.set_max_expr_depths(
        FUNCTION_LIMITS.max_expression_depth,
        FUNCTION_LIMITS.max_expression_depth,
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
                codes::FUNCTION_SYNTAX,
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
