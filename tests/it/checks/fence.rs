//! Fenced-write checks: table writes fenced by a lease epoch
//! ([`Table::fenced`](leasehold::Table::fenced)), refused by the service once a
//! later epoch has written the partition; what they cost; and a leader
//! paused past its lease that resumes after its successor wrote.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use leasehold::backend::Op;
use leasehold::backend::{Backend, QuerySpec, TableBackend};
use leasehold::entity::Value;
use leasehold::lease::{LeaderOptions, LeaseOptions};
use leasehold::table::Fence;
use leasehold::testing::{CountingBackend, FaultyBackend, RequestCounter};
use leasehold::{Entity, Error, ErrorKind, Store, Table};
use tokio::sync::oneshot;
use tokio::task::JoinSet;

use super::{Clock, Ctx};

crate::checks::checks! {

/// A row written by fenced writers.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "FencedRows")]
struct Row {
    #[entity(partition_key)]
    part: String,
    #[entity(row_key)]
    id: String,
    by: String,
    n: i64,
}

fn row(part: &str, id: &str, by: &str, n: i64) -> Row {
    Row {
        part: part.into(),
        id: id.into(),
        by: by.into(),
        n,
    }
}

/// A store ("process") on `backend`, with the check's tables and lease
/// container and leases of `lease`.
fn process(ctx: &Ctx, backend: Arc<dyn Backend>, lease: Duration) -> Store {
    let mut options = LeaseOptions::new()
        .with_container(ctx.container.clone())
        .with_duration(lease);
    if ctx.clock() == Clock::Real {
        options = options.with_poll_interval(Duration::from_millis(500));
    }
    // As the context's store: the concurrent checks' read-modify-writes
    // may conflict many times in a row.
    let conflicts =
        leasehold::ConflictRetry::new(200, Duration::from_millis(1), Duration::from_millis(50))
            .expect("valid policy");
    Store::builder_shared(backend)
        .table_prefix(ctx.prefix())
        .expect("valid prefix")
        .conflict_retry(conflicts)
        .lease_options(options)
        .build()
        .expect("valid store")
}

/// A store counting its requests, with leases long enough (60 s) that no
/// renewal falls within what a check counts on real time.
fn counted(ctx: &Ctx) -> (Store, RequestCounter) {
    let counting = CountingBackend::new(ctx.backend().clone());
    let counter = counting.counter();
    let lease = match ctx.clock() {
        Clock::Paused => ctx.lease_duration(),
        Clock::Real => Duration::from_secs(60),
    };
    (process(ctx, Arc::new(counting), lease), counter)
}

/// The table requests counted since the last reset (blob requests, such
/// as renewals, left out).
fn table_requests(counter: &RequestCounter) -> BTreeMap<Op, u64> {
    counter
        .snapshot()
        .into_iter()
        .filter(|(op, n)| {
            *n > 0
                && matches!(
                    op,
                    Op::CreateTable | Op::Get | Op::Write | Op::Batch | Op::Query
                )
        })
        .collect()
}

fn requests(pairs: &[(Op, u64)]) -> BTreeMap<Op, u64> {
    pairs.iter().copied().collect()
}

fn lease_name(ctx: &Ctx, name: &str) -> String {
    format!("{}/{name}", ctx.prefix())
}

/// The error's kind, looking through [`Error::Batch`].
fn kind(e: &Error) -> ErrorKind {
    match e {
        Error::Batch { source, .. } => source.kind(),
        other => other.kind(),
    }
}

/// The rows of `table` as stored, fence rows included, by row key.
async fn raw_rows(ctx: &Ctx, table: &Table<Row>) -> BTreeMap<String, BTreeMap<String, Value>> {
    let name = table.name().expect("valid table name").clone();
    let page = ctx
        .backend()
        .query(&name, &QuerySpec::default())
        .await
        .expect("query");
    assert!(page.continuation.is_none(), "a few rows fit one page");
    page.entities
        .into_iter()
        .map(|e| {
            (
                format!(
                    "{}/{}",
                    e.data.partition_key.as_str(),
                    e.data.row_key.as_str()
                ),
                e.data
                    .properties
                    .iter()
                    .map(|(k, v)| (k.to_owned(), v.clone()))
                    .collect(),
            )
        })
        .collect()
}

/// Each fenced write is one transaction (one request), the fence row one
/// more operation in it; the first write of a fence to a partition reads
/// the fence row once, later ones do not; typed queries leave fence rows
/// out; bad writes are refused before any request.
plain async fn fenced_writes_cost_one_transaction_and_one_fence_read_per_partition(ctx) {
    let (store, counter) = counted(ctx);
    let guard = store
        .leases()
        .acquire(&lease_name(ctx, "cost"), Duration::from_secs(60))
        .await
        .unwrap();
    let fence = guard.fence().await.unwrap();
    let rows = store.table::<Row>();
    rows.insert(row("warm", "w", "plain", 0)).await.unwrap();
    let fenced = rows.fenced(&fence);

    counter.reset();
    let a = fenced.insert(row("p", "a", "f", 1)).await.unwrap();
    assert_eq!(
        table_requests(&counter),
        requests(&[(Op::Get, 1), (Op::Batch, 1)]),
        "the first write to a partition reads the fence row, then one transaction"
    );

    counter.reset();
    let mut a = fenced.replace(&a).await.unwrap();
    a.n = 2;
    let a = fenced.merge(&a).await.unwrap();
    fenced.upsert(row("p", "b", "f", 3)).await.unwrap();
    fenced
        .batch()
        .insert(row("p", "c", "f", 4))
        .insert(row("p", "d", "f", 5))
        .replace(&a)
        .commit()
        .await
        .unwrap();
    fenced.delete_unconditionally("p", "d").await.unwrap();
    assert_eq!(
        table_requests(&counter),
        requests(&[(Op::Batch, 5)]),
        "later writes to the partition: one transaction each, no read"
    );

    counter.reset();
    fenced.update_with("p", "b", |r| r.n += 1).await.unwrap();
    assert_eq!(
        table_requests(&counter),
        requests(&[(Op::Get, 1), (Op::Batch, 1)]),
        "update_with: its own read, then one transaction"
    );

    counter.reset();
    fenced.insert(row("q", "a", "f", 1)).await.unwrap();
    // Another fenced table of the same fence knows the partitions too.
    rows.fenced(&fence)
        .insert(row("q", "b", "f", 1))
        .await
        .unwrap();
    assert_eq!(
        table_requests(&counter),
        requests(&[(Op::Get, 1), (Op::Batch, 2)]),
        "one fence read per partition per fence"
    );

    // The fence row is stored beside the data, carrying the epoch; typed
    // queries leave it out.
    let stored = raw_rows(ctx, &rows).await;
    let fence_rows: Vec<_> = stored
        .iter()
        .filter(|(k, _)| k.starts_with("p/~lhfence~") || k.starts_with("q/~lhfence~"))
        .collect();
    assert_eq!(
        fence_rows.len(),
        2,
        "one fence row per partition: {stored:?}"
    );
    for (_, props) in &fence_rows {
        assert_eq!(
            props.get("_lhFenceEpoch"),
            Some(&Value::Int64(fence.epoch() as i64))
        );
    }
    let typed = rows.query().partition("p").all().await.unwrap();
    assert_eq!(
        typed.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["a", "b", "c"]
    );
    assert_eq!(fenced.query().all().await.unwrap().len(), 6);
    // So do the queries of a partition-locked unit.
    let mut unit = store.lock("p").await.unwrap();
    assert_eq!(unit.query::<Row>().all().await.unwrap().len(), 3);
    unit.abandon().await.unwrap();

    // 99 operations of yours fit a fenced batch; 100 do not, nor does a
    // data row with the reserved key prefix: refused before any request.
    counter.reset();
    let mut batch = fenced.batch();
    for i in 0..99 {
        batch = batch.insert(row("r", &format!("{i:03}"), "f", i));
    }
    assert_eq!(batch.commit().await.unwrap().len(), 99);
    assert_eq!(
        table_requests(&counter),
        requests(&[(Op::Get, 1), (Op::Batch, 1)])
    );
    counter.reset();
    let mut batch = fenced.batch();
    for i in 0..100 {
        batch = batch.insert(row("s", &format!("{i:03}"), "f", i));
    }
    let e = batch.commit().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(e.to_string().contains("at most 99"), "{e}");
    let e = fenced
        .insert(row("s", "~lhfence~mine", "f", 0))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(e.to_string().contains("~lhfence~mine"), "{e}");
    assert_eq!(table_requests(&counter), requests(&[]));
    assert!(
        rows.get("s", "000").await.unwrap().is_none(),
        "nothing stored"
    );
    guard.release().await.unwrap();
}

/// Once a later epoch has written a partition, every write of an earlier
/// fence there is refused: by the service when the earlier fence had
/// written the partition before (its fence row ETag is stale), before
/// sending once it has seen the later epoch (everywhere). The later
/// fence's writes stand; a stale data row under a current fence is still
/// a conflict, not a fencing error.
plain async fn an_older_epoch_is_refused_once_a_newer_one_wrote_the_partition(ctx) {
    let (store, counter) = counted(ctx);
    let guard = store
        .leases()
        .acquire(&lease_name(ctx, "epochs"), Duration::from_secs(60))
        .await
        .unwrap();
    let rows = store.table::<Row>();
    rows.insert(row("warm", "w", "plain", 0)).await.unwrap();

    // An older fence meets a newer fence row on its first write: refused
    // after the read, nothing sent.
    let older = guard.fence().await.unwrap();
    let newer = guard.fence().await.unwrap();
    assert!(older.epoch() < newer.epoch());
    rows.fenced(&newer)
        .insert(row("p", "a", "new", 1))
        .await
        .unwrap();
    counter.reset();
    let e = rows
        .fenced(&older)
        .insert(row("p", "b", "old", 1))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LeaseLost, "{e}");
    assert_eq!(e.code(), None, "refused before sending: {e}");
    assert!(
        e.to_string()
            .contains(&format!("superseded by epoch {}", newer.epoch())),
        "{e}"
    );
    assert_eq!(table_requests(&counter), requests(&[(Op::Get, 1)]));
    assert_eq!(older.superseded_by(), Some(newer.epoch()));

    // A fence that wrote the partition first is refused by the service
    // once a later fence wrote it.
    let first = guard.fence().await.unwrap();
    let second = guard.fence().await.unwrap();
    rows.fenced(&first)
        .insert(row("q", "a", "first", 1))
        .await
        .unwrap();
    rows.fenced(&second)
        .upsert(row("q", "a", "second", 2))
        .await
        .unwrap();
    counter.reset();
    let e = rows
        .fenced(&first)
        .upsert(row("q", "a", "first", 3))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LeaseLost, "{e}");
    assert!(e.code().is_some(), "refused by the service: {e}");
    assert_eq!(
        table_requests(&counter),
        requests(&[(Op::Batch, 1), (Op::Get, 1)]),
        "the transaction was refused, then the fence row read"
    );
    // From then on, refused before sending, in every partition and batch.
    counter.reset();
    for e in [
        rows.fenced(&first)
            .upsert(row("q", "a", "first", 4))
            .await
            .unwrap_err(),
        rows.fenced(&first)
            .insert(row("z", "a", "first", 4))
            .await
            .unwrap_err(),
        rows.fenced(&first)
            .batch()
            .upsert(row("q", "b", "first", 4))
            .commit()
            .await
            .unwrap_err(),
    ] {
        assert_eq!(e.kind(), ErrorKind::LeaseLost, "{e}");
        assert_eq!(e.code(), None, "{e}");
    }
    assert_eq!(table_requests(&counter), requests(&[]));
    let a = rows.get("q", "a").await.unwrap().unwrap();
    assert_eq!(
        (a.by.as_str(), a.n),
        ("second", 2),
        "the later write stands"
    );
    assert!(rows.get("q", "b").await.unwrap().is_none());
    assert!(rows.get("z", "a").await.unwrap().is_none());

    // Under the current fence, a stale data row is a conflict (the fence
    // row is untouched: the next write needs no read), and a failing
    // operation of a batch keeps its own index.
    let current = rows.fenced(&second);
    let stale = a.clone();
    let mut fresh = a;
    fresh.n = 10;
    current.replace(&fresh).await.unwrap();
    counter.reset();
    let e = current.replace(&stale).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
    let e = current
        .batch()
        .insert(row("q", "c", "second", 1))
        .insert(row("q", "a", "second", 1))
        .commit()
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Batch { index: 1, .. }), "{e}");
    assert_eq!(kind(&e), ErrorKind::AlreadyExists, "{e}");
    current.upsert(row("q", "d", "second", 1)).await.unwrap();
    assert_eq!(
        table_requests(&counter),
        requests(&[(Op::Batch, 3)]),
        "refused data rows leave the fence row's ETag current"
    );
    assert!(rows.get("q", "c").await.unwrap().is_none());
    guard.release().await.unwrap();
}

