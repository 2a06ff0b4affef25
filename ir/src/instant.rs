//! RFC 3339 instants without a clock: parsing, UTC formatting, Unix
//! seconds, and the two Function built-ins `add_seconds` and
//! `seconds_between` (SPEC §3). This is the one implementation of instants
//! in the workspace: the compiler checks `until` literals with it, the VM
//! runs waits, deadlines and the built-ins with it, and hosts convert their
//! clock's Unix seconds with it.
//!
//! Accepted text: `YYYY-MM-DDTHH:MM:SS[.F…](Z|±HH:MM)`, with `t`/`z` also
//! accepted in lowercase and any offset up to ±23:59. A leap second `:60`
//! (at any minute) is taken as the first instant of the next minute, with
//! no fraction. Formatted instants are always UTC with a `Z`; the fraction
//! is written only when the parsed text had one (with the same number of
//! digits, at most nine; longer fractions are cut to nanoseconds).
//! Formatting refuses years outside 0001–9999 ([`MIN_YEAR`]–[`MAX_YEAR`]):
//! an instant may be computed past them, but never written.
//!
//! An [`Instant`] is serde data as its RFC 3339 text: it serializes as
//! [`Instant::format`] writes it (so a state, a command or a job kind that
//! holds one serializes to the same string as when it held the text) and
//! deserializes with [`Instant::parse`], refusing malformed text with the
//! parser's sentence.

use std::cmp::Ordering;
use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

const NANOS_PER_SECOND: i128 = 1_000_000_000;

/// The earliest year [`Instant::format`] writes.
pub const MIN_YEAR: i64 = 1;
/// The latest year [`Instant::format`] writes.
pub const MAX_YEAR: i64 = 9999;

/// Unix seconds of 0001-01-01T00:00:00Z, the earliest instant written.
pub const MIN_UNIX_SECONDS: i64 = -62_135_596_800;
/// Unix seconds of 9999-12-31T23:59:59Z, the latest instant written.
pub const MAX_UNIX_SECONDS: i64 = 253_402_300_799;

/// Unix seconds as RFC 3339 UTC with `Z` and no fraction, capped to
/// [`MIN_UNIX_SECONDS`]..=[`MAX_UNIX_SECONDS`] (so it is always written:
/// a clock past year 9999 reads as 9999-12-31T23:59:59Z).
pub fn format_unix_seconds(seconds: i64) -> String {
    let capped = Instant::from_unix_seconds_capped(seconds);
    match capped.format() {
        Ok(text) => text,
        // Every second in the capped range falls in years 0001-9999.
        Err(e) => unreachable!("{capped:?} is inside 0001-9999: {e}"),
    }
}

/// A parsed instant: seconds since 1970-01-01T00:00:00Z plus nanoseconds,
/// and how many fraction digits the text carried (0 = none).
#[derive(Clone, Copy, Debug)]
pub struct Instant {
    seconds: i64,
    nanos: u32,
    fraction_digits: u8,
}

