//! Commits too big for one entity-group transaction, faulted at every
//! request they send: a unit of 1,000 writes in one partition and table,
//! a unit of 3 partitions × 2 tables × 150 rows, and units whose rows'
//! after-images do not fit beside them (over 64 KiB, and near 1 MiB).
//!
//! Each shape is first committed in a healthy process, counting the
//! requests of its commit by kind; then, for every one of those requests
//! in turn (on real time, the first, the middle ones around the commit
//! point and the last of each kind), a process dies just before it, loses
//! its reply, or stops before it past its leases while another process
//! takes the locks and reads. Each run must end all before or all after,
//! agree with what the commit answered, and leave no mark once read.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use leasehold::backend::Backend;
use leasehold::backend::Op;
use leasehold::testing::{CountingBackend, Fault, FaultyBackend};
use leasehold::{Entity, ErrorKind, Store};

use super::lock_many::{nothing_pending, process};
use super::{Clock, Ctx};

crate::checks::checks! {

/// A counted slot: the rows the units change.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "BigSlots")]
struct Slot {
    #[entity(partition_key)]
    pub pk: String,
    #[entity(row_key)]
    pub id: String,
    pub n: i64,
}

/// One row per changed slot, in a second table.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "BigTally")]
struct Tally {
    #[entity(partition_key)]
    pub pk: String,
    #[entity(row_key)]
    pub id: String,
    pub n: i64,
}

/// A note whose text alone is over 64 KiB once quoted in an after-image
/// (its table sorts after the slots', so its group is a marked one).
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "BigText")]
struct Note {
    #[entity(partition_key)]
    pub pk: String,
    #[entity(row_key)]
    pub id: String,
    pub text: String,
}

/// A row near the service's 1 MiB per entity.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "BigTome")]
struct Tome {
    #[entity(partition_key)]
    pub pk: String,
    #[entity(row_key)]
    pub id: String,
    #[entity(chunked)]
    pub body: String,
}

/// What a unit of each check writes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Shape {
    /// 1,000 inserts in one partition and table.
    Thousand,
    /// In each of 3 partitions, 150 slots counted up by one and 150 tally
    /// rows inserted beside them.
    Grid,
    /// A slot counted up and a note of 32,760 characters rewritten, in one
    /// partition: the note's after-image goes to hidden rows.
    WideNote,
    /// A slot counted up and a body near 1 MiB rewritten.
    Tome,
}

impl Shape {
    fn partitions(self) -> Vec<&'static str> {
        match self {
            Shape::Grid => vec!["g0", "g1", "g2"],
            _ => vec!["b0"],
        }
    }

    /// Writes the rows the unit starts from.
    async fn open(self, store: &Store) {
        let slots = store.table::<Slot>();
        match self {
            Shape::Thousand => {}
            Shape::Grid => {
                for pk in self.partitions() {
                    for chunk in [0..100, 100..150] {
                        let batch = chunk.fold(slots.batch(), |b, i| b.insert(slot(pk, i, 0)));
                        batch.commit().await.expect("open the slots");
                    }
                }
            }
            Shape::WideNote | Shape::Tome => {
                slots.insert(slot("b0", 0, 0)).await.expect("open a slot");
                if self == Shape::WideNote {
                    store
                        .table::<Note>()
                        .insert(note('a'))
                        .await
                        .expect("open the note");
                } else {
                    store
                        .table::<Tome>()
                        .insert(tome('a'))
                        .await
                        .expect("open the tome");
                }
            }
        }
    }

    /// Stages the unit's writes in `unit` (which holds
    /// [`partitions`](Self::partitions)).
    async fn stage(self, unit: &mut leasehold::lock::Unit) -> leasehold::Result<()> {
        match self {
            Shape::Thousand => {
                for i in 0..1000 {
                    unit.insert(&slot("b0", i, 1))?;
                }
            }
            Shape::Grid => {
                for pk in self.partitions() {
                    let rows = unit.query::<Slot>().partition(pk).all().await?;
                    for mut row in rows {
                        row.n += 1;
                        unit.replace(&row)?;
                        unit.insert(&Tally {
                            pk: row.pk.clone(),
                            id: row.id.clone(),
                            n: row.n,
                        })?;
                    }
                }
            }
            Shape::WideNote | Shape::Tome => {
                let mut s = unit.get::<Slot>(slot_id(0).as_str()).await?.expect("open");
                s.n += 1;
                unit.replace(&s)?;
                if self == Shape::WideNote {
                    let mut n = unit.get::<Note>("note").await?.expect("open");
                    n.text = note('b').text;
                    unit.replace(&n)?;
                } else {
                    let mut t = unit.get::<Tome>("tome").await?.expect("open");
                    t.body = tome('b').body;
                    unit.replace(&t)?;
                }
            }
        }
        Ok(())
    }

    /// What the store holds of the unit's rows, read through the library
    /// (which finishes a decided commit's rows and withdraws an undecided
    /// one's), in a form equal before and after across runs.
    async fn state(self, store: &Store) -> Vec<String> {
        let mut out = Vec::new();
        for pk in self.partitions() {
            let slots = store
                .table::<Slot>()
                .query()
                .partition(pk)
                .all()
                .await
                .expect("the slots read");
            let sum: i64 = slots.iter().map(|s| s.n).sum();
            out.push(format!("{pk}: {} slots, sum {sum}", slots.len()));
            match self {
                Shape::Grid => {
                    let tally = store
                        .table::<Tally>()
                        .query()
                        .partition(pk)
                        .all()
                        .await
                        .expect("the tally reads");
                    let sum: i64 = tally.iter().map(|t| t.n).sum();
                    out.push(format!("{pk}: {} tally rows, sum {sum}", tally.len()));
                }
                Shape::WideNote => {
                    let n = store.table::<Note>().get(pk, "note").await.expect("reads");
                    out.push(digest(n.map(|n| n.into_inner().text)));
                }
                Shape::Tome => {
                    let t = store.table::<Tome>().get(pk, "tome").await.expect("reads");
                    out.push(digest(t.map(|t| t.into_inner().body)));
                }
                Shape::Thousand => {}
            }
        }
        out
    }
}

