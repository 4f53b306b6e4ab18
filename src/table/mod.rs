//! [`Table<E>`]: typed, optimistic access to the entities of one table.
//!
//! Every read returns a [`Versioned<E>`] (the entity and its ETag); every
//! replace, merge and delete takes one back and sends its ETag, so a write
//! based on a stale copy fails with [`Error::Conflict`] instead of silently
//! overwriting. Writes without a condition exist only under names that say
//! so: [`Table::upsert`], [`Table::upsert_merge`],
//! [`Table::replace_unconditionally`], [`Table::delete_unconditionally`].

mod batch;
mod query;

use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tracing::Instrument as _;

pub use batch::{Batch, BatchResult};
pub use query::{Page, Query};

use crate::backend::{CheckedOp, Precondition, StoredEntity, TableOp, Version};
use crate::entity::{Entity, EntityData, Versioned};
use crate::error::{Error, ErrorKind, Result};
use crate::key::{IntoPartitionKey, IntoRowKey, PartitionKey, RowKey, TableName};
use crate::store::Store;

/// The typed table of entity type `E`. Cheap to clone.
pub struct Table<E> {
    store: Store,
    name: std::result::Result<TableName, String>,
    /// Set once the store has made sure the table exists (the store never
    /// forgets it), so later operations skip the store's lookup.
    ready: Arc<AtomicBool>,
    _entity: PhantomData<fn() -> E>,
}

impl<E> Clone for Table<E> {
    fn clone(&self) -> Self {
        Table {
            store: self.store.clone(),
            name: self.name.clone(),
            ready: Arc::clone(&self.ready),
            _entity: PhantomData,
        }
    }
}

impl<E> std::fmt::Debug for Table<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table").field("name", &self.name).finish()
    }
}

/// Builds the typed value of a stored entity.
pub(crate) fn versioned<E: Entity>(stored: StoredEntity) -> Result<Versioned<E>> {
    Ok(Versioned::new(
        E::decode(stored.data)?,
        stored.etag,
        stored.timestamp,
    ))
}

impl<E: Entity> Table<E> {
    pub(crate) fn new(store: Store) -> Self {
        Table {
            // The derive checks the name at compile time; a hand-written
            // `Entity` impl (or a prefix making it too long) gets its error at
            // the first operation.
            name: TableName::new(format!("{}{}", store.table_prefix(), E::TABLE))
                .map_err(|e| e.to_string()),
            store,
            ready: Arc::new(AtomicBool::new(false)),
            _entity: PhantomData,
        }
    }

    /// The table's name.
    ///
    /// # Errors
    /// [`Error::Invalid`] when `E::TABLE` is not a valid table name (only
    /// possible with a hand-written `Entity` impl).
    pub fn name(&self) -> Result<&TableName> {
        self.name.as_ref().map_err(|why| {
            Error::invalid(
                format!("table name of {}", std::any::type_name::<E>()),
                why.clone(),
            )
        })
    }

    /// The store this table belongs to.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The table name, after making sure the table exists.
    async fn ready(&self) -> Result<&TableName> {
        let name = self.name()?;
        if !self.ready.load(Ordering::Acquire) {
            self.store.ensure_table(name).await?;
            self.ready.store(true, Ordering::Release);
        }
        Ok(name)
    }

    /// Reads one entity with its ETag; `None` when there is none.
    ///
    /// # Errors
    /// [`Error::Invalid`] for an invalid key; [`Error::Decode`] when the stored
    /// entity does not fit `E`; backend errors.
    pub async fn get(
        &self,
        partition_key: impl IntoPartitionKey,
        row_key: impl IntoRowKey,
    ) -> Result<Option<Versioned<E>>> {
        let pk = partition_key.into_partition_key()?;
        let rk = row_key.into_row_key()?;
        self.get_keys(&pk, &rk).await
    }

    async fn get_keys(&self, pk: &PartitionKey, rk: &RowKey) -> Result<Option<Versioned<E>>> {
        let name = self.ready().await?;
        let span = tracing::debug_span!("leasehold.get", table = %name, partition = %pk, row = %rk);
        async {
            match self.store.backend().get(name, pk, rk).await? {
                Some(stored) => Ok(Some(versioned(stored)?)),
                None => Ok(None),
            }
        }
        .instrument(span)
        .await
    }

