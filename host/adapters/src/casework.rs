//! Casework's side of completions (SPEC §6 "Completion of a review"): a
//! wait-for on a submitted review request's `result` is observed by
//! reading the review request (`casework.read-review-request/v1`) by the
//! id the submission answered with. This knowledge lives here, in the
//! adapters, not in the engine: the engine asks [`ProductAdapter::observe`].

use coordinator_runtime::config::Connection;
use coordinator_vm::Answer;
use serde_json::Value;

use crate::{AdapterError, DispatchRequest, Observation, ObserveError, Outcome, ProductAdapter};

/// `casework.read-review-request/v1`.
pub const READ_REVIEW: &str = "casework.read-review-request/v1";

/// The completion a review request exposes (`wait-for … completion`).
pub const RESULT: &str = "result";

/// Observes completion `completion` (only [`RESULT`]) of review request
/// `handle` through `adapter`: one read of the review request.
///
/// # Errors
/// [`ObserveError::Adapter`] for another completion or when nothing could
/// be sent; [`ObserveError::Unanswered`] when the read did not succeed;
/// [`ObserveError::Malformed`] for a body that is not a review request.
pub async fn observe<A: ProductAdapter + ?Sized>(
    adapter: &A,
    connection: &Connection,
    completion: &str,
    handle: &str,
) -> Result<Observation, ObserveError> {
    if completion != RESULT {
        return Err(ObserveError::Adapter(AdapterError::UnknownOperation(
            format!("completion `{completion}`"),
        )));
    }
    let request = DispatchRequest {
        operation_id: READ_REVIEW.to_owned(),
        action: None,
        command: serde_json::json!({ "id": handle }),
        idempotency_key: None,
    };
    match adapter.dispatch(connection, &request).await {
        Ok(Outcome::Answer(Answer::Success { value })) => review_observation(&value),
        Ok(other) => Err(ObserveError::Unanswered(other)),
        Err(e) => Err(ObserveError::Adapter(e)),
    }
}

/// Reads a review request body (`{id, status, decision?}`) into an
/// [`Observation`]: `pending`, `decided` (its `decision` is the completion
/// value), `withdrawn`.
///
/// # Errors
/// [`ObserveError::Malformed`] for an unknown or missing status, or a
/// decided request without a `decision` object.
pub fn review_observation(value: &Value) -> Result<Observation, ObserveError> {
    match value.get("status").and_then(Value::as_str) {
        Some("pending") => Ok(Observation::Pending),
        Some("withdrawn") => Ok(Observation::Withdrawn),
        Some("decided") => match value.get("decision") {
            Some(decision) if decision.is_object() => Ok(Observation::Completed {
                value: decision.clone(),
            }),
            _ => Err(ObserveError::Malformed(
                "status `decided` without a `decision` object".to_owned(),
            )),
        },
        Some(other) => Err(ObserveError::Malformed(format!("unknown status `{other}`"))),
        None => Err(ObserveError::Malformed("no `status` string".to_owned())),
    }
}
