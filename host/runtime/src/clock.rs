//! The clock port: every instant the service host uses comes from a
//! [`Clock`] ([`SystemClock`] in production, [`ManualClock`] in tests), so
//! in-process tests drive days of waiting with no real time passing, and
//! the one wall-clock read of the host is [`SystemClock::now`].
//!
//! It lives here, below the ports crate, because the audit journal
//! ([`crate::audit`]) stamps its lines with it too;
//! `coordinator_ports::clock` re-exports it beside the engine's
//! conversions. [`offset`] aligns it with the database's clock
//! ([`DatabaseAlignedClock`], the service's engine clock).

pub mod offset;

pub use offset::{ClockOffset, ClockSample, DatabaseAlignedClock};

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use coordinator_ir::instant::{format_unix_seconds, Instant};

/// A source of the current instant.
pub trait Clock: Send + Sync {
    /// The current instant (UTC). [`SystemClock`] reads it to the
    /// nanosecond; [`ManualClock`] stands on whole seconds.
    fn now(&self) -> Instant;

    /// Whole seconds since 1970-01-01T00:00:00Z (Unix time, UTC),
    /// truncated toward zero: the engine's leases, due times and stamps.
    fn now_unix(&self) -> i64 {
        self.now().unix_seconds()
    }

    /// The current whole second as RFC 3339 UTC with `Z` (no fraction).
    fn now_rfc3339(&self) -> String {
        format_unix_seconds(self.now_unix())
    }
}

/// The operating system's clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        // Before 1970 only on a broken clock: read as 1970 then.
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Instant::from_unix_seconds_and_nanos(
            i64::try_from(since.as_secs()).unwrap_or(i64::MAX),
            since.subsec_nanos(),
        )
    }
}

/// A clock that moves only when a test moves it, in whole seconds. Clones
/// share one time.
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
        Self::at_unix(
            Instant::parse(text)
                .expect("ManualClock::at takes an RFC 3339 instant")
                .unix_seconds(),
        )
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
    fn now(&self) -> Instant {
        Instant::from_unix_seconds(self.0.load(Ordering::SeqCst))
    }
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
        assert_eq!(c.now_unix(), 1_767_484_800);
    }

    #[test]
    fn the_system_clock_reads_below_the_second_and_its_whole_seconds_agree() {
        let c = SystemClock;
        let now = c.now();
        assert!(now.unix_seconds() > 1_700_000_000, "{now:?}");
        assert_eq!(
            now.unix_nanos() / 1_000_000_000,
            i128::from(now.unix_seconds())
        );
        assert!(c.now_unix() >= now.unix_seconds());
        assert!(!c.now_rfc3339().contains('.'));
    }
}
