//! Standard output and standard error without panics: `println!` panics when
//! stdout is closed (a pipe into `head`, a closed terminal), so every line
//! `coordinatorctl` prints goes through [`outln!`] / [`out!`] (stdout) and
//! [`errln!`] / [`err!`] (stderr).
//!
//! A stdout that cannot be written (a closed pipe, a full disk) ends the
//! process at once with exit 3 (resource unavailable) and one line on
//! stderr, `error[coordinator.command.output-closed]`; what was printed
//! before stays as it was. A stderr that cannot be written is ignored
//! (there is nowhere left to say so).

use std::io::Write;

/// The code of a stdout that cannot be written.
pub const OUTPUT_CLOSED: &str = "coordinator.command.output-closed";

/// Writes `args` to stdout; on failure ends the process (exit 3), see the
/// module documentation.
pub fn stdout(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        let _ = writeln!(
            std::io::stderr(),
            "error[{OUTPUT_CLOSED}] standard output cannot be written: {e}"
        );
        std::process::exit(3);
    }
}

/// Writes `args` to stderr, ignoring a failure.
pub fn stderr(args: std::fmt::Arguments<'_>) {
    let _ = std::io::stderr().lock().write_fmt(args);
}

/// `println!` to stdout without a panic (see [`stdout`]).
#[macro_export]
macro_rules! outln {
    () => { $crate::output::stdout(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::output::stdout(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `print!` to stdout without a panic (see [`stdout`]).
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => { $crate::output::stdout(format_args!($($arg)*)) };
}

/// `eprintln!` without a panic (see [`stderr`]).
#[macro_export]
macro_rules! errln {
    () => { $crate::output::stderr(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::output::stderr(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `eprint!` without a panic (see [`stderr`]).
#[macro_export]
macro_rules! err {
    ($($arg:tt)*) => { $crate::output::stderr(format_args!($($arg)*)) };
}
