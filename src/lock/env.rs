//! [`LockEnv`]: what the units of one store share.

use std::sync::Arc;

use async_trait::async_trait;

use crate::backend::{Backend, StoredEntity, TableOp};
use crate::entity::entity_type::IndexDef;
use crate::error::Result;
use crate::key::{PartitionKey, RowKey, TableName};
use crate::lease::LeaseManager;
use crate::table::TableEnv;
use crate::telemetry::Telemetry;

use super::options::LockOptions;
use super::slot::{Reads, Slot};

/// What the units of one store share: its tables (with the lease manager
/// of its partition locks), the lock options, and what a commit does for
/// the indexes of the types it writes. The store owns it and hands it to every
/// [`Unit`](super::Unit), so units need nothing else of the store.
pub(crate) struct LockEnv {
    tables: Arc<TableEnv>,
    options: LockOptions,
    /// The index claims a commit makes before it sends anything (see
    /// [`CommitClaims`]); `None`: the store has none to make.
    claims: Option<Arc<dyn CommitClaims>>,
}

impl std::fmt::Debug for LockEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockEnv")
            .field("table_prefix", &self.table_prefix())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl LockEnv {
    pub(crate) fn new(
        tables: Arc<TableEnv>,
        options: LockOptions,
        claims: Option<Arc<dyn CommitClaims>>,
    ) -> Self {
        LockEnv {
            tables,
            options,
            claims,
        }
    }

    /// What the store's tables share.
    pub(crate) fn tables(&self) -> &Arc<TableEnv> {
        &self.tables
    }

    /// The backend tables and locks go through.
    pub(crate) fn backend(&self) -> &Arc<dyn Backend> {
        self.tables.backend()
    }

    /// The lease manager of the partition locks.
    pub(crate) fn locks(&self) -> &LeaseManager {
        self.tables.locks()
    }

    /// The lock options units are opened with.
    pub(crate) fn lock_options(&self) -> &LockOptions {
        &self.options
    }

    /// The index claims of commits.
    pub(crate) fn claims(&self) -> Option<&Arc<dyn CommitClaims>> {
        self.claims.as_ref()
    }

    /// Where the store records its metrics.
    pub(crate) fn telemetry(&self) -> &Telemetry {
        self.tables.telemetry()
    }

    /// The prefix put before every table name (and lock blob name).
    pub(crate) fn table_prefix(&self) -> &str {
        self.tables.table_prefix()
    }

    /// The name of table `table` in this store (with the table prefix).
    ///
    /// # Errors
    /// [`Error::Invalid`] when the prefixed name is not a valid table name.
    pub(crate) fn table_name(&self, table: &str) -> Result<TableName> {
        self.tables.table_name(table)
    }

    /// Creates `table` unless it was created (or found) before.
    pub(crate) async fn ensure_table(&self, table: &TableName) -> Result<()> {
        self.tables.ensure_table(table).await
    }
}

/// An indexed entity type a unit writes.
#[derive(Debug, Clone)]
pub(crate) struct IndexedType {
    /// The entity table (with the store's prefix).
    pub(crate) table: TableName,
    /// The table name the type declares (without the prefix).
    pub(crate) declared_table: &'static str,
    /// The type's name, for messages.
    pub(crate) type_name: String,
    pub(crate) defs: &'static [IndexDef],
}

/// What the index claims of a commit read of it.
pub(crate) struct ClaimInput<'a> {
    /// The unit's partitions, in its order ([`Slot::part`] indexes them).
    pub(crate) parts: &'a [PartitionKey],
    /// Those whose locks it holds (none for a transaction).
    pub(crate) held: &'a [PartitionKey],
    /// The staged writes of indexed types, by partition, table and row.
    pub(crate) writes: Vec<(&'a (Slot, RowKey), &'a TableOp)>,
    /// What each row looked like when the unit read it (`None`: absent).
    pub(crate) reads: &'a Reads,
    /// The indexed types the writes are of.
    pub(crate) indexed: &'a [IndexedType],
}

/// What a commit changes for its index claims, and does once it
/// succeeded.
pub(crate) struct Claimed {
    /// The rows the claims read that the unit had not (`None`: absent):
    /// recorded as read by the commit.
    pub(crate) read: Vec<((Slot, RowKey), Option<StoredEntity>)>,
    /// The writes the commit sends instead of the staged ones: each
    /// conditioned on the row as read, a delete leaving a tombstone.
    pub(crate) writes: Vec<((Slot, RowKey), TableOp)>,
    /// What to do once the commit succeeded.
    pub(crate) after: Option<Box<dyn AfterCommit>>,
}

/// The index claims of commits (see `crate::index`), installed by the
/// store: made before a commit sends anything, with no lock beyond the
/// entities' partitions, and made good by the commit.
#[async_trait]
pub(crate) trait CommitClaims: Send + Sync {
    /// Claims the values the staged writes of indexed types set
    /// ([`crate::Error::ValueTaken`] for a value another entity holds,
    /// before anything of the commit is sent), and answers the writes that
    /// its claims can rely on, for the commit to send instead.
    async fn claim(&self, env: &Arc<LockEnv>, input: ClaimInput<'_>) -> Result<Claimed>;
}

/// What a commit's claims leave to do once it succeeded (removing the
/// index rows of the values it freed).
#[async_trait]
pub(crate) trait AfterCommit: Send {
    async fn run(self: Box<Self>, env: &Arc<LockEnv>);
}
