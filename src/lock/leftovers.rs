//! What commits leave behind: decision rows and after-image rows that no
//! reader needs any more, removed by [`Store::sweep`](crate::Store::sweep)
//! under the rules (and for the reasons) of "Rows commits leave behind" in the
//! [module docs](super): a committed decision row once no group it names
//! holds one of its marks (a row without the list is kept), a withdrawn
//! one past [`LATE_COMMIT_POINT`], after-image rows with their decision
//! row or, without one, past that bound. Each removal is conditioned on
//! the row's ETag as read.
//!
//! [`Store::list_commits`](crate::Store::list_commits) shows operators the
//! same rows of one partition, and the marks there: each commit with its
//! decision (or none yet) and the rows it still marks. It writes nothing.

use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;

use super::decision::CommitOutcome;
use super::env::LockEnv;
use crate::backend::{StoredEntity, TableBackend};
use crate::entity::Value;
use crate::error::{ErrorKind, Result};
use crate::key::{PartitionKey, TableName};
use crate::query::{CmpOp, Filter};
use crate::rows::decision::{self, Stored};
use crate::rows::mark::{MARK, Mark};
use crate::rows::{delete_as_read, query_all};

/// How long after a withdrawal a commit point may still land: it is signed
/// only while its writer's lease is valid (`crate::backend::deadline`), a
/// withdrawal comes only after that lease ran out, and the service refuses
/// a Shared Key request dated more than 15 minutes off. 15 minutes, and 5
/// of clock skew.
const LATE_COMMIT_POINT: Duration = Duration::from_secs(20 * 60);

/// What a prune removed of the rows commits leave behind.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Removed {
    pub(crate) decision_rows: u64,
    pub(crate) after_image_rows: u64,
}

/// Removes (or, for a `dry_run`, counts) the decision rows and after-image
/// rows of the store's tables that no reader needs any more, those of
/// commits decided before `cutoff` (`None`: every commit counts as old
/// enough for `older_than`; the [`LATE_COMMIT_POINT`] and
/// [`decision::DECISIONS_KEPT`] bounds hold anyway). Rows are judged as if it were
/// `later` than now (tests age rows so).
///
/// # Errors
/// Backend errors of the listings, reads and deletes.
pub(crate) async fn prune(
    env: &Arc<LockEnv>,
    cutoff: Option<OffsetDateTime>,
    later: Duration,
    dry_run: bool,
) -> Result<Removed> {
    let backend = env.backend().clone();
    let now = OffsetDateTime::now_utc() + later;
    let cutoff = cutoff.map(|c| c + later);
    let late = now - LATE_COMMIT_POINT;
    let kept = now - decision::DECISIONS_KEPT;
    let old =
        |row: &StoredEntity, bound: Option<OffsetDateTime>| bound.is_none_or(|b| row.timestamp < b);
    let mut removed = Removed::default();
    // Every table's reserved rows first: a commit's after-image rows live
    // in the tables of the rows it marked, its decision row in the primary
    // group's.
    let mut all: Vec<(TableName, Vec<StoredEntity>)> = Vec::new();
    for table in backend.list_tables().await? {
        if table.as_str().starts_with(env.table_prefix()) {
            let rows = query_all(backend.as_ref(), &table, reserved_keys()).await?;
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
                    decision: CommitOutcome::NotApplied,
                    ..
                }) => old(row, cutoff) && row.timestamp < late,
                Some(Stored {
                    decision: CommitOutcome::Applied,
                    groups,
                }) => {
                    old(row, cutoff)
                        && row.timestamp < kept
                        && match &groups {
                            Some(groups) => {
                                no_marks_left(backend.as_ref(), groups, id, table).await?
                            }
                            None => false,
                        }
                }
            };
            if goes && (dry_run || delete_as_read(backend.as_ref(), table, row).await?) {
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
                && (dry_run || delete_as_read(backend.as_ref(), table, row).await?)
            {
                removed.after_image_rows += 1;
            }
        }
    }
    Ok(removed)
}

/// A commit as [`Store::list_commits`](crate::Store::list_commits) finds it
/// in one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommitSummary {
    /// The transaction id, `<id>.<table>`, as
    /// [`CommitReport::transaction`](super::CommitReport::transaction) and
    /// [`Error::InDoubt`](crate::Error::InDoubt) give it.
    pub transaction: String,
    /// What its decision row says: applied (its commit point went through;
    /// rows still marked are finished by their next read) or not (it was
    /// withdrawn; marks left are taken off by their next read). `None`:
    /// rows carry its mark and it has no decision row — its writer has not
    /// reached its commit point yet, or stopped before it;
    /// [`Store::commit_outcome`](crate::Store::commit_outcome), or a reader
    /// once the writer's lease (a transaction's time-to-live) ran out,
    /// withdraws it unless the commit point lands first.
    pub outcome: Option<CommitOutcome>,
    /// The partition of its decision row (its primary): the partition
    /// listed, or another one for a commit that marked rows here.
    pub primary: PartitionKey,
    /// The table of its decision row, as stored (with the table prefix).
    pub decision_table: TableName,
    /// When its decision row was written, by the service's clock; for an
    /// undecided commit, when its oldest mark in this partition was.
    pub since: OffsetDateTime,
    /// How many rows of the listed partition still carry its mark, per
    /// table (as stored); empty when none does.
    pub marked_rows: Vec<(TableName, usize)>,
}

