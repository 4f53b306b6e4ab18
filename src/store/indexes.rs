//! What a store offers of the indexes of its entity tables by table name:
//! their index rows' partitions, and their check and repair (see
//! [`crate::index`]).

use crate::entity::Value;
use crate::error::Result;
use crate::index::IndexReport;
use crate::key::PartitionKey;

use super::Store;

impl Store {
    /// The partition key of the index row of `value` in the index on
    /// `field` of entity table `table` (its name without the store's table
    /// prefix), as the index descriptions of the table say (read as
    /// [`Store::verify_indexes`] reads them;
    /// one request): the partition of the value's claim, and the key the
    /// operator command's `locks` commands take for the per-value lock
    /// blobs of earlier versions. `field` is the field's name or its stored
    /// property name. Integers have one key form whatever their width:
    /// `Value::Int32(7)` and `Value::Int64(7)` give the same key. With the
    /// entity and its type at hand,
    /// [`Table::index_partitions`](crate::Table::index_partitions) needs no
    /// request.
    ///
    /// ```
    /// # use leasehold::{Entity, Store};
    /// # use leasehold::entity::Value;
    /// # #[derive(Entity, Clone, Debug)]
    /// # #[entity(table = "Customers")]
    /// # struct Customer { #[entity(partition_key)] region: String, #[entity(row_key)] id: String, #[entity(unique)] email: String }
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let store = Store::memory();
    /// let ann = Customer { region: "eu".into(), id: "1".into(), email: "ann@example.com".into() };
    /// store.table::<Customer>().insert(ann.clone()).await?;
    /// let key = store
    ///     .index_partition("Customers", "email", &Value::String("ann@example.com".into()))
    ///     .await?;
    /// assert_eq!(key.as_str(), "email ann@example.0com"); // escaped as CompositeKey escapes
    /// assert_eq!(store.table::<Customer>().index_partitions(&ann)?, [key]);
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`Error::NotFound`](crate::Error::NotFound) when the table has no index descriptions (no
    /// indexed entity was ever written to it through leasehold);
    /// [`Error::Invalid`](crate::Error::Invalid) naming the field when it is not indexed (the
    /// message lists the indexed fields), and naming the value when it has
    /// no key form or its partition key would be too long; backend errors.
    pub async fn index_partition(
        &self,
        table: &str,
        field: &str,
        value: &Value,
    ) -> Result<PartitionKey> {
        crate::index::index_partition(self.locking(), table, field, value).await
    }

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
        crate::index::verify_table(self.locking(), table, &mut progress).await
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
        crate::index::rebuild_table(self.locking(), table, &mut progress).await
    }
}
