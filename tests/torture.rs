//! Multi-process torture run: worker processes move money between accounts
//! under partition locks (three tables per unit) while a controller kills
//! random workers with SIGKILL at random moments and restarts them. At the
//! end a checker takes every partition lock — rolling forward whatever the
//! killed workers left half-done — and verifies that nothing was lost or
//! applied in part.
//!
//! A test binary without the standard harness: `cargo test` runs a short
//! version (4 workers, 30 s) against the Azurite of `scripts/with-azurite.sh`
//! (`LEASEHOLD_TEST_AZURITE`; required when `CI` is set, skipped with a
//! notice otherwise). The worker processes are this same binary, started
//! with the argument `worker`.
//!
//! The long run:
//!
//! ```text
//! LEASEHOLD_TORTURE_WORKERS=6 LEASEHOLD_TORTURE_SECONDS=600 \
//! LEASEHOLD_TORTURE_CUSTOMERS=12 LEASEHOLD_TORTURE_BATCH_LATENCY_MS=150 \
//!     scripts/with-azurite.sh cargo test --release --test torture
//! ```
//!
//! The long run delays every transaction the workers send. A kill then
//! lands inside a journalled commit far more often (more than one kill in four
//! leaves a commit to roll forward), and the workers write the lock blobs
//! slowly enough for Azurite. Azurite sweeps unreferenced blob data every ten
//! minutes, at a cost that grows with the square of the blob writes since the
//! previous sweep, and every journalled commit writes its lock blob twice.
//! At full speed ten minutes leave some 75 000 blob versions, and the sweep
//! stops Azurite from answering for well over 20 minutes.
//!
//! A second, cross-partition mode runs after the first (or alone, with
//! `LEASEHOLD_TORTURE_MODE=cross`; `single` runs only the first): each unit
//! moves money between two customers in different partitions with
//! [`Store::lock_many`], writing both accounts, both transfer counts and a
//! ledger entry on each side (three tables, two partitions), so a killed
//! worker leaves a journal in one customer's lock and an intent in the
//! other's. The checker then verifies that money is conserved over all
//! customers, that each customer's balances match its ledger and its count,
//! and that every transfer has both its sides (no partial commit). Its
//! short run in the test command lasts `LEASEHOLD_TORTURE_CROSS_SECONDS`
//! (20); the long run:
//!
//! ```text
//! LEASEHOLD_TORTURE_MODE=cross LEASEHOLD_TORTURE_WORKERS=6 \
//! LEASEHOLD_TORTURE_CROSS_SECONDS=600 LEASEHOLD_TORTURE_CUSTOMERS=12 \
//! LEASEHOLD_TORTURE_BATCH_LATENCY_MS=150 \
//!     scripts/with-azurite.sh cargo test --release --test torture
//! ```
//!
//! Settings (environment): `LEASEHOLD_TORTURE_WORKERS` (4),
//! `LEASEHOLD_TORTURE_SECONDS` (30), `LEASEHOLD_TORTURE_CUSTOMERS` (6),
//! `LEASEHOLD_TORTURE_KILL_MIN_MS` / `_KILL_MAX_MS` (the pause between kills,
//! 500–3000), `LEASEHOLD_TORTURE_BATCH_LATENCY_MS` (0; added before every
//! transaction a worker sends). It prints the units committed, kills,
//! roll-forwards and violations, and fails when a violation is found.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use leasehold::key::ContainerName;
use leasehold::lease::LeaseOptions;
use leasehold::lock::LockOptions;
use leasehold::testing::{FaultyBackend, Op};
use leasehold::{Entity, Error, Store};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const ACCOUNTS: usize = 3;
const OPENING_BALANCE: i64 = 1_000;

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "TortureAccounts")]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
    balance: i64,
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "TortureLedger")]
struct Entry {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    id: String,
    from: String,
    to: String,
    amount: i64,
}

