//! Shared setup: the benchmark entities, the Azurite connection and the
//! timing helpers every section uses.

use std::time::{Duration, Instant};

use base64::Engine as _;
use leasehold::backend::azure::AzureBackend;
use leasehold::backend::{BlobBackend, BlobConditions, LeaseDuration, LeaseId, Metadata};
use leasehold::entity::Entity as _;
use leasehold::key::{BlobName, ContainerName};
use leasehold::testing::{CountingBackend, FaultyBackend, RequestCounter};
use leasehold::{Entity, ErrorKind, Store};
use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};
use uuid::Uuid;

use crate::Res;
use crate::raw::RawTables;
use crate::stats::{ms, random_between};

/// The 12-field entity of every table benchmark; it derives both leasehold's
/// `Entity` and serde's traits so the codec comparison uses one struct.
#[derive(Entity, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[entity(table = "BenchSamples")]
pub(crate) struct Sample {
    #[entity(partition_key)]
    pub(crate) pk: String,
    #[entity(row_key)]
    pub(crate) rk: String,
    pub(crate) name: String,
    pub(crate) note: Option<String>,
    pub(crate) count: i32,
    pub(crate) total: i64,
    pub(crate) big: i64,
    pub(crate) ratio: f64,
    pub(crate) active: bool,
    pub(crate) id: Uuid,
    pub(crate) data: Vec<u8>,
    #[entity(json)]
    pub(crate) tags: Vec<String>,
}

/// A second table for two-table units of work.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "BenchAudit")]
pub(crate) struct Audit {
    #[entity(partition_key)]
    pub(crate) pk: String,
    #[entity(row_key)]
    pub(crate) rk: String,
    pub(crate) n: i64,
}

pub(crate) fn sample(pk: &str, rk: &str, i: i64) -> Sample {
    Sample {
        pk: pk.into(),
        rk: rk.into(),
        name: format!("sample number {i}"),
        note: Some("a note that is neither short nor long".into()),
        count: i as i32,
        total: 1_000_000 + i,
        big: 9_007_199_254_740_993 + i,
        ratio: 0.25 + i as f64,
        active: i % 2 == 0,
        id: Uuid::from_u128(0x1234_5678_9abc_def0_1234_5678_9abc_def0 + i as u128),
        data: vec![7; 64],
        tags: vec!["red".into(), "green".into(), "blue".into()],
    }
}

/// The same entity written by hand the way a user of raw Table requests
/// must: every type the service cannot infer annotated with `@odata.type`.
pub(crate) fn raw_json(s: &Sample) -> Json {
    json!({
        "PartitionKey": s.pk,
        "RowKey": s.rk,
        "name": s.name,
        "note": s.note,
        "count": s.count,
        "total": s.total.to_string(),
        "total@odata.type": "Edm.Int64",
        "big": s.big.to_string(),
        "big@odata.type": "Edm.Int64",
        "ratio": s.ratio,
        "ratio@odata.type": "Edm.Double",
        "active": s.active,
        "id": s.id.hyphenated().to_string(),
        "id@odata.type": "Edm.Guid",
        "data": base64::engine::general_purpose::STANDARD.encode(&s.data),
        "data@odata.type": "Edm.Binary",
        "tags": serde_json::to_string(&s.tags).unwrap(),
    })
}

pub(crate) struct Env {
    pub(crate) conn_str: String,
    pub(crate) raw: RawTables,
    pub(crate) scale: f64,
}

impl Env {
    pub(crate) fn n(&self, base: usize) -> usize {
        ((base as f64 * self.scale).round() as usize).max(5)
    }

    pub(crate) fn secs(&self, base: f64) -> Duration {
        Duration::from_secs_f64((base * self.scale).max(1.0))
    }

    /// A counted store on its own Azure backend (own connection pool).
    pub(crate) fn counted_store(&self) -> (Store, RequestCounter) {
        let backend = CountingBackend::new(
            AzureBackend::from_connection_string(&self.conn_str).expect("connection string"),
        );
        let counter = backend.counter();
        (Store::new(backend), counter)
    }

    /// A counted store whose every request first waits `latency`, as over a
    /// network: the same wait for leasehold's requests and for a baseline
    /// sent through [`Store::backend`].
    pub(crate) fn counted_store_with_latency(&self, latency: Duration) -> (Store, RequestCounter) {
        let faulty = FaultyBackend::new(
            AzureBackend::from_connection_string(&self.conn_str).expect("connection string"),
        );
        faulty.injector().set_latency(None, latency);
        let backend = CountingBackend::new(faulty);
        let counter = backend.counter();
        (Store::new(backend), counter)
    }
}

