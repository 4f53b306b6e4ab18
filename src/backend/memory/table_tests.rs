//! Unit tests of the table side, through the public trait.

use super::MemoryBackend;
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

async fn insert(b: &MemoryBackend, t: &TableName, d: EntityData) -> Version {
    b.execute(t, &TableOp::Insert(d)).await.unwrap().unwrap()
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
        if_match,
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
async fn every_operation_on_a_missing_table_is_table_not_found() {
    let b = MemoryBackend::new();
    let t = table("Missing");
    let e = b.get(&t, &pk("p"), &rk("r")).await.unwrap_err();
    assert_service_error(&e, ErrorKind::NotFound, "TableNotFound");
    let e = b
        .execute(&t, &TableOp::Insert(n("p", "r", 1)))
        .await
        .unwrap_err();
    assert_service_error(&e, ErrorKind::NotFound, "TableNotFound");
    let e = b
        .batch(&t, &[TableOp::Insert(n("p", "r", 1))])
        .await
        .unwrap_err();
    assert_service_error(&e, ErrorKind::NotFound, "TableNotFound");
    let e = b.query(&t, &QuerySpec::default()).await.unwrap_err();
    assert_service_error(&e, ErrorKind::NotFound, "TableNotFound");
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

// ---------------------------------------------------------------------------
// Single writes
// ---------------------------------------------------------------------------

#[tokio::test]
async fn get_of_a_missing_entity_is_none() {
    let (b, t) = backend_with_table().await;
    assert!(read(&b, &t, "p", "r").await.is_none());
}

#[tokio::test]
async fn insert_then_get_returns_data_etag_and_timestamp() {
    let (b, t) = backend_with_table().await;
    let d = entity(
        "p",
        "r",
        &[("s", Value::String("x".into())), ("n", Value::Int32(3))],
    );
    let v = insert(&b, &t, d.clone()).await;
    let got = read(&b, &t, "p", "r").await.unwrap();
    assert_eq!(got.data, d);
    assert_eq!(got.etag, v.etag);
    assert_eq!(got.timestamp, v.timestamp);
}

#[tokio::test]
async fn insert_of_an_existing_entity_is_entity_already_exists() {
    let (b, t) = backend_with_table().await;
    insert(&b, &t, n("p", "r", 1)).await;
    let e = b
        .execute(&t, &TableOp::Insert(n("p", "r", 2)))
        .await
        .unwrap_err();
    assert_service_error(&e, ErrorKind::AlreadyExists, "EntityAlreadyExists");
    assert_eq!(
        read(&b, &t, "p", "r")
            .await
            .unwrap()
            .data
            .properties
            .get("n"),
        Some(&Value::Int64(1))
    );
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
        let v = b.execute(&t, &op).await.unwrap().unwrap();
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
async fn replace_and_merge_with_a_stale_etag_are_update_condition_not_satisfied() {
    let (b, t) = backend_with_table().await;
    let old = insert(&b, &t, n("p", "r", 1)).await.etag;
    let new = b
        .execute(
            &t,
            &TableOp::Replace(n("p", "r", 2), Precondition::IfMatch(old.clone())),
        )
        .await
        .unwrap()
        .unwrap()
        .etag;
    for op in [
        TableOp::Replace(n("p", "r", 3), Precondition::IfMatch(old.clone())),
        TableOp::Merge(n("p", "r", 3), Precondition::IfMatch(old.clone())),
        delete("p", "r", Some(old.clone())),
    ] {
        let e = b.execute(&t, &op).await.unwrap_err();
        assert_service_error(&e, ErrorKind::Conflict, "UpdateConditionNotSatisfied");
    }
    let got = read(&b, &t, "p", "r").await.unwrap();
    assert_eq!(got.etag, new);
    assert_eq!(got.data.properties.get("n"), Some(&Value::Int64(2)));
}

#[tokio::test]
async fn conditional_writes_on_a_missing_entity_are_resource_not_found() {
    let (b, t) = backend_with_table().await;
    let some_etag = ETag::new("W/\"datetime'2020-01-01T00%3A00%3A00.0000000Z'\"");
    for op in [
        TableOp::Replace(n("p", "r", 1), Precondition::IfMatch(some_etag.clone())),
        TableOp::Replace(n("p", "r", 1), Precondition::IfExists),
        TableOp::Merge(n("p", "r", 1), Precondition::IfMatch(some_etag.clone())),
        TableOp::Merge(n("p", "r", 1), Precondition::IfExists),
        delete("p", "r", Some(some_etag.clone())),
        delete("p", "r", None),
    ] {
        let e = b.execute(&t, &op).await.unwrap_err();
        assert_service_error(&e, ErrorKind::NotFound, "ResourceNotFound");
    }
    assert!(read(&b, &t, "p", "r").await.is_none());
}

#[tokio::test]
async fn if_exists_and_if_match_star_write_whatever_version_is_there() {
    let (b, t) = backend_with_table().await;
    insert(&b, &t, n("p", "r", 1)).await;
    b.execute(
        &t,
        &TableOp::Replace(n("p", "r", 2), Precondition::IfExists),
    )
    .await
    .unwrap();
    b.execute(
        &t,
        &TableOp::Replace(n("p", "r", 3), Precondition::IfMatch(ETag::new("*"))),
    )
    .await
    .unwrap();
    let got = read(&b, &t, "p", "r").await.unwrap();
    assert_eq!(got.data.properties.get("n"), Some(&Value::Int64(3)));
}

#[tokio::test]
async fn upsert_creates_or_overwrites_and_merge_upsert_merges() {
    let (b, t) = backend_with_table().await;
    let a = entity("p", "r", &[("a", Value::Int32(1)), ("b", Value::Int32(1))]);
    b.execute(&t, &TableOp::Replace(a, Precondition::Upsert))
        .await
        .unwrap();
    let only_c = entity("p", "r", &[("c", Value::Int32(2))]);
    b.execute(&t, &TableOp::Replace(only_c.clone(), Precondition::Upsert))
        .await
        .unwrap();
    assert_eq!(read(&b, &t, "p", "r").await.unwrap().data, only_c);

    let more = entity("p", "r", &[("c", Value::Int32(3)), ("d", Value::Int32(4))]);
    b.execute(&t, &TableOp::Merge(more, Precondition::Upsert))
        .await
        .unwrap();
    let got = read(&b, &t, "p", "r").await.unwrap().data.properties;
    assert_eq!(got.get("c"), Some(&Value::Int32(3)));
    assert_eq!(got.get("d"), Some(&Value::Int32(4)));
    assert_eq!(got.len(), 2);

    // Merge-upsert of a new row creates it.
    let fresh = entity("p", "new", &[("x", Value::Boolean(true))]);
    b.execute(&t, &TableOp::Merge(fresh.clone(), Precondition::Upsert))
        .await
        .unwrap();
    assert_eq!(read(&b, &t, "p", "new").await.unwrap().data, fresh);
}

#[tokio::test]
async fn merge_keeps_other_properties_and_replace_drops_them() {
    let (b, t) = backend_with_table().await;
    let v = insert(
        &b,
        &t,
        entity("p", "r", &[("a", Value::Int32(1)), ("b", Value::Int32(1))]),
    )
    .await;
    let v = b
        .execute(
            &t,
            &TableOp::Merge(
                entity("p", "r", &[("b", Value::Int32(2))]),
                Precondition::IfMatch(v.etag),
            ),
        )
        .await
        .unwrap()
        .unwrap();
    let got = read(&b, &t, "p", "r").await.unwrap().data.properties;
    assert_eq!(got.get("a"), Some(&Value::Int32(1)));
    assert_eq!(got.get("b"), Some(&Value::Int32(2)));
    b.execute(
        &t,
        &TableOp::Replace(
            entity("p", "r", &[("b", Value::Int32(3))]),
            Precondition::IfMatch(v.etag),
        ),
    )
    .await
    .unwrap();
    let got = read(&b, &t, "p", "r").await.unwrap().data.properties;
    assert_eq!(got.get("a"), None);
    assert_eq!(got.get("b"), Some(&Value::Int32(3)));
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
        .execute(&t, &TableOp::Merge(data(second), Precondition::IfExists))
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
        .execute(&t, &TableOp::Merge(big("b", 10), Precondition::IfExists))
        .await
        .unwrap_err();
    assert_service_error(&e, ErrorKind::Backend, "EntityTooLarge");
}

#[tokio::test]
async fn delete_removes_and_a_second_delete_is_resource_not_found() {
    let (b, t) = backend_with_table().await;
    let v = insert(&b, &t, n("p", "r", 1)).await;
    let out = b
        .execute(&t, &delete("p", "r", Some(v.etag)))
        .await
        .unwrap();
    assert_eq!(out, None);
    assert!(read(&b, &t, "p", "r").await.is_none());
    let e = b.execute(&t, &delete("p", "r", None)).await.unwrap_err();
    assert_service_error(&e, ErrorKind::NotFound, "ResourceNotFound");
}

#[tokio::test]
async fn invalid_entities_are_rejected_before_anything_changes() {
    let (b, t) = backend_with_table().await;
    let v = insert(&b, &t, n("p", "r", 1)).await;
    let too_long = Value::String("x".repeat(32 * 1024 + 1));
    let too_many: Vec<(String, Value)> = (0..253)
        .map(|i| (format!("p{i}"), Value::Int32(i)))
        .collect();
    let bad = [
        entity("p", "r", &[("s", too_long)]),
        entity("p", "r", &[("bad-name", Value::Int32(1))]),
        entity("p", "r", &[("Timestamp", Value::Int32(1))]),
        EntityData {
            partition_key: pk("p"),
            row_key: rk("r"),
            properties: too_many.into_iter().collect(),
        },
    ];
    for d in bad {
        for op in [
            TableOp::Insert(d.clone()),
            TableOp::Replace(d.clone(), Precondition::Upsert),
            TableOp::Merge(d.clone(), Precondition::IfExists),
        ] {
            let e = b.execute(&t, &op).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
        }
    }
    // Invalid input is reported even for a table that does not exist.
    let e = b
        .execute(
            &table("Nope"),
            &TableOp::Insert(entity("p", "r", &[("bad-name", Value::Int32(1))])),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert_eq!(read(&b, &t, "p", "r").await.unwrap().etag, v.etag);
}

#[tokio::test]
async fn keys_with_quotes_percent_plus_spaces_and_unicode_round_trip() {
    let (b, t) = backend_with_table().await;
    let keys = [
        "o'brien",
        "100%",
        "a+b",
        "two words",
        " lead",
        "日本語",
        "é",
        "😀",
        "''",
        "",
    ];
    for (i, k) in keys.iter().enumerate() {
        insert(&b, &t, n(k, k, i as i64)).await;
    }
    for (i, k) in keys.iter().enumerate() {
        let got = read(&b, &t, k, k).await.unwrap();
        assert_eq!(got.data.partition_key.as_str(), *k);
        assert_eq!(got.data.properties.get("n"), Some(&Value::Int64(i as i64)));
        let v = b.execute(&t, &delete(k, k, Some(got.etag))).await.unwrap();
        assert!(v.is_none());
    }
    assert!(all_rows(&b, &t, QuerySpec::default()).await.is_empty());
}

// ---------------------------------------------------------------------------
// Batches
// ---------------------------------------------------------------------------

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
async fn a_failing_batch_op_reports_its_index_and_code_and_applies_nothing() {
    let (b, t) = backend_with_table().await;
    let v = insert(&b, &t, n("p", "a", 1)).await;
    b.execute(
        &t,
        &TableOp::Replace(n("p", "a", 2), Precondition::IfMatch(v.etag.clone())),
    )
    .await
    .unwrap();
    insert(&b, &t, n("p", "dup", 1)).await;
    let before = all_rows(&b, &t, QuerySpec::default()).await;

    let cases: [(Vec<TableOp>, usize, ErrorKind, &str); 3] = [
        (
            vec![
                TableOp::Insert(n("p", "new1", 1)),
                TableOp::Replace(n("p", "a", 9), Precondition::IfMatch(v.etag.clone())),
            ],
            1,
            ErrorKind::Conflict,
            "UpdateConditionNotSatisfied",
        ),
        (
            vec![
                TableOp::Insert(n("p", "new1", 1)),
                delete("p", "new2", None),
                TableOp::Insert(n("p", "new3", 1)),
            ],
            1,
            ErrorKind::NotFound,
            "ResourceNotFound",
        ),
        (
            vec![
                TableOp::Merge(n("p", "a", 5), Precondition::Upsert),
                TableOp::Insert(n("p", "new1", 1)),
                TableOp::Insert(n("p", "dup", 2)),
            ],
            2,
            ErrorKind::AlreadyExists,
            "EntityAlreadyExists",
        ),
    ];
    for (ops, index, kind, code) in cases {
        let e = b.batch(&t, &ops).await.unwrap_err();
        match &e {
            Error::Batch { index: i, source } => {
                assert_eq!(*i, index, "{e}");
                assert_service_error(source, kind, code);
            }
            other => panic!("expected a batch error, got {other}"),
        }
        assert_eq!(e.code(), Some(code));
        assert_eq!(all_rows(&b, &t, QuerySpec::default()).await, before);
    }
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

// ---------------------------------------------------------------------------
// Queries
// ---------------------------------------------------------------------------

#[tokio::test]
async fn query_returns_entities_in_utf16_key_order() {
    let (b, t) = backend_with_table().await;
    // U+FF5E sorts below U+1F600 by code point and in UTF-8, but above it in
    // UTF-16 (surrogates are D800..DFFF).
    let keys = ["b", "a", "\u{ff5e}", "😀", "A", "a b", "ab"];
    for k in keys {
        insert(&b, &t, n("p", k, 0)).await;
    }
    insert(&b, &t, n("o", "z", 0)).await;
    let rows = all_rows(&b, &t, QuerySpec::default()).await;
    let got: Vec<(String, String)> = rows
        .iter()
        .map(|e| {
            (
                e.data.partition_key.as_str().to_owned(),
                e.data.row_key.as_str().to_owned(),
            )
        })
        .collect();
    let mut want: Vec<(String, String)> = keys
        .iter()
        .map(|k| ("p".to_owned(), (*k).to_owned()))
        .chain([("o".to_owned(), "z".to_owned())])
        .collect();
    want.sort_by(|a, b| {
        crate::key::compare_keys(&a.0, &b.0).then_with(|| crate::key::compare_keys(&a.1, &b.1))
    });
    assert_eq!(got, want);
    let pos_emoji = got.iter().position(|k| k.1 == "😀").unwrap();
    let pos_wide = got.iter().position(|k| k.1 == "\u{ff5e}").unwrap();
    assert!(pos_emoji < pos_wide);
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
async fn invalid_query_specs_are_rejected() {
    let (b, t) = backend_with_table().await;
    for top in [0, 1001] {
        let e = b
            .query(
                &t,
                &QuerySpec {
                    top: Some(top),
                    ..QuerySpec::default()
                },
            )
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    }
    let mut f = Filter::compare("a", CmpOp::Eq, Value::Int32(0));
    for i in 1..16 {
        f = f.or(Filter::compare("a", CmpOp::Eq, Value::Int32(i)));
    }
    let e = b
        .query(
            &t,
            &QuerySpec {
                filter: Some(f),
                ..QuerySpec::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
}

#[tokio::test]
async fn top_pages_through_three_or_more_pages() {
    let (b, t) = backend_with_table().await;
    for i in 0..25 {
        insert(&b, &t, n(&format!("p{}", i % 3), &format!("{i:02}"), i)).await;
    }
    let mut spec = QuerySpec {
        top: Some(10),
        ..QuerySpec::default()
    };
    let mut sizes = Vec::new();
    let mut all = Vec::new();
    loop {
        let page = b.query(&t, &spec).await.unwrap();
        sizes.push(page.entities.len());
        all.extend(page.entities);
        match page.continuation {
            Some(c) => {
                assert!(c.next_row_key.is_some());
                spec.continuation = Some(c);
            }
            None => break,
        }
    }
    assert_eq!(sizes, [10, 10, 5]);
    assert_eq!(all.len(), 25);
    let mut unique = row_keys(&all);
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 25);
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
    let b = MemoryBackend::builder().scan_limit(4).build();
    let t = table("Things");
    b.create_table(&t).await.unwrap();
    for i in 0..10 {
        let v = if i == 9 { 1 } else { 0 };
        insert(&b, &t, n("p", &format!("{i}"), v)).await;
    }
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
    let b = MemoryBackend::builder().scan_limit(5).build();
    let t = table("Things");
    b.create_table(&t).await.unwrap();
    for i in 0..5 {
        insert(&b, &t, n("p", &format!("{i}"), 0)).await;
    }
    let page = b.query(&t, &QuerySpec::default()).await.unwrap();
    assert_eq!(page.entities.len(), 5);
    assert_eq!(page.continuation, None);
}

#[tokio::test]
async fn select_keeps_listed_properties_and_always_keys_and_timestamp() {
    let (b, t) = backend_with_table().await;
    let v = insert(
        &b,
        &t,
        entity(
            "p",
            "r",
            &[
                ("a", Value::Int32(1)),
                ("b", Value::Int32(2)),
                ("c", Value::Int32(3)),
            ],
        ),
    )
    .await;
    let page = b
        .query(
            &t,
            &QuerySpec {
                select: Some(vec!["a".into(), "c".into(), "missing".into()]),
                ..QuerySpec::default()
            },
        )
        .await
        .unwrap();
    let e = &page.entities[0];
    assert_eq!(e.data.partition_key.as_str(), "p");
    assert_eq!(e.data.row_key.as_str(), "r");
    assert_eq!(e.timestamp, v.timestamp);
    assert_eq!(e.etag, v.etag);
    let names: Vec<&str> = e.data.properties.iter().map(|(k, _)| k).collect();
    assert_eq!(names, ["a", "c"]);
    // The stored entity is untouched.
    assert_eq!(
        read(&b, &t, "p", "r").await.unwrap().data.properties.len(),
        3
    );
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
    b.execute(&t, &delete("p", "e", None)).await.unwrap();
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_optimistic_increments_lose_no_update() {
    let (b, t) = backend_with_table().await;
    insert(&b, &t, n("p", "counter", 0)).await;
    let workers = 8;
    let increments = 25;
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let b = b.clone();
        let t = t.clone();
        tasks.push(tokio::spawn(async move {
            let mut conflicts = 0;
            for _ in 0..increments {
                loop {
                    let cur = read(&b, &t, "p", "counter").await.unwrap();
                    let Some(Value::Int64(v)) = cur.data.properties.get("n").cloned() else {
                        panic!("bad counter")
                    };
                    // Let other workers write between this read and the write.
                    tokio::task::yield_now().await;
                    let op =
                        TableOp::Replace(n("p", "counter", v + 1), Precondition::IfMatch(cur.etag));
                    match b.execute(&t, &op).await {
                        Ok(_) => break,
                        Err(e) if e.kind() == ErrorKind::Conflict => conflicts += 1,
                        Err(e) => panic!("{e}"),
                    }
                }
            }
            conflicts
        }));
    }
    let mut conflicts = 0;
    for task in tasks {
        conflicts += task.await.unwrap();
    }
    // The workers did race: some writes were refused as stale.
    assert!(conflicts > 0);
    let got = read(&b, &t, "p", "counter").await.unwrap();
    assert_eq!(
        got.data.properties.get("n"),
        Some(&Value::Int64(workers * increments))
    );
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
        .execute(&t, &TableOp::Insert(n("p", "r", 1)))
        .await
        .unwrap();
    assert!(shared.get(&t, &pk("p"), &rk("r")).await.unwrap().is_some());
}
