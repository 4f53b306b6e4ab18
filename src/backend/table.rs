//! The data the table side of a backend speaks.

use std::collections::HashSet;

use time::OffsetDateTime;

use crate::backend::wire;
use crate::entity::{EntityData, validate_entity};
use crate::error::{Error, Result};
use crate::key::{ETag, PartitionKey, RowKey};
use crate::query::{Continuation, Filter};

/// An entity as stored: data plus version.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEntity {
    /// Keys and properties.
    pub data: EntityData,
    /// The entity's current ETag.
    pub etag: ETag,
    /// The service's Timestamp of the last write.
    pub timestamp: OffsetDateTime,
}

/// The version a write produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    /// The new ETag.
    pub etag: ETag,
    /// The new Timestamp.
    pub timestamp: OffsetDateTime,
}

/// The condition of a replace, merge or delete. The service has no
/// unconditional delete: a delete on [`Upsert`](Precondition::Upsert) is
/// refused with [`Error::Invalid`] before anything is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Precondition {
    /// `If-Match: <etag>`: only if unchanged since read (412 otherwise, 404 if
    /// gone).
    IfMatch(ETag),
    /// `If-Match: *`: only if the entity exists (404 otherwise); a delete
    /// deletes whatever version is stored.
    IfExists,
    /// No condition: create or overwrite (insert-or-replace /
    /// insert-or-merge). Not a delete's condition.
    Upsert,
}

/// How [`TableBackend::execute`](super::TableBackend::execute) sends one
/// write, beyond the operation itself. The default sends it as it is.
///
/// ```
/// use leasehold::backend::WriteOptions;
/// let options = WriteOptions::new().with_write_log();
/// assert_eq!(options.write_log(), Some("_lhWriteLog"));
/// assert_eq!(WriteOptions::default().write_log(), None);
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct WriteOptions {
    write_log: bool,
}

impl WriteOptions {
    /// No options: the write as it is.
    pub const fn new() -> Self {
        WriteOptions { write_log: false }
    }

    /// The written entity keeps a write log
    /// ([`Table::with_write_log`](crate::Table::with_write_log)) with this
    /// write's id in front.
    #[must_use]
    pub const fn with_write_log(mut self) -> Self {
        self.write_log = true;
        self
    }

    /// The property holding the written entity's write log, when it keeps
    /// one: a backend that lost the reply settles the outcome by it.
    pub fn write_log(&self) -> Option<&'static str> {
        self.write_log.then_some(super::write_log::PROPERTY)
    }
}

/// One write to a table.
#[derive(Debug, Clone, PartialEq)]
pub enum TableOp {
    /// Create-only: 409 `EntityAlreadyExists` when the row exists.
    Insert(EntityData),
    /// Replace the whole entity.
    Replace(EntityData, Precondition),
    /// Merge properties into the entity, keeping the others.
    Merge(EntityData, Precondition),
    /// Delete the entity (404 when there is none).
    Delete {
        /// The partition key.
        partition_key: PartitionKey,
        /// The row key.
        row_key: RowKey,
        /// [`Precondition::IfMatch`] or [`Precondition::IfExists`] (see
        /// [`Precondition`]).
        condition: Precondition,
    },
}

impl TableOp {
    /// The most operations in one entity-group transaction
    /// ([`TableBackend::batch`](super::TableBackend::batch)).
    pub const MAX_BATCH_OPS: usize = 100;

    /// The largest entity-group transaction payload, in bytes (each
    /// operation counts [`TableOp::payload_size`]).
    pub const MAX_BATCH_BYTES: usize = 4 * 1024 * 1024;

    /// The operation's condition; `None` for an insert.
    pub fn condition(&self) -> Option<Precondition> {
        match self {
            TableOp::Insert(_) => None,
            TableOp::Replace(_, c)
            | TableOp::Merge(_, c)
            | TableOp::Delete { condition: c, .. } => Some(c.clone()),
        }
    }

