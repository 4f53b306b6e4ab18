//! What reads return while a commit over several partitions is unfinished:
//! a filtered query (plain, in a unit, projected, page by page) finds every
//! row a decided commit left marked, as that commit leaves it, and never an
//! after-image that was not committed; and a unit's reads answered after
//! its locks may have run out fail rather than show a torn view.

use std::sync::Arc;
use std::time::Duration;

use futures_util::TryStreamExt as _;
use leasehold::backend::Backend;
use leasehold::backend::Op;
use leasehold::key::TableName;
use leasehold::lease::LeaseOptions;
use leasehold::lock::CommitOutcome;
use leasehold::query::TypedFilter;
use leasehold::testing::{Fault, FaultInjector, FaultyBackend};
use leasehold::{Entity, ErrorKind, PartitionKey, RowKey, Store, Versioned};

use super::Ctx;

crate::checks::checks! {

/// A customer's account.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "ReadAccounts")]
struct Account {
    #[entity(partition_key)]
    pub customer: String,
    #[entity(row_key)]
    pub name: String,
    pub balance: i64,
    pub note: String,
}

/// A projection of [`Account`] with the balance.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "ReadAccounts")]
struct Balance {
    #[entity(partition_key)]
    pub customer: String,
    #[entity(row_key)]
    pub name: String,
    pub balance: i64,
}

/// A projection of [`Account`] without the balance.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "ReadAccounts")]
struct Note {
    #[entity(partition_key)]
    pub customer: String,
    #[entity(row_key)]
    pub name: String,
    pub note: String,
}

const CUSTOMERS: [&str; 2] = ["c0", "c1"];

/// A store ("process") on `backend` with the given table prefix, its locks
/// lasting the context's lease duration.
fn process(ctx: &Ctx, backend: Arc<dyn Backend>, prefix: &str) -> Store {
    Store::builder_shared(backend)
        .table_prefix(prefix)
        .expect("valid prefix")
        .lease_options(LeaseOptions::new().with_duration(ctx.lease_duration()))
        .build()
        .expect("valid store")
}

/// Opens account `main` of both customers with a balance of 100.
async fn open(store: &Store) {
    for c in CUSTOMERS {
        store
            .table::<Account>()
            .upsert(Account {
                customer: c.into(),
                name: "main".into(),
                balance: 100,
                note: format!("of {c}"),
            })
            .await
            .expect("open account");
    }
}

/// Moves `amount` from `c0` to `c1` in a unit holding both.
async fn transfer(store: &Store, amount: i64) -> leasehold::Result<()> {
    let mut unit = store.lock_many(CUSTOMERS).await?;
    let mut from = unit
        .get_in::<Account>("c0", "main")
        .await?
        .expect("account");
    let mut to = unit
        .get_in::<Account>("c1", "main")
        .await?
        .expect("account");
    from.balance -= amount;
    to.balance += amount;
    unit.replace(&from)?;
    unit.replace(&to)?;
    unit.commit().await.map(|_| ())
}

/// How a transfer's writer stops half-way.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Stop {
    /// After its commit point (which `commit` answers `Ok`), before the
    /// marked row is finished: the commit is decided.
    AfterCommitPoint,
    /// Before its commit point: the row is marked, nothing decided.
    BeforeCommitPoint,
    /// As [`Stop::BeforeCommitPoint`], then withdrawn through
    /// `commit_outcome`, the mark still on the row.
    Withdrawn,
}

