//! Commits: new due jobs leased to the committer, group commits answered as alone.

use super::*;

use coordinator_ports::store::Committed;

/// A commit leases the new jobs due by then to the committing process
/// (and returns them) only under its restore epoch and without a restore
/// hold; another process cannot lease them; a job due later stays
/// unleased.
pub async fn commits_lease_new_due_jobs_to_the_committer(
    admission: &dyn RunAdmission,
    queue: &dyn JobQueue,
    reads: &dyn RunReads,
    holds: &dyn HoldsAndReviews,
    fx: &Fixture,
) {
    use coordinator_ports::store::{Holds, LeaseOnInsert};
    admission
        .admit(new_run(fx, "run-l", "alice", "id-l", "d"))
        .await
        .expect("admit");
    let step = |version: u64, jobs: Vec<NewJob>| Commit {
        review: None,
        run_id: "run-l".into(),
        expected_version: version,
        at: committed_at(&state("run-l")),
        state: state("run-l"),
        ledger: BTreeMap::new(),
        complete: None,
        jobs,
    };
    let due_now = |name: &str| {
        vec![NewJob {
            kind: dispatch(name, 1),
            due_at: unix(100),
        }]
    };
    let on_insert = LeaseOnInsert {
        owner: "w1".into(),
        now: unix(100),
        lease_until: unix(200),
        epoch: 0,
        mark_sending: None,
    };
    let mut first = due_now("now");
    first.push(NewJob {
        kind: dispatch("later", 1),
        due_at: unix(150),
    });
    let committed = queue
        .commit_leasing(step(1, first), Some(&on_insert))
        .await
        .expect("commit");
    assert_eq!(committed.version, 2);
    let leased: Vec<(i64, Option<(String, i64)>)> = committed
        .leased
        .iter()
        .map(|j| {
            (
                j.due_at.unix_seconds(),
                j.lease
                    .as_ref()
                    .map(|l| (l.owner.clone(), l.expires_at.unix_seconds())),
            )
        })
        .collect();
    assert_eq!(leased, vec![(100, Some(("w1".to_owned(), 200)))]);
    let taken: Vec<i64> = lease(queue, "w2", 120, 300, 10)
        .await
        .expect("lease")
        .iter()
        .map(|j| j.due_at.unix_seconds())
        .collect();
    assert_eq!(
        taken,
        vec![60],
        "only the admission's job: the handed-off one is w1's, the later one not due"
    );
    let handed = committed.leased.first().expect("one leased job").id;
    queue
        .mark_sending(handed, "w1", 0)
        .await
        .expect("w1 holds the lease it was given");
    // Under a restore hold, or another epoch, nothing is leased on insert.
    let placed = Holds {
        restore: true,
        admission: true,
        execution_recovery_completed: false,
        restore_epoch: 1,
    };
    assert_eq!(holds.swap_holds(&Holds::default(), &placed).await, Ok(true));
    let held = queue
        .commit_leasing(
            step(2, due_now("held")),
            Some(&LeaseOnInsert {
                epoch: 1,
                mark_sending: None,
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
    assert_eq!(holds.swap_holds(&placed, &released).await, Ok(true));
    let stale = queue
        .commit_leasing(step(3, due_now("stale")), Some(&on_insert))
        .await
        .expect("commit");
    assert!(stale.leased.is_empty(), "a stale epoch leases nothing");
    let jobs = reads.jobs("run-l").await.expect("jobs");
    assert_eq!(
        jobs.iter().filter(|j| j.lease.is_some()).count(),
        2,
        "w2's lease and the one job leased on insert: {jobs:?}"
    );
    commits_mark_the_job_their_lane_writes_next(queue, reads, &on_insert).await;
}

/// The job a commit's lane writes next ([`LeaseOnInsert::mark_sending`](coordinator_ports::store::LeaseOnInsert::mark_sending))
/// is inserted `sending` when leased on insert, the others `ready`; a
/// release makes it `ready` again; unleased (a stale epoch) it is `ready`.
/// Run `run-l` is at version 4 under restore epoch 1.
async fn commits_mark_the_job_their_lane_writes_next(
    queue: &dyn JobQueue,
    reads: &dyn RunReads,
    on_insert: &coordinator_ports::store::LeaseOnInsert,
) {
    use coordinator_ports::store::{JobState, LeaseOnInsert};
    let step = |version: u64, names: &[&str]| Commit {
        review: None,
        run_id: "run-l".into(),
        expected_version: version,
        at: committed_at(&state("run-l")),
        state: state("run-l"),
        ledger: BTreeMap::new(),
        complete: None,
        jobs: names
            .iter()
            .map(|name| NewJob {
                kind: dispatch(name, 1),
                due_at: unix(100),
            })
            .collect(),
    };
    let marking = LeaseOnInsert {
        epoch: 1,
        mark_sending: Some(1),
        ..on_insert.clone()
    };
    let marked = queue
        .commit_leasing(step(4, &["read", "notify"]), Some(&marking))
        .await
        .expect("commit");
    let states: Vec<JobState> = marked.leased.iter().map(|j| j.state).collect();
    assert_eq!(states, [JobState::Ready, JobState::Sending]);
    let notify = marked.leased.get(1).expect("the marked job").id;
    let stored = |jobs: &[coordinator_ports::store::Job]| {
        jobs.iter().find(|j| j.id == notify).map(|j| j.state)
    };
    let jobs = reads.jobs("run-l").await.expect("jobs");
    assert_eq!(stored(&jobs), Some(JobState::Sending), "{jobs:?}");
    queue
        .release(notify, "w1", unix(100), None)
        .await
        .expect("release");
    let jobs = reads.jobs("run-l").await.expect("jobs");
    assert_eq!(stored(&jobs), Some(JobState::Ready), "{jobs:?}");
    let stale = LeaseOnInsert {
        epoch: 0,
        mark_sending: Some(0),
        ..on_insert.clone()
    };
    let unleased = queue
        .commit_leasing(step(5, &["stale-mark"]), Some(&stale))
        .await
        .expect("commit");
    assert!(unleased.leased.is_empty());
    let jobs = reads.jobs("run-l").await.expect("jobs");
    let stale_mark = jobs.iter().find(|j| {
        matches!(&j.kind, coordinator_ports::store::JobKind::Dispatch { dispatch, .. }
            if dispatch.step == "stale-mark")
    });
    assert_eq!(
        stale_mark.map(|j| (j.state, j.lease.is_some())),
        Some((JobState::Ready, false)),
        "an unleased job is never marked: {jobs:?}"
    );
}

/// A group commit ([`JobQueue::commit_batch`]) answers each commit as
/// [`JobQueue::commit_leasing`] alone would, in order, one refusal never
/// failing another: a commit that completes its job and leases its due
/// new job on insert, a stale version (conflict), a lease another owner
/// holds (lease lost), a run that ends (every job gone), a run that does
/// not exist. [`JobQueue::mark_sending_batch`] likewise fences each job on
/// its own.
pub async fn group_commits_answer_each_commit_as_alone(
    admission: &dyn RunAdmission,
    queue: &dyn JobQueue,
    reads: &dyn RunReads,
    fx: &Fixture,
) {
    let leased = admit_group_runs_and_lease_their_timers(admission, queue, fx).await;
    let answers = commit_the_group_one_outcome_each(queue, &leased).await;
    let first = answers_are_each_commit_alone_in_order(answers);
    group_commits_left_each_run_as_alone(reads).await;
    mark_sending_grouped_each_job_under_its_own_lease(queue, &first, &leased).await;
}

/// Admits `run-ga` to `run-gd` (each with its timer job due at 60) and
/// leases their timers to `w1` (lease until 300).
async fn admit_group_runs_and_lease_their_timers(
    admission: &dyn RunAdmission,
    queue: &dyn JobQueue,
    fx: &Fixture,
) -> Vec<Job> {
    for name in ["a", "b", "c", "d"] {
        admission
            .admit(new_run(
                fx,
                &format!("run-g{name}"),
                "alice",
                &format!("id-g{name}"),
                "d",
            ))
            .await
            .expect("admit");
    }
    lease(queue, "w1", 100, 300, 10).await.expect("lease")
}

/// The id of `run`'s leased timer job among `leased`.
fn leased_timer_of(leased: &[Job], run: &str) -> u64 {
    leased
        .iter()
        .find(|j| j.run_id == run)
        .map(|j| j.id)
        .expect("each run's timer leased")
}

/// A commit of `run` from `version` to `state`, completing `complete`
/// (job id, owner) and inserting a dispatch due at 100 and a timer due at
/// 150.
fn group_commit(run: &str, version: u64, state: RunState, complete: Option<(u64, &str)>) -> Commit {
    Commit {
        review: None,
        run_id: run.into(),
        expected_version: version,
        at: committed_at(&state),
        state,
        ledger: BTreeMap::new(),
        complete: complete.map(|(job, owner)| (job, owner.to_owned())),
        jobs: vec![
            NewJob {
                kind: dispatch(&format!("{run}-now"), 1),
                due_at: unix(100),
            },
            NewJob {
                kind: JobKind::Timer {
                    at: instant("1970-01-01T00:02:30Z"),
                    wake: WakeKind::Wake,
                },
                due_at: unix(150),
            },
        ],
    }
}

/// One group of five commits, leasing on insert to `w1` (now 100, until
/// 200): `run-ga` completes its timer; `run-gb` has a stale version;
/// `run-gc` completes a timer `w2` does not hold; `run-gd` ends; `run-none`
/// does not exist.
async fn commit_the_group_one_outcome_each(
    queue: &dyn JobQueue,
    leased: &[Job],
) -> Vec<Result<Committed, StoreError>> {
    use coordinator_ports::store::LeaseOnInsert;
    let job_of = |run: &str| leased_timer_of(leased, run);
    let on_insert = LeaseOnInsert {
        owner: "w1".into(),
        now: unix(100),
        lease_until: unix(200),
        epoch: 0,
        mark_sending: None,
    };
    queue
        .commit_batch(vec![
            (
                group_commit("run-ga", 1, state("run-ga"), Some((job_of("run-ga"), "w1"))),
                Some(on_insert.clone()),
            ),
            (
                group_commit("run-gb", 5, state("run-gb"), Some((job_of("run-gb"), "w1"))),
                Some(on_insert.clone()),
            ),
            (
                group_commit("run-gc", 1, state("run-gc"), Some((job_of("run-gc"), "w2"))),
                Some(on_insert.clone()),
            ),
            (
                group_commit(
                    "run-gd",
                    1,
                    ended("run-gd", RunStatus::Finished),
                    Some((job_of("run-gd"), "w1")),
                ),
                Some(on_insert.clone()),
            ),
            (group_commit("run-none", 1, state("run-none"), None), None),
        ])
        .await
}

/// The five answers, in order: `run-ga` commits and is handed only its
/// dispatch due now; a conflict; a lost lease; `run-gd` commits with no
/// job; not found. Returns `run-ga`'s answer.
fn answers_are_each_commit_alone_in_order(
    answers: Vec<Result<Committed, StoreError>>,
) -> Committed {
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
                j.due_at.unix_seconds(),
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
    first
}

/// What each commit of the group left: `run-ga`'s new jobs, `run-gb`'s
/// and `run-gc`'s timers untouched, `run-gd` ended with no job, and each
/// run's version.
async fn group_commits_left_each_run_as_alone(reads: &dyn RunReads) {
    let kinds = |jobs: Vec<Job>| -> Vec<(i64, bool)> {
        jobs.iter()
            .map(|j| (j.due_at.unix_seconds(), j.lease.is_some()))
            .collect()
    };
    assert_eq!(
        kinds(reads.jobs("run-ga").await.expect("jobs")),
        vec![(100, true), (150, false)],
        "the timer completed, the two new jobs inserted"
    );
    assert_eq!(
        kinds(reads.jobs("run-gb").await.expect("jobs")),
        vec![(60, true)],
        "a refused commit changes nothing"
    );
    assert_eq!(
        kinds(reads.jobs("run-gc").await.expect("jobs")),
        vec![(60, true)]
    );
    assert!(reads.jobs("run-gd").await.expect("jobs").is_empty());
    for (run, version) in [("run-ga", 2), ("run-gb", 1), ("run-gc", 1), ("run-gd", 2)] {
        let record = reads.get(run).await.expect("get").expect("the run");
        assert_eq!(record.version, version, "{run}");
    }
    assert!(reads
        .get("run-gd")
        .await
        .expect("get")
        .expect("the run")
        .status()
        .is_terminal());
}

/// Mark sending, grouped: `run-ga`'s dispatch (from its answer `first`)
/// is marked for `w1` only; another owner, another epoch (`run-gb`'s timer
/// among `leased`) and no such job are refused.
async fn mark_sending_grouped_each_job_under_its_own_lease(
    queue: &dyn JobQueue,
    first: &Committed,
    leased: &[Job],
) {
    let dispatch_job = first.leased.first().expect("one").id;
    let marked = queue
        .mark_sending_batch(vec![
            (dispatch_job, "w1".into(), 0),
            (dispatch_job, "w2".into(), 0),
            (leased_timer_of(leased, "run-gb"), "w1".into(), 1),
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
