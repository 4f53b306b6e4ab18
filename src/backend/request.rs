//! [`Request`] and [`Op`]: a backend request as a [`Layer`](super::Layer)
//! sees it.

use std::borrow::Cow;

use super::TableOp;
use crate::key::{BlobName, ContainerName, PartitionKey, RowKey, TableName};

/// Declares [`Op`], each kind with its name in metrics ([`Op::name`]).
macro_rules! ops {
    ($($(#[doc = $doc:expr])* $op:ident = $name:literal,)*) => {
        /// The kind of a backend request, as layers see it ([`Request::op`]).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Op {
            $($(#[doc = $doc])* $op,)*
        }

        impl Op {
            /// The request's name in metrics (`db.operation.name`).
            pub(crate) fn name(self) -> &'static str {
                match self {
                    $(Op::$op => $name,)*
                }
            }
        }
    };
}

ops! {
    /// [`TableBackend::create_table`](crate::backend::TableBackend::create_table)
    CreateTable = "create_table",
    /// [`TableBackend::delete_table`](crate::backend::TableBackend::delete_table)
    DeleteTable = "delete_table",
    /// [`TableBackend::list_tables`](crate::backend::TableBackend::list_tables)
    ListTables = "list_tables",
    /// [`TableBackend::get`](crate::backend::TableBackend::get)
    Get = "get",
    /// [`TableBackend::execute`](crate::backend::TableBackend::execute):
    /// insert, replace, merge, upsert or delete.
    Write = "write",
    /// [`TableBackend::batch`](crate::backend::TableBackend::batch)
    Batch = "batch",
    /// [`TableBackend::query`](crate::backend::TableBackend::query)
    Query = "query",
    /// [`BlobBackend::create_container`](crate::backend::BlobBackend::create_container)
    CreateContainer = "create_container",
    /// [`BlobBackend::put_blob`](crate::backend::BlobBackend::put_blob)
    PutBlob = "put_blob",
    /// [`BlobBackend::get_blob`](crate::backend::BlobBackend::get_blob)
    GetBlob = "get_blob",
    /// [`BlobBackend::blob_properties`](crate::backend::BlobBackend::blob_properties)
    BlobProperties = "blob_properties",
    /// [`BlobBackend::set_blob_metadata`](crate::backend::BlobBackend::set_blob_metadata)
    SetBlobMetadata = "set_blob_metadata",
    /// [`BlobBackend::delete_blob`](crate::backend::BlobBackend::delete_blob)
    DeleteBlob = "delete_blob",
    /// [`BlobBackend::list_blobs`](crate::backend::BlobBackend::list_blobs)
    ListBlobs = "list_blobs",
    /// [`BlobBackend::lease`](crate::backend::BlobBackend::lease) with [`LeaseAction::Acquire`](crate::backend::LeaseAction::Acquire)
    AcquireLease = "acquire_lease",
    /// [`BlobBackend::lease`](crate::backend::BlobBackend::lease) with [`LeaseAction::Renew`](crate::backend::LeaseAction::Renew)
    RenewLease = "renew_lease",
    /// [`BlobBackend::lease`](crate::backend::BlobBackend::lease) with [`LeaseAction::Change`](crate::backend::LeaseAction::Change)
    ChangeLease = "change_lease",
    /// [`BlobBackend::lease`](crate::backend::BlobBackend::lease) with [`LeaseAction::Release`](crate::backend::LeaseAction::Release)
    ReleaseLease = "release_lease",
    /// [`BlobBackend::lease`](crate::backend::BlobBackend::lease) with [`LeaseAction::Break`](crate::backend::LeaseAction::Break)
    BreakLease = "break_lease",
}

impl Op {
    /// Whether this is one-time setup (creating a table or container) rather
    /// than work.
    pub fn is_setup(self) -> bool {
        matches!(self, Op::CreateTable | Op::CreateContainer)
    }
}

/// One backend request as a [`Layer`](super::Layer) sees it: its kind and what it is
/// about (table, keys; container, blob). Made before the request is sent.
#[derive(Debug)]
pub struct Request<'a> {
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
    /// The kind of request.
    pub fn op(&self) -> Op {
        self.op
    }

    /// The operation's name, as in spans (`db.operation.name`): the
    /// write's kind for a write (`insert`, `upsert`, ...), the request's
    /// otherwise (`get`, `acquire_lease`, ...).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The table, for a table request other than listing tables.
    pub fn table(&self) -> Option<&TableName> {
        match &self.target {
            Target::Table { table, .. } => Some(table),
            _ => None,
        }
    }

    /// The partition: of a read or write of one row, or of a batch.
    pub fn partition_key(&self) -> Option<&PartitionKey> {
        match &self.target {
            Target::Table { partition, .. } => partition.as_deref(),
            _ => None,
        }
    }

    /// The row, of a read or write of one row.
    pub fn row_key(&self) -> Option<&RowKey> {
        match &self.target {
            Target::Table { row, .. } => row.as_deref(),
            _ => None,
        }
    }

    /// The number of operations, of a batch.
    pub fn batch_size(&self) -> Option<usize> {
        match &self.target {
            Target::Table { size, .. } => *size,
            _ => None,
        }
    }

    /// The container, for a blob request.
    pub fn container(&self) -> Option<&ContainerName> {
        match &self.target {
            Target::Blob { container, .. } => Some(container),
            _ => None,
        }
    }

    /// The blob, for a request about one blob (not a listing).
    pub fn blob(&self) -> Option<&BlobName> {
        match &self.target {
            Target::Blob { blob, .. } => *blob,
            _ => None,
        }
    }

    pub(crate) fn account(op: Op) -> Self {
        Request {
            op,
            name: op.name(),
            target: Target::Account,
        }
    }

    fn in_table(
        op: Op,
        table: &'a TableName,
        partition: Option<Cow<'a, PartitionKey>>,
        row: Option<Cow<'a, RowKey>>,
        size: Option<usize>,
    ) -> Self {
        let target = Target::Table {
            table,
            partition,
            row,
            size,
        };
        Request {
            op,
            name: op.name(),
            target,
        }
    }

    pub(crate) fn on_table(op: Op, table: &'a TableName) -> Self {
        Self::in_table(op, table, None, None, None)
    }

    pub(crate) fn row(op: Op, table: &'a TableName, pk: &'a PartitionKey, rk: &'a RowKey) -> Self {
        let (pk, rk) = (Some(Cow::Borrowed(pk)), Some(Cow::Borrowed(rk)));
        Self::in_table(op, table, pk, rk, None)
    }

    /// A write: its keys are copied, as the write itself moves on.
    pub(crate) fn write(table: &'a TableName, op: &TableOp) -> Self {
        let pk = Some(Cow::Owned(op.partition_key().clone()));
        let rk = Some(Cow::Owned(op.row_key().clone()));
        Request {
            name: op.name(),
            ..Self::in_table(Op::Write, table, pk, rk, None)
        }
    }

    pub(crate) fn batch(table: &'a TableName, ops: &'a [TableOp]) -> Self {
        let partition = ops.first().map(|op| Cow::Borrowed(op.partition_key()));
        Self::in_table(Op::Batch, table, partition, None, Some(ops.len()))
    }

    pub(crate) fn on_blob(
        op: Op,
        container: &'a ContainerName,
        blob: Option<&'a BlobName>,
    ) -> Self {
        Request {
            op,
            name: op.name(),
            target: Target::Blob { container, blob },
        }
    }
}
