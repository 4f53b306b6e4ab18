//! The lock module's record in a lock blob: the commit *journal* (what a
//! journalled commit is about to do, written into the primary partition's
//! lock blob under its lease before any table is touched, and rolled forward
//! by whoever takes that lock next if the writer died half-way), or an
//! *intent* (written into every other participating partition's lock blob:
//! "this partition takes part in transaction `txn`, whose journal is in the
//! lock blob of partition `primary`").
//!
//! The record is the lock module's section of the lock blob's document
//! ([`LOCK_SECTION`]); the lease layer stores it without reading it. Its
//! format is private: operators see a pending commit or an intent as a
//! [`PendingCommit`].

use serde::{Deserialize, Serialize};

use crate::backend::wire;
use crate::backend::{Precondition, StoredEntity, TableOp};
use crate::entity::{EntityData, Properties};
use crate::error::{Error, Result};
use crate::key::{ETag, PartitionKey, RowKey, TableName};
use crate::lease::{LOCK_SECTION, LeaseGuard, LeaseManager, LeaseName};

/// The journal format version.
pub(crate) const JOURNAL_VERSION: u32 = 1;

/// A pending commit, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Journal {
    /// Format version ([`JOURNAL_VERSION`]).
    #[serde(rename = "v")]
    pub(crate) version: u32,
    /// The primary partition: the one whose lock blob holds the journal, and
    /// the partition of every operation that names none.
    pub(crate) partition_key: String,
    /// The transaction id the intents of the other participants name
    /// (`None`: a single-partition commit, which writes no intents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) txn: Option<String>,
    /// The operations, in the order they are applied.
    pub(crate) ops: Vec<JournalOp>,
    /// Set when a later transaction was refused and the commit is undoing
    /// the first `undo` operations (those applied): the next holder then
    /// finishes the undo instead of rolling forward.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) undo: Option<usize>,
    /// Set when every row the journal writes was marked before it was
    /// stored (see [`super::marks`]): each operation is then a replace or a
    /// delete at the ETag its mark produced, and rolling forward applies
    /// the operations whose rows still carry the mark and skips the others.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) marked: bool,
}

/// An intent: the mark a journalled commit leaves in the lock blob of every
/// participating partition but the primary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Intent {
    /// Format version ([`JOURNAL_VERSION`]).
    #[serde(rename = "v")]
    pub(crate) version: u32,
    /// The primary partition, whose lock blob holds (or held) the journal.
    pub(crate) intent_of: String,
    /// The transaction.
    pub(crate) txn: String,
}

/// What the lock module keeps in a lock blob.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LockRecord {
    /// A pending commit's journal (this is its primary partition).
    Journal(Journal),
    /// This partition takes part in a commit whose journal is elsewhere.
    Intent(Intent),
}

/// What one journalled operation does to its row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum JournalKind {
    /// Create; the row must not exist.
    Insert,
    /// Replace the whole entity.
    Replace,
    /// Merge properties into the entity.
    Merge,
    /// Delete the entity.
    Delete,
}

/// A row as it was before a journalled operation, for undoing it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Before {
    /// There was no row.
    Absent,
    /// The row's properties, in the wire form.
    Row(serde_json::Map<String, serde_json::Value>),
}

impl Before {
    /// The before-image of a row as read (`None`: absent).
    pub(crate) fn of(stored: Option<&StoredEntity>) -> Before {
        match stored {
            None => Before::Absent,
            Some(s) => Before::Row(properties_json(&s.data)),
        }
    }
}

/// One operation with its precondition, after-image and before-image.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct JournalOp {
    /// The table (prefix included).
    pub(crate) table: String,
    /// The partition, when it is not the journal's.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "pk")]
    pub(crate) partition_key: Option<String>,
    /// The row key.
    pub(crate) row_key: String,
    /// What is done.
    pub(crate) kind: JournalKind,
    /// The ETag the row had when read in the unit (`None`: inserts, and the
    /// explicitly unconditional upserts; `Some("*")`: must merely exist).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) precondition: Option<String>,
    /// The properties written, in the wire form (`None` for deletes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) after: Option<serde_json::Map<String, serde_json::Value>>,
    /// The row before the operation (`None`: not recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) before: Option<Before>,
}

