//! The forwarding of both backend traits. Every wrapper delegates through
//! one macro, [`delegate_backend!`]: each request goes through a
//! [`Layer`](crate::backend::Layer)'s `call(request, next)`, the
//! [`Request`](crate::backend::Request) saying which request it is. Shared
//! and boxed backends (`Arc<B>`, `Box<B>`) hand on the pointee's own
//! request future, with none of their own around it.
//!
//! Every method is forwarded, provided ones too (`endpoint`), so a store on a wrapper takes the same path as on the
//! wrapped backend. The impls deny `clippy::missing_trait_methods`: a
//! method added to a trait with a default body is a lint error here until it
//! is forwarded.

use std::future::Future;
use std::sync::Arc;

use crate::backend::{TableOp, Version, WriteOptions};
use crate::error::Result;
use crate::key::{BlobName, ContainerName, PartitionKey, RowKey, TableName};

/// A layer that hands every request on as it is: the other requests of a
/// wrapper that sends writes its own way.
#[derive(Debug)]
pub(crate) struct Through;

impl crate::backend::Layer for Through {
    fn call<T: Send>(
        &self,
        _: &crate::backend::Request<'_>,
        next: impl Future<Output = Result<T>> + Send,
    ) -> impl Future<Output = Result<T>> + Send {
        next
    }
}

/// A wrapper that sends writes its own way (a fence sends each as a
/// transaction with its fence row):
/// `delegate_backend!(W, own writes)` hands `execute` and `batch` to it.
pub(crate) trait Writes {
    /// Sends one write.
    fn execute(
        &self,
        table: &TableName,
        op: TableOp,
        options: &WriteOptions,
    ) -> impl Future<Output = Result<Option<Version>>> + Send;

    /// Sends an entity-group transaction.
    fn batch(
        &self,
        table: &TableName,
        ops: &[TableOp],
    ) -> impl Future<Output = Result<Vec<Option<Version>>>> + Send;
}