/// Tasks of one term writing one partition at once, through clones of one
/// fence and through fences of their own at the same epoch, all succeed,
/// and their read-modify-writes lose nothing.
plain async fn concurrent_writers_of_one_epoch_all_succeed(ctx) {
    const TASKS: usize = 8;
    const WRITES: i64 = 4;
    let store = process(ctx, ctx.backend().clone(), ctx.lease_duration());
    let rows = store.table::<Row>();
    rows.insert(row("p", "counter", "plain", 0)).await.unwrap();
    let options = LeaderOptions::new().with_campaign_again(false);
    let (done, result) = oneshot::channel();
    let mut done = Some(done);
    store
        .leases()
        .run_as_leader(&lease_name(ctx, "term"), options, |term| {
            let rows = rows.clone();
            let done = done.take();
            async move {
                let shared = term.fence().unwrap();
                let mut tasks = JoinSet::new();
                for t in 0..2 * TASKS {
                    // Half share one fence, half have a fence of their own.
                    let fence = if t < TASKS {
                        shared.clone()
                    } else {
                        term.fence().unwrap()
                    };
                    let rows = rows.fenced(&fence);
                    tasks.spawn(async move {
                        for i in 0..WRITES {
                            rows.insert(row("p", &format!("t{t:02}w{i}"), "leader", i))
                                .await?;
                            rows.update_with("p", "counter", |c| c.n += 1).await?;
                        }
                        Ok::<_, Error>(())
                    });
                }
                let mut outcomes = Vec::new();
                while let Some(r) = tasks.join_next().await {
                    outcomes.push(r.expect("task"));
                }
                if let Some(done) = done {
                    let _ = done.send(outcomes);
                }
            }
        })
        .await
        .unwrap();
    let outcomes = result.await.expect("the term ran");
    for outcome in &outcomes {
        assert!(outcome.is_ok(), "{outcome:?}");
    }
    let stored = rows.query().partition("p").all().await.unwrap();
    assert_eq!(stored.len(), 2 * TASKS * WRITES as usize + 1);
    let counter = rows.get("p", "counter").await.unwrap().unwrap();
    assert_eq!(counter.n, 2 * TASKS as i64 * WRITES);
}

