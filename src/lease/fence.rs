//! Fenced writes: a [`Fence`] (one epoch of one lease) and the writer that
//! sends every table write of a fenced [`Table`](crate::Table) as an
//! entity-group transaction with the partition's fence row.
//!
//! # Protocol
//!
//! Each partition a fence writes holds one *fence row* per lease, in the
//! same table (a transaction spans one table and one partition): row key
//! [`FENCE_ROW_PREFIX`] followed by the lease name (`%`, `/`, `\`, `#`, `?`
//! and control characters percent-encoded), properties `_lhFenceEpoch`
//! (`Edm.Int64`) and `_lhFenceLease`. Every write goes as one transaction:
//! the fence row first, then the operations.
//!
//! * The first write of a fence to a partition reads the fence row once:
//!   absent, the transaction inserts it; at this epoch or an older one, the
//!   transaction replaces it conditioned on the ETag read; at a newer epoch,
//!   the write is refused before anything is sent.
//! * After each applied transaction the fence keeps the fence row's new
//!   ETag, and the next write to the partition replaces the row conditioned
//!   on it: no read.
//! * When the service refuses the fence row (another writer changed it:
//!   412, 409 or 404 on operation 0), nothing was applied; the fence row is
//!   read again. A newer epoch: [`Error::LeaseLost`], and every later write
//!   of this fence is refused before sending. The same epoch (another fence
//!   of this epoch wrote in between): the write is sent again with the ETag
//!   read, after a pause, as often as the store's
//!   [`ConflictRetry`](crate::ConflictRetry) allows.
//!
//! An older epoch can never replace a newer epoch's fence row: it would
//! need the row's current ETag, which it only gets by reading the row, and
//! a read showing a newer epoch refuses the write. So once a newer epoch
//! has written a partition, every write of an older epoch to it is refused
//! by the service. Writes of one fence to one partition are sent one at a
//! time (they would race on the fence row's ETag anyway); writes to
//! different partitions run in parallel.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use tracing::Instrument as _;

use crate::backend::delegate::{Writes, delegate_backend};
use crate::backend::{
    Backend, Precondition, StoredEntity, TableBackend, TableOp, Version, Wrap, WriteOptions,
    validate_batch,
};
use crate::entity::{EntityData, Properties, Value};
use crate::error::{Error, ErrorKind, Result};
use crate::key::{ETag, PartitionKey, RowKey, TableName};
use crate::retry::ConflictRetry;

/// The row-key prefix reserved for fence rows. Typed queries and scans of a
/// [`Table`](crate::Table) leave such rows out, and a fenced table refuses
/// to write one as data.
pub(crate) const FENCE_ROW_PREFIX: &str = "~lhfence~";

/// The fence row's epoch property.
const EPOCH_PROPERTY: &str = "_lhFenceEpoch";

/// The fence row's lease-name property (for people reading the table).
const LEASE_PROPERTY: &str = "_lhFenceLease";

/// Whether `row_key` is a fence row's.
pub(crate) fn is_fence_row(row_key: &str) -> bool {
    row_key.starts_with(FENCE_ROW_PREFIX)
}

