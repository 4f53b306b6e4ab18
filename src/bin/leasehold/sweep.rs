//! `leasehold sweep`: removes what leasehold leaves behind once nothing
//! relies on it ([`Store::sweep`]), showing the rows read as it goes and
//! what it removed per kind at the end.

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
    /// number and a unit, s, m, h or d (`90s`, `30m`, `24h`, `7d`). Rows
    /// are kept at least as long as a write may still rely on them (25
    /// minutes for tombstones and stale index rows), whatever is given.
    #[arg(long, value_parser = crate::args::parse_duration, default_value = "1h")]
    older_than: std::time::Duration,
    /// Only count what would be removed; delete nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Runs `leasehold sweep`.
pub(crate) async fn run(store: &Store, args: SweepArgs, out: &Output) -> Result<(), Failure> {
    let options = SweepOptions::new()
        .with_older_than(args.older_than)
        .with_dry_run(args.dry_run);
    let mut tally = Tally::new(out, "sweep", "read");
    let report = store
        .sweep_with_progress(&options, |so_far| tally.set(so_far.rows_examined))
        .await;
    tally.finish();
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
                "lock_blobs_examined": r.locks.examined,
            })
        );
        return;
    }
    out!("sweep: {r}");
}
