//! Signed event starts (SPEC §2.4, docs/service.md "Event starts"): the
//! event sources' signing keys, the `registry-signature` header and the
//! CloudEvents-shaped body.
//!
//! The header is `t=<unix seconds>,v1=<hex>`: `v1` is HMAC-SHA256 under
//! the event source's `signingKeyRef` over `<t>.<raw body>` (the `t` digits
//! exactly as sent, a full stop, the body's bytes as received), lowercase or
//! uppercase hex of the 32-byte tag. It is accepted only when the tag
//! verifies (constant time, `hmac`'s `verify_slice`) and |now − t| ≤
//! [`MAX_CLOCK_SKEW_SECONDS`] on the engine's clock.

use std::collections::BTreeMap;

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The signature header's name.
pub const SIGNATURE_HEADER: &str = "registry-signature";
/// The largest accepted distance between the signature's `t` and the
/// engine's clock, seconds (SPEC §2.4).
pub const MAX_CLOCK_SKEW_SECONDS: i64 = 300;
/// The shortest accepted signing key, bytes (HMAC-SHA256's output size).
pub const MIN_SIGNING_KEY_BYTES: usize = 32;
/// The longest `t` accepted, in digits (any Unix time up to year 2286 has
/// at most 10; more is refused rather than parsed).
const MAX_T_DIGITS: usize = 12;

/// One event source: its `source` URI and signing key. `Debug` never shows
/// the key; the key's bytes are zeroed on drop.
struct SourceKey {
    source: String,
    key: Vec<u8>,
}

impl Drop for SourceKey {
    fn drop(&mut self) {
        for b in self.key.iter_mut() {
            *b = 0;
        }
    }
}

/// The runtime file's `eventSources`, each with its key read once at
/// startup. `Debug` shows names and URIs only.
#[derive(Default)]
pub struct EventSources {
    by_name: BTreeMap<String, SourceKey>,
}

impl std::fmt::Debug for EventSources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.by_name.iter().map(|(n, s)| (n, &s.source)))
            .finish()
    }
}

/// Why an event source's key was not accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WeakKey {
    /// The `eventSources` name.
    pub name: String,
    /// The key's length in bytes.
    pub found: usize,
}

impl std::fmt::Display for WeakKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "event source `{}`: the signing key holds {} bytes; at least {MIN_SIGNING_KEY_BYTES} are required",
            self.name, self.found
        )
    }
}

impl std::error::Error for WeakKey {}

impl EventSources {
    /// Adds the `eventSources` entry `name` with its `source` URI and its
    /// key's bytes (used as they are, like every key file).
    ///
    /// # Errors
    /// [`WeakKey`] when the key is shorter than [`MIN_SIGNING_KEY_BYTES`].
    pub fn add(&mut self, name: &str, source: &str, key: Vec<u8>) -> Result<(), WeakKey> {
        if key.len() < MIN_SIGNING_KEY_BYTES {
            return Err(WeakKey {
                name: name.to_owned(),
                found: key.len(),
            });
        }
        self.by_name.insert(
            name.to_owned(),
            SourceKey {
                source: source.to_owned(),
                key,
            },
        );
        Ok(())
    }

    /// The `source` URI of `name`.
    pub fn source(&self, name: &str) -> Option<&str> {
        self.by_name.get(name).map(|s| s.source.as_str())
    }