/// One epoch of one lease, as a writer of table rows: a [`Table`] opened
/// with [`Table::fenced`] sends each write together with the partition's
/// fence row, and the **service** refuses it once a fence of a later epoch
/// of the same lease has written that partition.
///
/// Get one from the lease: [`LeaseGuard::fence`] (advances the epoch) or
/// [`LeaderContext::fence`] (the term's epoch). Clones share what the fence
/// knows (one fence-row ETag per partition written, kept as long as the
/// fence lives), so give clones to the tasks doing the leader's writes.
///
/// **Cost:** each write is one entity-group transaction holding one extra
/// operation (the fence row), so a fenced batch holds at most 99 operations
/// of yours; a single write becomes a one-request transaction too. The first
/// write of a fence to a partition reads the fence row first: one read per
/// partition per epoch. Reads and queries are not fenced and cost nothing
/// extra.
///
/// **Errors:** a write refused because of the fence is [`Error::LeaseLost`]
/// (its `code` is the service's, such as `UpdateConditionNotSatisfied`,
/// when the service refused it; `None` when it was refused before sending),
/// never [`Error::Conflict`], which stays the error of a stale data row.
///
/// **Layout:** one fence row per lease in each partition written, row key
/// `~lhfence~` and the lease name; typed queries and scans of the table
/// leave such rows out, and a fenced table refuses data rows whose key
/// starts with `~lhfence~`. Do not delete fence rows while an older holder
/// may still write: a deleted fence row forgets which epoch wrote last.
/// Reads do not check the fence, and the fence does not check the lease's
/// validity: the service decides (check [`LeaseStatus::ensure_valid`]
/// before work you want to stop sooner).
///
/// **Lost replies:** a fenced transaction whose reply is lost is read back
/// like any transaction. When it was not applied it is sent again; when it
/// was, the fence row (conditioned on its ETag, its content the same for
/// every write of the epoch) cannot prove it was this write, so the write
/// fails with [`Error::Transient`] saying its outcome is unknown (the next
/// write reads the fence row again).
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
    inner: Arc<FenceInner>,
}

struct FenceInner {
    lease: String,
    epoch: u64,
    row_key: RowKey,
    state: Mutex<FenceState>,
}

/// What a fence knows of the partitions it wrote.
#[derive(Default)]
struct FenceState {
    /// Per (table, partition): the fence row's ETag as this fence last
    /// wrote it (`None`: unknown, read it first). The async lock makes the
    /// fence's writes to one partition go one at a time.
    partitions: HashMap<(TableName, PartitionKey), Arc<tokio::sync::Mutex<Option<ETag>>>>,
    /// A later epoch seen on a fence row: every write is refused.
    superseded: Option<u64>,
}

impl fmt::Debug for Fence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fence")
            .field("lease", &self.inner.lease)
            .field("epoch", &self.inner.epoch)
            .field("superseded_by", &self.superseded_by())
            .finish_non_exhaustive()
    }
}

