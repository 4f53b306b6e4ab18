//! Partition-lock checks: units of work, their request budgets, crash
//! recovery at every step, stale holders.

use std::sync::Arc;
use std::time::Duration;

use leasehold::backend::Backend;
use leasehold::backend::Op;
use leasehold::lease::LeaseOptions;
use leasehold::store::SweepReport;
use leasehold::testing::{CountingBackend, Fault, FaultInjector, FaultyBackend, RequestCounter};
use leasehold::{Entity, ErrorKind, Store};

use super::{Clock, Ctx, sweep};

crate::checks::checks! {

/// A customer's account.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "LockAccounts")]
struct Account {
    #[entity(partition_key)]
    pub customer: String,
    #[entity(row_key)]
    pub name: String,
    pub balance: i64,
}

/// One applied transfer.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "LockLedger")]
struct Entry {
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
struct Audit {
    #[entity(partition_key)]
    pub customer: String,
    #[entity(row_key)]
    pub id: String,
    pub note: String,
}

/// A store ("process") on `backend` with the given table prefix.
fn process(backend: Arc<dyn Backend>, prefix: &str) -> Store {
    Store::builder_shared(backend)
        .table_prefix(prefix)
        .expect("valid prefix")
        .build()
        .expect("valid store")
}

/// Opens `accounts` accounts for `customer` with 100 each.
async fn open_accounts(store: &Store, customer: &str, accounts: usize) {
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
async fn transfer(
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
async fn totals(store: &Store, customer: &str) -> (i64, usize) {
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

/// 8 tasks × 50 transfers across 2 tables on one partition conserve
/// the total exactly, and the ledger counts the committed transfers.
plain(oauth) async fn concurrent_transfers_conserve_money(ctx) {
    let (backend, prefix) = (ctx.backend().clone(), ctx.prefix());
    let per_task = 50;
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
                match transfer(
                    &store,
                    "bank",
                    &from,
                    &to,
                    1 + (i as i64 % 7),
                    &format!("t{t}-{i}"),
                )
                .await
                {
                    Ok(true) => committed += 1,
                    Ok(false) => {}
                    // A storage slow enough to hold a renewal back past the
                    // commit margin: the commit sent nothing (checked below
                    // by the totals), and the next transfer goes on.
                    Err(e) if e.kind() == ErrorKind::LeaseLost => {}
                    Err(e) => panic!("transfer: {e:?}"),
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
plain(oauth) async fn units_see_their_writes_and_stay_in_their_partition(ctx) {
    let (backend, prefix) = (ctx.backend().clone(), ctx.prefix());
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

/// A three-table commit applies everything.
plain(oauth) async fn multi_table_commit_applies_all(ctx) {
    let (backend, prefix) = (ctx.backend().clone(), ctx.prefix());
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
    assert!(report.transaction.is_some());
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
}

/// A stale read fails the whole commit and applies nothing.
plain(oauth) async fn stale_reads_fail_the_whole_commit(ctx) {
    let (backend, prefix) = (ctx.backend().clone(), ctx.prefix());
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
}

/// A row with two optional properties, so merges and replaces differ.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "LockNotes")]
struct Note {
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
plain(oauth) async fn a_refused_insert_keeps_the_staged_insert(ctx) {
    let (backend, prefix) = (ctx.backend().clone(), ctx.prefix());
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
enum Call {
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
plain(oauth) async fn writing_a_row_twice_follows_the_folding_table(ctx) {
    let (backend, prefix) = (ctx.backend().clone(), ctx.prefix());
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
plain(oauth) async fn an_upsert_then_delete_of_an_absent_row_writes_nothing(ctx) {
    let (backend, prefix) = (ctx.backend().clone(), ctx.prefix());
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
plain(oauth) async fn a_staged_view_from_another_unit_is_refused_without_change(ctx) {
    let (backend, prefix) = (ctx.backend().clone(), ctx.prefix());
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
plain(oauth) async fn breaking_a_free_lock_reports_not_held(ctx) {
    let (backend, prefix) = (ctx.backend().clone(), ctx.prefix());
    use std::time::Duration;

    let store = process(backend, prefix);
    let name = store.lock_lease_name("hank").unwrap();
    store.lock("hank").await.unwrap().abandon().await.unwrap();
    let outcome = store
        .locks()
        .break_lease(name.as_str(), Some(Duration::ZERO))
        .await
        .expect("breaking a free lock is not an error");
    assert_eq!(outcome, None, "nobody held it");
    let unit = store.lock("hank").await.unwrap();
    let outcome = store
        .locks()
        .break_lease(name.as_str(), Some(Duration::ZERO))
        .await
        .unwrap();
    assert_eq!(outcome, Some(Duration::ZERO));
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
plain(oauth) async fn a_lock_names_its_holder_even_when_its_unit_is_leaked(ctx) {
    let (backend, prefix) = (ctx.backend().clone(), ctx.prefix());
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

/// A store counting its requests, warmed up so one-time setup (containers,
/// tables, the lock blob) is out of the counts. It took the lock last, so
/// its next unit finds the lock blob unchanged and does not read it.
async fn counted(ctx: &Ctx) -> (Store, RequestCounter) {
    let counting = CountingBackend::new(ctx.backend().clone());
    let counter = counting.counter();
    // On real time, the longest lease: no renewal falls within what is
    // counted, however slow the service answers; and tenures of a minute,
    // so that no tenure ends (handing over by storage instead of within
    // the process) within what is counted on a busy machine either.
    let lease = match ctx.clock() {
        Clock::Paused => LeaseOptions::new(),
        Clock::Real => LeaseOptions::new()
            .with_duration(Duration::from_secs(60))
            .with_handover_limit(1000, Duration::from_secs(60)),
    };
    let store = Store::builder_shared(Arc::new(counting))
        .table_prefix(ctx.prefix())
        .expect("valid prefix")
        .lease_options(lease)
        .build()
        .expect("valid store");
    open_accounts(&store, "alice", 2).await;
    assert!(
        transfer(&store, "alice", "acct0", "acct1", 1, "warmup")
            .await
            .unwrap()
    );
    let mut unit = store.lock("alice").await.unwrap();
    let _ = unit.get::<Audit>("warm").await.unwrap();
    unit.abandon().await.unwrap();
    super::behind_the_answer(&counter).await;
    counter.reset();
    (store, counter)
}

fn counts(counter: &RequestCounter) -> Vec<(Op, u64)> {
    counter.snapshot().into_iter().collect()
}

/// A one-table unit on a lock this process took last costs acquire, its
/// reads, one transaction and release: the acquire's reply shows the lock
/// blob unchanged, so it is not read.
plain(oauth) async fn one_table_unit_costs_acquire_reads_batch_release(ctx) {
    let (store, counter) = counted(ctx).await;
    let mut unit = store.lock("alice").await.unwrap();
    let mut a = unit.get::<Account>("acct0").await.unwrap().unwrap();
    let mut b = unit.get::<Account>("acct1").await.unwrap().unwrap();
    a.balance -= 5;
    b.balance += 5;
    unit.replace(&a).unwrap();
    unit.replace(&b).unwrap();
    let report = unit.commit().await.unwrap();
    super::behind_the_answer(&counter).await;
    assert!(report.transaction.is_none());
    // acquire + R (2) + 1 batch + release = 5
    assert_eq!(
        counts(&counter),
        vec![
            (Op::Get, 2),
            (Op::Batch, 1),
            (Op::AcquireLease, 1),
            (Op::ReleaseLease, 1),
        ]
    );
    assert_eq!(counter.total(), 5);
}

/// A two-table unit on a lock this process took last costs acquire, its
/// reads, the marks on the other table's rows, the commit point (the
/// accounts' transaction with the decision row), the marked rows'
/// transaction, the decision row's delete and release (no lock-blob read,
/// no lock-blob write).
plain(oauth) async fn two_table_unit_costs_acquire_reads_marks_commit_point_finish_release(ctx) {
    let (store, counter) = counted(ctx).await;
    assert!(
        transfer(&store, "alice", "acct0", "acct1", 5, "t1")
            .await
            .unwrap()
    );
    super::behind_the_answer(&counter).await;
    // acquire + R (2) + marks (1) + commit point + T (1) with release +
    // the decision row's delete, behind the answer = 8
    assert_eq!(
        counts(&counter),
        vec![
            (Op::Get, 2),
            (Op::Write, 1),
            (Op::Batch, 3),
            (Op::AcquireLease, 1),
            (Op::ReleaseLease, 1),
        ]
    );
    assert_eq!(counter.total(), 8);
}

/// An audit row with a body near the service's 1 MiB per entity.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "LockBigAudit")]
struct BigAudit {
    #[entity(partition_key)]
    pub customer: String,
    #[entity(row_key)]
    pub id: String,
    #[entity(chunked)]
    pub body: String,
}

/// A row whose mark cannot carry the row the commit leaves beside it (a
/// note of 32 760 characters, within the service's 64 KiB for a string
/// property, but not once quoted in the after-image's JSON text; and a row
/// near the service's 1 MiB) carries it in after-image rows of its own
/// partition: the commit decides in a row all the same, writes no lock
/// blob, is applied whole, and leaves neither marks nor hidden rows.
plain async fn rows_too_large_for_their_after_image_carry_it_in_hidden_rows(ctx) {
    let (store, counter) = counted(ctx).await;
    // 32 760 characters: over 64 KiB once quoted. 15 notes of 32 000: near
    // 1 MiB for the row.
    let notes = ["n".repeat(32_760), "m".repeat(32_000)];
    for (round, note) in notes.iter().enumerate() {
        super::behind_the_answer(&counter).await;
        counter.reset();
        let id = format!("big{round}");
        let mut unit = store.lock("alice").await.unwrap();
        let mut a = unit.get::<Account>("acct0").await.unwrap().unwrap();
        a.balance -= 1;
        unit.replace(&a).unwrap();
        assert!(unit.get::<Audit>(id.as_str()).await.unwrap().is_none());
        let audit = Audit {
            customer: "alice".into(),
            id: id.clone(),
            note: note.clone(),
        };
        if round == 0 {
            unit.insert(&audit).unwrap();
        } else {
            // Near 1 MiB: a chunked body of 15 notes.
            unit.insert(&BigAudit {
                customer: "alice".into(),
                id: id.clone(),
                body: note.repeat(15),
            })
            .unwrap();
        }
        let report = unit.commit().await.unwrap();
        super::behind_the_answer(&counter).await;
        assert!(report.transaction.is_some(), "{report:?}");
        assert_eq!(counter.get(Op::PutBlob), 0, "{:?}", counts(&counter));
        if round == 0 {
            let stored = store
                .table::<Audit>()
                .get("alice", id.as_str())
                .await
                .unwrap();
            assert_eq!(stored.map(|a| a.into_inner().note), Some(note.clone()));
        } else {
            let stored = store
                .table::<BigAudit>()
                .get("alice", id.as_str())
                .await
                .unwrap();
            assert_eq!(stored.map(|a| a.into_inner().body), Some(note.repeat(15)));
        }
        super::behind_the_answer(&counter).await;
        super::lock_many::nothing_pending(&store, &["alice"]).await;
        hidden_rows_gone(&store, "alice").await;
    }
}

/// No hidden row (a decision row or an after-image row) is left in any
/// table of the store in partition `pk`.
async fn hidden_rows_gone(store: &Store, pk: &str) {
    for (table, row) in super::stored_rows(store.backend(), store.table_prefix()).await {
        assert!(
            row.data.partition_key.as_str() != pk
                || !row.data.row_key.as_str().starts_with("_lhCommit."),
            "hidden row {:?} of {table} is left",
            row.data.row_key
        );
    }
}

/// A row that cannot take a mark at all (here an audit row another program
/// wrote with as many properties as the service allows) makes a commit
/// over two tables fail with `Invalid` naming it, before any transaction
/// is sent; nothing changes.
plain async fn a_row_that_cannot_take_a_mark_is_invalid_before_anything_is_sent(ctx) {
    use leasehold::entity::{EntityData, Value};
    use leasehold::{DynamicEntity, PartitionKey, RowKey};
    let (store, counter) = counted(ctx).await;
    let mut wide = DynamicEntity::new(
        PartitionKey::new("alice").unwrap(),
        RowKey::new("wide").unwrap(),
    );
    wide.properties.insert("note", Value::String("n".into()));
    for i in 1..EntityData::MAX_PROPERTIES {
        wide.properties
            .insert(format!("x{i}"), Value::Int32(i as i32));
    }
    store.dynamic_table("LockAudit").insert(wide).await.unwrap();
    super::behind_the_answer(&counter).await;
    counter.reset();
    let mut unit = store.lock("alice").await.unwrap();
    let mut a = unit.get::<Account>("acct0").await.unwrap().unwrap();
    let before = a.balance;
    a.balance -= 1;
    unit.replace(&a).unwrap();
    let mut audit = unit.get::<Audit>("wide").await.unwrap().unwrap();
    audit.note = "changed".into();
    unit.replace(&audit).unwrap();
    let e = unit.commit().await.expect_err("no room for a mark");
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(e.to_string().contains("wide"), "names the row: {e}");
    for op in [Op::Batch, Op::Write, Op::PutBlob] {
        assert_eq!(counter.get(op), 0, "{op:?} sent: {:?}", counts(&counter));
    }
    let t = store.table::<Account>();
    assert_eq!(
        t.get("alice", "acct0").await.unwrap().unwrap().balance,
        before
    );
    let stored = store
        .table::<Audit>()
        .get("alice", "wide")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.note, "n");
}

/// Handed over unit skips acquire read and release.
plain(oauth) async fn handed_over_unit_skips_acquire_read_and_release(ctx) {
    let (store, counter) = counted(ctx).await;
    // The first unit holds the lock while the second queues behind it.
    let first = store.lock("alice").await.unwrap();
    let second = {
        let store = store.clone();
        tokio::spawn(async move {
            let mut unit = store.lock("alice").await.unwrap();
            assert!(unit.is_handed_over());
            let mut a = unit.get::<Account>("acct0").await.unwrap().unwrap();
            a.balance += 1;
            unit.replace(&a).unwrap();
            unit.insert(&Entry {
                customer: "alice".into(),
                id: "h".into(),
                from: "x".into(),
                to: "acct0".into(),
                amount: 1,
            })
            .unwrap();
            unit
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    super::behind_the_answer(&counter).await;
    counter.reset();
    first.abandon().await.unwrap();
    let unit = second.await.unwrap();
    let before_commit = counter.total();
    unit.commit().await.unwrap();
    super::behind_the_answer(&counter).await;
    // Hand-over and the read: R (1); commit: marks (1) + commit point +
    // T (1) + decision delete; no acquire, no lock-blob read or write; the
    // release is real (nobody waits).
    assert_eq!(before_commit, 1, "{:?}", counts(&counter));
    assert_eq!(counter.get(Op::AcquireLease), 0);
    assert_eq!(counter.get(Op::GetBlob), 0);
    assert_eq!(counter.get(Op::Get), 1);
    assert_eq!(counter.get(Op::PutBlob), 0);
    assert_eq!(counter.get(Op::Batch), 3);
    assert_eq!(counter.get(Op::Write), 1);
    assert_eq!(counter.get(Op::ReleaseLease), 1, "the last unit releases");
}

/// One hundred queued units share one acquire and one release.
plain(oauth) async fn one_hundred_queued_units_share_one_acquire_and_one_release(ctx) {
    let (store, counter) = counted(ctx).await;
    let mut tasks = Vec::new();
    let gate = store.lock("alice").await.unwrap();
    for i in 0..100 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut unit = store.lock("alice").await.unwrap();
            let mut a = unit.get::<Account>("acct0").await.unwrap().unwrap();
            a.balance += 1;
            unit.replace(&a).unwrap();
            unit.commit().await.unwrap();
            i
        }));
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    gate.abandon().await.unwrap();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(counter.get(Op::AcquireLease), 1, "{:?}", counts(&counter));
    assert_eq!(counter.get(Op::ReleaseLease), 1);
    assert_eq!(counter.get(Op::Batch), 100);
    assert_eq!(counter.get(Op::Get), 100);
    let a = store
        .table::<Account>()
        .get("alice", "acct0")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(a.balance, 99 + 100);
}

/// The state of customer "crash" as (balance0, balance1, ledger entries).
async fn state(store: &Store) -> (i64, i64, usize) {
    let t = store.table::<Account>();
    let a = t.get("crash", "acct0").await.unwrap().unwrap().balance;
    let b = t.get("crash", "acct1").await.unwrap().unwrap().balance;
    let (_, entries) = totals(store, "crash").await;
    (a, b, entries)
}

const BEFORE: (i64, i64, usize) = (100, 100, 0);
const AFTER: (i64, i64, usize) = (70, 130, 1);

/// A store ("process") like [`process`] whose locks last the context's
/// lease duration.
fn process_leasing(ctx: &Ctx, backend: Arc<dyn Backend>, prefix: &str) -> Store {
    Store::builder_shared(backend)
        .table_prefix(prefix)
        .expect("valid prefix")
        .lease_options(LeaseOptions::new().with_duration(ctx.lease_duration()))
        .build()
        .expect("valid store")
}

/// Long enough for a dead process's lock to run out: two lease durations
/// and a second.
fn past_expiry(ctx: &Ctx) -> Duration {
    ctx.lease_duration() * 2 + Duration::from_secs(1)
}

/// Runs one transfer in a "process" whose backend misbehaves as `plan` says,
/// then lets the lease run out and has a healthy process take the lock.
/// Returns (what the faulty commit said, the final state).
async fn crash_at(
    ctx: &Ctx,
    prefix: &str,
    plan: impl FnOnce(&FaultInjector),
) -> (Result<bool, ErrorKind>, (i64, i64, usize)) {
    let memory = ctx.backend().clone();
    let healthy = process_leasing(ctx, memory.clone(), prefix);
    open_accounts(&healthy, "crash", 2).await;
    let faulty = FaultyBackend::new(memory.clone());
    let injector = faulty.injector();
    let dying = process_leasing(ctx, Arc::new(faulty), prefix);
    // Warm up the dying process (lease blob, tables) before planning faults.
    let unit = dying.lock("crash").await.unwrap();
    unit.abandon().await.unwrap();
    // The healthy process takes the lock last, so the dying one reads the
    // lock blob (and records itself as holder) when it takes it again.
    let unit = healthy.lock("crash").await.unwrap();
    unit.abandon().await.unwrap();
    plan(&injector);
    let outcome = transfer(&dying, "crash", "acct0", "acct1", 30, "t1")
        .await
        .map_err(|e| e.kind());
    // The dead process stays dead; its lease runs out.
    injector.die_now();
    tokio::time::sleep(past_expiry(ctx)).await;
    let unit = healthy
        .lock("crash")
        .await
        .expect("the next holder gets the lock");
    unit.abandon().await.unwrap();
    drop(dying);
    (outcome, state(&healthy).await)
}

/// Crash while marking the rows leaves the partition before: the marks
/// made are withdrawn by whoever meets them.
timed(oauth) async fn crash_while_marking_the_rows_leaves_the_partition_before(ctx) {
    for nth in [1, 2] {
        let prefix = format!("{}m{nth}", ctx.prefix());
        let (outcome, state) = crash_at(ctx, &prefix, |f| {
            f.die_at_nth(Some(Op::Batch), nth);
        })
        .await;
        assert!(outcome.is_err());
        assert_eq!(state, BEFORE, "died at mark transaction {nth}");
    }
}

/// A live holder is slow to send its commit point (its commit point's
/// transaction waits 1.5 s before it is sent): a plain `update_with` that
/// meets the row it marked (the ledger entry it inserts) waits for the
/// commit — it takes the primary's lock once the holder gives it up — and
/// then writes on top of it. The commit answers `Ok` and is whole, and the
/// optimistic write is kept.
timed async fn an_optimistic_write_meeting_a_live_commit_waits_for_it(ctx) {
    let memory = ctx.backend().clone();
    let healthy = process_leasing(ctx, memory.clone(), ctx.prefix());
    open_accounts(&healthy, "live", 2).await;
    let faulty = FaultyBackend::new(memory.clone());
    let injector = faulty.injector();
    let slow = process_leasing(ctx, Arc::new(faulty), ctx.prefix());
    // Warm: the lock blob exists, the tables are known.
    slow.lock("live").await.unwrap().abandon().await.unwrap();
    // The accounts ride in the commit point (the second transaction); the
    // ledger entry is marked first.
    injector.inject(
        Some(Op::Batch),
        2,
        Fault::Delay(Duration::from_millis(1500)),
    );
    let commit = tokio::spawn({
        let slow = slow.clone();
        async move { transfer(&slow, "live", "acct0", "acct1", 30, "t1").await }
    });
    // Wait until the ledger row carries the commit's mark.
    let raw = ctx.backend().clone();
    let table = healthy.table::<Entry>().name().unwrap().clone();
    let key = leasehold::key::PartitionKey::new("live").unwrap();
    let row = leasehold::key::RowKey::new("t1").unwrap();
    loop {
        // The table may not be there yet.
        let stored = raw.get(&table, &key, &row).await.ok().flatten();
        if stored.is_some_and(|s| s.data.properties.get("_lhTxn").is_some()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let after = healthy
        .table::<Entry>()
        .update_with("live", "t1", |e| e.amount += 1)
        .await
        .unwrap();
    assert_eq!(after.amount, 31, "written on top of the commit");
    assert!(commit.await.unwrap().unwrap(), "the commit answers Ok");
    assert_eq!(totals(&healthy, "live").await, (200, 1));
}

/// Lost replies at each step end fully before or after.
timed async fn lost_replies_at_each_step_end_fully_before_or_after(ctx) {
    // (step, request, which one, whether the transfer must still go through)
    let steps: Vec<(&str, Op, u64, bool)> = vec![
        // A lost reply while marking the ledger row fails the commit before
        // its commit point: nothing is applied.
        ("marks", Op::Batch, 1, false),
        // The commit point (the accounts and the decision row): its
        // decision is read back, committed.
        ("commit point", Op::Batch, 2, true),
        ("finishing", Op::Batch, 3, true),
        ("decision row's delete", Op::Write, 1, true),
        ("acquire", Op::AcquireLease, 1, true),
        // A lost lock-blob read is read again when the holder is recorded.
        ("lock-blob read", Op::GetBlob, 1, true),
        // A lost row read fails the unit before anything is written.
        ("first read", Op::Get, 1, false),
    ];
    // The steps run side by side, each on its own tables and lock, so the
    // lease expiries they wait for overlap.
    let runs = steps.iter().enumerate().map(|(i, &(_, op, nth, _))| {
        let prefix = format!("{}s{i}", ctx.prefix());
        async move {
            crash_at(ctx, &prefix, |f| {
                f.lose_reply_nth(Some(op), nth);
            })
            .await
        }
    });
    let results = futures_util::future::join_all(runs).await;
    for ((name, _, _, goes_through), (outcome, state)) in steps.into_iter().zip(results) {
        assert!(
            state == BEFORE || state == AFTER,
            "{name}: partial state {state:?}"
        );
        if outcome == Ok(true) {
            assert_eq!(state, AFTER, "{name}: reported committed");
        }
        if goes_through {
            // Lost write replies are retried or verified.
            assert_eq!(state, AFTER, "{name}: outcome {outcome:?}");
        } else {
            assert_eq!((outcome.is_err(), state), (true, BEFORE), "{name}");
        }
    }
}

/// Commit without enough lease left sends nothing.
timed(oauth) async fn commit_without_enough_lease_left_sends_nothing(ctx) {
    let counting = CountingBackend::new(ctx.backend().clone());
    let counter = counting.counter();
    let inner = counting.inner().clone();
    let store = process_leasing(ctx, Arc::new(counting), ctx.prefix());
    open_accounts(&store, "x", 2).await;
    let mut unit = store.lock("x").await.unwrap();
    let mut a = unit.get::<Account>("acct0").await.unwrap().unwrap();
    a.balance = 0;
    unit.replace(&a).unwrap();
    // Someone breaks the lock; the renewer notices at its next renewal.
    let operator = process_leasing(ctx, inner, ctx.prefix());
    let locks = leasehold::lease::LeaseManager::new(
        operator.backend().clone(),
        leasehold::lease::LeaseOptions::default()
            .with_container(leasehold::key::ContainerName::new("leasehold-locks").unwrap()),
    )
    .unwrap();
    let name = store.lock_lease_name("x").unwrap();
    locks
        .break_lease(name.as_str(), Some(Duration::ZERO))
        .await
        .unwrap();
    tokio::time::sleep(ctx.lease_duration() / 3 + Duration::from_secs(1) + ctx.slack()).await;
    let batches = counter.get(Op::Batch);
    let e = unit.commit().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LeaseLost, "{e}");
    assert_eq!(counter.get(Op::Batch), batches, "nothing sent");
    assert_eq!(
        store
            .table::<Account>()
            .get("x", "acct0")
            .await
            .unwrap()
            .unwrap()
            .balance,
        100
    );
}

/// A paused holder cannot overwrite the next holder.
timed async fn a_paused_holder_cannot_overwrite_the_next_holder(ctx) {
    let memory = ctx.backend().clone();
    let faulty = FaultyBackend::new(memory.clone());
    let pause = faulty.injector();
    let paused = process_leasing(ctx, Arc::new(faulty), ctx.prefix());
    let next = process_leasing(ctx, memory, ctx.prefix());
    open_accounts(&next, "p", 2).await;
    let mut unit = paused.lock("p").await.unwrap();
    let mut a = unit.get::<Account>("acct0").await.unwrap().unwrap();
    // The holder stalls: its renewals hang, its lease runs out.
    pause.set_latency(Some(Op::RenewLease), Duration::from_secs(3600));
    tokio::time::sleep(ctx.lease_duration() + Duration::from_secs(10)).await;
    assert!(
        transfer(&next, "p", "acct0", "acct1", 10, "n1")
            .await
            .unwrap()
    );
    a.balance = 0;
    unit.replace(&a).unwrap();
    unit.insert(&Entry {
        customer: "p".into(),
        id: "stale".into(),
        from: "a".into(),
        to: "b".into(),
        amount: 100,
    })
    .unwrap();
    let e = unit.commit().await.unwrap_err();
    let kind = match &e {
        leasehold::Error::Batch { source, .. } => source.kind(),
        other => other.kind(),
    };
    assert!(
        matches!(kind, ErrorKind::LeaseLost | ErrorKind::Conflict),
        "{e}"
    );
    let t = next.table::<Account>();
    assert_eq!(
        t.get("p", "acct0").await.unwrap().unwrap().balance,
        90,
        "the next holder's write stands"
    );
    assert!(
        next.table::<Entry>()
            .get("p", "stale")
            .await
            .unwrap()
            .is_none()
    );
}

/// A unit of 1,000 writes in one partition and table decides in a row:
/// its rows are marked in 10 transactions sent at once, the commit point is
/// the decision row alone, 10 more transactions finish the rows, and the
/// decision row goes: after the reads, 4 sequential round trips with the
/// releases, whatever the size, and no lock-blob write.
plain(oauth) async fn a_unit_of_a_thousand_writes_to_one_table_decides_in_a_row(ctx) {
    let (store, counter) = counted(ctx).await;
    let mut unit = store.lock("many").await.unwrap();
    for i in 0..1000 {
        unit.insert(&Account {
            customer: "many".into(),
            name: format!("a{i:04}"),
            balance: i,
        })
        .unwrap();
    }
    super::behind_the_answer(&counter).await;
    counter.reset();
    let report = unit.commit().await.unwrap();
    super::behind_the_answer(&counter).await;
    assert!(report.transaction.is_some(), "{report:?}");
    assert_eq!(
        (report.tables, report.batches, report.operations),
        (1, 11, 1000)
    );
    // 10 marking, the commit point, 10 finishing; the decision row's
    // delete; the release.
    assert_eq!(counter.get(Op::Batch), 21, "{:?}", counts(&counter));
    assert_eq!(counter.get(Op::Write), 1, "{:?}", counts(&counter));
    assert_eq!(counter.get(Op::PutBlob), 0, "{:?}", counts(&counter));
    let all = store
        .table::<Account>()
        .query()
        .partition("many")
        .all()
        .await
        .unwrap();
    assert_eq!(all.len(), 1000);
    assert_eq!(all.iter().map(|a| a.balance).sum::<i64>(), 499_500);
    super::lock_many::nothing_pending(&store, &["many"]).await;
    hidden_rows_gone(&store, "many").await;
}

/// A plain read meeting the rows of a writer that died holding its lock
/// before its commit point waits for the lock's lease to run out at a
/// small cost: the short waits for a live writer, then tries of the
/// primary's lock at growing intervals, at most 20 requests in all, before
/// it withdraws the commit and returns the row as it was.
timed async fn a_read_meeting_a_dead_writers_marks_waits_cheaply(ctx) {
    let counting = CountingBackend::new(ctx.backend().clone());
    let counter = counting.counter();
    let reader = process_leasing(ctx, Arc::new(counting), ctx.prefix());
    open_accounts(&reader, "dead", 2).await;
    let faulty = FaultyBackend::new(ctx.backend().clone());
    let injector = faulty.injector();
    let dying = process_leasing(ctx, Arc::new(faulty), ctx.prefix());
    dying.create_table("LockLedger").await.unwrap();
    // Marks (the ledger entry), then death before the commit point.
    injector.die_at_nth(Some(Op::Batch), 2);
    let said = transfer(&dying, "dead", "acct0", "acct1", 30, "t1").await;
    super::behind_the_answer(&counter).await;
    assert!(said.is_err(), "{said:?}");
    super::behind_the_answer(&counter).await;
    counter.reset();
    let entry = reader
        .table::<Entry>()
        .get("dead", "t1")
        .await
        .expect("withdrawn once the lease ran out");
    assert!(entry.is_none(), "the undecided entry is withdrawn");
    let sent = counter.total();
    assert!(sent <= 20, "{sent} requests: {:?}", counts(&counter));
    assert_eq!(totals(&reader, "dead").await, (200, 0));
}

/// A dead holder stays named until and after its lease expires.
timed async fn a_dead_holder_stays_named_until_and_after_its_lease_expires(ctx) {
    let memory = ctx.backend().clone();
    let faulty = FaultyBackend::new(memory.clone());
    let injector = faulty.injector();
    let dying = process_leasing(ctx, Arc::new(faulty), ctx.prefix());
    let operator = process_leasing(ctx, memory, ctx.prefix());
    let name = operator.lock_lease_name("kim").unwrap();
    let unit = dying.lock("kim").await.unwrap();
    // The process dies holding the lock: nothing it sends arrives, not
    // even the release of its dropped unit.
    injector.die_now();
    drop(unit);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let d = operator.locks().describe(name.as_str()).await.unwrap();
    assert!(d.is_held(), "{d:?}");
    assert_eq!(d.owner.as_deref(), Some(dying.locks().owner()));
    tokio::time::sleep(ctx.lease_duration() * 2).await;
    let d = operator.locks().describe(name.as_str()).await.unwrap();
    assert!(!d.is_held(), "expired: {d:?}");
    assert_eq!(
        d.owner.as_deref(),
        Some(dying.locks().owner()),
        "last holder"
    );
}

/// Recording the holder costs a write only when the lock changes hands.
plain(oauth) async fn recording_the_holder_costs_a_write_only_when_the_lock_changes_hands(ctx) {
    let counting = CountingBackend::new(ctx.backend().clone());
    let counter = counting.counter();
    let shared: Arc<dyn Backend> = Arc::new(counting);
    let a = process(shared.clone(), ctx.prefix());
    let b = process(shared, ctx.prefix());
    a.lock("x").await.unwrap().abandon().await.unwrap();
    // (acquire, lock-blob read, holder write, release) for each unit: a
    // lock taken back with its blob unchanged is not read either.
    let cold = |store: &Store| {
        let store = store.clone();
        let counter = counter.clone();
        async move {
            super::behind_the_answer(&counter).await;
            counter.reset();
            store.lock("x").await.unwrap().abandon().await.unwrap();
            (
                counter.get(Op::AcquireLease),
                counter.get(Op::GetBlob),
                counter.get(Op::SetBlobMetadata),
                counter.get(Op::ReleaseLease),
            )
        }
    };
    assert_eq!(cold(&a).await, (1, 0, 0, 1), "a takes back its own lock");
    assert_eq!(cold(&b).await, (1, 1, 1, 1), "b takes it from a");
    assert_eq!(cold(&b).await, (1, 0, 0, 1), "b takes back its own lock");
    assert_eq!(cold(&a).await, (1, 1, 1, 1), "a takes it from b");
    assert_eq!(counter.total(), 4);
}

/// Two stores ("processes") counting their requests together, with the
/// longest lease on real time so that no renewal falls within a count.
fn counted_pair(ctx: &Ctx) -> (Store, Store, RequestCounter) {
    let counting = CountingBackend::new(ctx.backend().clone());
    let counter = counting.counter();
    let shared: Arc<dyn Backend> = Arc::new(counting);
    let lease = match ctx.clock() {
        Clock::Paused => LeaseOptions::new(),
        Clock::Real => LeaseOptions::new().with_duration(Duration::from_secs(60)),
    };
    let store = |backend: Arc<dyn Backend>| {
        Store::builder_shared(backend)
            .table_prefix(ctx.prefix())
            .expect("valid prefix")
            .lease_options(lease.clone())
            .build()
            .expect("valid store")
    };
    (store(shared.clone()), store(shared), counter)
}

/// A process that takes a lock, commits a unit over two tables and gives
/// the lock up sends no lock-blob read when it takes the lock again: the
/// acquire's reply shows the blob's ETag as it last saw it (a commit
/// writes no lock blob).
/// Once another process has taken the lock (its holder record changes the
/// blob), the blob is read again, and the holder recorded again.
plain async fn a_lock_taken_back_unchanged_sends_no_lock_blob_read(ctx) {
    let (a, b, counter) = counted_pair(ctx);
    open_accounts(&a, "back", 2).await;
    // The tables and the lock blob exist; then b takes the lock.
    assert!(
        transfer(&a, "back", "acct0", "acct1", 1, "w")
            .await
            .unwrap()
    );
    b.lock("back").await.unwrap().abandon().await.unwrap();
    let budget = |read: bool| -> Vec<(Op, u64)> {
        let mut ops: Vec<(Op, u64)> = vec![(Op::Get, 2), (Op::Write, 1), (Op::Batch, 3)];
        if read {
            ops.extend([(Op::GetBlob, 1), (Op::SetBlobMetadata, 1)]);
        }
        ops.extend([(Op::AcquireLease, 1), (Op::ReleaseLease, 1)]);
        ops
    };
    let run = |id: &'static str| {
        let (a, counter) = (a.clone(), counter.clone());
        async move {
            super::fresh_tenure().await;
            super::behind_the_answer(&counter).await;
            counter.reset();
            assert!(transfer(&a, "back", "acct0", "acct1", 1, id).await.unwrap());
            super::behind_the_answer(&counter).await;
            counts(&counter)
        }
    };
    // acquire + lock-blob read + holder write + R (2) + marks (1) +
    // commit point + T (1) + decision delete + release = 10
    assert_eq!(run("t1").await, budget(true), "taken from b");
    // acquire + R (2) + marks (1) + commit point + T (1) + decision
    // delete + release = 8
    assert_eq!(run("t2").await, budget(false), "taken back, unchanged");
    assert_eq!(run("t3").await, budget(false), "and again");
    b.lock("back").await.unwrap().abandon().await.unwrap();
    assert_eq!(run("t4").await, budget(true), "taken back after b took it");
    assert_eq!(totals(&a, "back").await, (200, 5));
}

/// Writes `leasehold_acquired` of the lock of `key` as if a process had
/// taken it over in 2001, under the lock's lease.
async fn date_lock_back(store: &Store, key: &str) {
    let name = store.lock_lease_name(key).unwrap();
    let guard = store
        .locks()
        .acquire(name.as_str(), Duration::from_secs(10))
        .await
        .unwrap();
    guard
        .update_metadata(|m| {
            m.insert(
                "leasehold_acquired".to_owned(),
                "2001-01-01T00:00:00.0000000Z".to_owned(),
            );
        })
        .await
        .unwrap();
    guard.release().await.unwrap();
}

/// Whether the blob `name` exists in the lock container.
async fn lock_container_has(store: &Store, name: &str) -> bool {
    use leasehold::backend::BlobBackend as _;
    let blob = leasehold::key::BlobName::new(name).unwrap();
    store
        .backend()
        .blob_properties(store.locks().container(), &blob)
        .await
        .unwrap()
        .is_some()
}

/// A sweep's counts of lock blobs: examined, removed, kept held, kept
/// pending, kept recent.
fn lock_counts(r: &SweepReport) -> (u64, u64, u64, u64, u64) {
    (
        r.lock_blobs_examined,
        r.lock_blobs,
        r.lock_blobs_kept_held,
        r.lock_blobs_kept_pending,
        r.lock_blobs_kept_recent,
    )
}

/// The sorted partition keys of the lock blobs a sweep removed.
fn pruned(report: &SweepReport) -> Vec<String> {
    let mut keys: Vec<String> = report
        .lock_blob_partitions
        .iter()
        .map(|k| k.as_str().to_owned())
        .collect();
    keys.sort();
    keys
}

/// The sweep deletes only free, clean, old lock blobs (and their wait
/// queues): it keeps a lock held here or by another process and a lock
/// taken over within `older_than`, and stamps an undated one
/// (kept until it ages); a dry run deletes nothing; `Duration::ZERO` makes
/// every free, clean lock old; pruned partitions lock again (their blobs
/// created anew) and kept ones roll forward.
plain async fn pruning_deletes_only_free_clean_old_lock_blobs(ctx) {
    let memory = ctx.backend().clone();
    let store = process_leasing(ctx, memory.clone(), ctx.prefix());
    let other = process_leasing(ctx, memory.clone(), ctx.prefix());
    open_accounts(&store, "old", 2).await;
    let hour = Duration::from_secs(3600);
    let e = sweep(&store, Duration::from_secs(u64::MAX), false)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");

    // Free and clean: a transfer over two tables, a bare unit, one dated
    // back.
    assert!(
        transfer(&store, "old", "acct0", "acct1", 1, "o1")
            .await
            .unwrap()
    );
    for key in ["recent", "dated"] {
        store.lock(key).await.unwrap().abandon().await.unwrap();
    }
    date_lock_back(&store, "dated").await;
    // Held here, and by another process.
    let held = store.lock("held").await.unwrap();
    let held_elsewhere = other.lock("elsewhere").await.unwrap();
    // A lock whose wait queue another process used and left.
    let queued = store.lock("queued").await.unwrap();
    // Long enough for the waiter to register (a few round trips), however
    // slowly a busy storage answers: from a measured lock-blob read.
    let sent = tokio::time::Instant::now();
    store
        .locks()
        .describe(store.lock_lease_name("queued").unwrap().as_str())
        .await
        .unwrap();
    let wait = (sent.elapsed() * 20).max(Duration::from_millis(300));
    let e = other.lock_with_timeout("queued", wait).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    queued.abandon().await.unwrap();
    let queue = format!(
        "{}.waiters",
        store
            .lock_lease_name("queued")
            .unwrap()
            .blob_name()
            .unwrap()
            .as_str()
    );
    assert!(
        lock_container_has(&store, &queue).await,
        "the waiter registered"
    );
    // Its registration is removed in the background.
    for _ in 0..100 {
        use leasehold::backend::BlobBackend as _;
        let blob = leasehold::key::BlobName::new(queue.as_str()).unwrap();
        let body = store
            .backend()
            .get_blob(store.locks().container(), &blob)
            .await
            .unwrap()
            .map(|b| b.body)
            .unwrap_or_default();
        if body.iter().all(u8::is_ascii_whitespace) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // A lock blob taken only through `Store::locks` names no holder and
    // no time: it cannot be dated.
    let bare = store.lock_lease_name("bare").unwrap();
    store
        .locks()
        .acquire(bare.as_str(), Duration::from_secs(10))
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    let undated = store.locks().describe(bare.as_str()).await.unwrap();
    assert_eq!(undated.acquired_at, None, "{undated:?}");

    // Older than an hour: only the lock dated back. A dry run says so and
    // deletes nothing.
    let plan = sweep(&store, hour, true).await.unwrap();
    let expected = (7, 1, 2, 0, 4);
    let counts = lock_counts;
    assert!(plan.dry_run);
    assert_eq!(counts(&plan), expected, "{plan:?}");
    assert_eq!(pruned(&plan), ["dated"]);
    let dated = store.lock_lease_name("dated").unwrap();
    assert!(store.locks().describe(dated.as_str()).await.unwrap().exists);
    let report = sweep(&store, hour, false).await.unwrap();
    assert!(!report.dry_run);
    assert_eq!(counts(&report), expected, "{report:?}");
    assert_eq!(pruned(&report), ["dated"]);
    assert!(!store.locks().describe(dated.as_str()).await.unwrap().exists);
    // The undated one was stamped: it ages from now.
    let stamped = store.locks().describe(bare.as_str()).await.unwrap();
    assert!(stamped.acquired_at.is_some(), "{stamped:?}");
    assert_eq!(stamped.owner, None, "{stamped:?}");
    assert_eq!(
        counts(&sweep(&store, hour, false).await.unwrap()),
        (6, 0, 2, 0, 4)
    );

    // Every free, clean lock blob, however recent; not held ones.
    let report = sweep(&store, Duration::ZERO, false).await.unwrap();
    assert_eq!(counts(&report), (6, 4, 2, 0, 0), "{report:?}");
    assert_eq!(pruned(&report), ["bare", "old", "queued", "recent"]);
    assert!(
        !lock_container_has(&store, &queue).await,
        "the queue went too"
    );
    let again = sweep(&store, Duration::ZERO, false).await.unwrap();
    assert_eq!(counts(&again), (2, 0, 2, 0, 0), "{again:?}");

    // Pruned partitions lock again; kept ones are as they were.
    assert!(
        transfer(&store, "old", "acct0", "acct1", 1, "o2")
            .await
            .unwrap()
    );
    assert_eq!(totals(&store, "old").await, (200, 2));
    for key in ["recent", "dated", "queued", "bare"] {
        other.lock(key).await.unwrap().abandon().await.unwrap();
    }
    held.abandon().await.unwrap();
    held_elsewhere.abandon().await.unwrap();
}

/// A counter row, for the pruning race.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "LockPruneCounters")]
struct Counter {
    #[entity(partition_key)]
    pub partition: String,
    #[entity(row_key)]
    pub id: String,
    pub count: i64,
}

/// One unit on partition `key` adding 1 to its counter; with `ledger`,
/// also a ledger entry, so its commit decides in a row.
async fn count_one(store: &Store, key: &str, id: &str, ledger: bool) -> leasehold::Result<()> {
    let mut unit = store.lock(key).await?;
    match unit.get::<Counter>("c").await? {
        Some(mut c) => {
            c.count += 1;
            unit.replace(&c)?;
        }
        None => unit.insert(&Counter {
            partition: key.into(),
            id: "c".into(),
            count: 1,
        })?,
    }
    if ledger {
        unit.insert(&Entry {
            customer: key.into(),
            id: id.into(),
            from: "-".into(),
            to: "c".into(),
            amount: 1,
        })?;
    }
    unit.commit().await.map(drop)
}

/// Sweeping with `older_than` zero in a loop (from a third process, and
/// from one of the two processes that lock) while 8 tasks in two processes run
/// 25 units each on the same 4 partitions, each unit adding 1 to its
/// partition's counter: every unit commits, the counters add up to the 200
/// units exactly, every sweep succeeds with a report that adds up, lock
/// blobs were deleted during the race, and every partition locks
/// afterwards. Acquires and deletes are slowed a little (see inside), so
/// that units meet a pruner at every step.
plain async fn pruning_races_units_locking_the_same_partitions(ctx) {
    // Slow acquires widen the window between a unit creating a lock blob
    // and acquiring it; slow deletes keep a pruner holding a lock while
    // units of its own process queue behind it locally and units of the
    // other processes register in the lock's wait queue.
    let slowed = |acquire: u64, delete: u64| {
        let faulty = FaultyBackend::new(ctx.backend().clone());
        let injector = faulty.injector();
        injector.set_latency(Some(Op::AcquireLease), Duration::from_millis(acquire));
        injector.set_latency(Some(Op::DeleteBlob), Duration::from_millis(delete));
        process(Arc::new(faulty), ctx.prefix())
    };
    let a = slowed(2, 3);
    let b = slowed(5, 0);
    let pruner = slowed(0, 0);
    let keys: Vec<String> = (0..4).map(|i| format!("race{i}")).collect();
    let (tasks, units) = (8usize, 25usize);
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let prune = {
        let (a, pruner, done) = (a.clone(), pruner.clone(), done.clone());
        tokio::spawn(async move {
            let (mut rounds, mut deleted) = (0usize, 0u64);
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                let from = if rounds % 2 == 0 { &pruner } else { &a };
                let r = sweep(from, Duration::ZERO, false).await.expect("sweep");
                let (examined, removed, held, pending, recent) = lock_counts(&r);
                assert_eq!(examined, removed + held + pending + recent, "{r:?}");
                assert_eq!(recent, 0, "nothing is recent at zero: {r:?}");
                deleted += removed;
                rounds += 1;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            (rounds, deleted)
        })
    };
    let mut workers = Vec::new();
    for t in 0..tasks {
        let store = if t % 2 == 0 { a.clone() } else { b.clone() };
        let keys = keys.clone();
        workers.push(tokio::spawn(async move {
            for i in 0..units {
                let key = &keys[(t + i) % keys.len()];
                count_one(&store, key, &format!("t{t}-{i}"), i % 2 == 0)
                    .await
                    .unwrap_or_else(|e| panic!("unit {t}-{i} on {key}: {e}"));
                // Gaps in which the locks are free for the pruner.
                tokio::time::sleep(Duration::from_millis(1 + (i % 4) as u64)).await;
            }
        }));
    }
    for w in workers {
        w.await.expect("every unit commits");
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let (rounds, deleted) = prune.await.expect("every sweep succeeds");
    assert!(rounds > 0);
    assert!(
        deleted > 0,
        "lock blobs were deleted during the race ({rounds} rounds)"
    );
    let mut total = 0;
    for key in &keys {
        // Lockable afterwards, and counting on.
        let mut unit = a.lock(key.as_str()).await.expect("lockable afterwards");
        let c = unit.get::<Counter>("c").await.unwrap().expect("counted");
        total += c.count;
        unit.abandon().await.unwrap();
    }
    assert_eq!(total, (tasks * units) as i64, "one increment per unit");
    let report = sweep(&pruner, Duration::ZERO, false).await.unwrap();
    assert_eq!(report.lock_blobs_kept_pending, 0, "{report:?}");
}
}
