//! The expiry step of [`Store::sweep`](super::Store::sweep): deletes the
//! rows past their expiry (`crate::rows::expiry`), found by a filter on
//! the expiry property alone, so any table is swept without its Rust type.
//! A marked row is judged as resolved. Each delete carries the ETag read,
//! so a row renewed since is kept; no waiting bound is needed, since no
//! write relies on an expired row being there (an insert over it is
//! conditioned on its ETag). A row of a type with indexes goes as
//! [`Table::delete`](crate::Table::delete) deletes one: a tombstone at the
//! ETag read, then its index rows.

use std::sync::Arc;

use time::OffsetDateTime;

use super::SweepReport;
use crate::backend::{Precondition, StoredEntity, TableOp};
use crate::error::{ErrorKind, Result};
use crate::index::claim;
use crate::lock::LockEnv;
use crate::query::{CmpOp, Filter};
use crate::rows::{decision, expiry, tombstone};
use crate::table::Resolver;

/// Deletes (a dry run: counts) the rows of `table` (without the store's
/// prefix) whose expiry is at or before `now`, counting them in `report`.
pub(crate) async fn delete_expired(
    env: &Arc<LockEnv>,
    table: &str,
    now: OffsetDateTime,
    dry_run: bool,
    report: &mut SweepReport,
) -> Result<()> {
    let name = env.table_name(table)?;
    let indexes = match crate::index::read_defs(env.tables(), table).await {
        Ok(found) => found,
        // No index table can have such a name: the type has no indexes.
        Err(e) if e.kind() == ErrorKind::Invalid => None,
        Err(e) => return Err(e),
    };
    let due = Filter::compare(
        expiry::PROPERTY,
        CmpOp::Le,
        crate::entity::Value::DateTime(now),
    );
    let backend = env.backend.as_ref();
    let mut pages = crate::rows::Pages::new(backend, &name, due);
    let resolver = Resolver::new(env.tables(), Vec::new());
    let before = (report.expired_rows, report.kept);
    // A page at a time: a table's expired rows may not fit in memory.
    while let Some(page) = pages.next().await? {
        for row in page {
            if decision::is_decision_row(&row.data.row_key) {
                continue;
            }
            // A row in a commit: judged as the commit leaves it.
            let Some(row) = resolver.resolve_opt(&name, Some(row)).await? else {
                continue;
            };
            if row.data.properties.get(tombstone::PROPERTY).is_some()
                || !expiry::expired_at(&row.data.properties, now)
            {
                continue;
            }
            report.rows_examined += 1;
            if dry_run {
                report.expired_rows += 1;
                continue;
            }
            let removed = match &indexes {
                Some(indexes) => remove_indexed(env, indexes, &name, row).await?,
                None => crate::rows::delete_as_read(backend, &name, &row).await?,
            };
            if removed {
                report.expired_rows += 1;
            } else {
                report.kept += 1;
            }
        }
    }
    if !dry_run {
        env.telemetry.expired_rows(
            name.as_str(),
            report.expired_rows - before.0,
            report.kept - before.1,
        );
    }
    Ok(())
}

/// Deletes an expired row of a type with indexes; `false` when the row
/// changed since.
async fn remove_indexed(
    env: &Arc<LockEnv>,
    indexes: &crate::index::Indexes,
    table: &crate::key::TableName,
    row: StoredEntity,
) -> Result<bool> {
    let owner = (row.data.partition_key.clone(), row.data.row_key.clone());
    let frees: Vec<(usize, crate::index::Key)> = indexes
        .keys(Some(&row.data.properties))?
        .into_iter()
        .enumerate()
        .filter_map(|(i, key)| key.map(|k| (i, k)))
        .collect();
    let freed = claim::read_freed(env.tables(), indexes, &frees, &owner).await?;
    let gone = tombstone::data(&owner.0, &owner.1, "expired");
    let op = TableOp::Replace(gone, Precondition::IfMatch(row.etag));
    let removed = crate::rows::write_as_read(env.backend.as_ref(), table, op).await?;
    if removed {
        claim::remove_freed(env.tables(), indexes, freed).await;
    }
    Ok(removed)
}
