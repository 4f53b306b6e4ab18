//! Transactions across partitions and tables without a lease
//! ([`Store::transaction`](crate::Store::transaction),
//! [`Store::transact`](crate::Store::transact)): all or nothing, like a
//! [`Unit`]'s commit, with no blob lease to take, renew
//! or wait for.
//!
//! A [`Transaction`] reads rows (recording the ETag each read saw), stages
//! writes, and commits by the one commit protocol of units (see "The
//! commit protocol" in [`crate::lock`]): every row it writes *or read* is
//! marked, conditioned on the ETag it read, then the insert of its
//! decision row decides it. Its answer comes once the decision row is
//! stored — after its reads, two round trips (the marks, then the commit
//! point), whatever the number of partitions; the marked rows are finished
//! behind the answer, or by whoever reads them first. Reads take a round
//! trip each ([`Transaction::get`]) or one for all
//! ([`Transaction::get_many`]): a transfer between two partitions read with
//! `get_many` answers 3 round trips after it begins.
//!
//! # Serializable
//!
//! A row the transaction read (or [`check`](Transaction::check)ed) and does
//! not write is marked too, at the ETag read: if it changed since, the
//! commit fails with [`Error::Conflict`] (inside
//! [`Error::Batch`]) naming it, nothing applied. So two
//! transactions that each read two rows and write the other one cannot
//! both commit: no write skew. A row read as absent must still be absent.
//!
//! # No lease: the time-to-live
//!
//! Units keep a live writer from being withdrawn by its lock: a reader
//! meeting an undecided mark waits until it can take the primary's lock.
//! A transaction holds no lock; its marks carry a *time-to-live*
//! ([`TransactionOptions::with_time_to_live`], 2 s by default). A reader
//! that has seen a transaction's mark undecided for that long, on its own
//! clock, withdraws the transaction by inserting its decision row as
//! `withdrawn`. The writer sends its commit point only within the
//! time-to-live of its marks (and its backend refuses to send it later:
//! see `crate::backend::deadline`).
//!
//! No clock can make a decision wrong: the commit point and a withdrawal
//! both *insert* the one decision row, and the service lets exactly one
//! insert win. A clock running fast or slow, or a writer paused past its
//! time-to-live, can only make a reader withdraw a live writer early; the
//! writer's commit point is then refused whole, and it is told, nothing
//! applied ([`Error::Conflict`]:
//! [`Store::transact`](crate::Store::transact) runs it again).
//!
//! # What the caller is told
//!
//! As for units: `Ok` means the decision says committed; an error other
//! than [`Error::InDoubt`] means nothing is applied;
//! `InDoubt` (the commit point's reply lost and its decision unreadable)
//! is answered by [`Store::commit_outcome`](crate::Store::commit_outcome).
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
use crate::entity::{Entity, EntityData, Properties, Versioned};
use crate::error::{Error, ErrorKind, Result};
use crate::key::{IntoPartitionKey, IntoRowKey, PartitionKey, RowKey};
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

    /// The longest time-to-live: a reader meeting an undecided mark waits
    /// this long at most.
    pub const MAX_TIME_TO_LIVE: Duration = Duration::from_secs(60);

    /// The defaults: a 2 s time-to-live.
    pub fn new() -> Self {
        TransactionOptions {
            ttl: Self::DEFAULT_TIME_TO_LIVE,
        }
    }

    /// How long a reader that sees the transaction's marks undecided waits
    /// before it withdraws the transaction (see the [module docs](self)):
    /// longer than the commit's two round trips, short enough that readers
    /// meeting the marks of a writer that died do not wait long.
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

    /// The time-to-live of the transaction's marks.
    pub fn time_to_live(&self) -> Duration {
        self.ttl
    }
}

impl Default for TransactionOptions {
    fn default() -> Self {
        Self::new()
    }
}

