//! The conformance suite (feature `conformance`): the behaviour every
//! backend must have, and the lease manager and partition locks must show
//! on it.
//!
//! Each check is a public async function over a [`Ctx`] (a store on a fresh
//! namespace of the backend under test, and how time passes for it) that
//! panics when the backend falls short, like a test. The checks are
//! grouped by what they exercise: [`tables`] (through the typed API),
//! [`table_backend`] (through the backend trait), [`blob_backend`] and
//! [`blobs`], [`timed`]
//! (blob leases running out), [`lease`], [`lock`], [`lock_many`],
//! [`fence`] (fenced writes), [`indexes`], [`mapping`] (entity
//! mapping: unknown properties kept, enums, key builders), [`reads`]
//! (what reads return while a commit is unfinished or a unit's lease runs
//! out), [`commits`] (what operators see of a partition's unfinished
//! commits), [`big_commits`] (commits too big for one transaction,
//! faulted at every request), [`txn`] (transactions without a lease),
//! [`purge`] (purges and counts of what a query matches), [`sweep`]
//! (what a sweep removes, and keeps, beside writes) and [`expiry`] (rows
//! past their expiry: absent to every read, swept).
//! [`conformance_suite!`](crate::conformance_suite) turns them all into one
//! test per check; leasehold runs it on the memory backend and on Azurite,
//! and a backend or backend wrapper of your own can run the same:
//!
//! ```no_run
//! // tests/conformance.rs, with leasehold's `conformance` feature enabled
//! // and tokio (features `macros`, `rt-multi-thread`, `test-util`) as a
//! // dev-dependency.
//! use std::sync::Arc;
//! use leasehold::backend::memory::MemoryBackend;
//! use leasehold::testing::CountingBackend;
//!
//! // One test per check, on a request-counting wrapper of the memory
//! // backend, timed checks on paused time.
//! leasehold::conformance_suite!(paused: Some(Arc::new(CountingBackend::new(
//!     MemoryBackend::new(),
//! ))));
//! # fn main() {}
//! ```
//!
//! The checks use only leasehold's public API.

mod ambiguous;
pub mod big_commits;
pub mod blob_backend;
pub mod blobs;
pub mod commits;
mod entities;
pub mod expiry;
pub mod fairness;
pub mod fence;
pub mod indexes;
pub mod lease;
pub mod lock;
pub mod lock_many;
pub mod mapping;
pub mod purge;
pub mod reads;
pub mod sweep;
pub mod table_backend;
pub mod tables;
pub mod timed;
pub mod txn;

use std::sync::Arc;
use std::time::Duration;

use crate::Store;
use crate::backend::Backend;
use crate::key::ContainerName;

/// Every row stored in the tables whose names start with `prefix`, read
/// through `backend` (which resolves no mark), with the table each is in.
pub(crate) async fn stored_rows(
    backend: &Arc<dyn Backend>,
    prefix: &str,
) -> Vec<(crate::key::TableName, crate::backend::StoredEntity)> {
    use crate::backend::QuerySpec;
    let mut rows = Vec::new();
    for table in backend.list_tables().await.expect("tables listed") {
        if !table.as_str().starts_with(prefix) {
            continue;
        }
        let mut spec = QuerySpec::default();
        loop {
            let page = backend.query(&table, &spec).await.expect("table read");
            rows.extend(page.entities.into_iter().map(|r| (table.clone(), r)));
            match page.continuation {
                Some(next) => spec.continuation = Some(next),
                None => break,
            }
        }
    }
    rows
}

/// Waits until what a commit sends behind its answer (a unit's or a
/// transaction's decision row delete) has gone out: until `counter` stops
/// moving for 50 ms.
pub(crate) async fn behind_the_answer(counter: &crate::testing::RequestCounter) {
    let mut last = counter.total();
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = counter.total();
        if now == last {
            return;
        }
        last = now;
    }
}

/// Pauses longer than the gap after which a re-acquire starts a fresh
/// tenure (1.5 poll intervals), so that the next counted unit on each lock
/// is not part of a run of re-acquires reaching its bound (which would add
/// a read of the wait queue to the count).
pub(crate) async fn fresh_tenure() {
    tokio::time::sleep(Duration::from_millis(200)).await;
}

