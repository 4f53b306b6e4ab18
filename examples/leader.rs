//! Leader election: three instances of a service campaign for one lease;
//! the leader coordinates, the others stand by. Stopping the leader (as a
//! deploy would) makes it step down and release the lease at once, and a
//! standby takes over within a poll interval — no waiting for the lease to
//! expire.
//!
//! Each worker stands for a separate process: its own `Store` and lease
//! manager over the same storage. Every term advances the lease's fencing
//! epoch, so each leader holds a number no earlier leader had. The leader
//! records its progress in a table through its term's fence
//! (`LeaderContext::fence`, `Table::fenced`): once a later leader has
//! written, the service refuses an earlier leader's writes, even from a
//! leader that was paused past its lease and does not know it lost it.
//!
//! Runs on the embedded memory backend (one `MemoryBackend` shared by all
//! workers); set `AZURE_STORAGE_CONNECTION_STRING` to run against Azure
//! Storage or Azurite.
//!
//! ```text
//! cargo run --example leader
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use leasehold::CancellationToken;
use leasehold::backend::memory::MemoryBackend;
use leasehold::lease::{LeaderOptions, LeaseOptions};
use leasehold::table::Fence;
use leasehold::{Entity, Error, ErrorKind, Store};
use tokio::sync::mpsc;

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
    /// have. Standbys poll the held lease at most every 200 ms.
    fn store_for(&self, owner: &str) -> Result<Store, Error> {
        let options = LeaseOptions::new()
            .with_owner(owner)
            .with_poll_interval(Duration::from_millis(200));
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

/// The coordinator's progress, written only by the leader, fenced.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "LeaderProgress")]
struct Progress {
    #[entity(partition_key)]
    run: String,
    #[entity(row_key)]
    name: String,
    worker: i64,
    epoch: i64,
    ticks: i64,
}

/// What the workers report to `main`.
#[derive(Debug)]
enum Event {
    BecameLeader {
        worker: usize,
        epoch: u64,
        fence: Fence,
    },
    SteppedDown {
        worker: usize,
        ticks: u32,
    },
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let storage = Storage::from_env();
    let run = uuid::Uuid::new_v4().simple().to_string();
    let lease = format!("coordinator/{run}");
    const WORKERS: usize = 3;

    let (events, mut inbox) = mpsc::unbounded_channel();
    // How many workers think they lead right now: never more than one.
    let leading = Arc::new(AtomicUsize::new(0));
    let mut stops = Vec::new();
    let mut workers = Vec::new();
    for worker in 0..WORKERS {
        let store = storage.store_for(&format!("worker-{worker}"))?;
        let stop = CancellationToken::new();
        stops.push(stop.clone());
        let events = events.clone();
        let leading = leading.clone();
        let lease = lease.clone();
        let run = run.clone();
        workers.push(tokio::spawn(async move {
            let options = LeaderOptions::new().with_stop(stop);
            store
                .leases()
                .run_as_leader(&lease, options, |ctx| {
                    let events = events.clone();
                    let leading = leading.clone();
                    // The term's writes go through its fence.
                    let fence = ctx.fence().expect("each term advances the epoch");
                    let progress = store.table::<Progress>().fenced(&fence);
                    let run = run.clone();
                    async move {
                        let others = leading.fetch_add(1, Ordering::SeqCst);
                        assert_eq!(others, 0, "two leaders at once");
                        let _ = events.send(Event::BecameLeader {
                            worker,
                            epoch: ctx.epoch(),
                            fence,
                        });
                        // Coordinate until leadership ends, recording each
                        // tick (one transaction with the fence row).
                        let mut ticks = 0;
                        let mut tick = tokio::time::interval(Duration::from_millis(100));
                        loop {
                            tokio::select! {
                                () = ctx.cancelled() => break,
                                _ = tick.tick() => {
                                    ticks += 1;
                                    progress
                                        .upsert(Progress {
                                            run: run.clone(),
                                            name: "state".into(),
                                            worker: worker as i64,
                                            epoch: ctx.epoch() as i64,
                                            ticks: i64::from(ticks),
                                        })
                                        .await
                                        .expect("the current leader's writes are accepted");
                                }
                            }
                        }
                        leading.fetch_sub(1, Ordering::SeqCst);
                        let _ = events.send(Event::SteppedDown { worker, ticks });
                    }
                })
                .await
        }));
    }
    drop(events);

    // Stop each leader in turn once it has led for a moment; the standbys
    // take over one by one until all three have led.
    let mut leaders = Vec::new();
    let mut epochs = Vec::new();
    let mut fences = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while leaders.len() < WORKERS {
        let event = tokio::time::timeout_at(deadline, inbox.recv())
            .await
            .expect("a standby takes over within seconds")
            .expect("workers are running");
        match event {
            Event::BecameLeader {
                worker,
                epoch,
                fence,
            } => {
                println!("worker-{worker} became leader (epoch {epoch})");
                leaders.push(worker);
                epochs.push(epoch);
                fences.push(fence);
                tokio::time::sleep(Duration::from_millis(300)).await;
                println!("stopping worker-{worker}");
                stops[worker].cancel();
            }
            Event::SteppedDown { worker, ticks } => {
                println!("worker-{worker} stepped down after {ticks} ticks");
            }
        }
    }
    // Every worker has been stopped; each campaign returns once its task
    // has returned and the lease is released.
    for worker in workers {
        worker.await.expect("worker task")?;
    }
    while let Some(Event::SteppedDown { worker, ticks }) = inbox.recv().await {
        println!("worker-{worker} stepped down after {ticks} ticks");
    }

    let mut distinct = leaders.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), WORKERS, "each worker led once: {leaders:?}");
    assert!(
        epochs.windows(2).all(|w| w[0] < w[1]),
        "each term has a higher epoch: {epochs:?}"
    );
    assert_eq!(leading.load(Ordering::SeqCst), 0);

    // The progress row holds the last leader's writes; a write through the
    // first leader's fence (as a leader paused past its term would send) is
    // refused by the service.
    let operator = storage.store_for("operator")?;
    let progress = operator.table::<Progress>();
    let state = progress
        .get(run.as_str(), "state")
        .await?
        .expect("recorded");
    let last = WORKERS - 1;
    assert_eq!(
        (state.worker, state.epoch),
        (leaders[last] as i64, epochs[last] as i64),
        "the last leader's progress stands"
    );
    let stale = progress
        .fenced(&fences[0])
        .upsert(Progress {
            run: run.clone(),
            name: "state".into(),
            worker: leaders[0] as i64,
            epoch: epochs[0] as i64,
            ticks: 0,
        })
        .await
        .expect_err("a write of an earlier term is refused");
    assert_eq!(stale.kind(), ErrorKind::LeaseLost, "{stale}");
    println!(
        "a write through worker-{}'s fence is refused: {stale}",
        leaders[0]
    );

    let seen = operator.leases().describe(&lease).await?;
    assert!(!seen.is_held(), "the last leader released the lease");
    println!(
        "leader finished: leaders in turn {leaders:?}, epochs {epochs:?}, lease now {:?}",
        seen.state
    );
    Ok(())
}
