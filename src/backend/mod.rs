//! The storage traits every backend implements, and the backends.
//!
//! Two small, object-safe traits: [`TableBackend`] (entities) and
//! [`BlobBackend`] (blobs and their leases). They speak in stored properties,
//! not user types, so a backend never sees a derive. [`memory`] is the
//! embedded backend; `azure` (feature `azure`) talks to Azure Storage or
//! Azurite. Layers ([`Layer`]: leasehold's own tracing and metrics, the
//! counter and fault injector of `testing` (feature `conformance`), a
//! user's) see every
//! request of any backend, as [`Request`]s.
//!
//! Every backend returns the same [`Error`](crate::Error) variants and service
//! error codes for the same situations; the conformance suite
//! (`src/testing/conformance/`, published as `testing::conformance` under
//! the `conformance` feature) holds them to it.

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

use crate::error::Result;
use crate::key::{BlobName, ContainerName, PartitionKey, RowKey, TableName};

/// Entity storage: the operations of the Table service that leasehold uses.
///
/// Semantics follow Azure (not Azurite where they differ): see the docs of
/// each method and of [`TableOp`].
///
/// # Errors
///
/// Every method fails with [`Error::Transient`](crate::Error::Transient)
/// for a failure worth retrying (5xx, 408, a timeout, a lost connection),
/// and otherwise with [`Error::Backend`](crate::Error::Backend) carrying
/// the service's status and code, beyond the errors it names.
#[async_trait]
pub trait TableBackend: Send + Sync + fmt::Debug + 'static {
    /// `db.system.name` of the backend's request spans and metrics (see
    /// [`Layer`]): `leasehold.memory`, `azure.storage`. Wrappers report
    /// the backend they wrap. Default: `other`.
    fn system_name(&self) -> &'static str {
        "other"
    }

    /// `server.address` of the backend's request spans: the Table
    /// service's host, never with credentials. Wrappers report the backend
    /// they wrap. Default: none.
    fn server_address(&self) -> Option<String> {
        None
    }

    /// Creates the table unless it exists. Succeeds in both cases, and
    /// says which.
    ///
    /// # Errors
    /// [`Error::Invalid`](crate::Error::Invalid) for a name the service refuses.
    /// [`Error::Transient`](crate::Error::Transient) for a failure worth
    /// retrying (5xx, 408, a timeout, a lost connection); otherwise
    /// [`Error::Backend`](crate::Error::Backend) with the service's status and code
    /// (Azure answers `TableBeingDeleted` for a while after a table of the
    /// name was deleted).
    async fn create_table(&self, table: &TableName) -> Result<TableCreation>;

    /// Deletes the table and every entity in it: `true` when it did,
    /// `false` when there was no such table.
    ///
    /// # Errors
    /// Only the [errors of every request](TableBackend#errors).
    async fn delete_table(&self, table: &TableName) -> Result<bool>;

    /// Every table of the account, in the service's order (by name), all
    /// pages of the listing read.
    ///
    /// # Errors
    /// Only the [errors of every request](TableBackend#errors).
    async fn list_tables(&self) -> Result<Vec<TableName>>;

    /// Reads one entity; `Ok(None)` when the table has no such entity.
    ///
    /// A missing table is [`Error::NotFound`](crate::Error::NotFound) with
    /// code `TableNotFound`.
    ///
    /// # Errors
    /// [`Error::NotFound`](crate::Error::NotFound) (`TableNotFound`) for a missing table.
    /// And the [errors of every request](TableBackend#errors).
    async fn get(
        &self,
        table: &TableName,
        partition_key: &PartitionKey,
        row_key: &RowKey,
    ) -> Result<Option<StoredEntity>>;

    /// Applies one write. Returns the new version, or `None` for a delete.
    ///
    /// # Errors
    /// By [`TableOp`]: [`Error::AlreadyExists`](crate::Error::AlreadyExists) when an insert finds the row;
    /// [`Error::NotFound`](crate::Error::NotFound) when a conditional write or delete finds no row (or
    /// no table); [`Error::Conflict`](crate::Error::Conflict) when the row's ETag is not the precondition;
    /// [`Error::Invalid`](crate::Error::Invalid) for an entity that breaks a service limit (before
    /// anything is sent).
    /// And the [errors of every request](TableBackend#errors).
    ///
    /// The operation is handed over by value (a backend that keeps the
    /// entity moves it rather than copying it); `options` say what else
    /// goes with it, such as the write log that settles the write if its
    /// reply is lost ([`WriteOptions::write_log`]).
    async fn execute(
        &self,
        table: &TableName,
        op: TableOp,
        options: &WriteOptions,
    ) -> Result<Option<Version>>;

    /// Applies an entity-group transaction: all operations or none.
    ///
    /// Operations must share one partition, touch each row at most once, and
    /// number at most [`TableOp::MAX_BATCH_OPS`] within
    /// [`TableOp::MAX_BATCH_BYTES`]; breaking a
    /// limit is [`Error::Invalid`](crate::Error::Invalid) before anything is
    /// sent. A failing operation is [`Error::Batch`](crate::Error::Batch) with
    /// its index. Returns one result per operation, in order.
    ///
    /// # Errors
    /// [`Error::Invalid`](crate::Error::Invalid) for a batch that breaks a limit (before anything is
    /// sent); [`Error::Batch`](crate::Error::Batch) with the index and error of the operation that
    /// failed (nothing applied).
    /// And the [errors of every request](TableBackend#errors).
    async fn batch(&self, table: &TableName, ops: &[TableOp]) -> Result<Vec<Option<Version>>>;

    /// Reads one page of a query.
    ///
    /// # Errors
    /// [`Error::NotFound`](crate::Error::NotFound) (`TableNotFound`) for a missing table.
    /// And the [errors of every request](TableBackend#errors).
    async fn query(&self, table: &TableName, query: &QuerySpec) -> Result<QueryPage>;
}

