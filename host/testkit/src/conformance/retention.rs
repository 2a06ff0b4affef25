//! Retention and the restore hold.

use super::*;

use coordinator_ports::store::RunRecord;

/// An ended state of run `marker` that ended at `ended_at` (RFC 3339).
pub fn ended_at(marker: &str, status: RunStatus, ended_at: &str) -> RunState {
    let mut s = ended(marker, status);
    s.now = instant(ended_at);
    s.ended_at = Some(s.now);
    s
}

/// Retention (seed 000 "Erase ended payloads"): only runs that ended before
/// the cutoff, never live, held or uncertain work, oldest ended first, at
/// most `limit` per call, `more` while others qualify. An erased run keeps
/// its id, workflow, revision, owner, state name, timestamps, start
/// identity and request digest; its input, path, outputs and output are
/// gone; a repeat of its start key still finds it (another digest is a
/// conflict); a commit on it is refused `run.payload-erased`.
pub async fn retention_erases_only_ended_payloads(
    admission: &dyn RunAdmission,
    queue: &dyn JobQueue,
    reads: &dyn RunReads,
    maintenance: &dyn Maintenance,
    fx: &Fixture,
) {
    let cutoff = instant("2026-02-01T00:00:00Z").unix_seconds();
    let before = admit_and_settle_runs_around_the_cutoff(admission, queue, reads, fx).await;
    let b = erase_ended_payloads_oldest_first_in_batches(reads, maintenance, cutoff).await;
    erased_runs_keep_their_record_and_lose_their_payload(reads, &before, &b).await;
    erased_run_answers_its_start_key_and_refuses_commits(admission, queue, reads, fx, &b).await;
    erased_runs_still_answer_list(reads).await;
}

/// Admits runs `run-a` to `run-f` and settles them: `a` ended after `b`;
/// `c` ended earliest holding an unknown effect; `d` is live; `e` is held;
/// `f` ended after the cutoff. Returns each run as it was before erasure.
async fn admit_and_settle_runs_around_the_cutoff(
    admission: &dyn RunAdmission,
    queue: &dyn JobQueue,
    reads: &dyn RunReads,
    fx: &Fixture,
) -> BTreeMap<&'static str, RunRecord> {
    for (id, sub) in [
        ("run-a", "alice"),
        ("run-b", "alice"),
        ("run-c", "bob"),
        ("run-d", "bob"),
        ("run-e", "bob"),
        ("run-f", "bob"),
    ] {
        admission
            .admit(new_run(
                fx,
                id,
                sub,
                &format!("id-{id}"),
                &format!("d-{id}"),
            ))
            .await
            .expect("admit");
    }
    // a ended after b: b goes first.
    settle(
        queue,
        "run-a",
        ended_at("run-a", RunStatus::Finished, "2026-01-01T00:05:00Z"),
    )
    .await;
    settle(
        queue,
        "run-b",
        ended_at("run-b", RunStatus::Failed, "2026-01-01T00:03:00Z"),
    )
    .await;
    // c ended earliest but holds an unknown effect: uncertain, kept.
    let mut uncertain = ended_at(
        "run-c",
        RunStatus::CancelledAfterEffect,
        "2026-01-01T00:01:00Z",
    );
    uncertain.effects.insert("pay".into(), EffectState::Unknown);
    settle(queue, "run-c", uncertain).await;
    // d is live (running, with its timer job); e is held.
    let mut held = state("run-e");
    held.status = RunStatus::Attention;
    held.effects.insert("pay".into(), EffectState::Unknown);
    settle(queue, "run-e", held).await;
    // f ended after the cutoff.
    settle(
        queue,
        "run-f",
        ended_at("run-f", RunStatus::Finished, "2026-03-01T00:00:00Z"),
    )
    .await;
    let mut before = BTreeMap::new();
    for id in ["run-a", "run-b", "run-c", "run-d", "run-e", "run-f"] {
        before.insert(id, reads.get(id).await.expect("get").expect("the run"));
    }
    before
}