/// How many transfers each customer has, kept in a third table so a commit
/// that applied in part would show up as a count that disagrees with the
/// ledger.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "TortureCounts")]
struct Count {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
    transfers: i64,
}

/// A small deterministic generator, seeded per process.
struct Rng(u64);

impl Rng {
    fn seeded(extra: u64) -> Rng {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1);
        Rng(t ^ (u64::from(std::process::id()) << 32) ^ extra)
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

struct Args {
    workers: usize,
    seconds: u64,
    customers: usize,
    kill_min_ms: u64,
    kill_max_ms: u64,
    batch_latency_ms: u64,
    mode: String,
    cross_seconds: u64,
}

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(format!("LEASEHOLD_TORTURE_{name}"))
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("LEASEHOLD_TORTURE_{name} must be a number"))
        })
        .unwrap_or(default)
}

fn settings() -> Args {
    Args {
        workers: setting("WORKERS", 4) as usize,
        seconds: setting("SECONDS", 30),
        customers: setting("CUSTOMERS", 6) as usize,
        kill_min_ms: setting("KILL_MIN_MS", 500),
        kill_max_ms: setting("KILL_MAX_MS", 3_000),
        batch_latency_ms: setting("BATCH_LATENCY_MS", 0),
        mode: std::env::var("LEASEHOLD_TORTURE_MODE").unwrap_or_else(|_| "both".into()),
        cross_seconds: setting("CROSS_SECONDS", 20),
    }
}

fn connection_string() -> String {
    std::env::var("LEASEHOLD_TEST_AZURITE").expect("LEASEHOLD_TEST_AZURITE is set")
}

/// A store ("process") with 15 s lock leases, so a killed holder's lock comes
/// free quickly. `batch_latency` is added before every transaction the store
/// sends (through [`FaultyBackend`]): it widens the window in which a kill
/// leaves a journalled commit half-applied, and it slows the workers down.
fn store(prefix: &str, batch_latency: Duration) -> Result<Store, Error> {
    let backend = FaultyBackend::new(
        leasehold::backend::azure::AzureBackend::from_connection_string(&connection_string())?,
    );
    backend
        .injector()
        .set_latency(Some(Op::Batch), batch_latency);
    Store::builder(backend)
        .table_prefix(prefix)?
        .lock_lease_options(
            LeaseOptions::new()
                .with_duration(Duration::from_secs(15))
                .with_container(ContainerName::new(LockOptions::DEFAULT_CONTAINER)?)
                .with_owner_metadata(false),
        )
        .build()
}

fn customer(i: usize) -> String {
    format!("c{i}")
}

fn account(i: usize) -> String {
    format!("a{i}")
}

/// One worker process: transfers until its standard input closes, within
/// one partition or (`cross`) between two.
async fn worker(prefix: &str, customers: usize, cross: bool) -> Result<(), Error> {
    let latency = Duration::from_millis(settings().batch_latency_ms);
    let store = store(prefix, latency)?;
    let mut rng = Rng::seeded(7);
    let stop = Arc::new(AtomicU64::new(0));
    {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut line = String::new();
            let _ = BufReader::new(tokio::io::stdin())
                .read_line(&mut line)
                .await;
            stop.store(1, Ordering::SeqCst);
        });
    }
    while stop.load(Ordering::SeqCst) == 0 {
        let ci = rng.below(customers as u64) as usize;
        let c = customer(ci);
        let from = rng.below(ACCOUNTS as u64) as usize;
        let to = (from + 1 + rng.below(ACCOUNTS as u64 - 1) as usize) % ACCOUNTS;
        let amount = 1 + rng.below(50) as i64;
        let outcome = if cross {
            let other = customer((ci + 1 + rng.below(customers as u64 - 1) as usize) % customers);
            transfer_across(&store, &c, &other, &account(from), &account(to), amount).await
        } else {
            transfer(&store, &c, &account(from), &account(to), amount).await
        };
        match outcome {
            Ok(outcome) => println!("{outcome}"),
            Err(e) if e.kind() == leasehold::ErrorKind::Conflict => println!("UNDO {e}"),
            Err(e) => println!("ERROR {e}"),
        }
    }
    Ok(())
}

