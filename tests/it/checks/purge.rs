//! Purges and counts: [`Table::purge`](leasehold::Table::purge) deletes what a
//! query matches (a partition, a key range, a filter) in transactions of
//! 100, keeps rows changed since it read them, and never touches a unit's
//! commit in progress or leasehold's own rows; [`Table::count`](leasehold::Table::count)
//! counts what the same query returns. Both read keys only, and refuse bad
//! input before any request.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use leasehold::backend::Op;
use leasehold::backend::{Backend, QuerySpec};
use leasehold::key::TableName;
use leasehold::lease::LeaseOptions;
use leasehold::table::PurgeOptions;
use leasehold::testing::{CountingBackend, FaultyBackend, RequestCounter};
use leasehold::{Entity, ErrorKind, Store, Table};

use super::Ctx;

crate::checks::checks! {

/// A row to purge.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "PurgeEvents")]
struct Event {
    #[entity(partition_key)]
    pub day: String,
    #[entity(row_key)]
    pub id: String,
    pub kind: String,
    pub size: i64,
}

/// A row with a unique value, whose index rows a purge must take along.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "PurgeUsers")]
struct User {
    #[entity(partition_key)]
    pub team: String,
    #[entity(row_key)]
    pub id: String,
    #[entity(unique)]
    pub email: String,
}

/// An account moved by a unit across two partitions.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "PurgeAccounts")]
struct Account {
    #[entity(partition_key)]
    pub customer: String,
    #[entity(row_key)]
    pub name: String,
    pub balance: i64,
}

/// A store on `backend` sharing the context's tables.
fn process(ctx: &Ctx, backend: Arc<dyn Backend>) -> Store {
    Store::builder_shared(backend)
        .table_prefix(ctx.prefix())
        .expect("valid prefix")
        .lease_options(LeaseOptions::new().with_duration(ctx.lease_duration()))
        .build()
        .expect("valid store")
}

/// A store sharing the context's tables, counting its requests.
fn counted(ctx: &Ctx) -> (Store, RequestCounter) {
    let counting = CountingBackend::new(ctx.backend().clone());
    let counter = counting.counter();
    (process(ctx, Arc::new(counting)), counter)
}

/// The requests counted, setup (table creation) left out.
fn work(counter: &RequestCounter) -> BTreeMap<Op, u64> {
    counter
        .snapshot()
        .into_iter()
        .filter(|(op, n)| *n > 0 && !op.is_setup())
        .collect()
}

/// Inserts `n` events of partition `day` (ids `000`, `001`, ...), kinds
/// alternating `debug` and `audit`, sizes 0, 1, 2, ..., 100 a transaction.
async fn fill(events: &Table<Event>, day: &str, n: usize) {
    let all: Vec<usize> = (0..n).collect();
    for chunk in all.chunks(100) {
        let mut batch = events.batch();
        for &i in chunk {
            batch = batch.insert(Event {
                day: day.into(),
                id: format!("{i:03}"),
                kind: if i % 2 == 0 { "debug" } else { "audit" }.into(),
                size: i as i64,
            });
        }
        batch.commit().await.expect("events stored");
    }
}

/// The ids of partition `day`, as stored.
async fn ids(events: &Table<Event>, day: &str) -> Vec<String> {
    events
        .query()
        .partition(day)
        .all()
        .await
        .expect("read")
        .into_iter()
        .map(|e| e.id.clone())
        .collect()
}

/// A purge of a partition, of a key range and of a filter deletes exactly
/// what the query returns, leaves everything else, and reports it; a
/// purge of nothing sends no delete.
plain async fn purges_a_partition_a_key_range_and_a_filter(ctx) {
    let events = ctx.store.table::<Event>();
    fill(&events, "d1", 30).await;
    fill(&events, "d2", 30).await;
    fill(&events, "d3", 30).await;

    let r = events
        .purge(events.query().partition("d1"))
        .await
        .expect("purge of a partition");
    assert_eq!((r.deleted, r.skipped, r.batches), (30, 0, 1));
    assert!(ids(&events, "d1").await.is_empty());

    let r = events
        .purge(events.query().partition("d2").row_keys("010".."020"))
        .await
        .expect("purge of a key range");
    assert_eq!((r.deleted, r.skipped, r.batches), (10, 0, 1));
    let left = ids(&events, "d2").await;
    assert_eq!(left.len(), 20);
    assert!(
        left.iter()
            .all(|id| id.as_str() < "010" || id.as_str() >= "020")
    );

    let c = Event::columns();
    let r = events
        .purge(events.query().filter(c.kind.eq("debug") & c.size.ge(10)))
        .await
        .expect("purge of a filter");
    // d2: even ids from 20 to 28 (10 to 18 went with the range); d3: 10 to 28.
    assert_eq!((r.deleted, r.skipped, r.batches), (15, 0, 2));
    let left: Vec<Event> = events
        .query()
        .all()
        .await
        .expect("read")
        .into_iter()
        .map(|v| v.into_inner())
        .collect();
    assert_eq!(left.len(), 20 + 30 - 15);
    assert!(
        left.iter().all(|e| e.kind == "audit" || e.size < 10),
        "only the filter's rows went"
    );

    let r = events
        .purge(events.query().partition("nothing"))
        .await
        .expect("purge of nothing");
    assert_eq!((r.deleted, r.skipped, r.batches), (0, 0, 0));
}

/// A purge of 250 rows of one partition costs one page of keys and three
/// transactions (100, 100, 50), several at once, and reports its progress
/// after each; a count of them costs one page. The page asks for no
/// property.
plain async fn purging_250_rows_costs_one_page_and_three_transactions(ctx) {
    fill(&ctx.store.table::<Event>(), "big", 250).await;
    let (store, counter) = counted(ctx);
    let events = store.table::<Event>();

    assert_eq!(
        events
            .count(events.query().partition("big"))
            .await
            .expect("count"),
        250
    );
    assert_eq!(work(&counter), BTreeMap::from([(Op::Query, 1)]));
    counter.reset();

    let mut seen = Vec::new();
    let r = events
        .purge_with(
            events.query().partition("big"),
            &PurgeOptions::new(),
            |so_far| seen.push(so_far.deleted),
        )
        .await
        .expect("purge");
    assert_eq!((r.deleted, r.skipped, r.batches), (250, 0, 3));
    assert_eq!(
        work(&counter),
        BTreeMap::from([(Op::Query, 1), (Op::Batch, 3)])
    );
    seen.sort_unstable();
    assert_eq!(seen.len(), 3, "progress after each transaction: {seen:?}");
    assert_eq!(seen.last(), Some(&250));
    assert_eq!(
        events.count(events.query()).await.expect("count"),
        0,
        "all gone"
    );

    // Through a fenced table a transaction holds 99 deletes and the
    // fence row.
    fill(&ctx.store.table::<Event>(), "fenced", 150).await;
    let guard = store
        .leases()
        .acquire(&format!("{}/purger", ctx.prefix()), ctx.lease_duration())
        .await
        .expect("lease");
    let fenced = events.fenced(&guard.fence().await.expect("fence"));
    counter.reset();
    let r = fenced
        .purge(fenced.query().partition("fenced"))
        .await
        .expect("fenced purge");
    assert_eq!((r.deleted, r.batches), (150, 2));
    assert_eq!(counter.get(Op::Batch), 2);
    guard.release().await.expect("release");
}

/// Rows changed or deleted by another writer after the purge read them
/// are kept (their delete carried the ETag read) and reported as skipped;
/// the rest of their transaction is deleted.
plain async fn rows_changed_after_the_read_are_kept_and_reported(ctx) {
    let events = ctx.store.table::<Event>();
    fill(&events, "d1", 40).await;
    let faulty = FaultyBackend::new(ctx.backend().clone());
    // Every transaction waits before it is sent (and after it is
    // counted): the other writer's turn.
    faulty
        .injector()
        .set_latency(Some(Op::Batch), Duration::from_secs(1));
    let counting = CountingBackend::new(faulty);
    let counter = counting.counter();
    let purger = process(ctx, Arc::new(counting));
    let slow = purger.table::<Event>();
    let purge = tokio::spawn(async move {
        slow.purge(slow.query().partition("d1"))
            .await
            .expect("purge")
    });
    // Once the purge has read the keys and is about to delete them:
    let started = tokio::time::Instant::now();
    while counter.get(Op::Batch) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the purge never sent its transaction"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    events
        .update_with("d1", "007", |e| e.kind = "changed".into())
        .await
        .expect("a change after the read");
    let gone = events.get("d1", "011").await.unwrap().expect("stored");
    events.delete(&gone).await.expect("a delete after the read");

    let r = purge.await.expect("purge task");
    assert_eq!((r.deleted, r.skipped), (38, 2), "{r:?}");
    // The first transaction refused, sent again without 007, refused,
    // sent again without 011.
    assert_eq!(r.batches, 3, "{r:?}");
    let left = events.query().partition("d1").all().await.expect("read");
    assert_eq!(left.len(), 1);
    assert_eq!(
        (left[0].id.as_str(), left[0].kind.as_str()),
        ("007", "changed")
    );
}

/// A unit's commit over two partitions, decided and left unfinished (its
/// other partition's account still marked, beside a row it inserts):
/// a count counts what the query returns, the rows as committed and no
/// decision row; a filtered count matches the rows as committed; a purge
/// of a filter deletes the committed row it matches and leaves the
/// commit's other rows as committed.
plain async fn counts_and_purges_see_a_commit_left_marked_as_committed(ctx) {
    let healthy = process(ctx, ctx.backend().clone());
    let accounts = healthy.table::<Account>();
    for c in ["c0", "c1"] {
        accounts
            .insert(Account {
                customer: c.into(),
                name: "main".into(),
                balance: 100,
            })
            .await
            .expect("open account");
    }
    let faulty = FaultyBackend::new(ctx.backend().clone());
    let injector = faulty.injector();
    let writer = process(ctx, Arc::new(faulty));
    let mut unit = writer.lock_many(["c0", "c1"]).await.expect("lock");
    let mut from = unit.get_in::<Account>("c0", "main").await.unwrap().unwrap();
    let mut to = unit.get_in::<Account>("c1", "main").await.unwrap().unwrap();
    from.balance -= 50;
    to.balance += 50;
    unit.replace(&from).unwrap();
    unit.replace(&to).unwrap();
    unit.insert(&Account {
        customer: "c1".into(),
        name: "savings".into(),
        balance: 7,
    })
    .unwrap();
    // The first transaction marks c1's rows, the second is the commit
    // point, the third (failed) would finish them; the read after it too.
    injector.fail_nth(Some(Op::Batch), 3);
    injector.fail_nth(Some(Op::Get), 1);
    unit.commit().await.expect("applied at its commit point");
    drop(writer);

    // The rows as stored: marks, the decision row.
    let table = TableName::new(format!("{}PurgeAccounts", ctx.prefix())).expect("name");
    let stored = ctx
        .backend()
        .query(&table, &QuerySpec::default())
        .await
        .expect("raw read")
        .entities;
    let marked: Vec<_> = stored
        .iter()
        .filter(|r| r.data.properties.get("_lhTxn").is_some())
        .map(|r| (r.data.partition_key.as_str(), r.data.row_key.as_str()))
        .collect();
    assert!(
        marked.contains(&("c1", "main")),
        "c1's account is left marked: {stored:?}"
    );
    assert!(
        stored.len() > 3,
        "the decision row is stored too: {stored:?}"
    );

    let returned = accounts.query().all().await.expect("read").len() as u64;
    assert_eq!(returned, 3);
    let counted = accounts.count(accounts.query()).await.expect("count");
    assert_eq!(counted, returned, "a count counts what a read returns");

    let c = Account::columns();
    let rich = || accounts.query().filter(c.balance.ge(150));
    assert_eq!(accounts.count(rich()).await.expect("count"), 1);
    assert_eq!(rich().all().await.expect("read").len(), 1);

    let r = accounts.purge(rich()).await.expect("purge");
    assert_eq!((r.deleted, r.skipped), (1, 0));
    let left: Vec<(String, String, i64)> = accounts
        .query()
        .all()
        .await
        .expect("read")
        .into_iter()
        .map(|a| (a.customer.clone(), a.name.clone(), a.balance))
        .collect();
    assert_eq!(
        left,
        [
            ("c0".into(), "main".into(), 50),
            ("c1".into(), "savings".into(), 7)
        ]
    );
}

/// A purge of an indexed type deletes each entity as `Table::delete`
/// does, one write each: its unique values are freed (another entity may
/// take them) and the index stays consistent.
plain async fn purging_an_indexed_type_frees_its_values(ctx) {
    let users = ctx.store.table::<User>();
    for i in 0..5 {
        users
            .insert(User {
                team: "t1".into(),
                id: i.to_string(),
                email: format!("u{i}@example.com"),
            })
            .await
            .expect("user stored");
    }
    let (store, counter) = counted(ctx);
    let counted_users = store.table::<User>();
    let r = counted_users
        .purge(counted_users.query().partition("t1"))
        .await
        .expect("purge");
    assert_eq!((r.deleted, r.skipped, r.batches), (5, 0, 5));
    // One page of keys, then each entity's delete as `Table::delete`
    // sends it: its tombstone, written at the ETag read.
    assert_eq!(
        work(&counter),
        BTreeMap::from([(Op::Query, 1), (Op::Write, 5)])
    );
    assert_eq!(users.count(users.query()).await.expect("count"), 0);
    let c = User::columns();
    assert!(
        users
            .get_by(c.email, "u3@example.com")
            .await
            .expect("lookup")
            .is_none()
    );
    users
        .insert(User {
            team: "t2".into(),
            id: "9".into(),
            email: "u3@example.com".into(),
        })
        .await
        .expect("a freed value is free");
    let report = users.verify_indexes().await.expect("verify");
    assert!(report.is_consistent(), "{report:?}");
}

/// Bad input is `Invalid`, naming what is wrong, before any request: an
/// invalid table name, a key range that holds no key, no deletes in
/// flight, a query of another table.
plain async fn bad_input_is_invalid_before_any_request(ctx) {
    let (store, counter) = counted(ctx);
    // Without a table prefix, an empty name is no table name.
    let unprefixed = Store::builder_shared(store.backend().clone())
        .build()
        .expect("valid store");
    let nameless = unprefixed.dynamic_table("");
    let e = nameless
        .purge(nameless.query())
        .await
        .expect_err("no table name");
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    let e = nameless
        .count(nameless.query())
        .await
        .expect_err("no table name");
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");

    let events = store.table::<Event>();
    for e in [
        events
            .purge(events.query().partition("d").row_keys("m".."a"))
            .await
            .expect_err("start after end"),
        events
            .purge(events.query().row_keys("m".."m"))
            .await
            .expect_err("an empty range"),
        events
            .count(events.query().row_keys("z"..="a"))
            .await
            .expect_err("start after end"),
    ] {
        assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
        assert!(e.to_string().contains("row key range"), "{e}");
    }
    let e = events
        .purge_with(
            events.query(),
            &PurgeOptions::new().with_concurrency(0),
            |_| {},
        )
        .await
        .expect_err("nothing in flight");
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(e.to_string().contains("concurrency"), "{e}");

    let other = store.dynamic_table("PurgeOther");
    let mine = store.dynamic_table("PurgeEvents");
    let e = mine
        .purge(other.query())
        .await
        .expect_err("another table's query");
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(e.to_string().contains("PurgeOther"), "{e}");
    assert_eq!(counter.total(), 0, "{:?}", counter.snapshot());
}
}
