//! [`Fence`], as a lease hands it out; the fenced writes and their
//! protocol are `crate::table::fence`'s.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::key::{ETag, PartitionKey, RowKey, TableName};

/// One epoch of one lease, as a writer of table rows: a [`Table`] opened
/// with [`Table::fenced`] sends each write with the partition's fence row,
/// and the **service** refuses it once a fence of a later epoch of the same
/// lease has written that partition (costs: [`Table::fenced`]).
///
/// Get one from [`LeaseGuard::fence`] (advances the epoch) or
/// [`LeaderContext::fence`] (the term's epoch). Clones share the fence-row
/// ETags it keeps per partition: give them to the tasks doing the writes.
/// Reads are not fenced, and the fence does not check the lease's validity
/// (see [`LeaseStatus::ensure_valid`]). A write refused by the fence is
/// [`Error::LeaseLost`], never [`Error::Conflict`]; one whose reply was lost
/// and that was applied fails with [`Error::Transient`]. Do not delete fence
/// rows while an older holder may still write.
///
/// ```
/// # use leasehold::{Entity, Store};
/// # use std::time::Duration;
/// # #[derive(Entity, Clone, Debug)]
/// # #[entity(table = "Jobs")]
/// # struct Job { #[entity(partition_key)] queue: String, #[entity(row_key)] id: String, state: String }
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let store = Store::memory();
/// let old = store.leases().acquire("scheduler", Duration::from_secs(30)).await?;
/// let old_fence = old.fence().await?; // epoch 1
/// let jobs = store.table::<Job>();
/// jobs.fenced(&old_fence)
///     .insert(Job { queue: "q".into(), id: "1".into(), state: "new".into() })
///     .await?;
/// old.release().await?;
///
/// // The next holder's fence has a later epoch; once it has written the
/// // partition, the old fence's writes there are refused.
/// let new = store.leases().acquire("scheduler", Duration::from_secs(30)).await?;
/// let fence = new.fence().await?; // epoch 2
/// let mut job = jobs.get("q", "1").await?.expect("stored");
/// job.state = "running".into();
/// jobs.fenced(&fence).replace(&job).await?;
///
/// let stale = jobs.fenced(&old_fence)
///     .insert(Job { queue: "q".into(), id: "2".into(), state: "new".into() })
///     .await;
/// assert_eq!(stale.unwrap_err().kind(), leasehold::ErrorKind::LeaseLost);
/// assert_eq!(jobs.query().partition("q").all().await?.len(), 1); // no fence rows
/// # new.release().await?;
/// # Ok::<(), leasehold::Error>(()) }).unwrap();
/// ```
///
/// [`Table`]: crate::Table
/// [`Table::fenced`]: crate::Table::fenced
/// [`LeaseGuard::fence`]: crate::lease::LeaseGuard::fence
/// [`LeaderContext::fence`]: crate::lease::LeaderContext::fence
/// [`LeaseStatus::ensure_valid`]: crate::lease::LeaseStatus::ensure_valid
#[derive(Clone)]
pub struct Fence {
    pub(crate) lease: Arc<str>,
    pub(crate) epoch: u64,
    pub(crate) row_key: RowKey,
    state: Arc<Mutex<FenceState>>,
}

/// What a fence knows of the partitions it wrote.
#[derive(Default)]
pub(crate) struct FenceState {
    /// Per (table, partition): the fence row's ETag as this fence last
    /// wrote it (`None`: read it first); the lock serialises the writes.
    pub(crate) partitions:
        HashMap<(TableName, PartitionKey), Arc<tokio::sync::Mutex<Option<ETag>>>>,
    /// A later epoch seen on a fence row: every write is refused.
    pub(crate) superseded: Option<u64>,
}

impl fmt::Debug for Fence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fence")
            .field("lease", &self.lease)
            .field("epoch", &self.epoch)
            .field("superseded_by", &self.superseded_by())
            .finish_non_exhaustive()
    }
}

impl Fence {
    /// `Invalid` when the name is too long for a row key once encoded, or
    /// the epoch is beyond `i64::MAX`.
    pub(crate) fn new(lease: &str, epoch: u64) -> Result<Fence> {
        if i64::try_from(epoch).is_err() {
            return Err(Error::invalid(
                format!("fencing epoch {epoch} of lease {lease:?}"),
                "is beyond i64::MAX and cannot be stored as Edm.Int64",
            ));
        }
        let row_key = crate::rows::fence::row_key(lease)?;
        Ok(Fence {
            lease: lease.into(),
            epoch,
            row_key,
            state: Arc::default(),
        })
    }

    /// The name of the lease this fence belongs to.
    pub fn lease(&self) -> &str {
        &self.lease
    }

    /// The fence's epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The later epoch seen on a fence row, if any: every write through
    /// this fence is then refused before sending.
    pub fn superseded_by(&self) -> Option<u64> {
        self.state().superseded
    }

    pub(crate) fn state(&self) -> std::sync::MutexGuard<'_, FenceState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The lock and cached ETag of one partition's fence row.
    pub(crate) fn slot(
        &self,
        table: &TableName,
        pk: &PartitionKey,
    ) -> Arc<tokio::sync::Mutex<Option<ETag>>> {
        self.state()
            .partitions
            .entry((table.clone(), pk.clone()))
            .or_default()
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn a_fence_keeps_its_lease_and_epoch() {
        let fence = Fence::new("jobs/a%b#c?d\\e\u{1}f", 3).unwrap();
        assert!(crate::rows::fence::is_fence_row(fence.row_key.as_str()));
        assert_eq!((fence.lease(), fence.epoch()), ("jobs/a%b#c?d\\e\u{1}f", 3));
    }

    #[test]
    fn epochs_beyond_int64_and_overlong_names_are_invalid() {
        let e = Fence::new("x", u64::MAX).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid);
        assert!(e.to_string().contains("i64::MAX"), "{e}");
        let e = Fence::new(&"/".repeat(256), 1).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid);
        assert!(Fence::new(&"a".repeat(256), 1).is_ok());
    }
}
