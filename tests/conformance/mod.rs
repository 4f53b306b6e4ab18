//! The conformance suite: the behaviour every backend must have.
//!
//! Each check is an async function over a [`Ctx`] (a store on a fresh
//! namespace of the backend under test). `conformance_suite!` turns the list
//! into one `#[tokio::test]` per check for a given backend, so the memory
//! backend and Azurite run the very same functions.
#![allow(dead_code)]

pub mod blobs;
pub mod emulator;
pub mod entities;
pub mod tables;
pub mod timed;

use std::sync::Arc;

use leasehold::Store;
use leasehold::backend::Backend;
use leasehold::key::ContainerName;

/// What a check runs against.
pub struct Ctx {
    /// A store whose tables are private to this check.
    pub store: Store,
    /// A container private to this check.
    pub container: ContainerName,
}

impl Ctx {
    /// A context on `backend`, namespaced by a fresh random prefix.
    pub fn new(backend: Arc<dyn Backend>) -> Ctx {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let store = Store::builder_shared(backend)
            .table_prefix(format!("t{}", &id[..10]))
            .expect("valid prefix")
            .conflict_retry(
                leasehold::ConflictRetry::new(
                    200,
                    std::time::Duration::from_millis(1),
                    std::time::Duration::from_millis(50),
                )
                .expect("valid policy"),
            )
            .build()
            .expect("valid store");
        let container = ContainerName::new(format!("c{}", &id[..20])).expect("valid container");
        Ctx { store, container }
    }

    /// The backend.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        self.store.backend()
    }
}

/// Expands to one `#[tokio::test]` per conformance check, each on a fresh
/// context made by `$make_ctx`, an expression of type `Option<Ctx>`: `None`
/// skips the check (the backend is unavailable and not required here; the
/// expression itself panics when the backend is required, as in CI).
#[macro_export]
macro_rules! conformance_suite {
    ($make_ctx:expr) => {
        $crate::conformance_suite!(@tests $make_ctx;
            tables::crud_round_trips_every_type_at_edge_values,
            tables::datetime_and_binary_edges,
            tables::insert_twice_is_already_exists,
            tables::stale_etag_is_conflict_for_replace_merge_delete,
            tables::chained_updates_need_no_reread,
            tables::missing_entities,
            tables::upsert_and_merge_semantics,
            tables::unconditional_writes,
            tables::special_keys_work_everywhere,
            tables::invalid_input_is_rejected_before_sending,
            tables::decode_errors_name_the_property,
            tables::batch_applies_all_or_nothing,
            tables::batch_of_100_round_trips,
            tables::batch_limits_are_checked_before_sending,
            tables::filters_of_every_literal_type,
            tables::int64_column_vs_int32_literal_matches_nothing,
            tables::key_ranges_and_prefixes,
            tables::paging_across_pages_and_resume,
            tables::select_projects_properties,
            tables::update_with_concurrent_increments_are_exact,
            tables::update_with_gives_up_with_conflict,
            tables::write_logs_are_kept_beside_the_entity,
            tables::merge_returns_the_stored_entity_so_replacing_it_keeps_none_fields,
            tables::unit_view_after_a_staged_merge_shows_stored_fields,
            tables::writes_return_what_get_returns,
            tables::queries_skip_or_collect_rows_that_do_not_decode,
            tables::try_update_with_refuses_or_retries,
            blobs::put_get_and_conditions,
            blobs::metadata_and_listing,
            blobs::lease_acquire_renew_change_release,
            blobs::lease_contention_codes,
            blobs::lease_break_and_broken_states,
            blobs::writes_to_leased_blobs_need_the_lease,
            blobs::missing_blob_and_container_codes,
        );
    };
    (@tests $make_ctx:expr; $($module:ident :: $check:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $check() {
                let ctx: Option<conformance::Ctx> = $make_ctx;
                let Some(ctx) = ctx else { return };
                conformance::$module::$check(&ctx).await;
            }
        )*
    };
}

/// Expands to one test per timed check (see [`timed`]), each carrying the
/// test attribute given (paused time on memory, real time on Azurite).
#[macro_export]
macro_rules! timed_conformance_suite {
    (#[$attr:meta] $make_ctx:expr) => {
        $crate::timed_conformance_suite!(@tests #[$attr] $make_ctx;
            an_expired_lease_can_be_taken_by_another,
            an_expired_lease_can_be_renewed_by_its_holder,
            an_expired_lease_can_be_released,
            a_break_period_ends_in_broken,
            a_timed_lease_broken_without_period_runs_out,
        );
    };
    (@tests #[$attr:meta] $make_ctx:expr; $($check:ident),* $(,)?) => {
        $(
            #[$attr]
            async fn $check() {
                let ctx: Option<conformance::Ctx> = $make_ctx;
                let Some(ctx) = ctx else { return };
                conformance::timed::$check(&ctx).await;
            }
        )*
    };
}