    /// Checks the operation's condition and the limits of the entity it
    /// writes before sending ([`Error::Invalid`]).
    pub(crate) fn validate(&self, table: &str) -> Result<()> {
        if let Some(d) = self.data() {
            validate_entity(table, &d.partition_key, &d.row_key, &d.properties)?;
        }
        match self {
            TableOp::Delete {
                condition: Precondition::Upsert,
                partition_key,
                row_key,
            } => Err(Error::invalid(
                format!(
                    "delete of row ({:?}, {:?}) in table `{table}`",
                    partition_key.as_str(),
                    row_key.as_str()
                ),
                "a delete takes Precondition::IfMatch or Precondition::IfExists, not Upsert",
            )),
            _ => Ok(()),
        }
    }

    /// The partition the operation writes.
    pub fn partition_key(&self) -> &PartitionKey {
        match self {
            TableOp::Insert(d) | TableOp::Replace(d, _) | TableOp::Merge(d, _) => &d.partition_key,
            TableOp::Delete { partition_key, .. } => partition_key,
        }
    }

    /// The row the operation writes.
    pub fn row_key(&self) -> &RowKey {
        match self {
            TableOp::Insert(d) | TableOp::Replace(d, _) | TableOp::Merge(d, _) => &d.row_key,
            TableOp::Delete { row_key, .. } => row_key,
        }
    }

    /// The operation's name, for logs and errors.
    pub fn name(&self) -> &'static str {
        match self {
            TableOp::Insert(_) => "insert",
            TableOp::Replace(_, Precondition::Upsert) => "upsert",
            TableOp::Replace(..) => "replace",
            TableOp::Merge(_, Precondition::Upsert) => "upsert-merge",
            TableOp::Merge(..) => "merge",
            TableOp::Delete { .. } => "delete",
        }
    }

    /// The entity written, if the operation writes one, for changing it.
    pub fn data_mut(&mut self) -> Option<&mut EntityData> {
        match self {
            TableOp::Insert(d) | TableOp::Replace(d, _) | TableOp::Merge(d, _) => Some(d),
            TableOp::Delete { .. } => None,
        }
    }

    /// The entity written, if the operation writes one.
    pub fn data(&self) -> Option<&EntityData> {
        match self {
            TableOp::Insert(d) | TableOp::Replace(d, _) | TableOp::Merge(d, _) => Some(d),
            TableOp::Delete { .. } => None,
        }
    }

    /// The operation's size in a batch payload: its JSON body plus a fixed
    /// allowance for the MIME part headers.
    pub fn payload_size(&self) -> usize {
        self.payload_size_with(|body| body.text_len().unwrap_or(0))
    }

    fn payload_size_with(&self, body_len: impl FnOnce(wire::EntityBody<'_>) -> usize) -> usize {
        const PART_OVERHEAD: usize = 512;
        let body = match self.data() {
            Some(d) => body_len(wire::EntityBody::of(d)),
            None => 0,
        };
        // The keys travel in the part's URL, percent-encoded: up to three
        // bytes for each byte of UTF-8 (a quote is doubled).
        let in_url = |key: &str| {
            key.bytes()
                .map(|b| if b.is_ascii_alphanumeric() { 1 } else { 3 })
                .sum::<usize>()
        };
        PART_OVERHEAD
            + body
            + in_url(self.partition_key().as_str())
            + in_url(self.row_key().as_str())
    }
}

