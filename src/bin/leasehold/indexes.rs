//! `leasehold indexes ...`: verify and rebuild the index rows of a table
//! (`#[entity(unique)]` / `#[entity(index)]` fields) that writers outside
//! leasehold may have broken; the partition of an index value, for the
//! `locks` commands' `--index`.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use leasehold::Store;
use leasehold::entity::Value;
use leasehold::index::{DuplicateValue, IndexReport};
use serde_json::json;

use crate::args::IndexesCommand;
use crate::failure::Failure;
use crate::output::Output;

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
    let bar = spinner(out, if rebuild { "rebuilding" } else { "verifying" });
    let tick = |n: u64| bar.set_position(n);
    let report = if rebuild {
        store.rebuild_indexes(&table, tick).await
    } else {
        store.verify_indexes(&table, tick).await
    };
    bar.finish_and_clear();
    print(out, &report?, rebuild);
    Ok(())
}

/// The partition key of an index value given as text (`--index
/// Customers.email user@example.com`), encoded as the library encodes it
/// ([`Store::index_partition`]). Text that reads as an integer, a GUID or
/// an RFC 3339 date-time may be a value of that type as well as a string:
/// then the partition whose lock blob exists is the one meant.
pub(crate) async fn index_partition(
    store: &Store,
    index: &str,
    text: &str,
) -> Result<String, Failure> {
    let Some((table, field)) = index.split_once('.') else {
        return Err(Failure {
            code: Failure::USAGE,
            message: format!(
                "--index {index:?}: name the index as TABLE.FIELD (the entity table without the table prefix, a dot, the field), such as Customers.email"
            ),
        });
    };
    let mut candidates = vec![Value::String(text.to_owned())];
    if let Ok(n) = text.parse::<i64>() {
        candidates.push(Value::Int64(n));
    }
    if let Ok(g) = leasehold::uuid::Uuid::parse_str(text) {
        candidates.push(Value::Guid(g));
    }
    let rfc3339 = leasehold::time::format_description::well_known::Rfc3339;
    if let Ok(t) = leasehold::time::OffsetDateTime::parse(text, &rfc3339) {
        candidates.push(Value::DateTime(t));
    }
    let mut keys: Vec<String> = Vec::new();
    for value in &candidates {
        let key = store.index_partition(table, field, value).await?;
        if !keys.iter().any(|k| k == key.as_str()) {
            keys.push(key.as_str().to_owned());
        }
    }
    if keys.len() == 1 {
        return Ok(keys.swap_remove(0));
    }
    let mut locked = Vec::new();
    for key in &keys {
        let name = store.lock_lease_name(key)?;
        if store.locks().describe(name.as_str()).await?.exists {
            locked.push(key.clone());
        }
    }
    match locked.len() {
        1 => Ok(locked.swap_remove(0)),
        0 => Err(Failure::not_found(format!(
            "{index} = {text:?} has no lock blob: none of its partitions {keys:?} (the value as a string, or as a number, GUID or date-time) was ever locked"
        ))),
        _ => Err(Failure {
            code: Failure::USAGE,
            message: format!(
                "{index} = {text:?} is ambiguous: the partitions {locked:?} all have lock blobs; pass the partition key itself"
            ),
        }),
    }
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

/// A count of rows read on stderr, when it is a terminal and the output is
/// not JSON (the number of rows is not known beforehand).
fn spinner(out: &Output, what: &'static str) -> ProgressBar {
    if out.json || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg}: {pos} rows read") {
        bar.set_style(style);
    }
    bar.set_message(what);
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
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