impl Fence {
    /// A fence for epoch `epoch` of the lease named `lease` (a valid lease
    /// name).
    ///
    /// # Errors
    /// [`Error::Invalid`] when the lease name is too long for a row key once
    /// encoded, or the epoch is beyond `i64::MAX`.
    pub(crate) fn new(lease: &str, epoch: u64) -> Result<Fence> {
        if i64::try_from(epoch).is_err() {
            return Err(Error::invalid(
                format!("fencing epoch {epoch} of lease {lease:?}"),
                "is beyond i64::MAX and cannot be stored as Edm.Int64",
            ));
        }
        let mut key = String::from(FENCE_ROW_PREFIX);
        for c in lease.chars() {
            if matches!(c, '%' | '/' | '\\' | '#' | '?') || c.is_control() {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    key.push_str(&format!("%{b:02X}"));
                }
            } else {
                key.push(c);
            }
        }
        let row_key = RowKey::new(key).map_err(|e| {
            Error::invalid(
                format!("lease name {lease:?} as a fence row key"),
                e.to_string(),
            )
        })?;
        Ok(Fence {
            inner: Arc::new(FenceInner {
                lease: lease.to_owned(),
                epoch,
                row_key,
                state: Mutex::new(FenceState::default()),
            }),
        })
    }

    /// The name of the lease this fence belongs to.
    pub fn lease(&self) -> &str {
        &self.inner.lease
    }

    /// The fence's epoch.
    pub fn epoch(&self) -> u64 {
        self.inner.epoch
    }

    /// The later epoch this fence has seen on a fence row, if any: from then
    /// on every write through it is refused before sending.
    pub fn superseded_by(&self) -> Option<u64> {
        self.state().superseded
    }

    fn state(&self) -> std::sync::MutexGuard<'_, FenceState> {
        // The state stays consistent at every step; a poisoned lock is moot.
        self.inner
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The lock and cached ETag of one partition's fence row.
    fn slot(&self, table: &TableName, pk: &PartitionKey) -> Arc<tokio::sync::Mutex<Option<ETag>>> {
        self.state()
            .partitions
            .entry((table.clone(), pk.clone()))
            .or_default()
            .clone()
    }

    /// The error of a write refused because epoch `newer` wrote.
    fn fenced_out(
        &self,
        table: &TableName,
        pk: &PartitionKey,
        newer: u64,
        code: Option<&str>,
    ) -> Error {
        Error::LeaseLost {
            what: format!(
                "fenced write to partition {:?} of table `{table}`: epoch {} of lease {:?} is superseded by epoch {newer}",
                pk.as_str(),
                self.inner.epoch,
                self.inner.lease,
            ),
            code: code.map(str::to_owned),
        }
    }

    /// Refuses before sending once a later epoch was seen.
    fn check_current(&self, table: &TableName, pk: &PartitionKey) -> Result<()> {
        match self.superseded_by() {
            Some(newer) => Err(self.fenced_out(table, pk, newer, None)),
            None => Ok(()),
        }
    }

    /// Checks the operations of one fenced write before anything is sent.
    fn check_ops(&self, table: &TableName, ops: &[TableOp]) -> Result<()> {
        if ops.len() >= TableOp::MAX_BATCH_OPS {
            return Err(Error::invalid(
                format!("fenced batch on table `{table}`"),
                format!(
                    "has {} operations; a fenced batch holds at most {}, the fence row being one more",
                    ops.len(),
                    TableOp::MAX_BATCH_OPS - 1
                ),
            ));
        }
        if let Some(op) = ops.iter().find(|op| is_fence_row(op.row_key().as_str())) {
            return Err(Error::invalid(
                format!(
                    "row key {:?} of a fenced write to table `{table}`",
                    op.row_key().as_str()
                ),
                format!("row keys starting with `{FENCE_ROW_PREFIX}` are reserved for fence rows"),
            ));
        }
        Ok(())
    }

    /// Reads the fence row of `pk`: `Ok(None)` when absent, its ETag when
    /// it carries this epoch or an older one; [`Error::LeaseLost`] (and the
    /// fence marked superseded) when it carries a newer one. `code` is the
    /// service's code of the refusal that made the read needed, if any.
    async fn read(
        &self,
        backend: &dyn TableBackend,
        table: &TableName,
        pk: &PartitionKey,
        code: Option<&str>,
    ) -> Result<Option<ETag>> {
        let Some(stored) = backend.get(table, pk, &self.inner.row_key).await? else {
            tracing::debug!("no fence row yet");
            return Ok(None);
        };
        let epoch = stored_epoch(&stored)?;
        if epoch > self.inner.epoch {
            let mut state = self.state();
            state.superseded = Some(state.superseded.map_or(epoch, |e| e.max(epoch)));
            drop(state);
            tracing::warn!(newer = epoch, "fenced out by a later epoch");
            return Err(self.fenced_out(table, pk, epoch, code));
        }
        tracing::debug!(stored = epoch, "fence row read");
        Ok(Some(stored.etag))
    }

    /// The fence row operation: insert when absent, else replace on `etag`.
    fn fence_op(&self, pk: &PartitionKey, etag: Option<ETag>) -> TableOp {
        let mut properties = Properties::with_capacity(2);
        // `new` checked that the epoch fits.
        let epoch = i64::try_from(self.inner.epoch).unwrap_or(i64::MAX);
        properties.insert(EPOCH_PROPERTY, Value::Int64(epoch));
        properties.insert(LEASE_PROPERTY, Value::String(self.inner.lease.clone()));
        let data = EntityData {
            partition_key: pk.clone(),
            row_key: self.inner.row_key.clone(),
            properties,
        };
        match etag {
            None => TableOp::Insert(data),
            Some(etag) => TableOp::Replace(data, Precondition::IfMatch(etag)),
        }
    }

    /// Sends `ops` (one partition) as one transaction with the fence row;
    /// returns their versions (the fence row's left out) and maps a failing
    /// index back to `ops`.
    async fn write(
        &self,
        backend: &dyn TableBackend,
        races: &ConflictRetry,
        table: &TableName,
        ops: &[TableOp],
    ) -> Result<Vec<Option<Version>>> {
        self.check_ops(table, ops)?;
        let Some(first) = ops.first() else {
            return Err(Error::invalid(
                format!("fenced batch on table `{table}`"),
                "is empty",
            ));
        };
        let pk = first.partition_key().clone();
        let span = tracing::debug_span!(
            "leasehold.fence",
            table = %table,
            partition = %pk,
            lease = %self.inner.lease,
            epoch = self.inner.epoch,
            ops = ops.len()
        );
        async {
            self.check_current(table, &pk)?;
            let slot = self.slot(table, &pk);
            let mut known = slot.lock().await;
            // The condition of the next attempt: `Some(etag)` to replace,
            // `None` to insert; read when nothing is known.
            let mut condition = match known.take() {
                Some(etag) => Some(etag),
                None => {
                    self.check_current(table, &pk)?;
                    self.read(backend, table, &pk, None).await?
                }
            };
            let mut attempts = 0;
            let mut delays = races.backoff();
            loop {
                self.check_current(table, &pk)?;
                let mut all = Vec::with_capacity(ops.len() + 1);
                all.push(self.fence_op(&pk, condition.take()));
                all.extend(ops.iter().cloned());
                validate_batch(table.as_str(), &all)?;
                attempts += 1;
                match backend.batch(table, &all).await {
                    Ok(mut versions) if versions.len() == all.len() => {
                        *known = versions.remove(0).map(|v| v.etag);
                        return Ok(versions);
                    }
                    Ok(versions) => {
                        return Err(Error::client(format!(
                            "a fenced batch of {} operations returned {} results",
                            all.len(),
                            versions.len()
                        )));
                    }
                    Err(Error::Batch { index: 0, source })
                        if matches!(
                            source.kind(),
                            ErrorKind::Conflict | ErrorKind::AlreadyExists | ErrorKind::NotFound
                        ) && source.code() != Some("TableNotFound") =>
                    {
                        // Another writer changed the fence row; nothing was
                        // applied. Whose epoch is it now?
                        condition = self.read(backend, table, &pk, source.code()).await?;
                        let Some(delay) = delays.next() else {
                            return Err(Error::Conflict {
                                what: format!(
                                    "fence row of lease {:?} in partition {:?} of table `{table}`: other writers of epoch {} changed it before each of {attempts} attempts",
                                    self.inner.lease,
                                    pk.as_str(),
                                    self.inner.epoch
                                ),
                                code: source.code().map(str::to_owned),
                                table: Some(table.to_string()),
                                row: Some(Box::new((pk.clone(), self.inner.row_key.clone()))),
                            });
                        };
                        tracing::debug!(attempts, "fence row changed by this epoch; sending again");
                        tokio::time::sleep(delay).await;
                    }
                    // An operation of the caller's failed: nothing was
                    // applied, the fence row's ETag is still current.
                    Err(Error::Batch { index, source }) => {
                        return Err(match index.checked_sub(1) {
                            Some(index) => {
                                *known = all_etag(&all);
                                Error::Batch { index, source }
                            }
                            None => *source,
                        });
                    }
                    // Not sent, or the outcome is unknown: read the fence row
                    // again next time.
                    Err(e) => return Err(e),
                }
            }
        }
        .instrument(span)
        .await
    }
}