/// Two fences of one term racing on a partition's fence row: the one whose
/// ETag went stale reads the row, finds its own epoch, and sends again:
/// one refused transaction, one read, one transaction that stands.
plain async fn a_fence_raced_by_its_own_epoch_reads_again_and_resends(ctx) {
    let (store, counter) = counted(ctx);
    let rows = store.table::<Row>();
    rows.insert(row("warm", "w", "plain", 0)).await.unwrap();
    let options = LeaderOptions::new().with_campaign_again(false);
    let (tx, rx) = oneshot::channel();
    let mut tx = Some(tx);
    store
        .leases()
        .run_as_leader(&lease_name(ctx, "race"), options, |term| {
            let (one, two) = (term.fence().unwrap(), term.fence().unwrap());
            let rows = rows.clone();
            let counter = counter.clone();
            let tx = tx.take();
            async move {
                rows.fenced(&one)
                    .insert(row("p", "a", "one", 1))
                    .await
                    .unwrap();
                rows.fenced(&two)
                    .insert(row("p", "b", "two", 1))
                    .await
                    .unwrap();
                counter.reset();
                rows.fenced(&one)
                    .insert(row("p", "c", "one", 2))
                    .await
                    .unwrap();
                if let Some(tx) = tx {
                    let _ = tx.send((table_requests(&counter), one.superseded_by()));
                }
            }
        })
        .await
        .unwrap();
    let (sent, superseded) = rx.await.unwrap();
    assert_eq!(
        sent,
        requests(&[(Op::Batch, 2), (Op::Get, 1)]),
        "refused on the stale ETag, read, sent again"
    );
    assert_eq!(superseded, None, "its own epoch does not fence it out");
    assert_eq!(rows.query().partition("p").all().await.unwrap().len(), 3);
}

