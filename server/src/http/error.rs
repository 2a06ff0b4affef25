//! [`ApiError`]: every refusal the API answers, as an RFC 9457 problem
//! document made from a type of the problem registry, with the bearer
//! challenge RFC 6750 asks of a 401 or 403.

use axum::http::header::{HeaderValue, CONTENT_TYPE, WWW_AUTHENTICATE};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use coordinator_api as api;
use coordinator_api::problems;
use coordinator_ports::StoreError;

/// An error answer: an RFC 9457 problem document, only ever made from a
/// type of the problem registry ([`api::problems`]), so every code the
/// service answers is in the registry with its status and title.
#[derive(Debug)]
pub struct ApiError(api::Problem);

impl ApiError {
    pub(crate) fn of(kind: &api::problems::ProblemType) -> Self {
        ApiError(kind.problem(None))
    }
    /// The problem's code (unit tests read it).
    #[cfg(test)]
    pub(crate) fn code(&self) -> &str {
        &self.0.code
    }

    pub(crate) fn detail(mut self, detail: impl Into<String>) -> Self {
        self.0.detail = Some(detail.into());
        self
    }
    pub(crate) fn refused() -> Self {
        Self::of(&problems::AUTHENTICATION_REFUSED)
    }
    /// 403: the caller's policy (by `client_id`) lacks `action`, or (for
    /// the deployment-wide actions) is not `operator: true`.
    pub(crate) fn forbidden(action: &str) -> Self {
        Self::of(&problems::AUTHORIZATION_REFUSED)
        .detail(format!(
            "the caller's policy does not grant `{action}` here: its `actions` must list `{action}` and its `workflows`, when set, the run's workflow (deployment.authentication.policies)"
        ))
    }
    pub(crate) fn not_found() -> Self {
        Self::of(&problems::RUN_NOT_FOUND)
    }
    pub(crate) fn bad_request(detail: impl Into<String>) -> Self {
        Self::of(&problems::REQUEST_INVALID).detail(detail)
    }
    /// 409 `run.payload-erased` (seed 000).
    pub(crate) fn payload_erased() -> Self {
        Self::of(&problems::RUN_PAYLOAD_ERASED).detail("it can no longer be retried or reconciled")
    }

    /// 503 `service.unavailable` before the store is open and checked.
    pub(crate) fn starting() -> Self {
        Self::of(&problems::SERVICE_UNAVAILABLE).detail(
            "the service is waiting for the database and has not passed its deployment checks; try again once /ready answers 200",
        )
    }

    pub(crate) fn store(e: &StoreError) -> Self {
        match e {
            StoreError::BadCursor => {
                Self::bad_request("the cursor was not written by this service")
            }
            StoreError::NotFound => Self::not_found(),
            StoreError::Refused {
                code: "run.payload-erased",
                ..
            } => Self::payload_erased(),
            StoreError::LeaseIncompatible { .. } => Self::of(&problems::RESTORE_LEASE_INCOMPATIBLE)
                .detail("this instance started before the restore hold was placed: restart it"),
            // A value this process cannot open (a state key version its
            // runtime file lacks, or a row that does not open under its
            // binding) is a deployment fault, not an outage: seed 000
            // `deployment.refused`, never a 503.
            StoreError::Refused { code, message } => {
                tracing::error!(code = *code, error = %message, "store refused");
                Self::of(&problems::DEPLOYMENT_REFUSED)
                .detail(format!(
                    "{code}: run `coordinatorctl --runtime-config FILE deployment-status` with this service's runtime file"
                ))
            }
            other => {
                tracing::error!(code = "store-unavailable", error = %other, "store error");
                Self::of(&problems::SERVICE_UNAVAILABLE)
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.0.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self.0).unwrap_or_default();
        let mut response = (
            status,
            [(
                CONTENT_TYPE,
                HeaderValue::from_static("application/problem+json"),
            )],
            body,
        )
            .into_response();
        // RFC 6750 §3: a bearer-token refusal says so.
        let challenge = match status {
            StatusCode::UNAUTHORIZED => Some(r#"Bearer error="invalid_token""#),
            StatusCode::FORBIDDEN => Some(r#"Bearer error="insufficient_scope""#),
            _ => None,
        };
        if let Some(c) = challenge {
            response
                .headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static(c));
        }
        response
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        ApiError::store(&e)
    }
}

#[cfg(test)]
mod tests {
    use super::ApiError;
    use coordinator_ports::StoreError;

    /// seed 000: a custody or tampering refusal while serving is 409
    /// `deployment.refused`, never 503; only an outage is 503.
    #[test]
    fn store_refusals_are_deployment_refused_and_outages_unavailable() {
        let refused = ApiError::store(&StoreError::Refused {
            code: "state-key-custody",
            message: "state key version 2 is not configured".into(),
        });
        assert_eq!(
            (refused.0.status, refused.0.code.as_str()),
            (409, "deployment.refused")
        );
        assert!(refused
            .0
            .detail
            .as_deref()
            .is_some_and(|d| d.starts_with("state-key-custody")));
        let outage = ApiError::store(&StoreError::Unavailable("down".into()));
        assert_eq!(
            (outage.0.status, outage.0.code.as_str()),
            (503, "service.unavailable")
        );
    }
}
