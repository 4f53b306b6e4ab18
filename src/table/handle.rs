//! [`Table`]: the handle of one typed table: its name, the table's
//! creation on first use, and single-entity reads.

use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tracing::Instrument as _;

use super::env::{IndexedWriter, TableEnv};
use super::stored::versioned;
use crate::backend::Backend;
use crate::entity::{Entity, Versioned, short_type_name};
use crate::error::{Error, Result};
use crate::key::{ConstantRowKey, IntoPartitionKey, IntoRowKey, PartitionKey, RowKey, TableName};

/// The typed table of entity type `E`. Cheap to clone.
pub struct Table<E> {
    pub(crate) env: Arc<TableEnv>,
    name: std::result::Result<TableName, String>,
    pub(super) write_log: bool,
    /// The backend of this table's writes: the store's stack, then the
    /// fence's layer of a [fenced](Table::fenced) table.
    pub(super) writer: Arc<dyn Backend>,
    /// Whether the table is [fenced](Table::fenced) (a fenced transaction
    /// holds one operation less).
    pub(super) fenced: bool,
    /// Set once the store has made sure the table exists.
    ready: Arc<AtomicBool>,
    /// The write path of an indexed type (see `crate::index`); `None`:
    /// every write is the plain one.
    pub(super) indexing: Option<Arc<dyn IndexedWriter>>,
    _entity: PhantomData<fn() -> E>,
}

impl<E> Clone for Table<E> {
    fn clone(&self) -> Self {
        let mut table = self.view();
        table.indexing = self.indexing.clone();
        table
    }
}

impl<E> Table<E> {
    /// The same table read as `V`: a type stored in the same table (the
    /// caller checks that, see [`SameTable`]). Its writes do not go through
    /// the index write path: a view only reads.
    pub(crate) fn view<V>(&self) -> Table<V> {
        Table {
            env: Arc::clone(&self.env),
            name: self.name.clone(),
            write_log: self.write_log,
            writer: Arc::clone(&self.writer),
            fenced: self.fenced,
            ready: Arc::clone(&self.ready),
            indexing: None,
            _entity: PhantomData,
        }
    }
}

/// A compile-time check that `V` is stored in `E`'s table: naming
/// `SameTable::<E, V>::CHECK` in a function fails to compile for a `V` of
/// another table.
pub(crate) struct SameTable<E, V>(PhantomData<fn(E) -> V>);

impl<E: Entity, V: Entity> SameTable<E, V> {
    pub(crate) const CHECK: () = assert!(
        same_table_name(E::TABLE, V::TABLE),
        "a projection must be an entity type of the same table (its `#[entity(table = ...)]`)"
    );
}

/// Whether two table names are the same, as the service compares them
/// (without regard to ASCII case).
const fn same_table_name(a: &str, b: &str) -> bool {
    // By bytes: `str::eq_ignore_ascii_case` is not `const` before 1.89.
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if !a[i].eq_ignore_ascii_case(&b[i]) {
            return false;
        }
        i += 1;
    }
    true
}

impl<E> std::fmt::Debug for Table<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("name", &self.name)
            .field("write_log", &self.write_log)
            .finish()
    }
}

impl<E: Entity> Table<E> {
    /// The table of `E` in the store whose tables share `env`: its reads
    /// resolve marks and hide leasehold's rows, and the writes of a type
    /// with indexes keep its index rows.
    pub(crate) fn new(env: Arc<TableEnv>) -> Self {
        let indexing = (!E::INDEXES.is_empty()).then(|| {
            (env.index_writes)(
                Arc::clone(&env),
                E::TABLE,
                short_type_name::<E>(),
                E::INDEXES,
            )
        });
        Table {
            // An invalid name (hand-written impl, long prefix) fails the
            // first operation.
            name: env.table_name(E::TABLE).map_err(|e| e.to_string()),
            writer: Arc::clone(env.backend()),
            fenced: false,
            env,
            write_log: false,
            ready: Arc::new(AtomicBool::new(false)),
            indexing,
            _entity: PhantomData,
        }
    }

    /// This handle on the table named `table` instead of `E::TABLE` (with
    /// the store's prefix), for [`crate::Store::dynamic_table`].
    pub(crate) fn with_table_name(mut self, table: &str) -> Self {
        self.name = self.env.table_name(table).map_err(|e| e.to_string());
        self.ready = Arc::new(AtomicBool::new(false));
        self
    }

