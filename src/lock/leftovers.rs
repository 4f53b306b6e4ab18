//! What commits leave behind ("Rows commits leave behind" in the
//! [module docs](super)): the sweep's prune, and
//! [`Store::list_commits`](crate::Store::list_commits).

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

/// How long after a withdrawal a commit point may still land (15 minutes
/// of Shared Key validity, 5 of clock skew).
const LATE_COMMIT_POINT: Duration = Duration::from_secs(20 * 60);

/// What a prune removed of the rows commits leave behind.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Removed {
    pub(crate) decision_rows: u64,
    pub(crate) after_image_rows: u64,
}

/// Removes (a `dry_run`: counts) the decision and after-image rows of
/// `tables` (the store's) no reader needs, decided before `cutoff`
/// (`None`: any), `later` than now.
pub(crate) async fn prune(
    env: &Arc<LockEnv>,
    tables: &[TableName],
    cutoff: Option<OffsetDateTime>,
    later: Duration,
    dry_run: bool,
) -> Result<Removed> {
    let backend = env.backend.clone();
    let now = OffsetDateTime::now_utc() + later;
    let cutoff = cutoff.map(|c| c + later);
    let late = now - LATE_COMMIT_POINT;
    let kept = now - decision::DECISIONS_KEPT;
    let old =
        |row: &StoredEntity, bound: Option<OffsetDateTime>| bound.is_none_or(|b| row.timestamp < b);
    let mut removed = Removed::default();
    // Every table's reserved rows first: a commit's rows span tables.
    let mut all: Vec<(TableName, Vec<StoredEntity>)> = Vec::new();
    for table in tables {
        let rows = query_all(backend.as_ref(), table, reserved_keys()).await?;
        all.push((table.clone(), rows));
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
                Some(stored) if stored.decision == CommitOutcome::NotApplied => {
                    old(row, cutoff) && row.timestamp < late
                }
                // A committed one, once no group it names holds its marks.
                Some(Stored {
                    groups: Some(groups),
                    ..
                }) if old(row, cutoff) && row.timestamp < kept => {
                    no_marks_left(backend.as_ref(), &groups, id, table).await?
                }
                _ => false,
            };
            if goes && (dry_run || delete_as_read(backend.as_ref(), table, row).await?) {
                removed.decision_rows += 1;
                gone_ids.push(id.to_owned());
            } else {
                live_ids.push(id.to_owned());
            }
        }
    }
    // After-image rows: of a commit whose decision row went, or of an old
    // one without any.
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
    /// What its decision row says; `None`: undecided.
    pub outcome: Option<CommitOutcome>,
    /// The partition of its decision row (its primary).
    pub primary: PartitionKey,
    /// The table of its decision row, as stored (with the table prefix).
    pub decision_table: TableName,
    /// When its decision row (else its oldest mark here) was written.
    pub since: OffsetDateTime,
    /// How many rows of the listed partition carry its mark, per table.
    pub marked_rows: Vec<(TableName, usize)>,
}

/// [`Store::list_commits`](crate::Store::list_commits) over `tables` (the
/// store's).
pub(crate) async fn list(
    env: &Arc<LockEnv>,
    tables: Vec<TableName>,
    pk: &PartitionKey,
) -> Result<Vec<CommitSummary>> {
    let backend = env.backend.as_ref();
    let here = Filter::compare("PartitionKey", CmpOp::Eq, Value::String(pk.as_str().into()));
    let marked = Filter::compare(MARK, CmpOp::Ge, Value::String(String::new()));
    let filter = here.and(reserved_keys().or(marked));
    let mut found: Vec<CommitSummary> = Vec::new();
    let mut marks: Vec<(Mark, TableName, OffsetDateTime)> = Vec::new();
    for table in tables {
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
    between("RowKey", prefix.to_owned(), end)
}

/// The rows whose string `property` lies in `[from, to)`.
fn between(property: &'static str, from: String, to: String) -> Filter {
    let compare = |op, value| Filter::compare(property, op, Value::String(value));
    compare(CmpOp::Ge, from).and(compare(CmpOp::Lt, to))
}

/// Whether no row of `groups` carries a mark of commit `id` of `table`.
async fn no_marks_left(
    backend: &dyn TableBackend,
    groups: &[(TableName, PartitionKey)],
    id: &str,
    table: &TableName,
) -> Result<bool> {
    // A mark's text starts with the transaction id: `<id>.<table>|…`.
    let txn = format!("{id}.{}", table.as_str());
    for (group, pk) in groups {
        let here = Filter::compare("PartitionKey", CmpOp::Eq, Value::String(pk.as_str().into()));
        let marked = here.and(between(MARK, format!("{txn}|"), format!("{txn}}}")));
        if !query_all(backend, group, marked).await?.is_empty() {
            return Ok(false);
        }
    }
    Ok(true)
}
