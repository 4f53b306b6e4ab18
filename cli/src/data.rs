//! `leasehold purge` and `leasehold count`: delete or count the rows of a
//! table that a partition, a row-key range and filters select, through
//! `Table::purge` and `Table::count` (rows as a read returns them; keys
//! only).

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::time::Instant;

use clap::Args;
use leasehold::entity::Value;
use leasehold::query::{CmpOp, Filter, TypedFilter};
use leasehold::table::{PurgeOptions, Query};
use leasehold::{DynamicEntity, Store, Table};
use serde_json::json;

use crate::failure::Failure;
use crate::output::{Output, Tally};

/// The rows a `purge` or `count` works on.
#[derive(Debug, Args)]
pub(crate) struct Selection {
    /// The table (without the table prefix).
    #[arg(long)]
    pub(crate) table: String,
    /// Only this partition.
    #[arg(long)]
    pub(crate) partition: Option<String>,
    /// Only row keys from this one on (included).
    #[arg(long)]
    pub(crate) from: Option<String>,
    /// Only row keys before this one (excluded).
    #[arg(long)]
    pub(crate) to: Option<String>,
    /// Only rows matching `PROPERTY OP LITERAL`, OData style: OP is eq, ne,
    /// gt, ge, lt or le; LITERAL is 'text' (a quote doubled inside), 42
    /// (Int32), 42L (Int64), 1.5 (Double), true, false,
    /// datetime'2026-01-02T03:04:05Z' or guid'...'. Given again, all must
    /// match.
    #[arg(long, value_name = "PROPERTY OP LITERAL")]
    pub(crate) filter: Vec<String>,
}

/// `leasehold purge`.
#[derive(Debug, Args)]
pub(crate) struct PurgeArgs {
    #[command(flatten)]
    pub(crate) rows: Selection,
    /// Delete without asking (required when stdin is not a terminal).
    #[arg(long)]
    pub(crate) yes: bool,
    /// Delete requests in flight at once.
    #[arg(long, default_value_t = PurgeOptions::DEFAULT_CONCURRENCY as u16,
          value_parser = clap::value_parser!(u16).range(1..=64))]
    pub(crate) concurrency: u16,
}

/// `leasehold count`.
#[derive(Debug, Args)]
pub(crate) struct CountArgs {
    #[command(flatten)]
    pub(crate) rows: Selection,
}

impl Selection {
    /// The table and the query of the selected rows, checked: the table
    /// exists (exit code 3 if not), the name, keys and filters are valid
    /// (exit code 2 if not).
    async fn open(
        &self,
        store: &Store,
    ) -> Result<(Table<DynamicEntity>, Query<DynamicEntity>), Failure> {
        let table = store.dynamic_table(&self.table);
        table.name()?;
        let mut query = table.query();
        if let Some(pk) = &self.partition {
            query = query.partition(pk.as_str());
        }
        query = match (&self.from, &self.to) {
            (Some(from), Some(to)) => query.row_keys(from.as_str()..to.as_str()),
            (Some(from), None) => query.row_keys(from.as_str()..),
            (None, Some(to)) => query.row_keys(..to.as_str()),
            (None, None) => query,
        };
        for text in &self.filter {
            let filter = parse_filter(text).map_err(|why| Failure {
                code: Failure::USAGE,
                message: format!("--filter {text:?}: {why}"),
            })?;
            query = query.filter(TypedFilter::raw(filter));
        }
        // Reads create a missing table: ask first, so a typo creates nothing.
        let exists = store
            .list_tables()
            .await?
            .iter()
            .any(|t| t.eq_ignore_ascii_case(&self.table));
        if !exists {
            return Err(Failure::not_found(format!("no table {:?}", self.table)));
        }
        Ok((table, query))
    }