impl JournalKind {
    /// The kind's name, as operators see it.
    fn name(self) -> &'static str {
        match self {
            JournalKind::Insert => "insert",
            JournalKind::Replace => "replace",
            JournalKind::Merge => "merge",
            JournalKind::Delete => "delete",
        }
    }
}

/// An entity's properties in the wire form, without its keys.
pub(crate) fn properties_json(d: &EntityData) -> serde_json::Map<String, serde_json::Value> {
    let mut json =
        wire::entity_to_json(d.partition_key.as_str(), d.row_key.as_str(), &d.properties);
    json.remove("PartitionKey");
    json.remove("RowKey");
    json
}

/// Wire-form properties back as an entity of `table` at the given keys.
pub(crate) fn entity_of(
    table: &TableName,
    partition_key: &PartitionKey,
    row_key: &RowKey,
    json: &serde_json::Map<String, serde_json::Value>,
) -> std::result::Result<EntityData, String> {
    let mut json = json.clone();
    json.insert("PartitionKey".into(), partition_key.as_str().into());
    json.insert("RowKey".into(), row_key.as_str().into());
    let parsed = wire::entity_from_json(table.as_str(), &json).map_err(|e| e.to_string())?;
    Ok(EntityData {
        partition_key: partition_key.clone(),
        row_key: row_key.clone(),
        properties: parsed.properties,
    })
}

impl JournalOp {
    /// Records a staged operation of partition `pk` in a journal whose
    /// primary partition is `primary`.
    pub(crate) fn from_op(
        primary: &PartitionKey,
        table: &TableName,
        op: &TableOp,
        before: Option<Before>,
    ) -> Self {
        let kind = match op {
            TableOp::Insert(_) => JournalKind::Insert,
            TableOp::Replace(..) => JournalKind::Replace,
            TableOp::Merge(..) => JournalKind::Merge,
            TableOp::Delete { .. } => JournalKind::Delete,
        };
        let precondition = op.condition().as_ref().and_then(precondition_text);
        let pk = op.partition_key();
        JournalOp {
            table: table.as_str().to_owned(),
            partition_key: (pk != primary).then(|| pk.as_str().to_owned()),
            row_key: op.row_key().as_str().to_owned(),
            kind,
            precondition,
            after: op.data().map(properties_json),
            before,
        }
    }

    fn bad(&self, why: String) -> Error {
        Error::Inconsistent {
            what: format!(
                "journal entry for row {:?} of `{}`: {why}",
                self.row_key, self.table
            ),
        }
    }

    /// The operation's partition, in a journal whose partition is `primary`.
    ///
    /// # Errors
    /// [`Error::Inconsistent`] when it does not parse.
    pub(crate) fn partition(&self, primary: &PartitionKey) -> Result<PartitionKey> {
        match &self.partition_key {
            None => Ok(primary.clone()),
            Some(pk) => PartitionKey::new(pk).map_err(|e| self.bad(e.to_string())),
        }
    }

    /// The operation back, in a journal whose partition is `primary`.
    ///
    /// # Errors
    /// [`Error::Inconsistent`] when the journal does not parse as leasehold
    /// wrote it.
    pub(crate) fn to_op(&self, primary: &PartitionKey) -> Result<(TableName, TableOp)> {
        let partition_key = self.partition(primary)?;
        let table = TableName::new(&self.table).map_err(|e| self.bad(e.to_string()))?;
        let row_key = RowKey::new(&self.row_key).map_err(|e| self.bad(e.to_string()))?;
        let data = || -> Result<EntityData> {
            let json = self
                .after
                .as_ref()
                .ok_or_else(|| self.bad("no after-image".into()))?;
            entity_of(&table, &partition_key, &row_key, json).map_err(|e| self.bad(e))
        };
        let condition = match self.precondition.as_deref() {
            None => Precondition::Upsert,
            Some("*") => Precondition::IfExists,
            Some(tag) => Precondition::IfMatch(ETag::new(tag)),
        };
        let op = match self.kind {
            JournalKind::Insert => TableOp::Insert(data()?),
            JournalKind::Replace => TableOp::Replace(data()?, condition),
            JournalKind::Merge => TableOp::Merge(data()?, condition),
            // A delete without a precondition is never journalled; read
            // as "whatever version is stored", as an unconditional write
            // is rolled forward.
            JournalKind::Delete => TableOp::Delete {
                partition_key: partition_key.clone(),
                row_key,
                if_match: match condition {
                    Precondition::IfMatch(etag) => Some(etag),
                    Precondition::IfExists | Precondition::Upsert => None,
                },
            },
        };
        Ok((table, op))
    }

