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
pub use query::{DecodeErrors, OnDecodeError, Page, Query};

use crate::backend::{CheckedOp, Precondition, StoredEntity, TableOp, Version, write_log};
use crate::entity::{Entity, EntityData, Properties, Stored, Value, Versioned, validate_entity};
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
pub(crate) fn versioned<E: Entity>(stored: StoredEntity) -> Result<Versioned<E>> {
    versioned_from(stored, true)
}

/// As [`versioned`]; `complete` says whether `stored` holds every stored
/// property (not so for a projection), and so whether the value knows them.
pub(crate) fn versioned_from<E: Entity>(
    mut stored: StoredEntity,
    complete: bool,
) -> Result<Versioned<E>> {
    let log = match stored.data.properties.remove(write_log::PROPERTY) {
        Some(Value::String(log)) => Some(log),
        _ => None,
    };
    let state = if complete {
        Stored::unchanged(extra_properties::<E>(&stored.data.properties))
    } else {
        Stored::Unknown
    };
    Ok(
        Versioned::new(E::decode(stored.data)?, stored.etag, stored.timestamp)
            .with_write_log(log)
            .with_stored(state),
    )
}

/// The stored properties that `E` does not carry (written by another type
/// sharing the table), copied only when there are some.
fn extra_properties<E: Entity>(properties: &Properties) -> Option<Arc<Properties>> {
    let carried = E::PROPERTY_NAMES
        .iter()
        .filter(|name| properties.get(name).is_some())
        .count();
    (carried < properties.len()).then(|| {
        Arc::new(
            properties
                .iter()
                .filter(|(name, _)| !E::PROPERTY_NAMES.contains(name))
                .map(|(name, value)| (name.to_owned(), value.clone()))
                .collect(),
        )
    })
}

/// What a write stores beside the properties it sends, as far as known
/// before sending.
pub(crate) enum Base {
    /// Nothing: an insert or a full replacement stores what it sends.
    Nothing,
    /// A merge onto a version whose stored properties are these (`None`:
    /// unknown).
    Merge(Option<Arc<Properties>>),
    /// A merge onto an unchanged value: the stored properties were the
    /// entity's own encoding (which the merge sends again) plus these.
    MergeUnchanged(Option<Arc<Properties>>),
}

impl Base {
    /// The base of a merge of `current`.
    pub(crate) fn merge_of<E>(current: &Versioned<E>) -> Base {
        match current.unchanged_extra() {
            Some(extra) => Base::MergeUnchanged(extra.cloned()),
            None => Base::Merge(current.stored_properties()),
        }
    }
}