    /// Verifies `header` over `body` with `name`'s key at `now` (Unix
    /// seconds).
    ///
    /// # Errors
    /// See [`SignatureError`]; [`SignatureError::Mismatch`] too when `name`
    /// has no key.
    pub fn verify(
        &self,
        name: &str,
        header: Option<&str>,
        body: &[u8],
        now: i64,
    ) -> Result<(), SignatureError> {
        let header = header.ok_or(SignatureError::Missing)?;
        let (t, tags) = parse_header(header)?;
        let key = self.by_name.get(name).ok_or(SignatureError::Mismatch)?;
        let verified = tags.iter().any(|tag| {
            HmacSha256::new_from_slice(&key.key).is_ok_and(|mut mac| {
                mac.update(t.as_bytes());
                mac.update(b".");
                mac.update(body);
                mac.verify_slice(tag).is_ok()
            })
        });
        if !verified {
            return Err(SignatureError::Mismatch);
        }
        let at: i64 = t.parse().map_err(|_| SignatureError::Malformed)?;
        if now.abs_diff(at) > MAX_CLOCK_SKEW_SECONDS.unsigned_abs() {
            return Err(SignatureError::Stale);
        }
        Ok(())
    }
}

/// Why a signature was refused (each answers 401 `authentication.refused`
/// with its own detail).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignatureError {
    /// No `registry-signature` header (or not visible ASCII).
    Missing,
    /// The header is not `t=<digits>,v1=<64 hex>[,v1=<64 hex>...]`.
    Malformed,
    /// No `v1` tag verifies under the event source's key.
    Mismatch,
    /// The tag verifies but `t` is more than 300 s from the engine's clock.
    Stale,
}

impl SignatureError {
    /// The problem detail: what is wrong, never what was expected.
    pub fn detail(self) -> &'static str {
        match self {
            SignatureError::Missing => "the registry-signature header is missing",
            SignatureError::Malformed => {
                "the registry-signature header is not t=<unix seconds>,v1=<hex>"
            }
            SignatureError::Mismatch => {
                "the signature does not verify under the event source's key"
            }
            SignatureError::Stale => {
                "the signature's timestamp is more than 300 s from the service's clock"
            }
        }
    }
}

/// Splits `t=<digits>,v1=<hex>[,v1=<hex>...]` into `t` (as sent) and the
/// decoded tags. Exactly one `t`, at least one `v1`, nothing else; spaces
/// around members are allowed.
fn parse_header(header: &str) -> Result<(&str, Vec<Vec<u8>>), SignatureError> {
    let mut t = None;
    let mut tags = Vec::new();
    for member in header.split(',') {
        let (name, value) = member
            .trim()
            .split_once('=')
            .ok_or(SignatureError::Malformed)?;
        match name {
            "t" if t.is_none()
                && !value.is_empty()
                && value.len() <= MAX_T_DIGITS
                && value.bytes().all(|b| b.is_ascii_digit()) =>
            {
                t = Some(value);
            }
            "v1" if value.len() == 64 => {
                tags.push(hex::decode(value).map_err(|_| SignatureError::Malformed)?);
            }
            _ => return Err(SignatureError::Malformed),
        }
    }
    match t {
        Some(t) if !tags.is_empty() => Ok((t, tags)),
        _ => Err(SignatureError::Malformed),
    }
}