    /// Whether `stored` (`None`: no row) is the row as it was before this
    /// operation (its content; the ETag differs once an undo wrote it).
    ///
    /// # Errors
    /// [`Error::Inconsistent`] when no before-image was recorded or it does
    /// not parse.
    pub(crate) fn shows_before(
        &self,
        primary: &PartitionKey,
        stored: Option<&StoredEntity>,
    ) -> Result<bool> {
        let before = self
            .before
            .as_ref()
            .ok_or_else(|| self.bad("no before-image to undo it with".into()))?;
        match (before, stored) {
            (Before::Absent, stored) => Ok(stored.is_none()),
            (Before::Row(_), None) => Ok(false),
            (Before::Row(json), Some(s)) => {
                let (table, op) = self.to_op(primary)?;
                let data = entity_of(&table, op.partition_key(), op.row_key(), json)
                    .map_err(|e| self.bad(e))?;
                Ok(data.properties == s.data.properties)
            }
        }
    }

    /// The row as it was before this operation (`None`: absent).
    ///
    /// # Errors
    /// [`Error::Inconsistent`] when no before-image was recorded or it does
    /// not parse.
    pub(crate) fn before_image(&self, primary: &PartitionKey) -> Result<Option<EntityData>> {
        let before = self
            .before
            .as_ref()
            .ok_or_else(|| self.bad("no before-image to undo it with".into()))?;
        match before {
            Before::Absent => Ok(None),
            Before::Row(json) => {
                let (table, op) = self.to_op(primary)?;
                entity_of(&table, op.partition_key(), op.row_key(), json)
                    .map(Some)
                    .map_err(|e| self.bad(e))
            }
        }
    }

    /// The write that undoes this operation, given the ETag its own write
    /// produced (`None` for a delete): the before-image back, conditioned on
    /// that ETag (or, for an undone delete, on the row being absent).
    /// `Ok(None)`: nothing to undo.
    ///
    /// # Errors
    /// [`Error::Inconsistent`] when no before-image was recorded or it does
    /// not parse.
    pub(crate) fn undo(
        &self,
        primary: &PartitionKey,
        produced: Option<&ETag>,
    ) -> Result<Option<TableOp>> {
        let (table, op) = self.to_op(primary)?;
        let pk = op.partition_key().clone();
        let rk = op.row_key().clone();
        let before = self
            .before
            .as_ref()
            .ok_or_else(|| self.bad("no before-image to undo it with".into()))?;
        let delete_ours = || -> Result<Option<TableOp>> {
            let etag = produced.ok_or_else(|| self.bad("its write produced no ETag".into()))?;
            Ok(Some(TableOp::Delete {
                partition_key: pk.clone(),
                row_key: rk.clone(),
                if_match: Some(etag.clone()),
            }))
        };
        match (op, before) {
            (TableOp::Delete { .. }, Before::Absent) => Ok(None),
            (TableOp::Delete { .. }, Before::Row(json)) => Ok(Some(TableOp::Insert(
                entity_of(&table, &pk, &rk, json).map_err(|e| self.bad(e))?,
            ))),
            (_, Before::Absent) => delete_ours(),
            (_, Before::Row(json)) => {
                let etag = produced.ok_or_else(|| self.bad("its write produced no ETag".into()))?;
                Ok(Some(TableOp::Replace(
                    entity_of(&table, &pk, &rk, json).map_err(|e| self.bad(e))?,
                    Precondition::IfMatch(etag.clone()),
                )))
            }
        }
    }
}

