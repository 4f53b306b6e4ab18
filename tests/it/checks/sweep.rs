//! Checks of [`Store::sweep`](leasehold::Store::sweep): after a churn of
//! indexed entities, refused writes and transfers under faults, one sweep
//! leaves at most 1 % (or 100) of leasehold's hidden rows; rows younger
//! than their bound stay; a row written again while the sweep looks at it
//! stays.
//!
//! Rows are aged past the 25-minute bound of tombstones and stale index
//! rows by a sweep judging their age as if it ran later
//! (`SweepOptions::as_if_later`): storage dates rows by its own clock.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use leasehold::backend::Backend;
use leasehold::backend::Op;
use leasehold::lease::LeaseOptions;
use leasehold::store::SweepOptions;
use leasehold::testing::{Fault, FaultyBackend};
use leasehold::{Entity, ErrorKind, Store};

use super::{Clock, Ctx};

crate::checks::checks! {

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "SweepUsers")]
struct User {
    #[entity(partition_key)]
    region: String,
    #[entity(row_key)]
    id: String,
    #[entity(unique)]
    email: String,
    #[entity(index)]
    city: Option<String>,
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "SweepAccounts")]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
    balance: i64,
}

fn user(id: &str, email: &str) -> User {
    User {
        region: format!("r{}", id.len() % 3),
        id: id.to_owned(),
        email: email.to_owned(),
        city: Some(format!("city{}", id.len() % 5)),
    }
}

/// A store on `backend` with `ctx`'s table prefix.
fn process(ctx: &Ctx, backend: Arc<dyn Backend>) -> Store {
    Store::builder_shared(backend)
        .table_prefix(ctx.prefix())
        .expect("valid prefix")
        .lease_options(LeaseOptions::new().with_duration(ctx.lease_duration()))
        .build()
        .expect("valid store")
}

/// Past the bound of tombstones and stale index rows (25 minutes).
const PAST_BOUND: Duration = Duration::from_secs(26 * 60);

/// How the index tables of a type are named: its table's name and this.
const INDEX_TABLE_SUFFIX: &str = "Idx";

/// Whether a stored row is one of leasehold's own that reads never return:
/// a decision row or after-image row of a commit (row keys `_lhCommit.…`),
/// a tombstone (property `_lhGone`) or a row past its expiry (`_lhExpires`).
fn is_hidden(row_key: &leasehold::RowKey, properties: &leasehold::entity::Properties) -> bool {
    use leasehold::entity::Value;
    let now = leasehold::time::OffsetDateTime::now_utc();
    let expired = matches!(properties.get("_lhExpires"), Some(Value::DateTime(at)) if *at <= now);
    row_key.as_str().starts_with("_lhCommit.")
        || properties.get("_lhGone").is_some()
        || expired
}

/// (hidden, live) rows of the check's tables: hidden are the rows reads
/// never return (tombstones, commits' rows) and the stale index rows
/// `verify_indexes` counts; live are the entities reads return.
async fn hidden_and_live(ctx: &Ctx) -> (u64, u64) {
    let mut hidden = 0u64;
    let mut live = 0u64;
    for (table, row) in super::stored_rows(ctx.backend(), ctx.prefix()).await {
        if table.as_str().ends_with(INDEX_TABLE_SUFFIX) {
            continue;
        }
        if is_hidden(&row.data.row_key, &row.data.properties) {
            hidden += 1;
        } else {
            live += 1;
        }
    }
    let stale = ctx
        .store
        .verify_indexes("SweepUsers", |_| {})
        .await
        .expect("verified");
    assert!(stale.is_consistent(), "{stale:?}");
    (hidden + stale.stale, live)
}

