//! The lease suite on the memory backend, with paused Tokio time.

mod lease_suite;

use std::sync::Arc;
use std::time::Duration;

use lease_suite::SuiteConfig;
use leasehold::backend::Backend;
use leasehold::backend::memory::MemoryBackend;
use leasehold::lease::{LeaseManager, LeaseOptions};

/// A fresh memory backend, handed over as an `Arc<dyn Backend>` the way the
/// Azurite runner hands over its backend.
fn memory() -> Arc<dyn Backend> {
    Arc::new(MemoryBackend::new())
}

#[tokio::test(start_paused = true)]
async fn mutual_exclusion_among_50_contenders_in_10_processes() {
    lease_suite::mutual_exclusion(memory(), SuiteConfig::memory(), 10, 5).await;
}

#[tokio::test(start_paused = true)]
async fn mutual_exclusion_among_50_contenders_in_50_processes() {
    lease_suite::mutual_exclusion(memory(), SuiteConfig::memory(), 50, 1).await;
}

#[tokio::test(start_paused = true)]
async fn renewal_holds_a_lease_for_ten_durations() {
    lease_suite::renewal_holds_for_ten_durations(memory(), SuiteConfig::memory()).await;
}

#[tokio::test(start_paused = true)]
async fn renewal_holds_a_fifteen_second_lease_for_ten_durations() {
    let cfg = SuiteConfig {
        lease: Duration::from_secs(15),
        ..SuiteConfig::memory()
    };
    lease_suite::renewal_holds_for_ten_durations(memory(), cfg).await;
}

#[tokio::test(start_paused = true)]
async fn hanging_renew_fires_lost_before_the_lease_expires() {
    lease_suite::hanging_renew_fires_lost_before_expiry(memory(), SuiteConfig::memory()).await;
}

#[tokio::test(start_paused = true)]
async fn external_break_fires_lost_and_fences_writes() {
    lease_suite::external_break_fires_lost(memory(), SuiteConfig::memory()).await;
}

#[tokio::test(start_paused = true)]
async fn do_once_runs_once_among_10_callers_and_again_after_a_crash() {
    lease_suite::do_once_runs_exactly_once(memory(), SuiteConfig::memory()).await;
}

#[tokio::test(start_paused = true)]
async fn leader_election_with_5_candidates_and_100_failovers_never_overlaps() {
    lease_suite::leader_failovers_never_overlap(memory(), SuiteConfig::memory()).await;
}

#[tokio::test(start_paused = true)]
async fn reservation_log_stays_bounded_and_ordered() {
    lease_suite::reservation_log_is_bounded_and_ordered(memory(), SuiteConfig::memory()).await;
}

#[tokio::test(start_paused = true)]
async fn local_sharing_serves_100_units_with_one_acquire_and_one_release() {
    lease_suite::local_sharing_costs_one_acquire(memory(), SuiteConfig::memory()).await;
}

#[tokio::test(start_paused = true)]
async fn hand_over_keeps_the_blob_view_without_reading() {
    lease_suite::hand_over_keeps_the_blob_view(memory(), SuiteConfig::memory()).await;
}

#[tokio::test(start_paused = true)]
async fn describe_reports_holder_epoch_and_journal_and_drop_releases() {
    lease_suite::describe_and_drop(memory(), SuiteConfig::memory()).await;
}

#[tokio::test(start_paused = true)]
async fn bad_durations_and_names_are_invalid_before_any_request() {
    lease_suite::invalid_input_sends_nothing(memory(), SuiteConfig::memory()).await;
}

#[tokio::test(start_paused = true)]
async fn ambiguous_renewals_are_verified_with_a_properties_read() {
    lease_suite::ambiguous_renewals_are_verified(memory(), SuiteConfig::memory()).await;
}

#[tokio::test(start_paused = true)]
async fn the_fairness_bound_lets_another_process_in() {
    lease_suite::fairness_bound_lets_other_processes_in(memory(), SuiteConfig::memory()).await;
}

#[tokio::test(start_paused = true)]
async fn infinite_leases_hold_until_released_or_broken() {
    lease_suite::infinite_leases_hold_until_released(memory(), SuiteConfig::memory()).await;
}

#[tokio::test(start_paused = true)]
async fn acquire_gives_up_at_its_deadline_and_gives_back_a_late_lease() {
    lease_suite::acquire_gives_up_at_its_deadline(memory(), SuiteConfig::memory()).await;
}

#[tokio::test(start_paused = true)]
async fn a_lock_unit_costs_acquire_read_writes_release_cold_and_only_writes_handed_over() {
    lease_suite::lock_unit_request_budget(memory(), SuiteConfig::memory()).await;
}

/// A guard outliving its runtime is dropped without a panic and without a
/// request (the lease then expires on its own).
#[test]
fn dropping_a_guard_without_a_runtime_does_not_panic() {
    let backend = memory();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let leases = LeaseManager::new(Arc::new(backend), LeaseOptions::default()).unwrap();
    let guard = runtime
        .block_on(leases.acquire("orphan", Duration::from_secs(1)))
        .unwrap();
    drop(runtime);
    drop(guard);
}
