//! [`Resolve`]: what a store does to the rows its tables read. Installed
//! by [`Store::table`](crate::Store::table): the lock machinery resolves
//! the marks that units' commits leave on rows (see `crate::lock`, "Units
//! and optimistic writes"); the store also stacks the index layer over
//! the writes of types with indexes (see `crate::index`). Tables know
//! neither; a table made without them reads rows as stored and writes them
//! plainly.

use std::any::Any;
use std::sync::Arc;

use async_trait::async_trait;

use crate::backend::{QueryPage, QuerySpec, StoredEntity};
use crate::error::Result;
use crate::key::TableName;
use crate::rows::mark::MARK;
use crate::rows::tombstone::is_tombstone;

/// Whether `row` needs a [`Resolve`] at all: it carries a mark or is a
/// tombstone. Most rows do not, and skip the call.
pub(crate) fn needs_resolving(row: &StoredEntity) -> bool {
    row.data.properties.get(MARK).is_some() || is_tombstone(&row.data.properties)
}

/// How a store's tables see rows: with any unit's mark resolved, and
/// without the tombstones that deletes of indexed types leave.
#[async_trait]
pub(crate) trait Resolve: Send + Sync + 'static {
    /// `row` of `table` as a reader outside any unit may see it.
    async fn resolve_row(
        &self,
        table: &TableName,
        row: Option<StoredEntity>,
    ) -> Result<Option<StoredEntity>>;

    /// The request to send for a query asked as `asked`: one that also
    /// returns every row of its key range a resolve may change, so that
    /// [`Resolve::resolve_page`] sees each row the filter matches once
    /// resolved.
    fn request(&self, asked: &QuerySpec) -> QuerySpec;

    /// A page of a query of `table` asked as `spec` (and sent as
    /// [`Resolve::request`] says), each row as [`Resolve::resolve_row`]
    /// sees it, rows that do not match the filter so left out.
    async fn resolve_page(
        &self,
        table: &TableName,
        spec: &QuerySpec,
        page: QueryPage,
    ) -> Result<QueryPage>;

    /// The implementation itself, for the machinery above tables that
    /// knows its type.
    fn as_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
}
