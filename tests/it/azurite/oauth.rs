//! Microsoft Entra ID sign-in on the OAuth Azurite (HTTPS, `--oauth basic`,
//! started by `scripts/with-azurite.sh` with a certificate made for the run):
//! the conformance suite (tables, blobs, leases, locks) through a token
//! credential, and the refusals a wrong or expired token gets.
//!
//! The plain checks (no waits) of every group run here as on the shared-key
//! Azurite. `scripts/test.sh` runs this module last, on its own: beside the
//! shared-key suite, on a two-core machine, the load of a second emulator
//! made that suite's timing checks miss their bounds. Of the checks that
//! wait in real time, only seven run here (lease errors, describe, an
//! external break, do-once, infinite leases, a roll-forward, the commit
//! deadline): the others (renewal for 150 s, many contenders polling, lease
//! expiry timings) change nothing under token sign-in but the header. The token cache's timing is checked on
//! paused time in the crate's unit tests.

use std::sync::Arc;

use leasehold::backend::{Backend, TableBackend as _};
use leasehold::testing::conformance;
use leasehold::{Entity, Error, ErrorKind, Store};

use crate::support::oauth::{Claims, TestCredential, oauth_azurite};
use crate::support::secrets::Captured;

fn backend() -> Option<Arc<dyn Backend>> {
    oauth_azurite().map(|a| Arc::new(a.backend()) as Arc<dyn Backend>)
}

/// A fresh context for one check, or `None` to skip it.
fn conformance_ctx() -> Option<conformance::Ctx> {
    backend().map(|b| conformance::Ctx::new(b, conformance::Clock::Real))
}

leasehold::conformance_suite!(@module tables
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)];
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
    ]
    timed []
    blocking []
);

leasehold::conformance_suite!(@module table_backend
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)];
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
    ]
    timed []
    blocking []
);

leasehold::conformance_suite!(@module blob_backend
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)];
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
    ]
    timed []
    blocking []
);

leasehold::conformance_suite!(@module blobs
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)];
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

leasehold::conformance_suite!(@module lease
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)];
    plain []
    timed [
        bad_durations_and_names_are_invalid_before_any_request,
        describe_reports_holder_and_epoch_and_drop_releases,
        external_break_fires_lost_and_fences_writes,
        do_once_runs_once_among_10_callers_and_again_after_a_crash,
        infinite_leases_hold_until_released_or_broken,
    ]
    blocking []
);

leasehold::conformance_suite!(@module lock
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)];
    plain [
        concurrent_transfers_conserve_money,
        units_see_their_writes_and_stay_in_their_partition,
        multi_table_commit_applies_all,
        stale_reads_fail_the_whole_commit,
        one_table_unit_costs_acquire_reads_batch_release,
        two_table_unit_costs_acquire_reads_marks_commit_point_finish_release,
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
    ]
    timed [
        crash_while_marking_the_rows_leaves_the_partition_before,
        commit_without_enough_lease_left_sends_nothing,
    ]
    blocking []
);

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "OAuthNotes")]
struct Note {
    #[entity(partition_key)]
    pk: String,
    #[entity(row_key)]
    rk: String,
    n: i64,
}

fn prefix() -> String {
    format!("o{}", &uuid::Uuid::new_v4().simple().to_string()[..10])
}

fn store_on(backend: leasehold::backend::azure::AzureBackend) -> Store {
    Store::builder(backend)
        .table_prefix(prefix())
        .unwrap()
        .build()
        .unwrap()
}

/// Every request of a store signs with the one cached token: tables, blobs
/// and leases, 40 requests, one token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_token_serves_every_request_of_tables_blobs_and_leases() {
    let Some(azurite) = oauth_azurite() else {
        return;
    };
    let credential = Arc::new(TestCredential::new());
    let plan = leasehold::testing::FaultInjector::default();
    let backend = azurite
        .builder(credential.clone())
        .policy(plan.transport_policy())
        .build()
        .unwrap();
    let store = store_on(backend);
    let notes = store.table::<Note>();
    for i in 0..10 {
        notes
            .insert(Note {
                pk: "p".into(),
                rk: format!("r{i}"),
                n: i,
            })
            .await
            .unwrap();
    }
    let guard = store
        .leases()
        .acquire(
            &format!("{}-lease", prefix()),
            std::time::Duration::from_secs(15),
        )
        .await
        .unwrap();
    guard.release().await.unwrap();
    assert!(plan.requests() >= 14, "{} requests", plan.requests());
    assert_eq!(credential.issued(), 1);
}

