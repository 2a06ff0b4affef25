//! The job queue: leases, deadlines as timer jobs, release and discard, bringing observations forward, listing pages.

use super::*;

/// Leases: only due jobs, oldest due first, never two owners at once; an
/// expired lease comes back with its state (`sending`); commits check the
/// version and the lease; an ended run loses every job.
pub async fn leases_expire_and_commits_check_versions(
    admission: &dyn RunAdmission,
    queue: &dyn JobQueue,
    reads: &dyn RunReads,
    fx: &Fixture,
) {
    let mut run = new_run(fx, "run-a", "alice", "id-1", "d");
    run.jobs.push(NewJob {
        kind: dispatch("notify", 1),
        due_at: unix(50),
    });
    run.jobs.push(NewJob {
        kind: JobKind::Timer {
            at: instant("1970-01-01T01:00:00Z"),
            wake: WakeKind::Deadline,
        },
        due_at: unix(3_600),
    });
    admission.admit(run).await.expect("admit");
    assert_eq!(next_due(queue).await, Some(50));
    assert!(lease(queue, "w1", 49, 100, 10)
        .await
        .expect("lease")
        .is_empty());
    let jobs = lease(queue, "w1", 60, 100, 10).await.expect("lease");
    let due: Vec<i64> = jobs.iter().map(|j| j.due_at.unix_seconds()).collect();
    assert_eq!(due, vec![50, 60], "oldest due first, not the later one");
    assert_eq!(
        next_due(queue).await,
        Some(3_600),
        "leased jobs are not waited for"
    );
    assert!(jobs.iter().all(|j| j
        .lease
        .as_ref()
        .is_some_and(|l| l.owner == "w1" && l.expires_at.unix_seconds() == 100)));
    let send = jobs
        .iter()
        .find(|j| matches!(j.kind, JobKind::Dispatch { .. }))
        .expect("the dispatch")
        .id;
    let timer = jobs
        .iter()
        .find(|j| matches!(j.kind, JobKind::Timer { .. }))
        .expect("the timer")
        .id;
    assert!(lease(queue, "w2", 99, 200, 10)
        .await
        .expect("lease")
        .is_empty());
    queue.mark_sending(send, "w1", 0).await.expect("sending");
    assert_eq!(
        queue.mark_sending(send, "w2", 0).await,
        Err(StoreError::LeaseLost)
    );
    assert_eq!(queue.discard(timer, "w2").await, Err(StoreError::LeaseLost));
    assert_eq!(
        queue.release(timer, "w2", unix(70), None).await,
        Err(StoreError::LeaseLost)
    );
    let again = lease(queue, "w2", 100, 200, 1).await.expect("lease");
    let first = again.first().expect("an expired lease comes back");
    assert_eq!(
        (first.id, first.state),
        (send, JobState::Sending),
        "with its state"
    );
    let commit = |v, owner: &str, status| Commit {
        review: None,
        run_id: "run-a".into(),
        expected_version: v,
        at: unix(300),
        state: if status == RunStatus::Running {
            state("run-a")
        } else {
            ended("run-a", status)
        },
        ledger: BTreeMap::new(),
        complete: Some((send, owner.to_owned())),
        jobs: vec![],
    };
    assert_eq!(
        queue.commit(commit(7, "w2", RunStatus::Finished)).await,
        Err(StoreError::Conflict)
    );
    assert_eq!(
        queue.commit(commit(1, "w1", RunStatus::Finished)).await,
        Err(StoreError::LeaseLost),
        "w1's lease expired and w2 took the job"
    );
    assert_eq!(
        reads.get("run-a").await.expect("get").map(|r| r.version),
        Some(1),
        "a refused commit changes nothing"
    );
    let mut missing = commit(1, "w2", RunStatus::Finished);
    missing.run_id = "nope".into();
    assert_eq!(queue.commit(missing).await, Err(StoreError::NotFound));
    assert_eq!(
        queue.commit(commit(1, "w2", RunStatus::Finished)).await,
        Ok(2)
    );
    assert!(
        reads.jobs("run-a").await.expect("jobs").is_empty(),
        "an ended run keeps no job (the leased timer and the deadline went too)"
    );
    assert_eq!(
        reads.get("run-a").await.expect("get").map(|r| r.status()),
        Some(RunStatus::Finished)
    );
    assert!(lease(queue, "w3", 10_000, 20_000, 10)
        .await
        .expect("lease")
        .is_empty());
}

