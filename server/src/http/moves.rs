//! `POST /v1/runs/{run}/move`: a waiting run moved to the revision a move
//! certificate names (docs/operations.md "Moving waiting runs"), audited
//! as `run.move` with its reason. Operators only (action `move` with
//! `operator: true`); the body may be up to
//! [`coordinator_api::MAX_MOVE_BODY_BYTES`].

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use coordinator_api as api;
use coordinator_api::problems;
use coordinator_engine::{MoveCertificate, MoveError, MoveRefused};
use coordinator_runtime::audit::AuditRecord;

use super::request::{action_body, operator_granted, path_segments};
use super::response::{json, run_status};
use super::runs::visible_run;
use super::{ApiError, AppState};
use crate::ops;

pub(crate) async fn move_run(
    State(s): State<AppState>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let run = path_segments(path)?;
    let (who, request) =
        action_body(&s, &headers, bytes, |r: &api::MoveRun| r.reason.as_str()).await?;
    operator_granted(&s, &who, "move")?;
    let run = visible_run(&s, &who, &run, "move").await?;
    let certificate = serde_json::to_vec(&request.certificate)
        .map_err(|e| e.to_string())
        .and_then(|bytes| MoveCertificate::from_json(&bytes).map_err(|e| e.to_string()))
        .map_err(|e| ApiError::of(&problems::MOVE_CERTIFICATE_INVALID).detail(e))?;
    ops::audit_available(&s.engine).await?;
    let moved = s
        .engine
        .operator
        .move_run(&run.id, &certificate)
        .await
        .map_err(refusal)?;
    tracing::info!(run = %moved.run.id, "run moved");
    let (id, principal, reason, record) = (
        moved.run.id.clone(),
        ops::principal_value(&who),
        request.reason,
        moved.record.clone(),
    );
    ops::audited(&s.engine, move |k| {
        AuditRecord::new("run.move", "accepted")
            .reference(k, "run", &id)
            .reference(k, "principal", &principal)
            .reference(k, "reason", &reason)
            .fact("from-revision", record.from_revision)
            .fact("to-revision", record.to_revision)
            .fact("from-step", record.from_step)
            .fact("to-step", record.to_step)
            .fact("certificate", record.certificate)
    })
    .await?;
    Ok(json(StatusCode::OK, &run_status(&moved.run)))
}

/// The problem a refused move is answered with.
fn refusal(e: MoveError) -> ApiError {
    match e {
        MoveError::NotFound => ApiError::not_found(),
        MoveError::CertificateInvalid(m) => {
            ApiError::of(&problems::MOVE_CERTIFICATE_INVALID).detail(m)
        }
        MoveError::TargetNotActive { active } => ApiError::of(&problems::MOVE_TARGET_NOT_ACTIVE)
            .detail(match active {
                Some(a) => format!("this service's active revision of the workflow is {a}"),
                None => "this service serves no revision of the certificate's workflow".to_owned(),
            }),
        MoveError::RevisionDiffers { revision } => ApiError::of(&problems::MOVE_REVISION_DIFFERS)
            .detail(format!("the run is on revision {revision}")),
        MoveError::NotWaiting(refused) => {
            let kind = match refused {
                MoveRefused::Ended { .. } => &problems::MOVE_RUN_ENDED,
                MoveRefused::Held { .. } => &problems::MOVE_RUN_HELD,
                _ => &problems::MOVE_RUN_NOT_WAITING,
            };
            ApiError::of(kind).detail(refused.to_string())
        }
        MoveError::WaitRefused { step } => ApiError::of(&problems::MOVE_WAIT_REFUSED).detail(
            format!("the certificate does not find wait `{step}` movable (see its findings)"),
        ),
        MoveError::ExecutionHeld => ApiError::of(&problems::EXECUTION_HELD)
            .detail("no run is moved while the restore hold is in place"),
        MoveError::RecoveryOnly => ApiError::of(&problems::EXECUTION_HELD)
            .detail("this instance runs with --recovery-only: it moves no run; use the ordinary service"),
        MoveError::BindingChanged { connection } => ApiError::of(&problems::BINDING_LIVE_CONFLICT)
            .detail(format!(
                "connection `{connection}` is bound differently than when the run was admitted; restore its settings and restart"
            )),
        MoveError::Raced => ApiError::of(&problems::MOVE_RACED).detail(
            "the run changed between the read the move was decided on and its commit; nothing was moved",
        ),
        MoveError::Store(e) => ApiError::store(&e),
    }
}
