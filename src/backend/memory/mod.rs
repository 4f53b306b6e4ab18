//! The embedded backend: a faithful in-memory Table and Blob service.
//!
//! [`MemoryBackend`] is not a mock: it enforces the rules and returns the
//! errors and codes of Azure Storage (not Azurite's, where more lenient).
//! Leases run on [`tokio::time::Instant`], so tests can pause time.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! use leasehold::backend::memory::MemoryBackend;
//! use leasehold::backend::{TableBackend, TableOp, WriteOptions};
//! use leasehold::entity::{EntityData, Properties, Value};
//! use leasehold::{PartitionKey, RowKey, TableName};
//!
//! let backend = MemoryBackend::new();
//! let table = TableName::new("Accounts")?;
//! backend.create_table(&table).await?;
//! let mut properties = Properties::new();
//! properties.insert("balance", Value::Int64(10));
//! let data = EntityData {
//!     partition_key: PartitionKey::new("alice")?,
//!     row_key: RowKey::new("savings")?,
//!     properties,
//! };
//! let version = backend
//!     .execute(&table, TableOp::Insert(data.clone()), &WriteOptions::new())
//!     .await?;
//! let stored = backend.get(&table, &data.partition_key, &data.row_key).await?;
//! assert_eq!(stored.map(|s| s.etag), version.map(|v| v.etag));
//! # Ok::<(), leasehold::Error>(()) }).unwrap();
//! ```

mod blobs;
mod clock;
mod leases;
mod tables;

#[cfg(test)]
mod blob_tests;
#[cfg(test)]
mod lease_tests;
#[cfg(test)]
mod table_tests;

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use tokio::time::Instant;

use self::blobs::{BlobStore, BlobWrite};
use self::clock::WriteClock;
use self::tables::TableStore;
use crate::backend::WriteOptions;
use crate::backend::{
    Blob, BlobBackend, BlobConditions, BlobListPage, BlobProperties, LeaseAction, LeaseReply,
    Metadata, QueryPage, QuerySpec, StoredEntity, TableBackend, TableCreation, TableOp, Version,
};
use crate::error::Result;
use crate::key::{BlobName, ContainerName, ETag, PartitionKey, RowKey, TableName};

/// An in-memory Table and Blob service with Azure's semantics. Clones share
/// one storage, like several clients of one account.
#[derive(Clone)]
pub struct MemoryBackend {
    inner: Arc<Inner>,
}

struct Inner {
    options: MemoryBackendBuilder,
    clock: WriteClock,
    tables: Mutex<TableStore>,
    blobs: Mutex<BlobStore>,
}

/// Options for a [`MemoryBackend`].
#[derive(Debug, Clone)]
#[must_use = "a MemoryBackendBuilder does nothing until `build()`"]
pub struct MemoryBackendBuilder {
    scan_limit: usize,
    blob_page_size: usize,
}

impl MemoryBackendBuilder {
    /// How many entities one query page may examine before it ends, full or
    /// not (at least 1; default: no limit): pages that end early, even
    /// empty, as the service's do, test that callers follow continuations.
    pub fn scan_limit(mut self, entities: usize) -> Self {
        self.scan_limit = entities.max(1);
        self
    }

    /// How many blobs one listing page holds at most (at least 1; default
    /// [`MemoryBackend::DEFAULT_BLOB_PAGE_SIZE`]).
    pub fn blob_page_size(mut self, blobs: usize) -> Self {
        self.blob_page_size = blobs.max(1);
        self
    }

    /// Builds an empty backend with these options.
    pub fn build(self) -> MemoryBackend {
        MemoryBackend {
            inner: Arc::new(Inner {
                options: self,
                clock: WriteClock::new(),
                tables: Mutex::new(TableStore::default()),
                blobs: Mutex::new(BlobStore::default()),
            }),
        }
    }
}

impl Default for MemoryBackendBuilder {
    fn default() -> Self {
        MemoryBackendBuilder {
            scan_limit: MemoryBackend::DEFAULT_SCAN_LIMIT,
            blob_page_size: MemoryBackend::DEFAULT_BLOB_PAGE_SIZE,
        }
    }
}

/// Locks a store, recovering a poisoned lock: every change is checked
/// before it is made, so the data stays consistent.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl MemoryBackend {
    /// The default per-page scan budget: no limit.
    pub const DEFAULT_SCAN_LIMIT: usize = usize::MAX;

    /// The default number of blobs in one listing page (the service's).
    pub const DEFAULT_BLOB_PAGE_SIZE: usize = 5000;

    /// An empty backend with default options.
    pub fn new() -> Self {
        Self::builder().build()
    }

    /// A builder for a backend with other options.
    pub fn builder() -> MemoryBackendBuilder {
        MemoryBackendBuilder::default()
    }

    fn tables(&self) -> MutexGuard<'_, TableStore> {
        lock(&self.inner.tables)
    }

    fn blobs(&self) -> MutexGuard<'_, BlobStore> {
        lock(&self.inner.blobs)
    }

    fn write_blob(
        &self,
        container: &ContainerName,
        blob: &BlobName,
        conditions: &BlobConditions,
        write: BlobWrite<'_>,
    ) -> Result<ETag> {
        let (clock, now) = (&self.inner.clock, Instant::now());
        self.blobs()
            .write(clock, now, container, blob, conditions, write)
    }
}

