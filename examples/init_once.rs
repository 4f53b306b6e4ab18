//! Run-once initialisation: several instances of a service start at the same
//! moment, and the settings table must be seeded exactly once.
//!
//! Each worker stands for a separate process: it has its own `Store` and
//! lease manager (with its own identity) over the same storage. All of them
//! call `leases().do_once(...)`; the one that gets the lease seeds the table
//! and writes the completion marker, the others wait for the marker and go
//! on without touching the table.
//!
//! Runs on the embedded memory backend (one `MemoryBackend` shared by all
//! workers); set `AZURE_STORAGE_CONNECTION_STRING` to run against Azure
//! Storage or Azurite.
//!
//! ```text
//! cargo run --example init_once
//! ```

use std::sync::Arc;

use leasehold::backend::memory::MemoryBackend;
use leasehold::lease::{LeaseOptions, OnceOutcome};
use leasehold::{Entity, Error, Store};
use tokio::sync::Barrier;

/// One setting of the service, all in one partition per deployment.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "InitOnceSettings")]
struct Setting {
    #[entity(partition_key)]
    deployment: String,
    #[entity(row_key)]
    name: String,
    value: String,
    /// Which worker wrote it.
    seeded_by: String,
}

/// Where the workers keep their state: one embedded backend they all share,
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

    /// A store of its own for worker `owner`, as a separate process would
    /// have: its own client and lease manager, the same data.
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

const SETTINGS: [(&str, &str); 3] = [
    ("max-connections", "64"),
    ("region", "west-europe"),
    ("schema-version", "7"),
];

#[tokio::main]
async fn main() -> Result<(), Error> {
    let storage = Storage::from_env();
    // A fresh deployment per run, so a run against a long-lived Azurite
    // starts from nothing.
    let deployment = format!("deploy-{}", uuid::Uuid::new_v4().simple());
    let once_name = format!("seed-settings/{deployment}");

    const WORKERS: usize = 5;
    let start = Arc::new(Barrier::new(WORKERS));
    let mut workers = Vec::new();
    for w in 0..WORKERS {
        let owner = format!("worker-{w}");
        let store = storage.store_for(&owner)?;
        let start = start.clone();
        let deployment = deployment.clone();
        let once_name = once_name.clone();
        workers.push(tokio::spawn(async move {
            start.wait().await; // everyone starts together
            let settings = store.table::<Setting>();
            let outcome = store
                .leases()
                .do_once(&once_name, |ctx| async move {
                    if ctx.previous_attempt_unfinished() {
                        println!("{owner}: an earlier attempt died; seeding again");
                    }
                    for (name, value) in SETTINGS {
                        // Upsert, because a retried attempt may find rows
                        // written by the one that died.
                        settings
                            .upsert(Setting {
                                deployment: deployment.clone(),
                                name: name.into(),
                                value: value.into(),
                                seeded_by: owner.clone(),
                            })
                            .await?;
                    }
                    println!("{owner}: seeded {} settings", SETTINGS.len());
                    Ok::<_, Error>(owner)
                })
                .await?;
            Ok::<_, Error>(outcome)
        }));
    }

    let mut ran = Vec::new();
    let mut waited = 0;
    for (w, worker) in workers.into_iter().enumerate() {
        match worker.await.expect("worker task")? {
            OnceOutcome::Ran { output, .. } => ran.push(output),
            OnceOutcome::AlreadyDone => {
                println!("worker-{w}: found the settings already seeded");
                waited += 1;
            }
        }
    }
    println!("seeding ran on {ran:?}; {waited} workers waited for it");
    assert_eq!(ran.len(), 1, "exactly one worker seeds");
    assert_eq!(waited, WORKERS - 1);

    // Whoever asks later learns it is done without running anything.
    let late = storage.store_for("late-worker")?;
    let mut ran_late = false;
    let again = late
        .leases()
        .do_once(&once_name, |_| {
            ran_late = true;
            async { Ok::<_, Error>(()) }
        })
        .await?;
    assert_eq!(again, OnceOutcome::AlreadyDone);
    assert!(!ran_late, "the seed must not run twice");

    let rows = late
        .table::<Setting>()
        .query()
        .partition(&deployment)
        .all()
        .await?;
    assert_eq!(rows.len(), SETTINGS.len());
    assert!(rows.iter().all(|r| r.seeded_by == ran[0]), "{rows:?}");
    println!(
        "init_once finished: {} settings, seeded by {}",
        rows.len(),
        ran[0]
    );
    Ok(())
}