    /// The selection in words, for the confirmation question.
    fn describe(&self) -> String {
        let mut parts = vec![format!("table {}", self.table)];
        if let Some(pk) = &self.partition {
            parts.push(format!("partition {pk:?}"));
        }
        match (&self.from, &self.to) {
            (None, None) => {}
            (from, to) => parts.push(format!(
                "row keys from {} to {}",
                from.as_deref()
                    .map_or("the first".into(), |k| format!("{k:?}")),
                to.as_deref()
                    .map_or("the last".into(), |k| format!("{k:?} (excluded)"))
            )),
        }
        for f in &self.filter {
            parts.push(format!("where {f}"));
        }
        parts.join(", ")
    }
}

/// Runs `leasehold purge`.
pub(crate) async fn purge(store: &Store, args: PurgeArgs, out: &Output) -> Result<(), Failure> {
    let rows = &args.rows;
    if !args.yes && !std::io::stdin().is_terminal() {
        return Err(Failure {
            code: Failure::USAGE,
            message: format!(
                "purge deletes every row of {}; stdin is not a terminal to confirm it: pass --yes",
                rows.describe()
            ),
        });
    }
    let (table, query) = rows.open(store).await?;
    let index_table = format!("{}Idx", rows.table);
    if store
        .list_index_tables()
        .await?
        .iter()
        .any(|t| t.eq_ignore_ascii_case(&index_table))
    {
        return Err(Failure {
            code: Failure::USAGE,
            message: format!(
                "table {} has indexes (index table {index_table}); purge it from the program that \
                 owns its type (Table::purge), so that its index rows go with it",
                rows.table
            ),
        });
    }
    if !args.yes && !confirmed(&rows.describe(), &rows.table) {
        return Err(Failure {
            code: Failure::FAILED,
            message: "not confirmed; nothing deleted".into(),
        });
    }
    let started = Instant::now();
    let mut tally = Tally::new(out, "purge", "deleted");
    let options = PurgeOptions::new().with_concurrency(usize::from(args.concurrency));
    let report = table
        .purge_with(query, &options, |so_far| tally.set(so_far.deleted))
        .await;
    tally.finish();
    let report = report?;
    let seconds = started.elapsed().as_secs_f64();
    if out.json {
        out!(
            "{}",
            json!({
                "table": rows.table,
                "deleted": report.deleted,
                "skipped": report.skipped,
                "batches": report.batches,
                "seconds": seconds,
            })
        );
    } else {
        out!(
            "{}: deleted {} rows in {} transactions ({:.1} s); {} skipped, changed since they were read",
            rows.table,
            report.deleted,
            report.batches,
            seconds,
            report.skipped
        );
    }
    Ok(())
}

/// Runs `leasehold count`.
pub(crate) async fn count(store: &Store, args: CountArgs, out: &Output) -> Result<(), Failure> {
    let rows = &args.rows;
    let (table, query) = rows.open(store).await?;
    let started = Instant::now();
    let mut tally = Tally::new(out, "count", "counted");
    let count = table.count_with(query, |so_far| tally.set(so_far)).await;
    tally.finish();
    let count = count?;
    let seconds = started.elapsed().as_secs_f64();
    if out.json {
        out!(
            "{}",
            json!({ "table": rows.table, "count": count, "seconds": seconds })
        );
    } else {
        out!("{}: {count} rows ({seconds:.1} s)", rows.table);
    }
    Ok(())
}

/// Asks on the terminal; `true` when the answer is the table's name.
fn confirmed(what: &str, table: &str) -> bool {
    err!("This deletes every row of {what}.");
    eprint!("Type the table name ({table}) to go on: ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    if std::io::stdin().lock().read_line(&mut answer).is_err() {
        return false;
    }
    answer.trim() == table
}

