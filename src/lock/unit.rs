//! [`Unit`]: one unit of work under a partition lock.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use time::OffsetDateTime;

use super::acquire;
use super::env::{IndexedType, LockEnv};
use super::fold::{delete_condition, fold};
use super::slot::{Reads, Slot, Staged, read_absent};
use crate::backend::{Precondition, StoredEntity, TableOp};
use crate::entity::{Entity, EntityData, Properties, Versioned, short_type_name};
use crate::error::{Error, Result};
use crate::key::{ETag, IntoPartitionKey, IntoRowKey, PartitionKey, RowKey, TableName};
use crate::lease::{LeaseGuard, LeaseName, META_ACQUIRED, META_OWNER};
use crate::rows::tombstone::is_tombstone;
use crate::table::Resolver;
use crate::table::lock_name;

/// The ETag of a staged view (a row as a unit shows it after staging a
/// write to it); writing such a value back updates the staged write.
pub(crate) const STAGED: &str = "leasehold-staged";

/// A unit of work holding the locks of one partition
/// ([`Store::lock`](crate::Store::lock)) or several
/// ([`Store::lock_many`](crate::Store::lock_many)).
///
/// See the [module docs](super). Dropping the unit sends nothing and gives
/// the locks up; with staged writes it logs a `WARN` ([`Unit::abandon`]
/// discards them quietly).
///
/// ```
/// use leasehold::{Entity, Store};
///
/// #[derive(Entity, Clone, Debug)]
/// #[entity(table = "Accounts")]
/// struct Account { #[entity(partition_key)] customer: String, #[entity(row_key)] name: String, balance: i64 }
///
/// #[derive(Entity, Clone, Debug)]
/// #[entity(table = "Ledger")]
/// struct Entry { #[entity(partition_key)] customer: String, #[entity(row_key)] id: String, amount: i64 }
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let store = Store::memory();
/// let accounts = store.table::<Account>();
/// accounts.insert(Account { customer: "alice".into(), name: "checking".into(), balance: 100 }).await?;
/// accounts.insert(Account { customer: "alice".into(), name: "savings".into(), balance: 0 }).await?;
///
/// let mut unit = store.lock("alice").await?;
/// let mut from = unit.get::<Account>("checking").await?.expect("exists");
/// let mut to = unit.get::<Account>("savings").await?.expect("exists");
/// from.balance -= 30;
/// to.balance += 30;
/// unit.replace(&from)?;
/// unit.replace(&to)?;
/// unit.insert(&Entry { customer: "alice".into(), id: "t1".into(), amount: 30 })?;
/// let report = unit.commit().await?; // two tables: decided in a row, all or nothing
/// assert!(report.transaction.is_some());
/// assert_eq!(accounts.get("alice", "savings").await?.unwrap().balance, 30);
/// # Ok::<(), leasehold::Error>(()) }).unwrap();
/// ```
///
/// # Writing a row twice
///
/// A second write of a staged row is folded into the staged one, keeping
/// the first write's condition, or refused with [`Error::Invalid`]; **a
/// refused call changes nothing**. Rows: what is staged; columns: the next
/// call on that row.
///
/// | staged \ then | `insert` | `replace` | `merge` | `delete` | `upsert` | `upsert_merge` |
/// |---|---|---|---|---|---|---|
/// | **`insert`** | refused | insert of the new value | insert of the merged value | nothing (the two cancel out) | insert of the new value | insert of the merged value |
/// | **`replace`** | refused | replace by the new value | replace by the merged value | delete | replace by the new value | replace by the merged value |
/// | **`merge`** | refused | replace by the new value | merge of the merged value | delete | replace by the new value | merge of the merged value |
/// | **`delete`** | replace by the new value | refused | refused | refused | replace by the new value | replace by the new value |
/// | **`upsert`** | refused | upsert of the new value | upsert of the merged value | delete if it exists¹ | upsert of the new value | upsert of the merged value |
/// | **`upsert_merge`** | refused | upsert of the new value | upsert-merge of the merged value | delete if it exists¹ | upsert of the new value | upsert-merge of the merged value |
///
/// "Merged value": the second value's properties merged over the staged
/// one's. ¹ When the unit read the row as absent the pair writes nothing;
/// otherwise the commit fails with [`Error::NotFound`] (inside
/// [`Error::Batch`]) if the row is gone.
///
/// `replace`, `merge` and `delete` of a *staged view* (what [`Unit::get`]
/// returns for a staged row) write over the staged write; one of a row
/// this unit stages no write for is refused.
#[must_use = "dropping a Unit discards its staged writes and releases the lock; call `commit().await` (or `abandon().await`)"]
pub struct Unit {
    pub(crate) env: Arc<LockEnv>,
    /// In canonical order (by lock blob name).
    pub(crate) parts: Vec<Part>,
    pub(crate) reads: Reads,
    pub(crate) staged: Staged,
    pub(crate) indexed: Vec<IndexedType>,
    /// A transaction's time-to-live (`crate::txn`: no locks, partitions
    /// taken as met, reads validated at commit); `None` for a unit.
    pub(crate) ttl: Option<Duration>,
}