/// The run deadline stays on the run until it is due: no job before; the
/// first lease at or after it creates the run's deadline timer job (once,
/// leased at once when timers may be leased, its instant rounded up to
/// whole seconds); `next_due` counts deadlines not yet jobs; a run that
/// ended never gets one; under a receipt-lookups-only lease the job is
/// created unleased, for whoever may lease timers.
pub async fn deadlines_become_timer_jobs_once_when_due(
    admission: &dyn RunAdmission,
    queue: &dyn JobQueue,
    reads: &dyn RunReads,
    fx: &Fixture,
) {
    let deadline = instant("2026-02-01T00:00:00Z").unix_seconds();
    let deadline_timer = |at: &str| JobKind::Timer {
        at: instant(at),
        wake: WakeKind::Deadline,
    };
    let admit = |id: &'static str, identity: &'static str, deadline_at: &'static str| {
        let mut run = new_run(fx, id, "alice", identity, "d");
        run.jobs = vec![];
        run.state.deadline_at = instant(deadline_at);
        async move { admission.admit(run).await.expect("admit") }
    };
    admit("run-a", "id-a", "2026-02-01T00:00:00Z").await;
    admit("run-b", "id-b", "2026-02-01T00:00:00Z").await;
    admit("run-c", "id-c", "2026-02-01T00:00:00.5Z").await;
    settle(queue, "run-b", ended("run-b", RunStatus::Finished)).await;
    assert_eq!(
        reads.jobs("run-a").await,
        Ok(vec![]),
        "no deadline job at admission"
    );
    assert_eq!(next_due(queue).await, Some(deadline));
    assert!(lease(queue, "w1", deadline - 1, deadline + 100, 10)
        .await
        .expect("lease")
        .is_empty());
    let leased = lease(queue, "w1", deadline, deadline + 10_000, 10)
        .await
        .expect("lease");
    let kinds: Vec<(&str, &JobKind, i64)> = leased
        .iter()
        .map(|j| (j.run_id.as_str(), &j.kind, j.due_at.unix_seconds()))
        .collect();
    assert_eq!(
        kinds,
        [("run-a", &deadline_timer("2026-02-01T00:00:00Z"), deadline)],
        "only the due deadline of the run that has not ended"
    );
    assert!(leased.iter().all(|j| j
        .lease
        .as_ref()
        .is_some_and(|l| l.owner == "w1" && l.expires_at.unix_seconds() == deadline + 10_000)));
    assert_eq!(
        next_due(queue).await,
        Some(deadline + 1),
        "run-c's deadline (a fraction past, rounded up) is not a job yet"
    );
    let leased = lease(queue, "w2", deadline + 1, deadline + 10_000, 10)
        .await
        .expect("lease");
    assert_eq!(
        leased
            .iter()
            .map(|j| (&j.kind, j.due_at.unix_seconds()))
            .collect::<Vec<_>>(),
        [(&deadline_timer("2026-02-01T00:00:01Z"), deadline + 1)],
        "rounded up, so the timer never fires before the deadline"
    );
    assert_eq!(next_due(queue).await, None);
    assert!(lease(queue, "w3", deadline + 200, deadline + 300, 10)
        .await
        .expect("lease")
        .is_empty());
    assert_eq!(
        reads.jobs("run-a").await.map(|j| j.len()),
        Ok(1),
        "made once, however often leases ask"
    );
    assert_eq!(reads.jobs("run-b").await, Ok(vec![]), "an ended run never");

    admit("run-d", "id-d", "2026-02-01T00:00:00Z").await;
    let lookups = queue
        .lease(&LeaseRequest {
            owner: "w4",
            now: unix(deadline + 400),
            lease_until: unix(deadline + 500),
            limit: 10,
            epoch: Some(0),
            run_id: None,
            receipt_lookups_only: true,
        })
        .await
        .expect("lease");
    assert!(lookups.is_empty(), "a timer is not a receipt lookup");
    let made = reads.jobs("run-d").await.expect("jobs");
    assert_eq!(
        made.iter()
            .map(|j| (&j.kind, j.lease.is_none()))
            .collect::<Vec<_>>(),
        [(&deadline_timer("2026-02-01T00:00:00Z"), true)],
        "made unleased"
    );
    assert_eq!(next_due(queue).await, Some(deadline));
    let leased = lease(queue, "w5", deadline + 400, deadline + 500, 10)
        .await
        .expect("lease");
    assert_eq!(
        leased.iter().map(|j| j.run_id.as_str()).collect::<Vec<_>>(),
        ["run-d"]
    );
}

