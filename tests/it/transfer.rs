//! Export and import (`Table::export`, `Query::export`, `Store::import`):
//! every EDM type exact through export → import → export (byte-identical),
//! exports and imports stopped half-way resuming without a row twice or
//! missing, marked rows exported as resolved and hidden rows left out.
//!
//! Each check runs on the memory backend and on Azurite (`transfer_suite!`
//! in `memory.rs` and `azurite.rs`).

use std::sync::Arc;

use futures_util::{StreamExt as _, TryStreamExt as _};
use leasehold::backend::Op;
use leasehold::backend::{Backend, TableOp};
use leasehold::entity::{EntityData, Properties, Value};
use leasehold::query::ContinuationToken;
use leasehold::store::{ImportOptions, ImportProgress};
use leasehold::testing::FaultyBackend;
use leasehold::testing::conformance::Ctx;
use leasehold::{DynamicEntity, Entity, ErrorKind, PartitionKey, RowKey, Store, TableName};

use crate::emulator::Target;

/// Expands to one test per transfer check, in a module `transfer`, each on
/// a fresh context made by `$make_ctx` (an `Option<Ctx>`) for `$target`.
#[macro_export]
macro_rules! transfer_suite {
    ($make_ctx:expr, $target:expr) => {
        $crate::transfer_suite!(@tests $make_ctx, $target;
            export_import_export_is_byte_identical_for_every_edm_type,
            an_interrupted_export_resumes_from_its_last_token,
            an_interrupted_insert_only_import_resumes_without_duplicates,
            an_interrupted_upsert_import_resumes_without_gaps,
            insert_only_import_refuses_a_row_stored_otherwise,
            marked_rows_export_resolved_and_hidden_rows_stay_out,
        );
    };
    (@tests $make_ctx:expr, $target:expr; $($check:ident),* $(,)?) => {
        mod transfer {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    let ctx: Option<leasehold::testing::conformance::Ctx> = $make_ctx;
                    let Some(ctx) = ctx else { return };
                    $crate::transfer::$check(&ctx, $target).await;
                }
            )*
        }
    };
}

const TABLE: &str = "Exported";

/// A store on the context's backend (or `backend`) with its own prefix.
fn store_on(ctx: &Ctx, backend: Arc<dyn Backend>, tag: &str) -> Store {
    Store::builder_shared(backend)
        .table_prefix(format!("{}{tag}", ctx.prefix()))
        .unwrap()
        .build()
        .unwrap()
}

/// Row `i` of partition `p`: every EDM type, at values that test exactness
/// (Int64 past 2^53, doubles JSON cannot spell, date-times to 100 ns,
/// strings needing escapes, binary of every length mod 3).
fn row(p: usize, i: usize) -> EntityData {
    let doubles = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -0.0,
        0.1,
        1e300,
        5e-324,
        -123.456,
    ];
    let mut props = Properties::new();
    props.insert(
        "s",
        Value::String(format!("row {i} \"quoted\" \\ é 🚀 \u{1}")),
    );
    props.insert("i32", Value::Int32(i32::MIN + i as i32));
    props.insert(
        "i64",
        Value::Int64(if i.is_multiple_of(2) {
            (1 << 53) + 1 + i as i64
        } else {
            i64::MIN + i as i64
        }),
    );
    props.insert("d", Value::Double(doubles[i % doubles.len()]));
    props.insert("b", Value::Boolean(i.is_multiple_of(3)));
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(
        1_700_000_000_123_456_700 + (i as i128) * 1_000_000_100,
    )
    .unwrap();
    props.insert("t", Value::DateTime(t));
    props.insert(
        "g",
        Value::Guid(uuid::Uuid::from_u128(
            0x0123_4567_89ab_cdef_0000_0000_0000_0000 + (p * 100_000 + i) as u128,
        )),
    );
    props.insert("bin", Value::Binary((0..(i % 7) as u8 + 1).collect()));
    if i.is_multiple_of(5) {
        props.insert("sometimes", Value::String(String::new()));
    }
    EntityData {
        partition_key: PartitionKey::new(format!("p{p:02}")).unwrap(),
        row_key: RowKey::new(format!("r{i:05}")).unwrap(),
        properties: props,
    }
}