pub(crate) struct Part {
    pub(crate) pk: PartitionKey,
    /// `None` once the unit gave its locks up.
    pub(super) guard: Option<LeaseGuard>,
}

impl std::fmt::Debug for Unit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unit")
            .field("partition_keys", &self.partition_keys())
            .field("reads", &self.reads.len())
            .field("staged", &self.staged.len())
            .finish_non_exhaustive()
    }
}

impl Unit {
    /// Takes the locks of `keys`, waiting up to `timeout` in all (`None`:
    /// not at all).
    pub(crate) async fn open<K: IntoPartitionKey>(
        env: &Arc<LockEnv>,
        keys: impl IntoIterator<Item = K>,
        timeout: Option<Duration>,
    ) -> Result<Option<Unit>> {
        let mut targets: Vec<(LeaseName, PartitionKey)> = Vec::new();
        for key in keys {
            let pk = key.into_partition_key()?;
            if targets.iter().any(|(_, p)| p == &pk) {
                continue;
            }
            let name = lock_name(&env.table_prefix, &pk)?;
            if let Some((_, other)) = targets.iter().find(|(n, _)| n == &name) {
                return Err(Error::invalid(
                    format!("partition keys {:?} and {:?}", other.as_str(), pk.as_str()),
                    "share one lock blob name; lock them one at a time",
                ));
            }
            targets.push((name, pk));
        }
        if targets.is_empty() {
            return Err(Error::invalid(
                "partition keys",
                "the set is empty; lock at least one partition",
            ));
        }
        targets.sort_by(|a, b| a.0.cmp(&b.0));
        let started = tokio::time::Instant::now();
        let taken = env
            .telemetry
            .operation("lock", acquire::take_all(env, &targets, timeout))
            .await;
        env.telemetry.lock_wait(
            started.elapsed(),
            match &taken {
                Ok(Some(_)) => "acquired",
                Ok(None) => "held",
                Err(e) if e.kind() == crate::ErrorKind::Timeout => "held",
                Err(_) => "failed",
            },
        );
        let Some(guards) = taken? else {
            return Ok(None);
        };
        let parts = targets.into_iter().zip(guards);
        let parts = parts.map(|((_, pk), guard)| Part {
            pk,
            guard: Some(guard),
        });
        let unit = Unit::new(env, parts.collect(), None);
        let recorded = join_all(unit.parts.iter().map(|part| unit.record_holder(part))).await;
        if let Some(e) = recorded.into_iter().find_map(Result::err) {
            // Given back before answering, so the next call finds them free.
            let _ = unit.abandon().await;
            return Err(e);
        }
        Ok(Some(unit))
    }

    /// A transaction (see [`Unit::ttl`]): no partition, no lock.
    pub(crate) fn transaction(env: &Arc<LockEnv>, ttl: Duration) -> Unit {
        Unit::new(env, Vec::new(), Some(ttl))
    }

    fn new(env: &Arc<LockEnv>, parts: Vec<Part>, ttl: Option<Duration>) -> Unit {
        let (reads, staged, indexed) = (HashMap::new(), BTreeMap::new(), Vec::new());
        let env = env.clone();
        Unit {
            env,
            parts,
            reads,
            staged,
            indexed,
            ttl,
        }
    }

    pub(super) fn guard_of(&self, i: usize) -> Result<&LeaseGuard> {
        let part = self.parts.get(i).ok_or_else(|| Error::Inconsistent {
            what: format!("unit has no partition {i}"),
        })?;
        part.guard.as_ref().ok_or_else(|| Error::LeaseLost {
            what: format!("lock of partition {:?} was already given up", part.pk),
            code: None,
        })
    }

