//! The expiry step of [`Store::sweep`]: deletes the rows past their
//! expiry (see `crate::rows::expiry`), which every read already treats
//! as absent; and [`Store::run_sweeper`], which runs the sweep every so
//! often under a leader lease.
//!
//! **What it deletes.** The rows of a table whose expiry property is at or
//! before the sweep's `now`, found by a filter on that property alone
//! (`_lhExpires le datetime'…'`), so it needs no Rust type and sweeps any
//! table. A row carrying a unit's mark is resolved first, as every read
//! resolves it, and judged as resolved.
//!
//! **Safety.** Each delete carries the ETag the sweep read. A row renewed
//! (written with a later expiry, or replaced by an insert over it) after
//! the sweep read it has a new ETag: the delete is refused (412) and the
//! row kept, counted in [`SweepReport::kept`]. Unlike tombstones, an
//! expired row needs no waiting bound: no write relies on it being there
//! (an insert over it is conditioned on its ETag, which the delete
//! changes). A row of a type with
//! indexes is deleted as [`Table::delete`](crate::Table::delete) deletes
//! one: replaced by a tombstone at the ETag read (so a stalled insert of
//! its keys cannot land later, see `crate::index`), then its index rows
//! are removed, each at the ETag read (one claimed again since stays).

use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;

use super::Store;
use super::sweep::{SweepOptions, SweepReport};
use crate::backend::{Precondition, QuerySpec, StoredEntity, TableOp, WriteOptions};
use crate::error::{Error, ErrorKind, Result};
use crate::index::claim;
use crate::lease::LeaderOptions;
use crate::lock::LockEnv;
use crate::lock::marks::Resolver;
use crate::query::{CmpOp, Filter};
use crate::rows::{decision, expiry, tombstone};

/// The leader lease of the store's sweeper (under the store's table
/// prefix, as all its leases are).
const SWEEPER_LEASE: &str = "_lhSweeper";

/// What the expiry step of a sweep did to one table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Expired {
    /// Rows past their expiry read.
    pub(crate) examined: u64,
    /// Rows removed (for a dry run: that would be).
    pub(crate) removed: u64,
    /// Rows kept because they changed after the sweep read them.
    pub(crate) kept: u64,
}

/// Deletes the rows of `table` (the name without the store's prefix)
/// whose expiry is at or before `now`, each at the ETag read (see the
/// module docs); a dry run only counts them. A table that does not exist
/// has nothing to sweep.
///
/// # Errors
/// [`Error::Invalid`] for a bad table name, before any request; the
/// backend's errors.
pub(crate) async fn delete_expired(
    env: &Arc<LockEnv>,
    table: &str,
    now: OffsetDateTime,
    dry_run: bool,
) -> Result<Expired> {
    let name = env.table_name(table)?;
    let indexes = match crate::index::read_defs(env, table).await {
        Ok(found) => found,
        // No index table can have such a name: the type has no indexes.
        Err(e) if e.kind() == ErrorKind::Invalid => None,
        Err(e) => return Err(e),
    };
    let mut spec = QuerySpec {
        filter: Some(Filter::compare(
            expiry::PROPERTY,
            CmpOp::Le,
            crate::entity::Value::DateTime(now),
        )),
        select: None,
        top: None,
        continuation: None,
    };
    let resolver = Resolver::new(env, Vec::new());
    let mut report = Expired::default();
    loop {
        let page = match env.backend().query(&name, &spec).await {
            Ok(page) => page,
            Err(e) if e.kind() == ErrorKind::NotFound => break,
            Err(e) => return Err(e),
        };
        for row in page.entities {
            if decision::is_decision_row(&row.data.row_key) {
                continue;
            }
            // A row in a commit: judged as the commit leaves it.
            let Some(row) = resolver.resolve_opt(&name, Some(row)).await? else {
                continue;
            };
            if row.data.properties.get(tombstone::PROPERTY).is_some()
                || !expiry::expired_at(&row.data.properties, now)
            {
                continue;
            }
            report.examined += 1;
            if dry_run {
                report.removed += 1;
                continue;
            }
            let removed = match &indexes {
                Some(indexes) => remove_indexed(env, indexes, &name, row).await?,
                None => {
                    let op = TableOp::Delete {
                        partition_key: row.data.partition_key,
                        row_key: row.data.row_key,
                        if_match: Some(row.etag),
                    };
                    sent(env.backend().execute(&name, op, &WriteOptions::new()).await)?
                }
            };
            if removed {
                report.removed += 1;
            } else {
                report.kept += 1;
            }
        }
        match page.continuation {
            Some(next) => spec.continuation = Some(next),
            None => break,
        }
    }
    if !dry_run {
        env.telemetry()
            .expired_rows(name.as_str(), report.removed, report.kept);
    }
    Ok(report)
}

