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
//! A third mode, `indexes` (run after the other two, or alone with
//! `LEASEHOLD_TORTURE_MODE=indexes`), exercises declarative indexes: the
//! workers register customers whose e-mails (`#[entity(unique)]`) are
//! drawn from a small pool so they collide, change e-mails, move customers
//! to another partition (a unit deleting the old row and inserting the new
//! one with the same e-mail) and delete them. No write takes an index
//! lock: plain writes claim their e-mails first and write the customer as
//! the commit point, and the move's unit locks only the two regions. After
//! the kills the checker takes every region's lock (rolling forward what
//! the killed workers left) and checks the invariant: no two customers
//! share an e-mail, `get_by` of every e-mail answers its holder or nothing,
//! and there is no orphan or missing index row (claims left by killed
//! writers are stale, not missing). Its short run lasts
//! `LEASEHOLD_TORTURE_INDEX_SECONDS` (15).
//!
//! A fourth mode, `stray` (run after the other three, or alone with
//! `LEASEHOLD_TORTURE_MODE=stray`), is the cross-partition mode with
//! optimistic writers beside the units: `LEASEHOLD_TORTURE_STRAY_WRITERS`
//! (2) more processes (started with `worker PREFIX CUSTOMERS stray`, never
//! killed) call plain [`Table::update_with`](leasehold::Table::update_with),
//! without a lock, every 100–300 ms on a random account, adding 1 to its
//! `touched` column, which the units carry through unchanged (they replace
//! the whole account as they read it). Besides the SIGKILLs, the controller
//! now and then stops a worker with SIGSTOP for longer than the 15 s lock
//! lease and then lets it go on (SIGCONT), so its leases run out under it,
//! mid-unit. Every worker prints the answer of every commit it gets one
//! from (`TXN id OK` or `TXN id ERR kind`), each stray writer prints, per
//! account, how many of its updates were acknowledged, ended with an unknown
//! outcome (`Transient`, `InDoubt`) or failed. The checker then verifies,
//! on top of the cross-partition checks, that every partition's lock can
//! be taken (no stuck partition), that each account's final `touched` lies
//! between its acknowledged updates and those plus its unknown ones (no
//! acknowledged optimistic write lost, none applied that was said to have
//! failed), and that every commit's answer matches the ledger (`Ok`: its
//! entries are there; an error other than `InDoubt`: they are not). Its
//! short run lasts `LEASEHOLD_TORTURE_STRAY_SECONDS` (15) plus the end of a
//! pause still running; the long run:
//!
//! ```text
//! LEASEHOLD_TORTURE_MODE=stray LEASEHOLD_TORTURE_WORKERS=6 \
//! LEASEHOLD_TORTURE_STRAY_SECONDS=600 LEASEHOLD_TORTURE_CUSTOMERS=12 \
//! LEASEHOLD_TORTURE_BATCH_LATENCY_MS=150 \
//!     scripts/with-azurite.sh cargo test --release --test torture
//! ```
//!
//! A fifth mode, `big` (run after the other four, or alone with
//! `LEASEHOLD_TORTURE_MODE=big`), runs units too big for one entity-group
//! transaction: each unit locks two or three customers
//! ([`Store::lock_many`]) and writes 150–300 rows (a random size and
//! spread): every account and the count of each customer, and the rest as
//! [`Move`] rows, small amounts into and out of random accounts that add up
//! to nothing over the unit, one customer getting more than 100 of them
//! (more than one transaction holds, so even that group's rows are marked
//! when it is the primary one). Every commit therefore decides in a row,
//! with marks on hundreds of rows in several transactions per group, and a
//! kill or a pause lands inside the marking or finishing round far more
//! often; its workers also wait `LEASEHOLD_TORTURE_BIG_LATENCY_MS` (100,
//! or `LEASEHOLD_TORTURE_BATCH_LATENCY_MS` when longer) before every
//! transaction, which widens the rounds of a commit against the reads
//! before it. The controller kills workers and pauses them past the lease
//! as in the `stray` mode (no stray writers), and the checker verifies, after
//! taking every lock, that every unit is whole or absent (all the moves it
//! wrote, adding up to nothing), that each customer's balances match its
//! moves and its count, that money is conserved over all customers, and
//! that every commit's answer matches the moves stored. It also reads the
//! commit leftovers raw and prints the units committed, the commits whose
//! writer died after the commit point (their decision rows left: readers
//! rolled their rows forward) and those withdrawn by readers. Its short
//! run lasts `LEASEHOLD_TORTURE_BIG_SECONDS` (20) plus the end of a pause
//! still running; the long run:
//!
//! ```text
//! LEASEHOLD_TORTURE_MODE=big LEASEHOLD_TORTURE_WORKERS=6 \
//! LEASEHOLD_TORTURE_BIG_SECONDS=600 LEASEHOLD_TORTURE_CUSTOMERS=12 \
//! LEASEHOLD_TORTURE_BATCH_LATENCY_MS=150 \
//!     scripts/with-azurite.sh cargo test --release --test torture
//! ```
//!
//! A sixth mode, `txn` (run after the other five, or alone with
//! `LEASEHOLD_TORTURE_MODE=txn`), puts transactions without a lease beside
//! locked units and plain optimistic writes on the same rows. Each worker
//! (started with `worker PREFIX CUSTOMERS txn`) moves money with
//! [`Store::transact`] over two or three customers (one time in three also
//! reading an account it does not write, which its commit validates), with
//! a unit over two ([`Store::lock_many_with_timeout`], giving up after
//! 3 s: a killed worker's locks stay taken until their leases run out), or
//! adds 1 to an account's `touched` with plain
//! [`Table::update_with`](leasehold::Table::update_with) (so the updates
//! never touch money). A transfer writes, in every customer
//! it touches, the account, the transfer count and a [`Leg`] naming the
//! transfer and how many legs it wrote. Before one operation in four a
//! worker plans a lost reply: a batch or single write that its
//! [`FaultyBackend`] applies and reports as lost (the library sees it), or
//! a batch or an account's replace whose HTTP reply the Azure transport
//! loses ([`FaultInjector::transport_policy`]: the backend's own
//! lost-reply handling sees it first); and one transaction in six loses
//! its commit point's reply while the "process" dies at its next read (its
//! injector refuses every later request until the answer), so the answer
//! is `InDoubt`. The controller kills workers and, one event in three,
//! stops one with SIGSTOP for 2.5 s up to
//! `LEASEHOLD_TORTURE_TXN_PAUSE_MAX_MS` (6000), past the 2 s time-to-live
//! of a transaction's marks (so readers withdraw its transaction and its
//! late commit point is refused) and, above 5 s, past the workers' request
//! timeout (so a request in flight is given up and tried again), both
//! aimed at workers inside a commit as in the `big` mode. Workers print every
//! transfer's answer (after `INDOUBT id primary transaction` for an
//! `InDoubt`), the conflicts `transact` ran again, and each plain update as
//! it starts and ends. After quiescence the checker takes every customer's
//! lock (no stuck partition) and reads every row there, then verifies:
//! money conserved; each balance matches its legs and each count its
//! number of legs; every transfer whole or absent (all its legs, adding up
//! to nothing); every answer matching what is stored (`Ok`: stored; an
//! error other than `InDoubt`: absent; `InDoubt`: what
//! [`Store::commit_outcome`] then says); each account's `touched` between
//! its acknowledged updates and those started and not failed; and, read
//! raw, no row left carrying a mark (`_lhTxn`). It prints the transactions
//! and units committed, the conflicts retried, kills, pauses, faults fired,
//! the answers checked, the commits cut by a kill, and the decision rows
//! left (committed: the writer was gone after its commit point; withdrawn:
//! by readers). Its short run lasts `LEASEHOLD_TORTURE_TXN_SECONDS` (15)
//! plus the end of a pause still running, its workers waiting
//! `LEASEHOLD_TORTURE_TXN_LATENCY_MS` (50, or
//! `LEASEHOLD_TORTURE_BATCH_LATENCY_MS` when longer) before every
//! transaction; the long run:
//!
//! ```text
//! LEASEHOLD_TORTURE_MODE=txn LEASEHOLD_TORTURE_WORKERS=6 \
//! LEASEHOLD_TORTURE_TXN_SECONDS=600 LEASEHOLD_TORTURE_CUSTOMERS=12 \
//!     scripts/with-azurite.sh cargo test --release --test torture
//! ```
//!
//! It found (2026-11-29, once in seventeen runs) a transfer applied in
//! part: its worker was stopped for more than 5 s while its commit point
//! was in flight; the commit point was applied, but the Azure backend's
//! next try came after the transaction's send deadline and was refused as
//! `LeaseLost` ("not sent"), which the commit took for a commit point that
//! never went out, so it took its marks off. Fixed the same day (a refused
//! try is settled through the decision row, as a lost reply is); the
//! reduced case is the check
//! `azurite::txn_deadline::a_commit_point_applied_whose_next_try_falls_after_the_deadline_is_not_withdrawn`
//! in `tests/it`.
//!
//! Every mode runs with a sweeper beside it: from the moment its rows are
//! opened until its workers stopped, the controller runs [`Store::sweep`]
//! with `older_than` zero (the safety bounds of each kind kept: 25 minutes
//! for tombstones and stale index rows, 20 minutes for withdrawn decision
//! rows) in a loop, on a store of its own, every
//! `LEASEHOLD_TORTURE_SWEEP_GAP_MS` (250) after the last sweep ended. It
//! removes lock blobs free at that moment (units recreate them); decision
//! rows it keeps, the committed ones for the hour `commit_outcome` answers
//! from them and the withdrawn ones for the 20 minutes a late commit point
//! may take, longer than a run. A sweep that fails is a violation, and so
//! is a run in which no sweep finished; the controller prints what the
//! sweeps removed. So the decision rows the checker counts as left (the
//! `big` and `txn` modes) are those of the commits whose writer died or
//! was withdrawn, as without the sweeper, and [`Store::commit_outcome`]
//! finds the decision of every commit in doubt. After the checker has read
//! every row (finishing or withdrawing every mark), the single, cross,
//! stray, big and txn modes run a last sweep, which must succeed (in the
//! `txn` mode it runs after the answers in doubt are settled).
//!
//! Settings (environment): `LEASEHOLD_TORTURE_WORKERS` (4),
//! `LEASEHOLD_TORTURE_SECONDS` (30), `LEASEHOLD_TORTURE_CUSTOMERS` (6),
//! `LEASEHOLD_TORTURE_KILL_MIN_MS` / `_KILL_MAX_MS` (the pause between kills,
//! 500–3000), `LEASEHOLD_TORTURE_BATCH_LATENCY_MS` (0; added before every
//! transaction a worker sends). It prints the units committed, kills,
//! roll-forwards and violations (and, in the `stray` mode, the pauses, the
//! stray writes acknowledged and of unknown outcome, the commit answers
//! checked and the stuck partitions; in the `big` mode, the moves and the
//! decision rows left; in the `txn` mode, the figures above), and fails
//! when a violation is found.
//! The controller and every worker print leasehold's warnings and the Azure
//! transport's retries on standard error; `LEASEHOLD_TORTURE_TRACE` (a level
//! such as `debug`) prints all of leasehold's events at that level instead.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leasehold::backend::Op;
use leasehold::backend::azure::{AzureBackend, TransportRetry};
use leasehold::key::ContainerName;
use leasehold::lease::LeaseOptions;
use leasehold::lock::LockOptions;
use leasehold::store::SweepOptions;
use leasehold::testing::{Fault, FaultInjector, FaultyBackend};
use leasehold::{Entity, Error, Store};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const ACCOUNTS: usize = 3;
const OPENING_BALANCE: i64 = 1_000;