/// A transfer of 50 from `c0` to `c1` (both at 100) whose writer stops as
/// `stop` says, one of the two rows left marked. Answers a healthy store
/// ("another process") on the same tables and the customer whose row
/// carries the mark.
async fn stopped_transfer(ctx: &Ctx, tag: &str, stop: Stop) -> (Store, &'static str) {
    let prefix = format!("{}{tag}", ctx.prefix());
    let healthy = process(ctx, ctx.backend().clone(), &prefix);
    open(&healthy).await;
    let faulty = FaultyBackend::new(ctx.backend().clone());
    let injector = faulty.injector();
    let writer = process(ctx, Arc::new(faulty), &prefix);
    let mut unit = writer.lock_many(CUSTOMERS).await.expect("lock");
    let mut from = unit.get_in::<Account>("c0", "main").await.unwrap().unwrap();
    let mut to = unit.get_in::<Account>("c1", "main").await.unwrap().unwrap();
    from.balance -= 50;
    to.balance += 50;
    unit.replace(&from).unwrap();
    unit.replace(&to).unwrap();
    // The first transaction marks the other partition's row, the second
    // is the commit point, the third finishes the marked row. A failed
    // transaction is followed by reads (of the row to finish, or of the
    // decision): failed too, as if the writer had stopped there.
    match stop {
        Stop::AfterCommitPoint => {
            injector.fail_nth(Some(Op::Batch), 3);
            injector.fail_nth(Some(Op::Get), 1);
            unit.commit().await.expect("applied at its commit point");
        }
        Stop::BeforeCommitPoint | Stop::Withdrawn => {
            injector.fail_nth(Some(Op::Batch), 2);
            injector.fail_nth(Some(Op::Get), 1);
            let e = unit.commit().await.expect_err("its commit point failed");
            let leasehold::Error::InDoubt {
                primary,
                transaction,
                ..
            } = &e
            else {
                panic!("the decision could not be read: {e:?}");
            };
            if stop == Stop::Withdrawn {
                let txn = transaction.as_deref().expect("an id");
                assert_eq!(
                    healthy.commit_outcome(primary.clone(), txn).await.unwrap(),
                    CommitOutcome::NotApplied,
                    "withdrawn"
                );
            }
        }
    }
    let marked = marked_customer(ctx, &prefix)
        .await
        .expect("one row still carries the commit's mark");
    drop(writer);
    (healthy, marked)
}

/// The customer whose account row carries a commit's mark, as stored.
async fn marked_customer(ctx: &Ctx, prefix: &str) -> Option<&'static str> {
    let table = TableName::new(format!("{prefix}ReadAccounts")).expect("name");
    let rk = RowKey::new("main").expect("key");
    for c in CUSTOMERS {
        let pk = PartitionKey::new(c).expect("key");
        let row = ctx.backend().get(&table, &pk, &rk).await.expect("read");
        if row.is_some_and(|r| r.data.properties.get("_lhTxn").is_some()) {
            return Some(c);
        }
    }
    None
}

/// A filter the transfer's result matches for `customer`'s account and
/// its starting balance (100) does not, and that result: 50 for `c0`, 150
/// for `c1`.
fn after_of(customer: &str) -> (TypedFilter<Account>, i64) {
    let c = Account::columns();
    if customer == "c0" {
        (c.balance.le(50), 50)
    } else {
        (c.balance.ge(150), 150)
    }
}

fn found<E: leasehold::entity::Entity>(
    rows: &[Versioned<E>],
    key: impl Fn(&E) -> (String, i64),
) -> Vec<(String, i64)> {
    let mut seen: Vec<(String, i64)> = rows.iter().map(|r| key(r.entity())).collect();
    seen.sort();
    seen
}

fn accounts(rows: &[Versioned<Account>]) -> Vec<(String, i64)> {
    found(rows, |a| (a.customer.clone(), a.balance))
}

/// A transfer whose writer stopped after its commit point, before it
/// finished the other partition's row (its commit answered `Ok`): a
/// filtered plain query finds that row as the commit leaves it, although
/// the service still stores its before-image; and a filter only the
/// before-image matches does not find it.
plain async fn a_filtered_query_finds_a_committed_row_left_marked(ctx) {
    let (store, marked) = stopped_transfer(ctx, "q", Stop::AfterCommitPoint).await;
    let (after, balance) = after_of(marked);
    let rows = store
        .table::<Account>()
        .query()
        .filter(after)
        .all()
        .await
        .expect("a query");
    assert_eq!(accounts(&rows), [(marked.to_owned(), balance)]);
    let c = Account::columns();
    let before = store
        .table::<Account>()
        .query()
        .partition(marked)
        .filter(c.balance.eq(100))
        .all()
        .await
        .expect("a query");
    assert!(before.is_empty(), "the before-image is gone: {before:?}");
    let all = store.table::<Account>().query().all().await.unwrap();
    assert_eq!(
        accounts(&all),
        [("c0".to_owned(), 50), ("c1".to_owned(), 150)]
    );
}

