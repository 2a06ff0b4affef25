//! `POST /v1/runs/{run}/{action}`: the recovery actions of seed 000
//! (`cancel`, `retry-same`, `reconcile`), each audited with its reason.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use coordinator_api as api;
use coordinator_api::problems;
use coordinator_engine::{Action, ActionError};
use coordinator_runtime::audit::AuditRecord;

use super::request::{action_body, path_segments};
use super::response::{json, run_status};
use super::runs::visible_run;
use super::{ApiError, AppState};
use crate::ops;

pub(crate) async fn recover(
    State(s): State<AppState>,
    headers: HeaderMap,
    path: Result<Path<(String, String)>, PathRejection>,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let (run, action) = path_segments(path)?;
    let (name, act) = match action.as_str() {
        "cancel" => ("cancel", Action::Cancel),
        "retry-same" => ("retry-same", Action::RetrySame),
        "reconcile" => ("reconcile", Action::Reconcile),
        _ => return Err(ApiError::of(&problems::ROUTE_NOT_FOUND)),
    };
    let (who, recovery) =
        action_body(&s, &headers, bytes, |r: &api::Recovery| r.reason.as_str()).await?;
    let run = visible_run(&s, &who, &run, name).await?;
    ops::audit_available(&s.engine).await?;
    // A reconcile that found the receipt expired happened all the same: it
    // is audited, then answered 409 `receipt.expired`.
    let (after, expired) = match s.engine.operator.act(&run.id, act).await {
        Ok(after) => (Ok(after), false),
        Err(ActionError::ReceiptExpired(after)) => (Ok(*after), true),
        Err(e) => (Err(e), false),
    };
    match after {
        Ok(after) => {
            // The reason is free text an operator typed: it goes to the
            // audit journal as a keyed reference only, never to the log.
            tracing::info!(run = %after.id, action = name, "recovery action");
            let (id, state, principal, reason) = (
                after.id.clone(),
                after.status().as_str(),
                ops::principal_value(&who),
                recovery.reason,
            );
            ops::audited(&s.engine, move |k| {
                AuditRecord::new(&format!("run.{name}"), "accepted")
                    .reference(k, "run", &id)
                    .reference(k, "principal", &principal)
                    .reference(k, "reason", &reason)
                    .fact("state", state)
            })
            .await?;
            if expired {
                return Err(ApiError::of(&problems::RECEIPT_EXPIRED).detail(
                    "the product no longer holds the original receipt: this is not evidence the command was never sent; the run stays held",
                ));
            }
            Ok(json(StatusCode::OK, &run_status(&after)))
        }
        Err(ActionError::NotFound) => Err(ApiError::not_found()),
        Err(ActionError::ExecutionHeld) => {
            Err(
                ApiError::of(&problems::EXECUTION_HELD)
                    .detail("nothing is dispatched while the restore hold is in place: retry-same, and a cancel whose route sends a call, wait for release-restore-hold; reconcile is served"),
            )
        }
        Err(ActionError::BindingChanged { connection }) => Err(ApiError::of(&problems::BINDING_LIVE_CONFLICT)
        .detail(format!(
            "connection `{connection}` is bound differently than when the run was admitted; restore its settings and restart, or keep investigating with --recovery-only"
        ))),
        Err(ActionError::PayloadErased) => Err(ApiError::payload_erased()),
        Err(ActionError::Raced) => Err(ApiError::of(&problems::RECONCILE_RACED)
            .detail("the run changed between the read this action was decided on and its commit; nothing was applied: inspect it again")),
        // Answered above, after the audit.
        Err(ActionError::ReceiptExpired(_)) => Err(ApiError::of(&problems::RECEIPT_EXPIRED)),
        Err(ActionError::Store(e)) => Err(ApiError::store(&e)),
        Err(ActionError::Refused(r)) => {
            let kind = match (act, r.code) {
                (Action::Reconcile, coordinator_engine::RejectCode::NoReceipt) => {
                    &problems::RECONCILE_UNSUPPORTED
                }
                (Action::Reconcile, coordinator_engine::RejectCode::ReceiptExpired) => {
                    &problems::RECEIPT_EXPIRED
                }
                (Action::Reconcile, _) => &problems::RECONCILE_REFUSED,
                // (A cancel is never refused: one the VM does not take
                // answers the run unchanged.)
                (Action::RetrySame | Action::Cancel, _) => &problems::RETRY_REFUSED,
            };
            Err(ApiError::of(kind).detail(r.message))
        }
    }
}
