//! The fixed limits every Function runs under (SPEC §3). The compiler prints
//! them (`check --explain`) and applies the parse-time ones; the VM enforces
//! them all. They are not configurable.

use std::fmt;

use serde::Serialize;

/// The Function limits. Sizes are in bytes; depths count nesting levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionLimits {
    /// Rhai operations per Function call.
    pub max_operations: u64,
    /// Nested Function call levels (recursion depth).
    pub max_call_levels: usize,
    /// Nesting depth of one expression.
    pub max_expression_depth: usize,
    /// Bytes in one string.
    pub max_string_bytes: usize,
    /// Items in one array.
    pub max_array_items: usize,
    /// Entries in one object map.
    pub max_map_entries: usize,
    /// Bytes of canonical JSON of one argument or result.
    pub max_value_bytes: usize,
    /// Nesting depth of one argument or result (a scalar is depth 0, each
    /// array or object around it adds 1).
    pub max_value_depth: usize,
    /// JSON nodes (every object, array and scalar) in one argument or result.
    pub max_value_nodes: usize,
}

/// The limits of SPEC §3.
pub const FUNCTION_LIMITS: FunctionLimits = FunctionLimits {
    max_operations: 100_000,
    max_call_levels: 32,
    max_expression_depth: 64,
    max_string_bytes: 16 * 1024,
    max_array_items: 256,
    max_map_entries: 256,
    max_value_bytes: 128 * 1024,
    max_value_depth: 32,
    max_value_nodes: 4_096,
};

/// Rhai symbols a Function may not use (SPEC §3: no `eval`, no `print`, and
/// `debug` prints too). The compiler refuses them at `check`; the VM's engine
/// disables them as well.
pub const DISABLED_SYMBOLS: [&str; 3] = ["eval", "print", "debug"];

/// `1234567` as `1,234,567`.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn size(bytes: usize) -> String {
    if bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{} bytes", grouped(bytes as u64))
    }
}

impl fmt::Display for FunctionLimits {
    /// The block `check --explain` prints: a `Function limits:` line, then
    /// one indented line per limit.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Function limits:")?;
        writeln!(f, "  operations: {}", grouped(self.max_operations))?;
        writeln!(f, "  call levels: {}", self.max_call_levels)?;
        writeln!(f, "  expression depth: {}", self.max_expression_depth)?;
        writeln!(f, "  string length: {}", size(self.max_string_bytes))?;
        writeln!(f, "  array items: {}", grouped(self.max_array_items as u64))?;
        writeln!(f, "  map entries: {}", grouped(self.max_map_entries as u64))?;
        writeln!(
            f,
            "  each argument and result: {} as canonical JSON, depth {}, {} nodes",
            size(self.max_value_bytes),
            self.max_value_depth,
            grouped(self.max_value_nodes as u64)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_the_spec_figures() {
        assert_eq!(
            FUNCTION_LIMITS.to_string(),
            "Function limits:\n  operations: 100,000\n  call levels: 32\n  expression depth: 64\n  string length: 16 KiB\n  array items: 256\n  map entries: 256\n  each argument and result: 128 KiB as canonical JSON, depth 32, 4,096 nodes\n"
        );
    }
}
