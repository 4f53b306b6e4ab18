//! What a store opens: typed tables, and partition locks (units of work),
//! with the operator's access to a commit a unit left pending.

use std::sync::Arc;
use std::time::Duration;

use crate::entity::Entity;
use crate::error::{Error, Result};
use crate::key::IntoPartitionKey;
use crate::lock::name::lock_name;
use crate::lock::{Journal, PendingCommit, RollForwardReport, Unit};
use crate::table::Table;

use super::Store;

impl Store {
    /// The typed table of entity type `E`.
    pub fn table<E: Entity>(&self) -> Table<E> {
        Table::new(Arc::clone(self.tables()))
    }

    /// Takes the lock of a partition, waiting up to the configured
    /// [`LockOptions::acquire_timeout`](crate::lock::LockOptions::acquire_timeout), and rolls forward a commit that a
    /// previous holder left unfinished. See [`crate::lock`].
    ///
    /// # Errors
    /// [`crate::Error::Timeout`] when the lock stays held;
    /// [`crate::Error::Unavailable`] naming the blob endpoint when storage
    /// kept failing for the lock lease options'
    /// [`LeaseOptions::with_unavailable_after`](crate::lease::LeaseOptions::with_unavailable_after) (30 s by default);
    /// [`crate::Error::Inconsistent`] when a pending journal cannot be rolled
    /// forward; [`crate::Error::Invalid`] for a bad key; backend errors.
    pub async fn lock(&self, partition_key: impl IntoPartitionKey) -> Result<Unit> {
        self.lock_with_timeout(partition_key, self.lock_options().acquire_timeout)
            .await
    }

    /// As [`Store::lock`], waiting up to `timeout`.
    ///
    /// # Errors
    /// As [`Store::lock`].
    pub async fn lock_with_timeout(
        &self,
        partition_key: impl IntoPartitionKey,
        timeout: Duration,
    ) -> Result<Unit> {
        Unit::open(self, partition_key, Some(timeout))
            .await?
            .ok_or_else(|| Error::Timeout {
                what: "partition lock".into(),
                after: timeout,
            })
    }

    /// Takes the lock of a partition if nobody holds it; `Ok(None)` otherwise.
    ///
    /// # Errors
    /// As [`Store::lock`], without the timeout.
    pub async fn try_lock(&self, partition_key: impl IntoPartitionKey) -> Result<Option<Unit>> {
        Unit::open(self, partition_key, None).await
    }

    /// For operators: takes the lock of a partition, rolls forward a pending
    /// journal if there is one, and releases the lock. Returns what was done
    /// (`None`: nothing was pending).
    ///
    /// # Errors
    /// As [`Store::lock`].
    pub async fn roll_forward(
        &self,
        partition_key: impl IntoPartitionKey,
    ) -> Result<Option<RollForwardReport>> {
        let unit = self.lock(partition_key).await?;
        let report = unit.rolled_forward().cloned();
        unit.abandon().await?;
        Ok(report)
    }

    /// For operators: the commit a unit left pending on a partition (it
    /// died, or lost its lease, half-way through a journalled commit), read
    /// without taking the lock; `None` when nothing is pending.
    /// [`Store::roll_forward`] finishes it.
    ///
    /// # Errors
    /// [`crate::Error::Inconsistent`] when the stored journal does not
    /// parse; [`crate::Error::Invalid`] for a bad key; backend errors.
    pub async fn pending_commit(
        &self,
        partition_key: impl IntoPartitionKey,
    ) -> Result<Option<PendingCommit>> {
        let pk = partition_key.into_partition_key()?;
        let name = lock_name(self.table_prefix(), &pk)?;
        Journal::read(self.locks(), &name)
            .await?
            .map(|journal| journal.summary())
            .transpose()
    }
}
