//! What a store opens: tables, units, transactions, and commits' decisions.

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
        Table::new(Arc::clone(self.tables()))
    }

    /// The table named `table` (under the store's prefix) of
    /// [`DynamicEntity`](crate::DynamicEntity) rows; a bad name fails its
    /// first operation.
    pub fn dynamic_table(&self, table: &str) -> Table<crate::DynamicEntity> {
        Table::new(Arc::clone(self.tables())).with_table_name(table)
    }

    /// Takes the lock of a partition ([`Store::lock_many`] of one key).
    ///
    /// # Errors
    /// As [`Store::lock_many`].
    pub async fn lock(&self, partition_key: impl IntoPartitionKey) -> Result<Unit> {
        self.lock_many([partition_key]).await
    }

    /// A transaction across any partitions and tables, without a lease,
    /// with the default [`TransactionOptions`]; see [`crate::txn`].
    pub fn transaction(&self) -> Transaction {
        self.transaction_with(&TransactionOptions::default())
    }

    /// A transaction committing with `options`.
    pub fn transaction_with(&self, options: &TransactionOptions) -> Transaction {
        Transaction::new(self.locking(), options)
    }

    /// Runs `f` in a fresh [`Transaction`] and commits it, again on a
    /// conflict under the store's [`ConflictRetry`](crate::ConflictRetry);
    /// answers what `f` answered in the attempt that committed.
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
    /// As [`Store::lock_many`].
    pub async fn lock_with_timeout(
        &self,
        partition_key: impl IntoPartitionKey,
        timeout: Duration,
    ) -> Result<Unit> {
        self.lock_many_with_timeout([partition_key], timeout).await
    }

    /// As [`Store::lock`] if nobody holds the lock; `Ok(None)` otherwise.
    ///
    /// # Errors
    /// As [`Store::lock_many`], without the timeout.
    pub async fn try_lock(&self, partition_key: impl IntoPartitionKey) -> Result<Option<Unit>> {
        self.try_lock_many([partition_key]).await
    }

    /// Takes the locks of partitions for one [`Unit`] (see [`crate::lock`]),
    /// waiting up to [`LockOptions::acquire_timeout`](crate::lock::LockOptions::acquire_timeout)
    /// in all; duplicate keys count once, keys of different kinds join
    /// with [`IntoPartitionKeys::and_keys`].
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
    /// # Errors
    /// [`crate::Error::Timeout`] when a lock stays held;
    /// [`crate::Error::Unavailable`] when storage kept failing (see
    /// [`LeaseOptions::with_unavailable_after`](crate::lease::LeaseOptions::with_unavailable_after));
    /// [`crate::Error::LeaseLost`] when a lease ran out while the locks
    /// were taken (calling again is safe); [`crate::Error::Invalid`] for a
    /// bad key (naming it) or an empty set, before any request;
    /// [`crate::Error::Auth`]; other backend errors.
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
            what: "partition lock".into(),
            after: timeout,
        })
    }

    /// As [`Store::lock_many`] if nobody holds any of the locks; `Ok(None)`
    /// otherwise, every lock taken given back.
    ///
    /// # Errors
    /// As [`Store::lock_many`], without the timeout.
    pub async fn try_lock_many(
        &self,
        partition_keys: impl IntoPartitionKeys,
    ) -> Result<Option<Unit>> {
        Unit::open(self.locking(), partition_keys.into_partition_keys()?, None).await
    }

    /// What became of the commit `transaction` with primary partition
    /// `primary` (as [`Error::InDoubt`] names them); an undecided commit is
    /// withdrawn first, so the answer is final. One read, or a read and an
    /// insert.
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
    /// [`Error::Invalid`] for a bad key or transaction id (before any
    /// request); [`Error::NotFound`] for a commit begun over 50 minutes ago
    /// whose decision row is gone (see "Rows commits leave behind" in
    /// [`crate::lock`]); [`Error::Inconsistent`] for a decision that does
    /// not parse; backend errors.
    ///
    /// [`Error::InDoubt`]: crate::Error::InDoubt
    /// [`Error::NotFound`]: crate::Error::NotFound
    pub async fn commit_outcome(
        &self,
        primary: impl IntoPartitionKey,
        transaction: &str,
    ) -> Result<CommitOutcome> {
        let pk = primary.into_partition_key()?;
        crate::lock::commit_outcome(self.locking(), &pk, transaction).await
    }

    /// For operators: the unfinished commits whose decision row is in a
    /// partition, or that still mark rows of it, oldest first, with the
    /// rows each marks here. Writes nothing; one query per table, and one
    /// read per commit marked here whose decision row is elsewhere.
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
        let tables = super::manage::prefixed_tables(self.tables()).await?;
        crate::lock::list_commits(self.locking(), tables, &pk).await
    }
}
