//! The flow-control journey (docs/runtime.md "Flow control"): Messaging's
//! stand-in holds every request 400 ms and counts how many it answers at
//! once; its first answer is a 429 with `Retry-After: 2`. The `notices`
//! connection has `limits: {inFlight: 2, perSecond: 5, burst: 5}`; 24
//! `delayed-follow-up` runs, started on two `coordinator` processes, fall
//! due together. The stand-in never sees more than 2 requests at once, nor
//! more than the burst plus 5 a second over any stretch; nothing arrives
//! while the product's `Retry-After` runs; runs show `waitingFor` while they
//! wait; and every run finishes, each notice sent once (the 429'd one
//! twice, under one key). Then a cancel reaches a call the product's
//! `Retry-After: 600` holds back: the run ends cancelled at once.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use coordinator_fakes::Reply;

use crate::support::{rfc3339, unix_now, urls, Deployment, OPERATOR};

const RUNS: usize = 24;

#[tokio::test]
async fn limits_hold_across_processes_and_retry_after_holds_the_connection() {
    let Some(urls) = urls("limits_hold_across_processes_and_retry_after_holds_the_connection")
    else {
        return;
    };
    let mut d = Deployment::new(urls, 5_000).await;
    d.connection_limits = vec![(
        "notices".into(),
        "{inFlight: 2, perSecond: 5, burst: 5}".into(),
    )];
    let messaging = d.messaging.fake();
    messaging.slow(Duration::from_millis(400)).script(
        "/v1/messages",
        [Reply::TooMany {
            retry_after: "2".into(),
        }],
    );
    let a = d.spawn().await;
    let b = d.spawn().await;
    let send_after = rfc3339(unix_now() + 4);
    let mut runs = Vec::new();
    for i in 0..RUNS {
        let c = if i % 2 == 0 { &a } else { &b };
        runs.push(d.start(c, &format!("app-flow-{i:02}"), &send_after).await);
    }
    // Until every run finished: whether any showed it waits for `notices`.
    let started = Instant::now();
    let mut seen_waiting = false;
    let mut finished = BTreeSet::new();
    while finished.len() < RUNS {
        for run in &runs {
            if finished.contains(run) {
                continue;
            }
            let Some(v) = d.get(&a, &format!("/v1/runs/{run}")).await else {
                continue;
            };
            if v["waitingFor"] == "notices" {
                seen_waiting = true;
            }
            match v["state"].as_str() {
                Some("finished") => {
                    finished.insert(run.clone());
                }
                Some("running") => {}
                other => panic!("run {run} is {other:?}: {v}\n{}", a.log_text()),
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "{} of {RUNS} finished\n{}\n{}",
            finished.len(),
            a.log_text(),
            b.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(seen_waiting, "no run showed waitingFor: notices");
    assert!(
        messaging.max_in_flight() <= 2,
        "the stand-in answered {} requests at once",
        messaging.max_in_flight()
    );
    let sent = messaging.requests_to("/v1/messages");
    let per_key = d.messages_per_key();
    assert_eq!(per_key.len(), RUNS, "{per_key:?}");
    assert_eq!(
        sent.len(),
        RUNS + 1,
        "one notice per run, the 429'd one twice"
    );
    assert_eq!(
        per_key.values().filter(|n| **n == 2).count(),
        1,
        "{per_key:?}"
    );
    // Over any stretch of dt seconds: at most burst + 5·dt arrivals (one
    // more for the network's jitter between the grant and the arrival).
    let times: Vec<Instant> = sent.iter().map(|r| r.at).collect();
    for (i, first) in times.iter().enumerate() {
        for (n, last) in times.iter().enumerate().skip(i) {
            let dt = last.duration_since(*first).as_secs_f64();
            let count = (n - i + 1) as f64;
            assert!(
                count <= 5.0 + 5.0 * dt + 1.0,
                "{count} requests in {dt:.3} s: {:?}",
                times
                    .iter()
                    .map(|t| t.duration_since(times[0]))
                    .collect::<Vec<_>>()
            );
        }
    }
    // The first request got the 429 400 ms after it arrived; its
    // Retry-After (2 s) held every call back: nothing arrived from 0.3 s
    // after that answer until 1.8 s after it.
    let answered = times[0] + Duration::from_millis(400);
    let held: Vec<Duration> = times
        .iter()
        .filter(|t| {
            **t > answered + Duration::from_millis(300)
                && **t < answered + Duration::from_millis(1_800)
        })
        .map(|t| t.duration_since(answered))
        .collect();
    assert!(held.is_empty(), "calls during the Retry-After: {held:?}");
    // A cancel reaches a call the product's Retry-After holds back: a run
    // answered 429 `Retry-After: 600` waits to try again; cancelled, it ends
    // cancelled at once and nothing more is sent.
    messaging.script(
        "/v1/messages",
        [Reply::TooMany {
            retry_after: "600".into(),
        }],
    );
    let held = d.start(&b, "app-flow-hold", &rfc3339(unix_now())).await;
    let started = Instant::now();
    loop {
        let v = d.get(&a, &format!("/v1/runs/{held}")).await.unwrap();
        if v["waitingFor"] == "notices" {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let before = messaging.requests_to("/v1/messages").len();
    let cancelled = d
        .http
        .post(format!("{}/v1/runs/{held}/cancel", a.base))
        .bearer_auth(d.token(OPERATOR))
        .header("content-type", "application/json")
        .body(r#"{"reason":"ticket-42"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(cancelled.status().as_u16(), 200);
    let v = d
        .wait_state(&a, &held, "cancelled", Duration::from_secs(15))
        .await;
    assert!(v.get("waitingFor").is_none(), "{v}");
    assert_eq!(messaging.requests_to("/v1/messages").len(), before);
    d.cleanup().await;
}