    /// Sends one write of `entity` and wraps it with the version produced.
    async fn write(
        &self,
        entity: E,
        make_op: impl FnOnce(EntityData) -> TableOp,
    ) -> Result<Versioned<E>> {
        let data = entity.encode()?;
        let name = self.ready().await?;
        let op = make_op(data);
        let span = tracing::debug_span!(
            "leasehold.write",
            table = %name,
            op = op.name(),
            partition = %op.partition_key(),
            row = %op.row_key()
        );
        let op_name = op.name();
        // `encode` checked the entity against every service limit, and
        // `make_op` never builds a delete.
        let version = self
            .store
            .backend()
            .execute_checked(name, CheckedOp::new(op))
            .instrument(span)
            .await?;
        let Version { etag, timestamp } = version.ok_or_else(|| Error::Backend {
            status: 0,
            code: None,
            message: format!("{op_name} returned no version"),
        })?;
        Ok(Versioned::new(entity, etag, timestamp))
    }

    /// Creates the entity; fails if it exists.
    ///
    /// # Errors
    /// [`Error::AlreadyExists`] when the row exists; [`Error::Invalid`] when
    /// the entity breaks a service limit (nothing is sent).
    pub async fn insert(&self, entity: E) -> Result<Versioned<E>> {
        self.write(entity, TableOp::Insert).await
    }

    /// Replaces the entity if it is unchanged since `current` was read.
    /// Returns the new version, ready for the next conditional write.
    ///
    /// # Errors
    /// [`Error::Conflict`] when the stored entity changed since `current` was
    /// read; [`Error::NotFound`] when it was deleted.
    pub async fn replace(&self, current: &Versioned<E>) -> Result<Versioned<E>>
    where
        E: Clone,
    {
        let etag = current.etag().clone();
        self.write(current.entity().clone(), |d| {
            TableOp::Replace(d, Precondition::IfMatch(etag))
        })
        .await
    }

    /// Like [`Table::replace`], taking the value by move (no clone).
    ///
    /// # Errors
    /// As [`Table::replace`].
    pub async fn replace_owned(&self, current: Versioned<E>) -> Result<Versioned<E>> {
        let etag = current.etag().clone();
        self.write(current.into_inner(), |d| {
            TableOp::Replace(d, Precondition::IfMatch(etag))
        })
        .await
    }

    /// Merges the entity's properties into the stored entity if it is
    /// unchanged since `current` was read. Properties the entity does not
    /// carry (`None` fields) keep their stored values.
    ///
    /// # Errors
    /// [`Error::Conflict`] when the stored entity changed since `current` was
    /// read; [`Error::NotFound`] when it was deleted.
    pub async fn merge(&self, current: &Versioned<E>) -> Result<Versioned<E>>
    where
        E: Clone,
    {
        let etag = current.etag().clone();
        self.write(current.entity().clone(), |d| {
            TableOp::Merge(d, Precondition::IfMatch(etag))
        })
        .await
    }

    /// Deletes the entity if it is unchanged since `current` was read.
    ///
    /// # Errors
    /// [`Error::Conflict`] when the stored entity changed since `current` was
    /// read; [`Error::NotFound`] when it is already gone.
    pub async fn delete(&self, current: &Versioned<E>) -> Result<()> {
        let pk = current.partition_key()?;
        let rk = current.row_key()?;
        self.delete_op(pk, rk, Precondition::IfMatch(current.etag().clone()))
            .await
    }

    /// Creates or overwrites the entity, whatever is stored. **Unconditional:**
    /// a concurrent change is lost.
    ///
    /// # Errors
    /// [`Error::Invalid`] when the entity breaks a service limit.
    pub async fn upsert(&self, entity: E) -> Result<Versioned<E>> {
        self.write(entity, |d| TableOp::Replace(d, Precondition::Upsert))
            .await
    }

    /// Creates the entity or merges its properties into the stored one,
    /// whatever is stored. **Unconditional.**
    ///
    /// # Errors
    /// [`Error::Invalid`] when the entity breaks a service limit.
    pub async fn upsert_merge(&self, entity: E) -> Result<Versioned<E>> {
        self.write(entity, |d| TableOp::Merge(d, Precondition::Upsert))
            .await
    }

