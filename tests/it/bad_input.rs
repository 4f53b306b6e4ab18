//! The bad-input catalogue: every input the service would reject is refused
//! with the documented typed error naming the culprit, before any request is
//! sent, and leaves stored data as it was.
//!
//! "No request" is pinned with [`CountingBackend`]: its work count (requests
//! other than one-time table/container creation) must not move. Checks inside
//! a backend (raw `execute` with a property bag) are pinned on Azure by a
//! backend whose endpoint does not listen: an `Invalid` error (rather than a
//! transient connection failure) proves nothing went on the wire.
//!
//! The catalogue runs on the memory backend and, through
//! `scripts/with-azurite.sh`, on Azurite (required when `CI` is set).

use crate::support;
use leasehold::backend::WriteOptions;

use std::sync::Arc;
use std::time::Duration;

use leasehold::backend::memory::MemoryBackend;
use leasehold::backend::{Backend, LeaseDuration, TableOp};
use leasehold::entity::{EntityData, Properties, Value};
use leasehold::lease::LeaseOptions;
use leasehold::testing::{CountingBackend, RequestCounter};
use leasehold::{Entity, Error, ErrorKind, PartitionKey, RowKey, Store, TableName};

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "BadInput")]
struct Item {
    #[entity(partition_key)]
    pk: String,
    #[entity(row_key)]
    rk: String,
    n: i64,
    data: Vec<u8>,
}

fn item(pk: &str, rk: &str) -> Item {
    Item {
        pk: pk.into(),
        rk: rk.into(),
        n: 1,
        data: Vec::new(),
    }
}

/// Seventeen 64 KiB binaries: each property fits, the entity (over 1 MiB)
/// does not.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "BadInputWide")]
struct Wide {
    #[entity(partition_key)]
    pk: String,
    #[entity(row_key)]
    rk: String,
    b00: Vec<u8>,
    b01: Vec<u8>,
    b02: Vec<u8>,
    b03: Vec<u8>,
    b04: Vec<u8>,
    b05: Vec<u8>,
    b06: Vec<u8>,
    b07: Vec<u8>,
    b08: Vec<u8>,
    b09: Vec<u8>,
    b10: Vec<u8>,
    b11: Vec<u8>,
    b12: Vec<u8>,
    b13: Vec<u8>,
    b14: Vec<u8>,
    b15: Vec<u8>,
    b16: Vec<u8>,
}

fn wide(pk: &str, rk: &str, bytes: usize) -> Wide {
    let b = || vec![7u8; bytes];
    Wide {
        pk: pk.into(),
        rk: rk.into(),
        b00: b(),
        b01: b(),
        b02: b(),
        b03: b(),
        b04: b(),
        b05: b(),
        b06: b(),
        b07: b(),
        b08: b(),
        b09: b(),
        b10: b(),
        b11: b(),
        b12: b(),
        b13: b(),
        b14: b(),
        b15: b(),
        b16: b(),
    }
}

/// Every character the service forbids in keys.
fn forbidden_chars() -> Vec<char> {
    let mut chars = vec!['/', '\\', '#', '?'];
    chars.extend('\u{0}'..='\u{1f}');
    chars.extend('\u{7f}'..='\u{9f}');
    chars
}

/// The `what` and `why` of an [`Error::Invalid`]; panics on anything else.
#[track_caller]
fn invalid(result: Result<impl std::fmt::Debug, Error>) -> (String, String) {
    match result {
        Err(Error::Invalid { what, why }) => (what, why),
        other => panic!("expected Error::Invalid, got {other:?}"),
    }
}

/// Asserts that `result` is `Invalid`, naming `culprit` in `what` and giving
/// a reason containing `rule`.
#[track_caller]
fn assert_invalid(result: Result<impl std::fmt::Debug, Error>, culprit: &str, rule: &str) {
    let (what, why) = invalid(result);
    assert!(
        what.contains(culprit),
        "`what` should name {culprit:?}: what={what:?} why={why:?}"
    );
    assert!(
        why.contains(rule),
        "`why` should say {rule:?}: what={what:?} why={why:?}"
    );
}