/// A fence needs an epoch no earlier holder had, and a lease name that fits
/// a row key: otherwise it is refused before any request.
plain async fn fences_without_a_fresh_epoch_or_with_an_overlong_name_are_invalid(ctx) {
    let (store, counter) = counted(ctx);
    let options = LeaderOptions::new()
        .with_campaign_again(false)
        .with_epoch_per_term(false);
    let (tx, rx) = oneshot::channel();
    let mut tx = Some(tx);
    store
        .leases()
        .run_as_leader(&lease_name(ctx, "noepoch"), options, |term| {
            let tx = tx.take();
            async move {
                if let Some(tx) = tx {
                    let _ = tx.send(term.fence().map(|f| f.epoch()));
                }
            }
        })
        .await
        .unwrap();
    let e = rx.await.unwrap().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(e.to_string().contains("epoch"), "{e}");

    // 256 bytes of `/` are 768 characters once encoded: too long a row key.
    let name = "/".repeat(256);
    let guard = store
        .leases()
        .acquire(&name, Duration::from_secs(60))
        .await
        .unwrap();
    counter.reset();
    let e = guard.fence().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(e.to_string().contains("fence row key"), "{e}");
    assert_eq!(table_requests(&counter), requests(&[]));
    guard.release().await.unwrap();
}

