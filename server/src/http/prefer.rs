//! The `Prefer` request header (RFC 7240) as far as the API reads it: the
//! `wait` preference of `GET /v1/runs/{run}` ([`requested_wait`]).
//!
//! RFC 7240 §2: `Prefer = 1#preference`, `preference = token [ BWS "="
//! BWS word ] *( OWS ";" [ OWS parameter ] )`, `word = token /
//! quoted-string`. Several `Prefer` fields are one list; preference names
//! are case-insensitive; of a preference given twice only the first
//! counts; a preference the service does not understand, or cannot read,
//! is ignored rather than refused. The one refusal is a well-formed
//! `wait` over [`MAX_RUN_WAIT_SECONDS`] (docs/decisions.md "Waiting for a
//! run's end").

use axum::http::HeaderMap;
use coordinator_api::{problems, MAX_RUN_WAIT_SECONDS};

use super::ApiError;

/// The `Preference-Applied` response header (RFC 7240 §3): `wait=N` when
/// the service honoured the request's `wait`.
pub(crate) const PREFERENCE_APPLIED: &str = "preference-applied";

/// The `wait` preference of the request's `Prefer` fields, in seconds:
/// `Ok(None)` when there is none or it is not a whole number of seconds
/// (ignored, RFC 7240 §2); `Ok(Some(n))` for `0..=60`.
///
/// # Errors
/// 400 `request.wait-too-long` for a whole number over
/// [`MAX_RUN_WAIT_SECONDS`].
pub(crate) fn requested_wait(headers: &HeaderMap) -> Result<Option<u64>, ApiError> {
    let Some(value) = first_preference(headers, "wait") else {
        return Ok(None);
    };
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(None);
    }
    // Digits only: a value too large for u64 is over the bound too.
    match value.parse::<u64>() {
        Ok(seconds) if seconds <= MAX_RUN_WAIT_SECONDS => Ok(Some(seconds)),
        _ => Err(
            ApiError::of(&problems::REQUEST_WAIT_TOO_LONG).detail(format!(
                "Prefer: wait={value} asks for more than {MAX_RUN_WAIT_SECONDS} seconds"
            )),
        ),
    }
}

/// The value of the first preference named `name` (case-insensitively)
/// across every `Prefer` field, unquoted; `""` for a preference without
/// a value. Fields that are not visible ASCII are skipped.
fn first_preference(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all("prefer")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(split_outside_quotes::<b','>)
        .filter_map(|element| {
            let preference = split_outside_quotes::<b';'>(element).next()?;
            let (token, value) = match preference.split_once('=') {
                Some((t, v)) => (t.trim(), Some(v.trim())),
                None => (preference.trim(), None),
            };
            is_token(token).then_some((token, value))
        })
        .find(|(token, _)| token.eq_ignore_ascii_case(name))
        .map(|(_, value)| value.map(unquote).unwrap_or_default())
}

/// `text` split at each `SEP` that is not inside a quoted-string.
fn split_outside_quotes<const SEP: u8>(text: &str) -> impl Iterator<Item = &str> {
    let mut parts = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, b) in text.bytes().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            _ if b == SEP && !quoted => {
                parts.push(text.get(start..i).unwrap_or(""));
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(text.get(start..).unwrap_or(""));
    parts.into_iter().filter(|p| !p.trim().is_empty())
}

/// RFC 9110's `token`: one or more `tchar`s.
fn is_token(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// A `word`'s value: a quoted-string without its quotes and escapes, a
/// token as it is.
fn unquote(word: &str) -> String {
    let Some(inner) = word
        .strip_prefix('"')
        .and_then(|rest| rest.strip_suffix('"'))
    else {
        return word.to_owned();
    };
    let mut value = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => value.extend(chars.next()),
            c => value.push(c),
        }
    }
    value
}

#[cfg(test)]
mod tests {
    use axum::http::{HeaderMap, HeaderValue};

    use super::requested_wait;

    fn wait_of(fields: &[&str]) -> Result<Option<u64>, String> {
        let mut headers = HeaderMap::new();
        for field in fields {
            headers.append("prefer", HeaderValue::from_str(field).expect("value"));
        }
        requested_wait(&headers).map_err(|e| e.code().to_owned())
    }

    #[test]
    fn the_wait_preference_is_read_among_others_in_any_case_quoted_or_not() {
        assert_eq!(wait_of(&[]), Ok(None));
        assert_eq!(wait_of(&["wait=5"]), Ok(Some(5)));
        assert_eq!(wait_of(&["WAIT = 5"]), Ok(Some(5)));
        assert_eq!(wait_of(&["wait=\"7\""]), Ok(Some(7)));
        assert_eq!(wait_of(&["wait=0"]), Ok(Some(0)));
        assert_eq!(wait_of(&["wait=60"]), Ok(Some(60)));
        assert_eq!(
            wait_of(&["respond-async, handling=lenient; x=\"a,b\", Wait=3"]),
            Ok(Some(3))
        );
        assert_eq!(wait_of(&["return=minimal", "wait=9"]), Ok(Some(9)));
        assert_eq!(wait_of(&["wait=4; foo=bar"]), Ok(Some(4)));
        // Only the first of a repeated preference counts (RFC 7240 §2).
        assert_eq!(wait_of(&["wait=2", "wait=90"]), Ok(Some(2)));
        // A quoted comma or `wait=` is not a preference of its own.
        assert_eq!(wait_of(&["x=\"a, wait=5\""]), Ok(None));
        assert_eq!(wait_of(&["x=\"a\\\", wait=5\""]), Ok(None));
    }

    #[test]
    fn a_wait_that_is_not_whole_seconds_is_ignored_and_one_over_the_bound_refused() {
        for ignored in [
            "wait",
            "wait=",
            "wait=-1",
            "wait=1.5",
            "wait=abc",
            "wait=\"\"",
        ] {
            assert_eq!(wait_of(&[ignored]), Ok(None), "{ignored}");
        }
        // A malformed element is skipped; the rest is still read.
        assert_eq!(wait_of(&["w@it=3, wait=8"]), Ok(Some(8)));
        for refused in ["wait=61", "wait=3600", "wait=99999999999999999999999"] {
            assert_eq!(
                wait_of(&[refused]),
                Err("request.wait-too-long".to_owned()),
                "{refused}"
            );
        }
    }
}
