//! [`Store`]: the entry point, owning the backend and the configuration.

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Mutex};

use crate::backend::Backend;
use crate::backend::memory::MemoryBackend;
use crate::entity::Entity;
use crate::error::Result;
use crate::key::TableName;
use crate::retry::RetryPolicy;
use crate::table::Table;

/// The entry point: a backend plus configuration. Cheap to clone; clones
/// share the backend and the record of tables already created.
///
/// ```
/// let store = leasehold::Store::memory();
/// # let _ = store;
/// ```
#[derive(Clone)]
pub struct Store {
    inner: Arc<StoreInner>,
}

struct StoreInner {
    backend: Arc<dyn Backend>,
    conflict_retry: RetryPolicy,
    table_prefix: String,
    /// Tables this store has created (or found), so each is created once.
    ready_tables: Mutex<HashSet<TableName>>,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("backend", &self.inner.backend)
            .field("conflict_retry", &self.inner.conflict_retry)
            .field("table_prefix", &self.inner.table_prefix)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// A store on a new, empty embedded [`MemoryBackend`].
    pub fn memory() -> Store {
        Store::builder(MemoryBackend::new()).build()
    }

    /// A store on any backend, with default options.
    pub fn new(backend: impl Backend) -> Store {
        Store::builder(backend).build()
    }

    /// A builder for a store on `backend`.
    pub fn builder(backend: impl Backend) -> StoreBuilder {
        Store::builder_shared(Arc::new(backend))
    }

    /// A builder for a store on a shared backend.
    pub fn builder_shared(backend: Arc<dyn Backend>) -> StoreBuilder {
        StoreBuilder {
            backend,
            conflict_retry: RetryPolicy::default(),
            table_prefix: String::new(),
        }
    }

    /// The typed table of entity type `E`.
    pub fn table<E: Entity>(&self) -> Table<E> {
        Table::new(self.clone())
    }

    /// The backend this store uses.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.inner.backend
    }

    /// How optimistic read-modify-write loops retry after a conflict.
    pub fn conflict_retry(&self) -> &RetryPolicy {
        &self.inner.conflict_retry
    }

    /// The prefix put before every table name (empty by default).
    pub fn table_prefix(&self) -> &str {
        &self.inner.table_prefix
    }

    /// Creates `table` unless this store already did.
    pub(crate) async fn ensure_table(&self, table: &TableName) -> Result<()> {
        if self.lock_ready().contains(table) {
            return Ok(());
        }
        self.inner.backend.create_table(table).await?;
        self.lock_ready().insert(table.clone());
        Ok(())
    }

    fn lock_ready(&self) -> std::sync::MutexGuard<'_, HashSet<TableName>> {
        // The set only caches "already created"; a poisoned lock still holds
        // a valid set.
        self.inner
            .ready_tables
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Configures a [`Store`].
#[derive(Debug)]
pub struct StoreBuilder {
    backend: Arc<dyn Backend>,
    conflict_retry: RetryPolicy,
    table_prefix: String,
}

impl StoreBuilder {
    /// How [`Table::update_with`] retries after a conflict (default: 10
    /// attempts, 2–200 ms jittered backoff).
    pub fn conflict_retry(mut self, policy: RetryPolicy) -> Self {
        self.conflict_retry = policy;
        self
    }

    /// Puts `prefix` before every table name, so several applications (or
    /// test runs) can share one storage account without sharing tables. The
    /// prefix must start with a letter and hold only ASCII letters and
    /// digits; prefixed names must still fit the 63-character limit, which is
    /// checked when a table is used.
    ///
    /// # Errors
    /// [`Error::Invalid`](crate::Error::Invalid) naming the prefix.
    pub fn table_prefix(mut self, prefix: impl Into<String>) -> Result<Self> {
        let prefix = prefix.into();
        let ok = prefix.len() <= 60
            && prefix
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphabetic())
            && prefix.bytes().all(|b| b.is_ascii_alphanumeric());
        if !ok {
            return Err(crate::Error::invalid(
                format!("table prefix {prefix:?}"),
                "must be 1 to 60 ASCII letters and digits, starting with a letter",
            ));
        }
        self.table_prefix = prefix;
        Ok(self)
    }

    /// Builds the store.
    pub fn build(self) -> Store {
        Store {
            inner: Arc::new(StoreInner {
                backend: self.backend,
                conflict_retry: self.conflict_retry,
                table_prefix: self.table_prefix,
                ready_tables: Mutex::new(HashSet::new()),
            }),
        }
    }
}
