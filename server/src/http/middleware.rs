//! The middleware of the API router: a repeated single-valued header is
//! 400 ([`single_valued_headers`]), a `POST` body that is not JSON is 415
//! ([`json_bodies_only`]), and every answer carries
//! `Cache-Control: no-store` ([`no_store`]).

use axum::http::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use coordinator_api::problems;

use super::{ApiError, RECIPIENT_BINDING_HEADER};
use crate::events;

/// The request headers the API reads one value of: a request that repeats
/// one is 400 `request.invalid` naming it, rather than having one of the
/// values silently win.
const SINGLE_VALUED_HEADERS: [&str; 5] = [
    "authorization",
    "content-type",
    "idempotency-key",
    events::SIGNATURE_HEADER,
    RECIPIENT_BINDING_HEADER,
];

/// Refuses a request that repeats one of [`SINGLE_VALUED_HEADERS`].
pub(crate) async fn single_valued_headers(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if let Some(name) = SINGLE_VALUED_HEADERS
        .iter()
        .find(|name| request.headers().get_all(**name).iter().nth(1).is_some())
    {
        return ApiError::bad_request(format!("the `{name}` header is repeated; send it once"))
            .into_response();
    }
    next.run(request).await
}

/// Every `POST` of the API carries a JSON body: one whose `Content-Type` is
/// not `application/json` or `application/<anything>+json` (parameters
/// such as `charset` allowed) is 415 `request.unsupported-media-type`
/// before it is read.
pub(crate) async fn json_bodies_only(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if request.method() == axum::http::Method::POST && !json_content_type(request.headers()) {
        return ApiError::of(&problems::REQUEST_UNSUPPORTED_MEDIA_TYPE)
            .detail("send the body with Content-Type: application/json")
            .into_response();
    }
    next.run(request).await
}

/// Whether `Content-Type` names JSON (`application/json`,
/// `application/*+json`), case-insensitively, parameters ignored.
fn json_content_type(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

pub(crate) async fn no_store(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
