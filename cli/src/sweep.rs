//! `leasehold sweep`: removes what leasehold leaves behind once nothing
//! relies on it ([`Store::sweep`]), rows past their expiry included,
//! showing the rows read and then the lock blobs examined as it goes, and
//! at the end the partitions whose lock blobs it removed and what it
//! removed and kept per kind; with `--follow`, every so often under the
//! store's sweeper lease ([`Store::run_sweeper`]), a report per round.

use clap::Args;
use leasehold::Store;
use leasehold::lease::LeaderOptions;
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
    /// Keep sweeping, one round every `--every`, while this process holds
    /// the store's sweeper lease (one process of those sharing the storage
    /// sweeps at a time; the others wait to take over); one line per
    /// round. Runs until interrupted, or for `--rounds`.
    #[arg(long)]
    follow: bool,
    /// With `--follow`: the time between rounds (90s, 30m, 24h, 7d).
    #[arg(long, value_parser = crate::args::parse_duration, default_value = "5m", requires = "follow")]
    every: std::time::Duration,
    /// With `--follow`: stop after this many rounds.
    #[arg(long, requires = "follow")]
    rounds: Option<u64>,
}

/// Runs `leasehold sweep`.
pub(crate) async fn run(store: &Store, args: SweepArgs, out: &Output) -> Result<(), Failure> {
    let options = SweepOptions::new()
        .with_older_than(args.older_than)
        .with_dry_run(args.dry_run);
    if args.follow {
        return follow(store, &options, &args, out).await;
    }
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

/// `--follow`: [`Store::run_sweeper`], a line per round.
async fn follow(
    store: &Store,
    options: &SweepOptions,
    args: &SweepArgs,
    out: &Output,
) -> Result<(), Failure> {
    let stop = leasehold::CancellationToken::new();
    let leader = LeaderOptions::new().with_stop(stop.clone());
    let mut done = 0u64;
    store
        .run_sweeper(options, args.every, leader, |round| {
            match round {
                Ok(report) => print(out, report),
                Err(e) => out!("sweep: failed ({e}); the next round tries again"),
            }
            done += 1;
            if args.rounds.is_some_and(|n| done >= n) {
                stop.cancel();
            }
        })
        .await?;
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
