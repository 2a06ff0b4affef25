//! `POST /v1/events/{workflow}/{trigger}`: a run started by a signed
//! event of a configured event source (SPEC §2.4).

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use coordinator_api::problems;
use coordinator_engine::EventOrigin;

use super::request::{body, path_segments};
use super::runs::admitted;
use super::{ApiError, AppState};
use crate::{events, strict};

/// `POST /v1/events/{workflow}/{trigger}` (SPEC §2.4; docs/service.md
/// "Event starts"). No bearer token: the `registry-signature` header under
/// the trigger's event source key authenticates. Order: 413 for a body over
/// 64 KiB; 404 for a workflow or trigger the active revisions lack; 401 for
/// a missing, malformed, wrong or stale signature; 400 for a body that is
/// not a strict-JSON CloudEvent; then the admission's answers.
pub(crate) async fn event_start(
    State(s): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
    headers: HeaderMap,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let bytes = body(bytes)?;
    let (workflow, trigger) = path_segments(path)?;
    let Some(info) = s.engine.admission.trigger(&workflow, &trigger) else {
        return Err(
            if s.engine
                .admission
                .active_revisions()
                .contains_key(&workflow)
            {
                ApiError::of(&problems::TRIGGER_NOT_FOUND)
            } else {
                ApiError::of(&problems::WORKFLOW_NOT_FOUND)
            },
        );
    };
    let Some(source) = s.events.source(&info.source) else {
        // The runtime check refuses a trigger whose event source is not
        // configured, so this is not reached in a started service.
        tracing::error!(
            code = "deployment.refused",
            workflow,
            trigger,
            "a trigger's event source has no key"
        );
        return Err(ApiError::refused());
    };
    let origin = EventOrigin {
        name: info.source.clone(),
        source: source.to_owned(),
    };
    let header = headers
        .get(events::SIGNATURE_HEADER)
        .and_then(|v| v.to_str().ok());
    if let Err(e) = s
        .events
        .verify(&origin.name, header, &bytes, s.clock.now_unix())
    {
        tracing::info!(
            code = "authentication.refused",
            reason = e.detail(),
            "event signature refused"
        );
        return Err(ApiError::refused().detail(e.detail()));
    }
    let event: serde_json::Value = strict::from_slice(&bytes).map_err(ApiError::bad_request)?;
    events::check_event(&event).map_err(ApiError::bad_request)?;
    crate::ops::audit_available(&s.engine).await?;
    let result = s
        .engine
        .admission
        .admit_event(
            &origin,
            &workflow,
            &trigger,
            &event,
            crate::telemetry::inbound_trace_parent(&headers),
        )
        .await;
    let owner = origin.owner();
    let principal = format!("{}\u{0}{}", owner.iss, owner.sub);
    admitted(&s, result, principal, Some(trigger)).await
}
