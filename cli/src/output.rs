//! Standard output and standard error without panics: `println!` panics when
//! stdout is closed (a pipe into `head`, a closed terminal), so every line
//! `coordinatorctl` prints goes through [`crate::outln!`] / [`crate::out!`] (stdout) and
//! [`crate::errln!`] / [`crate::err!`] (stderr).
//!
//! A stdout whose reader went away (a broken pipe: `| head` has its lines)
//! ends the output quietly: nothing more is written, and the command goes
//! on to its own exit code, as if the rest had been read. A stdout that
//! cannot be written for another reason (a full disk, an I/O error) ends
//! the process at once with exit 3 (resource unavailable) and one line on
//! stderr, `error[coordinator.command.output-closed]`. A stderr that cannot
//! be written is ignored (there is nowhere left to say so).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::codes;

/// Set once stdout's reader went away: later output is dropped.
static READER_GONE: AtomicBool = AtomicBool::new(false);

/// Writes `args` to stdout; see the module documentation for a stdout
/// that cannot take it.
pub fn stdout(args: std::fmt::Arguments<'_>) {
    if READER_GONE.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    match out.write_fmt(args).and_then(|()| out.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            READER_GONE.store(true, Ordering::Relaxed);
        }
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "error[{}] standard output cannot be written: {e}",
                codes::COMMAND_OUTPUT_CLOSED
            );
            std::process::exit(3);
        }
    }
}

/// Writes `args` to stderr, ignoring a failure.
pub fn stderr(args: std::fmt::Arguments<'_>) {
    let _ = std::io::stderr().lock().write_fmt(args);
}

/// `println!` to stdout without a panic (see `output::stdout`).
#[macro_export]
macro_rules! outln {
    () => { $crate::output::stdout(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::output::stdout(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `print!` to stdout without a panic (see `output::stdout`).
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => { $crate::output::stdout(format_args!($($arg)*)) };
}

/// `eprintln!` without a panic (see `output::stderr`).
#[macro_export]
macro_rules! errln {
    () => { $crate::output::stderr(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::output::stderr(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `eprint!` without a panic (see `output::stderr`).
#[macro_export]
macro_rules! err {
    ($($arg:tt)*) => { $crate::output::stderr(format_args!($($arg)*)) };
}
