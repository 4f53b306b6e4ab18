//! Section 3, transactions without a lease: a transfer across two
//! partitions (read 2, write 2) by `Store::transaction`, against the
//! hand-written non-atomic pattern (the 2 reads at once, then the 2
//! conditional writes at once) and against the locked unit doing the same
//! transfer (`Store::lock_many`); on the local Azurite as it is, or with a
//! wait added to every request on every side.
//!
//! A transaction answers once its commit point is stored and finishes its
//! marked rows behind the answer. It is timed until `commit()` answers;
//! then, outside the timed part, the program waits until the finishing is
//! over (the transaction's decision row, deleted last, is gone), so that no
//! side meets the rows marked or shares the service with the finishing of
//! the round before. Every side uses the same two rows.

use std::time::{Duration, Instant};

use leasehold::Store;
use leasehold::entity::Entity as _;
use uuid::Uuid;

use crate::Res;
use crate::report::Report;
use crate::setup::{Env, Sample, sample};
use crate::stats::{median, ms, percentile};

const SECTION: &str = "3 locked units";

/// The sides of one round, timed in an order drawn afresh every round.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    /// A transaction reading both rows at once (`Transaction::get_many`).
    Together,
    /// A transaction reading one row after the other (`Transaction::get`).
    OneByOne,
    /// The hand-written pattern: both reads at once, then both
    /// conditional writes at once; not atomic.
    Hand,
    /// A locked unit over both partitions.
    Unit,
}

const SIDES: [Side; 4] = [Side::Together, Side::OneByOne, Side::Hand, Side::Unit];

/// A transfer of 1 from the first partition's row to the second's by a
/// transaction; the transaction id, to wait for its finishing.
async fn by_transaction(store: &Store, keys: &[String; 2], together: bool) -> String {
    let mut tx = store.transaction();
    let (mut a, mut b) = if together {
        let mut rows = tx
            .get_many::<Sample, _, _>([(keys[0].as_str(), "s"), (keys[1].as_str(), "s")])
            .await
            .unwrap();
        let b = rows.pop().flatten().unwrap();
        (rows.pop().flatten().unwrap(), b)
    } else {
        let a = tx.get::<Sample>(keys[0].as_str(), "s").await.unwrap();
        let b = tx.get::<Sample>(keys[1].as_str(), "s").await.unwrap();
        (a.unwrap(), b.unwrap())
    };
    a.total -= 1;
    b.total += 1;
    tx.replace(&a).unwrap();
    tx.replace(&b).unwrap();
    let report = tx.commit().await.unwrap();
    report.transaction.unwrap()
}

async fn by_hand(store: &Store, keys: &[String; 2]) {
    let samples = store.table::<Sample>();
    let (a, b) = tokio::join!(
        samples.get(keys[0].as_str(), "s"),
        samples.get(keys[1].as_str(), "s")
    );
    let (mut a, mut b) = (a.unwrap().unwrap(), b.unwrap().unwrap());
    a.total -= 1;
    b.total += 1;
    let (a, b) = tokio::join!(samples.replace(&a), samples.replace(&b));
    a.unwrap();
    b.unwrap();
}

async fn by_unit(store: &Store, keys: &[String; 2]) {
    let mut unit = store
        .lock_many(keys.iter().map(String::as_str))
        .await
        .unwrap();
    let mut a = unit
        .get_in::<Sample>(keys[0].as_str(), "s")
        .await
        .unwrap()
        .unwrap();
    let mut b = unit
        .get_in::<Sample>(keys[1].as_str(), "s")
        .await
        .unwrap()
        .unwrap();
    a.total -= 1;
    b.total += 1;
    unit.replace(&a).unwrap();
    unit.replace(&b).unwrap();
    unit.commit().await.unwrap();
}

/// Waits, untimed, until transaction `txn` is finished: its decision row
/// (row key `_lhCommit.<id>` in its first partition, deleted after the
/// marked rows are finished) is gone. Read over a separate connection,
/// without the added latency and not counted.
async fn finished(env: &Env, keys: &[String; 2], txn: &str) {
    let id = txn.split_once('.').map_or(txn, |(id, _)| id);
    let row = format!("_lhCommit.{id}");
    let deadline = Instant::now() + Duration::from_secs(10);
    for pk in keys {
        while env.raw.get(Sample::TABLE, pk, &row).await.is_ok() {
            assert!(
                Instant::now() < deadline,
                "transaction {txn} never finished"
            );
            tokio::time::sleep(Duration::from_micros(500)).await;
        }
    }
}

/// One side once, timed; a transaction's finishing waited for after.
async fn run(env: &Env, store: &Store, keys: &[String; 2], side: Side) -> f64 {
    let t = Instant::now();
    let txn = match side {
        Side::Together => Some(by_transaction(store, keys, true).await),
        Side::OneByOne => Some(by_transaction(store, keys, false).await),
        Side::Hand => {
            by_hand(store, keys).await;
            None
        }
        Side::Unit => {
            by_unit(store, keys).await;
            None
        }
    };
    let took = ms(t.elapsed());
    if let Some(txn) = txn {
        finished(env, keys, &txn).await;
    }
    took
}