/// Writes `partitions × per_partition` rows into `store`'s table `TABLE`
/// through the backend, 100 a transaction; answers them in key order.
async fn seed(store: &Store, partitions: usize, per_partition: usize) -> Vec<EntityData> {
    store.create_table(TABLE).await.unwrap();
    let name = TableName::new(format!("{}{TABLE}", store.table_prefix())).unwrap();
    let mut all = Vec::new();
    for p in 0..partitions {
        let rows: Vec<EntityData> = (0..per_partition).map(|i| row(p, i)).collect();
        for chunk in rows.chunks(100) {
            let ops: Vec<TableOp> = chunk.iter().cloned().map(TableOp::Insert).collect();
            store.backend().batch(&name, &ops).await.unwrap();
        }
        all.extend(rows);
    }
    all
}

/// The lines `rows` export as, as `target` stores them (Azurite keeps no
/// negative zero).
fn expected_lines(rows: &[EntityData], target: Target) -> String {
    let mut out = String::new();
    for data in rows {
        let mut row = DynamicEntity::new(data.partition_key.clone(), data.row_key.clone());
        row.properties = data.properties.clone();
        if target == Target::Azurite
            && matches!(row.properties.get("d"), Some(Value::Double(d)) if *d == 0.0)
        {
            row.properties.insert("d", Value::Double(0.0));
        }
        out.push_str(&row.to_json_line().unwrap());
        out.push('\n');
    }
    out
}

/// The whole export of `store`'s table `TABLE`, and its page count.
async fn export_all(store: &Store) -> (String, usize) {
    let pages: Vec<_> = store
        .dynamic_table(TABLE)
        .export()
        .try_collect()
        .await
        .unwrap();
    let n = pages.len();
    let mut out = String::new();
    for page in pages {
        for row in page.items {
            out.push_str(&row.to_json_line().unwrap());
            out.push('\n');
        }
    }
    (out, n)
}

/// The rows of an export, read back.
fn rows_of(lines: &str) -> Vec<leasehold::Result<DynamicEntity>> {
    lines.lines().map(DynamicEntity::from_json_line).collect()
}

/// Runs an import to its end; answers its last report.
async fn import_all(
    store: &Store,
    rows: Vec<leasehold::Result<DynamicEntity>>,
    options: ImportOptions,
) -> leasehold::Result<ImportProgress> {
    store
        .import(TABLE, futures_util::stream::iter(rows), options)
        .try_fold(ImportProgress::default(), |_, p| async move { Ok(p) })
        .await
}

/// 10,000 rows over 50 partitions, every EDM type: the export is exact
/// (each line as the row was written), and importing it into an empty
/// table of another store and exporting that gives the same bytes.
pub async fn export_import_export_is_byte_identical_for_every_edm_type(ctx: &Ctx, target: Target) {
    let source = store_on(ctx, ctx.backend().clone(), "src");
    let rows = seed(&source, 50, 200).await;
    let (first, pages) = export_all(&source).await;
    assert_eq!(first.lines().count(), 10_000);
    assert!(pages >= 10, "pages of at most 1000 rows: {pages}");
    assert_eq!(first, expected_lines(&rows, target), "every value exact");
    if target == Target::Memory {
        for text in [
            "\"d\":-0.0",
            "\"NaN\"",
            "\"-Infinity\"",
            "\"Edm.Int64\"",
            ".1234567Z",
        ] {
            assert!(first.contains(text), "{text} exported");
        }
    }

    let copy = store_on(ctx, ctx.backend().clone(), "dst");
    let report = import_all(&copy, rows_of(&first), ImportOptions::insert_only())
        .await
        .unwrap();
    assert_eq!(
        (report.rows, report.written, report.already_there),
        (10_000, 10_000, 0)
    );
    let (second, _) = export_all(&copy).await;
    assert!(
        second == first,
        "export → import → export is byte-identical"
    );
}

