//! The single-entity writes of a [`Table`]: conditional by default, and
//! unconditional under names that say so.

use tracing::Instrument as _;

use super::fence::FencedWrites;
use super::handle::Table;
use super::marks::Resolver;
use super::stored::{Base, prepare};
use crate::backend::WriteOptions;
use crate::backend::{Precondition, TableBackend, TableOp, Version, write_log};
use crate::entity::{Entity, EntityData, Value, Versioned, validate_entity};
use crate::error::{Error, ErrorKind, Result};
use crate::key::{IntoPartitionKey, IntoRowKey, PartitionKey, RowKey, TableName};
use crate::lease::Fence;
use crate::rows::mark::MARK;
use crate::rows::tombstone::is_tombstone;

impl<E: Entity> Table<E> {
    /// Sends one write of `entity` (`current`: the version it is
    /// conditioned on) and returns the entity as stored.
    pub(crate) async fn write(
        &self,
        entity: &E,
        current: Option<&Versioned<E>>,
        base: Result<Base>,
        make_op: impl FnOnce(EntityData) -> TableOp,
    ) -> Result<Versioned<E>> {
        let (data, after) = prepare(entity, base?)?;
        let mut op = make_op(data);
        let log = (self.write_log
            && matches!(
                op,
                TableOp::Insert(_)
                    | TableOp::Replace(_, Precondition::IfMatch(_))
                    | TableOp::Merge(_, Precondition::IfMatch(_))
            ))
        .then(|| write_log::extend(&write_log::new_id(), current.and_then(Versioned::write_log)));
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
        let span = write_span(name, &op);
        let op_name = op.name();
        let (pk, rk) = (op.partition_key().clone(), op.row_key().clone());
        // A lost reply is settled by the write log.
        let options = if log.is_some() {
            WriteOptions::new().with_write_log()
        } else {
            WriteOptions::new()
        };
        // The index write path takes the row's values from the version read.
        let as_read = self
            .indexing
            .as_ref()
            .and_then(|_| current?.stored_properties());
        let version = self
            .execute(name, op, &options, as_read)
            .instrument(span.clone())
            .await?;
        let version =
            version.ok_or_else(|| Error::client(format!("{op_name} returned no version")))?;
        match after {
            Ok((entity, stored)) => Ok(Versioned::new(entity, version.etag, version.timestamp)
                .with_write_log(log)
                .with_stored(stored)
                // What a merge of a projection returns is one too.
                .with_projection(current.is_some_and(Versioned::is_projection))),
            Err(sent) => Ok(self
                .read_back(&pk, &rk, sent, version)
                .instrument(span)
                .await
                .with_write_log(log)),
        }
    }

