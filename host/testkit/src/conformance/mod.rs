//! The run store behaviours every implementation keeps, as reusable
//! checks: the in-memory store's unit tests and the PostgreSQL store's
//! tests (host/store/tests/store_postgres.rs) run the same functions, each on a
//! fresh, empty store. A failed check panics (they are test assertions).
//!
//! Each check takes the narrow ports it tests ([`RunAdmission`],
//! [`JobQueue`], [`RunReads`], [`HoldsAndReviews`], [`Maintenance`],
//! [`RunMoves`](coordinator_ports::store::RunMoves)), one parameter per
//! port in that order, then the fixture; a caller passes the same store
//! for each.
//!
//! Times are small Unix seconds chosen by the checks (the engine's clock
//! drives a store, never the store's own).

mod admission;
mod commits;
mod flow;
mod job_queue;
mod live_revisions;
mod moves;
mod operations;
mod retention;

pub use admission::*;
pub use commits::*;
pub use flow::*;
pub use job_queue::*;
pub use live_revisions::*;
pub use moves::*;
pub use operations::*;
pub use retention::*;

use std::collections::BTreeMap;

use coordinator_ir::instant::Instant;
use coordinator_vm::{DispatchCommand, EffectState, RunState, RunStatus, WakeKind};
use serde_json::json;

use coordinator_ports::counts::{LiveCounts, RunCounts};
use coordinator_ports::store::{
    Admitted, Commit, Erasure, HoldsAndReviews, Job, JobKind, JobQueue, JobState, LeaseRequest,
    Maintenance, NewJob, NewRun, Owner, RunAdmission, RunFilter, RunReads, StepLedger, StoreError,
};

/// What a store needs to admit runs: a workflow and a revision it knows
/// (the PostgreSQL store refuses a revision that was never applied).
#[derive(Clone, Debug)]
pub struct Fixture {
    /// The workflow name.
    pub workflow: String,
    /// Its active revision.
    pub revision: String,
}

impl Fixture {
    /// For stores that accept any revision (the in-memory store).
    pub fn any() -> Fixture {
        Fixture {
            workflow: "w".into(),
            revision: format!("sha256:{}", "a".repeat(64)),
        }
    }
}

/// The RFC 3339 instant `text` (a test writes it).
///
/// # Panics
/// When `text` is not an RFC 3339 instant: a test's mistake.
pub fn instant(text: &str) -> Instant {
    Instant::parse(text).expect("an RFC 3339 instant")
}

/// A running state with `marker` as its input.
pub fn state(marker: &str) -> RunState {
    serde_json::from_value(json!({
        "status": "running", "input": {"applicationId": marker}, "admittedAt": "2026-01-01T00:00:00Z",
        "deadlineAt": "2026-02-01T00:00:00Z", "now": "2026-01-01T00:00:00Z",
        "elapsedSeconds": 0, "path": ["due"], "outputs": {}, "effects": {},
        "pending": null, "cancel": null, "outcome": null, "output": null,
        "failure": null, "endedAt": null
    }))
    .expect("a valid run state")
}

/// When a commit of `state` happens, as the engine would give it: the
/// state's end, else its `now`.
pub fn committed_at(state: &RunState) -> Instant {
    state.ended_at.unwrap_or(state.now)
}

/// The instant `seconds` after 1970-01-01T00:00:00Z: the checks' times are
/// small Unix seconds, written as numbers.
pub fn unix(seconds: i64) -> Instant {
    Instant::from_unix_seconds(seconds)
}

/// The instant `nanos` nanoseconds after 1970-01-01T00:00:00Z.
pub fn nanos(nanos: i64) -> Instant {
    const PER_SECOND: i64 = 1_000_000_000;
    let rest = u32::try_from(nanos.rem_euclid(PER_SECOND)).unwrap_or(0);
    Instant::from_unix_seconds_and_nanos(nanos.div_euclid(PER_SECOND), rest)
}

fn ended(marker: &str, status: RunStatus) -> RunState {
    let mut s = state(marker);
    s.status = status;
    s.output = Some(json!({"done": marker}));
    s.ended_at = Some(instant("2026-01-01T00:05:00Z"));
    s
}

/// The owner `sub` (issuer `https://login.example.org`).
pub fn owner(sub: &str) -> Owner {
    Owner {
        iss: "https://login.example.org".into(),
        sub: sub.into(),
    }
}

/// The binding digest every [`new_run`] records for connection `notices`.
pub const NOTICES_BINDING: &str =
    "sha256:1111111111111111111111111111111111111111111111111111111111111111";

/// A run `id` of `sub` with one timer job due at 60, recording
/// [`NOTICES_BINDING`] for `notices`.
pub fn new_run(fx: &Fixture, id: &str, sub: &str, identity: &str, digest: &str) -> NewRun {
    NewRun {
        id: id.into(),
        workflow: fx.workflow.clone(),
        revision: fx.revision.clone(),
        owner: owner(sub),
        start_identity: identity.into(),
        request_digest: digest.into(),
        state: state(id),
        jobs: vec![NewJob {
            kind: JobKind::Timer {
                at: instant("1970-01-01T00:01:00Z"),
                wake: WakeKind::Wake,
            },
            due_at: unix(60),
        }],
        bindings: [("notices".to_owned(), NOTICES_BINDING.to_owned())].into(),
        trace_parent: None,
    }
}

fn dispatch(step: &str, attempt: u32) -> JobKind {
    JobKind::Dispatch {
        dispatch: DispatchCommand {
            step: step.into(),
            operation_id: "messaging.send-message".into(),
            connection: "notices".into(),
            action: None,
            command: json!({"message": {"to": "applicant", "body": "hello"}}),
            attempt,
            resend_safe: false,
        },
        idempotency_key: Some(format!("key-{step}")),
    }
}

/// Leases up to `limit` jobs due by `now` (Unix seconds) for `owner` until
/// `lease_until`, as an ordinary process under restore epoch 0 would.
///
/// # Errors
/// The store's ([`JobQueue::lease`]).
pub async fn lease(
    queue: &dyn JobQueue,
    owner: &str,
    now: i64,
    lease_until: i64,
    limit: usize,
) -> Result<Vec<Job>, StoreError> {
    queue
        .lease(&LeaseRequest {
            owner,
            now: unix(now),
            lease_until: unix(lease_until),
            limit,
            epoch: Some(0),
            run_id: None,
            receipt_lookups_only: false,
        })
        .await
}

/// The queue's next due time ([`JobQueue::next_due`]) as Unix seconds.
///
/// # Panics
/// When the store fails.
pub async fn next_due(queue: &dyn JobQueue) -> Option<i64> {
    let due = queue.next_due().await.expect("next due");
    due.map(|d| d.unix_seconds())
}

fn id(admitted: &Admitted) -> String {
    match admitted {
        Admitted::Created(r) | Admitted::Existing(r) => r.id.clone(),
        other => panic!("not admitted: {other:?}"),
    }
}

/// Moves run `id` (version 1, as admitted) to `state` with one commit.
async fn settle(queue: &dyn JobQueue, id: &str, state: RunState) {
    queue
        .commit(Commit {
            review: None,
            run_id: id.into(),
            expected_version: 1,
            at: committed_at(&state),
            state,
            ledger: BTreeMap::new(),
            complete: None,
            jobs: vec![],
        })
        .await
        .expect("commit");
}
