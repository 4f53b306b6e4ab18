//! [`LockEnv`]: what the units of one store share.

use std::sync::Arc;

use async_trait::async_trait;

use crate::backend::{StoredEntity, TableOp};
use crate::entity::entity_type::IndexDef;
use crate::error::Result;
use crate::key::{PartitionKey, RowKey, TableName};
use crate::table::TableEnv;

use super::options::LockOptions;
use super::slot::{Reads, Slot};

/// What the units of one store share: its tables (with the lease manager
/// of its partition locks), the lock options, and the index claims of
/// commits.
pub(crate) struct LockEnv {
    pub(crate) tables: Arc<TableEnv>,
    pub(crate) options: LockOptions,
    pub(crate) claims: Arc<dyn CommitClaims>,
}

impl std::fmt::Debug for LockEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockEnv")
            .field("table_prefix", &self.table_prefix)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl std::ops::Deref for LockEnv {
    type Target = TableEnv;

    fn deref(&self) -> &TableEnv {
        &self.tables
    }
}

/// An indexed entity type a unit writes.
#[derive(Debug, Clone)]
pub(crate) struct IndexedType {
    /// With the store's prefix.
    pub(crate) table: TableName,
    /// As the type declares it.
    pub(crate) declared_table: &'static str,
    pub(crate) type_name: String,
    pub(crate) defs: &'static [IndexDef],
}

/// What the index claims of a commit read of it (fields as in
/// [`Unit`](super::Unit); `held`: none for a transaction).
pub(crate) struct ClaimInput<'a> {
    pub(crate) parts: &'a [PartitionKey],
    pub(crate) held: &'a [PartitionKey],
    /// The staged writes of indexed types.
    pub(crate) writes: Vec<(&'a (Slot, RowKey), &'a TableOp)>,
    pub(crate) reads: &'a Reads,
    pub(crate) indexed: &'a [IndexedType],
}

/// What the claims add to a commit: rows they read, the writes to send
/// instead of the staged ones, and what to do once it succeeded.
pub(crate) struct Claimed {
    pub(crate) read: Vec<((Slot, RowKey), Option<StoredEntity>)>,
    pub(crate) writes: Vec<((Slot, RowKey), TableOp)>,
    pub(crate) after: Option<Box<dyn AfterCommit>>,
}

/// The index claims of commits (see `crate::index`), installed by the
/// store and made before a commit sends anything.
#[async_trait]
pub(crate) trait CommitClaims: Send + Sync {
    /// Claims the values the staged writes set
    /// ([`crate::Error::ValueTaken`] for one another entity holds), and
    /// answers the writes the commit sends instead.
    async fn claim(&self, env: &Arc<LockEnv>, input: ClaimInput<'_>) -> Result<Claimed>;
}

/// What a commit's claims leave to do once it succeeded.
#[async_trait]
pub(crate) trait AfterCommit: Send {
    async fn run(self: Box<Self>, env: &Arc<LockEnv>);
}
