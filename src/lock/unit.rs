//! [`Unit`]: one unit of work under a partition lock.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use time::OffsetDateTime;
use tracing::Instrument as _;

use super::fold::{fold, if_match_of};
use super::journal::Journal;
use super::name::lock_name;
use super::options::LockOptions;
use super::roll_forward::{RollForwardReport, roll_forward};
use crate::backend::{Precondition, StoredEntity, TableOp, validate_batch};
use crate::entity::{Entity, EntityData, Properties, Versioned};
use crate::error::{Error, ErrorKind, Result};
use crate::key::{ETag, IntoPartitionKey, IntoRowKey, PartitionKey, RowKey, TableName};
use crate::lease::{Acquisition, LeaseGuard, META_ACQUIRED, META_OWNER};
use crate::outcome::{self, Locked};
use crate::store::Store;

/// The ETag of an entity as a unit shows it after staging a write to it: it
/// has no stored version yet. Passing such a value back to the unit updates
/// the staged write.
const STAGED: &str = "leasehold-staged";

/// What a commit did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommitReport {
    /// Operations written.
    pub operations: usize,
    /// Tables written.
    pub tables: usize,
    /// Entity-group transactions sent.
    pub batches: usize,
    /// Whether the commit went through the journal (several tables, or more
    /// than 100 operations).
    pub journalled: bool,
}

/// A unit of work holding the lock of one partition.
///
/// Reads record the ETag they saw; writes are staged until
/// [`Unit::commit`]; reads see the unit's own staged writes. Dropping the unit
/// without committing sends nothing and gives the lock up (to the next local
/// task, or by releasing it in the background).
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
/// let report = unit.commit().await?; // two tables: journalled, all or nothing
/// assert!(report.journalled);
/// assert_eq!(accounts.get("alice", "savings").await?.unwrap().balance, 30);
/// # Ok::<(), leasehold::Error>(()) }).unwrap();
/// ```
///
/// # Writing a row twice
///
/// A unit writes each row once: a second write of a row it already stages
/// is folded into the staged one, keeping the first write's condition (the
/// ETag the unit read, or none for an upsert), or refused with
/// [`Error::Invalid`] when it could not follow the first one. **A refused
/// call changes nothing**: the staged writes stay exactly as they were, and
/// a commit still applies them. Rows: what the unit stages for the row (by
/// the call that staged it); columns: the next call on that row.
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
/// "Merged value": the properties of the second call's value merged over
/// the staged one's. Every folded write keeps the first write's condition,
/// so `replace` then `delete` deletes only if the row still has the ETag the
/// unit read. A refusal is where writing one after the other would fail:
/// inserting a row the unit already writes (so it exists), or replacing,
/// merging or deleting a row the unit deletes. An insert and its delete
/// cancel out: nothing is written for the row, not even a check that it is
/// absent.
///
/// ¹ The service cannot delete "if present": when the unit read the row and
/// found none, the pair writes nothing; otherwise the commit deletes the row
/// and fails with [`Error::NotFound`] (inside [`Error::Batch`]) if it does
/// not exist.
///
/// `replace`, `merge` and `delete` of a *staged view* (what [`Unit::get`]
/// returns for a row with a staged write) write over that staged write; a
/// staged view of a row this unit stages no write for (one from another
/// unit, or of a write this unit no longer stages) has no ETag and is
/// refused.
///
/// ```
/// # use leasehold::{Entity, Store};
/// # #[derive(Entity, Clone, Debug)]
/// # #[entity(table = "Notes")]
/// # struct Note { #[entity(partition_key)] pk: String, #[entity(row_key)] id: String, text: String }
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let store = Store::memory();
/// let mut unit = store.lock("p").await?;
/// let note = Note { pk: "p".into(), id: "n1".into(), text: "first".into() };
/// unit.insert(&note)?;
/// let again = Note { text: "second".into(), ..note.clone() };
/// assert!(unit.insert(&again).is_err()); // refused: the unit already inserts that row,
/// assert_eq!(unit.staged(), 1); // and the first insert stays staged
/// unit.commit().await?;
/// assert_eq!(store.table::<Note>().get("p", "n1").await?.unwrap().text, "first");
/// # Ok::<(), leasehold::Error>(()) }).unwrap();
/// ```
#[must_use = "dropping a Unit discards its staged writes and releases the lock; call `commit().await` (or `abandon().await`)"]
pub struct Unit {
    store: Store,
    guard: Option<LeaseGuard>,
    partition_key: PartitionKey,
    options: LockOptions,
    /// What each row looked like when the unit read it (`None`: absent).
    reads: HashMap<(TableName, RowKey), Option<StoredEntity>>,
    /// One staged write per row, in a fixed order.
    staged: BTreeMap<(TableName, RowKey), TableOp>,
    rolled_forward: Option<RollForwardReport>,
}