fn slot_id(i: usize) -> String {
    format!("s{i:04}")
}

fn slot(pk: &str, i: usize, n: i64) -> Slot {
    Slot {
        pk: pk.into(),
        id: slot_id(i),
        n,
    }
}

/// 32,760 characters: within 64 KiB as a string property, over it once
/// quoted in the after-image's text.
fn note(c: char) -> Note {
    Note {
        pk: "b0".into(),
        id: "note".into(),
        text: c.to_string().repeat(32_760),
    }
}

/// 15 × 32,000 characters: near 1 MiB for the row.
fn tome(c: char) -> Tome {
    Tome {
        pk: "b0".into(),
        id: "tome".into(),
        body: c.to_string().repeat(15 * 32_000),
    }
}

/// A text as its length and the characters it is made of.
fn digest(text: Option<String>) -> String {
    match text {
        None => "absent".into(),
        Some(t) => {
            let mut chars: Vec<char> = t.chars().collect();
            chars.sort_unstable();
            chars.dedup();
            format!("{} chars of {chars:?}", t.len())
        }
    }
}

/// How a run is faulted at its request.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    /// The process dies just before it.
    Death,
    /// It is applied, its reply lost; the process dies after the commit
    /// answered.
    LostReply,
    /// The process stops before it past its leases (its renewals hanging),
    /// while another takes the locks and reads every row.
    Pause,
}

/// The requests of one commit of `shape`, by kind, from a healthy run (no
/// lock-blob write among them).
async fn requests_of(ctx: &Ctx, shape: Shape) -> BTreeMap<Op, u64> {
    let counting = CountingBackend::new(ctx.backend().clone());
    let counter = counting.counter();
    let prefix = format!("{}c", ctx.prefix());
    let store = process(ctx, Arc::new(counting), &prefix);
    shape.open(&store).await;
    let before = shape.state(&store).await;
    let mut unit = store.lock_many(shape.partitions()).await.expect("locks");
    shape.stage(&mut unit).await.expect("stages");
    super::behind_the_answer(&counter).await;
    counter.reset();
    let report = unit.commit().await.expect("a healthy commit");
    super::behind_the_answer(&counter).await;
    let sent: BTreeMap<Op, u64> = counter.snapshot();
    assert!(report.transaction.is_some(), "{shape:?}: {report:?}");
    for op in [Op::PutBlob, Op::SetBlobMetadata] {
        assert!(
            !sent.contains_key(&op),
            "{shape:?} wrote a lock blob: {sent:?}"
        );
    }
    assert_ne!(shape.state(&store).await, before, "{shape:?}: applied");
    nothing_pending(&store, &shape.partitions()).await;
    sent
}

