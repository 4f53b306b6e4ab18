//! What writes return, and the requests it costs: a merge returns the entity
//! as stored with one request when the value merged knows the stored row,
//! and reads it back only when nothing is known of it.

use leasehold::backend::Op;
use leasehold::backend::memory::MemoryBackend;
use leasehold::table::UpdateError;
use leasehold::testing::{CountingBackend, RequestCounter};
use leasehold::{Entity, Store, Table, Versioned};

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Orders")]
struct Order {
    #[entity(partition_key)]
    shop: String,
    #[entity(row_key)]
    id: String,
    total: i64,
    note: Option<String>,
}

fn order(id: &str, total: i64, note: Option<&str>) -> Order {
    Order {
        shop: "s".into(),
        id: id.into(),
        total,
        note: note.map(str::to_owned),
    }
}

/// A table on a counting memory backend, with `ids` stored (note "kept"),
/// and the counts reset.
async fn setup(ids: &[&str]) -> (Store, Table<Order>, RequestCounter) {
    let counting = CountingBackend::new(MemoryBackend::new());
    let counts = counting.counter();
    let store = Store::new(counting);
    let t = store.table::<Order>();
    for id in ids {
        t.insert(order(id, 1, Some("kept"))).await.unwrap();
    }
    counts.reset();
    (store, t, counts)
}

#[tokio::test]
async fn merge_after_get_sends_exactly_one_request() {
    let (_, t, counts) = setup(&["o"]).await;
    let mut v = t.get("s", "o").await.unwrap().unwrap();
    assert_eq!(counts.total(), 1);
    v.total = 2;
    v.note = None;
    let mut merged = t.merge(&v).await.unwrap();
    assert_eq!(merged.note.as_deref(), Some("kept"));
    assert_eq!(counts.get(Op::Write), 1);
    assert_eq!(counts.total(), 2, "no read after the merge");
    // The returned value knows the stored row as well.
    merged.total = 3;
    merged.note = None;
    let merged = t.merge(&merged).await.unwrap();
    assert_eq!(merged.note.as_deref(), Some("kept"));
    assert_eq!(counts.total(), 3);
    // So does an unchanged value, and the value an insert returns.
    let merged = t.merge(&merged).await.unwrap();
    assert_eq!(merged.note.as_deref(), Some("kept"));
    let mut inserted = t.insert(order("o2", 1, Some("kept"))).await.unwrap();
    inserted.note = None;
    let merged = t.merge(&inserted).await.unwrap();
    assert_eq!(merged.note.as_deref(), Some("kept"));
    assert_eq!(counts.total(), 6);
    assert_eq!(counts.get(Op::Get), 1);
}

#[tokio::test]
async fn merge_of_a_value_knowing_nothing_reads_back_only_when_a_property_is_unwritten() {
    let (_, t, counts) = setup(&["o"]).await;
    let current = t.get("s", "o").await.unwrap().unwrap();
    counts.reset();
    let blind = Versioned::new(
        order("o", 2, None),
        current.etag().clone(),
        current.timestamp(),
    );
    let merged = t.merge(&blind).await.unwrap();
    assert_eq!(merged.note.as_deref(), Some("kept"));
    assert_eq!((counts.get(Op::Write), counts.get(Op::Get)), (1, 1));
    counts.reset();
    // Every property written: what is stored of `Order` is known.
    let full = Versioned::new(
        order("o", 3, Some("new")),
        merged.etag().clone(),
        merged.timestamp(),
    );
    let merged = t.merge(&full).await.unwrap();
    assert_eq!(merged.note.as_deref(), Some("new"));
    assert_eq!((counts.get(Op::Write), counts.get(Op::Get)), (1, 0));
}

#[tokio::test]
async fn upsert_merge_reads_back_only_when_a_property_is_unwritten() {
    let (_, t, counts) = setup(&["o"]).await;
    let merged = t.upsert_merge(order("o", 2, None)).await.unwrap();
    assert_eq!(merged.note.as_deref(), Some("kept"));
    assert_eq!((counts.get(Op::Write), counts.get(Op::Get)), (1, 1));
    counts.reset();
    let merged = t.upsert_merge(order("o", 3, Some("new"))).await.unwrap();
    assert_eq!(merged.note.as_deref(), Some("new"));
    assert_eq!(counts.total(), 1);
}

#[tokio::test]
async fn batch_merges_read_back_only_what_is_not_known() {
    let (_, t, counts) = setup(&["a", "b"]).await;
    let mut a = t.get("s", "a").await.unwrap().unwrap();
    counts.reset();
    a.note = None;
    let results = t
        .batch()
        .merge(&a)
        .upsert_merge(order("b", 5, None))
        .commit()
        .await
        .unwrap();
    assert_eq!((counts.get(Op::Batch), counts.get(Op::Get)), (1, 1));
    for r in results {
        assert_eq!(r.unwrap().note.as_deref(), Some("kept"));
    }
}

#[tokio::test]
async fn unit_view_after_merging_a_value_read_outside_needs_no_read() {
    let (store, t, counts) = setup(&["o"]).await;
    let mut outside = t.get("s", "o").await.unwrap().unwrap();
    outside.note = None;
    outside.total = 9;
    let mut unit = store.lock("s").await.unwrap();
    counts.reset();
    unit.merge(&outside).unwrap();
    let view = unit.get::<Order>("o").await.unwrap().unwrap();
    assert_eq!((view.total, view.note.as_deref()), (9, Some("kept")));
    assert_eq!(
        counts.total(),
        0,
        "the view comes from what `outside` knows"
    );
    unit.abandon().await.unwrap();
}