/// A counter that must not move while `f` runs.
struct NoWork<'a> {
    counter: &'a RequestCounter,
    before: u64,
    label: String,
}

impl<'a> NoWork<'a> {
    fn start(counter: &'a RequestCounter, label: impl Into<String>) -> Self {
        NoWork {
            counter,
            before: counter.work(),
            label: label.into(),
        }
    }

    #[track_caller]
    fn check(self) {
        assert_eq!(
            self.counter.work(),
            self.before,
            "{}: a request was sent ({:?})",
            self.label,
            self.counter.snapshot()
        );
    }
}

/// Everything stored in the table of `Item`, as (pk, rk, n).
async fn contents(store: &Store) -> Vec<(String, String, i64)> {
    let mut all: Vec<_> = store
        .table::<Item>()
        .query()
        .all()
        .await
        .expect("query")
        .into_iter()
        .map(|v| (v.pk.clone(), v.rk.clone(), v.n))
        .collect();
    all.sort();
    all
}

/// The whole catalogue on one store. `counter` counts the store's requests.
async fn catalogue(store: Store, counter: RequestCounter) {
    let items = store.table::<Item>();
    // Seed one entity (and create the table) so "changes no stored data"
    // has something to compare with.
    items.insert(item("p", "seed")).await.expect("seed");
    let seeded = contents(&store).await;
    assert_eq!(seeded, vec![("p".into(), "seed".into(), 1)]);

    keys_with_forbidden_characters(&store, &counter).await;
    keys_over_one_kib(&store, &counter).await;
    oversized_properties_entities_and_batches(&store, &counter).await;
    raw_property_bags(&store, &counter).await;
    reserved_property_names_in_dynamic_entities(&store, &counter).await;
    filters_with_bad_property_names(&store, &counter).await;
    wrong_types_on_read(&store).await;
    another_partition_inside_a_lock(&store, &counter).await;

    assert_eq!(contents(&store).await, seeded, "stored data changed");
}

async fn keys_with_forbidden_characters(store: &Store, counter: &RequestCounter) {
    let items = store.table::<Item>();
    for c in forbidden_chars() {
        let bad = format!("a{c}b");
        let shown = format!("{bad:?}");
        let rule = "forbidden character";
        let no_work = NoWork::start(counter, format!("key {shown}"));

        // The validated newtypes.
        assert_invalid(PartitionKey::new(bad.as_str()), "partition key", rule);
        assert_invalid(PartitionKey::new(bad.as_str()), &shown, rule);
        assert_invalid(RowKey::new(bad.as_str()), "row key", rule);
        assert_invalid(RowKey::new(bad.as_str()), &shown, rule);

        // Every typed operation that takes a key, in either position.
        for (pk, rk, label) in [
            (bad.as_str(), "r", "partition key"),
            ("p", bad.as_str(), "row key"),
        ] {
            assert_invalid(items.get(pk, rk).await, label, rule);
            assert_invalid(items.get(pk, rk).await, &shown, rule);
            assert_invalid(items.insert(item(pk, rk)).await, label, rule);
            assert_invalid(items.insert(item(pk, rk)).await, &shown, rule);
            assert_invalid(items.upsert(item(pk, rk)).await, label, rule);
            assert_invalid(items.upsert_merge(item(pk, rk)).await, label, rule);
            assert_invalid(
                items.replace_unconditionally(item(pk, rk)).await,
                label,
                rule,
            );
            assert_invalid(items.delete_unconditionally(pk, rk).await, label, rule);
            assert_invalid(items.update_with(pk, rk, |i| i.n += 1).await, label, rule);
            let batch = items.batch().insert(item(pk, rk)).commit().await;
            match batch {
                Err(Error::Batch { index: 0, source }) => {
                    assert_invalid(Err::<(), _>(*source), label, rule)
                }
                other => assert_invalid(other, label, rule),
            }
        }
        // Partition locks are named after the partition key.
        assert_invalid(store.try_lock(bad.as_str()).await, "partition key", rule);
        assert_invalid(
            store.commit_outcome(bad.as_str(), "t.Accounts").await,
            "partition key",
            rule,
        );
        no_work.check();
    }
}