/// `store`'s sweep ([`Store::sweep`](crate::Store::sweep)) keeping what
/// is younger than `older_than`, for real or as a dry run.
pub(crate) async fn sweep(
    store: &Store,
    older_than: Duration,
    dry_run: bool,
) -> crate::Result<crate::store::SweepReport> {
    sweep_later(store, older_than, Duration::ZERO, dry_run).await
}

/// [`sweep`], judging rows as if it ran `later` than now
/// ([`SweepOptions::as_if_later`](crate::store::SweepOptions::as_if_later)).
pub(crate) async fn sweep_later(
    store: &Store,
    older_than: Duration,
    later: Duration,
    dry_run: bool,
) -> crate::Result<crate::store::SweepReport> {
    store
        .sweep(
            &crate::store::SweepOptions::new()
                .with_older_than(older_than)
                .with_dry_run(dry_run)
                .as_if_later(later),
        )
        .await
}

/// Later than a committed decision row is kept whatever the sweep's
/// `older_than` (an hour).
pub(crate) const PAST_DECISIONS_KEPT: Duration = Duration::from_secs(61 * 60);

/// How time passes for the checks that wait: for leases to run out, for
/// renewals, for a process to "die".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// Paused Tokio time (`#[tokio::test(start_paused = true)]`): waiting
    /// costs nothing, so leases last 30 s and the leader check forces 100
    /// failovers.
    Paused,
    /// Real time, as a service needs: the shortest leases (15 s) and 2
    /// forced failovers; each timed check waits for real (up to a few
    /// minutes), so run them in parallel.
    Real,
}

/// What a check runs against: a store on the backend under test with
/// tables private to the check, a container and a name prefix private to
/// it, and how time passes.
#[derive(Debug)]
pub struct Ctx {
    /// A store whose tables are private to this check.
    pub store: Store,
    /// A container private to this check.
    pub container: ContainerName,
    clock: Clock,
    prefix: String,
}

impl Ctx {
    /// A context on `backend`, namespaced by a fresh random prefix. With
    /// [`Clock::Paused`] the timed checks must run on a paused Tokio
    /// runtime (`#[tokio::test(start_paused = true)]`).
    ///
    /// # Panics
    /// Never for a backend; the prefix and settings it uses are valid.
    pub fn new(backend: Arc<dyn Backend>, clock: Clock) -> Ctx {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let prefix = format!("t{}", &id[..10]);
        let store = Store::builder_shared(backend)
            .table_prefix(prefix.clone())
            .expect("valid prefix")
            .conflict_retry(
                crate::ConflictRetry::new(
                    200,
                    std::time::Duration::from_millis(1),
                    std::time::Duration::from_millis(50),
                )
                .expect("valid policy"),
            )
            .build()
            .expect("valid store");
        let container = ContainerName::new(format!("c{}", &id[..20])).expect("valid container");
        Ctx {
            store,
            container,
            clock,
            prefix,
        }
    }

    /// The backend.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        self.store.backend()
    }

    /// How time passes.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// The lease duration of the lease and lock checks: 30 s on paused
    /// time, the shortest the service allows (15 s) on real time.
    pub fn lease_duration(&self) -> Duration {
        match self.clock {
            Clock::Paused => Duration::from_secs(30),
            Clock::Real => Duration::from_secs(15),
        }
    }

    /// Extra time a check allows a service to answer, on top of a bound
    /// that holds exactly on paused time: none there, 3 s on real time
    /// (a loaded emulator answering checks that run side by side).
    pub fn slack(&self) -> Duration {
        match self.clock {
            Clock::Paused => Duration::ZERO,
            Clock::Real => Duration::from_secs(3),
        }
    }

    /// A turn to run a check that sends many requests in quick succession
    /// (the checks without waits): on real time at most four such checks
    /// run at once, so that a service answering every check from one
    /// process (an emulator) stays prompt for the timed checks running
    /// beside them; on paused time no limit. Hold it for the whole check.
    pub async fn busy_turn(&self) -> Option<tokio::sync::SemaphorePermit<'static>> {
        static TURNS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(4);
        match self.clock {
            Clock::Paused => None,
            Clock::Real => TURNS.acquire().await.ok(),
        }
    }

    /// A turn to run a timed check in which many contenders poll one lease
    /// (dozens of requests a second for as long as the check runs): on real
    /// time one such check at a time, so that an emulator answering from
    /// one process keeps answering the renewals of the timed checks beside
    /// it well within their leases, even on a busy machine; on paused time
    /// no limit. Hold it for the whole check.
    pub async fn contention_turn(&self) -> Option<tokio::sync::SemaphorePermit<'static>> {
        static TURNS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(1);
        match self.clock {
            Clock::Paused => None,
            Clock::Real => TURNS.acquire().await.ok(),
        }
    }

    /// A prefix unique to this context (letters and digits, starting with a
    /// letter), for table prefixes and lease names of the check's own
    /// stores and lease managers.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }
}

