//! `POST /v1/runs/{run}/export`: an ended run written as one scenario
//! case that passes on its own revision (docs/scenarios.md "Cases
//! exported from runs"), its redactions applied here, so the real values
//! they name never leave the service. Operators only (action `export` with
//! `operator: true`: a run's payloads are personal data); one `run.export`
//! audit record per case answered, with the pointers redacted.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use coordinator_api as api;
use coordinator_api::problems;
use coordinator_ports::store::{RunRecord, ANSWERS_KEPT};
use coordinator_runtime::audit::AuditRecord;
use coordinator_scenario::export::{
    export_case, AnswerHistory, ExportRefused, RunHistory, StepHistory,
};

use super::request::{action_body, operator_granted, path_segments};
use super::response::json;
use super::runs::visible_run;
use super::{ApiError, AppState};
use crate::ops;

pub(crate) async fn export_run(
    State(s): State<AppState>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let run = path_segments(path)?;
    let (who, request) =
        action_body(&s, &headers, bytes, |r: &api::ExportRun| r.reason.as_str()).await?;
    if let Some(p) = request.redact.iter().find(|p| !p.starts_with('/')) {
        return Err(ApiError::bad_request(format!(
            "redact: `{p}` is not a JSON Pointer into the input (it starts with `/`)"
        )));
    }
    if request.redact.len() > api::MAX_EXPORT_REDACTIONS {
        return Err(ApiError::bad_request(format!(
            "redact: at most {} pointers",
            api::MAX_EXPORT_REDACTIONS
        )));
    }
    operator_granted(&s, &who, "export")?;
    let run = visible_run(&s, &who, &run, "export").await?;
    if run.payload_erased {
        return Err(ApiError::of(&problems::EXPORT_PAYLOAD_ERASED));
    }
    let vm = s
        .engine
        .operator
        .program_of(&run.revision)
        .await
        .map_err(|e| ApiError::store(&e))?
        .ok_or_else(|| {
            ApiError::of(&problems::EXPORT_NOT_REPRODUCIBLE).detail(format!(
                "this service cannot load the Program of revision {}",
                run.revision
            ))
        })?;
    let steps = history_steps(&s, &run).await?;
    let history = RunHistory {
        run_id: &run.id,
        state: &run.state,
        steps,
    };
    // The case runs on the VM here, a CPU-bound stretch of milliseconds.
    let exported = export_case(&vm, &history, &request.redact).map_err(refusal)?;
    ops::audit_available(&s.engine).await?;
    let (id, principal, reason, redacted) = (
        run.id.clone(),
        ops::principal_value(&who),
        request.reason,
        request.redact.join(" "),
    );
    ops::audited(&s.engine, move |k| {
        AuditRecord::new("run.export", "accepted")
            .reference(k, "run", &id)
            .reference(k, "principal", &principal)
            .reference(k, "reason", &reason)
            .fact("redacted", redacted)
    })
    .await?;
    tracing::info!(run = %run.id, "run exported as a scenario case");
    let document = match exported.document {
        serde_json::Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    Ok(json(
        StatusCode::OK,
        &api::ExportedCase {
            run: run.id.clone(),
            revision: run.revision.clone(),
            document,
            text: exported.text,
        },
    ))
}

/// What the run's ledger kept of each visited step, as the export reads
/// it (the admission's step times stamped as inspection stamps them).
async fn history_steps(
    s: &AppState,
    run: &RunRecord,
) -> Result<std::collections::BTreeMap<String, StepHistory>, ApiError> {
    let inspected = s
        .engine
        .operator
        .inspect(run)
        .await
        .map_err(|e| ApiError::store(&e))?;
    Ok(inspected
        .into_iter()
        .map(|step| {
            let answers = &step.timeline.answers;
            // The ledger keeps the latest ANSWERS_KEPT: a full list is
            // whole only when it starts at the first dispatch.
            let answers_complete =
                answers.len() < ANSWERS_KEPT || answers.first().is_some_and(|a| a.attempt == 1);
            let history = StepHistory {
                answers: answers
                    .iter()
                    .map(|a| AnswerHistory {
                        attempt: a.attempt,
                        kind: a.kind.clone(),
                        code: a.code.clone(),
                    })
                    .collect(),
                answers_complete,
                wait_ended: step.timeline.wait_end.map(|e| e.as_str().to_owned()),
                ended_at: step.timeline.ended_at,
            };
            (step.name, history)
        })
        .collect())
}

/// The problem a refused export is answered with.
fn refusal(e: ExportRefused) -> ApiError {
    match e {
        ExportRefused::NotReproducible(m) => {
            ApiError::of(&problems::EXPORT_NOT_REPRODUCIBLE).detail(m)
        }
        e @ ExportRefused::RedactInvalid { .. } => {
            ApiError::of(&problems::EXPORT_REDACT_INVALID).detail(e.to_string())
        }
    }
}
