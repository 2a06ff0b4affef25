//! What operators read and hold: holds, live bindings, reviews, counts.

use super::*;

/// The holds start released; a swap succeeds only from the holds it
/// expects, so a change made meanwhile by another process is never lost.
pub async fn holds_are_swapped_only_from_what_was_read(holds: &dyn HoldsAndReviews) {
    use coordinator_ports::store::Holds;
    assert_eq!(holds.holds().await, Ok(Holds::default()));
    let placed = Holds {
        restore: true,
        admission: true,
        execution_recovery_completed: false,
        restore_epoch: 1,
    };
    assert_eq!(holds.swap_holds(&Holds::default(), &placed).await, Ok(true));
    assert_eq!(holds.holds().await, Ok(placed.clone()));
    assert_eq!(
        holds.swap_holds(&Holds::default(), &Holds::default()).await,
        Ok(false),
        "a stale expectation changes nothing"
    );
    let attested = Holds {
        execution_recovery_completed: true,
        ..placed.clone()
    };
    assert_eq!(holds.swap_holds(&placed, &attested).await, Ok(true));
    assert_eq!(holds.holds().await, Ok(attested.clone()));
    let stale_epoch = Holds {
        restore_epoch: 0,
        ..attested.clone()
    };
    assert_eq!(
        holds.swap_holds(&stale_epoch, &Holds::default()).await,
        Ok(false),
        "the restore epoch is part of what a swap expects"
    );
    assert_eq!(holds.holds().await, Ok(attested));
}

/// `live_bindings` counts, per (connection, digest), the runs that have not
/// ended; an ended run no longer counts.
pub async fn live_bindings_count_runs_that_have_not_ended(
    admission: &dyn RunAdmission,
    queue: &dyn JobQueue,
    reads: &dyn RunReads,
    fx: &Fixture,
) {
    assert_eq!(reads.live_bindings().await, Ok(vec![]));
    let other = format!("sha256:{}", "2".repeat(64));
    admission
        .admit(new_run(fx, "run-a", "alice", "id-1", "d"))
        .await
        .expect("admit");
    admission
        .admit(new_run(fx, "run-b", "alice", "id-2", "d"))
        .await
        .expect("admit");
    let mut c = new_run(fx, "run-c", "bob", "id-3", "d");
    c.bindings = [
        ("notices".to_owned(), other.clone()),
        ("review".to_owned(), other.clone()),
    ]
    .into();
    admission.admit(c).await.expect("admit");
    let binding =
        |connection: &str, digest: &str, runs| coordinator_runtime::binding::LiveBinding {
            connection: connection.into(),
            digest: digest.into(),
            runs,
        };
    assert_eq!(
        reads.live_bindings().await,
        Ok(vec![
            binding("notices", NOTICES_BINDING, 2),
            binding("notices", &other, 1),
            binding("review", &other, 1),
        ])
    );
    let v = queue
        .commit(Commit {
            review: None,
            run_id: "run-c".into(),
            expected_version: 1,
            at: committed_at(&ended("run-c", RunStatus::Cancelled)),
            state: ended("run-c", RunStatus::Cancelled),
            ledger: BTreeMap::new(),
            complete: None,
            jobs: vec![],
        })
        .await;
    assert_eq!(v, Ok(2));
    assert_eq!(
        reads.live_bindings().await,
        Ok(vec![binding("notices", NOTICES_BINDING, 2)]),
        "an ended run's bindings no longer count"
    );
}

