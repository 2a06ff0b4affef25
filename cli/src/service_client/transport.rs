//! One request to the service and its answer, read whole: the HTTP client
//! ([`http_client`]), the request ([`Method`], [`Body`]) and [`send`], the
//! one place the CLI and the console talk to the service.

use std::time::Duration;

use coordinator_api as api;
use serde::Serialize;

/// Timeout of one request.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The method of a request to the service, with its body.
pub(crate) enum Method {
    Get,
    Post(Body),
    /// A start: `POST` of the body with its `Idempotency-Key`.
    PostKeyed(Body, String),
    /// `GET` with `Prefer: wait=N` (RFC 7240): the service answers when
    /// the run ends or after N seconds, so the request's timeout is N
    /// seconds longer than [`REQUEST_TIMEOUT`].
    GetWaiting(u64),
}

/// A request body: always one of the API's request types.
#[derive(Serialize)]
#[serde(untagged)]
pub(crate) enum Body {
    Recovery(api::Recovery),
    Hold(api::HoldReason),
    Execution(api::ExecutionRecovery),
    Admission(api::AdmissionRecovery),
    Retention(api::Retention),
    Move(api::MoveRun),
    Export(api::ExportRun),
    Start(api::StartRun),
}

/// The HTTP client of every request to the service: no redirects
/// followed, [`REQUEST_TIMEOUT`] per request.
pub(crate) fn http_client() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(REQUEST_TIMEOUT)
        .build()
}

/// The service's answer to one request, read whole.
pub(crate) struct RawAnswer {
    /// The HTTP status.
    pub status: u16,
    /// The answer is `application/problem+json`.
    pub problem: bool,
    /// The body.
    pub text: String,
}

/// Why a request got no answer.
pub(crate) enum SendFailure {
    /// The request body could not be encoded.
    Encode(serde_json::Error),
    /// The service could not be reached, did not answer in time, or its
    /// answer (with `status`) could not be read; `title` says which,
    /// `chain` is the error and its sources.
    Unreachable {
        status: Option<u16>,
        title: String,
        chain: String,
    },
}

/// Sends one request to `url` with the bearer `token` (the one place the
/// CLI and the console talk to the service).
pub(crate) async fn send(
    client: &reqwest::Client,
    url: &str,
    token: &str,
    method: &Method,
    query: &[(&'static str, String)],
) -> Result<RawAnswer, SendFailure> {
    let mut request = match method {
        Method::Get => client.get(url),
        Method::Post(body) => client
            .post(url)
            .header("content-type", "application/json")
            .body(serde_json::to_string(body).map_err(SendFailure::Encode)?),
        Method::PostKeyed(body, key) => client
            .post(url)
            .header("content-type", "application/json")
            .header("idempotency-key", key)
            .body(serde_json::to_string(body).map_err(SendFailure::Encode)?),
        Method::GetWaiting(seconds) => client
            .get(url)
            .header("prefer", format!("wait={seconds}"))
            .timeout(REQUEST_TIMEOUT + Duration::from_secs(*seconds)),
    };
    if !query.is_empty() {
        request = request.query(query);
    }
    let response =
        request
            .bearer_auth(token)
            .send()
            .await
            .map_err(|e| SendFailure::Unreachable {
                status: None,
                title: if e.is_timeout() {
                    "the service did not answer in time".to_owned()
                } else {
                    "the service cannot be reached".to_owned()
                },
                chain: error_chain(&e),
            })?;
    let status = response.status().as_u16();
    let problem = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/problem+json"));
    let text = response
        .text()
        .await
        .map_err(|e| SendFailure::Unreachable {
            status: Some(status),
            title: "the answer could not be read".into(),
            chain: error_chain(&e),
        })?;
    Ok(RawAnswer {
        status,
        problem,
        text,
    })
}

/// The error and its sources, `: `-separated.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn request_bodies_are_the_api_types() {
        let body = |b: Body| serde_json::to_value(b).unwrap();
        assert_eq!(
            body(Body::Recovery(api::Recovery {
                reason: "t-1".into()
            })),
            json!({"reason": "t-1"})
        );
        assert_eq!(
            body(Body::Execution(api::ExecutionRecovery {
                recovery_reference: "i-1".into(),
                execution_history_complete: true,
                prior_deployment_fenced: true,
            })),
            json!({"recoveryReference": "i-1", "executionHistoryComplete": true, "priorDeploymentFenced": true})
        );
        assert_eq!(
            body(Body::Retention(api::Retention {
                before: "2026-07-01T00:00:00Z".into(),
                limit: 100,
            })),
            json!({"before": "2026-07-01T00:00:00Z", "limit": 100})
        );
    }
}