/// Expands to one test per conformance check (tables, blobs, timed blob
/// leases, the lease manager, partition locks), in modules named after the
/// check modules of [`testing::conformance`](crate::testing::conformance),
/// each on a fresh [`Ctx`](crate::testing::conformance::Ctx).
///
/// `conformance_suite!(paused: backend)` runs the timed checks on paused
/// Tokio time, for an embedded backend such as the memory backend;
/// `conformance_suite!(real: backend)` in real time with 15 s leases, for a
/// service (the timed checks then take up to a few minutes each; run them
/// with enough test threads to run side by side, such as
/// `--test-threads=48`). `backend` is an expression of type
/// `Option<Arc<dyn Backend>>` evaluated for each check: `None` skips the
/// check (the backend is not configured and not required here; to require
/// it, have the expression panic instead).
///
/// The tests use `#[tokio::test]`: the calling crate needs tokio with the
/// `macros`, `rt-multi-thread` and (for `paused`) `test-util` features.
/// Invoke it once per module: it defines `conformance_ctx()` and the
/// modules `tables`, `table_backend`, `blob_backend`, `blobs`, `timed`, `lease`, `fairness`, `lock`, `lock_many`, `reads`, `commits`, `big_commits`, `txn`, `fence`, `purge`, `sweep` and `expiry`
/// there.
#[macro_export]
macro_rules! conformance_suite {
    (paused: $backend:expr) => {
        $crate::conformance_suite!(@suite $backend, Paused,
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)],
            #[tokio::test(start_paused = true)]);
    };
    (real: $backend:expr) => {
        $crate::conformance_suite!(@suite $backend, Real,
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)],
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]);
    };
    (@suite $backend:expr, $clock:ident, #[$plain:meta], #[$timed:meta]) => {
        /// A fresh context for one check, or `None` to skip it.
        fn conformance_ctx() -> Option<$crate::testing::conformance::Ctx> {
            let backend: Option<std::sync::Arc<dyn $crate::backend::Backend>> = $backend;
            backend.map(|b| {
                $crate::testing::conformance::Ctx::new(
                    b,
                    $crate::testing::conformance::Clock::$clock,
                )
            })
        }
        $crate::conformance_suite!(@module tables #[$plain] #[$timed];
            plain [
                crud_round_trips_every_type_at_edge_values,
                datetime_and_binary_edges,
                insert_twice_is_already_exists,
                stale_etag_is_conflict_for_replace_merge_delete,
                chained_updates_need_no_reread,
                missing_entities,
                upsert_and_merge_semantics,
                unconditional_writes,
                special_keys_work_everywhere,
                invalid_input_is_rejected_before_sending,
                decode_errors_name_the_property,
                batch_applies_all_or_nothing,
                batch_of_100_round_trips,
                batch_limits_are_checked_before_sending,
                filters_of_every_literal_type,
                int64_column_vs_int32_literal_matches_nothing,
                key_ranges_and_prefixes,
                paging_across_pages_and_resume,
                select_projects_properties,
                update_with_concurrent_increments_are_exact,
                update_with_gives_up_with_conflict,
                write_logs_are_kept_beside_the_entity,
                merge_returns_the_stored_entity_so_replacing_it_keeps_none_fields,
                unit_view_after_a_staged_merge_shows_stored_fields,
                writes_return_what_get_returns,
                queries_skip_or_collect_rows_that_do_not_decode,
                try_update_with_refuses_or_retries,
                a_store_manages_the_tables_under_its_prefix,
                projections_read_a_types_properties,
                a_projection_written_back_never_deletes_what_it_did_not_read,
                reads_of_a_deleted_table_are_not_found_naming_it,
                index_tables_are_listed_apart_and_deleted_with_their_table,
            ]
            timed []
            blocking []
        );
        $crate::conformance_suite!(@module mapping #[$plain] #[$timed];
            plain [
                two_versions_keep_each_others_properties,
                unknown_properties_can_be_dropped,
                enums_keys_and_prefix_filters_round_trip,
                dynamic_entities_read_and_write_any_row,
                chunked_fields_round_trip_and_shrink,
            ]
            timed []
            blocking []
        );
        $crate::conformance_suite!(@module table_backend #[$plain] #[$timed];
            plain [
                every_operation_on_a_missing_table_is_table_not_found,
                get_of_a_missing_entity_is_none,
                insert_then_get_returns_data_etag_and_timestamp,
                insert_of_an_existing_entity_is_entity_already_exists,
                replace_and_merge_with_a_stale_etag_are_update_condition_not_satisfied,
                conditional_writes_on_a_missing_entity_are_resource_not_found,
                if_exists_and_if_match_star_write_whatever_version_is_there,
                upsert_creates_or_overwrites_and_merge_upsert_merges,
                merge_keeps_other_properties_and_replace_drops_them,
                delete_removes_and_a_second_delete_is_resource_not_found,
                invalid_entities_are_rejected_before_anything_changes,
                keys_with_quotes_percent_plus_spaces_and_unicode_round_trip,
                a_failing_batch_op_reports_its_index_and_code_and_applies_nothing,
                query_returns_entities_in_utf16_key_order,
                invalid_query_specs_are_rejected,
                top_pages_through_three_or_more_pages,
                select_keeps_listed_properties_and_always_keys_and_timestamp,
                concurrent_optimistic_increments_lose_no_update,
                int64_above_2_pow_53_round_trips_exactly,
                every_edm_type_round_trips,
                keys_with_single_quotes_work_everywhere,
                upserts_create_and_overwrite,
                a_100_op_batch_round_trips,
                filters_of_every_literal_type_through_the_backend,
                paging_with_top_across_three_pages_and_more,
                tables_are_created_listed_and_deleted,
            ]
            timed []
            blocking []
        );
        $crate::conformance_suite!(@module blob_backend #[$plain] #[$timed];
            plain [
                every_operation_on_a_missing_container_is_container_not_found,
                a_missing_blob_reads_as_none_and_other_ops_are_blob_not_found,
                put_get_and_properties_round_trip,
                blob_etags_change_on_every_write,
                an_acquire_replies_with_the_blob_etag_and_leasing_keeps_it,
                set_metadata_replaces_metadata_and_keeps_the_body,
                if_match_stale_is_condition_not_met_for_every_write,
                if_match_on_a_missing_blob_is_condition_not_met,
                delete_of_a_missing_blob_is_blob_not_found,
                writes_to_a_leased_blob_need_its_lease_id,
                blobs_put_get_properties_metadata_delete_with_conditions,
                a_large_blob_reads_back_in_one_piece,
                slashes_in_names_are_path_separators_and_each_name_one_blob,
                metadata_values_with_inner_spaces_round_trip_and_leases_on_them_hold,
            ]
            timed []
            blocking []
        );
        $crate::conformance_suite!(@module blobs #[$plain] #[$timed];
            plain [
                put_get_and_conditions,
                metadata_and_listing,
                lease_acquire_renew_change_release,
                lease_contention_codes,
                lease_break_and_broken_states,
                writes_to_leased_blobs_need_the_lease,
                missing_blob_and_container_codes,
                every_lease_error_code,
            ]
            timed []
            blocking []
        );
        $crate::conformance_suite!(@module timed #[$plain] #[$timed];
            plain []
            timed [
                an_expired_lease_can_be_taken_by_another,
                an_expired_lease_can_be_renewed_by_its_holder,
                an_expired_lease_can_be_released,
                a_break_period_ends_in_broken,
                a_timed_lease_broken_without_period_runs_out,
                an_expired_lease_can_be_renewed_by_its_holder_until_someone_takes_it,
            ]
            blocking []
        );
        $crate::conformance_suite!(@module lease #[$plain] #[$timed];
            plain []
            timed [
                mutual_exclusion_among_50_contenders_in_10_processes,
                mutual_exclusion_among_50_contenders_in_50_processes,
                renewal_holds_a_lease_for_ten_durations,
                renewal_holds_a_fifteen_second_lease_for_ten_durations,
                hanging_renew_fires_lost_before_the_lease_expires,
                a_renew_left_unanswered_is_sent_again_and_the_lease_kept,
                external_break_fires_lost_and_fences_writes,
                do_once_runs_once_among_10_callers_and_again_after_a_crash,
                leader_election_with_5_candidates_never_overlaps,
                reservation_log_stays_bounded_and_ordered,
                local_sharing_serves_100_units_with_one_acquire_and_one_release,
                hand_over_keeps_the_blob_view_without_reading,
                describe_reports_holder_and_epoch_and_drop_releases,
                bad_durations_and_names_are_invalid_before_any_request,
                ambiguous_renewals_are_verified_with_a_properties_read,
                the_fairness_bound_lets_another_process_in,
                infinite_leases_hold_until_released_or_broken,
                acquire_gives_up_at_its_deadline_and_gives_back_a_late_lease,
                a_lock_unit_costs_acquire_read_writes_release_cold_and_only_writes_handed_over,
                stores_of_different_prefixes_keep_their_leases_apart,
            ]
            blocking [
                dropping_a_guard_without_a_runtime_does_not_panic,
            ]
        );
        $crate::conformance_suite!(@module fairness #[$plain] #[$timed];
            plain []
            timed [
                two_processes_relocking_back_to_back_wait_within_the_bound,
                four_processes_relocking_back_to_back_wait_within_the_bound,
                eight_processes_relocking_back_to_back_wait_within_the_bound,
                turns_keep_the_lease_busy,
                a_manager_reacquiring_by_name_cannot_keep_another_waiting,
                turns_cost_one_queue_read_per_tenure_when_nobody_else_waits,
                a_waiter_polls_at_most_ten_times_a_second,
                a_waiter_that_dies_while_registered_costs_the_holder_one_bounded_pause,
                a_waiter_whose_lease_is_taken_over_while_it_changes_the_id_waits_on,
                leader_candidates_that_step_down_at_once_take_turns,
            ]
            blocking []
        );
        $crate::conformance_suite!(@module indexes #[$plain] #[$timed];
            plain [
                duplicates_are_refused_with_nothing_stored,
                a_taken_value_and_an_existing_row_are_told_apart,
                value_changes_and_deletes_free_values,
                lookups_by_value_and_range,
                error_paths_leave_state_unchanged,
                verify_and_rebuild_fix_orphans_and_missing_rows,
                indexed_writes_cost_their_budget,
                fenced_writes_of_an_indexed_type_are_fenced,
                a_failed_units_claim_naming_the_writer_still_guards_its_freed_holder,
                index_rows_have_no_empty_keys,
            ]
            timed [
                sixteen_concurrent_registrations_over_four_values_give_four,
                a_crash_at_every_step_of_an_indexed_write_leaves_a_consistent_index,
                a_crash_or_lost_reply_at_every_request_keeps_the_index_invariant,
                writers_racing_for_a_stalled_owners_value_leave_one_holder,
                a_unit_holding_a_dead_commits_primary_claims_its_marked_value,
            ]
            blocking []
        );
        $crate::conformance_suite!(@module lock_many #[$plain] #[$timed];
            plain [
                a_unit_of_three_partitions_two_tables_and_150_rows_each_is_atomic,
                a_unit_over_several_partitions_reads_writes_and_commits_them_all,
                a_cross_partition_unit_costs_its_budget_exactly,
                a_row_changed_since_it_was_read_fails_the_commit_before_anything_is_applied,
                unit_queries_see_staged_writes_and_stale_reads_fail_the_commit,
            ]
            timed [
                taking_several_locks_gives_back_what_it_took_on_a_held_key,
                overlapping_lock_sets_never_deadlock,
                a_handed_over_cross_partition_unit_skips_acquires_and_reads,
                a_cross_partition_unit_sends_independent_requests_together,
                a_lock_lost_while_it_is_taken_is_lease_lost,
                a_crash_at_every_step_is_recovered_from_any_participant,
                a_lost_reply_at_every_step_ends_all_before_or_after,
                a_holder_paused_past_its_lease_at_every_step_is_told_what_is_stored,
                a_commit_point_held_up_past_the_lease_never_goes_out,
                a_commit_whose_decision_cannot_be_read_is_in_doubt_until_asked_again,
                decision_rows_are_never_returned_to_callers,
            ]
            blocking []
        );
        $crate::conformance_suite!(@module big_commits #[$plain] #[$timed];
            plain []
            timed [
                a_thousand_write_unit_faulted_at_every_request_is_all_or_nothing,
                a_unit_of_three_partitions_two_tables_and_150_rows_faulted_at_every_request_is_all_or_nothing,
                a_row_with_an_after_image_over_64_kib_faulted_at_every_request_is_all_or_nothing,
                a_row_near_1_mib_faulted_at_every_request_is_all_or_nothing,
                a_commit_of_any_size_answers_in_three_round_trips_after_its_reads,
            ]
            blocking []
        );
        $crate::conformance_suite!(@module txn #[$plain] #[$timed];
            plain []
            timed [
                a_two_partition_transfer_costs_six_requests_and_answers_in_two_round_trips,
                get_many_reads_two_partitions_in_one_round_trip_and_validates_them,
                write_skew_is_refused,
                a_stopped_writers_marks_are_withdrawn_after_the_time_to_live,
                a_lost_commit_point_reply_is_in_doubt_and_settled_by_commit_outcome,
                concurrent_transact_calls_all_succeed_and_conserve_money,
                a_transaction_keeps_unique_values,
                transactions_and_units_on_the_same_rows_conserve_money,
                a_one_partition_transaction_is_one_batch_and_validates_its_reads,
                a_row_read_as_absent_must_still_be_absent,
            ]
            blocking []
        );
        $crate::conformance_suite!(@module reads #[$plain] #[$timed];
            plain [
                pruning_removes_decision_rows_no_reader_needs,
                a_filtered_query_finds_a_committed_row_left_marked,
                a_units_filtered_query_finds_a_committed_row_left_marked,
                a_filtered_projection_finds_a_committed_row_left_marked,
                filtered_pages_find_a_committed_row_left_marked,
                an_after_image_never_committed_is_never_returned,
                a_filter_of_fifteen_comparisons_finds_a_committed_row_left_marked,
            ]
            timed [
                a_units_read_answered_after_its_lease_ran_out_is_lease_lost,
                a_units_read_answered_within_its_lease_is_returned,
            ]
            blocking []
        );
        $crate::conformance_suite!(@module commits #[$plain] #[$timed];
            plain []
            timed [
                a_partitions_decided_and_undecided_commits_are_listed,
                commit_outcome_does_not_guess_once_a_decision_may_be_swept,
            ]
            blocking []
        );
        $crate::conformance_suite!(@module fence #[$plain] #[$timed];
            plain [
                fenced_writes_cost_one_transaction_and_one_fence_read_per_partition,
                an_older_epoch_is_refused_once_a_newer_one_wrote_the_partition,
                concurrent_writers_of_one_epoch_all_succeed,
                a_fence_raced_by_its_own_epoch_reads_again_and_resends,
                fences_without_a_fresh_epoch_or_with_an_overlong_name_are_invalid,
            ]
            timed [
                a_leader_paused_past_its_lease_is_fenced_out_by_its_successor,
            ]
            blocking []
        );
        $crate::conformance_suite!(@module lock #[$plain] #[$timed];
            plain [
                concurrent_transfers_conserve_money,
                units_see_their_writes_and_stay_in_their_partition,
                multi_table_commit_applies_all,
                stale_reads_fail_the_whole_commit,
                one_table_unit_costs_acquire_reads_batch_release,
                two_table_unit_costs_acquire_reads_marks_commit_point_finish_release,
                rows_too_large_for_their_after_image_carry_it_in_hidden_rows,
                a_row_that_cannot_take_a_mark_is_invalid_before_anything_is_sent,
                handed_over_unit_skips_acquire_read_and_release,
                one_hundred_queued_units_share_one_acquire_and_one_release,
                a_unit_of_a_thousand_writes_to_one_table_decides_in_a_row,
                a_refused_insert_keeps_the_staged_insert,
                writing_a_row_twice_follows_the_folding_table,
                an_upsert_then_delete_of_an_absent_row_writes_nothing,
                a_staged_view_from_another_unit_is_refused_without_change,
                breaking_a_free_lock_reports_not_held,
                a_lock_names_its_holder_even_when_its_unit_is_leaked,
                recording_the_holder_costs_a_write_only_when_the_lock_changes_hands,
                a_lock_taken_back_unchanged_sends_no_lock_blob_read,
                pruning_deletes_only_free_clean_old_lock_blobs,
                pruning_races_units_locking_the_same_partitions,
            ]
            timed [
                crash_while_marking_the_rows_leaves_the_partition_before,
                an_optimistic_write_meeting_a_live_commit_waits_for_it,
                lost_replies_at_each_step_end_fully_before_or_after,
                commit_without_enough_lease_left_sends_nothing,
                a_read_meeting_a_dead_writers_marks_waits_cheaply,
                a_paused_holder_cannot_overwrite_the_next_holder,
                a_dead_holder_stays_named_until_and_after_its_lease_expires,
            ]
            blocking []
        );
        $crate::conformance_suite!(@module purge #[$plain] #[$timed];
            plain [
                purges_a_partition_a_key_range_and_a_filter,
                purging_250_rows_costs_one_page_and_three_transactions,
                rows_changed_after_the_read_are_kept_and_reported,
                counts_and_purges_see_a_commit_left_marked_as_committed,
                purging_an_indexed_type_frees_its_values,
                bad_input_is_invalid_before_any_request,
            ]
            timed []
            blocking []
        );
        $crate::conformance_suite!(@module sweep #[$plain] #[$timed];
            plain [
                one_sweep_after_a_churn_leaves_at_most_one_percent_hidden,
                rows_younger_than_their_bound_are_kept,
            ]
            timed [
                a_row_written_while_the_sweep_looks_at_it_stays,
                an_entity_write_later_than_its_claims_allow_is_not_sent,
                a_units_commit_later_than_its_claims_allow_is_not_sent,
            ]
            blocking []
        );
        $crate::conformance_suite!(@module expiry #[$plain] #[$timed];
            plain [
                a_time_to_live_counts_from_its_field,
                an_insert_over_an_expired_row_succeeds,
                a_units_or_a_transactions_insert_over_an_expired_row_succeeds,
                a_batch_insert_over_expired_rows_succeeds,
            ]
            timed [
                a_row_past_its_expiry_is_absent_to_every_read,
                the_sweeper_deletes_expired_rows_and_their_index_rows,
                a_row_renewed_after_the_sweeper_read_it_is_kept,
            ]
            blocking []
        );
    };
    (@module $module:ident #[$plain:meta] #[$timed:meta];
        plain [$($p:ident),* $(,)?]
        timed [$($t:ident),* $(,)?]
        blocking [$($b:ident),* $(,)?]
    ) => {
        mod $module {
            $(
                #[$plain]
                async fn $p() {
                    let Some(ctx) = super::conformance_ctx() else { return };
                    let _turn = ctx.busy_turn().await;
                    $crate::testing::conformance::$module::$p(&ctx).await;
                }
            )*
            $(
                #[$timed]
                async fn $t() {
                    let Some(ctx) = super::conformance_ctx() else { return };
                    $crate::testing::conformance::$module::$t(&ctx).await;
                }
            )*
            $(
                #[test]
                fn $b() {
                    let Some(ctx) = super::conformance_ctx() else { return };
                    $crate::testing::conformance::$module::$b(&ctx);
                }
            )*
        }
    };
}
