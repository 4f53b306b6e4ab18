//! What a store opens: typed tables, and partition locks (units of work),
//! with the operator's access to a commit's decision.

use std::sync::Arc;
use std::time::Duration;

use crate::entity::Entity;
use crate::error::{Error, Result};
use crate::key::IntoPartitionKey;
use crate::lock::{CommitOutcome, IntoPartitionKeys, Unit};
use crate::table::Table;
use crate::txn::{Transaction, TransactionOptions};

use super::Store;

impl Store {
    /// The typed table of entity type `E`.
    pub fn table<E: Entity>(&self) -> Table<E> {
        let mut table = Table::new(Arc::clone(self.tables()));
        table.resolve = Some(self.resolve());
        if !E::INDEXES.is_empty() {
            table.indexing = Some(crate::index::layer::<E>(Arc::clone(self.locking())));
            table.restack();
        }
        table
    }

    /// The table named `table` (with the store's prefix, as for typed
    /// tables), its rows as [`DynamicEntity`](crate::DynamicEntity): keys,
    /// ETag, Timestamp and every property, whatever wrote them. An invalid
    /// name is an [`Error::Invalid`] at the first
    /// operation, as for [`Store::table`].
    pub fn dynamic_table(&self, table: &str) -> Table<crate::DynamicEntity> {
        let mut dynamic = Table::new(Arc::clone(self.tables())).with_table_name(table);
        dynamic.resolve = Some(self.resolve());
        dynamic
    }

    /// Takes the lock of a partition, waiting up to the configured
    /// [`LockOptions::acquire_timeout`](crate::lock::LockOptions::acquire_timeout).
    /// See [`crate::lock`].
    ///
    /// # Errors
    /// [`crate::Error::Timeout`] when the lock stays held;
    /// [`crate::Error::Unavailable`] naming the blob endpoint when storage
    /// kept failing for the lock lease options'
    /// [`LeaseOptions::with_unavailable_after`](crate::lease::LeaseOptions::with_unavailable_after) (30 s by default);
    /// [`crate::Error::LeaseLost`] when the lease ran out while the lock was
    /// being taken (the process stalled past the lease duration while it
    /// recorded itself as the holder): nothing of the call's own was written, the locks taken are
    /// given back, and calling again is safe; [`crate::Error::Invalid`] for
    /// a bad key; [`crate::Error::Auth`] when storage refuses the
    /// credentials; other backend errors.
    pub async fn lock(&self, partition_key: impl IntoPartitionKey) -> Result<Unit> {
        self.lock_with_timeout(partition_key, self.lock_options().acquire_timeout())
            .await
    }

    /// A transaction across any partitions and tables, without a lease,
    /// with the default [`TransactionOptions`]; see [`crate::txn`].
    pub fn transaction(&self) -> Transaction {
        self.transaction_with(&TransactionOptions::default())
    }

    /// A transaction committing with `options` (its time-to-live).
    pub fn transaction_with(&self, options: &TransactionOptions) -> Transaction {
        Transaction::new(self.locking(), options)
    }

