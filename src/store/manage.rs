//! Table management through a store: create, delete and list the tables
//! under its table prefix.

use super::Store;
use crate::backend::TableCreation;
use crate::error::{Error, Result};
use crate::key::TableName;

impl Store {
    /// Creates table `name` (the store's table prefix goes in front) unless
    /// it exists, and says which. Tables are also created on first use by
    /// [`Store::table`]; this is for tools, tests and set-up scripts.
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
    /// valid table name (nothing is sent); the backend's errors.
    pub async fn create_table(&self, name: &str) -> Result<TableCreation> {
        let table = self.managed_table(name)?;
        let created = self.backend().create_table(&table).await?;
        self.tables().mark_ready(&table);
        Ok(created)
    }

    /// Deletes table `name` (the store's table prefix goes in front) and
    /// every entity in it: `true` when it did, `false` when there was no
    /// such table. The service takes a while to let the name be used again
    /// (Azure answers `TableBeingDeleted` meanwhile). Reads through any of
    /// the store's handles then fail with [`Error::NotFound`] (code
    /// `TableNotFound`, naming the table), as the service answers them: a
    /// read does not create the table again. So do writes through handles
    /// that had used the table before the delete; a write through another
    /// handle creates the table again.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the table when the prefixed name is not a
    /// valid table name (nothing is sent); the backend's errors.
    pub async fn delete_table(&self, name: &str) -> Result<bool> {
        let table = self.managed_table(name)?;
        // Forgotten first: should the delete fail after reaching the
        // service, the next handle creates the table rather than assume it.
        self.tables().forget_ready(&table);
        self.backend().delete_table(&table).await
    }

    /// The tables under the store's table prefix, by name and without the
    /// prefix; tables outside it are not listed. The prefix is matched as
    /// the service matches names, without regard to case.
    ///
    /// # Errors
    /// The backend's errors.
    pub async fn list_tables(&self) -> Result<Vec<String>> {
        let prefix = self.table_prefix();
        let tables = self.backend().list_tables().await?;
        Ok(tables
            .into_iter()
            .filter_map(|t| {
                let name = t.as_str();
                let head = name.get(..prefix.len())?;
                head.eq_ignore_ascii_case(prefix)
                    .then(|| name[prefix.len()..].to_owned())
            })
            .filter(|rest| !rest.is_empty())
            .collect())
    }
}

impl Store {
    /// The prefixed name of table `name`; an empty name is refused (it
    /// would name the prefix itself).
    fn managed_table(&self, name: &str) -> Result<TableName> {
        if name.is_empty() {
            return Err(Error::invalid("table name", "is empty"));
        }
        self.table_name(name)
    }
}
