//! The Azure backend's own behaviour against Azurite: what it sends and
//! does not send, lost replies and retries, SAS credentials, blob and lease
//! edges; plus connection-string parsing and secret redaction (which need no
//! Azurite). The service's semantics are checked for every backend by the
//! conformance suite (`testing::conformance`, run in `tests/it/azurite.rs`).
//!
//! Run with `scripts/with-azurite.sh cargo test --test it azure_backend::`.
#![cfg(feature = "azure")]

use crate::support::{azurite, secrets};
use leasehold::backend::WriteOptions;

use leasehold::backend::{LeaseKind, Version};
use std::time::Duration;

use leasehold::backend::azure::{AzureBackend, ConnectionSettings, TransportRetry};
use leasehold::backend::{
    BlobBackend, BlobConditions, LeaseDuration, LeaseId, LeaseState, Metadata, Precondition,
    QuerySpec, StoredEntity, TableBackend, TableOp,
};
use leasehold::entity::{EntityData, Value};
use leasehold::key::{BlobName, ContainerName};
use leasehold::testing::{Fault, FaultInjector};
use leasehold::{ETag, Error, ErrorKind, PartitionKey, RowKey, TableName};

use azurite::{UniqueNames, azurite_connection_string, unique_names};
use secrets::{AccountKey_, Captured, account_sas};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// A backend on the test Azurite with fast retries, or `None` (skip).
fn backend() -> Option<AzureBackend> {
    backend_with(None)
}

fn fast_retries() -> TransportRetry {
    TransportRetry::new()
        .with_initial_delay(Duration::from_millis(10))
        .with_max_delay(Duration::from_millis(50))
        .with_jitter_seed(1)
}

fn backend_with(plan: Option<FaultInjector>) -> Option<AzureBackend> {
    let conn = azurite_connection_string()?;
    let mut builder = AzureBackend::builder()
        .connection_string(&conn)
        .expect("the Azurite connection string parses")
        .transport_retry(fast_retries());
    if let Some(plan) = plan {
        builder = builder.policy(plan.transport_policy());
    }
    Some(builder.build().expect("backend builds"))
}

fn pk(s: &str) -> PartitionKey {
    PartitionKey::new(s).unwrap()
}

fn rk(s: &str) -> RowKey {
    RowKey::new(s).unwrap()
}

fn entity(p: &str, r: &str, props: &[(&str, Value)]) -> EntityData {
    EntityData {
        partition_key: pk(p),
        row_key: rk(r),
        properties: props
            .iter()
            .cloned()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
    }
}

async fn new_table(b: &AzureBackend, names: &UniqueNames, suffix: &str) -> TableName {
    let t = names.table(suffix);
    b.create_table(&t).await.unwrap();
    t
}

async fn get(b: &impl TableBackend, t: &TableName, p: &str, r: &str) -> Option<StoredEntity> {
    b.get(t, &pk(p), &rk(r)).await.unwrap()
}

async fn insert(b: &AzureBackend, t: &TableName, e: EntityData) -> leasehold::backend::Version {
    b.execute(t, TableOp::Insert(e), &WriteOptions::new())
        .await
        .unwrap()
        .unwrap()
}

fn assert_kind(e: &Error, kind: ErrorKind, code: Option<&str>) {
    assert_eq!(e.kind(), kind, "{e:?}");
    if let Some(code) = code {
        assert_eq!(e.code(), Some(code), "{e:?}");
    }
}

// ---------------------------------------------------------------------------
// Connection strings and secret redaction (no Azurite needed)
// ---------------------------------------------------------------------------

const KEY: &str = "c2VjcmV0LWtleS1tYXRlcmlhbC10aGF0LW11c3Qtbm90LWxlYWs=";
const SIG: &str = "VerySecretSignatureValue0123456789ABCDEFabcdef";

#[test]
fn connection_strings_parse_into_settings() {
    let s = ConnectionSettings::parse("UseDevelopmentStorage=true").unwrap();
    assert_eq!(s.account, "devstoreaccount1");
    assert_eq!(
        s.table_endpoint.as_str(),
        "http://127.0.0.1:10002/devstoreaccount1"
    );
    assert_eq!(
        s.blob_endpoint.as_str(),
        "http://127.0.0.1:10000/devstoreaccount1"
    );

    let s = ConnectionSettings::parse(&format!(
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={KEY};\
         BlobEndpoint=http://127.0.0.1:50001/devstoreaccount1;TableEndpoint=http://127.0.0.1:50002/devstoreaccount1;"
    ))
    .unwrap();
    assert_eq!(
        s.table_endpoint.as_str(),
        "http://127.0.0.1:50002/devstoreaccount1"
    );
    assert!(format!("{s:?}").contains("AccessKey"), "{s:?}");

    let s = ConnectionSettings::parse(&format!(
        "DefaultEndpointsProtocol=https;AccountName=prod1;AccountKey={KEY};EndpointSuffix=core.usgovcloudapi.net"
    ))
    .unwrap();
    assert_eq!(
        s.blob_endpoint.as_str(),
        "https://prod1.blob.core.usgovcloudapi.net/"
    );

    let e = AzureBackend::from_connection_string("AccountName=prod1;AccountKey=%%%").unwrap_err();
    assert_kind(&e, ErrorKind::Invalid, None);
    assert!(e.to_string().contains("AccountKey"), "{e}");
}