/// The review a commit records follows [`coordinator_ports::store::Review::after`]:
/// `required` always, another outcome only over `required`; the survey
/// counts live runs needing review and live runs with an unknown effect;
/// attesting turns every `required` into `attested`. `find_start` answers
/// a known identity without admitting anything.
pub async fn reviews_are_recorded_surveyed_and_attested(
    admission: &dyn RunAdmission,
    queue: &dyn JobQueue,
    reads: &dyn RunReads,
    holds: &dyn HoldsAndReviews,
    fx: &Fixture,
) {
    use coordinator_ports::store::{Review, ReviewSurvey};
    for (id, identity) in [("run-x", "id-x"), ("run-y", "id-y")] {
        admission
            .admit(new_run(fx, id, "alice", identity, "d"))
            .await
            .expect("admit");
    }
    assert_eq!(
        admission
            .find_start("id-x", "d")
            .await
            .map(|a| a.map(|a| id(&a))),
        Ok(Some("run-x".to_owned()))
    );
    assert_eq!(
        admission.find_start("id-x", "other").await,
        Ok(Some(Admitted::Conflict))
    );
    assert_eq!(admission.find_start("id-new", "d").await, Ok(None));
    let commit = |run: &str, version: u64, review: Option<Review>, held: bool| {
        let mut st = state(run);
        if held {
            st.status = RunStatus::Attention;
            st.effects.insert("send".into(), EffectState::Unknown);
        }
        Commit {
            review,
            run_id: run.into(),
            expected_version: version,
            at: committed_at(&st),
            state: st,
            ledger: BTreeMap::new(),
            complete: None,
            jobs: vec![],
        }
    };
    let commit_it = |c: Commit| async move { queue.commit(c).await.expect("commit") };
    commit_it(commit("run-x", 1, Some(Review::Reconciled), false)).await;
    assert_eq!(
        reads.get("run-x").await.expect("get").expect("run").review,
        None,
        "an outcome over no review records nothing"
    );
    commit_it(commit("run-x", 2, Some(Review::Required), true)).await;
    commit_it(commit("run-y", 1, Some(Review::Required), true)).await;
    assert_eq!(
        holds.review_survey().await,
        Ok(ReviewSurvey {
            review_required: 2,
            unknown_effects: 2,
            ended_unknown_effects: 0,
        })
    );
    commit_it(commit("run-x", 3, None, true)).await;
    assert_eq!(
        reads.get("run-x").await.expect("get").expect("run").review,
        Some(Review::Required),
        "no review leaves it"
    );
    commit_it(commit("run-x", 4, Some(Review::Cancelled), false)).await;
    assert_eq!(
        reads.get("run-x").await.expect("get").expect("run").review,
        Some(Review::Cancelled)
    );
    assert_eq!(
        holds.review_survey().await,
        Ok(ReviewSurvey {
            review_required: 1,
            unknown_effects: 1,
            ended_unknown_effects: 0,
        })
    );
    assert_eq!(holds.attest_reviews().await, Ok(1));
    assert_eq!(
        reads.get("run-y").await.expect("get").expect("run").review,
        Some(Review::Attested)
    );
    assert_eq!(
        holds.review_survey().await.map(|v| v.review_required),
        Ok(0)
    );
    // A run that ends still holding an unknown effect is counted apart.
    let mut ended = state("run-y");
    ended.status = RunStatus::Cancelled;
    ended.ended_at = Some(instant("2026-01-01T00:05:00Z"));
    ended.effects.insert("send".into(), EffectState::Unknown);
    commit_it(Commit {
        at: committed_at(&ended),
        state: ended,
        ..commit("run-y", 2, None, true)
    })
    .await;
    assert_eq!(
        holds.review_survey().await,
        Ok(ReviewSurvey {
            review_required: 0,
            unknown_effects: 0,
            ended_unknown_effects: 1,
        })
    );
}

/// A running state of `marker` waiting as `pending` says (the VM's JSON:
/// `{"kind": "wake", ...}`, `{"kind": "completion", ...}`), or in no wait.
fn waiting(marker: &str, pending: serde_json::Value) -> RunState {
    let mut value = serde_json::to_value(state(marker)).expect("a state serialises");
    if let Some(object) = value.as_object_mut() {
        object.insert("pending".into(), pending);
    }
    serde_json::from_value(value).expect("a valid run state")
}

/// The counts ([`RunCounts`]) follow every change of the runs: admissions,
/// commits to other states, waits entered and left, unknown effects held
/// and kept after the end, reviews, dispatch jobs leased and marked
/// `sending`; a refused commit changes nothing.
pub async fn counts_follow_every_change(
    admission: &dyn RunAdmission,
    queue: &dyn JobQueue,
    counts: &dyn RunCounts,
    fx: &Fixture,
) {
    admit_runs_waiting_and_held_then_count(admission, counts, fx).await;
    commit_counted_runs_to_other_states_then_count(queue, counts).await;
    let send = lease_and_mark_sending_the_counted_dispatch(queue, counts).await;
    finish_the_counted_run_with_its_dispatch(queue, counts, send).await;
}

/// The live counts as `counts` reads them now.
async fn live_counts_now(counts: &dyn RunCounts) -> LiveCounts {
    counts.live_counts().await.expect("counts")
}

/// A commit of run `id` from `version` to `state` with new `jobs` and
/// `review`, completing no job.
fn counted_commit(
    id: &str,
    version: u64,
    state: RunState,
    jobs: Vec<NewJob>,
    review: Option<coordinator_ports::store::Review>,
) -> Commit {
    Commit {
        run_id: id.into(),
        expected_version: version,
        at: committed_at(&state),
        state,
        ledger: BTreeMap::new(),
        complete: None,
        jobs,
        review,
    }
}

