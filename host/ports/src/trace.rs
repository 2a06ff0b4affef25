//! A run's trace context, as the run store keeps it: the W3C Trace Context
//! `traceparent` of the span every span of the run descends from (its
//! admission span), so a run lives in one trace across processes and
//! restarts (docs/operations.md "Traces"). Only identifiers: a trace id, a
//! span id and the sampled flag; never anything the run carries.

use std::fmt;

/// A W3C `traceparent` (version `00`): 16 bytes of trace id, 8 bytes of
/// parent span id and the trace flags. Its text form is
/// `00-<32 hex>-<16 hex>-<2 hex>`, lowercase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TraceParent {
    /// The trace id; never all zeros.
    pub trace_id: [u8; 16],
    /// The parent span id; never all zeros.
    pub span_id: [u8; 8],
    /// The trace flags (bit 0: sampled).
    pub flags: u8,
}

impl TraceParent {
    /// Reads a `traceparent` header value (W3C Trace Context, level 1):
    /// version `00` exactly as four dash-separated lowercase-hex fields,
    /// a later version by its first four fields; `None` for anything
    /// else, an all-zero trace or span id, or version `ff` (the
    /// recommendation: an unreadable header starts a new trace).
    pub fn parse(text: &str) -> Option<TraceParent> {
        let text = text.trim();
        let mut parts = text.split('-');
        let version = parts.next()?;
        let trace = parts.next()?;
        let span = parts.next()?;
        let flags = parts.next()?;
        let more = parts.next();
        let lower_hex = |s: &str, n: usize| {
            s.len() == n
                && s.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        if !lower_hex(version, 2) || version == "ff" || (version == "00" && more.is_some()) {
            return None;
        }
        if !lower_hex(trace, 32) || !lower_hex(span, 16) || !lower_hex(flags, 2) {
            return None;
        }
        let mut parent = TraceParent {
            trace_id: [0; 16],
            span_id: [0; 8],
            flags: 0,
        };
        hex::decode_to_slice(trace, &mut parent.trace_id).ok()?;
        hex::decode_to_slice(span, &mut parent.span_id).ok()?;
        let mut f = [0u8; 1];
        hex::decode_to_slice(flags, &mut f).ok()?;
        parent.flags = f[0];
        let valid = parent.trace_id != [0; 16] && parent.span_id != [0; 8];
        valid.then_some(parent)
    }

    /// Whether the sampled flag (bit 0) is set.
    pub fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }
}

impl fmt::Display for TraceParent {
    /// The `traceparent` text, version `00`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "00-{}-{}-{:02x}",
            hex::encode(self.trace_id),
            hex::encode(self.span_id),
            self.flags
        )
    }
}

impl serde::Serialize for TraceParent {
    /// As its `traceparent` text.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for TraceParent {
    /// From its `traceparent` text ([`TraceParent::parse`]).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        TraceParent::parse(&text).ok_or_else(|| serde::de::Error::custom("not a W3C traceparent"))
    }
}

#[cfg(test)]
mod tests {
    use super::TraceParent;

    #[test]
    fn a_traceparent_reads_back_as_written() {
        let text = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let parsed = TraceParent::parse(text).expect("valid");
        assert!(parsed.sampled());
        assert_eq!(parsed.to_string(), text);
        assert_eq!(
            parsed.span_id,
            [0, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]
        );
    }

    #[test]
    fn malformed_or_zero_ids_are_refused() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad:?}");
        }
        // A later version keeps its first four fields.
        assert!(
            TraceParent::parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-what")
                .is_some()
        );
    }
}
