//! The scenario host (SPEC §7): reads `scenarios.yaml` and runs each case on
//! a virtual clock against fake product replies.

pub mod file;
pub mod run;
