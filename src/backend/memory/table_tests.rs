//! Unit tests of the table side that are the memory backend's own: shared
//! state between clones, the shape of its ETags, Timestamps and
//! continuations, the scan limit, the wording of its batch errors, and
//! where it follows Azure against Azurite (case-insensitive table names,
//! typed filters, limits on a merge's result, one Timestamp per batch).
//! The service's semantics are checked for every backend by the conformance
//! suite (`testing::conformance::table_backend`), and through typed tables
//! by leasehold's checks (`tests/it/checks/tables.rs`).

use super::MemoryBackend;
use crate::backend::WriteOptions;
use crate::backend::{Precondition, QuerySpec, StoredEntity, TableBackend, TableOp, Version};
use crate::entity::{EntityData, Properties, Value};
use crate::error::{Error, ErrorKind};
use crate::key::{ETag, PartitionKey, RowKey, TableName};
use crate::query::{CmpOp, Continuation, Filter};

fn table(name: &str) -> TableName {
    TableName::new(name).unwrap()
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
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect(),
    }
}

fn n(p: &str, r: &str, v: i64) -> EntityData {
    entity(p, r, &[("n", Value::Int64(v))])
}

async fn backend_with_table() -> (MemoryBackend, TableName) {
    let b = MemoryBackend::new();
    let t = table("Things");
    b.create_table(&t).await.unwrap();
    (b, t)
}

/// A backend whose pages examine at most `limit` entities, with a table
/// of rows `0`, `1`... in partition `p`, `n` of each given in `values`.
async fn scanning(limit: usize, values: &[i64]) -> (MemoryBackend, TableName) {
    let b = MemoryBackend::builder().scan_limit(limit).build();
    let t = table("Things");
    b.create_table(&t).await.unwrap();
    for (i, v) in values.iter().enumerate() {
        insert(&b, &t, n("p", &i.to_string(), *v)).await;
    }
    (b, t)
}

async fn insert(b: &MemoryBackend, t: &TableName, d: EntityData) -> Version {
    b.execute(t, TableOp::Insert(d), &WriteOptions::new())
        .await
        .unwrap()
        .unwrap()
}

async fn read(b: &MemoryBackend, t: &TableName, p: &str, r: &str) -> Option<StoredEntity> {
    b.get(t, &pk(p), &rk(r)).await.unwrap()
}

fn assert_service_error(e: &Error, kind: ErrorKind, code: &str) {
    assert_eq!(e.kind(), kind, "{e}");
    assert_eq!(e.code(), Some(code), "{e}");
}

fn delete(p: &str, r: &str, if_match: Option<ETag>) -> TableOp {
    TableOp::Delete {
        partition_key: pk(p),
        row_key: rk(r),
        condition: if_match.map_or(Precondition::IfExists, Precondition::IfMatch),
    }
}

async fn all_rows(b: &MemoryBackend, t: &TableName, mut spec: QuerySpec) -> Vec<StoredEntity> {
    let mut out = Vec::new();
    loop {
        let page = b.query(t, &spec).await.unwrap();
        out.extend(page.entities);
        match page.continuation {
            Some(c) => spec.continuation = Some(c),
            None => return out,
        }
    }
}

fn row_keys(entities: &[StoredEntity]) -> Vec<String> {
    entities
        .iter()
        .map(|e| e.data.row_key.as_str().to_owned())
        .collect()
}

// ---------------------------------------------------------------------------
// Tables
// ---------------------------------------------------------------------------

#[tokio::test]
async fn create_table_is_idempotent_and_case_insensitive() {
    let b = MemoryBackend::new();
    b.create_table(&table("Things")).await.unwrap();
    b.create_table(&table("Things")).await.unwrap();
    b.create_table(&table("THINGS")).await.unwrap();
    insert(&b, &table("things"), n("p", "r", 1)).await;
    assert!(read(&b, &table("THINGS"), "p", "r").await.is_some());
}

#[tokio::test]
async fn clones_share_state() {
    let (b, t) = backend_with_table().await;
    let other = b.clone();
    insert(&other, &t, n("p", "r", 1)).await;
    assert!(read(&b, &t, "p", "r").await.is_some());
    let debug = format!("{b:?}");
    assert!(debug.contains("tables: 1"), "{debug}");
}

