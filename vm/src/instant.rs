//! Instants, re-exported from [`coordinator_ir::instant`], where the one
//! implementation lives (parsing, formatting, Unix seconds, the leap-second
//! rule and the 0001–9999 year range). Kept so that hosts importing
//! `coordinator_vm::instant::*` keep compiling; new code should use
//! `coordinator_ir::instant` directly.

pub use coordinator_ir::instant::{
    add_seconds, seconds_between, Instant, InstantError, MAX_YEAR, MIN_YEAR,
};
