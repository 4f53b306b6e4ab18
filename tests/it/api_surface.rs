//! The public surface as a user's crate sees it: what can be called with
//! `leasehold::` paths alone (no `tokio-util`, `time`, `uuid` or `futures`
//! dependency of the caller's own), how a store on Azure is configured, and
//! which connection strings `Store::connect` refuses before any request.
//!
//! Nothing here needs Azurite: a store on Azure sends nothing until used.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use leasehold::backend::LeaseDuration;
use leasehold::lease::{LeaderOptions, LeaseOptions};
use leasehold::stream::TryStreamExt as _;
use leasehold::{CancellationToken, Entity, ErrorKind, Store};

const KEY: &str = "c2VjcmV0LWtleS1tYXRlcmlhbC10aGF0LW11c3Qtbm90LWxlYWs=";
const SIG: &str = "ApiSurfaceSecretSignature0123456789abcdef";

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Events")]
struct Event {
    #[entity(partition_key)]
    stream: String,
    #[entity(row_key)]
    seq: String,
    at: leasehold::time::OffsetDateTime,
    id: leasehold::uuid::Uuid,
}

// ---------------------------------------------------------------------------
// Re-exports: calling public signatures needs no other crate
// ---------------------------------------------------------------------------

/// `LeaderOptions::with_stop` takes a `CancellationToken`, reachable as
/// `leasehold::CancellationToken`: a leader stopped through it returns.
#[tokio::test(start_paused = true)]
async fn leader_with_stop_needs_only_the_reexported_cancellation_token() {
    let store = Store::memory();
    let stop = CancellationToken::new();
    let options = LeaderOptions::new().with_stop(stop.clone());
    let terms = Arc::new(AtomicU64::new(0));
    let seen = terms.clone();
    store
        .leases()
        .run_as_leader("reexport-leader", options, move |ctx| {
            let (stop, seen) = (stop.clone(), seen.clone());
            async move {
                seen.fetch_add(1, Ordering::SeqCst);
                // The term's own token is a leasehold::CancellationToken too.
                let term: &CancellationToken = ctx.cancellation_token();
                stop.cancel();
                term.cancelled().await;
            }
        })
        .await
        .expect("run_as_leader returns once stopped");
    assert_eq!(terms.load(Ordering::SeqCst), 1);
    // The lease was released on the way out: another guard takes it at once.
    let guard = store
        .leases()
        .try_acquire("reexport-leader")
        .await
        .unwrap()
        .expect("the stopped leader released its lease");
    guard.release().await.unwrap();
}

/// Entity fields of `time` and `uuid` types and query streams work through
/// `leasehold::time`, `leasehold::uuid` and `leasehold::stream`.
#[tokio::test]
async fn entity_types_and_query_streams_are_reachable_through_leasehold_paths() {
    let events = Store::memory().table::<Event>();
    let event = Event {
        stream: "orders".into(),
        seq: "0001".into(),
        at: leasehold::time::OffsetDateTime::UNIX_EPOCH + leasehold::time::Duration::days(1),
        id: leasehold::uuid::Uuid::from_u128(7),
    };
    events.insert(event.clone()).await.unwrap();
    let mut rows = Box::pin(events.query().partition("orders").stream());
    let first = rows.try_next().await.unwrap().expect("one row");
    assert_eq!(first.entity(), &event);
    assert!(rows.try_next().await.unwrap().is_none());
    let stamp: leasehold::time::OffsetDateTime = first.timestamp();
    assert!(stamp > leasehold::time::OffsetDateTime::UNIX_EPOCH);
    let journal: leasehold::serde_json::Value = leasehold::serde_json::json!({ "ops": [] });
    assert!(journal.is_object());
}

// ---------------------------------------------------------------------------
// Service limits: associated constants of what they limit
// ---------------------------------------------------------------------------