/// Erases before `cutoff` (Unix seconds): one at a time with `more` while
/// others qualify, `run-b` (the oldest ended) first, then `run-a`, then
/// nothing again. Returns `run-b` as erased.
async fn erase_ended_payloads_oldest_first_in_batches(
    reads: &dyn RunReads,
    maintenance: &dyn Maintenance,
    cutoff: i64,
) -> RunRecord {
    assert_eq!(
        maintenance
            .erase_payloads(unix(cutoff), 1, unix(5_000_000_000))
            .await,
        Ok(Erasure {
            erased: 1,
            more: true
        }),
        "at most `limit`, and more remain"
    );
    let b = reads.get("run-b").await.expect("get").expect("run-b");
    assert!(b.payload_erased, "the oldest ended run goes first");
    assert!(
        !reads
            .get("run-a")
            .await
            .expect("get")
            .expect("run-a")
            .payload_erased
    );
    assert_eq!(
        maintenance
            .erase_payloads(unix(cutoff), 100, unix(5_000_000_000))
            .await,
        Ok(Erasure {
            erased: 1,
            more: false
        })
    );
    assert_eq!(
        maintenance
            .erase_payloads(unix(cutoff), 100, unix(5_000_000_000))
            .await,
        Ok(Erasure::default()),
        "an erased run is never erased again"
    );
    b
}

/// What the erased `b` kept of its record as it was `before`, and what it
/// lost; `run-a` is erased too; the other runs and `run-d`'s job are
/// untouched.
async fn erased_runs_keep_their_record_and_lose_their_payload(
    reads: &dyn RunReads,
    before: &BTreeMap<&'static str, RunRecord>,
    b: &RunRecord,
) {
    let was = before.get("run-b").expect("kept");
    assert_eq!(
        (&b.id, &b.workflow, &b.revision, &b.owner),
        (&was.id, &was.workflow, &was.revision, &was.owner)
    );
    assert_eq!(
        (&b.start_identity, &b.request_digest, b.sequence),
        (&was.start_identity, &was.request_digest, was.sequence)
    );
    assert_eq!(b.status(), RunStatus::Failed);
    assert_eq!(b.state.admitted_at, was.state.admitted_at);
    assert_eq!(b.state.deadline_at, was.state.deadline_at);
    assert_eq!(
        b.state.ended_at.map(|t| t.to_string()).as_deref(),
        Some("2026-01-01T00:03:00Z")
    );
    assert_eq!(b.state.input, serde_json::Value::Null);
    assert!(b.state.output.is_none() && b.state.outcome.is_none());
    assert!(b.state.path.is_empty() && b.state.outputs.is_empty());
    assert!(b.version > was.version, "erasure moves the version");
    let a = reads.get("run-a").await.expect("get").expect("run-a");
    assert!(a.payload_erased);
    assert_eq!(
        a.state.ended_at.map(|t| t.to_string()).as_deref(),
        Some("2026-01-01T00:05:00Z")
    );
    for id in ["run-c", "run-d", "run-e", "run-f"] {
        let now = reads.get(id).await.expect("get").expect("the run");
        assert_eq!(Some(&now), before.get(id), "{id} is untouched");
    }
    assert_eq!(reads.jobs("run-d").await.map(|j| j.len()), Ok(1));
}

/// The spent start identity of the erased `b` outlives its payload (a
/// repeat finds it, another digest conflicts, never a second run), and a
/// commit on it is refused `run.payload-erased`.
async fn erased_run_answers_its_start_key_and_refuses_commits(
    admission: &dyn RunAdmission,
    queue: &dyn JobQueue,
    reads: &dyn RunReads,
    fx: &Fixture,
    b: &RunRecord,
) {
    match admission
        .admit(new_run(fx, "run-b2", "alice", "id-run-b", "d-run-b"))
        .await
    {
        Ok(Admitted::Existing(r)) => assert_eq!((r.id.as_str(), r.payload_erased), ("run-b", true)),
        other => panic!("the erased run answers its repeated key: {other:?}"),
    }
    assert_eq!(
        admission
            .admit(new_run(fx, "run-b3", "alice", "id-run-b", "other"))
            .await,
        Ok(Admitted::Conflict)
    );
    assert_eq!(reads.get("run-b2").await, Ok(None), "never a second run");

    // Nothing moves an erased run.
    let refused = queue
        .commit(Commit {
            review: None,
            run_id: "run-b".into(),
            expected_version: b.version,
            at: committed_at(&state("run-b")),
            state: state("run-b"),
            ledger: BTreeMap::new(),
            complete: None,
            jobs: vec![],
        })
        .await;
    assert!(
        matches!(
            refused,
            Err(StoreError::Refused {
                code: "run.payload-erased",
                ..
            })
        ),
        "{refused:?}"
    );
}

/// Status and list still answer: all six runs, `a` and `b` erased, and
/// alice's failed run is `b`.
async fn erased_runs_still_answer_list(reads: &dyn RunReads) {
    let all = reads
        .list(&RunFilter {
            limit: 100,
            ..RunFilter::default()
        })
        .await
        .expect("list");
    assert_eq!(all.runs.len(), 6);
    assert_eq!(
        all.runs.iter().filter(|r| r.payload_erased).count(),
        2,
        "a and b"
    );
    let failed = reads
        .list(&RunFilter {
            state: Some(RunStatus::Failed),
            owner: Some(owner("alice")),
            limit: 100,
            ..RunFilter::default()
        })
        .await
        .expect("list");
    assert_eq!(failed.runs.first().map(|r| r.id.as_str()), Some("run-b"));
}