/// The lease of every partition lock the torture takes.
const LOCK_LEASE: Duration = Duration::from_secs(15);

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "TortureAccounts")]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
    balance: i64,
    /// Only the stray writers change it (by 1 per update); units carry it
    /// through as they read it.
    touched: i64,
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

/// One amount a big unit moves (the `big` mode): added to `account` of
/// `customer` (taken when negative). A unit's moves add up to nothing over
/// all its partitions, and each names its unit and how many moves the unit
/// wrote in all, so a unit applied in part shows up as a unit with fewer.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "TortureMoves")]
struct Move {
    #[entity(partition_key)]
    customer: String,
    /// `<unit>.<n>`.
    #[entity(row_key)]
    id: String,
    unit: String,
    /// The moves the unit wrote in all partitions.
    moves: i64,
    account: String,
    amount: i64,
}

/// One side of a transfer of the `txn` mode: `amount` added to `account`
/// of `customer` (taken when negative). A transfer writes one leg in each
/// partition it touches, all under its id, adding up to nothing, and each
/// names how many legs it wrote, so one applied in part shows up as a
/// transfer with fewer.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "TortureLegs")]
struct Leg {
    #[entity(partition_key)]
    customer: String,
    /// The transfer's id.
    #[entity(row_key)]
    id: String,
    account: String,
    amount: i64,
    /// The legs the transfer wrote in all partitions.
    legs: i64,
    /// `txn` ([`Store::transact`]) or `unit` ([`Store::lock_many`]).
    via: String,
}

/// The fewest and the most writes of a unit in the `big` mode.
const BIG_WRITES: (u64, u64) = (150, 300);

/// The most rows one entity-group transaction holds.
const GROUP_LIMIT: usize = 100;

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
    index_seconds: u64,
    stray_seconds: u64,
    stray_writers: usize,
    big_seconds: u64,
    big_latency_ms: u64,
    big_customers: usize,
    txn_seconds: u64,
    txn_latency_ms: u64,
    txn_pause_max_ms: u64,
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
        index_seconds: setting("INDEX_SECONDS", 15),
        stray_seconds: setting("STRAY_SECONDS", 15),
        stray_writers: setting("STRAY_WRITERS", 2) as usize,
        big_seconds: setting("BIG_SECONDS", 20),
        big_latency_ms: setting("BIG_LATENCY_MS", 100),
        big_customers: setting("BIG_CUSTOMERS", 12) as usize,
        txn_seconds: setting("TXN_SECONDS", 15),
        txn_latency_ms: setting("TXN_LATENCY_MS", 50),
        txn_pause_max_ms: setting("TXN_PAUSE_MAX_MS", 6_000),
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
    Ok(store_with(prefix, batch_latency, None)?.0)
}

/// [`store`], with `transport` (when given) in the Azure backend's pipeline
/// (so its rules lose the replies of HTTP requests the service applied),
/// and the [`FaultInjector`] of the [`FaultyBackend`] around it (whose rules
/// lose the replies of backend calls the service applied).
fn store_with(
    prefix: &str,
    batch_latency: Duration,
    transport: Option<&FaultInjector>,
) -> Result<(Store, FaultInjector), Error> {
    // A request left without a reply is given up after 5 s and sent again
    // (over a fresh connection), well within the 30 s the store rides out
    // failing storage: one stalled connection must not cost a worker its
    // whole bound.
    let mut azure = AzureBackend::builder()
        .connection_string(&connection_string())?
        .transport_retry(TransportRetry::new().with_request_timeout(Duration::from_secs(5)));
    if let Some(transport) = transport {
        azure = azure.policy(transport.transport_policy());
    }
    let backend = FaultyBackend::new(azure.build()?);
    let faults = backend.injector();
    faults.set_latency(Some(Op::Batch), batch_latency);
    let store = Store::builder(backend)
        .table_prefix(prefix)?
        .lock_lease_options(
            LeaseOptions::new()
                .with_duration(LOCK_LEASE)
                .with_container(ContainerName::new(LockOptions::DEFAULT_CONTAINER)?)
                .with_owner_metadata(false),
        )
        .build()?;
    Ok((store, faults))
}

fn customer(i: usize) -> String {
    format!("c{i}")
}

fn account(i: usize) -> String {
    format!("a{i}")
}

/// What the sweeper beside a run removed ([`Sweeper`]).
#[derive(Debug, Default)]
struct Swept {
    sweeps: u64,
    failures: Vec<String>,
    decision_rows: u64,
    after_image_rows: u64,
    lock_blobs: u64,
    tombstones: u64,
    stale_index_rows: u64,
}

/// A task sweeping the tables and lock blobs of `prefix` while a mode runs
/// ([`Store::sweep`] with `older_than` zero, in a loop), on a store of its
/// own, as another process would.
struct Sweeper {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Swept>,
}

impl Sweeper {
    fn start(prefix: &str) -> Result<Sweeper, Error> {
        let store = store(prefix, Duration::ZERO)?;
        let gap = Duration::from_millis(setting("SWEEP_GAP_MS", 250));
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn({
            let stop = stop.clone();
            async move {
                let options = SweepOptions::new().with_older_than(Duration::ZERO);
                let mut swept = Swept::default();
                while !stop.load(Ordering::SeqCst) {
                    match store.sweep(&options).await {
                        Ok(r) => {
                            swept.sweeps += 1;
                            swept.decision_rows += r.decision_rows;
                            swept.after_image_rows += r.after_image_rows;
                            swept.lock_blobs += r.lock_blobs;
                            swept.tombstones += r.tombstones;
                            swept.stale_index_rows += r.stale_index_rows;
                        }
                        Err(e) => swept.failures.push(format!("{:?}: {e}", e.kind())),
                    }
                    tokio::time::sleep(gap).await;
                }
                swept
            }
        });
        Ok(Sweeper { stop, task })
    }

    /// Stops the sweeper after its current sweep and prints what it
    /// removed; answers the violations (a sweep that failed, none that
    /// finished), printed.
    async fn stop(self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        let swept = match self.task.await {
            Ok(swept) => swept,
            Err(e) => {
                println!("VIOLATION: the sweeper beside the run panicked: {e}");
                return 1;
            }
        };
        let mut violations = 0;
        for failure in &swept.failures {
            println!("VIOLATION: a sweep beside the run failed: {failure}");
            violations += 1;
        }
        if swept.sweeps == 0 {
            println!("VIOLATION: the sweeper beside the run never finished a sweep");
            violations += 1;
        }
        println!(
            "sweeper beside the run: {} sweeps ({} failed) removed {} decision rows, {} after-image rows, {} lock blobs, {} tombstones, {} stale index rows",
            swept.sweeps,
            swept.failures.len(),
            swept.decision_rows,
            swept.after_image_rows,
            swept.lock_blobs,
            swept.tombstones,
            swept.stale_index_rows
        );
        violations
    }
}

/// The last sweep of a mode, once the checker has read every row of
/// `prefix`'s tables (finishing every committed mark and withdrawing every
/// undecided one): it must succeed. Committed decision rows stay for the
/// hour `commit_outcome` answers from them, withdrawn ones (and their
/// after-image rows) for the 20 minutes a late commit point may take: a
/// run is shorter, so the sweep removes none of them (the storm, on
/// storage seen an hour later, checks that it does then). Answers the
/// violations, printed.
async fn last_sweep(store: &Store, prefix: &str) -> Result<u64, Error> {
    let mut violations = 0;
    match store
        .sweep(&SweepOptions::new().with_older_than(Duration::ZERO))
        .await
    {
        Ok(report) => println!("last sweep: {report}"),
        Err(e) => {
            println!("VIOLATION: the last sweep failed: {:?}: {e}", e.kind());
            violations += 1;
        }
    }
    let (committed, withdrawn, after_images) = decision_rows(prefix).await?;
    println!(
        "after the last sweep: decision rows left: {committed} committed (kept an hour for commit_outcome), {withdrawn} withdrawn (kept for a late commit point); after-image rows left: {after_images}"
    );
    Ok(violations)
}

/// One worker process: transfers until its standard input closes, within
/// one partition ([`Mode::Single`]), between two ([`Mode::Cross`],
/// [`Mode::Stray`]) or big units over two or three ([`Mode::Big`]). Beside
/// stray writers, a commit refused because a row changed since the unit
/// read it (a stray update) is expected: `REFUSED`, not `ERROR`.
async fn worker(prefix: &str, customers: usize, mode: Mode) -> Result<(), Error> {
    let args = settings();
    let latency = Duration::from_millis(match mode {
        Mode::Big => args.batch_latency_ms.max(args.big_latency_ms),
        _ => args.batch_latency_ms,
    });
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
        let outcome = match mode {
            Mode::Single => transfer(&store, &c, &account(from), &account(to), amount).await,
            Mode::Cross | Mode::Stray => {
                let other =
                    customer((ci + 1 + rng.below(customers as u64 - 1) as usize) % customers);
                transfer_across(&store, &c, &other, &account(from), &account(to), amount).await
            }
            Mode::Big => big_unit(&store, customers, &mut rng).await,
        };
        match outcome {
            Ok(outcome) => println!("{outcome}"),
            Err(e) if e.kind() == leasehold::ErrorKind::Conflict => println!("CONFLICT {e}"),
            Err(e) if mode == Mode::Stray && e.kind() == leasehold::ErrorKind::Batch => {
                println!("REFUSED {e}")
            }
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
        id: id.clone(),
        from: String::new(),
        to: to.into(),
        amount,
    })?;
    // What the commit answered, for the checker to hold against the ledger
    // (printed, so flushed, before anything else is done).
    let answer = unit.commit().await;
    match &answer {
        Ok(report) => println!("TXN {id} OK {:?}", report.finished_by),
        Err(e) => println!("TXN {id} ERR {:?} {e}", e.kind()),
    }
    answer?;
    Ok("COMMIT")
}

