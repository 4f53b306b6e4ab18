//! Decision rows: the commit point of a unit writing
//! several (partition, table) groups is the entity-group transaction of one
//! of them, which also inserts the commit's *decision row* (see "The commit
//! protocol" in the [module docs](super)).
//!
//! The steps, after the unit's reads:
//!
//! 1. **Marks**, all at once: every row of every other group gets the mark
//!    of the transaction ([`MARK`](super::marks::MARK), naming the primary
//!    partition) and the row the commit leaves ([`AFTER`]), conditioned on
//!    the row as the unit read it (a placeholder where it was absent). A
//!    row changed since fails the commit here, nothing applied.
//! 2. **Commit point**: the primary group's own writes, each conditioned on
//!    the row as read, and the insert of the decision row
//!    `_lhCommit.<id>` (state `committed`), in one transaction of the
//!    primary partition: applied whole or not at all.
//! 3. **Finish**, all at once: each marked row replaced by the row the
//!    commit leaves, at the ETag its mark produced.
//! 4. The decision row deleted, with the locks' releases.
//!
//! Whoever meets a marked row reads the decision row: `committed`, it
//! writes the row the commit leaves; `withdrawn`, it takes the mark off;
//! none yet, it waits briefly for the writer, then takes the primary's lock
//! (so a live writer is never withdrawn) and *inserts* the decision row as
//! `withdrawn`. Both the commit point and a withdrawal insert the same row,
//! so exactly one of them is stored: a writer that wakes after it was
//! withdrawn has its commit transaction refused whole. No clock, lease or
//! lock blob takes part in the decision.
//!
//! The decision row is deleted only once every mark of its commit is off
//! (step 4); a commit that stopped earlier leaves it for the readers that
//! still need it. A withdrawal's row stays: a writer paused before its
//! commit point may still send it.

use super::env::LockEnv;
use crate::backend::WriteOptions;
use crate::backend::{StoredEntity, TableBackend, TableOp};
use crate::entity::{EntityData, Properties, Value};
use crate::error::{Error, ErrorKind, Result};
use crate::key::{PartitionKey, RowKey, TableName};
use std::sync::Arc;

use super::journal::{entity_of, properties_json};

/// The reserved property holding, on a row marked by a commit that decides
/// in a row of its own, the row the commit leaves: its properties in the
/// wire form as JSON text, or `null` for a delete.
pub(crate) const AFTER: &str = "_lhNew";

/// The row-key prefix of decision rows, reserved in every table units
/// write: queries never return such rows.
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

/// The table of a transaction deciding in a row (`None`: a transaction id
/// of a commit journalled in a lock blob).
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

/// The after-image text a mark carries: the row `op` leaves (`op` being the
/// whole-row replace or delete a commit applies).
pub(crate) fn after_text(op: &TableOp) -> String {
    match op.data() {
        Some(data) if !matches!(op, TableOp::Delete { .. }) => {
            serde_json::Value::Object(properties_json(data)).to_string()
        }
        _ => "null".to_owned(),
    }
}

/// The write a reader sends for a committed transaction's marked `row`: the
/// row its commit leaves (from [`AFTER`]) at the row's ETag.
///
/// # Errors
/// [`Error::Inconsistent`] when the row carries no after-image leasehold
/// can read.
pub(crate) fn after_op(table: &TableName, row: &StoredEntity) -> Result<TableOp> {
    let bad = |why: String| Error::Inconsistent {
        what: format!(
            "row {:?} of partition {:?} is marked by a committed transaction but its after-image {why}",
            row.data.row_key.as_str(),
            row.data.partition_key.as_str()
        ),
    };
    let Some(Value::String(text)) = row.data.properties.get(AFTER) else {
        return Err(bad("is missing".into()));
    };
    let json: serde_json::Value =
        serde_json::from_str(text).map_err(|e| bad(format!("does not parse: {e}")))?;
    let at = crate::backend::Precondition::IfMatch(row.etag.clone());
    match json {
        serde_json::Value::Null => Ok(TableOp::Delete {
            partition_key: row.data.partition_key.clone(),
            row_key: row.data.row_key.clone(),
            if_match: Some(row.etag.clone()),
        }),
        serde_json::Value::Object(map) => {
            let data = entity_of(table, &row.data.partition_key, &row.data.row_key, &map)
                .map_err(|e| bad(format!("does not parse: {e}")))?;
            Ok(TableOp::Replace(data, at))
        }
        _ => Err(bad("is neither a row nor null".into())),
    }
}

/// [`Store::commit_outcome`](crate::Store::commit_outcome) of a
/// transaction deciding in a row (`None`: `txn` is a lock-blob journal's):
/// its decision, made final — a transaction without one is withdrawn, so
/// that a commit point still on its way is refused.
///
/// # Errors
/// As [`read`].
pub(crate) async fn outcome(
    env: &Arc<LockEnv>,
    primary: &PartitionKey,
    txn: &str,
) -> Result<Option<super::CommitOutcome>> {
    let Some(table) = table_of(txn) else {
        return Ok(None);
    };
    let decision = settle(env.backend().as_ref(), &table, primary, txn).await?;
    Ok(Some(match decision {
        Decision::Committed => super::CommitOutcome::Applied,
        Decision::Withdrawn => super::CommitOutcome::NotRecorded,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Precondition;
    use crate::key::ETag;

    #[test]
    fn a_transaction_id_names_its_table_and_its_row() {
        let table = TableName::new("lhAccounts").unwrap();
        let txn = new_txn(&table);
        assert_eq!(table_of(&txn), Some(table));
        assert!(is_decision_row(&row_key(&txn).unwrap()));
        assert_eq!(table_of("0f1e2d3c"), None, "a lock-blob journal's id");
        assert!(!is_decision_row(&RowKey::new("main").unwrap()));
    }

    #[test]
    fn an_after_image_round_trips_as_the_write_a_reader_sends() {
        let table = TableName::new("lhAccounts").unwrap();
        let pk = PartitionKey::new("p").unwrap();
        let rk = RowKey::new("r").unwrap();
        let mut properties = Properties::new();
        properties.insert("n", Value::Int64(7));
        properties.insert("s", Value::String("x".into()));
        let data = EntityData {
            partition_key: pk.clone(),
            row_key: rk.clone(),
            properties: properties.clone(),
        };
        let etag = ETag::new("W/\"2\"");
        let mut marked = StoredEntity {
            data: data.clone(),
            etag: etag.clone(),
            timestamp: time::OffsetDateTime::UNIX_EPOCH,
        };
        let replace = TableOp::Replace(data, Precondition::Upsert);
        marked
            .data
            .properties
            .insert(AFTER, Value::String(after_text(&replace)));
        let TableOp::Replace(written, Precondition::IfMatch(at)) =
            after_op(&table, &marked).unwrap()
        else {
            panic!("a replace");
        };
        assert_eq!((written.properties, at), (properties, etag.clone()));
        let delete = TableOp::Delete {
            partition_key: pk,
            row_key: rk,
            if_match: None,
        };
        marked
            .data
            .properties
            .insert(AFTER, Value::String(after_text(&delete)));
        assert!(
            matches!(after_op(&table, &marked).unwrap(), TableOp::Delete { if_match: Some(e), .. } if e == etag)
        );
        marked
            .data
            .properties
            .insert(AFTER, Value::String("[1]".into()));
        assert_eq!(
            after_op(&table, &marked).unwrap_err().kind(),
            ErrorKind::Inconsistent
        );
    }
}
