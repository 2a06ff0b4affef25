//! The run routes: `POST /v1/runs` (start), `GET /v1/runs` (list),
//! `GET /v1/runs/{run}` (status) and `GET /v1/runs/{run}/inspect`, with
//! the admission answer event starts share ([`admitted`]) and the
//! visibility rule every run route applies ([`visible_run`]).

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, Query, State};
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use coordinator_api as api;
use coordinator_api::problems;
use coordinator_engine::{
    AdmitError, EffectState, Principal, RunStatus, StartRequest, WaitOutcome,
};
use coordinator_ports::clock::instant_to_rfc3339;
use coordinator_ports::{RunFilter, RunRecord};
use coordinator_runtime::audit::AuditRecord;
use serde::Deserialize;

use super::prefer::{requested_wait, PREFERENCE_APPLIED};
use super::request::{body, path_segments, principal};
use super::response::{json, run_status};
use super::{ApiError, AppState};
use crate::auth::Grant;
use crate::{ops, strict};

pub use coordinator_api::MAX_IDEMPOTENCY_KEY_BYTES;

pub(crate) async fn start(
    State(s): State<AppState>,
    headers: HeaderMap,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let who = principal(&s, &headers).await?;
    let bytes = body(bytes)?;
    let request: api::StartRun = strict::from_slice(&bytes).map_err(ApiError::bad_request)?;
    if s.verifier.grant(&who, "start", Some(&request.workflow)) == Grant::Denied {
        return Err(ApiError::forbidden("start"));
    }
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .filter(|k| api::idempotency_key_valid(k))
        .ok_or_else(|| {
            ApiError::of(&problems::IDEMPOTENCY_KEY_REQUIRED)
                .detail("1 to 255 visible ASCII characters")
        })?
        .to_owned();
    let start = StartRequest {
        workflow: request.workflow,
        revision: request.revision,
        input: request.input,
        trace_parent: crate::telemetry::inbound_trace_parent(&headers),
    };
    ops::audit_available(&s.engine).await?;
    let result = s.engine.admission.admit(&who, start, &key).await;
    admitted(&s, result, ops::principal_value(&who), None).await
}

/// Answers an admission: 201 for a new run, 200 for a repeat (each audited
/// as `run.admit` first), or the refusal's problem.
pub(crate) async fn admitted(
    s: &AppState,
    result: Result<(bool, RunRecord), AdmitError>,
    principal: String,
    trigger: Option<String>,
) -> Result<Response, ApiError> {
    match result {
        Ok((created, run)) => {
            let (id, start_identity, workflow, revision) = (
                run.id.clone(),
                run.start_identity.clone(),
                run.workflow.clone(),
                run.revision.clone(),
            );
            ops::audited(&s.engine, move |k| {
                let record =
                    AuditRecord::new("run.admit", if created { "created" } else { "existing" })
                        .reference(k, "run", &id)
                        .reference(k, "principal", &principal)
                        .reference(k, "start-identity", &start_identity)
                        .fact("workflow", workflow)
                        .fact("revision", revision);
                match trigger {
                    Some(t) => record.fact("trigger", t),
                    None => record,
                }
            })
            .await?;
            Ok(json(
                if created {
                    StatusCode::CREATED
                } else {
                    StatusCode::OK
                },
                &run_status(&run),
            ))
        }
        Err(AdmitError::UnknownWorkflow) => Err(ApiError::of(&problems::WORKFLOW_NOT_FOUND)),
        Err(AdmitError::UnknownTrigger) => Err(ApiError::of(&problems::TRIGGER_NOT_FOUND)),
        Err(AdmitError::EventSourceMismatch) => Err(ApiError::of(&problems::EVENT_SOURCE_MISMATCH)),
        Err(AdmitError::EventTypeMismatch) => Err(ApiError::of(&problems::EVENT_TYPE_MISMATCH)),
        Err(AdmitError::EventRefused(m)) => Err(ApiError::of(&problems::EVENT_DATA_INVALID)
        .detail(m)),
        Err(AdmitError::RevisionNotActive { active }) => Err(ApiError::of(&problems::REVISION_NOT_ACTIVE)
        .detail(format!("the active revision is {active}"))),
        Err(AdmitError::InputRefused(m)) => {
            Err(ApiError::of(&problems::INPUT_INVALID).detail(m))
        }
        Err(AdmitError::KeyReused) => Err(ApiError::of(&problems::IDEMPOTENCY_KEY_REUSED)),
        Err(AdmitError::RecoveryOnly) => Err(ApiError::of(&problems::ADMISSION_RECOVERY_ONLY)),
        Err(AdmitError::ActivationChanged) => Err(ApiError::of(&problems::DEPLOYMENT_ACTIVATION_CHANGED)
        .detail("restart the service with the runtime file apply used")),
        Err(AdmitError::BindingConflict { connection }) => Err(ApiError::of(
            &problems::BINDING_CONFLICT,
        )
        .detail(format!(
            "connection `{connection}` is bound differently here than in the runtime file the last apply used: restart this service with that file"
        ))),
        Err(AdmitError::AdmissionHeld) => {
            Err(
                ApiError::of(&problems::ADMISSION_HELD)
                    .detail("release-admission-hold reopens admissions after a restore"),
            )
        }
        Err(AdmitError::Store(e)) => Err(ApiError::store(&e)),
    }
}

