//! `GET /v1/openapi.json`: the API's OpenAPI document as this process
//! serves it (`coordinator_api::openapi::served_document`), for any
//! authenticated caller: the start's body is one variant per active
//! workflow the caller's policy grants `start`, with that revision's input
//! schema (docs/service.md "The document as served").

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use coordinator_api::openapi::{served_document, ServedWorkflow};

use super::request::principal;
use super::response::json;
use super::{ApiError, AppState};
use crate::auth::Grant;

/// The served document (200), or the caller's refusal (401).
pub(crate) async fn openapi_document(
    State(s): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let who = principal(&s, &headers).await?;
    let active = s.engine.admission.active_input_schemas();
    let workflows: Vec<ServedWorkflow<'_>> = active
        .iter()
        .filter(|(workflow, _, _)| {
            matches!(
                s.verifier.grant(&who, "start", Some(workflow)),
                Grant::Allowed { .. }
            )
        })
        .map(|(workflow, revision, input)| ServedWorkflow {
            workflow,
            revision,
            input,
        })
        .collect();
    Ok(json(StatusCode::OK, &served_document(&workflows)))
}
