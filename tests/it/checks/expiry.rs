//! Row expiry: an entity type declaring `#[entity(expires_at)]` or
//! `#[entity(time_to_live = "...")]` stores when its row expires; a row
//! past it is absent to every read (get, query, projection, `get_by`, a
//! unit's and a transaction's get) at once, an insert over it succeeds, and
//! the sweep ([`Store::sweep`](leasehold::Store::sweep), run by
//! [`Store::run_sweeper`](leasehold::Store::run_sweeper) under a leader lease)
//! deletes it with its index rows, at the ETag it read: a row renewed
//! meanwhile is kept.

use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;

use leasehold::backend::Op;
use leasehold::backend::{Backend, QuerySpec};
use leasehold::key::TableName;
use leasehold::lease::{LeaderOptions, LeaseOptions};
use leasehold::store::{SweepOptions, SweepReport};
use leasehold::testing::{CountingBackend, FaultyBackend};
use leasehold::{CancellationToken, Entity, Store};

use super::{Clock, Ctx};

crate::checks::checks! {

/// A session that expires at an instant, with a unique token.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "ExpirySessions")]
struct Session {
    #[entity(partition_key)]
    pub user: String,
    #[entity(row_key)]
    pub id: String,
    #[entity(unique)]
    pub token: String,
    #[entity(expires_at)]
    pub expires: Option<OffsetDateTime>,
}

/// A note that expires an hour after it was written.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "ExpiryNotes")]
struct Note {
    #[entity(partition_key)]
    pub topic: String,
    #[entity(row_key)]
    pub id: String,
    pub text: String,
    #[entity(time_to_live = "1h")]
    pub written: OffsetDateTime,
}

fn session(id: &str, token: &str, expires: Option<OffsetDateTime>) -> Session {
    Session {
        user: "ann".into(),
        id: id.into(),
        token: token.into(),
        expires,
    }
}

fn note(id: &str, written: OffsetDateTime) -> Note {
    Note {
        topic: "t".into(),
        id: id.into(),
        text: format!("note {id}"),
        written,
    }
}

/// Long past: expired whatever the clock.
fn past() -> OffsetDateTime {
    OffsetDateTime::now_utc() - time::Duration::hours(2)
}

/// A store sharing the context's tables, on `backend`.
fn process(ctx: &Ctx, backend: Arc<dyn Backend>) -> Store {
    Store::builder_shared(backend)
        .table_prefix(ctx.prefix())
        .expect("valid prefix")
        .lease_options(LeaseOptions::new().with_duration(ctx.lease_duration()))
        .build()
        .expect("valid store")
}

/// Every read path's answer for session `id` (token `token`) of user
/// `ann`: get, query, filtered query, projection, `get_by`, a unit's get,
/// a transaction's get; `true` for each that shows it.
async fn seen(store: &Store, id: &str, token: &str) -> [bool; 7] {
    let sessions = store.table::<Session>();
    let c = Session::columns();
    let got = sessions.get("ann", id).await.expect("get").is_some();
    let queried = sessions
        .query()
        .partition("ann")
        .all()
        .await
        .expect("query")
        .iter()
        .any(|s| s.id == id);
    let filtered = sessions
        .query()
        .filter(c.token.eq(token))
        .all()
        .await
        .expect("filtered query")
        .iter()
        .any(|s| s.id == id);
    let projected = sessions
        .query()
        .partition("ann")
        .select_properties(&["token"])
        .all()
        .await
        .expect("projection")
        .iter()
        .any(|s| s.id == id);
    let by = sessions
        .get_by(c.token, token)
        .await
        .expect("get_by")
        .is_some();
    let mut unit = store.lock("ann").await.expect("lock");
    let in_unit = unit.get::<Session>(id).await.expect("unit get").is_some();
    unit.abandon().await.expect("abandon");
    let mut txn = store.transaction();
    let in_txn = txn
        .get::<Session>("ann", id)
        .await
        .expect("transaction get")
        .is_some();
    drop(txn);
    [got, queried, filtered, projected, by, in_unit, in_txn]
}

/// A session becomes absent to every read path the moment its expiry
/// passes (on paused time, without waiting), not before; one without an
/// expiry (`None`) stays.
timed async fn a_row_past_its_expiry_is_absent_to_every_read(ctx) {
    let (ttl, wait) = match ctx.clock() {
        Clock::Paused => (Duration::from_secs(60), Duration::from_secs(120)),
        // Long enough for the inserts and seven reads to finish before it
        // even when 48 checks share a slow machine (6 s was not, once).
        Clock::Real => (Duration::from_secs(20), Duration::from_secs(22)),
    };
    let sessions = ctx.store.table::<Session>();
    let at = OffsetDateTime::now_utc() + ttl;
    sessions
        .insert(session("s1", "tok-1", Some(at)))
        .await
        .expect("stored");
    sessions
        .insert(session("s2", "tok-2", None))
        .await
        .expect("stored");
    assert_eq!(seen(&ctx.store, "s1", "tok-1").await, [true; 7]);
    tokio::time::sleep(wait).await;
    assert_eq!(seen(&ctx.store, "s1", "tok-1").await, [false; 7]);
    assert_eq!(seen(&ctx.store, "s2", "tok-2").await, [true; 7]);
    // Still stored: only the sweeper deletes it.
    let raw = stored(ctx, "ExpirySessions").await;
    assert!(
        raw.iter()
            .any(|(pk, rk, _)| (pk.as_str(), rk.as_str()) == ("ann", "s1"))
    );
}

/// A time-to-live counts from its field: a note written two hours ago
/// with a one-hour time-to-live is absent; one written now is not; the
/// row stores its expiry as the reserved date-time property.
plain async fn a_time_to_live_counts_from_its_field(ctx) {
    let notes = ctx.store.table::<Note>();
    let old = past();
    notes.insert(note("old", old)).await.expect("stored");
    let fresh = notes
        .insert(note("new", OffsetDateTime::now_utc()))
        .await
        .expect("stored");
    assert!(notes.get("t", "old").await.expect("get").is_none());
    assert_eq!(
        notes.get("t", "new").await.expect("get").as_ref(),
        Some(&fresh)
    );
    let listed: Vec<String> = notes
        .query()
        .all()
        .await
        .expect("query")
        .into_iter()
        .map(|n| n.id.clone())
        .collect();
    assert_eq!(listed, ["new"]);
    let raw = stored(ctx, "ExpiryNotes").await;
    let (_, _, props) = raw
        .iter()
        .find(|(_, rk, _)| rk.as_str() == "old")
        .expect("still stored");
    let expected = old + time::Duration::hours(1);
    match props.get("_lhExpires") {
        Some(leasehold::entity::Value::DateTime(at)) => {
            assert!(
                (*at - expected).abs() < time::Duration::microseconds(1),
                "{at} vs {expected}"
            );
        }
        other => panic!("expiry stored as {other:?}"),
    }
}

/// An insert over an expired row succeeds (it replaces the row at the
/// ETag read), for a type with and without indexes; the expired row's
/// unique value is free: `get_by` does not see it, and another entity
/// takes it.
plain async fn an_insert_over_an_expired_row_succeeds(ctx) {
    let notes = ctx.store.table::<Note>();
    notes.insert(note("n", past())).await.expect("stored");
    let again = notes
        .insert(note("n", OffsetDateTime::now_utc()))
        .await
        .expect("an insert over an expired note");
    assert_eq!(notes.get("t", "n").await.expect("get"), Some(again));
    // A live row is still refused.
    let e = notes
        .insert(note("n", OffsetDateTime::now_utc()))
        .await
        .expect_err("the note lives");
    assert_eq!(e.kind(), leasehold::ErrorKind::AlreadyExists);

    let sessions = ctx.store.table::<Session>();
    let c = Session::columns();
    sessions
        .insert(session("s", "old-token", Some(past())))
        .await
        .expect("stored");
    assert!(
        sessions
            .get_by(c.token, "old-token")
            .await
            .expect("get_by")
            .is_none()
    );
    let renewed = sessions
        .insert(session("s", "new-token", None))
        .await
        .expect("an insert over an expired session");
    assert_eq!(
        sessions.get_by(c.token, "new-token").await.expect("get_by"),
        Some(renewed)
    );
    sessions
        .insert(session("other", "gone-token", Some(past())))
        .await
        .expect("stored");
    let taker = sessions
        .insert(session("taker", "gone-token", None))
        .await
        .expect("the expired row's value is free");
    assert_eq!(
        sessions
            .get_by(c.token, "gone-token")
            .await
            .expect("get_by"),
        Some(taker)
    );
}

/// A unit's or a transaction's insert over an expired row succeeds as a
/// table's does: whether it read the row first (and saw nothing) or not,
/// in one transaction or deciding in a row across partitions; a live row
/// is still refused, nothing sent.
plain async fn a_units_or_a_transactions_insert_over_an_expired_row_succeeds(ctx) {
    let notes = ctx.store.table::<Note>();
    let now = OffsetDateTime::now_utc;
    let in_topic = |topic: &str, id: &str| Note {
        topic: topic.into(),
        ..note(id, now())
    };
    for id in ["blind", "read", "x1"] {
        notes.insert(note(id, past())).await.expect("stored");
    }
    notes
        .insert(Note {
            topic: "t2".into(),
            ..note("x2", past())
        })
        .await
        .expect("stored");

    // Without reading the row first.
    let mut unit = ctx.store.lock("t").await.expect("lock");
    unit.insert(&note("blind", now())).expect("staged");
    unit.commit()
        .await
        .expect("a blind insert over an expired note");
    // Having read it as absent.
    let mut unit = ctx.store.lock("t").await.expect("lock");
    assert_eq!(unit.get::<Note>("read").await.expect("get"), None);
    unit.insert(&note("read", now())).expect("staged");
    unit.commit()
        .await
        .expect("an insert over an expired note read");
    // A transaction across two partitions (deciding in a row).
    let mut tx = ctx.store.transaction();
    tx.insert(&in_topic("t", "x1")).expect("staged");
    tx.insert(&in_topic("t2", "x2")).expect("staged");
    tx.commit()
        .await
        .expect("a transaction's inserts over expired notes");
    for (topic, id) in [("t", "blind"), ("t", "read"), ("t", "x1"), ("t2", "x2")] {
        let got = notes.get(topic, id).await.expect("get");
        assert!(got.is_some(), "{topic}/{id} is there again");
    }

    // A live row: refused before anything is written.
    let mut unit = ctx.store.lock("t").await.expect("lock");
    unit.insert(&note("blind", now())).expect("staged");
    let e = unit.commit().await.expect_err("the note lives");
    let inner = match &e {
        leasehold::Error::Batch { source, .. } => source.kind(),
        other => other.kind(),
    };
    assert_eq!(inner, leasehold::ErrorKind::AlreadyExists, "{e}");
}

/// A batch's inserts over expired rows succeed (each replaces its row at
/// the ETag read), beside inserts of new rows; a live row still refuses
/// the whole batch.
plain async fn a_batch_insert_over_expired_rows_succeeds(ctx) {
    let notes = ctx.store.table::<Note>();
    let now = OffsetDateTime::now_utc;
    for id in ["b1", "b3"] {
        notes.insert(note(id, past())).await.expect("stored");
    }
    let written = notes
        .batch()
        .insert(note("b1", now()))
        .insert(note("b2", now()))
        .insert(note("b3", now()))
        .commit()
        .await
        .expect("a batch over two expired notes");
    assert_eq!(written.len(), 3);
    for id in ["b1", "b2", "b3"] {
        assert!(notes.get("t", id).await.expect("get").is_some(), "{id}");
    }
    let e = notes
        .batch()
        .insert(note("b4", now()))
        .insert(note("b1", now()))
        .commit()
        .await
        .expect_err("b1 lives");
    assert_eq!(e.kind(), leasehold::ErrorKind::Batch, "{e}");
    assert_eq!(
        notes.get("t", "b4").await.expect("get"),
        None,
        "nothing applied"
    );
}

/// Runs `store`'s sweeper for `wait` (one round: the next is an hour
/// away), then stops it; the reports of its rounds.
async fn sweep(ctx: &Ctx, store: &Store, wait: Duration) -> Vec<SweepReport> {
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (store, stop) = (store.clone(), stop.clone());
        async move {
            let mut rounds = Vec::new();
            store
                .run_sweeper(
                    &SweepOptions::new(),
                    Duration::from_secs(3600),
                    LeaderOptions::new().with_stop(stop),
                    |round| rounds.push(round.expect("a sweep round").clone()),
                )
                .await
                .expect("sweeper");
            rounds
        }
    });
    tokio::time::sleep(wait + ctx.slack()).await;
    stop.cancel();
    task.await.expect("sweeper task")
}