/// The query of `GET /v1/runs`; an unknown parameter is 400.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ListQuery {
    workflow: Option<String>,
    state: Option<String>,
    attention: Option<bool>,
    /// RFC 3339; only runs admitted before it.
    admitted_before: Option<String>,
    /// Only runs whose current step is this one.
    step: Option<String>,
    /// `accepted` or `unknown`: the current step's effect.
    effect: Option<String>,
    limit: Option<u32>,
    cursor: Option<String>,
}

/// The engine's run status named `s`, one of [`api::RUN_STATES`] (the
/// document's `enum`; a test holds the two lists equal).
fn parse_state(s: &str) -> Option<RunStatus> {
    serde_json::from_value(serde_json::Value::String(s.to_owned())).ok()
}

/// The engine's effect state named `s`, one of [`api::EFFECT_STATES`] (the
/// document's `enum`; a test holds the two lists equal).
fn parse_effect(s: &str) -> Option<EffectState> {
    serde_json::from_value(serde_json::Value::String(s.to_owned())).ok()
}

pub(crate) async fn list(
    State(s): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let who = principal(&s, &headers).await?;
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let Grant::Allowed { operator } = s.verifier.grant(&who, "status", None) else {
        return Err(ApiError::forbidden("status"));
    };
    let limit = q.limit.unwrap_or(api::DEFAULT_LIST_LIMIT);
    if limit == 0 || limit > api::MAX_LIST_LIMIT {
        return Err(ApiError::bad_request("limit must be 1..=100"));
    }
    let state = match q.state.as_deref() {
        None => None,
        Some(t) => Some(parse_state(t).ok_or_else(|| ApiError::bad_request("unknown state; one of running, attention, cancel-requested, finished, failed, cancelled, cancelled-after-effect, expired"))?),
    };
    let admitted_before = match q.admitted_before.as_deref() {
        None => None,
        Some(t) => Some(
            coordinator_ports::clock::Instant::parse(t)
                .ok()
                .ok_or_else(|| {
                    ApiError::bad_request("admittedBefore must be an RFC 3339 instant")
                })?,
        ),
    };
    let effect = match q.effect.as_deref() {
        None => None,
        Some(e) => Some(
            parse_effect(e)
                .ok_or_else(|| ApiError::bad_request("unknown effect; one of accepted, unknown"))?,
        ),
    };
    let mut workflows = s.verifier.scope(&who);
    if let Some(w) = q.workflow {
        workflows = match workflows {
            Some(ws) if !ws.contains(&w) => Some(Vec::new()),
            _ => Some(vec![w]),
        };
    }
    let filter = RunFilter {
        owner: (!operator).then(|| who.owner()),
        workflows,
        state,
        attention: q.attention,
        admitted_before,
        step: q.step,
        effect,
        limit,
        cursor: q.cursor,
    };
    let page = s
        .engine
        .operator
        .list(&filter)
        .await
        .map_err(|e| ApiError::store(&e))?;
    Ok(json(
        StatusCode::OK,
        &api::RunList {
            runs: page.runs.iter().map(run_status).collect(),
            next_cursor: page.next_cursor,
        },
    ))
}