impl std::fmt::Debug for Unit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unit")
            .field("partition_key", &self.partition_key)
            .field("reads", &self.reads.len())
            .field("staged", &self.staged.len())
            .finish_non_exhaustive()
    }
}

impl Unit {
    /// Takes the lock of `partition_key` (waiting up to `timeout`, or not at
    /// all when `None`) and rolls a pending journal forward.
    pub(crate) async fn open(
        store: &Store,
        partition_key: impl IntoPartitionKey,
        timeout: Option<Duration>,
    ) -> Result<Option<Unit>> {
        let pk = partition_key.into_partition_key()?;
        let name = lock_name(store.table_prefix(), &pk)?;
        let locks = store.locks();
        let guard = match timeout {
            Some(t) => locks.acquire(name.as_str(), t).await?,
            None => match locks.try_acquire(name.as_str()).await? {
                Some(g) => g,
                None => return Ok(None),
            },
        };
        let mut unit = Unit {
            store: store.clone(),
            guard: Some(guard),
            partition_key: pk,
            options: store.lock_options().clone(),
            reads: HashMap::new(),
            staged: BTreeMap::new(),
            rolled_forward: None,
        };
        unit.recover().await?;
        Ok(Some(unit))
    }

    fn guard(&self) -> Result<&LeaseGuard> {
        self.guard.as_ref().ok_or_else(|| Error::LeaseLost {
            what: format!(
                "lock of partition {:?} was already given up",
                self.partition_key
            ),
            code: None,
        })
    }

    /// Rolls a pending journal forward. A fresh acquire reads the lock blob
    /// (the "lock-blob read"); a handed-over lease knows it already.
    async fn recover(&mut self) -> Result<()> {
        let guard = self.guard()?;
        if let Some(journal) = Journal::pending(guard).await? {
            let span = tracing::info_span!("leasehold.roll_forward", partition = %self.partition_key, ops = journal.ops.len());
            let report = roll_forward(self.store.backend().as_ref(), &journal)
                .instrument(span)
                .await?;
            Journal::clear(guard).await?;
            tracing::info!(
                partition = %self.partition_key,
                applied = report.applied,
                already_applied = report.already_applied,
                "rolled a pending journal forward"
            );
            self.rolled_forward = Some(report);
        }
        self.record_holder().await
    }

