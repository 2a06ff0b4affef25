//! The database's time as this process's clock (docs/decisions.md "One
//! time for every process"): a process measures how far its wall clock
//! stands from the database's (`clock_timestamp()`, read by the store),
//! keeping the sample with the shortest round trip of a few
//! ([`ClockOffset::best_of`]), and its engine reads a
//! [`DatabaseAlignedClock`]: the database's time at the last measurement
//! plus the monotonic time elapsed since, so due times and lease ends are
//! judged by the one clock every process shares, and a jump of the wall
//! clock between two measurements moves nothing. Whether the offset is
//! within the deployment's bound ([`ClockOffset::within`]) decides whether
//! the process serves.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use coordinator_ir::instant::Instant;

use super::Clock;

/// One reading of the database's clock: this process's wall clock just
/// before the query was sent, the monotonic instant then, how long the
/// round trip took, and what the database answered.
#[derive(Clone, Copy, Debug)]
pub struct ClockSample {
    /// This process's wall clock ([`super::SystemClock`]) when the query
    /// was sent.
    pub sent_at: Instant,
    /// The monotonic clock when the query was sent.
    pub sent_monotonic: std::time::Instant,
    /// From sending the query to reading its answer (monotonic).
    pub round_trip: Duration,
    /// The database's `clock_timestamp()` in its answer.
    pub database: Instant,
}

/// A measured offset: this process's wall clock minus the database's, at
/// the middle of the round trip of the chosen sample (half its round trip
/// is the measurement's own uncertainty), and where the database's time
/// stood then on the monotonic clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockOffset {
    /// This process's clock minus the database's, in nanoseconds
    /// (positive: this process is ahead).
    pub offset_nanos: i128,
    /// The chosen sample's round trip.
    pub round_trip: Duration,
    /// The database's time at the middle of that round trip.
    pub database_at_midpoint: Instant,
    /// The monotonic instant of that middle.
    pub monotonic_at_midpoint: std::time::Instant,
}

impl ClockOffset {
    /// The offset of the sample with the shortest round trip of `samples`
    /// (the one whose midpoint is best known), `None` for no sample. The
    /// database read its clock somewhere in the round trip; the middle is
    /// the estimate, off by at most half the round trip.
    pub fn best_of(samples: &[ClockSample]) -> Option<ClockOffset> {
        let best = samples.iter().min_by_key(|s| s.round_trip)?;
        let half = best.round_trip / 2;
        let local_midpoint = best.sent_at.unix_nanos() + i128::from(duration_nanos(half));
        Some(ClockOffset {
            offset_nanos: local_midpoint - best.database.unix_nanos(),
            round_trip: best.round_trip,
            database_at_midpoint: best.database,
            monotonic_at_midpoint: best.sent_monotonic + half,
        })
    }

    /// The offset in seconds (positive: this process's clock is ahead).
    #[allow(clippy::cast_precision_loss)]
    pub fn seconds(&self) -> f64 {
        self.offset_nanos as f64 / 1e9
    }

    /// Whether the offset is within `bound` either way (a bound met
    /// exactly is within).
    pub fn within(&self, bound: Duration) -> bool {
        self.offset_nanos.unsigned_abs() <= bound.as_nanos()
    }
}

/// `d` in nanoseconds, saturating (a round trip is never that long).
fn duration_nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// `at` moved by `nanos` (back when negative), saturating at the ends of
/// what an [`Instant`] holds.
fn plus_nanos(at: &Instant, nanos: i128) -> Instant {
    let total = at.unix_nanos().saturating_add(nanos);
    let seconds = total.div_euclid(1_000_000_000);
    let sub = u32::try_from(total.rem_euclid(1_000_000_000)).unwrap_or(0);
    Instant::from_unix_seconds_and_nanos(
        i64::try_from(seconds).unwrap_or(if seconds < 0 { i64::MIN } else { i64::MAX }),
        sub,
    )
}

/// The engine's clock in the service: the database's time at the last
/// measurement ([`DatabaseAlignedClock::align`]) plus the monotonic time
/// elapsed since, so it follows the database's clock whatever this
/// process's wall clock does between measurements. Before the first
/// measurement it reads `system`. Clones share one alignment.
#[derive(Clone)]
pub struct DatabaseAlignedClock {
    system: Arc<dyn Clock>,
    anchor: Arc<RwLock<Option<(Instant, std::time::Instant)>>>,
}

impl DatabaseAlignedClock {
    /// A clock reading `system` until it is aligned.
    pub fn new(system: Arc<dyn Clock>) -> Self {
        DatabaseAlignedClock {
            system,
            anchor: Arc::new(RwLock::new(None)),
        }
    }