#[tokio::test]
async fn etags_have_azure_shape_and_change_on_every_write() {
    let (b, t) = backend_with_table().await;
    let mut seen = Vec::new();
    let v = insert(&b, &t, n("p", "r", 0)).await;
    seen.push(v.clone());
    let mut etag = v.etag;
    for i in 1..20 {
        let op = if i % 2 == 0 {
            TableOp::Replace(n("p", "r", i), Precondition::IfMatch(etag.clone()))
        } else {
            TableOp::Merge(n("p", "r", i), Precondition::IfMatch(etag.clone()))
        };
        let v = b
            .execute(&t, op.clone(), &WriteOptions::new())
            .await
            .unwrap()
            .unwrap();
        etag = v.etag.clone();
        seen.push(v);
    }
    for w in seen.windows(2) {
        assert_ne!(w[0].etag, w[1].etag);
        assert!(w[0].timestamp < w[1].timestamp);
    }
    for v in &seen {
        let s = v.etag.as_str();
        assert!(s.starts_with("W/\"datetime'") && s.ends_with("Z'\""), "{s}");
        assert!(s.contains("%3A") && !s.contains(':'), "{s}");
        let text = crate::entity::datetime::format(v.timestamp).replace(':', "%3A");
        assert!(s.contains(&text), "{s} should embed {text}");
        assert_eq!(v.timestamp.offset(), time::UtcOffset::UTC);
        assert_eq!(v.timestamp.nanosecond() % 100, 0);
    }
}

#[tokio::test]
async fn merge_whose_result_breaks_a_limit_is_the_services_400() {
    let (b, t) = backend_with_table().await;
    let first: Vec<(String, Value)> = (0..200)
        .map(|i| (format!("a{i}"), Value::Int32(i)))
        .collect();
    let second: Vec<(String, Value)> = (0..100)
        .map(|i| (format!("b{i}"), Value::Int32(i)))
        .collect();
    let data = |props: Vec<(String, Value)>| EntityData {
        partition_key: pk("p"),
        row_key: rk("r"),
        properties: props.into_iter().collect::<Properties>(),
    };
    insert(&b, &t, data(first)).await;
    let e = b
        .execute(
            &t,
            TableOp::Merge(data(second), Precondition::IfExists),
            &WriteOptions::new(),
        )
        .await
        .unwrap_err();
    assert_service_error(&e, ErrorKind::Backend, "TooManyProperties");
    assert_eq!(
        read(&b, &t, "p", "r").await.unwrap().data.properties.len(),
        200
    );

    let big = |prefix: &str, count: usize| EntityData {
        partition_key: pk("p"),
        row_key: rk("big"),
        properties: (0..count)
            .map(|i| (format!("{prefix}{i}"), Value::Binary(vec![0; 60 * 1024])))
            .collect(),
    };
    insert(&b, &t, big("a", 10)).await;
    let e = b
        .execute(
            &t,
            TableOp::Merge(big("b", 10), Precondition::IfExists),
            &WriteOptions::new(),
        )
        .await
        .unwrap_err();
    assert_service_error(&e, ErrorKind::Backend, "EntityTooLarge");
}

#[tokio::test]
async fn batch_applies_all_and_returns_one_result_per_op() {
    let (b, t) = backend_with_table().await;
    let v1 = insert(&b, &t, n("p", "1", 1)).await;
    insert(&b, &t, n("p", "2", 2)).await;
    let ops = [
        TableOp::Insert(n("p", "0", 0)),
        TableOp::Replace(n("p", "1", 10), Precondition::IfMatch(v1.etag)),
        delete("p", "2", None),
        TableOp::Merge(n("p", "3", 3), Precondition::Upsert),
    ];
    let out = b.batch(&t, &ops).await.unwrap();
    assert_eq!(out.len(), 4);
    assert!(out[0].is_some() && out[1].is_some() && out[2].is_none() && out[3].is_some());
    // One atomic commit: one Timestamp.
    assert_eq!(
        out[0].as_ref().unwrap().timestamp,
        out[3].as_ref().unwrap().timestamp
    );
    let rows = all_rows(&b, &t, QuerySpec::default()).await;
    assert_eq!(row_keys(&rows), ["0", "1", "3"]);
    assert_eq!(rows[1].etag, out[1].as_ref().unwrap().etag);
    assert_eq!(rows[1].data.properties.get("n"), Some(&Value::Int64(10)));
}