    /// Records this process as the lock's holder ("Who holds a lock" in
    /// the [module docs](super)); a failed write is logged, unless the
    /// lease is lost.
    async fn record_holder(&self, part: &Part) -> Result<()> {
        let Some(guard) = part.guard.as_ref() else {
            return Ok(());
        };
        let owner = self.env.locks.owner();
        if guard.core.snapshot().await?.owner() == Some(owner) {
            return Ok(());
        }
        let at = crate::entity::datetime::format(OffsetDateTime::now_utc());
        let written = guard
            .update_metadata(|m| {
                m.retain(|k, _| {
                    !k.eq_ignore_ascii_case(META_OWNER) && !k.eq_ignore_ascii_case(META_ACQUIRED)
                });
                m.insert(META_OWNER.to_owned(), owner.to_owned());
                m.insert(META_ACQUIRED.to_owned(), at);
            })
            .await;
        match written {
            Ok(_) => Ok(()),
            Err(e) if guard.is_lost() => Err(e),
            Err(e) => {
                tracing::warn!(partition = %part.pk, error = %e, "could not record the lock's holder");
                Ok(())
            }
        }
    }

    /// The partition this unit holds; with several, the first in canonical
    /// order (the primary of a commit over several groups).
    pub fn partition_key(&self) -> &PartitionKey {
        &self.parts[0].pk
    }

    /// The partitions this unit holds, in canonical order.
    pub fn partition_keys(&self) -> Vec<&PartitionKey> {
        self.parts.iter().map(|p| &p.pk).collect()
    }

    /// Whether every lock was handed over by another local unit (no
    /// acquire, no lock-blob read) rather than acquired.
    pub fn is_handed_over(&self) -> bool {
        self.parts
            .iter()
            .all(|p| p.guard.as_ref().is_some_and(LeaseGuard::is_handed_over))
    }

    /// The lease guard (remaining validity, loss signal); with several
    /// partitions, that of the first in canonical order.
    ///
    /// # Errors
    /// [`Error::LeaseLost`] after the unit gave its locks up.
    pub fn lease(&self) -> Result<&LeaseGuard> {
        self.guard_of(0)
    }

    pub(super) fn table_of<E: Entity>(&self) -> Result<TableName> {
        self.env.table_name(E::TABLE)
    }

    /// Notes `E` for the commit's index claims.
    fn note_indexes<E: Entity>(&mut self, table: &TableName) {
        if E::INDEXES.is_empty() || self.indexed.iter().any(|i| &i.table == table) {
            return;
        }
        self.indexed.push(IndexedType {
            table: table.clone(),
            declared_table: E::TABLE,
            type_name: short_type_name::<E>(),
            defs: E::INDEXES,
        });
    }