    /// Runs `f` in a fresh [`Transaction`] and commits it; when the commit
    /// fails with a conflict (a row changed since it was read, or the
    /// transaction was withdrawn), runs `f` again in a new one, under the
    /// store's [`ConflictRetry`](crate::ConflictRetry) policy, as
    /// [`Table::update_with`](crate::Table::update_with) does for one row.
    /// Answers what `f` answered in the attempt that committed.
    ///
    /// ```
    /// # use leasehold::{Entity, Store};
    /// # #[derive(Entity, Clone, Debug)]
    /// # #[entity(table = "Counters")]
    /// # struct Counter { #[entity(partition_key)] pk: String, #[entity(row_key)] id: String, n: i64 }
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let store = Store::memory();
    /// store.table::<Counter>().insert(Counter { pk: "a".into(), id: "c".into(), n: 0 }).await?;
    /// let n = store.transact(|tx| Box::pin(async move {
    ///     let mut c = tx.get::<Counter>("a", "c").await?.expect("exists");
    ///     c.n += 1;
    ///     tx.replace(&c)?;
    ///     Ok(c.n)
    /// })).await?;
    /// assert_eq!(n, 1);
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// What `f` answers (not retried); [`Transaction::commit`]'s errors,
    /// a conflict once the attempts are spent.
    pub async fn transact<T, F>(&self, mut f: F) -> Result<T>
    where
        F: for<'t> FnMut(&'t mut Transaction) -> futures_util::future::BoxFuture<'t, Result<T>>,
    {
        let mut pauses = self.conflict_retry().backoff();
        loop {
            let mut tx = self.transaction();
            let out = f(&mut tx).await?;
            let e = match tx.commit().await {
                Ok(_) => return Ok(out),
                Err(e) => e,
            };
            let conflict = match &e {
                Error::Batch { source, .. } => source.kind() == crate::ErrorKind::Conflict,
                other => other.kind() == crate::ErrorKind::Conflict,
            };
            match pauses.next() {
                Some(pause) if conflict => tokio::time::sleep(pause).await,
                _ => return Err(e),
            }
        }
    }

    /// As [`Store::lock`], waiting up to `timeout`.
    ///
    /// # Errors
    /// As [`Store::lock`].
    pub async fn lock_with_timeout(
        &self,
        partition_key: impl IntoPartitionKey,
        timeout: Duration,
    ) -> Result<Unit> {
        Unit::open(self.locking(), [partition_key], Some(timeout))
            .await?
            .ok_or_else(|| Error::Timeout {
                what: "partition lock".into(),
                after: timeout,
            })
    }

    /// Takes the lock of a partition if nobody holds it; `Ok(None)` otherwise.
    ///
    /// # Errors
    /// As [`Store::lock`], without the timeout.
    pub async fn try_lock(&self, partition_key: impl IntoPartitionKey) -> Result<Option<Unit>> {
        Unit::open(self.locking(), [partition_key], None).await
    }

    /// Takes the locks of several partitions for one [`Unit`], waiting up to
    /// the configured
    /// [`LockOptions::acquire_timeout`](crate::lock::LockOptions::acquire_timeout)
    /// in all. Duplicate keys count once; the locks are taken in one
    /// canonical order (by lock blob name), so units taking overlapping sets
    /// never deadlock, and on any failure every lock already taken is given
    /// back. See [`crate::lock`].
    ///
    /// ```
    /// use leasehold::{Entity, Store};
    ///
    /// #[derive(Entity, Clone, Debug)]
    /// #[entity(table = "Accounts")]
    /// struct Account { #[entity(partition_key)] customer: String, #[entity(row_key)] name: String, balance: i64 }
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let store = Store::memory();
    /// let accounts = store.table::<Account>();
    /// accounts.insert(Account { customer: "alice".into(), name: "main".into(), balance: 100 }).await?;
    /// accounts.insert(Account { customer: "bob".into(), name: "main".into(), balance: 0 }).await?;
    ///
    /// let mut unit = store.lock_many(["bob", "alice"]).await?;
    /// let mut from = unit.get_in::<Account>("alice", "main").await?.expect("exists");
    /// let mut to = unit.get_in::<Account>("bob", "main").await?.expect("exists");
    /// from.balance -= 30;
    /// to.balance += 30;
    /// unit.replace(&from)?;
    /// unit.replace(&to)?;
    /// let report = unit.commit().await?; // two partitions: decided in a row, all or nothing
    /// assert_eq!((report.partitions, report.transaction.is_some()), (2, true));
    /// assert_eq!(accounts.get("bob", "main").await?.unwrap().balance, 30);
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    ///
    /// Keys of different kinds (`&str` and [`PartitionKey`](crate::PartitionKey),
    /// say) go in one call joined with
    /// [`IntoPartitionKeys::and_keys`].
    ///
    /// # Errors
    /// [`crate::Error::Invalid`] for a bad key (naming it) or an empty set
    /// (before any request); otherwise as [`Store::lock`].
    pub async fn lock_many(&self, partition_keys: impl IntoPartitionKeys) -> Result<Unit> {
        self.lock_many_with_timeout(partition_keys, self.lock_options().acquire_timeout())
            .await
    }

    /// As [`Store::lock_many`], waiting up to `timeout` in all.
    ///
    /// # Errors
    /// As [`Store::lock_many`].
    pub async fn lock_many_with_timeout(
        &self,
        partition_keys: impl IntoPartitionKeys,
        timeout: Duration,
    ) -> Result<Unit> {
        Unit::open(
            self.locking(),
            partition_keys.into_partition_keys()?,
            Some(timeout),
        )
        .await?
        .ok_or_else(|| Error::Timeout {
            what: "partition locks".into(),
            after: timeout,
        })
    }

    /// Takes the locks of several partitions if nobody holds any of them;
    /// `Ok(None)` otherwise, with every lock it took given back.
    ///
    /// # Errors
    /// As [`Store::lock_many`], without the timeout.
    pub async fn try_lock_many(
        &self,
        partition_keys: impl IntoPartitionKeys,
    ) -> Result<Option<Unit>> {
        Unit::open(self.locking(), partition_keys.into_partition_keys()?, None).await
    }

    /// What became of the commit `transaction` whose primary partition is
    /// `primary` ([`CommitReport::transaction`], or the fields of
    /// [`Error::InDoubt`]), as its decision row tells it:
    /// [`Applied`](CommitOutcome::Applied) (rows still marked are finished
    /// by whoever reads them) or [`NotApplied`](CommitOutcome::NotApplied).
    /// A commit without a decision yet is withdrawn first (its decision row
    /// inserted as withdrawn), so the answer is final: a commit point still
    /// on its way is refused. One read, or a read and an insert.
    ///
    /// ```
    /// # use leasehold::{Store, lock::CommitOutcome};
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let store = Store::memory();
    /// # store.create_table("Accounts").await?;
    /// // After `Error::InDoubt { primary, transaction, .. }`, once storage answers:
    /// match store.commit_outcome("alice", "0f1e2d3c.Accounts").await? {
    ///     CommitOutcome::Applied => {}  // nothing to redo
    ///     _ => { /* nothing was applied: safe to run the unit again */ }
    /// }
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad key or a transaction id naming no table
    /// (before any request); [`Error::Inconsistent`] when the stored
    /// decision does not parse; backend errors.
    ///
    /// [`CommitReport::transaction`]: crate::lock::CommitReport::transaction
    /// [`Error::InDoubt`]: crate::Error::InDoubt
    pub async fn commit_outcome(
        &self,
        primary: impl IntoPartitionKey,
        transaction: &str,
    ) -> Result<CommitOutcome> {
        let pk = primary.into_partition_key()?;
        crate::lock::commit_outcome(self.locking(), &pk, transaction).await
    }

    /// For operators: the commits a partition holds rows of, oldest first
    /// — those whose decision row is in it (left by a writer that stopped
    /// before finishing its marked rows, or by a reader that withdrew the
    /// commit) and those that still mark rows of it, decided or not
    /// ([`CommitSummary::outcome`](crate::lock::CommitSummary::outcome)), with the rows each
    /// still marks here. A finished commit leaves nothing, so it is not
    /// listed; nor is a commit of one entity-group transaction. A commit
    /// on its way shows as undecided until its commit point.
    ///
    /// It writes nothing: [`Store::commit_outcome`] settles a commit, a
    /// read of a marked row finishes or withdraws its mark, and
    /// [`Store::prune_locks`] removes decision rows no reader needs. One
    /// query per table of the store, and one read per commit marked here
    /// whose decision row is in another partition or table.
    ///
    /// ```
    /// # use leasehold::Store;
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let store = Store::memory();
    /// for commit in store.list_commits("alice").await? {
    ///     println!("{} {:?} {:?}", commit.transaction, commit.outcome, commit.marked_rows);
    /// }
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad key (before any request); backend
    /// errors.
    pub async fn list_commits(
        &self,
        partition_key: impl IntoPartitionKey,
    ) -> Result<Vec<crate::lock::CommitSummary>> {
        let pk = partition_key.into_partition_key()?;
        crate::lock::list_commits(self.locking(), &pk).await
    }

    /// For operators: deletes the lock blobs of this store's partitions
    /// that nobody has locked for `older_than`, so that the lock container
    /// does not keep a blob for every partition ever locked. A lock blob
    /// goes when it is
    ///
    /// * free (no lease on it),
    /// * clean (no record in it: a lock blob holds the lease and its wait
    ///   queue only, so a record is another program's), and
    /// * old: the last process to take the lock over did so
    ///   (`leasehold_acquired`) at least `older_than` ago.
    ///
    /// It also removes the rows commits leave behind when their writer
    /// stopped half-way, or a reader withdrew them: a committed decision
    /// row older than `older_than` whose marks are all gone, a withdrawn
    /// one older than `older_than` and than 20 minutes, and their
    /// after-image rows ([`PruneReport::decision_rows_deleted`](crate::lock::PruneReport::decision_rows_deleted);
    /// see [`crate::lock`]'s "Rows commits leave behind"): one query per
    /// table of the store, and one per group a committed decision row
    /// names.
    ///
    /// `Duration::ZERO` makes every free, clean lock blob old. A lock blob
    /// that cannot be dated (no `leasehold_acquired`: the backends expose
    /// no last-modified time) is old only then; otherwise it is stamped
    /// with the time now and kept, and ages from there. A lock used by one
    /// process only keeps the date that process first took it, so it may
    /// be deleted between two of its units; its next unit creates it again
    /// (two requests more).
    ///
    /// It is safe against units locking the same partitions meanwhile:
    /// each candidate's lease is taken (trying once, as
    /// [`Store::try_lock`] does), the blob checked again as that acquire
    /// read it, and deleted with that lease id (its wait queue first, unless
    /// a process waits there: then both are kept). A unit locking the
    /// partition at that moment either gets the lock first (the blob is
    /// kept) or waits as for any holder and creates the blob again. See
    /// [`crate::lock`]'s "Lock blobs".
    ///
    /// Cost: one listing request per 5000 lock blobs and one read per lock
    /// blob; a candidate adds an acquire and a read, then a read of its wait
    /// queue and the deletes (the queue's only when it exists), or a release
    /// (with a metadata write when it is stamped).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use leasehold::Store;
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let store = Store::memory();
    /// store.lock("alice").await?.abandon().await?;
    /// let held = store.lock("bob").await?;
    ///
    /// // Both were locked just now: nothing is a week old.
    /// let week = Duration::from_secs(7 * 24 * 3600);
    /// let plan = store.prune_locks_dry_run(week).await?;
    /// assert_eq!((plan.examined, plan.deleted, plan.kept_held), (2, 0, 1));
    ///
    /// // Every free, clean lock blob, however recent.
    /// let report = store.prune_locks(Duration::ZERO).await?;
    /// assert_eq!(report.deleted_partitions.len(), 1);
    /// assert_eq!(report.deleted_partitions[0].as_str(), "alice");
    /// assert_eq!(report.kept_held, 1, "bob is held");
    /// held.abandon().await?;
    ///
    /// // A pruned lock is created again by the next unit.
    /// store.lock("alice").await?.abandon().await?;
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`Error::Invalid`] for an `older_than` reaching back before any date
    /// (before any request); [`Error::Unavailable`] when storage kept
    /// failing; backend errors of the listing, a read or a delete. The
    /// prune stops at the first error; what it deleted stays deleted, and
    /// running it again goes on from there.
    ///
    /// [`Error::Unavailable`]: crate::Error::Unavailable
    pub async fn prune_locks(&self, older_than: Duration) -> Result<crate::lock::PruneReport> {
        crate::lock::prune_locks(self.locking(), older_than, false).await
    }

    /// As [`Store::prune_locks`], but takes no lease and deletes nothing:
    /// reads each lock blob and reports what a prune would delete now
    /// ([`PruneReport::dry_run`](crate::lock::PruneReport::dry_run) set). A
    /// lock blob that cannot be dated counts as recent (unless
    /// `older_than` is zero). Units locking meanwhile may change what a
    /// prune then finds.
    ///
    /// # Errors
    /// As [`Store::prune_locks`], without the deletes.
    pub async fn prune_locks_dry_run(
        &self,
        older_than: Duration,
    ) -> Result<crate::lock::PruneReport> {
        crate::lock::prune_locks(self.locking(), older_than, true).await
    }
}
