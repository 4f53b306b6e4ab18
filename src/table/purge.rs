//! Deleting and counting the rows a [`Query`] matches: [`Table::purge`]
//! and [`Table::count`], reading keys only.

use futures_util::{TryStreamExt as _, stream};
use tracing::Instrument as _;

use super::handle::Table;
use super::query::Query;
use crate::backend::{StoredEntity, TableOp};
use crate::entity::Entity;
use crate::error::{Error, ErrorKind, Result};
use crate::key::{ETag, PartitionKey, RowKey, TableName};

/// How many deletes [`Table::purge_with`] keeps in flight (example
/// there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurgeOptions {
    concurrency: usize,
}

impl PurgeOptions {
    /// How many delete requests are in flight at once by default.
    pub const DEFAULT_CONCURRENCY: usize = 8;

    /// The defaults.
    pub fn new() -> Self {
        PurgeOptions {
            concurrency: Self::DEFAULT_CONCURRENCY,
        }
    }

    /// At most `requests` (at least 1) deletes in flight: the service
    /// serves about 2,000 entities a second per partition and 20,000 per
    /// account, so past a few dozen more only meet `ServerBusy`.
    #[must_use = "`with_concurrency` returns the changed options"]
    pub fn with_concurrency(mut self, requests: usize) -> Self {
        self.concurrency = requests;
        self
    }

    fn checked(&self) -> Result<usize> {
        if self.concurrency == 0 {
            return Err(Error::invalid(
                "purge concurrency",
                "0 deletes in flight would never finish; give at least 1",
            ));
        }
        Ok(self.concurrency)
    }
}

impl Default for PurgeOptions {
    fn default() -> Self {
        Self::new()
    }
}

/// What a [`Table::purge`] did (or, handed to the progress callback of
/// [`Table::purge_with`], has done so far).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PurgeReport {
    /// Rows deleted.
    pub deleted: u64,
    /// Rows matched but not deleted: changed or deleted since read.
    pub skipped: u64,
    /// Delete requests sent.
    pub batches: u64,
}

impl std::ops::AddAssign for PurgeReport {
    fn add_assign(&mut self, other: PurgeReport) {
        self.deleted += other.deleted;
        self.skipped += other.skipped;
        self.batches += other.batches;
    }
}

/// One delete request of a purge: rows of one partition at their ETags.
struct Deletes {
    partition: PartitionKey,
    rows: Vec<(RowKey, ETag)>,
}

/// The rows of the current partition a purge read and has not yet
/// handed out (rows come in key order).
struct Grouping {
    /// Rows per group: 1 for an indexed type, deleted one by one.
    batch: usize,
    current: Option<Deletes>,
}

impl Grouping {
    /// Adds `row`, pushing the deletes it completes onto `out`.
    fn add(&mut self, row: StoredEntity, out: &mut Vec<Deletes>) {
        let StoredEntity { data, etag, .. } = row;
        match &mut self.current {
            Some(group) if group.partition == data.partition_key => {
                group.rows.push((data.row_key, etag));
            }
            current => {
                out.extend(current.take());
                *current = Some(Deletes {
                    partition: data.partition_key,
                    rows: vec![(data.row_key, etag)],
                });
            }
        }
        if self
            .current
            .as_ref()
            .is_some_and(|group| group.rows.len() >= self.batch)
        {
            out.extend(self.current.take());
        }
    }
}

/// Whether a delete's refusal says the row changed or went since it was
/// read (so it is skipped), not that the table is missing.
fn changed_since_read(e: &Error) -> bool {
    matches!(e.kind(), ErrorKind::Conflict | ErrorKind::NotFound)
        && e.code() != Some("TableNotFound")
}

impl<E: Entity> Table<E> {
    /// Deletes every row `query` matches, each only if unchanged since
    /// read; see [`Table::purge_with`].
    ///
    /// ```
    /// # use leasehold::{Entity, Store};
    /// # #[derive(Entity, Clone, Debug)]
    /// # #[entity(table = "Events")]
    /// # struct Event { #[entity(partition_key)] day: String, #[entity(row_key)] id: String, kind: String }
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let events = Store::memory().table::<Event>();
    /// for (day, id, kind) in [("d1", "1", "debug"), ("d1", "2", "audit"), ("d2", "1", "debug")] {
    ///     events.insert(Event { day: day.into(), id: id.into(), kind: kind.into() }).await?;
    /// }
    /// // One partition, a row-key range, or a filter: any query of the table.
    /// let debug = Event::columns().kind.eq("debug");
    /// let report = events.purge(events.query().filter(debug)).await?;
    /// assert_eq!((report.deleted, report.skipped), (2, 0));
    /// assert_eq!(events.count(events.query()).await?, 1);
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// As [`Table::purge_with`].
    pub async fn purge(&self, query: Query<E>) -> Result<PurgeReport> {
        self.purge_with(query, &PurgeOptions::new(), |_| {}).await
    }

