//! How many write transactions a lone run of the starter costs the
//! database: the built `coordinator` against the fakes on PostgreSQL 17,
//! one run at a time, each counted by the transaction ids PostgreSQL
//! assigned between its `POST` and the `GET` that saw it finished (a
//! transaction is given an id only when it writes). Its own test binary,
//! so that no other test writes to the cluster meanwhile.
//!
//! The starter reads an application, then sends a notice: the admission,
//! the commit of the read's answer (which marks the notice `sending`,
//! docs/decisions.md "The commit of a read's answer marks the next
//! command") and the commit of the notice's answer, which ends the run.

#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use sqlx::{Connection, PgConnection, Row};
use support::{rfc3339, unix_now, urls, Deployment};

/// The next transaction id of the cluster (reading it assigns none).
async fn next_transaction_id(db: &mut PgConnection) -> i64 {
    let row = sqlx::query("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint")
        .fetch_one(db)
        .await
        .unwrap();
    row.get(0)
}

#[tokio::test]
async fn a_lone_starter_run_writes_three_transactions() {
    let Some(urls) = urls("a_lone_starter_run_writes_three_transactions") else {
        return;
    };
    let mut db = PgConnection::connect(&urls.admin).await.unwrap();
    let d = Deployment::new(urls, 2_000).await;
    let c = d.spawn().await;
    // One run first, so that the service's caches (the Program, the
    // prepared statements) are warm.
    let warm = d.start(&c, "app-warm", &rfc3339(unix_now() - 60)).await;
    d.wait_state(&c, &warm, "finished", Duration::from_secs(30))
        .await;
    let mut per_run = Vec::new();
    for i in 0..5 {
        let before = next_transaction_id(&mut db).await;
        let run = d
            .start(&c, &format!("app-{i}"), &rfc3339(unix_now() - 60))
            .await;
        let v = d
            .wait_state(&c, &run, "finished", Duration::from_secs(30))
            .await;
        assert_eq!(v["outcome"], "message-accepted", "{v}");
        per_run.push(next_transaction_id(&mut db).await - before);
    }
    eprintln!("write transactions per lone run: {per_run:?}");
    // The service's own background work (maintenance) may add a write to
    // a run's window, never take one away: the fewest is the run's cost.
    let fewest = per_run.iter().copied().min().unwrap_or_default();
    assert!(
        (1..=3).contains(&fewest),
        "a lone starter run wrote {per_run:?} transactions (at most 3 expected)\n{}",
        c.log_text()
    );
    assert_eq!(d.messaging.messages().len(), 6);
    drop(c);
    d.cleanup().await;
}
