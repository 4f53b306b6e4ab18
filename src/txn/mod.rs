//! Transactions across partitions and tables without a lease
//! ([`Store::transaction`](crate::Store::transaction),
//! [`Store::transact`](crate::Store::transact)): all or nothing, as a
//! [`Unit`]'s commit ("The commit protocol" in [`crate::lock`]), with no
//! lease to take, renew or wait for. After its reads a commit is two round
//! trips (marks, commit point); marked rows are finished behind the answer.
//!
//! **Serializable.** A row read (or [`check`](Transaction::check)ed) and
//! not written is marked too, at the ETag read (a row read as absent must
//! still be absent): if it changed, the commit fails with
//! [`Error::Conflict`] (inside [`Error::Batch`]), nothing applied, so there
//! is no write skew.
//!
//! **The time-to-live.** With no lock to show a writer is alive, marks
//! carry a time-to-live ([`TransactionOptions::with_time_to_live`]): a
//! reader that has seen a mark undecided that long withdraws the
//! transaction, and the writer sends its commit point only within the
//! time-to-live of its marks. A wrong clock can only withdraw a live
//! writer early: it answers [`Error::Conflict`], nothing applied
//! ([`Store::transact`](crate::Store::transact) runs it again).
//!
//! ```
//! use leasehold::{Entity, Store};
//!
//! #[derive(Entity, Clone, Debug)]
//! #[entity(table = "Accounts")]
//! struct Account { #[entity(partition_key)] customer: String, #[entity(row_key)] name: String, balance: i64 }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let store = Store::memory();
//! let accounts = store.table::<Account>();
//! accounts.insert(Account { customer: "ann".into(), name: "main".into(), balance: 100 }).await?;
//! accounts.insert(Account { customer: "bob".into(), name: "main".into(), balance: 0 }).await?;
//!
//! store.transact(|tx| Box::pin(async move {
//!     let mut ann = tx.get::<Account>("ann", "main").await?.expect("exists");
//!     let mut bob = tx.get::<Account>("bob", "main").await?.expect("exists");
//!     ann.balance -= 30;
//!     bob.balance += 30;
//!     tx.replace(&ann)?;
//!     tx.replace(&bob)
//! })).await?;
//! assert_eq!(accounts.get("bob", "main").await?.unwrap().balance, 30);
//! # Ok::<(), leasehold::Error>(()) }).unwrap();
//! ```

use std::time::Duration;

use crate::backend::{Precondition, TableOp};
use crate::entity::{Entity, Properties, Versioned};
use crate::error::{Error, ErrorKind, Result};
use crate::key::{IntoPartitionKey, IntoRowKey};
use crate::lock::{CommitReport, LockEnv, STAGED, Slot, Unit, UnitQuery};

/// How a [`Transaction`] commits
/// ([`Store::transaction_with`](crate::Store::transaction_with)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TransactionOptions {
    ttl: Duration,
}

impl TransactionOptions {
    /// The default time-to-live of a transaction's marks.
    pub const DEFAULT_TIME_TO_LIVE: Duration = Duration::from_secs(2);

    /// The longest time-to-live.
    pub const MAX_TIME_TO_LIVE: Duration = Duration::from_secs(60);

    /// The defaults: a 2 s time-to-live.
    pub fn new() -> Self {
        TransactionOptions {
            ttl: Self::DEFAULT_TIME_TO_LIVE,
        }
    }

    /// How long a reader that sees the marks undecided waits before it
    /// withdraws the transaction.
    ///
    /// # Errors
    /// [`Error::Invalid`] for zero or more than [`Self::MAX_TIME_TO_LIVE`].
    pub fn with_time_to_live(mut self, ttl: Duration) -> Result<Self> {
        if ttl.is_zero() || ttl > Self::MAX_TIME_TO_LIVE {
            return Err(Error::invalid(
                format!("time_to_live {ttl:?}"),
                format!(
                    "must be above zero and at most {:?}",
                    Self::MAX_TIME_TO_LIVE
                ),
            ));
        }
        self.ttl = ttl;
        Ok(self)
    }

    /// See [`TransactionOptions::with_time_to_live`].
    pub fn time_to_live(&self) -> Duration {
        self.ttl
    }
}

impl Default for TransactionOptions {
    fn default() -> Self {
        Self::new()
    }
}