    /// Deletes every row `query` matches (as a read returns them), with
    /// `options`, calling `progress` with the totals after each request.
    /// Each delete carries the ETag read: a row changed or deleted since is
    /// left and counted in [`PurgeReport::skipped`].
    ///
    /// It reads the keys alone and deletes each partition's rows in
    /// transactions of 100 (99 when [fenced](Table::fenced)), a transaction
    /// refused for one changed row sent again without it: 250 rows of one
    /// partition cost 4 requests. A type with [indexes](crate::index) is
    /// deleted row by row as [`Table::delete`] deletes (as plain rows
    /// through [`Store::dynamic_table`](crate::Store::dynamic_table)).
    ///
    /// ```
    /// # use leasehold::{Entity, Store};
    /// use leasehold::table::PurgeOptions;
    /// # #[derive(Entity, Clone, Debug)]
    /// # #[entity(table = "Events")]
    /// # struct Event { #[entity(partition_key)] day: String, #[entity(row_key)] id: String }
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let events = Store::memory().table::<Event>();
    /// for id in 0..250 {
    ///     events.upsert(Event { day: "d1".into(), id: format!("{id:03}") }).await?;
    /// }
    /// let mut seen = Vec::new();
    /// let report = events
    ///     .purge_with(
    ///         events.query().partition("d1").row_keys("100".."200"),
    ///         &PurgeOptions::new().with_concurrency(2),
    ///         |so_far| seen.push(so_far.deleted),
    ///     )
    ///     .await?;
    /// assert_eq!((report.deleted, report.batches), (100, 1));
    /// assert_eq!(seen, [100]);
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// As [`Table::count_with`]; [`Error::Invalid`] for a concurrency of 0;
    /// [`Error::LeaseLost`] when [fenced](Table::fenced). It stops at the
    /// first error; what it deleted stays deleted.
    pub async fn purge_with(
        &self,
        query: Query<E>,
        options: &PurgeOptions,
        mut progress: impl FnMut(&PurgeReport) + Send,
    ) -> Result<PurgeReport> {
        let concurrency = options.checked()?;
        let (reader, pages) = query.key_pages()?;
        let name = self.same_table(&reader)?.clone();
        let span = tracing::debug_span!("leasehold.purge", table = %name, concurrency);
        let telemetry = self.env.telemetry.clone();
        let purge = async move {
            let batch = match (E::INDEXES.is_empty(), self.fenced) {
                (false, _) => 1,
                (true, true) => TableOp::MAX_BATCH_OPS - 1,
                (true, false) => TableOp::MAX_BATCH_OPS,
            };
            let mut grouping = Grouping {
                batch,
                current: None,
            };
            let deletes = pages
                .map_ok(move |(rows, more)| {
                    let mut out = Vec::new();
                    for row in rows {
                        grouping.add(row, &mut out);
                    }
                    if !more {
                        out.extend(grouping.current.take());
                    }
                    stream::iter(out.into_iter().map(Ok))
                })
                .try_flatten();
            let mut done = std::pin::pin!(
                deletes
                    .map_ok(|deletes| self.delete_group(deletes))
                    .try_buffer_unordered(concurrency)
            );
            let mut report = PurgeReport::default();
            while let Some(one) = done.try_next().await? {
                report += one;
                progress(&report);
            }
            tracing::debug!(
                deleted = report.deleted,
                skipped = report.skipped,
                batches = report.batches,
                "purged"
            );
            Ok(report)
        };
        telemetry.operation("purge", purge.instrument(span)).await
    }

    /// Counts the rows `query` matches (as a read returns them), reading
    /// keys only: one request per page of up to 1,000 rows. Example: see
    /// [`Table::purge`].
    ///
    /// # Errors
    /// As [`Table::count_with`].
    pub async fn count(&self, query: Query<E>) -> Result<u64> {
        self.count_with(query, |_| {}).await
    }

