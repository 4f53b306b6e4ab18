//! The backend traits through `Arc` and `Box`: a shared or boxed backend
//! (`Arc<dyn Backend>`, `Box<MemoryBackend>`, ...) is a backend itself, so
//! wrappers and tests take one without a hand-written delegating impl.
//!
//! Every method is forwarded, provided ones too: the impls deny
//! `clippy::missing_trait_methods`, so a method added to a trait with a
//! default body is a lint error here until it is forwarded, rather than a
//! silent fall-back to the default.

use std::sync::Arc;

/// Implements [`TableBackend`](crate::backend::TableBackend) and
/// [`BlobBackend`](crate::backend::BlobBackend) for a smart pointer
/// `$ptr<T>` that derefs to the backend `T`.
macro_rules! forward_through {
    ($ptr:ident) => {
        #[deny(clippy::missing_trait_methods)]
        #[async_trait::async_trait]
        impl<T: $crate::backend::TableBackend + ?Sized> $crate::backend::TableBackend for $ptr<T> {
            async fn create_table(
                &self,
                table: &$crate::key::TableName,
            ) -> $crate::Result<$crate::backend::TableCreation> {
                (**self).create_table(table).await
            }
            async fn delete_table(&self, table: &$crate::key::TableName) -> $crate::Result<bool> {
                (**self).delete_table(table).await
            }
            async fn list_tables(&self) -> $crate::Result<Vec<$crate::key::TableName>> {
                (**self).list_tables().await
            }
            async fn get(
                &self,
                table: &$crate::key::TableName,
                partition_key: &$crate::key::PartitionKey,
                row_key: &$crate::key::RowKey,
            ) -> $crate::Result<Option<$crate::backend::StoredEntity>> {
                (**self).get(table, partition_key, row_key).await
            }
            async fn execute(
                &self,
                table: &$crate::key::TableName,
                op: $crate::backend::TableOp,
                options: &$crate::backend::WriteOptions,
            ) -> $crate::Result<Option<$crate::backend::Version>> {
                (**self).execute(table, op, options).await
            }
            async fn batch(
                &self,
                table: &$crate::key::TableName,
                ops: &[$crate::backend::TableOp],
            ) -> $crate::Result<Vec<Option<$crate::backend::Version>>> {
                (**self).batch(table, ops).await
            }
            async fn query(
                &self,
                table: &$crate::key::TableName,
                query: &$crate::backend::QuerySpec,
            ) -> $crate::Result<$crate::backend::QueryPage> {
                (**self).query(table, query).await
            }
        }

        #[deny(clippy::missing_trait_methods)]
        #[async_trait::async_trait]
        impl<T: $crate::backend::BlobBackend + ?Sized> $crate::backend::BlobBackend for $ptr<T> {
            fn endpoint(&self) -> String {
                (**self).endpoint()
            }
            async fn create_container(
                &self,
                container: &$crate::key::ContainerName,
            ) -> $crate::Result<()> {
                (**self).create_container(container).await
            }
            async fn put_blob(
                &self,
                container: &$crate::key::ContainerName,
                blob: &$crate::key::BlobName,
                body: Vec<u8>,
                metadata: &$crate::backend::Metadata,
                conditions: &$crate::backend::BlobConditions,
            ) -> $crate::Result<$crate::key::ETag> {
                (**self)
                    .put_blob(container, blob, body, metadata, conditions)
                    .await
            }
            async fn get_blob(
                &self,
                container: &$crate::key::ContainerName,
                blob: &$crate::key::BlobName,
            ) -> $crate::Result<Option<$crate::backend::Blob>> {
                (**self).get_blob(container, blob).await
            }
            async fn blob_properties(
                &self,
                container: &$crate::key::ContainerName,
                blob: &$crate::key::BlobName,
            ) -> $crate::Result<Option<$crate::backend::BlobProperties>> {
                (**self).blob_properties(container, blob).await
            }
            async fn set_blob_metadata(
                &self,
                container: &$crate::key::ContainerName,
                blob: &$crate::key::BlobName,
                metadata: &$crate::backend::Metadata,
                conditions: &$crate::backend::BlobConditions,
            ) -> $crate::Result<$crate::key::ETag> {
                (**self)
                    .set_blob_metadata(container, blob, metadata, conditions)
                    .await
            }
            async fn delete_blob(
                &self,
                container: &$crate::key::ContainerName,
                blob: &$crate::key::BlobName,
                conditions: &$crate::backend::BlobConditions,
            ) -> $crate::Result<()> {
                (**self).delete_blob(container, blob, conditions).await
            }
            async fn list_blobs(
                &self,
                container: &$crate::key::ContainerName,
                prefix: &str,
                marker: Option<&str>,
            ) -> $crate::Result<$crate::backend::BlobListPage> {
                (**self).list_blobs(container, prefix, marker).await
            }
            async fn acquire_lease(
                &self,
                container: &$crate::key::ContainerName,
                blob: &$crate::key::BlobName,
                duration: $crate::backend::LeaseDuration,
                proposed_id: $crate::backend::LeaseId,
            ) -> $crate::Result<$crate::backend::AcquiredLease> {
                (**self)
                    .acquire_lease(container, blob, duration, proposed_id)
                    .await
            }
            async fn renew_lease(
                &self,
                container: &$crate::key::ContainerName,
                blob: &$crate::key::BlobName,
                id: $crate::backend::LeaseId,
            ) -> $crate::Result<()> {
                (**self).renew_lease(container, blob, id).await
            }
            async fn change_lease(
                &self,
                container: &$crate::key::ContainerName,
                blob: &$crate::key::BlobName,
                id: $crate::backend::LeaseId,
                proposed_id: $crate::backend::LeaseId,
            ) -> $crate::Result<$crate::backend::LeaseId> {
                (**self)
                    .change_lease(container, blob, id, proposed_id)
                    .await
            }
            async fn release_lease(
                &self,
                container: &$crate::key::ContainerName,
                blob: &$crate::key::BlobName,
                id: $crate::backend::LeaseId,
            ) -> $crate::Result<()> {
                (**self).release_lease(container, blob, id).await
            }
            async fn break_lease(
                &self,
                container: &$crate::key::ContainerName,
                blob: &$crate::key::BlobName,
                period: Option<std::time::Duration>,
            ) -> $crate::Result<std::time::Duration> {
                (**self).break_lease(container, blob, period).await
            }
        }
    };
}

