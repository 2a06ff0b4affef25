//! The status mapping of SPEC §6 as pure functions of (status, body), so that
//! the table is testable without sockets. docs/adapters.md repeats it.

use coordinator_vm::Answer;
use serde_json::Value;

use super::Outcome;

/// Refusal code for 401 and 403 (SPEC §6).
pub const PRODUCT_FORBIDDEN: &str = "product-forbidden";
/// Refusal code for 404 (SPEC §6).
pub const PRODUCT_NOT_FOUND: &str = "product-not-found";
/// The BReg declared no-effect refusal's problem code (SPEC §6).
pub const DECLARED_REFUSAL: &str = "action.declared-refusal";
/// Code of a retryable answer: 408, 429 or 503 (`http-<status>`), or
/// refused before sending (`connection-refused`).
pub const CONNECTION_REFUSED: &str = "connection-refused";
/// Code of an uncertain answer: the request timed out after it may have been
/// sent.
pub const TRANSPORT_TIMEOUT: &str = "transport-timeout";
/// Code of an uncertain answer: the connection broke after the request may
/// have been sent (reset, closed before a response).
pub const TRANSPORT_RESET: &str = "transport-reset";
/// Code of an uncertain answer to a status outside the table (1xx, 3xx, or
/// a 5xx other than 500/502/503/504).
pub const UNEXPECTED_STATUS: &str = "unexpected-status";
/// `external.get/v1` only: a 3xx answer (redirects are refused, SPEC §6).
pub const REDIRECT_REFUSED: &str = "redirect-refused";
/// The token endpoint refused the client (4xx): nothing was sent.
pub const TOKEN_REFUSED: &str = "token-refused";
/// The token endpoint could not be reached or failed (5xx, timeout, bad
/// body): nothing was sent to the product.
pub const TOKEN_UNAVAILABLE: &str = "token-unavailable";
/// Receipt lookups: the product's code for "still unknown" (404).
pub const RECEIPT_UNRESOLVED: &str = "receipt.unresolved";
/// The product's code for an expired idempotency record (410).
pub const IDEMPOTENCY_EXPIRED: &str = "idempotency.expired";

/// The problem document's `code`, when the body is a JSON object with one.
pub fn problem_code(body: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(body).ok()?;
    value.get("code")?.as_str().map(str::to_owned)
}

/// Parses a 2xx body: JSON, or [`Outcome::InvalidResponse`]. An empty body is
/// `null` (the VM then refuses it against the output schema).
fn success(status: u16, body: &[u8]) -> Outcome {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Answer::Success { value: Value::Null }.into();
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(value) => Answer::Success { value }.into(),
        Err(_) => Outcome::InvalidResponse { status },
    }
}

/// Maps a product's answer to a dispatch (every operation except
/// `external.get/v1`), SPEC §6:
///
/// | status | outcome |
/// | --- | --- |
/// | 2xx | success with the JSON body (not JSON: invalid-response) |
/// | 401, 403 | refused `product-forbidden` |
/// | 404 | refused `product-not-found` |
/// | 409 `action.declared-refusal` (invoke-action) | declared refusal `{refusalCode}` |
/// | 409, 422, 410 with a `code` | refused with that code |
/// | 408, 429, 503 | retryable `http-<status>` |
/// | 500, 502, 504 | uncertain `http-<status>` |
/// | other 4xx (also 409/422/410 without a code) | invalid-command |
/// | anything else (1xx, 3xx, other 5xx) | uncertain `unexpected-status` |
pub fn dispatch_status(operation_id: &str, status: u16, body: &[u8]) -> Outcome {
    match status {
        200..=299 => success(status, body),
        401 | 403 => refused(PRODUCT_FORBIDDEN),
        404 => refused(PRODUCT_NOT_FOUND),
        408 | 429 | 503 => Answer::Retryable {
            code: format!("http-{status}"),
        }
        .into(),
        500 | 502 | 504 => Answer::Uncertain {
            code: format!("http-{status}"),
        }
        .into(),
        409 | 410 | 422 => match problem_code(body) {
            Some(code)
                if status == 409
                    && code == DECLARED_REFUSAL
                    && operation_id == "breg.invoke-action/v1" =>
            {
                declared_refusal(body)
            }
            Some(code) => refused(&code),
            None => Outcome::InvalidCommand {
                status: Some(status),
                code: None,
            },
        },
        400..=499 => Outcome::InvalidCommand {
            status: Some(status),
            code: problem_code(body),
        },
        _ => Answer::Uncertain {
            code: UNEXPECTED_STATUS.to_owned(),
        }
        .into(),
    }
}

/// Maps a product's answer to a receipt lookup (SPEC §6): 200 → success with
/// the original response; 404 → receipt unresolved (with or without the
/// `receipt.unresolved` code: a receipt route that does not know the key
/// has not resolved it); 410 → receipt expired; everything else as for a
/// dispatch (the VM holds the run on anything but the original response).
pub fn receipt_status(operation_id: &str, status: u16, body: &[u8]) -> Outcome {
    match status {
        200 => success(status, body),
        404 => Answer::ReceiptUnresolved.into(),
        410 => Answer::ReceiptExpired.into(),
        _ => dispatch_status(operation_id, status, body),
    }
}

