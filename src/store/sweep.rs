//! [`Store::sweep`]: nothing left behind.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use time::OffsetDateTime;
use tracing::Instrument as _;

use super::Store;
use super::lock_blobs::prune_locks;
use crate::backend::StoredEntity;
use crate::entity::Value;
use crate::error::{Error, ErrorKind, Result};
use crate::index::{STALLED_WRITE_BOUND, TABLE_SUFFIX};
use crate::key::{PartitionKey, TableName};
use crate::lease::LeaderOptions;
use crate::lock::LockEnv;
use crate::query::{CmpOp, Filter};
use crate::rows::mark::MARK;
use crate::rows::{Pages, decision, tombstone};
use crate::table::Resolver;

/// What [`Store::sweep`] removes and how.
///
/// ```
/// use std::time::Duration;
/// use leasehold::store::SweepOptions;
/// let options = SweepOptions::new()
///     .with_older_than(Duration::from_secs(6 * 3600))
///     .with_dry_run(true);
/// # let _ = options;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepOptions {
    older_than: Duration,
    dry_run: bool,
    concurrency: usize,
    later: Duration,
}

impl SweepOptions {
    /// The default of [`SweepOptions::with_older_than`]: an hour.
    pub const DEFAULT_OLDER_THAN: Duration = Duration::from_secs(3600);

    /// The default of [`SweepOptions::with_concurrency`].
    pub const DEFAULT_CONCURRENCY: usize = 8;

    /// The defaults.
    pub fn new() -> Self {
        SweepOptions {
            older_than: Self::DEFAULT_OLDER_THAN,
            dry_run: false,
            concurrency: Self::DEFAULT_CONCURRENCY,
            later: Duration::ZERO,
        }
    }

    /// Keeps what is younger than `age` (lock blobs: taken over within
    /// it). Each kind's safety bound ([`Store::sweep`]) holds anyway:
    /// `Duration::ZERO` removes what nothing can rely on.
    #[must_use = "`with_older_than` returns the changed options"]
    pub fn with_older_than(mut self, age: Duration) -> Self {
        self.older_than = age;
        self
    }

    /// `true`: delete nothing and take no lease; the report counts what a
    /// sweep would remove now.
    #[must_use = "`with_dry_run` returns the changed options"]
    pub fn with_dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// At most `requests` deletes in flight at once (1 to 256; otherwise
    /// the sweep fails with [`Error::Invalid`] before any request).
    #[must_use = "`with_concurrency` returns the changed options"]
    pub fn with_concurrency(mut self, requests: usize) -> Self {
        self.concurrency = requests;
        self
    }

    /// Judges the age of rows (not lock blobs) as if the sweep ran `by`
    /// later than now, for tests.
    #[cfg(any(feature = "conformance", clippy))]
    #[doc(hidden)]
    #[must_use]
    pub fn as_if_later(mut self, by: Duration) -> Self {
        self.later = by;
        self
    }

    fn checked(&self) -> Result<usize> {
        if !(1..=256).contains(&self.concurrency) {
            return Err(Error::invalid(
                format!("sweep concurrency {}", self.concurrency),
                "give 1 to 256 deletes in flight",
            ));
        }
        Ok(self.concurrency)
    }
}

impl Default for SweepOptions {
    fn default() -> Self {
        Self::new()
    }
}