#[tokio::test]
async fn batch_limits_are_invalid_with_the_failing_index_and_apply_nothing() {
    let (b, t) = backend_with_table().await;
    let many: Vec<TableOp> = (0..=TableOp::MAX_BATCH_OPS)
        .map(|i| TableOp::Insert(n("p", &format!("{i:03}"), 0)))
        .collect();
    let e = b.batch(&t, &many).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid);
    assert!(e.to_string().contains("101 operations"), "{e}");
    // Exactly 100 is fine.
    b.batch(&t, &many[..TableOp::MAX_BATCH_OPS]).await.unwrap();
    let t2 = table("Other");
    b.create_table(&t2).await.unwrap();

    let cases: Vec<(Vec<TableOp>, &str)> = vec![
        (vec![], "is empty"),
        (
            vec![
                TableOp::Insert(n("p", "1", 0)),
                TableOp::Insert(n("q", "2", 0)),
            ],
            "operation 1 is in partition",
        ),
        (
            vec![
                TableOp::Insert(n("p", "1", 0)),
                TableOp::Insert(n("p", "2", 0)),
                TableOp::Replace(n("p", "1", 0), Precondition::Upsert),
            ],
            "operation 2 touches row",
        ),
        (
            vec![
                TableOp::Insert(n("p", "1", 0)),
                TableOp::Insert(entity("p", "2", &[("bad name", Value::Int32(0))])),
            ],
            "operation 1 of batch",
        ),
    ];
    for (ops, needle) in cases {
        let e = b.batch(&t2, &ops).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
        assert!(
            e.to_string().contains(needle),
            "{e} should contain {needle:?}"
        );
    }
    // Over 4 MiB: 80 entities of ~60 KiB binaries.
    let heavy: Vec<TableOp> = (0..80)
        .map(|i| {
            TableOp::Insert(entity(
                "p",
                &format!("{i:03}"),
                &[("b", Value::Binary(vec![7; 60 * 1024]))],
            ))
        })
        .collect();
    let e = b.batch(&t2, &heavy).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(e.to_string().contains("the limit is 4194304"), "{e}");
    assert!(all_rows(&b, &t2, QuerySpec::default()).await.is_empty());
}

#[tokio::test]
async fn filters_follow_service_typing() {
    let (b, t) = backend_with_table().await;
    insert(&b, &t, entity("p", "1", &[("n", Value::Int64(5))])).await;
    insert(&b, &t, entity("p", "2", &[("n", Value::Int32(5))])).await;
    insert(&b, &t, entity("p", "3", &[("other", Value::Int32(5))])).await;
    let run = |f: Filter| {
        let b = b.clone();
        let t = t.clone();
        async move {
            row_keys(
                &all_rows(
                    &b,
                    &t,
                    QuerySpec {
                        filter: Some(f),
                        ..QuerySpec::default()
                    },
                )
                .await,
            )
        }
    };
    assert_eq!(
        run(Filter::compare("n", CmpOp::Eq, Value::Int64(5))).await,
        ["1"]
    );
    assert_eq!(
        run(Filter::compare("n", CmpOp::Eq, Value::Int32(5))).await,
        ["2"]
    );
    assert_eq!(
        run(Filter::compare("n", CmpOp::Ge, Value::Int32(0))).await,
        ["2"]
    );
    assert!(
        run(Filter::compare("n", CmpOp::Eq, Value::Double(5.0)))
            .await
            .is_empty()
    );
    assert_eq!(
        run(Filter::compare(
            "RowKey",
            CmpOp::Gt,
            Value::String("1".into())
        ))
        .await,
        ["2", "3"]
    );
    assert_eq!(
        run(Filter::compare("n", CmpOp::Eq, Value::Int64(5)).not()).await,
        ["2", "3"]
    );
}

#[tokio::test]
async fn default_page_size_is_1000() {
    let (b, t) = backend_with_table().await;
    let ops: Vec<Vec<TableOp>> = (0..11)
        .map(|chunk| {
            (0..100)
                .map(|i| TableOp::Insert(n("p", &format!("{:05}", chunk * 100 + i), 0)))
                .collect()
        })
        .collect();
    for batch in &ops {
        b.batch(&t, batch).await.unwrap();
    }
    let page = b.query(&t, &QuerySpec::default()).await.unwrap();
    assert_eq!(page.entities.len(), 1000);
    let c = page.continuation.unwrap();
    assert_eq!(c.next_partition_key, "p");
    assert_eq!(c.next_row_key.as_deref(), Some("01000"));
}

