//! Transactions without a lease ([`Store::transaction`],
//! [`Store::transact`]): budgets and round trips (reads one at a time and
//! all at once), serializability (no write
//! skew), a stopped writer's marks withdrawn after the time-to-live and its
//! late commit point refused, answers in doubt settled, concurrent
//! transfers, unique values, and transactions beside locked units.

use std::sync::Arc;
use std::time::Duration;

use leasehold::backend::Backend;
use leasehold::backend::Op;
use leasehold::lease::LeaseOptions;
use leasehold::lock::CommitOutcome;
use leasehold::testing::{CountingBackend, Fault, FaultyBackend};
use leasehold::txn::TransactionOptions;
use leasehold::{ConflictRetry, Entity, ErrorKind, Store};

use super::{Clock, Ctx};

crate::checks::checks! {

/// A customer's account.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "TxnAccounts")]
struct Account {
    #[entity(partition_key)]
    pub customer: String,
    #[entity(row_key)]
    pub name: String,
    pub balance: i64,
}

/// A member with a unique e-mail.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "TxnMembers")]
struct Member {
    #[entity(partition_key)]
    pub region: String,
    #[entity(row_key)]
    pub id: String,
    #[entity(unique)]
    pub email: String,
}

/// A store ("process") on `backend` with table prefix `prefix`, its locks
/// lasting the context's lease duration, retrying conflicts up to
/// `attempts` times.
fn process(ctx: &Ctx, backend: Arc<dyn Backend>, prefix: &str, attempts: u32) -> Store {
    Store::builder_shared(backend)
        .table_prefix(prefix)
        .expect("valid prefix")
        .lease_options(LeaseOptions::new().with_duration(ctx.lease_duration()))
        .conflict_retry(
            ConflictRetry::new(
                attempts,
                Duration::from_millis(2),
                Duration::from_millis(50),
            )
            .expect("valid policy"),
        )
        .build()
        .expect("valid store")
}

/// Options of the transactions whose time-to-live a check does not test:
/// far above what marking rows takes on a busy machine (the default, 2 s,
/// is for a service answering in milliseconds).
fn patient() -> TransactionOptions {
    TransactionOptions::new()
        .with_time_to_live(Duration::from_secs(20))
        .expect("valid time-to-live")
}

/// Opens account `main` with `balance` for each customer.
async fn open(store: &Store, customers: &[&str], balance: i64) {
    for c in customers {
        store
            .table::<Account>()
            .upsert(Account {
                customer: (*c).into(),
                name: "main".into(),
                balance,
            })
            .await
            .expect("open account");
    }
}

async fn balances(store: &Store, customers: &[&str]) -> Vec<i64> {
    let mut out = Vec::new();
    for c in customers {
        let a = store
            .table::<Account>()
            .get(*c, "main")
            .await
            .expect("read");
        out.push(a.map_or(-1, |a| a.balance));
    }
    out
}

/// Moves `amount` from `from` to `to` in one transaction of `store`.
async fn transfer(
    store: &Store,
    from: &str,
    to: &str,
    amount: i64,
) -> leasehold::Result<leasehold::lock::CommitReport> {
    let mut tx = store.transaction_with(&patient());
    let mut a = tx.get::<Account>(from, "main").await?.expect("source");
    let mut b = tx.get::<Account>(to, "main").await?.expect("target");
    a.balance -= amount;
    b.balance += amount;
    tx.replace(&a)?;
    tx.replace(&b)?;
    tx.commit().await
}

/// A transfer between two partitions (read 2, write 2) costs 6 requests —
/// 2 reads, the marking transaction of the second partition, the commit
/// point (the first partition's write and the decision row), then, behind
/// the answer, the finishing transaction and the decision row's delete —
/// takes no lease and writes no blob, and answers 2 round trips after its
/// reads.
timed async fn a_two_partition_transfer_costs_six_requests_and_answers_in_two_round_trips(ctx) {
    // Requests sent together overlap; the transaction's time-to-live,
    // which its marks must beat, far above a busy machine's replies.
    let latency = Duration::from_millis(500);
    let options = TransactionOptions::new()
        .with_time_to_live(Duration::from_secs(30))
        .expect("valid time-to-live");
    let prefix = format!("{}b", ctx.prefix());
    let faulty = FaultyBackend::new(ctx.backend().clone());
    let injector = faulty.injector();
    let counting = CountingBackend::new(Arc::new(faulty) as Arc<dyn Backend>);
    let counter = counting.counter();
    let store = process(ctx, Arc::new(counting), &prefix, 1);
    open(&store, &["a", "b"], 100).await;
    // Warm: the table is known.
    transfer(&store, "a", "b", 1).await.unwrap();
    super::behind_the_answer(&counter).await;
    counter.reset();
    let mut tx = store.transaction_with(&options);
    let mut a = tx.get::<Account>("a", "main").await.unwrap().unwrap();
    let mut b = tx.get::<Account>("b", "main").await.unwrap().unwrap();
    a.balance -= 10;
    b.balance += 10;
    tx.replace(&a).unwrap();
    tx.replace(&b).unwrap();
    injector.set_latency(None, latency);
    let reads = counter.round_trips();
    let report = tx.commit().await.unwrap();
    assert_eq!(counter.round_trips() - reads, 2, "{report:?}");
    assert!(report.transaction.is_some(), "{report:?}");
    // The finishing round goes on behind the answer.
    super::behind_the_answer(&counter).await;
    injector.set_latency(None, Duration::ZERO);
    let sent = counter.snapshot();
    assert_eq!(sent.get(&Op::Get), Some(&2), "{sent:?}");
    assert_eq!(sent.get(&Op::Batch), Some(&3), "{sent:?}");
    assert_eq!(sent.get(&Op::Write), Some(&1), "{sent:?}");
    assert_eq!(counter.total(), 6, "{sent:?}");
    for op in [Op::AcquireLease, Op::PutBlob, Op::SetBlobMetadata] {
        assert!(!sent.contains_key(&op), "no lease, no blob: {sent:?}");
    }
    assert_eq!(balances(&store, &["a", "b"]).await, vec![89, 111]);
    super::lock_many::nothing_pending(&store, &["a", "b"]).await;
}

/// `Transaction::get_many` reads the rows of two partitions in one round
/// trip (2 gets at once), answers a row read before or staged from memory,
/// a missing row as `None`, and its reads are validated at commit like
/// `get`'s: the same transfer then costs the same 6 requests and answers
/// 3 round trips after it began, and a row changed since it was read
/// fails the commit, nothing applied.
timed async fn get_many_reads_two_partitions_in_one_round_trip_and_validates_them(ctx) {
    // Requests sent together overlap; the transaction's time-to-live,
    // which its marks must beat, far above a busy machine's replies.
    let latency = Duration::from_millis(500);
    let options = TransactionOptions::new()
        .with_time_to_live(Duration::from_secs(30))
        .expect("valid time-to-live");
    let prefix = format!("{}g", ctx.prefix());
    let faulty = FaultyBackend::new(ctx.backend().clone());
    let injector = faulty.injector();
    let counting = CountingBackend::new(Arc::new(faulty) as Arc<dyn Backend>);
    let counter = counting.counter();
    let store = process(ctx, Arc::new(counting), &prefix, 1);
    open(&store, &["a", "b"], 100).await;
    // Warm: the table is known.
    transfer(&store, "a", "b", 1).await.unwrap();
    super::behind_the_answer(&counter).await;
    counter.reset();
    injector.set_latency(None, latency);
    let mut tx = store.transaction_with(&options);
    let mut rows = tx
        .get_many::<Account, _, _>([("a", "main"), ("b", "main")])
        .await
        .unwrap();
    assert_eq!(counter.round_trips(), 1, "{counter:?}");
    assert_eq!(counter.get(Op::Get), 2, "{counter:?}");
    let mut b = rows.pop().unwrap().unwrap();
    let mut a = rows.pop().unwrap().unwrap();
    assert_eq!((a.balance, b.balance), (99, 101));
    a.balance -= 10;
    b.balance += 10;
    tx.replace(&a).unwrap();
    // Read before, or staged: no request.
    let again = tx
        .get_many::<Account, _, _>([("a", "main"), ("b", "main")])
        .await
        .unwrap();
    assert_eq!(
        again
            .iter()
            .map(|r| r.as_ref().unwrap().balance)
            .collect::<Vec<_>>(),
        vec![89, 101],
        "a as staged, b as read"
    );
    assert_eq!(counter.get(Op::Get), 2, "{counter:?}");
    tx.replace(&b).unwrap();
    tx.commit().await.unwrap();
    assert_eq!(counter.round_trips(), 3, "{counter:?}");
    super::behind_the_answer(&counter).await;
    injector.set_latency(None, Duration::ZERO);
    let sent = counter.snapshot();
    // 2 gets, the marking transaction, the commit point, the finishing
    // transaction, the decision row's delete.
    assert_eq!(sent.get(&Op::Get), Some(&2), "{sent:?}");
    assert_eq!(sent.get(&Op::Batch), Some(&3), "{sent:?}");
    assert_eq!(sent.get(&Op::Write), Some(&1), "{sent:?}");
    assert_eq!(counter.total(), 6, "{sent:?}");
    assert_eq!(balances(&store, &["a", "b"]).await, vec![89, 111]);

    // A missing row reads as `None`; a row read and changed since fails
    // the commit.
    let mut tx = store.transaction_with(&patient());
    let rows = tx
        .get_many::<Account, _, _>([("a", "main"), ("zz", "main"), ("b", "main")])
        .await
        .unwrap();
    assert!(rows[1].is_none(), "{rows:?}");
    drop(tx);
    let mut tx = store.transaction_with(&patient());
    let rows = tx
        .get_many::<Account, _, _>([("a", "main"), ("b", "main")])
        .await
        .unwrap();
    let mut a = rows[0].clone().unwrap();
    a.balance += 1;
    tx.replace(&a).unwrap();
    store
        .table::<Account>()
        .update_with("b", "main", |b| b.balance += 1000)
        .await
        .unwrap();
    let e = tx.commit().await.expect_err("b changed since it was read");
    let kind = match &e {
        leasehold::Error::Batch { source, .. } => source.kind(),
        other => other.kind(),
    };
    assert_eq!(kind, ErrorKind::Conflict, "{e}");
    assert_eq!(balances(&store, &["a", "b"]).await, vec![89, 1111]);
    super::lock_many::nothing_pending(&store, &["a", "b"]).await;
}

/// Two transactions each read two rows (of two partitions) and write the
/// other one: the second to commit is refused with `Conflict`, nothing of
/// it applied; committed at once, at most one goes through. No write skew.
timed async fn write_skew_is_refused(ctx) {
    let prefix = format!("{}s", ctx.prefix());
    let store = process(ctx, ctx.backend().clone(), &prefix, 1);
    for round in 0..2 {
        open(&store, &["x", "y"], 0).await;
        let mut t1 = store.transaction_with(&patient());
        let mut t2 = store.transaction_with(&patient());
        let mut x1 = t1.get::<Account>("x", "main").await.unwrap().unwrap();
        let _ = t1.get::<Account>("y", "main").await.unwrap().unwrap();
        let _ = t2.get::<Account>("x", "main").await.unwrap().unwrap();
        let mut y2 = t2.get::<Account>("y", "main").await.unwrap().unwrap();
        x1.balance = 1;
        y2.balance = 1;
        t1.replace(&x1).unwrap();
        t2.replace(&y2).unwrap();
        let (r1, r2) = if round == 0 {
            let r1 = t1.commit().await;
            (r1, t2.commit().await)
        } else {
            tokio::join!(t1.commit(), t2.commit())
        };
        let stored = balances(&store, &["x", "y"]).await;
        let committed = [r1.is_ok(), r2.is_ok()];
        assert_ne!(committed, [true, true], "round {round}: {r1:?} {r2:?}");
        assert_eq!(
            stored.iter().sum::<i64>(),
            committed.iter().filter(|c| **c).count() as i64
        );
        if round == 0 {
            assert!(r1.is_ok(), "{r1:?}");
            let e = r2.as_ref().expect_err("the second is refused");
            let kind = match e {
                leasehold::Error::Batch { source, .. } => source.kind(),
                other => other.kind(),
            };
            assert_eq!(kind, ErrorKind::Conflict, "{e}");
        }
        for r in [r1, r2].into_iter().filter_map(Result::err) {
            assert_ne!(r.kind(), ErrorKind::InDoubt, "{r}");
        }
        super::lock_many::nothing_pending(&store, &["x", "y"]).await;
    }
}

/// A writer that stops after marking its rows, before its commit point:
/// a reader sees the row as before the transaction once it has seen the
/// mark for the time-to-live (plus a few round trips), and the writer,
/// waking later, has its commit point refused (not sent), told
/// `Conflict`, nothing applied.
timed async fn a_stopped_writers_marks_are_withdrawn_after_the_time_to_live(ctx) {
    let prefix = format!("{}w", ctx.prefix());
    let memory = ctx.backend().clone();
    let reader = process(ctx, memory.clone(), &prefix, 1);
    open(&reader, &["a", "b"], 100).await;
    let faulty = FaultyBackend::new(memory);
    let injector = faulty.injector();
    let writer = process(ctx, Arc::new(faulty), &prefix, 1);
    let ttl = Duration::from_secs(2);
    let mut tx =
        writer.transaction_with(&TransactionOptions::new().with_time_to_live(ttl).unwrap());
    let mut a = tx.get::<Account>("a", "main").await.unwrap().unwrap();
    let mut b = tx.get::<Account>("b", "main").await.unwrap().unwrap();
    a.balance -= 10;
    b.balance += 10;
    tx.replace(&a).unwrap();
    tx.replace(&b).unwrap();
    // The marking transaction (b's row), then a stop before the commit
    // point: three times the time-to-live on paused time, on real time far
    // beyond what the reader takes on a busy machine.
    let stop = match ctx.clock() {
        Clock::Paused => ttl * 3,
        Clock::Real => Duration::from_secs(40),
    };
    injector.inject(Some(Op::Batch), 2, Fault::Delay(stop));
    let (answer, seen) = tokio::join!(tx.commit(), async {
        // Read once b's row carries the mark.
        while !marked(&reader, "b").await {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let t = tokio::time::Instant::now();
        let b = reader
            .table::<Account>()
            .get("b", "main")
            .await
            .unwrap()
            .unwrap();
        (b.balance, t.elapsed())
    });
    assert_eq!(seen.0, 100, "the row as before the transaction");
    // The time-to-live and a few round trips: not the writer's stop.
    let bound = match ctx.clock() {
        Clock::Paused => ttl + Duration::from_millis(100),
        Clock::Real => stop / 2,
    };
    assert!(seen.1 >= ttl && seen.1 <= bound, "waited {:?}", seen.1);
    let e = answer.expect_err("the commit point never went out");
    assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
    assert_eq!(balances(&reader, &["a", "b"]).await, vec![100, 100]);
    super::lock_many::nothing_pending(&reader, &["a", "b"]).await;
}

/// Whether a row of `customer` carries a commit's mark.
async fn marked(store: &Store, customer: &str) -> bool {
    super::stored_rows(store.backend(), store.table_prefix())
        .await
        .iter()
        .any(|(_, row)| {
            row.data.partition_key.as_str() == customer
                && row.data.properties.get("_lhTxn").is_some()
        })
}

/// The commit point's reply is lost and the decision cannot be read back
/// (storage stops answering): `InDoubt`, naming the transaction;
/// `commit_outcome` then says applied, and readers see it whole.
timed async fn a_lost_commit_point_reply_is_in_doubt_and_settled_by_commit_outcome(ctx) {
    let prefix = format!("{}d", ctx.prefix());
    let memory = ctx.backend().clone();
    let healthy = process(ctx, memory.clone(), &prefix, 1);
    open(&healthy, &["a", "b"], 100).await;
    let faulty = FaultyBackend::new(memory);
    let injector = faulty.injector();
    let dying = process(ctx, Arc::new(faulty), &prefix, 1);
    let mut tx = dying.transaction_with(&patient());
    let mut a = tx.get::<Account>("a", "main").await.unwrap().unwrap();
    let mut b = tx.get::<Account>("b", "main").await.unwrap().unwrap();
    a.balance -= 10;
    b.balance += 10;
    tx.replace(&a).unwrap();
    tx.replace(&b).unwrap();
    injector.lose_reply_nth(Some(Op::Batch), 2);
    injector.die_at_nth(Some(Op::Get), 1);
    let e = tx.commit().await.expect_err("in doubt");
    assert_eq!(e.kind(), ErrorKind::InDoubt, "{e}");
    let leasehold::Error::InDoubt {
        primary,
        transaction,
        ..
    } = &e
    else {
        panic!("{e:?}")
    };
    let txn = transaction.as_deref().expect("named");
    let outcome = healthy.commit_outcome(primary.clone(), txn).await.unwrap();
    assert_eq!(outcome, CommitOutcome::Applied);
    assert_eq!(balances(&healthy, &["a", "b"]).await, vec![90, 110]);
    super::lock_many::nothing_pending(&healthy, &["a", "b"]).await;
}

/// 25 `transact` calls at once, each moving money between the accounts
/// of two partitions, all succeed (conflicts run again), and the total
/// is conserved.
timed async fn concurrent_transact_calls_all_succeed_and_conserve_money(ctx) {
    let prefix = format!("{}c", ctx.prefix());
    let store = process(ctx, ctx.backend().clone(), &prefix, 200);
    open(&store, &["p", "q"], 1000).await;
    let runs = (0..25).map(|i| {
        let store = store.clone();
        async move {
            let (from, to) = if i % 2 == 0 { ("p", "q") } else { ("q", "p") };
            store
                .transact(|tx| {
                    Box::pin(async move {
                        let mut a = tx.get::<Account>(from, "main").await?.expect("source");
                        let mut b = tx.get::<Account>(to, "main").await?.expect("target");
                        a.balance -= i;
                        b.balance += i;
                        tx.replace(&a)?;
                        tx.replace(&b)
                    })
                })
                .await
        }
    });
    for result in futures_util::future::join_all(runs).await {
        result.expect("every transfer commits");
    }
    let stored = balances(&store, &["p", "q"]).await;
    assert_eq!(stored.iter().sum::<i64>(), 2000, "{stored:?}");
    // Evens move 0+2+…+24 = 156 from p, odds 1+3+…+23 = 144 back.
    assert_eq!(stored, vec![1000 - 156 + 144, 1000 + 156 - 144]);
}

/// An indexed type's unique value: a transaction giving a member an
/// e-mail another member holds is refused with `ValueTaken`, nothing
/// applied; one giving a free e-mail commits, and `get_by` finds it.
timed async fn a_transaction_keeps_unique_values(ctx) {
    let prefix = format!("{}u", ctx.prefix());
    let store = process(ctx, ctx.backend().clone(), &prefix, 1);
    let members = store.table::<Member>();
    let ann = Member {
        region: "eu".into(),
        id: "ann".into(),
        email: "ann@example.com".into(),
    };
    members.insert(ann.clone()).await.unwrap();
    let mut tx = store.transaction_with(&patient());
    tx.insert(&Member {
        region: "us".into(),
        id: "bob".into(),
        email: "ann@example.com".into(),
    })
    .unwrap();
    let e = tx.commit().await.expect_err("taken");
    assert_eq!(e.kind(), ErrorKind::ValueTaken, "{e}");
    assert!(members.get("us", "bob").await.unwrap().is_none());
    let mut tx = store.transaction_with(&patient());
    let mut a = tx.get::<Member>("eu", "ann").await.unwrap().unwrap();
    a.email = "ann@example.org".into();
    tx.replace(&a).unwrap();
    tx.insert(&Member {
        region: "us".into(),
        id: "bob".into(),
        email: "ann@example.com".into(),
    })
    .unwrap();
    tx.commit().await.unwrap();
    let c = Member::columns();
    let holder = members.get_by(c.email, "ann@example.com").await.unwrap();
    assert_eq!(holder.map(|m| m.id.clone()), Some("bob".to_owned()));
    let holder = members.get_by(c.email, "ann@example.org").await.unwrap();
    assert_eq!(holder.map(|m| m.id.clone()), Some("ann".to_owned()));
}

/// Transactions and locked units on the same rows: a unit's read
/// resolves a transaction's marks, and a transaction's read a unit's;
/// money is conserved.
timed async fn transactions_and_units_on_the_same_rows_conserve_money(ctx) {
    let prefix = format!("{}m", ctx.prefix());
    let store = process(ctx, ctx.backend().clone(), &prefix, 200);
    open(&store, &["m", "n"], 500).await;
    let txns = (0..6).map(|i| {
        let store = store.clone();
        async move {
            store
                .transact(|tx| {
                    Box::pin(async move {
                        let mut a = tx.get::<Account>("m", "main").await?.expect("m");
                        let mut b = tx.get::<Account>("n", "main").await?.expect("n");
                        a.balance -= i;
                        b.balance += i;
                        tx.replace(&a)?;
                        tx.replace(&b)
                    })
                })
                .await
                .map(drop)
        }
    });
    let units = (0..6).map(|i| {
        let store = store.clone();
        async move {
            loop {
                let mut unit = store.lock_many(["m", "n"]).await?;
                let mut a = unit.get_in::<Account>("n", "main").await?.expect("n");
                let mut b = unit.get_in::<Account>("m", "main").await?.expect("m");
                a.balance -= i;
                b.balance += i;
                unit.replace(&a)?;
                unit.replace(&b)?;
                match unit.commit().await {
                    Ok(_) => return Ok::<(), leasehold::Error>(()),
                    // A transaction's write landed since the unit read.
                    Err(leasehold::Error::Batch { source, .. })
                        if source.kind() == ErrorKind::Conflict => {}
                    Err(e) => return Err(e),
                }
            }
        }
    });
    let (t, u) = tokio::join!(
        futures_util::future::join_all(txns),
        futures_util::future::join_all(units)
    );
    for r in t.into_iter().chain(u) {
        r.expect("committed");
    }
    let stored = balances(&store, &["m", "n"]).await;
    assert_eq!(stored, vec![500, 500], "each side moved 0+1+…+5 both ways");
    super::lock_many::nothing_pending(&store, &["m", "n"]).await;
}

/// A transaction within one partition and table is one entity-group
/// transaction — its writes, and a merge of nothing at the ETag read for
/// each row it only read — so it still fails, nothing applied, when a row
/// it read changed since; and it sends no mark.
timed async fn a_one_partition_transaction_is_one_batch_and_validates_its_reads(ctx) {
    let prefix = format!("{}o", ctx.prefix());
    let counting = CountingBackend::new(ctx.backend().clone());
    let counter = counting.counter();
    let store = process(ctx, Arc::new(counting), &prefix, 1);
    for name in ["main", "savings"] {
        store
            .table::<Account>()
            .upsert(Account {
                customer: "k".into(),
                name: name.into(),
                balance: 50,
            })
            .await
            .unwrap();
    }
    for changed in [false, true] {
        let mut tx = store.transaction_with(&patient());
        let mut main = tx.get::<Account>("k", "main").await.unwrap().unwrap();
        let savings = tx.get::<Account>("k", "savings").await.unwrap().unwrap();
        main.balance = savings.balance * 2;
        tx.replace(&main).unwrap();
        if changed {
            let mut s = store
                .table::<Account>()
                .get("k", "savings")
                .await
                .unwrap()
                .unwrap();
            s.balance += 1;
            store.table::<Account>().replace(&s).await.unwrap();
        }
        counter.reset();
        let answer = tx.commit().await;
        assert_eq!(counter.get(Op::Batch), 1, "{:?}", counter.snapshot());
        assert_eq!(counter.total(), 1, "{:?}", counter.snapshot());
        let stored = store
            .table::<Account>()
            .get("k", "main")
            .await
            .unwrap()
            .unwrap();
        if changed {
            let e = answer.expect_err("a row read changed since");
            let kind = match &e {
                leasehold::Error::Batch { source, .. } => source.kind(),
                other => other.kind(),
            };
            assert_eq!(kind, ErrorKind::Conflict, "{e}");
            assert_eq!(stored.balance, 100, "nothing applied");
        } else {
            assert!(answer.unwrap().transaction.is_none(), "no decision row");
            assert_eq!(stored.balance, 100);
        }
    }
    let rows = super::stored_rows(store.backend(), store.table_prefix()).await;
    assert!(
        rows.iter()
            .all(|(_, r)| r.data.properties.get("_lhTxn").is_none()),
        "no mark"
    );
}

/// A row a transaction read as absent and does not write must still be
/// absent when it commits: the commit goes through when it is (the row
/// stays absent), and fails, nothing applied, when the row was inserted
/// meanwhile.
timed async fn a_row_read_as_absent_must_still_be_absent(ctx) {
    let prefix = format!("{}z", ctx.prefix());
    let store = process(ctx, ctx.backend().clone(), &prefix, 1);
    open(&store, &["a"], 100).await;
    for inserted in [false, true] {
        let mut tx = store.transaction_with(&patient());
        let ghost = format!("ghost{inserted}");
        assert!(
            tx.get::<Account>("b", ghost.as_str())
                .await
                .unwrap()
                .is_none()
        );
        let mut a = tx.get::<Account>("a", "main").await.unwrap().unwrap();
        a.balance += 1;
        tx.replace(&a).unwrap();
        if inserted {
            store
                .table::<Account>()
                .insert(Account {
                    customer: "b".into(),
                    name: ghost.clone(),
                    balance: 5,
                })
                .await
                .unwrap();
        }
        let answer = tx.commit().await;
        let stored = balances(&store, &["a"]).await;
        if inserted {
            let e = answer.expect_err("the row is there now");
            assert_ne!(e.kind(), ErrorKind::InDoubt, "{e}");
            assert_eq!(stored, vec![101], "nothing applied");
        } else {
            answer.expect("still absent");
            assert_eq!(stored, vec![101]);
            let ghost_row = store
                .table::<Account>()
                .get("b", ghost.as_str())
                .await
                .unwrap();
            assert!(ghost_row.is_none(), "the row stays absent");
        }
    }
    super::lock_many::nothing_pending(&store, &["a", "b"]).await;
}
}
