//! The operator routes of seed 000: `GET /v1/doctor`, the restore and
//! admission holds, `complete-execution-recovery` and `retention`, and the
//! audit journal hook every audited answer goes through.
//!
//! Every route here needs a policy with `operator: true` that lists the
//! action (`doctor`, `restore-hold`, `release-restore-hold`,
//! `complete-execution-recovery`, `release-admission-hold`, `retain`);
//! anything else is 403 `authorization.refused`.
//!
//! The holds live in the store's deployment row ([`Operator::holds`](coordinator_engine::Operator::holds),
//! [`Operator::update_holds`](coordinator_engine::Operator::update_holds)), so every process obeys them; see
//! docs/operations.md "Where the holds are kept".

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use coordinator_api as api;
use coordinator_api::problems;
use coordinator_engine::{Engine, HoldError, Principal};
use coordinator_ports::{Holds, LiveCounts, RunCounts, StoreError};
use coordinator_runtime::audit::AuditRecord;
use coordinator_runtime::keys::AuditKey;

use crate::auth::Grant;
use crate::{body, json, principal, strict, ApiError, AppState};

/// Longest accepted `reason` or `recoveryReference`, in bytes.
pub const MAX_REFERENCE_BYTES: usize = 256;

/// The counts doctor and `/metrics` read ([`RunCounts`]: kept by the
/// store, so reading them costs the same whatever the number of runs). A
/// failure is counted as a store error of the engine.
///
/// # Errors
/// The store's.
pub async fn survey(counts: &dyn RunCounts, engine: &Engine) -> Result<LiveCounts, StoreError> {
    counts
        .live_counts()
        .await
        .map_err(|e| engine.health.count_outage(e))
}

/// 503 `service.unavailable` while the audit journal is known to be
/// failing and a probe append fails now
/// ([`Health::audit_available`](coordinator_engine::Health::audit_available)):
/// every audited route (a start, an event start, a recovery action, a hold
/// change, retention) asks this before it does anything, so no effect
/// exists without its audit record. A failure found only while writing
/// the record is [`audited`]'s `audit.response-unavailable`.
pub(crate) async fn audit_available(engine: &Engine) -> Result<(), ApiError> {
    if engine.health.audit_available().await {
        return Ok(());
    }
    tracing::warn!(
        code = "service.unavailable",
        "audit journal failing; request refused before anything was done"
    );
    Err(ApiError::of(&problems::SERVICE_UNAVAILABLE)
        .detail("the audit journal is failing (a full disk, a removed file): nothing was done; try again after it recovers"))
}

/// Appends the record `build` makes to the audit journal (fsynced) on a
/// blocking thread; a failed append is 503 `audit.response-unavailable`
/// and the answer is not released.
pub(crate) async fn audited(
    engine: &Arc<Engine>,
    build: impl FnOnce(&AuditKey) -> AuditRecord + Send + 'static,
) -> Result<(), ApiError> {
    let engine = engine.clone();
    let appended = tokio::task::spawn_blocking(move || engine.health.audit(build))
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e.to_string())));
    appended.map_err(|e| {
        tracing::error!(code = "audit.response-unavailable", error = %e, "audit append failed; answer withheld");
        ApiError::of(&problems::AUDIT_RESPONSE_UNAVAILABLE)
        .detail("inspect before repeating it")
    })
}

/// The keyed reference of a principal (`iss` and `sub`).
pub(crate) fn principal_value(who: &Principal) -> String {
    format!("{}\u{0}{}", who.iss, who.sub)
}

/// 401 / 403 unless the principal is an operator whose policy lists
/// `action`.
async fn operator(s: &AppState, headers: &HeaderMap, action: &str) -> Result<Principal, ApiError> {
    let who = principal(s, headers).await?;
    match s.verifier.grant(&who, action, None) {
        Grant::Allowed { operator: true } => Ok(who),
        _ => Err(ApiError::forbidden(action).detail(format!(
            "`{action}` is a deployment-wide action: the caller's policy needs `operator: true` and `{action}` in its `actions`"
        ))),
    }
}

/// Checks an investigation reference (`reason`, `recoveryReference`): 1 to
/// 256 visible ASCII characters, the one rule for every route that takes
/// one (seed 000: it holds no personal data).
///
/// # Errors
/// 400 `request.invalid` naming the member.
pub(crate) fn reference(name: &str, value: &str) -> Result<(), ApiError> {
    if value.is_empty()
        || value.len() > MAX_REFERENCE_BYTES
        || !value.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(ApiError::bad_request(format!(
            "{name} must be 1..=256 visible ASCII characters (an investigation reference)"
        )));
    }
    Ok(())
}

fn holds_body(h: &Holds) -> api::Holds {
    api::Holds {
        restore: h.restore,
        admission: h.admission,
        execution_recovery_completed: h.execution_recovery_completed,
        restore_epoch: h.restore_epoch,
    }
}

