//! The answer bodies handlers share: a JSON answer ([`json`]) and a run's
//! status body ([`run_status`]).

use axum::http::header::{HeaderValue, CONTENT_TYPE};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use coordinator_api as api;
use coordinator_engine::RunStatus;
use coordinator_ports::RunRecord;

pub(crate) fn json<T: serde::Serialize>(status: StatusCode, body: &T) -> Response {
    (
        status,
        [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        serde_json::to_vec(body).unwrap_or_default(),
    )
        .into_response()
}

pub(crate) fn run_status(r: &RunRecord) -> api::RunStatus {
    let st = &r.state;
    api::RunStatus {
        run: r.id.clone(),
        workflow: r.workflow.clone(),
        revision: r.revision.clone(),
        state: st.status.as_str().to_owned(),
        admitted_at: st.admitted_at.to_string(),
        deadline_at: st.deadline_at.to_string(),
        // The engine's clock when the run ended (the VM's `ended_at` is
        // the instant of the event that ended it, which may be long before).
        ended_at: r
            .ended_at
            .as_ref()
            .map(coordinator_ports::clock::instant_to_rfc3339)
            .or_else(|| st.ended_at.map(|t| t.to_string())),
        outcome: st.outcome.clone(),
        output: if st.status == RunStatus::Finished || st.outcome.is_some() {
            st.output.clone()
        } else {
            None
        },
        failure: st.failure.as_ref().map(|f| f.code.as_str().to_owned()),
        failure_path: st.failure.as_ref().and_then(|f| f.path.clone()),
        refusal_code: st.failure.as_ref().and_then(|f| f.product_code.clone()),
        payload_erased: r.payload_erased,
        review: r.review.map(|v| v.as_str().to_owned()),
        waiting_for: waiting_for(r),
        moves: coordinator_ports::store::moves_of(&r.ledger)
            .into_iter()
            .map(|m| api::RunMoveRecord {
                at: coordinator_ports::clock::instant_to_rfc3339(&m.at),
                from_revision: m.from_revision.clone(),
                to_revision: m.to_revision.clone(),
                from_step: m.from_step.clone(),
                to_step: m.to_step.clone(),
                certificate: m.certificate.clone(),
            })
            .collect(),
    }
}

/// The connection a run's next call waits for (flow control), while the
/// run has not ended.
fn waiting_for(r: &RunRecord) -> Option<String> {
    if r.state.status.is_terminal() {
        return None;
    }
    r.ledger
        .values()
        .find_map(|l| l.waiting.as_ref())
        .map(|w| w.connection.clone())
}

#[cfg(test)]
mod tests {
    /// seed 000 "Recover a run": the status names where a failed run broke
    /// (`failurePath`) and a product's own refusal code.
    #[test]
    fn a_failed_run_says_where_it_broke_and_what_the_product_said() {
        use coordinator_testkit::conformance::{new_run, state, Fixture};
        let mut st = state("r-1");
        st.status = coordinator_engine::RunStatus::Failed;
        st.failure = Some(coordinator_vm::Failure {
            code: coordinator_vm::FailureCode::InvalidCommand,
            step: "notify".into(),
            product_code: Some("template.unknown".into()),
            function: None,
            message: "the input of `notify` at `/to/email`: not an email".into(),
            path: Some("/to/email".into()),
        });
        let new = new_run(&Fixture::any(), "r-1", "alice", "id-1", "d");
        let record = coordinator_ports::RunRecord {
            id: new.id,
            sequence: 1,
            workflow: new.workflow,
            revision: new.revision,
            owner: new.owner,
            start_identity: new.start_identity,
            request_digest: new.request_digest,
            state: st,
            ledger: Default::default(),
            version: 1,
            bindings: new.bindings,
            payload_erased: false,
            review: None,
            ended_at: coordinator_ports::clock::Instant::parse("2027-01-15T08:00:00Z").ok(),
            trace_parent: None,
        };
        let status = super::run_status(&record);
        assert_eq!(status.ended_at.as_deref(), Some("2027-01-15T08:00:00Z"));
        assert_eq!(status.failure.as_deref(), Some("invalid-command"));
        assert_eq!(status.failure_path.as_deref(), Some("/to/email"));
        assert_eq!(status.refusal_code.as_deref(), Some("template.unknown"));
    }
}
