//! What a store offers of the indexes of its entity tables by table name:
//! their check and repair (see [`crate::index`]).

use crate::error::Result;
use crate::index::IndexReport;

use super::Store;

impl Store {
    /// Reads entity table `table` (its name without the store's table
    /// prefix) and its index table, and reports index rows that are
    /// missing or orphaned, and unique values held twice. Read-only.
    /// `progress` is called with the number of rows read so far.
    ///
    /// The indexes are those the table's index table describes (see
    /// [`crate::Table::get_by`] and the layout in the README); with the
    /// entity type at hand, [`Table::verify_indexes`](crate::Table::verify_indexes) needs no description.
    ///
    /// # Errors
    /// [`Error::NotFound`](crate::Error::NotFound) when the table has no index descriptions (no
    /// indexed entity was ever written through leasehold);
    /// [`Error::Invalid`](crate::Error::Invalid) for an indexed property holding a value with no
    /// key form; backend errors.
    pub async fn verify_indexes(
        &self,
        table: &str,
        mut progress: impl FnMut(u64),
    ) -> Result<IndexReport> {
        crate::index::report_table(self.tables(), table, false, &mut progress).await
    }

    /// As [`Store::verify_indexes`], then fixes what it found: a missing row
    /// is written and an orphan deleted, each under the partition locks a
    /// leasehold write of it takes, after checking again that the problem
    /// is still there. Duplicated unique values are reported, not fixed.
    /// Running it again finds nothing to fix.
    ///
    /// # Errors
    /// As [`Store::verify_indexes`]; lock and backend errors of a fix (the
    /// fixes before it stay).
    pub async fn rebuild_indexes(
        &self,
        table: &str,
        mut progress: impl FnMut(u64),
    ) -> Result<IndexReport> {
        crate::index::report_table(self.tables(), table, true, &mut progress).await
    }
}