/// One unit of the `big` mode: 150–300 writes over two or three customers
/// (a random size and spread): every account and the move count of each,
/// and the rest as [`Move`] rows, one partition getting more than one
/// entity-group transaction holds (the others a few to many), so the
/// commit marks rows and decides in a row whichever partition comes first.
/// Small random amounts go in and out of random accounts, the last move
/// making them add up to nothing. Prints `TXN unit OK FinishedBy batches`
/// or `TXN unit ERR Kind message` before anything else is done.
async fn big_unit(store: &Store, customers: usize, rng: &mut Rng) -> Result<&'static str, Error> {
    let parts = (2 + rng.below(2) as usize).min(customers);
    let mut chosen: Vec<usize> = Vec::with_capacity(parts);
    while chosen.len() < parts {
        let c = rng.below(customers as u64) as usize;
        if !chosen.contains(&c) {
            chosen.push(c);
        }
    }
    let names: Vec<String> = chosen.iter().map(|&c| customer(c)).collect();
    let writes = BIG_WRITES.0 + rng.below(BIG_WRITES.1 - BIG_WRITES.0 + 1);
    // Every account and the count of each partition, and the moves.
    let moves = writes as usize - parts * (ACCOUNTS + 1);
    // One partition (at random, so sometimes the primary one) gets more
    // moves than one transaction holds; the others share what is left.
    let big = rng.below(parts as u64) as usize;
    let spare = (moves - (GROUP_LIMIT + 1)) / (parts - 1);
    let mut per_part: Vec<usize> = (0..parts)
        .map(|_| 1 + rng.below(spare as u64) as usize)
        .collect();
    per_part[big] = moves
        - (0..parts)
            .filter(|&p| p != big)
            .map(|p| per_part[p])
            .sum::<usize>();
    let started = Instant::now();
    let mut unit = store.lock_many(names.iter().map(String::as_str)).await?;
    let locked = started.elapsed();
    let mut accounts = Vec::new();
    let mut counts = Vec::new();
    for c in &names {
        for a in 0..ACCOUNTS {
            let row = unit
                .get_in::<Account>(c.as_str(), account(a).as_str())
                .await?
                .ok_or_else(|| missing(c, &account(a)))?;
            accounts.push(row);
        }
        let n = unit
            .get_in::<Count>(c.as_str(), "transfers")
            .await?
            .ok_or_else(|| missing(c, "transfers"))?;
        counts.push(n);
    }
    let id = uuid::Uuid::new_v4().simple().to_string();
    let mut sum = 0i64;
    let mut n = 0usize;
    for (p, &count) in per_part.iter().enumerate() {
        for _ in 0..count {
            n += 1;
            let a = rng.below(ACCOUNTS as u64) as usize;
            let amount = if n == moves {
                -sum
            } else {
                let size = 1 + rng.below(20) as i64;
                if rng.below(2) == 0 { size } else { -size }
            };
            sum += amount;
            accounts[p * ACCOUNTS + a].balance += amount;
            counts[p].transfers += 1;
            unit.insert(&Move {
                customer: names[p].clone(),
                id: format!("{id}.{n:03}"),
                unit: id.clone(),
                moves: moves as i64,
                account: account(a),
                amount,
            })?;
        }
    }
    for row in &accounts {
        unit.replace(row)?;
    }
    for row in &counts {
        unit.replace(row)?;
    }
    println!("BEGIN {id}");
    let committing = Instant::now();
    let answer = unit.commit().await;
    match &answer {
        Ok(report) => println!(
            "TXN {id} OK {:?} {} batches, {writes} writes, locked in {locked:?}, read and staged in {:?}, committed in {:?}",
            report.finished_by,
            report.batches,
            committing - started - locked,
            committing.elapsed()
        ),
        Err(e) => println!("TXN {id} ERR {:?} {e}", e.kind()),
    }
    answer?;
    Ok("COMMIT")
}

/// One stray writer: plain optimistic updates (no lock) of random accounts,
/// adding 1 to `touched`, every 100–300 ms until its standard input closes.
/// Then it prints, per account, how many updates were acknowledged, how
/// many ended with an unknown outcome and how many failed
/// (`STRAY customer account ok unknown failed`), and `STRAYDONE`.
async fn stray_writer(prefix: &str, customers: usize) -> Result<(), Error> {
    let latency = Duration::from_millis(settings().batch_latency_ms);
    let store = store(prefix, latency)?;
    let accounts = store.table::<Account>();
    let mut rng = Rng::seeded(19);
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
    // (customer, account) → [acknowledged, unknown outcome, failed].
    let mut counts: BTreeMap<(usize, usize), [u64; 3]> = BTreeMap::new();
    while stop.load(Ordering::SeqCst) == 0 {
        let c = rng.below(customers as u64) as usize;
        let a = rng.below(ACCOUNTS as u64) as usize;
        let slot = counts.entry((c, a)).or_default();
        let started = Instant::now();
        match accounts
            .update_with(customer(c), account(a), |row| row.touched += 1)
            .await
        {
            Ok(_) => slot[0] += 1,
            Err(e) => {
                let unknown = matches!(
                    e.kind(),
                    leasehold::ErrorKind::Transient | leasehold::ErrorKind::InDoubt
                );
                slot[if unknown { 1 } else { 2 }] += 1;
                println!(
                    "STRAYERR {}/{} after {:?}, {}: {:?} {e}",
                    customer(c),
                    account(a),
                    started.elapsed(),
                    if unknown { "outcome unknown" } else { "failed" },
                    e.kind()
                );
            }
        }
        tokio::time::sleep(Duration::from_millis(100 + rng.below(201))).await;
    }
    for ((c, a), [ok, unknown, failed]) in counts {
        println!(
            "STRAY {} {} {ok} {unknown} {failed}",
            customer(c),
            account(a)
        );
    }
    println!("STRAYDONE");
    Ok(())
}

/// One worker of the `txn` mode: until its standard input closes, moves
/// money between accounts of two or three customers with
/// [`Store::transact`] ([`txn_transfer`]), between two with a locked unit
/// ([`unit_transfer`]), or adds 1 to an account's `touched` with plain
/// [`Table::update_with`](leasehold::Table::update_with) (no lock, no
/// transaction), the same rows throughout. Before one operation in four
/// it plans one lost reply: a batch or a write its [`FaultyBackend`]
/// applies and reports as failed (the library sees the loss), or a batch
/// or an account's replace whose HTTP reply its Azure transport loses (the
/// backend's own lost-reply handling sees it first); one transaction in
/// six (when nothing else is planned) loses its commit point's reply with
/// no way to read its decision back ([`txn_transfer`]).
///
/// Prints `BEGIN id` just before a transfer's commit (so the controller
/// aims kills and pauses at it), then `TXN id OK via` or `TXN id ERR Kind
/// message` (after `INDOUBT id primary transaction` for an `InDoubt`), and
/// `RETRIES n` for the conflicts `transact` ran again; `TOUCH customer
/// account` before an update, then `TOUCHED customer account OK`,
/// `UNKNOWN kind` (`Transient`, `InDoubt`) or `FAILED kind`; `LOST n` for
/// the faults fired since its last line.
async fn txn_worker(prefix: &str, customers: usize) -> Result<(), Error> {
    let args = settings();
    let latency = Duration::from_millis(args.batch_latency_ms.max(args.txn_latency_ms));
    let transport = FaultInjector::default();
    let (store, faults) = store_with(prefix, latency, Some(&transport))?;
    let accounts = store.table::<Account>();
    let mut rng = Rng::seeded(23);
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
    let mut lost = 0u64;
    while stop.load(Ordering::SeqCst) == 0 {
        if rng.below(4) == 0 && faults.pending() + transport.pending() == 0 {
            match rng.below(4) {
                // One of the next batches: a transaction's marks, commit
                // point or finishing, a unit's commit, or a reader
                // finishing a mark.
                0 => {
                    faults.lose_reply_nth(Some(Op::Batch), 1 + rng.below(3));
                }
                // The next single write: an update, or a reader finishing
                // or withdrawing a mark.
                1 => {
                    faults.lose_reply_nth(Some(Op::Write), 1);
                }
                2 => {
                    transport.inject_request("POST", "$batch", Fault::LoseReply);
                }
                _ => {
                    transport.inject_request("PUT", "TortureAccounts", Fault::LoseReply);
                }
            }
        }
        let id = uuid::Uuid::new_v4().simple().to_string();
        match rng.below(10) {
            0..=4 => {
                // One transaction in six (with no other fault planned)
                // loses its commit point's reply and cannot read its
                // decision back: `InDoubt`.
                let doubt = faults.pending() + transport.pending() == 0 && rng.below(6) == 0;
                let doubt = doubt.then_some(&faults);
                let (answer, attempts) =
                    txn_transfer(&store, customers, &id, doubt, &mut rng).await;
                if doubt.is_some() {
                    faults.revive();
                }
                if attempts > 1 {
                    println!("RETRIES {}", attempts - 1);
                }
                print_answer(&id, answer.map(|()| "txn".to_owned()));
            }
            5..=7 => {
                let answer = unit_transfer(&store, customers, &id, &mut rng).await;
                print_answer(&id, answer.map(|r| format!("{:?}", r.finished_by)));
            }
            _ => {
                let (c, a) = (
                    customer(rng.below(customers as u64) as usize),
                    account(rng.below(ACCOUNTS as u64) as usize),
                );
                println!("TOUCH {c} {a}");
                match accounts
                    .update_with(c.as_str(), a.as_str(), |row| row.touched += 1)
                    .await
                {
                    Ok(_) => println!("TOUCHED {c} {a} OK"),
                    Err(e)
                        if matches!(
                            e.kind(),
                            leasehold::ErrorKind::Transient | leasehold::ErrorKind::InDoubt
                        ) =>
                    {
                        println!("TOUCHED {c} {a} UNKNOWN {:?} {e}", e.kind())
                    }
                    Err(e) => println!("TOUCHED {c} {a} FAILED {:?} {e}", e.kind()),
                }
            }
        }
        let now = faults.injected() + transport.injected();
        if now > lost {
            println!("LOST {}", now - lost);
            lost = now;
        }
    }
    Ok(())
}

/// Prints a transfer's answer for the controller: `TXN id OK detail`, or
/// `TXN id ERR Kind message` (after `INDOUBT id primary transaction` for an
/// [`Error::InDoubt`] naming its transaction).
fn print_answer(id: &str, answer: Result<String, Error>) {
    match answer {
        Ok(detail) => println!("TXN {id} OK {detail}"),
        Err(e) => {
            if let Error::InDoubt {
                primary,
                transaction: Some(txn),
                ..
            } = &e
            {
                println!("INDOUBT {id} {} {txn}", primary.as_str());
            }
            println!("TXN {id} ERR {:?} {e}", e.kind());
        }
    }
}

