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

use crate::backend::{CheckedOp, Precondition, StoredEntity, TableOp, Version, write_log};
use crate::entity::{Entity, EntityData, Value, Versioned, validate_entity};
use crate::error::{Error, ErrorKind, Result};
use crate::key::{IntoPartitionKey, IntoRowKey, PartitionKey, RowKey, TableName};
use crate::store::Store;

/// The typed table of entity type `E`. Cheap to clone.
pub struct Table<E> {
    store: Store,
    name: std::result::Result<TableName, String>,
    write_log: bool,
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
            write_log: self.write_log,
            ready: Arc::clone(&self.ready),
            _entity: PhantomData,
        }
    }
}

impl<E> std::fmt::Debug for Table<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("name", &self.name)
            .field("write_log", &self.write_log)
            .finish()
    }
}

/// Builds the typed value of a stored entity; its write log, if any, is
/// kept beside the entity rather than decoded into it.
pub(crate) fn versioned<E: Entity>(mut stored: StoredEntity) -> Result<Versioned<E>> {
    let log = match stored.data.properties.remove(write_log::PROPERTY) {
        Some(Value::String(log)) => Some(log),
        _ => None,
    };
    Ok(Versioned::new(E::decode(stored.data)?, stored.etag, stored.timestamp).with_write_log(log))
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
            write_log: false,
            ready: Arc::new(AtomicBool::new(false)),
            _entity: PhantomData,
        }
    }

    /// This table, keeping a write log in every entity it inserts, replaces
    /// or merges conditionally, so that a write whose reply is lost can be
    /// settled exactly.
    ///
    /// Without it, a conditional write whose reply was lost is settled by
    /// reading the entity back, which cannot always tell this write from
    /// another writer's (an identical write from the same version, or later
    /// writes on top); then the write fails with [`Error::Transient`] saying
    /// its outcome is unknown, rather than risk reporting it wrongly. With it,
    /// each such write stores a fresh 8-character id in front of the ids of
    /// the entity's last 31 writes, in the reserved property
    /// [`write_log::PROPERTY`] (a string of under 300 characters, one of the 252
    /// properties); the read-back then finds the write among the ids, or finds
    /// every write since the version it was based on listed without it. This
    /// is what makes [`Table::update_with`] exact under lost replies.
    ///
    /// The log is never decoded into `E`. Unconditional writes
    /// (`upsert`, `replace_unconditionally`) and batches do not extend it;
    /// a full replacement without it drops it, after which the first
    /// outcomes that depend on it are unknown again. The memory backend never
    /// loses replies; it stores the log like any property.
    ///
    /// ```
    /// # #[derive(leasehold::Entity, Clone)]
    /// # #[entity(table = "Counters")]
    /// # struct Counter { #[entity(partition_key)] pk: String, #[entity(row_key)] rk: String, n: i64 }
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let store = leasehold::Store::memory();
    /// let counters = store.table::<Counter>().with_write_log();
    /// counters.insert(Counter { pk: "p".into(), rk: "r".into(), n: 0 }).await?;
    /// let after = counters.update_with("p", "r", |c| c.n += 1).await?;
    /// assert_eq!(after.n, 1);
    /// # Ok::<_, leasehold::Error>(())
    /// # }).unwrap();
    /// ```
    #[must_use = "`with_write_log` returns the changed table; `self` is consumed"]
    pub fn with_write_log(mut self) -> Self {
        self.write_log = true;
        self
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
        based_on: Option<&str>,
        make_op: impl FnOnce(EntityData) -> TableOp,
    ) -> Result<Versioned<E>> {
        let data = entity.encode()?;
        if data.properties.get(write_log::PROPERTY).is_some() {
            return Err(Error::invalid(
                format!(
                    "property `{}` of {}",
                    write_log::PROPERTY,
                    std::any::type_name::<E>()
                ),
                "the name is reserved for write logs",
            ));
        }
        let mut op = make_op(data);
        let log = (self.write_log
            && matches!(
                op,
                TableOp::Insert(_)
                    | TableOp::Replace(_, Precondition::IfMatch(_))
                    | TableOp::Merge(_, Precondition::IfMatch(_))
            ))
        .then(|| write_log::extend(&write_log::new_id(), based_on));
        if let (Some(log), Some(data)) = (&log, op.data_mut()) {
            data.properties
                .insert(write_log::PROPERTY, Value::String(log.clone()));
            // The log adds a property: the limits are checked again.
            validate_entity(
                E::TABLE,
                &data.partition_key,
                &data.row_key,
                &data.properties,
            )?;
        }
        let name = self.ready().await?;
        let span = tracing::debug_span!(
            "leasehold.write",
            table = %name,
            op = op.name(),
            partition = %op.partition_key(),
            row = %op.row_key()
        );
        let op_name = op.name();
        // `encode` (and, with a write log, `validate_entity`) checked the
        // entity against every service limit, and `make_op` never builds a
        // delete.
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
        Ok(Versioned::new(entity, etag, timestamp).with_write_log(log))
    }

    /// Creates the entity; fails if it exists.
    ///
    /// # Errors
    /// [`Error::AlreadyExists`] when the row exists; [`Error::Invalid`] when
    /// the entity breaks a service limit (nothing is sent).
    pub async fn insert(&self, entity: E) -> Result<Versioned<E>> {
        self.write(entity, None, TableOp::Insert).await
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
        self.write(current.entity().clone(), current.write_log(), |d| {
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
        let log = current.write_log().map(str::to_owned);
        self.write(current.into_inner(), log.as_deref(), |d| {
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
        self.write(current.entity().clone(), current.write_log(), |d| {
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
        self.write(entity, None, |d| TableOp::Replace(d, Precondition::Upsert))
            .await
    }

    /// Creates the entity or merges its properties into the stored one,
    /// whatever is stored. **Unconditional.**
    ///
    /// # Errors
    /// [`Error::Invalid`] when the entity breaks a service limit.
    pub async fn upsert_merge(&self, entity: E) -> Result<Versioned<E>> {
        self.write(entity, None, |d| TableOp::Merge(d, Precondition::Upsert))
            .await
    }

    /// Replaces an existing entity whatever its version. **Unconditional**
    /// except that it must exist.
    ///
    /// # Errors
    /// [`Error::NotFound`] when there is no such entity.
    pub async fn replace_unconditionally(&self, entity: E) -> Result<Versioned<E>> {
        self.write(entity, None, |d| {
            TableOp::Replace(d, Precondition::IfExists)
        })
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
    /// When a reply is lost on the way back, the backend reads the entity to
    /// learn whether the write was applied. On a table opened with
    /// [`Table::with_write_log`] that always settles it, so `f`'s effect is
    /// applied exactly once; without a write log an undecidable case is
    /// reported as [`Error::Transient`] ("outcome unknown") rather than
    /// retried, since retrying could apply `f` twice.
    ///
    /// # Errors
    /// [`Error::Conflict`] when every attempt conflicted; [`Error::NotFound`]
    /// when the entity does not exist; [`Error::Invalid`] when `f` changed a
    /// key; [`Error::Transient`] when the outcome of a write is unknown (see
    /// above) or the backend's retries ran out.
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