/// Deletes an expired row of a type with indexes: its tombstone at the
/// ETag read, then its index rows. `false` when the row changed since.
async fn remove_indexed(
    env: &Arc<LockEnv>,
    indexes: &crate::index::Indexes,
    table: &crate::key::TableName,
    row: StoredEntity,
) -> Result<bool> {
    let owner = (row.data.partition_key.clone(), row.data.row_key.clone());
    let frees: Vec<(usize, crate::index::Key)> = indexes
        .keys(Some(&row.data.properties))?
        .into_iter()
        .enumerate()
        .filter_map(|(i, key)| key.map(|k| (i, k)))
        .collect();
    let freed = claim::read_freed(env, indexes, &frees, &owner).await?;
    let gone = tombstone::data(&owner.0, &owner.1, "expired");
    let op = TableOp::Replace(gone, Precondition::IfMatch(row.etag));
    let removed = sent(env.backend().execute(table, op, &WriteOptions::new()).await)?;
    if removed {
        claim::remove_freed(env, indexes, freed).await;
    }
    Ok(removed)
}

/// Whether a delete at the ETag read went through: `false` when the row
/// changed or went since (412, 404).
fn sent<T>(result: Result<T>) -> Result<bool> {
    match result {
        Ok(_) => Ok(true),
        Err(e) if matches!(e.kind(), ErrorKind::Conflict | ErrorKind::NotFound) => Ok(false),
        Err(e) => Err(e),
    }
}

impl Store {
    /// Runs [`Store::sweep`] while this process is the store's sweeper:
    /// campaigns for the leader lease `_lhSweeper` (under the store's
    /// prefix, as all its leases are; one process of those sharing the
    /// storage sweeps at a time), and as leader sweeps with `options`
    /// every `every` — rows past their expiry included — handing each
    /// round's report to `round`, until the stop token of `leader` is
    /// cancelled ([`LeaderOptions::with_stop`]). A round that fails is
    /// logged (and handed to `round` as its error) and the next round
    /// tries again.
    ///
    /// Reads never return a row past its expiry, swept or not (see the
    /// README's "Expiry"); the sweep reclaims its storage, at the ETag it
    /// read, so a row renewed meanwhile is kept. Each sweep is a
    /// `leasehold.sweep` span; expired rows are counted in the
    /// `leasehold.sweep.expired_rows` metric (outcome `removed` or
    /// `kept`).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use leasehold::lease::LeaderOptions;
    /// # use leasehold::store::SweepOptions;
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let store = leasehold::Store::memory();
    /// let stop = leasehold::CancellationToken::new();
    /// let leader = LeaderOptions::new().with_stop(stop.clone());
    /// let sweeper = store.run_sweeper(&SweepOptions::new(), Duration::from_secs(300), leader, |round| {
    ///     if let Ok(report) = round {
    ///         println!("{report}");
    ///     }
    /// });
    /// stop.cancel();
    /// sweeper.await?;
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`Error::Invalid`] for an `every` of zero, before any request; as
    /// [`LeaseManager::run_as_leader`](crate::lease::LeaseManager::run_as_leader)
    /// while campaigning.
    pub async fn run_sweeper(
        &self,
        options: &SweepOptions,
        every: Duration,
        leader: LeaderOptions,
        mut round: impl FnMut(std::result::Result<&SweepReport, &Error>) + Send,
    ) -> Result<()> {
        if every.is_zero() {
            return Err(Error::invalid(
                "sweeper interval",
                "0 s would sweep without pause; give the time between rounds",
            ));
        }
        let round = std::sync::Mutex::new(&mut round);
        self.leases()
            .run_as_leader(SWEEPER_LEASE, leader, |term| {
                let round = &round;
                async move {
                    loop {
                        let swept = self.sweep(options).await;
                        if let Err(e) = &swept {
                            tracing::warn!(error = %e, "a sweep round failed; the next round tries again");
                        }
                        {
                            let mut round = round.lock().unwrap_or_else(|p| p.into_inner());
                            (*round)(swept.as_ref());
                        }
                        tokio::select! {
                            () = term.cancelled() => return,
                            () = tokio::time::sleep(every) => {}
                        }
                    }
                }
            })
            .await
    }
}
