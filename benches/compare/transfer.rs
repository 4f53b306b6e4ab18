//! Section 9, export and import: `Table::export` (pages read through the
//! table's resolving path, each row written as a JSON line) against raw
//! paging of the same table (each page's JSON objects written back as
//! lines with serde_json), and `Store::import` (lines read back, rows
//! written in 100-operation transactions per partition) against raw
//! 100-operation upsert batches of the same lines parsed by serde_json.
//! Both import sides keep the same number of transactions in flight.

use futures_util::{StreamExt as _, TryStreamExt as _};
use leasehold::store::ImportOptions;
use leasehold::{DynamicEntity, Store};
use serde_json::Value as Json;
use uuid::Uuid;

use crate::Res;
use crate::report::Report;
use crate::setup::{Env, abab, raw_json, sample};
use crate::stats::median;

const SOURCE: &str = "BenchExport";
const TARGET: &str = "BenchImport";
const PARTITIONS: usize = 10;
/// Transactions in flight on both import sides.
const IN_FLIGHT: usize = 4;

pub(crate) async fn transfer(env: &Env, report: &mut Report) -> Res<()> {
    let rows = env.n(5000);
    let store = Store::connect(&env.conn_str)?;
    env.raw.create_table(SOURCE).await?;
    env.raw.create_table(TARGET).await?;
    // The source: `rows` samples over 10 partitions, 100 a transaction.
    let run = Uuid::new_v4().simple().to_string();
    for p in 0..PARTITIONS {
        let pk = format!("x{}-{p}", &run[..8]);
        let bodies: Vec<(String, Json)> = (0..rows / PARTITIONS)
            .map(|i| {
                let rk = format!("r{i:06}");
                let body = raw_json(&sample(&pk, &rk, i as i64));
                (rk, body)
            })
            .collect();
        for chunk in bodies.chunks(100) {
            env.raw.upsert_batch(SOURCE, &pk, chunk).await?;
        }
    }
    let table = store.dynamic_table(SOURCE);
    let (lines, raw_lines) = (
        std::cell::RefCell::new(String::new()),
        std::cell::RefCell::new(String::new()),
    );
    let rounds = env.n(6);
    let (lh, raw) = abab(
        rounds,
        |_| {
            let table = table.clone();
            let lines = &lines;
            async move {
                let mut out = String::new();
                let mut pages = std::pin::pin!(table.export());
                while let Some(page) = pages.try_next().await.expect("export page") {
                    for row in &page.items {
                        out.push_str(&row.to_json_line().expect("line"));
                        out.push('\n');
                    }
                }
                *lines.borrow_mut() = out;
            }
        },
        |_| {
            let raw_lines = &raw_lines;
            async move {
                let mut out = String::new();
                let mut from = None;
                loop {
                    let (page, next) = env.raw.page(SOURCE, from.as_ref()).await.expect("page");
                    for mut row in page {
                        row.retain(|k, _| !k.starts_with("odata.") && !k.starts_with("Timestamp"));
                        out.push_str(&serde_json::to_string(&row).expect("line"));
                        out.push('\n');
                    }
                    match next {
                        Some(next) => from = Some(next),
                        None => break,
                    }
                }
                *raw_lines.borrow_mut() = out;
            }
        },
    )
    .await;
    let lines = lines.into_inner();
    let n = lines.lines().count();
    assert_eq!(
        n,
        raw_lines.into_inner().lines().count(),
        "both sides read every row"
    );
    let (lh_rate, raw_rate) = (n as f64 / median(&lh) * 1e3, n as f64 / median(&raw) * 1e3);
    report.row(
        "export",
        format!("export of {n} rows (10 partitions) to JSON lines, rows/s"),
        format!("{lh_rate:.0}"),
        format!("{raw_rate:.0} (raw paging)"),
        lh_rate / raw_rate,
        None,
        Some(0.9),
        "export reads through the table's resolving path and writes each row with its EDM annotations",
    );

    // Import: the export's lines into another table, as upserts (each
    // round writes the same rows again).
    let (lh, raw) = abab(
        rounds,
        |_| {
            let store = store.clone();
            let lines = lines.clone();
            async move {
                let rows = lines
                    .lines()
                    .map(DynamicEntity::from_json_line)
                    .collect::<Vec<_>>();
                let mut reports = std::pin::pin!(store.import(
                    TARGET,
                    futures_util::stream::iter(rows),
                    ImportOptions::upsert().with_concurrency(IN_FLIGHT)
                ));
                while let Some(r) = reports.next().await {
                    r.expect("import");
                }
            }
        },
        |_| {
            let lines = &lines;
            async move {
                // Parsed, grouped by partition in input order, 100 a batch.
                let mut batches: Vec<(String, Vec<(String, Json)>)> = Vec::new();
                for line in lines.lines() {
                    let json: Json = serde_json::from_str(line).expect("json");
                    let pk = json["PartitionKey"].as_str().expect("pk").to_owned();
                    let rk = json["RowKey"].as_str().expect("rk").to_owned();
                    match batches.last_mut() {
                        Some((p, ops)) if *p == pk && ops.len() < 100 => ops.push((rk, json)),
                        _ => batches.push((pk, vec![(rk, json)])),
                    }
                }
                futures_util::stream::iter(batches)
                    .map(|(pk, ops)| async move { env.raw.upsert_batch(TARGET, &pk, &ops).await })
                    .buffered(IN_FLIGHT)
                    .try_collect::<Vec<()>>()
                    .await
                    .expect("raw batches");
            }
        },
    )
    .await;
    let (lh_rate, raw_rate) = (n as f64 / median(&lh) * 1e3, n as f64 / median(&raw) * 1e3);
    report.row(
        "import",
        format!("import of {n} rows (10 partitions) from JSON lines, upsert, {IN_FLIGHT} transactions in flight, rows/s"),
        format!("{lh_rate:.0}"),
        format!("{raw_rate:.0} (raw 100-operation batches)"),
        lh_rate / raw_rate,
        None,
        Some(0.9),
        "import checks every row against the service's limits before sending it",
    );
    report.detail(format!(
        "Export and import: {n} rows of the 12-field sample over {PARTITIONS} partitions, {rounds} rounds a side, medians; export includes writing the lines, import includes reading them."
    ));
    Ok(())
}
