//! The storage traits every backend implements, and the backends: two small,
//! object-safe traits that speak in stored properties, not user types.
//! [`memory`] is the embedded backend; `azure` (feature `azure`) talks to
//! Azure Storage or Azurite. [`Layer`]s see every request of any backend.
//! Every backend returns the same [`Error`] variants and service codes for
//! the same situations; the conformance suite holds them to it.

mod blob;
pub(crate) mod deadline;
pub(crate) mod delegate;
mod layer;
pub mod memory;
pub(crate) mod notes;
mod request;
mod table;
mod trace;
pub(crate) mod wire;
pub(crate) mod write_log;

#[cfg(feature = "azure")]
pub mod azure;

use std::fmt;

use async_trait::async_trait;

pub(crate) use blob::LeaseCalls;
pub use blob::{
    Blob, BlobConditions, BlobItem, BlobListPage, BlobProperties, BlobWriteMode, LeaseAction,
    LeaseDuration, LeaseId, LeaseInfo, LeaseKind, LeaseReply, LeaseState, Metadata,
};
pub use layer::Layer;
pub(crate) use layer::{Layered, Wrap};
pub(crate) use request::Target;
pub use request::{Op, Request};
pub use table::{
    Precondition, QueryPage, QuerySpec, StoredEntity, TableCreation, TableOp, Version, WriteOptions,
};
pub(crate) use table::{chunk_batches, validate_batch};
pub(crate) use trace::Tracing;

#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use crate::key::{BlobName, ContainerName, PartitionKey, RowKey, TableName};

/// Entity storage: the operations of the Table service that leasehold uses,
/// with Azure's semantics (not Azurite's where they differ).
///
/// # Errors
///
/// Beyond the errors it names, every method fails with [`Error::Transient`]
/// for a failure worth retrying (5xx, 408, a timeout, a lost connection),
/// and otherwise with [`Error::Backend`].
#[async_trait]
pub trait TableBackend: Send + Sync + fmt::Debug + 'static {
    /// `db.system.name` of the backend's request spans and metrics, such as
    /// `leasehold.memory`. Default: `other`.
    fn system_name(&self) -> &'static str {
        "other"
    }

    /// `server.address` of the backend's request spans (never with
    /// credentials). Default: none.
    fn server_address(&self) -> Option<String> {
        None
    }

    /// Creates the table unless it exists, and says which.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a name the service refuses (Azure answers
    /// `TableBeingDeleted` for a while after a table of the name was deleted).
    async fn create_table(&self, table: &TableName) -> Result<TableCreation>;

    /// Deletes the table and its entities: `false` when there was none.
    ///
    /// # Errors
    /// Only the [errors of every request](TableBackend#errors).
    async fn delete_table(&self, table: &TableName) -> Result<bool>;

    /// Every table of the account, by name, all pages read.
    ///
    /// # Errors
    /// Only the [errors of every request](TableBackend#errors).
    async fn list_tables(&self) -> Result<Vec<TableName>>;

    /// Reads one entity; `Ok(None)` when the table has no such entity.
    ///
    /// # Errors
    /// [`Error::NotFound`] (`TableNotFound`) for a missing table.
    async fn get(
        &self,
        table: &TableName,
        partition_key: &PartitionKey,
        row_key: &RowKey,
    ) -> Result<Option<StoredEntity>>;

    /// Applies one write: the new version, or `None` for a delete.
    ///
    /// # Errors
    /// [`Error::AlreadyExists`] when an insert finds the row;
    /// [`Error::NotFound`] when a conditional write finds no row (or no
    /// table); [`Error::Conflict`] for a stale ETag; [`Error::Invalid`] for an
    /// entity over a service limit (before anything is sent).
    async fn execute(
        &self,
        table: &TableName,
        op: TableOp,
        options: &WriteOptions,
    ) -> Result<Option<Version>>;

    /// Applies an entity-group transaction, all operations or none: one
    /// partition, each row once, at most [`TableOp::MAX_BATCH_OPS`] within
    /// [`TableOp::MAX_BATCH_BYTES`]. One result per operation, in order.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a batch over a limit (before anything is sent);
    /// [`Error::Batch`] with the index and error of the failing operation.
    async fn batch(&self, table: &TableName, ops: &[TableOp]) -> Result<Vec<Option<Version>>>;

    /// Reads one page of a query.
    ///
    /// # Errors
    /// [`Error::NotFound`] (`TableNotFound`) for a missing table.
    async fn query(&self, table: &TableName, query: &QuerySpec) -> Result<QueryPage>;
}