/// From an empty store: `count-a` waits on a wake, `count-b` on a
/// completion (both admitted in one batch), `count-c` is held with an
/// unknown effect; a repeated start changes nothing.
async fn admit_runs_waiting_and_held_then_count(
    admission: &dyn RunAdmission,
    counts: &dyn RunCounts,
    fx: &Fixture,
) {
    assert_eq!(
        live_counts_now(counts).await,
        LiveCounts::default(),
        "an empty store"
    );
    let wake = json!({"kind": "wake", "step": 0, "at": "2026-01-01T00:01:00Z"});
    let completion = json!({"kind": "completion", "step": 0, "timeoutAt": "2026-01-02T00:00:00Z"});
    let mut a = new_run(fx, "count-a", "alice", "count-id-a", "d");
    a.state = waiting("count-a", wake);
    let mut b = new_run(fx, "count-b", "alice", "count-id-b", "d");
    b.state = waiting("count-b", completion);
    let mut c = new_run(fx, "count-c", "alice", "count-id-c", "d");
    c.state.status = RunStatus::Attention;
    c.state
        .effects
        .insert("notify".into(), EffectState::Unknown);
    let answers = admission
        .admit_batch(vec![(a, None), (b, None)])
        .await
        .into_iter()
        .map(|r| r.expect("admitted").0)
        .collect::<Vec<_>>();
    assert!(answers.iter().all(|r| matches!(r, Admitted::Created(_))));
    admission.admit(c).await.expect("admit");
    assert_eq!(
        live_counts_now(counts).await,
        LiveCounts {
            running: 2,
            attention: 1,
            unknown_effects: 1,
            wait_until: 1,
            wait_for: 1,
            ..LiveCounts::default()
        }
    );
    // A repeated start changes nothing.
    admission
        .admit(new_run(fx, "count-a2", "alice", "count-id-a", "d"))
        .await
        .expect("repeat");
}

/// `a` leaves its wait for a dispatch; `c` ends still holding its
/// unknown effect; `b` is asked to cancel and its review is required; a
/// refused commit (a stale version) moves nothing.
async fn commit_counted_runs_to_other_states_then_count(
    queue: &dyn JobQueue,
    counts: &dyn RunCounts,
) {
    queue
        .commit(counted_commit(
            "count-a",
            1,
            state("count-a"),
            vec![NewJob {
                kind: dispatch("notify", 1),
                due_at: unix(10),
            }],
            None,
        ))
        .await
        .expect("commit a");
    let mut failed = ended("count-c", RunStatus::Failed);
    failed.effects.insert("notify".into(), EffectState::Unknown);
    queue
        .commit(counted_commit("count-c", 1, failed, Vec::new(), None))
        .await
        .expect("commit c");
    let mut cancelling = state("count-b");
    cancelling.status = RunStatus::CancelRequested;
    queue
        .commit(counted_commit(
            "count-b",
            1,
            cancelling,
            Vec::new(),
            Some(coordinator_ports::store::Review::Required),
        ))
        .await
        .expect("commit b");
    // Refused (a stale version): nothing moves.
    assert_eq!(
        queue
            .commit(counted_commit(
                "count-b",
                1,
                state("count-b"),
                Vec::new(),
                None
            ))
            .await
            .map(|_| ()),
        Err(StoreError::Conflict)
    );
    assert_eq!(
        live_counts_now(counts).await,
        LiveCounts {
            running: 1,
            cancel_requested: 1,
            ended_unknown_effects: 1,
            review_required: 1,
            dispatch_ready: 1,
            ..LiveCounts::default()
        }
    );
}

/// `a`'s dispatch counts as leased once leased, then as sending once
/// marked; returns its job id.
async fn lease_and_mark_sending_the_counted_dispatch(
    queue: &dyn JobQueue,
    counts: &dyn RunCounts,
) -> u64 {
    let leased = lease(queue, "w1", 20, 100, 10).await.expect("lease");
    let send = leased
        .iter()
        .find(|j| matches!(j.kind, JobKind::Dispatch { .. }))
        .expect("the dispatch")
        .id;
    let counted = live_counts_now(counts).await;
    assert_eq!((counted.dispatch_ready, counted.dispatch_leased), (0, 1));
    queue.mark_sending(send, "w1", 0).await.expect("sending");
    let counted = live_counts_now(counts).await;
    assert_eq!((counted.dispatch_leased, counted.dispatch_sending), (0, 1));
    send
}

/// `a` finishes with its dispatch `send`: no live run is left running.
async fn finish_the_counted_run_with_its_dispatch(
    queue: &dyn JobQueue,
    counts: &dyn RunCounts,
    send: u64,
) {
    queue
        .commit(Commit {
            complete: Some((send, "w1".into())),
            ..counted_commit(
                "count-a",
                2,
                ended("count-a", RunStatus::Finished),
                Vec::new(),
                None,
            )
        })
        .await
        .expect("finish a");
    assert_eq!(
        live_counts_now(counts).await,
        LiveCounts {
            cancel_requested: 1,
            ended_unknown_effects: 1,
            review_required: 1,
            ..LiveCounts::default()
        }
    );
}