/// As [`a_filtered_query_finds_a_committed_row_left_marked`], through a
/// filtered query of a unit holding both partitions.
plain async fn a_units_filtered_query_finds_a_committed_row_left_marked(ctx) {
    let (store, marked) = stopped_transfer(ctx, "u", Stop::AfterCommitPoint).await;
    let (after, balance) = after_of(marked);
    let mut unit = store.lock_many(CUSTOMERS).await.expect("lock");
    let rows = unit.query::<Account>().filter(after).all().await.unwrap();
    assert_eq!(accounts(&rows), [(marked.to_owned(), balance)]);
    let (after, _) = after_of(marked);
    let rows = unit
        .query::<Account>()
        .partition(marked)
        .filter(after)
        .all()
        .await
        .unwrap();
    assert_eq!(accounts(&rows), [(marked.to_owned(), balance)]);
    unit.abandon().await.unwrap();
}

/// As [`a_filtered_query_finds_a_committed_row_left_marked`], through
/// projections: unfiltered, filtered holding the filtered property, and
/// filtered without it.
plain async fn a_filtered_projection_finds_a_committed_row_left_marked(ctx) {
    // Unfiltered, the marked row is resolved from the after-image the
    // projection asks for too.
    let (store, _) = stopped_transfer(ctx, "o", Stop::AfterCommitPoint).await;
    let rows = store
        .table::<Account>()
        .query()
        .select::<Balance>()
        .all()
        .await
        .expect("a projection");
    assert_eq!(
        found(&rows, |b| (b.customer.clone(), b.balance)),
        [("c0".to_owned(), 50), ("c1".to_owned(), 150)]
    );
    let (store, marked) = stopped_transfer(ctx, "p", Stop::AfterCommitPoint).await;
    let (after, balance) = after_of(marked);
    let rows = store
        .table::<Account>()
        .query()
        .filter(after)
        .select::<Balance>()
        .all()
        .await
        .expect("a projection");
    assert_eq!(
        found(&rows, |b| (b.customer.clone(), b.balance)),
        [(marked.to_owned(), balance)]
    );
    let (store, marked) = stopped_transfer(ctx, "n", Stop::AfterCommitPoint).await;
    let (after, _) = after_of(marked);
    let rows = store
        .table::<Account>()
        .query()
        .filter(after)
        .select::<Note>()
        .all()
        .await
        .expect("a projection without the filtered property");
    let notes: Vec<(String, String)> = rows
        .iter()
        .map(|n| (n.customer.clone(), n.note.clone()))
        .collect();
    assert_eq!(notes, [(marked.to_owned(), format!("of {marked}"))]);
}

/// As [`a_filtered_query_finds_a_committed_row_left_marked`], page by
/// page: pages of one entity find both rows the transfer left (one of
/// them marked), and a page's token resumes the query.
plain async fn filtered_pages_find_a_committed_row_left_marked(ctx) {
    let c = Account::columns();
    let moved = || c.balance.le(50) | c.balance.ge(150);
    let (store, _) = stopped_transfer(ctx, "g", Stop::AfterCommitPoint).await;
    let pages: Vec<_> = store
        .table::<Account>()
        .query()
        .filter(moved())
        .page_size(1)
        .pages()
        .try_collect()
        .await
        .expect("pages");
    assert!(pages.iter().all(|p| p.items.len() <= 1), "{pages:?}");
    let rows: Vec<Versioned<Account>> = pages.into_iter().flat_map(|p| p.items).collect();
    assert_eq!(
        accounts(&rows),
        [("c0".to_owned(), 50), ("c1".to_owned(), 150)]
    );
    // Page by page, each resumed from the token of the one before.
    let (store, _) = stopped_transfer(ctx, "r", Stop::AfterCommitPoint).await;
    let table = store.table::<Account>();
    let mut rows = Vec::new();
    let mut token = None;
    for _ in 0..10 {
        let mut query = table.query().filter(moved()).page_size(1);
        if let Some(t) = token.take() {
            query = query.resume(t);
        }
        let page = query.page().await.expect("a page");
        assert!(page.items.len() <= 1);
        rows.extend(page.items);
        match page.continuation {
            Some(t) => token = Some(t),
            None => break,
        }
    }
    assert_eq!(
        accounts(&rows),
        [("c0".to_owned(), 50), ("c1".to_owned(), 150)]
    );
}

