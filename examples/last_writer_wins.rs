//! Where last-writer-wins is the right choice: a heartbeat table where every
//! node overwrites its own row with its latest status. Nobody else writes a
//! node's row and an older heartbeat is worthless, so reading first to get an
//! ETag would only cost a round trip. `upsert` says so explicitly.
//!
//! ```text
//! cargo run --example last_writer_wins
//! ```

use std::time::Duration;

use leasehold::{Entity, Error, Store};
use time::OffsetDateTime;

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Heartbeats")]
struct Heartbeat {
    #[entity(partition_key)]
    cluster: String,
    #[entity(row_key)]
    node: String,
    seen: OffsetDateTime,
    load: f64,
    version: String,
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let store = match std::env::var("AZURE_STORAGE_CONNECTION_STRING") {
        Ok(_) => Store::from_env()?,
        Err(_) => Store::memory(),
    };
    let heartbeats = store.table::<Heartbeat>();
    let cluster = format!("cluster-{}", uuid::Uuid::new_v4().simple());

    // Three nodes report five times each; each report overwrites the last.
    let mut tasks = Vec::new();
    for node in ["node-a", "node-b", "node-c"] {
        let heartbeats = heartbeats.clone();
        let cluster = cluster.clone();
        tasks.push(tokio::spawn(async move {
            for beat in 0..5 {
                heartbeats
                    .upsert(Heartbeat {
                        cluster: cluster.clone(),
                        node: node.into(),
                        seen: OffsetDateTime::now_utc(),
                        load: f64::from(beat) / 10.0,
                        version: "1.4.2".into(),
                    })
                    .await?;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Ok::<(), Error>(())
        }));
    }
    for task in tasks {
        task.await.expect("heartbeat task")?;
    }

    let all = heartbeats.query().partition(&cluster).all().await?;
    for hb in &all {
        println!("{} load {:.1} at {}", hb.node, hb.load, hb.seen);
    }
    assert_eq!(all.len(), 3, "one row per node");
    assert!(
        all.iter().all(|hb| (hb.load - 0.4).abs() < 1e-9),
        "the last beat won"
    );
    Ok(())
}
