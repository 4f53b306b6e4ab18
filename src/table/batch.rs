//! Entity-group transactions over a [`Table`].

use tracing::Instrument as _;

use super::handle::Table;
use super::stored::{Base, prepare};
use crate::backend::{Precondition, TableOp, validate_batch};
use crate::entity::{Entity, Stored, Versioned};
use crate::error::{Error, ErrorKind, Result};
use crate::key::IntoRowKey;

/// An atomic group of writes to one partition of one table: all apply or
/// none does. Checked against the service limits (100 operations, 4 MiB,
/// one partition, each row once) before anything is sent.
///
/// ```
/// # use leasehold::{Entity, Store};
/// # #[derive(Entity, Clone, Debug)]
/// # #[entity(table = "Accounts")]
/// # struct Account { #[entity(partition_key)] customer: String, #[entity(row_key)] name: String, balance: i64 }
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let accounts = Store::memory().table::<Account>();
/// let mut checking = accounts
///     .insert(Account { customer: "alice".into(), name: "checking".into(), balance: 100 })
///     .await?;
/// checking.balance -= 40;
/// accounts
///     .batch()
///     .replace(&checking)
///     .insert(Account { customer: "alice".into(), name: "savings".into(), balance: 40 })
///     .commit()
///     .await?;
/// assert_eq!(accounts.get("alice", "savings").await?.unwrap().balance, 40);
/// # Ok::<(), leasehold::Error>(()) }).unwrap();
/// ```
#[must_use = "a Batch sends nothing until `commit().await`"]
pub struct Batch<E> {
    table: Table<E>,
    ops: Vec<(TableOp, Returned<E>)>,
    error: Option<Error>,
}

/// What an operation of a batch returns once committed.
enum Returned<E> {
    Deleted,
    /// This entity, as stored; `true`: merged from a projection.
    Entity(E, Stored<E>, bool),
    /// Read back after the commit (see [`Table::read_back`]).
    ReadBack(E),
}

impl<E> std::fmt::Debug for Batch<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("table", &self.table)
            .field(
                "ops",
                &self.ops.iter().map(|(op, _)| op).collect::<Vec<_>>(),
            )
            .field("error", &self.error)
            .finish()
    }
}

impl<E: Entity> Table<E> {
    /// An entity-group transaction on one partition of this table.
    pub fn batch(&self) -> Batch<E> {
        Batch {
            table: self.clone(),
            ops: Vec::new(),
            error: None,
        }
    }
}

impl<E: Entity> Batch<E> {
    fn push(
        self,
        entity: &E,
        base: Result<Base>,
        projection: bool,
        make: impl FnOnce(crate::entity::EntityData) -> TableOp,
    ) -> Self {
        let encoded = base.and_then(|base| prepare(entity, base));
        self.add(encoded.map(|(data, after)| {
            let returned = match after {
                Ok((entity, stored)) => Returned::Entity(entity, stored, projection),
                Err(sent) => Returned::ReadBack(sent),
            };
            (make(data), returned)
        }))
    }

    /// Adds `op`, or its error unless an earlier one failed the batch.
    fn add(mut self, op: Result<(TableOp, Returned<E>)>) -> Self {
        match op {
            _ if self.error.is_some() => {}
            Ok(op) => self.ops.push(op),
            Err(e) => {
                self.error = Some(Error::Batch {
                    index: self.ops.len(),
                    source: Box::new(e),
                })
            }
        }
        self
    }

    fn push_delete(
        self,
        keys: Result<(crate::key::PartitionKey, crate::key::RowKey)>,
        condition: Precondition,
    ) -> Self {
        self.add(keys.map(|(partition_key, row_key)| {
            let op = TableOp::Delete {
                partition_key,
                row_key,
                condition,
            };
            (op, Returned::Deleted)
        }))
    }

    /// Creates an entity (fails the batch if it exists).
    pub fn insert(self, entity: E) -> Self {
        self.push(&entity, Ok(Base::Nothing), false, TableOp::Insert)
    }

    /// Replaces an entity if unchanged since read.
    pub fn replace(self, current: &Versioned<E>) -> Self {
        let etag = current.etag().clone();
        self.push(current.entity(), Base::replace_of(current), false, |d| {
            TableOp::Replace(d, Precondition::IfMatch(etag))
        })
    }

