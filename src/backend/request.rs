//! [`Request`] and [`Op`]: a backend request as a [`Layer`](super::Layer)
//! sees it.

use std::borrow::Cow;

use super::TableOp;
use crate::key::{BlobName, ContainerName, PartitionKey, RowKey, TableName};

/// Declares [`Op`], each kind with its name in metrics ([`Op::name`]).
macro_rules! ops {
    ($($op:ident = $name:literal,)*) => {
        /// The kind of a backend request, as layers see it ([`Request::op`]):
        /// one per method of the backend traits ([`Op::Write`] for every
        /// single write), one per [`LeaseAction`](crate::backend::LeaseAction).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Op {
            $(#[doc = concat!("A `", $name, "` request.")] $op,)*
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
    CreateTable = "create_table",
    DeleteTable = "delete_table",
    ListTables = "list_tables",
    Get = "get",
    Write = "write",
    Batch = "batch",
    Query = "query",
    CreateContainer = "create_container",
    PutBlob = "put_blob",
    GetBlob = "get_blob",
    BlobProperties = "blob_properties",
    SetBlobMetadata = "set_blob_metadata",
    DeleteBlob = "delete_blob",
    ListBlobs = "list_blobs",
    AcquireLease = "acquire_lease",
    RenewLease = "renew_lease",
    ChangeLease = "change_lease",
    ReleaseLease = "release_lease",
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
    pub(crate) op: Op,
    pub(crate) name: &'static str,
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

    fn new(op: Op, target: Target<'a>) -> Self {
        let name = op.name();
        Request { op, name, target }
    }

    pub(crate) fn account(op: Op) -> Self {
        Self::new(op, Target::Account)
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
        Self::new(op, target)
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
        Self::new(op, Target::Blob { container, blob })
    }
}
