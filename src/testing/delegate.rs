//! One delegation of both backend traits, shared by every wrapper: each
//! request goes through the wrapper's `call(op, future)`.
//!
//! Every method is forwarded, provided ones too (`endpoint`), so a store on a wrapper takes the same path as on the
//! wrapped backend. The impls deny `clippy::missing_trait_methods`: a
//! method added to a trait with a default body is a lint error here until it
//! is forwarded.

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
                    $crate::testing::Op::CreateTable,
                    self.inner.create_table(table),
                )
                .await
            }
            async fn delete_table(&self, table: &$crate::key::TableName) -> $crate::Result<bool> {
                self.call(
                    $crate::testing::Op::DeleteTable,
                    self.inner.delete_table(table),
                )
                .await
            }
            async fn list_tables(&self) -> $crate::Result<Vec<$crate::key::TableName>> {
                self.call($crate::testing::Op::ListTables, self.inner.list_tables())
                    .await
            }
            async fn get(
                &self,
                table: &$crate::key::TableName,
                partition_key: &$crate::key::PartitionKey,
                row_key: &$crate::key::RowKey,
            ) -> $crate::Result<Option<$crate::backend::StoredEntity>> {
                self.call(
                    $crate::testing::Op::Get,
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
                    $crate::testing::Op::Write,
                    self.inner.execute(table, op, options),
                )
                .await
            }
            async fn batch(
                &self,
                table: &$crate::key::TableName,
                ops: &[$crate::backend::TableOp],
            ) -> $crate::Result<Vec<Option<$crate::backend::Version>>> {
                self.call($crate::testing::Op::Batch, self.inner.batch(table, ops))
                    .await
            }
            async fn query(
                &self,
                table: &$crate::key::TableName,
                query: &$crate::backend::QuerySpec,
            ) -> $crate::Result<$crate::backend::QueryPage> {
                self.call($crate::testing::Op::Query, self.inner.query(table, query))
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
                    $crate::testing::Op::CreateContainer,
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
                    $crate::testing::Op::PutBlob,
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
                    $crate::testing::Op::GetBlob,
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
                    $crate::testing::Op::BlobProperties,
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
                    $crate::testing::Op::SetBlobMetadata,
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
                    $crate::testing::Op::DeleteBlob,
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
                    $crate::testing::Op::ListBlobs,
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
                    $crate::testing::Op::AcquireLease,
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
                    $crate::testing::Op::RenewLease,
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
                    $crate::testing::Op::ChangeLease,
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
                    $crate::testing::Op::ReleaseLease,
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
                    $crate::testing::Op::BreakLease,
                    self.inner.break_lease(container, blob, period),
                )
                .await
            }
        }
    };
}

pub(crate) use delegate_backend;