/// Blob storage with leases: the operations of the Blob service that
/// leasehold uses.
///
/// # Errors
///
/// Every method fails with [`Error::Transient`](crate::Error::Transient)
/// for a failure worth retrying (5xx, 408, a timeout, a lost connection),
/// and otherwise with [`Error::Backend`](crate::Error::Backend) carrying
/// the service's status and code, beyond the errors it names.
#[async_trait]
pub trait BlobBackend: Send + Sync + fmt::Debug + 'static {
    /// Where the blobs live, for error messages such as
    /// [`Error::Unavailable`](crate::Error::Unavailable): the Blob service
    /// URL (never with credentials or a signature), or a short name such as
    /// `memory`. Wrappers report the backend they wrap. Default:
    /// `unnamed blob backend`.
    fn endpoint(&self) -> String {
        "unnamed blob backend".to_owned()
    }

    /// Creates the container unless it exists. Succeeds in both cases.
    ///
    /// # Errors
    /// [`Error::Invalid`](crate::Error::Invalid) for a name the service refuses.
    /// And the [errors of every request](BlobBackend#errors).
    async fn create_container(&self, container: &ContainerName) -> Result<()>;

    /// Writes a whole block blob with its metadata, under `conditions`.
    /// Returns the new ETag.
    ///
    /// # Errors
    /// [`Error::NotFound`](crate::Error::NotFound) for a missing container; [`Error::AlreadyExists`](crate::Error::AlreadyExists) for a
    /// create-only write that finds the blob; [`Error::Conflict`](crate::Error::Conflict) when `If-Match`
    /// fails; [`Error::LeaseHeld`](crate::Error::LeaseHeld) when the blob is leased and no lease id was
    /// given; [`Error::LeaseLost`](crate::Error::LeaseLost) when the lease id given is not the blob's
    /// active lease.
    /// And the [errors of every request](BlobBackend#errors).
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
    /// [`Error::NotFound`](crate::Error::NotFound) for a missing container.
    /// And the [errors of every request](BlobBackend#errors).
    async fn get_blob(&self, container: &ContainerName, blob: &BlobName) -> Result<Option<Blob>>;

    /// Reads a blob's properties (ETag, metadata, lease); `Ok(None)` when it
    /// does not exist.
    ///
    /// # Errors
    /// [`Error::NotFound`](crate::Error::NotFound) for a missing container.
    /// And the [errors of every request](BlobBackend#errors).
    async fn blob_properties(
        &self,
        container: &ContainerName,
        blob: &BlobName,
    ) -> Result<Option<BlobProperties>>;

    /// Replaces a blob's metadata under `conditions`. Returns the new ETag.
    ///
    /// # Errors
    /// [`Error::NotFound`](crate::Error::NotFound) for a missing blob or container; otherwise as
    /// [`BlobBackend::put_blob`] for the conditions.
    /// And the [errors of every request](BlobBackend#errors).
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
    /// [`Error::NotFound`](crate::Error::NotFound) for a missing blob or container; otherwise as
    /// [`BlobBackend::put_blob`] for the conditions.
    /// And the [errors of every request](BlobBackend#errors).
    async fn delete_blob(
        &self,
        container: &ContainerName,
        blob: &BlobName,
        conditions: &BlobConditions,
    ) -> Result<()>;

    /// Lists blobs whose names start with `prefix`, a page at a time.
    ///
    /// # Errors
    /// [`Error::NotFound`](crate::Error::NotFound) for a missing container.
    /// And the [errors of every request](BlobBackend#errors).
    async fn list_blobs(
        &self,
        container: &ContainerName,
        prefix: &str,
        marker: Option<&str>,
    ) -> Result<BlobListPage>;

    /// Acquires, renews, changes, releases or breaks the blob's lease: one
    /// request of the Lease Blob operation, answered by the
    /// [`LeaseReply`] of the action.
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