/// `release` makes a job ready again at a new due time (optionally with a
/// new kind); `discard` deletes it.
pub async fn release_and_discard(
    admission: &dyn RunAdmission,
    queue: &dyn JobQueue,
    reads: &dyn RunReads,
    fx: &Fixture,
) {
    let mut run = new_run(fx, "run-a", "alice", "id-1", "d");
    run.jobs.push(NewJob {
        kind: dispatch("notify", 1),
        due_at: unix(60),
    });
    admission.admit(run).await.expect("admit");
    let jobs = lease(queue, "w1", 60, 1_000, 10).await.expect("lease");
    assert_eq!(jobs.len(), 2);
    let send = jobs
        .iter()
        .find(|j| matches!(j.kind, JobKind::Dispatch { .. }))
        .expect("dispatch")
        .id;
    let timer = jobs
        .iter()
        .find(|j| matches!(j.kind, JobKind::Timer { .. }))
        .expect("timer")
        .id;
    queue.mark_sending(send, "w1", 0).await.expect("sending");
    queue
        .release(send, "w1", unix(400), Some(dispatch("notify", 2)))
        .await
        .expect("release");
    queue.discard(timer, "w1").await.expect("discard");
    assert_eq!(queue.discard(timer, "w1").await, Err(StoreError::LeaseLost));
    let left = reads.jobs("run-a").await.expect("jobs");
    let job = left.first().expect("the dispatch is left");
    assert_eq!(left.len(), 1);
    assert_eq!(
        (
            &job.kind,
            job.due_at.unix_seconds(),
            job.state,
            job.lease.is_none()
        ),
        (&dispatch("notify", 2), 400, JobState::Ready, true)
    );
    assert!(lease(queue, "w2", 399, 2_000, 10)
        .await
        .expect("lease")
        .is_empty());
    assert_eq!(
        lease(queue, "w2", 400, 2_000, 10).await.map(|j| j.len()),
        Ok(1)
    );
}