/// The acceptance churn: fresh entities of an indexed type inserted and
/// deleted (10,000), writes
/// refused with `ValueTaken`, transfers between accounts with faults
/// injected; then one sweep leaves at most max(1 % of the live rows, 100)
/// hidden rows.
plain async fn one_sweep_after_a_churn_leaves_at_most_one_percent_hidden(ctx) {
    let churn = match ctx.clock() {
        Clock::Paused => 10_000,
        Clock::Real => 10_000,
    };
    let users = ctx.store.table::<User>();
    // Live users, kept.
    for i in 0..50 {
        users
            .insert(user(&format!("live{i}"), &format!("live{i}@x.org")))
            .await
            .expect("live user");
    }
    // Fresh entities inserted and deleted, some at once.
    let mut churned = futures_util::stream::iter(0..churn)
        .map(|i| {
            let users = users.clone();
            async move {
                let u = user(&format!("gone{i}"), &format!("gone{i}@x.org"));
                let stored = users.insert(u).await.expect("insert");
                users.delete(&stored).await.expect("delete");
            }
        })
        .buffer_unordered(16);
    while churned.next().await.is_some() {}
    // Writes refused: the value is a live user's.
    for i in 0..20 {
        let taken = users
            .insert(user(&format!("dup{i}"), &format!("live{}@x.org", i % 50)))
            .await
            .unwrap_err();
        assert_eq!(taken.kind(), ErrorKind::ValueTaken, "{taken}");
    }
    // Transfers across partitions, with a request failing now and then.
    let faulty = FaultyBackend::new(ctx.backend().clone());
    let injector = faulty.injector();
    let faulted = process(ctx, Arc::new(faulty));
    let accounts = ctx.store.table::<Account>();
    for c in 0..4 {
        accounts
            .insert(Account {
                customer: format!("c{c}"),
                name: "main".into(),
                balance: 100,
            })
            .await
            .expect("account");
    }
    let transfers = match ctx.clock() {
        Clock::Paused => 24u64,
        Clock::Real => 8,
    };
    let (mut applied, mut failed) = (0, 0);
    for t in 0..transfers {
        let (from, to) = (format!("c{}", t % 4), format!("c{}", (t + 1) % 4));
        match t % 4 {
            0 => injector.inject(Some(Op::Batch), 1, Fault::Fail),
            1 => injector.inject(Some(Op::Write), 2, Fault::LoseReply),
            2 => injector.inject(Some(Op::Write), 1, Fault::Fail),
            _ => &injector,
        };
        let result = async {
            let mut unit = faulted.lock_many([from.as_str(), to.as_str()]).await?;
            let mut a = unit
                .get_in::<Account>(from.as_str(), "main")
                .await?
                .expect("from");
            let mut b = unit
                .get_in::<Account>(to.as_str(), "main")
                .await?
                .expect("to");
            a.balance -= 1;
            b.balance += 1;
            unit.replace(&a)?;
            unit.replace(&b)?;
            unit.commit().await
        }
        .await;
        match result {
            Ok(_) => applied += 1,
            Err(_) => failed += 1,
        }
    }
    assert!(applied > 0, "{applied} applied, {failed} failed");
    // Every account read once, so each mark left is settled.
    let mut total = 0;
    for c in 0..4 {
        total += accounts
            .get(format!("c{c}"), "main")
            .await
            .expect("read")
            .expect("account")
            .balance;
    }
    assert_eq!(total, 400, "transfers are all or nothing");

    let (before, _) = hidden_and_live(ctx).await;
    assert!(before >= 3 * churn, "{before} hidden before the sweep");
    let report = ctx
        .store
        .sweep(
            &SweepOptions::new()
                .with_older_than(Duration::ZERO)
                .as_if_later(PAST_BOUND),
        )
        .await
        .expect("swept");
    assert!(report.tombstones >= churn, "{report:?}");
    assert!(report.stale_index_rows >= 2 * churn, "{report:?}");
    assert_eq!(report.expired_rows, 0);
    let (hidden, live) = hidden_and_live(ctx).await;
    assert!(
        hidden <= (live / 100).max(100),
        "{hidden} hidden rows for {live} live ones after {report}"
    );
    // Nothing live was lost.
    let c = User::columns();
    for i in 0..50 {
        let found = users
            .get_by(c.email, format!("live{i}@x.org"))
            .await
            .expect("lookup");
        assert_eq!(found.map(|u| u.id.clone()), Some(format!("live{i}")));
    }
    let again = users
        .insert(user("fresh", "gone7@x.org"))
        .await
        .expect("a swept value is free");
    assert_eq!(again.email, "gone7@x.org");
}

