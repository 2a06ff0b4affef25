//! Diagnostics: stable code, location, message and repair line, and their two
//! renderings (SPEC §2.3): the text form of seed 004 and the JSON report.
//!
//! The diagnostic and its text form are `diagnostic/finding.rs` (which
//! takes nothing from the rest of this crate); [`mark()`], the stretch a
//! diagnostic marks in its text, is `diagnostic/mark.rs` (it reads the
//! YAML document's spans). Both are re-exported here.

pub(crate) mod finding;
mod mark;

pub use finding::{render_text, sort, summary_line, Diagnostic, Located, Severity};
pub use mark::mark;