/// The sweeper deletes the expired rows and nothing else: an expired note
/// goes, an expired session leaves its tombstone and its index row goes;
/// live rows and rows without expiry stay.
timed async fn the_sweeper_deletes_expired_rows_and_their_index_rows(ctx) {
    let sessions = ctx.store.table::<Session>();
    let notes = ctx.store.table::<Note>();
    sessions
        .insert(session("dead", "t-dead", Some(past())))
        .await
        .expect("stored");
    sessions
        .insert(session("live", "t-live", None))
        .await
        .expect("stored");
    notes.insert(note("dead", past())).await.expect("stored");
    notes
        .insert(note("live", OffsetDateTime::now_utc()))
        .await
        .expect("stored");
    assert_eq!(index_rows(ctx).await.len(), 2);

    let rounds = sweep(ctx, &ctx.store, Duration::from_secs(5)).await;
    assert_eq!(rounds.len(), 1, "{rounds:?}");
    let r = &rounds[0];
    assert_eq!((r.expired_rows, r.kept), (2, 0), "{r:?}");

    let notes_left = stored(ctx, "ExpiryNotes").await;
    let ids: Vec<&str> = notes_left.iter().map(|(_, rk, _)| rk.as_str()).collect();
    assert_eq!(ids, ["live"]);
    let sessions_left = stored(ctx, "ExpirySessions").await;
    let dead = sessions_left
        .iter()
        .find(|(_, rk, _)| rk.as_str() == "dead")
        .expect("a tombstone stays");
    assert!(dead.2.get("_lhGone").is_some(), "{:?}", dead.2);
    assert!(dead.2.get("_lhExpires").is_none());
    let index = index_rows(ctx).await;
    assert_eq!(index.len(), 1, "{index:?}");
    assert!(index[0].contains("live"), "{index:?}");
    assert!(sessions.get("ann", "live").await.expect("get").is_some());
    assert!(notes.get("t", "live").await.expect("get").is_some());
}

