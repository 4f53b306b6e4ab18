//! `leasehold locks ...`: list, show and break partition locks, and roll
//! forward a commit a crashed holder left pending.

use std::time::Duration;

use leasehold::Store;
use leasehold::lease::LeaseDescription;
use leasehold::lock::{PendingCommit, RollForwardReport};
use serde_json::{Value, json};

use crate::args::LocksCommand;
use crate::failure::Failure;
use crate::leases::{break_lease, describe_all};
use crate::output::{Output, holder, lease_json, state_str};

/// Runs a `locks` command.
pub(crate) async fn run(store: &Store, command: LocksCommand, out: &Output) -> Result<(), Failure> {
    match command {
        LocksCommand::List => {
            let prefix = format!("{}/", store.table_prefix());
            let names = store.locks().list(&prefix).await?;
            let descriptions =
                describe_all(store.locks(), names.iter().map(|n| n.as_str()), out).await?;
            out.lock_list(&prefix, &descriptions);
        }
        LocksCommand::Show { partition_key } => {
            let name = store.lock_lease_name(partition_key.as_str())?;
            let d = store.locks().describe(name.as_str()).await?;
            if !d.exists {
                return Err(Failure::not_found(format!(
                    "partition {partition_key:?} has no lock blob (it was never locked)"
                )));
            }
            let pending = store.pending_commit(partition_key.as_str()).await?;
            out.lock(&partition_key, &d, pending.as_ref());
        }
        LocksCommand::Break {
            partition_key,
            period,
        } => {
            let name = store.lock_lease_name(partition_key.as_str())?;
            break_lease(store.locks(), name.as_str(), period, out).await?;
        }
        LocksCommand::RollForward {
            partition_key,
            break_lease: break_first,
            ..
        } => {
            let name = store.lock_lease_name(partition_key.as_str())?;
            let d = store.locks().describe(name.as_str()).await?;
            if !d.exists {
                return Err(Failure::not_found(format!(
                    "partition {partition_key:?} has no lock blob (it was never locked)"
                )));
            }
            if break_first && d.is_held() {
                store
                    .locks()
                    .break_lease(name.as_str(), Some(Duration::ZERO))
                    .await?;
                out.note(&format!("broke the lease of lock {name}"));
            }
            let report = store.roll_forward(partition_key.as_str()).await?;
            out.rolled_forward(&partition_key, report.as_ref());
        }
    }
    Ok(())
}

/// A pending commit as JSON: its partition, and each write's table, row,
/// kind, precondition ETag and the properties it stores.
fn pending_json(p: &PendingCommit) -> Value {
    let ops: Vec<Value> = p
        .writes
        .iter()
        .map(|w| {
            json!({
                "table": w.table.as_str(),
                "row_key": w.row_key.as_str(),
                "kind": w.operation,
                "precondition": w.if_match.as_ref().map(|e| e.as_str()),
                "after": w.properties.as_ref().map(|props| {
                    props
                        .iter()
                        .map(|(name, value)| (name.to_owned(), json!(value.to_string())))
                        .collect::<serde_json::Map<_, _>>()
                }),
            })
        })
        .collect();
    json!({ "partition_key": p.partition_key.as_str(), "ops": ops })
}

impl Output {
    fn lock_list(&self, prefix: &str, all: &[LeaseDescription]) {
        // A hashed name (`/#...`, for a key too long for a lease name) does
        // not give its key back.
        let key = |d: &LeaseDescription| {
            d.name
                .as_str()
                .strip_prefix(prefix)
                .filter(|k| !k.starts_with('#'))
                .map(str::to_owned)
        };
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
        out!(
            "{:<40} {:<10} {:<32} JOURNAL",
            "PARTITION",
            "STATE",
            "HOLDER"
        );
        for d in all {
            out!(
                "{:<40} {:<10} {:<32} {}",
                key(d).unwrap_or_else(|| format!("({})", d.name.as_str())),
                state_str(d.state),
                holder(d).unwrap_or("-"),
                if d.journal_pending { "pending" } else { "-" }
            );
        }
        out!("{} locks", all.len());
    }

    fn lock(&self, partition_key: &str, d: &LeaseDescription, pending: Option<&PendingCommit>) {
        if self.json {
            let mut v = lease_json(d);
            v["partition_key"] = json!(partition_key);
            v["journal"] = pending.map_or(Value::Null, pending_json);
            out!("{v}");
            return;
        }
        out!("partition     {partition_key}");
        out!("lock lease    {}", d.name.as_str());
        out!("state         {}", state_str(d.state));
        out!("holder        {}", holder(d).unwrap_or("-"));
        out!("last holder   {}", d.owner.as_deref().unwrap_or("-"));
        out!("since         {}", d.acquired_at.as_deref().unwrap_or("-"));
        match pending {
            None => out!("journal       none pending"),
            Some(p) => {
                out!("journal       pending, {} operations:", p.writes.len());
                for w in &p.writes {
                    out!(
                        "  {:<8} {}/{}{}",
                        w.operation,
                        w.table,
                        w.row_key.as_str(),
                        w.if_match
                            .as_ref()
                            .map(|etag| format!(" if-match {}", etag.as_str()))
                            .unwrap_or_default()
                    );
                }
            }
        }
    }

    fn rolled_forward(&self, partition_key: &str, report: Option<&RollForwardReport>) {
        if self.json {
            out!(
                "{}",
                json!({
                    "partition_key": partition_key,
                    "rolled_forward": report.is_some(),
                    "applied": report.map(|r| r.applied),
                    "already_applied": report.map(|r| r.already_applied),
                })
            );
            return;
        }
        match report {
            None => out!("{partition_key}: no journal pending; nothing to do"),
            Some(r) => out!(
                "{partition_key}: rolled forward ({} applied, {} already applied)",
                r.applied,
                r.already_applied
            ),
        }
    }
}
