//! Checking and repairing the indexes of a table by its name
//! ([`crate::index`]).

use crate::error::Result;
use crate::index::IndexReport;

use super::Store;

impl Store {
    /// Reads entity table `table` (without the store's prefix) and its
    /// index table, and reports index rows missing or orphaned and unique
    /// values held twice, calling `progress` with the rows read so far (as
    /// [`Table::verify_indexes`](crate::Table::verify_indexes) by name).
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
        let indexes = crate::index::defs_of(self.tables(), table).await?;
        crate::index::report(self.tables(), &indexes, false, &mut progress).await
    }

    /// As [`Store::verify_indexes`], then writes missing rows and deletes
    /// orphans (checked again under their locks); duplicated unique values
    /// are reported, not fixed.
    ///
    /// # Errors
    /// As [`Store::verify_indexes`]; lock and backend errors of a fix (the
    /// fixes before it stay).
    pub async fn rebuild_indexes(
        &self,
        table: &str,
        mut progress: impl FnMut(u64),
    ) -> Result<IndexReport> {
        let indexes = crate::index::defs_of(self.tables(), table).await?;
        crate::index::report(self.tables(), &indexes, true, &mut progress).await
    }
}