    /// The entity a merge left, read back; `sent` at the merge's version
    /// when the row changed since or the read failed.
    pub(super) async fn read_back(
        &self,
        pk: &PartitionKey,
        rk: &RowKey,
        sent: E,
        version: Version,
    ) -> Versioned<E> {
        match self.get_keys(pk, rk).await {
            Ok(Some(read)) if read.etag() == &version.etag => return read,
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(table = E::TABLE, partition = %pk, row = %rk, error = %e, "reading a merged entity back failed; the merge's own result is returned")
            }
        }
        Versioned::new(sent, version.etag, version.timestamp)
    }

    /// Creates the entity; fails if it exists.
    ///
    /// Every write returns the entity as stored, as a later [`Table::get`]
    /// returns it (date-times at 100 ns in UTC, `json` fields as they parse
    /// back).
    ///
    /// # Errors
    /// The other writes fail as this one does, apart from what their docs
    /// say:
    /// * [`Error::AlreadyExists`] when a row with the entity's keys exists;
    /// * [`Error::Invalid`] (a service limit, an invalid key) and
    ///   [`Error::Decode`] before anything is sent;
    /// * [`Error::LeaseLost`] through a [fenced](Table::fenced) table once a
    ///   later epoch of the fence's lease wrote the partition;
    /// * of a type with indexes, the [errors of indexed
    ///   writes](crate::index#errors-of-indexed-writes), such as
    ///   [`Error::ValueTaken`];
    /// * [`Error::Transient`], [`Error::Unavailable`], [`Error::Auth`] and
    ///   other backend errors.
    pub async fn insert(&self, entity: E) -> Result<Versioned<E>> {
        let insert = async move {
            let e = match self
                .write(&entity, None, Ok(Base::Nothing), TableOp::Insert)
                .await
            {
                Err(e) if e.kind() == ErrorKind::AlreadyExists => e,
                other => return other,
            };
            let Ok(data) = entity.encode() else {
                return Err(e);
            };
            let Some(again) = self.insert_again(TableOp::Insert(data)).await? else {
                return Err(e);
            };
            let is_replace = matches!(again, TableOp::Replace(..));
            let make = move |d| match again {
                TableOp::Replace(_, condition) => TableOp::Replace(d, condition),
                _ => TableOp::Insert(d),
            };
            match self.write(&entity, None, Ok(Base::Nothing), make).await {
                // Changed since: someone else wrote the row.
                Err(c) if is_replace && c.kind() == ErrorKind::Conflict => Err(e),
                other => other,
            }
        };
        self.env.telemetry.operation("insert", insert).await
    }

    /// What to send again for `insert`, refused because its row exists,
    /// when that row reads as absent: the same insert over a unit's
    /// undecided placeholder (once resolved), a replace at the version read
    /// over a tombstone or an expired row; `None` when the row is there.
    pub(super) async fn insert_again(&self, insert: TableOp) -> Result<Option<TableOp>> {
        let TableOp::Insert(data) = insert else {
            return Ok(None);
        };
        let name = self.ready().await?;
        let (pk, rk) = (&data.partition_key, &data.row_key);
        let Some(stored) = self.env.backend.get(name, pk, rk).await? else {
            return Ok(None);
        };
        if stored.data.properties.get(MARK).is_none() {
            let tombstone = is_tombstone(&stored.data.properties);
            let replace = TableOp::Replace(data, Precondition::IfMatch(stored.etag));
            return Ok(tombstone.then_some(replace));
        }
        let resolved = Resolver::new(&self.env, Vec::new())
            .resolve(name, stored)
            .await?;
        let gone = resolved.is_none_or(|r| is_tombstone(&r.data.properties));
        Ok(gone.then_some(TableOp::Insert(data)))
    }

    /// Replaces the entity if it is unchanged since `current` was read.
    ///
    /// # Errors
    /// As [`Table::insert`], but [`Error::Conflict`] when the entity changed
    /// since `current` was read, [`Error::NotFound`] when it was deleted;
    /// [`Error::Invalid`] when `current` was read through a projection
    /// (write it back with [`Table::merge`]).
    pub async fn replace(&self, current: &Versioned<E>) -> Result<Versioned<E>> {
        let etag = current.etag().clone();
        let base = Base::replace_of(current);
        let write = self.write(current.entity(), Some(current), base, |d| {
            TableOp::Replace(d, Precondition::IfMatch(etag))
        });
        self.env.telemetry.operation("replace", write).await
    }

    /// Merges the entity's properties into the stored entity if it is
    /// unchanged since `current` was read; `None` fields keep their stored
    /// values, and come back as kept. A `current` that does not know the
    /// stored properties ([`Versioned::new`], a projection) costs a read
    /// after the merge when a property of `E` is left unwritten (see
    /// [`Table::upsert_merge`]).
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
    /// As [`Table::replace`], never for a projection.
    pub async fn merge(&self, current: &Versioned<E>) -> Result<Versioned<E>> {
        let etag = current.etag().clone();
        let base = Ok(Base::merge_of(current));
        let write = self.write(current.entity(), Some(current), base, |d| {
            TableOp::Merge(d, Precondition::IfMatch(etag))
        });
        self.env.telemetry.operation("merge", write).await
    }

    /// Deletes the entity if it is unchanged since `current` was read.
    ///
    /// # Errors
    /// As [`Table::merge`] (never [`Error::ValueTaken`]).
    pub async fn delete(&self, current: &Versioned<E>) -> Result<()> {
        let keys = current
            .partition_key()
            .and_then(|pk| Ok((pk, current.row_key()?)));
        let condition = Precondition::IfMatch(current.etag().clone());
        self.traced_delete("delete", keys, condition).await
    }

    /// Creates or overwrites the entity, whatever is stored. **Unconditional:**
    /// a concurrent change is lost, and so are properties the type does not
    /// know (see [`Versioned`](crate::Versioned#properties-unknown-to-the-type));
    /// [`Table::upsert_merge`] keeps them.
    ///
    /// # Errors
    /// As [`Table::insert`], never [`Error::AlreadyExists`].
    pub async fn upsert(&self, entity: E) -> Result<Versioned<E>> {
        let write = self.write(&entity, None, Ok(Base::Nothing), |d| {
            TableOp::Replace(d, Precondition::Upsert)
        });
        self.env.telemetry.operation("upsert", write).await
    }

    /// Creates the entity or merges its properties into the stored one,
    /// whatever is stored. **Unconditional.**
    ///
    /// When a property of `E` is left unwritten (a `None` field) the entity
    /// is read back, one more request; if it changed before that read (or
    /// the read fails), the entity as merged comes back at the merge's
    /// version, which a conditional write then finds stale.
    ///
    /// # Errors
    /// As [`Table::upsert`].
    pub async fn upsert_merge(&self, entity: E) -> Result<Versioned<E>> {
        let write = self.write(&entity, None, Ok(Base::Merge(None)), |d| {
            TableOp::Merge(d, Precondition::Upsert)
        });
        self.env.telemetry.operation("upsert_merge", write).await
    }

    /// Replaces an existing entity whatever its version. **Unconditional**
    /// except that it must exist.
    ///
    /// # Errors
    /// As [`Table::upsert`], and [`Error::NotFound`] when there is no such
    /// entity.
    pub async fn replace_unconditionally(&self, entity: E) -> Result<Versioned<E>> {
        let write = self.write(&entity, None, Ok(Base::Nothing), |d| {
            TableOp::Replace(d, Precondition::IfExists)
        });
        let telemetry = &self.env.telemetry;
        telemetry.operation("replace_unconditionally", write).await
    }

    /// Deletes an entity whatever its version. **Unconditional** except that
    /// it must exist.
    ///
    /// # Errors
    /// As [`Table::delete`], never [`Error::Conflict`].
    pub async fn delete_unconditionally(
        &self,
        partition_key: impl IntoPartitionKey,
        row_key: impl IntoRowKey,
    ) -> Result<()> {
        let keys =
            (partition_key.into_partition_key()).and_then(|pk| Ok((pk, row_key.into_row_key()?)));
        let condition = Precondition::IfExists;
        self.traced_delete("delete_unconditionally", keys, condition)
            .await
    }

    /// A delete as the operation `name` of the table's telemetry.
    async fn traced_delete(
        &self,
        name: &'static str,
        keys: Result<(PartitionKey, RowKey)>,
        condition: Precondition,
    ) -> Result<()> {
        let delete = async move {
            let (partition_key, row_key) = keys?;
            let op = TableOp::Delete {
                partition_key,
                row_key,
                condition,
            };
            self.send(op).await
        };
        self.env.telemetry.operation(name, delete).await
    }

    pub(crate) async fn send(&self, op: TableOp) -> Result<()> {
        let name = self.ready().await?;
        let span = write_span(name, &op);
        self.execute(name, op, &WriteOptions::new(), None)
            .instrument(span)
            .await
            .map(|_| ())
    }
}