/// A transaction across any partitions and tables, without a lease; see
/// the [module docs](self).
///
/// Reads record the ETag they saw and see the transaction's own staged
/// writes; writes are staged until [`Transaction::commit`]. Dropping it
/// sends nothing.
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

    /// As [`Transaction::get`] (the name [`Unit::get_in`] has).
    ///
    /// # Errors
    /// As [`Transaction::get`].
    pub async fn get_in<E: Entity>(
        &mut self,
        partition_key: impl IntoPartitionKey,
        row_key: impl IntoRowKey,
    ) -> Result<Option<Versioned<E>>> {
        self.get(partition_key, row_key).await
    }

    /// Reads several entities of one type at once, as [`Transaction::get`]
    /// reads each: the rows it has not read yet (and has no staged write
    /// for) are requested all together, so reading any number of rows
    /// costs one round trip. Answers in the order of `keys`.
    ///
    /// ```
    /// # use leasehold::{Entity, Store};
    /// # #[derive(Entity, Clone, Debug)]
    /// # #[entity(table = "Accounts")]
    /// # struct Account { #[entity(partition_key)] customer: String, #[entity(row_key)] name: String, balance: i64 }
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// # let store = Store::memory();
    /// # for c in ["ann", "bob"] {
    /// #     store.table::<Account>().insert(Account { customer: c.into(), name: "main".into(), balance: 50 }).await?;
    /// # }
    /// let mut tx = store.transaction();
    /// let mut rows = tx.get_many::<Account, _, _>([("ann", "main"), ("bob", "main")]).await?;
    /// let mut bob = rows.pop().flatten().expect("bob's account");
    /// let mut ann = rows.pop().flatten().expect("ann's account");
    /// ann.balance -= 20;
    /// bob.balance += 20;
    /// tx.replace(&ann)?;
    /// tx.replace(&bob)?;
    /// tx.commit().await?;
    /// # assert_eq!(store.table::<Account>().get("bob", "main").await?.unwrap().balance, 70);
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad key, before any request;
    /// [`Error::Decode`]; backend errors (of the first read that failed).
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
        // Every key is checked before the transaction takes any partition
        // in: a refused call leaves it as it was.
        let keys = keys
            .into_iter()
            .map(|(pk, rk)| Ok((pk.into_partition_key()?, rk.into_row_key()?)))
            .collect::<Result<Vec<_>>>()?;
        let mut wanted = Vec::new();
        for (pk, rk) in keys {
            let part = self.unit.part_of(&pk, "read")?;
            let slot = Slot {
                part,
                table: table.clone(),
            };
            wanted.push((pk, (slot, rk)));
        }
        // Rows neither read nor written yet (a staged merge the
        // transaction knows nothing of is read too, as `get` does), once
        // each, all at once.
        let mut fetch: Vec<&(PartitionKey, (Slot, RowKey))> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for w in &wanted {
            let unread = !self.unit.reads.contains_key(&w.1)
                && matches!(self.unit.staged.get(&w.1), None | Some(TableOp::Merge(..)));
            if unread && seen.insert(&w.1) {
                fetch.push(w);
            }
        }
        if !fetch.is_empty() {
            self.unit.env.ensure_table(&table).await?;
            let (backend, resolver) = (self.unit.env.backend(), self.unit.resolver());
            let rows = futures_util::future::try_join_all(fetch.iter().map(|(pk, (_, rk))| {
                let (table, resolver) = (&table, &resolver);
                async move {
                    let stored = backend.get(table, pk, rk).await?;
                    resolver.resolve_opt(table, stored).await
                }
            }))
            .await?;
            let fetched: Vec<_> = fetch.iter().map(|w| w.1.clone()).zip(rows).collect();
            drop(resolver);
            self.unit.reads.extend(fetched);
        }
        // Every row is now read (or staged): answered from memory.
        let mut out = Vec::with_capacity(wanted.len());
        for (pk, (_, rk)) in wanted {
            out.push(self.unit.get_in::<E>(pk, rk).await?);
        }
        Ok(out)
    }

    /// A typed query of one partition (name it with
    /// [`UnitQuery::partition`]; a query without one is
    /// [`Error::Invalid`]); every row it returns is recorded as read.
    pub fn query<E: Entity>(&mut self) -> UnitQuery<'_, E> {
        self.unit.query()
    }

    /// Stages the creation of an entity (the commit fails if it exists).
    ///
    /// # Errors
    /// As [`Unit::insert`].
    pub fn insert<E: Entity>(&mut self, entity: &E) -> Result<()> {
        self.unit.insert(entity)
    }

    /// Stages the replacement of an entity read at its ETag.
    ///
    /// # Errors
    /// As [`Unit::replace`].
    pub fn replace<E: Entity>(&mut self, current: &Versioned<E>) -> Result<()> {
        self.unit.replace(current)
    }

    /// Stages a merge of an entity's properties at its ETag.
    ///
    /// # Errors
    /// As [`Unit::merge`].
    pub fn merge<E: Entity>(&mut self, current: &Versioned<E>) -> Result<()> {
        self.unit.merge(current)
    }

    /// Stages the delete of an entity at its ETag.
    ///
    /// # Errors
    /// As [`Unit::delete`].
    pub fn delete<E: Entity>(&mut self, current: &Versioned<E>) -> Result<()> {
        self.unit.delete(current)
    }

    /// Stages an insert-or-replace, without a condition.
    ///
    /// # Errors
    /// As [`Unit::upsert`].
    pub fn upsert<E: Entity>(&mut self, entity: &E) -> Result<()> {
        self.unit.upsert(entity)
    }

    /// A condition on a row the transaction does not write (DynamoDB's
    /// ConditionCheck): the commit fails with
    /// [`Error::Conflict`] (inside
    /// [`Error::Batch`]), nothing applied, unless the
    /// row still has `current`'s ETag. Rows the transaction read need no
    /// check: they are validated anyway. A row it writes is validated by
    /// its write's own condition.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a value without a stored version (a staged
    /// view) or a bad key; [`Error::Conflict`] at once when the transaction
    /// read the row at another ETag.
    pub fn check<E: Entity>(&mut self, current: &Versioned<E>) -> Result<()> {
        let data = current.encode()?;
        let table = self.unit.env.table_name(E::TABLE)?;
        let etag = current.etag().clone();
        let read_before = self
            .unit
            .parts
            .iter()
            .position(|p| p.pk == data.partition_key);
        if etag.as_str() == STAGED
            && read_before.is_none_or(|part| {
                let key = (
                    Slot {
                        part,
                        table: table.clone(),
                    },
                    data.row_key.clone(),
                );
                !self.unit.reads.contains_key(&key)
            })
        {
            return Err(Error::invalid(
                "check",
                "the value is a staged view, with no stored version",
            ));
        }
        let part = self.unit.part_of(&data.partition_key, "check")?;
        let key = (Slot { part, table }, data.row_key.clone());
        if let Some(read) = self.unit.reads.get(&key) {
            return match read {
                Some(row) if row.etag == etag => Ok(()),
                _ => Err(Error::Conflict {
                    what: format!(
                        "check of row {:?} of partition {:?} in `{}`: the transaction read it at another version",
                        data.row_key.as_str(),
                        data.partition_key.as_str(),
                        key.0.table
                    ),
                    code: None,
                    table: Some(key.0.table.as_str().to_owned()),
                    row: Some(Box::new((data.partition_key, data.row_key))),
                }),
            };
        }
        let unchanged = EntityData {
            properties: Properties::new(),
            ..data
        };
        let check = TableOp::Merge(unchanged, Precondition::IfMatch(etag));
        self.unit.staged.entry(key).or_insert(check);
        Ok(())
    }

    /// Commits: every staged write, all or nothing, provided every row the
    /// transaction read or checked is as it was. See the
    /// [module docs](self) for what the answer means.
    ///
    /// # Errors
    /// [`Error::Batch`] with [`Error::Conflict`] or
    /// [`Error::AlreadyExists`] inside when a row changed since it was read
    /// (or exists already), nothing applied; [`Error::Conflict`] when the
    /// transaction took longer than its time-to-live, or was withdrawn by a
    /// reader meanwhile, nothing applied; [`Error::ValueTaken`] for a unique
    /// value another entity holds; [`Error::InDoubt`]; backend errors (with
    /// nothing applied).
    pub async fn commit(mut self) -> Result<CommitReport> {
        // Every row read and not written is validated: its mark is
        // conditioned on the ETag read (a row read as absent must still
        // be absent).
        let reads: Vec<_> = self
            .unit
            .reads
            .iter()
            .filter(|(k, _)| !self.unit.staged.contains_key(*k))
            .map(|(k, read)| (k.clone(), read.clone()))
            .collect();
        for (key, read) in reads {
            let (pk, rk) = (self.unit.parts[key.0.part].pk.clone(), key.1.clone());
            // A tombstone (read as absent) is kept as it is.
            let op = match read {
                Some(row) => TableOp::Merge(
                    EntityData {
                        partition_key: pk,
                        row_key: rk,
                        properties: Properties::new(),
                    },
                    Precondition::IfMatch(row.etag),
                ),
                None => TableOp::Delete {
                    partition_key: pk,
                    row_key: rk,
                    condition: Precondition::IfExists,
                },
            };
            self.unit.staged.insert(key, op);
        }
        self.unit.commit().await.map_err(|e| match e.kind() {
            // Withdrawn by a reader, or too slow to mark its rows: nothing
            // applied, worth running again.
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
