//! The commit journal: what a multi-table commit is about to do, written into
//! the lock blob under the lease before any table is touched, and rolled
//! forward by whoever takes the lock next if the writer died half-way.

use serde::{Deserialize, Serialize};

use crate::backend::wire;
use crate::backend::{Precondition, StoredEntity, TableBackend, TableOp};
use crate::entity::{EntityData, Properties};
use crate::error::{Error, Result};
use crate::key::{ETag, PartitionKey, RowKey, TableName};

/// The journal format version.
pub const JOURNAL_VERSION: u32 = 1;

/// A pending commit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Journal {
    /// Format version ([`JOURNAL_VERSION`]).
    #[serde(rename = "v")]
    pub version: u32,
    /// The partition every operation writes.
    pub partition_key: String,
    /// The operations, in the order they are applied.
    pub ops: Vec<JournalOp>,
}

/// What one journalled operation does to its row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JournalKind {
    /// Create; the row must not exist.
    Insert,
    /// Replace the whole entity.
    Replace,
    /// Merge properties into the entity.
    Merge,
    /// Delete the entity.
    Delete,
}

/// One operation with its precondition and after-image.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalOp {
    /// The table (prefix included).
    pub table: String,
    /// The row key.
    pub row_key: String,
    /// What is done.
    pub kind: JournalKind,
    /// The ETag the row had when read in the unit (`None`: inserts, and the
    /// explicitly unconditional upserts; `Some("*")`: must merely exist).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precondition: Option<String>,
    /// The properties written, in the wire form (`None` for deletes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<serde_json::Map<String, serde_json::Value>>,
}

impl JournalOp {
    /// Records a staged operation.
    pub fn from_op(table: &TableName, op: &TableOp) -> Self {
        let (kind, precondition, data) = match op {
            TableOp::Insert(d) => (JournalKind::Insert, None, Some(d)),
            TableOp::Replace(d, p) => (JournalKind::Replace, precondition_text(p), Some(d)),
            TableOp::Merge(d, p) => (JournalKind::Merge, precondition_text(p), Some(d)),
            TableOp::Delete { condition, .. } => {
                (JournalKind::Delete, precondition_text(condition), None)
            }
        };
        JournalOp {
            table: table.as_str().to_owned(),
            row_key: op.row_key().as_str().to_owned(),
            kind,
            precondition,
            after: data.map(|d| {
                let mut json = wire::entity_to_json(
                    d.partition_key.as_str(),
                    d.row_key.as_str(),
                    &d.properties,
                );
                json.remove("PartitionKey");
                json.remove("RowKey");
                json
            }),
        }
    }

    /// The operation back, for the given partition.
    ///
    /// # Errors
    /// [`Error::Inconsistent`] when the journal does not parse as leasehold
    /// wrote it.
    pub fn to_op(&self, partition_key: &PartitionKey) -> Result<(TableName, TableOp)> {
        let bad = |why: String| Error::Inconsistent {
            what: format!(
                "journal entry for row {:?} of `{}`: {why}",
                self.row_key, self.table
            ),
        };
        let table = TableName::new(&self.table).map_err(|e| bad(e.to_string()))?;
        let row_key = RowKey::new(&self.row_key).map_err(|e| bad(e.to_string()))?;
        let data = || -> Result<EntityData> {
            let mut json = self
                .after
                .clone()
                .ok_or_else(|| bad("no after-image".into()))?;
            json.insert("PartitionKey".into(), partition_key.as_str().into());
            json.insert("RowKey".into(), row_key.as_str().into());
            let parsed =
                wire::entity_from_json(table.as_str(), &json).map_err(|e| bad(e.to_string()))?;
            Ok(EntityData {
                partition_key: partition_key.clone(),
                row_key: row_key.clone(),
                properties: parsed.properties,
            })
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
            JournalKind::Delete => TableOp::Delete {
                partition_key: partition_key.clone(),
                row_key,
                condition,
            },
        };
        Ok((table, op))
    }
}

fn precondition_text(p: &Precondition) -> Option<String> {
    match p {
        Precondition::IfMatch(tag) => Some(tag.as_str().to_owned()),
        Precondition::IfExists => Some("*".to_owned()),
        Precondition::Upsert => None,
    }
}

impl Journal {
    /// A journal of `ops`, grouped by table in application order.
    pub fn new(partition_key: &PartitionKey, ops: &[(TableName, TableOp)]) -> Self {
        Journal {
            version: JOURNAL_VERSION,
            partition_key: partition_key.as_str().to_owned(),
            ops: ops
                .iter()
                .map(|(t, op)| JournalOp::from_op(t, op))
                .collect(),
        }
    }

    /// The journal as stored in the lease document.
    ///
    /// # Errors
    /// Never in practice: serialising plain data cannot fail.
    pub fn to_value(&self) -> Result<serde_json::Value> {
        serde_json::to_value(self).map_err(|e| Error::Inconsistent {
            what: format!("cannot serialise the journal: {e}"),
        })
    }