/// The staging methods of [`Transaction`], each its unit's.
macro_rules! stage {
    ($($(#[$doc:meta])* $name:ident($arg:ident: $ty:ty);)*) => {$(
        $(#[$doc])*
        ///
        /// # Errors
        #[doc = concat!("As [`Unit::", stringify!($name), "`].")]
        pub fn $name<E: Entity>(&mut self, $arg: $ty) -> Result<()> {
            self.unit.$name($arg)
        }
    )*};
}

/// A transaction across any partitions and tables, without a lease (the
/// [module docs](self)). Dropping it sends nothing.
#[must_use = "a Transaction does nothing until `commit().await`"]
#[derive(Debug)]
pub struct Transaction {
    unit: Unit,
}

impl Transaction {
    pub(crate) fn new(env: &std::sync::Arc<LockEnv>, options: &TransactionOptions) -> Self {
        Transaction {
            unit: Unit::transaction(env, options.ttl),
        }
    }

    /// Reads an entity, recording the ETag it saw (the commit fails if the
    /// row changed since); sees the transaction's staged writes.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad key; [`Error::Decode`]; backend errors.
    pub async fn get<E: Entity>(
        &mut self,
        partition_key: impl IntoPartitionKey,
        row_key: impl IntoRowKey,
    ) -> Result<Option<Versioned<E>>> {
        self.unit.get_in(partition_key, row_key).await
    }

    /// Reads several entities of one type, as [`Transaction::get`] does,
    /// in one round trip; answers in the order of `keys`.
    ///
    /// # Errors
    /// As [`Transaction::get`], every key checked before any request.
    pub async fn get_many<E, P, R>(
        &mut self,
        keys: impl IntoIterator<Item = (P, R)>,
    ) -> Result<Vec<Option<Versioned<E>>>>
    where
        E: Entity,
        P: IntoPartitionKey,
        R: IntoRowKey,
    {
        let table = self.unit.env.table_name(E::TABLE)?;
        // Every key is checked first: a refused call changes nothing.
        let keys = keys
            .into_iter()
            .map(|(pk, rk)| Ok((pk.into_partition_key()?, rk.into_row_key()?)))
            .collect::<Result<Vec<_>>>()?;
        let mut wanted = Vec::new();
        for (pk, rk) in keys {
            let part = self.unit.part_of(&pk, "read")?;
            let table = table.clone();
            wanted.push((Slot { part, table }, rk));
        }
        self.unit.read_unread(&wanted).await?;
        // Every row is now read (or staged): answered from memory.
        (wanted.iter())
            .map(|key| Ok(self.unit.view::<E>(key)?.map(|(view, _)| view)))
            .collect()
    }

    /// A typed query of one partition (name it with
    /// [`UnitQuery::partition`]; a query without one is
    /// [`Error::Invalid`]); every row it returns is recorded as read.
    pub fn query<E: Entity>(&mut self) -> UnitQuery<'_, E> {
        self.unit.query()
    }

    stage! {
        /// Stages the creation of an entity (the commit fails if it exists).
        insert(entity: &E);
        /// Stages the replacement of an entity read at its ETag.
        replace(current: &Versioned<E>);
        /// Stages a merge of an entity's properties at its ETag.
        merge(current: &Versioned<E>);
        /// Stages the delete of an entity at its ETag.
        delete(current: &Versioned<E>);
        /// Stages an insert-or-replace, without a condition.
        upsert(entity: &E);
    }

    /// A condition on a row the transaction does not write: the commit
    /// fails as for a row read that changed unless the row still has
    /// `current`'s ETag.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a value without a stored version (a staged
    /// view) or a bad key; [`Error::Conflict`] at once when the transaction
    /// read the row at another ETag.
    pub fn check<E: Entity>(&mut self, current: &Versioned<E>) -> Result<()> {
        let data = current.encode()?;
        let table = self.unit.env.table_name(E::TABLE)?;
        let etag = current.etag().clone();
        let key = |part| {
            let table = table.clone();
            (Slot { part, table }, data.row_key.clone())
        };
        let part = (self.unit.parts.iter()).position(|p| p.pk == data.partition_key);
        match part.and_then(|part| self.unit.reads.get(&key(part))) {
            Some(Some(row)) if row.etag == etag => return Ok(()),
            Some(_) => {
                let what = format!(
                    "check of row {:?} of partition {:?} in `{table}`: the transaction read it at another version",
                    data.row_key.as_str(),
                    data.partition_key.as_str(),
                );
                return Err(Error::Conflict {
                    what,
                    code: None,
                    table: Some(table.as_str().to_owned()),
                    row: Some(Box::new((data.partition_key.clone(), data.row_key.clone()))),
                });
            }
            None if etag.as_str() == STAGED => {
                return Err(Error::invalid(
                    "check",
                    "the value is a staged view, with no stored version",
                ));
            }
            None => {}
        }
        let key = key(self.unit.part_of(&data.partition_key, "check")?);
        let unchanged = crate::rows::row(&data.partition_key, &data.row_key, Properties::new());
        let check = TableOp::Merge(unchanged, Precondition::IfMatch(etag));
        self.unit.staged.entry(key).or_insert(check);
        Ok(())
    }

    /// Commits every staged write, all or nothing, provided every row read
    /// or checked is unchanged.
    ///
    /// # Errors
    /// As [`Unit::commit`], but [`Error::Conflict`] (nothing applied) when
    /// the transaction outlived its time-to-live or was withdrawn.
    pub async fn commit(self) -> Result<CommitReport> {
        self.unit.commit().await.map_err(|e| match e.kind() {
            ErrorKind::LeaseLost => Error::Conflict {
                what: format!("transaction not committed, nothing applied: {e}"),
                code: None,
                table: None,
                row: None,
            },
            _ => e,
        })
    }
}

#[cfg(test)]
mod tests {
    /// The commit's span names the first partition; a transaction with none
    /// (nothing read, nothing staged) commits all the same.
    #[test]
    fn a_transaction_with_nothing_to_commit_commits_under_a_debug_subscriber() {
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_test_writer()
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let report = runtime
                .block_on(crate::Store::memory().transaction().commit())
                .unwrap();
            assert_eq!(report.operations, 0);
        });
    }
}
