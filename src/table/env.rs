//! [`TableEnv`]: what the tables of one store share.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use crate::backend::Backend;
use crate::error::Result;
use crate::key::TableName;
use crate::retry::ConflictRetry;
use crate::telemetry::Telemetry;

/// What the tables of one store share: the backend, the table prefix, the
/// conflict retry policy, and the record of tables already created. The
/// store owns it and hands it to every [`Table`](super::Table) it makes, so
/// tables need nothing else of the store.
pub(crate) struct TableEnv {
    backend: Arc<dyn Backend>,
    conflict_retry: ConflictRetry,
    table_prefix: String,
    /// Tables created (or found), so each is created once.
    ready_tables: Mutex<HashSet<TableName>>,
    /// Where the store records its metrics.
    telemetry: Telemetry,
}

impl TableEnv {
    pub(crate) fn new(
        backend: Arc<dyn Backend>,
        conflict_retry: ConflictRetry,
        table_prefix: String,
        telemetry: Telemetry,
    ) -> Self {
        TableEnv {
            telemetry,
            backend,
            conflict_retry,
            table_prefix,
            ready_tables: Mutex::new(HashSet::new()),
        }
    }

    /// The backend tables read and write through.
    pub(crate) fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// How optimistic read-modify-write loops retry after a conflict.
    pub(crate) fn conflict_retry(&self) -> &ConflictRetry {
        &self.conflict_retry
    }

    /// Where the store records its metrics.
    pub(crate) fn telemetry(&self) -> &Telemetry {
        &self.telemetry
    }

    /// The prefix put before every table name.
    pub(crate) fn table_prefix(&self) -> &str {
        &self.table_prefix
    }

    /// The name of table `table` in this store: the table prefix, then
    /// `table`. The one place a prefixed name is made.
    ///
    /// # Errors
    /// [`crate::Error::Invalid`] when the prefixed name is not a valid table
    /// name (too long, say).
    pub(crate) fn table_name(&self, table: &str) -> Result<TableName> {
        TableName::new(format!("{}{table}", self.table_prefix))
    }

    /// Creates `table` unless it was created (or found) before.
    pub(crate) async fn ensure_table(&self, table: &TableName) -> Result<()> {
        if self.lock_ready().contains(table) {
            return Ok(());
        }
        self.backend.create_table(table).await?;
        self.lock_ready().insert(table.clone());
        Ok(())
    }

    /// Records that `table` exists (a store created it).
    pub(crate) fn mark_ready(&self, table: &TableName) {
        self.lock_ready().insert(table.clone());
    }

    /// Forgets that `table` exists (a store is deleting it): the next
    /// handle creates it again.
    pub(crate) fn forget_ready(&self, table: &TableName) {
        self.lock_ready().remove(table);
    }

    fn lock_ready(&self) -> std::sync::MutexGuard<'_, HashSet<TableName>> {
        // The set only caches "already created"; a poisoned lock still holds
        // a valid set.
        self.ready_tables
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