/// Creates (or empties) a blob with no conditions: the blob a raw lease
/// loop takes its leases on.
/// The lease loop as people write it by hand: try the lease, on 409 sleep
/// a random 250 ms–1 s and try again. `None` once `deadline` passes.
pub(crate) async fn hand_written_acquire(
    backend: &dyn BlobBackend,
    container: &ContainerName,
    blob: &BlobName,
    deadline: Instant,
) -> Option<LeaseId> {
    loop {
        match backend
            .lease(
                container,
                blob,
                leasehold::backend::LeaseAction::Acquire {
                    duration: LeaseDuration::Seconds(30),
                    proposed: LeaseId::new_random(),
                },
            )
            .await
        {
            Ok(acquired) => return acquired.lease_id(),
            Err(e) if e.kind() == ErrorKind::LeaseHeld => {
                let wake = Instant::now()
                    + random_between(Duration::from_millis(250), Duration::from_secs(1));
                // Stop polling at the time bound.
                tokio::time::sleep_until(wake.min(deadline).into()).await;
                if wake >= deadline {
                    return None;
                }
            }
            Err(e) => panic!("{e}"),
        }
    }
}

pub(crate) async fn put_empty_blob(
    backend: &dyn BlobBackend,
    container: &ContainerName,
    blob: &BlobName,
) -> leasehold::Result<()> {
    backend
        .put_blob(
            container,
            blob,
            Vec::new(),
            &Metadata::new(),
            &BlobConditions::none(),
        )
        .await
        .map(drop)
}

/// Times one future.
pub(crate) async fn timed<T>(f: impl std::future::Future<Output = T>) -> (Duration, T) {
    let start = Instant::now();
    let out = f.await;
    (start.elapsed(), out)
}

/// Whether side A goes first in round `i` of a comparison: a coin toss
/// (from one draw per process), not a fixed alternation. Work the emulator
/// does in the background at a steady period, such as its collector running
/// every so many requests, would fall on one side of a fixed A B B A
/// pattern whenever the two periods meet; tossed orders cannot line up with
/// it.
pub(crate) fn a_first(i: usize) -> bool {
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let seed = *SEED.get_or_init(|| Uuid::new_v4().as_u64_pair().0);
    // splitmix64 of the round under the seed.
    let mut z = seed.wrapping_add((i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) & 1 == 1
}

/// Runs `n` rounds of A and B, the order of each round tossed (see
/// [`a_first`]), and returns the samples of each side in milliseconds.
pub(crate) async fn abab<A, B, FA, FB>(n: usize, mut a: A, mut b: B) -> (Vec<f64>, Vec<f64>)
where
    A: FnMut(usize) -> FA,
    B: FnMut(usize) -> FB,
    FA: std::future::Future<Output = ()>,
    FB: std::future::Future<Output = ()>,
{
    let (mut sa, mut sb) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        if a_first(i) {
            sa.push(ms(timed(a(i)).await.0));
            sb.push(ms(timed(b(i)).await.0));
        } else {
            sb.push(ms(timed(b(i)).await.0));
            sa.push(ms(timed(a(i)).await.0));
        }
    }
    (sa, sb)
}

/// As [`abab`], waiting after each side (untimed) until `counter` stops
/// moving: what a unit sends behind its answer (its decision row's
/// delete) is done before the next side is timed, so it slows neither.
pub(crate) async fn abab_settled<A, B, FA, FB>(
    n: usize,
    mut a: A,
    mut b: B,
    counter: &RequestCounter,
) -> (Vec<f64>, Vec<f64>)
where
    A: FnMut(usize) -> FA,
    B: FnMut(usize) -> FB,
    FA: std::future::Future<Output = ()>,
    FB: std::future::Future<Output = ()>,
{
    let (mut sa, mut sb) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        if a_first(i) {
            sa.push(ms(timed(a(i)).await.0));
            settled(counter).await;
            sb.push(ms(timed(b(i)).await.0));
            settled(counter).await;
        } else {
            sb.push(ms(timed(b(i)).await.0));
            settled(counter).await;
            sa.push(ms(timed(a(i)).await.0));
            settled(counter).await;
        }
    }
    (sa, sb)
}

/// Waits until `counter` has not moved for 3 polls 2 ms apart: requests a
/// unit or transaction sends behind its answer have gone out and, on the
/// loopback, come back.
pub(crate) async fn settled(counter: &RequestCounter) {
    let (mut last, mut still) = (counter.total(), 0);
    while still < 3 {
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        let now = counter.total();
        still = if now == last { still + 1 } else { 0 };
        last = now;
    }
}

/// Median of `n` simple gets now, as raw requests.
pub(crate) async fn round_trip_now(env: &Env, n: usize) -> Res<Vec<f64>> {
    let pk = format!("rtt-{}", Uuid::new_v4().simple());
    env.raw
        .insert(Sample::TABLE, &raw_json(&sample(&pk, "r", 0)))
        .await?;
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let (d, r) = timed(env.raw.get(Sample::TABLE, &pk, "r")).await;
        r?;
        v.push(ms(d));
    }
    Ok(v)
}