async fn keys_over_one_kib(store: &Store, counter: &RequestCounter) {
    let items = store.table::<Item>();
    // 513 UTF-16 units (1026 bytes); 257 astral characters are 514 units
    // (1028 bytes) although only 257 characters (and 1028 UTF-8 bytes).
    let ascii = "k".repeat(513);
    let astral = "😀".repeat(257);
    for long in [&ascii, &astral] {
        let no_work = NoWork::start(counter, "long key");
        assert_invalid(PartitionKey::new(long.as_str()), "partition key", "1024");
        assert_invalid(RowKey::new(long.as_str()), "row key", "1024");
        assert_invalid(items.get(long.as_str(), "r").await, "partition key", "1024");
        assert_invalid(items.get("p", long.as_str()).await, "row key", "1024");
        assert_invalid(items.insert(item("p", long)).await, "row key", "1024");
        assert_invalid(items.insert(item(long, "r")).await, "partition key", "1024");
        assert_invalid(store.try_lock(long.as_str()).await, "partition key", "1024");
        // The culprit is named, shortened.
        let (what, _) = invalid(RowKey::new(long.as_str()));
        assert!(what.len() < 400, "{what}");
        assert!(what.contains("chars"), "{what}");
        no_work.check();
    }
    // The boundary: 512 UTF-16 units are accepted by the service too. (The
    // row is deleted again so the table's contents stay as seeded.)
    for ok in ["k".repeat(512), "é".repeat(512), "😀".repeat(256)] {
        let v = items.insert(item("p", &ok)).await.expect("a 1 KiB key");
        assert_eq!(items.get("p", ok.as_str()).await.unwrap().unwrap().rk, ok);
        items.delete(&v).await.expect("delete");
    }
}

async fn oversized_properties_entities_and_batches(store: &Store, counter: &RequestCounter) {
    let items = store.table::<Item>();
    let no_work = NoWork::start(counter, "sizes");

    // A property over 64 KiB.
    let mut big = item("p", "big");
    big.data = vec![0; 64 * 1024 + 1];
    assert_invalid(items.insert(big.clone()).await, "property `data`", "65536");
    assert_invalid(items.upsert(big.clone()).await, "property `data`", "65536");
    let (what, _) = invalid(items.insert(big.clone()).await);
    assert!(what.contains("\"big\""), "the row is named: {what}");

    // An entity over 1 MiB, each property within its limit.
    let wides = store.table::<Wide>();
    let w = wide("p", "wide", 64 * 1024);
    assert_invalid(wides.insert(w.clone()).await, "\"wide\"", "1048576");
    assert_invalid(wides.upsert(w).await, "BadInputWide", "1048576");

    // Batches: 101 operations; two partitions; one row twice; over 4 MiB;
    // an operation that cannot be encoded (named by its index).
    let mut batch = items.batch();
    for i in 0..101 {
        batch = batch.insert(item("p", &format!("r{i}")));
    }
    assert_invalid(batch.commit().await, "batch on table", "101 operations");
    let two_partitions = items
        .batch()
        .insert(item("p", "a"))
        .insert(item("q", "b"))
        .commit()
        .await;
    assert_invalid(two_partitions, "batch on table", "one partition");
    let twice = items
        .batch()
        .insert(item("p", "a"))
        .upsert(item("p", "a"))
        .commit()
        .await;
    assert_invalid(twice, "batch on table", "a second time");
    let mut heavy = wides.batch();
    for i in 0..5 {
        heavy = heavy.insert(wide("p", &format!("w{i}"), 56 * 1024));
    }
    assert_invalid(heavy.commit().await, "batch on table", "4194304");
    let bad_op = items
        .batch()
        .insert(item("p", "a"))
        .insert(big)
        .commit()
        .await;
    match bad_op {
        Err(Error::Batch { index: 1, source }) => {
            assert_invalid(Err::<(), _>(*source), "property `data`", "65536")
        }
        other => panic!("expected Error::Batch at index 1, got {other:?}"),
    }
    no_work.check();
}

fn data(pk: &str, rk: &str, properties: Properties) -> EntityData {
    EntityData {
        partition_key: PartitionKey::new(pk).unwrap(),
        row_key: RowKey::new(rk).unwrap(),
        properties,
    }
}

