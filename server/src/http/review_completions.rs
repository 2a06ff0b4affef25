//! `POST /v1/review-completions`: Casework's word that a review request
//! is done, authenticated by a (recipient binding, bearer token) pair of
//! the configured [`Completions`], which brings the waiting run forward.
//! A `--recovery-only` instance refuses it (409 `event.recovery-only`)
//! and brings nothing forward.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use coordinator_api as api;
use coordinator_api::problems;
use subtle::{Choice, ConstantTimeEq};

use super::request::{bearer, body};
use super::response::json;
use super::{ApiError, AppState};
use crate::strict;

/// The header Casework sends its recipient binding in (seed 000).
pub const RECIPIENT_BINDING_HEADER: &str = "registry-recipient-binding";

/// The review-completion credentials: one (recipient binding, bearer
/// token) pair per Casework connection with a `completion` block.
#[derive(Clone, Default)]
pub struct Completions {
    pairs: Vec<(String, Vec<u8>)>,
}

impl std::fmt::Debug for Completions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Completions")
            .field("bindings", &self.pairs.len())
            .finish()
    }
}

impl Completions {
    /// Adds a connection's binding and its token's bytes.
    pub fn add(&mut self, binding: &str, token: Vec<u8>) {
        self.pairs.push((binding.to_owned(), token));
    }

    /// Whether `(binding, token)` is one of the pairs. Every pair is
    /// compared, each binding and token in constant time (`subtle`), so the
    /// time taken does not tell which pair, or how much of one, matched
    /// (only lengths may show).
    fn accepts(&self, binding: &str, token: &[u8]) -> bool {
        let mut matched = Choice::from(0);
        for (b, t) in &self.pairs {
            matched |= b.as_bytes().ct_eq(binding.as_bytes()) & t.as_slice().ct_eq(token);
        }
        matched.into()
    }
}

pub(crate) async fn review_completion(
    State(s): State<AppState>,
    headers: HeaderMap,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let token = bearer(&headers).ok_or_else(ApiError::refused)?;
    let binding = headers
        .get(RECIPIENT_BINDING_HEADER)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(ApiError::refused)?;
    if !s.completions.accepts(binding, token.as_bytes()) {
        return Err(ApiError::refused());
    }
    // A `--recovery-only` instance takes no events (seed 000): refused
    // once the sender is authenticated, before anything is changed.
    if s.engine.health.recovery_only() {
        return Err(ApiError::of(&problems::EVENT_RECOVERY_ONLY));
    }
    let bytes = body(bytes)?;
    let event: api::ReviewCompletion = strict::from_slice(&bytes).map_err(ApiError::bad_request)?;
    let moved = s
        .engine
        .operator
        .bring_forward(&event.review_request_id)
        .await
        .map_err(|e| ApiError::store(&e))?;
    tracing::info!(moved, "review completion received");
    Ok(json(StatusCode::ACCEPTED, &serde_json::json!({})))
}

#[cfg(test)]
mod tests {
    use super::Completions;

    /// The limit the document states is the one startup enforces.
    #[test]
    fn the_documented_token_limit_is_the_runtime_checks() {
        assert_eq!(
            coordinator_api::MAX_COMPLETION_TOKEN_BYTES,
            coordinator_runtime::secrets::MAX_COMPLETION_TOKEN_BYTES
        );
    }

    #[test]
    fn completions_accept_only_a_configured_pair() {
        let mut c = Completions::default();
        c.add("casework-a", b"token-a".to_vec());
        c.add("casework-b", b"token-b".to_vec());
        assert!(c.accepts("casework-a", b"token-a"));
        assert!(c.accepts("casework-b", b"token-b"));
        // Another connection's token, a prefix, a longer token, another
        // binding: all refused.
        assert!(!c.accepts("casework-a", b"token-b"));
        assert!(!c.accepts("casework-a", b"token-"));
        assert!(!c.accepts("casework-a", b"token-aa"));
        assert!(!c.accepts("casework-c", b"token-a"));
        assert!(!c.accepts("", b""));
        assert!(!Completions::default().accepts("casework-a", b"token-a"));
    }
}
