//! [`Slot`]: where a row of a unit lives.

use crate::key::TableName;

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
