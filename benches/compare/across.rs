//! Section 6, hot partition across processes: P OS processes (this program
//! re-run as workers) × 4 tasks each doing locked read-modify-write units on
//! one partition, leasehold's partition lock against the hand-written lease
//! loop of section 4. Throughput against the single-process floor, how long
//! each unit waited for the lock, and each process's share of the units.
//!
//! The floor is 1 / (requests per unit × round trip): the requests one
//! process sends per unit when alone, and the round trip of those very
//! requests (a point read and a conditional replace of the counter row,
//! back to back through the same backend, no lease), measured before and
//! after the runs.

use leasehold::backend::WriteOptions;
use std::time::{Duration, Instant};

use leasehold::backend::azure::AzureBackend;
use leasehold::backend::{Precondition, TableOp};
use leasehold::entity::Entity as _;
use leasehold::key::{BlobName, ContainerName};
use leasehold::lease::LeaseOptions;
use leasehold::testing::CountingBackend;
use leasehold::{Entity, ErrorKind, PartitionKey, RowKey, Store, TableName};
use uuid::Uuid;

use crate::Res;
use crate::report::Report;
use crate::setup::{Env, hand_written_acquire, put_empty_blob};
use crate::stats::{median, ms, percentile};

/// The environment variable that makes this program a worker.
pub(crate) const WORKER: &str = "LEASEHOLD_BENCH_ACROSS";
/// Tasks per worker process.
const TASKS: usize = 4;

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "BenchAcross")]
struct Tally {
    #[entity(partition_key)]
    pk: String,
    #[entity(row_key)]
    rk: String,
    n: i64,
}

fn hand_container() -> ContainerName {
    ContainerName::new("bench-across-hand").unwrap()
}

/// A worker: `<kind> <partition> <seconds>` in [`WORKER`]. Waits for `go`
/// on stdin, runs [`TASKS`] tasks for the given time, then prints `units
/// <n> requests <r>` and one line of the waits for the lock, in ms.
pub(crate) async fn across_worker(spec: String) -> Res<()> {
    use tokio::io::AsyncBufReadExt as _;
    let mut parts = spec.split(' ');
    let (Some(kind), Some(pk), Some(secs)) = (parts.next(), parts.next(), parts.next()) else {
        return Err("bad worker spec".into());
    };
    let hand = kind == "hand";
    let pk = pk.to_owned();
    let run = Duration::from_secs_f64(secs.parse()?);
    let conn_str = std::env::var("LEASEHOLD_TEST_AZURITE")?;
    let backend = CountingBackend::new(AzureBackend::from_connection_string(&conn_str)?);
    let counter = backend.counter();
    let store = Store::new(backend);
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    if lines.next_line().await?.as_deref() != Some("go") {
        return Err("no go".into());
    }
    let before = counter.work();
    let deadline = Instant::now() + run;
    let mut handles = Vec::new();
    for _ in 0..TASKS {
        let (store, pk) = (store.clone(), pk.clone());
        handles.push(tokio::spawn(async move {
            let backend = store.backend().clone();
            let table = TableName::new(Tally::TABLE).unwrap();
            let pkey = PartitionKey::new(pk.clone()).unwrap();
            let rkey = RowKey::new("c").unwrap();
            let blob = BlobName::new(pk.clone()).unwrap();
            let mut waits = Vec::new();
            while Instant::now() < deadline {
                let t0 = Instant::now();
                if hand {
                    // Section 4's pattern, written by hand.
                    let lease =
                        hand_written_acquire(backend.as_ref(), &hand_container(), &blob, deadline)
                            .await;
                    let Some(lease) = lease else { break };
                    waits.push(ms(t0.elapsed()));
                    let stored = backend.get(&table, &pkey, &rkey).await.unwrap().unwrap();
                    let mut c = Tally::decode(stored.data).unwrap();
                    c.n += 1;
                    let op =
                        TableOp::Replace(c.encode().unwrap(), Precondition::IfMatch(stored.etag));
                    backend
                        .execute(&table, op.clone(), &WriteOptions::new())
                        .await
                        .unwrap();
                    backend
                        .lease(
                            &hand_container(),
                            &blob,
                            leasehold::backend::LeaseAction::Release(lease),
                        )
                        .await
                        .unwrap();
                } else {
                    let left = deadline.saturating_duration_since(Instant::now());
                    let mut unit = match store.lock_with_timeout(pk.as_str(), left).await {
                        Ok(unit) => unit,
                        Err(e) if e.kind() == ErrorKind::Timeout => break,
                        Err(e) => panic!("{e}"),
                    };
                    waits.push(ms(t0.elapsed()));
                    let mut c = unit.get::<Tally>("c").await.unwrap().unwrap();
                    c.n += 1;
                    unit.replace(&c).unwrap();
                    unit.commit().await.unwrap();
                }
            }
            waits
        }));
    }
    let mut waits = Vec::new();
    for h in handles {
        waits.extend(h.await?);
    }
    println!("units {} requests {}", waits.len(), counter.work() - before);
    let line: Vec<String> = waits.iter().map(|w| format!("{w:.2}")).collect();
    println!("{}", line.join(" "));
    Ok(())
}

