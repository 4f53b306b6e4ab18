//! Refused calls of a transaction: bad options, a check that cannot hold,
//! a bad key among good ones. Each is refused with a typed error before
//! any request, and the transaction goes on as it was.

use std::time::Duration;

use leasehold::backend::memory::MemoryBackend;
use leasehold::testing::{CountingBackend, RequestCounter};
use leasehold::txn::TransactionOptions;
use leasehold::{Entity, ErrorKind, Store};

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "TxnInput")]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
    balance: i64,
}

fn account(customer: &str, balance: i64) -> Account {
    Account {
        customer: customer.into(),
        name: "main".into(),
        balance,
    }
}

async fn counted_store() -> (Store, RequestCounter) {
    let counting = CountingBackend::new(MemoryBackend::new());
    let counter = counting.counter();
    let store = Store::new(counting);
    for c in ["a", "b"] {
        store
            .table::<Account>()
            .insert(account(c, 100))
            .await
            .unwrap();
    }
    (store, counter)
}

#[test]
fn a_time_to_live_of_zero_or_over_a_minute_is_refused_naming_it() {
    for ttl in [Duration::ZERO, Duration::from_secs(61)] {
        let e = TransactionOptions::new()
            .with_time_to_live(ttl)
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid, "{ttl:?}: {e}");
        assert!(e.to_string().contains("time_to_live"), "{e}");
    }
    let longest = TransactionOptions::new()
        .with_time_to_live(TransactionOptions::MAX_TIME_TO_LIVE)
        .unwrap();
    assert_eq!(longest.time_to_live(), Duration::from_secs(60));
}

#[tokio::test]
async fn a_check_of_a_row_read_at_another_version_is_a_conflict_at_once() {
    let (store, counter) = counted_store().await;
    let mut tx = store.transaction();
    let mut a = tx.get::<Account>("a", "main").await.unwrap().unwrap();
    // The row changes after the transaction read it.
    let table = store.table::<Account>();
    let mut newer = table.get("a", "main").await.unwrap().unwrap();
    newer.balance = 90;
    let newer = table.replace(&newer).await.unwrap();

    let before = counter.work();
    let e = tx.check(&newer).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
    assert!(e.to_string().contains("another version"), "{e}");
    assert_eq!(counter.work(), before, "refused before any request");

    // The transaction is as it was: its write goes on, and fails on the
    // row it read, nothing applied.
    a.balance += 1;
    tx.replace(&a).unwrap();
    let e = tx.commit().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Batch, "{e}");
    assert_eq!(table.get("a", "main").await.unwrap().unwrap().balance, 90);
}

#[tokio::test]
async fn a_check_of_a_staged_view_is_invalid_and_takes_no_partition_in() {
    let (store, counter) = counted_store().await;
    // A staged view of partition `b`, from another transaction.
    let mut other = store.transaction();
    other.insert(&account("c", 5)).unwrap();
    let staged = other.get::<Account>("c", "main").await.unwrap().unwrap();

    let mut tx = store.transaction();
    let mut a = tx.get::<Account>("a", "main").await.unwrap().unwrap();
    let before = counter.work();
    let e = tx.check(&staged).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(e.to_string().contains("staged view"), "{e}");
    assert_eq!(counter.work(), before, "refused before any request");

    // Still a one-partition transaction: its commit is one batch.
    a.balance -= 10;
    tx.replace(&a).unwrap();
    let before = counter.snapshot();
    let report = tx.commit().await.unwrap();
    assert_eq!(report.partitions, 1);
    let after = counter.snapshot();
    let batches = after
        .get(&leasehold::backend::Op::Batch)
        .copied()
        .unwrap_or(0)
        - before
            .get(&leasehold::backend::Op::Batch)
            .copied()
            .unwrap_or(0);
    assert_eq!(batches, 1, "one transaction: {after:?}");
    assert_eq!(
        store
            .table::<Account>()
            .get("a", "main")
            .await
            .unwrap()
            .unwrap()
            .balance,
        90
    );
}

#[tokio::test]
async fn a_bad_key_among_good_ones_refuses_the_whole_read() {
    let (store, counter) = counted_store().await;
    let mut tx = store.transaction();
    let before = counter.work();
    let e = tx
        .get_many::<Account, _, _>([("a", "main"), ("b", "bad/key")])
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(e.to_string().contains("bad/key"), "{e}");
    assert_eq!(counter.work(), before, "refused before any request");

    // Nothing was read or taken in: the same read goes through after.
    let rows = tx
        .get_many::<Account, _, _>([("a", "main"), ("b", "main")])
        .await
        .unwrap();
    assert_eq!(rows.iter().flatten().count(), 2);
    assert_eq!(counter.work(), before + 2, "both rows read once, now");
}
