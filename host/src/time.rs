//! RFC 3339 instants for hosts (scenario clocks, admission times).

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// Parses an RFC 3339 instant; lowercase `t`/`z` and any offset are accepted.
/// Returns `None` for anything else.
pub fn parse_instant(text: &str) -> Option<OffsetDateTime> {
    let upper = text.to_ascii_uppercase();
    OffsetDateTime::parse(&upper, &Rfc3339).ok()
}

/// Formats an instant as RFC 3339 in UTC with a `Z` suffix.
pub fn format_instant(at: OffsetDateTime) -> String {
    at.to_offset(time::UtcOffset::UTC)
        .format(&Rfc3339)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_formats() {
        let t = parse_instant("2026-10-09t09:00:00z").expect("parses");
        assert_eq!(format_instant(t), "2026-10-09T09:00:00Z");
        let t = parse_instant("2026-10-09T11:00:00+02:00").expect("offset");
        assert_eq!(format_instant(t), "2026-10-09T09:00:00Z");
        assert!(parse_instant("yesterday").is_none());
    }
}
