//! The [`RunStore`] behaviours every implementation keeps, as reusable
//! checks: the in-memory store's unit tests and the PostgreSQL store's
//! tests (host/store/tests/store_postgres.rs) run the same functions, each on a
//! fresh, empty store. A failed check panics (they are test assertions).
//!
//! Times are small Unix seconds chosen by the checks (the engine's clock
//! drives a store, never the store's own).

use std::collections::BTreeMap;

use coordinator_vm::{EffectState, RunState, RunStatus, WakeKind};
use serde_json::json;

use super::clock::rfc3339_to_unix;
use super::counts::{LiveCounts, RunCounts};
use super::store::{
    Admitted, Commit, Erasure, Job, JobKind, JobState, LeaseRequest, NewJob, NewRun, Owner,
    RunFilter, RunStore, StepLedger, StoreError,
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
/// state's end, else its `now` (Unix seconds).
pub fn committed_at(state: &RunState) -> i64 {
    rfc3339_to_unix(state.ended_at.as_deref().unwrap_or(&state.now)).unwrap_or(0)
}

fn ended(marker: &str, status: RunStatus) -> RunState {
    let mut s = state(marker);
    s.status = status;
    s.output = Some(json!({"done": marker}));
    s.ended_at = Some("2026-01-01T00:05:00Z".into());
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
                at: "1970-01-01T00:01:00Z".into(),
                wake: WakeKind::Wake,
            },
            due_unix: 60,
        }],
        bindings: [("notices".to_owned(), NOTICES_BINDING.to_owned())].into(),
    }
}

fn dispatch(step: &str, attempt: u32) -> JobKind {
    JobKind::Dispatch {
        step: step.into(),
        operation_id: "messaging.send-message".into(),
        connection: "notices".into(),
        action: None,
        command: json!({"message": {"to": "applicant", "body": "hello"}}),
        idempotency_key: Some(format!("key-{step}")),
        attempt,
        resend_safe: false,
    }
}

/// Leases as an ordinary process under restore epoch 0 would.
async fn lease(
    s: &dyn RunStore,
    owner: &str,
    now: i64,
    lease_until: i64,
    limit: usize,
) -> Result<Vec<Job>, StoreError> {
    s.lease(&LeaseRequest {
        owner,
        now,
        lease_until,
        limit,
        epoch: Some(0),
        run_id: None,
        receipt_lookups_only: false,
    })
    .await
}

fn id(admitted: &Admitted) -> String {
    match admitted {
        Admitted::Created(r) | Admitted::Existing(r) => r.id.clone(),
        other => panic!("not admitted: {other:?}"),
    }
}

/// Admission is keyed by start identity: a repeat with the same digest is
/// the stored run, another digest a conflict; concurrent admissions of one
/// identity give one run.
pub async fn admission_is_keyed_by_start_identity(s: &dyn RunStore, fx: &Fixture) {
    let created = s
        .admit(new_run(fx, "run-a", "alice", "id-1", "d1"))
        .await
        .expect("admit");
    let Admitted::Created(a) = created else {
        panic!("created: {created:?}")
    };
    assert_eq!((a.version, a.id.as_str()), (1, "run-a"));
    assert!(matches!(
        s.admit(new_run(fx, "run-b", "alice", "id-1", "d1")).await,
        Ok(Admitted::Existing(r)) if r.id == "run-a"
    ));
    assert_eq!(
        s.admit(new_run(fx, "run-c", "alice", "id-1", "d2")).await,
        Ok(Admitted::Conflict)
    );
    assert_eq!(s.jobs("run-a").await.map(|j| j.len()), Ok(1));
    assert_eq!(s.get("run-b").await, Ok(None));
    let (x, y) = tokio::join!(
        s.admit(new_run(fx, "run-x", "bob", "id-2", "d")),
        s.admit(new_run(fx, "run-y", "bob", "id-2", "d"))
    );
    let (x, y) = (x.expect("admit x"), y.expect("admit y"));
    assert_eq!(id(&x), id(&y), "one run for one identity");
    assert!(
        matches!(x, Admitted::Created(_)) != matches!(y, Admitted::Created(_)),
        "exactly one admission created the run"
    );
}

/// What is stored reads back: state, owner, ledger, a dispatch job's
/// command and key; `get` of an unknown run is `None`.
pub async fn records_round_trip(s: &dyn RunStore, fx: &Fixture) {
    let mut run = new_run(fx, "run-a", "alice", "id-1", "d");
    run.jobs = vec![NewJob {
        kind: dispatch("notify", 1),
        due_unix: 10,
    }];
    let Admitted::Created(created) = s.admit(run.clone()).await.expect("admit") else {
        panic!("created")
    };
    let got = s.get("run-a").await.expect("get").expect("the run");
    assert_eq!(got, created);
    assert_eq!(got.state, run.state);
    assert_eq!(got.owner, owner("alice"));
    assert_eq!(got.workflow, fx.workflow);
    assert_eq!(got.revision, fx.revision);
    assert_eq!(got.start_identity, "id-1");
    assert_eq!(got.request_digest, "d");
    assert_eq!(got.bindings, run.bindings);
    assert!(got.ledger.is_empty());
    let jobs = s.jobs("run-a").await.expect("jobs");
    let job = jobs.first().expect("one job");
    assert_eq!(job.kind, dispatch("notify", 1));
    assert_eq!(
        (job.due_unix, job.state, job.lease.is_none()),
        (10, JobState::Ready, true)
    );
    let mut ledger = BTreeMap::new();
    ledger.insert(
        "notify".to_owned(),
        StepLedger {
            attempts: 1,
            observations: 0,
            restored: false,
        },
    );
    let mut next = state("run-a");
    next.path.push("notify".into());
    let v = s
        .commit(Commit {
            review: None,
            run_id: "run-a".into(),
            expected_version: 1,
            at_unix: committed_at(&next),
            state: next.clone(),
            ledger: ledger.clone(),
            complete: None,
            jobs: vec![NewJob {
                kind: JobKind::LookupReceipt {
                    step: "notify".into(),
                    operation_id: "messaging.send-message".into(),
                    connection: "notices".into(),
                    idempotency_key: "key-notify".into(),
                    lookup: 1,
                },
                due_unix: 20,
            }],
        })
        .await
        .expect("commit");
    assert_eq!(v, 2);
    let got = s.get("run-a").await.expect("get").expect("the run");
    assert_eq!(
        (got.state, got.ledger, got.version, got.bindings),
        (next, ledger, 2, run.bindings),
        "a commit keeps the bindings recorded at admission"
    );
    assert_eq!(s.jobs("run-a").await.map(|j| j.len()), Ok(2));
    assert_eq!(s.get("nope").await, Ok(None));
    assert_eq!(s.jobs("nope").await, Ok(vec![]));
}

