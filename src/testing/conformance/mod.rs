//! The conformance suite (feature `conformance`): the contract every
//! backend must keep, and a short check that leasehold runs on it.
//!
//! Each check is a public async function over a [`Ctx`] (a store on a fresh
//! namespace of the backend under test, and how time passes for it) that
//! panics when the backend falls short, like a test. The contract is what
//! leasehold relies on of [`TableBackend`](crate::backend::TableBackend)
//! ([`table_backend`]) and [`BlobBackend`](crate::backend::BlobBackend)
//! ([`blob_backend`], [`blobs`], and [`timed`]: blob leases running out);
//! [`library`] runs a few of leasehold's features on the backend. A backend
//! that passes both carries leasehold, whose own behaviour (locks, leases,
//! indexes, transactions, the sweep...) its own tests check in depth.
//!
//! [`conformance_suite!`](crate::conformance_suite) turns them all into one
//! test per check; a backend or backend wrapper of your own can run it:
//!
//! ```no_run
//! // tests/conformance.rs, with leasehold's `conformance` feature enabled
//! // and tokio (features `macros`, `rt-multi-thread`, `test-util`) as a
//! // dev-dependency.
//! use std::sync::Arc;
//! use leasehold::backend::memory::MemoryBackend;
//! use leasehold::testing::CountingBackend;
//!
//! // On a request-counting wrapper of the memory backend, timed checks on
//! // paused time.
//! leasehold::conformance_suite!(paused: Some(Arc::new(CountingBackend::new(
//!     MemoryBackend::new(),
//! ))));
//! # fn main() {}
//! ```
//!
//! The checks use only leasehold's public API.

#[doc(hidden)]
pub mod ambiguous;
pub mod blob_backend;
pub mod blobs;
pub mod library;
pub mod table_backend;
pub mod timed;

use std::sync::Arc;
use std::time::Duration;

use crate::Store;
use crate::backend::{Backend, LeaseAction, LeaseDuration, LeaseId, LeaseReply};
use crate::key::ContainerName;

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

/// The action that acquires a lease of `duration` with the id `proposed`.
fn acquire(duration: LeaseDuration, proposed: LeaseId) -> LeaseAction {
    LeaseAction::Acquire { duration, proposed }
}

/// The action that changes the lease `id` to `proposed`.
fn change(id: LeaseId, proposed: LeaseId) -> LeaseAction {
    LeaseAction::Change { id, proposed }
}

/// The action that breaks a lease, its holder keeping it for `period`.
fn break_after(period: Option<Duration>) -> LeaseAction {
    LeaseAction::Break { period }
}

/// The time a break's reply gives the lease until it is broken.
fn time_left(reply: LeaseReply) -> Duration {
    match reply {
        LeaseReply::Broken(left) => left,
        other => panic!("a break answered {other:?}"),
    }
}

/// Expands to one test per conformance check (the contract of the backend
/// traits, blobs and timed blob leases, and the short [`library`] check),
/// in modules named after the check modules of
/// [`testing::conformance`](crate::testing::conformance), each on a fresh
/// [`Ctx`](crate::testing::conformance::Ctx).
///
/// `conformance_suite!(paused: backend)` runs the timed checks on paused
/// Tokio time, for an embedded backend such as the memory backend;
/// `conformance_suite!(real: backend)` in real time with 15 s leases, for a
/// service (the timed checks then take up to a minute or two each; run them
/// with enough test threads to run side by side, such as
/// `--test-threads=16`). `backend` is an expression of type
/// `Option<Arc<dyn Backend>>` evaluated for each check: `None` skips the
/// check (the backend is not configured and not required here; to require
/// it, have the expression panic instead).
///
/// The tests use `#[tokio::test]`: the calling crate needs tokio with the
/// `macros`, `rt-multi-thread` and (for `paused`) `test-util` features.
/// Invoke it once per module: it defines `conformance_ctx()` and the
/// modules `table_backend`, `blob_backend`, `blobs`, `timed` and `library`
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
        );
        $crate::conformance_suite!(@module library #[$plain] #[$timed];
            plain [
                typed_writes_round_trip_and_a_stale_etag_is_a_conflict,
                a_unit_over_two_tables_commits_both,
                a_transaction_commits_across_partitions,
                a_taken_unique_value_is_refused,
                do_once_runs_the_work_once,
            ]
            timed [
                a_unit_whose_lease_was_lost_does_not_commit,
            ]
        );
    };
    (@module $module:ident #[$plain:meta] #[$timed:meta];
        plain [$($p:ident),* $(,)?]
        timed [$($t:ident),* $(,)?]
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
        }
    };
}
