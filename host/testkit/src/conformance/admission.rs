//! Admission: keyed by start identity, records round trip, group admissions.

use super::*;
use coordinator_ir::instant::Instant;

/// Admission is keyed by start identity: a repeat with the same digest is
/// the stored run, another digest a conflict; concurrent admissions of one
/// identity give one run.
pub async fn admission_is_keyed_by_start_identity(
    admission: &dyn RunAdmission,
    reads: &dyn RunReads,
    fx: &Fixture,
) {
    let created = admission
        .admit(new_run(fx, "run-a", "alice", "id-1", "d1"))
        .await
        .expect("admit");
    let Admitted::Created(a) = created else {
        panic!("created: {created:?}")
    };
    assert_eq!((a.version, a.id.as_str()), (1, "run-a"));
    assert!(matches!(
        admission.admit(new_run(fx, "run-b", "alice", "id-1", "d1")).await,
        Ok(Admitted::Existing(r)) if r.id == "run-a"
    ));
    assert_eq!(
        admission
            .admit(new_run(fx, "run-c", "alice", "id-1", "d2"))
            .await,
        Ok(Admitted::Conflict)
    );
    assert_eq!(reads.jobs("run-a").await.map(|j| j.len()), Ok(1));
    assert_eq!(reads.get("run-b").await, Ok(None));
    let (x, y) = tokio::join!(
        admission.admit(new_run(fx, "run-x", "bob", "id-2", "d")),
        admission.admit(new_run(fx, "run-y", "bob", "id-2", "d"))
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
pub async fn records_round_trip(
    admission: &dyn RunAdmission,
    queue: &dyn JobQueue,
    reads: &dyn RunReads,
    fx: &Fixture,
) {
    let mut run = new_run(fx, "run-a", "alice", "id-1", "d");
    run.trace_parent = coordinator_ports::TraceParent::parse(
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    );
    assert!(run.trace_parent.is_some());
    run.jobs = vec![NewJob {
        kind: dispatch("notify", 1),
        due_at: unix(10),
    }];
    let Admitted::Created(created) = admission.admit(run.clone()).await.expect("admit") else {
        panic!("created")
    };
    let got = reads.get("run-a").await.expect("get").expect("the run");
    assert_eq!(got, created);
    assert_eq!(got.state, run.state);
    assert_eq!(got.owner, owner("alice"));
    assert_eq!(got.workflow, fx.workflow);
    assert_eq!(got.revision, fx.revision);
    assert_eq!(got.start_identity, "id-1");
    assert_eq!(got.request_digest, "d");
    assert_eq!(got.bindings, run.bindings);
    assert_eq!(got.trace_parent, run.trace_parent);
    assert!(got.ledger.is_empty());
    let jobs = reads.jobs("run-a").await.expect("jobs");
    let job = jobs.first().expect("one job");
    assert_eq!(job.kind, dispatch("notify", 1));
    assert_eq!(
        (job.due_at.unix_seconds(), job.state, job.lease.is_none()),
        (10, JobState::Ready, true)
    );
    let mut ledger = BTreeMap::new();
    ledger.insert(
        "notify".to_owned(),
        StepLedger {
            attempts: 1,
            // A flow-control wait round-trips with the ledger.
            waiting: Some(coordinator_ports::flow::CallWait {
                connection: "notices".into(),
                limit: coordinator_ports::flow::FlowLimit::Rate,
                since: Instant::from_unix_seconds_and_nanos(1_000, 250_000_000),
            }),
            entered_at: Some(nanos(1_700_000_000_123_456_789)),
            started_at: Some(unix(10)),
            answers: vec![coordinator_ports::AnswerRecord {
                at: unix(11),
                attempt: 1,
                kind: "retryable".into(),
                code: Some("503".into()),
            }],
            ..StepLedger::default()
        },
    );
    // A wait's times and end read back too.
    ledger.insert(
        "due".to_owned(),
        StepLedger {
            started_at: Some(unix(5)),
            ended_at: Some(unix(10)),
            due_at: Some(unix(10)),
            wait_end: Some(coordinator_ports::WaitEnd::Woke),
            ..StepLedger::default()
        },
    );
    let mut next = state("run-a");
    next.path.push("notify".into());
    let v = queue
        .commit(Commit {
            review: None,
            run_id: "run-a".into(),
            expected_version: 1,
            at: committed_at(&next),
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
                due_at: unix(20),
            }],
        })
        .await
        .expect("commit");
    assert_eq!(v, 2);
    let got = reads.get("run-a").await.expect("get").expect("the run");
    assert_eq!(
        (
            got.state,
            got.ledger,
            got.version,
            got.bindings,
            got.trace_parent
        ),
        (next, ledger, 2, run.bindings, run.trace_parent),
        "a commit keeps the bindings and trace context recorded at admission"
    );
    assert_eq!(reads.jobs("run-a").await.map(|j| j.len()), Ok(2));
    assert_eq!(reads.get("nope").await, Ok(None));
    assert_eq!(reads.jobs("nope").await, Ok(vec![]));
}

/// A group admission ([`RunAdmission::admit_batch`]) answers each start as
/// [`RunAdmission::admit_leasing`] alone would, in order: a new run (its due
/// job leased on insert), a repeat of a spent identity (its run), the same
/// identity with another digest (conflict), and two starts of one new
/// identity in the batch (one run, the other start answered with it).
pub async fn group_admissions_answer_each_start_as_alone(
    admission: &dyn RunAdmission,
    reads: &dyn RunReads,
    fx: &Fixture,
) {
    use coordinator_ports::store::LeaseOnInsert;
    admission
        .admit(new_run(fx, "run-spent", "alice", "id-spent", "d"))
        .await
        .expect("admit");
    let on_insert = LeaseOnInsert {
        owner: "w1".into(),
        now: unix(100),
        lease_until: unix(200),
        epoch: 0,
        mark_sending: None,
    };
    let start = |id: &str, identity: &str, digest: &str| {
        (
            new_run(fx, id, "alice", identity, digest),
            Some(on_insert.clone()),
        )
    };
    let answers = admission
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
    let leased = reads.jobs("run-new").await.expect("jobs");
    assert_eq!(
        leased
            .iter()
            .map(|j| j.lease.as_ref().map(|l| l.owner.clone()))
            .collect::<Vec<_>>(),
        vec![Some("w1".to_owned())],
        "the new run's due job is leased on insert"
    );
    assert!(reads.get("run-again").await.expect("get").is_none());
    assert!(reads.get("run-other").await.expect("get").is_none());
}