/// Leases: only due jobs, oldest due first, never two owners at once; an
/// expired lease comes back with its state (`sending`); commits check the
/// version and the lease; an ended run loses every job.
pub async fn leases_expire_and_commits_check_versions(s: &dyn RunStore, fx: &Fixture) {
    let mut run = new_run(fx, "run-a", "alice", "id-1", "d");
    run.jobs.push(NewJob {
        kind: dispatch("notify", 1),
        due_unix: 50,
    });
    run.jobs.push(NewJob {
        kind: JobKind::Timer {
            at: "1970-01-01T01:00:00Z".into(),
            wake: WakeKind::Deadline,
        },
        due_unix: 3_600,
    });
    s.admit(run).await.expect("admit");
    assert_eq!(s.next_due().await.expect("next due"), Some(50));
    assert!(lease(s, "w1", 49, 100, 10).await.expect("lease").is_empty());
    let jobs = lease(s, "w1", 60, 100, 10).await.expect("lease");
    let due: Vec<i64> = jobs.iter().map(|j| j.due_unix).collect();
    assert_eq!(due, vec![50, 60], "oldest due first, not the later one");
    assert_eq!(
        s.next_due().await.expect("next due"),
        Some(3_600),
        "leased jobs are not waited for"
    );
    assert!(jobs.iter().all(|j| j
        .lease
        .as_ref()
        .is_some_and(|l| l.owner == "w1" && l.expires_unix == 100)));
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
    assert!(lease(s, "w2", 99, 200, 10).await.expect("lease").is_empty());
    s.mark_sending(send, "w1", 0).await.expect("sending");
    assert_eq!(
        s.mark_sending(send, "w2", 0).await,
        Err(StoreError::LeaseLost)
    );
    assert_eq!(s.discard(timer, "w2").await, Err(StoreError::LeaseLost));
    assert_eq!(
        s.release(timer, "w2", 70, None).await,
        Err(StoreError::LeaseLost)
    );
    let again = lease(s, "w2", 100, 200, 1).await.expect("lease");
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
        at_unix: 300,
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
        s.commit(commit(7, "w2", RunStatus::Finished)).await,
        Err(StoreError::Conflict)
    );
    assert_eq!(
        s.commit(commit(1, "w1", RunStatus::Finished)).await,
        Err(StoreError::LeaseLost),
        "w1's lease expired and w2 took the job"
    );
    assert_eq!(
        s.get("run-a").await.expect("get").map(|r| r.version),
        Some(1),
        "a refused commit changes nothing"
    );
    let mut missing = commit(1, "w2", RunStatus::Finished);
    missing.run_id = "nope".into();
    assert_eq!(s.commit(missing).await, Err(StoreError::NotFound));
    assert_eq!(s.commit(commit(1, "w2", RunStatus::Finished)).await, Ok(2));
    assert!(
        s.jobs("run-a").await.expect("jobs").is_empty(),
        "an ended run keeps no job (the leased timer and the deadline went too)"
    );
    assert_eq!(
        s.get("run-a").await.expect("get").map(|r| r.status()),
        Some(RunStatus::Finished)
    );
    assert!(lease(s, "w3", 10_000, 20_000, 10)
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
pub async fn deadlines_become_timer_jobs_once_when_due(s: &dyn RunStore, fx: &Fixture) {
    let deadline = rfc3339_to_unix("2026-02-01T00:00:00Z").expect("an instant");
    let deadline_timer = |at: &str| JobKind::Timer {
        at: at.into(),
        wake: WakeKind::Deadline,
    };
    let admit = |id: &'static str, identity: &'static str, deadline_at: &'static str| {
        let mut run = new_run(fx, id, "alice", identity, "d");
        run.jobs = vec![];
        run.state.deadline_at = deadline_at.into();
        async move { s.admit(run).await.expect("admit") }
    };
    admit("run-a", "id-a", "2026-02-01T00:00:00Z").await;
    admit("run-b", "id-b", "2026-02-01T00:00:00Z").await;
    admit("run-c", "id-c", "2026-02-01T00:00:00.5Z").await;
    settle(s, "run-b", ended("run-b", RunStatus::Finished)).await;
    assert_eq!(
        s.jobs("run-a").await,
        Ok(vec![]),
        "no deadline job at admission"
    );
    assert_eq!(s.next_due().await.expect("next due"), Some(deadline));
    assert!(lease(s, "w1", deadline - 1, deadline + 100, 10)
        .await
        .expect("lease")
        .is_empty());
    let leased = lease(s, "w1", deadline, deadline + 10_000, 10)
        .await
        .expect("lease");
    let kinds: Vec<(&str, &JobKind, i64)> = leased
        .iter()
        .map(|j| (j.run_id.as_str(), &j.kind, j.due_unix))
        .collect();
    assert_eq!(
        kinds,
        [("run-a", &deadline_timer("2026-02-01T00:00:00Z"), deadline)],
        "only the due deadline of the run that has not ended"
    );
    assert!(leased.iter().all(|j| j
        .lease
        .as_ref()
        .is_some_and(|l| l.owner == "w1" && l.expires_unix == deadline + 10_000)));
    assert_eq!(
        s.next_due().await.expect("next due"),
        Some(deadline + 1),
        "run-c's deadline (a fraction past, rounded up) is not a job yet"
    );
    let leased = lease(s, "w2", deadline + 1, deadline + 10_000, 10)
        .await
        .expect("lease");
    assert_eq!(
        leased
            .iter()
            .map(|j| (&j.kind, j.due_unix))
            .collect::<Vec<_>>(),
        [(&deadline_timer("2026-02-01T00:00:01Z"), deadline + 1)],
        "rounded up, so the timer never fires before the deadline"
    );
    assert_eq!(s.next_due().await.expect("next due"), None);
    assert!(lease(s, "w3", deadline + 200, deadline + 300, 10)
        .await
        .expect("lease")
        .is_empty());
    assert_eq!(
        s.jobs("run-a").await.map(|j| j.len()),
        Ok(1),
        "made once, however often leases ask"
    );
    assert_eq!(s.jobs("run-b").await, Ok(vec![]), "an ended run never");

    admit("run-d", "id-d", "2026-02-01T00:00:00Z").await;
    let lookups = s
        .lease(&LeaseRequest {
            owner: "w4",
            now: deadline + 400,
            lease_until: deadline + 500,
            limit: 10,
            epoch: Some(0),
            run_id: None,
            receipt_lookups_only: true,
        })
        .await
        .expect("lease");
    assert!(lookups.is_empty(), "a timer is not a receipt lookup");
    let made = s.jobs("run-d").await.expect("jobs");
    assert_eq!(
        made.iter()
            .map(|j| (&j.kind, j.lease.is_none()))
            .collect::<Vec<_>>(),
        [(&deadline_timer("2026-02-01T00:00:00Z"), true)],
        "made unleased"
    );
    assert_eq!(s.next_due().await.expect("next due"), Some(deadline));
    let leased = lease(s, "w5", deadline + 400, deadline + 500, 10)
        .await
        .expect("lease");
    assert_eq!(
        leased.iter().map(|j| j.run_id.as_str()).collect::<Vec<_>>(),
        ["run-d"]
    );
}