/// A row marked by a transfer stopped before its commit point (undecided),
/// or withdrawn since (the mark still on the row), whose after-image
/// matches a filter its before-image does not: no query returns it —
/// plain, projected, or in a unit — and each finds the row as it was.
plain async fn an_after_image_never_committed_is_never_returned(ctx) {
    let c = Account::columns();
    for (n, stop) in [Stop::BeforeCommitPoint, Stop::Withdrawn]
        .into_iter()
        .enumerate()
    {
        let (store, marked) = stopped_transfer(ctx, &format!("a{n}"), stop).await;
        let (after, _) = after_of(marked);
        let rows = store
            .table::<Account>()
            .query()
            .filter(after)
            .all()
            .await
            .unwrap();
        assert!(rows.is_empty(), "{stop:?}: {rows:?}");
        let all = store
            .table::<Account>()
            .query()
            .filter(c.balance.eq(100))
            .all()
            .await
            .unwrap();
        assert_eq!(
            accounts(&all),
            [("c0".to_owned(), 100), ("c1".to_owned(), 100)],
            "{stop:?}"
        );

        let (store, marked) = stopped_transfer(ctx, &format!("b{n}"), stop).await;
        let (after, _) = after_of(marked);
        let rows = store
            .table::<Account>()
            .query()
            .filter(after)
            .select::<Note>()
            .all()
            .await
            .unwrap();
        assert!(rows.is_empty(), "{stop:?}, projected: {rows:?}");

        let (store, marked) = stopped_transfer(ctx, &format!("c{n}"), stop).await;
        let (after, _) = after_of(marked);
        let mut unit = store.lock_many(CUSTOMERS).await.expect("lock");
        let rows = unit.query::<Account>().filter(after).all().await.unwrap();
        assert!(rows.is_empty(), "{stop:?}, in a unit: {rows:?}");
        let all = unit.query::<Account>().all().await.unwrap();
        assert_eq!(
            accounts(&all),
            [("c0".to_owned(), 100), ("c1".to_owned(), 100)],
            "{stop:?}"
        );
        unit.abandon().await.unwrap();
    }
}

/// A filter of `n` comparisons of `balance` that the transfer's result for
/// `customer` matches (the last one) and nothing else does.
fn many_comparisons(customer: &str, n: usize) -> TypedFilter<Account> {
    let c = Account::columns();
    let mut f = c.balance.eq(1000);
    for i in 1..n - 1 {
        f = f | c.balance.eq(1000 + i as i64);
    }
    f | c.balance.eq(after_of(customer).1)
}

/// A filter of 15 comparisons (the service's limit, so the query cannot
/// add the one that fetches marked rows) still finds a committed row left
/// marked, and only the rows it matches: plain, in pages of one, projected
/// without the filtered property, and in a unit (14 of the user's, with
/// the partition's).
plain async fn a_filter_of_fifteen_comparisons_finds_a_committed_row_left_marked(ctx) {
    let (store, marked) = stopped_transfer(ctx, "f", Stop::AfterCommitPoint).await;
    let balance = if marked == "c0" { 50 } else { 150 };
    let f = many_comparisons(marked, 15);
    assert_eq!(f.clone().into_filter().unwrap().comparisons(), 15);
    let rows = store
        .table::<Account>()
        .query()
        .filter(f)
        .all()
        .await
        .unwrap();
    assert_eq!(accounts(&rows), [(marked.to_owned(), balance)]);

    let (store, marked) = stopped_transfer(ctx, "h", Stop::AfterCommitPoint).await;
    let pages: Vec<_> = store
        .table::<Account>()
        .query()
        .filter(many_comparisons(marked, 15))
        .page_size(1)
        .pages()
        .try_collect()
        .await
        .unwrap();
    assert!(pages.iter().all(|p| p.items.len() <= 1), "{pages:?}");
    let rows: Vec<Versioned<Account>> = pages.into_iter().flat_map(|p| p.items).collect();
    assert_eq!(accounts(&rows), [(marked.to_owned(), balance)]);
    // Unmarked rows the filter does not match stay out too.
    let none = store
        .table::<Account>()
        .query()
        .filter(many_comparisons(marked, 14) & Account::columns().balance.eq(100))
        .all()
        .await
        .unwrap();
    assert!(none.is_empty(), "{none:?}");

    let (store, marked) = stopped_transfer(ctx, "j", Stop::AfterCommitPoint).await;
    let notes = store
        .table::<Account>()
        .query()
        .filter(many_comparisons(marked, 15))
        .select::<Note>()
        .all()
        .await
        .unwrap();
    let notes: Vec<(String, String)> = notes
        .iter()
        .map(|n| (n.customer.clone(), n.note.clone()))
        .collect();
    assert_eq!(notes, [(marked.to_owned(), format!("of {marked}"))]);

    let (store, marked) = stopped_transfer(ctx, "k", Stop::AfterCommitPoint).await;
    let mut unit = store.lock_many(CUSTOMERS).await.expect("lock");
    for part in CUSTOMERS {
        let rows = unit
            .query::<Account>()
            .partition(part)
            .filter(many_comparisons(marked, 14))
            .all()
            .await
            .unwrap();
        let expected = if part == marked {
            vec![(marked.to_owned(), balance)]
        } else {
            Vec::new()
        };
        assert_eq!(accounts(&rows), expected, "in {part}");
    }
    unit.abandon().await.unwrap();
}

