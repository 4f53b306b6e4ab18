//! [`Slot`]: where a row of a unit lives; what a unit read and stages,
//! by row.

use std::collections::{BTreeMap, HashMap};

use crate::backend::{StoredEntity, TableOp};
use crate::key::{RowKey, TableName};
use crate::rows::tombstone::is_tombstone;

/// Where a row of the unit lives: the index of its partition in
/// [`Unit::parts`](super::Unit::parts), and its table.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Slot {
    pub(crate) part: usize,
    pub(crate) table: TableName,
}

impl std::fmt::Display for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.table, f)
    }
}

/// What each row looked like when a unit read it (`None`: absent).
pub(crate) type Reads = HashMap<(Slot, RowKey), Option<StoredEntity>>;

/// A unit's staged writes, one per row, in a fixed order: by partition
/// (canonical order), table, row.
pub(crate) type Staged = BTreeMap<(Slot, RowKey), TableOp>;

/// Whether the row `key` was read as absent (or a tombstone).
pub(crate) fn read_absent(reads: &Reads, key: &(Slot, RowKey)) -> bool {
    match reads.get(key) {
        Some(None) => true,
        Some(Some(row)) => is_tombstone(&row.data.properties),
        None => false,
    }
}