fn precondition_text(p: &Precondition) -> Option<String> {
    match p {
        Precondition::IfMatch(tag) => Some(tag.as_str().to_owned()),
        Precondition::IfExists => Some("*".to_owned()),
        Precondition::Upsert => None,
    }
}

impl LockRecord {
    /// Parses a stored record.
    ///
    /// # Errors
    /// [`Error::Inconsistent`] when it is not a record this version knows.
    pub(crate) fn from_value(value: serde_json::Value) -> Result<Self> {
        let is_intent = value.get("intent_of").is_some();
        let version = value.get("v").and_then(serde_json::Value::as_u64);
        if version != Some(u64::from(JOURNAL_VERSION)) {
            return Err(Error::Inconsistent {
                what: format!(
                    "the pending lock record has version {version:?}; this leasehold reads version {JOURNAL_VERSION}"
                ),
            });
        }
        if is_intent {
            let intent = serde_json::from_value(value).map_err(|e| Error::Inconsistent {
                what: format!("the pending intent does not parse: {e}"),
            })?;
            return Ok(LockRecord::Intent(intent));
        }
        let journal = serde_json::from_value(value).map_err(|e| Error::Inconsistent {
            what: format!("the pending journal does not parse: {e}"),
        })?;
        Ok(LockRecord::Journal(journal))
    }

    /// The record pending in the lock blob `guard` holds, as the guard sees
    /// the blob (a fresh acquire reads it; a hand-over knows it).
    ///
    /// # Errors
    /// [`Error::Inconsistent`] when the stored record does not parse; the
    /// guard's read errors.
    pub(crate) async fn pending(guard: &LeaseGuard) -> Result<Option<LockRecord>> {
        guard
            .section(LOCK_SECTION)
            .await?
            .map(LockRecord::from_value)
            .transpose()
    }

    /// The record pending in lock blob `name`, read without the lock.
    ///
    /// # Errors
    /// As [`LockRecord::pending`].
    pub(crate) async fn read(locks: &LeaseManager, name: &LeaseName) -> Result<Option<LockRecord>> {
        locks
            .read_section(name, LOCK_SECTION)
            .await?
            .map(LockRecord::from_value)
            .transpose()
    }

    /// What operators see of the record kept in the lock blob of
    /// `partition_key`.
    ///
    /// # Errors
    /// [`Error::Inconsistent`] when an entry does not parse.
    pub(crate) fn summary(&self, partition_key: &PartitionKey) -> Result<PendingCommit> {
        match self {
            LockRecord::Journal(j) => j.summary(),
            LockRecord::Intent(i) => Ok(PendingCommit {
                partition_key: partition_key.clone(),
                primary: PartitionKey::new(&i.intent_of).map_err(|e| Error::Inconsistent {
                    what: format!("the intent's primary partition does not parse: {e}"),
                })?,
                transaction: Some(i.txn.clone()),
                writes: Vec::new(),
            }),
        }
    }
}

impl Intent {
    /// An intent naming `primary` and transaction `txn`.
    pub(crate) fn new(primary: &PartitionKey, txn: &str) -> Self {
        Intent {
            version: JOURNAL_VERSION,
            intent_of: primary.as_str().to_owned(),
            txn: txn.to_owned(),
        }
    }

    /// Writes the intent into the lock blob, under the lease.
    ///
    /// # Errors
    /// The guard's write errors ([`Error::LeaseLost`] among them).
    pub(crate) async fn write(&self, guard: &LeaseGuard) -> Result<()> {
        let value = serde_json::to_value(self).map_err(|e| Error::Inconsistent {
            what: format!("cannot serialise the intent: {e}"),
        })?;
        guard.set_section(LOCK_SECTION, Some(value)).await
    }
}

