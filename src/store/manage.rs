//! Creating, deleting and listing the tables under a store's prefix.

use super::Store;
use crate::backend::{TableCreation, notes};
use crate::error::{Error, ErrorKind, Result};
use crate::index::TABLE_SUFFIX;
use crate::key::TableName;
use crate::table::TableEnv;

impl Store {
    /// Creates table `name` (under the store's prefix) unless it exists,
    /// and says which (tables are also created on first use).
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// use leasehold::backend::TableCreation;
    ///
    /// let store = leasehold::Store::memory();
    /// assert_eq!(store.create_table("Orders").await?, TableCreation::Created);
    /// assert_eq!(store.create_table("Orders").await?, TableCreation::AlreadyExisted);
    /// assert_eq!(store.list_tables().await?, ["Orders"]);
    /// assert!(store.delete_table("Orders").await?);
    /// assert!(store.list_tables().await?.is_empty());
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the table when the prefixed name is not a
    /// valid table name, before any request; the backend's errors.
    pub async fn create_table(&self, name: &str) -> Result<TableCreation> {
        let table = self.managed_table(name)?;
        let created = self.backend().create_table(&table).await?;
        self.tables().mark_ready(&table);
        Ok(created)
    }

    /// Deletes table `name` (under the store's prefix), then its index
    /// table (`{name}Idx`), if any: `true` when it deleted either. Calling
    /// it again finishes a half-done delete. Reads, and writes through
    /// handles that used the table before, then fail with
    /// [`Error::NotFound`]; a write through another handle creates the
    /// table again.
    ///
    /// # Errors
    /// As [`Store::create_table`].
    pub async fn delete_table(&self, name: &str) -> Result<bool> {
        let table = self.managed_table(name)?;
        let index_table = self.index_table_of(name).await?;
        // Forgotten first: should the delete fail after reaching the
        // service, the next handle creates the table rather than assume it.
        self.tables().forget_ready(&table);
        let deleted = self.backend().delete_table(&table).await?;
        let index_deleted = match index_table {
            Some(index_table) => {
                self.tables().forget_ready(&index_table);
                crate::index::forget_defs(self.tables(), &index_table);
                self.backend().delete_table(&index_table).await?
            }
            None => false,
        };
        Ok(deleted || index_deleted)
    }

    /// The user's tables under the store's prefix (matched without regard
    /// to case), without it; index tables are not listed
    /// ([`Store::list_index_tables`]).
    ///
    /// # Errors
    /// The backend's errors.
    pub async fn list_tables(&self) -> Result<Vec<String>> {
        Ok(self.tables_by_kind().await?.0)
    }

    /// The index tables (`{table}Idx`, [`crate::index`]) under the store's
    /// prefix, without it; deleting one alone leaves the index to be
    /// rebuilt ([`Store::rebuild_indexes`]).
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// #[derive(leasehold::Entity, Debug, Clone)]
    /// #[entity(table = "Customers")]
    /// struct Customer {
    ///     #[entity(partition_key)] region: String,
    ///     #[entity(row_key)] id: String,
    ///     #[entity(unique)] email: String,
    /// }
    /// let store = leasehold::Store::memory();
    /// store.table::<Customer>()
    ///     .insert(Customer { region: "eu".into(), id: "1".into(), email: "a@example.com".into() })
    ///     .await?;
    /// assert_eq!(store.list_tables().await?, ["Customers"]);
    /// assert_eq!(store.list_index_tables().await?, ["CustomersIdx"]);
    /// assert!(store.delete_table("Customers").await?); // and its index table
    /// assert!(store.list_index_tables().await?.is_empty());
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// The backend's errors.
    pub async fn list_index_tables(&self) -> Result<Vec<String>> {
        Ok(self.tables_by_kind().await?.1)
    }
}

impl Store {
    /// The user's tables, then the index tables.
    async fn tables_by_kind(&self) -> Result<(Vec<String>, Vec<String>)> {
        let (mut user, mut index) = (Vec::new(), Vec::new());
        for table in prefixed_tables(self.tables()).await? {
            let name = table.as_str()[self.table_prefix().len()..].to_owned();
            let is_index = match name.strip_suffix(TABLE_SUFFIX) {
                Some(table) if !table.is_empty() => self.index_table_of(table).await?.is_some(),
                _ => false,
            };
            if is_index { &mut index } else { &mut user }.push(name);
        }
        Ok((user, index))
    }

    /// `{name}Idx`, if it holds index descriptions.
    async fn index_table_of(&self, name: &str) -> Result<Option<TableName>> {
        if self
            .tables()
            .table_name(&format!("{name}{TABLE_SUFFIX}"))
            .is_err()
        {
            // Too long for a table name: there can be no index table.
            return Ok(None);
        }
        // A missing index table is the common answer, not a failure.
        let read = crate::index::read_defs(self.tables(), name);
        let indexes = notes::expecting(&[ErrorKind::NotFound], read).await?;
        Ok(indexes.map(|i| i.index_table))
    }

    /// The prefixed name of table `name` (not empty: that names the prefix).
    fn managed_table(&self, name: &str) -> Result<TableName> {
        if name.is_empty() {
            return Err(Error::invalid("table name", "is empty"));
        }
        self.tables().table_name(name)
    }
}

/// The tables under the store's prefix (matched without regard to case, as
/// the service names tables; not the prefix alone), as stored: one listing.
pub(super) async fn prefixed_tables(env: &TableEnv) -> Result<Vec<TableName>> {
    let prefix = env.table_prefix.as_str();
    let mut tables = env.backend.list_tables().await?;
    tables.retain(|t| {
        let name = t.as_str();
        name.len() > prefix.len()
            && name
                .get(..prefix.len())
                .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
    });
    Ok(tables)
}