/// One method of a shared or boxed backend: the pointee's own request
/// future, handed on with no future of the pointer's around it (a boxed
/// future less for every request through an `Arc<dyn Backend>`). The
/// signature is the one `async_trait` gives the trait's method: the
/// receiver's lifetime, one per borrowed argument, then the future's.
macro_rules! forward {
    ($name:ident($($arg:ident: $ty:ty),*) -> $out:ty $(; $($l:lifetime),+)?) => {
        fn $name<'life0, $($($l,)+)? 'async_trait>(
            &'life0 self,
            $($arg: $ty),*
        ) -> std::pin::Pin<Box<dyn Future<Output = Result<$out>> + Send + 'async_trait>>
        where
            'life0: 'async_trait,
            $($($l: 'async_trait,)+)?
            Self: 'async_trait,
        {
            (**self).$name($($arg),*)
        }
    };
}

/// Shared and boxed backends: every request as it is, through the
/// pointee's own future.
macro_rules! deref_forward {
    ($ptr:ident) => {
        #[deny(clippy::missing_trait_methods)]
        impl<T: crate::backend::TableBackend + ?Sized> crate::backend::TableBackend for $ptr<T> {
            fn system_name(&self) -> &'static str {
                (**self).system_name()
            }
            fn server_address(&self) -> Option<String> {
                (**self).server_address()
            }
            forward!(create_table(table: &'life1 TableName) -> crate::backend::TableCreation; 'life1);
            forward!(delete_table(table: &'life1 TableName) -> bool; 'life1);
            forward!(list_tables() -> Vec<TableName>);
            forward!(get(
                table: &'life1 TableName,
                partition_key: &'life2 PartitionKey,
                row_key: &'life3 RowKey
            ) -> Option<crate::backend::StoredEntity>; 'life1, 'life2, 'life3);
            forward!(execute(
                table: &'life1 TableName,
                op: TableOp,
                options: &'life2 WriteOptions
            ) -> Option<Version>; 'life1, 'life2);
            forward!(batch(table: &'life1 TableName, ops: &'life2 [TableOp]) -> Vec<Option<Version>>; 'life1, 'life2);
            forward!(query(
                table: &'life1 TableName,
                query: &'life2 crate::backend::QuerySpec
            ) -> crate::backend::QueryPage; 'life1, 'life2);
        }

        #[deny(clippy::missing_trait_methods)]
        impl<T: crate::backend::BlobBackend + ?Sized> crate::backend::BlobBackend for $ptr<T> {
            fn endpoint(&self) -> String {
                (**self).endpoint()
            }
            forward!(create_container(container: &'life1 ContainerName) -> (); 'life1);
            forward!(put_blob(
                container: &'life1 ContainerName,
                blob: &'life2 BlobName,
                body: Vec<u8>,
                metadata: &'life3 crate::backend::Metadata,
                conditions: &'life4 crate::backend::BlobConditions
            ) -> crate::key::ETag; 'life1, 'life2, 'life3, 'life4);
            forward!(get_blob(
                container: &'life1 ContainerName,
                blob: &'life2 BlobName
            ) -> Option<crate::backend::Blob>; 'life1, 'life2);
            forward!(blob_properties(
                container: &'life1 ContainerName,
                blob: &'life2 BlobName
            ) -> Option<crate::backend::BlobProperties>; 'life1, 'life2);
            forward!(set_blob_metadata(
                container: &'life1 ContainerName,
                blob: &'life2 BlobName,
                metadata: &'life3 crate::backend::Metadata,
                conditions: &'life4 crate::backend::BlobConditions
            ) -> crate::key::ETag; 'life1, 'life2, 'life3, 'life4);
            forward!(delete_blob(
                container: &'life1 ContainerName,
                blob: &'life2 BlobName,
                conditions: &'life3 crate::backend::BlobConditions
            ) -> (); 'life1, 'life2, 'life3);
            forward!(list_blobs(
                container: &'life1 ContainerName,
                prefix: &'life2 str,
                marker: Option<&'life3 str>
            ) -> crate::backend::BlobListPage; 'life1, 'life2, 'life3);
            forward!(lease(
                container: &'life1 ContainerName,
                blob: &'life2 BlobName,
                action: crate::backend::LeaseAction
            ) -> crate::backend::LeaseReply; 'life1, 'life2);
        }
    };
}

/// Implements [`TableBackend`](crate::backend::TableBackend) and
/// [`BlobBackend`](crate::backend::BlobBackend) for a wrapper type
/// `$wrapper<B>` with an `inner: B` field, each request through a layer.
macro_rules! delegate_backend {
    // A wrapper whose `$layer` field is the [`Layer`](crate::backend::Layer)
    // every request goes through, to its `inner` field.
    ($wrapper:ident, layer = $layer:ident) => {
        $crate::backend::delegate::delegate_backend!(@impl [] $wrapper [] plain $layer);
    };
    // [`Layered`](crate::backend::layer::Layered): any layer over any backend.
    (Layered) => {
        $crate::backend::delegate::delegate_backend!(
            @impl [L: $crate::backend::Layer,] Layered [L,] plain layer
        );
    };
    // A wrapper that sends writes its own way: `execute` and `batch` go to
    // its [`Writes`], every other request to its `inner` field as it is.
    ($wrapper:ident, own writes) => {
        $crate::backend::delegate::delegate_backend!(@impl [] $wrapper [] own through);
    };
    // One request: through the layer, `next` the answer of the backend below.
    (@call $layer:ident $s:ident, $request:expr, $next:expr) => {
        $crate::backend::Layer::call(
            $crate::backend::delegate::delegate_backend!(@layer $layer $s),
            &$request,
            $next,
        )
        .await
    };
    (@layer through $s:expr) => {
        &$crate::backend::delegate::Through
    };
    (@layer $layer:ident $s:expr) => {
        &$s.$layer
    };
    (@execute plain $s:ident $table:ident $op:ident $options:ident) => {
        $s.inner.execute($table, $op, $options)
    };
    (@execute own $s:ident $table:ident $op:ident $options:ident) => {
        $crate::backend::delegate::Writes::execute($s, $table, $op, $options)
    };
    (@batch plain $s:ident $table:ident $ops:ident) => {
        $s.inner.batch($table, $ops)
    };
    (@batch own $s:ident $table:ident $ops:ident) => {
        $crate::backend::delegate::Writes::batch($s, $table, $ops)
    };
    (@impl [$($gen:tt)*] $wrapper:ident [$($arg:tt)*] $writes:ident $layer:ident) => {
        #[deny(clippy::missing_trait_methods)]
        #[async_trait::async_trait]
        impl<$($gen)* B: $crate::backend::TableBackend> $crate::backend::TableBackend
            for $wrapper<$($arg)* B>
        {
            fn system_name(&self) -> &'static str {
                self.inner.system_name()
            }
            fn server_address(&self) -> Option<String> {
                self.inner.server_address()
            }
            async fn create_table(
                &self,
                table: &$crate::key::TableName,
            ) -> $crate::Result<$crate::backend::TableCreation> {
                $crate::backend::delegate::delegate_backend!(@call $layer self,
                    $crate::backend::Request::on_table($crate::backend::Op::CreateTable, table),
                    self.inner.create_table(table))
            }
            async fn delete_table(&self, table: &$crate::key::TableName) -> $crate::Result<bool> {
                $crate::backend::delegate::delegate_backend!(@call $layer self,
                    $crate::backend::Request::on_table($crate::backend::Op::DeleteTable, table),
                    self.inner.delete_table(table))
            }
            async fn list_tables(&self) -> $crate::Result<Vec<$crate::key::TableName>> {
                $crate::backend::delegate::delegate_backend!(@call $layer self,
                    $crate::backend::Request::account($crate::backend::Op::ListTables),
                    self.inner.list_tables())
            }
            async fn get(
                &self,
                table: &$crate::key::TableName,
                partition_key: &$crate::key::PartitionKey,
                row_key: &$crate::key::RowKey,
            ) -> $crate::Result<Option<$crate::backend::StoredEntity>> {
                $crate::backend::delegate::delegate_backend!(@call $layer self,
                    $crate::backend::Request::row($crate::backend::Op::Get, table, partition_key, row_key),
                    self.inner.get(table, partition_key, row_key))
            }
            async fn execute(
                &self,
                table: &$crate::key::TableName,
                op: $crate::backend::TableOp,
                options: &$crate::backend::WriteOptions,
            ) -> $crate::Result<Option<$crate::backend::Version>> {
                $crate::backend::delegate::delegate_backend!(@call $layer self,
                    $crate::backend::Request::write(table, &op),
                    $crate::backend::delegate::delegate_backend!(@execute $writes self table op options))
            }
            async fn batch(
                &self,
                table: &$crate::key::TableName,
                ops: &[$crate::backend::TableOp],
            ) -> $crate::Result<Vec<Option<$crate::backend::Version>>> {
                $crate::backend::delegate::delegate_backend!(@call $layer self,
                    $crate::backend::Request::batch(table, ops),
                    $crate::backend::delegate::delegate_backend!(@batch $writes self table ops))
            }
            async fn query(
                &self,
                table: &$crate::key::TableName,
                query: &$crate::backend::QuerySpec,
            ) -> $crate::Result<$crate::backend::QueryPage> {
                $crate::backend::delegate::delegate_backend!(@call $layer self,
                    $crate::backend::Request::on_table($crate::backend::Op::Query, table),
                    self.inner.query(table, query))
            }
        }

        #[deny(clippy::missing_trait_methods)]
        #[async_trait::async_trait]
        impl<$($gen)* B: $crate::backend::BlobBackend> $crate::backend::BlobBackend
            for $wrapper<$($arg)* B>
        {
            fn endpoint(&self) -> String {
                self.inner.endpoint()
            }
            async fn create_container(
                &self,
                container: &$crate::key::ContainerName,
            ) -> $crate::Result<()> {
                $crate::backend::delegate::delegate_backend!(@call $layer self,
                    $crate::backend::Request::on_blob($crate::backend::Op::CreateContainer, container, None),
                    self.inner.create_container(container))
            }
            async fn put_blob(
                &self,
                container: &$crate::key::ContainerName,
                blob: &$crate::key::BlobName,
                body: Vec<u8>,
                metadata: &$crate::backend::Metadata,
                conditions: &$crate::backend::BlobConditions,
            ) -> $crate::Result<$crate::key::ETag> {
                $crate::backend::delegate::delegate_backend!(@call $layer self,
                    $crate::backend::Request::on_blob($crate::backend::Op::PutBlob, container, Some(blob)),
                    self.inner.put_blob(container, blob, body, metadata, conditions))
            }
            async fn get_blob(
                &self,
                container: &$crate::key::ContainerName,
                blob: &$crate::key::BlobName,
            ) -> $crate::Result<Option<$crate::backend::Blob>> {
                $crate::backend::delegate::delegate_backend!(@call $layer self,
                    $crate::backend::Request::on_blob($crate::backend::Op::GetBlob, container, Some(blob)),
                    self.inner.get_blob(container, blob))
            }
            async fn blob_properties(
                &self,
                container: &$crate::key::ContainerName,
                blob: &$crate::key::BlobName,
            ) -> $crate::Result<Option<$crate::backend::BlobProperties>> {
                $crate::backend::delegate::delegate_backend!(@call $layer self,
                    $crate::backend::Request::on_blob($crate::backend::Op::BlobProperties, container, Some(blob)),
                    self.inner.blob_properties(container, blob))
            }
            async fn set_blob_metadata(
                &self,
                container: &$crate::key::ContainerName,
                blob: &$crate::key::BlobName,
                metadata: &$crate::backend::Metadata,
                conditions: &$crate::backend::BlobConditions,
            ) -> $crate::Result<$crate::key::ETag> {
                $crate::backend::delegate::delegate_backend!(@call $layer self,
                    $crate::backend::Request::on_blob($crate::backend::Op::SetBlobMetadata, container, Some(blob)),
                    self.inner.set_blob_metadata(container, blob, metadata, conditions))
            }
            async fn delete_blob(
                &self,
                container: &$crate::key::ContainerName,
                blob: &$crate::key::BlobName,
                conditions: &$crate::backend::BlobConditions,
            ) -> $crate::Result<()> {
                $crate::backend::delegate::delegate_backend!(@call $layer self,
                    $crate::backend::Request::on_blob($crate::backend::Op::DeleteBlob, container, Some(blob)),
                    self.inner.delete_blob(container, blob, conditions))
            }
            async fn list_blobs(
                &self,
                container: &$crate::key::ContainerName,
                prefix: &str,
                marker: Option<&str>,
            ) -> $crate::Result<$crate::backend::BlobListPage> {
                $crate::backend::delegate::delegate_backend!(@call $layer self,
                    $crate::backend::Request::on_blob($crate::backend::Op::ListBlobs, container, None),
                    self.inner.list_blobs(container, prefix, marker))
            }
            async fn lease(
                &self,
                container: &$crate::key::ContainerName,
                blob: &$crate::key::BlobName,
                action: $crate::backend::LeaseAction,
            ) -> $crate::Result<$crate::backend::LeaseReply> {
                $crate::backend::delegate::delegate_backend!(@call $layer self,
                    $crate::backend::Request::on_blob(action.op(), container, Some(blob)),
                    self.inner.lease(container, blob, action))
            }
        }
    };
}

pub(crate) use delegate_backend;

deref_forward!(Arc);
deref_forward!(Box);

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use async_trait::async_trait;

    use crate::backend::Op;
    use crate::backend::WriteOptions;
    use crate::backend::memory::MemoryBackend;
    use crate::backend::{
        Backend, QueryPage, QuerySpec, StoredEntity, TableBackend, TableCreation, TableOp, Version,
    };
    use crate::entity::{EntityData, Properties};
    use crate::error::{Error, Result};
    use crate::key::{PartitionKey, RowKey, TableName};
    use crate::testing::{CountingBackend, FaultyBackend};

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
