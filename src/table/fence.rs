//! Fenced writes: every write of a [fenced](crate::Table::fenced)
//! [`Table`](crate::Table) goes as one entity-group transaction, the
//! partition's fence row (layout: `crate::rows::fence`) first.
//!
//! * A fence's first write to a partition reads the fence row: absent, the
//!   transaction inserts it; at this epoch or an older one, replaces it at
//!   the ETag read; at a newer epoch, the write is refused unsent.
//! * After each applied transaction the fence keeps the row's new ETag for
//!   the next write to the partition: no read.
//! * When the service refuses the fence row (operation 0), nothing was
//!   applied and the row is read again: a newer epoch is
//!   [`Error::LeaseLost`], for this write and every later one; the same
//!   epoch (another fence of it wrote) is sent again at the ETag read, as
//!   often as the store's [`ConflictRetry`](crate::ConflictRetry) allows.
//!
//! An older epoch never replaces a newer epoch's fence row: it would need
//! the row's current ETag, which only a read gives, and a read showing a
//! newer epoch refuses the write. Writes of one fence to one partition go
//! one at a time.

use std::fmt;
use tracing::Instrument as _;

use crate::backend::delegate::{Writes, delegate_backend};
use crate::backend::{Precondition, TableBackend, TableOp, Version, WriteOptions, validate_batch};
use crate::error::{Error, Result};
use crate::key::{ETag, PartitionKey, TableName};
use crate::lease::Fence;
use crate::retry::ConflictRetry;

use crate::rows::fence::is_fence_row;
use crate::rows::fence::{self as layout, ROW_PREFIX};

impl Fence {
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
                self.epoch,
                self.lease,
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
                format!("row keys starting with `{ROW_PREFIX}` are reserved for fence rows"),
            ));
        }
        Ok(())
    }

    /// Reads the fence row of `pk`: its ETag, `None` when absent;
    /// [`Error::LeaseLost`] (the fence marked superseded) at a newer epoch,
    /// with `code`, the refusal's that made the read needed.
    async fn read(
        &self,
        backend: &dyn TableBackend,
        table: &TableName,
        pk: &PartitionKey,
        code: Option<&str>,
    ) -> Result<Option<ETag>> {
        let Some(stored) = backend.get(table, pk, &self.row_key).await? else {
            tracing::debug!("no fence row yet");
            return Ok(None);
        };
        let epoch = layout::epoch_of(&stored)?;
        if epoch > self.epoch {
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
        // `new` checked that the epoch fits.
        let epoch = i64::try_from(self.epoch).unwrap_or(i64::MAX);
        let data = layout::data(pk, &self.row_key, &self.lease, epoch);
        match etag {
            None => TableOp::Insert(data),
            Some(etag) => TableOp::Replace(data, Precondition::IfMatch(etag)),
        }
    }

    /// Sends `ops` (one partition) as one transaction with the fence row;
    /// versions and a failing index are `ops`'.
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
            lease = %self.lease,
            epoch = self.epoch,
            ops = ops.len()
        );
        async {
            self.check_current(table, &pk)?;
            let slot = self.slot(table, &pk);
            let mut known = slot.lock().await;
            // `Some(etag)` to replace, `None` to insert.
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
                let sent = condition.take();
                let mut all = Vec::with_capacity(ops.len() + 1);
                all.push(self.fence_op(&pk, sent.clone()));
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
                        if super::lost_race(&source) && source.code() != Some("TableNotFound") =>
                    {
                        // Another writer changed the fence row; nothing was
                        // applied. Whose epoch is it now?
                        condition = self.read(backend, table, &pk, source.code()).await?;
                        let Some(delay) = delays.next() else {
                            return Err(Error::Conflict {
                                what: format!(
                                    "fence row of lease {:?} in partition {:?} of table `{table}`: other writers of epoch {} changed it before each of {attempts} attempts",
                                    self.lease,
                                    pk.as_str(),
                                    self.epoch
                                ),
                                code: source.code().map(str::to_owned),
                                table: Some(table.to_string()),
                                row: Some(Box::new((pk.clone(), self.row_key.clone()))),
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
                                *known = sent;
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

/// The writer of a [fenced](crate::Table::fenced) table.
pub(super) struct FencedWrites<B> {
    pub(super) inner: B,
    pub(super) fence: Fence,
    /// Retries races with fences of the same epoch.
    pub(super) races: ConflictRetry,
}

impl<B: TableBackend> Writes for FencedWrites<B> {
    /// One fenced write, its error not wrapped in [`Error::Batch`]. A lost
    /// reply is settled as a transaction's, not by the write log.
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
    fn the_fence_row_is_inserted_when_absent_and_replaced_on_its_etag() {
        let fence = Fence::new("l", 7).unwrap();
        let pk = PartitionKey::new("p").unwrap();
        let TableOp::Insert(data) = fence.fence_op(&pk, None) else {
            panic!("an insert");
        };
        assert_eq!(
            data.properties.get(layout::EPOCH),
            Some(&crate::entity::Value::Int64(7))
        );
        assert_eq!(
            data.properties.get(layout::LEASE),
            Some(&crate::entity::Value::String("l".into()))
        );
        let etag = ETag::new("W/\"1\"");
        assert!(matches!(
            fence.fence_op(&pk, Some(etag.clone())),
            TableOp::Replace(_, Precondition::IfMatch(e)) if e == etag
        ));
    }
}
