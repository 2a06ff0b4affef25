//! Reading a request: the bearer token and the principal it proves
//! ([`principal`]), the body ([`body`]) and the path's segments
//! ([`path_segments`]), each failure answered as an [`ApiError`]; the
//! caller and body of an audited run action ([`action_body`]) and the
//! operator's grant of it ([`operator_granted`]).

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::Path;
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderMap, StatusCode};
use coordinator_api::problems;
use coordinator_engine::Principal;

use super::{ApiError, AppState};
use crate::auth::{self, Grant};

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

/// The caller and the body of an audited action on a run (a recovery, a
/// move, an export), checked in the order every such route checks them:
/// the bearer token ([`principal`]: 401, or 503 while the issuer's keys
/// cannot be fetched), the body ([`body`]: 413 over the route's limit) read
/// strictly as `T` (400 `request.invalid`), and its `reason` (`reason_of`)
/// a keyed reference (400, `ops::reference`).
pub(crate) async fn action_body<T: serde::de::DeserializeOwned>(
    s: &AppState,
    headers: &HeaderMap,
    bytes: Result<Bytes, BytesRejection>,
    reason_of: impl Fn(&T) -> &str,
) -> Result<(Principal, T), ApiError> {
    let who = principal(s, headers).await?;
    let bytes = body(bytes)?;
    let request: T = crate::strict::from_slice(&bytes).map_err(ApiError::bad_request)?;
    crate::ops::reference("reason", reason_of(&request))?;
    Ok((who, request))
}

/// Refuses (403 `authorization.refused`, naming `action`) a caller whose
/// policy does not grant `action` as an operator's action (`operator:
/// true`).
pub(crate) fn operator_granted(
    s: &AppState,
    who: &Principal,
    action: &str,
) -> Result<(), ApiError> {
    match s.verifier.grant(who, action, None) {
        Grant::Allowed { operator: true } => Ok(()),
        _ => Err(ApiError::forbidden(action)),
    }
}