/// A transfer's legs as the worker prints them (`PLAN id via legs`):
/// `customer/account/amount` each, separated by spaces.
fn plan_text(plan: &[(String, String, i64)]) -> String {
    plan.iter()
        .map(|(c, a, amount)| format!("{c}/{a}/{amount}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `n` distinct customers of `customers`, at random.
fn distinct_customers(customers: usize, n: usize, rng: &mut Rng) -> Vec<String> {
    let mut chosen: Vec<usize> = Vec::with_capacity(n);
    while chosen.len() < n.min(customers) {
        let c = rng.below(customers as u64) as usize;
        if !chosen.contains(&c) {
            chosen.push(c);
        }
    }
    chosen.into_iter().map(customer).collect()
}

/// The legs of a transfer over `parts` customers: an amount taken from an
/// account of the first, given to an account of each other one (split at
/// random over two), adding up to nothing.
fn legs(parts: &[String], rng: &mut Rng) -> Vec<(String, String, i64)> {
    let amount = 2 + rng.below(49) as i64;
    let mut legs = vec![(
        parts[0].clone(),
        account(rng.below(ACCOUNTS as u64) as usize),
        -amount,
    )];
    let mut left = amount;
    for (i, c) in parts.iter().enumerate().skip(1) {
        let give = if i + 1 == parts.len() {
            left
        } else {
            1 + rng.below(left as u64 - 1) as i64
        };
        left -= give;
        legs.push((
            c.clone(),
            account(rng.below(ACCOUNTS as u64) as usize),
            give,
        ));
    }
    legs
}

/// A transfer of the `txn` mode by [`Store::transact`] over two or three
/// customers: in each, the account changed, its transfer count, and its
/// leg; one time in three it also reads another account of the first
/// customer without writing it (validated at commit by its mark, so a
/// stray update of that row is a conflict, run again). With `doubt`, its
/// first attempt loses the reply of its commit point (the last of its
/// batches: one per table and customer) and the "process" dies at its
/// next read, so the decision cannot be read back (revive it after). Answers what
/// `transact` answered, and how many times it ran the transaction.
async fn txn_transfer(
    store: &Store,
    customers: usize,
    id: &str,
    doubt: Option<&FaultInjector>,
    rng: &mut Rng,
) -> (Result<(), Error>, u32) {
    let parts = distinct_customers(customers, 2 + rng.below(2) as usize, rng);
    let plan = legs(&parts, rng);
    let extra = (rng.below(3) == 0).then(|| {
        let written = &plan[0].1;
        let other = (0..ACCOUNTS)
            .map(account)
            .find(|a| a != written)
            .unwrap_or_default();
        (plan[0].0.clone(), other)
    });
    let mut attempts = 0u32;
    let answer = store
        .transact(|tx| {
            attempts += 1;
            let (plan, extra, id) = (plan.clone(), extra.clone(), id.to_owned());
            let doubt = doubt.filter(|_| attempts == 1).cloned();
            Box::pin(async move {
                let n = plan.len() as i64;
                for (c, a, amount) in &plan {
                    let mut row = tx
                        .get::<Account>(c.as_str(), a.as_str())
                        .await?
                        .ok_or_else(|| missing(c, a))?;
                    row.balance += amount;
                    tx.replace(&row)?;
                    let mut count = tx
                        .get::<Count>(c.as_str(), "transfers")
                        .await?
                        .ok_or_else(|| missing(c, "transfers"))?;
                    count.transfers += 1;
                    tx.replace(&count)?;
                    tx.insert(&Leg {
                        customer: c.clone(),
                        id: id.clone(),
                        account: a.clone(),
                        amount: *amount,
                        legs: n,
                        via: "txn".into(),
                    })?;
                }
                if let Some((c, a)) = &extra {
                    tx.get::<Account>(c.as_str(), a.as_str()).await?;
                }
                if let Some(faults) = doubt {
                    // Accounts, counts and legs: one batch per table and
                    // customer, the commit point's last.
                    let batches = 3 * plan.len() as u64;
                    faults.lose_reply_nth(Some(Op::Batch), batches);
                    faults.die_at_nth(Some(Op::Get), 1);
                }
                println!("PLAN {id} txn {}", plan_text(&plan));
                println!("BEGIN {id}");
                Ok(())
            })
        })
        .await;
    (answer, attempts)
}

/// How long a unit of the `txn` mode waits for its locks.
const UNIT_LOCK_WAIT: Duration = Duration::from_secs(3);

/// A transfer of the `txn` mode by a unit locking two customers
/// ([`Store::lock_many_with_timeout`], [`UNIT_LOCK_WAIT`]): in each, the
/// account changed, its transfer count, and its leg.
async fn unit_transfer(
    store: &Store,
    customers: usize,
    id: &str,
    rng: &mut Rng,
) -> Result<leasehold::lock::CommitReport, Error> {
    let parts = distinct_customers(customers, 2, rng);
    let plan = legs(&parts, rng);
    // A killed worker keeps its customers locked until its leases run
    // out: given up after a while (nothing applied), so the worker goes on
    // with transactions and updates meanwhile.
    let mut unit = store
        .lock_many_with_timeout(parts.iter().map(String::as_str), UNIT_LOCK_WAIT)
        .await?;
    // Every read before the first write, so a read that fails leaves
    // nothing staged.
    let mut rows = Vec::new();
    for (c, a, _) in &plan {
        let row = unit
            .get_in::<Account>(c.as_str(), a.as_str())
            .await?
            .ok_or_else(|| missing(c, a))?;
        let count = unit
            .get_in::<Count>(c.as_str(), "transfers")
            .await?
            .ok_or_else(|| missing(c, "transfers"))?;
        rows.push((row, count));
    }
    for ((c, a, amount), (mut row, mut count)) in plan.iter().zip(rows) {
        row.balance += amount;
        unit.replace(&row)?;
        count.transfers += 1;
        unit.replace(&count)?;
        unit.insert(&Leg {
            customer: c.clone(),
            id: id.to_owned(),
            account: a.clone(),
            amount: *amount,
            legs: plan.len() as i64,
            via: "unit".into(),
        })?;
    }
    println!("PLAN {id} unit {}", plan_text(&plan));
    println!("BEGIN {id}");
    unit.commit().await
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
    /// Commits refused with a conflict (a row changed since it was read),
    /// and index-mode writes refused.
    conflicts: AtomicU64,
    errors: AtomicU64,
    /// Transfer id → what its commit answered (`OK`, or the error's kind).
    answers: Mutex<HashMap<String, String>>,
    /// (customer, account) → the stray writers' [acknowledged, unknown
    /// outcome, failed] updates.
    strays: Mutex<BTreeMap<(String, String), [u64; 3]>>,
    /// Stray writers that printed their counts to the end.
    strays_done: AtomicU64,
    /// Commits answered `Ok` that the next holder finished
    /// (`FinishedBy::Recovery`).
    recovered: AtomicU64,
    /// Commits refused because a stray writer changed a row the unit read.
    refused: AtomicU64,
    /// Big units whose commit was started (`BEGIN id`).
    begun: Mutex<Vec<String>>,
    /// The worker processes inside a big unit's commit (between its
    /// `BEGIN` and its `TXN` line).
    committing: Mutex<HashSet<u32>>,
    /// Conflicts [`Store::transact`] ran again (the `txn` mode).
    retries: AtomicU64,
    /// Transfer id → the primary partition and transaction an `InDoubt`
    /// named (the `txn` mode).
    in_doubt: Mutex<HashMap<String, (String, String)>>,
    /// (customer, account) → the plain updates of the `txn` mode's workers:
    /// [started, acknowledged, failed] (the rest have an unknown outcome:
    /// answered `Transient` or `InDoubt`, or cut by a kill).
    touches: Mutex<BTreeMap<(String, String), [u64; 3]>>,
    /// Transfer id → `via legs` as its worker printed it before its commit
    /// (the `txn` mode), to name the transfers a violation may come from.
    plans: Mutex<HashMap<String, String>>,
    /// Faults the `txn` mode's workers fired: replies lost, and requests
    /// refused while a planned death lasted.
    lost: AtomicU64,
}

/// The modes built on the money transfers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Units within one partition.
    Single,
    /// Units over two partitions.
    Cross,
    /// `Cross`, with stray optimistic writers and pauses past the lease.
    Stray,
    /// Units of 150–300 writes over two or three partitions
    /// ([`big_unit`]), with pauses past the lease.
    Big,
}

impl Mode {
    /// The role a worker process of this mode is started with.
    fn role(self) -> &'static str {
        match self {
            Mode::Single => "single",
            Mode::Cross => "cross",
            Mode::Stray => "cross-stray",
            Mode::Big => "big",
        }
    }

    /// Mode of a worker process started with `role`.
    fn of_role(role: Option<&str>) -> Mode {
        match role {
            Some("cross") => Mode::Cross,
            Some("cross-stray") => Mode::Stray,
            Some("big") => Mode::Big,
            _ => Mode::Single,
        }
    }
}

/// Starts a worker process (`role`: `single`, `cross`, `cross-stray` (a
/// `cross` worker beside stray writers), `big` ([`Mode::role`]) or
/// `stray`, a stray writer) whose standard output feeds `tally`; the task
/// reading it is added to `readers`.
fn spawn_worker(
    prefix: &str,
    customers: usize,
    role: &str,
    tally: &Arc<Tally>,
    readers: &mut Vec<tokio::task::JoinHandle<()>>,
) -> Child {
    let exe = std::env::current_exe().expect("own executable");
    let mut child = Command::new(exe)
        .args(["worker", prefix, &customers.to_string(), role])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn worker");
    let stdout = child.stdout.take().expect("piped stdout");
    let tally = tally.clone();
    let pid = child.id().unwrap_or(0);
    readers.push(tokio::spawn(async move {
        let mut lines = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            match line.as_str() {
                "COMMIT" => tally.commits.fetch_add(1, Ordering::Relaxed),
                "STRAYDONE" => tally.strays_done.fetch_add(1, Ordering::Relaxed),
                l if l.starts_with("CONFLICT") => tally.conflicts.fetch_add(1, Ordering::Relaxed),
                l if l.starts_with("REFUSED") => tally.refused.fetch_add(1, Ordering::Relaxed),
                l if l.starts_with("ERROR") => {
                    eprintln!("worker {pid}: {l}");
                    tally.errors.fetch_add(1, Ordering::Relaxed)
                }
                l if l.starts_with("TXN ") => {
                    tally.committing.lock().unwrap().remove(&pid);
                    // `TXN id OK FinishedBy` or `TXN id ERR Kind message`.
                    let mut words = l.split(' ').skip(1);
                    if let (Some(id), Some(answer), Some(detail)) =
                        (words.next(), words.next(), words.next())
                    {
                        let answer = if answer == "OK" { "OK" } else { detail };
                        if answer != "OK" && answer != "Batch" {
                            eprintln!("worker {pid}: {l}");
                        } else if detail == "Recovery" {
                            tally.recovered.fetch_add(1, Ordering::Relaxed);
                        }
                        tally
                            .answers
                            .lock()
                            .unwrap()
                            .insert(id.to_owned(), answer.to_owned());
                    }
                    0
                }
                l if l.starts_with("BEGIN ") => {
                    tally.begun.lock().unwrap().push(l[6..].to_owned());
                    tally.committing.lock().unwrap().insert(pid);
                    0
                }
                l if l.starts_with("RETRIES ") => {
                    let n = l[8..].parse::<u64>().expect("a count");
                    tally.retries.fetch_add(n, Ordering::Relaxed)
                }
                l if l.starts_with("LOST ") => {
                    let n = l[5..].parse::<u64>().expect("a count");
                    tally.lost.fetch_add(n, Ordering::Relaxed)
                }
                l if l.starts_with("PLAN ") => {
                    if let Some((id, plan)) = l[5..].split_once(' ') {
                        tally
                            .plans
                            .lock()
                            .unwrap()
                            .insert(id.to_owned(), plan.to_owned());
                    }
                    0
                }
                l if l.starts_with("INDOUBT ") => {
                    let words: Vec<&str> = l.split(' ').collect();
                    if let [_, id, primary, txn] = words[..] {
                        tally
                            .in_doubt
                            .lock()
                            .unwrap()
                            .insert(id.to_owned(), (primary.to_owned(), txn.to_owned()));
                    }
                    0
                }
                l if l.starts_with("TOUCH ") || l.starts_with("TOUCHED ") => {
                    let words: Vec<&str> = l.split(' ').collect();
                    let slot = match words[0] {
                        "TOUCH" => 0,
                        _ if words.get(3) == Some(&"OK") => 1,
                        _ if words.get(3) == Some(&"FAILED") => 2,
                        _ => 3,
                    };
                    if slot > 1 {
                        eprintln!("worker {pid}: {l}");
                    }
                    if let (Some(c), Some(a), true) = (words.get(1), words.get(2), slot < 3) {
                        let mut touches = tally.touches.lock().unwrap();
                        touches
                            .entry(((*c).to_owned(), (*a).to_owned()))
                            .or_default()[slot] += 1;
                    }
                    0
                }
                l if l.starts_with("STRAYERR") => {
                    eprintln!("stray {pid}: {l}");
                    0
                }
                l if l.starts_with("STRAY ") => {
                    let words: Vec<&str> = l.split(' ').collect();
                    if let [_, c, a, ok, unknown, failed] = words[..] {
                        let mut strays = tally.strays.lock().unwrap();
                        let slot = strays.entry((c.to_owned(), a.to_owned())).or_default();
                        for (i, n) in [ok, unknown, failed].into_iter().enumerate() {
                            slot[i] += n.parse::<u64>().expect("a count");
                        }
                    }
                    0
                }
                _ => 0,
            };
        }
    }));
    child
}