async fn transfer(
    store: &Store,
    c: &str,
    from: &str,
    to: &str,
    amount: i64,
) -> Result<&'static str, Error> {
    let mut unit = store.lock(c).await?;
    if unit.rolled_forward().is_some() {
        println!("ROLLFWD");
    }
    let mut a = unit
        .get::<Account>(from)
        .await?
        .ok_or_else(|| missing(c, from))?;
    let mut b = unit
        .get::<Account>(to)
        .await?
        .ok_or_else(|| missing(c, to))?;
    let mut n = unit
        .get::<Count>("transfers")
        .await?
        .ok_or_else(|| missing(c, "transfers"))?;
    if a.balance < amount {
        unit.abandon().await?;
        return Ok("SKIP");
    }
    a.balance -= amount;
    b.balance += amount;
    n.transfers += 1;
    unit.replace(&a)?;
    unit.replace(&b)?;
    unit.replace(&n)?;
    unit.insert(&Entry {
        customer: c.into(),
        id: uuid::Uuid::new_v4().simple().to_string(),
        from: from.into(),
        to: to.into(),
        amount,
    })?;
    unit.commit().await?;
    Ok("COMMIT")
}

/// Moves `amount` from account `from` of customer `c` to account `to` of
/// customer `d` in one unit over both partitions: both accounts, both
/// transfer counts, and a ledger entry on each side.
async fn transfer_across(
    store: &Store,
    c: &str,
    d: &str,
    from: &str,
    to: &str,
    amount: i64,
) -> Result<&'static str, Error> {
    let mut unit = store.lock_many([d, c]).await?;
    if unit.rolled_forward().is_some() {
        println!("ROLLFWD");
    }
    let mut a = unit
        .get_in::<Account>(c, from)
        .await?
        .ok_or_else(|| missing(c, from))?;
    let mut b = unit
        .get_in::<Account>(d, to)
        .await?
        .ok_or_else(|| missing(d, to))?;
    let mut nc = unit
        .get_in::<Count>(c, "transfers")
        .await?
        .ok_or_else(|| missing(c, "transfers"))?;
    let mut nd = unit
        .get_in::<Count>(d, "transfers")
        .await?
        .ok_or_else(|| missing(d, "transfers"))?;
    if a.balance < amount {
        unit.abandon().await?;
        return Ok("SKIP");
    }
    a.balance -= amount;
    b.balance += amount;
    nc.transfers += 1;
    nd.transfers += 1;
    unit.replace(&a)?;
    unit.replace(&b)?;
    unit.replace(&nc)?;
    unit.replace(&nd)?;
    let id = uuid::Uuid::new_v4().simple().to_string();
    unit.insert(&Entry {
        customer: c.into(),
        id: id.clone(),
        from: from.into(),
        to: String::new(),
        amount,
    })?;
    unit.insert(&Entry {
        customer: d.into(),
        id,
        from: String::new(),
        to: to.into(),
        amount,
    })?;
    unit.commit().await?;
    Ok("COMMIT")
}

fn missing(c: &str, row: &str) -> Error {
    Error::NotFound {
        what: format!("row {row} of customer {c}"),
        code: None,
        table: None,
        row: None,
    }
}

#[derive(Default)]
struct Tally {
    commits: AtomicU64,
    roll_forwards: AtomicU64,
    undos: AtomicU64,
    errors: AtomicU64,
}