/// Audits a hold change (fsynced before the answer is released) and answers
/// 200 with the holds after it.
///
/// # Errors
/// 503 `audit.response-unavailable` when the journal cannot be written.
async fn answer_holds(
    s: &AppState,
    record: impl FnOnce(&AuditKey) -> AuditRecord + Send + 'static,
    after: &Holds,
) -> Result<Response, ApiError> {
    audited(&s.engine, record).await?;
    Ok(json(StatusCode::OK, &holds_body(after)))
}

fn hold_record(
    action: &str,
    who: &Principal,
    refkind: &'static str,
    refvalue: String,
    after: &Holds,
) -> impl FnOnce(&AuditKey) -> AuditRecord + Send + 'static {
    let action = action.to_owned();
    let who = principal_value(who);
    let after = after.clone();
    move |key| {
        AuditRecord::new(&action, "accepted")
            .reference(key, "principal", &who)
            .reference(key, refkind, &refvalue)
            .fact("restoreHold", after.restore)
            .fact("admissionHold", after.admission)
            .fact(
                "executionRecoveryCompleted",
                after.execution_recovery_completed,
            )
    }
}

/// A refused restore step as its problem: 409 with the step's code, or
/// the store's answer.
fn hold_refused(e: HoldError) -> ApiError {
    let kind = match &e {
        HoldError::HoldRequired(_) => &problems::RESTORE_HOLD_REQUIRED,
        HoldError::ReviewRequired { .. } => &problems::RESTORE_REVIEW_REQUIRED,
        HoldError::Unresolved(_) => &problems::RESTORE_UNRESOLVED,
        HoldError::Store(store) => return ApiError::store(store),
    };
    ApiError::of(kind).detail(e.detail())
}

/// `GET /v1/doctor`.
pub(crate) async fn doctor(
    State(s): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    operator(&s, &headers, "doctor").await?;
    let store_ready = s.engine.health.ping().await.is_ok();
    let survey = if store_ready {
        match survey(s.counts.as_ref(), &s.engine).await {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::warn!(code = "store-unavailable", error = %e, "doctor survey failed");
                None
            }
        }
    } else {
        None
    };
    // The holds live in the store: with the store unreachable they are
    // unknown and shown as not placed (read them with `storeReady: false`
    // as unknown).
    let holds = if store_ready {
        s.engine.operator.holds().await.unwrap_or_default()
    } else {
        Holds::default()
    };
    // Ready while the active packages are still the ones this process
    // started with (an apply since asks for a restart); unknown (null),
    // not false, while the store does not answer.
    let activation_current = if store_ready {
        s.engine.admission.activation_current().await.ok()
    } else {
        None
    };
    let body = api::Doctor {
        version: crate::version::build_version(),
        activation_ready: activation_current
            .map(|current| current && !s.engine.admission.active_revisions().is_empty()),
        recovery_only: s.engine.health.recovery_only(),
        state: api::DoctorState {
            audit_ready: s.engine.health.audit_probe().await,
            store_ready: store_ready && survey.is_some(),
            // Also runs that ended still holding an unknown effect (a run
            // cancelled during an uncertain call): someone must find out.
            uncertain: survey.map(|c| c.unknown_effects + c.ended_unknown_effects),
            attention: survey.map(|c| c.attention),
            live: survey.map(|c| c.live()),
            review_required: survey.map(|c| c.review_required),
        },
        holds: holds_body(&holds),
        clock: api::DoctorClock {
            offset_seconds: s.engine.health.clock_offset_seconds(),
            out_of_service: s.engine.health.clock_out_of_service(),
        },
    };
    Ok(json(StatusCode::OK, &body))
}

/// `POST /v1/restore-hold`: places the restore hold and the admission
/// hold, moves the restore epoch and holds back the restored prepared
/// commands ([`Operator::place_restore_hold`](coordinator_engine::Operator::place_restore_hold)). Placing it again changes no
/// hold (it finishes a hold-back left half done) and is audited again.
pub(crate) async fn restore_hold(
    State(s): State<AppState>,
    headers: HeaderMap,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let who = operator(&s, &headers, "restore-hold").await?;
    let req: api::HoldReason = strict::from_slice(&body(bytes)?).map_err(ApiError::bad_request)?;
    reference("reason", &req.reason)?;
    audit_available(&s.engine).await?;
    let (after, _held_back) = s
        .engine
        .operator
        .place_restore_hold()
        .await
        .map_err(hold_refused)?;
    answer_holds(
        &s,
        hold_record("restore.hold", &who, "reason", req.reason, &after),
        &after,
    )
    .await
}

/// Checks a recovery attestation (seed 000 restore sequence): a valid
/// `recoveryReference`, the history attestation `(name, value)` and
/// `priorDeploymentFenced`, both `true`.
///
/// # Errors
/// 400 `request.invalid` naming what is missing.
fn attested(
    recovery_reference: &str,
    (history, history_complete): (&str, bool),
    prior_deployment_fenced: bool,
) -> Result<(), ApiError> {
    reference("recoveryReference", recovery_reference)?;
    if history_complete && prior_deployment_fenced {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "{history} and priorDeploymentFenced must both be attested (true)"
        )))
    }
}