/// The four sides in an order drawn at random (each of the 24 alike).
fn shuffled() -> [Side; 4] {
    let mut sides = SIDES;
    let mut r = Uuid::new_v4().as_u128();
    for i in (1..sides.len()).rev() {
        let j = (r % (i as u128 + 1)) as usize;
        r /= i as u128 + 1;
        sides.swap(i, j);
    }
    sides
}

pub(crate) async fn transactions(
    env: &Env,
    report: &mut Report,
    latency: Option<Duration>,
) -> Res<()> {
    let (store, counter) = match latency {
        None => env.counted_store(),
        Some(l) => env.counted_store_with_latency(l),
    };
    let over = latency.map_or_else(String::new, |l| {
        format!(", {} ms added per request", l.as_millis())
    });
    let run_id = Uuid::new_v4().simple().to_string();
    let keys = [format!("t0-{run_id}"), format!("t1-{run_id}")];
    for k in &keys {
        store.table::<Sample>().insert(sample(k, "s", 100)).await?;
    }
    // Warm-up: the table known, the lock blobs made and taken by this
    // process (no lock-blob reads after), the pools warm.
    for _ in 0..5 {
        for side in SIDES {
            run(env, &store, &keys, side).await;
        }
    }
    // Requests per side, counted one side at a time (a transaction's
    // finishing included).
    let mut per_side = Vec::new();
    for side in SIDES {
        let before = counter.work();
        for _ in 0..5 {
            run(env, &store, &keys, side).await;
        }
        per_side.push((counter.work() - before) as f64 / 5.0);
    }
    let n = env.n(if latency.is_some() { 40 } else { 100 });
    let mut samples: [Vec<f64>; 4] = Default::default();
    for _ in 0..n {
        for side in shuffled() {
            let i = SIDES.iter().position(|s| *s == side).unwrap_or(0);
            samples[i].push(run(env, &store, &keys, side).await);
        }
    }
    let [together, one_by_one, hand, unit] = [0, 1, 2, 3].map(|i| median(&samples[i]));
    let p99 = |i: usize| percentile(&samples[i], 0.99);
    let rows = [
        (
            together,
            "read 2 at once with `get_many`",
            Some(1.5),
            Some(0.6),
        ),
        (
            one_by_one,
            "read 2 one after the other with `get`",
            None,
            None,
        ),
    ];
    for (median_ms, how, hand_goal, unit_goal) in rows {
        report.row(
            SECTION,
            format!(
                "transaction across 2 partitions ({how}, write 2) vs the hand-written \
                 non-atomic pattern (2 reads at once, then the 2 conditional writes at once){over}"
            ),
            format!("{median_ms:.3} ms"),
            format!("{hand:.3} ms = 2 gets at once, then 2 conditional replaces at once"),
            median_ms / hand,
            hand_goal,
            None,
            "the transaction takes a round trip more than the pattern (the marks, then the \
             commit point, against the writes), or leasehold's work between its requests grew",
        );
        report.row(
            SECTION,
            format!(
                "transaction across 2 partitions ({how}, write 2) vs the locked unit (read 2, \
                 write 2){over}"
            ),
            format!("{median_ms:.3} ms"),
            format!("{unit:.3} ms = the unit, locks taken back"),
            median_ms / unit,
            unit_goal,
            None,
            "the transaction no longer answers after 2 round trips past its reads, or the \
             unit got faster",
        );
    }
    report.detail(format!(
        "Transactions across 2 partitions{over}: one row in each, every side moving 1 from the \
         first to the second; {n} rounds, the four sides of a round timed in a random order; \
         medians (p99): transaction reading at once {together:.3} ms ({:.3} ms), transaction \
         reading one by one {one_by_one:.3} ms ({:.3} ms), hand-written {hand:.3} ms ({:.3} ms), \
         locked unit {unit:.3} ms ({:.3} ms). Requests per transfer, counted apart: {:.2}, \
         {:.2}, {:.2} and {:.2}. A transaction is timed until `commit()` answers: its reads (1 \
         round trip at once, 2 one by one), the marking transaction of the second partition, \
         the commit point (the first partition's write with the decision row); the finishing \
         transaction and the decision row's delete go on behind the answer, and the next side \
         starts once they are done (untimed). The unit (locks taken back: no lock-blob reads) \
         answers in 6 round trips: the acquires, 2 reads, the mark, the commit point, the \
         finish with the releases (its decision row's delete behind the answer). The hand-written pattern takes 2 and is \
         neither atomic nor serializable: a failure between its writes leaves one applied, and \
         it validates only the rows it writes.",
        p99(0),
        p99(1),
        p99(2),
        p99(3),
        per_side[0],
        per_side[1],
        per_side[2],
        per_side[3],
    ));
    Ok(())
}