/// Blob storage with leases: the operations of the Blob service that
/// leasehold uses.
///
/// # Errors
///
/// As [`TableBackend`'s](TableBackend#errors), beyond the errors each method
/// names.
#[async_trait]
pub trait BlobBackend: Send + Sync + fmt::Debug + 'static {
    /// Where the blobs live, for messages such as [`Error::Unavailable`]:
    /// the Blob service URL (never with credentials), or a short name.
    fn endpoint(&self) -> String {
        "unnamed blob backend".to_owned()
    }

    /// Creates the container unless it exists.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a name the service refuses.
    async fn create_container(&self, container: &ContainerName) -> Result<()>;

    /// Writes a whole block blob with its metadata: the new ETag.
    ///
    /// # Errors
    /// [`Error::NotFound`] for a missing container; [`Error::AlreadyExists`]
    /// for a create-only put that finds the blob; [`Error::Conflict`] when
    /// the condition fails; [`Error::LeaseHeld`] for a leased blob and no
    /// lease id; [`Error::LeaseLost`] for a lease id that is not the active one.
    async fn put_blob(
        &self,
        container: &ContainerName,
        blob: &BlobName,
        body: Vec<u8>,
        metadata: &Metadata,
        conditions: &BlobConditions,
    ) -> Result<crate::key::ETag>;

    /// Reads a blob's body and properties; `Ok(None)` when it does not exist.
    ///
    /// # Errors
    /// [`Error::NotFound`] for a missing container.
    async fn get_blob(&self, container: &ContainerName, blob: &BlobName) -> Result<Option<Blob>>;

    /// Reads a blob's properties; `Ok(None)` when it does not exist.
    ///
    /// # Errors
    /// [`Error::NotFound`] for a missing container.
    async fn blob_properties(
        &self,
        container: &ContainerName,
        blob: &BlobName,
    ) -> Result<Option<BlobProperties>>;

    /// Replaces a blob's metadata under `conditions`: the new ETag.
    ///
    /// # Errors
    /// [`Error::NotFound`] for a missing blob; otherwise as
    /// [`BlobBackend::put_blob`].
    async fn set_blob_metadata(
        &self,
        container: &ContainerName,
        blob: &BlobName,
        metadata: &Metadata,
        conditions: &BlobConditions,
    ) -> Result<crate::key::ETag>;

    /// Deletes a blob under `conditions`.
    ///
    /// # Errors
    /// [`Error::NotFound`] for a missing blob; otherwise as
    /// [`BlobBackend::put_blob`].
    async fn delete_blob(
        &self,
        container: &ContainerName,
        blob: &BlobName,
        conditions: &BlobConditions,
    ) -> Result<()>;

    /// Lists blobs whose names start with `prefix`, a page at a time.
    ///
    /// # Errors
    /// [`Error::NotFound`] for a missing container.
    async fn list_blobs(
        &self,
        container: &ContainerName,
        prefix: &str,
        marker: Option<&str>,
    ) -> Result<BlobListPage>;

    /// One request of the Lease Blob operation, answered by the action's
    /// [`LeaseReply`].
    ///
    /// # Errors
    /// As documented on each [`LeaseAction`].
    async fn lease(
        &self,
        container: &ContainerName,
        blob: &BlobName,
        action: LeaseAction,
    ) -> Result<LeaseReply>;
}

/// A complete backend: tables and blobs.
pub trait Backend: TableBackend + BlobBackend {}

impl<T: TableBackend + BlobBackend + ?Sized> Backend for T {}