/// What the paused leader's fenced writes did.
#[derive(Debug)]
struct Late {
    /// The write that was in flight while the leader was paused.
    in_flight: Result<(), Error>,
    /// When it completed, by the order of events.
    completed_after_successor: bool,
}

/// A leader whose lease ran out while it was paused (its requests held up
/// past the lease) resumes after its successor's first fenced write: every
/// fenced write it sends from then on is refused (the one in flight by the
/// service, the later ones before sending), and the successor's writes
/// stand.
timed async fn a_leader_paused_past_its_lease_is_fenced_out_by_its_successor(ctx) {
    let lease = ctx.lease_duration();
    let name = lease_name(ctx, "leader");
    let counting = CountingBackend::new(ctx.backend().clone());
    let paused_counter = counting.counter();
    let faulty = FaultyBackend::new(counting);
    let pause = faulty.injector();
    let paused = process(ctx, Arc::new(faulty), lease);
    let successor = process(ctx, ctx.backend().clone(), lease);
    let rows = paused.table::<Row>();

    // The first leader: its term hands its fence out and then never looks
    // at its lease again, as a paused process would not.
    let (fence_tx, fence_rx) = oneshot::channel::<Fence>();
    let (end_tx, end_rx) = oneshot::channel::<()>();
    let mut fence_tx = Some(fence_tx);
    let mut end_rx = Some(end_rx);
    let first_leases = paused.leases().clone();
    let first_name = name.clone();
    let first = tokio::spawn(async move {
        first_leases
            .run_as_leader(
                &first_name,
                LeaderOptions::new().with_campaign_again(false),
                |term| {
                    let fence_tx = fence_tx.take();
                    let end_rx = end_rx.take();
                    async move {
                        if let Some(tx) = fence_tx {
                            let _ = tx.send(term.fence().unwrap());
                        }
                        if let Some(rx) = end_rx {
                            let _ = rx.await;
                        }
                    }
                },
            )
            .await
    });
    let old = fence_rx.await.expect("the first leader's fence");
    let old_rows = rows.fenced(&old);
    for i in 0..4 {
        old_rows
            .upsert(row("p", &format!("r{i}"), "old", 0))
            .await
            .unwrap();
    }

    // Paused: its renewals and its next transaction are held up for two
    // leases, so its lease runs out at the service meanwhile.
    pause.set_latency(Some(Op::RenewLease), Duration::from_secs(3600));
    pause.set_latency(Some(Op::Batch), lease * 2 + ctx.slack());
    let (successor_wrote_tx, mut successor_wrote) = tokio::sync::watch::channel(false);
    let late_rows = old_rows.clone();
    let late = tokio::spawn(async move {
        let in_flight = late_rows.upsert(row("p", "r0", "old", 1)).await.map(|_| ());
        Late {
            in_flight,
            completed_after_successor: *successor_wrote.borrow_and_update(),
        }
    });

    // The successor takes over once the lease has run out and writes every
    // row with its own fence.
    let (new_tx, new_rx) = oneshot::channel::<u64>();
    let mut new_tx = Some(new_tx);
    let successor_rows = successor.table::<Row>();
    successor
        .leases()
        .run_as_leader(
            &name,
            LeaderOptions::new().with_campaign_again(false),
            |term| {
                let new_tx = new_tx.take();
                let rows = successor_rows.fenced(&term.fence().unwrap());
                let successor_wrote_tx = successor_wrote_tx.clone();
                async move {
                    for i in 0..4 {
                        rows.upsert(row("p", &format!("r{i}"), "new", 2))
                            .await
                            .unwrap();
                        let _ = successor_wrote_tx.send(true);
                    }
                    if let Some(tx) = new_tx {
                        let _ = tx.send(term.epoch());
                    }
                }
            },
        )
        .await
        .unwrap();
    let new_epoch = new_rx.await.expect("the successor led");
    assert!(new_epoch > old.epoch());

    // The write held up during the pause reaches the service after the
    // successor's first write: refused by the service.
    let late = late.await.expect("late write");
    assert!(
        late.completed_after_successor,
        "the paused write completed only after the successor wrote"
    );
    let e = late.in_flight.expect_err("the paused write is refused");
    assert_eq!(e.kind(), ErrorKind::LeaseLost, "{e}");
    assert!(e.code().is_some(), "refused by the service: {e}");
    assert_eq!(old.superseded_by(), Some(new_epoch));

    // Resumed: every later fenced write is refused before sending.
    pause.set_latency(Some(Op::Batch), Duration::ZERO);
    let sent = paused_counter.get(Op::Batch);
    let resumed: Vec<Result<(), Error>> = vec![
        old_rows.upsert(row("p", "r1", "old", 3)).await.map(|_| ()),
        old_rows.insert(row("p", "r9", "old", 3)).await.map(|_| ()),
        old_rows
            .insert(row("elsewhere", "r0", "old", 3))
            .await
            .map(|_| ()),
        old_rows
            .batch()
            .upsert(row("p", "r2", "old", 3))
            .upsert(row("p", "r3", "old", 3))
            .commit()
            .await
            .map(|_: Vec<Option<leasehold::Versioned<Row>>>| ()),
    ];
    for r in &resumed {
        let e = r.as_ref().expect_err("refused");
        assert_eq!(e.kind(), ErrorKind::LeaseLost, "{e}");
    }
    assert_eq!(paused_counter.get(Op::Batch), sent, "nothing more sent");

    // The successor's writes stand.
    let stored = successor.table::<Row>().query().all().await.unwrap();
    assert_eq!(stored.len(), 4, "{stored:?}");
    for r in stored {
        assert_eq!((r.by.as_str(), r.n), ("new", 2), "{r:?}");
    }
    let _ = end_tx.send(());
    pause.set_latency(Some(Op::RenewLease), Duration::ZERO);
    first.abort();
}
}
