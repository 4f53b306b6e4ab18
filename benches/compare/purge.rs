//! Section 7, purge: `Table::purge` of the rows of 8 partitions (250 rows
//! each, 2,000 in all) against the same purge written on the backend: a
//! keys-only query followed page after page, then the deletes in
//! transactions of 100 at the ETag read, 8 in flight, through the same
//! store's backend.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures_util::{StreamExt as _, TryStreamExt as _, stream};
use leasehold::backend::{Backend, QuerySpec, TableOp};
use leasehold::entity::Entity as _;
use leasehold::query::{CmpOp, Filter};
use leasehold::testing::RequestCounter;
use leasehold::{PartitionKey, TableName};
use uuid::Uuid;

use crate::Res;
use crate::report::Report;
use crate::setup::{Env, Sample, a_first, sample, timed};
use crate::stats::{median, ms};

const PARTITIONS: usize = 8;
const ROWS: usize = 250;
const IN_FLIGHT: usize = 8;

/// The partitions of one side of one round: `{tag}-0` to `{tag}-7`.
async fn fill(table: &leasehold::Table<Sample>, tag: &str) -> Res<()> {
    for p in 0..PARTITIONS {
        let pk = format!("{tag}-{p}");
        for chunk in (0..ROWS).collect::<Vec<_>>().chunks(100) {
            let mut batch = table.batch();
            for &i in chunk {
                batch = batch.upsert(sample(&pk, &format!("{i:04}"), i as i64));
            }
            batch.commit().await?;
        }
    }
    Ok(())
}

/// The partition keys of `tag`'s partitions, as a filter.
fn partitions_of(tag: &str) -> Filter {
    let pk =
        |op, v: String| Filter::compare("PartitionKey", op, leasehold::entity::Value::String(v));
    pk(CmpOp::Ge, format!("{tag}-")).and(pk(CmpOp::Lt, format!("{tag}.")))
}

/// The purge written on the backend: every key first, then the deletes.
async fn raw_purge(backend: &Arc<dyn Backend>, table: &TableName, filter: Filter) -> Res<u64> {
    let mut spec = QuerySpec {
        filter: Some(filter),
        select: Some(Vec::new()),
        ..QuerySpec::default()
    };
    let mut groups: BTreeMap<PartitionKey, Vec<TableOp>> = BTreeMap::new();
    loop {
        let page = backend.query(table, &spec).await?;
        for row in page.entities {
            groups
                .entry(row.data.partition_key.clone())
                .or_default()
                .push(TableOp::Delete {
                    partition_key: row.data.partition_key,
                    row_key: row.data.row_key,
                    condition: leasehold::backend::Precondition::IfMatch(row.etag),
                });
        }
        match page.continuation {
            Some(at) => spec.continuation = Some(at),
            None => break,
        }
    }
    let batches: Vec<Vec<TableOp>> = groups
        .into_values()
        .flat_map(|ops| ops.chunks(100).map(<[TableOp]>::to_vec).collect::<Vec<_>>())
        .collect();
    let deleted = batches.iter().map(Vec::len).sum::<usize>() as u64;
    stream::iter(batches)
        .map(|ops| async move { backend.batch(table, &ops).await })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(deleted)
}

fn work(counter: &RequestCounter, before: &BTreeMap<leasehold::backend::Op, u64>) -> u64 {
    counter
        .snapshot()
        .iter()
        .filter(|(op, _)| !op.is_setup())
        .map(|(op, n)| n - before.get(op).copied().unwrap_or(0))
        .sum()
}

pub(crate) async fn purge(env: &Env, report: &mut Report) -> Res<()> {
    const SECTION: &str = "7 purge";
    let (store, counter) = env.counted_store();
    let table = store.table::<Sample>();
    let name = TableName::new(Sample::TABLE)?;
    let run = Uuid::new_v4().simple().to_string();
    let total = (PARTITIONS * ROWS) as u64;
    let c = Sample::columns();
    // Warm-up: the table, the pools.
    fill(&table, &format!("pw{run}")).await?;
    table
        .purge(
            table
                .query()
                .filter(c.pk.ge(format!("pw{run}-")) & c.pk.lt(format!("pw{run}."))),
        )
        .await?;

    let n = env.n(10);
    let (mut lh_ms, mut raw_ms) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut lh_requests, mut raw_requests) = (0, 0);
    for i in 0..n {
        let (lh_tag, raw_tag) = (format!("pl{i}{run}"), format!("pr{i}{run}"));
        fill(&table, &lh_tag).await?;
        fill(&table, &raw_tag).await?;
        for leasehold_side in if a_first(i) {
            [true, false]
        } else {
            [false, true]
        } {
            let before = counter.snapshot();
            if leasehold_side {
                let query = table
                    .query()
                    .filter(c.pk.ge(format!("{lh_tag}-")) & c.pk.lt(format!("{lh_tag}.")));
                let (took, purged) = timed(table.purge(query)).await;
                let purged = purged?;
                assert_eq!(purged.deleted, total, "{purged:?}");
                lh_ms.push(ms(took));
                lh_requests = work(&counter, &before);
            } else {
                let (took, deleted) =
                    timed(raw_purge(store.backend(), &name, partitions_of(&raw_tag))).await;
                assert_eq!(deleted?, total);
                raw_ms.push(ms(took));
                raw_requests = work(&counter, &before);
            }
        }
    }
    let (lh_m, raw_m) = (median(&lh_ms), median(&raw_ms));
    let rate = |m: f64| total as f64 / (m / 1000.0);
    report.row(
        SECTION,
        format!(
            "purge of {total} rows in {PARTITIONS} partitions vs raw batched deletes (throughput)"
        ),
        format!(
            "{lh_m:.0} ms, {:.0} rows/s, {lh_requests} requests",
            rate(lh_m)
        ),
        format!(
            "{raw_m:.0} ms, {:.0} rows/s, {raw_requests} requests",
            rate(raw_m)
        ),
        raw_m / lh_m,
        None,
        Some(0.9),
        "",
    );
    report.detail(format!(
        "Purge: {n} rounds each side, sides interleaved in tossed order; both read keys only \
         (`$select` of no property) and send transactions of 100 deletes at the ETag read, \
         {IN_FLIGHT} in flight; the baseline reads every key before its first delete, \
         leasehold deletes while it reads on."
    ));
    Ok(())
}