/// `bring_forward` moves an observation to `max(now, last + floor)` and
/// never later; listing pages newest first with filters and a cursor.
pub async fn bring_forward_respects_the_floor_and_lists_page(
    admission: &dyn RunAdmission,
    queue: &dyn JobQueue,
    reads: &dyn RunReads,
    maintenance: &dyn Maintenance,
    fx: &Fixture,
) {
    let mut run = new_run(fx, "run-a", "alice", "id-1", "d");
    run.jobs = vec![NewJob {
        kind: JobKind::Observe {
            step: "wait".into(),
            connection: "review".into(),
            completion: "result".into(),
            review_request_id: "rr-1".into(),
            last_observed_at: Some(unix(1_000)),
        },
        due_at: unix(1_900),
    }];
    admission.admit(run).await.expect("admit");
    assert_eq!(queue.bring_forward("rr-1", unix(1_010), 30).await, Ok(1));
    let due =
        |jobs: Vec<coordinator_ports::store::Job>| jobs.first().map(|j| j.due_at.unix_seconds());
    assert_eq!(due(reads.jobs("run-a").await.expect("jobs")), Some(1_030));
    assert_eq!(
        queue.bring_forward("rr-1", unix(1_010), 30).await,
        Ok(0),
        "never later"
    );
    assert_eq!(queue.bring_forward("rr-2", unix(1_010), 30).await, Ok(0));
    admission
        .admit(new_run(fx, "run-b", "bob", "id-2", "d"))
        .await
        .expect("admit");
    admission
        .admit(new_run(fx, "run-c", "bob", "id-3", "d"))
        .await
        .expect("admit");
    // run-c moves to attention, held at `notify` with an unknown effect.
    let mut held = state("run-c");
    held.status = RunStatus::Attention;
    held.path.push("notify".into());
    held.effects.insert("notify".into(), EffectState::Unknown);
    settle(queue, "run-c", held).await;
    let ids = |page: &coordinator_ports::store::RunPage| -> Vec<String> {
        page.runs.iter().map(|r| r.id.clone()).collect()
    };
    let list = |f: RunFilter| async move { reads.list(&f).await.expect("list") };
    let page = list(RunFilter {
        limit: 2,
        ..RunFilter::default()
    })
    .await;
    assert_eq!(ids(&page), vec!["run-c", "run-b"], "newest first");
    let rest = list(RunFilter {
        limit: 2,
        cursor: page.next_cursor.clone(),
        ..RunFilter::default()
    })
    .await;
    assert_eq!(
        (ids(&rest), rest.next_cursor),
        (vec!["run-a".to_owned()], None)
    );
    let bobs = list(RunFilter {
        owner: Some(owner("bob")),
        limit: 100,
        ..RunFilter::default()
    })
    .await;
    assert_eq!(ids(&bobs), vec!["run-c", "run-b"]);
    let attention = list(RunFilter {
        attention: Some(true),
        limit: 100,
        ..RunFilter::default()
    })
    .await;
    assert_eq!(ids(&attention), vec!["run-c"]);
    let calm = list(RunFilter {
        attention: Some(false),
        state: Some(RunStatus::Running),
        limit: 0,
        ..RunFilter::default()
    })
    .await;
    assert_eq!(ids(&calm), vec!["run-b"], "limit 0 is clamped to 1");
    let other = list(RunFilter {
        workflows: Some(vec!["another".into()]),
        limit: 100,
        ..RunFilter::default()
    })
    .await;
    assert!(other.runs.is_empty());
    let mine = list(RunFilter {
        workflows: Some(vec![fx.workflow.clone(), "another".into()]),
        limit: 100,
        ..RunFilter::default()
    })
    .await;
    assert_eq!(mine.runs.len(), 3);
    list_filters_by_current_step_and_admission(reads).await;
    assert_eq!(
        reads
            .list(&RunFilter {
                cursor: Some("not-a-cursor".into()),
                limit: 10,
                ..RunFilter::default()
            })
            .await,
        Err(StoreError::BadCursor)
    );
    maintenance.ping().await.expect("ping");
}

/// `step`, `effect` and `admitted_before` over run-a, run-b (at
/// `due`) and run-c (held at `notify`, `unknown`), all admitted at
/// 2026-01-01T00:00:00Z: step and effect are decided on the page scanned,
/// so a page may be empty while its cursor goes on.
async fn list_filters_by_current_step_and_admission(reads: &dyn RunReads) {
    let ids = |f: RunFilter| async move {
        let page = reads.list(&f).await.expect("list");
        let ids: Vec<String> = page.runs.iter().map(|r| r.id.clone()).collect();
        (ids, page.next_cursor.is_some())
    };
    let filter = |step: Option<&str>, effect: Option<EffectState>, limit: u32| RunFilter {
        step: step.map(str::to_owned),
        effect,
        limit,
        ..RunFilter::default()
    };
    let held = (vec!["run-c".to_owned()], false);
    assert_eq!(ids(filter(Some("notify"), None, 100)).await, held);
    assert_eq!(
        ids(filter(Some("notify"), Some(EffectState::Unknown), 100)).await,
        held
    );
    assert_eq!(
        ids(filter(None, Some(EffectState::Accepted), 100)).await,
        (vec![], false)
    );
    assert_eq!(
        ids(filter(Some("due"), None, 100)).await,
        (vec!["run-b".to_owned(), "run-a".to_owned()], false)
    );
    assert_eq!(
        ids(filter(Some("due"), None, 1)).await,
        (vec![], true),
        "the page scanned run-c only"
    );
    let admitted = |before: &str| RunFilter {
        admitted_before: Some(instant(before)),
        limit: 100,
        ..RunFilter::default()
    };
    assert_eq!(ids(admitted("2026-01-01T00:00:00Z")).await, (vec![], false));
    assert_eq!(ids(admitted("2026-01-01T00:00:01Z")).await.0.len(), 3);
}