/// `POST /v1/complete-execution-recovery`: the operator's attestation,
/// under the restore hold.
pub(crate) async fn complete_execution_recovery(
    State(s): State<AppState>,
    headers: HeaderMap,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let who = operator(&s, &headers, "complete-execution-recovery").await?;
    let req: api::ExecutionRecovery =
        strict::from_slice(&body(bytes)?).map_err(ApiError::bad_request)?;
    attested(
        &req.recovery_reference,
        ("executionHistoryComplete", req.execution_history_complete),
        req.prior_deployment_fenced,
    )?;
    audit_available(&s.engine).await?;
    let after = s
        .engine
        .operator
        .complete_execution_recovery()
        .await
        .map_err(hold_refused)?;
    answer_holds(
        &s,
        hold_record(
            "restore.complete-execution-recovery",
            &who,
            "recovery-reference",
            req.recovery_reference,
            &after,
        ),
        &after,
    )
    .await
}

/// `POST /v1/release-restore-hold`: refused with `restore.review-required`
/// while a restored prepared command awaits review and with
/// `restore.unresolved` while runs hold unknown effects, unless execution
/// recovery was attested ([`Operator::release_restore_hold`](coordinator_engine::Operator::release_restore_hold)).
pub(crate) async fn release_restore_hold(
    State(s): State<AppState>,
    headers: HeaderMap,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let who = operator(&s, &headers, "release-restore-hold").await?;
    let req: api::HoldReason = strict::from_slice(&body(bytes)?).map_err(ApiError::bad_request)?;
    reference("reason", &req.reason)?;
    audit_available(&s.engine).await?;
    let after = s
        .engine
        .operator
        .release_restore_hold()
        .await
        .map_err(hold_refused)?;
    answer_holds(
        &s,
        hold_record("restore.release", &who, "reason", req.reason, &after),
        &after,
    )
    .await
}

/// `POST /v1/release-admission-hold`: only after the restore hold is
/// released, with the operator's attestations.
pub(crate) async fn release_admission_hold(
    State(s): State<AppState>,
    headers: HeaderMap,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let who = operator(&s, &headers, "release-admission-hold").await?;
    let req: api::AdmissionRecovery =
        strict::from_slice(&body(bytes)?).map_err(ApiError::bad_request)?;
    attested(
        &req.recovery_reference,
        ("admissionHistoryComplete", req.admission_history_complete),
        req.prior_deployment_fenced,
    )?;
    audit_available(&s.engine).await?;
    let after = s
        .engine
        .operator
        .release_admission_hold()
        .await
        .map_err(hold_refused)?;
    answer_holds(
        &s,
        hold_record(
            "restore.release-admission-hold",
            &who,
            "recovery-reference",
            req.recovery_reference,
            &after,
        ),
        &after,
    )
    .await
}

/// `POST /v1/retention` (seed 000 "Erase ended payloads"): erases the
/// payloads of at most `limit` (1..=100) runs that ended before `before`
/// (RFC 3339), oldest ended first, never live or uncertain work, and
/// answers how many and whether more remain. One audit line per call
/// (`retention.erase`: the count, whether more remain, the cutoff),
/// fsynced before the answer is released. 400 for a bad cutoff or limit.
pub(crate) async fn retention(
    State(s): State<AppState>,
    headers: HeaderMap,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let who = operator(&s, &headers, "retain").await?;
    let req: api::Retention = strict::from_slice(&body(bytes)?).map_err(ApiError::bad_request)?;
    if req.limit == 0 || req.limit > api::MAX_RETENTION_LIMIT {
        return Err(ApiError::bad_request("limit must be 1..=100"));
    }
    let Some(before) = coordinator_ports::clock::Instant::parse(&req.before).ok() else {
        return Err(ApiError::bad_request("before must be an RFC 3339 instant"));
    };
    audit_available(&s.engine).await?;
    let done = s
        .engine
        .operator
        .retain(before, req.limit)
        .await
        .map_err(|e| ApiError::store(&e))?;
    tracing::warn!(
        action = "retain",
        erased = done.erased,
        more = done.more,
        "retention erased payloads"
    );
    let principal = principal_value(&who);
    let cutoff = req.before.clone();
    audited(&s.engine, move |key| {
        AuditRecord::new("retention.erase", "accepted")
            .reference(key, "principal", &principal)
            .fact("before", cutoff)
            .fact("limit", req.limit)
            .fact("erased", done.erased)
            .fact("more", done.more)
    })
    .await?;
    Ok(json(
        StatusCode::OK,
        &api::Retained {
            erased: done.erased,
            more: done.more,
            before: req.before,
        },
    ))
}