impl Default for MemoryBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for MemoryBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tables = self.tables().table_count();
        let containers = self.blobs().container_count();
        f.debug_struct("MemoryBackend")
            .field("tables", &tables)
            .field("containers", &containers)
            .field("scan_limit", &self.inner.options.scan_limit)
            .field("blob_page_size", &self.inner.options.blob_page_size)
            .finish()
    }
}

#[async_trait]
impl TableBackend for MemoryBackend {
    fn system_name(&self) -> &'static str {
        "leasehold.memory"
    }

    async fn create_table(&self, table: &TableName) -> Result<TableCreation> {
        Ok(self.tables().create_table(table))
    }

    async fn delete_table(&self, table: &TableName) -> Result<bool> {
        Ok(self.tables().delete_table(table))
    }

    async fn list_tables(&self) -> Result<Vec<TableName>> {
        Ok(self.tables().list_tables())
    }

    async fn get(
        &self,
        table: &TableName,
        partition_key: &PartitionKey,
        row_key: &RowKey,
    ) -> Result<Option<StoredEntity>> {
        self.tables().get(table, partition_key, row_key)
    }

    /// The memory backend never loses a reply: the write log is not needed.
    async fn execute(
        &self,
        table: &TableName,
        op: TableOp,
        _: &WriteOptions,
    ) -> Result<Option<Version>> {
        crate::backend::deadline::check()?;
        self.tables().execute(&self.inner.clock, table, op)
    }

    async fn batch(&self, table: &TableName, ops: &[TableOp]) -> Result<Vec<Option<Version>>> {
        crate::backend::deadline::check()?;
        self.tables().batch(&self.inner.clock, table, ops)
    }

    async fn query(&self, table: &TableName, query: &QuerySpec) -> Result<QueryPage> {
        self.tables()
            .query(table, query, self.inner.options.scan_limit)
    }
}

#[async_trait]
impl BlobBackend for MemoryBackend {
    fn endpoint(&self) -> String {
        "memory".to_owned()
    }

    async fn create_container(&self, container: &ContainerName) -> Result<()> {
        self.blobs().create_container(container);
        Ok(())
    }

    async fn put_blob(
        &self,
        container: &ContainerName,
        blob: &BlobName,
        body: Vec<u8>,
        metadata: &Metadata,
        conditions: &BlobConditions,
    ) -> Result<ETag> {
        let write = BlobWrite::Put(body, metadata);
        self.write_blob(container, blob, conditions, write)
    }

    async fn get_blob(&self, container: &ContainerName, blob: &BlobName) -> Result<Option<Blob>> {
        let blobs = self.blobs();
        let read = blobs.read(Instant::now(), container, blob)?;
        Ok(read.map(|(body, properties)| Blob {
            body: body.to_vec(),
            properties,
        }))
    }

    async fn blob_properties(
        &self,
        container: &ContainerName,
        blob: &BlobName,
    ) -> Result<Option<BlobProperties>> {
        let blobs = self.blobs();
        let read = blobs.read(Instant::now(), container, blob)?;
        Ok(read.map(|(_, properties)| properties))
    }

    async fn set_blob_metadata(
        &self,
        container: &ContainerName,
        blob: &BlobName,
        metadata: &Metadata,
        conditions: &BlobConditions,
    ) -> Result<ETag> {
        let write = BlobWrite::SetMetadata(metadata);
        self.write_blob(container, blob, conditions, write)
    }

    async fn delete_blob(
        &self,
        container: &ContainerName,
        blob: &BlobName,
        conditions: &BlobConditions,
    ) -> Result<()> {
        self.write_blob(container, blob, conditions, BlobWrite::Delete)
            .map(drop)
    }

    async fn list_blobs(
        &self,
        container: &ContainerName,
        prefix: &str,
        marker: Option<&str>,
    ) -> Result<BlobListPage> {
        self.blobs().list_blobs(
            Instant::now(),
            container,
            prefix,
            marker,
            self.inner.options.blob_page_size,
        )
    }

    async fn lease(
        &self,
        container: &ContainerName,
        blob: &BlobName,
        action: LeaseAction,
    ) -> Result<LeaseReply> {
        self.blobs().lease(Instant::now(), container, blob, action)
    }
}