forward_through!(Arc);
forward_through!(Box);

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use async_trait::async_trait;

    use crate::backend::WriteOptions;
    use crate::backend::memory::MemoryBackend;
    use crate::backend::{
        Backend, QueryPage, QuerySpec, StoredEntity, TableBackend, TableCreation, TableOp, Version,
    };
    use crate::entity::{EntityData, Properties};
    use crate::error::{Error, Result};
    use crate::key::{PartitionKey, RowKey, TableName};
    use crate::testing::{CountingBackend, FaultyBackend, Op};

    fn is_backend<B: Backend>() {}

    #[test]
    fn shared_and_boxed_backends_are_backends() {
        is_backend::<Arc<dyn Backend>>();
        is_backend::<Box<dyn Backend>>();
        is_backend::<Arc<MemoryBackend>>();
        is_backend::<Box<Arc<MemoryBackend>>>();
        is_backend::<CountingBackend<FaultyBackend<Arc<dyn Backend>>>>();
    }

    /// Takes only writes that keep a write log.
    #[derive(Debug)]
    struct LoggedOnly;

    #[async_trait]
    impl TableBackend for LoggedOnly {
        async fn create_table(&self, _: &TableName) -> Result<TableCreation> {
            Ok(TableCreation::AlreadyExisted)
        }
        async fn delete_table(&self, _: &TableName) -> Result<bool> {
            Ok(false)
        }
        async fn list_tables(&self) -> Result<Vec<TableName>> {
            Ok(Vec::new())
        }
        async fn get(
            &self,
            _: &TableName,
            _: &PartitionKey,
            _: &RowKey,
        ) -> Result<Option<StoredEntity>> {
            Ok(None)
        }
        async fn execute(
            &self,
            _: &TableName,
            _: TableOp,
            options: &WriteOptions,
        ) -> Result<Option<Version>> {
            match options.write_log() {
                Some(_) => Ok(None),
                None => Err(Error::invalid("write", "the options were lost on the way")),
            }
        }
        async fn batch(&self, _: &TableName, _: &[TableOp]) -> Result<Vec<Option<Version>>> {
            Ok(Vec::new())
        }
        async fn query(&self, _: &TableName, _: &QuerySpec) -> Result<QueryPage> {
            Err(Error::invalid("query", "not used"))
        }
    }

    /// Pointers and wrappers hand a write's options on.
    #[tokio::test]
    async fn write_options_are_forwarded_through_every_layer() {
        let shared: Arc<dyn TableBackend> = Arc::new(Box::new(LoggedOnly));
        let counting = CountingBackend::new(FaultyBackend::new(Box::new(shared)));
        let counter = counting.counter();
        let table = TableName::new("Checked").unwrap();
        let data = EntityData {
            partition_key: PartitionKey::new("p").unwrap(),
            row_key: RowKey::new("r").unwrap(),
            properties: Properties::new(),
        };
        counting
            .execute(
                &table,
                TableOp::Insert(data),
                &WriteOptions::new().with_write_log(),
            )
            .await
            .unwrap();
        assert_eq!(counter.get(Op::Write), 1);
    }
}