/// What [`Store::sweep`] removed (a dry run: would remove now), per kind
/// (see the table there).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SweepReport {
    /// Whether nothing was deleted.
    pub dry_run: bool,
    /// Rows read.
    pub rows_examined: u64,
    /// Tombstones removed.
    pub tombstones: u64,
    /// Stale index rows removed.
    pub stale_index_rows: u64,
    /// Decision rows removed.
    pub decision_rows: u64,
    /// After-image rows removed.
    pub after_image_rows: u64,
    /// The store's lock blobs examined: `lock_blobs` and the three
    /// `lock_blobs_kept_*` counts.
    pub lock_blobs_examined: u64,
    /// Lock blobs removed (with their wait queues).
    pub lock_blobs: u64,
    /// The partition keys of the removed lock blobs, in lock-name order
    /// (but those of hashed lock names).
    pub lock_blob_partitions: Vec<PartitionKey>,
    /// Lock blobs kept because somebody held the lock, took it first, or
    /// waited for it in its wait queue.
    pub lock_blobs_kept_held: u64,
    /// Lock blobs kept because they carry a record leasehold does not
    /// write.
    pub lock_blobs_kept_pending: u64,
    /// Lock blobs kept because the lock was taken over within `older_than`,
    /// or could not be dated yet (it is stamped, and ages from then).
    pub lock_blobs_kept_recent: u64,
    /// Rows past their expiry removed.
    pub expired_rows: u64,
    /// Rows kept because they are younger than their bound or changed
    /// since they were read.
    pub kept: u64,
}

impl SweepReport {
    /// Every row and lock blob removed, of all kinds.
    pub fn removed(&self) -> u64 {
        self.tombstones
            + self.stale_index_rows
            + self.decision_rows
            + self.after_image_rows
            + self.lock_blobs
            + self.expired_rows
    }
}

impl std::fmt::Display for SweepReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} tombstones, {} stale index rows, {} decision rows, {} after-image rows, {} lock blobs, {} expired rows ({} rows examined, {} kept; {} lock blobs examined, kept {} held, {} pending, {} recent)",
            if self.dry_run {
                "would remove"
            } else {
                "removed"
            },
            self.tombstones,
            self.stale_index_rows,
            self.decision_rows,
            self.after_image_rows,
            self.lock_blobs,
            self.expired_rows,
            self.rows_examined,
            self.kept,
            self.lock_blobs_examined,
            self.lock_blobs_kept_held,
            self.lock_blobs_kept_pending,
            self.lock_blobs_kept_recent
        )
    }
}

impl Store {
    /// Removes what leasehold leaves behind beside an application's rows,
    /// each once no write relying on it can still land, and only when
    /// older than [`SweepOptions::with_older_than`]:
    ///
    /// | kind | left by | removed when |
    /// |---|---|---|
    /// | tombstones (`_lhGone`) | deletes of indexed types; writers taking a claim over from an absent entity | older than `older_than` and than 25 minutes |
    /// | stale index rows | writes that failed or stopped between their claims and their entity's write; deletes (their claims stay for the next writer of the value) | their entity does not hold their value, read again with any unit's mark resolved, and they are older than `older_than` and than 25 minutes |
    /// | decision rows, after-image rows | commits whose writer stopped half-way, or that a reader withdrew | a committed one once its marks are gone; a withdrawn one, and after-image rows without a decision, past 20 minutes ("Rows commits leave behind" in [`crate::lock`]) |
    /// | lock blobs | every partition ever locked | free, clean and not taken over for `older_than` ("Lock blobs" in [`crate::lock`]) |
    /// | expired rows (`_lhExpires`) | entity types declaring an expiry (see the README's "Expiry") | at once: past their expiry, every read already treats them as absent (a row of an indexed type leaves a tombstone, and its index rows go) |
    ///
    /// Every delete is conditioned on the ETag the sweep read: a row written
    /// since is kept for the next sweep. Why 25 minutes: "How long a claim
    /// or tombstone is relied on" in [`crate::index`].
    ///
    /// Cost: one table listing; a read of every indexed table and its index
    /// table, one or two reads and a delete per stale index row; filtered
    /// queries of every table, a delete per row removed; one query per
    /// group a committed decision row names; for lock blobs, see "Lock
    /// blobs" in [`crate::lock`].
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use leasehold::Store;
    /// # use leasehold::store::SweepOptions;
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let store = Store::memory();
    /// store.lock("alice").await?.abandon().await?;
    /// let held = store.lock("bob").await?;
    ///
    /// // Both were locked just now: nothing is a week old.
    /// let week = SweepOptions::new().with_older_than(Duration::from_secs(7 * 24 * 3600));
    /// let plan = store.sweep(&week.with_dry_run(true)).await?;
    /// assert_eq!((plan.lock_blobs_examined, plan.lock_blobs, plan.lock_blobs_kept_held), (2, 0, 1));
    ///
    /// // Every free, clean lock blob, however recent.
    /// let report = store.sweep(&SweepOptions::new().with_older_than(Duration::ZERO)).await?;
    /// assert_eq!(report.lock_blob_partitions.len(), 1);
    /// assert_eq!(report.lock_blob_partitions[0].as_str(), "alice");
    /// assert_eq!(report.lock_blobs_kept_held, 1, "bob is held");
    /// assert_eq!(report.removed(), 1);
    /// println!("{report}");
    /// held.abandon().await?;
    ///
    /// // A removed lock blob is created again by the next unit.
    /// store.lock("alice").await?.abandon().await?;
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`Error::Invalid`] for a concurrency out of range or an
    /// `older_than` reaching back before any date (before any request);
    /// [`Error::Unavailable`] when storage kept failing; backend errors.
    /// What it removed before stays removed.
    pub async fn sweep(&self, options: &SweepOptions) -> Result<SweepReport> {
        self.sweep_with_progress(options, |_| {}).await
    }

    /// As [`Store::sweep`], calling `progress` with the counts so far (the
    /// removed lock blobs' partitions come with the last call).
    ///
    /// # Errors
    /// As [`Store::sweep`].
    pub async fn sweep_with_progress(
        &self,
        options: &SweepOptions,
        mut progress: impl FnMut(&SweepReport) + Send,
    ) -> Result<SweepReport> {
        sweep(self.locking(), options, &mut progress).await
    }
}

