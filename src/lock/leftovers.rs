//! What commits leave behind: decision rows and after-image rows that no
//! reader needs any more, removed by
//! [`Store::prune_locks`](crate::Store::prune_locks).
//!
//! A commit removes its own decision row and after-image rows once it has
//! finished every marked row. A writer that stopped half-way leaves them,
//! and so does a reader that withdrew a commit (it cannot tell where the
//! commit's other marks are). The prune looks at every row with the
//! reserved key prefix `_lhCommit.` in the store's tables, and removes:
//!
//! * a **committed** decision row once it is older than `older_than` (so
//!   that [`Store::commit_outcome`](crate::Store::commit_outcome) still
//!   answers for it meanwhile) and no row of the groups it names (the
//!   (table, partition) pairs its commit marked) carries its mark any
//!   more: every reader that could need it has finished its row. A row
//!   without the list is kept.
//! * a **withdrawn** decision row once it is older than `older_than` and
//!   than [`LATE_COMMIT_POINT`]. Its marks may remain; a reader meeting one
//!   later finds no decision, takes the primary's lock and withdraws the
//!   commit again. What must not happen is its writer's commit point
//!   landing after the row is gone. The writer sends it only while its
//!   lease is valid, and the commit was withdrawn only after that lease
//!   ran out (the withdrawing reader took the lock), so the commit point
//!   was sent before the withdrawal and can only arrive late if the network
//!   or the service held it: the service refuses a request signed with
//!   Shared Key whose date is more than 15 minutes off, and answers a
//!   request it accepted within its own operation timeout, so no commit
//!   point lands [`LATE_COMMIT_POINT`] after it was sent.
//! * an **after-image row** whose commit has no decision row (withdrawn,
//!   removed as above, or never decided) once it is as old as that bound,
//!   or whose commit's decision row this prune removes.
//!
//! Each removal is conditioned on the row's ETag as read.

use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;

use super::env::LockEnv;
use crate::backend::{QuerySpec, StoredEntity, TableBackend, TableOp, WriteOptions};
use crate::entity::Value;
use crate::error::{ErrorKind, Result};
use crate::key::{PartitionKey, TableName};
use crate::query::{CmpOp, Filter};
use crate::rows::decision::{self, Decision, Stored};
use crate::rows::mark::MARK;

/// How long after it was sent a commit point may still land (see the
/// module docs): 15 minutes of the service's signature window and 5 of
/// clock skew.
const LATE_COMMIT_POINT: Duration = Duration::from_secs(20 * 60);

/// What a prune removed of the rows commits leave behind.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Removed {
    pub(crate) decision_rows: usize,
    pub(crate) after_image_rows: usize,
}

/// Removes (or, for a `dry_run`, counts) the decision rows and after-image
/// rows of the store's tables that no reader needs any more, those of
/// commits decided before `cutoff` (`None`: every commit counts as old
/// enough for `older_than`; the [`LATE_COMMIT_POINT`] bound holds anyway).
///
/// # Errors
/// Backend errors of the listings, reads and deletes.
pub(crate) async fn prune(
    env: &Arc<LockEnv>,
    cutoff: Option<OffsetDateTime>,
    dry_run: bool,
) -> Result<Removed> {
    let backend = env.backend().clone();
    let now = OffsetDateTime::now_utc();
    let late = now - LATE_COMMIT_POINT;
    let old =
        |row: &StoredEntity, bound: Option<OffsetDateTime>| bound.is_none_or(|b| row.timestamp < b);
    let mut removed = Removed::default();
    // Every table's reserved rows first: a commit's after-image rows live
    // in the tables of the rows it marked, its decision row in the primary
    // group's.
    let mut all: Vec<(TableName, Vec<StoredEntity>)> = Vec::new();
    for table in backend.list_tables().await? {
        if table.as_str().starts_with(env.table_prefix()) {
            let rows = reserved_rows(backend.as_ref(), &table).await?;
            all.push((table, rows));
        }
    }
    // Decision rows: what they decide says which after-image rows go.
    let mut gone_ids: Vec<String> = Vec::new();
    let mut live_ids: Vec<String> = Vec::new();
    for (table, rows) in &all {
        for row in rows.iter().filter(|r| is_decision_row(r)) {
            let Some(id) = decision::id_of(&row.data.row_key) else {
                continue;
            };
            let goes = match Stored::of(row) {
                None => false,
                Some(Stored {
                    decision: Decision::Withdrawn,
                    ..
                }) => old(row, cutoff) && row.timestamp < late,
                Some(Stored {
                    decision: Decision::Committed,
                    groups,
                }) => {
                    old(row, cutoff)
                        && match &groups {
                            Some(groups) => {
                                no_marks_left(backend.as_ref(), groups, id, table).await?
                            }
                            None => false,
                        }
                }
            };
            if goes && (dry_run || delete(backend.as_ref(), table, row).await?) {
                removed.decision_rows += 1;
                gone_ids.push(id.to_owned());
            } else {
                live_ids.push(id.to_owned());
            }
        }
    }
    // After-image rows: those of a commit whose decision row went now, or
    // of one without a decision row that is too old for a commit point to
    // land.
    for (table, rows) in &all {
        for row in rows.iter().filter(|r| !is_decision_row(r)) {
            let Some(id) = decision::id_of(&row.data.row_key) else {
                continue;
            };
            let undecided_and_old = !live_ids.iter().any(|l| l == id) && row.timestamp < late;
            if (gone_ids.iter().any(|g| g == id) || undecided_and_old)
                && (dry_run || delete(backend.as_ref(), table, row).await?)
            {
                removed.after_image_rows += 1;
            }
        }
    }
    Ok(removed)
}

