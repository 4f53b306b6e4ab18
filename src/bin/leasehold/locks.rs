//! `leasehold locks ...`: list, show and break partition locks, roll
//! forward a commit a crashed holder left pending, and prune the lock blobs
//! of partitions nobody locks any more.

use std::time::Duration;

use leasehold::Store;
use leasehold::backend::LeaseDuration;
use leasehold::entity::Properties;
use leasehold::lease::LeaseDescription;
use leasehold::lock::{
    PendingCommit, PruneReport, Resolution, ResolveAction, RollForwardReport, RowShows,
};
use serde_json::{Value, json};

use crate::args::{LocksCommand, PartitionArg};
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
            // What is pending, read only for the locks that have something.
            let mut pending = Vec::with_capacity(descriptions.len());
            for d in &descriptions {
                let record = match partition_of(&prefix, d) {
                    Some(key) if d.journal_pending => store.pending_commit(key.as_str()).await?,
                    _ => None,
                };
                pending.push(record);
            }
            out.lock_list(&prefix, &descriptions, &pending);
        }
        LocksCommand::Show { partition } => {
            let partition_key = partition_key(store, partition).await?;
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
        LocksCommand::Break { partition, period } => {
            let partition_key = partition_key(store, partition).await?;
            let name = store.lock_lease_name(partition_key.as_str())?;
            break_lease(store.locks(), name.as_str(), period, out).await?;
        }
        LocksCommand::RollForward {
            partition,
            break_lease: break_first,
            ..
        } => {
            let partition_key = partition_key(store, partition).await?;
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
            // An intent is resolved through its primary partition, whose
            // lock the crashed unit held too.
            if break_first
                && let Some(p) = store.pending_commit(partition_key.as_str()).await?
                && p.is_intent()
            {
                let primary = store.lock_lease_name(p.primary.as_str())?;
                if store.locks().describe(primary.as_str()).await?.is_held() {
                    store
                        .locks()
                        .break_lease(primary.as_str(), Some(Duration::ZERO))
                        .await?;
                    out.note(&format!("broke the lease of lock {primary} (the primary)"));
                }
            }
            if d.is_held() && !break_first {
                // Say what the wait is for, before waiting silently.
                out.note(&format!(
                    "waiting up to {} s for the lock of {partition_key:?}, held by {} (a crashed holder's lease runs out within the lock lease duration, {}); for a holder known to be dead, run again with --break-lease",
                    store.lock_options().acquire_timeout.as_secs(),
                    holder(&d).unwrap_or("an unnamed holder"),
                    match store.locks().lease_duration() {
                        LeaseDuration::Seconds(n) => format!("{n} s"),
                        LeaseDuration::Infinite => "infinite: break it".to_owned(),
                    },
                ));
            }
            let report = store.roll_forward(partition_key.as_str()).await?;
            out.rolled_forward(&partition_key, report.as_ref());
        }
        LocksCommand::Resolve {
            partition,
            finish,
            undo,
            ..
        } => {
            let partition_key = partition_key(store, partition).await?;
            let action = match (finish, undo) {
                (true, _) => ResolveAction::Finish,
                (false, true) => ResolveAction::Undo,
                (false, false) => ResolveAction::Show,
            };
            let resolution = store.resolve_commit(partition_key.as_str(), action).await?;
            out.resolution(&partition_key, resolution.as_ref());
        }
        LocksCommand::Prune {
            older_than,
            dry_run,
        } => {
            let report = if dry_run {
                store.prune_locks_dry_run(older_than).await?
            } else {
                store.prune_locks(older_than).await?
            };
            out.pruned(&report);
        }
    }
    Ok(())
}

