//! The row protocol: the rows and properties leasehold writes beside an
//! application's own. Every reserved name and the layout of each row are
//! here, below [`crate::table`], so that the tables, the units, the
//! indexes and the fenced writes read and write them alike.
//!
//! | what | where | name |
//! |---|---|---|
//! | a commit's row mark ([`mark`]) | property of a marked row | `_lhTxn` |
//! | a marked row's after-image ([`after`]) | property of a marked row | `_lhNew` |
//! | after-image rows ([`after`]) | rows of the marked row's partition | `_lhCommit.<id>.a<n>.<i>` |
//! | a commit's decision row ([`decision`]) | row of the primary partition | `_lhCommit.<id>`, properties `_lhDecision`, `_lhGroups` |
//! | a deleted indexed entity's tombstone ([`tombstone`]) | the entity's row | `_lhGone` |
//! | the instant a row expires ([`expiry`]) | property of an entity row | `_lhExpires` |
//! | a unique value's claim ([`claim`]) | row of the value's partition of the index table | `_lhClaim` |
//! | a fenced write's fence row ([`fence`]) | row of each partition a fence writes | `~lhfence~<lease>`, properties `_lhFenceEpoch`, `_lhFenceLease` |
//! | an entity's write log (`crate::backend::write_log`) | property of an entity row | `_lhWriteLog` |
//!
//! Reads through leasehold never return a row [`is_hidden`] names, and
//! resolve a mark before returning its row. Entity types may not use a
//! property name starting with `_lh`: the derive refuses them at compile
//! time, and every write of properties a user gave refuses them before any
//! request ([`crate::entity::refuse_reserved_properties`]). The write log's
//! name and the expiry's are the rules crate's, shared with the derive.

pub(crate) mod after;
pub(crate) mod claim;
pub(crate) mod decision;
pub(crate) mod expiry;
pub(crate) mod fence;
pub(crate) mod mark;
pub(crate) mod tombstone;

use crate::backend::{
    Precondition, QueryPage, QuerySpec, StoredEntity, TableBackend, TableOp, WriteOptions,
};
use crate::entity::{EntityData, Properties};
use crate::error::{ErrorKind, Result};
use crate::key::{PartitionKey, RowKey, TableName};
use crate::query::Filter;

/// How long after starting its claims an indexed write (a `Table` write, a
/// unit's or a transaction's commit) may send the writes that rely on them
/// (see "How long a claim or tombstone is relied on" in [`crate::index`]).
pub(crate) const SEND_WINDOW: std::time::Duration = std::time::Duration::from_secs(5 * 60);

/// Whether reads through leasehold leave the row out: a commit's decision
/// or after-image row, a fence row, or a row that reads as absent
/// ([`tombstone::is_tombstone`]). (Whether an index row is stale takes a
/// read of its entity.)
pub(crate) fn is_hidden(row_key: &RowKey, properties: &Properties) -> bool {
    decision::is_decision_row(row_key)
        || fence::is_fence_row(row_key.as_str())
        || tombstone::is_tombstone(properties)
}

/// A row of partition `pk` keyed `rk` holding `properties`.
pub(crate) fn row(pk: &PartitionKey, rk: &RowKey, properties: Properties) -> EntityData {
    EntityData {
        partition_key: pk.clone(),
        row_key: rk.clone(),
        properties,
    }
}

/// The delete of row `rk` of partition `pk` under `condition`.
pub(crate) fn delete(pk: &PartitionKey, rk: &RowKey, condition: Precondition) -> TableOp {
    TableOp::Delete {
        partition_key: pk.clone(),
        row_key: rk.clone(),
        condition,
    }
}

/// Deletes `row` at the ETag it was read at; answers whether it did (a row
/// changed or gone meanwhile stays).
pub(crate) async fn delete_as_read(
    backend: &dyn TableBackend,
    table: &TableName,
    row: &StoredEntity,
) -> Result<bool> {
    let (data, etag) = (&row.data, Precondition::IfMatch(row.etag.clone()));
    let op = delete(&data.partition_key, &data.row_key, etag);
    write_as_read(backend, table, op).await
}

/// Sends `op`, conditioned on a row as read; answers whether it went
/// through (`false`: the row changed or went meanwhile).
pub(crate) async fn write_as_read(
    backend: &dyn TableBackend,
    table: &TableName,
    op: TableOp,
) -> Result<bool> {
    match backend.execute(table, op, &WriteOptions::new()).await {
        Ok(_) => Ok(true),
        Err(e) if matches!(e.kind(), ErrorKind::Conflict | ErrorKind::NotFound) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The rows of `table` that `filter` matches, a page at a time (none of a
/// missing table): for walks over rows without a bound, such as expiry's.
pub(crate) struct Pages<'a> {
    backend: &'a dyn TableBackend,
    table: &'a TableName,
    spec: Option<QuerySpec>,
}

impl<'a> Pages<'a> {
    pub(crate) fn new(backend: &'a dyn TableBackend, table: &'a TableName, filter: Filter) -> Self {
        let spec = QuerySpec {
            filter: Some(filter),
            ..QuerySpec::default()
        };
        Self::of(backend, table, spec)
    }

    /// The pages of a query asked as `spec`.
    pub(crate) fn of(backend: &'a dyn TableBackend, table: &'a TableName, spec: QuerySpec) -> Self {
        let spec = Some(spec);
        Pages {
            backend,
            table,
            spec,
        }
    }

    /// The next page, or `None` once every page was read.
    pub(crate) async fn next(&mut self) -> Result<Option<Vec<StoredEntity>>> {
        let Some(spec) = self.spec.as_mut() else {
            return Ok(None);
        };
        let page = match self.backend.query(self.table, spec).await {
            Ok(page) => page,
            Err(e) if e.kind() == ErrorKind::NotFound => QueryPage::default(),
            Err(e) => return Err(e),
        };
        match page.continuation {
            Some(next) => spec.continuation = Some(next),
            None => self.spec = None,
        }
        Ok(Some(page.entities))
    }
}

/// Every row of `table` that `filter` matches (none of a missing table),
/// for walks bounded by their filter.
pub(crate) async fn query_all(
    backend: &dyn TableBackend,
    table: &TableName,
    filter: Filter,
) -> Result<Vec<StoredEntity>> {
    let mut pages = Pages::new(backend, table, filter);
    let mut rows = Vec::new();
    while let Some(page) = pages.next().await? {
        rows.extend(page);
    }
    Ok(rows)
}