/// Maps an `external.get/v1` answer: every status is a success `{status,
/// body}` (SPEC §5.1), except 3xx, refused `redirect-refused` because
/// redirects are never followed. The body is the JSON value when it parses,
/// `null` when empty, the text when it is UTF-8, else invalid-response.
pub fn external_status(status: u16, body: &[u8]) -> Outcome {
    if (300..=399).contains(&status) {
        return refused(REDIRECT_REFUSED);
    }
    let body = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else if let Ok(v) = serde_json::from_slice::<Value>(body) {
        v
    } else if let Ok(text) = std::str::from_utf8(body) {
        Value::String(text.to_owned())
    } else {
        return Outcome::InvalidResponse { status };
    };
    Answer::Success {
        value: serde_json::json!({ "status": status, "body": body }),
    }
    .into()
}

fn refused(code: &str) -> Outcome {
    Answer::Refused {
        code: code.to_owned(),
    }
    .into()
}

fn declared_refusal(body: &[u8]) -> Outcome {
    let refusal_code = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("refusalCode")?.as_str().map(str::to_owned));
    match refusal_code {
        Some(refusal_code) => Answer::DeclaredRefusal { refusal_code }.into(),
        // A declared refusal that does not say which is a refusal all the same.
        None => refused(DECLARED_REFUSAL),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const READ: &str = "breg.read-record/v1";
    const ACTION: &str = "breg.invoke-action/v1";

    fn answer(o: Outcome) -> Answer {
        match o {
            Outcome::Answer(a) => a,
            other => panic!("not an answer: {other:?}"),
        }
    }

    #[test]
    fn table() {
        assert_eq!(
            answer(dispatch_status(READ, 200, br#"{"a":1}"#)),
            Answer::Success {
                value: serde_json::json!({"a": 1})
            }
        );
        for s in [401, 403] {
            assert_eq!(
                answer(dispatch_status(READ, s, b"")),
                Answer::Refused {
                    code: PRODUCT_FORBIDDEN.into()
                }
            );
        }
        assert_eq!(
            answer(dispatch_status(READ, 404, b"")),
            Answer::Refused {
                code: PRODUCT_NOT_FOUND.into()
            }
        );
        for s in [409, 422] {
            assert_eq!(
                answer(dispatch_status(READ, s, br#"{"code":"x.y"}"#)),
                Answer::Refused { code: "x.y".into() }
            );
        }
        assert_eq!(
            answer(dispatch_status(
                ACTION,
                409,
                br#"{"code":"action.declared-refusal","refusalCode":"ineligible"}"#
            )),
            Answer::DeclaredRefusal {
                refusal_code: "ineligible".into()
            }
        );
        assert_eq!(
            answer(dispatch_status(
                READ,
                409,
                br#"{"code":"action.declared-refusal","refusalCode":"ineligible"}"#
            )),
            Answer::Refused {
                code: DECLARED_REFUSAL.into()
            }
        );
        for s in [408, 429, 503] {
            assert!(matches!(
                answer(dispatch_status(READ, s, b"")),
                Answer::Retryable { .. }
            ));
        }
        for s in [500, 502, 504, 501, 302, 101] {
            assert!(matches!(
                answer(dispatch_status(READ, s, b"")),
                Answer::Uncertain { .. }
            ));
        }
        for s in [400, 405, 413, 418] {
            assert!(matches!(
                dispatch_status(READ, s, b""),
                Outcome::InvalidCommand { .. }
            ));
        }
        assert!(matches!(
            dispatch_status(READ, 409, b"not json"),
            Outcome::InvalidCommand { .. }
        ));
        assert_eq!(
            dispatch_status(READ, 200, b"<html>"),
            Outcome::InvalidResponse { status: 200 }
        );
    }

    #[test]
    fn receipts() {
        let op = "messaging.submit-message/v1";
        assert!(matches!(
            answer(receipt_status(op, 200, br#"{"id":"1"}"#)),
            Answer::Success { .. }
        ));
        assert_eq!(
            answer(receipt_status(op, 404, br#"{"code":"receipt.unresolved"}"#)),
            Answer::ReceiptUnresolved
        );
        assert_eq!(
            answer(receipt_status(
                op,
                410,
                br#"{"code":"idempotency.expired"}"#
            )),
            Answer::ReceiptExpired
        );
        assert!(matches!(
            answer(receipt_status(op, 503, b"")),
            Answer::Retryable { .. }
        ));
    }

    #[test]
    fn external() {
        assert_eq!(
            answer(external_status(503, br#"{"x":1}"#)),
            Answer::Success {
                value: serde_json::json!({"status": 503, "body": {"x": 1}})
            }
        );
        assert_eq!(
            answer(external_status(200, b"plain")),
            Answer::Success {
                value: serde_json::json!({"status": 200, "body": "plain"})
            }
        );
        assert_eq!(
            answer(external_status(301, b"")),
            Answer::Refused {
                code: REDIRECT_REFUSED.into()
            }
        );
    }
}
