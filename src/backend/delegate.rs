//! One delegation of both backend traits, shared by every wrapper: each
//! request goes through the wrapper's `call(op, future)`, [`Op`] saying
//! which request it is (public as `leasehold::testing::Op`).
//!
//! Every method is forwarded, provided ones too (`endpoint`), so a store on a wrapper takes the same path as on the
//! wrapped backend. The impls deny `clippy::missing_trait_methods`: a
//! method added to a trait with a default body is a lint error here until it
//! is forwarded.

/// The kind of a backend request, as wrappers see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// [`TableBackend::create_table`](crate::backend::TableBackend::create_table)
    CreateTable,
    /// [`TableBackend::delete_table`](crate::backend::TableBackend::delete_table)
    DeleteTable,
    /// [`TableBackend::list_tables`](crate::backend::TableBackend::list_tables)
    ListTables,
    /// [`TableBackend::get`](crate::backend::TableBackend::get)
    Get,
    /// [`TableBackend::execute`](crate::backend::TableBackend::execute):
    /// insert, replace, merge, upsert or delete.
    Write,
    /// [`TableBackend::batch`](crate::backend::TableBackend::batch)
    Batch,
    /// [`TableBackend::query`](crate::backend::TableBackend::query)
    Query,
    /// [`BlobBackend::create_container`](crate::backend::BlobBackend::create_container)
    CreateContainer,
    /// [`BlobBackend::put_blob`](crate::backend::BlobBackend::put_blob)
    PutBlob,
    /// [`BlobBackend::get_blob`](crate::backend::BlobBackend::get_blob)
    GetBlob,
    /// [`BlobBackend::blob_properties`](crate::backend::BlobBackend::blob_properties)
    BlobProperties,
    /// [`BlobBackend::set_blob_metadata`](crate::backend::BlobBackend::set_blob_metadata)
    SetBlobMetadata,
    /// [`BlobBackend::delete_blob`](crate::backend::BlobBackend::delete_blob)
    DeleteBlob,
    /// [`BlobBackend::list_blobs`](crate::backend::BlobBackend::list_blobs)
    ListBlobs,
    /// [`BlobBackend::acquire_lease`](crate::backend::BlobBackend::acquire_lease)
    AcquireLease,
    /// [`BlobBackend::renew_lease`](crate::backend::BlobBackend::renew_lease)
    RenewLease,
    /// [`BlobBackend::change_lease`](crate::backend::BlobBackend::change_lease)
    ChangeLease,
    /// [`BlobBackend::release_lease`](crate::backend::BlobBackend::release_lease)
    ReleaseLease,
    /// [`BlobBackend::break_lease`](crate::backend::BlobBackend::break_lease)
    BreakLease,
}

impl Op {
    /// Whether this is one-time setup (creating a table or container) rather
    /// than work.
    pub fn is_setup(self) -> bool {
        matches!(self, Op::CreateTable | Op::CreateContainer)
    }

    /// The request's name in metrics (`db.operation.name`).
    #[cfg_attr(not(feature = "opentelemetry"), allow(dead_code))]
    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::CreateTable => "create_table",
            Op::DeleteTable => "delete_table",
            Op::ListTables => "list_tables",
            Op::Get => "get",
            Op::Write => "write",
            Op::Batch => "batch",
            Op::Query => "query",
            Op::CreateContainer => "create_container",
            Op::PutBlob => "put_blob",
            Op::GetBlob => "get_blob",
            Op::BlobProperties => "blob_properties",
            Op::SetBlobMetadata => "set_blob_metadata",
            Op::DeleteBlob => "delete_blob",
            Op::ListBlobs => "list_blobs",
            Op::AcquireLease => "acquire_lease",
            Op::RenewLease => "renew_lease",
            Op::ChangeLease => "change_lease",
            Op::ReleaseLease => "release_lease",
            Op::BreakLease => "break_lease",
        }
    }
}

