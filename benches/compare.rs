//! leasehold against its baselines, on Azurite: `scripts/bench.sh` runs this
//! program and turns its output into `BENCHMARKS.md`.
//!
//! Every figure is a ratio against a baseline measured in the same run, with
//! the two sides interleaved (A B B A ...) so that drift and noise from other
//! work on the machine fall on both sides alike.
//!
//! Environment:
//! * `LEASEHOLD_TEST_AZURITE` — connection string of a running Azurite (set by
//!   `scripts/with-azurite.sh`);
//! * `LEASEHOLD_BENCH_SCALE` — multiplies every iteration count and time
//!   bound (default 1; the default run takes a few minutes);
//! * `LEASEHOLD_BENCH_OUT` — where to write the Markdown results (default
//!   stdout).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use azure_core::auth::Secret;
use azure_data_tables::IfMatchCondition;
use azure_data_tables::clients::{TableClient, TableServiceClient, TableServiceClientBuilder};
use azure_storage::{CloudLocation, StorageCredentials};
use base64::Engine as _;
use futures_util::StreamExt as _;
use leasehold::backend::azure::AzureBackend;
use leasehold::backend::{
    BlobBackend, BlobConditions, LeaseDuration, LeaseId, Metadata, Precondition, TableOp,
};
use leasehold::entity::wire;
use leasehold::key::{BlobName, ContainerName};
use leasehold::lease::LeaseOptions;
use leasehold::lock::LockOptions;
use leasehold::testing::{CountingBackend, Op, RequestCounter};
use leasehold::{Entity, EntityTrait as _, ErrorKind, PartitionKey, RowKey, Store, TableName};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json, json};
use uuid::Uuid;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Res<T> = std::result::Result<T, BoxError>;

/// The 12-field entity of every table benchmark; it derives both leasehold's
/// `Entity` and serde's traits so the codec comparison uses one struct.
#[derive(Entity, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[entity(table = "BenchSamples")]
struct Sample {
    #[entity(partition_key)]
    pk: String,
    #[entity(row_key)]
    rk: String,
    name: String,
    note: Option<String>,
    count: i32,
    total: i64,
    big: i64,
    ratio: f64,
    active: bool,
    id: Uuid,
    data: Vec<u8>,
    #[entity(json)]
    tags: Vec<String>,
}

/// A second table for two-table units of work.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "BenchAudit")]
struct Audit {
    #[entity(partition_key)]
    pk: String,
    #[entity(row_key)]
    rk: String,
    n: i64,
}