/// The requests a check faults in turn: every one on paused time; on real
/// time the first, last and middle ones of each kind (the commit point is
/// the middle transaction: as many mark as finish).
fn steps(ctx: &Ctx, sent: &BTreeMap<Op, u64>) -> Vec<(Op, u64)> {
    let mut steps = Vec::new();
    for (&op, &count) in sent {
        if op == Op::RenewLease {
            continue;
        }
        let picked: Vec<u64> = match ctx.clock() {
            Clock::Paused => (1..=count).collect(),
            Clock::Real => {
                let mid = count.div_ceil(2);
                let mut p = vec![1, mid.saturating_sub(1), mid, mid + 1, count];
                p.retain(|&n| (1..=count).contains(&n));
                p.dedup();
                p
            }
        };
        steps.extend(picked.into_iter().map(|n| (op, n)));
    }
    steps
}

/// One run: the unit of `shape` commits in a process faulted (`kind`) at
/// request `nth` of kind `op`. Returns what the commit answered, the
/// state before, and the state once the next holder has read everything
/// (and again after it took every lock).
async fn run(
    ctx: &Ctx,
    prefix: String,
    shape: Shape,
    kind: Kind,
    op: Op,
    nth: u64,
) -> (
    leasehold::Result<leasehold::lock::CommitReport>,
    Vec<String>,
    Vec<String>,
) {
    let memory: Arc<dyn Backend> = ctx.backend().clone();
    let next = process(ctx, memory.clone(), &prefix);
    shape.open(&next).await;
    let before = shape.state(&next).await;
    let faulty = FaultyBackend::new(memory);
    let injector = faulty.injector();
    let faulted = process(ctx, Arc::new(faulty), &prefix);
    let pks = shape.partitions();
    let mut unit = faulted.lock_many(pks.iter().copied()).await.expect("locks");
    shape.stage(&mut unit).await.expect("stages");
    let past_lease = ctx.lease_duration() + ctx.slack() + Duration::from_secs(1);
    let answer = match kind {
        Kind::Death | Kind::LostReply => {
            let fault = if kind == Kind::Death {
                Fault::Die
            } else {
                Fault::LoseReply
            };
            injector.inject(Some(op), nth, fault);
            let answer = unit.commit().await;
            injector.die_now();
            tokio::time::sleep(past_lease * 2).await;
            answer
        }
        Kind::Pause => {
            injector.inject(Some(op), nth, Fault::Delay(ctx.lease_duration() * 3));
            injector.set_latency(Some(Op::RenewLease), Duration::from_secs(3600));
            let (answer, ()) = tokio::join!(unit.commit(), async {
                tokio::time::sleep(past_lease).await;
                for pk in &pks {
                    next.lock(*pk)
                        .await
                        .expect("the lock")
                        .abandon()
                        .await
                        .unwrap();
                }
                let _ = shape.state(&next).await;
            });
            answer
        }
    };
    let read = shape.state(&next).await;
    for pk in &pks {
        next.lock(*pk)
            .await
            .expect("the lock")
            .abandon()
            .await
            .unwrap();
    }
    let locked = shape.state(&next).await;
    assert_eq!(
        read, locked,
        "{shape:?} {kind:?} at {op:?} {nth}: reading decided"
    );
    nothing_pending(&next, &pks).await;
    drop(faulted);
    (answer, before, read)
}

/// Faults a unit of `shape` at every request of its commit, three ways.
async fn everywhere(ctx: &Ctx, shape: Shape) {
    let sent = requests_of(ctx, shape).await;
    let after = {
        let store = process(ctx, ctx.backend().clone(), &format!("{}c", ctx.prefix()));
        shape.state(&store).await
    };
    let mut runs = Vec::new();
    for (op, nth) in steps(ctx, &sent) {
        for kind in [Kind::Death, Kind::LostReply, Kind::Pause] {
            // Zero-padded: no run's prefix starts another's.
            let prefix = format!("{}r{:03}", ctx.prefix(), runs.len());
            runs.push(async move { (op, nth, kind, run(ctx, prefix, shape, kind, op, nth).await) });
        }
    }
    let mut applied = 0;
    let mut not = 0;
    for (op, nth, kind, (answer, before, stored)) in futures_util::future::join_all(runs).await {
        let step = format!("{shape:?}, {kind:?} at {op:?} {nth}");
        assert!(
            stored == before || stored == after,
            "{step}: partial state {stored:?} (before {before:?}, after {after:?})"
        );
        match &answer {
            Ok(report) => assert_eq!(stored, after, "{step}: answered Ok ({report:?})"),
            Err(e) if e.kind() == ErrorKind::InDoubt => {
                assert_ne!(kind, Kind::Pause, "{step}: storage answered: {e}");
            }
            Err(e) => assert_eq!(stored, before, "{step}: answered {e}"),
        }
        if stored == after {
            applied += 1;
        } else {
            not += 1;
        }
    }
    assert!(
        applied > 0 && not > 0,
        "{shape:?}: {applied} applied, {not} not"
    );
}

