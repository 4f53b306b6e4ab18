//! Partition-lock checks that run on any backend (memory, Azurite).
#![allow(dead_code)]

use std::sync::Arc;

use leasehold::backend::Backend;
use leasehold::{Entity, Store};

/// A customer's account.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "LockAccounts")]
pub struct Account {
    #[entity(partition_key)]
    pub customer: String,
    #[entity(row_key)]
    pub name: String,
    pub balance: i64,
}

/// One applied transfer.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "LockLedger")]
pub struct Entry {
    #[entity(partition_key)]
    pub customer: String,
    #[entity(row_key)]
    pub id: String,
    pub from: String,
    pub to: String,
    pub amount: i64,
}

/// A third table, for three-table units.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "LockAudit")]
pub struct Audit {
    #[entity(partition_key)]
    pub customer: String,
    #[entity(row_key)]
    pub id: String,
    pub note: String,
}

/// A store ("process") on `backend` with the given table prefix.
pub fn process(backend: Arc<dyn Backend>, prefix: &str) -> Store {
    Store::builder_shared(backend)
        .table_prefix(prefix)
        .expect("valid prefix")
        .build()
        .expect("valid store")
}

/// Opens `accounts` accounts for `customer` with 100 each.
pub async fn open_accounts(store: &Store, customer: &str, accounts: usize) {
    let t = store.table::<Account>();
    for i in 0..accounts {
        t.upsert(Account {
            customer: customer.into(),
            name: format!("acct{i}"),
            balance: 100,
        })
        .await
        .expect("open account");
    }
}

/// Moves `amount` between two accounts of `customer` under the partition
/// lock, with a ledger entry: a two-table unit. Returns false when the
/// source lacks funds.
pub async fn transfer(
    store: &Store,
    customer: &str,
    from: &str,
    to: &str,
    amount: i64,
    id: &str,
) -> leasehold::Result<bool> {
    let mut unit = store.lock(customer).await?;
    let mut a = unit.get::<Account>(from).await?.expect("source exists");
    let mut b = unit.get::<Account>(to).await?.expect("target exists");
    if a.balance < amount {
        unit.abandon().await?;
        return Ok(false);
    }
    a.balance -= amount;
    b.balance += amount;
    unit.replace(&a)?;
    unit.replace(&b)?;
    unit.insert(&Entry {
        customer: customer.into(),
        id: id.into(),
        from: from.into(),
        to: to.into(),
        amount,
    })?;
    unit.commit().await?;
    Ok(true)
}

/// The sum of a customer's balances and the number of ledger entries.
pub async fn totals(store: &Store, customer: &str) -> (i64, usize) {
    let accounts = store
        .table::<Account>()
        .query()
        .partition(customer)
        .all()
        .await
        .expect("accounts");
    let ledger = store
        .table::<Entry>()
        .query()
        .partition(customer)
        .all()
        .await
        .expect("ledger");
    (accounts.iter().map(|a| a.balance).sum(), ledger.len())
}

/// 8 tasks × `per_task` transfers across 2 tables on one partition conserve
/// the total exactly, and the ledger counts the committed transfers.
pub async fn concurrent_transfers_conserve_money(
    backend: Arc<dyn Backend>,
    prefix: &str,
    per_task: usize,
) {
    let store = process(backend, prefix);
    open_accounts(&store, "bank", 4).await;
    let mut tasks = Vec::new();
    for t in 0..8usize {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut committed = 0;
            for i in 0..per_task {
                let from = format!("acct{}", (t + i) % 4);
                let to = format!("acct{}", (t + i + 1) % 4);
                if transfer(
                    &store,
                    "bank",
                    &from,
                    &to,
                    1 + (i as i64 % 7),
                    &format!("t{t}-{i}"),
                )
                .await
                .expect("transfer")
                {
                    committed += 1;
                }
            }
            committed
        }));
    }
    let mut committed = 0;
    for task in tasks {
        committed += task.await.expect("task");
    }
    let (total, entries) = totals(&store, "bank").await;
    assert_eq!(total, 400, "money is conserved");
    assert_eq!(
        entries, committed,
        "one ledger entry per committed transfer"
    );
    assert!(committed > 0);
}

/// Reads see the unit's own staged writes; other partitions are refused;
/// dropping a unit sends nothing.
pub async fn units_see_their_writes_and_stay_in_their_partition(
    backend: Arc<dyn Backend>,
    prefix: &str,
) {
    let store = process(backend, prefix);
    open_accounts(&store, "alice", 2).await;
    let mut unit = store.lock("alice").await.expect("lock");
    let mut a = unit.get::<Account>("acct0").await.unwrap().unwrap();
    a.balance = 7;
    unit.replace(&a).unwrap();
    let seen = unit.get::<Account>("acct0").await.unwrap().unwrap();
    assert_eq!(seen.balance, 7, "reads see staged writes");
    let mut seen = seen;
    seen.balance = 8;
    unit.replace(&seen)
        .expect("a staged view can be written again");
    unit.insert(&Account {
        customer: "alice".into(),
        name: "new".into(),
        balance: 1,
    })
    .unwrap();
    assert_eq!(
        unit.get::<Account>("new").await.unwrap().unwrap().balance,
        1
    );
    let gone = unit.get::<Account>("acct1").await.unwrap().unwrap();
    unit.delete(&gone).unwrap();
    assert!(
        unit.get::<Account>("acct1").await.unwrap().is_none(),
        "staged delete"
    );
    let e = unit
        .insert(&Account {
            customer: "bob".into(),
            name: "x".into(),
            balance: 0,
        })
        .unwrap_err();
    assert_eq!(e.kind(), leasehold::ErrorKind::Invalid);
    assert!(e.to_string().contains("\"bob\""), "{e}");
    drop(unit);
    // Nothing was sent: the stored rows are untouched.
    let t = store.table::<Account>();
    assert_eq!(t.get("alice", "acct0").await.unwrap().unwrap().balance, 100);
    assert!(t.get("alice", "new").await.unwrap().is_none());
    assert!(t.get("alice", "acct1").await.unwrap().is_some());
    // The dropped unit's lock is free again (released in the background).
    let unit = store.lock("alice").await.expect("lock again");
    unit.abandon().await.unwrap();
}