/// `release` makes a job ready again at a new due time (optionally with a
/// new kind); `discard` deletes it.
pub async fn release_and_discard(s: &dyn RunStore, fx: &Fixture) {
    let mut run = new_run(fx, "run-a", "alice", "id-1", "d");
    run.jobs.push(NewJob {
        kind: dispatch("notify", 1),
        due_unix: 60,
    });
    s.admit(run).await.expect("admit");
    let jobs = lease(s, "w1", 60, 1_000, 10).await.expect("lease");
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
    s.mark_sending(send, "w1", 0).await.expect("sending");
    s.release(send, "w1", 400, Some(dispatch("notify", 2)))
        .await
        .expect("release");
    s.discard(timer, "w1").await.expect("discard");
    assert_eq!(s.discard(timer, "w1").await, Err(StoreError::LeaseLost));
    let left = s.jobs("run-a").await.expect("jobs");
    let job = left.first().expect("the dispatch is left");
    assert_eq!(left.len(), 1);
    assert_eq!(
        (&job.kind, job.due_unix, job.state, job.lease.is_none()),
        (&dispatch("notify", 2), 400, JobState::Ready, true)
    );
    assert!(lease(s, "w2", 399, 2_000, 10)
        .await
        .expect("lease")
        .is_empty());
    assert_eq!(lease(s, "w2", 400, 2_000, 10).await.map(|j| j.len()), Ok(1));
}

/// `bring_forward` moves an observation to `max(now, last + floor)` and
/// never later; listing pages newest first with filters and a cursor.
pub async fn bring_forward_respects_the_floor_and_lists_page(s: &dyn RunStore, fx: &Fixture) {
    let mut run = new_run(fx, "run-a", "alice", "id-1", "d");
    run.jobs = vec![NewJob {
        kind: JobKind::Observe {
            step: "wait".into(),
            connection: "review".into(),
            completion: "result".into(),
            review_request_id: "rr-1".into(),
            last_observed_unix: Some(1_000),
        },
        due_unix: 1_900,
    }];
    s.admit(run).await.expect("admit");
    assert_eq!(s.bring_forward("rr-1", 1_010, 30).await, Ok(1));
    let due = |jobs: Vec<super::store::Job>| jobs.first().map(|j| j.due_unix);
    assert_eq!(due(s.jobs("run-a").await.expect("jobs")), Some(1_030));
    assert_eq!(
        s.bring_forward("rr-1", 1_010, 30).await,
        Ok(0),
        "never later"
    );
    assert_eq!(s.bring_forward("rr-2", 1_010, 30).await, Ok(0));
    s.admit(new_run(fx, "run-b", "bob", "id-2", "d"))
        .await
        .expect("admit");
    s.admit(new_run(fx, "run-c", "bob", "id-3", "d"))
        .await
        .expect("admit");
    // run-c moves to attention.
    let mut held = state("run-c");
    held.status = RunStatus::Attention;
    s.commit(Commit {
        review: None,
        run_id: "run-c".into(),
        expected_version: 1,
        at_unix: committed_at(&held),
        state: held,
        ledger: BTreeMap::new(),
        complete: None,
        jobs: vec![],
    })
    .await
    .expect("commit");
    let ids = |page: &super::store::RunPage| -> Vec<String> {
        page.runs.iter().map(|r| r.id.clone()).collect()
    };
    let list = |f: RunFilter| async move { s.list(&f).await.expect("list") };
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
    assert_eq!(
        s.list(&RunFilter {
            cursor: Some("not-a-cursor".into()),
            limit: 10,
            ..RunFilter::default()
        })
        .await,
        Err(StoreError::BadCursor)
    );
    s.ping().await.expect("ping");
}