fn spawn_worker(prefix: &str, customers: usize, cross: bool, tally: &Arc<Tally>) -> Child {
    let exe = std::env::current_exe().expect("own executable");
    let mode = if cross { "cross" } else { "single" };
    let mut child = Command::new(exe)
        .args(["worker", prefix, &customers.to_string(), mode])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn worker");
    let stdout = child.stdout.take().expect("piped stdout");
    let tally = tally.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            match line.as_str() {
                "COMMIT" => tally.commits.fetch_add(1, Ordering::Relaxed),
                "ROLLFWD" => tally.roll_forwards.fetch_add(1, Ordering::Relaxed),
                l if l.starts_with("UNDO") => tally.undos.fetch_add(1, Ordering::Relaxed),
                l if l.starts_with("ERROR") => {
                    eprintln!("worker: {l}");
                    tally.errors.fetch_add(1, Ordering::Relaxed)
                }
                _ => 0,
            };
        }
    });
    child
}

async fn controller(args: &Args, cross: bool) -> Result<u64, Error> {
    let seconds = if cross {
        args.cross_seconds
    } else {
        args.seconds
    };
    let prefix = format!("tort{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let store = store(&prefix, Duration::ZERO)?;
    for c in 0..args.customers {
        for a in 0..ACCOUNTS {
            store
                .table::<Account>()
                .upsert(Account {
                    customer: customer(c),
                    name: account(a),
                    balance: OPENING_BALANCE,
                })
                .await?;
        }
        store
            .table::<Count>()
            .upsert(Count {
                customer: customer(c),
                name: "transfers".into(),
                transfers: 0,
            })
            .await?;
    }
    println!(
        "torture ({}): {} workers, {} s, {} customers × {ACCOUNTS} accounts, kills every {}–{} ms, {} ms before every worker transaction",
        if cross {
            "cross-partition"
        } else {
            "single-partition"
        },
        args.workers,
        seconds,
        args.customers,
        args.kill_min_ms,
        args.kill_max_ms,
        args.batch_latency_ms
    );
    let tally = Arc::new(Tally::default());
    let mut workers: Vec<Child> = (0..args.workers)
        .map(|_| spawn_worker(&prefix, args.customers, cross, &tally))
        .collect();
    let mut rng = Rng::seeded(11);
    let end = Instant::now() + Duration::from_secs(seconds);
    let mut kills = 0u64;
    while Instant::now() < end {
        let pause =
            args.kill_min_ms + rng.below(args.kill_max_ms.saturating_sub(args.kill_min_ms) + 1);
        tokio::time::sleep(
            Duration::from_millis(pause).min(end.saturating_duration_since(Instant::now())),
        )
        .await;
        if Instant::now() >= end {
            break;
        }
        let victim = rng.below(workers.len() as u64) as usize;
        let _ = workers[victim].start_kill();
        let _ = workers[victim].wait().await;
        kills += 1;
        workers[victim] = spawn_worker(&prefix, args.customers, cross, &tally);
    }
    // Ask the survivors to stop after their current unit.
    for w in &mut workers {
        drop(w.stdin.take());
    }
    for w in &mut workers {
        if tokio::time::timeout(Duration::from_secs(90), w.wait())
            .await
            .is_err()
        {
            let _ = w.start_kill();
            kills += 1;
        }
    }

    // The checker: every partition, under its lock (rolling forward).
    let checker = store.clone();
    let mut violations = 0u64;
    let mut checker_roll_forwards = 0u64;
    let mut ledger_total = 0usize;
    let mut money = 0i64;
    // Transfer id → (debits, credits, amounts agree), in cross mode.
    let mut sides: HashMap<String, (u32, u32, Option<i64>, bool)> = HashMap::new();
    for c in 0..args.customers {
        let c = customer(c);
        let unit = checker.lock(&c).await?;
        if unit.rolled_forward().is_some() {
            checker_roll_forwards += 1;
        }
        let accounts = checker
            .table::<Account>()
            .query()
            .partition(&c)
            .all()
            .await?;
        let ledger = checker.table::<Entry>().query().partition(&c).all().await?;
        let count = checker
            .table::<Count>()
            .get(&c, "transfers")
            .await?
            .map(|n| n.transfers)
            .unwrap_or(-1);
        unit.abandon().await?;
        ledger_total += ledger.len();
        let total: i64 = accounts.iter().map(|a| a.balance).sum();
        money += total;
        if cross {
            for e in &ledger {
                let side = sides.entry(e.id.clone()).or_insert((0, 0, None, true));
                if e.from.is_empty() {
                    side.1 += 1;
                } else {
                    side.0 += 1;
                }
                if side.2.is_some_and(|a| a != e.amount) {
                    side.3 = false;
                }
                side.2 = Some(e.amount);
            }
        }
        if !cross && total != OPENING_BALANCE * ACCOUNTS as i64 {
            println!(
                "VIOLATION {c}: total {total}, expected {}",
                OPENING_BALANCE * ACCOUNTS as i64
            );
            violations += 1;
        }
        let mut expected: HashMap<String, i64> = (0..ACCOUNTS)
            .map(|a| (account(a), OPENING_BALANCE))
            .collect();
        for e in &ledger {
            *expected.entry(e.from.clone()).or_default() -= e.amount;
            *expected.entry(e.to.clone()).or_default() += e.amount;
        }
        for a in &accounts {
            if expected.get(&a.name) != Some(&a.balance) {
                println!(
                    "VIOLATION {c}/{}: balance {} but the ledger says {:?}",
                    a.name,
                    a.balance,
                    expected.get(&a.name)
                );
                violations += 1;
            }
        }
        if count != ledger.len() as i64 {
            println!(
                "VIOLATION {c}: transfer count {count} but {} ledger entries",
                ledger.len()
            );
            violations += 1;
        }
    }
    let expected_money = OPENING_BALANCE * (ACCOUNTS * args.customers) as i64;
    if money != expected_money {
        println!("VIOLATION: {money} in all accounts, expected {expected_money}");
        violations += 1;
    }
    for (id, (debits, credits, _, agree)) in &sides {
        if (*debits, *credits, *agree) != (1, 1, true) {
            println!(
                "VIOLATION transfer {id}: {debits} debits, {credits} credits, amounts agree: {agree} (a partial commit)"
            );
            violations += 1;
        }
    }
    if cross {
        ledger_total /= 2;
    }
    let commits_reported = tally.commits.load(Ordering::Relaxed);
    let roll_forwards = tally.roll_forwards.load(Ordering::Relaxed) + checker_roll_forwards;
    println!(
        "units committed: {ledger_total} (reported by workers before dying: {commits_reported}), kills: {kills}, roll-forwards: {roll_forwards}, undos: {}, worker errors: {}, violations: {violations}",
        tally.undos.load(Ordering::Relaxed),
        tally.errors.load(Ordering::Relaxed)
    );
    if ledger_total == 0 {
        println!("VIOLATION: no unit was committed");
        violations += 1;
    }
    Ok(violations)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("worker") {
        let prefix = args.get(1).expect("prefix");
        let customers = args.get(2).and_then(|c| c.parse().ok()).expect("customers");
        let cross = args.get(3).map(String::as_str) == Some("cross");
        return worker(prefix, customers, cross).await;
    }
    if std::env::var_os("LEASEHOLD_TEST_AZURITE").is_none() {
        if std::env::var_os("CI").is_some() {
            eprintln!("torture: Azurite is required in CI: run through scripts/with-azurite.sh");
            std::process::exit(1);
        }
        eprintln!(
            "torture: LEASEHOLD_TEST_AZURITE is not set; skipped (run through scripts/with-azurite.sh)"
        );
        return Ok(());
    }
    let args = settings();
    let mut violations = 0;
    if args.mode != "cross" {
        violations += controller(&args, false).await?;
    }
    if args.mode != "single" {
        violations += controller(&args, true).await?;
    }
    if violations > 0 {
        println!("torture: 0 passed, 1 failed");
        std::process::exit(1);
    }
    println!("torture: 1 passed, 0 failed");
    Ok(())
}