    pub(crate) fn resolver(&self) -> Resolver<'_> {
        Resolver::new(&self.env.tables, self.held())
    }

    /// The partitions whose locks this unit holds (none: a transaction).
    pub(super) fn held(&self) -> Vec<PartitionKey> {
        match self.ttl {
            Some(_) => Vec::new(),
            None => self.parts.iter().map(|p| p.pk.clone()).collect(),
        }
    }

    /// The index of partition `pk` among the locked ones.
    pub(crate) fn part_of(&mut self, pk: &PartitionKey, what: &str) -> Result<usize> {
        if self.ttl.is_some() && !self.parts.iter().any(|p| &p.pk == pk) {
            let (pk, guard) = (pk.clone(), None);
            self.parts.push(Part { pk, guard });
        }
        self.parts.iter().position(|p| &p.pk == pk).ok_or_else(|| {
            let held: Vec<&str> = self.parts.iter().map(|p| p.pk.as_str()).collect();
            Error::invalid(
                format!("{what} of partition {:?}", pk.as_str()),
                format!("this unit holds the locks of partitions {held:?} only"),
            )
        })
    }

    /// Reads an entity of this unit's partition, recording its ETag; sees
    /// this unit's staged writes. A row read before costs no request.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad key, or when the unit holds several
    /// partitions (use [`Unit::get_in`]); [`Error::LeaseLost`] when the
    /// reply came after a lock may have run out; [`Error::Decode`];
    /// backend errors.
    pub async fn get<E: Entity>(
        &mut self,
        row_key: impl IntoRowKey,
    ) -> Result<Option<Versioned<E>>> {
        if self.parts.len() > 1 {
            let held: Vec<&str> = self.parts.iter().map(|p| p.pk.as_str()).collect();
            return Err(Error::invalid(
                "Unit::get",
                format!(
                    "this unit holds several partitions ({held:?}); name the partition with Unit::get_in"
                ),
            ));
        }
        let rk = row_key.into_row_key()?;
        self.read_row::<E>(0, rk).await
    }

    /// Reads an entity of any locked partition, as [`Unit::get`].
    ///
    /// # Errors
    /// As [`Unit::get`]; [`Error::Invalid`] for a partition this unit does
    /// not hold.
    pub async fn get_in<E: Entity>(
        &mut self,
        partition_key: impl IntoPartitionKey,
        row_key: impl IntoRowKey,
    ) -> Result<Option<Versioned<E>>> {
        let pk = partition_key.into_partition_key()?;
        let rk = row_key.into_row_key()?;
        let part = self.part_of(&pk, "read")?;
        self.read_row::<E>(part, rk).await
    }

    pub(crate) async fn read_row<E: Entity>(
        &mut self,
        part: usize,
        rk: RowKey,
    ) -> Result<Option<Versioned<E>>> {
        let table = self.table_of::<E>()?;
        let key = (Slot { part, table }, rk);
        self.read_unread(std::slice::from_ref(&key)).await?;
        Ok(self.view::<E>(&key)?.map(|(view, _)| view))
    }

    /// Row `key` as this unit sees it (its staged write over what it read;
    /// a tombstone as absent), with the properties it shows.
    pub(crate) fn view<E: Entity>(
        &self,
        key: &(Slot, RowKey),
    ) -> Result<Option<(Versioned<E>, Properties)>> {
        let read = self.reads.get(key);
        let stored = read
            .and_then(Option::as_ref)
            .filter(|r| !is_tombstone(&r.data.properties));
        match self.staged.get(key) {
            Some(op) => staged_view(op, stored, read.is_some()),
            None => (stored.cloned())
                .map(|r| Ok((crate::table::versioned(r.clone())?, r.data.properties)))
                .transpose(),
        }
    }

    /// Reads, all at once, the rows of `keys` this unit has not read and
    /// stages no whole write for, and records them (a tombstone too).
    pub(crate) async fn read_unread(&mut self, keys: &[(Slot, RowKey)]) -> Result<()> {
        let mut seen = std::collections::HashSet::new();
        let fetch: Vec<&(Slot, RowKey)> = (keys.iter())
            .filter(|key| {
                !self.reads.contains_key(key)
                    && matches!(self.staged.get(key), None | Some(TableOp::Merge(..)))
                    && seen.insert(*key)
            })
            .collect();
        if fetch.is_empty() {
            return Ok(());
        }
        for table in fetch.iter().map(|k| &k.0.table).collect::<BTreeSet<_>>() {
            self.env.ensure_table(table).await?;
        }
        let rows = self.fetch(&fetch).await?;
        self.ensure_held(Duration::ZERO)?;
        let fetched: Vec<_> = fetch.into_iter().cloned().zip(rows).collect();
        self.reads.extend(fetched);
        Ok(())
    }

    /// Reads the rows of `keys`, all at once, their marks resolved.
    pub(super) async fn fetch(
        &self,
        keys: &[&(Slot, RowKey)],
    ) -> Result<Vec<Option<StoredEntity>>> {
        let (backend, resolver) = (&self.env.backend, self.resolver());
        futures_util::future::try_join_all(keys.iter().map(|(slot, rk)| {
            let (pk, resolver) = (&self.parts[slot.part].pk, &resolver);
            async move {
                let stored = backend.get(&slot.table, pk, rk).await?;
                resolver.resolve_opt(&slot.table, stored).await
            }
        }))
        .await
    }

    /// Checks that every lock is still held, `margin` short of its end (a
    /// read's reply: zero; a commit: the commit margin).
    pub(super) fn ensure_held(&self, margin: Duration) -> Result<()> {
        for i in (0..self.parts.len()).filter(|_| self.ttl.is_none()) {
            self.guard_of(i)?.ensure_valid(margin)?;
        }
        Ok(())
    }

    fn encode<E: Entity>(&mut self, entity: &E, what: &str) -> Result<(Slot, EntityData)> {
        let data = entity.encode()?;
        let part = self.part_of(&data.partition_key, what)?;
        let table = self.table_of::<E>()?;
        self.note_indexes::<E>(&table);
        Ok((Slot { part, table }, data))
    }

    /// The condition of a write of `current`: its ETag, or for a staged
    /// view (refused unless this unit stages the row) the staged write's.
    fn condition_of<E>(
        &self,
        table: &Slot,
        data: &EntityData,
        current: &Versioned<E>,
        what: &str,
    ) -> Result<Precondition> {
        let key = (table.clone(), data.row_key.clone());
        if current.etag().as_str() != STAGED {
            Ok(Precondition::IfMatch(current.etag().clone()))
        } else if self.staged.contains_key(&key) {
            Ok(Precondition::IfExists)
        } else {
            Err(Error::invalid(
                format!("{what} of row {:?} in `{}`", key.1.as_str(), key.0),
                "the value is a staged view, and this unit stages no write of that row (a view from another unit, or of a write this unit no longer stages)",
            ))
        }
    }

    /// Stages the creation of an entity (the commit fails if it exists).
    ///
    /// # Errors
    /// [`Error::Invalid`] for an entity of another partition, one breaking a
    /// service limit, or a write that cannot follow the one this unit stages
    /// for the row (see [writing a row twice](Unit#writing-a-row-twice));
    /// the staged writes are then unchanged.
    pub fn insert<E: Entity>(&mut self, entity: &E) -> Result<()> {
        let (table, data) = self.encode(entity, "insert")?;
        self.stage(table, TableOp::Insert(data))
    }

    /// Stages a replace conditioned on the ETag `current` was read at.
    ///
    /// # Errors
    /// As [`Unit::insert`].
    pub fn replace<E: Entity>(&mut self, current: &Versioned<E>) -> Result<()> {
        let base = crate::table::Base::replace_of(current)?;
        let (table, data) = self.encode(current.entity(), "replace")?;
        let data = base.complete::<E>(data)?;
        let condition = self.condition_of(&table, &data, current, "replace")?;
        self.stage(table, TableOp::Replace(data, condition))
    }

    /// Stages a merge conditioned on the ETag `current` was read at.
    ///
    /// # Errors
    /// As [`Unit::insert`].
    pub fn merge<E: Entity>(&mut self, current: &Versioned<E>) -> Result<()> {
        let (table, data) = self.encode(current.entity(), "merge")?;
        let condition = self.condition_of(&table, &data, current, "merge")?;
        let key = (table.clone(), data.row_key.clone());
        // `current`'s stored version stands in for a read of the row.
        let base = match &condition {
            Precondition::IfMatch(etag) if !self.reads.contains_key(&key) => {
                current.stored_properties().map(|properties| StoredEntity {
                    data: crate::rows::row(
                        &data.partition_key,
                        &data.row_key,
                        Arc::unwrap_or_clone(properties),
                    ),
                    etag: etag.clone(),
                    timestamp: current.timestamp(),
                })
            }
            _ => None,
        };
        self.stage(table, TableOp::Merge(data, condition))?;
        if let Some(read) = base {
            self.reads.insert(key, Some(read));
        }
        Ok(())
    }

    /// Stages a delete conditioned on the ETag `current` was read at.
    ///
    /// # Errors
    /// As [`Unit::insert`].
    pub fn delete<E: Entity>(&mut self, current: &Versioned<E>) -> Result<()> {
        let (table, data) = self.encode(current.entity(), "delete")?;
        let condition = self.condition_of(&table, &data, current, "delete")?;
        let condition = delete_condition(condition);
        let op = crate::rows::delete(&data.partition_key, &data.row_key, condition);
        self.stage(table, op)
    }

    /// Stages an **unconditional** create-or-replace (as
    /// [`Table::upsert`](crate::Table::upsert)).
    ///
    /// # Errors
    /// As [`Unit::insert`].
    pub fn upsert<E: Entity>(&mut self, entity: &E) -> Result<()> {
        let (table, data) = self.encode(entity, "upsert")?;
        self.stage(table, TableOp::Replace(data, Precondition::Upsert))
    }

    /// Stages an **unconditional** create-or-merge.
    ///
    /// # Errors
    /// As [`Unit::insert`].
    pub fn upsert_merge<E: Entity>(&mut self, entity: &E) -> Result<()> {
        let (table, data) = self.encode(entity, "upsert_merge")?;
        self.stage(table, TableOp::Merge(data, Precondition::Upsert))
    }

    /// Stages `op`, folded into the row's staged write (the table in the
    /// [`Unit`] docs).
    fn stage(&mut self, table: Slot, op: TableOp) -> Result<()> {
        let key = (table, op.row_key().clone());
        let read_absent = read_absent(&self.reads, &key);
        let name = op.name();
        match fold(self.staged.get(&key), op, read_absent) {
            Ok(Some(op)) => {
                self.staged.insert(key, op);
                Ok(())
            }
            Ok(None) => {
                self.staged.remove(&key);
                Ok(())
            }
            Err(why) => Err(Error::invalid(
                format!("{name} of row {:?} in `{}`", key.1.as_str(), key.0),
                why,
            )),
        }
    }

    /// The number of staged writes.
    pub fn staged(&self) -> usize {
        self.staged.len()
    }

    /// Gives every lock up, logging (not returning) failed releases.
    pub(super) async fn release_all(&mut self) {
        for (pk, released) in self.give_up().await {
            if let Err(e) = released {
                tracing::warn!(partition = %pk, error = %e, "releasing the lock after commit failed; it will expire");
            }
        }
    }

    /// Gives every lock up: in canonical order, one a local task waits for
    /// is handed over; the others are released together.
    async fn give_up(&mut self) -> Vec<(PartitionKey, Result<()>)> {
        let mut results = Vec::with_capacity(self.parts.len());
        let mut to_release = Vec::new();
        for part in &mut self.parts {
            let Some(guard) = part.guard.take() else {
                continue;
            };
            if guard.has_local_waiters() {
                results.push((part.pk.clone(), guard.release().await));
                // The waiting task queues for the next lock before it is looked at.
                tokio::task::yield_now().await;
            } else {
                to_release.push((part.pk.clone(), guard));
            }
        }
        let released = join_all(
            to_release
                .into_iter()
                .map(|(pk, guard)| async move { (pk, guard.release().await) }),
        )
        .await;
        results.extend(released);
        tokio::task::yield_now().await;
        results
    }

    /// Gives the locks up without writing anything.
    ///
    /// # Errors
    /// The first release's error ([`Error::LeaseLost`], backend errors);
    /// that lease expires on its own, the others are released anyway.
    pub async fn abandon(mut self) -> Result<()> {
        // Discarded on purpose: no warning when the unit is dropped.
        self.staged.clear();
        self.give_up()
            .await
            .into_iter()
            .try_for_each(|(_, released)| released)
    }
}
impl Drop for Unit {
    fn drop(&mut self) {
        if !self.staged.is_empty() {
            let partitions: Vec<&str> = self.parts.iter().map(|p| p.pk.as_str()).collect();
            tracing::warn!(
                partitions = ?partitions,
                writes = self.staged.len(),
                "a unit was dropped with staged writes it never committed; they are discarded (commit them, or abandon the unit to discard them without this warning)"
            );
        }
    }
}