/// A commit leases the new jobs due by then to the committing process
/// (and returns them) only under its restore epoch and without a restore
/// hold; another process cannot lease them; a job due later stays
/// unleased.
pub async fn commits_lease_new_due_jobs_to_the_committer(s: &dyn RunStore, fx: &Fixture) {
    use super::store::{Holds, LeaseOnInsert};
    s.admit(new_run(fx, "run-l", "alice", "id-l", "d"))
        .await
        .expect("admit");
    let step = |version: u64, jobs: Vec<NewJob>| Commit {
        review: None,
        run_id: "run-l".into(),
        expected_version: version,
        at_unix: committed_at(&state("run-l")),
        state: state("run-l"),
        ledger: BTreeMap::new(),
        complete: None,
        jobs,
    };
    let due_now = |name: &str| {
        vec![NewJob {
            kind: dispatch(name, 1),
            due_unix: 100,
        }]
    };
    let on_insert = LeaseOnInsert {
        owner: "w1".into(),
        now: 100,
        lease_until: 200,
        epoch: 0,
    };
    let committed = s
        .commit_leasing(
            step(
                1,
                vec![
                    NewJob {
                        kind: dispatch("now", 1),
                        due_unix: 100,
                    },
                    NewJob {
                        kind: dispatch("later", 1),
                        due_unix: 150,
                    },
                ],
            ),
            Some(&on_insert),
        )
        .await
        .expect("commit");
    assert_eq!(committed.version, 2);
    let leased: Vec<(i64, Option<(String, i64)>)> = committed
        .leased
        .iter()
        .map(|j| {
            (
                j.due_unix,
                j.lease.as_ref().map(|l| (l.owner.clone(), l.expires_unix)),
            )
        })
        .collect();
    assert_eq!(leased, vec![(100, Some(("w1".to_owned(), 200)))]);
    let taken: Vec<i64> = lease(s, "w2", 120, 300, 10)
        .await
        .expect("lease")
        .iter()
        .map(|j| j.due_unix)
        .collect();
    assert_eq!(
        taken,
        vec![60],
        "only the admission's job: the handed-off one is w1's, the later one not due"
    );
    let handed = committed.leased.first().expect("one leased job").id;
    s.mark_sending(handed, "w1", 0)
        .await
        .expect("w1 holds the lease it was given");
    // Under a restore hold, or another epoch, nothing is leased on insert.
    let placed = Holds {
        restore: true,
        admission: true,
        execution_recovery_completed: false,
        restore_epoch: 1,
    };
    assert_eq!(s.swap_holds(&Holds::default(), &placed).await, Ok(true));
    let held = s
        .commit_leasing(
            step(2, due_now("held")),
            Some(&LeaseOnInsert {
                epoch: 1,
                ..on_insert.clone()
            }),
        )
        .await
        .expect("commit");
    assert!(held.leased.is_empty(), "a restore hold leases nothing");
    let released = Holds {
        restore: false,
        admission: false,
        ..placed.clone()
    };
    assert_eq!(s.swap_holds(&placed, &released).await, Ok(true));
    let stale = s
        .commit_leasing(step(3, due_now("stale")), Some(&on_insert))
        .await
        .expect("commit");
    assert!(stale.leased.is_empty(), "a stale epoch leases nothing");
    let jobs = s.jobs("run-l").await.expect("jobs");
    assert_eq!(
        jobs.iter().filter(|j| j.lease.is_some()).count(),
        2,
        "w2's lease and the one job leased on insert: {jobs:?}"
    );
}