/// Each limit is a constant of the type it limits, with the service's value,
/// and is what the checks enforce.
#[test]
fn service_limits_are_constants_of_what_they_limit() {
    use leasehold::backend::QuerySpec;
    use leasehold::entity::{EntityData, Value};
    use leasehold::key::CompositeKey;
    use leasehold::query::Filter;
    use leasehold::{PartitionKey, RowKey};

    assert_eq!(PartitionKey::MAX_BYTES, 1024);
    assert_eq!(RowKey::MAX_BYTES, 1024);
    assert_eq!(EntityData::MAX_BYTES, 1024 * 1024);
    assert_eq!(EntityData::MAX_PROPERTIES, 252);
    assert_eq!(Value::MAX_BYTES, 64 * 1024);
    assert_eq!(Filter::MAX_COMPARISONS, 15);
    assert_eq!(Filter::MAX_LEN, 10 * 1024);
    assert_eq!(QuerySpec::MAX_PAGE_SIZE, 1000);
    assert_eq!(CompositeKey::SEPARATOR, ' ');

    // Keys: UTF-16 bytes, so 512 characters of the BMP fit and 513 do not.
    assert!(RowKey::new("x".repeat(RowKey::MAX_BYTES / 2)).is_ok());
    assert!(RowKey::new("x".repeat(RowKey::MAX_BYTES / 2 + 1)).is_err());
    let key = CompositeKey::join(["a", "b"]);
    assert_eq!(key, format!("a{}b", CompositeKey::SEPARATOR));
    // Page sizes: 1 to the maximum.
    let spec = |top| QuerySpec {
        top: Some(top),
        ..QuerySpec::default()
    };
    assert!(spec(QuerySpec::MAX_PAGE_SIZE).validate().is_ok());
    assert!(spec(QuerySpec::MAX_PAGE_SIZE + 1).validate().is_err());
}

// ---------------------------------------------------------------------------
// Connection strings: both endpoints or neither
// ---------------------------------------------------------------------------

/// A TableEndpoint without a BlobEndpoint (the lease service) is refused at
/// connect, naming the missing part, instead of failing on the first lock
/// with a DNS error for a derived host; and the reverse.
#[cfg(feature = "azure")]
#[test]
fn connect_refuses_one_endpoint_without_the_other_naming_the_missing_part() {
    let sas = format!("sv=2022-11-02&ss=bt&srt=sco&sp=rwdlacu&se=2030-01-01T00:00:00Z&sig={SIG}");
    let cases = [
        (
            format!(
                "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={KEY};\
                 TableEndpoint=http://127.0.0.1:10002/devstoreaccount1"
            ),
            "no BlobEndpoint",
        ),
        (
            format!(
                "AccountName=myacct;AccountKey={KEY};\
                 BlobEndpoint=https://myacct.blob.core.windows.net"
            ),
            "no TableEndpoint",
        ),
        (
            format!(
                "TableEndpoint=https://acct1.table.core.windows.net;SharedAccessSignature={sas}"
            ),
            "no BlobEndpoint",
        ),
    ];
    for (conn, missing) in cases {
        let errors = [
            Store::connect(&conn).unwrap_err(),
            Store::builder_from_connection_string(&conn).unwrap_err(),
        ];
        for e in errors {
            assert_eq!(e.kind(), ErrorKind::Invalid, "{conn}: {e:?}");
            let text = format!("{e} {e:?} {e:#?}");
            assert!(text.contains(missing), "{conn}: {text}");
            assert!(!text.contains(KEY), "{text}");
            assert!(!text.contains(SIG), "{text}");
        }
    }
}

// ---------------------------------------------------------------------------
// A store on Azure with options, from a connection string
// ---------------------------------------------------------------------------

/// `Store::builder_from_connection_string` gives the whole `StoreBuilder`:
/// the table prefix and lease options take effect (checked against Azurite
/// in `tests/it/azure_backend.rs`).
#[cfg(feature = "azure")]
#[test]
fn a_store_from_a_connection_string_takes_a_table_prefix_and_lease_options() {
    let conn = format!(
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={KEY};\
         BlobEndpoint=http://127.0.0.1:1/devstoreaccount1;TableEndpoint=http://127.0.0.1:1/devstoreaccount1"
    );
    let store = Store::builder_from_connection_string(&conn)
        .unwrap()
        .table_prefix("shop")
        .unwrap()
        .lease_options(LeaseOptions::new().with_duration(Duration::from_secs(20)))
        .build()
        .unwrap();
    assert_eq!(store.table_prefix(), "shop");
    assert_eq!(
        store.table::<Event>().name().unwrap().as_str(),
        "shopEvents"
    );
    assert_eq!(store.leases().lease_duration(), LeaseDuration::Seconds(20));
    // Partition locks follow the store's lease options unless given their own.
    assert_eq!(store.locks().lease_duration(), LeaseDuration::Seconds(20));
    let backend = format!("{:?}", store.backend());
    assert!(backend.contains("AzureBackend"), "{backend}");
    assert!(!backend.contains(KEY), "{backend}");

    // Each step's errors are typed and name the culprit.
    let e = Store::builder_from_connection_string("AccountName=myacct").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e:?}");
    assert!(e.to_string().contains("AccountKey"), "{e}");
    let e = Store::builder_from_connection_string(&conn)
        .unwrap()
        .table_prefix("no-dashes")
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e:?}");
    assert!(e.to_string().contains("table prefix"), "{e}");
    let e = Store::builder_from_connection_string(&conn)
        .unwrap()
        .lease_options(LeaseOptions::new().with_duration(Duration::from_secs(5)))
        .build()
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e:?}");
}