/// A unit holding both partitions reads one, then its process stalls past
/// its leases (renewals stuck) while another process takes the locks and
/// commits a transfer; the unit's next read — `get_in`, or a query — is
/// answered after that and fails with `LeaseLost` instead of showing the
/// other partition after the transfer beside the first as before it.
timed async fn a_units_read_answered_after_its_lease_ran_out_is_lease_lost(ctx) {
    let prefix = format!("{}l", ctx.prefix());
    let next = process(ctx, ctx.backend().clone(), &prefix);
    open(&next).await;
    let faulty = FaultyBackend::new(ctx.backend().clone());
    let injector = faulty.injector();
    let paused = process(ctx, Arc::new(faulty), &prefix);
    let stall = |injector: &FaultInjector, op: Op| {
        injector.inject(Some(op), 1, Fault::Delay(ctx.lease_duration() * 3));
        injector.set_latency(Some(Op::RenewLease), Duration::from_secs(3600));
    };

    let mut unit = paused.lock_many(CUSTOMERS).await.expect("lock");
    let first = unit.get_in::<Account>("c0", "main").await.unwrap().unwrap();
    assert_eq!(first.balance, 100);
    stall(&injector, Op::Get);
    let (read, moved) = tokio::join!(unit.get_in::<Account>("c1", "main"), transfer(&next, 10));
    moved.expect("the other process commits once the leases ran out");
    let e = read.expect_err("answered after the leases ran out");
    assert_eq!(e.kind(), ErrorKind::LeaseLost, "{e}");
    let _ = unit.abandon().await;
    injector.set_latency(Some(Op::RenewLease), Duration::ZERO);

    let mut unit = paused.lock_many(CUSTOMERS).await.expect("lock");
    let first = unit.get_in::<Account>("c0", "main").await.unwrap().unwrap();
    assert_eq!(first.balance, 90);
    stall(&injector, Op::Query);
    let (read, moved) = tokio::join!(
        unit.query::<Account>().partition("c1").all(),
        transfer(&next, 10)
    );
    moved.expect("the other process commits once the leases ran out");
    let e = read.expect_err("answered after the leases ran out");
    assert_eq!(e.kind(), ErrorKind::LeaseLost, "{e}");
    let _ = unit.abandon().await;
    injector.set_latency(Some(Op::RenewLease), Duration::ZERO);
    let all = next.table::<Account>().query().all().await.unwrap();
    assert_eq!(
        accounts(&all),
        [("c0".to_owned(), 80), ("c1".to_owned(), 120)]
    );
}