/// Property bags that break a rule, sent straight to the backend. The backend
/// checks them itself; the counting wrapper sees the call, so what is pinned
/// here is the error and the unchanged table (see
/// `raw_checks_happen_before_the_wire` for "nothing was sent").
async fn raw_property_bags(store: &Store, _counter: &RequestCounter) {
    let backend = store.backend();
    let table = store.table::<Item>().name().unwrap().clone();
    for (props, culprit, rule) in bad_bags() {
        for op in [
            TableOp::Insert(data("p", "raw", props.clone())),
            TableOp::Replace(
                data("p", "raw", props.clone()),
                leasehold::backend::Precondition::Upsert,
            ),
        ] {
            assert_invalid(
                backend
                    .execute(&table, op.clone(), &WriteOptions::new())
                    .await,
                &culprit,
                rule,
            );
            let batch = backend.batch(&table, std::slice::from_ref(&op)).await;
            let (what, why) = match batch {
                Err(Error::Batch { index: 0, source }) => invalid(Err::<(), _>(*source)),
                other => invalid(other),
            };
            assert!(
                what.contains(&culprit) && why.contains(rule),
                "{what}: {why}"
            );
        }
    }
}

/// A dynamic entity bringing a property whose name leasehold reserves
/// (`_lh…`) is refused before any request, naming the property, by every
/// write that takes it; only `_lhWriteLog` was refused before. (A derived
/// type is refused at compile time: `tests/ui/field_named_reserved_prefix.rs`.)
async fn reserved_property_names_in_dynamic_entities(store: &Store, counter: &RequestCounter) {
    let rows = store.dynamic_table("BadInput");
    for name in ["_lhGone", "_lhTxn", "_lhWriteLog", "_lhAnythingElse"] {
        let mut row = leasehold::DynamicEntity::new(
            PartitionKey::new("p").unwrap(),
            RowKey::new("reserved").unwrap(),
        );
        row.properties.insert("n", Value::Int64(1));
        row.properties.insert(name, Value::Boolean(true));
        let no_work = NoWork::start(counter, format!("property {name}"));
        let rule = "leasehold reserves";
        let culprit = format!("property `{name}`");
        assert_invalid(rows.insert(row.clone()).await, &culprit, rule);
        assert_invalid(rows.upsert(row.clone()).await, &culprit, rule);
        assert_invalid(rows.upsert_merge(row.clone()).await, &culprit, rule);
        let batch = rows.batch().insert(row.clone()).commit().await;
        let (what, why) = match batch {
            Err(Error::Batch { index: 0, source }) => invalid(Err::<(), _>(*source)),
            other => invalid(other),
        };
        assert!(
            what.contains(&culprit) && why.contains(rule),
            "{what}: {why}"
        );
        no_work.check();
    }
}

/// (bag, culprit named in `what`, rule named in `why`).
fn bad_bags() -> Vec<(Properties, String, &'static str)> {
    let too_many: Properties = (0..253)
        .map(|i| (format!("p{i}"), Value::Int32(i)))
        .collect();
    let mut long_string = Properties::new();
    long_string.insert("s", Value::String("x".repeat(32 * 1024 + 1)));
    let huge: Properties = (0..17)
        .map(|i| (format!("b{i}"), Value::Binary(vec![1; 64 * 1024])))
        .collect();
    let mut reserved = Properties::new();
    reserved.insert("Timestamp", Value::Int32(1));
    let mut bad_name = Properties::new();
    bad_name.insert("a-b", Value::Int32(1));
    vec![
        (too_many, "(\"p\", \"raw\")".into(), "253 properties"),
        (long_string, "property `s`".into(), "65536"),
        (huge, "(\"p\", \"raw\")".into(), "1048576"),
        (reserved, "\"Timestamp\"".into(), "reserved"),
        (bad_name, "\"a-b\"".into(), "may contain only"),
    ]
}