/// A unit of 1,000 inserts in one partition and table, faulted at every
/// request of its commit (death, lost reply, pause past the lease): all or
/// nothing, and the answer agrees with what is stored.
timed async fn a_thousand_write_unit_faulted_at_every_request_is_all_or_nothing(ctx) {
    everywhere(ctx, Shape::Thousand).await;
}

/// A unit of 3 partitions × 2 tables × 150 rows, faulted at every request
/// of its commit: all or nothing, and the answer agrees with what is
/// stored.
timed async fn a_unit_of_three_partitions_two_tables_and_150_rows_faulted_at_every_request_is_all_or_nothing(ctx) {
    everywhere(ctx, Shape::Grid).await;
}

/// A unit rewriting a row whose after-image is over 64 KiB, faulted at
/// every request of its commit: all or nothing, the row whole.
timed async fn a_row_with_an_after_image_over_64_kib_faulted_at_every_request_is_all_or_nothing(ctx) {
    everywhere(ctx, Shape::WideNote).await;
}

/// A unit rewriting a row near 1 MiB, faulted at every request of its
/// commit: all or nothing, the row whole.
timed async fn a_row_near_1_mib_faulted_at_every_request_is_all_or_nothing(ctx) {
    everywhere(ctx, Shape::Tome).await;
}

/// Commits of any size answer in 3 sequential round trips after their
/// reads — the marks, the commit point, the marked rows finished with the
/// releases (the decision row's delete goes behind the answer) — each
/// round's transactions sent at once: a unit of 1,000 inserts in one
/// partition and table, and one of 10 partitions with 100 inserts each.
/// Counted by the request counter, with a latency injected before every
/// request so that requests sent together overlap.
timed async fn a_commit_of_any_size_answers_in_three_round_trips_after_its_reads(ctx) {
    let latency = Duration::from_millis(500);
    let cases: [(Vec<String>, usize); 2] = [
        (vec!["one".to_owned()], 1000),
        ((0..10).map(|p| format!("p{p}")).collect(), 100),
    ];
    for (pks, rows) in cases {
        let faulty = FaultyBackend::new(ctx.backend().clone());
        let injector = faulty.injector();
        let counting = CountingBackend::new(Arc::new(faulty) as Arc<dyn Backend>);
        let counter = counting.counter();
        let prefix = format!("{}t{}", ctx.prefix(), pks.len());
        let store = process(ctx, Arc::new(counting), &prefix);
        store.create_table("BigSlots").await.unwrap();
        let mut unit = store
            .lock_many(pks.iter().map(String::as_str))
            .await
            .unwrap();
        for pk in &pks {
            for i in 0..rows {
                unit.insert(&slot(pk, i, 1)).unwrap();
            }
        }
        injector.set_latency(None, latency);
        super::behind_the_answer(&counter).await;
        counter.reset();
        let report = unit.commit().await.unwrap();
        let round_trips = counter.round_trips();
        super::behind_the_answer(&counter).await;
        let sent = counter.total();
        let what = format!(
            "{} partitions × {rows} rows: {round_trips} round trips for {sent} requests ({:?})",
            pks.len(),
            counter.snapshot()
        );
        assert_eq!(report.operations, 1000, "{what}");
        assert!(report.transaction.is_some(), "{what}");
        // The marks, the commit point, the finish with the releases; the
        // decision row's delete goes behind the answer.
        assert_eq!(round_trips, 3, "{what}");
        let stored: usize = {
            let mut n = 0;
            for pk in &pks {
                n += store
                    .table::<Slot>()
                    .query()
                    .partition(pk.as_str())
                    .all()
                    .await
                    .unwrap()
                    .len();
            }
            n
        };
        assert_eq!(stored, 1000, "{what}");
    }
}
}