/// Everything public that can be built from a secret-bearing string, and
/// every error such a string can produce, is formatted with `{}`, `{:?}` and
/// `{:#?}`; the secret never shows.
#[tokio::test]
async fn secrets_never_appear_in_debug_display_or_errors() {
    let sas = format!("sv=2022-11-02&ss=bt&srt=sco&sp=rwdlacu&se=2030-01-01T00:00:00Z&sig={SIG}");
    let with_key = format!(
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={KEY};\
         BlobEndpoint=http://127.0.0.1:1/devstoreaccount1;TableEndpoint=http://127.0.0.1:1/devstoreaccount1"
    );
    let with_sas = format!(
        "BlobEndpoint=http://127.0.0.1:1/devstoreaccount1;TableEndpoint=http://127.0.0.1:1/devstoreaccount1;\
         SharedAccessSignature={sas}"
    );
    let mut texts: Vec<String> = Vec::new();
    fn shown(t: &dyn std::fmt::Debug) -> [String; 2] {
        [format!("{t:?}"), format!("{t:#?}")]
    }

    for conn in [&with_key, &with_sas] {
        let settings = ConnectionSettings::parse(conn).unwrap();
        texts.extend(shown(&settings));
        texts.extend(shown(&settings.table_endpoint));
        let builder = AzureBackend::builder().connection_string(conn).unwrap();
        texts.extend(shown(&builder));
        let backend = AzureBackend::builder()
            .connection_string(conn)
            .unwrap()
            .transport_retry(TransportRetry::none())
            .build()
            .unwrap();
        texts.extend(shown(&backend));
        // Nothing listens on port 1: every operation fails in the transport,
        // whose errors could quote the request URL (with the SAS).
        let t = TableName::new("Secrets").unwrap();
        let c = ContainerName::new("secrets").unwrap();
        let blob = BlobName::new("b").unwrap();
        let errors = vec![
            backend.get(&t, &pk("p"), &rk("r")).await.unwrap_err(),
            backend
                .execute(
                    &t,
                    TableOp::Insert(entity("p", "r", &[])),
                    &WriteOptions::new(),
                )
                .await
                .unwrap_err(),
            backend.query(&t, &QuerySpec::default()).await.unwrap_err(),
            backend
                .batch(&t, &[TableOp::Insert(entity("p", "r", &[]))])
                .await
                .unwrap_err(),
            backend.get_blob(&c, &blob).await.unwrap_err(),
            backend
                .put_blob(
                    &c,
                    &blob,
                    vec![1],
                    &Metadata::new(),
                    &BlobConditions::none(),
                )
                .await
                .unwrap_err(),
            backend
                .lease(
                    &c,
                    &blob,
                    leasehold::backend::LeaseAction::Acquire {
                        duration: LeaseDuration::Infinite,
                        proposed: LeaseId::new_random(),
                    },
                )
                .await
                .unwrap_err(),
        ];
        for e in &errors {
            assert!(e.is_transient(), "{e:?}");
            texts.extend(shown(e));
            texts.push(e.to_string());
        }
    }
    let with_key = AzureBackend::builder().access_key(KEY).unwrap();
    let with_token = AzureBackend::builder().sas_token(&sas).unwrap();
    texts.push(format!("{with_key:?} {with_token:?}"));

    // Malformed strings carrying secrets.
    for bad in [
        format!("AccountName=acct1;AccountKey={KEY};AccountKey={KEY}"),
        format!("AccountName=acct1;AccountKey={KEY}{SIG}!"),
        format!("AccountName=acct1;AccountKey={KEY};SharedAccessSignature={sas}"),
        format!("AccountName=acct1;SharedAccessSignature=sv=1&sp=r{SIG}"),
        format!("AccountName=acct1;AccountKey={KEY};TableEndpoint=http://h/?sig={SIG}"),
        format!("AccountName=acct1;{KEY}"),
        format!("AccountName=acct1;AccountKey:{KEY}=x"),
    ] {
        let e = AzureBackend::from_connection_string(&bad).unwrap_err();
        assert_kind(&e, ErrorKind::Invalid, None);
        texts.push(format!("{e} {e:?} {e:#?}"));
    }

    for text in &texts {
        assert!(!text.contains(KEY), "account key leaked: {text}");
        assert!(!text.contains(&KEY[..24]), "account key leaked: {text}");
        assert!(!text.contains(SIG), "signature leaked: {text}");
        assert!(!text.contains(&SIG[..24]), "signature leaked: {text}");
    }
}

// ---------------------------------------------------------------------------
// Entities
// ---------------------------------------------------------------------------

#[tokio::test]
async fn a_64_kib_string_round_trips_and_one_more_unit_is_rejected_before_sending() {
    let plan = FaultInjector::default();
    let Some(b) = backend_with(Some(plan.clone())) else {
        return;
    };
    let names = unique_names("big");
    let t = new_table(&b, &names, "s").await;
    let s = "x".repeat(32 * 1024); // 32768 UTF-16 units = 64 KiB
    insert(&b, &t, entity("p", "r", &[("s", Value::String(s.clone()))])).await;
    let got = get(&b, &t, "p", "r").await.unwrap();
    assert_eq!(
        got.data.properties.get("s"),
        Some(&Value::String(s.clone()))
    );

    let before = plan.requests();
    let e = b
        .execute(
            &t,
            TableOp::Insert(entity("p", "r2", &[("s", Value::String(format!("{s}y")))])),
            &WriteOptions::new(),
        )
        .await
        .unwrap_err();
    assert_kind(&e, ErrorKind::Invalid, None);
    assert_eq!(plan.requests(), before, "nothing was sent");
}

/// A property name the service cannot have in `$select` is refused
/// (the memory backend selects nothing by it).
#[tokio::test]
async fn an_invalid_select_name_is_refused() {
    let Some(b) = backend() else { return };
    let names = unique_names("select");
    let t = new_table(&b, &names, "t").await;
    let e = b
        .query(
            &t,
            &QuerySpec {
                select: Some(vec!["not-a-name".into()]),
                ..QuerySpec::default()
            },
        )
        .await
        .unwrap_err();
    assert_kind(&e, ErrorKind::Invalid, None);
}

