//! The clock port: every instant the service host uses comes from a
//! [`Clock`], so in-process tests drive days of waiting with a
//! [`ManualClock`] and no real time passes.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use coordinator_ir::instant::{format_unix_seconds, Instant};

/// A source of the current instant, in whole seconds.
pub trait Clock: Send + Sync {
    /// Seconds since 1970-01-01T00:00:00Z (Unix time, UTC).
    fn now_unix(&self) -> i64;

    /// The current instant as RFC 3339 UTC with `Z` (no fraction).
    fn now_rfc3339(&self) -> String {
        unix_to_rfc3339(self.now_unix())
    }
}

/// The operating system's clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_unix(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
            .unwrap_or_default()
    }
}

/// A clock that moves only when a test moves it. Clones share one time.
#[derive(Clone, Debug)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    /// A clock standing at `unix` seconds.
    pub fn at_unix(unix: i64) -> Self {
        ManualClock(Arc::new(AtomicI64::new(unix)))
    }

    /// A clock standing at the RFC 3339 instant `text` (tests write it).
    ///
    /// # Panics
    /// When `text` is not an RFC 3339 instant: a test's mistake, never a
    /// time to guess.
    #[allow(clippy::expect_used)]
    pub fn at(text: &str) -> Self {
        Self::at_unix(rfc3339_to_unix(text).expect("ManualClock::at takes an RFC 3339 instant"))
    }

    /// Moves the clock `seconds` forward (backward when negative).
    pub fn advance(&self, seconds: i64) {
        self.0.fetch_add(seconds, Ordering::SeqCst);
    }

    /// Sets the clock to `unix` seconds.
    pub fn set_unix(&self, unix: i64) {
        self.0.store(unix, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_unix(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Unix seconds as RFC 3339 UTC with `Z`, capped to years 0001–9999
/// ([`format_unix_seconds`]).
pub fn unix_to_rfc3339(unix: i64) -> String {
    format_unix_seconds(unix)
}

/// When an RFC 3339 instant is due on the engine's whole-second clock: its
/// Unix seconds rounded up, so a timer (a wake, a timeout, the run
/// deadline) never fires before its instant (the VM takes a wake or a
/// deadline only at or after it). `None` when malformed
/// ([`Instant::parse`]; the VM never writes one). The one home of this
/// rounding: the engine's job due times and both stores' deadlines use it.
pub fn due_unix(text: &str) -> Option<i64> {
    let instant = Instant::parse(text).ok()?;
    let seconds = instant.unix_seconds();
    Some(if Instant::from_unix_seconds(seconds) < instant {
        seconds.saturating_add(1)
    } else {
        seconds
    })
}

/// An RFC 3339 instant as Unix seconds (fractions truncated toward zero);
/// `None` when malformed ([`Instant::parse`]).
pub fn rfc3339_to_unix(text: &str) -> Option<i64> {
    Instant::parse(text).ok().map(|i| i.unix_seconds())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = ManualClock::at("2026-01-01T00:00:00Z");
        assert_eq!(c.now_rfc3339(), "2026-01-01T00:00:00Z");
        c.advance(86_400 * 3);
        assert_eq!(c.now_rfc3339(), "2026-01-04T00:00:00Z");
        assert_eq!(rfc3339_to_unix("1970-01-01T00:01:00Z"), Some(60));
    }

    #[test]
    fn an_instant_is_due_at_the_whole_second_at_or_after_it() {
        assert_eq!(due_unix("1970-01-01T00:01:00Z"), Some(60));
        assert_eq!(due_unix("1970-01-01T00:01:00.001Z"), Some(61));
        assert_eq!(due_unix("1970-01-01T00:00:59.999999999Z"), Some(60));
        assert_eq!(due_unix("1969-12-31T23:59:59.5Z"), Some(0));
        assert_eq!(due_unix("not an instant"), None);
    }
}
