//! The forwarding of both backend traits. Every wrapper delegates through
//! one macro: each request goes through the wrapper's [`Delegate`]'s
//! `call(op, future)`, [`Op`] saying which request it is (public as
//! `leasehold::testing::Op`). Shared and boxed backends (`Arc<B>`, `Box<B>`)
//! hand on the pointee's own request future, with none of their own around
//! it.
//!
//! Every method is forwarded, provided ones too (`endpoint`), so a store on a wrapper takes the same path as on the
//! wrapped backend. The impls deny `clippy::missing_trait_methods`: a
//! method added to a trait with a default body is a lint error here until it
//! is forwarded.

use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;

use crate::backend::{TableOp, Version, WriteOptions};
use crate::error::Result;
use crate::key::{BlobName, ContainerName, PartitionKey, RowKey, TableName};

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

/// One backend request as wrappers see it: its kind and what it is about
/// (for spans). Made by [`delegate_backend!`] before the request is sent.
#[derive(Debug)]
pub(crate) struct Request<'a> {
    /// The kind of request.
    pub(crate) op: Op,
    /// `db.operation.name` of its span: the write's kind (`insert`,
    /// `replace`, ...) for a write, [`Op::name`] otherwise.
    pub(crate) name: &'static str,
    /// What the request is about.
    pub(crate) target: Target<'a>,
}

/// What a [`Request`] is about.
#[derive(Debug)]
pub(crate) enum Target<'a> {
    /// The account (listing tables).
    Account,
    /// A table, one of its partitions or rows, or a batch of `size`
    /// operations.
    Table {
        table: &'a TableName,
        partition: Option<Cow<'a, PartitionKey>>,
        row: Option<Cow<'a, RowKey>>,
        size: Option<usize>,
    },
    /// A container or one of its blobs.
    Blob {
        container: &'a ContainerName,
        blob: Option<&'a BlobName>,
    },
}

impl<'a> Request<'a> {
    pub(crate) fn account(op: Op) -> Self {
        Request {
            op,
            name: op.name(),
            target: Target::Account,
        }
    }

    pub(crate) fn table(op: Op, table: &'a TableName) -> Self {
        Request {
            op,
            name: op.name(),
            target: Target::Table {
                table,
                partition: None,
                row: None,
                size: None,
            },
        }
    }

    pub(crate) fn row(op: Op, table: &'a TableName, pk: &'a PartitionKey, rk: &'a RowKey) -> Self {
        Request {
            op,
            name: op.name(),
            target: Target::Table {
                table,
                partition: Some(Cow::Borrowed(pk)),
                row: Some(Cow::Borrowed(rk)),
                size: None,
            },
        }
    }

    /// A write: its keys are copied, as the write itself moves on.
    pub(crate) fn write(table: &'a TableName, op: &TableOp) -> Self {
        Request {
            op: Op::Write,
            name: op.name(),
            target: Target::Table {
                table,
                partition: Some(Cow::Owned(op.partition_key().clone())),
                row: Some(Cow::Owned(op.row_key().clone())),
                size: None,
            },
        }
    }

    pub(crate) fn batch(table: &'a TableName, ops: &'a [TableOp]) -> Self {
        Request {
            op: Op::Batch,
            name: Op::Batch.name(),
            target: Target::Table {
                table,
                partition: ops.first().map(|op| Cow::Borrowed(op.partition_key())),
                row: None,
                size: Some(ops.len()),
            },
        }
    }

    pub(crate) fn blob(op: Op, container: &'a ContainerName, blob: Option<&'a BlobName>) -> Self {
        Request {
            op,
            name: op.name(),
            target: Target::Blob { container, blob },
        }
    }
}

/// A backend that hands every request to another, the one forwarding
/// mechanism of the crate: shared and boxed backends (`Arc<B>`, `Box<B>`)
/// and every wrapper ([`crate::testing`]'s, the store's metrics) implement
/// it, and [`delegate_backend!`] implements both backend traits for them.
pub(crate) trait Delegate {
    /// Runs `request`: `fut`, the inner backend's answer to it.
    fn call<T: Send>(
        &self,
        request: &Request<'_>,
        fut: impl Future<Output = Result<T>> + Send,
    ) -> impl Future<Output = Result<T>> + Send;
}

