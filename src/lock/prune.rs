//! Pruning lock blobs ([`Store::prune_locks`](crate::Store::prune_locks)):
//! deleting the lock blobs of partitions nobody has locked for a while, so
//! that the lock container does not grow with every partition ever locked
//! (free, clean and old, each checked again and deleted under its own
//! lease: see `crate::lease`'s pruning), and the rows commits leave
//! behind (see `leftovers.rs`).

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use tracing::Instrument as _;

use super::env::LockEnv;
use crate::error::{Error, Result};
use crate::key::PartitionKey;
use crate::lease::LeaseName;
use crate::lease::prune::{Age, Verdict, examine};

/// How many lock blobs are examined at once.
const CONCURRENCY: usize = 8;

/// What [`Store::prune_locks`](crate::Store::prune_locks) did, or what
/// [`Store::prune_locks_dry_run`](crate::Store::prune_locks_dry_run) found
/// it would do.
///
/// Every lock blob examined is counted once: `examined` = `deleted` +
/// `kept_held` + `kept_pending` + `kept_recent`. (A blob deleted by
/// somebody else between the listing and its examination is not counted.)
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PruneReport {
    /// Whether nothing was taken or deleted: `deleted` and
    /// `deleted_partitions` say what a prune would delete now.
    pub dry_run: bool,
    /// The store's lock blobs examined.
    pub examined: usize,
    /// Lock blobs deleted (with their wait queues).
    pub deleted: usize,
    /// Kept because somebody held the lock, took it first, or waited for it
    /// in its wait queue.
    pub kept_held: usize,
    /// Kept because the blob carries a record this leasehold does not
    /// write into lock blobs (or cannot read): another program's or a newer
    /// leasehold's, an operator's business.
    pub kept_pending: usize,
    /// Kept because the lock was taken over within `older_than` (or it
    /// could not be dated yet; see
    /// [`Store::prune_locks`](crate::Store::prune_locks)).
    pub kept_recent: usize,
    /// Decision rows of finished commits removed (counted, for a dry run):
    /// committed ones older than `older_than` whose marks are all gone,
    /// withdrawn ones older than that and than the time a late commit
    /// point may take to land (see [`crate::lock`]'s "Rows commits leave
    /// behind").
    pub decision_rows_deleted: usize,
    /// After-image rows removed with their commit's decision row, or of a
    /// commit never decided, older than that bound.
    pub after_image_rows_deleted: usize,
    /// The partition keys of the deleted lock blobs, in lock-name order.
    /// A key too long for a lease name has a hashed lock name that does not
    /// give the key back: its blob is counted in `deleted` only.
    pub deleted_partitions: Vec<PartitionKey>,
}

/// See [`Store::prune_locks`](crate::Store::prune_locks) and
/// [`Store::prune_locks_dry_run`](crate::Store::prune_locks_dry_run).
pub(crate) async fn prune_locks(
    env: &Arc<LockEnv>,
    older_than: Duration,
    dry_run: bool,
) -> Result<PruneReport> {
    let age = Age::new(older_than)?;
    let prefix = super::name::lock_prefix(env.table_prefix());
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
        let mut report = PruneReport {
            dry_run,
            ..PruneReport::default()
        };
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
        }
        let removed = super::leftovers::prune(env, age.cutoff, dry_run).await?;
        report.decision_rows_deleted = removed.decision_rows;
        report.after_image_rows_deleted = removed.after_image_rows;
        tracing::info!(
            decision_rows = removed.decision_rows,
            after_image_rows = removed.after_image_rows,
            examined = report.examined,
            deleted = report.deleted,
            kept_held = report.kept_held,
            kept_pending = report.kept_pending,
            kept_recent = report.kept_recent,
            "pruned lock blobs"
        );
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