/// The ETag the fence row operation of `all` was conditioned on (the
/// fence row's current one when the transaction failed on another
/// operation), `None` for an insert.
fn all_etag(all: &[TableOp]) -> Option<ETag> {
    match all.first() {
        Some(TableOp::Replace(_, Precondition::IfMatch(etag))) => Some(etag.clone()),
        _ => None,
    }
}

/// The epoch a fence row carries.
fn stored_epoch(stored: &StoredEntity) -> Result<u64> {
    let epoch = match stored.data.properties.get(EPOCH_PROPERTY) {
        Some(Value::Int64(epoch)) => u64::try_from(*epoch).ok(),
        _ => None,
    };
    epoch.ok_or_else(|| Error::Inconsistent {
        what: format!(
            "fence row {:?} of partition {:?} has no valid `{EPOCH_PROPERTY}`",
            stored.data.row_key.as_str(),
            stored.data.partition_key.as_str()
        ),
    })
}

/// The fence as a [`Layer`]: the backend it makes sends every write of a
/// fenced [`Table`](crate::Table) through the [`Fence`]; every other
/// request goes to the backend below.
#[derive(Debug, Clone)]
pub(crate) struct FenceLayer {
    fence: Fence,
    /// How races with fences of the same epoch are retried.
    races: ConflictRetry,
}