impl PartialEq for Instant {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Instant {}
impl PartialOrd for Instant {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Instant {
    /// Orders by the instant only; the number of fraction digits is ignored.
    fn cmp(&self, other: &Self) -> Ordering {
        (self.seconds, self.nanos).cmp(&(other.seconds, other.nanos))
    }
}

/// Why a text is not an RFC 3339 instant, or a result is out of range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstantError(pub String);

impl fmt::Display for InstantError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InstantError {}

struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }
    fn digits(&mut self, n: usize, what: &str) -> Result<u32, InstantError> {
        let mut v: u32 = 0;
        for _ in 0..n {
            match self.peek() {
                Some(b) if b.is_ascii_digit() => {
                    v = v * 10 + u32::from(b - b'0');
                    self.pos += 1;
                }
                _ => {
                    return Err(InstantError(format!(
                        "expected two or four digits for {what}"
                    )))
                }
            }
        }
        Ok(v)
    }
    fn expect(&mut self, options: &[u8], what: &str) -> Result<u8, InstantError> {
        match self.peek() {
            Some(b) if options.contains(&b) => {
                self.pos += 1;
                Ok(b)
            }
            _ => Err(InstantError(format!("expected {what}"))),
        }
    }
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(year) => 29,
        2 => 28,
        _ => 0,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = i64::from((month + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

impl Instant {
    /// Parses an RFC 3339 date-time (see the module documentation).
    ///
    /// # Errors
    /// An [`InstantError`] naming what is malformed.
    pub fn parse(text: &str) -> Result<Instant, InstantError> {
        let mut c = Cursor {
            bytes: text.as_bytes(),
            pos: 0,
        };
        let wrap =
            |e: InstantError| InstantError(format!("`{text}` is not an RFC 3339 instant: {}", e.0));
        let year = i64::from(c.digits(4, "the year").map_err(wrap)?);
        c.expect(b"-", "`-` after the year").map_err(wrap)?;
        let month = c.digits(2, "the month").map_err(wrap)?;
        c.expect(b"-", "`-` after the month").map_err(wrap)?;
        let day = c.digits(2, "the day").map_err(wrap)?;
        c.expect(b"Tt", "`T` between date and time").map_err(wrap)?;
        let hour = c.digits(2, "the hour").map_err(wrap)?;
        c.expect(b":", "`:` after the hour").map_err(wrap)?;
        let minute = c.digits(2, "the minute").map_err(wrap)?;
        c.expect(b":", "`:` after the minute").map_err(wrap)?;
        let second = c.digits(2, "the second").map_err(wrap)?;
        let mut nanos: u32 = 0;
        let mut fraction_digits: u8 = 0;
        if c.peek() == Some(b'.') {
            c.pos += 1;
            let mut count = 0u32;
            while let Some(b) = c.peek().filter(u8::is_ascii_digit) {
                if count < 9 {
                    nanos = nanos * 10 + u32::from(b - b'0');
                }
                count += 1;
                c.pos += 1;
            }
            if count == 0 {
                return Err(wrap(InstantError("expected digits after `.`".into())));
            }
            for _ in count.min(9)..9 {
                nanos *= 10;
            }
            fraction_digits = count.min(9) as u8;
        }
        let offset_seconds: i64 = match c.expect(b"Zz+-", "`Z` or an offset").map_err(wrap)? {
            b'Z' | b'z' => 0,
            sign => {
                let oh = c.digits(2, "the offset hours").map_err(wrap)?;
                c.expect(b":", "`:` in the offset").map_err(wrap)?;
                let om = c.digits(2, "the offset minutes").map_err(wrap)?;
                if oh > 23 || om > 59 {
                    return Err(wrap(InstantError("offset out of range".into())));
                }
                let v = i64::from(oh * 3600 + om * 60);
                if sign == b'-' {
                    -v
                } else {
                    v
                }
            }
        };
        if c.pos != text.len() {
            return Err(wrap(InstantError(
                "unexpected text after the offset".into(),
            )));
        }
        if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
            return Err(wrap(InstantError("no such date".into())));
        }
        if hour > 23 || minute > 59 || second > 60 {
            return Err(wrap(InstantError("no such time of day".into())));
        }
        if second == 60 {
            // A leap second is the first instant of the next minute.
            nanos = 0;
        }
        let seconds = days_from_civil(year, month, day) * 86_400
            + i64::from(hour * 3600 + minute * 60 + second)
            - offset_seconds;
        Ok(Instant {
            seconds,
            nanos,
            fraction_digits,
        })
    }

    /// Formats as UTC with `Z` (see the module documentation).
    ///
    /// # Errors
    /// When the year is outside 0001–9999.
    pub fn format(&self) -> Result<String, InstantError> {
        let year = self.civil_year();
        if !(MIN_YEAR..=MAX_YEAR).contains(&year) {
            return Err(InstantError(format!(
                "the instant falls in year {year}, outside 0001-9999"
            )));
        }
        Ok(self.to_string())
    }

    /// The proleptic Gregorian year (UTC) the instant falls in.
    fn civil_year(&self) -> i64 {
        civil_from_days(self.seconds.div_euclid(86_400)).0
    }

    /// The instant `seconds` whole seconds after 1970-01-01T00:00:00Z
    /// (Unix time, UTC; negative before it), with no fraction.
    pub fn from_unix_seconds(seconds: i64) -> Instant {
        Instant {
            seconds,
            nanos: 0,
            fraction_digits: 0,
        }
    }

    /// [`Instant::from_unix_seconds`] with `seconds` capped to
    /// [`MIN_UNIX_SECONDS`]..=[`MAX_UNIX_SECONDS`], so it is always written
    /// ([`Instant::format`] succeeds): the engine's whole-second clock as
    /// an instant.
    pub fn from_unix_seconds_capped(seconds: i64) -> Instant {
        Instant::from_unix_seconds(seconds.clamp(MIN_UNIX_SECONDS, MAX_UNIX_SECONDS))
    }

    /// The instant `seconds` and `nanos` (0..1e9, larger values carried
    /// into seconds) after 1970-01-01T00:00:00Z, written with nine fraction
    /// digits when `nanos` is not zero (a clock's reading).
    pub fn from_unix_seconds_and_nanos(seconds: i64, nanos: u32) -> Instant {
        let carried = i64::from(nanos / 1_000_000_000);
        let nanos = nanos % 1_000_000_000;
        Instant {
            seconds: seconds.saturating_add(carried),
            nanos,
            fraction_digits: if nanos == 0 { 0 } else { 9 },
        }
    }

    /// Nanoseconds since 1970-01-01T00:00:00Z (Unix time, UTC; negative
    /// before it).
    pub fn unix_nanos(&self) -> i128 {
        i128::from(self.seconds) * NANOS_PER_SECOND + i128::from(self.nanos)
    }

    /// Whole seconds since 1970-01-01T00:00:00Z (Unix time, UTC),
    /// truncated toward zero like [`Instant::seconds_until`]: a leap second
    /// counts as the first second of the next minute.
    pub fn unix_seconds(&self) -> i64 {
        Instant::from_unix_seconds(0).seconds_until(self)
    }

    /// This instant moved by `seconds` (may be negative); `None` on overflow.
    pub fn plus_seconds(&self, seconds: i64) -> Option<Instant> {
        Some(Instant {
            seconds: self.seconds.checked_add(seconds)?,
            ..*self
        })
    }

    /// Whole seconds from `self` to `later` (`later − self`), truncated
    /// toward zero.
    pub fn seconds_until(&self, later: &Instant) -> i64 {
        let a = i128::from(self.seconds) * NANOS_PER_SECOND + i128::from(self.nanos);
        let b = i128::from(later.seconds) * NANOS_PER_SECOND + i128::from(later.nanos);
        let d = (b - a) / NANOS_PER_SECOND;
        i64::try_from(d).unwrap_or(if d < 0 { i64::MIN } else { i64::MAX })
    }
}

impl fmt::Display for Instant {
    /// Writes the instant as UTC with `Z`, the fraction only when the parsed
    /// text had one: for years 0001–9999 exactly what [`Instant::format`]
    /// writes. Outside them (never in a state the VM wrote) the year is
    /// written with all its digits and its sign, which is not RFC 3339.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let days = self.seconds.div_euclid(86_400);
        let secs = self.seconds.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        if year < 0 {
            write!(f, "-{:04}", year.unsigned_abs())?;
        } else {
            write!(f, "{year:04}")?;
        }
        write!(
            f,
            "-{month:02}-{day:02}T{:02}:{:02}:{:02}",
            secs / 3600,
            secs % 3600 / 60,
            secs % 60
        )?;
        if self.fraction_digits > 0 {
            let all = format!("{:09}", self.nanos);
            f.write_str(".")?;
            f.write_str(all.get(..usize::from(self.fraction_digits)).unwrap_or(&all))?;
        }
        f.write_str("Z")
    }
}

impl Serialize for Instant {
    /// The RFC 3339 text [`Instant::format`] writes.
    ///
    /// # Errors
    /// A serializer error when the year is outside 0001–9999.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let text = self.format().map_err(serde::ser::Error::custom)?;
        serializer.serialize_str(&text)
    }
}

