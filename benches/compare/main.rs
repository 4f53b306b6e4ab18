//! leasehold against its baselines, on Azurite: `scripts/bench.sh` runs this
//! program and turns its output into `BENCHMARKS.md`.
//!
//! Every figure is a ratio against a baseline measured in the same run, with
//! the two sides interleaved, each round's order tossed (`setup::a_first`),
//! so that drift and noise from other work on the machine fall on both sides
//! alike.
//!
//! Environment:
//! * `LEASEHOLD_TEST_AZURITE` — connection string of a running Azurite (set by
//!   `scripts/with-azurite.sh`);
//! * `LEASEHOLD_BENCH_SCALE` — multiplies every iteration count and time
//!   bound (default 1; the default run takes a few minutes);
//! * `LEASEHOLD_BENCH_OUT` — where to write the Markdown results (default
//!   stdout).
//!
//! One module per section (`per_op`, `codec`, `units`, `hot`, `handoff`,
//! `memory`, `indexes`, `across`, `purge`, `transfer`; `txn`, the transactions of
//! section 3, beside `units`), plus the shared `setup`, `stats`, `report` and
//! `stopwatch` (timing hooks: a layer and a pipeline policy); the program
//! uses only leasehold's public API (the codec section reaches the wire
//! form through the hidden `leasehold::__private` hooks meant for it).

use std::fmt::Write as _;
use std::time::Instant;

use leasehold::entity::Entity as _;

mod across;
mod codec;
mod handoff;
mod hot;
mod indexes;
mod memory;
mod per_op;
mod purge;
mod raw;
mod report;
mod setup;
mod stats;
mod stopwatch;
mod transfer;
mod txn;
mod units;

use across::{WORKER, across_processes, across_worker};
use codec::codec;
use handoff::{Waiter, handoff, handoff_child};
use hot::hot_partition;
use indexes::indexes;
use memory::memory_vs_azurite;
use per_op::per_operation;
use purge::purge;
use report::Report;
use setup::{Env, Sample, round_trip_now};
use stats::median;
use transfer::transfer;
use units::locked_units;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub(crate) type Res<T> = std::result::Result<T, BoxError>;

#[tokio::main]
async fn main() -> Res<()> {
    if let Ok(spec) = std::env::var(WORKER) {
        return across_worker(spec).await;
    }
    if let Ok(mode) = std::env::var("LEASEHOLD_BENCH_CHILD") {
        let mode = if mode == "Leasehold" {
            Waiter::Leasehold
        } else {
            Waiter::Random
        };
        return handoff_child(mode, std::env::var("LEASEHOLD_BENCH_LEASE")?).await;
    }
    let conn_str = std::env::var("LEASEHOLD_TEST_AZURITE")
        .map_err(|_| "LEASEHOLD_TEST_AZURITE is not set: run scripts/bench.sh")?;
    let scale = std::env::var("LEASEHOLD_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .unwrap_or(1.0);
    let env = Env {
        raw: raw::RawTables::connect(&conn_str)?,
        conn_str,
        scale,
    };
    env.raw.create_table(Sample::TABLE).await?;
    // `LEASEHOLD_BENCH_ONLY=codec,handoff` runs only the named sections
    // (per-op, codec, units, hot, memory, handoff, indexes, across, purge,
    // transfer).
    let only = std::env::var("LEASEHOLD_BENCH_ONLY").ok();
    let run = |section: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|s| s.trim() == section))
    };
    let started = Instant::now();
    let mut report = Report::default();
    let rtt = if run("per-op") {
        per_operation(&env, &mut report).await?
    } else {
        median(&round_trip_now(&env, 50).await?)
    };
    if run("codec") {
        codec(&env, &mut report, rtt)?;
    }
    if run("units") {
        locked_units(&env, &mut report).await?;
    }
    if run("hot") {
        hot_partition(&env, &mut report).await?;
    }
    if run("memory") {
        memory_vs_azurite(&env, &mut report).await?;
    }
    if run("handoff") {
        handoff(&env, &mut report).await?;
    }
    if run("indexes") {
        indexes(&env, &mut report).await?;
    }
    if run("across") {
        across_processes(&env, &mut report).await?;
    }
    if run("purge") {
        purge(&env, &mut report).await?;
    }
    if run("transfer") {
        transfer(&env, &mut report).await?;
    }
    report.detail(format!(
        "Scale {scale}; whole benchmark {:.0} s.",
        started.elapsed().as_secs_f64()
    ));

    let mut md = report.markdown();
    if let Some(svg) = &report.svg {
        let path = std::env::var("LEASEHOLD_BENCH_SVG").unwrap_or_else(|_| "scaling.svg".into());
        std::fs::write(&path, svg)?;
        let _ = writeln!(
            md,
            "\n![locked units per second by partitions]({})",
            path.rsplit('/').next().unwrap_or("scaling.svg")
        );
    }
    match std::env::var("LEASEHOLD_BENCH_OUT") {
        Ok(path) => std::fs::write(path, md)?,
        Err(_) => print!("{md}"),
    }
    Ok(())
}