/// The next worker to kill or pause, of `candidates` (indexes into
/// `workers`): at random, except in the big mode (`aim`), where it is one
/// inside a commit when there is one within 1.5 s, hit at a random moment
/// within the next 600 ms when it is still inside, so that kills and
/// pauses land in the marking, commit point and finishing rounds rather
/// than in the waits for locks.
async fn pick(
    candidates: &[usize],
    workers: &[Child],
    tally: &Tally,
    aim: bool,
    rng: &mut Rng,
) -> usize {
    let inside = || {
        let committing = tally.committing.lock().unwrap().clone();
        candidates
            .iter()
            .copied()
            .filter(|&i| workers[i].id().is_some_and(|pid| committing.contains(&pid)))
            .collect::<Vec<usize>>()
    };
    // Up to 1.5 s for a worker to be inside a commit, still inside it at
    // the moment drawn.
    for _ in 0..if aim { 30 } else { 0 } {
        if !inside().is_empty() {
            tokio::time::sleep(Duration::from_millis(rng.below(601))).await;
            let still = inside();
            if !still.is_empty() {
                return still[rng.below(still.len() as u64) as usize];
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    candidates[rng.below(candidates.len() as u64) as usize]
}

/// Sends `signal` (`STOP`, `CONT`) to `child`.
async fn signal(child: &Child, signal: &str) {
    let Some(pid) = child.id() else {
        return;
    };
    let sent = Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .await;
    if !sent.as_ref().is_ok_and(|s| s.success()) {
        eprintln!("torture: kill -{signal} {pid} failed: {sent:?}");
    }
}

async fn controller(args: &Args, mode: Mode) -> Result<u64, Error> {
    let cross = matches!(mode, Mode::Cross | Mode::Stray);
    let stray = mode == Mode::Stray;
    let big = mode == Mode::Big;
    // The modes that also stop workers past their leases.
    let pausing = stray || big;
    let seconds = match mode {
        Mode::Single => args.seconds,
        Mode::Cross => args.cross_seconds,
        Mode::Stray => args.stray_seconds,
        Mode::Big => args.big_seconds,
    };
    let customers = match mode {
        Mode::Big => args.big_customers,
        _ => args.customers,
    };
    let prefix = format!("tort{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let store = store(&prefix, Duration::ZERO)?;
    for c in 0..customers {
        for a in 0..ACCOUNTS {
            store
                .table::<Account>()
                .upsert(Account {
                    customer: customer(c),
                    name: account(a),
                    balance: OPENING_BALANCE,
                    touched: 0,
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
        match mode {
            Mode::Single => "single-partition",
            Mode::Cross => "cross-partition",
            Mode::Stray => "cross-partition with stray optimistic writers",
            Mode::Big => "big units over 2–3 partitions",
        },
        args.workers,
        seconds,
        customers,
        args.kill_min_ms,
        args.kill_max_ms,
        args.batch_latency_ms
    );
    if stray {
        println!(
            "torture (stray): {} stray writers (update_with every 100–300 ms), one worker in four events paused with SIGSTOP for {}–{} s (lock lease {} s)",
            args.stray_writers,
            LOCK_LEASE.as_secs() + 1,
            LOCK_LEASE.as_secs() + 5,
            LOCK_LEASE.as_secs()
        );
    }
    if big {
        println!(
            "torture (big): units of {}–{} writes, one partition with more than {GROUP_LIMIT} rows in a table, {} ms before every worker transaction; one worker in four events paused with SIGSTOP for {}–{} s (lock lease {} s)",
            BIG_WRITES.0,
            BIG_WRITES.1,
            args.batch_latency_ms.max(args.big_latency_ms),
            LOCK_LEASE.as_secs() + 1,
            LOCK_LEASE.as_secs() + 5,
            LOCK_LEASE.as_secs()
        );
    }
    let sweeper = Sweeper::start(&prefix)?;
    let tally = Arc::new(Tally::default());
    let mut readers = Vec::new();
    let role = mode.role();
    let mut workers: Vec<Child> = (0..args.workers)
        .map(|_| spawn_worker(&prefix, customers, role, &tally, &mut readers))
        .collect();
    let mut strays: Vec<Child> = if stray {
        (0..args.stray_writers)
            .map(|_| spawn_worker(&prefix, customers, "stray", &tally, &mut readers))
            .collect()
    } else {
        Vec::new()
    };
    let mut rng = Rng::seeded(11);
    let end = Instant::now() + Duration::from_secs(seconds);
    let mut kills = 0u64;
    let mut pauses = 0u64;
    // The worker stopped with SIGSTOP, and when it is to go on.
    let mut paused: Option<(usize, Instant)> = None;
    let gap = |rng: &mut Rng| {
        Duration::from_millis(
            args.kill_min_ms + rng.below(args.kill_max_ms.saturating_sub(args.kill_min_ms) + 1),
        )
    };
    let mut next_event = Instant::now() + gap(&mut rng);
    loop {
        let mut wake = next_event.min(end);
        if let Some((_, until)) = paused {
            wake = wake.min(until);
        }
        tokio::time::sleep(wake.saturating_duration_since(Instant::now())).await;
        let now = Instant::now();
        if let Some((slot, until)) = paused
            && now >= until
        {
            signal(&workers[slot], "CONT").await;
            paused = None;
        }
        if now >= end {
            break;
        }
        if now < next_event {
            continue;
        }
        next_event = now + gap(&mut rng);
        // In the stray and big modes the first event, and one in four
        // after it, stops a worker past its leases (one at a time).
        if pausing && paused.is_none() && (pauses == 0 || rng.below(4) == 0) {
            let all: Vec<usize> = (0..workers.len()).collect();
            let victim = pick(&all, &workers, &tally, big, &mut rng).await;
            signal(&workers[victim], "STOP").await;
            let pause = LOCK_LEASE + Duration::from_millis(1_000 + rng.below(4_001));
            paused = Some((victim, now + pause));
            pauses += 1;
            continue;
        }
        let running: Vec<usize> = (0..workers.len())
            .filter(|&i| paused.is_none_or(|(slot, _)| slot != i))
            .collect();
        let victim = pick(&running, &workers, &tally, big, &mut rng).await;
        let _ = workers[victim].start_kill();
        let _ = workers[victim].wait().await;
        kills += 1;
        workers[victim] = spawn_worker(&prefix, customers, role, &tally, &mut readers);
    }
    // A pause still running lasts its full length.
    if let Some((slot, until)) = paused.take() {
        tokio::time::sleep(until.saturating_duration_since(Instant::now())).await;
        signal(&workers[slot], "CONT").await;
    }
    // Ask the survivors (and the stray writers) to stop after their
    // current unit (update).
    for w in workers.iter_mut().chain(&mut strays) {
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
    for w in &mut strays {
        if tokio::time::timeout(Duration::from_secs(90), w.wait())
            .await
            .is_err()
        {
            eprintln!("torture: a stray writer did not stop; killed");
            let _ = w.start_kill();
        }
    }
    // Every line the processes printed is counted before checking.
    for reader in readers {
        let _ = tokio::time::timeout(Duration::from_secs(10), reader).await;
    }
    let swept_violations = sweeper.stop().await;

    // The checker: every partition, under its lock (rolling forward), read
    // through the unit (which withdraws the marks of commits never decided
    // on the partitions it holds).
    let checker = store.clone();
    let mut violations = swept_violations;
    let mut stuck = 0u64;
    let mut ledger_total = 0usize;
    let mut money = 0i64;
    // Transfer id → (debits, credits, amounts agree), in cross mode.
    let mut sides: HashMap<String, (u32, u32, Option<i64>, bool)> = HashMap::new();
    // Unit id → (moves found, moves it wrote, their sum, every move names
    // the same number), in the big mode.
    let mut units: HashMap<String, (i64, i64, i64, bool)> = HashMap::new();
    // (customer, account) → its final `touched`.
    let mut touched: BTreeMap<(String, String), i64> = BTreeMap::new();
    for c in 0..customers {
        let c = customer(c);
        let mut unit = match checker.lock(&c).await {
            Ok(unit) => unit,
            Err(e) => {
                println!(
                    "VIOLATION {c}: its lock cannot be taken (a stuck partition): {:?}: {e}",
                    e.kind()
                );
                stuck += 1;
                violations += 1;
                continue;
            }
        };
        let read = async {
            let accounts = unit.query::<Account>().partition(c.as_str()).all().await?;
            let ledger = unit.query::<Entry>().partition(c.as_str()).all().await?;
            let moves = if big {
                unit.query::<Move>().partition(c.as_str()).all().await?
            } else {
                Vec::new()
            };
            let count = unit
                .get::<Count>("transfers")
                .await?
                .map(|n| n.transfers)
                .unwrap_or(-1);
            Ok::<_, Error>((accounts, ledger, moves, count))
        }
        .await;
        unit.abandon().await?;
        let (accounts, ledger, moves, count) = match read {
            Ok(read) => read,
            Err(e) => {
                println!(
                    "VIOLATION {c}: reading it under its lock failed: {:?}: {e}",
                    e.kind()
                );
                stuck += 1;
                violations += 1;
                continue;
            }
        };
        ledger_total += ledger.len();
        let total: i64 = accounts.iter().map(|a| a.balance).sum();
        money += total;
        for a in &accounts {
            touched.insert((c.clone(), a.name.clone()), a.touched);
        }
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
        for m in &moves {
            let found = units.entry(m.unit.clone()).or_insert((0, m.moves, 0, true));
            found.0 += 1;
            found.2 += m.amount;
            if found.1 != m.moves {
                found.3 = false;
            }
        }
        if mode == Mode::Single && total != OPENING_BALANCE * ACCOUNTS as i64 {
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
        for m in &moves {
            *expected.entry(m.account.clone()).or_default() += m.amount;
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
        if count != (ledger.len() + moves.len()) as i64 {
            println!(
                "VIOLATION {c}: transfer count {count} but {} ledger entries and {} moves",
                ledger.len(),
                moves.len()
            );
            violations += 1;
        }
    }
    let expected_money = OPENING_BALANCE * (ACCOUNTS * customers) as i64;
    if stuck == 0 && money != expected_money {
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
    for (id, (found, wrote, sum, agree)) in &units {
        if found != wrote || *sum != 0 || !agree {
            println!(
                "VIOLATION unit {id}: {found} of its {wrote} moves, adding up to {sum}, all naming the same count: {agree} (a partial commit)"
            );
            violations += 1;
        }
    }
    // Every commit's answer against the ledger: `Ok` is stored, an error
    // other than `InDoubt` is not.
    let (mut answered_ok, mut answered_err, mut in_doubt) = (0u64, 0u64, 0u64);
    if cross || big {
        let answers = tally.answers.lock().unwrap().clone();
        let mut answers: Vec<(String, String)> = answers.into_iter().collect();
        answers.sort();
        for (id, answer) in &answers {
            let stored = sides.contains_key(id) || units.contains_key(id);
            match answer.as_str() {
                "OK" => {
                    answered_ok += 1;
                    if !stored && stuck == 0 {
                        println!(
                            "VIOLATION transfer {id}: its commit answered Ok, but the ledger does not hold it"
                        );
                        violations += 1;
                    }
                }
                "InDoubt" => in_doubt += 1,
                kind => {
                    answered_err += 1;
                    if stored {
                        println!(
                            "VIOLATION transfer {id}: its commit answered {kind} (nothing applied), but the ledger holds it"
                        );
                        violations += 1;
                    }
                }
            }
        }
    }
    // Every acknowledged stray update is kept, and no more are applied than
    // were acknowledged or left unknown.
    let (mut stray_ok, mut stray_unknown, mut stray_failed) = (0u64, 0u64, 0u64);
    if stray {
        let counts = tally.strays.lock().unwrap().clone();
        for [ok, unknown, failed] in counts.values() {
            stray_ok += ok;
            stray_unknown += unknown;
            stray_failed += failed;
        }
        for (c, a) in counts.keys() {
            if !touched.contains_key(&(c.clone(), a.clone())) && stuck == 0 {
                println!("VIOLATION {c}/{a}: the stray writers updated it, but it is gone");
                violations += 1;
            }
        }
        for ((c, a), t) in &touched {
            let [ok, unknown, failed] = counts
                .get(&(c.clone(), a.clone()))
                .copied()
                .unwrap_or_default();
            if *t < ok as i64 || *t > (ok + unknown) as i64 {
                println!(
                    "VIOLATION {c}/{a}: touched {t}, but the stray writers had {ok} updates acknowledged, {unknown} of unknown outcome, {failed} failed"
                );
                violations += 1;
            }
        }
        let done = tally.strays_done.load(Ordering::Relaxed);
        if done != args.stray_writers as u64 {
            println!(
                "VIOLATION: {done} of {} stray writers reported their counts",
                args.stray_writers
            );
            violations += 1;
        }
    }
    if cross {
        ledger_total /= 2;
    }
    if big {
        ledger_total = units.len();
    }
    let commits_reported = tally.commits.load(Ordering::Relaxed);
    println!(
        "units committed: {ledger_total} (reported by workers before dying: {commits_reported}), kills: {kills}, conflicts: {}, worker errors: {}, violations: {violations}",
        tally.conflicts.load(Ordering::Relaxed),
        tally.errors.load(Ordering::Relaxed)
    );
    if big {
        let (committed, withdrawn, after_images) = decision_rows(&prefix).await?;
        let moves: i64 = units.values().map(|u| u.0).sum();
        // Commits started whose worker never printed an answer: killed (or
        // stopped for good) inside `commit`.
        let answers = tally.answers.lock().unwrap().clone();
        let (mut cut_whole, mut cut_absent) = (0u64, 0u64);
        for id in tally.begun.lock().unwrap().iter() {
            if !answers.contains_key(id) {
                if units.contains_key(id) {
                    cut_whole += 1;
                } else {
                    cut_absent += 1;
                }
            }
        }
        println!(
            "big units: {moves} moves in {ledger_total} units; commits cut by a kill: {} ({cut_whole} found whole, {cut_absent} absent); decision rows left: {committed} committed (writer gone after its commit point, rows rolled forward by readers), {withdrawn} withdrawn (by readers, writer dead or paused before it); after-image rows left: {after_images}; pauses past the lease: {pauses}",
            cut_whole + cut_absent
        );
    }
    if cross || big {
        println!(
            "commit answers checked: {answered_ok} Ok ({} finished by recovery), {answered_err} definite errors, {in_doubt} in doubt; stuck partitions: {stuck}",
            tally.recovered.load(Ordering::Relaxed)
        );
    }
    if stray {
        println!(
            "pauses past the lease: {pauses}; commits refused for a row a stray writer changed: {}; stray writes acknowledged: {stray_ok}, outcome unknown: {stray_unknown}, failed: {stray_failed}",
            tally.refused.load(Ordering::Relaxed)
        );
    }
    if ledger_total == 0 {
        println!("VIOLATION: no unit was committed");
        violations += 1;
    }
    if stray && stray_ok == 0 {
        println!("VIOLATION: no stray write was acknowledged");
        violations += 1;
    }
    if stuck == 0 {
        violations += last_sweep(&store, &prefix).await?;
    }
    Ok(violations)
}

/// The `txn` mode: transactions ([`txn_transfer`]), locked units
/// ([`unit_transfer`]) and plain updates of `touched` on the same rows
/// ([`txn_worker`]), with kills and pauses aimed at workers inside a
/// commit, and lost replies. Answers the violations found.
async fn txn_controller(args: &Args) -> Result<u64, Error> {
    let customers = args.customers;
    let prefix = format!("tort{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let store = store(&prefix, Duration::ZERO)?;
    for c in 0..customers {
        for a in 0..ACCOUNTS {
            store
                .table::<Account>()
                .upsert(Account {
                    customer: customer(c),
                    name: account(a),
                    balance: OPENING_BALANCE,
                    touched: 0,
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
    let ttl = leasehold::txn::TransactionOptions::DEFAULT_TIME_TO_LIVE;
    let pause_min = ttl + Duration::from_millis(500);
    let pause_max = Duration::from_millis(args.txn_pause_max_ms).max(pause_min);
    println!(
        "torture (txn): {} workers, {} s, {customers} customers × {ACCOUNTS} accounts, transactions over 2–3 customers, units over 2 and plain updates on the same rows, kills every {}–{} ms (one event in three a SIGSTOP for {:?}–{:?}, past the {:?} time-to-live of a transaction's marks), one operation in four with a lost reply planned, {} ms before every worker transaction",
        args.workers,
        args.txn_seconds,
        args.kill_min_ms,
        args.kill_max_ms,
        pause_min,
        pause_max,
        ttl,
        args.batch_latency_ms.max(args.txn_latency_ms)
    );
    let sweeper = Sweeper::start(&prefix)?;
    let tally = Arc::new(Tally::default());
    let mut readers = Vec::new();
    let mut workers: Vec<Child> = (0..args.workers)
        .map(|_| spawn_worker(&prefix, customers, "txn", &tally, &mut readers))
        .collect();
    let mut rng = Rng::seeded(29);
    let end = Instant::now() + Duration::from_secs(args.txn_seconds);
    let (mut kills, mut pauses) = (0u64, 0u64);
    let mut paused: Option<(usize, Instant)> = None;
    let gap = |rng: &mut Rng| {
        Duration::from_millis(
            args.kill_min_ms + rng.below(args.kill_max_ms.saturating_sub(args.kill_min_ms) + 1),
        )
    };
    let mut next_event = Instant::now() + gap(&mut rng);
    loop {
        let mut wake = next_event.min(end);
        if let Some((_, until)) = paused {
            wake = wake.min(until);
        }
        tokio::time::sleep(wake.saturating_duration_since(Instant::now())).await;
        let now = Instant::now();
        if let Some((slot, until)) = paused
            && now >= until
        {
            signal(&workers[slot], "CONT").await;
            paused = None;
        }
        if now >= end {
            break;
        }
        if now < next_event {
            continue;
        }
        next_event = now + gap(&mut rng);
        if paused.is_none() && (pauses == 0 || rng.below(3) == 0) {
            let all: Vec<usize> = (0..workers.len()).collect();
            let victim = pick(&all, &workers, &tally, true, &mut rng).await;
            signal(&workers[victim], "STOP").await;
            let spread = (pause_max - pause_min).as_millis() as u64;
            let pause = pause_min + Duration::from_millis(rng.below(spread + 1));
            paused = Some((victim, Instant::now() + pause));
            pauses += 1;
            continue;
        }
        let running: Vec<usize> = (0..workers.len())
            .filter(|&i| paused.is_none_or(|(slot, _)| slot != i))
            .collect();
        let victim = pick(&running, &workers, &tally, true, &mut rng).await;
        let _ = workers[victim].start_kill();
        let _ = workers[victim].wait().await;
        kills += 1;
        workers[victim] = spawn_worker(&prefix, customers, "txn", &tally, &mut readers);
    }
    if let Some((slot, until)) = paused.take() {
        tokio::time::sleep(until.saturating_duration_since(Instant::now())).await;
        signal(&workers[slot], "CONT").await;
    }
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
    for reader in readers {
        let _ = tokio::time::timeout(Duration::from_secs(10), reader).await;
    }
    let swept_violations = sweeper.stop().await;

    // The checker: every customer under its lock (no stuck partition),
    // reading every row of it, which finishes or withdraws whatever marks
    // the killed, paused or cut-off writers left.
    let mut violations = swept_violations;
    let mut stuck = 0u64;
    let mut money = 0i64;
    // Transfer id → (legs found, legs it wrote, their sum, all agree on
    // the count and the way, the way).
    let mut transfers: HashMap<String, (i64, i64, i64, bool, String)> = HashMap::new();
    let mut touched: BTreeMap<(String, String), i64> = BTreeMap::new();
    // Customers whose balances or count disagree with their legs.
    let mut suspect: HashSet<String> = HashSet::new();
    for c in (0..customers).map(customer) {
        let mut unit = match store.lock(&c).await {
            Ok(unit) => unit,
            Err(e) => {
                println!(
                    "VIOLATION {c}: its lock cannot be taken (a stuck partition): {:?}: {e}",
                    e.kind()
                );
                stuck += 1;
                violations += 1;
                continue;
            }
        };
        let read = async {
            let accounts = unit.query::<Account>().partition(c.as_str()).all().await?;
            let legs = unit.query::<Leg>().partition(c.as_str()).all().await?;
            let count = unit
                .get::<Count>("transfers")
                .await?
                .map(|n| n.transfers)
                .unwrap_or(-1);
            Ok::<_, Error>((accounts, legs, count))
        }
        .await;
        unit.abandon().await?;
        let (accounts, legs, count) = match read {
            Ok(read) => read,
            Err(e) => {
                println!(
                    "VIOLATION {c}: reading it under its lock failed: {:?}: {e}",
                    e.kind()
                );
                stuck += 1;
                violations += 1;
                continue;
            }
        };
        let mut expected: HashMap<String, i64> = (0..ACCOUNTS)
            .map(|a| (account(a), OPENING_BALANCE))
            .collect();
        for leg in &legs {
            *expected.entry(leg.account.clone()).or_default() += leg.amount;
            let t =
                transfers
                    .entry(leg.id.clone())
                    .or_insert((0, leg.legs, 0, true, leg.via.clone()));
            t.0 += 1;
            t.2 += leg.amount;
            if t.1 != leg.legs || t.4 != leg.via {
                t.3 = false;
            }
        }
        for a in &accounts {
            money += a.balance;
            touched.insert((c.clone(), a.name.clone()), a.touched);
            if expected.get(&a.name) != Some(&a.balance) {
                println!(
                    "VIOLATION {c}/{}: balance {} but its legs say {:?}",
                    a.name,
                    a.balance,
                    expected.get(&a.name)
                );
                suspect.insert(c.clone());
                violations += 1;
            }
        }
        if accounts.len() != ACCOUNTS {
            println!("VIOLATION {c}: {} accounts", accounts.len());
            violations += 1;
        }
        if count != legs.len() as i64 {
            println!(
                "VIOLATION {c}: transfer count {count} but {} legs",
                legs.len()
            );
            suspect.insert(c.clone());
            violations += 1;
        }
    }
    let expected_money = OPENING_BALANCE * (ACCOUNTS * customers) as i64;
    if stuck == 0 && money != expected_money {
        println!("VIOLATION: {money} in all accounts, expected {expected_money}");
        violations += 1;
    }
    for (id, (found, wrote, sum, agree, via)) in &transfers {
        if found != wrote || *sum != 0 || !agree {
            println!(
                "VIOLATION transfer {id} ({via}): {found} of its {wrote} legs, adding up to {sum}, all naming the same count and way: {agree} (a partial commit)"
            );
            violations += 1;
        }
    }
    // No row left marked once everything was read, and what the commits
    // left behind (read raw, before any `commit_outcome` below withdraws
    // a transaction: the withdrawn decision rows are the readers').
    let left = leftovers(&prefix).await?;
    for row in &left.marked {
        println!(
            "VIOLATION: row {row} is still marked after the checker read everything (a stuck row)"
        );
        violations += 1;
    }
    // Every answer against the ledger: `Ok` is stored, a definite error is
    // not, and `InDoubt` is what `commit_outcome` then says.
    let answers = tally.answers.lock().unwrap().clone();
    let in_doubt = tally.in_doubt.lock().unwrap().clone();
    let (mut answered_ok, mut answered_err) = (0u64, 0u64);
    let (mut doubt_applied, mut doubt_not, mut doubt_unnamed) = (0u64, 0u64, 0u64);
    let mut answers: Vec<(String, String)> = answers.into_iter().collect();
    answers.sort();
    for (id, answer) in &answers {
        let stored = transfers.contains_key(id);
        match answer.as_str() {
            "OK" => {
                answered_ok += 1;
                if !stored && stuck == 0 {
                    println!(
                        "VIOLATION transfer {id}: its commit answered Ok, but no leg of it is stored"
                    );
                    violations += 1;
                }
            }
            "InDoubt" => {
                let Some((primary, txn)) = in_doubt.get(id) else {
                    doubt_unnamed += 1;
                    continue;
                };
                let outcome = store.commit_outcome(primary.as_str(), txn).await?;
                let applied = outcome == leasehold::lock::CommitOutcome::Applied;
                if applied {
                    doubt_applied += 1;
                } else {
                    doubt_not += 1;
                }
                if applied != stored && stuck == 0 {
                    println!(
                        "VIOLATION transfer {id}: in doubt, commit_outcome({primary}, {txn}) says {outcome:?}, but its legs are {}",
                        if stored { "stored" } else { "absent" }
                    );
                    violations += 1;
                }
            }
            kind => {
                answered_err += 1;
                if stored {
                    println!(
                        "VIOLATION transfer {id}: answered {kind} (nothing applied), but its legs are stored"
                    );
                    violations += 1;
                }
            }
        }
    }
    // A partial commit that left no leg shows up only as balances or a
    // count off: name the transfers over those customers that left no leg,
    // with what they answered.
    let plans = tally.plans.lock().unwrap().clone();
    let answer_of: HashMap<&String, &String> = answers.iter().map(|(id, a)| (id, a)).collect();
    let mut plans: Vec<(&String, &String)> = plans.iter().collect();
    plans.sort();
    for (id, plan) in plans {
        let touches = plan
            .split(' ')
            .skip(1)
            .any(|leg| suspect.iter().any(|c| leg.starts_with(&format!("{c}/"))));
        if touches && !transfers.contains_key(id) {
            println!(
                "  transfer {id} ({plan}) left no leg; it answered {}{}",
                answer_of.get(id).map_or("nothing (cut)", |a| a.as_str()),
                in_doubt
                    .get(id)
                    .map(|(p, t)| format!(", in doubt: primary {p}, transaction {t}"))
                    .unwrap_or_default()
            );
        }
    }
    // Transfers whose commit a kill cut before any answer: whole or absent
    // (checked above), counted here.
    let (mut cut_whole, mut cut_absent) = (0u64, 0u64);
    let begun: HashSet<String> = tally.begun.lock().unwrap().iter().cloned().collect();
    let answered: HashSet<&String> = answers.iter().map(|(id, _)| id).collect();
    for id in &begun {
        if !answered.contains(id) {
            if transfers.contains_key(id) {
                cut_whole += 1;
            } else {
                cut_absent += 1;
            }
        }
    }
    // Every acknowledged plain update is kept, and none applied that was
    // said to have failed.
    let touches = tally.touches.lock().unwrap().clone();
    let (mut touch_ok, mut touch_unknown, mut touch_failed) = (0u64, 0u64, 0u64);
    for ((c, a), t) in &touched {
        let [tried, ok, failed] = touches
            .get(&(c.clone(), a.clone()))
            .copied()
            .unwrap_or_default();
        touch_ok += ok;
        touch_failed += failed;
        touch_unknown += tried.saturating_sub(ok + failed);
        if *t < ok as i64 || *t > tried.saturating_sub(failed) as i64 {
            println!(
                "VIOLATION {c}/{a}: touched {t}, but {tried} plain updates were started, {ok} acknowledged, {failed} failed"
            );
            violations += 1;
        }
    }
    let committed = |way: &str| {
        transfers
            .values()
            .filter(|t| t.4 == way && t.0 == t.1)
            .count()
    };
    let (txns, units) = (committed("txn"), committed("unit"));
    println!(
        "transactions committed: {txns}, units committed: {units}, conflicts retried by transact: {}, kills: {kills}, pauses past the time-to-live: {pauses}, faults fired (replies lost, requests refused after a planned death): {}, worker errors: {}, violations: {violations}",
        tally.retries.load(Ordering::Relaxed),
        tally.lost.load(Ordering::Relaxed),
        tally.errors.load(Ordering::Relaxed)
    );
    println!(
        "commit answers checked: {answered_ok} Ok ({} finished by recovery), {answered_err} definite errors, {} in doubt ({doubt_applied} applied, {doubt_not} not applied by commit_outcome, {doubt_unnamed} naming no transaction); commits cut by a kill: {} ({cut_whole} found whole, {cut_absent} absent)",
        tally.recovered.load(Ordering::Relaxed),
        doubt_applied + doubt_not + doubt_unnamed,
        cut_whole + cut_absent
    );
    println!(
        "decision rows left: {} committed (writer gone after its commit point), {} withdrawn by readers; after-image rows left: {}; rows left marked (stuck): {}; stuck partitions: {stuck}; plain updates acknowledged: {touch_ok}, outcome unknown: {touch_unknown}, failed: {touch_failed}",
        left.committed,
        left.withdrawn,
        left.after_images,
        left.marked.len()
    );
    if txns == 0 {
        println!("VIOLATION: no transaction was committed");
        violations += 1;
    }
    // Units wait for locks that killed workers hold until their leases run
    // out, so a short run may commit none: a note, not a failure.
    if units == 0 {
        println!("torture (txn): no unit was committed in this run");
    }
    if touch_ok == 0 {
        println!("VIOLATION: no plain update was acknowledged");
        violations += 1;
    }
    if stuck == 0 {
        violations += last_sweep(&store, &prefix).await?;
    }
    Ok(violations)
}

/// What commits left in the tables of a store, read raw
/// ([`leftovers`]).
struct Leftovers {
    /// Decision rows saying `committed`.
    committed: u64,
    /// Decision rows saying `withdrawn`.
    withdrawn: u64,
    /// After-image rows.
    after_images: u64,
    /// Rows still carrying a mark (`_lhTxn`): `table/pk/rk mark`.
    marked: Vec<String>,
}

/// The commit leftovers of the tables with prefix `prefix`, read raw: the
/// decision rows and after-image rows [`decision_rows`] counts, and every
/// row that still carries a mark.
async fn leftovers(prefix: &str) -> Result<Leftovers, Error> {
    use leasehold::backend::{QuerySpec, TableBackend as _};
    let backend = AzureBackend::builder()
        .connection_string(&connection_string())?
        .build()?;
    let (committed, withdrawn, after_images) = decision_rows(prefix).await?;
    let mut marked = Vec::new();
    for table in backend.list_tables().await? {
        if !table.as_str().starts_with(prefix) {
            continue;
        }
        let mut spec = QuerySpec::default();
        loop {
            let page = backend.query(&table, &spec).await?;
            for row in &page.entities {
                if let Some(mark) = row.data.properties.get("_lhTxn") {
                    marked.push(format!(
                        "{}/{}/{} {mark:?}",
                        table.as_str(),
                        row.data.partition_key.as_str(),
                        row.data.row_key.as_str()
                    ));
                }
            }
            match page.continuation {
                Some(next) => spec.continuation = Some(next),
                None => break,
            }
        }
    }
    Ok(Leftovers {
        committed,
        withdrawn,
        after_images,
        marked,
    })
}

/// The commit leftovers in the tables of the store with table prefix
/// `prefix`, read raw (past the store, which hides them): decision rows
/// (`_lhCommit.<id>`) that say `committed` and `withdrawn`, and after-image
/// rows (`_lhCommit.<id>.a<n>.<i>`). A unit that ends well deletes its
/// decision row with its lock releases, so a committed one left is a commit
/// whose writer died after its commit point (readers rolled its marked rows
/// forward), and a withdrawn one a commit that readers withdrew (its writer
/// dead or paused before its commit point). The sweeper beside the run
/// removes a committed one only once its marks are all gone, and a commit's
/// inserted rows keep theirs until the checker reads them (see the module
/// docs), so the committed ones counted after the checker's reads are
/// still those of writers that died after their commit point.
async fn decision_rows(prefix: &str) -> Result<(u64, u64, u64), Error> {
    use leasehold::backend::{QuerySpec, TableBackend as _};
    const ROW_PREFIX: &str = "_lhCommit.";
    let backend = AzureBackend::builder()
        .connection_string(&connection_string())?
        .build()?;
    let (mut committed, mut withdrawn, mut after_images) = (0, 0, 0);
    for table in backend.list_tables().await? {
        if !table.as_str().starts_with(prefix) {
            continue;
        }
        let mut spec = QuerySpec {
            select: Some(vec!["_lhDecision".into()]),
            ..QuerySpec::default()
        };
        loop {
            let page = backend.query(&table, &spec).await?;
            for row in &page.entities {
                let Some(rest) = row.data.row_key.as_str().strip_prefix(ROW_PREFIX) else {
                    continue;
                };
                if rest.contains('.') {
                    after_images += 1;
                    continue;
                }
                match row.data.properties.get("_lhDecision") {
                    Some(leasehold::entity::Value::String(s)) if s == "committed" => committed += 1,
                    Some(leasehold::entity::Value::String(s)) if s == "withdrawn" => withdrawn += 1,
                    other => println!("torture: decision row {rest} says {other:?}"),
                }
            }
            match page.continuation {
                Some(next) => spec.continuation = Some(next),
                None => break,
            }
        }
    }
    Ok((committed, withdrawn, after_images))
}

/// A customer of the index mode: its e-mail is unique, its group indexed.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "TortureCustomers")]
struct Customer {
    #[entity(partition_key)]
    region: String,
    #[entity(row_key)]
    id: String,
    #[entity(unique)]
    email: String,
    #[entity(index)]
    group: String,
}

const REGIONS: u64 = 6;
const IDS: u64 = 12;
const EMAILS: u64 = 6;
const GROUPS: u64 = 12;

fn email(i: u64) -> String {
    format!("user{i}@example.com")
}

/// Every partition the index mode locks: the regions.
fn index_mode_partitions() -> Result<Vec<leasehold::PartitionKey>, Error> {
    (0..REGIONS)
        .map(|r| leasehold::PartitionKey::new(format!("r{r}")))
        .collect()
}

/// One index-mode worker: registers, changes e-mails, moves and deletes
/// customers until its standard input closes.
async fn index_worker(prefix: &str) -> Result<(), Error> {
    let latency = Duration::from_millis(settings().batch_latency_ms);
    let store = store(prefix, latency)?;
    let t = store.table::<Customer>();
    let mut rng = Rng::seeded(13);
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
        let region = format!("r{}", rng.below(REGIONS));
        let id = format!("u{}", rng.below(IDS));
        let new_email = email(rng.below(EMAILS));
        let group = format!("g{}", rng.below(GROUPS));
        let outcome: Result<&str, Error> = async {
            match rng.below(4) {
                0 => {
                    t.insert(Customer {
                        region: region.clone(),
                        id: id.clone(),
                        email: new_email,
                        group,
                    })
                    .await?;
                }
                1 => {
                    let Some(mut c) = t.get(&region, &id).await? else {
                        return Ok("SKIP");
                    };
                    c.email = new_email;
                    c.group = group;
                    t.replace(&c).await?;
                }
                2 => {
                    // Move the customer to another region, keeping its
                    // e-mail: one unit over both regions (no index lock).
                    let Some(c) = t.get(&region, &id).await? else {
                        return Ok("SKIP");
                    };
                    let to = format!(
                        "r{}",
                        (rng.below(REGIONS - 1) + 1 + region[1..].parse::<u64>().unwrap_or(0))
                            % REGIONS
                    );
                    let moved = Customer {
                        region: to.clone(),
                        ..c.entity().clone()
                    };
                    let mut unit = store.lock_many([region.as_str(), to.as_str()]).await?;
                    let Some(now) = unit
                        .get_in::<Customer>(region.as_str(), id.as_str())
                        .await?
                    else {
                        unit.abandon().await?;
                        return Ok("SKIP");
                    };
                    if now.email != moved.email || now.group != moved.group {
                        unit.abandon().await?;
                        return Ok("SKIP");
                    }
                    unit.get_in::<Customer>(to.as_str(), id.as_str()).await?;
                    unit.delete(&now)?;
                    unit.insert(&moved)?;
                    unit.commit().await?;
                }
                _ => {
                    let Some(c) = t.get(&region, &id).await? else {
                        return Ok("SKIP");
                    };
                    t.delete(&c).await?;
                }
            }
            Ok("COMMIT")
        }
        .await;
        match outcome {
            Ok(o) => println!("{o}"),
            Err(e)
                if matches!(
                    e.kind(),
                    leasehold::ErrorKind::AlreadyExists
                        | leasehold::ErrorKind::ValueTaken
                        | leasehold::ErrorKind::Conflict
                        | leasehold::ErrorKind::NotFound
                        | leasehold::ErrorKind::Batch
                ) =>
            {
                println!("REFUSED {e}")
            }
            Err(e) => println!("ERROR {e}"),
        }
    }
    Ok(())
}

async fn index_controller(args: &Args) -> Result<u64, Error> {
    let prefix = format!("tort{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let store = store(&prefix, Duration::ZERO)?;
    println!(
        "torture (indexes): {} workers, {} s, {REGIONS} regions × {IDS} ids, {EMAILS} e-mails, kills every {}–{} ms",
        args.workers, args.index_seconds, args.kill_min_ms, args.kill_max_ms
    );
    let tally = Arc::new(Tally::default());
    let spawn = |tally: &Arc<Tally>| {
        let exe = std::env::current_exe().expect("own executable");
        let mut child = Command::new(exe)
            .args(["worker", prefix.as_str(), "0", "indexes"])
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
                    l if l.starts_with("REFUSED") => {
                        tally.conflicts.fetch_add(1, Ordering::Relaxed)
                    }
                    l if l.starts_with("ERROR") => {
                        eprintln!("worker: {l}");
                        tally.errors.fetch_add(1, Ordering::Relaxed)
                    }
                    _ => 0,
                };
            }
        });
        child
    };
    let sweeper = Sweeper::start(&prefix)?;
    let mut workers: Vec<Child> = (0..args.workers).map(|_| spawn(&tally)).collect();
    let mut rng = Rng::seeded(17);
    let end = Instant::now() + Duration::from_secs(args.index_seconds);
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
        workers[victim] = spawn(&tally);
    }
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
    let swept_violations = sweeper.stop().await;

    // The checker: every partition the workers locked, under its lock, so
    // what killed workers left pending is rolled forward first.
    for key in index_mode_partitions()? {
        let unit = store.lock(key).await?;
        unit.abandon().await?;
    }
    let mut violations = swept_violations;
    let customers = store.table::<Customer>().query().all().await?;
    let mut by_email: HashMap<&str, Vec<String>> = HashMap::new();
    for c in &customers {
        by_email
            .entry(c.email.as_str())
            .or_default()
            .push(format!("{}/{}", c.region, c.id));
    }
    for (email, holders) in &by_email {
        if holders.len() > 1 {
            println!("VIOLATION: {email} is held by {holders:?}");
            violations += 1;
        }
    }
    let c = Customer::columns();
    for i in 0..EMAILS {
        let email = email(i);
        let found = store
            .table::<Customer>()
            .get_by(c.email, email.as_str())
            .await?
            .map(|v| format!("{}/{}", v.region, v.id));
        let held = by_email
            .get(email.as_str())
            .and_then(|h| h.first())
            .cloned();
        if found != held {
            println!("VIOLATION: get_by({email}) answers {found:?}, held by {held:?}");
            violations += 1;
        }
    }
    let report = store.table::<Customer>().verify_indexes().await?;
    let duplicates: Vec<String> = report.duplicates.iter().map(ToString::to_string).collect();
    for line in report
        .missing
        .iter()
        .chain(&report.orphans)
        .chain(&duplicates)
    {
        println!("VIOLATION: {line}");
        violations += 1;
    }
    let commits = tally.commits.load(Ordering::Relaxed);
    println!(
        "writes committed (reported): {commits}, refused: {}, customers: {}, index rows: {} ({} stale), kills: {kills}, worker errors: {}, violations: {violations}",
        tally.conflicts.load(Ordering::Relaxed),
        customers.len(),
        report.index_rows,
        report.stale,
        tally.errors.load(Ordering::Relaxed)
    );
    if commits == 0 {
        println!("VIOLATION: no write was committed");
        violations += 1;
    }
    Ok(violations)
}

/// Prints leasehold's warnings and transport retries (or every event at the
/// level `LEASEHOLD_TORTURE_TRACE` names), each line starting with the
/// process's role and id.
fn trace(role: &str) {
    use tracing::level_filters::LevelFilter;
    // Unset, the transport's retries and lost replies (debug events, printed
    // only when a request fails) and every warning.
    let filter = match std::env::var("LEASEHOLD_TORTURE_TRACE")
        .ok()
        .and_then(|l| l.parse::<tracing::Level>().ok())
    {
        Some(level) => tracing_subscriber::filter::Targets::new().with_target("leasehold", level),
        None => tracing_subscriber::filter::Targets::new()
            .with_target("leasehold::backend::azure", LevelFilter::DEBUG)
            .with_target("leasehold", LevelFilter::WARN),
    };
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let prefix: &'static str = Box::leak(format!("{role} {}: ", std::process::id()).into());
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(move || Prefixed(prefix)),
        )
        .with(filter)
        .init();
}

/// Standard error, each write (one event) after a prefix.
struct Prefixed(&'static str);

impl std::io::Write for Prefixed {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut line = self.0.as_bytes().to_vec();
        line.extend_from_slice(buf);
        std::io::stderr().write_all(&line)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let role = args.get(3).map(String::as_str);
    trace(match args.first().map(String::as_str) {
        Some("worker") if role == Some("stray") => "stray",
        Some("worker") => "worker",
        _ => "controller",
    });
    if args.first().map(String::as_str) == Some("worker") {
        let prefix = args.get(1).expect("prefix");
        let customers = args.get(2).and_then(|c| c.parse().ok()).expect("customers");
        match role {
            Some("indexes") => return index_worker(prefix).await,
            Some("stray") => return stray_writer(prefix, customers).await,
            Some("txn") => return txn_worker(prefix, customers).await,
            _ => {}
        }
        return worker(prefix, customers, Mode::of_role(role)).await;
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
    let mode = args.mode.as_str();
    if !matches!(mode, "cross" | "indexes" | "stray" | "big" | "txn") {
        violations += controller(&args, Mode::Single).await?;
    }
    if !matches!(mode, "single" | "indexes" | "stray" | "big" | "txn") {
        violations += controller(&args, Mode::Cross).await?;
    }
    if mode == "both" || mode == "indexes" {
        violations += index_controller(&args).await?;
    }
    if mode == "both" || mode == "stray" {
        violations += controller(&args, Mode::Stray).await?;
    }
    if mode == "both" || mode == "big" {
        violations += controller(&args, Mode::Big).await?;
    }
    if mode == "both" || mode == "txn" {
        violations += txn_controller(&args).await?;
    }
    if violations > 0 {
        println!("torture: 0 passed, 1 failed");
        std::process::exit(1);
    }
    println!("torture: 1 passed, 0 failed");
    Ok(())
}