/// An export stopped after some pages (by a failed request) resumes from
/// the last page's token: every row once, in order.
pub async fn an_interrupted_export_resumes_from_its_last_token(ctx: &Ctx, _target: Target) {
    let store = store_on(ctx, ctx.backend().clone(), "src");
    seed(&store, 3, 300).await;
    let (whole, _) = export_all(&store).await;

    let faulty = FaultyBackend::new(ctx.backend().clone());
    faulty.injector().fail_nth(Some(Op::Query), 4);
    let stopping = store_on(ctx, Arc::new(faulty), "src");
    let mut lines = String::new();
    let mut token: Option<ContinuationToken> = None;
    let mut pages = std::pin::pin!(
        stopping
            .dynamic_table(TABLE)
            .query()
            .page_size(100)
            .export()
    );
    let mut failed = false;
    while let Some(page) = pages.next().await {
        match page {
            Ok(page) => {
                for row in &page.items {
                    lines.push_str(&row.to_json_line().unwrap());
                    lines.push('\n');
                }
                token = page.continuation;
            }
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Transient);
                failed = true;
            }
        }
    }
    assert!(failed, "the fourth page failed");
    assert_eq!(lines.lines().count(), 300, "three pages written");
    let token = token.expect("a token to resume from");
    // Resumed as text, as a checkpoint file holds it.
    let token: ContinuationToken = token.to_string().parse().unwrap();
    let rest: Vec<_> = store
        .dynamic_table(TABLE)
        .query()
        .page_size(100)
        .resume(token)
        .export()
        .try_collect()
        .await
        .unwrap();
    for page in rest {
        for row in page.items {
            lines.push_str(&row.to_json_line().unwrap());
            lines.push('\n');
        }
    }
    assert!(lines == whole, "every row once, in order");
}

/// An insert-only import whose fifth transaction was applied but whose
/// reply was lost stops there; resumed after its last report, it finds the
/// rows that transaction (and any sent beside it) stored, as the input has
/// them, leaves them alone and imports the rest.
pub async fn an_interrupted_insert_only_import_resumes_without_duplicates(
    ctx: &Ctx,
    _target: Target,
) {
    interrupted_import(ctx, ImportOptions::insert_only().with_concurrency(3)).await;
}

/// The same for an upsert import, which writes the rows again.
pub async fn an_interrupted_upsert_import_resumes_without_gaps(ctx: &Ctx, _target: Target) {
    interrupted_import(ctx, ImportOptions::upsert().with_concurrency(3)).await;
}

async fn interrupted_import(ctx: &Ctx, options: ImportOptions) {
    let source = store_on(ctx, ctx.backend().clone(), "src");
    seed(&source, 4, 250).await;
    let (whole, _) = export_all(&source).await;

    let faulty = FaultyBackend::new(ctx.backend().clone());
    faulty.injector().lose_reply_nth(Some(Op::Batch), 5);
    let stopping = store_on(ctx, Arc::new(faulty), "dst");
    let mut last = ImportProgress::default();
    let mut reports = std::pin::pin!(stopping.import(
        TABLE,
        futures_util::stream::iter(rows_of(&whole)),
        options.clone()
    ));
    let mut failed = false;
    while let Some(report) = reports.next().await {
        match report {
            Ok(report) => last = report,
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Transient, "{e}");
                failed = true;
            }
        }
    }
    assert!(failed, "the fifth transaction's reply was lost");
    assert!(last.rows < 1000, "stopped half-way: {last:?}");
    // Four partitions of 250 rows: transactions of 100, 100 and 50.
    assert!(
        [0, 100, 200, 250, 350, 450, 500].contains(&last.rows),
        "reports fall on transaction ends: {last:?}"
    );

    let copy = store_on(ctx, ctx.backend().clone(), "dst");
    let rest: Vec<_> = rows_of(&whole)
        .into_iter()
        .skip(last.rows as usize)
        .collect();
    let resumed = import_all(&copy, rest, options.clone()).await.unwrap();
    assert_eq!(resumed.rows + last.rows, 1000);
    assert_eq!(resumed.written + resumed.already_there, resumed.rows);
    if options == ImportOptions::insert_only().with_concurrency(3) {
        // The fifth transaction (100 rows) was applied before the stop.
        assert!(resumed.already_there >= 100, "{resumed:?}");
    } else {
        assert_eq!(resumed.already_there, 0, "an upsert writes them again");
    }
    let (after, _) = export_all(&copy).await;
    assert!(after == whole, "every row once: none missing, none twice");
}