/// The restore hold's store side (docs/operations.md "Restore from a
/// backup"): under the hold only receipt lookups are leased and nothing is
/// marked `sending`; a lease under another restore epoch is refused
/// (`restore.lease-incompatible`) and leases nothing; an instance without
/// an epoch (`--recovery-only`) gets receipt lookups only; the prepared
/// commands of mutations are claimed whoever leased them, reads are not.
pub async fn restore_hold_leases_lookups_only_and_fences_old_epochs(
    admission: &dyn RunAdmission,
    queue: &dyn JobQueue,
    holds: &dyn HoldsAndReviews,
    fx: &Fixture,
) {
    use coordinator_ports::store::Holds;
    let mut run = new_run(fx, "run-r", "alice", "id-r", "d-r");
    let lookup = JobKind::LookupReceipt {
        step: "lookup".into(),
        operation_id: "messaging.send-message".into(),
        connection: "notices".into(),
        idempotency_key: "key-lookup".into(),
        lookup: 1,
    };
    let read = JobKind::Dispatch {
        dispatch: DispatchCommand {
            step: "read".into(),
            operation_id: "breg.read-record".into(),
            connection: "applications".into(),
            action: None,
            command: json!({"recordId": "r-1"}),
            attempt: 1,
            resend_safe: true,
        },
        idempotency_key: None,
    };
    run.jobs = [dispatch("send", 1), lookup.clone(), read]
        .into_iter()
        .map(|kind| NewJob {
            kind,
            due_at: unix(10),
        })
        .collect();
    admission.admit(run).await.expect("admit");
    let ask = |owner: &'static str, epoch: Option<u64>| LeaseRequest {
        owner,
        now: unix(20),
        lease_until: unix(25),
        limit: 10,
        epoch,
        run_id: None,
        receipt_lookups_only: false,
    };
    // A recovery-only instance (no epoch) is given the lookup only.
    let got = queue.lease(&ask("recovery", None)).await.expect("lease");
    assert_eq!(
        got.iter().map(|j| j.kind.clone()).collect::<Vec<_>>(),
        vec![lookup.clone()]
    );
    // The ordinary worker leases the mutation and marks it sending.
    let got = queue.lease(&ask("w1", Some(0))).await.expect("lease");
    assert_eq!(got.len(), 2, "{got:?}");
    let send = got
        .iter()
        .find(|j| j.kind == dispatch("send", 1))
        .expect("the mutation")
        .id;
    queue.mark_sending(send, "w1", 0).await.expect("sending");
    // The restore hold is placed (epoch 1).
    let placed = Holds {
        restore: true,
        admission: true,
        execution_recovery_completed: false,
        restore_epoch: 1,
    };
    assert_eq!(holds.swap_holds(&Holds::default(), &placed).await, Ok(true));
    // The old process is refused, whatever it asks.
    assert_eq!(
        queue.lease(&ask("w1", Some(0))).await,
        Err(StoreError::LeaseIncompatible {
            process: 0,
            store: 1
        })
    );
    assert_eq!(
        queue.mark_sending(send, "w1", 0).await,
        Err(StoreError::LeaseLost)
    );
    // A process of the new epoch is given lookups only while the hold
    // stands, and cannot mark anything sending.
    let after = LeaseRequest {
        now: unix(30),
        lease_until: unix(40),
        ..ask("w2", Some(1))
    };
    let got = queue.lease(&after).await.expect("lease");
    assert!(
        got.iter()
            .all(|j| matches!(j.kind, JobKind::LookupReceipt { .. })),
        "{got:?}"
    );
    assert_eq!(
        queue.mark_sending(send, "w1", 1).await,
        Err(StoreError::LeaseLost)
    );
    // The mutation is claimed from its holder; the read is not.
    let claimed = queue
        .claim_restored_commands("sweeper", unix(100), 10)
        .await
        .expect("claim");
    assert_eq!(claimed.iter().map(|j| j.id).collect::<Vec<_>>(), vec![send]);
    let first = claimed.first().expect("claimed");
    assert_eq!(first.state, JobState::Sending);
    assert_eq!(
        first.lease.as_ref().map(|l| l.owner.as_str()),
        Some("sweeper")
    );
    queue
        .discard(send, "sweeper")
        .await
        .expect("the sweeper holds it");
}
