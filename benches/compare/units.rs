//! Section 3, locked units of work: the requests and latency of one- and two-table
//! units, against the same requests sent one after another (their floor); a
//! cold unit of 1,000 inserts in one partition of one table, against its
//! floor and against ten plain 100-operation batches; and cold units across
//! two and four partitions (`Store::lock_many`), against their floor and
//! against the hand-written pattern (a lease and one transaction per
//! partition: neither atomic nor crash-safe); then transactions without a
//! lease across two partitions (`txn.rs`).

use leasehold::backend::WriteOptions;
use std::collections::BTreeMap;

use leasehold::backend::Op;
use leasehold::backend::{LeaseDuration, LeaseId, Precondition, TableOp};
use leasehold::entity::Entity as _;
use leasehold::key::{BlobName, ContainerName};
use leasehold::{PartitionKey, RowKey, Store, TableName};
use uuid::Uuid;

use crate::Res;
use crate::report::Report;
use crate::setup::{
    Audit, Env, Sample, a_first, abab_settled, put_empty_blob, sample, settled, timed,
};
use crate::stats::{median, ms, percentile};

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

pub(crate) async fn locked_units(env: &Env, report: &mut Report) -> Res<()> {
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
    let (decision_op, decision_delete) = decision_ops(&pk_key);
    // A mark as a unit sends it: the mark and the row's after-image (its
    // properties as JSON text), merged into the row.
    let sample_mark = {
        let data = sample(&pk, "one", 0).encode()?;
        let mut row =
            leasehold::DynamicEntity::new(data.partition_key.clone(), data.row_key.clone());
        row.properties = data.properties.clone();
        let mut properties = leasehold::entity::Properties::new();
        let mark = format!("{}.{}|R|{pk}", Uuid::new_v4().simple(), Audit::TABLE);
        properties.insert("_lhTxn", leasehold::entity::Value::String(mark));
        properties.insert(
            "_lhNew",
            leasehold::entity::Value::String(row.to_json_line()?),
        );
        TableOp::Merge(
            leasehold::entity::EntityData { properties, ..data },
            Precondition::Upsert,
        )
    };
    let floor_sequence = |tables: usize| {
        let (backend, container, blob) = (backend.clone(), container.clone(), blob.clone());
        let (sample_table, audit_table) = (sample_table.clone(), audit_table.clone());
        let (sample_op, audit_op) = (sample_op.clone(), audit_op.clone());
        let sample_mark = sample_mark.clone();
        let (decision_op, decision_delete) = (decision_op.clone(), decision_delete.clone());
        let (pk_key, s_key, a_key) = (pk_key.clone(), s_key.clone(), a_key.clone());
        async move {
            let id = backend
                .lease(
                    &container,
                    &blob,
                    leasehold::backend::LeaseAction::Acquire {
                        duration: LeaseDuration::Seconds(15),
                        proposed: LeaseId::new_random(),
                    },
                )
                .await
                .unwrap()
                .lease_id()
                .expect("acquired");
            backend.get(&sample_table, &pk_key, &s_key).await.unwrap();
            if tables == 1 {
                backend
                    .batch(&sample_table, std::slice::from_ref(&sample_op))
                    .await
                    .unwrap();
            } else {
                backend.get(&audit_table, &pk_key, &a_key).await.unwrap();
                // As the unit sends them (the audit table sorts first, so
                // the audit row rides in the commit point): the mark on the
                // sample row (a merge of the mark and its after-image); the
                // commit point (the audit row and the decision row in one
                // transaction); the sample row finished; the decision row
                // deleted.
                backend
                    .batch(&sample_table, std::slice::from_ref(&sample_mark))
                    .await
                    .unwrap();
                backend
                    .batch(&audit_table, &[audit_op.clone(), decision_op.clone()])
                    .await
                    .unwrap();
                backend
                    .batch(&sample_table, std::slice::from_ref(&sample_op))
                    .await
                    .unwrap();
                backend
                    .execute(&audit_table, decision_delete.clone(), &WriteOptions::new())
                    .await
                    .unwrap();
            }
            backend
                .lease(
                    &container,
                    &blob,
                    leasehold::backend::LeaseAction::Release(id),
                )
                .await
                .unwrap();
        }
    };
    // The units take back a lock this process took last, with nobody
    // writing its blob since: no lock-blob read (one more per lock that
    // another process wrote).
    for (label, budget, tables) in [("one table", 4u64, 1), ("two tables", 8u64, 2)] {
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
            settled(&counter).await;
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
            // What the unit sends behind its answer (its decision row's
            // delete) is done, untimed, before the next side starts.
            if a_first(i as usize) {
                lh.push(ms(timed(unit).await.0));
                settled(&counter).await;
                floor_ms.push(ms(timed(floor_sequence(tables)).await.0));
            } else {
                floor_ms.push(ms(timed(floor_sequence(tables)).await.0));
                lh.push(ms(timed(unit).await.0));
                settled(&counter).await;
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
             bound: the time between them is leasehold's work (encoding, staging, the marks) \
             or waiting for one of the 2 shared cores, which Azurite also uses",
        );
        report.detail(format!(
            "Cold unit, {label}: {n} units counted, then {n} interleaved with the floor; \
             requests per unit {per_unit:.2} (budget {budget}): {}; unit p99 {:.3} ms, floor p99 \
             {:.3} ms. The floor sends the same kinds of request in the same order through the \
             same backend: lease acquire, {} entity read(s), {}lease release (no lock-blob \
             read: the acquire's reply shows the blob as this process last wrote it).",
            fmt_counts(&counts, n),
            percentile(&lh, 0.99),
            percentile(&floor_ms, 0.99),
            tables,
            if tables == 1 {
                "one 1-operation batch, "
            } else {
                "a 1-operation batch marking the sample row (a merge of the mark and the row's \
                 after-image), the commit point (a batch of the audit row and a decision row), \
                 a 1-operation batch finishing the sample row, the decision row's delete, "
            }
        ));
        let _ = &unit_ms;
    }
    thousand_writes(env, report).await?;
    for parts in [2, 4] {
        cross_partition(env, report, parts, None).await?;
    }
    for parts in [2, 4] {
        cross_partition(env, report, parts, Some(NETWORK)).await?;
    }
    crate::txn::transactions(env, report, None).await?;
    crate::txn::transactions(env, report, Some(NETWORK)).await?;
    Ok(())
}