/// An insert-only import meeting a row stored with other values fails
/// with `AlreadyExists` naming it, and leaves that row as it was.
pub async fn insert_only_import_refuses_a_row_stored_otherwise(ctx: &Ctx, _target: Target) {
    let store = store_on(ctx, ctx.backend().clone(), "dst");
    let mut existing = DynamicEntity::new(
        PartitionKey::new("p00").unwrap(),
        RowKey::new("r00001").unwrap(),
    );
    existing
        .properties
        .insert("s", Value::String("mine".into()));
    store.dynamic_table(TABLE).insert(existing).await.unwrap();
    let rows: Vec<_> = (0..3)
        .map(|i| {
            let data = row(0, i);
            let mut r = DynamicEntity::new(data.partition_key, data.row_key);
            r.properties = data.properties;
            Ok(r)
        })
        .collect();
    let e = import_all(&store, rows, ImportOptions::insert_only())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AlreadyExists, "{e}");
    assert!(e.to_string().contains("\"r00001\""), "names the row: {e}");
    let kept = store
        .dynamic_table(TABLE)
        .get("p00", "r00001")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(kept.get::<String>("s").unwrap().as_deref(), Some("mine"));
    assert_eq!(kept.properties.len(), 1);
    assert!(
        store
            .dynamic_table(TABLE)
            .get("p00", "r00000")
            .await
            .unwrap()
            .is_none(),
        "nothing of the transaction applied"
    );
}

/// A customer's account, written through units.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Exported")]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
    balance: i64,
}

/// A transfer between two partitions whose writer stops after its commit
/// point, one row still marked and the decision row still stored: the
/// export shows the row as the commit leaves it, and neither the decision
/// row nor any reserved property (marks, the write log).
pub async fn marked_rows_export_resolved_and_hidden_rows_stay_out(ctx: &Ctx, _target: Target) {
    let store = store_on(ctx, ctx.backend().clone(), "src");
    let accounts = store.table::<Account>().with_write_log();
    for c in ["c0", "c1"] {
        accounts
            .insert(Account {
                customer: c.into(),
                name: "main".into(),
                balance: 100,
            })
            .await
            .unwrap();
    }
    let faulty = FaultyBackend::new(ctx.backend().clone());
    let injector = faulty.injector();
    let writer = store_on(ctx, Arc::new(faulty), "src");
    let mut unit = writer.lock_many(["c0", "c1"]).await.unwrap();
    let mut from = unit.get_in::<Account>("c0", "main").await.unwrap().unwrap();
    let mut to = unit.get_in::<Account>("c1", "main").await.unwrap().unwrap();
    from.balance -= 50;
    to.balance += 50;
    unit.replace(&from).unwrap();
    unit.replace(&to).unwrap();
    // Marks, then the commit point; the finishing transaction and the
    // reads after it fail, as if the writer had stopped there.
    injector.fail_nth(Some(Op::Batch), 3);
    injector.fail_nth(Some(Op::Get), 1);
    unit.commit().await.unwrap();
    drop(writer);

    let name = TableName::new(format!("{}{TABLE}", store.table_prefix())).unwrap();
    let stored = ctx
        .backend()
        .query(&name, &Default::default())
        .await
        .unwrap()
        .entities;
    assert!(
        stored
            .iter()
            .any(|r| r.data.properties.get("_lhTxn").is_some()),
        "a row is still marked"
    );
    assert!(
        stored
            .iter()
            .any(|r| r.data.row_key.as_str().starts_with("_lhCommit.")),
        "the decision row is stored"
    );

    let (lines, _) = export_all(&store).await;
    let balances: Vec<(String, i64)> = rows_of(&lines)
        .into_iter()
        .map(|r| {
            let r = r.unwrap();
            (
                r.partition_key.to_string(),
                r.get::<i64>("balance").unwrap().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        balances,
        [("c0".to_owned(), 50), ("c1".to_owned(), 150)],
        "{lines}"
    );
    assert!(
        !lines.contains("_lh"),
        "no hidden row, no reserved property: {lines}"
    );
}
