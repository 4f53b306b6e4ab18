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
use crate::backend::{StoredEntity, TableBackend, TableOp};
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

/// The property of a committed decision row naming the (table, partition)
/// groups whose rows the commit marked: where its marks can be, for the
/// prune that removes the row once none is left (see `leftovers.rs`).
const GROUPS: &str = "_lhGroups";

/// The longest group list a decision row carries (UTF-16 units, within a
/// string property's 64 KiB); a longer one is left out, and the row is
/// then kept by the prune.
const MAX_GROUPS_TEXT: usize = 30_000;

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

/// The commit point's insert of transaction `txn`'s decision row as
/// committed, naming the (table, partition) groups whose rows it marked.
///
/// # Errors
/// As [`insert`].
pub(crate) fn insert_committed(
    primary: &PartitionKey,
    txn: &str,
    groups: &[(&TableName, &PartitionKey)],
) -> Result<TableOp> {
    let mut op = insert(primary, txn, Decision::Committed)?;
    let list: Vec<[&str; 2]> = groups
        .iter()
        .map(|(t, pk)| [t.as_str(), pk.as_str()])
        .collect();
    let text = serde_json::to_string(&list).unwrap_or_default();
    if let Some(data) = op.data_mut()
        && !text.is_empty()
        && text.encode_utf16().count() <= MAX_GROUPS_TEXT
    {
        data.properties.insert_static(GROUPS, Value::String(text));
    }
    Ok(op)
}

/// A decision row as stored: its decision, and the groups its commit
/// marked (`None`: not recorded).
pub(crate) struct Stored {
    pub(crate) decision: Decision,
    pub(crate) groups: Option<Vec<(TableName, PartitionKey)>>,
}

impl Stored {
    /// The decision row `row` says, if it is one leasehold wrote.
    pub(crate) fn of(row: &StoredEntity) -> Option<Stored> {
        let decision = match row.data.properties.get(STATE) {
            Some(Value::String(s)) if s == Decision::Committed.text() => Decision::Committed,
            Some(Value::String(s)) if s == Decision::Withdrawn.text() => Decision::Withdrawn,
            _ => return None,
        };
        let groups = match row.data.properties.get(GROUPS) {
            Some(Value::String(text)) => serde_json::from_str::<Vec<[String; 2]>>(text)
                .ok()
                .and_then(|list| {
                    list.into_iter()
                        .map(|[t, pk]| Some((TableName::new(t).ok()?, PartitionKey::new(pk).ok()?)))
                        .collect()
                }),
            _ => None,
        };
        Some(Stored { decision, groups })
    }
}

/// The transaction id part of a decision row's or after-image row's key
/// (`None`: not such a key).
pub(crate) fn id_of(row_key: &RowKey) -> Option<&str> {
    let rest = row_key.as_str().strip_prefix(ROW_PREFIX)?;
    Some(rest.split_once('.').map_or(rest, |(id, _)| id))
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