/// [`Store::list_commits`](crate::Store::list_commits): the commits whose
/// decision row, or a row marked by them, is in partition `pk` of the
/// store's tables, oldest first. One query per table, and one read per
/// commit marked here whose decision row is elsewhere; nothing written.
///
/// # Errors
/// [`Error::Invalid`](crate::Error::Invalid) for a mark whose transaction
/// id makes no row key; backend errors.
pub(crate) async fn list(env: &Arc<LockEnv>, pk: &PartitionKey) -> Result<Vec<CommitSummary>> {
    let backend = env.backend().as_ref();
    let here = Filter::compare("PartitionKey", CmpOp::Eq, Value::String(pk.as_str().into()));
    let marked = Filter::compare(MARK, CmpOp::Ge, Value::String(String::new()));
    let filter = here.and(reserved_keys().or(marked));
    let mut found: Vec<CommitSummary> = Vec::new();
    let mut marks: Vec<(Mark, TableName, OffsetDateTime)> = Vec::new();
    for table in backend.list_tables().await? {
        if !table.as_str().starts_with(env.table_prefix()) {
            continue;
        }
        for row in query_all(backend, &table, filter.clone()).await? {
            if let Some(id) = decision::id_of(&row.data.row_key) {
                // A decision row; an after-image row is skipped.
                if is_decision_row(&row)
                    && let Some(stored) = Stored::of(&row)
                {
                    found.push(CommitSummary {
                        transaction: format!("{id}.{table}"),
                        outcome: Some(stored.decision),
                        primary: pk.clone(),
                        decision_table: table.clone(),
                        since: row.timestamp,
                        marked_rows: Vec::new(),
                    });
                }
            } else if let Some(mark) = Mark::of(&row.data.properties) {
                marks.push((mark, table.clone(), row.timestamp));
            }
        }
    }
    for (mark, table, at) in marks {
        let i = match found.iter().position(|c| c.transaction == mark.txn) {
            Some(i) => i,
            None => {
                let Some(decided_in) = decision::table_of(&mark.txn) else {
                    continue;
                };
                let key = decision::row_key(&mark.txn)?;
                let row = match backend.get(&decided_in, &mark.primary, &key).await {
                    Err(e) if e.kind() == ErrorKind::NotFound => None,
                    row => row?,
                };
                let decided = row.and_then(|r| Some((Some(Stored::of(&r)?.decision), r.timestamp)));
                let (outcome, since) = decided.unwrap_or((None, at));
                found.push(CommitSummary {
                    transaction: mark.txn,
                    outcome,
                    primary: mark.primary,
                    decision_table: decided_in,
                    since,
                    marked_rows: Vec::new(),
                });
                found.len() - 1
            }
        };
        let commit = &mut found[i];
        if commit.outcome.is_none() {
            commit.since = commit.since.min(at);
        }
        match commit.marked_rows.iter_mut().find(|(t, _)| *t == table) {
            Some((_, n)) => *n += 1,
            None => commit.marked_rows.push((table, 1)),
        }
    }
    found.sort_by(|a, b| (a.since, &a.transaction).cmp(&(b.since, &b.transaction)));
    Ok(found)
}

/// Whether `row` is a decision row (not an after-image row).
fn is_decision_row(row: &StoredEntity) -> bool {
    decision::id_of(&row.data.row_key)
        .is_some_and(|id| row.data.row_key.as_str().len() == decision::ROW_PREFIX.len() + id.len())
}

/// The rows with the reserved key prefix of commits.
fn reserved_keys() -> Filter {
    let prefix = decision::ROW_PREFIX;
    let end = format!("{}/", prefix.trim_end_matches('.'));
    Filter::compare("RowKey", CmpOp::Ge, Value::String(prefix.to_owned())).and(Filter::compare(
        "RowKey",
        CmpOp::Lt,
        Value::String(end),
    ))
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
    let txn = format!("{id}.{}", table.as_str());
    for (group, pk) in groups {
        let marked = Filter::compare("PartitionKey", CmpOp::Eq, Value::String(pk.as_str().into()))
            .and(Filter::compare(
                MARK,
                CmpOp::Ge,
                Value::String(format!("{txn}|")),
            ))
            .and(Filter::compare(
                MARK,
                CmpOp::Lt,
                Value::String(format!("{txn}}}")),
            ));
        if !query_all(backend, group, marked).await?.is_empty() {
            return Ok(false);
        }
    }
    Ok(true)
}
