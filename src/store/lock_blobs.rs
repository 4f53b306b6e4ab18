//! The sweep's lock blobs and commit rows (see "Lock blobs" and "Rows
//! commits leave behind" in `crate::lock`).

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;

use crate::error::{Error, Result};
use crate::key::{PartitionKey, TableName};
use crate::lease::LeaseName;
use crate::lease::prune::{Age, Verdict, examine};
use crate::lock::LockEnv;
use crate::store::SweepReport;

/// How many lock blobs are examined at once.
const CONCURRENCY: usize = 8;

/// How many lock blobs are examined between two calls of the progress
/// callback.
const PROGRESS_EVERY: u64 = 100;

/// Deletes (for a `dry_run`, counts) the lock blobs, then the commit rows
/// of `tables`, the sweep removes, counting them in `report`; calls
/// `progress` every [`PROGRESS_EVERY`] lock blobs (the partitions come at
/// the end). Traced in the sweep's span.
pub(crate) async fn prune_locks(
    env: &Arc<LockEnv>,
    tables: &[TableName],
    older_than: Duration,
    later: Duration,
    dry_run: bool,
    report: &mut SweepReport,
    progress: &mut (dyn FnMut(&SweepReport) + Send),
) -> Result<()> {
    let age = Age::new(older_than)?;
    let prefix = crate::table::lock_prefix(&env.table_prefix);
    // Without a prefix the listing holds other prefixes' locks too, whose
    // names have a `/` (see `lock_name`).
    let mut names = env.locks.list(&prefix).await?;
    names.retain(|n| partition_part(&prefix, n).is_some());
    let mut verdicts = futures_util::stream::iter(names)
        .map(|name| async move {
            let verdict = examine(&env.locks, &name, age, dry_run).await?;
            Ok::<_, Error>((name, verdict))
        })
        .buffered(CONCURRENCY);
    let mut partitions = Vec::new();
    while let Some(next) = verdicts.next().await {
        let (name, verdict) = next?;
        match verdict {
            Verdict::Deleted => {
                report.lock_blobs += 1;
                partitions.extend(partition_of(&prefix, &name));
            }
            Verdict::Held => report.lock_blobs_kept_held += 1,
            Verdict::Pending => report.lock_blobs_kept_pending += 1,
            Verdict::Recent => report.lock_blobs_kept_recent += 1,
            Verdict::Gone => continue,
        }
        report.lock_blobs_examined += 1;
        if report.lock_blobs_examined.is_multiple_of(PROGRESS_EVERY) {
            progress(report);
        }
    }
    let removed = crate::lock::prune_commit_rows(env, tables, age.cutoff, later, dry_run).await?;
    report.decision_rows = removed.decision_rows;
    report.after_image_rows = removed.after_image_rows;
    report.lock_blob_partitions = partitions;
    Ok(())
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