/// Parses `PROPERTY OP LITERAL`.
fn parse_filter(text: &str) -> Result<Filter, String> {
    let text = text.trim();
    let (property, rest) = text
        .split_once(char::is_whitespace)
        .ok_or("write PROPERTY OP LITERAL, such as `size gt 100L`")?;
    let (op, literal) = rest
        .trim_start()
        .split_once(char::is_whitespace)
        .ok_or("write PROPERTY OP LITERAL, such as `size gt 100L`")?;
    let op = match op {
        "eq" => CmpOp::Eq,
        "ne" => CmpOp::Ne,
        "gt" => CmpOp::Gt,
        "ge" => CmpOp::Ge,
        "lt" => CmpOp::Lt,
        "le" => CmpOp::Le,
        other => {
            return Err(format!(
                "{other:?} is not an operator: eq, ne, gt, ge, lt or le"
            ));
        }
    };
    let filter = Filter::compare(property, op, parse_literal(literal.trim())?);
    filter.validate().map_err(|e| e.to_string())?;
    Ok(filter)
}

/// Parses an OData literal.
fn parse_literal(text: &str) -> Result<Value, String> {
    let quoted = |inner: &str| -> Result<String, String> {
        let body = inner
            .strip_prefix('\'')
            .and_then(|s| s.strip_suffix('\''))
            .ok_or_else(|| format!("{text} lacks its closing quote"))?;
        if body.replace("''", "").contains('\'') {
            return Err(format!("{text}: a quote inside text is written twice ('')"));
        }
        Ok(body.replace("''", "'"))
    };
    if text.starts_with('\'') {
        return quoted(text).map(Value::String);
    }
    if let Some(rest) = text.strip_prefix("datetime") {
        let body = quoted(rest)?;
        return leasehold::time::OffsetDateTime::parse(
            &body,
            &leasehold::time::format_description::well_known::Rfc3339,
        )
        .map(Value::DateTime)
        .map_err(|e| format!("{body:?} is not a date-time such as 2026-01-02T03:04:05Z: {e}"));
    }
    if let Some(rest) = text.strip_prefix("guid") {
        let body = quoted(rest)?;
        return leasehold::uuid::Uuid::parse_str(&body)
            .map(Value::Guid)
            .map_err(|e| format!("{body:?} is not a GUID: {e}"));
    }
    match text {
        "true" => return Ok(Value::Boolean(true)),
        "false" => return Ok(Value::Boolean(false)),
        _ => {}
    }
    if let Some(digits) = text.strip_suffix('L') {
        return digits
            .parse()
            .map(Value::Int64)
            .map_err(|_| format!("{text} is not a 64-bit integer"));
    }
    if text.contains(['.', 'e', 'E']) {
        return text
            .parse()
            .map(Value::Double)
            .map_err(|_| format!("{text} is not a number"));
    }
    text.parse().map(Value::Int32).map_err(|_| {
        format!(
            "{text} is not a literal: text is quoted ('{text}'), a 64-bit integer ends in L, an Int32 fits 32 bits"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_are_odata_comparisons() {
        for (text, odata) in [
            ("kind eq 'debug'", "kind eq 'debug'"),
            ("name eq 'it''s'", "name eq 'it''s'"),
            ("size gt 100L", "size gt 100L"),
            ("n le 7", "n le 7"),
            ("ok ne true", "ok ne true"),
            ("ratio ge 1.5", "ratio ge 1.5"),
            (
                "at lt datetime'2026-01-02T03:04:05Z'",
                "at lt datetime'2026-01-02T03:04:05.0000000Z'",
            ),
            (
                "id eq guid'6f1a2b3c-0000-4000-8000-000000000001'",
                "id eq guid'6f1a2b3c-0000-4000-8000-000000000001'",
            ),
        ] {
            assert_eq!(
                parse_filter(text).map(|f| f.to_odata()),
                Ok(odata.into()),
                "{text}"
            );
        }
        for bad in [
            "kind",
            "kind eq",
            "kind is 'x'",
            "kind eq 'x",
            "kind eq 'it's'",
            "n eq 99999999999",
            "n eq abc",
            "at eq datetime'yesterday'",
            "bad/name eq 1",
        ] {
            assert!(parse_filter(bad).is_err(), "{bad}");
        }
    }
}
