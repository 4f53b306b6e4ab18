//! The conformance suite, the lock suite and the lease suite on a real
//! Azurite (started by `scripts/with-azurite.sh`; required when `CI` is set).

mod conformance;
mod lock_suite;
mod support;

conformance_suite!(support::azurite_backend().map(conformance::Ctx::new));
emulator_suite!(
    support::azurite_backend().map(conformance::Ctx::new),
    crate::conformance::emulator::Target::Azurite
);

/// An over-long filter is refused before the transport is asked to send
/// anything (it used to be retried for about 5 s and end as `Transient`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_long_filters_send_no_request_on_azurite() {
    let Some(cs) = support::azurite::azurite_connection_string() else {
        return;
    };
    let plan = leasehold::backend::azure::FaultPlan::new();
    let backend = leasehold::backend::azure::AzureBackend::builder()
        .connection_string(&cs)
        .unwrap()
        .fault_plan(plan.clone())
        .build()
        .unwrap();
    let store = leasehold::Store::builder(backend)
        .table_prefix(prefix())
        .unwrap()
        .build()
        .unwrap();
    conformance::emulator::over_long_filters_send_no_request(&store, || plan.requests()).await;
}

emulator_timed_suite!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    support::azurite_backend().map(conformance::Ctx::new),
    crate::conformance::emulator::Target::Azurite
);

timed_conformance_suite!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    support::azurite_backend().map(conformance::Ctx::new)
);

fn prefix() -> String {
    format!("z{}", &uuid::Uuid::new_v4().simple().to_string()[..10])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_concurrent_transfers_conserve_money() {
    let Some(b) = support::azurite_backend() else {
        return;
    };
    lock_suite::concurrent_transfers_conserve_money(b, &prefix(), 50).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_units_see_their_writes_and_stay_in_their_partition() {
    let Some(b) = support::azurite_backend() else {
        return;
    };
    lock_suite::units_see_their_writes_and_stay_in_their_partition(b, &prefix()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_multi_table_commit_applies_all() {
    let Some(b) = support::azurite_backend() else {
        return;
    };
    lock_suite::multi_table_commit_applies_all(b, &prefix()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_stale_reads_fail_the_whole_commit() {
    let Some(b) = support::azurite_backend() else {
        return;
    };
    lock_suite::stale_reads_fail_the_whole_commit(b, &prefix()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_a_refused_insert_keeps_the_staged_insert() {
    let Some(b) = support::azurite_backend() else {
        return;
    };
    lock_suite::a_refused_insert_keeps_the_staged_insert(b, &prefix()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_writing_a_row_twice_follows_the_folding_table() {
    let Some(b) = support::azurite_backend() else {
        return;
    };
    lock_suite::writing_a_row_twice_follows_the_folding_table(b, &prefix()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_an_upsert_then_delete_of_an_absent_row_writes_nothing() {
    let Some(b) = support::azurite_backend() else {
        return;
    };
    lock_suite::an_upsert_then_delete_of_an_absent_row_writes_nothing(b, &prefix()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_a_staged_view_from_another_unit_is_refused_without_change() {
    let Some(b) = support::azurite_backend() else {
        return;
    };
    lock_suite::a_staged_view_from_another_unit_is_refused_without_change(b, &prefix()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_breaking_a_free_lock_reports_not_held() {
    let Some(b) = support::azurite_backend() else {
        return;
    };
    lock_suite::breaking_a_free_lock_reports_not_held(b, &prefix()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_a_lock_names_its_holder_even_when_its_unit_is_leaked() {
    let Some(b) = support::azurite_backend() else {
        return;
    };
    lock_suite::a_lock_names_its_holder_even_when_its_unit_is_leaked(b, &prefix()).await;
}

mod lease_suite;

fn shared() -> Option<std::sync::Arc<dyn leasehold::backend::Backend>> {
    support::azurite_backend()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_mutual_exclusion_among_contenders() {
    let Some(b) = shared() else { return };
    lease_suite::mutual_exclusion(b, lease_suite::SuiteConfig::real_time(0), 5, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_do_once_runs_exactly_once() {
    let Some(b) = shared() else { return };
    lease_suite::do_once_runs_exactly_once(b, lease_suite::SuiteConfig::real_time(0)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_leader_failovers_never_overlap() {
    let Some(b) = shared() else { return };
    lease_suite::leader_failovers_never_overlap(b, lease_suite::SuiteConfig::real_time(2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_external_break_fires_lost_and_says_each_fact_once() {
    let Some(b) = shared() else { return };
    lease_suite::external_break_fires_lost(b, lease_suite::SuiteConfig::real_time(0)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_acquire_gives_up_at_its_deadline() {
    let Some(b) = shared() else { return };
    lease_suite::acquire_gives_up_at_its_deadline(b, lease_suite::SuiteConfig::real_time(0)).await;
}
