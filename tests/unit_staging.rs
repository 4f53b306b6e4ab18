//! Writing one row twice in a unit: every cell of the folding table in
//! [`leasehold::Unit`]'s docs. An accepted pair must leave the row as the
//! two writes applied one after the other would; a refused second write
//! must leave the staged writes exactly as they were.

use leasehold::{Entity, ErrorKind, Store, Versioned};

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Staged")]
struct Item {
    #[entity(partition_key)]
    pk: String,
    #[entity(row_key)]
    rk: String,
    a: Option<i64>,
    b: Option<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Insert,
    Replace,
    Merge,
    Delete,
    Upsert,
    UpsertMerge,
}

/// The value each write of a cell sends: the first sets `a`, the second `b`
/// (and clears `a`, which a merge keeps and a replace drops).
fn value(second: bool) -> Item {
    Item {
        pk: "p".into(),
        rk: "r".into(),
        a: (!second).then_some(10),
        b: second.then_some(20),
    }
}

/// The row stored before the cell runs: absent when the first write is an
/// insert, else `a = 1, b = 1`.
fn initial(first: Op) -> Option<Item> {
    (first != Op::Insert).then(|| Item {
        pk: "p".into(),
        rk: "r".into(),
        a: Some(1),
        b: Some(1),
    })
}

fn with(v: &Versioned<Item>, item: Item) -> Versioned<Item> {
    let mut v = v.clone();
    *v = item;
    v
}

/// Stages `op` in `unit`; `current` is the unit's latest view of the row.
fn stage(
    unit: &mut leasehold::lock::Unit,
    op: Op,
    current: &Versioned<Item>,
    item: Item,
) -> leasehold::Result<()> {
    match op {
        Op::Insert => unit.insert(&item),
        Op::Replace => unit.replace(&with(current, item)),
        Op::Merge => unit.merge(&with(current, item)),
        Op::Delete => unit.delete(current),
        Op::Upsert => unit.upsert(&item),
        Op::UpsertMerge => unit.upsert_merge(&item),
    }
}

/// Applies `op` directly to the table: the reference the unit must match.
async fn apply(
    table: &leasehold::Table<Item>,
    op: Op,
    current: Option<&Versioned<Item>>,
    item: Item,
) -> leasehold::Result<()> {
    let current = || current.expect("the row exists in the reference");
    match op {
        Op::Insert => table.insert(item).await.map(drop),
        Op::Replace => table.replace(&with(current(), item)).await.map(drop),
        Op::Merge => table.merge(&with(current(), item)).await.map(drop),
        Op::Delete => table.delete(current()).await,
        Op::Upsert => table.upsert(item).await.map(drop),
        Op::UpsertMerge => table.upsert_merge(item).await.map(drop),
    }
}

async fn stored(table: &leasehold::Table<Item>) -> Option<Item> {
    table
        .get("p", "r")
        .await
        .expect("get")
        .map(Versioned::into_inner)
}

async fn seeded(first: Op) -> Store {
    let store = Store::memory();
    if let Some(item) = initial(first) {
        store.table::<Item>().insert(item).await.expect("seed");
    }
    store
}

/// What the row looks like after applying `first` then `second` directly.
async fn reference(first: Op, second: Op) -> Option<Item> {
    let store = seeded(first).await;
    let table = store.table::<Item>();
    let before = table.get("p", "r").await.expect("get");
    apply(&table, first, before.as_ref(), value(false))
        .await
        .expect("the reference's first write");
    let between = table.get("p", "r").await.expect("get");
    apply(&table, second, between.as_ref(), value(true))
        .await
        .expect("the reference's second write");
    stored(&table).await
}

async fn cell(first: Op, second: Op, refused: Option<&str>) {
    let name = format!("{first:?} then {second:?}");
    let store = seeded(first).await;
    let table = store.table::<Item>();
    let mut unit = store.lock("p").await.expect("lock");
    let read = unit.get::<Item>("r").await.expect("read");
    let placeholder = Versioned::new(
        value(false),
        leasehold::ETag::new("\"none\""),
        time::OffsetDateTime::UNIX_EPOCH,
    );
    let current = read.clone().unwrap_or(placeholder);
    stage(&mut unit, first, &current, value(false))
        .unwrap_or_else(|e| panic!("{name}: first write refused: {e}"));
    let staged_before = unit.staged();
    let view_before = unit.get::<Item>("r").await.expect("read");
    // The second write works on the unit's view of the row; after a staged
    // delete there is none, so it is given the value read before.
    let current = view_before.clone().unwrap_or(current);
    let outcome = stage(&mut unit, second, &current, value(true));
    match refused {
        Some(why) => {
            let e = outcome.expect_err(&format!("{name}: must be refused"));
            assert_eq!(e.kind(), ErrorKind::Invalid, "{name}: {e}");
            assert!(e.to_string().contains(why), "{name}: {e}");
            assert_eq!(unit.staged(), staged_before, "{name}: staged writes kept");
            let view_after = unit.get::<Item>("r").await.expect("read");
            assert_eq!(
                view_after.map(Versioned::into_inner),
                view_before.map(Versioned::into_inner),
                "{name}: the staged write is unchanged"
            );
            unit.commit()
                .await
                .unwrap_or_else(|e| panic!("{name}: commit: {e}"));
            // The first write alone is what gets stored.
            let expected = {
                let store = seeded(first).await;
                let t = store.table::<Item>();
                let before = t.get("p", "r").await.expect("get");
                apply(&t, first, before.as_ref(), value(false))
                    .await
                    .expect("reference");
                stored(&t).await
            };
            assert_eq!(
                stored(&table).await,
                expected,
                "{name}: the first write is stored"
            );
        }
        None => {
            outcome.unwrap_or_else(|e| panic!("{name}: must be accepted: {e}"));
            let expected = reference(first, second).await;
            let view = unit.get::<Item>("r").await.expect("read");
            assert_eq!(
                view.map(Versioned::into_inner),
                expected,
                "{name}: the unit's view"
            );
            unit.commit()
                .await
                .unwrap_or_else(|e| panic!("{name}: commit: {e}"));
            assert_eq!(stored(&table).await, expected, "{name}: the stored row");
        }
    }
}