/// Loads a run the principal may act on with `action`: 403 when the policy
/// lacks the action entirely, 404 when the run does not exist or is not
/// theirs (non-operators) or outside the policy's workflows.
pub(crate) async fn visible_run(
    s: &AppState,
    who: &Principal,
    run_id: &str,
    action: &str,
) -> Result<RunRecord, ApiError> {
    if s.verifier.grant(who, action, None) == Grant::Denied {
        return Err(ApiError::forbidden(action));
    }
    let run = s
        .engine
        .operator
        .get(run_id)
        .await
        .map_err(|e| ApiError::store(&e))?
        .ok_or_else(ApiError::not_found)?;
    match s.verifier.grant(who, action, Some(&run.workflow)) {
        Grant::Allowed { operator: true } => Ok(run),
        Grant::Allowed { operator: false } if run.owner == who.owner() => Ok(run),
        _ => Err(ApiError::not_found()),
    }
}

/// The run `GET /v1/runs/{run}...` names, once the caller is
/// authenticated ([`principal`]), the path decodes and the run is visible
/// to the caller for `action` ([`visible_run`]), refused in that order.
async fn requested_run(
    s: &AppState,
    headers: &HeaderMap,
    path: Result<Path<String>, PathRejection>,
    action: &str,
) -> Result<RunRecord, ApiError> {
    let who = principal(s, headers).await?;
    let run = path_segments(path)?;
    visible_run(s, &who, &run, action).await
}

/// `GET /v1/runs/{run}`: the run's status; with `Prefer: wait=N` (RFC
/// 7240, N whole seconds, at most [`api::MAX_RUN_WAIT_SECONDS`]) answered
/// when the run ends or N seconds have passed, whichever is first, with
/// `Preference-Applied: wait=N` (docs/decisions.md "Waiting for a run's
/// end"). The wait is woken by the commit that ends the run, never by
/// reading the run on a timer.
pub(crate) async fn status(
    State(s): State<AppState>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let run = requested_run(&s, &headers, path, "status").await?;
    let wait = requested_wait(&headers)?;
    let Some(seconds) = wait else {
        return Ok(json(StatusCode::OK, &run_status(&run)));
    };
    if seconds == 0 || run.state.status.is_terminal() {
        return Ok(wait_applied(seconds, &run));
    }
    let until = tokio::time::Instant::now() + Duration::from_secs(seconds);
    let mut run = run;
    loop {
        // Registered before the run is read again: an end committed after
        // that read wakes the wait, one committed before it is in the
        // read. No room (or the process stopping): the run as it is, the
        // preference not applied.
        let Some(mut waiting) = s.engine.run_ends.register(&run.id) else {
            return Ok(json(StatusCode::OK, &run_status(&run)));
        };
        run = read_again(&s, &run.id).await?;
        if run.state.status.is_terminal() {
            return Ok(wait_applied(seconds, &run));
        }
        let outcome = waiting
            .wait(until.saturating_duration_since(tokio::time::Instant::now()))
            .await;
        drop(waiting);
        run = read_again(&s, &run.id).await?;
        match outcome {
            WaitOutcome::Closing => return Ok(json(StatusCode::OK, &run_status(&run))),
            WaitOutcome::TimedOut => return Ok(wait_applied(seconds, &run)),
            WaitOutcome::Ended if run.state.status.is_terminal() => {
                return Ok(wait_applied(seconds, &run))
            }
            // Woken without an end (the relay to other processes lost
            // its connection): wait again for the time left.
            WaitOutcome::Ended => {}
        }
    }
}

/// Run `run_id` read again (it was visible to the caller a moment ago).
async fn read_again(s: &AppState, run_id: &str) -> Result<RunRecord, ApiError> {
    s.engine
        .operator
        .get(run_id)
        .await
        .map_err(|e| ApiError::store(&e))?
        .ok_or_else(ApiError::not_found)
}

/// The run's status, with `Preference-Applied: wait=N`.
fn wait_applied(seconds: u64, run: &RunRecord) -> Response {
    let mut answer = json(StatusCode::OK, &run_status(run));
    if let Ok(applied) = HeaderValue::from_str(&format!("wait={seconds}")) {
        answer.headers_mut().insert(PREFERENCE_APPLIED, applied);
    }
    answer
}