impl Journal {
    /// A journal whose primary partition is `primary`, of `ops` (each with
    /// its before-image, when recorded) in application order.
    pub(crate) fn new(
        primary: &PartitionKey,
        txn: Option<String>,
        ops: &[(TableName, TableOp, Option<Before>)],
    ) -> Self {
        Journal {
            version: JOURNAL_VERSION,
            partition_key: primary.as_str().to_owned(),
            txn,
            ops: ops
                .iter()
                .map(|(t, op, before)| JournalOp::from_op(primary, t, op, before.clone()))
                .collect(),
            undo: None,
            marked: false,
        }
    }

    /// The primary partition.
    ///
    /// # Errors
    /// [`Error::Inconsistent`] when it does not parse.
    pub(crate) fn primary(&self) -> Result<PartitionKey> {
        PartitionKey::new(&self.partition_key).map_err(|e| Error::Inconsistent {
            what: format!("the journal's partition key does not parse: {e}"),
        })
    }

    /// The journal as stored in the lease document.
    ///
    /// # Errors
    /// Never in practice: serialising plain data cannot fail.
    fn to_value(&self) -> Result<serde_json::Value> {
        serde_json::to_value(self).map_err(|e| Error::Inconsistent {
            what: format!("cannot serialise the journal: {e}"),
        })
    }

    /// The journal pending in the lock blob `guard` holds (`None` also when
    /// the blob holds an intent).
    ///
    /// # Errors
    /// As [`LockRecord::pending`].
    pub(crate) async fn pending(guard: &LeaseGuard) -> Result<Option<Journal>> {
        Ok(match LockRecord::pending(guard).await? {
            Some(LockRecord::Journal(j)) => Some(j),
            _ => None,
        })
    }

    /// The journal pending in lock blob `name`, read without the lock.
    ///
    /// # Errors
    /// As [`LockRecord::pending`].
    #[cfg(test)]
    pub(crate) async fn read(locks: &LeaseManager, name: &LeaseName) -> Result<Option<Journal>> {
        Ok(match LockRecord::read(locks, name).await? {
            Some(LockRecord::Journal(j)) => Some(j),
            _ => None,
        })
    }

    /// Writes the journal into the lock blob, under the lease.
    ///
    /// # Errors
    /// The guard's write errors ([`Error::LeaseLost`] among them).
    pub(crate) async fn write(&self, guard: &LeaseGuard) -> Result<()> {
        guard
            .set_section(LOCK_SECTION, Some(self.to_value()?))
            .await
    }

    /// Removes the record (journal or intent) from the lock blob, under the
    /// lease.
    ///
    /// # Errors
    /// As [`Journal::write`].
    pub(crate) async fn clear(guard: &LeaseGuard) -> Result<()> {
        guard.set_section(LOCK_SECTION, None).await
    }