    /// Replaces an existing entity whatever its version. **Unconditional**
    /// except that it must exist.
    ///
    /// # Errors
    /// [`Error::NotFound`] when there is no such entity.
    pub async fn replace_unconditionally(&self, entity: E) -> Result<Versioned<E>> {
        self.write(entity, |d| TableOp::Replace(d, Precondition::IfExists))
            .await
    }

    /// Deletes an entity whatever its version. **Unconditional** except that
    /// it must exist.
    ///
    /// # Errors
    /// [`Error::NotFound`] when there is no such entity; [`Error::Invalid`]
    /// for an invalid key.
    pub async fn delete_unconditionally(
        &self,
        partition_key: impl IntoPartitionKey,
        row_key: impl IntoRowKey,
    ) -> Result<()> {
        let pk = partition_key.into_partition_key()?;
        let rk = row_key.into_row_key()?;
        self.delete_op(pk, rk, Precondition::IfExists).await
    }

    async fn delete_op(&self, pk: PartitionKey, rk: RowKey, condition: Precondition) -> Result<()> {
        let name = self.ready().await?;
        let span =
            tracing::debug_span!("leasehold.delete", table = %name, partition = %pk, row = %rk);
        let op = TableOp::Delete {
            partition_key: pk,
            row_key: rk,
            condition,
        };
        self.store
            .backend()
            .execute(name, &op)
            .instrument(span)
            .await
            .map(|_| ())
    }

    /// Read-modify-write with optimistic retries: reads the entity, applies
    /// `f`, and replaces it under the ETag read. On a conflict it re-reads and
    /// applies `f` again to the fresh copy, waiting a jittered, growing delay,
    /// up to the store's [`conflict_retry`](crate::StoreBuilder::conflict_retry)
    /// attempt count. `f` may run several times and must not change the keys.
    ///
    /// ```
    /// # use leasehold::{Entity, Store};
    /// # #[derive(Entity, Clone, Debug)]
    /// # #[entity(table = "Counters")]
    /// # struct Counter { #[entity(partition_key)] pk: String, #[entity(row_key)] rk: String, n: i64 }
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let counters = Store::memory().table::<Counter>();
    /// counters.insert(Counter { pk: "a".into(), rk: "hits".into(), n: 0 }).await?;
    /// let updated = counters.update_with("a", "hits", |c| c.n += 1).await?;
    /// assert_eq!(updated.n, 1);
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`Error::Conflict`] when every attempt conflicted; [`Error::NotFound`]
    /// when the entity does not exist; [`Error::Invalid`] when `f` changed a key.
    pub async fn update_with<F>(
        &self,
        partition_key: impl IntoPartitionKey,
        row_key: impl IntoRowKey,
        mut f: F,
    ) -> Result<Versioned<E>>
    where
        F: FnMut(&mut E),
    {
        let pk = partition_key.into_partition_key()?;
        let rk = row_key.into_row_key()?;
        let policy = self.store.conflict_retry().clone();
        let mut delays = policy.delays();
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let mut current = self
                .get_keys(&pk, &rk)
                .await?
                .ok_or_else(|| Error::NotFound {
                    what: format!("entity ({pk:?}, {rk:?}) in table `{}`", E::TABLE),
                    code: Some("ResourceNotFound".into()),
                })?;
            f(&mut current);
            if current.partition_key()? != pk || current.row_key()? != rk {
                return Err(Error::invalid(
                    format!("update of ({pk:?}, {rk:?}) in table `{}`", E::TABLE),
                    "the update function changed a key",
                ));
            }
            match self.replace_owned(current).await {
                Err(e) if e.kind() == ErrorKind::Conflict => match delays.next() {
                    Some(delay) => {
                        tracing::debug!(table = E::TABLE, attempts, "conflict; retrying");
                        tokio::time::sleep(delay).await;
                    }
                    None => {
                        return Err(Error::Conflict {
                            what: format!(
                                "entity ({pk:?}, {rk:?}) in table `{}` kept changing: {attempts} attempts conflicted",
                                E::TABLE
                            ),
                            code: e.code().map(str::to_owned),
                        });
                    }
                },
                other => return other,
            }
        }
    }

    /// A query over this table.
    pub fn query(&self) -> Query<E> {
        Query::new(self.clone())
    }

    /// An entity-group transaction on one partition of this table.
    pub fn batch(&self) -> Batch<E> {
        Batch::new(self.clone())
    }
}