/// The round trip of a unit's requests: one task reads the counter row and
/// replaces it on its ETag, back to back for `secs`, through the backend
/// the workers use (no lease); the mean time per request, in ms.
async fn unit_round_trip(env: &Env, secs: f64) -> Res<f64> {
    let backend = AzureBackend::from_connection_string(&env.conn_str)?;
    let store = Store::connect(&env.conn_str)?;
    let pk = format!("rtt-{}", Uuid::new_v4().simple());
    store
        .table::<Tally>()
        .insert(Tally {
            pk: pk.clone(),
            rk: "c".into(),
            n: 0,
        })
        .await?;
    let table = TableName::new(Tally::TABLE)?;
    let (pkey, rkey) = (PartitionKey::new(pk)?, RowKey::new("c")?);
    use leasehold::backend::TableBackend as _;
    let started = Instant::now();
    let mut requests = 0u32;
    while started.elapsed().as_secs_f64() < secs {
        let stored = backend.get(&table, &pkey, &rkey).await?.ok_or("row")?;
        let mut c = Tally::decode(stored.data)?;
        c.n += 1;
        let op = TableOp::Replace(c.encode()?, Precondition::IfMatch(stored.etag));
        backend
            .execute(&table, op.clone(), &WriteOptions::new())
            .await?;
        requests += 2;
    }
    Ok(ms(started.elapsed()) / f64::from(requests.max(1)))
}

/// One run: `processes` workers of `kind` on a fresh partition.
struct Run {
    units: Vec<u64>,
    requests: u64,
    waits_ms: Vec<f64>,
    secs: f64,
}

impl Run {
    fn total(&self) -> u64 {
        self.units.iter().sum()
    }
    fn per_sec(&self) -> f64 {
        self.total() as f64 / self.secs
    }
    fn rpu(&self) -> f64 {
        self.requests as f64 / self.total().max(1) as f64
    }
    /// The smallest and largest share of the units, times P (1 = fair).
    fn shares(&self) -> (f64, f64) {
        let p = self.units.len() as f64;
        let total = self.total().max(1) as f64;
        let shares = self.units.iter().map(|u| *u as f64 / total * p);
        let min = shares.clone().fold(f64::INFINITY, f64::min);
        let max = shares.fold(0.0, f64::max);
        (min, max)
    }
}