/// Implements [`TableBackend`](crate::backend::TableBackend) and
/// [`BlobBackend`](crate::backend::BlobBackend) for a wrapper type with an
/// `inner: B` field and an inherent
/// `async fn call<T>(&self, op: Op, fut: impl Future<Output = Result<T>>) -> Result<T>`.
macro_rules! delegate_backend {
    ($wrapper:ident) => {
        #[deny(clippy::missing_trait_methods)]
        #[async_trait::async_trait]
        impl<B: $crate::backend::TableBackend> $crate::backend::TableBackend for $wrapper<B> {
            async fn create_table(
                &self,
                table: &$crate::key::TableName,
            ) -> $crate::Result<$crate::backend::TableCreation> {
                self.call(
                    $crate::backend::delegate::Op::CreateTable,
                    self.inner.create_table(table),
                )
                .await
            }
            async fn delete_table(&self, table: &$crate::key::TableName) -> $crate::Result<bool> {
                self.call(
                    $crate::backend::delegate::Op::DeleteTable,
                    self.inner.delete_table(table),
                )
                .await
            }
            async fn list_tables(&self) -> $crate::Result<Vec<$crate::key::TableName>> {
                self.call(
                    $crate::backend::delegate::Op::ListTables,
                    self.inner.list_tables(),
                )
                .await
            }
            async fn get(
                &self,
                table: &$crate::key::TableName,
                partition_key: &$crate::key::PartitionKey,
                row_key: &$crate::key::RowKey,
            ) -> $crate::Result<Option<$crate::backend::StoredEntity>> {
                self.call(
                    $crate::backend::delegate::Op::Get,
                    self.inner.get(table, partition_key, row_key),
                )
                .await
            }
            async fn execute(
                &self,
                table: &$crate::key::TableName,
                op: $crate::backend::TableOp,
                options: &$crate::backend::WriteOptions,
            ) -> $crate::Result<Option<$crate::backend::Version>> {
                self.call(
                    $crate::backend::delegate::Op::Write,
                    self.inner.execute(table, op, options),
                )
                .await
            }
            async fn batch(
                &self,
                table: &$crate::key::TableName,
                ops: &[$crate::backend::TableOp],
            ) -> $crate::Result<Vec<Option<$crate::backend::Version>>> {
                self.call(
                    $crate::backend::delegate::Op::Batch,
                    self.inner.batch(table, ops),
                )
                .await
            }
            async fn query(
                &self,
                table: &$crate::key::TableName,
                query: &$crate::backend::QuerySpec,
            ) -> $crate::Result<$crate::backend::QueryPage> {
                self.call(
                    $crate::backend::delegate::Op::Query,
                    self.inner.query(table, query),
                )
                .await
            }
        }

        #[deny(clippy::missing_trait_methods)]
        #[async_trait::async_trait]
        impl<B: $crate::backend::BlobBackend> $crate::backend::BlobBackend for $wrapper<B> {
            fn endpoint(&self) -> String {
                self.inner.endpoint()
            }
            async fn create_container(
                &self,
                container: &$crate::key::ContainerName,
            ) -> $crate::Result<()> {
                self.call(
                    $crate::backend::delegate::Op::CreateContainer,
                    self.inner.create_container(container),
                )
                .await
            }
            async fn put_blob(
                &self,
                container: &$crate::key::ContainerName,
                blob: &$crate::key::BlobName,
                body: Vec<u8>,
                metadata: &$crate::backend::Metadata,
                conditions: &$crate::backend::BlobConditions,
            ) -> $crate::Result<$crate::key::ETag> {
                self.call(
                    $crate::backend::delegate::Op::PutBlob,
                    self.inner
                        .put_blob(container, blob, body, metadata, conditions),
                )
                .await
            }
            async fn get_blob(
                &self,
                container: &$crate::key::ContainerName,
                blob: &$crate::key::BlobName,
            ) -> $crate::Result<Option<$crate::backend::Blob>> {
                self.call(
                    $crate::backend::delegate::Op::GetBlob,
                    self.inner.get_blob(container, blob),
                )
                .await
            }
            async fn blob_properties(
                &self,
                container: &$crate::key::ContainerName,
                blob: &$crate::key::BlobName,
            ) -> $crate::Result<Option<$crate::backend::BlobProperties>> {
                self.call(
                    $crate::backend::delegate::Op::BlobProperties,
                    self.inner.blob_properties(container, blob),
                )
                .await
            }
            async fn set_blob_metadata(
                &self,
                container: &$crate::key::ContainerName,
                blob: &$crate::key::BlobName,
                metadata: &$crate::backend::Metadata,
                conditions: &$crate::backend::BlobConditions,
            ) -> $crate::Result<$crate::key::ETag> {
                self.call(
                    $crate::backend::delegate::Op::SetBlobMetadata,
                    self.inner
                        .set_blob_metadata(container, blob, metadata, conditions),
                )
                .await
            }
            async fn delete_blob(
                &self,
                container: &$crate::key::ContainerName,
                blob: &$crate::key::BlobName,
                conditions: &$crate::backend::BlobConditions,
            ) -> $crate::Result<()> {
                self.call(
                    $crate::backend::delegate::Op::DeleteBlob,
                    self.inner.delete_blob(container, blob, conditions),
                )
                .await
            }
            async fn list_blobs(
                &self,
                container: &$crate::key::ContainerName,
                prefix: &str,
                marker: Option<&str>,
            ) -> $crate::Result<$crate::backend::BlobListPage> {
                self.call(
                    $crate::backend::delegate::Op::ListBlobs,
                    self.inner.list_blobs(container, prefix, marker),
                )
                .await
            }
            async fn acquire_lease(
                &self,
                container: &$crate::key::ContainerName,
                blob: &$crate::key::BlobName,
                duration: $crate::backend::LeaseDuration,
                proposed_id: $crate::backend::LeaseId,
            ) -> $crate::Result<$crate::backend::AcquiredLease> {
                self.call(
                    $crate::backend::delegate::Op::AcquireLease,
                    self.inner
                        .acquire_lease(container, blob, duration, proposed_id),
                )
                .await
            }
            async fn renew_lease(
                &self,
                container: &$crate::key::ContainerName,
                blob: &$crate::key::BlobName,
                id: $crate::backend::LeaseId,
            ) -> $crate::Result<()> {
                self.call(
                    $crate::backend::delegate::Op::RenewLease,
                    self.inner.renew_lease(container, blob, id),
                )
                .await
            }
            async fn change_lease(
                &self,
                container: &$crate::key::ContainerName,
                blob: &$crate::key::BlobName,
                id: $crate::backend::LeaseId,
                proposed_id: $crate::backend::LeaseId,
            ) -> $crate::Result<$crate::backend::LeaseId> {
                self.call(
                    $crate::backend::delegate::Op::ChangeLease,
                    self.inner.change_lease(container, blob, id, proposed_id),
                )
                .await
            }
            async fn release_lease(
                &self,
                container: &$crate::key::ContainerName,
                blob: &$crate::key::BlobName,
                id: $crate::backend::LeaseId,
            ) -> $crate::Result<()> {
                self.call(
                    $crate::backend::delegate::Op::ReleaseLease,
                    self.inner.release_lease(container, blob, id),
                )
                .await
            }
            async fn break_lease(
                &self,
                container: &$crate::key::ContainerName,
                blob: &$crate::key::BlobName,
                period: Option<std::time::Duration>,
            ) -> $crate::Result<std::time::Duration> {
                self.call(
                    $crate::backend::delegate::Op::BreakLease,
                    self.inner.break_lease(container, blob, period),
                )
                .await
            }
        }
    };
}

pub(crate) use delegate_backend;