fn sample(pk: &str, rk: &str, i: i64) -> Sample {
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

/// The same entity written by hand the way a user of `azure_data_tables`
/// must: every type the service cannot infer annotated with `@odata.type`.
fn raw_json(s: &Sample) -> Json {
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

// ---------------------------------------------------------------- statistics

fn median(v: &[f64]) -> f64 {
    percentile(v, 0.5)
}

fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let idx = ((s.len() - 1) as f64 * p).round() as usize;
    s[idx]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn random_between(lo: Duration, hi: Duration) -> Duration {
    let r = (Uuid::new_v4().as_u128() % 1_000_000) as f64 / 1_000_000.0;
    lo + (hi - lo).mul_f64(r)
}

// ------------------------------------------------------------------- report

struct Row {
    section: &'static str,
    name: String,
    measured: String,
    baseline: String,
    ratio: f64,
    goal: String,
    met: bool,
}

#[derive(Default)]
struct Report {
    rows: Vec<Row>,
    details: Vec<String>,
    misses: Vec<String>,
    svg: Option<String>,
}

impl Report {
    #[allow(clippy::too_many_arguments)]
    fn row(
        &mut self,
        section: &'static str,
        name: impl Into<String>,
        measured: String,
        baseline: String,
        ratio: f64,
        goal_max: Option<f64>,
        goal_min: Option<f64>,
        why_missed: &str,
    ) {
        let (goal, met) = match (goal_max, goal_min) {
            (Some(g), _) => (format!("≤ {g}"), ratio <= g),
            (None, Some(g)) => (format!("≥ {g}"), ratio >= g),
            (None, None) => ("—".into(), true),
        };
        self.row_with_goal(
            section, name, measured, baseline, ratio, goal, met, why_missed,
        );
    }

    /// A row whose goal is not on the ratio (an absolute bound on the
    /// measured value, say).
    #[allow(clippy::too_many_arguments)]
    fn row_with_goal(
        &mut self,
        section: &'static str,
        name: impl Into<String>,
        measured: String,
        baseline: String,
        ratio: f64,
        goal: String,
        met: bool,
        why_missed: &str,
    ) {
        let name = name.into();
        eprintln!("{section} | {name} | {measured} | {baseline} | {ratio:.3} | {goal} | {met}");
        if !met {
            self.misses.push(format!(
                "**{name}** ({ratio:.3}, goal {goal}): {why_missed}"
            ));
        }
        self.rows.push(Row {
            section,
            name,
            measured,
            baseline,
            ratio,
            goal,
            met,
        });
    }

    fn detail(&mut self, line: String) {
        eprintln!("  {line}");
        self.details.push(line);
    }

    fn markdown(&self) -> String {
        let mut out = String::new();
        out.push_str("| section | figure | leasehold | baseline | ratio | goal | met |\n");
        out.push_str("|---|---|---|---|---|---|---|\n");
        for r in &self.rows {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {:.3} | {} | {} |",
                r.section,
                r.name,
                r.measured,
                r.baseline,
                r.ratio,
                r.goal,
                if r.met { "yes" } else { "**no**" }
            );
        }
        if !self.misses.is_empty() {
            out.push_str("\n### Goals missed, and why\n\n");
            for m in &self.misses {
                let _ = writeln!(out, "* {m}");
            }
        }
        out.push_str("\n### Details\n\n");
        for d in &self.details {
            let _ = writeln!(out, "* {d}");
        }
        out
    }
}

// --------------------------------------------------------------- connection

struct Conn {
    account: String,
    key: String,
    table_endpoint: String,
}

fn parse_connection_string(s: &str) -> Conn {
    let mut parts = BTreeMap::new();
    for part in s.split(';').filter(|p| !p.is_empty()) {
        if let Some((k, v)) = part.split_once('=') {
            parts.insert(k.to_owned(), v.to_owned());
        }
    }
    Conn {
        account: parts["AccountName"].clone(),
        key: parts["AccountKey"].clone(),
        table_endpoint: parts["TableEndpoint"].trim_end_matches('/').to_owned(),
    }
}

/// The SDK's own client, with its default options.
fn raw_service(conn: &Conn) -> TableServiceClient {
    let creds = StorageCredentials::access_key(conn.account.clone(), Secret::new(conn.key.clone()));
    TableServiceClientBuilder::with_location(
        CloudLocation::Custom {
            account: conn.account.clone(),
            uri: conn.table_endpoint.clone(),
        },
        creds,
    )
    .build()
}

struct Env {
    conn_str: String,
    raw: TableServiceClient,
    scale: f64,
}

impl Env {
    fn n(&self, base: usize) -> usize {
        ((base as f64 * self.scale).round() as usize).max(5)
    }

    fn secs(&self, base: f64) -> Duration {
        Duration::from_secs_f64((base * self.scale).max(1.0))
    }

    /// A counted store on its own Azure backend (own connection pool).
    fn counted_store(&self) -> (Store, RequestCounter) {
        let backend = CountingBackend::new(
            AzureBackend::from_connection_string(&self.conn_str).expect("connection string"),
        );
        let counter = backend.counter();
        (Store::new(backend), counter)
    }

    fn raw_table(&self, name: &str) -> TableClient {
        self.raw.table_client(name)
    }
}

/// Times one future.
/// Creates (or empties) a blob with no conditions: the blob a raw lease
/// loop takes its leases on.
async fn put_empty_blob(
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

async fn timed<T>(f: impl std::future::Future<Output = T>) -> (Duration, T) {
    let start = Instant::now();
    let out = f.await;
    (start.elapsed(), out)
}

/// Runs `n` rounds of A and B, alternating which goes first (A B, B A, ...),
/// and returns the samples of each side in milliseconds.
async fn abab<A, B, FA, FB>(n: usize, mut a: A, mut b: B) -> (Vec<f64>, Vec<f64>)
where
    A: FnMut(usize) -> FA,
    B: FnMut(usize) -> FB,
    FA: std::future::Future<Output = ()>,
    FB: std::future::Future<Output = ()>,
{
    let (mut sa, mut sb) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        if i % 2 == 0 {
            sa.push(ms(timed(a(i)).await.0));
            sb.push(ms(timed(b(i)).await.0));
        } else {
            sb.push(ms(timed(b(i)).await.0));
            sa.push(ms(timed(a(i)).await.0));
        }
    }
    (sa, sb)
}

// ------------------------------------------------- 1. per-operation overhead

async fn per_operation(env: &Env, report: &mut Report) -> Res<f64> {
    const SECTION: &str = "1 per-op overhead";
    let store = Store::connect(&env.conn_str)?;
    let table = store.table::<Sample>();
    let raw = env.raw_table(Sample::TABLE);
    let run = Uuid::new_v4().simple().to_string();
    let (lh_pk, raw_pk) = (format!("lh-{run}"), format!("raw-{run}"));

    // Setup and warm-up: the table exists, both sides have a row to read and
    // a row to replace, and both connection pools are warm.
    table.insert(sample(&lh_pk, "fixed", 1)).await?;
    raw.insert::<_, Json>(raw_json(&sample(&raw_pk, "fixed", 1)))?
        .into_future()
        .await?;
    for _ in 0..20 {
        table.get(&lh_pk, "fixed").await?;
        raw.partition_key_client(raw_pk.as_str())
            .entity_client("fixed")
            .get::<Map<String, Json>>()
            .into_future()
            .await?;
    }

    let n = env.n(300);
    let goal = 1.02;
    let why = "both sides send the same requests; leasehold adds typed work per entity \
               (encoding and checking each entity against the service limits on writes, \
               decoding into the struct on reads: see the codec row) and, for batches, builds \
               its own multipart body and checks every operation's reply. For one entity that \
               is lost in the noise of a ~1 ms round trip; over 100 entities it can show";

    // get
    let (a, b) = abab(
        n,
        |_| {
            let table = table.clone();
            let pk = lh_pk.clone();
            async move {
                let got = table.get(&pk, "fixed").await.unwrap();
                assert!(got.is_some());
            }
        },
        |_| {
            let client = raw
                .partition_key_client(raw_pk.as_str())
                .entity_client("fixed");
            async move {
                let got = client
                    .get::<Map<String, Json>>()
                    .into_future()
                    .await
                    .unwrap();
                assert!(got.entity.contains_key("big"));
            }
        },
    )
    .await;
    let rtt = median(&b);
    report.row(
        SECTION,
        "get",
        format!("{:.3} ms", median(&a)),
        format!("{rtt:.3} ms"),
        median(&a) / rtt,
        Some(goal),
        None,
        why,
    );

    // insert
    let (a, b) = abab(
        n,
        |i| {
            let table = table.clone();
            let e = sample(&lh_pk, &format!("ins-{i:06}"), i as i64);
            async move {
                table.insert(e).await.unwrap();
            }
        },
        |i| {
            let body = raw_json(&sample(&raw_pk, &format!("ins-{i:06}"), i as i64));
            let raw = raw.clone();
            async move {
                raw.insert::<_, Json>(body)
                    .unwrap()
                    .into_future()
                    .await
                    .unwrap();
            }
        },
    )
    .await;
    report.row(
        SECTION,
        "insert",
        format!("{:.3} ms", median(&a)),
        format!("{:.3} ms", median(&b)),
        median(&a) / median(&b),
        Some(goal),
        None,
        why,
    );

    // conditional replace: each side keeps the ETag of its last write.
    let current = Arc::new(tokio::sync::Mutex::new(
        table.get(&lh_pk, "fixed").await?.ok_or("no row")?,
    ));
    let raw_fixed = raw
        .partition_key_client(raw_pk.as_str())
        .entity_client("fixed");
    let raw_etag = Arc::new(tokio::sync::Mutex::new(
        raw_fixed
            .get::<Map<String, Json>>()
            .into_future()
            .await?
            .etag
            .to_string(),
    ));
    let (a, b) = abab(
        n,
        |i| {
            let table = table.clone();
            let current = current.clone();
            async move {
                let mut cur = current.lock().await;
                let mut next = cur.clone();
                next.count = i as i32;
                *cur = table.replace_owned(next).await.unwrap();
            }
        },
        |i| {
            let client = raw_fixed.clone();
            let etag = raw_etag.clone();
            let body = raw_json(&sample(&raw_pk, "fixed", i as i64));
            async move {
                let mut etag = etag.lock().await;
                let resp = client
                    .update(&body, IfMatchCondition::Etag(etag.clone().into()))
                    .unwrap()
                    .into_future()
                    .await
                    .unwrap();
                *etag = resp.etag.to_string();
            }
        },
    )
    .await;
    report.row(
        SECTION,
        "conditional replace",
        format!("{:.3} ms", median(&a)),
        format!("{:.3} ms", median(&b)),
        median(&a) / median(&b),
        Some(goal),
        None,
        why,
    );

    // 100-op batch: 100 upserts into one partition (repeatable).
    let batch_pk_lh = format!("lhb-{run}");
    let batch_pk_raw = format!("rawb-{run}");
    let nb = env.n(60);
    let (a, b) = abab(
        nb,
        |i| {
            let table = table.clone();
            let pk = batch_pk_lh.clone();
            async move {
                let mut batch = table.batch();
                for r in 0..100 {
                    batch = batch.upsert(sample(&pk, &format!("row-{r:03}"), (i + r) as i64));
                }
                batch.commit().await.unwrap();
            }
        },
        |i| {
            let pkc = raw.partition_key_client(batch_pk_raw.as_str());
            let pk = batch_pk_raw.clone();
            async move {
                let mut tx = pkc.transaction();
                for r in 0..100 {
                    let rk = format!("row-{r:03}");
                    let body = raw_json(&sample(&pk, &rk, (i + r) as i64));
                    tx = tx.insert_or_replace(rk, body).unwrap();
                }
                let resp = tx.into_future().await.unwrap();
                // The client reports a failed transaction as Ok: check.
                assert!(
                    resp.operation_responses
                        .iter()
                        .all(|r| r.status_code.is_success())
                );
            }
        },
    )
    .await;
    report.row(
        SECTION,
        "100-op batch (upserts)",
        format!("{:.3} ms", median(&a)),
        format!("{:.3} ms", median(&b)),
        median(&a) / median(&b),
        Some(goal),
        None,
        why,
    );

    // query page: the 100 rows of the batch partitions, one page of 100.
    let (a, b) = abab(
        n,
        |_| {
            let table = table.clone();
            let pk = batch_pk_lh.clone();
            async move {
                let page = table
                    .query()
                    .partition(pk.as_str())
                    .page_size(100)
                    .page()
                    .await
                    .unwrap();
                assert_eq!(page.items.len(), 100);
            }
        },
        |_| {
            let raw = raw.clone();
            let filter = format!("PartitionKey eq '{batch_pk_raw}'");
            async move {
                let mut pages = raw
                    .query()
                    .filter(filter)
                    .top(100)
                    .into_stream::<Map<String, Json>>();
                let page = pages.next().await.unwrap().unwrap();
                assert_eq!(page.entities.len(), 100);
            }
        },
    )
    .await;
    report.row(
        SECTION,
        "query page (100 entities)",
        format!("{:.3} ms", median(&a)),
        format!("{:.3} ms", median(&b)),
        median(&a) / median(&b),
        Some(goal),
        None,
        why,
    );
    report.detail(format!(
        "Per-operation overhead: {n} interleaved pairs per operation ({nb} for the batch); \
         the raw side is `azure_data_tables` 0.21 with its default client options, the \
         entity written by hand as `serde_json::Value` with `@odata.type` annotations and read \
         back as a JSON map (no typed decode). Ratios below 1: leasehold's requests go \
         through its own pipeline configuration (the SDK's retry policy off, leasehold's \
         transport policy) rather than the SDK's default one; this run does not break that \
         difference down further. Round trip of a simple get: {rtt:.3} ms."
    ));
    Ok(rtt)
}

// ------------------------------------------------------------ 2. codec (CPU)

fn codec(env: &Env, report: &mut Report, rtt_ms: f64) -> Res<()> {
    const SECTION: &str = "2 codec";
    let s = sample("customer-42", "row-0001", 42);
    // Check both paths round-trip before timing them.
    // The Azure backend's path: batch bodies are `entity_to_json_string`
    // (single-entity requests serialize `wire::EntityBody` through the SDK:
    // the same bytes); replies deserialize `wire::ParsedEntity` and read it
    // with `entity_from_parsed` (what `entity_from_json_str` does).
    let lh = |s: &Sample| -> Sample {
        let data = s.encode().unwrap();
        let text = wire::entity_to_json_string(
            data.partition_key.as_str(),
            data.row_key.as_str(),
            &data.properties,
        )
        .unwrap();
        let w = wire::entity_from_json_str(Sample::TABLE, &text).unwrap();
        Sample::decode(leasehold::EntityData {
            partition_key: PartitionKey::new(w.partition_key).unwrap(),
            row_key: RowKey::new(w.row_key).unwrap(),
            properties: w.properties,
        })
        .unwrap()
    };
    let sj = |s: &Sample| -> Sample {
        let text = serde_json::to_string(s).unwrap();
        serde_json::from_str(&text).unwrap()
    };
    assert_eq!(lh(&s), s);
    assert_eq!(sj(&s), s);

    let batches = 31;
    let per_batch = env.n(2000);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for i in 0..batches {
        let run_a = || {
            let start = Instant::now();
            for _ in 0..per_batch {
                std::hint::black_box(lh(std::hint::black_box(&s)));
            }
            start.elapsed().as_secs_f64() * 1e9 / per_batch as f64
        };
        let run_b = || {
            let start = Instant::now();
            for _ in 0..per_batch {
                std::hint::black_box(sj(std::hint::black_box(&s)));
            }
            start.elapsed().as_secs_f64() * 1e9 / per_batch as f64
        };
        if i % 2 == 0 {
            a.push(run_a());
            b.push(run_b());
        } else {
            b.push(run_b());
            a.push(run_a());
        }
    }
    report.row(
        SECTION,
        "encode+decode, 12 fields, via JSON text",
        format!("{:.0} ns", median(&a)),
        format!("{:.0} ns", median(&b)),
        median(&a) / median(&b),
        Some(1.0),
        None,
        "leasehold's path does more work than serde_json's: it validates keys and service \
         limits, goes through an intermediate property bag (names and typed values, as the \
         backends store and compare them), writes `@odata.type` annotations, renders Int64 as \
         strings, Binary as base64 and the `json` field as a nested JSON string, and reads any \
         key order and annotation placement the service sends; serde_json writes the struct \
         straight to text and reads it straight back",
    );
    report.detail(format!(
        "Codec cost against the network: leasehold's encode+decode is {:.2} % of this run's \
         simple-get round trip ({rtt_ms:.3} ms), serde_json's {:.2} %.",
        median(&a) / 1e4 / rtt_ms,
        median(&b) / 1e4 / rtt_ms
    ));
    report.detail(format!(
        "Codec: median of {batches} interleaved batches of {per_batch} round trips \
         (struct → JSON text → struct). leasehold: `Entity::encode` (keys, properties, limit \
         checks) → `wire::entity_to_json_string` (writes the body text straight from the \
         property bag, as the Azure backend's batch requests do; its single-entity requests \
         serialize `wire::EntityBody` through serde_json into the same bytes) → \
         `wire::entity_from_json_str` \
         (deserializes `wire::ParsedEntity` and reads it with `wire::entity_from_parsed`, as \
         the backend reads replies) → `Entity::decode`; no `serde_json::Map` on the way. \
         Baseline: `serde_json::to_string` / `from_str` of the same struct with \
         `#[derive(Serialize, Deserialize)]`."
    ));
    Ok(())
}

// ------------------------------------------------------ 3. locked units of work

fn diff(after: &BTreeMap<Op, u64>, before: &BTreeMap<Op, u64>) -> BTreeMap<Op, u64> {
    after
        .iter()
        .filter(|(op, _)| !op.is_setup())
        .map(|(op, n)| (*op, n - before.get(op).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

fn fmt_counts(c: &BTreeMap<Op, u64>, per: u64) -> String {
    c.iter()
        .map(|(op, n)| {
            if n % per == 0 {
                format!("{op:?} {}", n / per)
            } else {
                format!("{op:?} {:.2}", *n as f64 / per as f64)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

async fn locked_units(env: &Env, report: &mut Report) -> Res<()> {
    const SECTION: &str = "3 locked units";
    let (store, counter) = env.counted_store();
    let samples = store.table::<Sample>();
    let audits = store.table::<Audit>();
    let run = Uuid::new_v4().simple().to_string();
    let pk = format!("unit-{run}");
    samples.insert(sample(&pk, "s", 0)).await?;
    audits
        .insert(Audit {
            pk: pk.clone(),
            rk: "a".into(),
            n: 0,
        })
        .await?;

    let one_table = |store: Store, pk: String| async move {
        let mut unit = store.lock(pk.as_str()).await.unwrap();
        let mut s = unit.get::<Sample>("s").await.unwrap().unwrap();
        s.count += 1;
        unit.replace(&s).unwrap();
        unit.commit().await.unwrap();
    };
    let two_tables = |store: Store, pk: String| async move {
        let mut unit = store.lock(pk.as_str()).await.unwrap();
        let mut s = unit.get::<Sample>("s").await.unwrap().unwrap();
        let mut a = unit.get::<Audit>("a").await.unwrap().unwrap();
        s.count += 1;
        a.n += 1;
        unit.replace(&s).unwrap();
        unit.replace(&a).unwrap();
        unit.commit().await.unwrap();
    };
    // Warm-up: creates the lock container and blob, warms the pools.
    for _ in 0..5 {
        one_table(store.clone(), pk.clone()).await;
        two_tables(store.clone(), pk.clone()).await;
    }

    let n = env.n(100) as u64;
    // The floor: the unit's own requests, one after another, sent straight
    // through the same backend with nothing in between, timed right next to
    // each unit.
    let backend = store.backend().clone();
    let container = ContainerName::new("bench-requests").unwrap();
    let blob = BlobName::new(format!("r-{run}")).unwrap();
    let (sample_table, audit_table) = (
        TableName::new(Sample::TABLE).unwrap(),
        TableName::new(Audit::TABLE).unwrap(),
    );
    backend.create_container(&container).await?;
    put_empty_blob(backend.as_ref(), &container, &blob).await?;
    let sample_op = TableOp::Replace(sample(&pk, "one", 0).encode()?, Precondition::Upsert);
    let audit_op = TableOp::Replace(
        Audit {
            pk: pk.clone(),
            rk: "one".into(),
            n: 0,
        }
        .encode()?,
        Precondition::Upsert,
    );
    let (pk_key, s_key, a_key) = (
        PartitionKey::new(pk.clone())?,
        RowKey::new("s")?,
        RowKey::new("a")?,
    );
    let floor_sequence = |tables: usize| {
        let (backend, container, blob) = (backend.clone(), container.clone(), blob.clone());
        let (sample_table, audit_table) = (sample_table.clone(), audit_table.clone());
        let (sample_op, audit_op) = (sample_op.clone(), audit_op.clone());
        let (pk_key, s_key, a_key) = (pk_key.clone(), s_key.clone(), a_key.clone());
        async move {
            let id = backend
                .acquire_lease(
                    &container,
                    &blob,
                    LeaseDuration::Seconds(15),
                    LeaseId::new_random(),
                )
                .await
                .unwrap();
            backend.get_blob(&container, &blob).await.unwrap();
            backend.get(&sample_table, &pk_key, &s_key).await.unwrap();
            if tables == 1 {
                backend
                    .batch(&sample_table, std::slice::from_ref(&sample_op))
                    .await
                    .unwrap();
            } else {
                backend.get(&audit_table, &pk_key, &a_key).await.unwrap();
                let journal = vec![b'j'; 1536];
                backend
                    .put_blob(
                        &container,
                        &blob,
                        journal,
                        &Metadata::new(),
                        &BlobConditions::leased(id),
                    )
                    .await
                    .unwrap();
                backend
                    .batch(&sample_table, std::slice::from_ref(&sample_op))
                    .await
                    .unwrap();
                backend
                    .batch(&audit_table, std::slice::from_ref(&audit_op))
                    .await
                    .unwrap();
                backend
                    .put_blob(
                        &container,
                        &blob,
                        Vec::new(),
                        &Metadata::new(),
                        &BlobConditions::leased(id),
                    )
                    .await
                    .unwrap();
            }
            backend.release_lease(&container, &blob, id).await.unwrap();
        }
    };
    for (label, budget, tables) in [("one table", 5u64, 1), ("two tables", 9u64, 2)] {
        let before = counter.snapshot();
        let mut unit_ms = Vec::new();
        for _ in 0..n {
            let unit = async {
                if tables == 1 {
                    one_table(store.clone(), pk.clone()).await
                } else {
                    two_tables(store.clone(), pk.clone()).await
                }
            };
            unit_ms.push(ms(timed(unit).await.0));
        }
        let counts = diff(&counter.snapshot(), &before);
        let per_unit = counts.values().sum::<u64>() as f64 / n as f64;
        // Interleave again with the floor now that the counts are taken.
        let (mut lh, mut floor_ms) = (Vec::new(), Vec::new());
        for i in 0..n {
            let unit = async {
                if tables == 1 {
                    one_table(store.clone(), pk.clone()).await
                } else {
                    two_tables(store.clone(), pk.clone()).await
                }
            };
            if i % 2 == 0 {
                lh.push(ms(timed(unit).await.0));
                floor_ms.push(ms(timed(floor_sequence(tables)).await.0));
            } else {
                floor_ms.push(ms(timed(floor_sequence(tables)).await.0));
                lh.push(ms(timed(unit).await.0));
            }
        }
        let floor = median(&floor_ms);
        report.row(
            SECTION,
            format!("cold unit, {label} (read {tables}, write {tables})"),
            format!("{:.3} ms", median(&lh)),
            format!("{floor:.3} ms = its {budget} requests back to back"),
            median(&lh) / floor,
            Some(1.10),
            None,
            "the unit's median exceeds its own requests sent back to back by more than the \
             bound: the time between them is leasehold's work (encoding, staging, the journal) \
             or waiting for one of the 2 shared cores, which Azurite also uses",
        );
        report.detail(format!(
            "Cold unit, {label}: {n} units counted, then {n} interleaved with the floor; \
             requests per unit {per_unit:.2} (budget {budget}): {}; unit p99 {:.3} ms, floor p99 \
             {:.3} ms. The floor sends the same kinds of request in the same order through the \
             same backend: lease acquire, lock-blob read, {} entity read(s), {}lease release.",
            fmt_counts(&counts, n),
            percentile(&lh, 0.99),
            percentile(&floor_ms, 0.99),
            tables,
            if tables == 1 {
                "one 1-operation batch, "
            } else {
                "a 1.5 KiB journal written under the lease, one 1-operation batch per table, \
                 the journal cleared, "
            }
        ));
        let _ = &unit_ms;
    }
    Ok(())
}

// ---------------------------------------------------------- 4. hot partition

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "BenchCounters")]
struct Counter {
    #[entity(partition_key)]
    pk: String,
    #[entity(row_key)]
    rk: String,
    n: i64,
}

struct HotResult {
    units: u64,
    elapsed: Duration,
    latencies_ms: Vec<f64>,
    per_task: Vec<u64>,
    requests: u64,
    failures: u64,
}

impl HotResult {
    fn per_sec(&self) -> f64 {
        self.units as f64 / self.elapsed.as_secs_f64()
    }
    fn fairness(&self) -> String {
        let min = self.per_task.iter().min().copied().unwrap_or(0);
        let max = self.per_task.iter().max().copied().unwrap_or(0);
        format!("units per task min {min} / max {max}")
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Hot {
    Leasehold,
    LeaseholdUnbounded,
    Optimistic,
    HandWritten,
}

/// `tasks` tasks doing read-modify-write on `partitions` partitions (task
/// `t` works on partition `t % partitions`) until `bound` has passed or each
/// has done `quota` units.
async fn hot(
    env: &Env,
    kind: Hot,
    tasks: usize,
    partitions: usize,
    bound: Duration,
    quota: usize,
) -> HotResult {
    let (store, counter) = if kind == Hot::LeaseholdUnbounded {
        // The same lock settings as the default (container, no owner
        // metadata) but with the hand-over fairness bound lifted.
        let backend = CountingBackend::new(
            AzureBackend::from_connection_string(&env.conn_str).expect("connection string"),
        );
        let counter = backend.counter();
        let options = LeaseOptions::default()
            .with_container(ContainerName::new(LockOptions::DEFAULT_CONTAINER).unwrap())
            .with_owner_metadata(false)
            .with_handover_limit(u32::MAX, Duration::from_secs(3600));
        let store = Store::builder(backend)
            .lock_lease_options(options)
            .build()
            .unwrap();
        (store, counter)
    } else {
        env.counted_store()
    };
    let counters = store.table::<Counter>();
    let run = Uuid::new_v4().simple().to_string();
    let pks: Vec<String> = (0..partitions).map(|p| format!("hot-{run}-{p}")).collect();
    for pk in &pks {
        counters
            .insert(Counter {
                pk: pk.clone(),
                rk: "c".into(),
                n: 0,
            })
            .await
            .unwrap();
    }
    let container = ContainerName::new("bench-hand-locks").unwrap();
    let backend = store.backend().clone();
    if kind == Hot::HandWritten {
        backend.create_container(&container).await.unwrap();
        for pk in &pks {
            let blob = BlobName::new(pk.clone()).unwrap();
            put_empty_blob(backend.as_ref(), &container, &blob)
                .await
                .unwrap();
        }
    }
    if matches!(kind, Hot::Leasehold | Hot::LeaseholdUnbounded) {
        // The lock container exists after one unit; do it before timing.
        for pk in &pks {
            let mut unit = store.lock(pk.as_str()).await.unwrap();
            let c = unit.get::<Counter>("c").await.unwrap().unwrap();
            unit.replace(&c).unwrap();
            unit.commit().await.unwrap();
        }
    }
    let before = counter.work();
    let failures = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let deadline = start + bound;
    let mut handles = Vec::new();
    for t in 0..tasks {
        let store = store.clone();
        let pk = pks[t % partitions].clone();
        let failures = failures.clone();
        let container = container.clone();
        handles.push(tokio::spawn(async move {
            let counters = store.table::<Counter>();
            let backend = store.backend().clone();
            let table = TableName::new(Counter::TABLE).unwrap();
            let pkey = PartitionKey::new(pk.clone()).unwrap();
            let rkey = RowKey::new("c").unwrap();
            let blob = BlobName::new(pk.clone()).unwrap();
            let mut lat = Vec::new();
            while Instant::now() < deadline && lat.len() < quota {
                let t0 = Instant::now();
                match kind {
                    Hot::Leasehold | Hot::LeaseholdUnbounded => {
                        let mut unit = store.lock(pk.as_str()).await.unwrap();
                        let mut c = unit.get::<Counter>("c").await.unwrap().unwrap();
                        c.n += 1;
                        unit.replace(&c).unwrap();
                        unit.commit().await.unwrap();
                    }
                    Hot::Optimistic => {
                        match counters.update_with(pk.as_str(), "c", |c| c.n += 1).await {
                            Ok(_) => {}
                            Err(e) if e.kind() == ErrorKind::Conflict => {
                                failures.fetch_add(1, Ordering::Relaxed);
                                continue;
                            }
                            Err(e) => panic!("{e}"),
                        }
                    }
                    Hot::HandWritten => {
                        // The pattern as people write it: try the lease, on
                        // 409 sleep a random 250 ms–1 s and try again.
                        let lease = loop {
                            match backend
                                .acquire_lease(
                                    &container,
                                    &blob,
                                    LeaseDuration::Seconds(30),
                                    LeaseId::new_random(),
                                )
                                .await
                            {
                                Ok(id) => break Some(id),
                                Err(e) if e.kind() == ErrorKind::LeaseHeld => {
                                    let wake = Instant::now()
                                        + random_between(
                                            Duration::from_millis(250),
                                            Duration::from_secs(1),
                                        );
                                    // Stop polling at the time bound.
                                    tokio::time::sleep_until(wake.min(deadline).into()).await;
                                    if wake >= deadline {
                                        break None;
                                    }
                                }
                                Err(e) => panic!("{e}"),
                            }
                        };
                        let Some(lease) = lease else { break };
                        let stored = backend.get(&table, &pkey, &rkey).await.unwrap().unwrap();
                        let mut c = Counter::decode(stored.data).unwrap();
                        c.n += 1;
                        let op = TableOp::Replace(
                            c.encode().unwrap(),
                            Precondition::IfMatch(stored.etag),
                        );
                        backend.execute(&table, &op).await.unwrap();
                        backend
                            .release_lease(&container, &blob, lease)
                            .await
                            .unwrap();
                    }
                }
                lat.push(ms(t0.elapsed()));
            }
            lat
        }));
    }
    let mut latencies_ms = Vec::new();
    let mut per_task = Vec::new();
    for h in handles {
        let lat = h.await.unwrap();
        per_task.push(lat.len() as u64);
        latencies_ms.extend(lat);
    }
    let elapsed = start.elapsed();
    let units = latencies_ms.len() as u64;
    // Correctness: every unit counted exactly once.
    let mut total = 0;
    for pk in &pks {
        total += counters.get(pk.as_str(), "c").await.unwrap().unwrap().n;
    }
    assert_eq!(total as u64, units, "lost or doubled updates");
    HotResult {
        units,
        elapsed,
        latencies_ms,
        per_task,
        requests: counter.work() - before,
        failures: failures.load(Ordering::Relaxed),
    }
}

/// Median of `n` simple gets now, as the SDK client does them.
async fn round_trip_now(env: &Env, n: usize) -> Res<Vec<f64>> {
    let pk = format!("rtt-{}", Uuid::new_v4().simple());
    let table = env.raw_table(Sample::TABLE);
    table
        .insert::<_, Json>(raw_json(&sample(&pk, "r", 0)))?
        .into_future()
        .await?;
    let client = table.partition_key_client(pk.as_str()).entity_client("r");
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let (d, r) = timed(client.get::<Map<String, Json>>().into_future()).await;
        r?;
        v.push(ms(d));
    }
    Ok(v)
}

async fn hot_partition(env: &Env, report: &mut Report) -> Res<()> {
    const SECTION: &str = "4 hot partition";
    // The round trip for the floors: gets right before and right after the
    // timed runs.
    let mut gets = round_trip_now(env, env.n(200)).await?;
    let bound = env.secs(10.0);
    let tasks = 16;
    // Interleave: leasehold, hand-written, optimistic, then leasehold again.
    let lh1 = hot(env, Hot::Leasehold, tasks, 1, bound / 2, usize::MAX).await;
    let hand = hot(env, Hot::HandWritten, tasks, 1, bound, usize::MAX).await;
    let opt = hot(env, Hot::Optimistic, tasks, 1, bound / 2, usize::MAX).await;
    let lh2 = hot(env, Hot::Leasehold, tasks, 1, bound / 2, usize::MAX).await;
    let unbounded = hot(
        env,
        Hot::LeaseholdUnbounded,
        tasks,
        1,
        bound / 2,
        usize::MAX,
    )
    .await;
    gets.extend(round_trip_now(env, env.n(200)).await?);
    let rtt = median(&gets);
    let lh = HotResult {
        units: lh1.units + lh2.units,
        elapsed: lh1.elapsed + lh2.elapsed,
        latencies_ms: [lh1.latencies_ms, lh2.latencies_ms].concat(),
        per_task: lh1
            .per_task
            .iter()
            .zip(&lh2.per_task)
            .map(|(a, b)| a + b)
            .collect(),
        requests: lh1.requests + lh2.requests,
        failures: 0,
    };
    let lh_rpu = lh.requests as f64 / lh.units as f64;
    report.row(
        SECTION,
        "leasehold lock vs hand-written lease loop (units/s)",
        format!("{:.0}/s", lh.per_sec()),
        format!("{:.1}/s", hand.per_sec()),
        lh.per_sec() / hand.per_sec(),
        None,
        Some(20.0),
        "in a closed loop the hand-written pattern is not throttled by its 250 ms–1 s \
         polling: the task that just released tries again at once and usually wins, so it \
         runs near its 4-request floor while the other tasks starve (units per task and p99 \
         latency in the details). leasehold serves the 16 tasks in FIFO order at 2 \
         requests per unit; the 20× goal assumed hand-written throughput bounded by the poll \
         interval, which holds only when holders do not immediately re-request",
    );
    let floor = 1e3 / (lh_rpu * rtt);
    report.row(
        SECTION,
        "leasehold lock vs floor 1/(requests per unit × round trip)",
        format!("{:.0}/s", lh.per_sec()),
        format!("{floor:.0}/s = 1/({lh_rpu:.2} × {rtt:.3} ms)"),
        lh.per_sec() / floor,
        None,
        Some(0.8),
        "by default a lease is handed over in-process at most 1000 times in a row; then it \
         is released and the next local task waits 1.25 × the poll interval so that pollers \
         in other processes get a turn; the row with the hand-over bound lifted shows the \
         throughput without that pause",
    );
    let ub_rpu = unbounded.requests as f64 / unbounded.units.max(1) as f64;
    let ub_floor = 1e3 / (ub_rpu * rtt);
    report.row(
        SECTION,
        "leasehold lock, hand-over bound lifted, vs floor",
        format!("{:.0}/s", unbounded.per_sec()),
        format!("{ub_floor:.0}/s = 1/({ub_rpu:.2} × {rtt:.3} ms)"),
        unbounded.per_sec() / ub_floor,
        None,
        Some(0.8),
        "units handed over in-process are serial by design (one holder at a time), the \
         commit is a multipart entity-group batch rather than the point read the round trip \
         is measured with (see 'Single requests' in the details), and 16 tasks share 2 \
         cores with Azurite itself",
    );
    report.row(
        SECTION,
        "leasehold lock, hand-over bound lifted, vs hand-written (units/s)",
        format!("{:.0}/s", unbounded.per_sec()),
        format!("{:.1}/s", hand.per_sec()),
        unbounded.per_sec() / hand.per_sec(),
        None,
        Some(20.0),
        "as above: the hand-written loop's releaser re-wins at once, so its throughput is \
         near the floor while the other tasks starve",
    );
    // Bursts: every task wants the lock once, at the same moment; the time
    // until all are done, alternating sides.
    let rounds = env.n(8);
    let (mut burst_lh, mut burst_hand) = (Vec::new(), Vec::new());
    let long = Duration::from_secs(120);
    for round in 0..rounds {
        let mut sides = [Hot::Leasehold, Hot::HandWritten];
        if round % 2 == 1 {
            sides.reverse();
        }
        for kind in sides {
            let r = hot(env, kind, tasks, 1, long, 1).await;
            assert_eq!(r.units, tasks as u64);
            match kind {
                Hot::Leasehold => burst_lh.push(ms(r.elapsed)),
                _ => burst_hand.push(ms(r.elapsed)),
            }
        }
    }
    report.row(
        SECTION,
        format!("burst of {tasks} tasks × 1 unit, time to finish: hand-written over leasehold"),
        format!("{:.1} ms", median(&burst_lh)),
        format!("{:.1} ms", median(&burst_hand)),
        median(&burst_hand) / median(&burst_lh),
        None,
        Some(20.0),
        "the hand-written waiters sleep 250 ms–1 s after each refusal, so a burst lasts \
         until the slowest waiter has woken to a free lease; leasehold hands the lease from \
         task to task in the process",
    );
    report.detail(format!(
        "Bursts: {rounds} rounds per side, alternating; {tasks} tasks start together, each \
         does one locked read-modify-write; time from the start to the last unit's end. \
         leasehold p50 {:.1} ms / max {:.1} ms; hand-written p50 {:.1} ms / max {:.1} ms.",
        median(&burst_lh),
        percentile(&burst_lh, 1.0),
        median(&burst_hand),
        percentile(&burst_hand, 1.0),
    ));
    let opt_rps = opt.requests as f64 / opt.units.max(1) as f64;
    let opt_floor = 1e3 / (2.0 * rtt);
    report.row(
        SECTION,
        "optimistic update_with vs floor 1/(2 × round trip)",
        format!("{:.0}/s", opt.per_sec()),
        format!("{opt_floor:.0}/s"),
        opt.per_sec() / opt_floor,
        None,
        None,
        "",
    );
    let p = |r: &HotResult, q: f64| percentile(&r.latencies_ms, q);
    report.row(
        SECTION,
        "unit latency p99, hand-written over leasehold",
        format!("{:.1} ms", p(&lh, 0.99)),
        format!("{:.1} ms", p(&hand, 0.99)),
        p(&hand, 0.99) / p(&lh, 0.99),
        None,
        None,
        "",
    );
    report.detail(format!(
        "Hot partition: round trip for the floors {rtt:.3} ms (median of simple gets just \
         before and after the timed runs). {tasks} tasks on one row, time-bound {:.0} s per side (leasehold in two \
         halves around the others, the variant with the hand-over bound lifted half of it). \
         leasehold with the hand-over bound lifted: {} units, \
         latency p50 {:.1} ms / p99 {:.1} ms, {}. leasehold (defaults): {} units, {lh_rpu:.2} requests per unit, unit \
         latency p50 {:.1} ms / p99 {:.1} ms, {}. Hand-written (acquire a 30 s lease; on 409 \
         sleep random 250 ms–1 s; get; conditional replace; release, over leasehold's \
         `BlobBackend`/`TableBackend` directly): {} units, {:.2} requests per unit (409s \
         included), latency p50 {:.1} ms / p99 {:.1} ms, {}. Optimistic `update_with`: {} \
         successes, {} gave up after the retry policy's attempts, {opt_rps:.2} requests per \
         success, latency p50 {:.1} ms / p99 {:.1} ms, {}. Every side's final counter equals \
         its unit count (no lost updates).",
        bound.as_secs_f64(),
        unbounded.units,
        p(&unbounded, 0.5),
        p(&unbounded, 0.99),
        unbounded.fairness(),
        lh.units,
        p(&lh, 0.5),
        p(&lh, 0.99),
        lh.fairness(),
        hand.units,
        hand.requests as f64 / hand.units.max(1) as f64,
        p(&hand, 0.5),
        p(&hand, 0.99),
        hand.fairness(),
        opt.units,
        opt.failures,
        p(&opt, 0.5),
        p(&opt, 0.99),
        opt.fairness(),
    ));

    // Scaling with the number of partitions: four tasks per partition, so
    // that units are handed over in-process as in the hot-partition case.
    let mut points = Vec::new();
    let mut rates = Vec::new();
    for parts in [1usize, 4, 16, 64] {
        let tasks = 4 * parts;
        let r = hot(env, Hot::Leasehold, tasks, parts, env.secs(3.0), usize::MAX).await;
        report.detail(format!(
            "Scaling: {parts} partition(s), {tasks} tasks: {:.0} units/s ({:.2} requests per \
             unit, {:.0} requests/s to Azurite), {}.",
            r.per_sec(),
            r.requests as f64 / r.units.max(1) as f64,
            r.requests as f64 / r.elapsed.as_secs_f64(),
            r.fairness()
        ));
        points.push((parts, r.per_sec()));
        rates.push(r.requests as f64 / r.elapsed.as_secs_f64());
    }
    let peak = points
        .iter()
        .zip(&rates)
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(p, r)| (p.0, *r))
        .unwrap_or((0, 0.0));
    // Saturation: the first point within 10 % of the best throughput; more
    // partitions beyond it add little.
    let best = points.iter().map(|p| p.1).fold(0.0, f64::max);
    let saturated = points.iter().position(|p| p.1 >= 0.9 * best);
    report.detail(format!(
        "Scaling: the lock blobs of every partition exist before timing. Azurite is one \
         Node.js process on the same 2 shared cores, so the curve shows its request capacity \
         as much as leasehold's: the request rate it served peaked at {} partition(s) \
         ({:.0} requests/s) and is given for each point above. The chart marks saturation \
         at the first point within 10 % of the best throughput: {}.",
        peak.0,
        peak.1,
        saturated.map_or("none".into(), |i| format!(
            "{} partition(s), {:.0} requests/s",
            points[i].0, rates[i]
        ))
    ));
    report.svg = Some(svg_chart(&points, saturated.map(|i| (i, rates[i]))));
    Ok(())
}

/// The line chart of `points` (partitions, units/s), with a dashed marker at
/// index `saturated` labelled with the request rate Azurite served there.
fn svg_chart(points: &[(usize, f64)], saturated: Option<(usize, f64)>) -> String {
    let (w, h, left, bottom, top, right) = (480.0, 300.0, 60.0, 40.0, 30.0, 20.0);
    let max = points.iter().map(|p| p.1).fold(1.0, f64::max) * 1.1;
    let n = points.len() as f64;
    let x = |i: usize| left + (w - left - right) * (i as f64 + 0.5) / n;
    let y = |v: f64| h - bottom - (h - bottom - top) * v / max;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"18\" text-anchor=\"middle\">leasehold locked units/s, 4 tasks per partition (Azurite)</text>\n\
         <line x1=\"{left}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n\
         <line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{}\" stroke=\"black\"/>\n",
        w / 2.0,
        h - bottom,
        w - right,
        h - bottom,
        h - bottom
    );
    for k in 0..=4 {
        let v = max * k as f64 / 4.0;
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{v:.0}</text>",
            left - 6.0,
            y(v) + 4.0
        );
    }
    let mut path = String::new();
    for (i, (parts, v)) in points.iter().enumerate() {
        let _ = write!(
            path,
            "{}{:.1},{:.1} ",
            if i == 0 { "M" } else { "L" },
            x(i),
            y(*v)
        );
        let _ = writeln!(
            s,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"steelblue\"/>\n\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{v:.0}</text>\n\
             <text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{parts}</text>",
            x(i),
            y(*v),
            x(i),
            y(*v) - 8.0,
            x(i),
            h - bottom + 16.0
        );
    }
    if let Some((i, rate)) = saturated {
        let _ = writeln!(
            s,
            "<line x1=\"{0:.1}\" y1=\"{top}\" x2=\"{0:.1}\" y2=\"{1}\" stroke=\"firebrick\" \
             stroke-dasharray=\"4 3\"/>\n\
             <text x=\"{2:.1}\" y=\"{3:.1}\" text-anchor=\"{4}\" fill=\"firebrick\">Azurite \
             saturates (~{rate:.0} req/s)</text>",
            x(i),
            h - bottom,
            // The label goes on the side with more room.
            if x(i) < w / 2.0 {
                x(i) + 6.0
            } else {
                x(i) - 6.0
            },
            // Near the axis, below the points.
            h - bottom - 8.0,
            if x(i) < w / 2.0 { "start" } else { "end" },
        );
    }
    let _ = writeln!(
        s,
        "<path d=\"{}\" fill=\"none\" stroke=\"steelblue\" stroke-width=\"2\"/>\n\
         <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">partitions</text>\n</svg>",
        path.trim_end(),
        w / 2.0,
        h - 6.0
    );
    s
}

// ------------------------------------- 5. lease hand-off between processes

/// How a waiting process takes a lease.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Waiter {
    /// `store.leases().acquire(name, timeout)`.
    Leasehold,
    /// acquire; on 409 sleep random 250 ms–1 s; repeat.
    Random,
}

fn unix_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

fn handoff_container() -> ContainerName {
    ContainerName::new("bench-handoff").unwrap()
}

/// Acquires by the hand-written pattern; returns the lease id and the number
/// of acquire requests.
async fn acquire_randomly(store: &Store, blob: &BlobName) -> (LeaseId, u64) {
    let mut polls = 0;
    loop {
        polls += 1;
        match store
            .backend()
            .acquire_lease(
                &handoff_container(),
                blob,
                LeaseDuration::Seconds(30),
                LeaseId::new_random(),
            )
            .await
        {
            Ok(id) => return (id, polls),
            Err(e) if e.kind() == ErrorKind::LeaseHeld => {
                tokio::time::sleep(random_between(
                    Duration::from_millis(250),
                    Duration::from_secs(1),
                ))
                .await;
            }
            Err(e) => panic!("{e}"),
        }
    }
}

/// The waiting process: on each `go` line from the parent, waits for the
/// lease, takes it, gives it back, and prints when it got it (Unix time in
/// ns), its acquire requests and how long it waited.
async fn handoff_child(mode: Waiter, name: String) -> Res<()> {
    use tokio::io::AsyncBufReadExt as _;
    let conn_str = std::env::var("LEASEHOLD_TEST_AZURITE")?;
    let backend = CountingBackend::new(AzureBackend::from_connection_string(&conn_str)?);
    let counter = backend.counter();
    // Like the hand-written waiter, only take the lease: no owner metadata
    // (on by default for general leases, off for partition locks).
    let store = Store::builder(backend)
        .lease_options(LeaseOptions::default().with_owner_metadata(false))
        .build()?;
    let blob = BlobName::new(name.clone())?;
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = lines.next_line().await? {
        if line != "go" {
            break;
        }
        let start = Instant::now();
        let (got, polls) = match mode {
            Waiter::Leasehold => {
                let before = counter.get(Op::AcquireLease);
                let guard = store
                    .leases()
                    .acquire(&name, Duration::from_secs(60))
                    .await?;
                let got = unix_nanos();
                let polls = counter.get(Op::AcquireLease) - before;
                guard.release().await?;
                (got, polls)
            }
            Waiter::Random => {
                let (id, polls) = acquire_randomly(&store, &blob).await;
                let got = unix_nanos();
                store
                    .backend()
                    .release_lease(&handoff_container(), &blob, id)
                    .await?;
                (got, polls)
            }
        };
        println!("{got} {polls} {}", start.elapsed().as_secs_f64());
    }
    Ok(())
}

struct Child {
    mode: Waiter,
    name: String,
    process: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    latencies_ms: Vec<f64>,
    polls: u64,
    waited: f64,
}

async fn handoff(env: &Env, report: &mut Report) -> Res<()> {
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
    const SECTION: &str = "5 lease hand-off";
    let store = Store::connect(&env.conn_str)?;
    let run = Uuid::new_v4().simple().to_string();
    store
        .backend()
        .create_container(&handoff_container())
        .await?;
    let mut children = Vec::new();
    for mode in [Waiter::Leasehold, Waiter::Random] {
        let name = format!("handoff-{run}-{mode:?}").to_lowercase();
        if mode == Waiter::Random {
            let blob = BlobName::new(name.clone())?;
            put_empty_blob(store.backend().as_ref(), &handoff_container(), &blob).await?;
        }
        let mut process = tokio::process::Command::new(std::env::current_exe()?)
            .env("LEASEHOLD_BENCH_CHILD", format!("{mode:?}"))
            .env("LEASEHOLD_BENCH_LEASE", &name)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdin = process.stdin.take().ok_or("no stdin")?;
        let stdout = tokio::io::BufReader::new(process.stdout.take().ok_or("no stdout")?).lines();
        children.push(Child {
            mode,
            name,
            process,
            stdin,
            stdout,
            latencies_ms: Vec::new(),
            polls: 0,
            waited: 0.0,
        });
    }
    // What taking a free lease costs, with and without the owner metadata
    // written after the acquire.
    let bare = Store::builder(AzureBackend::from_connection_string(&env.conn_str)?)
        .lease_options(LeaseOptions::default().with_owner_metadata(false))
        .build()?;
    let (mut free, mut free_bare) = (Vec::new(), Vec::new());
    for _ in 0..20 {
        let name = format!("handoff-{run}-free");
        let (d, g) = timed(store.leases().acquire(&name, Duration::from_secs(60))).await;
        free.push(ms(d));
        g?.release().await?;
        let (d, g) = timed(bare.leases().acquire(&name, Duration::from_secs(60))).await;
        free_bare.push(ms(d));
        g?.release().await?;
    }
    // leasehold's waiter every round, the hand-written one every fourth (its
    // rounds take longer; its median needs fewer samples to be far off).
    let rounds = env.n(160);
    // Holds of random length, so that the release falls at a random point
    // of the waiter's polling cycle.
    let (hold_min, hold_max) = (Duration::from_millis(150), Duration::from_millis(450));
    for round in 0..rounds {
        let order: &[usize] = match round % 8 {
            0 => &[0, 1],
            4 => &[1, 0],
            _ => &[0],
        };
        for &i in order {
            let c = &mut children[i];
            // This process holds the lease while the child waits for it.
            let (guard, blob_lease) = match c.mode {
                Waiter::Leasehold => (
                    Some(
                        store
                            .leases()
                            .acquire(&c.name, Duration::from_secs(60))
                            .await?,
                    ),
                    None,
                ),
                Waiter::Random => {
                    let blob = BlobName::new(c.name.clone())?;
                    (None, Some((acquire_randomly(&store, &blob).await.0, blob)))
                }
            };
            c.stdin.write_all(b"go\n").await?;
            c.stdin.flush().await?;
            tokio::time::sleep(random_between(hold_min, hold_max)).await;
            if let Some(g) = guard {
                g.release().await?;
            }
            if let Some((id, blob)) = blob_lease {
                store
                    .backend()
                    .release_lease(&handoff_container(), &blob, id)
                    .await?;
            }
            let released = unix_nanos();
            let line = c.stdout.next_line().await?.ok_or("child exited")?;
            let mut f = line.split_whitespace();
            let got: u128 = f.next().ok_or("bad line")?.parse()?;
            c.polls += f.next().ok_or("bad line")?.parse::<u64>()?;
            c.waited += f.next().ok_or("bad line")?.parse::<f64>()?;
            c.latencies_ms
                .push(got.saturating_sub(released) as f64 / 1e6);
        }
    }
    for c in &mut children {
        c.stdin.write_all(b"quit\n").await?;
        c.stdin.flush().await?;
        c.process.wait().await?;
    }
    let (lh, rnd) = (&children[0], &children[1]);
    // Retries per second of waiting: the first attempt of each wait is the
    // acquire itself, the rest is the load a waiter puts on the service.
    let rate = |c: &Child| (c.polls - c.latencies_ms.len() as u64) as f64 / c.waited;
    let p = |c: &Child, q: f64| percentile(&c.latencies_ms, q);
    let (p50, polls) = (p(lh, 0.5), rate(lh));
    report.row_with_goal(
        SECTION,
        "hand-off latency p50, leasehold acquire vs random 250 ms–1 s polling",
        format!("{p50:.0} ms"),
        format!("{:.0} ms", p(rnd, 0.5)),
        p50 / p(rnd, 0.5),
        "≤ 60 ms".into(),
        p50 <= 60.0,
        "a waiter in another process learns of the release only by polling; at one poll \
         per interval the wait after a release is spread evenly over the interval, so its \
         median is about half the interval (50 ms by default) plus one request, and this \
         run's sample median landed above the bound",
    );
    report.row(
        SECTION,
        "hand-off latency p99, leasehold acquire vs random 250 ms–1 s polling",
        format!("{:.0} ms", p(lh, 0.99)),
        format!("{:.0} ms", p(rnd, 0.99)),
        p(lh, 0.99) / p(rnd, 0.99),
        None,
        None,
        "",
    );
    report.row_with_goal(
        SECTION,
        "polls/s per waiter while the lease is held",
        format!("{polls:.2}/s"),
        format!("{:.2}/s", rate(rnd)),
        polls / rate(rnd),
        "≤ 10/s".into(),
        polls <= 10.0,
        "one poll per interval (100 ms ± 10 %) plus the poll's own round trip stays under \
         10 per second; more means pauses were cut short",
    );
    report.detail(format!(
        "Lease hand-off requests: leasehold {:.2} acquire requests per hand-off, hand-written \
         {:.2}. Taking a free lease with leasehold: median {:.2} ms (the acquire alone), \
         {:.2} ms with the owner metadata that general leases write by default (a blob read \
         and a metadata write). Latencies: leasehold p25 {:.0} ms / p75 {:.0} ms.",
        lh.polls as f64 / lh.latencies_ms.len() as f64,
        rnd.polls as f64 / rnd.latencies_ms.len() as f64,
        median(&free_bare),
        median(&free),
        p(lh, 0.25),
        p(lh, 0.75),
    ));
    report.detail(format!(
        "Lease hand-off: {} rounds with leasehold's waiter and {} with the hand-written one, \
         interleaved; a second process waits while this one holds the lease for a random \
         {:.2}–{:.2} s, then releases it; latency is from the release's reply to the waiter \
         holding the lease (same machine clock). Both waiters only take the lease (leasehold \
         without its default owner metadata, which the hand-written side has no counterpart \
         for). leasehold waits with `leases().acquire` (its default poll interval, {} ms ± 10 %); \
         polls per second are the waiter's acquire requests after the first of each wait, \
         over the time it waited. The hand-written waiter sleeps a random 250 ms–1 s after \
         each refused acquire.",
        lh.latencies_ms.len(),
        rnd.latencies_ms.len(),
        hold_min.as_secs_f64(),
        hold_max.as_secs_f64(),
        leasehold::lease::LeaseOptions::DEFAULT_POLL_INTERVAL.as_millis()
    ));
    Ok(())
}

// ------------------------------------------------------ 5. memory vs Azurite

async fn memory_vs_azurite(env: &Env, report: &mut Report) -> Res<()> {
    const SECTION: &str = "5 memory backend";
    let mem = Store::memory();
    let az = Store::connect(&env.conn_str)?;
    let run = Uuid::new_v4().simple().to_string();
    let pk = format!("mem-{run}");
    let mem_t = mem.table::<Sample>();
    let az_t = az.table::<Sample>();
    let mut mem_cur = mem_t.insert(sample(&pk, "r", 0)).await?;
    let mut az_cur = az_t.insert(sample(&pk, "r", 0)).await?;
    let (n_mem, n_az) = (env.n(20_000), env.n(200));
    let rate = |n: usize, d: Duration| n as f64 / d.as_secs_f64();

    let mut reads = [0.0; 2];
    let mut writes = [0.0; 2];
    for round in 0..2 {
        let (d, _) = timed(async {
            for _ in 0..n_mem {
                std::hint::black_box(mem_t.get(pk.as_str(), "r").await.unwrap());
            }
        })
        .await;
        reads[0] += rate(n_mem, d) / 2.0;
        let (d, _) = timed(async {
            for _ in 0..n_az {
                std::hint::black_box(az_t.get(pk.as_str(), "r").await.unwrap());
            }
        })
        .await;
        reads[1] += rate(n_az, d) / 2.0;
        let (d, _) = timed(async {
            for i in 0..n_mem {
                let mut next = mem_cur.clone();
                next.count = (i + round) as i32;
                mem_cur = mem_t.replace_owned(next).await.unwrap();
            }
        })
        .await;
        writes[0] += rate(n_mem, d) / 2.0;
        let (d, _) = timed(async {
            for i in 0..n_az {
                let mut next = az_cur.clone();
                next.count = (i + round) as i32;
                az_cur = az_t.replace_owned(next).await.unwrap();
            }
        })
        .await;
        writes[1] += rate(n_az, d) / 2.0;
    }
    let why = "the memory backend keeps the service's semantics, not just a map: every \
               write encodes the 12-field entity and checks it against the service's limits \
               (about a third of a write's time), then stores it with a fresh ETag and \
               Timestamp; every read copies the stored properties out and decodes them into \
               the struct. Those steps cost about 1 µs per write and 0.8 µs per read; 1000× \
               Azurite would need about half that. Azurite's own rate also varies from run \
               to run on this shared machine (from about 1k to 2.6k requests/s), which moves \
               the ratio as much as leasehold does";
    report.row(
        SECTION,
        "point reads/s, memory vs Azurite",
        format!("{:.0}/s", reads[0]),
        format!("{:.0}/s", reads[1]),
        reads[0] / reads[1],
        None,
        Some(1000.0),
        why,
    );
    report.row(
        SECTION,
        "conditional writes/s, memory vs Azurite",
        format!("{:.0}/s", writes[0]),
        format!("{:.0}/s", writes[1]),
        writes[0] / writes[1],
        None,
        Some(1000.0),
        why,
    );
    report.detail(format!(
        "Memory backend: {n_mem} operations per round against {n_az} on Azurite, two rounds \
         alternating, same `Table<E>` code on both."
    ));
    Ok(())
}

// --------------------------------------------------------------------- main

#[tokio::main]
async fn main() -> Res<()> {
    if let Ok(mode) = std::env::var("LEASEHOLD_BENCH_CHILD") {
        let mode = if mode == "Leasehold" {
            Waiter::Leasehold
        } else {
            Waiter::Random
        };
        return handoff_child(mode, std::env::var("LEASEHOLD_BENCH_LEASE")?).await;
    }
    let conn_str = std::env::var("LEASEHOLD_TEST_AZURITE")
        .map_err(|_| "LEASEHOLD_TEST_AZURITE is not set: run scripts/bench.sh")?;
    let scale = std::env::var("LEASEHOLD_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .unwrap_or(1.0);
    let conn = parse_connection_string(&conn_str);
    let env = Env {
        raw: raw_service(&conn),
        conn_str,
        scale,
    };
    env.raw
        .table_client(Sample::TABLE)
        .create()
        .into_future()
        .await
        .ok();
    // `LEASEHOLD_BENCH_ONLY=codec,handoff` runs only the named sections
    // (per-op, codec, units, hot, memory, handoff).
    let only = std::env::var("LEASEHOLD_BENCH_ONLY").ok();
    let run = |section: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|s| s.trim() == section))
    };
    let started = Instant::now();
    let mut report = Report::default();
    let rtt = if run("per-op") {
        per_operation(&env, &mut report).await?
    } else {
        median(&round_trip_now(&env, 50).await?)
    };
    if run("codec") {
        codec(&env, &mut report, rtt)?;
    }
    if run("units") {
        locked_units(&env, &mut report).await?;
    }
    if run("hot") {
        hot_partition(&env, &mut report).await?;
    }
    if run("memory") {
        memory_vs_azurite(&env, &mut report).await?;
    }
    if run("handoff") {
        handoff(&env, &mut report).await?;
    }
    report.detail(format!(
        "Scale {scale}; whole benchmark {:.0} s.",
        started.elapsed().as_secs_f64()
    ));

    let mut md = report.markdown();
    if let Some(svg) = &report.svg {
        let path = std::env::var("LEASEHOLD_BENCH_SVG").unwrap_or_else(|_| "scaling.svg".into());
        std::fs::write(&path, svg)?;
        let _ = writeln!(
            md,
            "\n![locked units per second by partitions]({})",
            path.rsplit('/').next().unwrap_or("scaling.svg")
        );
    }
    match std::env::var("LEASEHOLD_BENCH_OUT") {
        Ok(path) => std::fs::write(path, md)?,
        Err(_) => print!("{md}"),
    }
    Ok(())
}