impl FenceLayer {
    pub(crate) fn new(fence: Fence, races: ConflictRetry) -> Self {
        FenceLayer { fence, races }
    }
}

impl Wrap for FenceLayer {
    fn layer(&self, inner: Arc<dyn Backend>) -> Arc<dyn Backend> {
        Arc::new(FencedWrites {
            inner,
            fence: self.fence.clone(),
            races: self.races.clone(),
        })
    }
}

/// A backend whose writes go through a [`Fence`] (see [`FenceLayer`]).
struct FencedWrites<B> {
    inner: B,
    fence: Fence,
    races: ConflictRetry,
}

impl<B: TableBackend> Writes for FencedWrites<B> {
    /// One fenced write: its version, or its own error (not wrapped in
    /// [`Error::Batch`]). A lost reply is settled as a transaction's, not
    /// by the write log.
    async fn execute(
        &self,
        table: &TableName,
        op: TableOp,
        _: &WriteOptions,
    ) -> Result<Option<Version>> {
        match self
            .fence
            .write(&self.inner, &self.races, table, std::slice::from_ref(&op))
            .await
        {
            Ok(mut versions) => Ok(versions.pop().flatten()),
            Err(Error::Batch { source, .. }) => Err(*source),
            Err(e) => Err(e),
        }
    }

    /// A fenced entity-group transaction: the fence row's operation goes
    /// with `ops`.
    async fn batch(&self, table: &TableName, ops: &[TableOp]) -> Result<Vec<Option<Version>>> {
        self.fence.write(&self.inner, &self.races, table, ops).await
    }
}

impl<B: fmt::Debug> fmt::Debug for FencedWrites<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FencedWrites")
            .field("inner", &self.inner)
            .field("fence", &self.fence)
            .finish_non_exhaustive()
    }
}

delegate_backend!(FencedWrites, own writes);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fence_row_keys_encode_the_characters_keys_forbid() {
        let fence = Fence::new("jobs/a%b#c?d\\e\u{1}f", 3).unwrap();
        assert_eq!(
            fence.inner.row_key.as_str(),
            "~lhfence~jobs%2Fa%25b%23c%3Fd%5Ce%01f"
        );
        assert!(is_fence_row(fence.inner.row_key.as_str()));
        assert!(!is_fence_row("lhfence"));
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

    #[test]
    fn the_fence_row_is_inserted_when_absent_and_replaced_on_its_etag() {
        let fence = Fence::new("l", 7).unwrap();
        let pk = PartitionKey::new("p").unwrap();
        let TableOp::Insert(data) = fence.fence_op(&pk, None) else {
            panic!("an insert");
        };
        assert_eq!(data.properties.get(EPOCH_PROPERTY), Some(&Value::Int64(7)));
        assert_eq!(
            data.properties.get(LEASE_PROPERTY),
            Some(&Value::String("l".into()))
        );
        let etag = ETag::new("W/\"1\"");
        assert!(matches!(
            fence.fence_op(&pk, Some(etag.clone())),
            TableOp::Replace(_, Precondition::IfMatch(e)) if e == etag
        ));
    }
}