/// A row renewed after the sweeper read it expired (an insert over it,
/// with a later expiry) survives: the sweeper's delete carries the ETag
/// it read, and counts the row as kept.
timed async fn a_row_renewed_after_the_sweeper_read_it_is_kept(ctx) {
    let notes = ctx.store.table::<Note>();
    notes.insert(note("a", past())).await.expect("stored");
    notes.insert(note("b", past())).await.expect("stored");
    // The sweeper's writes wait a second after they are counted: the
    // renewing writer's turn.
    let faulty = FaultyBackend::new(ctx.backend().clone());
    faulty
        .injector()
        .set_latency(Some(Op::Write), Duration::from_secs(1));
    let counting = CountingBackend::new(faulty);
    let counter = counting.counter();
    let sweeper = process(ctx, Arc::new(counting));
    let before = counter.get(Op::Write);
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (sweeper, stop) = (sweeper.clone(), stop.clone());
        async move {
            let mut rounds = Vec::new();
            sweeper
                .run_sweeper(
                    &SweepOptions::new(),
                    Duration::from_secs(3600),
                    LeaderOptions::new().with_stop(stop),
                    |round| rounds.push(round.expect("a sweep round").clone()),
                )
                .await
                .expect("sweeper");
            rounds
        }
    });
    let started = tokio::time::Instant::now();
    while counter.get(Op::Write) == before {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the sweeper never sent its delete"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let renewed = notes
        .insert(note("a", OffsetDateTime::now_utc()))
        .await
        .expect("renewed over the expired row");
    tokio::time::sleep(Duration::from_secs(5) + ctx.slack()).await;
    stop.cancel();
    let rounds = task.await.expect("sweeper task");
    assert_eq!(rounds.len(), 1, "{rounds:?}");
    let r = &rounds[0];
    assert_eq!((r.expired_rows, r.kept), (1, 1), "{r:?}");
    assert_eq!(notes.get("t", "a").await.expect("get"), Some(renewed));
    let ids: Vec<String> = stored(ctx, "ExpiryNotes")
        .await
        .into_iter()
        .map(|(_, rk, _)| rk.as_str().to_owned())
        .collect();
    assert_eq!(ids, ["a"]);
}

/// The rows of table `name` as stored (no mark resolved, nothing hidden).
async fn stored(
    ctx: &Ctx,
    name: &str,
) -> Vec<(
    leasehold::key::PartitionKey,
    leasehold::key::RowKey,
    leasehold::entity::Properties,
)> {
    let table = TableName::new(format!("{}{name}", ctx.prefix())).expect("valid name");
    let page = ctx
        .backend()
        .query(&table, &QuerySpec::default())
        .await
        .expect("query");
    page.entities
        .into_iter()
        .map(|r| (r.data.partition_key, r.data.row_key, r.data.properties))
        .collect()
}

/// The sessions' index rows (not the definitions), as `pk/rk`.
async fn index_rows(ctx: &Ctx) -> Vec<String> {
    stored(ctx, "ExpirySessionsIdx")
        .await
        .into_iter()
        .filter(|(pk, _, _)| !pk.as_str().starts_with('~'))
        .map(|(pk, rk, _)| format!("{pk}/{rk}"))
        .collect()
}
}