/// A filter property name is written into the OData unquoted: one that is
/// not a valid name is refused before sending, by the typed query and by the
/// backend alike.
async fn filters_with_bad_property_names(store: &Store, counter: &RequestCounter) {
    use leasehold::backend::QuerySpec;
    use leasehold::query::{CmpOp, Filter, TypedFilter};
    let items = store.table::<Item>();
    let table = items.name().unwrap().clone();
    let bad_names = ["n eq 1) or (RowKey", "a b", "n'", "x@odata.type"];
    let no_work = NoWork::start(counter, "typed filter");
    for bad in bad_names {
        let f = Filter::compare(bad, CmpOp::Ne, Value::Int64(0));
        let typed = items.query().filter(TypedFilter::raw(f)).all().await;
        assert_invalid(typed, &format!("filter property {bad:?}"), "");
    }
    no_work.check();
    // The backends check too (the counting wrapper sees these calls).
    for bad in bad_names {
        let spec = QuerySpec {
            filter: Some(Filter::compare(bad, CmpOp::Ne, Value::Int64(0))),
            ..QuerySpec::default()
        };
        let raw = store.backend().query(&table, &spec).await;
        assert_invalid(raw, &format!("filter property {bad:?}"), "");
    }
}

/// A property of the wrong type, written by another program, read through a
/// typed table: `Error::Decode` naming table, property, expected and found.
async fn wrong_types_on_read(store: &Store) {
    let backend = store.backend();
    let items = store.table::<Item>();
    let table = items.name().unwrap().clone();
    let mut props = Properties::new();
    props.insert("n", Value::String("twelve".into()));
    props.insert("data", Value::Binary(vec![1]));
    backend
        .execute(
            &table,
            TableOp::Insert(data("p", "typed", props)),
            &WriteOptions::new(),
        )
        .await
        .expect("raw insert");
    match items.get("p", "typed").await {
        Err(Error::Decode {
            table: t,
            property,
            expected,
            found,
            ..
        }) => {
            assert!(t.contains("BadInput"), "{t}");
            assert_eq!(property, "n");
            assert_eq!(expected, "Edm.Int64");
            assert!(found.contains("Edm.String"), "{found}");
            assert!(found.contains("twelve"), "{found}");
        }
        other => panic!("expected Error::Decode, got {other:?}"),
    }
    // update_with reads the same way, and writes nothing.
    let e = items.update_with("p", "typed", |i| i.n += 1).await;
    assert_eq!(e.unwrap_err().kind(), ErrorKind::Decode);
    // Leave the table as seeded.
    items
        .delete_unconditionally("p", "typed")
        .await
        .expect("cleanup");
}

/// A unit of work locks one partition: staging an entity of another one is
/// `Invalid` naming the key, and nothing is sent.
async fn another_partition_inside_a_lock(store: &Store, counter: &RequestCounter) {
    let mut unit = store.lock("p").await.expect("lock");
    let no_work = NoWork::start(counter, "unit");
    assert_invalid(unit.insert(&item("q", "x")), "\"q\"", "");
    assert_invalid(unit.upsert(&item("q", "x")), "\"q\"", "");
    assert_invalid(unit.upsert_merge(&item("q", "x")), "\"q\"", "");
    // Bad input of other kinds, inside a lock too.
    let mut big = item("p", "big");
    big.data = vec![0; 64 * 1024 + 1];
    assert_invalid(unit.insert(&big), "property `data`", "65536");
    assert_invalid(unit.insert(&item("p", "a/b")), "row key", "forbidden");
    assert_eq!(unit.staged(), 0);
    no_work.check();
    unit.abandon().await.expect("abandon");
}

// ---------------------------------------------------------------------------
// Memory backend
// ---------------------------------------------------------------------------

fn counted_memory() -> (Store, RequestCounter) {
    let counting = CountingBackend::new(MemoryBackend::new());
    let counter = counting.counter();
    (Store::new(counting), counter)
}

#[tokio::test]
async fn catalogue_on_memory() {
    let (store, counter) = counted_memory();
    catalogue(store, counter).await;
}

