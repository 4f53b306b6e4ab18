//! The sweep's lock blobs and commit rows (see "Lock blobs" and "Rows
//! commits leave behind" in `crate::lock`).

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use tracing::Instrument as _;

use crate::error::{Error, Result};
use crate::key::PartitionKey;
use crate::lease::LeaseName;
use crate::lease::prune::{Age, Verdict, examine};
use crate::lock::LockEnv;

/// How many lock blobs are examined at once.
const CONCURRENCY: usize = 8;

/// How many lock blobs are examined between two calls of the progress
/// callback.
const PROGRESS_EVERY: usize = 100;

/// What the prune of lock blobs and commit rows found (fields as in
/// [`SweepReport`](crate::store::SweepReport)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PruneReport {
    /// The store's lock blobs examined.
    pub(crate) examined: usize,
    /// Lock blobs deleted (with their wait queues).
    pub(crate) deleted: usize,
    /// Kept: held, taken first, or waited for.
    pub(crate) kept_held: usize,
    /// Kept: the blob carries a record this leasehold does not write.
    pub(crate) kept_pending: usize,
    /// Kept: taken over within `older_than`, or not datable yet.
    pub(crate) kept_recent: usize,
    /// Decision rows removed (counted, for a dry run).
    pub(crate) decision_rows_deleted: usize,
    /// After-image rows removed (counted, for a dry run).
    pub(crate) after_image_rows_deleted: usize,
    /// The partition keys of the deleted lock blobs, in lock-name order,
    /// but for hashed lock names (keys too long for a lease name).
    pub(crate) deleted_partitions: Vec<PartitionKey>,
}

/// Deletes (for a `dry_run`, counts) the lock blobs, then the commit rows,
/// the sweep removes; calls `progress` every [`PROGRESS_EVERY`] lock blobs.
pub(crate) async fn prune_locks(
    env: &Arc<LockEnv>,
    older_than: Duration,
    later: Duration,
    dry_run: bool,
    progress: &mut (dyn FnMut(&PruneReport) + Send),
) -> Result<PruneReport> {
    let age = Age::new(older_than)?;
    let prefix = crate::table::lock_prefix(env.table_prefix());
    let span = tracing::info_span!(
        "leasehold.prune_locks",
        prefix = %env.table_prefix(),
        ?older_than,
        dry_run
    );
    async {
        // Without a prefix the listing holds other prefixes' locks too,
        // whose names have a `/` (see `lock_name`).
        let mut names = env.locks().list(&prefix).await?;
        names.retain(|n| partition_part(&prefix, n).is_some());
        let mut verdicts = futures_util::stream::iter(names)
            .map(|name| async move {
                let verdict = examine(env.locks(), &name, age, dry_run).await?;
                Ok::<_, Error>((name, verdict))
            })
            .buffered(CONCURRENCY);
        let mut report = PruneReport::default();
        while let Some(next) = verdicts.next().await {
            let (name, verdict) = next?;
            match verdict {
                Verdict::Deleted => {
                    report.deleted += 1;
                    if let Some(pk) = partition_of(&prefix, &name) {
                        report.deleted_partitions.push(pk);
                    }
                }
                Verdict::Held => report.kept_held += 1,
                Verdict::Pending => report.kept_pending += 1,
                Verdict::Recent => report.kept_recent += 1,
                Verdict::Gone => continue,
            }
            report.examined += 1;
            if report.examined.is_multiple_of(PROGRESS_EVERY) {
                progress(&report);
            }
        }
        let removed = crate::lock::prune_commit_rows(env, age.cutoff, later, dry_run).await?;
        report.decision_rows_deleted = removed.decision_rows;
        report.after_image_rows_deleted = removed.after_image_rows;
        // The sweep's own event ("swept") carries these counts.
        Ok(report)
    }
    .instrument(span)
    .await
}

/// The partition key of lock `name` (with the store's `prefix/`), unless
/// its name is hashed.
fn partition_of(prefix: &str, name: &LeaseName) -> Option<PartitionKey> {
    partition_part(prefix, name)
        .filter(|k| !k.starts_with('#'))
        .and_then(|k| PartitionKey::new(k).ok())
}

/// Lock `name` after the store's `prefix`, when it is one of the store's.
fn partition_part<'a>(prefix: &str, name: &'a LeaseName) -> Option<&'a str> {
    name.as_str()
        .strip_prefix(prefix)
        .filter(|k| !k.contains('/'))
}