/// A token for another audience is refused by the service: `Error::Auth`
/// with the 403 and its code, naming the credential; not retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_for_another_audience_is_an_auth_error() {
    let Some(azurite) = oauth_azurite() else {
        return;
    };
    let credential = Arc::new(TestCredential::new());
    let plan = leasehold::testing::FaultInjector::default();
    let backend = azurite
        .builder(credential.clone())
        .token_audience("https://vault.azure.net")
        .policy(plan.transport_policy())
        .build()
        .unwrap();
    let e = store_on(backend)
        .table::<Note>()
        .get("p", "r")
        .await
        .unwrap_err();
    assert_auth_refusal(&e);
    assert_eq!(plan.requests(), 1, "an auth refusal is not retried");
    // The audience configured is the one asked for.
    let token = credential.tokens().pop().unwrap();
    let body = token.split('.').nth(1).unwrap();
    let claims: serde_json::Value = serde_json::from_slice(
        &base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, body).unwrap(),
    )
    .unwrap();
    assert_eq!(claims["aud"], "https://vault.azure.net");
}

/// An expired token is refused by the service (the credential claimed it
/// was still valid): `Error::Auth`, on blobs as on tables.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_token_is_an_auth_error() {
    let Some(azurite) = oauth_azurite() else {
        return;
    };
    let backend = azurite
        .builder(Arc::new(TestCredential::with_claims(Claims::Expired)))
        .build()
        .unwrap();
    let store = store_on(backend);
    let e = store.table::<Note>().get("p", "r").await.unwrap_err();
    assert_auth_refusal(&e);
    let e = store
        .leases()
        .acquire(
            &format!("{}-lease", prefix()),
            std::time::Duration::from_secs(15),
        )
        .await
        .unwrap_err();
    assert_auth_refusal(&e);
}

fn assert_auth_refusal(e: &Error) {
    assert_eq!(e.kind(), ErrorKind::Auth, "{e:?}");
    assert_eq!(e.status(), Some(403), "{e:?}");
    assert_eq!(e.code(), Some("AuthenticationFailed"), "{e:?}");
    assert!(!e.is_transient());
    assert!(e.to_string().contains("TestCredential"), "{e}");
}

/// Tokens never show: not in the `Debug` of the backend, store or builder,
/// not in errors (`Display`, `Debug`, sources), not in logs at trace level,
/// whether requests succeed or are refused.
#[tokio::test(flavor = "current_thread")]
async fn tokens_never_show_in_debug_errors_or_logs() {
    let Some(azurite) = oauth_azurite() else {
        return;
    };
    let captured = Captured::default();
    let _capture = captured.capture();
    let good = Arc::new(TestCredential::new());
    let bad = Arc::new(TestCredential::with_claims(Claims::Expired));
    let builder = azurite.builder(good.clone());
    let builder_text = format!("{builder:?}");
    let backend = builder.build().unwrap();
    let store = store_on(backend.clone());
    let notes = store.table::<Note>();
    notes
        .insert(Note {
            pk: "p".into(),
            rk: "r".into(),
            n: 1,
        })
        .await
        .unwrap();
    backend
        .get(
            &leasehold::TableName::new(format!("{}OAuthNotes", store.table_prefix())).unwrap(),
            &leasehold::PartitionKey::new("p").unwrap(),
            &leasehold::RowKey::new("r").unwrap(),
        )
        .await
        .unwrap();
    let refused = store_on(azurite.builder(bad.clone()).build().unwrap());
    let e = refused.table::<Note>().get("p", "r").await.unwrap_err();
    tracing::error!(error = %e, debug = ?e, "reported");

    let mut texts = vec![
        builder_text,
        format!("{backend:?}"),
        format!("{store:?}"),
        format!("{:?}", backend.settings()),
        format!("{e}"),
        format!("{e:?}"),
        captured.text(),
    ];
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        texts.push(format!("{s} {s:?}"));
        source = s.source();
    }
    let tokens: Vec<String> = good.tokens().into_iter().chain(bad.tokens()).collect();
    assert_eq!(tokens.len(), 2);
    assert!(captured.text().contains("reported"), "the capture works");
    for token in &tokens {
        // The token, and its claims part alone (a token cut at its dots).
        let claims = token.split('.').nth(1).unwrap();
        for text in &texts {
            assert!(!text.contains(token.as_str()), "{text}");
            assert!(!text.contains(claims), "{text}");
        }
    }
    assert!(texts[1].contains("TestCredential"), "{}", texts[1]);
}
