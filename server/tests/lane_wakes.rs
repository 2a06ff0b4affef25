//! A worker lane woken for a hand-off leases from the store only when a
//! wake asked for it (docs/decisions.md "A lane woken for a hand-off
//! leases nothing from the store"): a job due in the store that no wake
//! announced waits for a lane's safety tick or a store wake, and a lane
//! that finds the hand-off queue emptied makes no lease statement. One
//! in-process service (`ops_support`) on the in-memory store.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::sync::Arc;

use coordinator_engine::LaneTick;
use coordinator_ports::MemoryRunStore;
use serde_json::Value;

mod ops_support;

use ops_support::PRODUCER;

#[tokio::test]
async fn a_lane_woken_for_a_hand_off_leases_from_the_store_only_when_asked() {
    let instance = ops_support::start("db-lanes-1", false, Arc::new(MemoryRunStore::new())).await;
    let run = instance.start_reviewed_notice("k-lanes-1").await;
    let worker = &instance.engine.worker;
    // The run's calls, until it waits for its review.
    worker.run_until_idle(20).await.unwrap();
    let status: Value = serde_json::from_str(
        &reqwest::Client::new()
            .get(format!("{}/v1/runs/{run}", instance.base))
            .bearer_auth(instance.token(PRODUCER))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(status["state"], "running", "{status}");
    // An hour later its review's observation (or its timeout) is due in
    // the store; no commit of this process handed it off, no wake asked.
    instance.clock.advance(3600);
    let woken_for_hand_off = worker.tick_lane(false).await.unwrap();
    assert_eq!(
        woken_for_hand_off,
        LaneTick::default(),
        "a lane woken for a hand-off it finds empty leases nothing"
    );
    worker.wake_one();
    let asked = worker.tick_lane(false).await.unwrap();
    assert!(
        asked.taken >= 1 && asked.leased,
        "a store wake leases the due job: {asked:?}"
    );
}
