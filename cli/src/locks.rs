//! `leasehold locks ...`: list, show and break partition locks, and settle
//! a commit's decision. (`leasehold sweep` removes the lock blobs of
//! partitions nobody locks any more.)

use leasehold::Store;
use leasehold::lease::LeaseDescription;
use leasehold::lock::{CommitOutcome, CommitSummary};
use leasehold::time::OffsetDateTime;
use leasehold::time::format_description::well_known::Rfc3339;
use serde_json::{Value, json};

use crate::args::LocksCommand;
use crate::failure::Failure;
use crate::leases::{break_lease, describe_all};
use crate::output::{Output, holder, lease_json, state_str};

/// Runs a `locks` command.
pub(crate) async fn run(store: &Store, command: LocksCommand, out: &Output) -> Result<(), Failure> {
    match command {
        LocksCommand::List => {
            // The lock names of the store: `{prefix}/{key}`, or the key
            // alone without a prefix (keys hold no `/`).
            let prefix = match store.table_prefix() {
                "" => String::new(),
                p => format!("{p}/"),
            };
            let mut names = store.locks().list(&prefix).await?;
            names.retain(|n| {
                n.as_str()
                    .strip_prefix(prefix.as_str())
                    .is_some_and(|key| !key.contains('/'))
            });
            let descriptions =
                describe_all(store.locks(), names.iter().map(|n| n.as_str()), out).await?;
            out.lock_list(&prefix, &descriptions);
        }
        LocksCommand::Show { partition } => {
            let partition_key = partition.partition_key;
            let name = store.lock_lease_name(partition_key.as_str())?;
            let d = store.locks().describe(name.as_str()).await?;
            let commits = store.list_commits(partition_key.as_str()).await?;
            if !d.exists && commits.is_empty() {
                return Err(Failure::not_found(format!(
                    "partition {partition_key:?} has no lock blob (it was never locked) and no commit left"
                )));
            }
            out.lock(&partition_key, &d, &commits);
        }
        LocksCommand::Break { partition, period } => {
            let partition_key = partition.partition_key;
            let name = store.lock_lease_name(partition_key.as_str())?;
            break_lease(store.locks(), name.as_str(), period, out).await?;
        }
        LocksCommand::Decide {
            partition,
            transaction,
        } => {
            let primary = partition.partition_key;
            let outcome = store.commit_outcome(primary.as_str(), &transaction).await?;
            out.decided(&primary, &transaction, outcome);
        }
    }
    Ok(())
}

fn commit_state(outcome: Option<CommitOutcome>) -> &'static str {
    match outcome {
        Some(CommitOutcome::Applied) => "committed",
        Some(CommitOutcome::NotApplied) => "withdrawn",
        None => "undecided",
        Some(_) => "unknown",
    }
}

fn commit_json(c: &CommitSummary, now: OffsetDateTime) -> Value {
    let marked: Vec<Value> = c
        .marked_rows
        .iter()
        .map(|(table, n)| json!({ "table": table.as_str(), "rows": n }))
        .collect();
    json!({
        "transaction": c.transaction,
        "state": commit_state(c.outcome),
        "primary": c.primary.as_str(),
        "decision_table": c.decision_table.as_str(),
        "since": c.since.format(&Rfc3339).ok(),
        "age_seconds": (now - c.since).whole_seconds().max(0),
        "marked_rows": marked,
    })
}

/// A duration as its two largest units: `45s`, `12m30s`, `3h05m`, `2d04h`.
fn age(d: leasehold::time::Duration) -> String {
    let s = d.whole_seconds().max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86_400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

/// The partition key of a lock in a listing, unless its name is hashed
/// (`/#...`, for a key too long for a lease name), which does not give the
/// key back.
fn partition_of(prefix: &str, d: &LeaseDescription) -> Option<String> {
    d.name
        .as_str()
        .strip_prefix(prefix)
        .filter(|k| !k.starts_with('#'))
        .map(str::to_owned)
}

impl Output {
    fn lock_list(&self, prefix: &str, all: &[LeaseDescription]) {
        let key = |d: &LeaseDescription| partition_of(prefix, d);
        if self.json {
            let locks: Vec<Value> = all
                .iter()
                .map(|d| {
                    let mut v = lease_json(d);
                    v["partition_key"] = json!(key(d));
                    v
                })
                .collect();
            out!("{}", json!({ "locks": locks }));
            return;
        }
        out!("{:<40} {:<10} HOLDER", "PARTITION", "STATE");
        for d in all {
            out!(
                "{:<40} {:<10} {}",
                key(d).unwrap_or_else(|| format!("({})", d.name.as_str())),
                state_str(d.state),
                holder(d).unwrap_or("-"),
            );
        }
        out!("{} locks", all.len());
    }

    fn lock(&self, partition_key: &str, d: &LeaseDescription, commits: &[CommitSummary]) {
        let now = OffsetDateTime::now_utc();
        if self.json {
            let mut v = lease_json(d);
            v["partition_key"] = json!(partition_key);
            v["commits"] = commits.iter().map(|c| commit_json(c, now)).collect();
            out!("{v}");
            return;
        }
        out!("partition     {partition_key}");
        out!("lock lease    {}", d.name.as_str());
        let state = if d.exists {
            state_str(d.state)
        } else {
            "no lock blob"
        };
        out!("state         {state}");
        out!("holder        {}", holder(d).unwrap_or("-"));
        out!("last holder   {}", d.owner.as_deref().unwrap_or("-"));
        out!("since         {}", d.acquired_at.as_deref().unwrap_or("-"));
        out!("commits       {}", commits.len());
        if commits.is_empty() {
            return;
        }
        let rows: Vec<[String; 5]> = commits
            .iter()
            .map(|c| {
                let marked: Vec<String> = c
                    .marked_rows
                    .iter()
                    .map(|(table, n)| format!("{table}:{n}"))
                    .collect();
                [
                    c.transaction.clone(),
                    commit_state(c.outcome).to_owned(),
                    format!("{}/{}", c.decision_table, c.primary.as_str()),
                    age(now - c.since),
                    if marked.is_empty() {
                        "-".into()
                    } else {
                        marked.join(",")
                    },
                ]
            })
            .collect();
        let header =
            ["TRANSACTION", "STATE", "DECISION ROW", "AGE", "MARKED ROWS"].map(String::from);
        let width = |i: usize| {
            rows.iter()
                .chain([&header])
                .map(|r| r[i].chars().count())
                .max()
                .unwrap_or(0)
        };
        let (w0, w1, w2, w3) = (width(0), width(1), width(2), width(3));
        for r in [&header].into_iter().chain(&rows) {
            out!(
                "{:<w0$}  {:<w1$}  {:<w2$}  {:>w3$}  {}",
                r[0],
                r[1],
                r[2],
                r[3],
                r[4]
            );
        }
    }

    fn decided(&self, primary: &str, transaction: &str, outcome: CommitOutcome) {
        let applied = outcome == CommitOutcome::Applied;
        if self.json {
            out!(
                "{}",
                json!({
                    "primary": primary,
                    "transaction": transaction,
                    "applied": applied,
                })
            );
            return;
        }
        if applied {
            out!(
                "transaction {transaction} (primary {primary}): committed; every write is applied (rows still marked are finished by their next read)"
            );
        } else {
            out!(
                "transaction {transaction} (primary {primary}): withdrawn; nothing of it is applied (marks left are taken off by their next read)"
            );
        }
    }
}