pub(crate) async fn inspect(
    State(s): State<AppState>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let run = requested_run(&s, &headers, path, "inspect").await?;
    let steps = s
        .engine
        .operator
        .inspect(&run)
        .await
        .map_err(|e| ApiError::store(&e))?;
    let body = api::Inspection {
        status: run_status(&run),
        steps: steps
            .into_iter()
            .map(|st| api::InspectedStep {
                name: st.name,
                kind: st.kind.map_or("unknown", |k| k.as_str()).to_owned(),
                effect: st.effect.map(|e| {
                    match e {
                        EffectState::Accepted => "accepted",
                        EffectState::Unknown => "unknown",
                    }
                    .to_owned()
                }),
                attempts: st.attempts,
                due_at: st.due_at,
                observations: st.observations,
                restored: st.restored,
                waiting_for: st.timeline.waiting.clone().map(|w| api::CallWaiting {
                    connection: w.connection,
                    limit: w.limit.as_str().to_owned(),
                    since: w.since.to_string(),
                }),
                started_at: st.timeline.started_at.as_ref().map(instant_to_rfc3339),
                ended_at: st.timeline.ended_at.as_ref().map(instant_to_rfc3339),
                wait_due_at: st.timeline.due_at.as_ref().map(instant_to_rfc3339),
                wait_ended: st.timeline.wait_end.map(|e| e.as_str().to_owned()),
                answers: st
                    .timeline
                    .answers
                    .into_iter()
                    .map(|a| api::InspectedAnswer {
                        at: instant_to_rfc3339(&a.at),
                        attempt: a.attempt,
                        kind: a.kind,
                        code: a.code,
                    })
                    .collect(),
            })
            .collect(),
    };
    Ok(json(StatusCode::OK, &body))
}

#[cfg(test)]
mod tests {
    use coordinator_api as api;
    use coordinator_engine::{EffectState, RunStatus};

    /// `RUN_STATES` (the document's `enum` of `state`) names exactly the
    /// engine's run statuses: each parses back to itself, and every
    /// status (the `match` stops compiling when one is added) is listed.
    #[test]
    fn the_documented_run_states_are_the_engines() {
        for name in api::RUN_STATES {
            let state = super::parse_state(name).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(state.as_str(), name);
        }
        let listed = |state: RunStatus| match state {
            RunStatus::Running
            | RunStatus::CancelRequested
            | RunStatus::Attention
            | RunStatus::Finished
            | RunStatus::Failed
            | RunStatus::Expired
            | RunStatus::Cancelled
            | RunStatus::CancelledAfterEffect => api::RUN_STATES.contains(&state.as_str()),
        };
        for state in [
            RunStatus::Running,
            RunStatus::CancelRequested,
            RunStatus::Attention,
            RunStatus::Finished,
            RunStatus::Failed,
            RunStatus::Expired,
            RunStatus::Cancelled,
            RunStatus::CancelledAfterEffect,
        ] {
            assert!(listed(state), "{state:?}");
        }
        assert_eq!(api::RUN_STATES.len(), 8);
    }

    /// `ENDED_RUN_STATES` (what `Prefer: wait` waits for, and what
    /// `coordinatorctl start --wait` tells ended) are exactly the engine's
    /// terminal statuses.
    #[test]
    fn the_ended_run_states_are_the_engines_terminal_ones() {
        for name in api::RUN_STATES {
            let state = super::parse_state(name).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(
                state.is_terminal(),
                api::ENDED_RUN_STATES.contains(&name),
                "{name}"
            );
        }
    }

    /// `EFFECT_STATES` (the document's `enum` of `effect`) names exactly
    /// the engine's effect states, as inspection spells them.
    #[test]
    fn the_documented_effects_are_the_engines() {
        let named = |e: EffectState| match e {
            EffectState::Accepted => "accepted",
            EffectState::Unknown => "unknown",
        };
        let all = [EffectState::Accepted, EffectState::Unknown];
        let names: Vec<&str> = all.into_iter().map(named).collect();
        assert_eq!(names, api::EFFECT_STATES);
        for e in all {
            assert_eq!(super::parse_effect(named(e)), Some(e));
        }
        assert_eq!(super::parse_effect("Unknown"), None);
    }
}