/// The partition key a command names: as given, or that of an index value
/// (see [`crate::indexes::index_partition`]).
async fn partition_key(store: &Store, partition: PartitionArg) -> Result<String, Failure> {
    match (partition.partition_key, partition.index.as_deref()) {
        (Some(key), _) => Ok(key),
        (None, Some([index, value])) => crate::indexes::index_partition(store, index, value).await,
        // clap requires exactly one of the two, --index with two values.
        (None, _) => Err(Failure {
            code: Failure::USAGE,
            message: "name the partition: a partition key, or --index TABLE.FIELD VALUE".into(),
        }),
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

/// What the JOURNAL column shows for a lock.
fn pending_str(d: &LeaseDescription, p: Option<&PendingCommit>) -> String {
    match p {
        Some(p) if p.is_intent() => format!("intent of {}", p.primary.as_str()),
        Some(_) => "pending".to_owned(),
        None if d.journal_pending => "pending".to_owned(),
        None => "-".to_owned(),
    }
}

/// A pending commit as JSON: its partition, the primary partition it
/// points at and the transaction (for a commit across partitions), and
/// each write's table, partition, row, kind, precondition ETag and the
/// properties it stores (none for an intent: they are in the primary's
/// journal).
fn pending_json(p: &PendingCommit) -> Value {
    let ops: Vec<Value> = p
        .writes
        .iter()
        .map(|w| {
            json!({
                "table": w.table.as_str(),
                "partition_key": w.partition_key.as_str(),
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
    json!({
        "partition_key": p.partition_key.as_str(),
        "intent": p.is_intent(),
        "primary": p.primary.as_str(),
        "transaction": p.transaction,
        "ops": ops,
    })
}

impl Output {
    fn lock_list(&self, prefix: &str, all: &[LeaseDescription], pending: &[Option<PendingCommit>]) {
        let key = |d: &LeaseDescription| partition_of(prefix, d);
        if self.json {
            let locks: Vec<Value> = all
                .iter()
                .zip(pending)
                .map(|(d, p)| {
                    let mut v = lease_json(d);
                    v["partition_key"] = json!(key(d));
                    v["intent_of"] = json!(
                        p.as_ref()
                            .filter(|p| p.is_intent())
                            .map(|p| p.primary.as_str())
                    );
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
        for (d, p) in all.iter().zip(pending) {
            out!(
                "{:<40} {:<10} {:<32} {}",
                key(d).unwrap_or_else(|| format!("({})", d.name.as_str())),
                state_str(d.state),
                holder(d).unwrap_or("-"),
                pending_str(d, p.as_ref())
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
            Some(p) if p.is_intent() => {
                out!(
                    "journal       intent of transaction {}: the journal is in partition {} (roll forward from either)",
                    p.transaction.as_deref().unwrap_or("-"),
                    p.primary.as_str()
                );
            }
            Some(p) => {
                if let Some(txn) = &p.transaction {
                    out!("transaction   {txn} (across partitions)");
                }
                out!("journal       pending, {} operations:", p.writes.len());
                for w in &p.writes {
                    let partition = if w.partition_key == p.partition_key {
                        String::new()
                    } else {
                        format!(" (partition {})", w.partition_key.as_str())
                    };
                    out!(
                        "  {:<8} {}/{}{partition}{}",
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

    fn resolution(&self, partition_key: &str, r: Option<&Resolution>) {
        let Some(r) = r else {
            if self.json {
                out!(
                    "{}",
                    json!({ "partition_key": partition_key, "pending": false })
                );
            } else {
                out!("{partition_key}: no commit pending; nothing to resolve");
            }
            return;
        };
        let shows = |s: RowShows| match s {
            RowShows::After => "after",
            RowShows::Before => "before",
            _ => "neither",
        };
        let done = match r.done {
            ResolveAction::Show => "shown",
            ResolveAction::Finish => "finished",
            ResolveAction::Undo => "undone",
        };
        if self.json {
            let rows: Vec<Value> = r
                .rows
                .iter()
                .map(|row| {
                    json!({
                        "table": row.write.table.as_str(),
                        "partition_key": row.write.partition_key.as_str(),
                        "row_key": row.write.row_key.as_str(),
                        "kind": row.write.operation,
                        "shows": shows(row.shows),
                        "stored": row.stored.as_ref().map(props_json),
                        "after": row.write.properties.as_ref().map(props_json),
                        "before": row.before.as_ref().map(props_json),
                    })
                })
                .collect();
            out!(
                "{}",
                json!({
                    "partition_key": partition_key,
                    "pending": true,
                    "primary": r.primary.as_str(),
                    "transaction": r.transaction,
                    "undoing": r.undoing,
                    "done": done,
                    "written": r.written,
                    "rows": rows,
                })
            );
            return;
        }
        out!(
            "commit {} (journal in partition {}){}: {done}{}",
            r.transaction.as_deref().unwrap_or("-"),
            r.primary.as_str(),
            if r.undoing { ", was undoing" } else { "" },
            if r.done == ResolveAction::Show {
                String::new()
            } else {
                format!(", {} rows written", r.written)
            }
        );
        for row in &r.rows {
            out!(
                "  {:<8} {}/{}/{}  now shows {}",
                row.write.operation,
                row.write.table,
                row.write.partition_key.as_str(),
                row.write.row_key.as_str(),
                shows(row.shows)
            );
            if row.shows == RowShows::Neither {
                out!("      stored now  {}", props_text(row.stored.as_ref()));
                out!(
                    "      --finish    {}",
                    props_text(row.write.properties.as_ref())
                );
                out!("      --undo      {}", props_text(row.before.as_ref()));
            }
        }
        if r.done == ResolveAction::Show {
            let n = r.overwritten().count();
            out!(
                "{n} rows were written without the lock; --finish writes the commit's values over them, --undo the values read before it"
            );
        }
    }

    fn pruned(&self, r: &PruneReport) {
        if self.json {
            let partitions: Vec<&str> = r.deleted_partitions.iter().map(|k| k.as_str()).collect();
            out!(
                "{}",
                json!({
                    "dry_run": r.dry_run,
                    "examined": r.examined,
                    "deleted": r.deleted,
                    "kept_held": r.kept_held,
                    "kept_pending": r.kept_pending,
                    "kept_recent": r.kept_recent,
                    "deleted_partitions": partitions,
                })
            );
            return;
        }
        for key in &r.deleted_partitions {
            out!("{}", key.as_str());
        }
        let unnamed = r.deleted.saturating_sub(r.deleted_partitions.len());
        out!(
            "{} {} of {} lock blobs{}; kept {} held, {} pending, {} recent",
            if r.dry_run { "would delete" } else { "deleted" },
            r.deleted,
            r.examined,
            if unnamed > 0 {
                format!(" ({unnamed} of keys too long to name)")
            } else {
                String::new()
            },
            r.kept_held,
            r.kept_pending,
            r.kept_recent
        );
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

/// Properties as a JSON object of their OData literals.
fn props_json(props: &Properties) -> Value {
    Value::Object(
        props
            .iter()
            .map(|(name, value)| (name.to_owned(), json!(value.to_string())))
            .collect(),
    )
}

/// Properties in one line (`absent` for no row).
fn props_text(props: Option<&Properties>) -> String {
    match props {
        None => "absent".to_owned(),
        Some(p) => p
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join(" "),
    }
}