    /// Parses a stored journal.
    ///
    /// # Errors
    /// [`Error::Inconsistent`] when it is not a journal this version knows.
    pub fn from_value(value: serde_json::Value) -> Result<Self> {
        let journal: Journal = serde_json::from_value(value).map_err(|e| Error::Inconsistent {
            what: format!("the pending journal does not parse: {e}"),
        })?;
        if journal.version != JOURNAL_VERSION {
            return Err(Error::Inconsistent {
                what: format!(
                    "the pending journal has version {}; this leasehold reads version {JOURNAL_VERSION}",
                    journal.version
                ),
            });
        }
        Ok(journal)
    }
}

/// The outcome of rolling a journal forward.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RollForwardReport {
    /// Operations applied by the roll-forward.
    pub applied: usize,
    /// Operations found already applied.
    pub already_applied: usize,
}

/// Whether the stored row already shows the effect of `op`.
pub(crate) fn shows_effect(op: &TableOp, stored: Option<&StoredEntity>) -> bool {
    match (op, stored) {
        (TableOp::Delete { .. }, None) => true,
        (TableOp::Delete { .. }, Some(_)) => false,
        (_, None) => false,
        (TableOp::Insert(d) | TableOp::Replace(d, _), Some(s)) => s.data.properties == d.properties,
        (TableOp::Merge(d, _), Some(s)) => contains(&s.data.properties, &d.properties),
    }
}

fn contains(stored: &Properties, written: &Properties) -> bool {
    written.iter().all(|(k, v)| stored.get(k) == Some(v))
}

/// Whether the stored row still satisfies `op`'s precondition, so the op can
/// be applied now. Returns the condition to send.
pub(crate) fn still_applicable(op: &TableOp, stored: Option<&StoredEntity>) -> Option<TableOp> {
    let condition = |c: &Precondition| match (c, stored) {
        (Precondition::IfMatch(tag), Some(s)) if &s.etag == tag => Some(c.clone()),
        (Precondition::IfExists, Some(s)) => Some(Precondition::IfMatch(s.etag.clone())),
        (Precondition::Upsert, Some(s)) => Some(Precondition::IfMatch(s.etag.clone())),
        (Precondition::Upsert, None) => Some(Precondition::Upsert),
        _ => None,
    };
    match op {
        TableOp::Insert(d) => stored.is_none().then(|| TableOp::Insert(d.clone())),
        TableOp::Replace(d, c) => condition(c).map(|c| TableOp::Replace(d.clone(), c)),
        TableOp::Merge(d, c) => condition(c).map(|c| TableOp::Merge(d.clone(), c)),
        TableOp::Delete {
            partition_key,
            row_key,
            condition: c,
        } => match (c, stored) {
            (Precondition::IfMatch(tag), Some(s)) if &s.etag == tag => Some(op.clone()),
            (Precondition::IfExists | Precondition::Upsert, Some(s)) => Some(TableOp::Delete {
                partition_key: partition_key.clone(),
                row_key: row_key.clone(),
                condition: Precondition::IfMatch(s.etag.clone()),
            }),
            _ => None,
        },
    }
}

/// Rolls `journal` forward, one operation at a time: an operation whose row
/// still has its precondition is applied (conditioned on the ETag just read,
/// so nothing written meanwhile is overwritten); one whose row already shows
/// its effect is skipped; anything else stops with [`Error::Inconsistent`].
///
/// Idempotent: running it again after a partial run finishes the job.
///
/// # Errors
/// [`Error::Inconsistent`] naming the row that contradicts the journal; the
/// backend's errors.
pub async fn roll_forward(
    backend: &dyn TableBackend,
    journal: &Journal,
) -> Result<RollForwardReport> {
    let pk = PartitionKey::new(&journal.partition_key).map_err(|e| Error::Inconsistent {
        what: format!("the journal's partition key does not parse: {e}"),
    })?;
    let mut report = RollForwardReport::default();
    for (i, entry) in journal.ops.iter().enumerate() {
        let (table, op) = entry.to_op(&pk)?;
        let stored = backend.get(&table, &pk, op.row_key()).await?;
        if shows_effect(&op, stored.as_ref()) {
            report.already_applied += 1;
            continue;
        }
        match still_applicable(&op, stored.as_ref()) {
            Some(now) => {
                backend.execute(&table, &now).await.map_err(|e| match e.kind() {
                    crate::ErrorKind::Conflict | crate::ErrorKind::AlreadyExists | crate::ErrorKind::NotFound => {
                        // The row and table are named here already: keep
                        // only what the service answered.
                        let answer = e.code().map_or_else(|| format!("{:?}", e.kind()), str::to_owned);
                        Error::Inconsistent {
                            what: format!(
                                "journal operation {i} ({} of row {:?} in `{table}`) was overtaken by another write while rolling forward ({answer})",
                                op.name(),
                                op.row_key().as_str()
                            ),
                        }
                    }
                    _ => e,
                })?;
                report.applied += 1;
            }
            None => {
                return Err(Error::Inconsistent {
                    what: format!(
                        "journal operation {i} ({} of row {:?} in `{table}`): the row neither has the ETag the unit read nor shows the operation's effect, so something wrote it outside the lock; the journal is kept for an operator",
                        op.name(),
                        op.row_key().as_str()
                    ),
                });
            }
        }
    }
    Ok(report)
}
