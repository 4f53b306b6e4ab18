//! The forwarding of both backend traits. Every wrapper delegates through
//! one macro, [`delegate_backend!`]: each request goes through a
//! [`Layer`](crate::backend::Layer)'s `call(request, next)`, the
//! [`Request`](crate::backend::Request) saying which request it is. Shared
//! and boxed backends (`Arc<B>`, `Box<B>`) hand on the pointee's own
//! request future, with none of their own around it (a boxed future less
//! for every request through an `Arc<dyn Backend>`).
//!
//! Both traits' methods are listed once, in the `@impls` arm, with the
//! signature `async_trait` gives them: the receiver's lifetime, one per
//! borrowed argument, then the future's. Every method is forwarded, provided
//! ones too (`endpoint`), so a store on a wrapper takes the same path as on
//! the wrapped backend. The impls deny `clippy::missing_trait_methods`: a
//! method added to a trait with a default body is a lint error here until it
//! is forwarded.

use std::future::Future;
use std::sync::Arc;

use crate::backend::{TableOp, Version, WriteOptions};
use crate::error::Result;

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
    fn execute(
        &self,
        table: &crate::key::TableName,
        op: TableOp,
        options: &WriteOptions,
    ) -> impl Future<Output = Result<Option<Version>>> + Send;

    fn batch(
        &self,
        table: &crate::key::TableName,
        ops: &[TableOp],
    ) -> impl Future<Output = Result<Vec<Option<Version>>>> + Send;
}

