//! Decision rows (`_lhCommit.<id>` in the primary partition and table):
//! their layout, and the race of inserts that decides one (see "The commit
//! protocol" in `crate::lock`).

use crate::backend::{StoredEntity, TableBackend, TableOp, WriteOptions};
use crate::entity::{Properties, Value};
use crate::error::{Error, ErrorKind, Result};
use crate::key::{PartitionKey, RowKey, TableName};

/// The row-key prefix of decision rows and after-image rows.
pub(crate) const ROW_PREFIX: &str = "_lhCommit.";

/// The property holding a decision.
pub(crate) const STATE: &str = "_lhDecision";

/// The property of a committed decision row naming the (table, partition)
/// groups the commit marked, for the prune.
pub(crate) const GROUPS: &str = "_lhGroups";

/// The longest group list a decision row carries (UTF-16 units, within a
/// string property's 64 KiB); a longer one is left out, and the row is
/// then kept by the prune.
const MAX_GROUPS_TEXT: usize = 30_000;

/// What happened to a commit
/// ([`Store::commit_outcome`](crate::Store::commit_outcome)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommitOutcome {
    /// The commit point went through (stored as `committed`): every write
    /// is applied (rows still marked are finished by whoever reads them).
    Applied,
    /// The commit was withdrawn before its commit point (stored as
    /// `withdrawn`): nothing of it is applied, ever.
    NotApplied,
}

impl CommitOutcome {
    pub(crate) fn text(self) -> &'static str {
        match self {
            CommitOutcome::Applied => "committed",
            CommitOutcome::NotApplied => "withdrawn",
        }
    }
}

/// A fresh transaction id for a commit deciding in `table`:
/// `<version 7 UUID>.<table>`.
pub(crate) fn new_txn(table: &TableName) -> String {
    format!("{}.{}", uuid::Uuid::now_v7().simple(), table.as_str())
}

/// How long a committed decision row stays at the least, whatever a
/// sweep's `older_than` ([`Store::commit_outcome`](crate::Store::commit_outcome)
/// answers from it).
pub(crate) const DECISIONS_KEPT: std::time::Duration = std::time::Duration::from_secs(3600);

/// When transaction `txn` began, by the clock of the process that made it
/// (`None`: an id leasehold did not make).
pub(crate) fn issued_at(txn: &str) -> Option<time::OffsetDateTime> {
    let uuid = uuid::Uuid::try_parse(id(txn)).ok()?;
    if uuid.get_version_num() != 7 {
        return None;
    }
    let (secs, nanos) = uuid.get_timestamp()?.to_unix();
    let at = time::OffsetDateTime::from_unix_timestamp(i64::try_from(secs).ok()?).ok()?;
    Some(at + time::Duration::nanoseconds(i64::from(nanos)))
}

/// The id part of `txn` (`<id>.<table>`).
pub(crate) fn id(txn: &str) -> &str {
    txn.split_once('.').map_or(txn, |(id, _)| id)
}

/// The table `txn` names.
pub(crate) fn table_of(txn: &str) -> Option<TableName> {
    let (_, table) = txn.split_once('.')?;
    TableName::new(table).ok()
}

/// Whether `row_key` is a decision row's or an after-image row's.
pub(crate) fn is_decision_row(row_key: &RowKey) -> bool {
    row_key.as_str().starts_with(ROW_PREFIX)
}

pub(crate) fn row_key(txn: &str) -> Result<RowKey> {
    RowKey::new(format!("{ROW_PREFIX}{}", id(txn)))
}

/// The insert of `txn`'s decision row in partition `primary`.
pub(crate) fn insert(
    primary: &PartitionKey,
    txn: &str,
    decision: CommitOutcome,
) -> Result<TableOp> {
    let mut properties = Properties::new();
    properties.insert_static(STATE, Value::String(decision.text().into()));
    let row = super::row(primary, &row_key(txn)?, properties);
    Ok(TableOp::Insert(row))
}

/// The commit point's insert of `txn`'s decision row, naming `groups`.
pub(crate) fn insert_committed(
    primary: &PartitionKey,
    txn: &str,
    groups: &[(&TableName, &PartitionKey)],
) -> Result<TableOp> {
    let mut op = insert(primary, txn, CommitOutcome::Applied)?;
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
    pub(crate) decision: CommitOutcome,
    pub(crate) groups: Option<Vec<(TableName, PartitionKey)>>,
}

impl Stored {
    /// The decision row `row` says, if it is one leasehold wrote.
    pub(crate) fn of(row: &StoredEntity) -> Option<Stored> {
        let state = row.data.properties.get(STATE);
        let decision = [CommitOutcome::Applied, CommitOutcome::NotApplied]
            .into_iter()
            .find(|d| matches!(state, Some(Value::String(s)) if s == d.text()))?;
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
    row_key.as_str().strip_prefix(ROW_PREFIX).map(id)
}

pub(crate) fn delete(primary: &PartitionKey, txn: &str) -> Result<TableOp> {
    let if_exists = crate::backend::Precondition::IfExists;
    Ok(super::delete(primary, &row_key(txn)?, if_exists))
}

/// `txn`'s decision as stored in `table` of partition `primary`.
pub(crate) async fn read(
    backend: &dyn TableBackend,
    table: &TableName,
    primary: &PartitionKey,
    txn: &str,
) -> Result<Option<CommitOutcome>> {
    let Some(row) = backend.get(table, primary, &row_key(txn)?).await? else {
        return Ok(None);
    };
    match Stored::of(&row) {
        Some(stored) => Ok(Some(stored.decision)),
        None => Err(Error::Inconsistent {
            what: format!(
                "the decision row of transaction {txn} in partition {:?} of `{table}` does not say committed or withdrawn",
                primary.as_str()
            ),
        }),
    }
}

/// Withdraws transaction `txn` unless its commit point got there first,
/// and answers what is stored (a row found and then gone was a finished
/// commit's).
pub(crate) async fn withdraw(
    backend: &dyn TableBackend,
    table: &TableName,
    primary: &PartitionKey,
    txn: &str,
) -> Result<CommitOutcome> {
    tracing::debug!(%txn, %primary, "withdrawing a commit that was never decided");
    let withdrawal = insert(primary, txn, CommitOutcome::NotApplied)?;
    match backend
        .execute(table, withdrawal, &WriteOptions::new())
        .await
    {
        Ok(_) => Ok(CommitOutcome::NotApplied),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(read(backend, table, primary, txn)
            .await?
            .unwrap_or(CommitOutcome::Applied)),
        Err(e) => Err(e),
    }
}

/// Transaction `txn`'s decision, made final: read, or else withdrawn.
pub(crate) async fn settle(
    backend: &dyn TableBackend,
    table: &TableName,
    primary: &PartitionKey,
    txn: &str,
) -> Result<CommitOutcome> {
    match read(backend, table, primary, txn).await? {
        Some(decision) => Ok(decision),
        None => withdraw(backend, table, primary, txn).await,
    }
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

    #[test]
    fn a_transaction_id_tells_when_it_began() {
        let before = time::OffsetDateTime::now_utc() - time::Duration::milliseconds(1);
        let txn = new_txn(&TableName::new("lhAccounts").unwrap());
        let at = issued_at(&txn).expect("a version 7 id");
        assert!(
            at >= before && at <= time::OffsetDateTime::now_utc(),
            "{at}"
        );
        assert_eq!(issued_at("0f1e2d3c.lhAccounts"), None, "not a UUID");
        let v4 = format!("{}.lhAccounts", uuid::Uuid::new_v4().simple());
        assert_eq!(issued_at(&v4), None, "a UUID that carries no time");
    }
}