    /// Merges an entity if unchanged since read.
    pub fn merge(self, current: &Versioned<E>) -> Self {
        let etag = current.etag().clone();
        self.push(
            current.entity(),
            Ok(Base::merge_of(current)),
            current.is_projection(),
            |d| TableOp::Merge(d, Precondition::IfMatch(etag)),
        )
    }

    /// Deletes an entity if unchanged since read.
    pub fn delete(self, current: &Versioned<E>) -> Self {
        let keys = current
            .partition_key()
            .and_then(|pk| Ok((pk, current.row_key()?)));
        self.push_delete(keys, Precondition::IfMatch(current.etag().clone()))
    }

    /// Creates or overwrites an entity. **Unconditional** (as
    /// [`Table::upsert`](crate::Table::upsert)).
    pub fn upsert(self, entity: E) -> Self {
        self.push(&entity, Ok(Base::Nothing), false, |d| {
            TableOp::Replace(d, Precondition::Upsert)
        })
    }

    /// Creates an entity or merges into it. **Unconditional.**
    pub fn upsert_merge(self, entity: E) -> Self {
        self.push(&entity, Ok(Base::Merge(None)), false, |d| {
            TableOp::Merge(d, Precondition::Upsert)
        })
    }

    /// Deletes an existing entity whatever its version. **Unconditional.**
    pub fn delete_unconditionally(
        self,
        partition_key: impl crate::key::IntoPartitionKey,
        row_key: impl IntoRowKey,
    ) -> Self {
        let keys = partition_key
            .into_partition_key()
            .and_then(|pk| Ok((pk, row_key.into_row_key()?)));
        self.push_delete(keys, Precondition::IfExists)
    }

    /// The number of operations so far.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether no operation was added.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Sends the batch: all operations apply, or none. Each answers, in
    /// order, with the entity as stored (as the single writes return it),
    /// or `None` for a delete.
    ///
    /// # Errors
    /// Before anything is sent: [`Error::Invalid`] when the group breaks a
    /// service limit or the type has indexes, [`Error::Batch`] for an
    /// operation that could not be encoded. [`Error::Batch`] with the
    /// failing index and its cause (such as [`Error::Conflict`]) when the
    /// service rejects an operation: nothing was applied.
    pub async fn commit(self) -> Result<Vec<Option<Versioned<E>>>> {
        let telemetry = self.table.env.telemetry.clone();
        telemetry.operation("batch", self.commit_now()).await
    }

    async fn commit_now(self) -> Result<Vec<Option<Versioned<E>>>> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if !E::INDEXES.is_empty() {
            return Err(Error::invalid(
                format!("batch of {}", std::any::type_name::<E>()),
                "the type has indexes, whose rows live in other partitions: write it with Table writes or a Unit",
            ));
        }
        let name = self.table.ready().await?;
        let (mut ops, returned): (Vec<TableOp>, Vec<Returned<E>>) = self.ops.into_iter().unzip();
        validate_batch(name.as_str(), &ops)?;
        let span = tracing::debug_span!(
            "leasehold.batch",
            table = %name,
            partition = %ops[0].partition_key(),
            ops = ops.len()
        );
        // An insert of a type with an expiry refused for a row that reads
        // as absent is sent again ([`Table::insert_again`]), once a row.
        let mut tries = ops.len();
        let versions = loop {
            let sent = self
                .table
                .writer
                .batch(name, &ops)
                .instrument(span.clone())
                .await;
            let index = match &sent {
                Err(Error::Batch { index, source })
                    if tries > 0
                        && source.kind() == ErrorKind::AlreadyExists
                        && matches!(ops.get(*index), Some(TableOp::Insert(d))
                            if d.properties.get(crate::rows::expiry::PROPERTY).is_some()) =>
                {
                    *index
                }
                _ => break sent?,
            };
            tries -= 1;
            match self.table.insert_again(ops[index].clone()).await? {
                Some(again) => ops[index] = again,
                None => break sent?,
            }
        };
        let mut results = Vec::with_capacity(ops.len());
        for ((op, returned), version) in ops.iter().zip(returned).zip(versions) {
            results.push(match (returned, version) {
                (Returned::Entity(entity, stored, projection), Some(v)) => Some(
                    Versioned::new(entity, v.etag, v.timestamp)
                        .with_stored(stored)
                        .with_projection(projection),
                ),
                (Returned::ReadBack(sent), Some(v)) => Some(
                    self.table
                        .read_back(op.partition_key(), op.row_key(), sent, v)
                        .instrument(span.clone())
                        .await,
                ),
                _ => None,
            });
        }
        Ok(results)
    }
}