/// Whether `row` is a decision row (not an after-image row).
fn is_decision_row(row: &StoredEntity) -> bool {
    decision::id_of(&row.data.row_key)
        .is_some_and(|id| row.data.row_key.as_str().len() == decision::ROW_PREFIX.len() + id.len())
}

/// Every row of `table` with the reserved key prefix of commits, in every
/// partition.
async fn reserved_rows(backend: &dyn TableBackend, table: &TableName) -> Result<Vec<StoredEntity>> {
    let prefix = decision::ROW_PREFIX;
    let end = format!("{}/", prefix.trim_end_matches('.'));
    let filter = Filter::compare("RowKey", CmpOp::Ge, Value::String(prefix.to_owned()))
        .and(Filter::compare("RowKey", CmpOp::Lt, Value::String(end)));
    let mut spec = QuerySpec {
        filter: Some(filter),
        ..QuerySpec::default()
    };
    let mut rows = Vec::new();
    loop {
        let page = match backend.query(table, &spec).await {
            Ok(page) => page,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(rows),
            Err(e) => return Err(e),
        };
        rows.extend(page.entities);
        match page.continuation {
            Some(next) => spec.continuation = Some(next),
            None => return Ok(rows),
        }
    }
}

/// Whether no row of `groups` carries a mark of the commit `id` decided in
/// `table` (one query per group, of its partition).
async fn no_marks_left(
    backend: &dyn TableBackend,
    groups: &[(TableName, PartitionKey)],
    id: &str,
    table: &TableName,
) -> Result<bool> {
    // A mark's text starts with the transaction id: `<id>.<table>|…`.
    let from = format!("{id}.{}|", table.as_str());
    let to = format!("{id}.{}}}", table.as_str());
    for (group, pk) in groups {
        let filter = Filter::compare("PartitionKey", CmpOp::Eq, Value::String(pk.as_str().into()))
            .and(Filter::compare(
                MARK,
                CmpOp::Ge,
                Value::String(from.clone()),
            ))
            .and(Filter::compare(MARK, CmpOp::Lt, Value::String(to.clone())));
        let mut spec = QuerySpec {
            filter: Some(filter),
            top: Some(1),
            ..QuerySpec::default()
        };
        loop {
            let page = match backend.query(group, &spec).await {
                Ok(page) => page,
                Err(e) if e.kind() == ErrorKind::NotFound => break,
                Err(e) => return Err(e),
            };
            if !page.entities.is_empty() {
                return Ok(false);
            }
            match page.continuation {
                Some(next) => spec.continuation = Some(next),
                None => break,
            }
        }
    }
    Ok(true)
}

/// Deletes `row` at its ETag; answers whether it did. A row changed or
/// gone meanwhile is left to the next prune.
async fn delete(backend: &dyn TableBackend, table: &TableName, row: &StoredEntity) -> Result<bool> {
    let op = TableOp::Delete {
        partition_key: row.data.partition_key.clone(),
        row_key: row.data.row_key.clone(),
        if_match: Some(row.etag.clone()),
    };
    match backend.execute(table, op, &WriteOptions::new()).await {
        Ok(_) => Ok(true),
        Err(e) if matches!(e.kind(), ErrorKind::Conflict | ErrorKind::NotFound) => Ok(false),
        Err(e) => Err(e),
    }
}
