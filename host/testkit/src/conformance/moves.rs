//! Moving a waiting run to another revision ([`RunMoves::commit_move`]):
//! fenced by the run's version and revision, never an ended run, the
//! wait's observation renamed and every other job kept.

use std::collections::BTreeMap;

use coordinator_ports::store::{
    Admitted, Commit, JobKind, JobQueue, MoveRecord, NewJob, RunAdmission, RunMove, RunMoves,
    RunReads, StepLedger, StoreError,
};

use super::{committed_at, ended, id, new_run, unix, Fixture};

/// The move of run `run_id` (read at `version`, on `fx`'s revision) from
/// wait `due` to `due-b`, to `fx`'s revision again (a store that keeps
/// definitions holds only that one here), recording `notices` as bound to
/// `binding`.
fn a_move(fx: &Fixture, run_id: &str, version: u64, binding: &str) -> RunMove {
    let mut state = super::state(run_id);
    state.path.push("moved-marker".into());
    let record = MoveRecord {
        at: unix(30),
        from_revision: fx.revision.clone(),
        to_revision: fx.revision.clone(),
        from_step: "due".into(),
        to_step: "due-b".into(),
        certificate: format!("sha256:{}", "c".repeat(64)),
    };
    let ledger = BTreeMap::from([(
        "due".to_owned(),
        StepLedger {
            started_at: Some(unix(5)),
            moves: vec![record],
            ..StepLedger::default()
        },
    )]);
    RunMove {
        run_id: run_id.into(),
        at: unix(30),
        expected_version: version,
        from_revision: fx.revision.clone(),
        to_revision: fx.revision.clone(),
        from_step: "due".into(),
        to_step: "due-b".into(),
        state,
        ledger,
        bindings: BTreeMap::from([
            ("notices".to_owned(), binding.to_owned()),
            ("reviews".to_owned(), binding.to_owned()),
        ]),
    }
}

/// A move commits the run's revision, state, ledger (the move recorded)
/// and bindings with its version +1, renames the wait's observation and
/// keeps its timer; a stale version, another revision, an ended run and
/// an unknown run change nothing.
///
/// # Panics
/// When the store breaks the rule (a test assertion).
pub async fn moves_are_fenced_by_version_and_revision(
    admission: &dyn RunAdmission,
    queue: &dyn JobQueue,
    reads: &dyn RunReads,
    moves: &dyn RunMoves,
    fx: &Fixture,
) {
    let mut run = new_run(fx, "run-moved", "alice", "identity-moved", "digest-moved");
    run.jobs.push(NewJob {
        kind: JobKind::Observe {
            step: "due".into(),
            connection: "reviews".into(),
            completion: "result".into(),
            review_request_id: "review-1".into(),
            last_observed_at: None,
        },
        due_at: unix(40),
    });
    let admitted = admission.admit(run).await.expect("admit");
    assert!(matches!(admitted, Admitted::Created(_)));
    let run_id = id(&admitted);
    let binding = format!("sha256:{}", "2".repeat(64));

    // Another revision than the run's, or a stale version: a conflict.
    let mut elsewhere = a_move(fx, &run_id, 1, &binding);
    elsewhere.from_revision = format!("sha256:{}", "e".repeat(64));
    let stale = a_move(fx, &run_id, 7, &binding);
    for refused in [elsewhere, stale] {
        assert_eq!(moves.commit_move(&refused).await, Err(StoreError::Conflict));
    }
    let before = reads.get(&run_id).await.expect("get").expect("run");
    assert_eq!((before.version, before.state.path.len()), (1, 1));

    let moved = a_move(fx, &run_id, 1, &binding);
    assert_eq!(moves.commit_move(&moved).await, Ok(2));
    let after = reads.get(&run_id).await.expect("get").expect("run");
    assert_eq!(after.version, 2);
    assert_eq!(after.revision, moved.to_revision);
    assert_eq!(after.state, moved.state);
    assert_eq!(after.ledger, moved.ledger);
    assert_eq!(after.bindings, moved.bindings);
    let jobs = reads.jobs(&run_id).await.expect("jobs");
    let steps: Vec<Option<&str>> = jobs
        .iter()
        .map(|j| match &j.kind {
            JobKind::Observe { step, .. } => Some(step.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        steps,
        vec![None, Some("due-b")],
        "timer kept, observation renamed"
    );

    // The same move again (the version it read is gone): nothing twice.
    assert_eq!(moves.commit_move(&moved).await, Err(StoreError::Conflict));
    // An unknown run.
    let mut nobody = a_move(fx, "run-nobody", 1, &binding);
    nobody.run_id = "run-nobody".into();
    assert_eq!(moves.commit_move(&nobody).await, Err(StoreError::NotFound));

    // An ended run is never moved.
    let end = ended(&run_id, coordinator_vm::RunStatus::Cancelled);
    queue
        .commit(Commit {
            review: None,
            run_id: run_id.clone(),
            expected_version: 2,
            at: committed_at(&end),
            state: end,
            ledger: BTreeMap::new(),
            complete: None,
            jobs: vec![],
        })
        .await
        .expect("end the run");
    assert_eq!(
        moves.commit_move(&a_move(fx, &run_id, 3, &binding)).await,
        Err(StoreError::Conflict)
    );
}
