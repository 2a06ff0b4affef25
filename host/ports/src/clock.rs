//! The clock port ([`Clock`], [`SystemClock`], [`ManualClock`]; defined in
//! `coordinator_runtime::clock`, re-exported here) and the one time type of
//! the engine and the store port, [`Instant`], with the rules of its whole
//! seconds: a stamp is the whole second of the clock's reading
//! ([`whole_second`], truncated), a timer is due at the whole second at or
//! after its instant ([`due_at`], [`due_unix`]), a span of seconds is added
//! with [`seconds_after`]. Unix seconds appear only where a store writes an
//! instant ([`due_unix`], [`unix_seconds`]) and at a host's own boundary
//! (RFC 3339 text read with [`rfc3339_to_unix`], written with
//! [`unix_to_rfc3339`]).

use coordinator_ir::instant::format_unix_seconds;
/// The one time type of the engine and the store port (`ir::instant`), re-exported
/// for the hosts that reach it only through the ports (the server).
pub use coordinator_ir::instant::Instant;

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

/// The whole second of `at` (truncated toward zero, as
/// [`Instant::unix_seconds`]), capped to years 0001–9999 so it is always
/// written: the engine's stamps (a step's times, an answer's, a commit's)
/// and the instants it hands the VM are whole seconds of its clock.
pub fn whole_second(at: &Instant) -> Instant {
    Instant::from_unix_seconds_capped(at.unix_seconds())
}

/// When `at` is due, as an instant: the whole second at or after it
/// ([`due_unix`]).
pub fn due_at(at: &Instant) -> Instant {
    Instant::from_unix_seconds(due_unix(at))
}

/// `seconds` after `at` (before it when negative), saturating at the ends
/// of Unix time (a lease's end, a retry's due time).
pub fn seconds_after(at: &Instant, seconds: i64) -> Instant {
    at.plus_seconds(seconds).unwrap_or_else(|| {
        Instant::from_unix_seconds(if seconds < 0 { i64::MIN } else { i64::MAX })
    })
}

/// `at` as the standard library's [`std::time::SystemTime`] (what the
/// OpenTelemetry SDK takes); an instant before 1970 reads as 1970.
pub fn system_time(at: &Instant) -> std::time::SystemTime {
    let nanos = at.unix_nanos().max(0);
    let seconds = u64::try_from(nanos / 1_000_000_000).unwrap_or(0);
    let rest = u32::try_from(nanos % 1_000_000_000).unwrap_or(0);
    std::time::UNIX_EPOCH + std::time::Duration::new(seconds, rest)
}

/// Serde forms of instants stored as Unix seconds or nanoseconds (the
/// ledger's step times and answers, an observation's last read): the
/// stored JSON keeps the integers it always had.
pub mod unix_seconds {
    use coordinator_ir::instant::Instant;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes `at` as its Unix seconds (truncated).
    ///
    /// # Errors
    /// The serializer's.
    pub fn serialize<S: Serializer>(at: &Instant, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i64(at.unix_seconds())
    }

    /// Reads Unix seconds as an instant.
    ///
    /// # Errors
    /// The deserializer's (not an integer).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Instant, D::Error> {
        i64::deserialize(d).map(Instant::from_unix_seconds)
    }

    /// [`unix_seconds`](self) of an optional instant (`null` for `None`).
    pub mod option {
        use coordinator_ir::instant::Instant;
        use serde::{Deserialize, Deserializer, Serializer};

        /// Writes `at` as its Unix seconds, or `null`.
        ///
        /// # Errors
        /// The serializer's.
        pub fn serialize<S: Serializer>(at: &Option<Instant>, s: S) -> Result<S::Ok, S::Error> {
            match at {
                Some(at) => s.serialize_some(&at.unix_seconds()),
                None => s.serialize_none(),
            }
        }

        /// Reads Unix seconds, or `null`, as an instant.
        ///
        /// # Errors
        /// The deserializer's.
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Instant>, D::Error> {
            Ok(Option::<i64>::deserialize(d)?.map(Instant::from_unix_seconds))
        }
    }

    /// An optional instant as Unix nanoseconds (`null` for `None`): the
    /// instant a traced run entered a step, the start of its span.
    pub mod nanos_option {
        use coordinator_ir::instant::Instant;
        use serde::{Deserialize, Deserializer, Serializer};

        const NANOS_PER_SECOND: i64 = 1_000_000_000;

        /// Writes `at` as its Unix nanoseconds (0 outside the `i64` range),
        /// or `null`.
        ///
        /// # Errors
        /// The serializer's.
        pub fn serialize<S: Serializer>(at: &Option<Instant>, s: S) -> Result<S::Ok, S::Error> {
            match at {
                Some(at) => s.serialize_some(&i64::try_from(at.unix_nanos()).unwrap_or(0)),
                None => s.serialize_none(),
            }
        }

        /// Reads Unix nanoseconds, or `null`, as an instant.
        ///
        /// # Errors
        /// The deserializer's.
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Instant>, D::Error> {
            Ok(Option::<i64>::deserialize(d)?.map(|nanos| {
                let seconds = nanos.div_euclid(NANOS_PER_SECOND);
                let rest = u32::try_from(nanos.rem_euclid(NANOS_PER_SECOND)).unwrap_or(0);
                Instant::from_unix_seconds_and_nanos(seconds, rest)
            }))
        }
    }
}

/// `at`'s whole second as RFC 3339 UTC with `Z` ([`unix_to_rfc3339`]):
/// how the API writes the instants a store keeps (a step's times, a run's
/// end).
pub fn instant_to_rfc3339(at: &Instant) -> String {
    unix_to_rfc3339(at.unix_seconds())
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

    #[test]
    fn stamps_are_whole_seconds_and_spans_saturate() {
        let at = Instant::from_unix_seconds_and_nanos(61, 900_000_000);
        assert_eq!(whole_second(&at), Instant::from_unix_seconds(61));
        assert_eq!(due_at(&at), Instant::from_unix_seconds(62));
        assert_eq!(seconds_after(&at, 10).unix_seconds(), 71);
        assert_eq!(
            seconds_after(&Instant::from_unix_seconds(i64::MAX - 1), 5).unix_seconds(),
            i64::MAX
        );
    }

    #[test]
    fn stored_instants_keep_their_integers() {
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct Stamped {
            #[serde(with = "unix_seconds")]
            at: Instant,
            #[serde(with = "unix_seconds::option")]
            ended: Option<Instant>,
            #[serde(with = "unix_seconds::nanos_option")]
            entered: Option<Instant>,
        }
        let stamped = Stamped {
            at: Instant::from_unix_seconds(7),
            ended: None,
            entered: Some(Instant::from_unix_seconds_and_nanos(1, 5)),
        };
        let text = serde_json::to_string(&stamped).unwrap_or_default();
        assert_eq!(text, r#"{"at":7,"ended":null,"entered":1000000005}"#);
        assert_eq!(serde_json::from_str::<Stamped>(&text).ok(), Some(stamped));
    }
}