/// The entity a write of `data` onto `base` leaves stored, decoded as a
/// read would decode it (so dates come back at 100 ns in UTC, JSON fields
/// as they parse), with what the value knows of the stored properties;
/// `None` when only a read can tell (a merge onto unknown properties that
/// leaves some of `E`'s properties unwritten).
///
/// The cost is one copy of the properties sent and one decode per write
/// (a merge onto a changed value copies the properties it is based on
/// too); a copy is needed anyway, since the write moves the data into the
/// backend.
pub(crate) fn stored_after<E: Entity>(
    data: &EntityData,
    base: Base,
) -> Result<Option<(E, Stored<E>)>> {
    let decode = |properties: Properties| {
        E::decode(EntityData {
            partition_key: data.partition_key.clone(),
            row_key: data.row_key.clone(),
            properties,
        })
    };
    Ok(Some(match base {
        Base::Nothing => (decode(data.properties.clone())?, Stored::unchanged(None)),
        Base::MergeUnchanged(extra) => (decode(data.properties.clone())?, Stored::unchanged(extra)),
        Base::Merge(Some(stored)) => {
            let mut after = Arc::unwrap_or_clone(stored);
            after.merge_from(&data.properties);
            (decode(after.clone())?, Stored::Known(Arc::new(after)))
        }
        Base::Merge(None) => {
            if E::PROPERTY_NAMES
                .iter()
                .all(|name| data.properties.get(name).is_some())
            {
                (decode(data.properties.clone())?, Stored::Unknown)
            } else {
                return Ok(None);
            }
        }
    }))
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
                Some(stored) => Ok(Some(crate::__private::in_row(pk, rk, versioned(stored))?)),
                None => Ok(None),
            }
        }
        .instrument(span)
        .await
    }

    /// Sends one write of `entity` and returns the entity as stored (see
    /// [`stored_after`]) with the version produced. When only a read can
    /// tell what is stored, the entity is read back after the write.
    async fn write(
        &self,
        entity: &E,
        based_on: Option<&str>,
        base: Base,
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
        // Decoded before sending, so an entity whose stored form does not
        // decode is refused with nothing sent. `Err` holds the keys to read
        // the entity back at, when only a read can tell what is stored.
        let after = stored_after::<E>(&data, base)?
            .ok_or_else(|| (data.partition_key.clone(), data.row_key.clone()));
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
            .instrument(span.clone())
            .await?;
        let Version { etag, timestamp } = version.ok_or_else(|| Error::Backend {
            status: None,
            code: None,
            message: format!("{op_name} returned no version"),
            source: None,
        })?;
        match after {
            Ok((entity, stored)) => Ok(Versioned::new(entity, etag, timestamp)
                .with_write_log(log)
                .with_stored(stored)),
            Err((pk, rk)) => self.read_back(&pk, &rk).instrument(span).await,
        }
    }

    /// Reads an entity back after a merge whose result only a read can
    /// tell: its stored version, or a later one if another writer got in
    /// between.
    async fn read_back(&self, pk: &PartitionKey, rk: &RowKey) -> Result<Versioned<E>> {
        self.get_keys(pk, rk).await?.ok_or_else(|| Error::NotFound {
            what: format!(
                "entity ({pk:?}, {rk:?}) in table `{}`: deleted right after the merge, before it could be read back",
                E::TABLE
            ),
            code: Some("ResourceNotFound".into()),
            table: Some(E::TABLE.into()),
            row: Some(Box::new((pk.clone(), rk.clone()))),
        })
    }

    /// Creates the entity; fails if it exists.
    ///
    /// Every write returns the entity as stored, which is what a later
    /// [`Table::get`] returns: date-times at the service's 100 ns precision
    /// in UTC, `json` fields as they parse back.
    ///
    /// # Errors
    /// [`Error::AlreadyExists`] when the row exists; [`Error::Invalid`] when
    /// the entity breaks a service limit, and [`Error::Decode`] when its
    /// stored form does not decode (nothing is sent).
    pub async fn insert(&self, entity: E) -> Result<Versioned<E>> {
        self.write(&entity, None, Base::Nothing, TableOp::Insert)
            .await
    }

    /// Replaces the entity if it is unchanged since `current` was read.
    /// Returns the new version, ready for the next conditional write.
    ///
    /// # Errors
    /// [`Error::Conflict`] when the stored entity changed since `current` was
    /// read; [`Error::NotFound`] when it was deleted; as [`Table::insert`]
    /// for an entity that cannot be stored.
    pub async fn replace(&self, current: &Versioned<E>) -> Result<Versioned<E>> {
        let etag = current.etag().clone();
        self.write(current.entity(), current.write_log(), Base::Nothing, |d| {
            TableOp::Replace(d, Precondition::IfMatch(etag))
        })
        .await
    }

    /// Like [`Table::replace`], taking the value by move.
    ///
    /// # Errors
    /// As [`Table::replace`].
    pub async fn replace_owned(&self, current: Versioned<E>) -> Result<Versioned<E>> {
        self.replace(&current).await
    }

    /// Merges the entity's properties into the stored entity if it is
    /// unchanged since `current` was read. Properties the entity does not
    /// carry (`None` fields) keep their stored values.
    ///
    /// Returns the entity as stored after the merge, `None` fields showing
    /// the values they kept, so that passing it on to [`Table::replace`]
    /// keeps them too. A `current` read or written through this crate knows
    /// the properties stored at its version, and the merge sends one request.
    /// A value that does not ([`Versioned::new`], or a query with
    /// [`Query::select`]) costs a read after the merge when some property of
    /// `E` is left unwritten; if another writer changed the entity in
    /// between, that read returns the later version.
    ///
    /// ```
    /// # use leasehold::{Entity, Store};
    /// # #[derive(Entity, Clone, Debug)]
    /// # #[entity(table = "Accounts")]
    /// # struct Account { #[entity(partition_key)] customer: String, #[entity(row_key)] name: String, balance: i64, note: Option<String> }
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let accounts = Store::memory().table::<Account>();
    /// accounts
    ///     .insert(Account { customer: "a".into(), name: "c".into(), balance: 1, note: Some("vip".into()) })
    ///     .await?;
    /// let mut patch = accounts.get("a", "c").await?.expect("exists");
    /// patch.balance = 2;
    /// patch.note = None; // not sent: the stored note stays
    /// let merged = accounts.merge(&patch).await?;
    /// assert_eq!(merged.note.as_deref(), Some("vip"));
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`Error::Conflict`] when the stored entity changed since `current` was
    /// read; [`Error::NotFound`] when it was deleted; as [`Table::insert`]
    /// for an entity that cannot be stored; the read's errors when the
    /// entity is read back (the merge was applied).
    pub async fn merge(&self, current: &Versioned<E>) -> Result<Versioned<E>> {
        let etag = current.etag().clone();
        self.write(
            current.entity(),
            current.write_log(),
            Base::merge_of(current),
            |d| TableOp::Merge(d, Precondition::IfMatch(etag)),
        )
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
    /// As [`Table::insert`] for an entity that cannot be stored.
    pub async fn upsert(&self, entity: E) -> Result<Versioned<E>> {
        self.write(&entity, None, Base::Nothing, |d| {
            TableOp::Replace(d, Precondition::Upsert)
        })
        .await
    }

    /// Creates the entity or merges its properties into the stored one,
    /// whatever is stored. **Unconditional.**
    ///
    /// Returns the entity as stored. Nothing is known of the stored entity
    /// beforehand, so when a property of `E` is left unwritten (a `None`
    /// field) the entity is read back after the write, one more request; if
    /// another writer changed it in between, that read returns the later
    /// version.
    ///
    /// # Errors
    /// As [`Table::insert`] for an entity that cannot be stored; the read's
    /// errors when the entity is read back (the write was applied).
    pub async fn upsert_merge(&self, entity: E) -> Result<Versioned<E>> {
        self.write(&entity, None, Base::Merge(None), |d| {
            TableOp::Merge(d, Precondition::Upsert)
        })
        .await
    }

    /// Replaces an existing entity whatever its version. **Unconditional**
    /// except that it must exist.
    ///
    /// # Errors
    /// [`Error::NotFound`] when there is no such entity; as [`Table::insert`]
    /// for an entity that cannot be stored.
    pub async fn replace_unconditionally(&self, entity: E) -> Result<Versioned<E>> {
        self.write(&entity, None, Base::Nothing, |d| {
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
    /// A function that may refuse the change (a business rule) is what
    /// [`Table::try_update_with`] takes.
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
        let updated = self
            .update_loop(partition_key, row_key, |e| {
                f(e);
                Ok::<(), std::convert::Infallible>(())
            })
            .await;
        updated.map_err(|e| match e {
            UpdateError::Refused(never) => match never {},
            UpdateError::Failed(e) => e,
        })
    }

    /// Like [`Table::update_with`], with an update function that may refuse
    /// the change: when `f` returns `Err(u)`, nothing is sent and the call
    /// returns [`UpdateError::Refused`]`(u)`, the caller's own value. `f`
    /// sees a freshly read entity on every attempt: after a conflict it runs
    /// again on the re-read entity (and may refuse then), with the same
    /// retry rules as [`Table::update_with`].
    ///
    /// ```
    /// # use leasehold::{Entity, Store};
    /// # use leasehold::table::UpdateError;
    /// #[derive(Entity, Clone, Debug)]
    /// #[entity(table = "Orders")]
    /// struct Order { #[entity(partition_key)] shop: String, #[entity(row_key)] id: String, status: String }
    ///
    /// #[derive(Debug, PartialEq)]
    /// enum CancelError { AlreadyShipped }
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let orders = Store::memory().table::<Order>();
    /// orders.insert(Order { shop: "s".into(), id: "1".into(), status: "shipped".into() }).await?;
    /// let outcome = orders
    ///     .try_update_with("s", "1", |o| {
    ///         if o.status == "shipped" {
    ///             return Err(CancelError::AlreadyShipped);
    ///         }
    ///         o.status = "cancelled".into();
    ///         Ok(())
    ///     })
    ///     .await;
    /// match outcome {
    ///     Err(UpdateError::Refused(reason)) => assert_eq!(reason, CancelError::AlreadyShipped),
    ///     Err(UpdateError::Failed(e)) => return Err(e),
    ///     Ok(_) => unreachable!("a shipped order is not cancelled"),
    /// }
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`UpdateError::Refused`] with `f`'s error when it refused (nothing
    /// sent); [`UpdateError::Failed`] with the errors of
    /// [`Table::update_with`].
    pub async fn try_update_with<F, U>(
        &self,
        partition_key: impl IntoPartitionKey,
        row_key: impl IntoRowKey,
        f: F,
    ) -> std::result::Result<Versioned<E>, UpdateError<U>>
    where
        F: FnMut(&mut E) -> std::result::Result<(), U>,
    {
        self.update_loop(partition_key, row_key, f).await
    }

    /// The optimistic read-modify-write loop of [`Table::update_with`] and
    /// [`Table::try_update_with`].
    async fn update_loop<F, U>(
        &self,
        partition_key: impl IntoPartitionKey,
        row_key: impl IntoRowKey,
        mut f: F,
    ) -> std::result::Result<Versioned<E>, UpdateError<U>>
    where
        F: FnMut(&mut E) -> std::result::Result<(), U>,
    {
        let pk = partition_key.into_partition_key()?;
        let rk = row_key.into_row_key()?;
        let policy = self.store.conflict_retry().clone();
        let mut delays = policy.backoff();
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let mut current = self
                .get_keys(&pk, &rk)
                .await?
                .ok_or_else(|| Error::NotFound {
                    what: format!("entity ({pk:?}, {rk:?}) in table `{}`", E::TABLE),
                    code: Some("ResourceNotFound".into()),
                    table: Some(E::TABLE.into()),
                    row: Some(Box::new((pk.clone(), rk.clone()))),
                })?;
            // The whole entity is replaced next: no record of the stored
            // properties is needed.
            f(current.entity_mut_for_replace()).map_err(UpdateError::Refused)?;
            if current.partition_key()? != pk || current.row_key()? != rk {
                return Err(Error::invalid(
                    format!("update of ({pk:?}, {rk:?}) in table `{}`", E::TABLE),
                    "the update function changed a key",
                )
                .into());
            }
            match self.replace(&current).await {
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
                            table: Some(E::TABLE.into()),
                            row: Some(Box::new((pk.clone(), rk.clone()))),
                        }
                        .into());
                    }
                },
                other => return other.map_err(UpdateError::Failed),
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

/// Why [`Table::try_update_with`] did not update: the update function
/// refused, with the caller's own error, or the update failed.
#[derive(Debug)]
pub enum UpdateError<U> {
    /// The update function returned this error; nothing was sent.
    Refused(U),
    /// Reading or writing failed, as [`Table::update_with`] fails.
    Failed(Error),
}

impl<U> From<Error> for UpdateError<U> {
    fn from(e: Error) -> Self {
        UpdateError::Failed(e)
    }
}

impl<U: std::fmt::Display> std::fmt::Display for UpdateError<U> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpdateError::Refused(u) => write!(f, "update refused: {u}"),
            UpdateError::Failed(e) => e.fmt(f),
        }
    }
}

impl<U> std::error::Error for UpdateError<U>
where
    U: std::error::Error + 'static,
{
    /// The source of the error shown: each message is said once.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            UpdateError::Refused(u) => u.source(),
            UpdateError::Failed(e) => std::error::Error::source(e),
        }
    }
}
