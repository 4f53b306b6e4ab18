//! The expiry step of [`Store::sweep`](super::Store::sweep) for a row of
//! an indexed type. Expired rows are found by a filter on the expiry
//! property alone (`crate::rows::expiry`), so any table is swept without
//! its Rust type, judged with marks resolved. No waiting bound is needed:
//! no write relies on an expired row being there (an insert over it is
//! conditioned on its ETag).

use std::sync::Arc;

use crate::backend::{Precondition, StoredEntity, TableOp};
use crate::error::Result;
use crate::index::claim;
use crate::lock::LockEnv;
use crate::rows::tombstone;

/// Deletes an expired row of a type with indexes as
/// [`Table::delete`](crate::Table::delete) deletes one: a tombstone at the
/// ETag read, then its index rows; `false` when the row changed since.
pub(super) async fn remove_indexed(
    env: &Arc<LockEnv>,
    indexes: &crate::index::Indexes,
    table: &crate::key::TableName,
    row: StoredEntity,
) -> Result<bool> {
    let owner = (row.data.partition_key.clone(), row.data.row_key.clone());
    let frees: Vec<(usize, crate::index::Key)> = indexes
        .keys(Some(&row.data.properties))?
        .into_iter()
        .enumerate()
        .filter_map(|(i, key)| key.map(|k| (i, k)))
        .collect();
    let freed = claim::read_freed(&env.tables, indexes, &frees, &owner).await?;
    let gone = tombstone::data(&owner.0, &owner.1, "expired");
    let op = TableOp::Replace(gone, Precondition::IfMatch(row.etag));
    let removed = crate::rows::write_as_read(env.backend.as_ref(), table, op).await?;
    if removed {
        claim::remove_freed(&env.tables, indexes, freed).await;
    }
    Ok(removed)
}