impl<E: Entity> Table<E> {
    /// This table, its writes fenced by `fence`: every write (batches and
    /// [`Table::update_with`] too) goes as one entity-group transaction
    /// with the partition's fence row, which the service refuses once a
    /// later epoch of the fence's lease wrote the partition
    /// ([`Error::LeaseLost`]). Reads are unchanged. Cheap to call.
    ///
    /// Costs one operation in each transaction (fenced batches hold at most
    /// 99) and one read of the fence row per partition per fence; see
    /// [`Fence`] for the protocol. Index claims are not fenced.
    ///
    /// ```
    /// # use leasehold::{Entity, Store};
    /// # #[derive(Entity, Clone, Debug)]
    /// # #[entity(table = "Settings")]
    /// # struct Setting { #[entity(partition_key)] app: String, #[entity(row_key)] key: String, value: String }
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let store = Store::memory();
    /// let guard = store.leases().acquire("settings-writer", std::time::Duration::from_secs(30)).await?;
    /// let settings = store.table::<Setting>().fenced(&guard.fence().await?);
    /// settings.upsert(Setting { app: "a".into(), key: "mode".into(), value: "on".into() }).await?;
    /// settings.update_with("a", "mode", |s| s.value = "off".into()).await?;
    /// # guard.release().await?;
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    #[must_use = "`fenced` returns a fenced copy of the table; `self` is unchanged"]
    pub fn fenced(&self, fence: &Fence) -> Table<E> {
        // A fenced table fenced again has the later fence only.
        let mut table = self.clone();
        table.writer = std::sync::Arc::new(FencedWrites {
            inner: std::sync::Arc::clone(&self.env.backend),
            fence: fence.clone(),
            races: self.env.conflict_retry.clone(),
        });
        table.fenced = true;
        table
    }

    /// Sends one write through the table's writer, by the index write path
    /// for a type with indexes (`as_read`: see [`IndexedWriter::execute`](super::IndexedWriter::execute)).
    async fn execute(
        &self,
        name: &TableName,
        op: TableOp,
        options: &WriteOptions,
        as_read: Option<std::sync::Arc<crate::entity::Properties>>,
    ) -> Result<Option<Version>> {
        match &self.indexing {
            Some(indexing) => {
                indexing
                    .execute(self.writer.as_ref(), name, op, options, as_read)
                    .await
            }
            None => self.writer.execute(name, op, options).await,
        }
    }
}

fn write_span(table: &crate::key::TableName, op: &TableOp) -> tracing::Span {
    tracing::debug_span!(
        "leasehold.write",
        table = %table,
        op = op.name(),
        partition = %op.partition_key(),
        row = %op.row_key()
    )
}