#[tokio::test]
async fn try_update_with_refusal_sends_nothing_after_its_read() {
    #[derive(Debug, PartialEq)]
    enum Refusal {
        AlreadyShipped,
    }
    let (_, t, counts) = setup(&["o"]).await;
    let outcome = t
        .try_update_with("s", "o", |_| Err(Refusal::AlreadyShipped))
        .await;
    assert!(matches!(
        outcome,
        Err(UpdateError::Refused(Refusal::AlreadyShipped))
    ));
    assert_eq!(counts.get(Op::Get), 1);
    assert_eq!(counts.total(), 1, "no write");
}

#[tokio::test]
async fn update_error_shows_the_refusal_once_and_storage_errors_as_they_are() {
    #[derive(Debug)]
    struct Shipped;
    impl std::fmt::Display for Shipped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("cannot cancel once shipped")
        }
    }
    impl std::error::Error for Shipped {}
    let refused: UpdateError<Shipped> = UpdateError::Refused(Shipped);
    assert_eq!(
        refused.to_string(),
        "update refused: cannot cancel once shipped"
    );
    assert!(std::error::Error::source(&refused).is_none());
    let (_, t, _) = setup(&[]).await;
    let missing = t
        .try_update_with("s", "none", |_| Err::<(), _>(Shipped))
        .await
        .unwrap_err();
    match &missing {
        UpdateError::Failed(e) => assert_eq!(missing.to_string(), e.to_string()),
        other => panic!("expected Failed, got {other:?}"),
    }
}

/// A layer deleting a row of `Orders` right after a merge of it is applied,
/// before anything else can read it: another writer getting in between.
#[derive(Debug)]
struct DeleteAfterMerge(std::sync::Arc<dyn leasehold::backend::Backend>);

impl leasehold::backend::Layer for DeleteAfterMerge {
    async fn call<T: Send>(
        &self,
        request: &leasehold::backend::Request<'_>,
        next: impl std::future::Future<Output = leasehold::Result<T>> + Send,
    ) -> leasehold::Result<T> {
        use leasehold::backend::{Precondition, TableOp, WriteOptions};
        let answer = next.await?;
        if let (Some(t), Some(pk), Some(rk)) =
            (request.table(), request.partition_key(), request.row_key())
            && request.name().contains("merge")
            && t.as_str().ends_with("Orders")
        {
            let delete = TableOp::Delete {
                partition_key: pk.clone(),
                row_key: rk.clone(),
                condition: Precondition::IfExists,
            };
            self.0.execute(t, delete, &WriteOptions::new()).await?;
        }
        Ok(answer)
    }
}

/// An `upsert_merge` whose row another writer deletes right after the merge
/// (before the read back) answers that the merge was applied: the entity as
/// merged at the merge's version, which a conditional write finds stale.
/// It used to answer `NotFound`, as if nothing had been written.
async fn a_merge_deleted_before_its_read_back_still_answers_applied(
    backend: std::sync::Arc<dyn leasehold::backend::Backend>,
    prefix: &str,
) {
    let plain = Store::builder_shared(backend.clone())
        .table_prefix(prefix)
        .unwrap()
        .build()
        .unwrap();
    plain
        .table::<Order>()
        .insert(order("o", 1, Some("kept")))
        .await
        .unwrap();
    let racing = Store::builder_shared(backend.clone())
        .table_prefix(prefix)
        .unwrap()
        .layer(DeleteAfterMerge(backend.clone()))
        .build()
        .unwrap();
    let t = racing.table::<Order>();
    let merged = t
        .upsert_merge(order("o", 2, None))
        .await
        .expect("the merge was applied");
    assert_eq!(*merged, order("o", 2, None), "as merged");
    let stale = t.replace(&merged).await.unwrap_err();
    assert!(
        matches!(
            stale.kind(),
            leasehold::ErrorKind::NotFound | leasehold::ErrorKind::Conflict
        ),
        "{stale}"
    );
    // A batch's merge read back the same way.
    plain
        .table::<Order>()
        .insert(order("b", 1, Some("kept")))
        .await
        .unwrap();
    assert!(
        plain
            .table::<Order>()
            .get("s", "o")
            .await
            .unwrap()
            .is_none()
    );
    let mut results = t
        .batch()
        .upsert_merge(order("b", 3, None))
        .commit()
        .await
        .expect("the batch was applied");
    // The batch is not a single merge: the layer leaves it, so the read
    // finds the row at the commit's version.
    let written = results.remove(0).unwrap();
    assert_eq!(written.note.as_deref(), Some("kept"));
}

#[tokio::test]
async fn a_merge_deleted_before_its_read_back_still_answers_applied_on_memory() {
    a_merge_deleted_before_its_read_back_still_answers_applied(
        std::sync::Arc::new(MemoryBackend::new()),
        "m",
    )
    .await;
}

#[tokio::test]
async fn a_merge_deleted_before_its_read_back_still_answers_applied_on_azurite() {
    let Some(backend) = crate::support::azurite_backend() else {
        return;
    };
    let prefix = format!("m{}", &uuid::Uuid::new_v4().simple().to_string()[..10]);
    a_merge_deleted_before_its_read_back_still_answers_applied(backend, &prefix).await;
}
