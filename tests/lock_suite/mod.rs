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
        store.pending_commit("carol").await.unwrap().is_none(),
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
        store.pending_commit("dave").await.unwrap().is_none(),
        "journal withdrawn"
    );
}

/// A row with two optional properties, so merges and replaces differ.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "LockNotes")]
pub struct Note {
    #[entity(partition_key)]
    pub customer: String,
    #[entity(row_key)]
    pub id: String,
    pub a: Option<i64>,
    pub b: Option<i64>,
}

/// The stored content of a note (`None`: no row).
type Content = Option<(Option<i64>, Option<i64>)>;

fn content(v: Option<&Note>) -> Content {
    v.map(|n| (n.a, n.b))
}

/// The headline of issue 14 item 1: a refused second insert keeps the
/// first one staged, and the commit stores it.
pub async fn a_refused_insert_keeps_the_staged_insert(backend: Arc<dyn Backend>, prefix: &str) {
    let store = process(backend, prefix);
    let row = Note {
        customer: "erin".into(),
        id: "n1".into(),
        a: Some(1),
        b: None,
    };
    let mut unit = store.lock("erin").await.unwrap();
    unit.insert(&row).unwrap();
    assert_eq!(unit.staged(), 1);
    let again = Note {
        a: Some(2),
        ..row.clone()
    };
    let e = unit.insert(&again).unwrap_err();
    assert_eq!(e.kind(), leasehold::ErrorKind::Invalid, "{e}");
    assert!(e.to_string().contains("\"n1\""), "names the row: {e}");
    assert_eq!(unit.staged(), 1, "the refused insert kept the staged one");
    let seen = unit.get::<Note>("n1").await.unwrap().unwrap();
    assert_eq!(*seen, row, "the staged view is the first insert");
    let report = unit.commit().await.unwrap();
    assert_eq!(report.operations, 1);
    let stored = store.table::<Note>().get("erin", "n1").await.unwrap();
    assert_eq!(
        stored.map(|v| v.into_inner()),
        Some(row),
        "the row is stored"
    );
}

/// The six staging calls of a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    Insert,
    Replace,
    Merge,
    Delete,
    Upsert,
    UpsertMerge,
}

impl Call {
    pub const ALL: [Call; 6] = [
        Call::Insert,
        Call::Replace,
        Call::Merge,
        Call::Delete,
        Call::Upsert,
        Call::UpsertMerge,
    ];

    /// What the call does to `stored` when applied alone, writing `(a, b)`;
    /// `None` when it would fail there.
    fn model(self, stored: Content, value: (Option<i64>, Option<i64>)) -> Option<Content> {
        let merge = |base: Content| {
            let (a0, b0) = base.unwrap_or((None, None));
            Some((value.0.or(a0), value.1.or(b0)))
        };
        match (self, stored) {
            (Call::Insert, None) => Some(Some(value)),
            (Call::Insert, Some(_)) => None,
            (Call::Replace | Call::Merge | Call::Delete, None) => None,
            (Call::Replace, Some(_)) | (Call::Upsert, _) => Some(Some(value)),
            (Call::Merge, s @ Some(_)) | (Call::UpsertMerge, s) => Some(merge(s)),
            (Call::Delete, Some(_)) => Some(None),
        }
    }

    /// Stages the call in `unit` on `current` (a value the unit returned)
    /// or `fresh`, carrying `value`.
    fn stage(
        self,
        unit: &mut leasehold::lock::Unit,
        current: Option<&leasehold::Versioned<Note>>,
        fresh: &Note,
        value: (Option<i64>, Option<i64>),
    ) -> leasehold::Result<()> {
        let mut note = fresh.clone();
        (note.a, note.b) = value;
        let versioned = || {
            let mut v = current.expect("a value read in the unit").clone();
            (v.a, v.b) = value;
            v
        };
        match self {
            Call::Insert => unit.insert(&note),
            Call::Replace => unit.replace(&versioned()),
            Call::Merge => unit.merge(&versioned()),
            Call::Delete => unit.delete(&versioned()),
            Call::Upsert => unit.upsert(&note),
            Call::UpsertMerge => unit.upsert_merge(&note),
        }
    }
}

