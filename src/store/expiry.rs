//! The expiry sweep: deletes the rows past their expiry (see
//! `crate::rows::expiry`), which every read already treats as absent, and
//! [`Store::run_sweeper`], which runs it under a leader lease.
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
//! row kept, counted in [`PurgeReport::skipped`]. A row of a type with
//! indexes is deleted as [`Table::delete`](crate::Table::delete) deletes
//! one: replaced by a tombstone at the ETag read (so a stalled insert of
//! its keys cannot land later, see `crate::index`), then its index rows
//! are removed, each at the ETag read (one claimed again since stays).

use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;
use tracing::Instrument as _;

use super::Store;
use crate::backend::{Precondition, QuerySpec, StoredEntity, TableOp, WriteOptions};
use crate::error::{Error, ErrorKind, Result};
use crate::index::claim;
use crate::lease::LeaderOptions;
use crate::lock::LockEnv;
use crate::lock::marks::Resolver;
use crate::query::{CmpOp, Filter};
use crate::rows::{decision, expiry, tombstone};
use crate::table::PurgeReport;

/// The leader lease of the store's sweeper (under the store's table
/// prefix, as all its leases are).
const SWEEPER_LEASE: &str = "_lhSweeper";

/// Deletes the rows of `table` (the name without the store's prefix)
/// whose expiry is at or before `now`, each at the ETag read (see the
/// module docs). The report counts rows removed (`deleted`), rows kept
/// because they changed after the sweep read them (`skipped`) and the
/// delete requests sent (`batches`). A table that does not exist has
/// nothing to sweep.
///
/// # Errors
/// [`Error::Invalid`] for a bad table name, before any request; the
/// backend's errors.
pub(crate) async fn delete_expired(
    env: &Arc<LockEnv>,
    table: &str,
    now: OffsetDateTime,
) -> Result<PurgeReport> {
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
    let mut report = PurgeReport::default();
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
            report.batches += 1;
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
                report.deleted += 1;
            } else {
                report.skipped += 1;
            }
        }
        match page.continuation {
            Some(next) => spec.continuation = Some(next),
            None => break,
        }
    }
    env.telemetry()
        .expired_rows(name.as_str(), report.deleted, report.skipped);
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
    /// Runs the expiry sweep while this process is the store's sweeper:
    /// campaigns for the leader lease `_lhSweeper` (under the store's lease
    /// options; one process of those sharing the storage sweeps at a
    /// time), and as leader deletes the rows past their expiry of
    /// `tables` (names without the store's prefix; every table of the
    /// store when empty) every `every`, until `options`' stop token is
    /// cancelled ([`LeaderOptions::with_stop`]). Returns the totals of the
    /// rounds it ran: rows removed (`deleted`), kept because renewed after
    /// the sweep read them (`skipped`), delete requests (`batches`).
    ///
    /// Reads never return an expired row whether or not it has been swept
    /// (see the README's "Expiry"); the sweep reclaims the storage. Each
    /// delete carries the ETag read, so a row renewed meanwhile is kept; a
    /// row of a type with indexes leaves a tombstone and its index rows
    /// go. Each round is a `leasehold.sweep.expired` span, and its rows
    /// are counted in the `leasehold.sweep.expired_rows` metric (outcome
    /// `removed` or `kept`). A round that fails is logged and the next
    /// round tries again.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use leasehold::lease::LeaderOptions;
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let store = leasehold::Store::memory();
    /// let stop = leasehold::CancellationToken::new();
    /// let sweeper = tokio::spawn({
    ///     let (store, stop) = (store.clone(), stop.clone());
    ///     async move {
    ///         store.run_sweeper(&["Sessions"], Duration::from_secs(60),
    ///                           LeaderOptions::new().with_stop(stop)).await
    ///     }
    /// });
    /// stop.cancel();
    /// let totals = sweeper.await.unwrap()?;
    /// assert_eq!(totals.deleted, 0);
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad table name or an `every` of zero,
    /// before any request; as
    /// [`LeaseManager::run_as_leader`](crate::lease::LeaseManager::run_as_leader)
    /// while campaigning.
    pub async fn run_sweeper(
        &self,
        tables: &[&str],
        every: Duration,
        options: LeaderOptions,
    ) -> Result<PurgeReport> {
        if every.is_zero() {
            return Err(Error::invalid(
                "sweeper interval",
                "0 s would sweep without pause; give the time between rounds",
            ));
        }
        for table in tables {
            self.table_name(table)?;
        }
        let tables: Vec<String> = tables.iter().map(|t| (*t).to_owned()).collect();
        let totals = std::sync::Mutex::new(PurgeReport::default());
        self.leases()
            .run_as_leader(SWEEPER_LEASE, options, |leader| {
                let (tables, totals) = (&tables, &totals);
                async move {
                    loop {
                        let round = self.sweep_expired_round(tables).await;
                        match round {
                            Ok(report) => {
                                *totals.lock().unwrap_or_else(|p| p.into_inner()) += report;
                            }
                            Err(e) => {
                                tracing::warn!(error = %e, "an expiry sweep round failed; the next round tries again");
                            }
                        }
                        tokio::select! {
                            () = leader.cancelled() => return,
                            () = tokio::time::sleep(every) => {}
                        }
                    }
                }
            })
            .await?;
        Ok(totals.into_inner().unwrap_or_else(|p| p.into_inner()))
    }

    /// One round of the expiry sweep over `tables` (every table of the
    /// store when empty), at the store's clock's now.
    pub(crate) async fn sweep_expired_round(&self, tables: &[String]) -> Result<PurgeReport> {
        let now = crate::datetime::now();
        let span = tracing::info_span!(
            "leasehold.sweep.expired",
            removed = tracing::field::Empty,
            kept = tracing::field::Empty
        );
        async {
            let listed;
            let tables = if tables.is_empty() {
                listed = self.list_tables().await?;
                &listed
            } else {
                tables
            };
            let mut report = PurgeReport::default();
            for table in tables {
                report += delete_expired(self.locking(), table, now).await?;
            }
            let span = tracing::Span::current();
            span.record("removed", report.deleted);
            span.record("kept", report.skipped);
            Ok(report)
        }
        .instrument(span)
        .await
    }
}