const INSERTS: &str = "this unit already inserts that row";
const EXISTS: &str = "this unit already writes that row, so it exists";
const DELETES: &str = "this unit already deletes that row";

macro_rules! cells {
    ($($name:ident: $first:ident then $second:ident => $refused:expr;)*) => {$(
        #[tokio::test]
        async fn $name() {
            cell(Op::$first, Op::$second, $refused).await;
        }
    )*};
}

cells! {
    insert_then_insert: Insert then Insert => Some(INSERTS);
    insert_then_replace: Insert then Replace => None;
    insert_then_merge: Insert then Merge => None;
    insert_then_delete: Insert then Delete => None;
    insert_then_upsert: Insert then Upsert => None;
    insert_then_upsert_merge: Insert then UpsertMerge => None;

    replace_then_insert: Replace then Insert => Some(EXISTS);
    replace_then_replace: Replace then Replace => None;
    replace_then_merge: Replace then Merge => None;
    replace_then_delete: Replace then Delete => None;
    replace_then_upsert: Replace then Upsert => None;
    replace_then_upsert_merge: Replace then UpsertMerge => None;

    merge_then_insert: Merge then Insert => Some(EXISTS);
    merge_then_replace: Merge then Replace => None;
    merge_then_merge: Merge then Merge => None;
    merge_then_delete: Merge then Delete => None;
    merge_then_upsert: Merge then Upsert => None;
    merge_then_upsert_merge: Merge then UpsertMerge => None;

    delete_then_insert: Delete then Insert => None;
    delete_then_replace: Delete then Replace => Some(DELETES);
    delete_then_merge: Delete then Merge => Some(DELETES);
    delete_then_delete: Delete then Delete => Some(DELETES);
    delete_then_upsert: Delete then Upsert => Some(DELETES);
    delete_then_upsert_merge: Delete then UpsertMerge => Some(DELETES);

    upsert_then_insert: Upsert then Insert => Some(EXISTS);
    upsert_then_replace: Upsert then Replace => None;
    upsert_then_merge: Upsert then Merge => None;
    upsert_then_delete: Upsert then Delete => None;
    upsert_then_upsert: Upsert then Upsert => None;
    upsert_then_upsert_merge: Upsert then UpsertMerge => None;

    upsert_merge_then_insert: UpsertMerge then Insert => Some(EXISTS);
    upsert_merge_then_replace: UpsertMerge then Replace => None;
    upsert_merge_then_merge: UpsertMerge then Merge => None;
    upsert_merge_then_delete: UpsertMerge then Delete => None;
    upsert_merge_then_upsert: UpsertMerge then Upsert => None;
    upsert_merge_then_upsert_merge: UpsertMerge then UpsertMerge => None;
}

/// A write of a staged view from another unit has no condition to carry and
/// is refused without touching this unit's staged writes.
#[tokio::test]
async fn a_staged_view_from_another_unit_is_refused_and_changes_nothing() {
    let store = Store::memory();
    let mut other = store.lock("q").await.expect("lock q");
    other
        .insert(&Item {
            pk: "q".into(),
            rk: "r".into(),
            a: Some(1),
            b: None,
        })
        .expect("stage");
    let foreign = other
        .get::<Item>("r")
        .await
        .expect("read")
        .expect("staged view");
    other.abandon().await.expect("abandon");

    let mut unit = store.lock("q").await.expect("lock q again");
    unit.insert(&Item {
        pk: "q".into(),
        rk: "s".into(),
        a: Some(2),
        b: None,
    })
    .expect("stage");
    let e = unit
        .replace(&foreign)
        .expect_err("a foreign staged view is refused");
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert_eq!(unit.staged(), 1);
    unit.commit().await.expect("commit");
    let t = store.table::<Item>();
    assert!(t.get("q", "s").await.expect("get").is_some());
    assert!(t.get("q", "r").await.expect("get").is_none());
}
