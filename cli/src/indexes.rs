//! `leasehold indexes ...`: verify and rebuild the index rows of a table
//! (`#[entity(unique)]` / `#[entity(index)]` fields) that writers outside
//! leasehold may have broken.

use leasehold::Store;

use leasehold::index::{DuplicateValue, IndexReport};
use serde_json::json;

use crate::args::IndexesCommand;
use crate::failure::Failure;
use crate::output::{Output, Tally};

/// Runs an `indexes` command.
pub(crate) async fn run(
    store: &Store,
    command: IndexesCommand,
    out: &Output,
) -> Result<(), Failure> {
    let (table, rebuild) = match command {
        IndexesCommand::Verify { table } => (table, false),
        IndexesCommand::Rebuild { table } => (table, true),
    };
    let command = if rebuild {
        "indexes rebuild"
    } else {
        "indexes verify"
    };
    let mut tally = Tally::new(out, command, "read");
    let tick = |n: u64| tally.set(n);
    let report = if rebuild {
        store.rebuild_indexes(&table, tick).await
    } else {
        store.verify_indexes(&table, tick).await
    };
    tally.finish();
    print(out, &report?, rebuild);
    Ok(())
}

/// A duplicated unique value as JSON.
fn duplicate_json(d: &DuplicateValue) -> serde_json::Value {
    json!({
        "index": d.index,
        "field": d.field,
        "value": d.value,
        "partition_key": d.partition_key.as_str(),
        "entities": d
            .entities
            .iter()
            .map(|(pk, rk)| json!({ "partition_key": pk.as_str(), "row_key": rk.as_str() }))
            .collect::<Vec<_>>(),
    })
}

fn print(out: &Output, r: &IndexReport, rebuild: bool) {
    if out.json {
        let mut doc = json!({
            "table": r.table,
            "entities": r.entities,
            "index_rows": r.index_rows,
            "consistent": r.is_consistent(),
            "missing": r.missing,
            "orphans": r.orphans,
            "stale": r.stale,
            "duplicates": r.duplicates.iter().map(duplicate_json).collect::<Vec<_>>(),
        });
        if rebuild {
            doc["repaired"] = json!(r.repaired);
        }
        out!("{doc}");
        return;
    }
    out!(
        "table {}: {} entities, {} index rows",
        r.table,
        r.entities,
        r.index_rows
    );
    let duplicates: Vec<String> = r.duplicates.iter().map(ToString::to_string).collect();
    for (title, lines) in [
        ("missing index rows", &r.missing),
        ("orphan index rows", &r.orphans),
        (
            "unique values held twice (not fixed: change one entity)",
            &duplicates,
        ),
    ] {
        if !lines.is_empty() {
            out!("{title} ({}):", lines.len());
            for line in lines {
                out!("  {line}");
            }
        }
    }
    if r.stale > 0 {
        out!(
            "stale index rows (naming an entity that does not hold their value; harmless, a rebuild removes them): {}",
            r.stale
        );
    }
    if rebuild {
        out!("repaired {} index rows", r.repaired);
    } else if r.is_consistent() {
        out!("consistent");
    } else {
        out!(
            "inconsistent: `leasehold indexes rebuild {}` fixes missing and orphan rows",
            r.table
        );
    }
}