/// Every pair of staging calls on one row: the second call is refused
/// exactly where applying the two one after the other would fail, and
/// then leaves the staged write as it was; otherwise the commit stores what
/// the two calls applied in order would. One cell per pair, named in every
/// failure.
pub async fn writing_a_row_twice_follows_the_folding_table(
    backend: Arc<dyn Backend>,
    prefix: &str,
) {
    let store = process(backend, prefix);
    let notes = store.table::<Note>();
    const BASE: (Option<i64>, Option<i64>) = (Some(100), Some(100));
    const FIRST: (Option<i64>, Option<i64>) = (Some(1), None);
    const SECOND: (Option<i64>, Option<i64>) = (None, Some(2));
    let mut refused = 0;
    for first in Call::ALL {
        for then in Call::ALL {
            let cell = format!("{first:?} then {then:?}");
            let id = format!("{first:?}-{then:?}");
            let fresh = Note {
                customer: "fold".into(),
                id: id.clone(),
                a: None,
                b: None,
            };
            // The row exists unless the first call creates it.
            let before: Content = (first != Call::Insert).then_some(BASE);
            if before.is_some() {
                notes
                    .upsert(Note {
                        a: BASE.0,
                        b: BASE.1,
                        ..fresh.clone()
                    })
                    .await
                    .unwrap();
            }
            let after_first = first.model(before, FIRST).expect("first call applies");
            let expected = then.model(after_first, SECOND);

            let mut unit = store.lock("fold").await.unwrap();
            let read = unit.get::<Note>(id.as_str()).await.unwrap();
            assert_eq!(content(read.as_deref()), before, "{cell}: read");
            first
                .stage(&mut unit, read.as_ref(), &fresh, FIRST)
                .unwrap_or_else(|e| panic!("{cell}: first call refused: {e}"));
            let staged = unit.staged();
            let view = unit.get::<Note>(id.as_str()).await.unwrap();
            assert_eq!(content(view.as_deref()), after_first, "{cell}: first view");
            let current = view.as_ref().or(read.as_ref());
            let outcome = then.stage(&mut unit, current, &fresh, SECOND);
            let stored_expected = match (&outcome, expected) {
                (Err(e), None) => {
                    refused += 1;
                    assert_eq!(e.kind(), leasehold::ErrorKind::Invalid, "{cell}: {e}");
                    assert!(e.to_string().contains(&id), "{cell}: names the row: {e}");
                    assert_eq!(unit.staged(), staged, "{cell}: staged count unchanged");
                    let again = unit.get::<Note>(id.as_str()).await.unwrap();
                    assert_eq!(
                        again.as_deref(),
                        view.as_deref(),
                        "{cell}: staged write unchanged"
                    );
                    after_first
                }
                (Ok(()), Some(expected)) => {
                    let seen = unit.get::<Note>(id.as_str()).await.unwrap();
                    assert_eq!(content(seen.as_deref()), expected, "{cell}: folded view");
                    expected
                }
                (Err(e), Some(_)) => panic!("{cell}: refused, expected a fold: {e}"),
                (Ok(()), None) => panic!("{cell}: accepted, expected a refusal"),
            };
            unit.commit()
                .await
                .unwrap_or_else(|e| panic!("{cell}: commit failed: {e}"));
            let stored = notes.get("fold", id.as_str()).await.unwrap();
            assert_eq!(
                content(stored.as_deref()),
                stored_expected,
                "{cell}: stored after commit"
            );
        }
    }
    assert_eq!(refused, 8, "the refused cells of the table");
}

/// An upsert (or upsert-merge) then a delete of a row the unit read as
/// absent writes nothing, and the commit succeeds.
pub async fn an_upsert_then_delete_of_an_absent_row_writes_nothing(
    backend: Arc<dyn Backend>,
    prefix: &str,
) {
    let store = process(backend, prefix);
    for (i, merge) in [false, true].into_iter().enumerate() {
        let id = format!("gone{i}");
        let note = Note {
            customer: "frank".into(),
            id: id.clone(),
            a: Some(1),
            b: None,
        };
        let mut unit = store.lock("frank").await.unwrap();
        assert!(unit.get::<Note>(id.as_str()).await.unwrap().is_none());
        if merge {
            unit.upsert_merge(&note).unwrap();
        } else {
            unit.upsert(&note).unwrap();
        }
        let view = unit.get::<Note>(id.as_str()).await.unwrap().unwrap();
        unit.delete(&view).unwrap();
        assert_eq!(unit.staged(), 0, "merge {merge}");
        unit.commit().await.unwrap();
        assert!(
            store
                .table::<Note>()
                .get("frank", id.as_str())
                .await
                .unwrap()
                .is_none()
        );
    }
}