    /// Records this process as the lock's holder in the lock blob's metadata
    /// unless the blob already names it (see "Who holds a lock" in the
    /// [module docs](super)). The blob is known from the lock-blob read, so
    /// only a change of holder costs a request. A failed write leaves the
    /// holder unrecorded but the unit usable, unless the lease is lost.
    async fn record_holder(&self) -> Result<()> {
        let guard = self.guard()?;
        let owner = self.store.locks().owner();
        if guard.blob().await?.owner() == Some(owner) {
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
                tracing::warn!(partition = %self.partition_key, error = %e, "could not record the lock's holder");
                Ok(())
            }
        }
    }

    /// The partition this unit holds.
    pub fn partition_key(&self) -> &PartitionKey {
        &self.partition_key
    }

    /// What taking the lock rolled forward, if a previous holder died during
    /// a commit.
    pub fn rolled_forward(&self) -> Option<&RollForwardReport> {
        self.rolled_forward.as_ref()
    }

    /// Whether the lease was handed over by another local unit (no acquire,
    /// no lock-blob read) rather than acquired.
    pub fn is_handed_over(&self) -> bool {
        self.guard
            .as_ref()
            .is_some_and(|g| g.acquisition() == Acquisition::HandedOver)
    }

    /// The lease guard (remaining validity, loss signal).
    ///
    /// # Errors
    /// [`Error::LeaseLost`] after the unit gave its lock up.
    pub fn lease(&self) -> Result<&LeaseGuard> {
        self.guard()
    }

    fn table_of<E: Entity>(&self) -> Result<TableName> {
        self.store.table_name(E::TABLE)
    }

    fn check_partition(&self, pk: &PartitionKey, what: &str) -> Result<()> {
        if pk != &self.partition_key {
            return Err(Error::invalid(
                format!("{what} of partition {:?}", pk.as_str()),
                format!(
                    "this unit holds the lock of partition {:?} only",
                    self.partition_key.as_str()
                ),
            ));
        }
        Ok(())
    }

    /// Reads an entity of this partition, recording its ETag; sees this
    /// unit's staged writes. A row read before (or staged from a value that
    /// knows what is stored) costs no request; a row with a staged merge the
    /// unit knows nothing of (an `upsert_merge`) is read once, so the view
    /// shows every property the commit leaves stored.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad key; [`Error::Decode`]; backend errors.
    pub async fn get<E: Entity>(
        &mut self,
        row_key: impl IntoRowKey,
    ) -> Result<Option<Versioned<E>>> {
        let rk = row_key.into_row_key()?;
        let table = self.table_of::<E>()?;
        let key = (table, rk);
        if matches!(self.staged.get(&key), Some(TableOp::Merge(..)))
            && !self.reads.contains_key(&key)
        {
            // A merge onto a row this unit has not read (an `upsert_merge`,
            // or a value that does not know what is stored): read the row,
            // so the view shows every property the commit leaves stored.
            self.store.ensure_table(&key.0).await?;
            let stored = self
                .store
                .backend()
                .get(&key.0, &self.partition_key, &key.1)
                .await?;
            self.reads.insert(key.clone(), stored);
        }
        if let Some(op) = self.staged.get(&key) {
            let read = self.reads.get(&key);
            return staged_view(op, read.and_then(Option::as_ref), read.is_some());
        }
        if let Some(read) = self.reads.get(&key) {
            return read.clone().map(crate::table::versioned).transpose();
        }
        self.store.ensure_table(&key.0).await?;
        let stored = self
            .store
            .backend()
            .get(&key.0, &self.partition_key, &key.1)
            .await?;
        self.reads.insert(key, stored.clone());
        stored.map(crate::table::versioned).transpose()
    }

    fn encode<E: Entity>(&self, entity: &E, what: &str) -> Result<(TableName, EntityData)> {
        let data = entity.encode()?;
        self.check_partition(&data.partition_key, what)?;
        Ok((self.table_of::<E>()?, data))
    }

    /// The condition for a conditional write of `v`: its ETag, unless it is
    /// the view of a staged write (then the staged write's condition holds).
    fn condition_of<E>(v: &Versioned<E>) -> Option<Precondition> {
        (v.etag().as_str() != STAGED).then(|| Precondition::IfMatch(v.etag().clone()))
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
        let (table, data) = self.encode(current.entity(), "replace")?;
        let condition = Self::condition_of(current);
        self.stage_conditional(table, data, condition, false)
    }

    /// Stages a merge conditioned on the ETag `current` was read at.
    ///
    /// Reads in the unit then show the entity as the commit will store it,
    /// `None` fields with their stored values: from the unit's own read of
    /// the row, or else from what `current` knows of its version (any value
    /// read or written through this crate).
    ///
    /// # Errors
    /// As [`Unit::insert`].
    pub fn merge<E: Entity>(&mut self, current: &Versioned<E>) -> Result<()> {
        let (table, data) = self.encode(current.entity(), "merge")?;
        let condition = Self::condition_of(current);
        let key = (table.clone(), data.row_key.clone());
        // The version `current` was read at stands in for a read of the row
        // by this unit, so the staged view knows what the merge keeps.
        let base = match &condition {
            Some(Precondition::IfMatch(etag)) if !self.reads.contains_key(&key) => {
                current.stored_properties().map(|properties| StoredEntity {
                    data: EntityData {
                        partition_key: data.partition_key.clone(),
                        row_key: data.row_key.clone(),
                        properties: std::sync::Arc::unwrap_or_clone(properties),
                    },
                    etag: etag.clone(),
                    timestamp: current.timestamp(),
                })
            }
            _ => None,
        };
        self.stage_conditional(table, data, condition, true)?;
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
        let key = (table.clone(), data.row_key.clone());
        let condition = self.condition_for_view(&key, Self::condition_of(current), "delete")?;
        self.stage(
            table,
            TableOp::Delete {
                partition_key: data.partition_key,
                row_key: data.row_key,
                if_match: if_match_of(condition),
            },
        )
    }

    /// Stages an **unconditional** create-or-replace.
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

    fn stage_conditional(
        &mut self,
        table: TableName,
        data: EntityData,
        condition: Option<Precondition>,
        merge: bool,
    ) -> Result<()> {
        let key = (table.clone(), data.row_key.clone());
        let what = if merge { "merge" } else { "replace" };
        let condition = self.condition_for_view(&key, condition, what)?;
        let op = if merge {
            TableOp::Merge(data, condition)
        } else {
            TableOp::Replace(data, condition)
        };
        self.stage(table, op)
    }

    /// The condition of a write of a value read at `condition` (`None`: a
    /// staged view). A staged view stands for this unit's staged write of
    /// the row; with none staged (a view from another unit, or of a write
    /// this unit no longer stages) there is no ETag to condition on, so the
    /// write is refused.
    fn condition_for_view(
        &self,
        key: &(TableName, RowKey),
        condition: Option<Precondition>,
        what: &str,
    ) -> Result<Precondition> {
        match condition {
            Some(c) => Ok(c),
            None if self.staged.contains_key(key) => Ok(Precondition::IfExists),
            None => Err(Error::invalid(
                format!("{what} of row {:?} in `{}`", key.1.as_str(), key.0),
                "the value is a staged view, and this unit stages no write of that row (a view from another unit, or of a write this unit no longer stages)",
            )),
        }
    }

    /// Adds `op` to the staged writes, folding it into an earlier write of the
    /// same row so each row is written once (the table in the [`Unit`] docs).
    /// The fold is decided on a borrowed view of the staged writes and
    /// applied only when it succeeds, so a refused call leaves them exactly
    /// as they were.
    fn stage(&mut self, table: TableName, op: TableOp) -> Result<()> {
        let key = (table, op.row_key().clone());
        let read_absent = matches!(self.reads.get(&key), Some(None));
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

    /// Applies every staged write, all or nothing, then gives the lock up.
    ///
    /// # Errors
    /// * [`Error::LeaseLost`] when the lease has less than the commit margin
    ///   left — nothing is sent;
    /// * [`Error::Invalid`] for writes breaking a service limit — nothing is
    ///   sent;
    /// * [`Error::Batch`] (with a [`Error::Conflict`] or
    ///   [`Error::AlreadyExists`] inside) when a row changed since it was read
    ///   or exists already — nothing was applied;
    /// * [`Error::Inconsistent`] when a journalled commit was refused after
    ///   part of it applied (only possible if something wrote the partition
    ///   without the lock) — the journal is kept for an operator;
    /// * backend errors.
    pub async fn commit(mut self) -> Result<CommitReport> {
        let span = tracing::debug_span!("leasehold.commit", partition = %self.partition_key, ops = self.staged.len());
        let result = self.commit_inner().instrument(span).await;
        // Whatever happened, the lock is given up; a journal left by a failed
        // commit is rolled forward (or reported) by the next holder.
        if let Some(guard) = self.guard.take() {
            if let Err(e) = guard.release().await {
                tracing::warn!(partition = %self.partition_key, error = %e, "releasing the lock after commit failed; it will expire");
            }
        }
        result
    }

    async fn commit_inner(&mut self) -> Result<CommitReport> {
        let mut report = CommitReport::default();
        if self.staged.is_empty() {
            return Ok(report);
        }
        let staged = std::mem::take(&mut self.staged);
        let guard = self.guard()?;
        guard.ensure_valid(self.options.commit_margin)?;
        let mut by_table: BTreeMap<TableName, Vec<TableOp>> = BTreeMap::new();
        for ((table, _), op) in staged {
            by_table.entry(table).or_default().push(op);
        }
        report.operations = by_table.values().map(Vec::len).sum();
        report.tables = by_table.len();
        let mut batches: Vec<(TableName, Vec<TableOp>)> = Vec::new();
        for (table, ops) in by_table {
            for chunk in ops.chunks(TableOp::MAX_BATCH_OPS) {
                validate_batch(table.as_str(), chunk)?;
                batches.push((table.clone(), chunk.to_vec()));
            }
        }
        for (table, _) in &batches {
            self.store.ensure_table(table).await?;
        }
        let backend = self.store.backend().clone();
        if batches.len() == 1 {
            let (table, ops) = &batches[0];
            match backend.batch(table, ops).await {
                Ok(_) => {}
                Err(e) if refused(&e) => return Err(e),
                Err(e) => {
                    tracing::warn!(partition = %self.partition_key, error = %e, "transaction outcome unknown; verifying");
                    guard.ensure_valid(Duration::ZERO)?;
                    verify_batch(backend.as_ref(), &self.partition_key, table, ops, e).await?;
                }
            }
            report.batches = 1;
            return Ok(report);
        }

        report.journalled = true;
        let all: Vec<(TableName, TableOp)> = batches
            .iter()
            .flat_map(|(t, ops)| ops.iter().map(move |op| (t.clone(), op.clone())))
            .collect();
        let journal = Journal::new(&self.partition_key, &all);
        if let Err(e) = journal.write(guard).await {
            // Writing the same journal again is harmless; a journal whose
            // write really failed twice is either absent (nothing happened)
            // or present (the next holder rolls it forward).
            if !e.is_transient() {
                return Err(e);
            }
            journal.write(guard).await?;
        }
        for (i, (table, ops)) in batches.iter().enumerate() {
            match backend.batch(table, ops).await {
                Ok(_) => report.batches += 1,
                Err(e) if refused(&e) && i == 0 => {
                    // Nothing of this commit was applied: withdraw the journal.
                    Journal::clear(guard).await?;
                    return Err(e);
                }
                Err(e) if refused(&e) => {
                    return Err(Error::Inconsistent {
                        what: format!(
                            "transaction {} of {} of a journalled commit on partition {:?} was refused after earlier ones applied ({e}); something wrote the partition without its lock. The journal is kept for an operator",
                            i + 1,
                            batches.len(),
                            self.partition_key.as_str()
                        ),
                    });
                }
                Err(e) => {
                    // The outcome is unknown (a lost reply, a timeout):
                    // finish by rolling the journal forward, which checks
                    // every row before writing it.
                    tracing::warn!(partition = %self.partition_key, error = %e, "transaction outcome unknown; rolling the journal forward");
                    guard.ensure_valid(Duration::ZERO)?;
                    roll_forward(backend.as_ref(), &journal).await?;
                    break;
                }
            }
        }
        if let Err(e) = Journal::clear(guard).await {
            // Every write is applied; a journal left behind is found fully
            // applied by the next holder.
            tracing::warn!(partition = %self.partition_key, error = %e, "clearing the journal failed; the next holder will find it applied");
        }
        Ok(report)
    }

    /// Gives the lock up without writing anything (as dropping the unit
    /// does, but waiting for the release).
    ///
    /// # Errors
    /// The release's error; the lease then expires on its own.
    pub async fn abandon(mut self) -> Result<()> {
        match self.guard.take() {
            Some(guard) => guard.release().await,
            None => Ok(()),
        }
    }
}