    /// As [`Table::count`], calling `progress` with the count so far after
    /// each page.
    ///
    /// ```
    /// # use leasehold::{Entity, Store};
    /// # #[derive(Entity, Clone, Debug)]
    /// # #[entity(table = "Events")]
    /// # struct Event { #[entity(partition_key)] day: String, #[entity(row_key)] id: String }
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let events = Store::memory().table::<Event>();
    /// for id in 0..5 {
    ///     events.insert(Event { day: "d1".into(), id: id.to_string() }).await?;
    /// }
    /// let mut pages = Vec::new();
    /// let n = events.count_with(events.query().page_size(2), |so_far| pages.push(so_far)).await?;
    /// assert_eq!((n, pages), (5, vec![2, 4, 5]));
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// * [`Error::Invalid`] before any request: `query` is of another table
    ///   (through [`Store::dynamic_table`](crate::Store::dynamic_table)),
    ///   its filter, page size or token is invalid, or its row-key range
    ///   holds no key;
    /// * [`Error::NotFound`] (`TableNotFound`) when the store deleted the
    ///   table;
    /// * [`Error::Timeout`] when a row stays marked (as a read);
    /// * backend errors.
    pub async fn count_with(
        &self,
        query: Query<E>,
        mut progress: impl FnMut(u64) + Send,
    ) -> Result<u64> {
        let (reader, pages) = query.key_pages()?;
        let name = self.same_table(&reader)?;
        let span = tracing::debug_span!("leasehold.count", table = %name);
        let count = pages.try_fold(0u64, |count, (rows, _)| {
            let count = count + rows.len() as u64;
            progress(count);
            async move { Ok(count) }
        });
        self.env
            .telemetry
            .operation("count", count.instrument(span))
            .await
    }

    /// This table's name, once checked to be `reader`'s (a query's table).
    fn same_table(&self, reader: &Table<E>) -> Result<&TableName> {
        let name = self.name()?;
        let asked = reader.name()?;
        if asked != name {
            return Err(Error::invalid(
                format!("query of table `{asked}`"),
                format!("handed to table `{name}`: a purge or count reads the table it deletes in"),
            ));
        }
        Ok(name)
    }

    /// Sends the deletes of one group (see [`Table::purge_with`]).
    async fn delete_group(&self, deletes: Deletes) -> Result<PurgeReport> {
        let mut report = PurgeReport::default();
        let Deletes { partition, rows } = deletes;
        let mut ops: Vec<TableOp> = rows
            .into_iter()
            .map(|(row_key, etag)| TableOp::Delete {
                partition_key: partition.clone(),
                row_key,
                condition: crate::backend::Precondition::IfMatch(etag),
            })
            .collect();
        if !E::INDEXES.is_empty() {
            for op in ops {
                report.batches += 1;
                match self.send(op).await {
                    Ok(()) => report.deleted += 1,
                    Err(e) if changed_since_read(&e) => report.skipped += 1,
                    Err(e) => return Err(e),
                }
            }
            return Ok(report);
        }
        let name = self.ready().await?;
        while !ops.is_empty() {
            report.batches += 1;
            let span = tracing::debug_span!(
                "leasehold.batch",
                table = %name,
                partition = %partition,
                ops = ops.len()
            );
            match self.writer.batch(name, &ops).instrument(span).await {
                Ok(_) => {
                    report.deleted += ops.len() as u64;
                    break;
                }
                Err(Error::Batch { index, source })
                    if index < ops.len() && changed_since_read(&source) =>
                {
                    ops.remove(index);
                    report.skipped += 1;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entity::EntityData;

    fn row(pk: &str, rk: &str) -> StoredEntity {
        StoredEntity {
            data: EntityData {
                partition_key: PartitionKey::new(pk).unwrap(),
                row_key: RowKey::new(rk).unwrap(),
                properties: crate::entity::Properties::new(),
            },
            etag: ETag::new("W/\"1\"".to_owned()),
            timestamp: time::OffsetDateTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn rows_are_grouped_by_partition_in_hundreds() {
        let mut grouping = Grouping {
            batch: 100,
            current: None,
        };
        let mut out = Vec::new();
        for i in 0..250 {
            grouping.add(row("a", &format!("{i:03}")), &mut out);
        }
        grouping.add(row("b", "1"), &mut out);
        out.extend(grouping.current.take());
        let sizes: Vec<_> = out
            .iter()
            .map(|d| (d.partition.as_str().to_owned(), d.rows.len()))
            .collect();
        assert_eq!(
            sizes,
            [
                ("a".to_owned(), 100),
                ("a".to_owned(), 100),
                ("a".to_owned(), 50),
                ("b".to_owned(), 1)
            ]
        );
    }

    #[test]
    fn rows_of_an_indexed_type_go_one_by_one() {
        let mut grouping = Grouping {
            batch: 1,
            current: None,
        };
        let mut out = Vec::new();
        grouping.add(row("a", "1"), &mut out);
        grouping.add(row("a", "2"), &mut out);
        assert_eq!(out.len(), 2);
        assert!(grouping.current.is_none());
    }

    #[test]
    fn no_deletes_in_flight_is_invalid() {
        let e = PurgeOptions::new()
            .with_concurrency(0)
            .checked()
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid);
        assert!(e.to_string().contains("concurrency"), "{e}");
    }
}