    /// This table, keeping a write log in every entity it inserts, replaces
    /// or merges conditionally, so that a write whose reply is lost can be
    /// settled exactly.
    ///
    /// Without it, a lost reply is settled by reading the entity back, which
    /// cannot always tell this write from another writer's; then the write
    /// fails with [`Error::Transient`] ("outcome unknown"). With it, each
    /// such write stores a fresh 8-character id in front of the ids of the
    /// entity's last 31 writes, in the reserved property `_lhWriteLog`
    /// (under 300 characters, one of the 252 properties), which the
    /// read-back consults. Unconditional writes and batches do not extend
    /// it; a replacement without it drops it.
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

    /// The table name, after making sure the table exists: for writes.
    pub(crate) async fn ready(&self) -> Result<&TableName> {
        let name = self.name()?;
        if !self.ready.load(Ordering::Acquire) {
            self.env.ensure_table(name).await?;
            self.ready.store(true, Ordering::Release);
        }
        Ok(name)
    }

    /// The table name for a read: the table is created on first use too,
    /// except after this store deleted it (then a missing table is the
    /// answer, [`Error::NotFound`]).
    pub(crate) async fn ready_to_read(&self) -> Result<&TableName> {
        let name = self.name()?;
        if !self.ready.load(Ordering::Acquire) && self.env.ensure_table_to_read(name).await? {
            self.ready.store(true, Ordering::Release);
        }
        Ok(name)
    }

    /// Reads one entity with its ETag; `None` when there is none.
    ///
    /// # Errors
    /// [`Error::Invalid`] for an invalid key; [`Error::Decode`] when the stored
    /// entity does not fit `E`; [`Error::NotFound`] (code `TableNotFound`)
    /// when the table does not exist because the store deleted it (see
    /// [`crate::Store::delete_table`]); backend errors.
    pub async fn get(
        &self,
        partition_key: impl IntoPartitionKey,
        row_key: impl IntoRowKey,
    ) -> Result<Option<Versioned<E>>> {
        let pk = partition_key.into_partition_key()?;
        let rk = row_key.into_row_key()?;
        self.get_keys(&pk, &rk).await
    }

    /// Reads one entity as `V`, an entity type of the same table: only
    /// `V`'s properties come back (see [`Query::select`](super::Query::select)).
    ///
    /// # Errors
    /// As [`Table::get`]; [`Error::Decode`] when the stored entity does not
    /// fit `V`.
    pub async fn get_as<V: Entity>(
        &self,
        partition_key: impl IntoPartitionKey,
        row_key: impl IntoRowKey,
    ) -> Result<Option<Versioned<V>>> {
        let () = SameTable::<E, V>::CHECK;
        let pk = partition_key.into_partition_key()?;
        let rk = row_key.into_row_key()?;
        let page = self
            .env
            .telemetry()
            .operation(
                "get",
                self.query()
                    .partition(pk)
                    .row_keys(rk.as_str()..=rk.as_str())
                    .select::<V>()
                    .page(),
            )
            .await?;
        Ok(page.items.into_iter().next())
    }

    pub(super) async fn get_keys(
        &self,
        pk: &PartitionKey,
        rk: &RowKey,
    ) -> Result<Option<Versioned<E>>> {
        self.env
            .telemetry()
            .operation("get", async {
                let name = self.ready_to_read().await?;
                let span =
                    tracing::debug_span!("leasehold.get", table = %name, partition = %pk, row = %rk);
                async {
                    match self.env.read_row(name, pk, rk).await? {
                        Some(stored) => {
                            Ok(Some(crate::__private::in_row(pk, rk, versioned(stored))?))
                        }
                        None => Ok(None),
                    }
                }
                .instrument(span)
                .await
            })
            .await
    }
}

impl<E: Entity + ConstantRowKey> Table<E> {
    /// Reads the one entity of partition `partition_key`, for a type whose
    /// row key is a constant (`#[entity(row_key = "...")]`, see
    /// [`ConstantRowKey`]); `None` when there is none.
    ///
    /// ```
    /// use leasehold::{Entity, Store};
    ///
    /// #[derive(Entity, Debug, Clone)]
    /// #[entity(table = "Customers", row_key = "profile")]
    /// struct Profile {
    ///     #[entity(partition_key)]
    ///     customer: String,
    ///     name: String,
    /// }
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let profiles = Store::memory().table::<Profile>();
    /// profiles.insert(Profile { customer: "c1".into(), name: "Ann".into() }).await?;
    /// assert_eq!(profiles.get_one("c1").await?.expect("stored").name, "Ann");
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// As [`Table::get`].
    pub async fn get_one(
        &self,
        partition_key: impl IntoPartitionKey,
    ) -> Result<Option<Versioned<E>>> {
        self.get(partition_key, E::ROW_KEY).await
    }
}