/// Tombstones and stale index rows younger than 25 minutes, or than
/// `older_than`, stay; a dry run removes nothing; once past both, they go.
plain async fn rows_younger_than_their_bound_are_kept(ctx) {
    let users = ctx.store.table::<User>();
    let stored = users.insert(user("y1", "y1@x.org")).await.expect("insert");
    users.delete(&stored).await.expect("delete");
    let (hidden, _) = hidden_and_live(ctx).await;
    assert_eq!(hidden, 3, "a tombstone, a claim, a city row");

    let zero = SweepOptions::new().with_older_than(Duration::ZERO);
    for options in [
        zero.clone(),
        zero.clone().as_if_later(Duration::from_secs(24 * 60)),
        SweepOptions::new().as_if_later(Duration::from_secs(50 * 60)),
    ] {
        let report = ctx.store.sweep(&options).await.expect("swept");
        assert_eq!(
            (report.tombstones, report.stale_index_rows),
            (0, 0),
            "{options:?}: {report:?}"
        );
        assert_eq!(report.kept, 3, "{report:?}");
    }
    let plan = ctx
        .store
        .sweep(&zero.clone().as_if_later(PAST_BOUND).with_dry_run(true))
        .await
        .expect("dry run");
    assert_eq!((plan.tombstones, plan.stale_index_rows), (1, 2), "{plan:?}");
    assert_eq!(hidden_and_live(ctx).await.0, 3, "a dry run removes nothing");
    let report = ctx
        .store
        .sweep(&zero.as_if_later(PAST_BOUND))
        .await
        .expect("swept");
    assert_eq!(
        (report.tombstones, report.stale_index_rows),
        (1, 2),
        "{report:?}"
    );
    assert_eq!(hidden_and_live(ctx).await.0, 0);
    let bad = ctx
        .store
        .sweep(&SweepOptions::new().with_concurrency(0))
        .await
        .unwrap_err();
    assert_eq!(bad.kind(), ErrorKind::Invalid, "{bad}");
}

/// A sweep beside writes loses nothing: a tombstone written again (the
/// entity inserted anew) between the sweep's read and its delete stays,
/// refused by its ETag, and so does a claim taken over meanwhile; and
/// sweeps running while writers insert and delete leave every write's
/// result in place.
timed async fn a_row_written_while_the_sweep_looks_at_it_stays(ctx) {
    let users = ctx.store.table::<User>();
    let stored = users.insert(user("w1", "w1@x.org")).await.expect("insert");
    users.delete(&stored).await.expect("delete");
    // The sweep's deletes wait; meanwhile the entity comes back, with its
    // value (the claim and its index row are written again).
    let faulty = FaultyBackend::new(ctx.backend().clone());
    let injector = faulty.injector();
    let sweeper = process(ctx, Arc::new(faulty));
    let pause = Duration::from_secs(2);
    injector.set_latency(Some(Op::Write), pause);
    let sweep = tokio::spawn(async move {
        sweeper
            .sweep(
                &SweepOptions::new()
                    .with_older_than(Duration::ZERO)
                    .as_if_later(PAST_BOUND),
            )
            .await
    });
    tokio::time::sleep(pause / 4).await;
    let back = users.insert(user("w1", "w1@x.org")).await.expect("again");
    let report = sweep.await.expect("joined").expect("swept");
    assert_eq!(report.tombstones, 0, "{report:?}");
    let c = User::columns();
    let found = users.get_by(c.email, "w1@x.org").await.expect("lookup");
    assert_eq!(found.map(|u| u.id.clone()), Some(back.id.clone()));
    assert!(
        users
            .verify_indexes()
            .await
            .expect("verified")
            .is_consistent(),
        "nothing missing"
    );

    // Writers and sweeps side by side (the sweeps keep to the bounds).
    let writers = (0..4).map(|w| {
        let users = users.clone();
        async move {
            for i in 0..25 {
                let id = format!("s{w}x{i}");
                let u = users
                    .insert(user(&id, &format!("{id}@x.org")))
                    .await
                    .expect("insert");
                if i % 2 == 0 {
                    users.delete(&u).await.expect("delete");
                }
            }
        }
    });
    let sweeps = async {
        for _ in 0..3 {
            ctx.store
                .sweep(&SweepOptions::new().with_older_than(Duration::ZERO))
                .await
                .expect("swept");
        }
    };
    futures_util::future::join(futures_util::future::join_all(writers), sweeps).await;
    for w in 0..4 {
        for i in 0..25 {
            let id = format!("s{w}x{i}");
            let found = users
                .get_by(c.email, format!("{id}@x.org"))
                .await
                .expect("lookup");
            assert_eq!(found.is_some(), i % 2 == 1, "{id}");
        }
    }
    assert!(
        users
            .verify_indexes()
            .await
            .expect("verified")
            .is_consistent(),
        "nothing missing"
    );
}

