//! The in-memory store passes every store conformance check
//! (`coordinator_testkit::conformance`), each on a new store.

use coordinator_ports::MemoryRunStore;
use coordinator_testkit::conformance::{self, Fixture};

/// One `#[tokio::test]` per conformance check, each on a new store:
/// `check(ports)`, the store passed for each port the check takes.
macro_rules! conformance_tests {
    ($($check:ident($($port:ident),+)),+ $(,)?) => {$(
        #[tokio::test]
        async fn $check() {
            let store = MemoryRunStore::new();
            conformance::$check($({
                let $port = &store;
                $port
            }),+, &Fixture::any())
            .await;
        }
    )+};
}

conformance_tests!(
    admission_is_keyed_by_start_identity(admission, reads),
    records_round_trip(admission, queue, reads),
    leases_expire_and_commits_check_versions(admission, queue, reads),
    deadlines_become_timer_jobs_once_when_due(admission, queue, reads),
    commits_lease_new_due_jobs_to_the_committer(admission, queue, reads, holds),
    group_commits_answer_each_commit_as_alone(admission, queue, reads),
    group_admissions_answer_each_start_as_alone(admission, reads),
    release_and_discard(admission, queue, reads),
    live_bindings_count_runs_that_have_not_ended(admission, queue, reads),
    retention_erases_only_ended_payloads(admission, queue, reads, maintenance),
    bring_forward_respects_the_floor_and_lists_page(admission, queue, reads, maintenance),
    restore_hold_leases_lookups_only_and_fences_old_epochs(admission, queue, holds),
    reviews_are_recorded_surveyed_and_attested(admission, queue, reads, holds),
    moves_are_fenced_by_version_and_revision(admission, queue, reads, moves),
);

#[tokio::test]
async fn holds_are_swapped_only_from_what_was_read() {
    conformance::holds_are_swapped_only_from_what_was_read(&MemoryRunStore::new()).await;
}

#[tokio::test]
async fn counts_follow_every_change() {
    let store = MemoryRunStore::new();
    conformance::counts_follow_every_change(&store, &store, &store, &Fixture::any()).await;
}

#[tokio::test]
async fn live_runs_by_revision_follow_admissions_ends_and_moves() {
    let store = MemoryRunStore::new();
    let other = format!("sha256:{}", "b".repeat(64));
    conformance::live_runs_by_revision_follow_admissions_ends_and_moves(
        &store,
        &store,
        &store,
        &store,
        &Fixture::any(),
        &other,
    )
    .await;
}

#[tokio::test]
async fn flow_in_flight_slots() {
    let flow = coordinator_ports::MemoryFlowControl::new();
    conformance::in_flight_slots_are_held_until_given_back_or_their_lease_ends(&flow).await;
}

#[tokio::test]
async fn flow_rate() {
    let flow = coordinator_ports::MemoryFlowControl::new();
    conformance::the_rate_lets_a_burst_go_then_one_call_per_token(&flow).await;
}

#[tokio::test]
async fn flow_all_or_nothing() {
    let flow = coordinator_ports::MemoryFlowControl::new();
    conformance::a_call_held_back_by_its_rate_takes_no_slot(&flow).await;
}

#[tokio::test]
async fn flow_retry_after() {
    let flow = coordinator_ports::MemoryFlowControl::new();
    conformance::retry_after_holds_every_call_back_and_a_later_hold_wins(&flow).await;
}
