//! Where Azurite differs from Azure, and the filter length limit that keeps
//! queries within what both accept. The README's "Azurite differences"
//! section lists these checks.
//!
//! Each check runs on the memory backend (which follows Azure) and on
//! Azurite, and pins what each does: the same where leasehold works around
//! the difference, and each backend's own behaviour where it cannot.

use leasehold::backend::WriteOptions;
use std::sync::Arc;

use leasehold::backend::{Backend, Precondition, TableOp};
use leasehold::entity::{EntityData, Properties, Value};
use leasehold::key::{PartitionKey, RowKey, TableName};
use leasehold::query::{Filter, TypedFilter};
use leasehold::{Entity, ErrorKind, Store};

use leasehold::testing::conformance::Ctx;

const MAX_FILTER_LEN: usize = Filter::MAX_LEN;

/// The backend a check runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The memory backend, which follows Azure.
    Memory,
    /// Azurite.
    Azurite,
}

/// Expands to one test per emulator check, in a module `emulator`, each on
/// a fresh context made by `$make_ctx` (an `Option<Ctx>`) for `$target`.
#[macro_export]
macro_rules! emulator_suite {
    ($make_ctx:expr, $target:expr) => {
        $crate::emulator_suite!(@tests $make_ctx, $target;
            negative_zero_reads_back_as_zero_only_on_azurite,
            exponent_sized_doubles_in_filters_select_the_right_rows,
            long_non_ascii_strings_round_trip_through_every_write,
            keys_are_limited_to_1_kib_as_utf16,
            entity_size_counts_stored_data_not_json_text,
            over_long_filters_are_invalid_and_name_the_filter,
            filters_at_the_length_limit_run,
            key_ranges_over_the_longest_keys_run,
        );
    };
    (@tests $make_ctx:expr, $target:expr; $($check:ident),* $(,)?) => {
        mod emulator {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    let ctx: Option<leasehold::testing::conformance::Ctx> = $make_ctx;
                    let Some(ctx) = ctx else { return };
                    $crate::emulator::$check(&ctx, $target).await;
                }
            )*
        }
    };
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Doubles")]
pub struct Measure {
    #[entity(partition_key)]
    pub pk: String,
    #[entity(row_key)]
    pub rk: String,
    pub d: f64,
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Texts")]
pub struct Text {
    #[entity(partition_key)]
    pub pk: String,
    #[entity(row_key)]
    pub rk: String,
    pub a: String,
    pub b: String,
    pub c: String,
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Blobs")]
pub struct Blobby {
    #[entity(partition_key)]
    pub pk: String,
    #[entity(row_key)]
    pub rk: String,
    pub blob: Vec<u8>,
}

/// `-0.0` keeps its sign on memory (as Azure is expected to: the JSON
/// carries `-0.0`); Azurite stores a JavaScript number and answers `0`. Both
/// match it with `d eq 0.0`, since `-0.0 == 0.0`.
pub async fn negative_zero_reads_back_as_zero_only_on_azurite(ctx: &Ctx, target: Target) {
    let t = ctx.store.table::<Measure>();
    t.insert(Measure {
        pk: "p".into(),
        rk: "negzero".into(),
        d: -0.0,
    })
    .await
    .expect("insert");
    let read = t.get("p", "negzero").await.expect("get").expect("present");
    assert_eq!(read.d, 0.0);
    match target {
        Target::Memory => assert!(read.d.is_sign_negative(), "memory keeps the sign"),
        Target::Azurite => assert!(read.d.is_sign_positive(), "Azurite drops the sign"),
    }
    let c = Measure::columns();
    let found = t.query().filter(c.d.eq(0.0)).all().await.expect("query");
    assert_eq!(found.len(), 1);
}

/// Doubles in filters are written as plain decimals, never with an
/// exponent, which Azurite reads as a property name (so `d gt 2.5E3`
/// matched the wrong rows there).
pub async fn exponent_sized_doubles_in_filters_select_the_right_rows(ctx: &Ctx, _: Target) {
    let t = ctx.store.table::<Measure>();
    let rows = [
        ("neg_tiny", -1e-300),
        ("zero", 0.0),
        ("tiny", 1e-300),
        ("small", 2.5e-3),
        ("k", 2.5e3),
        ("k_and_a_half", 2500.5),
        ("huge", 1e300),
    ];
    let mut batch = t.batch();
    for (rk, d) in rows {
        batch = batch.insert(Measure {
            pk: "p".into(),
            rk: rk.into(),
            d,
        });
    }
    batch.commit().await.expect("batch");
    let c = Measure::columns();
    let cases: Vec<(&str, TypedFilter<Measure>, Vec<&str>)> = vec![
        ("eq 1E-300", c.d.eq(1e-300), vec!["tiny"]),
        ("lt 1E-300", c.d.lt(1e-300), vec!["neg_tiny", "zero"]),
        ("gt 0", c.d.gt(0.0) & c.d.lt(2.5e-3), vec!["tiny"]),
        ("eq 2.5E-3", c.d.eq(2.5e-3), vec!["small"]),
        ("ge 2.5E3", c.d.ge(2.5e3), vec!["huge", "k", "k_and_a_half"]),
        ("gt 2.5E3", c.d.gt(2.5e3), vec!["huge", "k_and_a_half"]),
        ("eq 1E300", c.d.eq(1e300), vec!["huge"]),
        ("lt -1E-300", c.d.lt(-1e-300), vec![]),
        ("le -1E-300", c.d.le(-1e-300), vec!["neg_tiny"]),
    ];
    for (name, filter, expected) in cases {
        let mut found: Vec<String> = t
            .query()
            .filter(filter)
            .all()
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .into_iter()
            .map(|v| v.entity().rk.clone())
            .collect();
        found.sort();
        assert_eq!(found, expected, "{name}");
    }
}

/// Long non-ASCII strings round-trip through every kind of write, single
/// or batched. Azurite decodes a single-entity request body chunk by chunk
/// (64 KiB each), so a multi-byte character split between two chunks came
/// back as U+FFFD, or turned a string at the 64 KiB limit into one over it
/// (`400 PropertyValueTooLarge`); it reads batch bodies whole. leasehold
/// sends single-entity bodies with non-ASCII characters escaped
/// (`\uXXXX`), which read the same however the body is cut.
pub async fn long_non_ascii_strings_round_trip_through_every_write(ctx: &Ctx, _: Target) {
    let t = ctx.store.table::<Text>();
    // At the 64 KiB limit (32 768 UTF-16 units): emoji (four UTF-8 bytes)
    // after 0 to 3 ASCII characters, so that wherever a chunk boundary
    // falls, some shift splits a character there; and three-byte CJK.
    let mut texts: Vec<(String, String)> = (0..=3)
        .map(|shift| {
            let emoji = "😀".repeat((32_768 - shift) / 2);
            (
                format!("emoji{shift}"),
                format!("{}{emoji}", "x".repeat(shift)),
            )
        })
        .collect();
    texts.push(("cjk".into(), "語".repeat(32_768)));
    let reversed = |s: &str| -> String { s.chars().rev().collect() };
    for (name, text) in &texts {
        assert!(text.encode_utf16().count() <= 32_768, "{name}");
        let entity = |rk: &str, a: &str| Text {
            pk: "p".into(),
            rk: rk.into(),
            a: a.into(),
            b: "b".into(),
            c: "ç".into(),
        };
        let read = |rk: String| {
            let t = t.clone();
            async move {
                t.get("p", rk.as_str())
                    .await
                    .expect("get")
                    .expect("present")
            }
        };

        // insert, then replace with the text shifted the other way.
        let rk = format!("{name}-single");
        t.insert(entity(&rk, text))
            .await
            .unwrap_or_else(|e| panic!("insert {name}: {e}"));
        let mut v = read(rk.clone()).await;
        assert_eq!(v.entity(), &entity(&rk, text), "insert {name}");
        v.a = reversed(text);
        t.replace(&v)
            .await
            .unwrap_or_else(|e| panic!("replace {name}: {e}"));
        let mut v = read(rk.clone()).await;
        assert_eq!(v.a, reversed(text), "replace {name}");
        // merge, with the text in a second property.
        v.c = text.clone();
        t.merge(&v)
            .await
            .unwrap_or_else(|e| panic!("merge {name}: {e}"));
        let v = read(rk.clone()).await;
        assert_eq!((&v.a, &v.c), (&reversed(text), text), "merge {name}");

        // upsert (a replace of a new row), then upsert_merge.
        let rk = format!("{name}-upsert");
        t.upsert(entity(&rk, text))
            .await
            .unwrap_or_else(|e| panic!("upsert {name}: {e}"));
        assert_eq!(read(rk.clone()).await.entity(), &entity(&rk, text));
        let mut merged = entity(&rk, text);
        merged.b = reversed(text);
        t.upsert_merge(merged.clone())
            .await
            .unwrap_or_else(|e| panic!("upsert_merge {name}: {e}"));
        assert_eq!(
            read(rk.clone()).await.entity(),
            &merged,
            "upsert_merge {name}"
        );

        // A batch of one insert.
        let rk = format!("{name}-batched");
        t.batch()
            .insert(entity(&rk, text))
            .commit()
            .await
            .unwrap_or_else(|e| panic!("batch {name}: {e}"));
        assert_eq!(read(rk.clone()).await.entity(), &entity(&rk, text));
    }
}

/// Keys are limited to 1 KiB counted as UTF-16 (512 code units: 512 ASCII
/// characters, or 256 characters outside the BMP), as Azure documents and
/// Azurite enforces (it counts JavaScript string length). Longer keys are
/// refused before sending.
pub async fn keys_are_limited_to_1_kib_as_utf16(ctx: &Ctx, _: Target) {
    let t = ctx.store.table::<Measure>();
    let at_limit = [
        "k".repeat(512),
        "é".repeat(512),
        "😀".repeat(256),
        format!("{}😀", "k".repeat(510)),
    ];
    for rk in &at_limit {
        t.insert(Measure {
            pk: "p".into(),
            rk: rk.clone(),
            d: 1.0,
        })
        .await
        .unwrap_or_else(|e| panic!("{} UTF-16 units: {e}", rk.encode_utf16().count()));
        assert!(t.get("p", rk.as_str()).await.expect("get").is_some());
    }
    let over = ["k".repeat(513), format!("{}😀", "k".repeat(511))];
    for rk in &over {
        let e = t
            .insert(Measure {
                pk: "p".into(),
                rk: rk.clone(),
                d: 1.0,
            })
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
        assert!(e.to_string().contains("1024"), "{e}");
    }
}

/// The 1 MiB entity limit counts stored data (strings and names as UTF-16,
/// binaries as bytes), not the JSON text: fifteen 64 KiB binaries (960 KiB
/// of data, about 1.3 MB of base64 JSON) fit, on memory as on Azurite; so
/// do fifteen strings of 32 767 CJK characters (960 KiB of data, sent as
/// 2.9 MB of JSON once their characters are escaped), and a sixteenth is
/// refused before sending, as the same entity in UTF-8 would be.
pub async fn entity_size_counts_stored_data_not_json_text(ctx: &Ctx, _: Target) {
    let table = TableName::new(format!("{}Big", ctx.store.table_prefix())).unwrap();
    let be: &Arc<dyn Backend> = ctx.backend();
    be.create_table(&table).await.expect("create table");
    let mut props = Properties::new();
    for i in 0..15 {
        props.insert(format!("b{i:02}"), Value::Binary(vec![0x5a; 64 * 1024]));
    }
    let data = EntityData {
        partition_key: PartitionKey::new("p").unwrap(),
        row_key: RowKey::new("big").unwrap(),
        properties: props,
    };
    be.execute(&table, TableOp::Insert(data), &WriteOptions::new())
        .await
        .expect("960 KiB of data is within 1 MiB");

    let mut props = Properties::new();
    for i in 0..15 {
        props.insert(format!("s{i:02}"), Value::String("語".repeat(32_767)));
    }
    let mut data = EntityData {
        partition_key: PartitionKey::new("p").unwrap(),
        row_key: RowKey::new("text").unwrap(),
        properties: props.clone(),
    };
    be.execute(&table, TableOp::Insert(data.clone()), &WriteOptions::new())
        .await
        .expect("960 KiB of text is within 1 MiB");
    let stored = be
        .get(&table, &data.partition_key, &data.row_key)
        .await
        .expect("get")
        .expect("present");
    assert_eq!(stored.data.properties, props);
    data.properties
        .insert("s15", Value::String("語".repeat(32_767)));
    let e = be
        .execute(
            &table,
            TableOp::Replace(data, Precondition::Upsert),
            &WriteOptions::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
}

/// A filter longer than [`MAX_FILTER_LEN`] once URL-encoded is `Invalid`,
/// naming the filter, on every backend (it used to be retried for seconds
/// and end as `Transient` on Azure, and be accepted by memory).
pub async fn over_long_filters_are_invalid_and_name_the_filter(ctx: &Ctx, _: Target) {
    let e = long_blob_query(&ctx.store, 40_000).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(!e.is_transient());
    let text = e.to_string();
    assert!(text.contains("filter on `blob`"), "{text}");
    assert!(text.contains(&MAX_FILTER_LEN.to_string()), "{text}");
}

/// A query whose filter compares `blob` with `n` bytes.
pub async fn long_blob_query(store: &Store, n: usize) -> leasehold::Result<Vec<Blobby>> {
    let c = Blobby::columns();
    let found = store
        .table::<Blobby>()
        .query()
        .filter(c.blob.eq(vec![0xab; n]))
        .all()
        .await?;
    Ok(found.into_iter().map(|v| v.entity().clone()).collect())
}

/// The longest filter leasehold sends runs on every backend (Azurite accepts
/// request heads up to 16 KiB; the limit leaves room for the rest).
pub async fn filters_at_the_length_limit_run(ctx: &Ctx, _: Target) {
    let t = ctx.store.table::<Blobby>();
    // `blob eq X'…'`: 9 bytes encoded around the hex digits, 2 per byte.
    let n = (MAX_FILTER_LEN - "blob eq X%27%27".len()) / 2;
    let row = Blobby {
        pk: "p".into(),
        rk: "r".into(),
        blob: vec![0xab; n],
    };
    t.insert(row.clone()).await.expect("insert");
    let found = long_blob_query(&ctx.store, n)
        .await
        .expect("query at the limit");
    assert_eq!(found, vec![row]);
    let e = long_blob_query(&ctx.store, n + 1).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
}

/// Key ranges over the costliest valid keys (512 UTF-16 units of
/// three-byte characters, 4608 bytes each once URL-encoded) run as the
/// `leasehold::query` docs say: a range of one key in any partition, a
/// range with two such bounds in a short partition, and a range with one
/// bound in a partition with such a key, paged one row at a time so each
/// request also carries a continuation of two long keys (the longest query
/// head leasehold sends). Two such bounds in such a partition are over
/// [`MAX_FILTER_LEN`]: `Invalid`, naming the filter.
pub async fn key_ranges_over_the_longest_keys_run(ctx: &Ctx, _: Target) {
    let t = ctx.store.table::<Measure>();
    let k = |last: &str| format!("{}{last}", "日".repeat(511));
    let long_pk = "日".repeat(512);
    let keys = [k("a"), k("b"), k("c")];
    for pk in ["p", long_pk.as_str()] {
        let mut batch = t.batch();
        for (i, rk) in keys.iter().enumerate() {
            batch = batch.insert(Measure {
                pk: pk.into(),
                rk: rk.clone(),
                d: i as f64,
            });
        }
        batch.commit().await.expect("batch");
    }
    let rks = |found: Vec<leasehold::Versioned<Measure>>| -> Vec<f64> {
        found.iter().map(|v| v.entity().d).collect()
    };

    // A range of one key: one comparison, in either partition.
    let one = "日".repeat(512);
    t.insert(Measure {
        pk: "p".into(),
        rk: one.clone(),
        d: 9.0,
    })
    .await
    .expect("insert");
    let found = t
        .query()
        .partition("p")
        .row_keys(one.clone()..=one.clone())
        .all()
        .await
        .expect("a range of one long key");
    assert_eq!(rks(found), [9.0]);
    let found = t
        .query()
        .partition(long_pk.as_str())
        .row_keys(keys[1].clone()..=keys[1].clone())
        .all()
        .await
        .expect("a range of one long key in a long partition");
    assert_eq!(rks(found), [1.0]);

    // Two long bounds in a short partition, one row a page.
    let found = t
        .query()
        .partition("p")
        .row_keys(keys[0].clone()..=keys[2].clone())
        .page_size(1)
        .all()
        .await
        .expect("a range between two long keys");
    assert_eq!(rks(found), [0.0, 1.0, 2.0]);

    // One long bound in a long partition, one row a page: every request
    // after the first resumes from two long keys.
    let found = t
        .query()
        .partition(long_pk.as_str())
        .row_keys(keys[0].clone()..)
        .page_size(1)
        .all()
        .await
        .expect("a range from a long key in a long partition");
    assert_eq!(rks(found), [0.0, 1.0, 2.0]);

    // Two long bounds in a long partition: over the limit.
    let e = t
        .query()
        .partition(long_pk.as_str())
        .row_keys(keys[0].clone()..=keys[2].clone())
        .all()
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    let text = e.to_string();
    assert!(
        text.starts_with("invalid filter on `PartitionKey`, `RowKey`: is "),
        "{text}"
    );
    assert!(text.contains(&MAX_FILTER_LEN.to_string()), "{text}");
}

/// An over-long filter sends nothing: `requests` counts the requests the
/// store's backend was asked to send.
pub async fn over_long_filters_send_no_request(store: &Store, requests: impl Fn() -> u64) {
    // Create the table first, so only the query is counted.
    let _ = long_blob_query(store, 1).await;
    let before = requests();
    let e = long_blob_query(store, 40_000).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert_eq!(
        requests(),
        before,
        "no request for a filter that cannot be sent"
    );
}

/// Expands to one test per timed emulator check, in a module
/// `emulator_timed`, with the test attribute given (paused time on memory,
/// real time on Azurite).
#[macro_export]
macro_rules! emulator_timed_suite {
    (#[$attr:meta] $make_ctx:expr, $target:expr) => {
        mod emulator_timed {
            #[allow(unused_imports)]
            use super::*;
            #[$attr]
            async fn an_expired_lease_is_renewed_by_its_holder_until_the_blob_is_written() {
                let ctx: Option<leasehold::testing::conformance::Ctx> = $make_ctx;
                let Some(ctx) = ctx else { return };
                $crate::emulator::an_expired_lease_is_renewed_by_its_holder_until_the_blob_is_written(&ctx, $target).await;
            }
        }
    };
}

/// Renewal after expiry: the holder of an expired lease renews it while
/// nobody acquired it and the blob was not written (checked in
/// `timed::an_expired_lease_can_be_renewed_by_its_holder`); a write to the
/// blob without the lease ends that, and the late renewal is refused. So a
/// renewal that succeeds does not prove the lease was held all along: the
/// lease guard counts validity locally and reports the lease lost when its
/// deadline passes, whatever a later renewal says.
pub async fn an_expired_lease_is_renewed_by_its_holder_until_the_blob_is_written(
    ctx: &Ctx,
    _: Target,
) {
    use leasehold::backend::{BlobConditions, LeaseDuration, LeaseId, Metadata};
    use leasehold::key::BlobName;
    let be = ctx.backend();
    let b = BlobName::new("renew-after-write").unwrap();
    be.create_container(&ctx.container).await.unwrap();
    be.put_blob(
        &ctx.container,
        &b,
        vec![1],
        &Metadata::new(),
        &BlobConditions::none(),
    )
    .await
    .unwrap();
    let id = LeaseId::new_random();
    be.lease(
        &ctx.container,
        &b,
        leasehold::backend::LeaseAction::Acquire {
            duration: LeaseDuration::Seconds(15),
            proposed: id,
        },
    )
    .await
    .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(16_500)).await;
    be.put_blob(
        &ctx.container,
        &b,
        vec![2],
        &Metadata::new(),
        &BlobConditions::none(),
    )
    .await
    .expect("an expired lease does not guard the blob");
    let e = be
        .lease(
            &ctx.container,
            &b,
            leasehold::backend::LeaseAction::Renew(id),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LeaseLost, "{e}");
}