    /// What operators see of the journal.
    ///
    /// # Errors
    /// [`Error::Inconsistent`] when an entry does not parse.
    pub(crate) fn summary(&self) -> Result<PendingCommit> {
        let primary = self.primary()?;
        let writes = self
            .ops
            .iter()
            .map(|entry| {
                let (table, op) = entry.to_op(&primary)?;
                Ok(PendingWrite {
                    table,
                    partition_key: op.partition_key().clone(),
                    row_key: op.row_key().clone(),
                    operation: entry.kind.name(),
                    if_match: entry.precondition.as_deref().map(ETag::new),
                    properties: op.data().map(|d| d.properties.clone()),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(PendingCommit {
            partition_key: primary.clone(),
            primary,
            transaction: self.txn.clone(),
            writes,
        })
    }
}

/// A commit that a unit left pending (it died, or lost its lease, between
/// writing its journal and clearing it), as recorded in one partition's lock
/// blob: in its primary partition, the journal (what it was about to write,
/// for an operator to look at before finishing it with
/// [`Store::roll_forward`](crate::Store::roll_forward)); in every other
/// partition it writes, an *intent* naming the primary. Read with
/// [`Store::pending_commit`](crate::Store::pending_commit).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PendingCommit {
    /// The partition whose lock blob holds this record.
    pub partition_key: PartitionKey,
    /// The primary partition, whose lock blob holds the journal: this
    /// partition for a journal, the one the intent points at for an intent.
    pub primary: PartitionKey,
    /// The transaction id of a commit across partitions (`None` for a
    /// single-partition journal).
    pub transaction: Option<String>,
    /// The writes, in the order a roll-forward applies them; empty for an
    /// intent (they are in the primary's journal).
    pub writes: Vec<PendingWrite>,
}

impl PendingCommit {
    /// Whether this is an intent pointing at another partition's journal.
    pub fn is_intent(&self) -> bool {
        self.primary != self.partition_key
    }
}

/// One write of a [`PendingCommit`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PendingWrite {
    /// The table, its prefix included.
    pub table: TableName,
    /// The partition.
    pub partition_key: PartitionKey,
    /// The row.
    pub row_key: RowKey,
    /// What the write does: `"insert"`, `"replace"`, `"merge"` or
    /// `"delete"`.
    pub operation: &'static str,
    /// The ETag the row must still have for the write to be applied (`*`:
    /// the row must merely exist); `None` for an insert, and for a replace
    /// or merge that is an unconditional upsert.
    pub if_match: Option<ETag>,
    /// The properties the write stores; `None` for a delete.
    pub properties: Option<Properties>,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::backend::memory::MemoryBackend;
    use crate::entity::Value;
    use crate::lease::{Acquisition, LeaseOptions};
    use crate::testing::{CountingBackend, Op};

    const LONG: Duration = Duration::from_secs(60);

    fn journal(rows: &[&str]) -> Journal {
        let pk = PartitionKey::new("p").unwrap();
        let table = TableName::new("Accounts").unwrap();
        let ops: Vec<(TableName, TableOp, Option<Before>)> = rows
            .iter()
            .map(|rk| {
                let data = EntityData {
                    partition_key: pk.clone(),
                    row_key: RowKey::new(*rk).unwrap(),
                    properties: [("n".to_owned(), Value::Int64(1))].into_iter().collect(),
                };
                (table.clone(), TableOp::Insert(data), Some(Before::Absent))
            })
            .collect();
        Journal::new(&pk, None, &ops)
    }

    /// Every kind of operation undoes to its before-image, conditioned on
    /// the ETag its own write produced; an intent and a journal are told
    /// apart when read back, and an intent summarises as pointing at its
    /// primary.
    #[test]
    fn undo_ops_and_records_round_trip() {
        let primary = PartitionKey::new("a").unwrap();
        let other = PartitionKey::new("b").unwrap();
        let table = TableName::new("Accounts").unwrap();
        let props = |n: i64| -> crate::entity::Properties {
            [("n".to_owned(), Value::Int64(n))].into_iter().collect()
        };
        let data = |pk: &PartitionKey, n: i64| EntityData {
            partition_key: pk.clone(),
            row_key: RowKey::new("r").unwrap(),
            properties: props(n),
        };
        let before = |pk: &PartitionKey, n: i64| {
            Before::of(Some(&crate::backend::StoredEntity {
                data: data(pk, n),
                etag: ETag::new("old"),
                timestamp: time::OffsetDateTime::UNIX_EPOCH,
            }))
        };
        let produced = ETag::new("mine");
        let etag = Precondition::IfMatch(ETag::new("old"));
        let cases: Vec<(TableOp, Before, Option<TableOp>)> = vec![
            (
                TableOp::Insert(data(&other, 2)),
                Before::Absent,
                Some(TableOp::Delete {
                    partition_key: other.clone(),
                    row_key: RowKey::new("r").unwrap(),
                    if_match: Some(produced.clone()),
                }),
            ),
            (
                TableOp::Replace(data(&other, 2), etag.clone()),
                before(&other, 1),
                Some(TableOp::Replace(
                    data(&other, 1),
                    Precondition::IfMatch(produced.clone()),
                )),
            ),
            (
                TableOp::Merge(data(&primary, 2), etag.clone()),
                before(&primary, 1),
                Some(TableOp::Replace(
                    data(&primary, 1),
                    Precondition::IfMatch(produced.clone()),
                )),
            ),
            (
                TableOp::Delete {
                    partition_key: other.clone(),
                    row_key: RowKey::new("r").unwrap(),
                    if_match: Some(ETag::new("old")),
                },
                before(&other, 1),
                Some(TableOp::Insert(data(&other, 1))),
            ),
        ];
        for (op, before, undo) in cases {
            let entry = JournalOp::from_op(&primary, &table, &op, Some(before));
            let (t, back) = entry.to_op(&primary).unwrap();
            assert_eq!((t, &back), (table.clone(), &op));
            let etag = (!matches!(op, TableOp::Delete { .. })).then_some(&produced);
            assert_eq!(entry.undo(&primary, etag).unwrap(), undo, "{op:?}");
        }
        let unrecorded =
            JournalOp::from_op(&primary, &table, &TableOp::Insert(data(&other, 1)), None);
        assert_eq!(
            unrecorded
                .undo(&primary, Some(&produced))
                .unwrap_err()
                .kind(),
            crate::ErrorKind::Inconsistent
        );

        let intent = Intent::new(&primary, "t1");
        let value = serde_json::to_value(&intent).unwrap();
        let LockRecord::Intent(back) = LockRecord::from_value(value).unwrap() else {
            panic!("an intent reads back as an intent");
        };
        let summary = LockRecord::Intent(back).summary(&other).unwrap();
        assert!(summary.is_intent());
        assert_eq!(summary.primary, primary);
        assert_eq!(summary.transaction.as_deref(), Some("t1"));
        let journal = journal(&["x"]);
        assert!(matches!(
            LockRecord::from_value(journal.to_value().unwrap()).unwrap(),
            LockRecord::Journal(_)
        ));
        let mut old = journal.to_value().unwrap();
        old["v"] = 7.into();
        assert!(LockRecord::from_value(old).is_err());
    }

    /// A lock unit's lease-side requests with owner metadata off: a cold
    /// unit (another process took the lock last) is acquire + one lock-blob
    /// read + its journal write and clear + release; a unit handed over
    /// within the process sends only the journal write and clear; a unit
    /// taking the lock back with the blob unchanged since reads nothing.
    #[tokio::test(start_paused = true)]
    async fn a_journal_costs_its_writes_and_a_hand_over_reads_nothing() {
        let memory = MemoryBackend::new();
        let counting = CountingBackend::new(memory.clone());
        let counter = counting.counter();
        let options = LeaseOptions::new()
            .with_owner("budget")
            .with_owner_metadata(false);
        let locks = LeaseManager::new(Arc::new(counting), options).unwrap();
        let other =
            LeaseManager::new(Arc::new(memory), LeaseOptions::new().with_owner("other")).unwrap();
        other
            .acquire("l", LONG)
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
        counter.reset();

        let cold = locks.acquire("l", LONG).await.unwrap();
        assert!(Journal::pending(&cold).await.unwrap().is_none()); // the lock-blob read
        let next = tokio::spawn({
            let locks = locks.clone();
            async move { locks.acquire("l", LONG).await }
        });
        let written = journal(&["a", "b"]);
        written.write(&cold).await.unwrap();
        Journal::clear(&cold).await.unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
        cold.release().await.unwrap();
        let work: BTreeMap<Op, u64> = [(Op::AcquireLease, 1), (Op::GetBlob, 1), (Op::PutBlob, 2)]
            .into_iter()
            .collect();
        assert_eq!(counter.snapshot(), work, "cold unit");

        counter.reset();
        let warm = next.await.unwrap().unwrap();
        assert_eq!(warm.acquisition(), Acquisition::HandedOver);
        assert!(Journal::pending(&warm).await.unwrap().is_none());
        written.write(&warm).await.unwrap();
        Journal::clear(&warm).await.unwrap();
        let handed: BTreeMap<Op, u64> = [(Op::PutBlob, 2)].into_iter().collect();
        assert_eq!(counter.snapshot(), handed, "handed-over unit");
        warm.release().await.unwrap();
        assert_eq!(counter.get(Op::ReleaseLease), 1);

        tokio::time::sleep(Duration::from_secs(1)).await;
        counter.reset();
        let back = locks.acquire("l", LONG).await.unwrap();
        assert_eq!(back.acquisition(), Acquisition::Fresh);
        assert!(Journal::pending(&back).await.unwrap().is_none());
        written.write(&back).await.unwrap();
        assert_eq!(
            Journal::pending(&back).await.unwrap(),
            Some(written.clone())
        );
        Journal::clear(&back).await.unwrap();
        back.release().await.unwrap();
        let taken_back: BTreeMap<Op, u64> = [
            (Op::PutBlob, 2),
            (Op::AcquireLease, 1),
            (Op::ReleaseLease, 1),
        ]
        .into_iter()
        .collect();
        assert_eq!(counter.snapshot(), taken_back, "taken back, unchanged");

        // Another process wrote the blob in between (its journal, left
        // behind): the next acquire here reads it and sees that journal.
        let guard = other.acquire("l", LONG).await.unwrap();
        written.write(&guard).await.unwrap();
        guard.release().await.unwrap();
        counter.reset();
        let after = locks.acquire("l", LONG).await.unwrap();
        assert_eq!(
            Journal::pending(&after).await.unwrap(),
            Some(written.clone())
        );
        assert_eq!(counter.get(Op::GetBlob), 1);
        after.release().await.unwrap();
    }

    /// A journal is seen by `describe` and by the next holder (handed over:
    /// without a read), outlives its writer, survives the lease layer's own
    /// writes to the blob, and is gone once cleared.
    #[tokio::test(start_paused = true)]
    async fn a_journal_outlives_its_writer_until_cleared() {
        let backend = Arc::new(MemoryBackend::new());
        let locks =
            LeaseManager::new(backend.clone(), LeaseOptions::new().with_owner("a")).unwrap();
        let operator = LeaseManager::new(backend, LeaseOptions::new().with_owner("op")).unwrap();
        let name = LeaseName::new("l").unwrap();
        let written = journal(&["a", "b", "c"]);

        let first = locks.acquire("l", LONG).await.unwrap();
        written.write(&first).await.unwrap();
        assert_eq!(first.advance_epoch().await.unwrap(), 1);
        assert!(operator.describe("l").await.unwrap().journal_pending);
        let waiting = tokio::spawn({
            let locks = locks.clone();
            async move { locks.acquire("l", LONG).await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        first.release().await.unwrap();
        let second = waiting.await.unwrap().unwrap();
        assert!(second.is_handed_over());
        assert_eq!(
            Journal::pending(&second).await.unwrap(),
            Some(written.clone())
        );
        drop(second);

        // Another process takes the lock: the journal is still there, and a
        // write of the lease layer's own (a reservation record) keeps it.
        let taken = operator.acquire("l", Duration::from_secs(1)).await.unwrap();
        assert_eq!(
            Journal::pending(&taken).await.unwrap(),
            Some(written.clone())
        );
        assert_eq!(
            Journal::read(&operator, &name).await.unwrap(),
            Some(written.clone())
        );
        taken
            .update_document(|d| {
                d.push_reservation(crate::lease::ReservationRecord {
                    seq: 0,
                    holder: "op".into(),
                    reserved_at: time::OffsetDateTime::UNIX_EPOCH,
                    until: time::OffsetDateTime::UNIX_EPOCH,
                    cancelled_at: None,
                })
            })
            .await
            .unwrap();
        assert_eq!(
            Journal::read(&operator, &name).await.unwrap(),
            Some(written.clone())
        );
        let summary = written.summary().unwrap();
        assert_eq!(summary.writes.len(), 3);
        assert_eq!(summary.writes[0].operation, "insert");
        assert_eq!(summary.writes[2].row_key.as_str(), "c");
        Journal::clear(&taken).await.unwrap();
        taken.release().await.unwrap();
        let d = operator.describe("l").await.unwrap();
        assert!(!d.journal_pending);
        assert_eq!(d.reservation_records, 1);
        assert!(Journal::read(&operator, &name).await.unwrap().is_none());
    }
}