/// A staged view passed to a unit that stages no write of that row has no
/// ETag to write under: replace, merge and delete refuse it and leave the
/// unit's staged writes as they were.
pub async fn a_staged_view_from_another_unit_is_refused_without_change(
    backend: Arc<dyn Backend>,
    prefix: &str,
) {
    let store = process(backend, prefix);
    let note = |id: &str, a: i64| Note {
        customer: "gina".into(),
        id: id.into(),
        a: Some(a),
        b: None,
    };
    let mut first = store.lock("gina").await.unwrap();
    first.upsert(&note("x", 1)).unwrap();
    let foreign = first.get::<Note>("x").await.unwrap().unwrap();
    first.abandon().await.unwrap();

    let mut unit = store.lock("gina").await.unwrap();
    unit.insert(&note("kept", 7)).unwrap();
    let kept = unit
        .get::<Note>("kept")
        .await
        .unwrap()
        .map(|v| v.into_inner());
    for (call, result) in [
        ("replace", unit.replace(&foreign)),
        ("merge", unit.merge(&foreign)),
        ("delete", unit.delete(&foreign)),
    ] {
        let e = result.expect_err(call);
        assert_eq!(e.kind(), leasehold::ErrorKind::Invalid, "{call}: {e}");
        assert!(e.to_string().contains("staged view"), "{call}: {e}");
    }
    assert_eq!(unit.staged(), 1);
    assert_eq!(
        unit.get::<Note>("kept")
            .await
            .unwrap()
            .map(|v| v.into_inner()),
        kept
    );
    unit.commit().await.unwrap();
    let t = store.table::<Note>();
    assert_eq!(t.get("gina", "kept").await.unwrap().unwrap().a, Some(7));
    assert!(t.get("gina", "x").await.unwrap().is_none(), "nothing else");
}

/// Breaking a lock nobody holds is a typed "not held" outcome, not an
/// error; breaking a held one reports it broken.
pub async fn breaking_a_free_lock_reports_not_held(backend: Arc<dyn Backend>, prefix: &str) {
    use leasehold::lease::BreakOutcome;
    use std::time::Duration;

    let store = process(backend, prefix);
    let name = store.lock_lease_name("hank").unwrap();
    store.lock("hank").await.unwrap().abandon().await.unwrap();
    let outcome = store
        .locks()
        .break_lease(name.as_str(), Some(Duration::ZERO))
        .await
        .expect("breaking a free lock is not an error");
    assert_eq!(outcome, BreakOutcome::NotHeld);
    let unit = store.lock("hank").await.unwrap();
    let outcome = store
        .locks()
        .break_lease(name.as_str(), Some(Duration::ZERO))
        .await
        .unwrap();
    assert_eq!(
        outcome,
        BreakOutcome::Broken {
            left: Duration::ZERO
        }
    );
    drop(unit);
    let missing = store
        .locks()
        .break_lease("no/such-lock", Some(Duration::ZERO))
        .await
        .unwrap_err();
    assert_eq!(missing.kind(), leasehold::ErrorKind::NotFound, "{missing}");
}

/// A lock names its holder: another process's `describe` reports the
/// holding process's identity while it holds the lock, also when its unit
/// was leaked without a release (a hung or killed process); the next
/// holder replaces it, and stays named as the last holder after release.
pub async fn a_lock_names_its_holder_even_when_its_unit_is_leaked(
    backend: Arc<dyn Backend>,
    prefix: &str,
) {
    use std::time::Duration;

    let holder = process(backend.clone(), prefix);
    let operator = process(backend.clone(), prefix);
    assert_ne!(holder.locks().owner(), operator.locks().owner());
    let name = operator.lock_lease_name("ivy").unwrap();
    let describe = || operator.locks().describe(name.as_str());

    let unit = holder.lock("ivy").await.unwrap();
    let d = describe().await.unwrap();
    assert!(d.is_held(), "{d:?}");
    assert_eq!(d.owner.as_deref(), Some(holder.locks().owner()), "{d:?}");
    assert!(d.acquired_at.is_some(), "{d:?}");
    // Leaked: never released, never committed.
    std::mem::forget(unit);
    let d = describe().await.unwrap();
    assert!(d.is_held());
    assert_eq!(d.owner.as_deref(), Some(holder.locks().owner()));

    // An operator breaks it; the next process records itself.
    operator
        .locks()
        .break_lease(name.as_str(), Some(Duration::ZERO))
        .await
        .unwrap();
    let next = process(backend, prefix);
    let unit = next.lock("ivy").await.unwrap();
    let d = describe().await.unwrap();
    assert_eq!(d.owner.as_deref(), Some(next.locks().owner()), "{d:?}");
    unit.abandon().await.unwrap();
    let d = describe().await.unwrap();
    assert!(!d.is_held());
    assert_eq!(
        d.owner.as_deref(),
        Some(next.locks().owner()),
        "the last holder"
    );
}
