//! [`TableEnv`]: what the tables of one store share.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use crate::backend::{Backend, TableOp, Version, WriteOptions};
use crate::entity::Properties;
use crate::entity::entity_type::IndexDef;
use crate::error::Result;
use crate::key::TableName;
use crate::lease::LeaseManager;
use crate::retry::ConflictRetry;
use crate::telemetry::Telemetry;

/// What the tables of one store share; `locks`: those a read takes to
/// settle a commit whose writer is gone (see [`super::marks`]).
pub(crate) struct TableEnv {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) conflict_retry: ConflictRetry,
    pub(crate) table_prefix: String,
    ready_tables: Mutex<Tables>,
    pub(crate) telemetry: Telemetry,
    pub(crate) locks: LeaseManager,
    /// How long a read waits for a commit's primary lock.
    pub(super) lock_timeout: Duration,
    pub(super) index_writes: IndexWrites,
}

/// Makes the write path of an indexed type (`crate::index`) from the
/// store's tables, its declared table, its name and its indexes.
pub(crate) type IndexWrites =
    fn(Arc<TableEnv>, &'static str, String, &'static [IndexDef]) -> Arc<dyn IndexedWriter>;

/// How the table of an indexed type sends a write: its index rows first,
/// then the entity's row through `below` (see `crate::index`, "Writes").
#[async_trait]
pub(crate) trait IndexedWriter: Send + Sync + std::fmt::Debug {
    /// Sends `op` to `table` through `below`; `as_read`: the row's
    /// properties at the version `op` is conditioned on, if known.
    async fn execute(
        &self,
        below: &dyn Backend,
        table: &TableName,
        op: TableOp,
        options: &WriteOptions,
        as_read: Option<Arc<Properties>>,
    ) -> Result<Option<Version>>;
}

impl TableEnv {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        backend: Arc<dyn Backend>,
        conflict_retry: ConflictRetry,
        table_prefix: String,
        telemetry: Telemetry,
        locks: LeaseManager,
        lock_timeout: Duration,
        index_writes: IndexWrites,
    ) -> Self {
        TableEnv {
            telemetry,
            backend,
            conflict_retry,
            table_prefix,
            ready_tables: Mutex::new(Tables::default()),
            locks,
            lock_timeout,
            index_writes,
        }
    }

    /// The name of table `table` in this store, prefixed: the one place a
    /// prefixed name is made.
    pub(crate) fn table_name(&self, table: &str) -> Result<TableName> {
        TableName::new(format!("{}{table}", self.table_prefix))
    }

    pub(crate) async fn ensure_table(&self, table: &TableName) -> Result<()> {
        if self.lock_ready().ready.contains(table) {
            return Ok(());
        }
        self.backend.create_table(table).await?;
        self.mark_ready(table);
        Ok(())
    }

    /// [`Self::ensure_table`] for a read: `false`, creating nothing, when
    /// this store deleted `table` (the read meets it missing).
    pub(crate) async fn ensure_table_to_read(&self, table: &TableName) -> Result<bool> {
        if self.lock_ready().deleted.contains(table) {
            return Ok(false);
        }
        self.ensure_table(table).await?;
        Ok(true)
    }

    pub(crate) fn mark_ready(&self, table: &TableName) {
        let mut tables = self.lock_ready();
        tables.deleted.remove(table);
        tables.ready.insert(table.clone());
    }

    /// Forgets that `table` exists (the store is deleting it): writes
    /// create it again, reads meet it missing until then.
    pub(crate) fn forget_ready(&self, table: &TableName) {
        let mut tables = self.lock_ready();
        tables.ready.remove(table);
        tables.deleted.insert(table.clone());
    }

    fn lock_ready(&self) -> std::sync::MutexGuard<'_, Tables> {
        // The set only caches "already created"; a poisoned lock still holds
        // a valid set.
        self.ready_tables
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[derive(Default)]
struct Tables {
    /// Created (or found), so each is created once.
    ready: HashSet<TableName>,
    /// Deleted by the store and not created since.
    deleted: HashSet<TableName>,
}