/// Implements [`TableBackend`](crate::backend::TableBackend) and
/// [`BlobBackend`](crate::backend::BlobBackend) for a wrapper type
/// `$wrapper<B>` with an `inner: B` field, each request through a layer.
macro_rules! delegate_backend {
    // A wrapper whose `$layer` field is the [`Layer`](crate::backend::Layer)
    // every request goes through, to its `inner` field.
    ($wrapper:ident, layer = $layer:ident) => {
        $crate::backend::delegate::delegate_backend!(@impls ($layer plain) [] $wrapper<B> []);
    };
    // [`Layered`](crate::backend::layer::Layered): any layer over any backend.
    (Layered) => {
        $crate::backend::delegate::delegate_backend!(
            @impls (layer plain) [L: $crate::backend::Layer,] Layered<L, B> []
        );
    };
    // A wrapper that sends writes its own way: `execute` and `batch` go to
    // its [`Writes`], every other request to its `inner` field as it is.
    ($wrapper:ident, own writes) => {
        $crate::backend::delegate::delegate_backend!(@impls (through own) [] $wrapper<B> []);
    };
    // A shared or boxed backend: the pointee's own request future.
    (@deref $ptr:ident) => {
        $crate::backend::delegate::delegate_backend!(@impls deref [] $ptr<B> [+ ?Sized]);
    };
    // The method's body: `$how` is `deref` or `($layer $writes)`.
    (@body deref $s:ident $name:ident($($arg:ident),*) $request:expr) => {
        (**$s).$name($($arg),*)
    };
    (@body ($layer:ident $writes:ident) $s:ident $name:ident($($arg:ident),*) $request:expr) => {
        Box::pin(async move {
            $crate::backend::Layer::call(
                $crate::backend::delegate::delegate_backend!(@layer $layer $s),
                &$request,
                $crate::backend::delegate::delegate_backend!(@next $writes $s $name($($arg),*)),
            )
            .await
        })
    };
    (@layer through $s:ident) => {
        &$crate::backend::delegate::Through
    };
    (@layer $layer:ident $s:ident) => {
        &$s.$layer
    };
    (@next own $s:ident execute($($arg:ident),*)) => {
        $crate::backend::delegate::Writes::execute($s, $($arg),*)
    };
    (@next own $s:ident batch($($arg:ident),*)) => {
        $crate::backend::delegate::Writes::batch($s, $($arg),*)
    };
    (@next $writes:ident $s:ident $name:ident($($arg:ident),*)) => {
        $s.inner.$name($($arg),*)
    };
    (@sync deref $s:ident $name:ident) => {
        (**$s).$name()
    };
    (@sync $how:tt $s:ident $name:ident) => {
        $s.inner.$name()
    };
    // One request: its answer `$out`, its borrowed arguments' lifetimes, the
    // [`Request`](crate::backend::Request) it is.
    (@fn $how:tt $name:ident($($arg:ident: $ty:ty),*) -> $out:ty; [$($l:lifetime),*] $request:expr) => {
        fn $name<'life0, $($l,)* 'async_trait>(
            &'life0 self,
            $($arg: $ty),*
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = $crate::Result<$out>> + Send + 'async_trait>>
        where
            'life0: 'async_trait,
            $($l: 'async_trait,)*
            Self: 'async_trait,
        {
            $crate::backend::delegate::delegate_backend!(@body $how self $name($($arg),*) $request)
        }
    };
    (@impls $how:tt [$($gen:tt)*] $ty:ty [$($unsized:tt)*]) => {
        #[deny(clippy::missing_trait_methods)]
        impl<$($gen)* B: $crate::backend::TableBackend $($unsized)*> $crate::backend::TableBackend for $ty {
            fn system_name(&self) -> &'static str {
                $crate::backend::delegate::delegate_backend!(@sync $how self system_name)
            }
            fn server_address(&self) -> Option<String> {
                $crate::backend::delegate::delegate_backend!(@sync $how self server_address)
            }
            $crate::backend::delegate::delegate_backend!(@fn $how
                create_table(table: &'life1 $crate::key::TableName) -> $crate::backend::TableCreation;
                ['life1] $crate::backend::Request::on_table($crate::backend::Op::CreateTable, table));
            $crate::backend::delegate::delegate_backend!(@fn $how
                delete_table(table: &'life1 $crate::key::TableName) -> bool;
                ['life1] $crate::backend::Request::on_table($crate::backend::Op::DeleteTable, table));
            $crate::backend::delegate::delegate_backend!(@fn $how
                list_tables() -> Vec<$crate::key::TableName>;
                [] $crate::backend::Request::account($crate::backend::Op::ListTables));
            $crate::backend::delegate::delegate_backend!(@fn $how get(
                table: &'life1 $crate::key::TableName,
                partition_key: &'life2 $crate::key::PartitionKey,
                row_key: &'life3 $crate::key::RowKey
            ) -> Option<$crate::backend::StoredEntity>; ['life1, 'life2, 'life3]
                $crate::backend::Request::row($crate::backend::Op::Get, table, partition_key, row_key));
            $crate::backend::delegate::delegate_backend!(@fn $how execute(
                table: &'life1 $crate::key::TableName,
                op: $crate::backend::TableOp,
                options: &'life2 $crate::backend::WriteOptions
            ) -> Option<$crate::backend::Version>; ['life1, 'life2]
                $crate::backend::Request::write(table, &op));
            $crate::backend::delegate::delegate_backend!(@fn $how batch(
                table: &'life1 $crate::key::TableName,
                ops: &'life2 [$crate::backend::TableOp]
            ) -> Vec<Option<$crate::backend::Version>>; ['life1, 'life2]
                $crate::backend::Request::batch(table, ops));
            $crate::backend::delegate::delegate_backend!(@fn $how query(
                table: &'life1 $crate::key::TableName,
                query: &'life2 $crate::backend::QuerySpec
            ) -> $crate::backend::QueryPage; ['life1, 'life2]
                $crate::backend::Request::on_table($crate::backend::Op::Query, table));
        }

        #[deny(clippy::missing_trait_methods)]
        impl<$($gen)* B: $crate::backend::BlobBackend $($unsized)*> $crate::backend::BlobBackend for $ty {
            fn endpoint(&self) -> String {
                $crate::backend::delegate::delegate_backend!(@sync $how self endpoint)
            }
            $crate::backend::delegate::delegate_backend!(@fn $how
                create_container(container: &'life1 $crate::key::ContainerName) -> ();
                ['life1] $crate::backend::Request::on_blob($crate::backend::Op::CreateContainer, container, None));
            $crate::backend::delegate::delegate_backend!(@fn $how put_blob(
                container: &'life1 $crate::key::ContainerName,
                blob: &'life2 $crate::key::BlobName,
                body: Vec<u8>,
                metadata: &'life3 $crate::backend::Metadata,
                conditions: &'life4 $crate::backend::BlobConditions
            ) -> $crate::key::ETag; ['life1, 'life2, 'life3, 'life4]
                $crate::backend::Request::on_blob($crate::backend::Op::PutBlob, container, Some(blob)));
            $crate::backend::delegate::delegate_backend!(@fn $how get_blob(
                container: &'life1 $crate::key::ContainerName,
                blob: &'life2 $crate::key::BlobName
            ) -> Option<$crate::backend::Blob>; ['life1, 'life2]
                $crate::backend::Request::on_blob($crate::backend::Op::GetBlob, container, Some(blob)));
            $crate::backend::delegate::delegate_backend!(@fn $how blob_properties(
                container: &'life1 $crate::key::ContainerName,
                blob: &'life2 $crate::key::BlobName
            ) -> Option<$crate::backend::BlobProperties>; ['life1, 'life2]
                $crate::backend::Request::on_blob($crate::backend::Op::BlobProperties, container, Some(blob)));
            $crate::backend::delegate::delegate_backend!(@fn $how set_blob_metadata(
                container: &'life1 $crate::key::ContainerName,
                blob: &'life2 $crate::key::BlobName,
                metadata: &'life3 $crate::backend::Metadata,
                conditions: &'life4 $crate::backend::BlobConditions
            ) -> $crate::key::ETag; ['life1, 'life2, 'life3, 'life4]
                $crate::backend::Request::on_blob($crate::backend::Op::SetBlobMetadata, container, Some(blob)));
            $crate::backend::delegate::delegate_backend!(@fn $how delete_blob(
                container: &'life1 $crate::key::ContainerName,
                blob: &'life2 $crate::key::BlobName,
                conditions: &'life3 $crate::backend::BlobConditions
            ) -> (); ['life1, 'life2, 'life3]
                $crate::backend::Request::on_blob($crate::backend::Op::DeleteBlob, container, Some(blob)));
            $crate::backend::delegate::delegate_backend!(@fn $how list_blobs(
                container: &'life1 $crate::key::ContainerName,
                prefix: &'life2 str,
                marker: Option<&'life3 str>
            ) -> $crate::backend::BlobListPage; ['life1, 'life2, 'life3]
                $crate::backend::Request::on_blob($crate::backend::Op::ListBlobs, container, None));
            $crate::backend::delegate::delegate_backend!(@fn $how lease(
                container: &'life1 $crate::key::ContainerName,
                blob: &'life2 $crate::key::BlobName,
                action: $crate::backend::LeaseAction
            ) -> $crate::backend::LeaseReply; ['life1, 'life2]
                $crate::backend::Request::on_blob(action.op(), container, Some(blob)));
        }
    };
}

pub(crate) use delegate_backend;

delegate_backend!(@deref Arc);
delegate_backend!(@deref Box);

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
