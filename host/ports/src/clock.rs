//! The clock port ([`Clock`], [`SystemClock`], [`ManualClock`]; defined in
//! `coordinator_runtime::clock`, re-exported here) and the engine's
//! conversions between instants and its whole-second Unix time: the VM's
//! instants are [`Instant`]s ([`Instant::unix_seconds`] truncates,
//! [`due_unix`] rounds up); RFC 3339 text is read only at a host's own
//! boundary ([`rfc3339_to_unix`]) and written for the API
//! ([`unix_to_rfc3339`]).

use coordinator_ir::instant::{format_unix_seconds, Instant};

pub use coordinator_runtime::clock::{Clock, ManualClock, SystemClock};

/// Unix seconds as RFC 3339 UTC with `Z`, capped to years 0001–9999
/// ([`format_unix_seconds`]).
pub fn unix_to_rfc3339(unix: i64) -> String {
    format_unix_seconds(unix)
}

/// When `at` is due on the engine's whole-second clock: its Unix seconds
/// rounded up, so a timer (a wake, a timeout, the run deadline) never
/// fires before its instant (the VM takes a wake or a deadline only at or
/// after it). The one home of this rounding: the engine's job due times
/// and both stores' deadlines use it.
pub fn due_unix(at: &Instant) -> i64 {
    let seconds = at.unix_seconds();
    if Instant::from_unix_seconds(seconds) < *at {
        seconds.saturating_add(1)
    } else {
        seconds
    }
}

/// An RFC 3339 text as Unix seconds (fractions truncated toward zero);
/// `None` when malformed ([`Instant::parse`]). For text a host reads at its
/// own boundary (a request, a test's literal); an [`Instant`] already has
/// [`Instant::unix_seconds`].
pub fn rfc3339_to_unix(text: &str) -> Option<i64> {
    Instant::parse(text).ok().map(|i| i.unix_seconds())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instant_is_due_at_the_whole_second_at_or_after_it() {
        let due = |text: &str| Instant::parse(text).map(|at| due_unix(&at));
        assert_eq!(due("1970-01-01T00:01:00Z"), Ok(60));
        assert_eq!(due("1970-01-01T00:01:00.001Z"), Ok(61));
        assert_eq!(due("1970-01-01T00:00:59.999999999Z"), Ok(60));
        assert_eq!(due("1969-12-31T23:59:59.5Z"), Ok(0));
    }
}
