//! Decision rows: the commit point of a unit writing several (partition,
//! table) groups, or more than one entity-group transaction holds, is the
//! insert of the commit's *decision row* (row key `_lhCommit.<id>`, state
//! `committed`) in the primary partition. The protocol is stated in
//! "The commit protocol" of the [module docs](super); this file keeps the
//! row: its key, its states, and the race that decides it.
//!
//! Whoever meets a marked row reads the decision row: `committed`, it
//! writes the row the commit leaves; `withdrawn`, it takes the mark off;
//! none yet, it waits for the writer, then takes the primary's lock (so a
//! live writer is never withdrawn) and *inserts* the decision row as
//! `withdrawn`. Both the commit point and a withdrawal insert the same row,
//! so exactly one of them is stored: a writer that wakes after it was
//! withdrawn has its commit point refused whole. No clock, lease or lock
//! blob takes part in the decision.

use super::env::LockEnv;
use crate::backend::WriteOptions;
use crate::backend::{TableBackend, TableOp};
use crate::entity::{EntityData, Properties, Value};
use crate::error::{Error, ErrorKind, Result};
use crate::key::{PartitionKey, RowKey, TableName};
use std::sync::Arc;

/// The row-key prefix of decision rows and after-image rows (see
/// [`super::after`]), reserved in every table units write: reads never
/// return such rows.
pub(crate) const ROW_PREFIX: &str = "_lhCommit.";

/// The property holding a decision.
const STATE: &str = "_lhDecision";

/// What a decision row says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// The commit point went through: every marked row is to get the row
    /// its commit leaves.
    Committed,
    /// The commit was withdrawn before its commit point: nothing of it is
    /// applied, ever.
    Withdrawn,
}

impl Decision {
    fn text(self) -> &'static str {
        match self {
            Decision::Committed => "committed",
            Decision::Withdrawn => "withdrawn",
        }
    }
}

/// A fresh transaction id for a commit deciding in `table`: the id, a dot,
/// the table (which is how a mark, and
/// [`Store::commit_outcome`](crate::Store::commit_outcome), find the
/// decision row).
pub(crate) fn new_txn(table: &TableName) -> String {
    format!("{}.{}", uuid::Uuid::new_v4().simple(), table.as_str())
}

/// The table a transaction id names (`None`: it names none).
pub(crate) fn table_of(txn: &str) -> Option<TableName> {
    let (_, table) = txn.split_once('.')?;
    TableName::new(table).ok()
}

/// Whether `row_key` is a decision row's.
pub(crate) fn is_decision_row(row_key: &RowKey) -> bool {
    row_key.as_str().starts_with(ROW_PREFIX)
}

/// The row key of transaction `txn`'s decision row.
pub(super) fn row_key(txn: &str) -> Result<RowKey> {
    let id = txn.split_once('.').map_or(txn, |(id, _)| id);
    RowKey::new(format!("{ROW_PREFIX}{id}"))
}

/// The insert of transaction `txn`'s decision row in partition `primary`.
///
/// # Errors
/// [`Error::Invalid`] for a transaction id that makes no row key.
pub(crate) fn insert(primary: &PartitionKey, txn: &str, decision: Decision) -> Result<TableOp> {
    let mut properties = Properties::new();
    properties.insert_static(STATE, Value::String(decision.text().into()));
    Ok(TableOp::Insert(EntityData {
        partition_key: primary.clone(),
        row_key: row_key(txn)?,
        properties,
    }))
}

/// The delete of transaction `txn`'s decision row, once no mark of it is
/// left.
///
/// # Errors
/// As [`insert`].
pub(crate) fn delete(primary: &PartitionKey, txn: &str) -> Result<TableOp> {
    Ok(TableOp::Delete {
        partition_key: primary.clone(),
        row_key: row_key(txn)?,
        if_match: None,
    })
}