/// A group commit ([`RunStore::commit_batch`]) answers each commit as
/// [`RunStore::commit_leasing`] alone would, in order, one refusal never
/// failing another: a commit that completes its job and leases its due
/// new job on insert, a stale version (conflict), a lease another owner
/// holds (lease lost), a run that ends (every job gone), a run that does
/// not exist. [`RunStore::mark_sending_batch`] likewise fences each job on
/// its own.
pub async fn group_commits_answer_each_commit_as_alone(s: &dyn RunStore, fx: &Fixture) {
    use super::store::LeaseOnInsert;
    for name in ["a", "b", "c", "d"] {
        s.admit(new_run(
            fx,
            &format!("run-g{name}"),
            "alice",
            &format!("id-g{name}"),
            "d",
        ))
        .await
        .expect("admit");
    }
    let leased = lease(s, "w1", 100, 300, 10).await.expect("lease");
    let job_of = |run: &str| {
        leased
            .iter()
            .find(|j| j.run_id == run)
            .map(|j| j.id)
            .expect("each run's timer leased")
    };
    let on_insert = LeaseOnInsert {
        owner: "w1".into(),
        now: 100,
        lease_until: 200,
        epoch: 0,
    };
    let commit = |run: &str, version: u64, state: RunState, complete: Option<(u64, &str)>| Commit {
        review: None,
        run_id: run.into(),
        expected_version: version,
        at_unix: committed_at(&state),
        state,
        ledger: BTreeMap::new(),
        complete: complete.map(|(job, owner)| (job, owner.to_owned())),
        jobs: vec![
            NewJob {
                kind: dispatch(&format!("{run}-now"), 1),
                due_unix: 100,
            },
            NewJob {
                kind: JobKind::Timer {
                    at: "1970-01-01T00:02:30Z".into(),
                    wake: WakeKind::Wake,
                },
                due_unix: 150,
            },
        ],
    };
    let answers = s
        .commit_batch(vec![
            (
                commit("run-ga", 1, state("run-ga"), Some((job_of("run-ga"), "w1"))),
                Some(on_insert.clone()),
            ),
            (
                commit("run-gb", 5, state("run-gb"), Some((job_of("run-gb"), "w1"))),
                Some(on_insert.clone()),
            ),
            (
                commit("run-gc", 1, state("run-gc"), Some((job_of("run-gc"), "w2"))),
                Some(on_insert.clone()),
            ),
            (
                commit(
                    "run-gd",
                    1,
                    ended("run-gd", RunStatus::Finished),
                    Some((job_of("run-gd"), "w1")),
                ),
                Some(on_insert.clone()),
            ),
            (commit("run-none", 1, state("run-none"), None), None),
        ])
        .await;
    assert_eq!(answers.len(), 5);
    let mut answers = answers.into_iter();
    let first = answers.next().expect("five").expect("run-ga commits");
    assert_eq!(first.version, 2);
    let handed: Vec<(String, i64, Option<String>)> = first
        .leased
        .iter()
        .map(|j| {
            (
                j.run_id.clone(),
                j.due_unix,
                j.lease.as_ref().map(|l| l.owner.clone()),
            )
        })
        .collect();
    assert_eq!(
        handed,
        vec![("run-ga".to_owned(), 100, Some("w1".to_owned()))],
        "only the job due now is leased on insert"
    );
    assert_eq!(
        first.leased.first().map(|j| &j.kind),
        Some(&dispatch("run-ga-now", 1)),
        "the leased job is the one committed, with its command"
    );
    assert_eq!(answers.next(), Some(Err(StoreError::Conflict)));
    assert_eq!(answers.next(), Some(Err(StoreError::LeaseLost)));
    let ended_run = answers.next().expect("five").expect("run-gd commits");
    assert_eq!(ended_run.version, 2);
    assert!(ended_run.leased.is_empty(), "an ended run gets no job");
    assert_eq!(answers.next(), Some(Err(StoreError::NotFound)));
    // What each commit left.
    let kinds = |jobs: Vec<Job>| -> Vec<(i64, bool)> {
        jobs.iter()
            .map(|j| (j.due_unix, j.lease.is_some()))
            .collect()
    };
    assert_eq!(
        kinds(s.jobs("run-ga").await.expect("jobs")),
        vec![(100, true), (150, false)],
        "the timer completed, the two new jobs inserted"
    );
    assert_eq!(
        kinds(s.jobs("run-gb").await.expect("jobs")),
        vec![(60, true)],
        "a refused commit changes nothing"
    );
    assert_eq!(
        kinds(s.jobs("run-gc").await.expect("jobs")),
        vec![(60, true)]
    );
    assert!(s.jobs("run-gd").await.expect("jobs").is_empty());
    for (run, version) in [("run-ga", 2), ("run-gb", 1), ("run-gc", 1), ("run-gd", 2)] {
        let record = s.get(run).await.expect("get").expect("the run");
        assert_eq!(record.version, version, "{run}");
    }
    assert!(s
        .get("run-gd")
        .await
        .expect("get")
        .expect("the run")
        .status()
        .is_terminal());
    // Mark sending, grouped: each job under its own lease.
    let dispatch_job = first.leased.first().expect("one").id;
    let marked = s
        .mark_sending_batch(vec![
            (dispatch_job, "w1".into(), 0),
            (dispatch_job, "w2".into(), 0),
            (job_of("run-gb"), "w1".into(), 1),
            (u64::MAX / 2, "w1".into(), 0),
        ])
        .await;
    assert_eq!(
        marked,
        vec![
            Ok(()),
            Err(StoreError::LeaseLost),
            Err(StoreError::LeaseLost),
            Err(StoreError::LeaseLost)
        ],
        "another owner, another epoch and no such job are refused"
    );
}

/// A group admission ([`RunStore::admit_batch`]) answers each start as
/// [`RunStore::admit_leasing`] alone would, in order: a new run (its due
/// job leased on insert), a repeat of a spent identity (its run), the same
/// identity with another digest (conflict), and two starts of one new
/// identity in the batch (one run, the other start answered with it).
pub async fn group_admissions_answer_each_start_as_alone(s: &dyn RunStore, fx: &Fixture) {
    use super::store::LeaseOnInsert;
    s.admit(new_run(fx, "run-spent", "alice", "id-spent", "d"))
        .await
        .expect("admit");
    let on_insert = LeaseOnInsert {
        owner: "w1".into(),
        now: 100,
        lease_until: 200,
        epoch: 0,
    };
    let start = |id: &str, identity: &str, digest: &str| {
        (
            new_run(fx, id, "alice", identity, digest),
            Some(on_insert.clone()),
        )
    };
    let answers = s
        .admit_batch(vec![
            start("run-new", "id-new", "d"),
            start("run-again", "id-spent", "d"),
            start("run-other", "id-spent", "another digest"),
            start("run-twin-1", "id-twin", "d"),
            start("run-twin-2", "id-twin", "d"),
        ])
        .await;
    let answers: Vec<(String, usize)> = answers
        .into_iter()
        .map(|a| match a.expect("answered") {
            (Admitted::Created(r), leased) => (format!("created {}", r.id), leased.len()),
            (Admitted::Existing(r), leased) => (format!("existing {}", r.id), leased.len()),
            (other, leased) => (format!("{other:?}"), leased.len()),
        })
        .collect();
    let twin = |a: &(String, usize)| a.0.clone();
    assert_eq!(
        answers.iter().take(3).cloned().collect::<Vec<_>>(),
        vec![
            ("created run-new".to_owned(), 1),
            ("existing run-spent".to_owned(), 0),
            ("Conflict".to_owned(), 0),
        ]
    );
    let twins: Vec<String> = answers.iter().skip(3).map(twin).collect();
    assert!(
        twins == ["created run-twin-1", "existing run-twin-1"]
            || twins == ["existing run-twin-2", "created run-twin-2"],
        "one run for the identity, the other start answered with it: {twins:?}"
    );
    let leased = s.jobs("run-new").await.expect("jobs");
    assert_eq!(
        leased
            .iter()
            .map(|j| j.lease.as_ref().map(|l| l.owner.clone()))
            .collect::<Vec<_>>(),
        vec![Some("w1".to_owned())],
        "the new run's due job is leased on insert"
    );
    assert!(s.get("run-again").await.expect("get").is_none());
    assert!(s.get("run-other").await.expect("get").is_none());
}