/// Checks an entity-group transaction against the service's limits
/// ([`Error::Invalid`] naming the limit and the operation that breaks it).
pub(crate) fn validate_batch(table: &str, ops: &[TableOp]) -> Result<()> {
    let what = || format!("batch on table `{table}`");
    let Some(first) = ops.first() else {
        return Err(Error::invalid(what(), "is empty"));
    };
    if ops.len() > TableOp::MAX_BATCH_OPS {
        return Err(Error::invalid(
            what(),
            format!(
                "has {} operations; the limit is {}",
                ops.len(),
                TableOp::MAX_BATCH_OPS
            ),
        ));
    }
    let pk = first.partition_key();
    let mut rows = HashSet::new();
    for (i, op) in ops.iter().enumerate() {
        if op.partition_key() != pk {
            return Err(Error::invalid(
                what(),
                format!(
                    "operation {i} is in partition {:?}, operation 0 in {:?}; a batch spans one partition",
                    op.partition_key().as_str(),
                    pk.as_str()
                ),
            ));
        }
        if !rows.insert(op.row_key()) {
            return Err(Error::invalid(
                what(),
                format!(
                    "operation {i} touches row {:?} a second time; a batch touches each row once",
                    op.row_key().as_str()
                ),
            ));
        }
    }
    // A bound settles a batch far below the limit without writing any body;
    // one near it is measured.
    let bound = |op: &TableOp| op.payload_size_with(|body| body.text_len_bound(6));
    let bound: usize = ops.iter().map(bound).sum();
    if bound <= TableOp::MAX_BATCH_BYTES {
        return Ok(());
    }
    let bytes: usize = ops.iter().map(TableOp::payload_size).sum();
    if bytes > TableOp::MAX_BATCH_BYTES {
        return Err(Error::invalid(
            what(),
            format!(
                "is about {bytes} bytes; the limit is {}",
                TableOp::MAX_BATCH_BYTES
            ),
        ));
    }
    Ok(())
}

/// `ops` as entity-group transactions within the service's limits, in order
/// ([`Error::Invalid`] as [`validate_batch`]).
pub(crate) fn chunk_batches(table: &str, ops: Vec<TableOp>) -> Result<Vec<Vec<TableOp>>> {
    let mut batches: Vec<Vec<TableOp>> = Vec::new();
    let mut bytes = 0;
    for op in ops {
        let size = op.payload_size();
        match batches.last_mut() {
            Some(batch)
                if batch.len() < TableOp::MAX_BATCH_OPS
                    && bytes + size <= TableOp::MAX_BATCH_BYTES =>
            {
                bytes += size;
                batch.push(op);
            }
            _ => {
                bytes = size;
                batches.push(vec![op]);
            }
        }
    }
    for batch in &batches {
        validate_batch(table, batch)?;
    }
    Ok(batches)
}

/// What [`TableBackend::create_table`](super::TableBackend::create_table)
/// found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TableCreation {
    /// The table was created by this call.
    Created,
    /// A table of that name was there already; it is left as it is.
    AlreadyExisted,
}

/// One query request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QuerySpec {
    /// The filter, if any.
    pub filter: Option<Filter>,
    /// The user properties to return (keys and Timestamp always come back);
    /// `None` for all.
    pub select: Option<Vec<String>>,
    /// The page size, at most [`QuerySpec::MAX_PAGE_SIZE`]; `None` lets the
    /// service pick (up to 1000).
    pub top: Option<u16>,
    /// Where to resume.
    pub continuation: Option<Continuation>,
}

impl QuerySpec {
    /// The most entities one page may hold (a service limit).
    pub const MAX_PAGE_SIZE: u16 = 1000;

    /// Checks the page size and filter.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a page size outside 1..=1000, or a filter the
    /// service would reject.
    pub fn validate(&self) -> Result<()> {
        if let Some(top) = self.top
            && (top == 0 || top > Self::MAX_PAGE_SIZE)
        {
            return Err(Error::invalid(
                "page size",
                format!("{top} is outside 1..={}", Self::MAX_PAGE_SIZE),
            ));
        }
        if let Some(filter) = &self.filter {
            filter.validate()?;
        }
        Ok(())
    }
}

/// One page of query results.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueryPage {
    /// The entities, in key order. May be empty even when more follow.
    pub entities: Vec<StoredEntity>,
    /// Where the next page starts; `None` on the last page.
    pub continuation: Option<Continuation>,
}