async fn run(env: &Env, hand: bool, processes: usize, secs: f64) -> Res<Run> {
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
    let store = Store::connect(&env.conn_str)?;
    let pk = format!("across-{}", Uuid::new_v4().simple());
    let tallies = store.table::<Tally>();
    tallies
        .insert(Tally {
            pk: pk.clone(),
            rk: "c".into(),
            n: 0,
        })
        .await?;
    if hand {
        store.backend().create_container(&hand_container()).await?;
        put_empty_blob(
            store.backend().as_ref(),
            &hand_container(),
            &BlobName::new(pk.clone())?,
        )
        .await?;
    } else {
        // The lock container and blob exist before the timed run.
        store.lock(pk.as_str()).await?.abandon().await?;
    }
    let kind = if hand { "hand" } else { "leasehold" };
    let mut workers = Vec::new();
    for _ in 0..processes {
        let mut child = tokio::process::Command::new(std::env::current_exe()?)
            .env(WORKER, format!("{kind} {pk} {secs}"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = tokio::io::BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
        workers.push((child, stdin, stdout));
    }
    // Let every worker start (connect) before the run.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    for (_, stdin, _) in &mut workers {
        stdin.write_all(b"go\n").await?;
        stdin.flush().await?;
    }
    let mut result = Run {
        units: Vec::new(),
        requests: 0,
        waits_ms: Vec::new(),
        secs,
    };
    for (mut child, _, mut stdout) in workers {
        let head = stdout.next_line().await?.ok_or("worker said nothing")?;
        let fields: Vec<&str> = head.split(' ').collect();
        let units: u64 = fields.get(1).ok_or("units")?.parse()?;
        result.requests += fields.get(3).ok_or("requests")?.parse::<u64>()?;
        result.units.push(units);
        if let Some(line) = stdout.next_line().await? {
            for w in line.split(' ').filter(|w| !w.is_empty()) {
                result.waits_ms.push(w.parse()?);
            }
        }
        child.wait().await?;
    }
    let _ = started;
    let n = tallies.get(pk.as_str(), "c").await?.ok_or("tally")?.n;
    assert_eq!(n as u64, result.total(), "lost or doubled updates");
    Ok(result)
}

pub(crate) async fn across_processes(env: &Env, report: &mut Report) -> Res<()> {
    const SECTION: &str = "6 hot partition across processes";
    let secs = env.secs(10.0).as_secs_f64();
    let rtt_before = unit_round_trip(env, env.secs(2.0).as_secs_f64()).await?;
    let counts = [1usize, 2, 4, 8];
    let mut lh = Vec::new();
    let mut hand = Vec::new();
    for p in counts {
        lh.push(run(env, false, p, secs).await?);
        hand.push(run(env, true, p, secs).await?);
    }
    let rtt_after = unit_round_trip(env, env.secs(2.0).as_secs_f64()).await?;
    let rtt = (rtt_before + rtt_after) / 2.0;
    let defaults = LeaseOptions::DEFAULT_POLL_INTERVAL;
    let poll = ms(defaults);
    // The single-process floor: 1 / (requests per unit of one process × round trip).
    let floor = 1e3 / (lh[0].rpu() * rtt);
    let hand_floor = 1e3 / (hand[0].rpu() * rtt);
    for (i, p) in counts.iter().enumerate() {
        let r = &lh[i];
        let (smin, smax) = r.shares();
        report.row(
            SECTION,
            format!("leasehold lock, {p} processes × {TASKS} tasks vs single-process floor"),
            format!("{:.0}/s", r.per_sec()),
            format!("{floor:.0}/s = 1/({:.2} × {rtt:.3} ms)", lh[0].rpu()),
            r.per_sec() / floor,
            None,
            Some(0.8),
            "each turn between processes leaves the lease idle about a round trip between \
             two processes, and waiters' polls and registrations load the service",
        );
        report.row_with_goal(
            SECTION,
            format!("leasehold lock, {p} processes: share of units × P, min / max"),
            format!("{smin:.2} / {smax:.2}"),
            "1 / 1".into(),
            smin,
            "within 2× (0.5 – 2)".into(),
            smin >= 0.5 && smax <= 2.0,
            "a 10 s run holds few turns per process at this P (a turn is a 500 ms tenure)",
        );
        if *p > 1 {
            // The documented bound: a turn for the holder and for each
            // process queued ahead: a tenure (500 ms), the unit under way,
            // up to two poll intervals until the next holder's poll, and
            // 50 ms for the unit and the round trips.
            let turns = (*p - 1) as f64;
            let bound = turns * (500.0 + 2.0 * poll + 50.0);
            let longest = percentile(&r.waits_ms, 1.0);
            report.row_with_goal(
                SECTION,
                format!(
                    "leasehold lock, {p} processes: longest wait vs the bound \
                     (P − 1)(T + U + 2 p + 4 r)"
                ),
                format!("{longest:.0} ms"),
                format!("{bound:.0} ms"),
                longest / bound,
                "≤ 1".into(),
                longest <= bound,
                "a unit or its round trips took longer than the 50 ms allowed per turn",
            );
        }
        let h = &hand[i];
        let (hmin, hmax) = h.shares();
        report.row(
            SECTION,
            format!("hand-written loop, {p} processes × {TASKS} tasks vs its floor"),
            format!("{:.0}/s", h.per_sec()),
            format!("{hand_floor:.0}/s = 1/({:.2} × {rtt:.3} ms)", hand[0].rpu()),
            h.per_sec() / hand_floor,
            None,
            None,
            "",
        );
        report.detail(format!(
            "Across processes, P = {p}: leasehold {} units in {secs:.0} s ({:.2} requests/unit), \
             wait for the lock p50 {:.1} ms / p99 {:.1} ms / max {:.1} ms, share × P min {smin:.2} \
             / max {smax:.2}, units per process {:?}; hand-written {} units ({:.2} requests/unit), \
             wait p50 {:.1} ms / p99 {:.1} ms / max {:.1} ms, share × P min {hmin:.2} / max \
             {hmax:.2}, units per process {:?}.",
            r.total(),
            r.rpu(),
            median(&r.waits_ms),
            percentile(&r.waits_ms, 0.99),
            percentile(&r.waits_ms, 1.0),
            r.units,
            h.total(),
            h.rpu(),
            median(&h.waits_ms),
            percentile(&h.waits_ms, 0.99),
            percentile(&h.waits_ms, 1.0),
            h.units,
        ));
    }
    report.detail(format!(
        "Across processes: each run starts P worker processes (this program re-run), {TASKS} \
         tasks each, on a fresh partition for {secs:.0} s; a unit is lock, read, replace, \
         commit. Default lease options (poll interval {poll:.0} ms, tenures of 500 ms; waiters \
         queue in a blob beside the lease, and a tenure's end passes the lease to the head by \
         Change Lease, timed for its next poll). Round trip: the mean time of a point read and \
         a conditional replace of the counter, back to back in one task with no lease, \
         {rtt_before:.3} ms before the runs and {rtt_after:.3} ms after."
    ));
    Ok(())
}
