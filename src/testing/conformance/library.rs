//! A short check that leasehold itself runs on the backend: typed writes
//! with optimistic concurrency, a unit over two tables committing (and not
//! committing once its lease is lost), a transaction, a unique value
//! refused and run-once work. leasehold checks its behaviour in depth in
//! its own tests; a backend that passes the contract checks and these
//! carries it.

use std::time::Duration;

use crate::lease::{LeaseOptions, OnceOutcome};
use crate::{Entity, ErrorKind, Store};

use super::Ctx;

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "LibAccounts")]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
    balance: i64,
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "LibEntries")]
struct Entry {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    id: String,
    amount: i64,
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "LibUsers")]
struct User {
    #[entity(partition_key)]
    region: String,
    #[entity(row_key)]
    id: String,
    #[entity(unique)]
    email: String,
}

/// Stores `customer`'s main account with `balance`.
async fn open(store: &Store, customer: &str, balance: i64) {
    let account = Account {
        customer: customer.into(),
        name: "main".into(),
        balance,
    };
    store
        .table::<Account>()
        .insert(account)
        .await
        .expect("stored");
}

/// The balance stored in `customer`'s main account.
async fn balance(store: &Store, customer: &str) -> i64 {
    let stored = store.table::<Account>().get(customer, "main").await;
    stored.expect("read").expect("stored").balance
}

/// Typed writes round-trip; a write at a stale ETag is a conflict and
/// changes nothing.
pub async fn typed_writes_round_trip_and_a_stale_etag_is_a_conflict(ctx: &Ctx) {
    open(&ctx.store, "ann", 10).await;
    let t = ctx.store.table::<Account>();
    let v1 = t.get("ann", "main").await.expect("read").expect("stored");
    let mut v2 = v1.clone();
    v2.balance = 20;
    let v2 = t.replace(&v2).await.expect("replace at the fresh ETag");
    for stale in [t.replace(&v1).await.map(drop), t.delete(&v1).await] {
        let e = stale.expect_err("stale ETag");
        assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
    }
    assert_eq!(balance(&ctx.store, "ann").await, 20);
    t.delete(&v2).await.expect("delete");
    assert!(t.get("ann", "main").await.expect("read").is_none());
}

/// A unit over two tables of one partition commits both writes together.
pub async fn a_unit_over_two_tables_commits_both(ctx: &Ctx) {
    open(&ctx.store, "bo", 100).await;
    let mut unit = ctx.store.lock("bo").await.expect("locked");
    let main = unit.get::<Account>("main").await.expect("read");
    let mut main = main.expect("stored");
    main.balance -= 30;
    unit.replace(&main).expect("staged");
    let entry = Entry {
        customer: "bo".into(),
        id: "e1".into(),
        amount: -30,
    };
    unit.insert(&entry).expect("staged");
    unit.commit().await.expect("committed");
    assert_eq!(balance(&ctx.store, "bo").await, 70);
    let stored = ctx.store.table::<Entry>().get("bo", "e1").await;
    assert_eq!(stored.expect("read").map(|e| e.amount), Some(-30));
}

/// A unit whose lock was broken by an operator is told `LeaseLost` at its
/// commit once its renewal has seen the break, and nothing is written.
pub async fn a_unit_whose_lease_was_lost_does_not_commit(ctx: &Ctx) {
    let store = Store::builder_shared(ctx.backend().clone())
        .table_prefix(ctx.prefix())
        .expect("valid prefix")
        .lease_options(LeaseOptions::new().with_duration(ctx.lease_duration()))
        .build()
        .expect("valid store");
    open(&store, "cy", 5).await;
    let mut unit = store.lock("cy").await.expect("locked");
    let main = unit.get::<Account>("main").await.expect("read");
    let mut main = main.expect("stored");
    main.balance = 0;
    unit.replace(&main).expect("staged");
    let name = store.lock_lease_name("cy").expect("valid name");
    let broken = store
        .locks()
        .break_lease(name.as_str(), Some(Duration::ZERO));
    broken.await.expect("broken");
    // The renewer renews every third of the lease and sees the break.
    tokio::time::sleep(ctx.lease_duration() / 3 + Duration::from_secs(1) + ctx.slack()).await;
    let e = unit.commit().await.expect_err("lease lost");
    assert_eq!(e.kind(), ErrorKind::LeaseLost, "{e}");
    assert_eq!(balance(&store, "cy").await, 5, "nothing written");
}

/// A transaction moves money between two partitions without a lease.
pub async fn a_transaction_commits_across_partitions(ctx: &Ctx) {
    open(&ctx.store, "di", 50).await;
    open(&ctx.store, "ed", 0).await;
    let mut tx = ctx.store.transaction();
    for (customer, change) in [("di", -20), ("ed", 20)] {
        let account = tx.get::<Account>(customer, "main").await.expect("read");
        let mut account = account.expect("stored");
        account.balance += change;
        tx.replace(&account).expect("staged");
    }
    tx.commit().await.expect("committed");
    assert_eq!(balance(&ctx.store, "di").await, 30);
    assert_eq!(balance(&ctx.store, "ed").await, 20);
}

/// An insert of a unique value another entity holds is refused with
/// `ValueTaken`, and stores nothing.
pub async fn a_taken_unique_value_is_refused(ctx: &Ctx) {
    let users = ctx.store.table::<User>();
    let user = |region: &str, id: &str| User {
        region: region.into(),
        id: id.into(),
        email: "fay@example.org".into(),
    };
    users.insert(user("eu", "1")).await.expect("first");
    let e = users.insert(user("us", "2")).await.expect_err("taken");
    assert_eq!(e.kind(), ErrorKind::ValueTaken, "{e}");
    assert!(users.get("us", "2").await.expect("read").is_none());
}

/// Run-once work runs for the first caller only.
pub async fn do_once_runs_the_work_once(ctx: &Ctx) {
    let name = format!("{}-once", ctx.prefix());
    let leases = ctx.store.leases();
    let first = leases.do_once(&name, |_| async { Ok::<_, crate::Error>(1) });
    let first = first.await.expect("ran");
    let ran = OnceOutcome::Ran {
        output: 1,
        previous_attempt_unfinished: false,
    };
    assert_eq!(first, ran);
    let again = leases.do_once(&name, |_| async { Ok::<_, crate::Error>(2) });
    assert_eq!(again.await.expect("done"), OnceOutcome::AlreadyDone);
}