/// An indexed write whose entity's write would go out more than 5 minutes
/// after its claims is not sent (`Timeout`), so a claim or tombstone older
/// than the sweep's bound is relied on by no write that can still land.
/// On paused time only (it waits 6 minutes).
timed async fn an_entity_write_later_than_its_claims_allow_is_not_sent(ctx) {
    if ctx.clock() == Clock::Real {
        return;
    }
    let faulty = FaultyBackend::new(ctx.backend().clone());
    let injector = faulty.injector();
    let slow = process(ctx, Arc::new(faulty));
    let users = slow.table::<User>();
    users.insert(user("d0", "d0@x.org")).await.expect("insert");
    // The next insert's writes: its claim and its city row, then the
    // entity, which stalls 6 minutes before it goes out.
    injector.inject(
        Some(Op::Write),
        3,
        Fault::Delay(Duration::from_secs(6 * 60)),
    );
    let late = users.insert(user("d1", "d1@x.org")).await.unwrap_err();
    assert_eq!(late.kind(), ErrorKind::Timeout, "{late}");
    let region = user("d1", "").region;
    assert_eq!(
        users.get(region, "d1").await.expect("read"),
        None,
        "not sent"
    );
    // Written again, promptly, it goes through.
    users.insert(user("d1", "d1@x.org")).await.expect("again");
}

/// A unit writing an indexed type holds its commit to the same window: a
/// commit that would go out more than 5 minutes after the unit's claims is
/// not sent (`Timeout`), nothing of it applied, though the unit's lock was
/// renewed all along. On paused time only (it waits 6 minutes).
timed async fn a_units_commit_later_than_its_claims_allow_is_not_sent(ctx) {
    if ctx.clock() == Clock::Real {
        return;
    }
    let faulty = FaultyBackend::new(ctx.backend().clone());
    let injector = faulty.injector();
    let slow = process(ctx, Arc::new(faulty));
    let users = slow.table::<User>();
    let region = user("u1", "").region;
    users.insert(user("u0", "u0@x.org")).await.expect("insert");
    // The unit's commit (one transaction: the row and nothing else) stalls
    // 6 minutes after its claims before it goes out.
    injector.inject(
        Some(Op::Batch),
        1,
        Fault::Delay(Duration::from_secs(6 * 60)),
    );
    let mut unit = slow.lock(region.as_str()).await.expect("lock");
    unit.insert(&user("u1", "u1@x.org")).expect("staged");
    let late = unit.commit().await.unwrap_err();
    assert_eq!(late.kind(), ErrorKind::Timeout, "{late}");
    assert_eq!(
        users.get(region.as_str(), "u1").await.expect("read"),
        None,
        "not sent"
    );
    // Committed again, promptly, it goes through, and its value is its.
    let mut unit = slow.lock(region.as_str()).await.expect("lock");
    unit.insert(&user("u1", "u1@x.org")).expect("staged");
    unit.commit().await.expect("commit");
    let holder = users.get_by(User::columns().email, "u1@x.org").await;
    assert_eq!(
        holder.expect("lookup").map(|u| u.id.clone()),
        Some("u1".to_owned())
    );
}
}
