//! `leasehold leases ...`: list, show and break leases.

use std::time::Duration;

use futures_util::StreamExt;
use leasehold::Store;
use leasehold::backend::LeaseState;
use leasehold::lease::{LeaseDescription, LeaseManager};
use serde_json::{Value, json};

use crate::args::LeasesCommand;
use crate::failure::Failure;
use crate::output::{Output, Tally, holder, lease_json, once_text, state_str};

/// Runs a `leases` command.
pub(crate) async fn run(
    store: &Store,
    command: LeasesCommand,
    out: &Output,
) -> Result<(), Failure> {
    match command {
        LeasesCommand::List { prefix } => {
            let leases = store.leases();
            let names = leases.list(&prefix).await?;
            let descriptions = describe_all(leases, names.iter().map(|n| n.as_str()), out).await?;
            out.lease_list(&descriptions);
        }
        LeasesCommand::Show { name } => {
            let d = store.leases().describe(&name).await?;
            if !d.exists {
                return Err(Failure::not_found(format!("no lease named {name:?}")));
            }
            out.lease(&d);
        }
        LeasesCommand::Break { name, period } => {
            break_lease(store.leases(), &name, period, out).await?;
        }
    }
    Ok(())
}

/// Describes every lease named, a few at a time, with a progress bar.
pub(crate) async fn describe_all<'a>(
    manager: &LeaseManager,
    names: impl ExactSizeIterator<Item = &'a str>,
    out: &Output,
) -> Result<Vec<LeaseDescription>, Failure> {
    let mut tally = Tally::of(out, "listing", "described", "leases").with_total(names.len() as u64);
    let mut described = futures_util::stream::iter(names)
        .map(|name| manager.describe(name))
        .buffered(8);
    let mut all = Vec::new();
    while let Some(d) = described.next().await {
        all.push(d?);
        tally.add(1);
    }
    tally.finish();
    Ok(all)
}

/// Breaks a lease unless it is already free.
pub(crate) async fn break_lease(
    manager: &LeaseManager,
    name: &str,
    period: u64,
    out: &Output,
) -> Result<(), Failure> {
    let d = manager.describe(name).await?;
    if !d.exists {
        return Err(Failure::not_found(format!("no lease named {name:?}")));
    }
    // An expired lease is not broken (that would mark it broken on the way
    // to the next holder); a lease released since the read is reported as
    // not held by the break itself.
    let left = if d.is_held() {
        manager
            .break_lease(name, Some(Duration::from_secs(period)))
            .await?
    } else {
        None
    };
    let was = match left {
        None if d.is_held() => LeaseState::Available,
        _ => d.state,
    };
    out.broken(name, was, left);
    Ok(())
}

impl Output {
    fn lease_list(&self, all: &[LeaseDescription]) {
        if self.json {
            let leases: Vec<Value> = all.iter().map(lease_json).collect();
            out!("{}", json!({ "leases": leases }));
            return;
        }
        out!(
            "{:<40} {:<10} {:<32} {:>6}",
            "NAME",
            "STATE",
            "HOLDER",
            "EPOCH"
        );
        for d in all {
            out!(
                "{:<40} {:<10} {:<32} {:>6}",
                d.name.as_str(),
                state_str(d.state),
                holder(d).unwrap_or("-"),
                d.epoch,
            );
        }
        out!("{} leases", all.len());
    }

    fn lease(&self, d: &LeaseDescription) {
        if self.json {
            out!("{}", lease_json(d));
            return;
        }
        out!("lease         {}", d.name.as_str());
        out!("state         {}", state_str(d.state));
        out!("holder        {}", holder(d).unwrap_or("-"));
        out!("last owner    {}", d.owner.as_deref().unwrap_or("-"));
        out!("acquired at   {}", d.acquired_at.as_deref().unwrap_or("-"));
        out!("epoch         {}", d.epoch);
        out!("run-once      {}", once_text(&d.once));
        out!("reservations  {} records", d.reservation_records);
    }
}