/// Settles a single transaction whose reply was lost: the service applies it
/// whole or not at all, so either every row shows its write (done), or every
/// row still has the state the unit read (sent again, once), or something
/// else wrote the partition meanwhile.
async fn verify_batch(
    backend: &dyn crate::backend::TableBackend,
    pk: &PartitionKey,
    table: &TableName,
    ops: &[TableOp],
    cause: Error,
) -> Result<()> {
    let mut stored = Vec::with_capacity(ops.len());
    for op in ops {
        stored.push(backend.get(table, pk, op.row_key()).await?);
    }
    let applied = match outcome::judge_locked(ops, &stored) {
        Locked::Applied => return Ok(()),
        Locked::NotApplied => return backend.batch(table, ops).await.map(|_| ()),
        Locked::Contradicted { applied } => applied,
    };
    Err(Error::Inconsistent {
        what: format!(
            "a transaction on partition {:?} of `{table}` lost its reply ({cause}) and its rows now match neither the state read nor the state written ({applied} of {} show the write); something wrote the partition without its lock",
            pk.as_str(),
            ops.len(),
        ),
    })
}

/// Whether the service refused the request, so it was not applied.
fn refused(e: &Error) -> bool {
    let kind = match e {
        Error::Batch { source, .. } => source.kind(),
        other => other.kind(),
    };
    matches!(
        kind,
        ErrorKind::Conflict
            | ErrorKind::AlreadyExists
            | ErrorKind::NotFound
            | ErrorKind::Invalid
            | ErrorKind::Backend
    )
}