impl<'de> Deserialize<'de> for Instant {
    /// An RFC 3339 text, read by [`Instant::parse`].
    ///
    /// # Errors
    /// A deserializer error with the parser's sentence when the text is
    /// malformed, or when the value is not a string.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Instant, D::Error> {
        deserializer.deserialize_str(InstantText)
    }
}

/// Reads an [`Instant`] from its RFC 3339 text.
struct InstantText;

impl Visitor<'_> for InstantText {
    type Value = Instant;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an RFC 3339 instant such as \"2026-10-09T09:00:00Z\"")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Instant, E> {
        Instant::parse(text).map_err(E::custom)
    }
}

/// `add_seconds(instant, seconds)`: the instant `seconds` later, as UTC with
/// `Z`; fractional seconds kept only when the input had them.
///
/// # Errors
/// Malformed input, or a result outside years 0001–9999.
pub fn add_seconds(instant: &str, seconds: i64) -> Result<String, InstantError> {
    Instant::parse(instant)?
        .plus_seconds(seconds)
        .ok_or_else(|| InstantError("the result is out of range".into()))?
        .format()
}

/// `seconds_between(a, b)`: whole seconds `b − a`, truncated toward zero.
///
/// # Errors
/// When either text is not an RFC 3339 instant.
pub fn seconds_between(a: &str, b: &str) -> Result<i64, InstantError> {
    Ok(Instant::parse(a)?.seconds_until(&Instant::parse(b)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_utc_and_keeps_fraction_only_when_given() {
        assert_eq!(
            add_seconds("2026-10-09T09:00:00Z", 60).as_deref(),
            Ok("2026-10-09T09:01:00Z")
        );
        assert_eq!(
            add_seconds("2026-10-09T09:00:00.250Z", 1).as_deref(),
            Ok("2026-10-09T09:00:01.250Z")
        );
        assert_eq!(
            add_seconds("2026-10-09T09:00:00.000Z", 0).as_deref(),
            Ok("2026-10-09T09:00:00.000Z")
        );
    }

    #[test]
    fn accepts_lowercase_and_offsets() {
        assert_eq!(
            add_seconds("2026-10-09t11:00:00+02:00", 0).as_deref(),
            Ok("2026-10-09T09:00:00Z")
        );
        assert_eq!(
            add_seconds("2026-10-09t09:00:00z", 0).as_deref(),
            Ok("2026-10-09T09:00:00Z")
        );
        assert_eq!(
            add_seconds("2026-12-31T23:30:00-01:00", 0).as_deref(),
            Ok("2027-01-01T00:30:00Z")
        );
    }

    #[test]
    fn leap_second_is_next_minute() {
        assert_eq!(
            add_seconds("2016-12-31T23:59:60Z", 0).as_deref(),
            Ok("2017-01-01T00:00:00Z")
        );
        assert_eq!(
            seconds_between("2016-12-31T23:59:59Z", "2016-12-31T23:59:60Z"),
            Ok(1)
        );
    }

    #[test]
    fn leap_days_and_month_lengths() {
        assert_eq!(
            add_seconds("2024-02-28T12:00:00Z", 86_400).as_deref(),
            Ok("2024-02-29T12:00:00Z")
        );
        assert_eq!(
            add_seconds("2100-02-28T12:00:00Z", 86_400).as_deref(),
            Ok("2100-03-01T12:00:00Z")
        );
        assert!(Instant::parse("2023-02-29T00:00:00Z").is_err());
        assert!(Instant::parse("2023-04-31T00:00:00Z").is_err());
        assert!(Instant::parse("2023-01-01T24:00:00Z").is_err());
        assert!(Instant::parse("2023-01-01 00:00:00Z").is_err());
        assert!(Instant::parse("2023-01-01T00:00:00").is_err());
        assert!(Instant::parse("2023-01-01T00:00:00.Z").is_err());
        assert!(Instant::parse("2023-01-01T00:00:00Zx").is_err());
    }

    #[test]
    fn seconds_between_truncates_toward_zero() {
        assert_eq!(
            seconds_between("2026-01-01T00:00:00Z", "2026-01-01T00:00:01.9Z"),
            Ok(1)
        );
        assert_eq!(
            seconds_between("2026-01-01T00:00:01.9Z", "2026-01-01T00:00:00Z"),
            Ok(-1)
        );
        assert_eq!(
            seconds_between("2026-01-01T00:00:00Z", "2025-12-31T23:00:00-01:00"),
            Ok(0)
        );
        assert_eq!(
            seconds_between("2026-01-02T00:00:00Z", "2026-01-01T00:00:00Z"),
            Ok(-86_400)
        );
    }

    #[test]
    fn results_outside_years_1_to_9999_are_errors() {
        assert!(add_seconds("9999-12-31T23:59:59Z", 1).is_err());
        assert!(add_seconds("0001-01-01T00:00:00Z", -1).is_err());
        assert!(add_seconds("0001-01-01T00:30:00+01:00", 0).is_err());
        assert!(add_seconds("2026-01-01T00:00:00Z", i64::MAX).is_err());
        assert_eq!(
            add_seconds("0001-01-01T00:00:00Z", 0).as_deref(),
            Ok("0001-01-01T00:00:00Z")
        );
    }

    #[test]
    fn unix_seconds_round_trip_and_truncate_toward_zero() {
        let epoch = Instant::from_unix_seconds(0);
        assert_eq!(epoch.format().as_deref(), Ok("1970-01-01T00:00:00Z"));
        assert_eq!(
            Instant::from_unix_seconds(1_767_225_600)
                .format()
                .as_deref(),
            Ok("2026-01-01T00:00:00Z")
        );
        let parse = |t: &str| Instant::parse(t).map(|i| i.unix_seconds());
        assert_eq!(parse("1970-01-01T00:01:00Z"), Ok(60));
        assert_eq!(parse("2026-01-01T01:00:00+01:00"), Ok(1_767_225_600));
        assert_eq!(parse("1970-01-01T00:00:01.9Z"), Ok(1));
        assert_eq!(parse("1969-12-31T23:59:58.5Z"), Ok(-1));
        assert_eq!(parse("2016-12-31T23:59:60Z"), Ok(1_483_228_800));
        assert!(Instant::from_unix_seconds(i64::MAX).format().is_err());
        assert_eq!(
            Instant::from_unix_seconds(-62_135_596_800)
                .format()
                .as_deref(),
            Ok("0001-01-01T00:00:00Z")
        );
        assert!(Instant::from_unix_seconds(-62_135_596_801)
            .format()
            .is_err());
    }

    #[test]
    fn long_fractions_are_cut_to_nanoseconds() {
        assert_eq!(
            add_seconds("2026-01-01T00:00:00.1234567891Z", 0).as_deref(),
            Ok("2026-01-01T00:00:00.123456789Z")
        );
    }

    #[test]
    fn serde_form_is_the_rfc3339_text() {
        for text in [
            "2026-10-09T09:00:00Z",
            "2026-10-09T09:00:00.250Z",
            "2026-10-09T09:00:00.000000001Z",
            "0001-01-01T00:00:00Z",
        ] {
            let instant: Instant =
                serde_json::from_value(serde_json::json!(text)).expect("an instant");
            assert_eq!(instant.to_string(), text);
            assert_eq!(
                serde_json::to_string(&instant).expect("written"),
                format!("\"{text}\"")
            );
        }
        let utc: Instant =
            serde_json::from_str("\"2026-10-09t11:00:00+02:00\"").expect("an instant");
        assert_eq!(
            serde_json::to_string(&utc).expect("written"),
            "\"2026-10-09T09:00:00Z\""
        );
        let refused = serde_json::from_str::<Instant>("\"tomorrow\"").expect_err("refused");
        assert!(
            refused
                .to_string()
                .starts_with("`tomorrow` is not an RFC 3339 instant: "),
            "{refused}"
        );
        let refused = serde_json::from_str::<Instant>("12").expect_err("refused");
        assert!(
            refused.to_string().contains("an RFC 3339 instant"),
            "{refused}"
        );
        let beyond = Instant::from_unix_seconds(MAX_UNIX_SECONDS + 1);
        assert!(serde_json::to_string(&beyond).is_err());
        assert_eq!(beyond.to_string(), "10000-01-01T00:00:00Z");
        assert_eq!(
            Instant::from_unix_seconds(MIN_UNIX_SECONDS - 86_400 * (366 + 365)).to_string(),
            "-0001-01-01T00:00:00Z"
        );
    }

    #[test]
    fn unix_seconds_are_written_within_years_0001_to_9999() {
        assert_eq!(
            Instant::from_unix_seconds_capped(i64::MAX)
                .format()
                .as_deref(),
            Ok("9999-12-31T23:59:59Z")
        );
        assert_eq!(format_unix_seconds(0), "1970-01-01T00:00:00Z");
        assert_eq!(
            format_unix_seconds(MIN_UNIX_SECONDS),
            "0001-01-01T00:00:00Z"
        );
        assert_eq!(
            format_unix_seconds(MAX_UNIX_SECONDS),
            "9999-12-31T23:59:59Z"
        );
        assert_eq!(format_unix_seconds(i64::MAX), "9999-12-31T23:59:59Z");
        assert_eq!(format_unix_seconds(i64::MIN), "0001-01-01T00:00:00Z");
        assert_eq!(
            Instant::parse("9999-12-31T23:59:59Z").map(|i| i.unix_seconds()),
            Ok(MAX_UNIX_SECONDS)
        );
    }
}