/// The wait added to every request to stand for a network like Azure's
/// (round trips of 5 to 10 ms), where round trips, not the service's own
/// work, set the pace.
const NETWORK: std::time::Duration = std::time::Duration::from_millis(5);

/// Stand-ins for a commit's decision row in partition `pk`: its insert
/// (here an upsert, so the floor can run again) and its delete.
fn decision_ops(pk: &PartitionKey) -> (TableOp, TableOp) {
    let row_key = RowKey::new("_lhCommit.bench").expect("valid row key");
    let mut properties = leasehold::entity::Properties::new();
    properties.insert(
        "_lhDecision",
        leasehold::entity::Value::String("committed".into()),
    );
    let data = leasehold::entity::EntityData {
        partition_key: pk.clone(),
        row_key: row_key.clone(),
        properties,
    };
    (
        TableOp::Replace(data, Precondition::Upsert),
        TableOp::Delete {
            partition_key: pk.clone(),
            row_key,
            condition: Precondition::IfExists,
        },
    )
}

/// The writes of the big unit.
const BIG_UNIT: usize = 1_000;

/// A cold unit of 1,000 inserts of small rows (`Audit`) in one partition of
/// one table: the lease acquire, the marks (10 transactions of 100
/// placeholders, all at once: the writes and the decision row do not fit
/// one transaction), the commit point (the decision row alone), the rows
/// finished (10 transactions, all at once), the decision row's delete with
/// the release — against the same requests sent back to back (its floor),
/// and against the same 1,000 rows written the non-atomic way, ten plain
/// 100-operation transactions one after another.
async fn thousand_writes(env: &Env, report: &mut Report) -> Res<()> {
    const SECTION: &str = "3 locked units";
    let (store, counter) = env.counted_store();
    let run = Uuid::new_v4().simple().to_string();
    let pk = format!("big-{run}");
    // Unit `round` inserts rows `u<round>-<i>`: every unit writes new rows.
    let unit = |store: Store, pk: String, round: usize| async move {
        let mut unit = store.lock(pk.as_str()).await.unwrap();
        for i in 0..BIG_UNIT {
            unit.insert(&Audit {
                pk: pk.clone(),
                rk: format!("u{round:05}-{i:04}"),
                n: i as i64,
            })
            .unwrap();
        }
        unit.commit().await.unwrap();
    };
    // Warm-up: the table, the lock blob, the pools.
    store
        .table::<Audit>()
        .upsert(Audit {
            pk: pk.clone(),
            rk: "w".into(),
            n: 0,
        })
        .await?;
    for round in 0..3 {
        unit(store.clone(), pk.clone(), round).await;
    }
    let n = env.n(20) as u64;
    let before = counter.snapshot();
    for round in 0..n as usize {
        unit(store.clone(), pk.clone(), 1_000 + round).await;
    }
    settled(&counter).await;
    let counts = diff(&counter.snapshot(), &before);
    let per_unit = counts.values().sum::<u64>() as f64 / n as f64;
    // The acquire, the marks, the commit point, the rows finished, the
    // decision row's delete, the release.
    let budget = 4 + 2 * BIG_UNIT.div_ceil(TableOp::MAX_BATCH_OPS) as u64;

    let backend = store.backend().clone();
    let container = ContainerName::new("bench-requests").unwrap();
    let blob = BlobName::new(format!("big-{run}")).unwrap();
    backend.create_container(&container).await.ok();
    put_empty_blob(backend.as_ref(), &container, &blob).await?;
    let table = TableName::new(Audit::TABLE).unwrap();
    let pk_key = PartitionKey::new(pk.clone())?;
    let txn = format!("{}.{}", Uuid::new_v4().simple(), Audit::TABLE);
    // The rows as plain upserts (the floor's finishing transactions and
    // the plain batches), and the same rows' marks as the unit sends them:
    // a placeholder with the mark and the after-image.
    let rows: Vec<TableOp> = (0..BIG_UNIT)
        .map(|i| {
            Ok(TableOp::Replace(
                Audit {
                    pk: pk.clone(),
                    rk: format!("f-{i:04}"),
                    n: i as i64,
                }
                .encode()?,
                Precondition::Upsert,
            ))
        })
        .collect::<Res<_>>()?;
    let marks: Vec<TableOp> = (0..BIG_UNIT)
        .map(|i| {
            let mut properties = leasehold::entity::Properties::new();
            properties.insert(
                "_lhTxn",
                leasehold::entity::Value::String(format!("{txn}|A|{pk}")),
            );
            properties.insert(
                "_lhNew",
                leasehold::entity::Value::String(format!(
                    "{{\"n\":\"{i}\",\"n@odata.type\":\"Edm.Int64\"}}"
                )),
            );
            TableOp::Replace(
                leasehold::entity::EntityData {
                    partition_key: pk_key.clone(),
                    row_key: RowKey::new(format!("f-{i:04}")).unwrap(),
                    properties,
                },
                Precondition::Upsert,
            )
        })
        .collect();
    let (decision_op, decision_delete) = decision_ops(&pk_key);
    let floor = || {
        let (backend, container, blob) = (backend.clone(), container.clone(), blob.clone());
        let (table, rows, marks) = (table.clone(), rows.clone(), marks.clone());
        let (decision_op, decision_delete) = (decision_op.clone(), decision_delete.clone());
        async move {
            let id = backend
                .lease(
                    &container,
                    &blob,
                    leasehold::backend::LeaseAction::Acquire {
                        duration: LeaseDuration::Seconds(15),
                        proposed: LeaseId::new_random(),
                    },
                )
                .await
                .unwrap()
                .lease_id()
                .expect("acquired");
            for chunk in marks.chunks(TableOp::MAX_BATCH_OPS) {
                backend.batch(&table, chunk).await.unwrap();
            }
            backend
                .batch(&table, std::slice::from_ref(&decision_op))
                .await
                .unwrap();
            for chunk in rows.chunks(TableOp::MAX_BATCH_OPS) {
                backend.batch(&table, chunk).await.unwrap();
            }
            backend
                .execute(&table, decision_delete.clone(), &WriteOptions::new())
                .await
                .unwrap();
            backend
                .lease(
                    &container,
                    &blob,
                    leasehold::backend::LeaseAction::Release(id),
                )
                .await
                .unwrap();
        }
    };
    let plain = || {
        let (backend, table, rows) = (backend.clone(), table.clone(), rows.clone());
        async move {
            for chunk in rows.chunks(TableOp::MAX_BATCH_OPS) {
                backend.batch(&table, chunk).await.unwrap();
            }
        }
    };
    let (unit_ms, floor_ms) = abab_settled(
        n as usize,
        |i| unit(store.clone(), pk.clone(), 2_000 + i),
        |_| floor(),
        &counter,
    )
    .await;
    let (unit2_ms, plain_ms) = abab_settled(
        n as usize,
        |i| unit(store.clone(), pk.clone(), 3_000 + i),
        |_| plain(),
        &counter,
    )
    .await;
    let floor_median = median(&floor_ms);
    report.row(
        SECTION,
        "cold unit of 1,000 inserts, one partition and table (write 1,000)",
        format!("{:.3} ms", median(&unit_ms)),
        format!("{floor_median:.3} ms = its {budget} requests back to back"),
        median(&unit_ms) / floor_median,
        Some(1.0),
        None,
        "the unit's median exceeds its own requests sent back to back: its marking and \
         finishing transactions no longer go out together, or leasehold's own work on 1,000 \
         rows (encoding, after-images, staging) grew",
    );
    let plain_median = median(&plain_ms);
    report.row(
        SECTION,
        "cold unit of 1,000 inserts vs ten plain 100-operation batches",
        format!("{:.3} ms", median(&unit2_ms)),
        format!("{plain_median:.3} ms = 10 transactions of 100 upserts, one after another"),
        median(&unit2_ms) / plain_median,
        // The price of one atomic, crash-safe commit of 1,000 rows: every
        // row written twice (its mark with its after-image, then the row),
        // the decision row, the lock; the transactions of each round go
        // out together.
        Some(1.5),
        None,
        "the unit's marking and finishing transactions no longer go out together, or \
         leasehold's own work on 1,000 rows grew",
    );
    report.detail(format!(
        "Cold unit of 1,000 inserts (one partition of one table, small rows): {n} units \
         counted, then {n} interleaved with the floor and {n} with ten plain batches; requests \
         per unit {per_unit:.2} (budget {budget}): {}; unit p99 {:.3} ms, floor p99 {:.3} ms, plain batches p99 \
         {:.3} ms. The unit decides in a row (1,000 writes fit no one transaction): the lease \
         acquire, the marks (10 transactions of 100 placeholders carrying the mark and the \
         after-image, all at once), the commit point (the decision row), the rows finished \
         (10 transactions, all at once) with the release, then behind the answer the decision \
         row's delete (untimed: the next side starts once it is done). The floor \
         sends the same requests, with marks of the same size, one after another; the plain \
         batches write the rows without the lock, marks or decision row: a failure between \
         two of them leaves some rows written.",
        fmt_counts(&counts, n),
        percentile(&unit_ms, 0.99),
        percentile(&floor_ms, 0.99),
        percentile(&plain_ms, 0.99),
    ));
    Ok(())
}