/// A wrapper that sends writes its own way (a fence sends each as a
/// transaction with its fence row; the index layer claims values first):
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
/// `$wrapper<B>` with an `inner: B` field that implements [`Delegate`].
macro_rules! delegate_backend {
    ($wrapper:ident) => {
        $crate::backend::delegate::delegate_backend!(@impl [] $wrapper field plain);
    };
    // A wrapper that sends writes its own way: `execute` and `batch` go to
    // its [`Writes`], every other request to its `inner` field.
    // Every other request goes as it is.
    ($wrapper:ident, own writes) => {
        impl<B: Send + Sync> $crate::backend::delegate::Delegate for $wrapper<B> {
            fn call<T: Send>(
                &self,
                _: &$crate::backend::delegate::Request<'_>,
                fut: impl std::future::Future<Output = $crate::Result<T>> + Send,
            ) -> impl std::future::Future<Output = $crate::Result<T>> + Send {
                fut
            }
        }
        $crate::backend::delegate::delegate_backend!(@impl [] $wrapper field own);
    };
    (@execute plain $mode:ident $s:ident $table:ident $op:ident $options:ident) => {
        $crate::backend::delegate::delegate_backend!(@inner $mode $s).execute($table, $op, $options)
    };
    (@execute own $mode:ident $s:ident $table:ident $op:ident $options:ident) => {
        $crate::backend::delegate::Writes::execute($s, $table, $op, $options)
    };
    (@batch plain $mode:ident $s:ident $table:ident $ops:ident) => {
        $crate::backend::delegate::delegate_backend!(@inner $mode $s).batch($table, $ops)
    };
    (@batch own $mode:ident $s:ident $table:ident $ops:ident) => {
        $crate::backend::delegate::Writes::batch($s, $table, $ops)
    };
    // The backend a wrapper's requests go to: its `inner` field, or what a
    // pointer points at.
    (@inner field $s:expr) => {
        $s.inner
    };
    (@inner deref $s:expr) => {
        (**$s)
    };
    (@impl [$($unsized:tt)*] $wrapper:ident $mode:ident $writes:ident) => {
        #[deny(clippy::missing_trait_methods)]
        #[async_trait::async_trait]
        impl<B: $crate::backend::TableBackend $($unsized)*> $crate::backend::TableBackend for $wrapper<B>
        where
            $wrapper<B>: $crate::backend::delegate::Delegate,
        {
            fn system_name(&self) -> &'static str {
                $crate::backend::delegate::delegate_backend!(@inner $mode self).system_name()
            }
            fn server_address(&self) -> Option<String> {
                $crate::backend::delegate::delegate_backend!(@inner $mode self).server_address()
            }
            async fn create_table(
                &self,
                table: &$crate::key::TableName,
            ) -> $crate::Result<$crate::backend::TableCreation> {
                $crate::backend::delegate::Delegate::call(self,
                    &$crate::backend::delegate::Request::table($crate::backend::delegate::Op::CreateTable, table),
                    $crate::backend::delegate::delegate_backend!(@inner $mode self).create_table(table),
                )
                .await
            }
            async fn delete_table(&self, table: &$crate::key::TableName) -> $crate::Result<bool> {
                $crate::backend::delegate::Delegate::call(self,
                    &$crate::backend::delegate::Request::table($crate::backend::delegate::Op::DeleteTable, table),
                    $crate::backend::delegate::delegate_backend!(@inner $mode self).delete_table(table),
                )
                .await
            }
            async fn list_tables(&self) -> $crate::Result<Vec<$crate::key::TableName>> {
                $crate::backend::delegate::Delegate::call(self,
                    &$crate::backend::delegate::Request::account($crate::backend::delegate::Op::ListTables),
                    $crate::backend::delegate::delegate_backend!(@inner $mode self).list_tables(),
                )
                .await
            }
            async fn get(
                &self,
                table: &$crate::key::TableName,
                partition_key: &$crate::key::PartitionKey,
                row_key: &$crate::key::RowKey,
            ) -> $crate::Result<Option<$crate::backend::StoredEntity>> {
                $crate::backend::delegate::Delegate::call(self,
                    &$crate::backend::delegate::Request::row($crate::backend::delegate::Op::Get, table, partition_key, row_key),
                    $crate::backend::delegate::delegate_backend!(@inner $mode self).get(table, partition_key, row_key),
                )
                .await
            }
            async fn execute(
                &self,
                table: &$crate::key::TableName,
                op: $crate::backend::TableOp,
                options: &$crate::backend::WriteOptions,
            ) -> $crate::Result<Option<$crate::backend::Version>> {
                $crate::backend::delegate::Delegate::call(self,
                    &$crate::backend::delegate::Request::write(table, &op),
                    $crate::backend::delegate::delegate_backend!(@execute $writes $mode self table op options),
                )
                .await
            }
            async fn batch(
                &self,
                table: &$crate::key::TableName,
                ops: &[$crate::backend::TableOp],
            ) -> $crate::Result<Vec<Option<$crate::backend::Version>>> {
                $crate::backend::delegate::Delegate::call(self,
                    &$crate::backend::delegate::Request::batch(table, ops),
                    $crate::backend::delegate::delegate_backend!(@batch $writes $mode self table ops),
                )
                .await
            }
            async fn query(
                &self,
                table: &$crate::key::TableName,
                query: &$crate::backend::QuerySpec,
            ) -> $crate::Result<$crate::backend::QueryPage> {
                $crate::backend::delegate::Delegate::call(self,
                    &$crate::backend::delegate::Request::table($crate::backend::delegate::Op::Query, table),
                    $crate::backend::delegate::delegate_backend!(@inner $mode self).query(table, query),
                )
                .await
            }
        }

        #[deny(clippy::missing_trait_methods)]
        #[async_trait::async_trait]
        impl<B: $crate::backend::BlobBackend $($unsized)*> $crate::backend::BlobBackend for $wrapper<B>
        where
            $wrapper<B>: $crate::backend::delegate::Delegate,
        {
            fn endpoint(&self) -> String {
                $crate::backend::delegate::delegate_backend!(@inner $mode self).endpoint()
            }
            async fn create_container(
                &self,
                container: &$crate::key::ContainerName,
            ) -> $crate::Result<()> {
                $crate::backend::delegate::Delegate::call(self,
                    &$crate::backend::delegate::Request::blob($crate::backend::delegate::Op::CreateContainer, container, None),
                    $crate::backend::delegate::delegate_backend!(@inner $mode self).create_container(container),
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
                $crate::backend::delegate::Delegate::call(self,
                    &$crate::backend::delegate::Request::blob($crate::backend::delegate::Op::PutBlob, container, Some(blob)),
                    $crate::backend::delegate::delegate_backend!(@inner $mode self)
                        .put_blob(container, blob, body, metadata, conditions),
                )
                .await
            }
            async fn get_blob(
                &self,
                container: &$crate::key::ContainerName,
                blob: &$crate::key::BlobName,
            ) -> $crate::Result<Option<$crate::backend::Blob>> {
                $crate::backend::delegate::Delegate::call(self,
                    &$crate::backend::delegate::Request::blob($crate::backend::delegate::Op::GetBlob, container, Some(blob)),
                    $crate::backend::delegate::delegate_backend!(@inner $mode self).get_blob(container, blob),
                )
                .await
            }
            async fn blob_properties(
                &self,
                container: &$crate::key::ContainerName,
                blob: &$crate::key::BlobName,
            ) -> $crate::Result<Option<$crate::backend::BlobProperties>> {
                $crate::backend::delegate::Delegate::call(self,
                    &$crate::backend::delegate::Request::blob($crate::backend::delegate::Op::BlobProperties, container, Some(blob)),
                    $crate::backend::delegate::delegate_backend!(@inner $mode self).blob_properties(container, blob),
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
                $crate::backend::delegate::Delegate::call(self,
                    &$crate::backend::delegate::Request::blob($crate::backend::delegate::Op::SetBlobMetadata, container, Some(blob)),
                    $crate::backend::delegate::delegate_backend!(@inner $mode self)
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
                $crate::backend::delegate::Delegate::call(self,
                    &$crate::backend::delegate::Request::blob($crate::backend::delegate::Op::DeleteBlob, container, Some(blob)),
                    $crate::backend::delegate::delegate_backend!(@inner $mode self).delete_blob(container, blob, conditions),
                )
                .await
            }
            async fn list_blobs(
                &self,
                container: &$crate::key::ContainerName,
                prefix: &str,
                marker: Option<&str>,
            ) -> $crate::Result<$crate::backend::BlobListPage> {
                $crate::backend::delegate::Delegate::call(self,
                    &$crate::backend::delegate::Request::blob($crate::backend::delegate::Op::ListBlobs, container, None),
                    $crate::backend::delegate::delegate_backend!(@inner $mode self).list_blobs(container, prefix, marker),
                )
                .await
            }
            async fn lease(
                &self,
                container: &$crate::key::ContainerName,
                blob: &$crate::key::BlobName,
                action: $crate::backend::LeaseAction,
            ) -> $crate::Result<$crate::backend::LeaseReply> {
                $crate::backend::delegate::Delegate::call(self,
                    &$crate::backend::delegate::Request::blob(action.op(), container, Some(blob)),
                    $crate::backend::delegate::delegate_backend!(@inner $mode self).lease(container, blob, action),
                )
                .await
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
