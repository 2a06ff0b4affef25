//! `Prefer: wait=N` across processes: a caller waits on one process for
//! a run another process ends (docs/decisions.md "Waiting for a run's
//! end"). The test hears the deployment's run-end channel itself, so it
//! knows the waiting process holds the wait before the other ends the run.

use std::time::Duration;

use serde_json::{json, Value};
use sqlx::postgres::PgListener;

use crate::support::{rfc3339, unix_now, urls, Deployment, OPERATOR};

/// Far longer than a relayed wake takes, far shorter than the wait asked.
const WOKEN_WITHIN: Duration = Duration::from_secs(30);

/// Until the channel carries a notice whose `member` is `run`.
async fn notice_heard(channel: &mut PgListener, member: &str, run: &str) {
    tokio::time::timeout(WOKEN_WITHIN, async {
        loop {
            let notice = channel.recv().await.unwrap();
            let notice: Value = serde_json::from_str(notice.payload()).unwrap();
            if notice[member] == run {
                return;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no `{member}` notice for {run}"));
}

#[tokio::test]
async fn a_wait_on_one_process_is_woken_by_an_end_another_commits() {
    let Some(urls) = urls("a_wait_on_one_process_is_woken") else {
        return;
    };
    let d = Deployment::new(urls, 2_000).await;
    let (a, b) = (d.spawn().await, d.spawn().await);
    let mut channel = PgListener::connect(&d.urls.admin).await.unwrap();
    channel.listen(&d.ns).await.unwrap();
    // Its timer is a day ahead: nothing ends it but the cancel.
    let run = d.start(&a, "app-w", &rfc3339(unix_now() + 86_400)).await;

    let waiting = tokio::spawn({
        let url = format!("{}/v1/runs/{run}", b.base);
        let token = d.token(OPERATOR);
        async move {
            let answer = reqwest::Client::new()
                .get(url)
                .bearer_auth(token)
                .header("prefer", "wait=60")
                .send()
                .await
                .unwrap();
            let applied = answer
                .headers()
                .get("preference-applied")
                .map(|v| v.to_str().unwrap().to_owned());
            let body: Value = serde_json::from_str(&answer.text().await.unwrap()).unwrap();
            (applied, body)
        }
    });
    // b holds the wait (it says so after registering it).
    notice_heard(&mut channel, "waiting", &run).await;

    let (status, cancelled) = d
        .operate(
            &a,
            &format!("/v1/runs/{run}/cancel"),
            json!({"reason": "t-1"}),
        )
        .await;
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["state"], "cancelled", "{cancelled}");
    notice_heard(&mut channel, "ended", &run).await;
    let (applied, body) = tokio::time::timeout(WOKEN_WITHIN, waiting)
        .await
        .expect("b's wait woken by a's end")
        .unwrap();
    assert_eq!(applied.as_deref(), Some("wait=60"), "{body}");
    assert_eq!(body["state"], "cancelled", "{body}");
    drop((a, b));
    d.cleanup().await;
}

/// A process stopped (SIGTERM) while a caller waits answers the caller at
/// once with the run as it is, without `Preference-Applied`, and exits
/// within the 15 s drain.
#[tokio::test]
async fn a_stopping_process_answers_its_waits_and_drains_in_time() {
    let Some(urls) = urls("a_stopping_process_answers_its_waits") else {
        return;
    };
    let d = Deployment::new(urls, 2_000).await;
    let (a, mut b) = (d.spawn().await, d.spawn().await);
    let mut channel = PgListener::connect(&d.urls.admin).await.unwrap();
    channel.listen(&d.ns).await.unwrap();
    let run = d.start(&a, "app-s", &rfc3339(unix_now() + 86_400)).await;
    let waiting = tokio::spawn({
        let url = format!("{}/v1/runs/{run}", b.base);
        let token = d.token(OPERATOR);
        async move {
            let answer = reqwest::Client::new()
                .get(url)
                .bearer_auth(token)
                .header("prefer", "wait=60")
                .send()
                .await
                .unwrap();
            let applied = answer.headers().get("preference-applied").cloned();
            let body: Value = serde_json::from_str(&answer.text().await.unwrap()).unwrap();
            (applied, body)
        }
    });
    notice_heard(&mut channel, "waiting", &run).await;
    let exited = b.terminate(Duration::from_secs(15)).await;
    assert!(
        exited.is_some_and(|s| s.success()),
        "{exited:?}\n{}",
        b.log_text()
    );
    let (applied, body) = tokio::time::timeout(WOKEN_WITHIN, waiting)
        .await
        .expect("answered at the stop")
        .unwrap();
    assert_eq!(applied, None, "{body}");
    assert_eq!(body["state"], "running", "{body}");
    drop((a, b));
    d.cleanup().await;
}