/// A cold unit over `parts` partitions, one table each, reading and
/// writing one row in each: `parts` acquires (no lock-blob reads: this
/// process took the locks last and nobody wrote their blobs since), `parts`
/// reads, `parts` − 1 transactions marking the rows, the commit point (the
/// first partition's transaction with the decision row), `parts` − 1
/// transactions finishing the marked rows, the decision row's delete,
/// `parts` releases — 10 requests for 2 partitions, 20 for 4 — against the same requests sent back to back
/// (its floor) and against the hand-written pattern; on the local Azurite
/// as it is, or (`latency`) with that wait added to every request on both
/// sides.
async fn cross_partition(
    env: &Env,
    report: &mut Report,
    parts: usize,
    latency: Option<std::time::Duration>,
) -> Res<()> {
    const SECTION: &str = "3 locked units";
    // Locks taken back unchanged: no lock-blob reads.
    let budget = 5 * parts as u64;
    let (store, counter) = match latency {
        None => env.counted_store(),
        Some(l) => env.counted_store_with_latency(l),
    };
    let over = latency.map_or_else(String::new, |l| {
        format!(", {} ms added per request", l.as_millis())
    });
    let samples = store.table::<Sample>();
    let run = Uuid::new_v4().simple().to_string();
    let keys_text: Vec<String> = (0..parts).map(|i| format!("x{i}-{run}")).collect();
    for k in &keys_text {
        samples.insert(sample(k, "s", 100)).await?;
    }
    // The first partition pays one to each of the others.
    let transfer = |store: Store, keys: Vec<String>| async move {
        let mut unit = store
            .lock_many(keys.iter().rev().map(String::as_str))
            .await
            .unwrap();
        let mut rows = Vec::with_capacity(keys.len());
        for k in &keys {
            rows.push(
                unit.get_in::<Sample>(k.as_str(), "s")
                    .await
                    .unwrap()
                    .unwrap(),
            );
        }
        for (i, row) in rows.iter_mut().enumerate() {
            row.total += if i == 0 { -(keys.len() as i64 - 1) } else { 1 };
            unit.replace(row).unwrap();
        }
        unit.commit().await.unwrap();
    };
    for _ in 0..5 {
        transfer(store.clone(), keys_text.clone()).await;
    }
    let n = env.n(if latency.is_some() { 40 } else { 100 }) as u64;
    let before = counter.snapshot();
    for _ in 0..n {
        transfer(store.clone(), keys_text.clone()).await;
    }
    settled(&counter).await;
    let counts = diff(&counter.snapshot(), &before);
    let per_unit = counts.values().sum::<u64>() as f64 / n as f64;

    let backend = store.backend().clone();
    let container = ContainerName::new("bench-requests").unwrap();
    let blobs: Vec<BlobName> = keys_text
        .iter()
        .map(|k| BlobName::new(k.clone()).unwrap())
        .collect();
    backend.create_container(&container).await.ok();
    for blob in &blobs {
        put_empty_blob(backend.as_ref(), &container, blob).await?;
    }
    let table = TableName::new(Sample::TABLE).unwrap();
    let keys: Vec<PartitionKey> = keys_text
        .iter()
        .map(|k| PartitionKey::new(k.clone()))
        .collect::<Result<_, _>>()?;
    let ops: Vec<TableOp> = keys_text
        .iter()
        .map(|k| {
            Ok(TableOp::Replace(
                sample(k, "h", 0).encode()?,
                Precondition::Upsert,
            ))
        })
        .collect::<Res<_>>()?;
    let s_key = RowKey::new("s")?;
    // `journalled`: the floor of the unit (the same requests back to back);
    // otherwise the hand-written pattern: a lease per partition, a read and
    // one transaction per partition, the releases, one after another.
    let (decision_op, decision_delete) = decision_ops(&keys[0]);
    let sequence = |journalled: bool| {
        let (backend, container, blobs) = (backend.clone(), container.clone(), blobs.clone());
        let (decision_op, decision_delete) = (decision_op.clone(), decision_delete.clone());
        let (table, keys, ops, s_key) = (table.clone(), keys.clone(), ops.clone(), s_key.clone());
        async move {
            let mut ids = Vec::new();
            for blob in &blobs {
                ids.push(
                    backend
                        .lease(
                            &container,
                            blob,
                            leasehold::backend::LeaseAction::Acquire {
                                duration: LeaseDuration::Seconds(15),
                                proposed: LeaseId::new_random(),
                            },
                        )
                        .await
                        .unwrap()
                        .lease_id()
                        .expect("acquired"),
                );
            }
            for key in &keys {
                backend.get(&table, key, &s_key).await.unwrap();
            }
            if journalled {
                // The marks on the other partitions' rows, the commit point
                // (the first partition's row and the decision row in one
                // transaction), the marked rows finished, the decision
                // row's delete.
                for op in &ops[1..] {
                    backend
                        .batch(&table, std::slice::from_ref(op))
                        .await
                        .unwrap();
                }
                backend
                    .batch(&table, &[ops[0].clone(), decision_op.clone()])
                    .await
                    .unwrap();
                for op in &ops[1..] {
                    backend
                        .batch(&table, std::slice::from_ref(op))
                        .await
                        .unwrap();
                }
                backend
                    .execute(&table, decision_delete.clone(), &WriteOptions::new())
                    .await
                    .unwrap();
            } else {
                for op in &ops {
                    backend
                        .batch(&table, std::slice::from_ref(op))
                        .await
                        .unwrap();
                }
            }
            for (blob, id) in blobs.iter().zip(&ids) {
                backend
                    .lease(
                        &container,
                        blob,
                        leasehold::backend::LeaseAction::Release(*id),
                    )
                    .await
                    .unwrap();
            }
        }
    };
    let (unit_ms, floor_ms) = abab_settled(
        n as usize,
        |_| transfer(store.clone(), keys_text.clone()),
        |_| sequence(true),
        &counter,
    )
    .await;
    let (unit2_ms, hand_ms) = abab_settled(
        n as usize,
        |_| transfer(store.clone(), keys_text.clone()),
        |_| sequence(false),
        &counter,
    )
    .await;
    let floor = median(&floor_ms);
    report.row(
        SECTION,
        format!("cold unit across {parts} partitions (read {parts}, write {parts}){over}"),
        format!("{:.3} ms", median(&unit_ms)),
        format!("{floor:.3} ms = its {budget} requests back to back"),
        median(&unit_ms) / floor,
        Some(1.0),
        None,
        "the unit's median exceeds its own requests sent back to back: its independent \
         requests (the acquires, the marks, the transactions, the releases) \
         no longer go out together, or leasehold's own work between \
         them grew",
    );
    let hand = median(&hand_ms);
    report.row(
        SECTION,
        format!("cold unit across {parts} partitions vs the hand-written pattern{over}"),
        format!("{:.3} ms", median(&unit2_ms)),
        format!(
            "{hand:.3} ms = {parts} leases, {parts} reads, {parts} transactions, {parts} releases"
        ),
        median(&unit2_ms) / hand,
        // The price of atomicity, crash safety and living beside
        // optimistic writers: the marks, the decision row and its delete
        // (and a lock-blob read per lock another process wrote last). On
        // the local Azurite, which works through requests one at a time on
        // a shared core, the ratio follows the request counts (5 × parts
        // against 4 × parts).
        Some(1.3),
        None,
        "the unit's independent requests no longer go out together",
    );
    report.detail(format!(
        "Cold unit across {parts} partitions{over}: {n} units counted, then {n} interleaved with the \
         floor and {n} with the hand-written pattern; requests per unit {per_unit:.2} (budget \
         {budget}): {}; unit p99 {:.3} ms, floor p99 {:.3} ms, hand-written p99 {:.3} ms. The \
         unit takes its locks in 1 round trip (the acquires, all at once: this process took \
         them last and nobody wrote their blobs since, which the acquires' replies show; a \
         lock another process wrote adds its lock-blob read, all at once), and answers its \
         commit in 3 (the other rows' marks, the commit point, the marked rows finished with \
         the releases); the decision row's delete goes behind the answer, and the next side \
         starts once it is done (untimed). \
         The hand-written pattern (the leases, the reads, one transaction per partition, the \
         releases, one after another) is neither atomic nor crash-safe: a crash between its \
         transactions leaves some sides applied, and nothing finishes or undoes it.",
        fmt_counts(&counts, n),
        percentile(&unit_ms, 0.99),
        percentile(&floor_ms, 0.99),
        percentile(&hand_ms, 0.99),
    ));
    Ok(())
}