/// A unit's read answered late but while its leases hold — renewed
/// meanwhile, or not renewed but still within their time — returns the
/// row.
timed async fn a_units_read_answered_within_its_lease_is_returned(ctx) {
    let prefix = format!("{}w", ctx.prefix());
    let store = process(ctx, ctx.backend().clone(), &prefix);
    open(&store).await;
    let faulty = FaultyBackend::new(ctx.backend().clone());
    let injector = faulty.injector();
    let slow = process(ctx, Arc::new(faulty), &prefix);
    let mut unit = slow.lock_many(CUSTOMERS).await.expect("lock");
    // Slow, the leases renewed meanwhile.
    injector.inject(Some(Op::Get), 1, Fault::Delay(ctx.lease_duration() * 2));
    let read = unit.get_in::<Account>("c0", "main").await.expect("in time");
    assert_eq!(read.map(|a| a.balance), Some(100));
    injector.inject(Some(Op::Query), 1, Fault::Delay(ctx.lease_duration() * 2));
    let rows = unit.query::<Account>().all().await.expect("in time");
    assert_eq!(rows.len(), 2);
    // Not renewed, answered well within the lease.
    injector.set_latency(Some(Op::RenewLease), Duration::from_secs(3600));
    injector.inject(Some(Op::Get), 1, Fault::Delay(ctx.lease_duration() / 4));
    let read = unit.get_in::<Account>("c1", "main").await.expect("in time");
    assert_eq!(read.map(|a| a.balance), Some(100));
    injector.set_latency(Some(Op::RenewLease), Duration::ZERO);
    unit.abandon().await.unwrap();
}

/// The rows of `prefix`'s tables with the reserved key prefix of commits
/// (decision rows and after-image rows), as stored.
async fn commit_rows(ctx: &Ctx, prefix: &str) -> Vec<String> {
    super::stored_rows(ctx.backend(), prefix)
        .await
        .into_iter()
        .map(|(_, r)| r.data.row_key.as_str().to_owned())
        .filter(|k| k.starts_with("_lhCommit."))
        .collect()
}

/// A committed decision row its writer left (it stopped before finishing
/// the marked row) is kept by the sweep while the mark is on the row, and
/// removed once a read has finished it and it is an hour old (whatever
/// `older_than`: `commit_outcome` answers from it meanwhile); a withdrawn
/// commit's decision row is kept while a late commit point could still
/// land (20 minutes), even once its mark is gone. A dry run counts and
/// removes nothing.
plain async fn pruning_removes_decision_rows_no_reader_needs(ctx) {
    let (healthy, marked) = stopped_transfer(ctx, "pc", Stop::AfterCommitPoint).await;
    let prefix = format!("{}pc", ctx.prefix());
    assert_eq!(commit_rows(ctx, &prefix).await.len(), 1, "the decision row");
    let report = super::sweep(&healthy, Duration::ZERO, false).await.unwrap();
    assert_eq!(report.decision_rows, 0, "a mark still needs it");
    assert_eq!(commit_rows(ctx, &prefix).await.len(), 1);
    // A read finishes the marked row.
    let row = healthy
        .table::<Account>()
        .get(marked, "main")
        .await
        .unwrap()
        .expect("account");
    assert_eq!(row.balance, after_of(marked).1);
    // Kept for an hour, whatever `older_than`.
    let young = super::sweep(&healthy, Duration::ZERO, false).await.unwrap();
    assert_eq!(young.decision_rows, 0, "{young:?}");
    let later = super::PAST_DECISIONS_KEPT;
    let plan = super::sweep_later(&healthy, Duration::ZERO, later, true)
        .await
        .unwrap();
    assert_eq!(plan.decision_rows, 1, "{plan:?}");
    assert_eq!(
        commit_rows(ctx, &prefix).await.len(),
        1,
        "a dry run removes nothing"
    );
    // Kept for `older_than` when that is longer.
    let long = Duration::from_secs(3 * 3600);
    let kept = super::sweep_later(&healthy, long, later, false)
        .await
        .unwrap();
    assert_eq!(kept.decision_rows, 0, "{kept:?}");
    let report = super::sweep_later(&healthy, Duration::ZERO, later, false)
        .await
        .unwrap();
    assert_eq!(report.decision_rows, 1, "{report:?}");
    assert!(commit_rows(ctx, &prefix).await.is_empty());

    let (healthy, marked) = stopped_transfer(ctx, "pw", Stop::Withdrawn).await;
    let prefix = format!("{}pw", ctx.prefix());
    healthy
        .table::<Account>()
        .get(marked, "main")
        .await
        .unwrap()
        .expect("account");
    let report = super::sweep(&healthy, Duration::ZERO, false).await.unwrap();
    assert_eq!(report.decision_rows, 0, "{report:?}");
    assert_eq!(
        commit_rows(ctx, &prefix).await.len(),
        1,
        "the withdrawal stays"
    );
}
}