/// The holds start released; a swap succeeds only from the holds it
/// expects, so a change made meanwhile by another process is never lost.
pub async fn holds_are_swapped_only_from_what_was_read(s: &dyn RunStore) {
    use super::store::Holds;
    assert_eq!(s.holds().await, Ok(Holds::default()));
    let placed = Holds {
        restore: true,
        admission: true,
        execution_recovery_completed: false,
        restore_epoch: 1,
    };
    assert_eq!(s.swap_holds(&Holds::default(), &placed).await, Ok(true));
    assert_eq!(s.holds().await, Ok(placed.clone()));
    assert_eq!(
        s.swap_holds(&Holds::default(), &Holds::default()).await,
        Ok(false),
        "a stale expectation changes nothing"
    );
    let attested = Holds {
        execution_recovery_completed: true,
        ..placed.clone()
    };
    assert_eq!(s.swap_holds(&placed, &attested).await, Ok(true));
    assert_eq!(s.holds().await, Ok(attested.clone()));
    let stale_epoch = Holds {
        restore_epoch: 0,
        ..attested.clone()
    };
    assert_eq!(
        s.swap_holds(&stale_epoch, &Holds::default()).await,
        Ok(false),
        "the restore epoch is part of what a swap expects"
    );
    assert_eq!(s.holds().await, Ok(attested));
}

/// `live_bindings` counts, per (connection, digest), the runs that have not
/// ended; an ended run no longer counts.
pub async fn live_bindings_count_runs_that_have_not_ended(s: &dyn RunStore, fx: &Fixture) {
    assert_eq!(s.live_bindings().await, Ok(vec![]));
    let other = format!("sha256:{}", "2".repeat(64));
    s.admit(new_run(fx, "run-a", "alice", "id-1", "d"))
        .await
        .expect("admit");
    s.admit(new_run(fx, "run-b", "alice", "id-2", "d"))
        .await
        .expect("admit");
    let mut c = new_run(fx, "run-c", "bob", "id-3", "d");
    c.bindings = [
        ("notices".to_owned(), other.clone()),
        ("review".to_owned(), other.clone()),
    ]
    .into();
    s.admit(c).await.expect("admit");
    let binding =
        |connection: &str, digest: &str, runs| coordinator_runtime::binding::LiveBinding {
            connection: connection.into(),
            digest: digest.into(),
            runs,
        };
    assert_eq!(
        s.live_bindings().await,
        Ok(vec![
            binding("notices", NOTICES_BINDING, 2),
            binding("notices", &other, 1),
            binding("review", &other, 1),
        ])
    );
    let v = s
        .commit(Commit {
            review: None,
            run_id: "run-c".into(),
            expected_version: 1,
            at_unix: committed_at(&ended("run-c", RunStatus::Cancelled)),
            state: ended("run-c", RunStatus::Cancelled),
            ledger: BTreeMap::new(),
            complete: None,
            jobs: vec![],
        })
        .await;
    assert_eq!(v, Ok(2));
    assert_eq!(
        s.live_bindings().await,
        Ok(vec![binding("notices", NOTICES_BINDING, 2)]),
        "an ended run's bindings no longer count"
    );
}

/// Moves run `id` (version 1, as admitted) to `state` with one commit.
async fn settle(s: &dyn RunStore, id: &str, state: RunState) {
    s.commit(Commit {
        review: None,
        run_id: id.into(),
        expected_version: 1,
        at_unix: committed_at(&state),
        state,
        ledger: BTreeMap::new(),
        complete: None,
        jobs: vec![],
    })
    .await
    .expect("commit");
}

/// An ended state of run `marker` that ended at `ended_at` (RFC 3339).
pub fn ended_at(marker: &str, status: RunStatus, ended_at: &str) -> RunState {
    let mut s = ended(marker, status);
    s.now = ended_at.into();
    s.ended_at = Some(ended_at.into());
    s
}