/// A batch on a missing table fails at its first operation with
/// `TableNotFound` (the memory backend fails the whole batch with the same
/// code; the conformance suite checks what both share).
#[tokio::test]
async fn a_batch_on_a_missing_table_fails_at_its_first_operation() {
    let Some(b) = backend() else { return };
    let names = unique_names("missing");
    let absent = names.table("absent");
    let e = b
        .batch(&absent, &[TableOp::Insert(entity("p", "r", &[]))])
        .await
        .unwrap_err();
    match &e {
        Error::Batch { index: 0, source } => {
            assert_kind(source, ErrorKind::NotFound, Some("TableNotFound"))
        }
        other => panic!("expected Error::Batch at 0, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------
// Batches
// ---------------------------------------------------------------------------

#[tokio::test]
async fn invalid_batches_are_rejected_before_sending() {
    let plan = FaultInjector::default();
    let Some(b) = backend_with(Some(plan.clone())) else {
        return;
    };
    let names = unique_names("batchlimits");
    let t = new_table(&b, &names, "t").await;
    let before = plan.requests();

    let too_many: Vec<TableOp> = (0..101)
        .map(|i| TableOp::Insert(entity("p", &format!("r{i:03}"), &[])))
        .collect();
    let e = b.batch(&t, &too_many).await.unwrap_err();
    assert_kind(&e, ErrorKind::Invalid, None);
    assert!(e.to_string().contains("101 operations"), "{e}");

    let cross = [
        TableOp::Insert(entity("p1", "r", &[])),
        TableOp::Insert(entity("p2", "r", &[])),
    ];
    let e = b.batch(&t, &cross).await.unwrap_err();
    assert_kind(&e, ErrorKind::Invalid, None);
    assert!(e.to_string().contains("partition"), "{e}");

    let twice = [
        TableOp::Insert(entity("p", "r", &[])),
        TableOp::Replace(entity("p", "r", &[]), Precondition::Upsert),
    ];
    let e = b.batch(&t, &twice).await.unwrap_err();
    assert_kind(&e, ErrorKind::Invalid, None);

    let e = b.batch(&t, &[]).await.unwrap_err();
    assert_kind(&e, ErrorKind::Invalid, None);

    assert_eq!(plan.requests(), before, "nothing was sent");
    let page = b.query(&t, &QuerySpec::default()).await.unwrap();
    assert!(page.entities.is_empty(), "nothing was stored");
}

// ---------------------------------------------------------------------------
// Queries
// ---------------------------------------------------------------------------

// ---------------------------------------------------------------------------
// Retries and lost replies
// ---------------------------------------------------------------------------

#[tokio::test]
async fn an_insert_whose_reply_was_lost_succeeds_on_retry() {
    let plan = FaultInjector::default();
    let Some(b) = backend_with(Some(plan.clone())) else {
        return;
    };
    let names = unique_names("lostinsert");
    let t = new_table(&b, &names, "t").await;
    plan.inject_request("POST", t.as_str(), Fault::LoseReply);
    let v = b
        .execute(
            &t,
            TableOp::Insert(entity("p", "r", &[("n", Value::Int32(1))])),
            &WriteOptions::new(),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(plan.pending(), 0);
    let got = get(&b, &t, "p", "r").await.unwrap();
    assert_eq!(got.etag, v.etag);

    // Someone else's identical row counts the same way; a different one is
    // AlreadyExists.
    insert(&b, &t, entity("p", "other", &[("n", Value::Int32(1))])).await;
    plan.inject_request("POST", t.as_str(), Fault::LoseReply);
    let e = b
        .execute(
            &t,
            TableOp::Insert(entity("p", "other", &[("n", Value::Int32(2))])),
            &WriteOptions::new(),
        )
        .await
        .unwrap_err();
    assert_kind(&e, ErrorKind::AlreadyExists, Some("EntityAlreadyExists"));
}

#[tokio::test]
async fn conditional_writes_whose_reply_was_lost_are_verified_not_resent() {
    let plan = FaultInjector::default();
    let Some(b) = backend_with(Some(plan.clone())) else {
        return;
    };
    let names = unique_names("lostupdate");
    let t = new_table(&b, &names, "t").await;
    let v1 = insert(&b, &t, entity("p", "r", &[("n", Value::Int32(1))])).await;

    // Replace applied, reply lost: the written content is stored under a
    // new ETag, which another writer could have produced as well, so the
    // outcome is reported as unknown (never as a success that may hide a
    // lost update), and the write is not sent again.
    plan.inject_request("PUT", "RowKey='r'", Fault::LoseReply);
    let e = b
        .execute(
            &t,
            TableOp::Replace(
                entity("p", "r", &[("n", Value::Int32(2))]),
                Precondition::IfMatch(v1.etag.clone()),
            ),
            &WriteOptions::new(),
        )
        .await
        .unwrap_err();
    assert!(e.is_transient(), "{e:?}");
    assert!(e.to_string().contains("unknown"), "{e}");
    let got = get(&b, &t, "p", "r").await.unwrap();
    assert_ne!(got.etag, v1.etag);
    assert_eq!(got.data.properties.get("n"), Some(&Value::Int32(2)));
    let v2 = Version {
        etag: got.etag.clone(),
        timestamp: got.timestamp,
    };

    // Merge not sent (connection refused): sent again normally.
    plan.inject_request("PATCH", "RowKey='r'", Fault::Fail);
    let v3 = b
        .execute(
            &t,
            TableOp::Merge(
                entity("p", "r", &[("m", Value::Int32(3))]),
                Precondition::IfMatch(v2.etag.clone()),
            ),
            &WriteOptions::new(),
        )
        .await
        .unwrap()
        .unwrap();

    // A 500 may have applied or not: verified; here it was not applied, so
    // it is sent again.
    plan.inject_request("PATCH", "RowKey='r'", Fault::Status(500));
    let v4 = b
        .execute(
            &t,
            TableOp::Merge(
                entity("p", "r", &[("m", Value::Int32(4))]),
                Precondition::IfMatch(v3.etag.clone()),
            ),
            &WriteOptions::new(),
        )
        .await
        .unwrap()
        .unwrap();
    let got = get(&b, &t, "p", "r").await.unwrap();
    assert_eq!(got.etag, v4.etag);
    assert_eq!(got.data.properties.get("m"), Some(&Value::Int32(4)));

    // A 500 (which may or may not have applied) while another writer has
    // replaced the entity: the read-back shows neither our write nor our
    // precondition. The write may have been applied and then overwritten, or
    // refused: neither a blind re-send nor a Conflict (which `update_with`
    // would retry, repeating an applied increment), but an unknown outcome.
    let other = backend().unwrap();
    other
        .execute(
            &t,
            TableOp::Replace(
                entity("p", "r", &[("x", Value::Int32(9))]),
                Precondition::IfExists,
            ),
            &WriteOptions::new(),
        )
        .await
        .unwrap();
    plan.inject_request("PUT", "RowKey='r'", Fault::Status(500));
    let e = b
        .execute(
            &t,
            TableOp::Replace(
                entity("p", "r", &[("n", Value::Int32(5))]),
                Precondition::IfMatch(v4.etag.clone()),
            ),
            &WriteOptions::new(),
        )
        .await
        .unwrap_err();
    assert!(e.is_transient(), "{e:?}");
    assert!(e.to_string().contains("unknown"), "{e}");
    assert!(e.to_string().contains("reply was lost"), "{e}");

    // Delete applied, reply lost: success.
    let cur = get(&b, &t, "p", "r").await.unwrap();
    plan.inject_request("DELETE", "RowKey='r'", Fault::LoseReply);
    b.execute(
        &t,
        TableOp::Delete {
            partition_key: pk("p"),
            row_key: rk("r"),
            condition: Precondition::IfMatch(cur.etag),
        },
        &WriteOptions::new(),
    )
    .await
    .unwrap();
    assert!(get(&b, &t, "p", "r").await.is_none());
}

/// The property holding the write logs, named to the backend with each
/// write (`Table::with_write_log` uses `_lhWriteLog`).
const WRITE_LOG: &str = "_lhWriteLog";
/// Writes that keep their log in [`WRITE_LOG`].
const LOGGED: WriteOptions = WriteOptions::new().with_write_log();

/// The entity's properties with a write log (ids newest first, as
/// `Table::with_write_log` writes them).
fn logged(n: i32, log: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("n", Value::Int32(n)),
        (WRITE_LOG, Value::String(log.to_owned())),
    ]
}

#[tokio::test]
async fn write_logs_settle_lost_replies_exactly() {
    let plan = FaultInjector::default();
    let Some(b) = backend_with(Some(plan.clone())) else {
        return;
    };
    let other = backend().unwrap();
    let names = unique_names("writelog");
    let t = new_table(&b, &names, "t").await;
    let replace = |n: i32, log: &str, etag: &ETag| {
        TableOp::Replace(
            entity("p", "r", &logged(n, log)),
            Precondition::IfMatch(etag.clone()),
        )
    };
    let v1 = insert(&b, &t, entity("p", "r", &logged(1, "base"))).await;

    // Applied, reply lost: the log shows it, so it is a success with the
    // stored version, not an unknown outcome.
    plan.inject_request("PUT", "RowKey='r'", Fault::LoseReply);
    let v2 = b
        .execute(&t, replace(2, "mine base", &v1.etag), &LOGGED)
        .await
        .unwrap()
        .unwrap();
    let got = get(&b, &t, "p", "r").await.unwrap();
    assert_eq!(got.etag, v2.etag);
    assert_eq!(got.data.properties.get("n"), Some(&Value::Int32(2)));

    // Not applied (refused by a 500 before the service wrote), while a
    // rival wrote the same content from the same version: the log lists
    // the rival and not us, so the write fails as it would have.
    other
        .execute(&t, replace(3, "rival mine base", &v2.etag), &LOGGED)
        .await
        .unwrap();
    plan.inject_request("PUT", "RowKey='r'", Fault::Status(500));
    let e = b
        .execute(&t, replace(3, "again mine base", &v2.etag), &LOGGED)
        .await
        .unwrap_err();
    assert_kind(&e, ErrorKind::Conflict, None);
    assert!(e.to_string().contains("write log"), "{e}");

    // Applied, reply lost, then built upon by another writer before the
    // read-back (the writer retries only after 500 ms): still a success,
    // with an ETag that matches nothing.
    let slow_plan = FaultInjector::default();
    let slow = AzureBackend::builder()
        .connection_string(&azurite_connection_string().unwrap())
        .unwrap()
        .transport_retry(
            TransportRetry::new()
                .with_initial_delay(Duration::from_millis(500))
                .with_max_delay(Duration::from_millis(500)),
        )
        .policy(slow_plan.transport_policy())
        .build()
        .unwrap();
    let cur = get(&b, &t, "p", "r").await.unwrap();
    slow_plan.inject_request("PUT", "RowKey='r'", Fault::LoseReply);
    let write = {
        let (slow, t, op) = (
            slow.clone(),
            t.clone(),
            replace(4, "ours rival mine base", &cur.etag),
        );
        tokio::spawn(async move { slow.execute(&t, op, &LOGGED).await })
    };
    loop {
        let now = get(&other, &t, "p", "r").await.unwrap();
        if now.data.properties.get("n") == Some(&Value::Int32(4)) {
            other
                .execute(
                    &t,
                    replace(5, "later ours rival mine base", &now.etag),
                    &LOGGED,
                )
                .await
                .unwrap();
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let v = write.await.unwrap().unwrap().unwrap();
    assert!(v.etag.is_superseded(), "{v:?}");
    let got = get(&b, &t, "p", "r").await.unwrap();
    assert_eq!(got.data.properties.get("n"), Some(&Value::Int32(5)));
    // The superseded ETag matches nothing: a write based on it conflicts.
    let e = b
        .execute(&t, replace(6, "x ours", &v.etag), &LOGGED)
        .await
        .unwrap_err();
    assert_kind(&e, ErrorKind::Conflict, None);
}

#[tokio::test]
async fn a_batch_whose_reply_was_lost_is_verified() {
    let plan = FaultInjector::default();
    let Some(b) = backend_with(Some(plan.clone())) else {
        return;
    };
    let names = unique_names("lostbatch");
    let t = new_table(&b, &names, "t").await;
    let v = insert(&b, &t, entity("p", "a", &[("n", Value::Int32(1))])).await;
    // Unconditional writes whose effect is stored: applied.
    plan.inject_request("POST", "$batch", Fault::LoseReply);
    let versions = b
        .batch(
            &t,
            &[
                TableOp::Replace(
                    entity("p", "a", &[("n", Value::Int32(2))]),
                    Precondition::Upsert,
                ),
                TableOp::Insert(entity("p", "b", &[])),
            ],
        )
        .await
        .unwrap();
    assert_eq!(plan.pending(), 0);
    assert_eq!(
        get(&b, &t, "p", "a").await.unwrap().etag,
        versions[0].clone().unwrap().etag
    );
    assert_eq!(
        get(&b, &t, "p", "b").await.unwrap().etag,
        versions[1].clone().unwrap().etag
    );
    assert_ne!(versions[0].clone().unwrap().etag, v.etag);

    // A conditional write in a batch whose reply was lost: its effect under
    // a new ETag could be another writer's, so the outcome is unknown.
    let cur = get(&b, &t, "p", "a").await.unwrap();
    plan.inject_request("POST", "$batch", Fault::LoseReply);
    let e = b
        .batch(
            &t,
            &[TableOp::Replace(
                entity("p", "a", &[("n", Value::Int32(3))]),
                Precondition::IfMatch(cur.etag.clone()),
            )],
        )
        .await
        .unwrap_err();
    assert!(e.is_transient(), "{e:?}");
    assert_eq!(
        get(&b, &t, "p", "a")
            .await
            .unwrap()
            .data
            .properties
            .get("n"),
        Some(&Value::Int32(3)),
        "applied once, not sent again"
    );

    // Not applied (a 503 before anything happened): sent again.
    plan.inject_request("POST", "$batch", Fault::Status(503));
    b.batch(&t, &[TableOp::Insert(entity("p", "c", &[]))])
        .await
        .unwrap();
    assert!(get(&b, &t, "p", "c").await.is_some());
}

#[tokio::test]
async fn transient_failures_are_retried_then_reported_as_transient() {
    let plan = FaultInjector::default();
    let Some(b) = backend_with(Some(plan.clone())) else {
        return;
    };
    let names = unique_names("transient");
    let t = new_table(&b, &names, "t").await;
    insert(&b, &t, entity("p", "r", &[])).await;
    plan.inject_request("GET", "RowKey='r'", Fault::Status(503));
    plan.inject_request("GET", "RowKey='r'", Fault::Fail);
    plan.inject_request("GET", "RowKey='r'", Fault::Status(408));
    assert!(get(&b, &t, "p", "r").await.is_some());
    assert_eq!(plan.pending(), 0);

    // More failures than the policy allows.
    for _ in 0..10 {
        plan.inject_request("GET", "RowKey='r'", Fault::Status(500));
    }
    let e = b.get(&t, &pk("p"), &rk("r")).await.unwrap_err();
    assert!(e.is_transient(), "{e:?}");
    let used = 10 - plan.pending();
    assert_eq!(used, 1 + TransportRetry::new().max_retries(), "attempts");

    // 409 and 412 are never retried.
    while plan.pending() > 0 {
        let _ = b.get(&t, &pk("p"), &rk("r")).await;
    }
    let before = plan.requests();
    let e = b
        .execute(
            &t,
            TableOp::Insert(entity("p", "r", &[])),
            &WriteOptions::new(),
        )
        .await
        .unwrap_err();
    assert_kind(&e, ErrorKind::AlreadyExists, None);
    assert_eq!(plan.requests(), before + 1);
}

// ---------------------------------------------------------------------------
// Blobs
// ---------------------------------------------------------------------------

fn blob(name: &str) -> BlobName {
    BlobName::new(name).unwrap()
}

fn meta(pairs: &[(&str, &str)]) -> Metadata {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

async fn new_container(b: &AzureBackend, names: &UniqueNames) -> ContainerName {
    let c = names.container("c");
    b.create_container(&c).await.unwrap();
    // Idempotent.
    b.create_container(&c).await.unwrap();
    c
}

/// Metadata names come back lowercased (HTTP headers are
/// case-insensitive; the memory backend keeps the case written).
#[tokio::test]
async fn metadata_names_come_back_lowercased() {
    let Some(b) = backend() else { return };
    let names = unique_names("metacase");
    let c = new_container(&b, &names).await;
    let x = blob("x");
    b.put_blob(
        &c,
        &x,
        Vec::new(),
        &meta(&[("epoch", "7"), ("Mixed_Case", "v")]),
        &BlobConditions::none(),
    )
    .await
    .unwrap();
    let props = b.blob_properties(&c, &x).await.unwrap().unwrap();
    assert_eq!(props.metadata, meta(&[("epoch", "7"), ("mixed_case", "v")]));
}

#[tokio::test]
async fn listing_by_prefix_with_markers() {
    let Some(b) = backend() else { return };
    let names = unique_names("listing");
    let c = new_container(&b, &names).await;
    for name in ["a/1", "a/2", "a/3", "a/4", "a/5", "b/1"] {
        b.put_blob(
            &c,
            &blob(name),
            name.as_bytes().to_vec(),
            &meta(&[("k", name.replace('/', "_").as_str())]),
            &BlobConditions::none(),
        )
        .await
        .unwrap();
    }
    let mut marker: Option<String> = None;
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        let page = b
            .list_blobs_page(&c, "a/", marker.as_deref(), Some(2))
            .await
            .unwrap();
        pages += 1;
        assert!(page.items.len() <= 2);
        for item in &page.items {
            assert_eq!(item.properties.content_length, 3);
            assert_eq!(
                item.properties.metadata.get("k").map(String::as_str),
                Some(item.name.replace('/', "_").as_str())
            );
        }
        seen.extend(page.items.into_iter().map(|i| i.name));
        match page.next_marker {
            Some(m) => marker = Some(m),
            None => break,
        }
    }
    assert_eq!(seen, ["a/1", "a/2", "a/3", "a/4", "a/5"]);
    assert_eq!(pages, 3);
    let all = b.list_blobs(&c, "", None).await.unwrap();
    assert_eq!(all.items.len(), 6);
    assert!(all.next_marker.is_none());
}

#[tokio::test]
async fn a_put_whose_reply_was_lost_is_verified() {
    let plan = FaultInjector::default();
    let Some(b) = backend_with(Some(plan.clone())) else {
        return;
    };
    let names = unique_names("lostput");
    let c = new_container(&b, &names).await;
    let x = blob("x");
    plan.inject_request("PUT", "/x", Fault::LoseReply);
    let etag = b
        .put_blob(
            &c,
            &x,
            b"body".to_vec(),
            &meta(&[("a", "1")]),
            &BlobConditions::create_only(),
        )
        .await
        .unwrap();
    assert_eq!(plan.pending(), 0);
    assert_eq!(b.blob_properties(&c, &x).await.unwrap().unwrap().etag, etag);

    plan.inject_request("PUT", "/x", Fault::LoseReply);
    let etag2 = b
        .set_blob_metadata(
            &c,
            &x,
            &meta(&[("a", "2")]),
            &BlobConditions::if_match(etag),
        )
        .await
        .unwrap();
    assert_eq!(
        b.blob_properties(&c, &x).await.unwrap().unwrap().etag,
        etag2
    );

    plan.inject_request("DELETE", "/x", Fault::LoseReply);
    b.delete_blob(&c, &x, &BlobConditions::if_match(etag2))
        .await
        .unwrap();
    assert!(b.blob_properties(&c, &x).await.unwrap().is_none());
}

// ---------------------------------------------------------------------------
// Leases
// ---------------------------------------------------------------------------

async fn leased_blob(b: &AzureBackend, c: &ContainerName, name: &str) -> BlobName {
    let x = blob(name);
    b.put_blob(
        c,
        &x,
        b"lock".to_vec(),
        &Metadata::new(),
        &BlobConditions::none(),
    )
    .await
    .unwrap();
    x
}

#[tokio::test]
async fn lease_durations_are_checked_before_sending() {
    let plan = FaultInjector::default();
    let Some(b) = backend_with(Some(plan.clone())) else {
        return;
    };
    let names = unique_names("leasedur");
    let c = new_container(&b, &names).await;
    let x = leased_blob(&b, &c, "x").await;
    let before = plan.requests();
    for bad in [
        LeaseDuration::Seconds(14),
        LeaseDuration::Seconds(61),
        LeaseDuration::Seconds(0),
    ] {
        let e = b
            .lease(
                &c,
                &x,
                leasehold::backend::LeaseAction::Acquire {
                    duration: bad,
                    proposed: LeaseId::new_random(),
                },
            )
            .await
            .unwrap_err();
        assert_kind(&e, ErrorKind::Invalid, None);
    }
    for bad in [Duration::from_secs(61), Duration::from_millis(1500)] {
        let e = b
            .lease(
                &c,
                &x,
                leasehold::backend::LeaseAction::Break { period: Some(bad) },
            )
            .await
            .unwrap_err();
        assert_kind(&e, ErrorKind::Invalid, None);
    }
    assert_eq!(plan.requests(), before);
    // 60 s is sent as 60 (not truncated), 15 s as 15.
    for secs in [60, 15] {
        let id = LeaseId::new_random();
        b.lease(
            &c,
            &x,
            leasehold::backend::LeaseAction::Acquire {
                duration: LeaseDuration::timed(Duration::from_secs(secs)).unwrap(),
                proposed: id,
            },
        )
        .await
        .unwrap();
        b.lease(&c, &x, leasehold::backend::LeaseAction::Release(id))
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn lease_operations_whose_reply_was_lost_are_settled() {
    let plan = FaultInjector::default();
    let Some(b) = backend_with(Some(plan.clone())) else {
        return;
    };
    let names = unique_names("lostlease");
    let c = new_container(&b, &names).await;
    let x = leased_blob(&b, &c, "x").await;
    let a = LeaseId::new_random();
    plan.inject_request("PUT", "/x", Fault::LoseReply);
    assert_eq!(
        b.lease(
            &c,
            &x,
            leasehold::backend::LeaseAction::Acquire {
                duration: LeaseDuration::Infinite,
                proposed: a
            }
        )
        .await
        .unwrap()
        .lease_id(),
        Some(a)
    );
    let bb = LeaseId::new_random();
    plan.inject_request("PUT", "/x", Fault::LoseReply);
    assert_eq!(
        b.lease(
            &c,
            &x,
            leasehold::backend::LeaseAction::Change {
                id: a,
                proposed: bb
            }
        )
        .await
        .unwrap(),
        leasehold::backend::LeaseReply::Changed(bb)
    );
    plan.inject_request("PUT", "/x", Fault::LoseReply);
    b.lease(&c, &x, leasehold::backend::LeaseAction::Release(bb))
        .await
        .unwrap();
    assert_eq!(plan.pending(), 0);
    assert_eq!(
        b.blob_properties(&c, &x)
            .await
            .unwrap()
            .unwrap()
            .lease
            .state,
        LeaseState::Available
    );
}

// ---------------------------------------------------------------------------
// Shared access signatures, and what reaches the logs
// ---------------------------------------------------------------------------

/// Every operation kind through a SAS, with every log line at TRACE level
/// captured: neither the signature nor the key reaches the logs.
#[tokio::test]
async fn sas_credentials_work_and_no_secret_reaches_the_logs() {
    let Some(conn) = azurite_connection_string() else {
        return;
    };
    let settings = ConnectionSettings::parse(&conn).unwrap();
    let key = conn
        .split(';')
        .find_map(|p| p.strip_prefix("AccountKey="))
        .map(|k| AccountKey_(k.to_owned()))
        .expect("the Azurite string carries the key");
    let sas = account_sas(&settings.account, &key);
    let shown = format!("{:?}", AzureBackend::builder().sas_token(&sas).unwrap());
    assert!(shown.contains("sig=<redacted>"), "{shown}");
    let raw_sig: String = sas
        .split('&')
        .find_map(|p| p.strip_prefix("sig="))
        .unwrap()
        .to_owned();

    let captured = Captured::default();
    let _guard = captured.capture();

    let plan = FaultInjector::default();
    let b = AzureBackend::builder()
        .account(settings.account.clone())
        .sas_token(&sas)
        .unwrap()
        .table_endpoint(settings.table_endpoint.as_str())
        .blob_endpoint(settings.blob_endpoint.as_str())
        .transport_retry(fast_retries())
        .policy(plan.transport_policy())
        .build()
        .unwrap();
    let names = unique_names("sas");
    let t = new_table(&b, &names, "t").await;
    insert(&b, &t, entity("p", "r", &[("n", Value::Int64(1))])).await;
    // Through a store, requests are traced: it stacks the tracing layer.
    let traced = leasehold::Store::new(b.clone());
    assert!(get(traced.backend(), &t, "p", "r").await.is_some());
    plan.inject_request("GET", "RowKey='r'", Fault::Status(503));
    assert!(get(&b, &t, "p", "r").await.is_some());
    b.batch(&t, &[TableOp::Insert(entity("p", "s", &[]))])
        .await
        .unwrap();
    assert_eq!(
        b.query(&t, &QuerySpec::default())
            .await
            .unwrap()
            .entities
            .len(),
        2
    );
    let e = b
        .execute(
            &t,
            TableOp::Insert(entity("p", "r", &[])),
            &WriteOptions::new(),
        )
        .await
        .unwrap_err();
    assert_kind(&e, ErrorKind::AlreadyExists, None);

    let c = new_container(&b, &names).await;
    let x = leased_blob(&b, &c, "x").await;
    let id = LeaseId::new_random();
    b.lease(
        &c,
        &x,
        leasehold::backend::LeaseAction::Acquire {
            duration: LeaseDuration::Infinite,
            proposed: id,
        },
    )
    .await
    .unwrap();
    b.put_blob(
        &c,
        &x,
        b"j".to_vec(),
        &meta(&[("a", "b")]),
        &BlobConditions::leased(id),
    )
    .await
    .unwrap();
    assert_eq!(b.get_blob(&c, &x).await.unwrap().unwrap().body, b"j");
    b.lease(&c, &x, leasehold::backend::LeaseAction::Release(id))
        .await
        .unwrap();
    assert_eq!(b.list_blobs(&c, "", None).await.unwrap().items.len(), 1);

    // A tampered signature is refused: the SAS is really checked.
    let forged = sas.replace(
        &format!("sig={}", &sas[sas.find("sig=").unwrap() + 4..]),
        "sig=AAAA",
    );
    let bad = AzureBackend::builder()
        .account(settings.account.clone())
        .sas_token(&forged)
        .unwrap()
        .table_endpoint(settings.table_endpoint.as_str())
        .blob_endpoint(settings.blob_endpoint.as_str())
        .build()
        .unwrap();
    let e = bad.get(&t, &pk("p"), &rk("r")).await.unwrap_err();
    assert_eq!(
        (e.kind(), e.status()),
        (ErrorKind::Auth, Some(403)),
        "{e:?}"
    );

    // A failure whose text comes from the HTTP stack.
    let dead = AzureBackend::builder()
        .account(settings.account.clone())
        .sas_token(&sas)
        .unwrap()
        .table_endpoint("http://127.0.0.1:1/devstoreaccount1")
        .blob_endpoint("http://127.0.0.1:1/devstoreaccount1")
        .transport_retry(TransportRetry::none())
        .build()
        .unwrap();
    let e = leasehold::Store::new(dead)
        .backend()
        .get(&t, &pk("p"), &rk("r"))
        .await
        .unwrap_err();
    tracing::error!(error = %e, debug = ?e, "reported");

    let logs = captured.text();
    if std::env::var_os("LEASEHOLD_SHOW_LOGS").is_some() {
        eprintln!("{logs}");
    }
    assert!(logs.contains("leasehold.table{"), "spans were logged");
    let encoded: String = {
        let mut u = azure_core::http::Url::parse("http://x/").unwrap();
        u.query_pairs_mut().append_pair("s", &raw_sig);
        u.query().unwrap()[2..].to_owned()
    };
    for secret in [raw_sig.as_str(), encoded.as_str(), key.0.as_str()] {
        assert!(!logs.contains(secret), "a secret reached the logs");
    }
}

// ---------------------------------------------------------------------------
// Unreachable storage (no Azurite needed)
// ---------------------------------------------------------------------------

/// A store whose endpoints point at a closed loopback port: every call that
/// waits for a lease gives up after the configured bound with
/// `Error::Unavailable` naming the blob endpoint, never its signature.
#[tokio::test]
async fn lease_waits_on_a_closed_port_give_up_naming_the_blob_endpoint() {
    use leasehold::Store;
    use leasehold::lease::LeaseOptions;

    // A port nothing listens on: bound, then closed again.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let endpoint = format!("http://127.0.0.1:{port}/devstoreaccount1");
    let signature = "c2lnbmF0dXJlLW5vdC1hLXJlYWwtb25l";
    let backend = AzureBackend::builder()
        .account("devstoreaccount1")
        .sas_token(format!("sv=2022-11-02&ss=bt&sig={signature}"))
        .unwrap()
        .table_endpoint(endpoint.clone())
        .blob_endpoint(endpoint.clone())
        .transport_retry(TransportRetry::none())
        .build()
        .unwrap();
    assert_eq!(backend.endpoint(), endpoint);
    let bound = Duration::from_secs(1);
    let store = Store::builder(backend)
        .lease_options(LeaseOptions::new().with_unavailable_after(bound))
        .build()
        .unwrap();

    let check = |e: Error| {
        assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
        let text = e.to_string();
        assert!(
            text.starts_with(&format!("storage at {endpoint} unavailable for ")),
            "{text}"
        );
        assert!(!text.contains(signature), "{text}");
        // Each fact once.
        assert_eq!(text.matches(endpoint.as_str()).count(), 1, "{text}");
        assert_eq!(text.matches("unavailable").count(), 1, "{text}");
        assert_eq!(text.matches("transient").count(), 1, "{text}");
        assert!(!format!("{e:?}").contains(signature), "{e:?}");
        let Error::Unavailable { after, source, .. } = e else {
            unreachable!()
        };
        assert!(after >= bound, "gave up early: {after:?}");
        assert!(source.is_transient(), "{source}");
    };
    check(store.lock("alice").await.unwrap_err());
    check(
        store
            .leases()
            .do_once("init", |_| async { Ok::<_, Error>(()) })
            .await
            .unwrap_err(),
    );
}

// ---------------------------------------------------------------------------
// A store built from a connection string, with options
// ---------------------------------------------------------------------------

#[derive(leasehold::Entity, Debug, Clone, PartialEq)]
#[entity(table = "Prefixed")]
struct PrefixedRow {
    #[entity(partition_key)]
    pk: String,
    #[entity(row_key)]
    rk: String,
    n: i64,
}

/// `Store::builder_from_connection_string` with a table prefix and lease
/// options: on Azurite the row lands in the prefixed table (and no
/// unprefixed one), and the lease blob sits in the configured container,
/// under the prefix, with the configured (infinite) lease.
#[tokio::test]
async fn a_store_built_from_a_connection_string_applies_its_table_prefix_and_lease_options() {
    let Some(conn) = azurite_connection_string() else {
        return;
    };
    let Some(raw) = backend() else { return };
    let names = unique_names("storebuilder");
    let container = names.container("leases");
    let store = leasehold::Store::builder_from_connection_string(&conn)
        .unwrap()
        .table_prefix(names.prefix())
        .unwrap()
        .lease_options(
            leasehold::lease::LeaseOptions::new()
                .with_infinite_duration()
                .with_container(container.clone()),
        )
        .build()
        .unwrap();

    let row = PrefixedRow {
        pk: "p".into(),
        rk: "r".into(),
        n: 7,
    };
    store.table::<PrefixedRow>().insert(row).await.unwrap();
    let prefixed = TableName::new(format!("{}Prefixed", names.prefix())).unwrap();
    let stored = raw
        .get(&prefixed, &pk("p"), &rk("r"))
        .await
        .unwrap()
        .expect("the row is in the prefixed table");
    assert_eq!(stored.data.properties.get("n"), Some(&Value::Int64(7)));
    let e = raw
        .get(&TableName::new("Prefixed").unwrap(), &pk("p"), &rk("r"))
        .await
        .unwrap_err();
    assert_kind(&e, ErrorKind::NotFound, Some("TableNotFound"));

    let guard = store
        .leases()
        .acquire("job", Duration::from_secs(10))
        .await
        .unwrap();
    // Under the table prefix, as the store's tables are.
    let blob = leasehold::key::BlobName::new(format!("{}/job", names.prefix())).unwrap();
    let props = raw
        .blob_properties(&container, &blob)
        .await
        .unwrap()
        .expect("the lease blob is in the configured container, under the prefix");
    assert_eq!(props.lease.state, LeaseState::Leased);
    assert_eq!(props.lease.kind, Some(LeaseKind::Infinite));
    guard.release().await.unwrap();
}

// ---------------------------------------------------------------------------
// Projections on the wire
// ---------------------------------------------------------------------------

/// Keeps the length of every reply body.
#[derive(Debug, Default)]
struct ReplySizes(std::sync::Mutex<Vec<usize>>);

impl ReplySizes {
    fn last(&self) -> usize {
        *self.0.lock().unwrap().last().expect("a reply")
    }
}

#[async_trait::async_trait]
impl azure_core::http::policies::Policy for ReplySizes {
    async fn send(
        &self,
        ctx: &azure_core::http::Context,
        request: &mut azure_core::http::Request,
        next: &[std::sync::Arc<dyn azure_core::http::policies::Policy>],
    ) -> azure_core::http::policies::PolicyResult {
        let reply = next[0].send(ctx, request, &next[1..]).await?;
        let (status, headers) = (reply.status(), reply.headers().clone());
        let body = reply.into_body().collect().await?;
        self.0.lock().unwrap().push(body.len());
        Ok(azure_core::http::AsyncRawResponse::from_bytes(
            status, headers, body,
        ))
    }
}

#[derive(leasehold::Entity, Debug, Clone)]
#[entity(table = "Orders")]
struct Order {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    id: String,
    total: i64,
    notes: String,
    lines: i32,
}

/// The list view of [`Order`].
#[derive(leasehold::Entity, Debug, Clone)]
#[entity(table = "Orders")]
struct OrderTotal {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    id: String,
    total: i64,
}

#[tokio::test]
async fn a_projection_downloads_only_its_properties() {
    let Some(conn) = azurite_connection_string() else {
        return;
    };
    let sizes = std::sync::Arc::new(ReplySizes::default());
    let backend = AzureBackend::builder()
        .connection_string(&conn)
        .unwrap()
        .policy(sizes.clone())
        .build()
        .unwrap();
    let names = unique_names("projection");
    let store = leasehold::Store::builder(backend)
        .table_prefix(names.prefix())
        .unwrap()
        .build()
        .unwrap();
    let orders = store.table::<Order>();
    orders
        .insert(Order {
            customer: "alice".into(),
            id: "1".into(),
            total: 30,
            notes: "a note of some length ".repeat(40),
            lines: 3,
        })
        .await
        .unwrap();
    let full = orders.query().partition("alice").all().await.unwrap();
    let full_bytes = sizes.last();
    let view = orders
        .query()
        .partition("alice")
        .select::<OrderTotal>()
        .all()
        .await
        .unwrap();
    let view_bytes = sizes.last();
    assert_eq!((view.len(), view[0].total), (1, full[0].total));
    assert!(
        view_bytes * 2 < full_bytes,
        "the projection's reply holds fewer properties: {view_bytes} against {full_bytes} bytes"
    );
    let one = orders
        .get_as::<OrderTotal>("alice", "1")
        .await
        .unwrap()
        .expect("stored");
    assert_eq!(one.total, 30);
    assert!(sizes.last() * 2 < full_bytes, "{} bytes", sizes.last());
    let full_get = orders.get("alice", "1").await.unwrap().expect("stored");
    assert_eq!(full_get.lines, 3);
    assert!(
        sizes.last() > full_bytes / 2,
        "a full get reads every property"
    );
}
