//! A partition (issue 40 item 4): two `coordinator` processes on one
//! database, the second reaching it through a TCP hop (`support::Hop`)
//! that is cut while its lanes hold leases and product reads, for longer
//! than a lease (18 s with a 2 s request timeout), then healed. The other
//! process takes over the expired leases and carries every run out; the
//! cut-off one waits (`/ready` 503), serves again by itself after the heal,
//! and commits nothing stale: every run finishes once, no message is sent
//! twice, and nothing moves after the heal.

use std::time::{Duration, Instant};

use coordinator_fakes::Reply;
use serde_json::Value;

use crate::support::{free_port, rfc3339, unix_now, urls, Deployment, Hop};

/// Longer than a lease of the deployment below (2 × the request budget of
/// a 2 s timeout: 18 s).
const CUT_FOR: Duration = Duration::from_secs(25);

/// Runs the cut-off process holds when it is cut, and runs the other one
/// admits meanwhile.
const RUNS_EACH: usize = 8;

/// The port of a test database URL (`postgres://ROLE:PASSWORD@127.0.0.1:PORT/DB`).
fn port_in(url: &str) -> u16 {
    let after_host = url.rsplit_once("@127.0.0.1:").expect("a 127.0.0.1 URL").1;
    after_host.split('/').next().unwrap().parse().unwrap()
}

#[tokio::test]
async fn one_process_cut_off_past_its_lease_loses_nothing() {
    let Some(urls) = urls("partition") else {
        return;
    };
    let began = Instant::now();
    let d = Deployment::new(urls.clone(), 2_000).await;
    let port = port_in(&urls.runtime);
    let a = d.spawn().await;
    let hop = Hop::start(port).await;
    d.set_database(&hop.urls(&urls, port));
    let mut b = d.spawn().await;
    d.set_database(&urls);

    // The cut-off process's runs are due now; their record reads hang for
    // 3 s, so its lanes hold the leases when the hop is cut.
    let mut runs: Vec<String> = Vec::new();
    for i in 0..RUNS_EACH {
        let app = format!("app-b-{i}");
        d.breg.fake().script(
            &format!("/v1/collections/applications/records/{app}"),
            [Reply::Delay(Duration::from_secs(3))],
        );
        runs.push(d.start(&b, &app, &rfc3339(unix_now() - 60)).await);
    }
    let start = Instant::now();
    while d.breg.fake().requests().len() < RUNS_EACH {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "{}",
            b.log_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let dead = free_port();
    hop.point_at(dead);
    let cut = Instant::now();
    // Meanwhile the other process admits and serves runs of its own.
    for i in 0..RUNS_EACH {
        let app = format!("app-a-{i}");
        runs.push(d.start(&a, &app, &rfc3339(unix_now() + 2)).await);
    }
    let mut saw_503 = false;
    while cut.elapsed() < CUT_FOR {
        assert!(b.alive(), "the cut-off process died:\n{}", b.log_text());
        if d.ready(&b).await == Some(503) {
            saw_503 = true;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(saw_503, "/ready never answered 503 while cut off");
    // Past the lease, the other process carried out the runs the cut-off
    // one held.
    for run in &runs {
        let v = d
            .wait_state(&a, run, "finished", Duration::from_secs(30))
            .await;
        assert_eq!(v["outcome"], "message-accepted", "{v}");
    }
    hop.point_at(port);
    let healed = Instant::now();
    while d.ready(&b).await != Some(200) {
        assert!(
            healed.elapsed() < Duration::from_secs(30),
            "{}",
            b.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let back = healed.elapsed();
    // Serving again: a run it admits now finishes.
    let last = d.start(&b, "app-b-after", &rfc3339(unix_now() - 60)).await;
    d.wait_state(&b, &last, "finished", Duration::from_secs(30))
        .await;
    runs.push(last);
    // Nothing stale was committed after the heal: every run is still
    // finished, and each sent its one message.
    for run in &runs {
        let v: Value = d.get(&a, &format!("/v1/runs/{run}")).await.unwrap();
        assert_eq!(v["state"], "finished", "{v}");
    }
    let per_key = d.messages_per_key();
    assert_eq!(per_key.len(), runs.len(), "one message per run");
    assert!(per_key.values().all(|n| *n == 1), "a message sent twice");
    eprintln!(
        "partition: {} runs, one process cut off for {CUT_FOR:?}, ready again {back:?} after the heal, in {:?}",
        runs.len(),
        began.elapsed()
    );
    drop((a, b));
    d.cleanup().await;
}