/// Retention (seed 000 "Erase ended payloads"): only runs that ended before
/// the cutoff, never live, held or uncertain work, oldest ended first, at
/// most `limit` per call, `more` while others qualify. An erased run keeps
/// its id, workflow, revision, owner, state name, timestamps, start
/// identity and request digest; its input, path, outputs and output are
/// gone; a repeat of its start key still finds it (another digest is a
/// conflict); a commit on it is refused `run.payload-erased`.
pub async fn retention_erases_only_ended_payloads(s: &dyn RunStore, fx: &Fixture) {
    let cutoff = rfc3339_to_unix("2026-02-01T00:00:00Z").expect("an instant");
    for (id, sub) in [
        ("run-a", "alice"),
        ("run-b", "alice"),
        ("run-c", "bob"),
        ("run-d", "bob"),
        ("run-e", "bob"),
        ("run-f", "bob"),
    ] {
        s.admit(new_run(
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
        s,
        "run-a",
        ended_at("run-a", RunStatus::Finished, "2026-01-01T00:05:00Z"),
    )
    .await;
    settle(
        s,
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
    settle(s, "run-c", uncertain).await;
    // d is live (running, with its timer job); e is held.
    let mut held = state("run-e");
    held.status = RunStatus::Attention;
    held.effects.insert("pay".into(), EffectState::Unknown);
    settle(s, "run-e", held).await;
    // f ended after the cutoff.
    settle(
        s,
        "run-f",
        ended_at("run-f", RunStatus::Finished, "2026-03-01T00:00:00Z"),
    )
    .await;
    let mut before = BTreeMap::new();
    for id in ["run-a", "run-b", "run-c", "run-d", "run-e", "run-f"] {
        before.insert(id, s.get(id).await.expect("get").expect("the run"));
    }

    assert_eq!(
        s.erase_payloads(cutoff, 1, 5_000_000_000).await,
        Ok(Erasure {
            erased: 1,
            more: true
        }),
        "at most `limit`, and more remain"
    );
    let b = s.get("run-b").await.expect("get").expect("run-b");
    assert!(b.payload_erased, "the oldest ended run goes first");
    assert!(
        !s.get("run-a")
            .await
            .expect("get")
            .expect("run-a")
            .payload_erased
    );
    assert_eq!(
        s.erase_payloads(cutoff, 100, 5_000_000_000).await,
        Ok(Erasure {
            erased: 1,
            more: false
        })
    );
    assert_eq!(
        s.erase_payloads(cutoff, 100, 5_000_000_000).await,
        Ok(Erasure::default()),
        "an erased run is never erased again"
    );

    // What an erased run keeps, and what it lost.
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
    assert_eq!(b.state.ended_at.as_deref(), Some("2026-01-01T00:03:00Z"));
    assert_eq!(b.state.input, serde_json::Value::Null);
    assert!(b.state.output.is_none() && b.state.outcome.is_none());
    assert!(b.state.path.is_empty() && b.state.outputs.is_empty());
    assert!(b.version > was.version, "erasure moves the version");
    let a = s.get("run-a").await.expect("get").expect("run-a");
    assert!(a.payload_erased);
    assert_eq!(a.state.ended_at.as_deref(), Some("2026-01-01T00:05:00Z"));
    for id in ["run-c", "run-d", "run-e", "run-f"] {
        let now = s.get(id).await.expect("get").expect("the run");
        assert_eq!(Some(&now), before.get(id), "{id} is untouched");
    }
    assert_eq!(s.jobs("run-d").await.map(|j| j.len()), Ok(1));

    // The spent start identity outlives the payload.
    match s
        .admit(new_run(fx, "run-b2", "alice", "id-run-b", "d-run-b"))
        .await
    {
        Ok(Admitted::Existing(r)) => assert_eq!((r.id.as_str(), r.payload_erased), ("run-b", true)),
        other => panic!("the erased run answers its repeated key: {other:?}"),
    }
    assert_eq!(
        s.admit(new_run(fx, "run-b3", "alice", "id-run-b", "other"))
            .await,
        Ok(Admitted::Conflict)
    );
    assert_eq!(s.get("run-b2").await, Ok(None), "never a second run");

    // Nothing moves an erased run.
    let refused = s
        .commit(Commit {
            review: None,
            run_id: "run-b".into(),
            expected_version: b.version,
            at_unix: committed_at(&state("run-b")),
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

    // Status and list still answer.
    let all = s
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
    let failed = s
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
    s: &dyn RunStore,
    fx: &Fixture,
) {
    use super::store::Holds;
    let mut run = new_run(fx, "run-r", "alice", "id-r", "d-r");
    let lookup = JobKind::LookupReceipt {
        step: "lookup".into(),
        operation_id: "messaging.send-message".into(),
        connection: "notices".into(),
        idempotency_key: "key-lookup".into(),
        lookup: 1,
    };
    let read = JobKind::Dispatch {
        step: "read".into(),
        operation_id: "breg.read-record".into(),
        connection: "applications".into(),
        action: None,
        command: json!({"recordId": "r-1"}),
        idempotency_key: None,
        attempt: 1,
        resend_safe: true,
    };
    run.jobs = vec![
        NewJob {
            kind: dispatch("send", 1),
            due_unix: 10,
        },
        NewJob {
            kind: lookup.clone(),
            due_unix: 10,
        },
        NewJob {
            kind: read,
            due_unix: 10,
        },
    ];
    s.admit(run).await.expect("admit");
    let ask = |owner: &'static str, epoch: Option<u64>| LeaseRequest {
        owner,
        now: 20,
        lease_until: 25,
        limit: 10,
        epoch,
        run_id: None,
        receipt_lookups_only: false,
    };
    // A recovery-only instance (no epoch) is given the lookup only.
    let got = s.lease(&ask("recovery", None)).await.expect("lease");
    assert_eq!(
        got.iter().map(|j| j.kind.clone()).collect::<Vec<_>>(),
        vec![lookup.clone()]
    );
    // The ordinary worker leases the mutation and marks it sending.
    let got = s.lease(&ask("w1", Some(0))).await.expect("lease");
    assert_eq!(got.len(), 2, "{got:?}");
    let send = got
        .iter()
        .find(|j| j.kind == dispatch("send", 1))
        .expect("the mutation")
        .id;
    s.mark_sending(send, "w1", 0).await.expect("sending");
    // The restore hold is placed (epoch 1).
    let placed = Holds {
        restore: true,
        admission: true,
        execution_recovery_completed: false,
        restore_epoch: 1,
    };
    assert_eq!(s.swap_holds(&Holds::default(), &placed).await, Ok(true));
    // The old process is refused, whatever it asks.
    assert_eq!(
        s.lease(&ask("w1", Some(0))).await,
        Err(StoreError::LeaseIncompatible {
            process: 0,
            store: 1
        })
    );
    assert_eq!(
        s.mark_sending(send, "w1", 0).await,
        Err(StoreError::LeaseLost)
    );
    // A process of the new epoch is given lookups only while the hold
    // stands, and cannot mark anything sending.
    let after = LeaseRequest {
        now: 30,
        lease_until: 40,
        ..ask("w2", Some(1))
    };
    let got = s.lease(&after).await.expect("lease");
    assert!(
        got.iter()
            .all(|j| matches!(j.kind, JobKind::LookupReceipt { .. })),
        "{got:?}"
    );
    assert_eq!(
        s.mark_sending(send, "w1", 1).await,
        Err(StoreError::LeaseLost)
    );
    // The mutation is claimed from its holder; the read is not.
    let claimed = s
        .claim_restored_commands("sweeper", 100, 10)
        .await
        .expect("claim");
    assert_eq!(claimed.iter().map(|j| j.id).collect::<Vec<_>>(), vec![send]);
    let first = claimed.first().expect("claimed");
    assert_eq!(first.state, JobState::Sending);
    assert_eq!(
        first.lease.as_ref().map(|l| l.owner.as_str()),
        Some("sweeper")
    );
    s.discard(send, "sweeper")
        .await
        .expect("the sweeper holds it");
}

/// The review a commit records follows [`super::store::Review::after`]:
/// `required` always, another outcome only over `required`; the survey
/// counts live runs needing review and live runs with an unknown effect;
/// attesting turns every `required` into `attested`. `find_start` answers
/// a known identity without admitting anything.
pub async fn reviews_are_recorded_surveyed_and_attested(s: &dyn RunStore, fx: &Fixture) {
    use super::store::{Review, ReviewSurvey};
    for (id, identity) in [("run-x", "id-x"), ("run-y", "id-y")] {
        s.admit(new_run(fx, id, "alice", identity, "d"))
            .await
            .expect("admit");
    }
    assert_eq!(
        s.find_start("id-x", "d").await.map(|a| a.map(|a| id(&a))),
        Ok(Some("run-x".to_owned()))
    );
    assert_eq!(
        s.find_start("id-x", "other").await,
        Ok(Some(Admitted::Conflict))
    );
    assert_eq!(s.find_start("id-new", "d").await, Ok(None));
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
            at_unix: committed_at(&st),
            state: st,
            ledger: BTreeMap::new(),
            complete: None,
            jobs: vec![],
        }
    };
    s.commit(commit("run-x", 1, Some(Review::Reconciled), false))
        .await
        .expect("commit");
    assert_eq!(
        s.get("run-x").await.expect("get").expect("run").review,
        None,
        "an outcome over no review records nothing"
    );
    s.commit(commit("run-x", 2, Some(Review::Required), true))
        .await
        .expect("commit");
    s.commit(commit("run-y", 1, Some(Review::Required), true))
        .await
        .expect("commit");
    assert_eq!(
        s.review_survey().await,
        Ok(ReviewSurvey {
            review_required: 2,
            unknown_effects: 2,
            ended_unknown_effects: 0,
        })
    );
    s.commit(commit("run-x", 3, None, true))
        .await
        .expect("commit");
    assert_eq!(
        s.get("run-x").await.expect("get").expect("run").review,
        Some(Review::Required),
        "no review leaves it"
    );
    s.commit(commit("run-x", 4, Some(Review::Cancelled), false))
        .await
        .expect("commit");
    assert_eq!(
        s.get("run-x").await.expect("get").expect("run").review,
        Some(Review::Cancelled)
    );
    assert_eq!(
        s.review_survey().await,
        Ok(ReviewSurvey {
            review_required: 1,
            unknown_effects: 1,
            ended_unknown_effects: 0,
        })
    );
    assert_eq!(s.attest_reviews().await, Ok(1));
    assert_eq!(
        s.get("run-y").await.expect("get").expect("run").review,
        Some(Review::Attested)
    );
    assert_eq!(s.review_survey().await.map(|v| v.review_required), Ok(0));
    // A run that ends still holding an unknown effect is counted apart.
    let mut ended = state("run-y");
    ended.status = RunStatus::Cancelled;
    ended.ended_at = Some("2026-01-01T00:05:00Z".into());
    ended.effects.insert("send".into(), EffectState::Unknown);
    s.commit(Commit {
        at_unix: committed_at(&ended),
        state: ended,
        ..commit("run-y", 2, None, true)
    })
    .await
    .expect("commit");
    assert_eq!(
        s.review_survey().await,
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
pub async fn counts_follow_every_change(s: &dyn RunStore, counts: &dyn RunCounts, fx: &Fixture) {
    let now = || async { counts.live_counts().await.expect("counts") };
    assert_eq!(now().await, LiveCounts::default(), "an empty store");
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
    let answers = s
        .admit_batch(vec![(a, None), (b, None)])
        .await
        .into_iter()
        .map(|r| r.expect("admitted").0)
        .collect::<Vec<_>>();
    assert!(answers.iter().all(|r| matches!(r, Admitted::Created(_))));
    s.admit(c).await.expect("admit");
    assert_eq!(
        now().await,
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
    s.admit(new_run(fx, "count-a2", "alice", "count-id-a", "d"))
        .await
        .expect("repeat");
    // `a` leaves its wait for a dispatch; `c` ends still holding its
    // unknown effect; `b` is asked to cancel and its review is required.
    let commit = |id: &str, version, state, jobs, review| Commit {
        run_id: id.into(),
        expected_version: version,
        at_unix: committed_at(&state),
        state,
        ledger: BTreeMap::new(),
        complete: None,
        jobs,
        review,
    };
    s.commit(commit(
        "count-a",
        1,
        state("count-a"),
        vec![NewJob {
            kind: dispatch("notify", 1),
            due_unix: 10,
        }],
        None,
    ))
    .await
    .expect("commit a");
    let mut failed = ended("count-c", RunStatus::Failed);
    failed.effects.insert("notify".into(), EffectState::Unknown);
    s.commit(commit("count-c", 1, failed, Vec::new(), None))
        .await
        .expect("commit c");
    let mut cancelling = state("count-b");
    cancelling.status = RunStatus::CancelRequested;
    s.commit(commit(
        "count-b",
        1,
        cancelling,
        Vec::new(),
        Some(super::store::Review::Required),
    ))
    .await
    .expect("commit b");
    // Refused (a stale version): nothing moves.
    assert_eq!(
        s.commit(commit("count-b", 1, state("count-b"), Vec::new(), None))
            .await
            .map(|_| ()),
        Err(StoreError::Conflict)
    );
    assert_eq!(
        now().await,
        LiveCounts {
            running: 1,
            cancel_requested: 1,
            ended_unknown_effects: 1,
            review_required: 1,
            dispatch_ready: 1,
            ..LiveCounts::default()
        }
    );
    let leased = lease(s, "w1", 20, 100, 10).await.expect("lease");
    let send = leased
        .iter()
        .find(|j| matches!(j.kind, JobKind::Dispatch { .. }))
        .expect("the dispatch")
        .id;
    let counted = now().await;
    assert_eq!((counted.dispatch_ready, counted.dispatch_leased), (0, 1));
    s.mark_sending(send, "w1", 0).await.expect("sending");
    let counted = now().await;
    assert_eq!((counted.dispatch_leased, counted.dispatch_sending), (0, 1));
    // `a` finishes with its dispatch: no live run is left running.
    s.commit(Commit {
        complete: Some((send, "w1".into())),
        ..commit(
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
        now().await,
        LiveCounts {
            cancel_requested: 1,
            ended_unknown_effects: 1,
            review_required: 1,
            ..LiveCounts::default()
        }
    );
}
