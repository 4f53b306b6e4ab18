//! Scheduled jobs on redundant runners: three runners wake up on the same
//! schedule and each tries to reserve every job; a reservation lasts one
//! slot, so each job runs on one runner at a time and at most once per slot,
//! whichever runner gets there first. Each job's reservation log (kept in its
//! lease blob, readable without the lease) shows who ran it and when.
//!
//! Each runner stands for a separate process: its own `Store` and lease
//! manager over the same storage.
//!
//! Runs on the embedded memory backend (one `MemoryBackend` shared by all
//! runners); set `AZURE_STORAGE_CONNECTION_STRING` to run against Azure
//! Storage or Azurite.
//!
//! ```text
//! cargo run --example scheduled_jobs
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use leasehold::backend::memory::MemoryBackend;
use leasehold::lease::LeaseOptions;
use leasehold::{Error, Store};

/// Where the runners keep their state: one embedded backend they all share,
/// or the storage account in `AZURE_STORAGE_CONNECTION_STRING`.
#[derive(Clone)]
enum Storage {
    Memory(MemoryBackend),
    Azure(String),
}

impl Storage {
    fn from_env() -> Storage {
        match std::env::var("AZURE_STORAGE_CONNECTION_STRING") {
            Ok(cs) => Storage::Azure(cs),
            Err(_) => Storage::Memory(MemoryBackend::new()),
        }
    }

    /// A store of its own for runner `owner`, as a separate process would
    /// have.
    fn store_for(&self, owner: &str) -> Result<Store, Error> {
        let options = LeaseOptions::new().with_owner(owner);
        match self {
            Storage::Memory(backend) => Store::builder(backend.clone()),
            Storage::Azure(cs) => {
                Store::builder(leasehold::backend::azure::AzureBackend::from_connection_string(cs)?)
            }
        }
        .lease_options(options)
        .build()
    }
}

/// One slot of the schedule: a job reserved in a slot is not run again
/// until the next.
const SLOT: Duration = Duration::from_millis(600);
/// How often the runners wake up: several times per slot, so a runner that
/// wakes just after a slot ended picks the job up.
const WAKE: Duration = Duration::from_millis(150);
const RUNNERS: usize = 3;
const WAKE_UPS: u32 = 16;

/// Marks a job as running, and fails loudly if it already was.
struct Running<'a>(&'a AtomicBool);

impl<'a> Running<'a> {
    fn start(flag: &'a AtomicBool, job: &str) -> Running<'a> {
        assert!(
            !flag.swap(true, Ordering::SeqCst),
            "{job} ran twice at once"
        );
        Running(flag)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let storage = Storage::from_env();
    let run = uuid::Uuid::new_v4().simple().to_string();
    let jobs: Vec<String> = ["compact-logs", "send-digest", "refresh-cache"]
        .iter()
        .map(|j| format!("jobs/{run}/{j}"))
        .collect();
    let running: Arc<Vec<AtomicBool>> =
        Arc::new(jobs.iter().map(|_| AtomicBool::new(false)).collect());
    let runs = Arc::new(AtomicUsize::new(0));

    let started = tokio::time::Instant::now();
    let mut runners = Vec::new();
    for r in 0..RUNNERS {
        let owner = format!("runner-{r}");
        let store = storage.store_for(&owner)?;
        let jobs = jobs.clone();
        let running = running.clone();
        let runs = runs.clone();
        runners.push(tokio::spawn(async move {
            let leases = store.leases();
            let mut ran = 0;
            let mut wake = tokio::time::interval(WAKE);
            for _ in 0..WAKE_UPS {
                wake.tick().await;
                for (j, job) in jobs.iter().enumerate() {
                    let Some(reservation) = leases.try_reserve(job, SLOT).await? else {
                        continue; // another runner has this slot
                    };
                    let _running = Running::start(&running[j], job);
                    let short = job.rsplit('/').next().unwrap_or(job);
                    println!(
                        "{owner}: running {short} (reservation #{})",
                        reservation.seq()
                    );
                    // The work; it ends well within the slot, and checks the
                    // reservation is still held before its side effect.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    assert!(reservation.is_active(), "{short} outlived its slot");
                    runs.fetch_add(1, Ordering::SeqCst);
                    ran += 1;
                }
            }
            Ok::<_, Error>((owner, ran))
        }));
    }
    let mut per_runner = BTreeMap::new();
    for runner in runners {
        let (owner, ran) = runner.await.expect("runner task")?;
        per_runner.insert(owner, ran);
    }
    let elapsed = started.elapsed();
    println!("job runs per runner: {per_runner:?} in {elapsed:?}");

    // The logs, read without the lease by an observer.
    let observer = storage.store_for("observer")?;
    let mut logged = 0;
    for job in &jobs {
        let log = observer.leases().reservation_log(job).await?;
        println!(
            "reservation log of {}:",
            job.rsplit('/').next().unwrap_or(job)
        );
        for record in &log {
            println!(
                "  #{:<3} {:<9} {} .. {}{}",
                record.seq,
                record.holder,
                record.reserved_at.time(),
                record.until.time(),
                if record.cancelled_at.is_some() {
                    " (cancelled)"
                } else {
                    ""
                }
            );
        }
        assert!(!log.is_empty(), "{job} ran");
        // A slot starts only after the previous one ended (its lease is
        // released when it ends). The holders' clocks are this process's
        // clock read through separate managers, so allow some rounding;
        // an overlap would be most of a slot.
        for pair in log.windows(2) {
            let gap = pair[1].reserved_at - pair[0].until;
            assert!(
                gap > time::Duration::milliseconds(-50),
                "slots overlap: {pair:?}"
            );
        }
        logged += log.len();
    }
    let runs = runs.load(Ordering::SeqCst);
    // Logs keep the newest records only, so they may hold fewer.
    assert!(logged <= runs && logged > 0, "{logged} logged, {runs} runs");
    let slots = elapsed.as_millis() / SLOT.as_millis() + 1;
    assert!(
        runs as u128 <= slots * jobs.len() as u128,
        "at most one run per job and slot: {runs} runs"
    );
    println!("scheduled_jobs finished: {runs} job runs, none overlapping");
    Ok(())
}
