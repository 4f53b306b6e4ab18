//! `leasehold sweep`: removes what leasehold leaves behind once nothing
//! relies on it ([`Store::sweep`]), showing the rows read and then the lock
//! blobs examined as it goes, and at the end the partitions whose lock
//! blobs it removed and what it removed and kept per kind.

use clap::Args;
use leasehold::Store;
use leasehold::store::{SweepOptions, SweepReport};
use serde_json::json;

use crate::failure::Failure;
use crate::output::{Output, Tally};

/// `leasehold sweep`.
#[derive(Debug, Args)]
pub(crate) struct SweepArgs {
    /// Keep what is younger than this (lock blobs: locked within it): a
    /// number and a unit, s, m, h or d (`90s`, `30m`, `24h`, `7d`); `0s`
    /// takes every free, clean lock blob. Rows are kept at least as long as
    /// a write may still rely on them (25 minutes for tombstones and stale
    /// index rows), whatever is given.
    #[arg(long, value_parser = crate::args::parse_duration, default_value = "1h")]
    older_than: std::time::Duration,
    /// Only count what would be removed; take and delete nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Runs `leasehold sweep`.
pub(crate) async fn run(store: &Store, args: SweepArgs, out: &Output) -> Result<(), Failure> {
    let options = SweepOptions::new()
        .with_older_than(args.older_than)
        .with_dry_run(args.dry_run);
    let mut rows = Tally::new(out, "sweep", "read");
    // Shown once the lock blobs are examined, after the rows.
    let mut blobs: Option<Tally> = None;
    let report = store
        .sweep_with_progress(&options, |so_far| {
            if so_far.lock_blobs_examined == 0 {
                rows.set(so_far.rows_examined);
                return;
            }
            let blobs = blobs.get_or_insert_with(|| {
                rows.finish();
                Tally::of(out, "sweep", "examined", "lock blobs")
            });
            blobs.set(so_far.lock_blobs_examined);
        })
        .await;
    rows.finish();
    if let Some(blobs) = &blobs {
        blobs.finish();
    }
    print(out, &report?);
    Ok(())
}

fn print(out: &Output, r: &SweepReport) {
    if out.json {
        out!(
            "{}",
            json!({
                "dry_run": r.dry_run,
                "rows_examined": r.rows_examined,
                "tombstones": r.tombstones,
                "stale_index_rows": r.stale_index_rows,
                "decision_rows": r.decision_rows,
                "after_image_rows": r.after_image_rows,
                "lock_blobs": r.lock_blobs,
                "expired_rows": r.expired_rows,
                "kept": r.kept,
                "lock_blobs_examined": r.lock_blobs_examined,
                "lock_blob_partitions": r
                    .lock_blob_partitions
                    .iter()
                    .map(|k| k.as_str())
                    .collect::<Vec<_>>(),
                "lock_blobs_kept_held": r.lock_blobs_kept_held,
                "lock_blobs_kept_pending": r.lock_blobs_kept_pending,
                "lock_blobs_kept_recent": r.lock_blobs_kept_recent,
            })
        );
        return;
    }
    // The partitions whose lock blobs went (would go), one a line; a key
    // too long for a lease name is counted only.
    for key in &r.lock_blob_partitions {
        out!("{}", key.as_str());
    }
    out!("sweep: {r}");
}