/// The header value a producer sends: `t=<t>,v1=<hex of HMAC-SHA256(key,
/// "<t>." + body)>` (lowercase hex). For producers' tests and ours.
pub fn sign(key: &[u8], t: i64, body: &[u8]) -> String {
    let mut mac = match HmacSha256::new_from_slice(key) {
        Ok(m) => m,
        // HMAC takes keys of any length; this arm is never taken.
        Err(_) => return String::new(),
    };
    mac.update(t.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// Checks the CloudEvents shape of an already strictly parsed body: a JSON
/// object whose `id`, `source` and `type` are non-empty strings, whose
/// `time`, when present, is an RFC 3339 instant, and whose `data`, when
/// present, is any JSON value. Other members (`specversion`, extensions)
/// are kept; trigger mappings may read them.
///
/// # Errors
/// A sentence naming the member at fault (never its value).
pub fn check_event(event: &Value) -> Result<(), String> {
    let object = event
        .as_object()
        .ok_or("the body must be a JSON object (a CloudEvent)")?;
    for member in ["id", "source", "type"] {
        match object.get(member) {
            Some(Value::String(s)) if !s.is_empty() => {}
            Some(_) => return Err(format!("`{member}` must be a non-empty string")),
            None => return Err(format!("`{member}` is required")),
        }
    }
    if let Some(time) = object.get("time") {
        let ok = time
            .as_str()
            .is_some_and(|t| coordinator_ports::clock::rfc3339_to_unix(t).is_some());
        if !ok {
            return Err("`time` must be an RFC 3339 instant".into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sources() -> EventSources {
        let mut s = EventSources::default();
        s.add("src", "https://src.example.org", vec![9; 32])
            .expect("key");
        s
    }

    #[test]
    fn a_signature_verifies_within_the_window_only() {
        let s = sources();
        let body = br#"{"id":"1"}"#;
        let h = sign(&[9; 32], 1_000, body);
        assert_eq!(s.verify("src", Some(&h), body, 1_000), Ok(()));
        assert_eq!(s.verify("src", Some(&h), body, 1_300), Ok(()));
        assert_eq!(s.verify("src", Some(&h), body, 700), Ok(()));
        assert_eq!(
            s.verify("src", Some(&h), body, 1_301),
            Err(SignatureError::Stale)
        );
        assert_eq!(
            s.verify("src", Some(&h), body, 699),
            Err(SignatureError::Stale)
        );
        assert_eq!(
            s.verify("src", Some(&h), b"{}", 1_000),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            s.verify("other", Some(&h), body, 1_000),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            s.verify("src", None, body, 1_000),
            Err(SignatureError::Missing)
        );
        let upper = h.to_uppercase().replace("T=", "t=").replace("V1=", "v1=");
        assert_eq!(s.verify("src", Some(&upper), body, 1_000), Ok(()));
        let two = format!("{h}, v1={}", "0".repeat(64));
        assert_eq!(s.verify("src", Some(&two), body, 1_000), Ok(()));
    }

    #[test]
    fn malformed_headers_are_refused() {
        let s = sources();
        let tag = "a".repeat(64);
        for h in [
            String::new(),
            "t=1".into(),
            format!("v1={tag}"),
            format!("t=,v1={tag}"),
            format!("t=-1,v1={tag}"),
            format!("t=1,t=1,v1={tag}"),
            format!("t=1,v1={}", "a".repeat(63)),
            format!("t=1,v1={}", "g".repeat(64)),
            format!("t=1,v0={tag}"),
            format!("t=1234567890123,v1={tag}"),
            format!("t=1;v1={tag}"),
        ] {
            assert_eq!(
                s.verify("src", Some(&h), b"", 1),
                Err(SignatureError::Malformed),
                "{h}"
            );
        }
    }

    #[test]
    fn short_keys_are_refused_and_keys_never_shown() {
        let mut s = EventSources::default();
        assert_eq!(
            s.add("src", "https://s", vec![1; 31]),
            Err(WeakKey {
                name: "src".into(),
                found: 31
            })
        );
        s.add(
            "src",
            "https://s",
            b"0123456789abcdef0123456789abcdef".to_vec(),
        )
        .expect("key");
        let shown = format!("{s:?}");
        assert!(shown.contains("https://s"), "{shown}");
        assert!(!shown.contains("0123456789abcdef"), "{shown}");
    }

    #[test]
    fn events_are_objects_with_id_source_type() {
        let ok = serde_json::json!({"id": "1", "source": "s", "type": "t", "time": "2026-03-02T09:00:00Z", "data": null});
        assert_eq!(check_event(&ok), Ok(()));
        for bad in [
            serde_json::json!([]),
            serde_json::json!({"source": "s", "type": "t"}),
            serde_json::json!({"id": "", "source": "s", "type": "t"}),
            serde_json::json!({"id": 1, "source": "s", "type": "t"}),
            serde_json::json!({"id": "1", "source": "s", "type": "t", "time": "yesterday"}),
        ] {
            assert!(check_event(&bad).is_err(), "{bad}");
        }
    }
}