/// Transaction `txn`'s decision, read from `table` of partition `primary`
/// (`None`: none stored).
///
/// # Errors
/// [`Error::Inconsistent`] for a row that leasehold did not write; backend
/// errors.
pub(crate) async fn read(
    backend: &dyn TableBackend,
    table: &TableName,
    primary: &PartitionKey,
    txn: &str,
) -> Result<Option<Decision>> {
    let Some(row) = backend.get(table, primary, &row_key(txn)?).await? else {
        return Ok(None);
    };
    match row.data.properties.get(STATE) {
        Some(Value::String(s)) if s == Decision::Committed.text() => Ok(Some(Decision::Committed)),
        Some(Value::String(s)) if s == Decision::Withdrawn.text() => Ok(Some(Decision::Withdrawn)),
        _ => Err(Error::Inconsistent {
            what: format!(
                "the decision row of transaction {txn} in partition {:?} of `{table}` does not say committed or withdrawn",
                primary.as_str()
            ),
        }),
    }
}

/// Withdraws transaction `txn` unless its commit point got there first:
/// inserts its decision row as withdrawn, and answers what is stored. A
/// decision row found and then gone was a commit's, deleted once it was
/// finished: committed.
///
/// # Errors
/// As [`read`].
pub(crate) async fn withdraw(
    backend: &dyn TableBackend,
    table: &TableName,
    primary: &PartitionKey,
    txn: &str,
) -> Result<Decision> {
    match backend
        .execute(
            table,
            insert(primary, txn, Decision::Withdrawn)?,
            &WriteOptions::new(),
        )
        .await
    {
        Ok(_) => Ok(Decision::Withdrawn),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(read(backend, table, primary, txn)
            .await?
            .unwrap_or(Decision::Committed)),
        Err(e) => Err(e),
    }
}

/// Transaction `txn`'s decision, made final: read, and where there is none,
/// the transaction withdrawn (see [`withdraw`]).
///
/// # Errors
/// As [`read`].
pub(crate) async fn settle(
    backend: &dyn TableBackend,
    table: &TableName,
    primary: &PartitionKey,
    txn: &str,
) -> Result<Decision> {
    match read(backend, table, primary, txn).await? {
        Some(decision) => Ok(decision),
        None => withdraw(backend, table, primary, txn).await,
    }
}

/// What happened to a commit, as its decision row tells it
/// ([`Store::commit_outcome`](crate::Store::commit_outcome)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommitOutcome {
    /// The commit point went through: every write is applied (rows still
    /// marked are finished by whoever reads them next).
    Applied,
    /// The commit was withdrawn before its commit point (by its writer, or
    /// by a reader or [`Store::commit_outcome`](crate::Store::commit_outcome)
    /// meeting it undecided): nothing of it is applied, ever.
    NotApplied,
}

/// [`Store::commit_outcome`](crate::Store::commit_outcome): transaction
/// `txn`'s decision, made final — a transaction without one is withdrawn,
/// so that a commit point still on its way is refused.
///
/// # Errors
/// [`Error::Invalid`] for a transaction id that names no table; as
/// [`read`].
pub(crate) async fn outcome(
    env: &Arc<LockEnv>,
    primary: &PartitionKey,
    txn: &str,
) -> Result<CommitOutcome> {
    let Some(table) = table_of(txn) else {
        return Err(Error::invalid(
            format!("transaction id {txn:?}"),
            "names no table: a commit's id is `<id>.<table>`, as `CommitReport::transaction` and `Error::InDoubt` give it",
        ));
    };
    let decision = settle(env.backend().as_ref(), &table, primary, txn).await?;
    Ok(match decision {
        Decision::Committed => CommitOutcome::Applied,
        Decision::Withdrawn => CommitOutcome::NotApplied,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transaction_id_names_its_table_and_its_row() {
        let table = TableName::new("lhAccounts").unwrap();
        let txn = new_txn(&table);
        assert_eq!(table_of(&txn), Some(table));
        assert!(is_decision_row(&row_key(&txn).unwrap()));
        assert_eq!(table_of("0f1e2d3c"), None, "an id naming no table");
        assert!(!is_decision_row(&RowKey::new("main").unwrap()));
    }
}