#[tokio::test]
async fn scan_limit_ends_pages_early_even_when_empty() {
    let (b, t) = scanning(4, &[0, 0, 0, 0, 0, 0, 0, 0, 0, 1]).await;
    let spec = QuerySpec {
        filter: Some(Filter::compare("n", CmpOp::Eq, Value::Int64(1))),
        ..QuerySpec::default()
    };
    let first = b.query(&t, &spec).await.unwrap();
    assert!(first.entities.is_empty());
    let c = first
        .continuation
        .clone()
        .expect("an empty page still continues");
    assert_eq!(c.next_row_key.as_deref(), Some("4"));
    let second = b
        .query(
            &t,
            &QuerySpec {
                continuation: Some(c),
                ..spec.clone()
            },
        )
        .await
        .unwrap();
    assert!(second.entities.is_empty());
    assert!(second.continuation.is_some());
    let rows = all_rows(&b, &t, spec).await;
    assert_eq!(row_keys(&rows), ["9"]);
}

#[tokio::test]
async fn the_last_scan_ends_without_a_continuation() {
    let (b, t) = scanning(5, &[0; 5]).await;
    let page = b.query(&t, &QuerySpec::default()).await.unwrap();
    assert_eq!(page.entities.len(), 5);
    assert_eq!(page.continuation, None);
}

#[tokio::test]
async fn continuation_is_a_position_stable_under_writes_between_pages() {
    let (b, t) = backend_with_table().await;
    for k in ["a", "c", "e", "g", "i"] {
        insert(&b, &t, n("p", k, 0)).await;
    }
    let spec = QuerySpec {
        top: Some(2),
        ..QuerySpec::default()
    };
    let first = b.query(&t, &spec).await.unwrap();
    assert_eq!(row_keys(&first.entities), ["a", "c"]);
    let c = first.continuation.unwrap();
    assert_eq!(c.next_row_key.as_deref(), Some("e"));
    // Before the position: not seen. At or after it: seen. Deleting the row
    // the continuation names does not lose the rows after it.
    insert(&b, &t, n("p", "b", 0)).await;
    insert(&b, &t, n("p", "d", 0)).await;
    insert(&b, &t, n("p", "f", 0)).await;
    b.execute(&t, delete("p", "e", None), &WriteOptions::new())
        .await
        .unwrap();
    let rest = all_rows(
        &b,
        &t,
        QuerySpec {
            continuation: Some(c),
            ..spec
        },
    )
    .await;
    assert_eq!(row_keys(&rest), ["f", "g", "i"]);
}

#[tokio::test]
async fn a_continuation_with_only_a_partition_key_starts_at_that_partition() {
    let (b, t) = backend_with_table().await;
    for p in ["a", "b", "c"] {
        insert(&b, &t, n(p, "r", 0)).await;
    }
    let page = b
        .query(
            &t,
            &QuerySpec {
                continuation: Some(Continuation {
                    next_partition_key: "b".into(),
                    next_row_key: None,
                }),
                ..QuerySpec::default()
            },
        )
        .await
        .unwrap();
    let pks: Vec<&str> = page
        .entities
        .iter()
        .map(|e| e.data.partition_key.as_str())
        .collect();
    assert_eq!(pks, ["b", "c"]);
}

#[tokio::test]
async fn the_backend_is_usable_as_a_shared_trait_object() {
    fn assert_traits<T: Send + Sync + Clone + Default + std::fmt::Debug + 'static>() {}
    assert_traits::<MemoryBackend>();
    let shared: std::sync::Arc<dyn crate::backend::Backend> =
        std::sync::Arc::new(MemoryBackend::new());
    let t = table("Things");
    shared.create_table(&t).await.unwrap();
    shared
        .execute(&t, TableOp::Insert(n("p", "r", 1)), &WriteOptions::new())
        .await
        .unwrap();
    assert!(shared.get(&t, &pk("p"), &rk("r")).await.unwrap().is_some());
}

/// A batch on a missing table fails as a whole with `TableNotFound`
/// (Azure reports it as the failure of the first operation; the conformance
/// suite checks the code both share).
#[tokio::test]
async fn a_batch_on_a_missing_table_is_table_not_found() {
    let b = MemoryBackend::new();
    let e = b
        .batch(&table("Missing"), &[TableOp::Insert(n("p", "r", 1))])
        .await
        .unwrap_err();
    assert_service_error(&e, ErrorKind::NotFound, "TableNotFound");
}
