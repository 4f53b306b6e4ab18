//! Units of work across partitions: taking several locks without deadlock,
//! the commit decided in a row and its request budget, a stale row failing
//! the commit before anything is applied, and a crash, a lost reply and a
//! pause past the lease at every step.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold::backend::Backend;
use leasehold::backend::Op;
use leasehold::lease::LeaseOptions;
use leasehold::lock::{CommitOutcome, FinishedBy};
use leasehold::testing::{CountingBackend, Fault, FaultInjector, FaultyBackend, RequestCounter};
use leasehold::{Entity, ErrorKind, Store};

use super::{Clock, Ctx};

crate::checks::checks! {

/// A customer's account.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "ManyAccounts")]
struct Account {
    #[entity(partition_key)]
    pub customer: String,
    #[entity(row_key)]
    pub name: String,
    pub balance: i64,
}

/// One side of an applied transfer.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "ManyLedger")]
struct Entry {
    #[entity(partition_key)]
    pub customer: String,
    #[entity(row_key)]
    pub id: String,
    pub amount: i64,
}

/// A store ("process") on `backend` with the given table prefix, its locks
/// lasting the context's lease duration.
pub(super) fn process(ctx: &Ctx, backend: Arc<dyn Backend>, prefix: &str) -> Store {
    Store::builder_shared(backend)
        .table_prefix(prefix)
        .expect("valid prefix")
        .lease_options(LeaseOptions::new().with_duration(ctx.lease_duration()))
        .build()
        .expect("valid store")
}

/// Opens account `main` with `balance` for each customer.
async fn open(store: &Store, customers: &[&str], balance: i64) {
    let t = store.table::<Account>();
    for c in customers {
        t.upsert(Account {
            customer: (*c).into(),
            name: "main".into(),
            balance,
        })
        .await
        .expect("open account");
    }
}

async fn balance(store: &Store, customer: &str) -> i64 {
    store
        .table::<Account>()
        .get(customer, "main")
        .await
        .expect("read")
        .expect("account exists")
        .balance
}

async fn entries(store: &Store, customer: &str) -> usize {
    store
        .table::<Entry>()
        .query()
        .partition(customer)
        .all()
        .await
        .expect("ledger")
        .len()
}

/// Moves `amount` from `from` to `to` (different customers) in one unit
/// over both partitions, with a ledger entry on each side: two partitions,
/// two tables each, so four transactions.
async fn transfer(
    store: &Store,
    from: &str,
    to: &str,
    amount: i64,
    id: &str,
) -> leasehold::Result<leasehold::lock::CommitReport> {
    let mut unit = store.lock_many([to, from]).await?;
    let mut a = unit.get_in::<Account>(from, "main").await?.expect("source");
    let mut b = unit.get_in::<Account>(to, "main").await?.expect("target");
    a.balance -= amount;
    b.balance += amount;
    unit.replace(&a)?;
    unit.replace(&b)?;
    unit.insert(&Entry {
        customer: from.into(),
        id: id.into(),
        amount: -amount,
    })?;
    unit.insert(&Entry {
        customer: to.into(),
        id: id.into(),
        amount,
    })?;
    unit.commit().await
}

/// No row of the partitions of `customers`, in any table of the store,
/// carries a commit's mark (read through the backend, which resolves
/// nothing).
pub(super) async fn nothing_pending(store: &Store, customers: &[&str]) {
    for (table, row) in super::stored_rows(store.backend(), store.table_prefix()).await {
        assert!(
            !customers.contains(&row.data.partition_key.as_str())
                || row.data.properties.get("_lhTxn").is_none(),
            "row {:?} of {table} is left marked",
            row.data.row_key
        );
    }
}

/// `get_in` reads every locked partition, `get` is refused with several,
/// writes to an unlocked partition are refused naming it (and change
/// nothing), keys are deduplicated, an empty set is refused, and a commit
/// over two partitions applies everything and leaves no record behind.
plain async fn a_unit_over_several_partitions_reads_writes_and_commits_them_all(ctx) {
    let store = &ctx.store;
    open(store, &["a", "b", "c"], 100).await;
    let e = store
        .lock_many(Vec::<&str>::new())
        .await
        .expect_err("empty set");
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    // A bad key anywhere in the set is refused before any lock is taken.
    let e = store.lock_many(["a", "b#"]).await.expect_err("bad key");
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    let a = store
        .try_lock("a")
        .await
        .unwrap()
        .expect("`a` was not taken");
    a.abandon().await.unwrap();

    let mut unit = store.lock_many(["b", "a", "b"]).await.unwrap();
    assert_eq!(
        unit.partition_keys()
            .iter()
            .map(|p| p.as_str())
            .collect::<Vec<_>>(),
        vec!["a", "b"]
    );
    let e = unit.get::<Account>("main").await.expect_err("several");
    assert_eq!(e.kind(), ErrorKind::Invalid);
    assert!(e.to_string().contains("get_in"), "{e}");
    let mut a = unit.get_in::<Account>("a", "main").await.unwrap().unwrap();
    let mut b = unit.get_in::<Account>("b", "main").await.unwrap().unwrap();
    let e = unit
        .get_in::<Account>("c", "main")
        .await
        .expect_err("not locked");
    assert_eq!(e.kind(), ErrorKind::Invalid);
    a.balance -= 10;
    b.balance += 10;
    unit.replace(&a).unwrap();
    unit.replace(&b).unwrap();
    let stray = Entry {
        customer: "c".into(),
        id: "x".into(),
        amount: 1,
    };
    let e = unit.insert(&stray).expect_err("partition c is not locked");
    assert_eq!(e.kind(), ErrorKind::Invalid);
    let text = e.to_string();
    assert!(
        text.contains("\"c\"") && text.contains("\"a\"") && text.contains("\"b\""),
        "{text}"
    );
    assert_eq!(unit.staged(), 2, "the refused write changed nothing");
    // A staged view of another partition reads back through `get_in`.
    assert_eq!(
        unit.get_in::<Account>("b", "main")
            .await
            .unwrap()
            .unwrap()
            .balance,
        110
    );
    let report = unit.commit().await.unwrap();
    assert_eq!(
        (
            report.partitions,
            report.tables,
            report.batches,
            report.transaction.is_some()
        ),
        (2, 1, 2, true)
    );
    assert_eq!(balance(store, "a").await, 90);
    assert_eq!(balance(store, "b").await, 110);
    nothing_pending(store, &["a", "b", "c"]).await;

    // One partition through `lock_many` is `lock`: `get` works.
    let mut unit = store.lock_many(["c"]).await.unwrap();
    assert!(unit.get::<Account>("main").await.unwrap().is_some());
    unit.abandon().await.unwrap();
}

/// `try_lock_many` meeting a held key gives back what it took and returns
/// `None`; `lock_many_with_timeout` does the same with `Timeout`.
timed async fn taking_several_locks_gives_back_what_it_took_on_a_held_key(ctx) {
    let holder = process(ctx, ctx.backend().clone(), ctx.prefix());
    let other = process(ctx, ctx.backend().clone(), ctx.prefix());
    let held = holder.lock("m").await.unwrap();
    assert!(
        other
            .try_lock_many(["a", "m", "z"])
            .await
            .unwrap()
            .is_none()
    );
    let a = holder.try_lock("a").await.unwrap();
    assert!(a.is_some(), "`a` was given back");
    a.unwrap().abandon().await.unwrap();
    let e = other
        .lock_many_with_timeout(["a", "m"], Duration::from_secs(2))
        .await
        .expect_err("m stays held");
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    let a = holder.try_lock("a").await.unwrap();
    assert!(a.is_some(), "`a` was given back after the timeout");
    a.unwrap().abandon().await.unwrap();
    held.abandon().await.unwrap();
    let unit = other.try_lock_many(["a", "m"]).await.unwrap();
    assert!(unit.is_some());
    unit.unwrap().abandon().await.unwrap();
}

/// A small deterministic generator (xorshift), for random key sets.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// 8 stores over one backend lock random overlapping sets of 1–3 of 5
/// partitions, in random key order, a fixed number of times each, and
/// move money between the partitions locked: every unit finishes, no
/// partition is ever held by two units, and the total is conserved.
timed async fn overlapping_lock_sets_never_deadlock(ctx) {
    let _turn = ctx.contention_turn().await;
    let rounds = match ctx.clock() {
        Clock::Paused => 12,
        Clock::Real => 3,
    };
    let stores = match ctx.clock() {
        Clock::Paused => 8,
        Clock::Real => 4,
    };
    let customers = ["p0", "p1", "p2", "p3", "p4"];
    open(&ctx.store, &customers, 1000).await;
    let started = tokio::time::Instant::now();
    let holders: Arc<Vec<AtomicUsize>> = Arc::new((0..5).map(|_| AtomicUsize::new(0)).collect());
    let violations = Arc::new(AtomicUsize::new(0));
    let committed = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for s in 0..stores {
        let store = process(ctx, ctx.backend().clone(), ctx.prefix());
        let holders = holders.clone();
        let violations = violations.clone();
        let committed = committed.clone();
        tasks.push(tokio::spawn(async move {
            let mut rng =
                Rng(0x9e37_79b9_7f4a_7c15 ^ (s as u64 + 1).wrapping_mul(0x1234_5678_9abc));
            for _ in 0..rounds {
                let n = 1 + rng.below(3);
                let mut set: Vec<usize> = Vec::new();
                while set.len() < n {
                    let p = rng.below(5);
                    if !set.contains(&p) {
                        set.push(p);
                    }
                }
                let keys: Vec<&str> = set.iter().map(|&p| customers[p]).collect();
                let mut unit = store
                    .lock_many_with_timeout(keys.clone(), Duration::from_secs(600))
                    .await
                    .expect("every unit gets its locks");
                for &p in &set {
                    if holders[p].fetch_add(1, Ordering::SeqCst) != 0 {
                        violations.fetch_add(1, Ordering::SeqCst);
                    }
                }
                let mut accounts = Vec::new();
                for k in &keys {
                    accounts.push(unit.get_in::<Account>(*k, "main").await.unwrap().unwrap());
                }
                // Each partition gives 1 to the next one in the set.
                let len = accounts.len();
                for a in &mut accounts {
                    a.balance -= 1;
                }
                for i in 0..len {
                    accounts[(i + 1) % len].balance += 1;
                }
                // A partition locked alone gives 1 to itself: still a write.
                for a in &accounts {
                    unit.replace(a).unwrap();
                }
                tokio::task::yield_now().await;
                for &p in &set {
                    holders[p].fetch_sub(1, Ordering::SeqCst);
                }
                unit.commit().await.expect("commit");
                committed.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    for t in tasks {
        t.await.expect("task finished");
    }
    let took = started.elapsed();
    eprintln!(
        "overlapping lock sets: {} units in {took:?}",
        stores * rounds
    );
    let bound = match ctx.clock() {
        Clock::Paused => Duration::from_secs(30),
        Clock::Real => Duration::from_secs(300),
    };
    assert!(took < bound, "took {took:?}");
    assert_eq!(violations.load(Ordering::SeqCst), 0, "two holders at once");
    assert_eq!(committed.load(Ordering::SeqCst), stores * rounds);
    let mut total = 0;
    for c in customers {
        total += balance(&ctx.store, c).await;
    }
    assert_eq!(total, 5000, "money conserved");
    nothing_pending(&ctx.store, &customers).await;
}

/// A store counting its requests, warmed up (containers, tables, lock
/// blobs, holder metadata) so one-time setup is out of the counts. It
/// wrote the lock blobs last, so its next unit does not read them.
async fn counted(ctx: &Ctx, customers: &[&str]) -> (Store, RequestCounter) {
    let counting = CountingBackend::new(ctx.backend().clone());
    let counter = counting.counter();
    let lease = match ctx.clock() {
        Clock::Paused => LeaseOptions::new(),
        Clock::Real => LeaseOptions::new().with_duration(Duration::from_secs(60)),
    };
    let store = Store::builder_shared(Arc::new(counting))
        .table_prefix(ctx.prefix())
        .expect("valid prefix")
        .lease_options(lease)
        .build()
        .expect("valid store");
    open(&store, customers, 100).await;
    let mut unit = store.lock_many(customers.iter().copied()).await.unwrap();
    for c in customers {
        unit.insert(&Entry {
            customer: (*c).into(),
            id: "warm".into(),
            amount: 0,
        })
        .unwrap();
    }
    unit.commit().await.unwrap();
    super::behind_the_answer(&counter).await;
    counter.reset();
    (store, counter)
}

fn counts(counter: &RequestCounter) -> Vec<(Op, u64)> {
    counter.snapshot().into_iter().collect()
}

/// A unit of 3 partitions × 2 tables × 150 rows (900 writes, 6 groups of
/// more than one transaction each) is atomic and decides in a row: 12
/// marking transactions at once, the commit point (the decision row alone:
/// the first group does not fit beside it), 12 finishing transactions at
/// once, the decision row's delete: after its reads, the same 4
/// sequential round trips as a two-row transfer, and no lock-blob write;
/// nothing is left marked or hidden.
plain async fn a_unit_of_three_partitions_two_tables_and_150_rows_each_is_atomic(ctx) {
    let customers = ["x0", "x1", "x2"];
    let (store, counter) = counted(ctx, &customers).await;
    let mut unit = store.lock_many(customers).await.unwrap();
    for c in customers {
        for i in 0..150 {
            unit.insert(&Account {
                customer: c.into(),
                name: format!("a{i:03}"),
                balance: 1,
            })
            .unwrap();
            unit.insert(&Entry {
                customer: c.into(),
                id: format!("e{i:03}"),
                amount: 1,
            })
            .unwrap();
        }
    }
    super::behind_the_answer(&counter).await;
    counter.reset();
    let report = unit.commit().await.unwrap();
    super::behind_the_answer(&counter).await;
    assert!(report.transaction.is_some(), "{report:?}");
    assert_eq!(
        (
            report.partitions,
            report.tables,
            report.operations,
            report.batches
        ),
        (3, 2, 900, 13)
    );
    assert_eq!(counter.get(Op::Batch), 25, "{:?}", counts(&counter));
    assert_eq!(counter.get(Op::Write), 1, "{:?}", counts(&counter));
    assert_eq!(counter.get(Op::PutBlob), 0, "{:?}", counts(&counter));
    for c in customers {
        assert_eq!(
            entries(&store, c).await,
            151,
            "{c}: 150 and the warm-up entry"
        );
        let accounts = store
            .table::<Account>()
            .query()
            .partition(c)
            .all()
            .await
            .unwrap();
        assert_eq!(accounts.len(), 151, "{c}: 150 and `main`");
    }
    nothing_pending(&store, &customers).await;
}

/// The request budget of a unit over P partitions with G groups and R
/// reads, on locks this process took last: P acquires + R reads + G − 1
/// transactions marking the rows + the commit point (the first group's
/// transaction with the decision row) + G − 1 transactions finishing the
/// marked rows + the decision row's delete + P releases — for P = 2 (G =
/// 4, R = 2) and P = 3 (G = 3, R = 3); the lock blobs are neither read
/// (unchanged since this process took them) nor written. Once another process has taken the locks, the next
/// unit reads each lock blob and records itself as holder again: 2 P more.
plain async fn a_cross_partition_unit_costs_its_budget_exactly(ctx) {
    let (store, counter) = counted(ctx, &["a", "b", "c"]).await;
    transfer(&store, "a", "b", 5, "t1").await.unwrap();
    super::behind_the_answer(&counter).await;
    // 2 + 2 + (3 + 1 + 3 + 1) + 2 = 14
    assert_eq!(
        counts(&counter),
        vec![
            (Op::Get, 2),
            (Op::Write, 1),
            (Op::Batch, 7),
            (Op::AcquireLease, 2),
            (Op::ReleaseLease, 2),
        ]
    );
    assert_eq!(counter.total(), 14);

    super::fresh_tenure().await;
    super::behind_the_answer(&counter).await;
    counter.reset();
    let mut unit = store.lock_many(["c", "b", "a"]).await.unwrap();
    for c in ["a", "b", "c"] {
        let mut v = unit.get_in::<Account>(c, "main").await.unwrap().unwrap();
        v.balance += 1;
        unit.replace(&v).unwrap();
    }
    let report = unit.commit().await.unwrap();
    super::behind_the_answer(&counter).await;
    assert_eq!((report.partitions, report.batches), (3, 3));
    super::behind_the_answer(&counter).await;
    // 3 + 3 + (2 + 1 + 2 + 1) + 3 = 15
    assert_eq!(
        counts(&counter),
        vec![
            (Op::Get, 3),
            (Op::Write, 1),
            (Op::Batch, 5),
            (Op::AcquireLease, 3),
            (Op::ReleaseLease, 3),
        ]
    );
    assert_eq!(counter.total(), 15);

    // One partition × one table stays one transaction: the single-partition
    // budget (acquire + read + transaction + release).
    super::fresh_tenure().await;
    super::behind_the_answer(&counter).await;
    counter.reset();
    let mut unit = store.lock_many(["a"]).await.unwrap();
    let mut v = unit.get::<Account>("main").await.unwrap().unwrap();
    v.balance += 1;
    unit.replace(&v).unwrap();
    assert!(unit.commit().await.unwrap().transaction.is_none());
    assert_eq!(counter.total(), 4, "{:?}", counts(&counter));

    // Another process takes both locks (recording itself as holder): the
    // next unit here reads both lock blobs and records itself again.
    let other = process(ctx, ctx.backend().clone(), ctx.prefix());
    other
        .lock_many(["a", "b"])
        .await
        .unwrap()
        .abandon()
        .await
        .unwrap();
    super::fresh_tenure().await;
    super::behind_the_answer(&counter).await;
    counter.reset();
    transfer(&store, "a", "b", 5, "t2").await.unwrap();
    super::behind_the_answer(&counter).await;
    // 14 + 2 lock-blob reads + 2 holder writes = 18
    assert_eq!(
        counts(&counter),
        vec![
            (Op::Get, 2),
            (Op::Write, 1),
            (Op::Batch, 7),
            (Op::GetBlob, 2),
            (Op::SetBlobMetadata, 2),
            (Op::AcquireLease, 2),
            (Op::ReleaseLease, 2),
        ]
    );
    assert_eq!(counter.total(), 18);
}

/// Requests that do not depend on each other go out together: with every
/// request taking the same time `L` (an injected latency far above the
/// service's own), a unit over two partitions takes its locks in 1 round
/// trip (the acquires at once) when their blobs are as this process last
/// saw them, also after another process of the same owner committed on
/// them (a commit writes no lock blob); its commit — the marks, the commit
/// point, the marked rows finished, then the decision row's delete with
/// the releases — takes 4. Counted by the request counter (the injected
/// latency makes requests sent together overlap).
timed async fn a_cross_partition_unit_sends_independent_requests_together(ctx) {
    let memory = ctx.backend().clone();
    let prefix = format!("{}r", ctx.prefix());
    let healthy = process(ctx, memory.clone(), &prefix);
    open(&healthy, &["a", "b"], 100).await;
    let faulty = FaultyBackend::new(memory.clone());
    let injector = faulty.injector();
    let counting = CountingBackend::new(Arc::new(faulty) as Arc<dyn Backend>);
    let counter = counting.counter();
    let store = process(ctx, Arc::new(counting), &prefix);
    // Warm: tables known, the holder recorded in both lock blobs.
    transfer(&store, "a", "b", 1, "warm").await.unwrap();
    super::behind_the_answer(&counter).await;
    super::fresh_tenure().await;
    injector.set_latency(None, Duration::from_millis(500));
    // The round trips of what `step` sends, and what one request after
    // another would take, in the message.
    let check = |together: u64, one_by_one: u64, what: &str| {
        let counted = counter.round_trips();
        assert_eq!(
            counted, together,
            "{what}: {one_by_one} round trips one request after another ({counter:?})"
        );
        counter.reset();
    };

    counter.reset();
    let mut unit = store.lock_many(["b", "a"]).await.unwrap();
    // One by one: two acquires.
    check(1, 2, "acquires; the lock blobs are unchanged");
    let mut a = unit.get_in::<Account>("a", "main").await.unwrap().unwrap();
    let mut b = unit.get_in::<Account>("b", "main").await.unwrap().unwrap();
    a.balance -= 5;
    b.balance += 5;
    unit.replace(&a).unwrap();
    unit.replace(&b).unwrap();
    for (customer, amount) in [("a", -5), ("b", 5)] {
        unit.insert(&Entry {
            customer: customer.into(),
            id: "t".into(),
            amount,
        })
        .unwrap();
    }
    counter.reset();
    let report = unit.commit().await.unwrap();
    assert_eq!(report.batches, 4);
    // One by one: three marking transactions, the commit point, three
    // finishing transactions, the decision row's delete, two releases.
    // Together: the marks, the commit point, the finish with the releases
    // (the decision row's delete goes behind the answer).
    check(
        3,
        10,
        "marks, commit point, finishing transactions with the releases",
    );
    assert_eq!(balance(&healthy, "a").await, 94);
    assert_eq!(balance(&healthy, "b").await, 106);
    nothing_pending(&healthy, &["a", "b"]).await;

    // Another process under the same owner name takes both locks and
    // commits: the recorded holder does not change, and the commit writes
    // no lock blob.
    let twin = Store::builder_shared(memory.clone())
        .table_prefix(&prefix)
        .expect("valid prefix")
        .lease_options(
            LeaseOptions::new()
                .with_duration(ctx.lease_duration())
                .with_owner(store.locks().owner()),
        )
        .build()
        .expect("valid store");
    transfer(&twin, "a", "b", 1, "twin").await.unwrap();
    super::behind_the_answer(&counter).await;
    super::fresh_tenure().await;
    counter.reset();
    let unit = store.lock_many(["b", "a"]).await.unwrap();
    // Nothing wrote the lock blobs (a commit writes none, and the holder
    // did not change): the acquires alone.
    check(1, 2, "acquires; the lock blobs are still unchanged");
    unit.abandon().await.unwrap();
}

/// A process that stalls past its leases while taking several locks (here
/// while recording itself as their holder), as the next holder takes them
/// meanwhile, gets [`leasehold::Error::LeaseLost`] from `lock_many` —
/// documented — with nothing of its own written; the locks can be taken
/// again.
timed async fn a_lock_lost_while_it_is_taken_is_lease_lost(ctx) {
    let memory = ctx.backend().clone();
    let prefix = format!("{}l", ctx.prefix());
    let next = process(ctx, memory.clone(), &prefix);
    open(&next, &["a", "b"], 100).await;
    let faulty = FaultyBackend::new(memory.clone());
    let injector = faulty.injector();
    let stalled = process(ctx, Arc::new(faulty), &prefix);
    // A new holder records its name: the first such write stalls.
    injector.inject(
        Some(Op::SetBlobMetadata),
        1,
        Fault::Delay(ctx.lease_duration() * 3),
    );
    injector.set_latency(Some(Op::RenewLease), Duration::from_secs(3600));
    let (taken, ()) = tokio::join!(stalled.lock_many(["a", "b"]), async {
        tokio::time::sleep(ctx.lease_duration() + ctx.slack() + Duration::from_secs(1)).await;
        transfer(&next, "a", "b", 1, "meanwhile").await.unwrap();
    });
    let e = taken.expect_err("the lease ran out while taking the locks");
    assert_eq!(e.kind(), ErrorKind::LeaseLost, "{e}");
    assert_eq!(
        balance(&next, "a").await,
        99,
        "the next holder's commit stands"
    );
    injector.set_latency(Some(Op::RenewLease), Duration::ZERO);
    let unit = stalled.lock_many(["a", "b"]).await.unwrap();
    unit.abandon().await.unwrap();
    nothing_pending(&next, &["a", "b"]).await;
}

/// Handed over within the process, a cross-partition unit sends no
/// acquire, no lock-blob read: R reads + (G − 1) marking transactions +
/// the commit point + (G − 1) finishing transactions + the decision row's
/// delete, and the releases of the last unit.
timed async fn a_handed_over_cross_partition_unit_skips_acquires_and_reads(ctx) {
    let (store, counter) = counted(ctx, &["a", "b"]).await;
    let first = store.lock_many(["a", "b"]).await.unwrap();
    let second = {
        let store = store.clone();
        tokio::spawn(async move {
            let mut unit = store.lock_many(["b", "a"]).await.unwrap();
            let mut a = unit.get_in::<Account>("a", "main").await.unwrap().unwrap();
            let mut b = unit.get_in::<Account>("b", "main").await.unwrap().unwrap();
            a.balance -= 1;
            b.balance += 1;
            unit.replace(&a).unwrap();
            unit.replace(&b).unwrap();
            unit
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    super::behind_the_answer(&counter).await;
    counter.reset();
    first.abandon().await.unwrap();
    let unit = second.await.unwrap();
    if ctx.clock() == Clock::Real {
        // Whether the second lock is handed over too depends on the
        // waiting task queueing for it before the first unit releases it,
        // which only paused time makes certain.
        unit.commit().await.unwrap();
        super::behind_the_answer(&counter).await;
        assert_eq!(balance(&store, "a").await, 99);
        return;
    }
    assert!(unit.is_handed_over());
    assert_eq!(counter.get(Op::Get), 2, "{:?}", counts(&counter));
    unit.commit().await.unwrap();
    super::behind_the_answer(&counter).await;
    // R (2) + 1 marking transaction + commit point + 1 finishing
    // transaction + decision delete + 2 releases
    assert_eq!(
        counts(&counter),
        vec![
            (Op::Get, 2),
            (Op::Write, 1),
            (Op::Batch, 3),
            (Op::ReleaseLease, 2),
        ]
    );
    assert_eq!(balance(&store, "a").await, 99);
}

/// Something writes a row of the commit without the lock after the unit
/// read it: marking that row is refused, so the commit fails before its
/// commit point, the marks made on the other rows are taken off again, and the
/// commit returns the refusal naming the row — every row as before the
/// commit (the other writer's kept), no record left. The same for a
/// single-partition commit over two tables.
plain async fn a_row_changed_since_it_was_read_fails_the_commit_before_anything_is_applied(ctx) {
    let counting = CountingBackend::new(ctx.backend().clone());
    let counter = counting.counter();
    // On real time, the longest lease: no renewal falls within what is
    // counted, however slow the service answers.
    let lease = match ctx.clock() {
        Clock::Paused => LeaseOptions::new(),
        Clock::Real => LeaseOptions::new().with_duration(Duration::from_secs(60)),
    };
    let store = &Store::builder_shared(Arc::new(counting))
        .table_prefix(ctx.prefix())
        .expect("valid prefix")
        .lease_options(lease)
        .build()
        .expect("valid store");
    open(store, &["a", "b"], 100).await;
    let mut unit = store.lock_many(["a", "b"]).await.unwrap();
    let mut a = unit.get_in::<Account>("a", "main").await.unwrap().unwrap();
    let mut b = unit.get_in::<Account>("b", "main").await.unwrap().unwrap();
    a.balance -= 30;
    b.balance += 30;
    unit.replace(&a).unwrap();
    unit.replace(&b).unwrap();
    assert!(unit.get_in::<Entry>("a", "t").await.unwrap().is_none());
    unit.insert(&Entry {
        customer: "a".into(),
        id: "t".into(),
        amount: -30,
    })
    .unwrap();
    // The stray writer, without the lock.
    store
        .table::<Account>()
        .upsert(Account {
            customer: "b".into(),
            name: "main".into(),
            balance: 7,
        })
        .await
        .unwrap();
    super::behind_the_answer(&counter).await;
    counter.reset();
    let e = unit.commit().await.expect_err("refused");
    // 2 transactions marking the rows of b's account (refused) and a's
    // ledger, at once (a's account is the commit point's, not marked); the
    // transaction taking the ledger's placeholder off; 2 releases. No
    // commit point, no lock-blob write.
    assert_eq!(
        counts(&counter),
        vec![(Op::Batch, 3), (Op::ReleaseLease, 2)],
        "{e}"
    );
    let refusal = match &e {
        leasehold::Error::Batch { source, .. } => source.as_ref(),
        other => other,
    };
    assert_eq!(refusal.kind(), ErrorKind::Conflict, "{e}");
    match refusal {
        leasehold::Error::Conflict { row, .. } => {
            let (pk, rk) = row.as_deref().expect("names the row").clone();
            assert_eq!((pk.as_str(), rk.as_str()), ("b", "main"));
        }
        other => panic!("{other}"),
    }
    assert_eq!(balance(store, "a").await, 100, "nothing applied");
    assert_eq!(entries(store, "a").await, 0, "nothing applied");
    assert_eq!(balance(store, "b").await, 7, "the stray write stays");
    nothing_pending(store, &["a", "b"]).await;
    // The locks are free.
    let unit = store.lock_many(["a", "b"]).await.unwrap();
    unit.abandon().await.unwrap();

    // One partition, two tables (ledger after accounts by name: the
    // account changes under the second transaction).
    let mut unit = store.lock("a").await.unwrap();
    let mut a = unit.get::<Account>("main").await.unwrap().unwrap();
    a.balance -= 1;
    unit.replace(&a).unwrap();
    let mut e0 = unit.get::<Entry>("e0").await.unwrap();
    assert!(e0.is_none());
    unit.insert(&Entry {
        customer: "a".into(),
        id: "e0".into(),
        amount: 1,
    })
    .unwrap();
    store
        .table::<Entry>()
        .insert(Entry {
            customer: "a".into(),
            id: "e0".into(),
            amount: 99,
        })
        .await
        .unwrap();
    // The ledger row exists now: its placeholder cannot be inserted.
    let e = unit.commit().await.expect_err("refused");
    let refusal = match &e {
        leasehold::Error::Batch { source, .. } => source.kind(),
        other => other.kind(),
    };
    assert_eq!(refusal, ErrorKind::AlreadyExists, "{e}");
    assert_eq!(balance(store, "a").await, 100);
    e0 = store.table::<Entry>().get("a", "e0").await.unwrap();
    assert_eq!(e0.map(|v| v.amount), Some(99));
    nothing_pending(store, &["a"]).await;
}

/// (balance a, balance b, balance c, ledger entries) of the crash checks.
type State = Vec<i64>;

async fn state(store: &Store, customers: &[&str]) -> State {
    let mut s = Vec::new();
    for c in customers {
        s.push(balance(store, c).await);
        s.push(entries(store, c).await as i64);
    }
    s
}

/// A transfer over `customers` (2 or 3): each pays 10 to the first one.
async fn pay_first(
    store: &Store,
    customers: &[&str],
) -> leasehold::Result<leasehold::lock::CommitReport> {
    let mut unit = store.lock_many(customers.iter().rev().copied()).await?;
    let mut first = unit
        .get_in::<Account>(customers[0], "main")
        .await?
        .expect("exists");
    for c in &customers[1..] {
        let mut v = unit.get_in::<Account>(*c, "main").await?.expect("exists");
        v.balance -= 10;
        first.balance += 10;
        unit.replace(&v)?;
        unit.insert(&Entry {
            customer: (*c).into(),
            id: "t".into(),
            amount: -10,
        })?;
    }
    unit.replace(&first)?;
    unit.commit().await
}

/// Runs one cross-partition commit in a "process" whose backend misbehaves
/// as `plan` says, lets its leases run out, and recovers by taking the lock
/// of participant `from` alone in a healthy process, then every other.
/// Returns the state after the first recovery and after all.
async fn crash_run(
    ctx: &Ctx,
    prefix: String,
    customers: Vec<&'static str>,
    from: usize,
    plan: impl FnOnce(&FaultInjector),
) -> (Result<(), ErrorKind>, State, State, State) {
    let memory = ctx.backend().clone();
    let healthy = process(ctx, memory.clone(), &prefix);
    open(&healthy, &customers, 100).await;
    let before = state(&healthy, &customers).await;
    let faulty = FaultyBackend::new(memory.clone());
    let injector = faulty.injector();
    let dying = process(ctx, Arc::new(faulty), &prefix);
    let mut warm = dying.lock_many(customers.iter().copied()).await.unwrap();
    for c in &customers {
        let _ = warm.get_in::<Entry>(*c, "warm").await.unwrap();
    }
    warm.abandon().await.unwrap();
    plan(&injector);
    let outcome = pay_first(&dying, &customers)
        .await
        .map(drop)
        .map_err(|e| e.kind());
    injector.die_now();
    tokio::time::sleep(ctx.lease_duration() * 2 + Duration::from_secs(1)).await;
    let unit = healthy
        .lock(customers[from])
        .await
        .expect("the next holder gets the lock");
    unit.abandon().await.unwrap();
    let first = state(&healthy, &customers).await;
    for c in &customers {
        healthy.lock(*c).await.unwrap().abandon().await.unwrap();
    }
    nothing_pending(&healthy, &customers).await;
    let last = state(&healthy, &customers).await;
    drop(dying);
    (outcome, before, first, last)
}

/// The steps of a cross-partition commit over P partitions (the requests
/// it sends after its reads), as (name, request, which one).
fn steps(p: u64) -> Vec<(String, Op, u64)> {
    let mut s = Vec::new();
    // 2P − 1 groups: the first (the first customer's account) is the
    // commit point; the first round marks the rows of the others, all at
    // once.
    let groups = 2 * p - 1;
    for g in 1..groups {
        s.push((format!("marks of transaction {g}"), Op::Batch, g));
    }
    s.push(("commit point".into(), Op::Batch, groups));
    for g in 1..groups {
        s.push((format!("finishing transaction {g}"), Op::Batch, groups + g));
    }
    s.push(("decision row delete".into(), Op::Write, 1));
    s
}

async fn crash_everywhere(ctx: &Ctx, lose_reply: bool) {
    let mut runs = Vec::new();
    for p in [2u64, 3] {
        let customers: Vec<&'static str> = ["x", "y", "z"][..p as usize].to_vec();
        for (name, op, nth) in steps(p) {
            for from in 0..p as usize {
                let prefix = format!("{}{}{}{}", ctx.prefix(), p, runs.len(), from);
                let customers = customers.clone();
                let label = format!("P={p} {name} recovered from {}", customers[from]);
                runs.push(async move {
                    let r = crash_run(ctx, prefix, customers, from, |f| {
                        if lose_reply {
                            f.lose_reply_nth(Some(op), nth);
                        } else {
                            f.die_at_nth(Some(op), nth);
                        }
                    })
                    .await;
                    (label, r)
                });
            }
        }
    }
    let results = futures_util::future::join_all(runs).await;
    let seen = Mutex::new(HashMap::new());
    for (label, (outcome, before, first, last)) in results {
        let after = paid_first(&before);
        assert!(
            first == before || first == after,
            "{label}: partial state {first:?} (before {before:?}, after {after:?})"
        );
        assert_eq!(
            first, last,
            "{label}: recovery from one participant decides"
        );
        match outcome {
            Ok(()) => assert_eq!(last, after, "{label}: reported committed"),
            // Only an answer in doubt may hide a decided commit.
            Err(ErrorKind::InDoubt) => {}
            Err(kind) => assert_eq!(last, before, "{label}: reported failed ({kind:?})"),
        }
        *seen.lock().unwrap().entry(last == after).or_insert(0) += 1;
    }
    let seen = seen.into_inner().unwrap();
    assert!(
        seen.get(&true).copied().unwrap_or(0) > 0,
        "some crashes roll forward"
    );
    if !lose_reply {
        assert!(
            seen.get(&false).copied().unwrap_or(0) > 0,
            "some end before"
        );
    }
}

/// A process dies at every step of a commit over 2 and 3 partitions; taking
/// the lock of any one participant afterwards decides it: all before, or
/// all after.
timed async fn a_crash_at_every_step_is_recovered_from_any_participant(ctx) {
    crash_everywhere(ctx, false).await;
}

/// The reply of every request of a commit over 2 and 3 partitions is lost
/// in turn: the commit ends all before or all after, from any participant.
timed async fn a_lost_reply_at_every_step_ends_all_before_or_after(ctx) {
    crash_everywhere(ctx, true).await;
}

/// The state a transfer from every other customer to the first leaves
/// (see [`pay_first`]), from the state `before` it.
fn paid_first(before: &State) -> State {
    let p = before.len() / 2;
    let mut after = before.clone();
    after[0] += 10 * (p as i64 - 1);
    for i in 1..p {
        after[2 * i] -= 10;
        after[2 * i + 1] += 1;
    }
    after
}

/// Runs one cross-partition commit in a "process" that stops just before
/// request `nth` of kind `op` of its commit for three lease durations, its
/// renewals hanging meanwhile; another process takes every participant's
/// lock in the pause and reads the rows (finishing a decided commit's,
/// withdrawing an undecided one). Returns what the stopped process was told, and the state
/// before and once it answered.
async fn pause_run(
    ctx: &Ctx,
    prefix: String,
    customers: Vec<&'static str>,
    op: Op,
    nth: u64,
) -> (
    leasehold::Result<leasehold::lock::CommitReport>,
    State,
    State,
) {
    let memory = ctx.backend().clone();
    let next = process(ctx, memory.clone(), &prefix);
    open(&next, &customers, 100).await;
    let before = state(&next, &customers).await;
    let faulty = FaultyBackend::new(memory.clone());
    let injector = faulty.injector();
    let paused = process(ctx, Arc::new(faulty), &prefix);
    let mut warm = paused.lock_many(customers.iter().copied()).await.unwrap();
    for c in &customers {
        let _ = warm.get_in::<Entry>(*c, "warm").await.unwrap();
    }
    warm.abandon().await.unwrap();
    injector.inject(Some(op), nth, Fault::Delay(ctx.lease_duration() * 3));
    injector.set_latency(Some(Op::RenewLease), Duration::from_secs(3600));
    let (answer, ()) = tokio::join!(pay_first(&paused, &customers), async {
        tokio::time::sleep(ctx.lease_duration() + ctx.slack() + Duration::from_secs(1)).await;
        for c in &customers {
            next.lock(*c).await.unwrap().abandon().await.unwrap();
        }
        // Reading the rows finishes what is decided and withdraws what is
        // not (after taking the primary's lock).
        let _ = state(&next, &customers).await;
    });
    let stored = state(&next, &customers).await;
    drop(paused);
    (answer, before, stored)
}

/// A holder stopped past its leases before each request of a commit over
/// 2 and 3 partitions, while the next holder takes the locks and reads the
/// rows, finishing what was decided, is told what storage holds: `Ok`
/// exactly when every write is applied (by itself, or finished by the next
/// holder, which the report says), and an error exactly when nothing is.
timed async fn a_holder_paused_past_its_lease_at_every_step_is_told_what_is_stored(ctx) {
    let mut runs = Vec::new();
    for p in [2u64, 3] {
        let customers: Vec<&'static str> = ["x", "y", "z"][..p as usize].to_vec();
        for (name, op, nth) in steps(p) {
            let prefix = format!("{}{}{}", ctx.prefix(), p, runs.len());
            let customers = customers.clone();
            let label = format!("P={p} paused before {name}");
            runs.push(async move { (label, pause_run(ctx, prefix, customers, op, nth).await) });
        }
    }
    let results = futures_util::future::join_all(runs).await;
    let mut recovered = 0;
    let mut refused = 0;
    for (label, (answer, before, stored)) in results {
        let after = paid_first(&before);
        match answer {
            Ok(report) => {
                assert_eq!(stored, after, "{label}: told applied ({report:?})");
                assert!(report.transaction.is_some(), "{label}: {report:?}");
                if report.finished_by == FinishedBy::Recovery {
                    recovered += 1;
                }
            }
            Err(e) => {
                assert_eq!(stored, before, "{label}: told {e}");
                assert_ne!(
                    e.kind(),
                    ErrorKind::InDoubt,
                    "{label}: storage answered: {e}"
                );
                refused += 1;
            }
        }
    }
    assert!(
        recovered > 0,
        "some commits are finished by the next holder"
    );
    assert!(refused > 0, "some pauses come before the commit point");
}

/// A commit that cannot finish and cannot read back its outcome (storage
/// stops answering right after its commit point's transaction is applied,
/// its reply lost) is in doubt, naming its primary partition and
/// transaction; once storage answers, `commit_outcome` says applied, and
/// readers see the commit whole. Asked about a transaction whose commit
/// point never arrived, `commit_outcome` withdraws it (so that it never
/// can) and says not recorded.
timed async fn a_commit_whose_decision_cannot_be_read_is_in_doubt_until_asked_again(ctx) {
    let memory = ctx.backend().clone();
    let prefix = format!("{}n", ctx.prefix());
    let healthy = process(ctx, memory.clone(), &prefix);
    let customers = ["x", "y"];
    open(&healthy, &customers, 100).await;
    let before = state(&healthy, &customers).await;
    for lands in [true, false] {
        let faulty = FaultyBackend::new(memory.clone());
        let injector = faulty.injector();
        let dying = process(ctx, Arc::new(faulty), &prefix);
        let unit = y_pays_x(&dying, Some(if lands { "t" } else { "u" })).await;
        // Two transactions mark y's rows; the third is the commit point:
        // applied with its reply lost, or never arriving; then storage
        // stops answering (the decision cannot be read).
        if lands {
            injector.lose_reply_nth(Some(Op::Batch), 3);
        } else {
            injector.fail_nth(Some(Op::Batch), 3);
        }
        injector.die_at_nth(Some(Op::Get), 1);
        let e = unit.commit().await.expect_err("in doubt");
        assert_eq!(e.kind(), ErrorKind::InDoubt, "{e}");
        let leasehold::Error::InDoubt {
            primary,
            transaction,
            ..
        } = &e
        else {
            panic!("{e:?}")
        };
        let transaction = transaction.as_deref().expect("a commit point has an id");
        assert!(e.to_string().contains(transaction), "{e}");
        let (outcome, expected) = if lands {
            (CommitOutcome::Applied, vec![110, 0, 90, 1])
        } else {
            (CommitOutcome::NotApplied, vec![110, 0, 90, 1])
        };
        assert_eq!(
            healthy
                .commit_outcome(primary.clone(), transaction)
                .await
                .unwrap(),
            outcome,
            "the commit point landed: {lands}"
        );
        // Asked again, the same answer: it is final.
        assert_eq!(
            healthy
                .commit_outcome(primary.clone(), transaction)
                .await
                .unwrap(),
            outcome
        );
        assert_eq!(
            state(&healthy, &customers).await,
            expected,
            "readers see the first commit whole, and nothing of the second"
        );
        drop(dying);
    }
    assert_ne!(before, vec![110, 0, 90, 1]);
    for c in customers {
        healthy.lock(c).await.unwrap().abandon().await.unwrap();
    }
    nothing_pending(&healthy, &customers).await;
}

/// A unit of `store` over "x" and "y" in which y pays 10 to x, staged, with
/// y's ledger entry `entry` when given.
async fn y_pays_x(store: &Store, entry: Option<&str>) -> leasehold::lock::Unit {
    let mut unit = store.lock_many(["x", "y"]).await.unwrap();
    let mut x = unit.get_in::<Account>("x", "main").await.unwrap().unwrap();
    let mut y = unit.get_in::<Account>("y", "main").await.unwrap().unwrap();
    x.balance += 10;
    y.balance -= 10;
    unit.replace(&x).unwrap();
    unit.replace(&y).unwrap();
    if let Some(id) = entry {
        unit.insert(&Entry {
            customer: "y".into(),
            id: id.into(),
            amount: -10,
        })
        .unwrap();
    }
    unit
}

/// A commit deciding in a row whose writer dies right after its commit
/// point (before the transaction finishing the other partition's marked
/// row) answers `Ok` — it is applied — and leaves its decision row, which
/// the marked row still needs. Plain queries, a unit's queries and reads
/// return only the entities, the marked row finished; `commit_outcome`
/// says applied.
timed async fn decision_rows_are_never_returned_to_callers(ctx) {
    let memory = ctx.backend().clone();
    let prefix = format!("{}h", ctx.prefix());
    let healthy = process(ctx, memory.clone(), &prefix);
    let customers = ["x", "y"];
    open(&healthy, &customers, 100).await;
    let faulty = FaultyBackend::new(memory.clone());
    let injector = faulty.injector();
    let dying = process(ctx, Arc::new(faulty), &prefix);
    let unit = y_pays_x(&dying, None).await;
    // x's account is the commit point; y's is marked first, finished last.
    injector.die_at_nth(Some(Op::Batch), 3);
    let report = unit.commit().await.expect("applied at its commit point");
    let transaction = report.transaction.clone().expect("an id");
    drop(dying);
    tokio::time::sleep(ctx.lease_duration() * 2 + Duration::from_secs(1)).await;
    let accounts = healthy.table::<Account>();
    let all = accounts.query().all().await.expect("a plain query");
    let mut seen: Vec<(String, i64)> = all
        .iter()
        .map(|a| (a.customer.clone(), a.balance))
        .collect();
    seen.sort();
    assert_eq!(seen, vec![("x".into(), 110), ("y".into(), 90)]);
    let in_x = accounts
        .query()
        .partition("x")
        .all()
        .await
        .expect("the primary's partition");
    assert_eq!(in_x.len(), 1, "only the account, not the decision row");
    let mut unit = healthy.lock_many(customers).await.unwrap();
    let found = unit.query::<Account>().all().await.expect("a unit query");
    assert_eq!(found.len(), 2, "a unit's query returns the entities only");
    unit.abandon().await.unwrap();
    assert_eq!(
        healthy
            .commit_outcome("x", &transaction)
            .await
            .expect("readable"),
        CommitOutcome::Applied
    );
    nothing_pending(&healthy, &customers).await;
}

/// `Unit::query` answers as the unit sees its partitions: staged inserts
/// show, staged deletes hide, filters apply to staged values, rows of every
/// locked partition (or the one named) come back; a partition not held is
/// refused; and a write of a queried row that changed since fails the
/// commit, applying nothing.
plain async fn unit_queries_see_staged_writes_and_stale_reads_fail_the_commit(ctx) {
    let store = &ctx.store;
    let lines = store.table::<Entry>();
    for (c, id, amount) in [
        ("a", "l1", 2),
        ("a", "l2", 0),
        ("a", "l3", 7),
        ("a", "m1", 9),
        ("b", "l1", 4),
    ] {
        lines
            .insert(Entry {
                customer: c.into(),
                id: id.into(),
                amount,
            })
            .await
            .unwrap();
    }
    let col = Entry::columns();
    let mut unit = store.lock_many(["a", "b"]).await.unwrap();
    let l2 = unit.get_in::<Entry>("a", "l2").await.unwrap().unwrap();
    let l3 = unit.get_in::<Entry>("a", "l3").await.unwrap().unwrap();
    let mut l2 = l2.clone();
    l2.amount = 9;
    unit.replace(&l2).unwrap();
    unit.delete(&l3).unwrap();
    unit.insert(&Entry {
        customer: "a".into(),
        id: "l4".into(),
        amount: 5,
    })
    .unwrap();
    let ids = |v: &[leasehold::Versioned<Entry>]| {
        v.iter()
            .map(|e| format!("{}/{}={}", e.customer, e.id, e.amount))
            .collect::<Vec<_>>()
    };
    let found = unit
        .query::<Entry>()
        .partition("a")
        .row_key_prefix("l")
        .filter(col.amount.gt(1))
        .all()
        .await
        .unwrap();
    assert_eq!(ids(&found), vec!["a/l1=2", "a/l2=9", "a/l4=5"]);
    let everywhere = unit
        .query::<Entry>()
        .row_keys("l1"..="l1")
        .all()
        .await
        .unwrap();
    assert_eq!(ids(&everywhere), vec!["a/l1=2", "b/l1=4"]);
    let e = unit
        .query::<Entry>()
        .partition("c")
        .all()
        .await
        .expect_err("not locked");
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");

    // A queried row changes behind the unit's back; writing it fails the
    // commit and nothing is applied.
    let mut b1 = everywhere[1].clone();
    lines
        .upsert(Entry {
            customer: "b".into(),
            id: "l1".into(),
            amount: 100,
        })
        .await
        .unwrap();
    b1.amount += 1;
    unit.replace(&b1).unwrap();
    let e = unit.commit().await.expect_err("stale read");
    assert!(
        matches!(e.kind(), ErrorKind::Conflict | ErrorKind::Batch),
        "{e}"
    );
    let a2 = lines.get("a", "l2").await.unwrap().unwrap();
    assert_eq!(a2.amount, 0, "nothing applied");
    assert!(lines.get("a", "l4").await.unwrap().is_none());
    assert!(lines.get("a", "l3").await.unwrap().is_some());
    nothing_pending(store, &["a", "b"]).await;
}

/// A holder stopped just before its commit point goes out, for longer than
/// its lease, while the next holder withdraws the commit (reading its
/// rows) and the withdrawn decision row is then removed (as a prune does
/// once it is old): when the holder wakes, its commit point is not sent —
/// it would find no decision row and apply the primary's writes without
/// the rest — and it is told `LeaseLost`, nothing applied.
timed async fn a_commit_point_held_up_past_the_lease_never_goes_out(ctx) {
    let prefix = format!("{}h", ctx.prefix());
    let memory = ctx.backend().clone();
    let next = process(ctx, memory.clone(), &prefix);
    let customers = ["a", "b"];
    open(&next, &customers, 100).await;
    let before = state(&next, &customers).await;
    let faulty = FaultyBackend::new(memory.clone());
    let injector = faulty.injector();
    let paused = process(ctx, Arc::new(faulty), &prefix);
    transfer(&paused, "a", "b", 1, "warm").await.unwrap();
    let before_warm = state(&next, &customers).await;
    assert_ne!(before, before_warm);
    // 3 marking transactions (a's ledger, b's account and ledger), then
    // the commit point with a's account: stopped just before it.
    injector.inject(Some(Op::Batch), 4, Fault::Delay(ctx.lease_duration() * 3));
    injector.set_latency(Some(Op::RenewLease), Duration::from_secs(3600));
    let (answer, ()) = tokio::join!(transfer(&paused, "a", "b", 10, "late"), async {
        tokio::time::sleep(ctx.lease_duration() + ctx.slack() + Duration::from_secs(1)).await;
        for c in customers {
            next.lock(c).await.unwrap().abandon().await.unwrap();
        }
        let _ = state(&next, &customers).await;
        // The withdrawn decision row goes, as an old one does in a prune.
        for (table, row) in super::stored_rows(next.backend(), next.table_prefix()).await {
            if row.data.row_key.as_str().starts_with("_lhCommit.") {
                let op = leasehold::backend::TableOp::Delete {
                    partition_key: row.data.partition_key.clone(),
                    row_key: row.data.row_key.clone(),
                    condition: leasehold::backend::Precondition::IfExists,
                };
                let options = leasehold::backend::WriteOptions::new();
                next.backend().execute(&table, op, &options).await.unwrap();
            }
        }
    });
    let e = answer.expect_err("the commit point never went out");
    assert_eq!(e.kind(), ErrorKind::LeaseLost, "{e}");
    assert_eq!(
        state(&next, &customers).await,
        before_warm,
        "nothing applied"
    );
    nothing_pending(&next, &customers).await;
}
}
