//! Reading a request: the bearer token and the principal it proves
//! ([`principal`]), the body ([`body`]) and the path's segments
//! ([`path_segments`]), each failure answered as an [`ApiError`].

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::Path;
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderMap, StatusCode};
use coordinator_api::problems;
use coordinator_engine::Principal;

use super::{ApiError, AppState};
use crate::auth;

pub(crate) async fn principal(s: &AppState, headers: &HeaderMap) -> Result<Principal, ApiError> {
    let token = bearer(headers).ok_or_else(ApiError::refused)?;
    s.verifier.verify(token).await.map_err(|e| match e {
        // The issuer's keys could not be fetched: an outage of ours, never
        // a refusal of the caller (seed 000 `service.unavailable`).
        auth::AuthError::Unavailable(reason) => {
            tracing::error!(code = "service.unavailable", reason = %reason, "token verifier unavailable");
            ApiError::of(&problems::SERVICE_UNAVAILABLE)
                .detail("try again after it recovers")
        }
        auth::AuthError::Refused(reason) => {
            tracing::info!(code = "authentication.refused", reason = %reason, "token refused");
            ApiError::refused()
        }
    })
}

pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    let v = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
        .filter(|t| !t.is_empty())
}

pub(crate) fn body(bytes: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    bytes.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::of(&problems::REQUEST_TOO_LARGE)
        } else {
            ApiError::bad_request("the body could not be read")
        }
    })
}

/// The path's segments, or 400 `request.invalid` when one does not decode
/// (a percent-encoding that is not UTF-8, `%ff`): axum's own answer to that
/// would be plain text.
pub(crate) fn path_segments<T>(path: Result<Path<T>, PathRejection>) -> Result<T, ApiError> {
    path.map(|Path(segments)| segments)
        .map_err(|e| ApiError::bad_request(e.body_text()))
}