#[tokio::test]
async fn bad_table_names_name_the_table() {
    for bad in [
        "",
        "ab",
        "1abc",
        "a-bc",
        "a_bc",
        "abc def",
        "Täble",
        "tables",
        "TABLES",
        &"a".repeat(64),
    ] {
        let (what, why) = invalid(TableName::new(bad));
        assert!(what.contains(&format!("{bad:?}")), "{what}");
        assert!(!why.is_empty());
    }
    for ok in ["abc", "A12", &"a".repeat(63)] {
        TableName::new(ok).expect(ok);
    }
    // A prefix that is not letters and digits is refused at once; one that
    // makes a name too long is refused at the table's first use, before
    // anything is sent.
    for bad in ["", "1x", "a-b", &"a".repeat(61)] {
        let r = Store::builder(MemoryBackend::new()).table_prefix(bad);
        assert_invalid(r.map(|_| ()), "table prefix", "ASCII letters");
    }
    let counting = CountingBackend::new(MemoryBackend::new());
    let counter = counting.counter();
    let store = Store::builder(counting)
        .table_prefix("a".repeat(60))
        .unwrap()
        .build()
        .unwrap();
    let items = store.table::<Item>();
    assert_invalid(items.name().map(|_| ()), "table name", "63");
    assert_invalid(items.get("p", "r").await, "table name", "63");
    assert_invalid(items.insert(item("p", "r")).await, "table name", "63");
    let mut unit = store.lock("p").await.unwrap();
    let before = counter.work();
    assert_invalid(unit.insert(&item("p", "r")), "table name", "63");
    assert_eq!(counter.work(), before);
    unit.abandon().await.unwrap();
    assert_eq!(counter.get(leasehold::backend::Op::CreateTable), 0);
}

#[tokio::test]
async fn bad_lease_durations_name_the_duration() {
    for secs in [0u64, 1, 14, 61, 300, 3600] {
        let d = Duration::from_secs(secs);
        assert_invalid(LeaseDuration::timed(d), "lease duration", "15 to 60");
        let (what, _) = invalid(LeaseDuration::timed(d));
        assert!(what.contains(&format!("{d:?}")), "{what}");
    }
    for d in [
        Duration::from_millis(15_500),
        Duration::from_nanos(30_000_000_001),
    ] {
        assert_invalid(LeaseDuration::timed(d), "lease duration", "whole seconds");
    }
    for secs in [14u8, 61, 0, 255] {
        assert_invalid(
            LeaseDuration::Seconds(secs).validate(),
            "lease duration",
            "15 to 60",
        );
    }
    for secs in [15, 60] {
        LeaseDuration::timed(Duration::from_secs(secs)).unwrap();
    }

    // Through options: the store refuses to build, sending nothing.
    let counting = CountingBackend::new(MemoryBackend::new());
    let counter = counting.counter();
    let backend: Arc<dyn Backend> = Arc::new(counting);
    for d in [Duration::from_secs(10), Duration::from_secs(90)] {
        let options = LeaseOptions::new().with_duration(d);
        let r = Store::builder_shared(backend.clone())
            .lease_options(options.clone())
            .build();
        assert_invalid(r.map(|_| ()), "lease duration", "15 to 60");
        let r = Store::builder_shared(backend.clone())
            .lock_lease_options(options.clone())
            .build();
        assert_invalid(r.map(|_| ()), "lease duration", "15 to 60");
        let r = leasehold::lease::LeaseManager::new(backend.clone(), options);
        assert_invalid(r.map(|_| ()), "lease duration", "15 to 60");
    }
    assert_eq!(counter.total(), 0);
}

// ---------------------------------------------------------------------------
// Connection strings (no Azurite needed)
// ---------------------------------------------------------------------------

const FAKE_KEY: &str = "RmFrZUFjY291bnRLZXlGb3JCYWRJbnB1dFRlc3RzMDEyMzQ1Njc4OQ==";
const FAKE_SIG: &str = "FakeSignatureForBadInputTests0123456789xyz";