async fn sweep(
    env: &Arc<LockEnv>,
    options: &SweepOptions,
    progress: &mut (dyn FnMut(&SweepReport) + Send),
) -> Result<SweepReport> {
    let concurrency = options.checked()?;
    let older_than = options.older_than;
    let now = OffsetDateTime::now_utc() + options.later;
    // Rows written before this are old enough to go.
    let cutoff = time::Duration::try_from(older_than.max(STALLED_WRITE_BOUND))
        .ok()
        .and_then(|d| now.checked_sub(d))
        .ok_or_else(|| {
            Error::invalid(
                format!("older_than {older_than:?}"),
                "reaches back before any date leasehold represents",
            )
        })?;
    let dry_run = options.dry_run;
    let span = tracing::info_span!(
        "leasehold.sweep",
        prefix = %env.table_prefix,
        ?older_than,
        dry_run
    );
    async move {
        let mut report = SweepReport {
            dry_run,
            ..SweepReport::default()
        };
        let prefix_len = env.table_prefix.len();
        let tables = super::manage::prefixed_tables(env).await?;
        let sweeper = Sweeper {
            env,
            cutoff,
            dry_run,
            concurrency,
        };

        // Stale index rows first (a tombstone their entity left goes
        // after them), per indexed table.
        for index_table in tables.iter().filter(|t| t.as_str().ends_with(TABLE_SUFFIX)) {
            let name = &index_table.as_str()[prefix_len..];
            let entity_table = &name[..name.len() - TABLE_SUFFIX.len()];
            sweeper
                .stale_index_rows(entity_table, &mut report, progress)
                .instrument(tracing::info_span!(
                    "leasehold.sweep.stale_index_rows",
                    table = %entity_table
                ))
                .await?;
        }

        for table in &tables {
            sweeper
                .tombstones(table, &mut report, progress)
                .instrument(tracing::info_span!("leasehold.sweep.tombstones", table = %table))
                .await?;
        }

        // Rows past their expiry (`crate::rows::expiry`), at the ETag
        // read; judged on the clock reads judge them by.
        let expiry_now = crate::datetime::now() + options.later;
        for table in &tables {
            let name = &table.as_str()[prefix_len..];
            sweeper
                .expired(name, expiry_now, &mut report, progress)
                .instrument(tracing::info_span!("leasehold.sweep.expired", table = %table))
                .await?;
        }

        // Lock blobs, then decision rows and after-image rows.
        prune_locks(
            env,
            &tables,
            older_than,
            options.later,
            dry_run,
            &mut report,
            progress,
        )
        .instrument(tracing::info_span!("leasehold.sweep.locks"))
        .await?;
        progress(&report);
        tracing::info!(%report, "swept");
        Ok(report)
    }
    .instrument(span)
    .await
}

fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

struct Sweeper<'a> {
    env: &'a Arc<LockEnv>,
    cutoff: OffsetDateTime,
    dry_run: bool,
    concurrency: usize,
}

impl Sweeper<'_> {
    /// The stale index rows of `entity_table` (without the prefix).
    async fn stale_index_rows(
        &self,
        entity_table: &str,
        report: &mut SweepReport,
        progress: &mut (dyn FnMut(&SweepReport) + Send),
    ) -> Result<()> {
        let env = self.env;
        // An index table without descriptions has no index rows to judge.
        let indexes = match crate::index::defs_of(&env.tables, entity_table).await {
            Ok(indexes) => indexes,
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::Invalid) => {
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let base = report.rows_examined;
        let (read, stale) = {
            let mut seen = report.clone();
            crate::index::stale_rows(&env.tables, &indexes, &mut |n| {
                seen.rows_examined = base + n;
                if n.is_multiple_of(1000) {
                    progress(&seen);
                }
            })
            .await?
        };
        report.rows_examined = base + read;
        let indexes = &indexes;
        let old = |(_, row): &(_, StoredEntity)| row.timestamp < self.cutoff;
        let remove = |(def, row): (_, StoredEntity)| async move {
            // A dry run reads nothing more (a read may finish a mark).
            if !self.dry_run && !crate::index::still_stale(&env.tables, indexes, def, &row).await? {
                return Ok(false);
            }
            self.delete(&indexes.index_table, &row).await
        };
        let kind: fn(&mut SweepReport) -> &mut u64 = |r| &mut r.stale_index_rows;
        self.remove(stale, old, remove, kind, report, progress)
            .await
    }

    /// The tombstones of `table` not marked by a unit.
    async fn tombstones(
        &self,
        table: &TableName,
        report: &mut SweepReport,
        progress: &mut (dyn FnMut(&SweepReport) + Send),
    ) -> Result<()> {
        let tombstones = Filter::compare(tombstone::PROPERTY, CmpOp::Ge, Value::String("".into()));
        let mut pages = Pages::new(self.env.backend.as_ref(), table, tombstones);
        while let Some(page) = pages.next().await? {
            report.rows_examined += count(page.len());
            let old = |row: &StoredEntity| {
                tombstone::is_tombstone(&row.data.properties)
                    && row.data.properties.get(MARK).is_none()
                    && row.timestamp < self.cutoff
            };
            let remove = |row: StoredEntity| async move { self.delete(table, &row).await };
            let kind: fn(&mut SweepReport) -> &mut u64 = |r| &mut r.tombstones;
            self.remove(page, old, remove, kind, report, progress)
                .await?;
        }
        Ok(())
    }

    /// The rows of `table` (without the store's prefix) whose expiry is at
    /// or before `now` (see `super::expiry`).
    pub(super) async fn expired(
        &self,
        table: &str,
        now: OffsetDateTime,
        report: &mut SweepReport,
        progress: &mut (dyn FnMut(&SweepReport) + Send),
    ) -> Result<()> {
        let env = self.env;
        let name = &env.table_name(table)?;
        let indexes = &match crate::index::read_defs(&env.tables, table).await {
            Ok(found) => found,
            // No index table can have such a name: the type has no indexes.
            Err(e) if e.kind() == ErrorKind::Invalid => None,
            Err(e) => return Err(e),
        };
        let due = Filter::compare(
            crate::rows::expiry::PROPERTY,
            CmpOp::Le,
            Value::DateTime(now),
        );
        let mut pages = Pages::new(env.backend.as_ref(), name, due);
        let resolver = Resolver::new(&env.tables, Vec::new());
        let before = (report.expired_rows, report.kept);
        // A page at a time: a table's expired rows may not fit in memory.
        while let Some(page) = pages.next().await? {
            let mut rows = Vec::new();
            for row in page {
                if decision::is_decision_row(&row.data.row_key) {
                    continue;
                }
                // A row in a commit: judged as the commit leaves it.
                let Some(row) = resolver.resolve_opt(name, Some(row)).await? else {
                    continue;
                };
                if row.data.properties.get(tombstone::PROPERTY).is_none()
                    && crate::rows::expiry::expired_at(&row.data.properties, now)
                {
                    rows.push(row);
                }
            }
            report.rows_examined += rows.len() as u64;
            let remove = |row: StoredEntity| async move {
                match indexes {
                    Some(indexes) if !self.dry_run => {
                        super::expiry::remove_indexed(env, indexes, name, row).await
                    }
                    _ => self.delete(name, &row).await,
                }
            };
            let kind: fn(&mut SweepReport) -> &mut u64 = |r| &mut r.expired_rows;
            self.remove(rows, |_| true, remove, kind, report, progress)
                .await?;
        }
        if !self.dry_run {
            let (removed, kept) = (report.expired_rows - before.0, report.kept - before.1);
            env.telemetry.expired_rows(name.as_str(), removed, kept);
        }
        Ok(())
    }

    /// Runs `remove` on the `rows` that are `old`, `concurrency` at once,
    /// counting each removed in `kind`, and in `kept` the young ones and
    /// those changed since they were read; calls `progress` every 100
    /// removals and at the end.
    async fn remove<T, F: Future<Output = Result<bool>>>(
        &self,
        rows: Vec<T>,
        old: impl Fn(&T) -> bool,
        remove: impl FnMut(T) -> F,
        kind: fn(&mut SweepReport) -> &mut u64,
        report: &mut SweepReport,
        progress: &mut (dyn FnMut(&SweepReport) + Send),
    ) -> Result<()> {
        let (old, young): (Vec<T>, Vec<T>) = rows.into_iter().partition(|row| old(row));
        report.kept += count(young.len());
        let mut removals = futures_util::stream::iter(old)
            .map(remove)
            .buffer_unordered(self.concurrency);
        while let Some(removed) = removals.next().await {
            let counted = if removed? {
                kind(report)
            } else {
                &mut report.kept
            };
            *counted += 1;
            if kind(report).is_multiple_of(100) {
                progress(report);
            }
        }
        progress(report);
        Ok(())
    }

    /// Deletes `row` at its ETag (a dry run: counts it).
    async fn delete(&self, table: &TableName, row: &StoredEntity) -> Result<bool> {
        if self.dry_run {
            return Ok(true);
        }
        crate::rows::delete_as_read(self.env.backend.as_ref(), table, row).await
    }
}

/// The leader lease of the store's sweeper.
const SWEEPER_LEASE: &str = "_lhSweeper";

impl Store {
    /// Runs [`Store::sweep`] every `every` while this process leads the
    /// leader lease `_lhSweeper`, handing each round's report or error to
    /// `round`, until the stop token of `leader`
    /// ([`LeaderOptions::with_stop`]) is cancelled.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use leasehold::lease::LeaderOptions;
    /// # use leasehold::store::SweepOptions;
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let store = leasehold::Store::memory();
    /// let stop = leasehold::CancellationToken::new();
    /// let leader = LeaderOptions::new().with_stop(stop.clone());
    /// let options = SweepOptions::new();
    /// let sweeper = store.run_sweeper(&options, Duration::from_secs(300), leader, |round| {
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