/// What a read inside the unit returns for a row with a staged write.
fn staged_view<E: Entity>(
    op: &TableOp,
    read: Option<&StoredEntity>,
    read_known: bool,
) -> Result<Option<Versioned<E>>> {
    // `complete`: whether `props` is every property the commit leaves
    // stored (a merge onto a row the unit knows nothing of is not).
    let (props, complete): (Properties, bool) = match op {
        TableOp::Delete { .. } => return Ok(None),
        TableOp::Insert(d) | TableOp::Replace(d, _) => (d.properties.clone(), true),
        TableOp::Merge(d, _) => {
            let mut base = read.map(|r| r.data.properties.clone()).unwrap_or_default();
            base.merge_from(&d.properties);
            (base, read_known)
        }
    };
    let stored = if complete {
        crate::entity::Stored::Known(std::sync::Arc::new(props.clone()))
    } else {
        crate::entity::Stored::Unknown
    };
    let data = op.data().map(|d| EntityData {
        partition_key: d.partition_key.clone(),
        row_key: d.row_key.clone(),
        properties: props,
    });
    match data {
        Some(data) => Ok(Some(
            Versioned::new(
                E::decode(data)?,
                ETag::new(STAGED),
                read.map(|r| r.timestamp)
                    .unwrap_or_else(OffsetDateTime::now_utc),
            )
            .with_stored(stored),
        )),
        None => Ok(None),
    }
}