#[test]
fn malformed_connection_strings_name_the_part_and_hide_secrets() {
    let bad_key = format!("{}*!{}", &FAKE_KEY[..20], &FAKE_KEY[20..]);
    let cases: Vec<(String, &str)> = vec![
        (
            format!("DefaultEndpointsProtocol=https;AccountKey={FAKE_KEY}"),
            "AccountName",
        ),
        (
            format!("AccountName=acct1;AccountKey={bad_key}"),
            "AccountKey",
        ),
        (
            format!("DefaultEndpointsProtocol=gopher;AccountName=acct1;AccountKey={FAKE_KEY}"),
            "DefaultEndpointsProtocol",
        ),
        ("not a connection string".into(), "segment 1"),
        (FAKE_KEY.to_string(), "segment 1"),
        (format!("AccountName=acct1;{FAKE_SIG}"), "segment 2"),
        (format!("AccountName=acct1;Acc{FAKE_KEY}=x"), "segment 2"),
        ("".into(), "AccountName"),
        (
            format!("AccountName=acct1;SharedAccessSignature=sv=1&sp=r&x={FAKE_SIG}"),
            "SharedAccessSignature",
        ),
        (
            format!("AccountName=ACCT;AccountKey={FAKE_KEY}"),
            "AccountName",
        ),
    ];
    for (s, part) in cases {
        let e = Store::connect(&s).unwrap_err();
        let text = format!("{e} | {e:?} | {e:#?}");
        assert_eq!(e.kind(), ErrorKind::Invalid, "{s}: {text}");
        assert!(text.contains(part), "{s}: should name {part}: {text}");
        for secret in [
            FAKE_KEY,
            &FAKE_KEY[..16],
            &bad_key,
            FAKE_SIG,
            &FAKE_SIG[..16],
        ] {
            assert!(!text.contains(secret), "secret leaked for {s}: {text}");
        }
    }
}

/// Checks inside the Azure backend (property bags, batch limits, lease
/// durations) happen before anything is sent: against an endpoint where
/// nothing listens they are `Invalid`, never a connection failure.
#[tokio::test]
async fn raw_checks_happen_before_the_wire() {
    let backend = leasehold::backend::azure::AzureBackend::builder()
        .connection_string(&format!(
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={FAKE_KEY};\
             TableEndpoint=http://127.0.0.1:1/devstoreaccount1;\
             BlobEndpoint=http://127.0.0.1:1/devstoreaccount1"
        ))
        .unwrap()
        .transport_retry(leasehold::backend::azure::TransportRetry::none())
        .build()
        .unwrap();
    use leasehold::backend::{BlobBackend, LeaseId, TableBackend};
    let table = TableName::new("BadInput").unwrap();
    // The endpoint really is dead: a valid request fails in the transport.
    let e = backend
        .execute(
            &table,
            TableOp::Insert(data("p", "r", Properties::new())),
            &WriteOptions::new(),
        )
        .await
        .unwrap_err();
    assert!(e.is_transient(), "{e:?}");
    for (props, culprit, rule) in bad_bags() {
        let op = TableOp::Insert(data("p", "raw", props));
        assert_invalid(
            backend
                .execute(&table, op.clone(), &WriteOptions::new())
                .await,
            &culprit,
            rule,
        );
    }
    let ops: Vec<TableOp> = (0..101)
        .map(|i| TableOp::Insert(data("p", &format!("r{i}"), Properties::new())))
        .collect();
    assert_invalid(
        backend.batch(&table, &ops).await,
        "batch on table",
        "101 operations",
    );
    let container = leasehold::key::ContainerName::new("badinput").unwrap();
    let blob = leasehold::key::BlobName::new("b").unwrap();
    for d in [LeaseDuration::Seconds(14), LeaseDuration::Seconds(61)] {
        let r = backend
            .lease(
                &container,
                &blob,
                leasehold::backend::LeaseAction::Acquire {
                    duration: d,
                    proposed: LeaseId::new_random(),
                },
            )
            .await;
        assert_invalid(r, "lease duration", "15 to 60");
    }
}

// ---------------------------------------------------------------------------
// Azurite
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalogue_on_azurite() {
    let Some(conn) = support::azurite::azurite_connection_string() else {
        return;
    };
    let backend = leasehold::backend::azure::AzureBackend::from_connection_string(&conn)
        .expect("the Azurite connection string parses");
    let counting = CountingBackend::new(backend);
    let counter = counting.counter();
    let names = support::azurite::unique_names("badinput");
    let store = Store::builder(counting)
        .table_prefix(names.prefix())
        .unwrap()
        .build()
        .unwrap();
    catalogue(store, counter).await;
}