/// What a read inside the unit returns for a row with a staged write, and
/// the properties it shows (`None`: a delete).
fn staged_view<E: Entity>(
    op: &TableOp,
    read: Option<&StoredEntity>,
    read_known: bool,
) -> Result<Option<(Versioned<E>, Properties)>> {
    let (d, props) = match op {
        TableOp::Delete { .. } => return Ok(None),
        TableOp::Insert(d) | TableOp::Replace(d, _) => (d, d.properties.clone()),
        TableOp::Merge(d, _) => {
            let mut base = read.map(|r| r.data.properties.clone()).unwrap_or_default();
            base.merge_from(&d.properties);
            (d, base)
        }
    };
    // A merge onto a row the unit knows nothing of is not whole.
    let stored = if read_known || !matches!(op, TableOp::Merge(..)) {
        crate::entity::Stored::Known(std::sync::Arc::new(props.clone()))
    } else {
        crate::entity::Stored::Unknown
    };
    let data = crate::rows::row(&d.partition_key, &d.row_key, props.clone());
    let timestamp = read.map_or_else(OffsetDateTime::now_utc, |r| r.timestamp);
    let view = Versioned::new(E::decode(data)?, ETag::new(STAGED), timestamp).with_stored(stored);
    Ok(Some((view, props)))
}