    /// Follows the database's time measured in `offset` from now on.
    pub fn align(&self, offset: &ClockOffset) {
        if let Ok(mut anchor) = self.anchor.write() {
            *anchor = Some((offset.database_at_midpoint, offset.monotonic_at_midpoint));
        }
    }

    /// Whether a measurement aligned it yet.
    pub fn aligned(&self) -> bool {
        self.anchor.read().is_ok_and(|a| a.is_some())
    }
}

impl Clock for DatabaseAlignedClock {
    fn now(&self) -> Instant {
        let anchor = self.anchor.read().ok().and_then(|a| *a);
        match anchor {
            Some((database, monotonic)) => {
                plus_nanos(&database, i128::from(duration_nanos(monotonic.elapsed())))
            }
            None => self.system.now(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn sample(sent_at: i64, round_trip_ms: u64, database_nanos: i128) -> ClockSample {
        let database = plus_nanos(&Instant::from_unix_seconds(0), database_nanos);
        ClockSample {
            sent_at: Instant::from_unix_seconds(sent_at),
            sent_monotonic: std::time::Instant::now(),
            round_trip: Duration::from_millis(round_trip_ms),
            database,
        }
    }

    const SECOND: i128 = 1_000_000_000;

    #[test]
    fn the_offset_is_taken_at_the_middle_of_the_shortest_round_trip() {
        // Sent at 1000 s local; the database read 700.005 s; a 10 ms round
        // trip puts the local middle at 1000.005 s: 300 s ahead exactly.
        let samples = [
            sample(1_000, 40, 700 * SECOND + 2_000_000),
            sample(1_000, 10, 700 * SECOND + 5_000_000),
            sample(1_000, 25, 700 * SECOND + 9_000_000),
        ];
        let offset = ClockOffset::best_of(&samples).expect("a sample");
        assert_eq!(offset.round_trip, Duration::from_millis(10));
        assert_eq!(offset.offset_nanos, 300 * SECOND);
        assert!((offset.seconds() - 300.0).abs() < 1e-9);
        assert_eq!(
            offset.database_at_midpoint.unix_nanos(),
            700 * SECOND + 5_000_000
        );
    }

    #[test]
    fn a_process_behind_has_a_negative_offset_and_no_sample_no_offset() {
        let offset = ClockOffset::best_of(&[sample(1_000, 0, 1_300 * SECOND)]).expect("a sample");
        assert_eq!(offset.offset_nanos, -300 * SECOND);
        assert!(ClockOffset::best_of(&[]).is_none());
    }

    #[test]
    fn the_bound_holds_either_way_and_is_inclusive() {
        let bound = Duration::from_secs(1);
        let at = |nanos: i128| ClockOffset {
            offset_nanos: nanos,
            ..ClockOffset::best_of(&[sample(0, 0, 0)]).expect("a sample")
        };
        assert!(at(0).within(bound));
        assert!(at(SECOND).within(bound));
        assert!(at(-SECOND).within(bound));
        assert!(!at(SECOND + 1).within(bound));
        assert!(!at(-2 * SECOND).within(bound));
        assert!(!at(300 * SECOND).within(bound));
    }

    #[test]
    fn the_aligned_clock_follows_the_database_not_the_wall_clock() {
        let wall = ManualClock::at("2026-01-01T00:05:00Z");
        let clock = DatabaseAlignedClock::new(Arc::new(wall.clone()));
        assert!(!clock.aligned());
        assert_eq!(clock.now_rfc3339(), "2026-01-01T00:05:00Z");
        // The database says 00:00:00 while this process's wall clock says
        // 00:05:00: the engine's clock is the database's.
        let database = Instant::parse("2026-01-01T00:00:00Z").expect("instant");
        let offset = ClockOffset::best_of(&[ClockSample {
            sent_at: wall.now(),
            sent_monotonic: std::time::Instant::now(),
            round_trip: Duration::ZERO,
            database,
        }])
        .expect("a sample");
        assert_eq!(offset.offset_nanos, 300 * SECOND);
        clock.align(&offset);
        assert!(clock.aligned());
        // A jump of the wall clock moves nothing.
        wall.advance(3_600);
        let now = clock.now();
        assert!(now >= database, "{now:?}");
        assert!(now.unix_seconds() - database.unix_seconds() < 60, "{now:?}");
    }

    #[test]
    fn nanoseconds_are_added_across_seconds_and_before_1970() {
        let at = Instant::from_unix_seconds_and_nanos(10, 900_000_000);
        assert_eq!(plus_nanos(&at, 200_000_000).unix_nanos(), 11_100_000_000);
        assert_eq!(plus_nanos(&at, -11 * SECOND).unix_nanos(), -100_000_000);
    }
}
