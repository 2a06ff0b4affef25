//! The runs that have not ended, by revision
//! ([`RunCounts::live_runs_by_revision`]): they follow admissions, ends
//! and moves to another revision ([`RunMoves::commit_move`]), and a
//! refused write changes nothing.

use std::collections::BTreeMap;

use coordinator_ports::counts::{RevisionLiveRuns, RunCounts};
use coordinator_ports::store::{Commit, JobQueue, RunAdmission, RunMove, RunMoves, StoreError};
use coordinator_vm::{RunState, RunStatus};

use super::{committed_at, ended, id, new_run, state, unix, Fixture};

/// The live runs by revision as `counts` reads them now.
async fn by_revision(counts: &dyn RunCounts) -> Vec<RevisionLiveRuns> {
    counts
        .live_runs_by_revision()
        .await
        .expect("live runs by revision")
}

/// `(revision, live)` of each entry of `fx`'s workflow, in the port's
/// order (workflow, then revision), as `expected` lists them (sorted here).
fn expected(fx: &Fixture, mut entries: Vec<(&str, u64)>) -> Vec<RevisionLiveRuns> {
    entries.sort_unstable();
    entries
        .into_iter()
        .map(|(revision, live)| RevisionLiveRuns {
            workflow: fx.workflow.clone(),
            revision: revision.to_owned(),
            live,
        })
        .collect()
}

/// A commit of run `id` read at `version` to `state`, nothing else.
fn plain_commit(id: &str, version: u64, state: RunState) -> Commit {
    Commit {
        review: None,
        run_id: id.into(),
        expected_version: version,
        at: committed_at(&state),
        state,
        ledger: BTreeMap::new(),
        complete: None,
        jobs: vec![],
    }
}

/// The move of run `id` read at `version` from `fx`'s revision to `to`.
fn move_to(fx: &Fixture, id: &str, version: u64, to: &str) -> RunMove {
    RunMove {
        run_id: id.into(),
        at: unix(30),
        expected_version: version,
        from_revision: fx.revision.clone(),
        to_revision: to.into(),
        from_step: "due".into(),
        to_step: "due".into(),
        state: state(id),
        ledger: BTreeMap::new(),
        bindings: BTreeMap::new(),
    }
}

/// From an empty store: three runs admitted on `fx`'s revision count 3
/// there (a repeated start and a step of a live run change nothing); one
/// ended counts no more; one moved to `other_revision` counts there and no
/// more on `fx`'s (a stale repeat of the move changes nothing); a revision
/// whose last live run ended is left out.
///
/// `other_revision` is another revision of `fx`'s workflow the store holds
/// (the PostgreSQL store holds every revision ever applied).
///
/// # Panics
/// When the store breaks the rule (a test assertion).
pub async fn live_runs_by_revision_follow_admissions_ends_and_moves(
    admission: &dyn RunAdmission,
    queue: &dyn JobQueue,
    counts: &dyn RunCounts,
    moves: &dyn RunMoves,
    fx: &Fixture,
    other_revision: &str,
) {
    assert_eq!(by_revision(counts).await, vec![], "an empty store");
    let mut ids = Vec::new();
    for marker in ["live-a", "live-b", "live-c"] {
        let run = new_run(fx, marker, "alice", &format!("id-{marker}"), "d");
        ids.push(id(&admission.admit(run).await.expect("admit")));
    }
    let [a, b, c] = [&ids[0], &ids[1], &ids[2]];
    admission
        .admit(new_run(fx, "live-a2", "alice", "id-live-a", "d"))
        .await
        .expect("a repeated start");
    queue
        .commit(plain_commit(a, 1, state(a)))
        .await
        .expect("a step of a");
    assert_eq!(
        by_revision(counts).await,
        expected(fx, vec![(&fx.revision, 3)])
    );

    queue
        .commit(plain_commit(c, 1, ended(c, RunStatus::Finished)))
        .await
        .expect("c ends");
    assert_eq!(
        by_revision(counts).await,
        expected(fx, vec![(&fx.revision, 2)])
    );

    assert_eq!(
        moves.commit_move(&move_to(fx, b, 1, other_revision)).await,
        Ok(2)
    );
    let split = expected(fx, vec![(&fx.revision, 1), (other_revision, 1)]);
    assert_eq!(by_revision(counts).await, split, "b moved");
    assert_eq!(
        moves.commit_move(&move_to(fx, b, 1, other_revision)).await,
        Err(StoreError::Conflict)
    );
    assert_eq!(by_revision(counts).await, split, "nothing moved twice");

    queue
        .commit(plain_commit(b, 2, ended(b, RunStatus::Cancelled)))
        .await
        .expect("b ends on the other revision");
    assert_eq!(
        by_revision(counts).await,
        expected(fx, vec![(&fx.revision, 1)]),
        "a drained revision is left out"
    );
    queue
        .commit(plain_commit(a, 2, ended(a, RunStatus::Finished)))
        .await
        .expect("a ends");
    assert_eq!(by_revision(counts).await, vec![]);
}