/// A three-table commit applies everything, and the journal is cleared.
pub async fn multi_table_commit_applies_all(backend: Arc<dyn Backend>, prefix: &str) {
    let store = process(backend, prefix);
    open_accounts(&store, "carol", 2).await;
    let mut unit = store.lock("carol").await.unwrap();
    let mut a = unit.get::<Account>("acct0").await.unwrap().unwrap();
    a.balance -= 10;
    unit.replace(&a).unwrap();
    unit.insert(&Entry {
        customer: "carol".into(),
        id: "e1".into(),
        from: "acct0".into(),
        to: "out".into(),
        amount: 10,
    })
    .unwrap();
    unit.upsert(&Audit {
        customer: "carol".into(),
        id: "a1".into(),
        note: "withdrawal".into(),
    })
    .unwrap();
    let report = unit.commit().await.unwrap();
    assert!(report.journalled);
    assert_eq!(
        (report.tables, report.operations, report.batches),
        (3, 3, 3)
    );
    assert_eq!(
        store
            .table::<Account>()
            .get("carol", "acct0")
            .await
            .unwrap()
            .unwrap()
            .balance,
        90
    );
    assert!(
        store
            .table::<Entry>()
            .get("carol", "e1")
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        store
            .table::<Audit>()
            .get("carol", "a1")
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        store.pending_journal("carol").await.unwrap().is_none(),
        "journal cleared"
    );
}

/// A stale read fails the whole commit and applies nothing.
pub async fn stale_reads_fail_the_whole_commit(backend: Arc<dyn Backend>, prefix: &str) {
    let store = process(backend, prefix);
    open_accounts(&store, "dave", 2).await;
    let mut unit = store.lock("dave").await.unwrap();
    let mut a = unit.get::<Account>("acct0").await.unwrap().unwrap();
    // An optimistic writer that bypasses the lock changes the row.
    store
        .table::<Account>()
        .update_with("dave", "acct0", |a| a.balance = 1)
        .await
        .unwrap();
    a.balance -= 10;
    unit.replace(&a).unwrap();
    unit.insert(&Entry {
        customer: "dave".into(),
        id: "e1".into(),
        from: "acct0".into(),
        to: "x".into(),
        amount: 10,
    })
    .unwrap();
    let e = unit.commit().await.unwrap_err();
    let inner = match &e {
        leasehold::Error::Batch { source, .. } => source.kind(),
        other => other.kind(),
    };
    assert_eq!(inner, leasehold::ErrorKind::Conflict, "{e}");
    assert!(
        store
            .table::<Entry>()
            .get("dave", "e1")
            .await
            .unwrap()
            .is_none(),
        "nothing applied"
    );
    assert_eq!(
        store
            .table::<Account>()
            .get("dave", "acct0")
            .await
            .unwrap()
            .unwrap()
            .balance,
        1
    );
    assert!(
        store.pending_journal("dave").await.unwrap().is_none(),
        "journal withdrawn"
    );
}

/// A refused staging call leaves the staged writes as they were: the row
/// inserted first is still stored by the commit.
pub async fn refused_staging_keeps_the_earlier_write(backend: Arc<dyn Backend>, prefix: &str) {
    let store = process(backend, prefix);
    let audits = store.table::<Audit>();
    let row = Audit {
        customer: "refused".into(),
        id: "a1".into(),
        note: "first".into(),
    };
    let mut unit = store.lock("refused").await.expect("lock");
    unit.insert(&row).expect("first insert is staged");
    assert_eq!(unit.staged(), 1);
    let again = Audit {
        note: "second".into(),
        ..row.clone()
    };
    let e = unit.insert(&again).expect_err("a second insert is refused");
    assert_eq!(e.kind(), leasehold::ErrorKind::Invalid, "{e}");
    assert!(e.to_string().contains("already inserts"), "{e}");
    assert_eq!(unit.staged(), 1, "the refused call kept the first insert");
    let staged = unit
        .get::<Audit>("a1")
        .await
        .expect("read")
        .expect("staged");
    assert_eq!(staged.note, "first");
    unit.commit().await.expect("commit");
    let stored = audits
        .get("refused", "a1")
        .await
        .expect("get")
        .expect("the first insert was committed");
    assert_eq!(stored.into_inner(), row);
}
