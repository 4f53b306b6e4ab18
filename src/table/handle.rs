//! [`Table`]: the handle of one typed table, and single-entity reads.

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
    /// The store's backend, under the fence's layer when
    /// [fenced](Table::fenced).
    pub(super) writer: Arc<dyn Backend>,
    /// A fenced transaction holds one operation less.
    pub(super) fenced: bool,
    ready: Arc<AtomicBool>,
    /// The write path of an indexed type (see `crate::index`).
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
    /// The same table read as `V`, a type of the same table (checked by
    /// the caller with [`SameTable`]); only for reads: no index write path.
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

/// `SameTable::<E, V>::CHECK` fails to compile for a `V` stored in
/// another table than `E`.
pub(crate) struct SameTable<E, V>(PhantomData<fn(E) -> V>);

impl<E: Entity, V: Entity> SameTable<E, V> {
    pub(crate) const CHECK: () = assert!(
        same_table_name(E::TABLE, V::TABLE),
        "a projection must be an entity type of the same table (its `#[entity(table = ...)]`)"
    );
}

/// Whether two table names are the same (the service ignores ASCII case).
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
            writer: Arc::clone(&env.backend),
            fenced: false,
            env,
            write_log: false,
            ready: Arc::new(AtomicBool::new(false)),
            indexing,
            _entity: PhantomData,
        }
    }

    /// This handle on the table `table` (prefixed), for
    /// [`crate::Store::dynamic_table`].
    pub(crate) fn with_table_name(mut self, table: &str) -> Self {
        self.name = self.env.table_name(table).map_err(|e| e.to_string());
        self.ready = Arc::new(AtomicBool::new(false));
        self
    }

    /// This table, keeping a write log in every entity it inserts, replaces
    /// or merges conditionally, so that a write whose reply is lost is
    /// settled exactly (without it, a read-back that cannot tell this write
    /// from another's fails with [`Error::Transient`], "outcome unknown").
    ///
    /// Each such write stores a fresh 8-character id before the ids of the
    /// entity's last 31 writes in the reserved property `_lhWriteLog`
    /// (under 300 characters, one of the 252 properties). Unconditional
    /// writes and batches do not extend it; a replacement without it drops
    /// it.
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

    /// The table name, after making sure the table exists.
    pub(crate) async fn ready(&self) -> Result<&TableName> {
        let name = self.name()?;
        if !self.ready.load(Ordering::Acquire) {
            self.env.ensure_table(name).await?;
            self.ready.store(true, Ordering::Release);
        }
        Ok(name)
    }

    /// [`Table::ready`] for a read, which meets a table this store deleted
    /// missing.
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
    /// [`Error::Invalid`] for an invalid key; [`Error::Decode`] when the
    /// stored entity does not fit `E`; [`Error::NotFound`] (`TableNotFound`)
    /// after [`crate::Store::delete_table`]; backend errors.
    pub async fn get(
        &self,
        partition_key: impl IntoPartitionKey,
        row_key: impl IntoRowKey,
    ) -> Result<Option<Versioned<E>>> {
        let pk = partition_key.into_partition_key()?;
        let rk = row_key.into_row_key()?;
        self.get_keys(&pk, &rk).await
    }

    /// Reads one entity as `V`, an entity type of the same table (a
    /// projection, see [`Query::select`](super::Query::select)).
    ///
    /// # Errors
    /// As [`Table::get`].
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
            .telemetry
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
        let read = async {
            let name = self.ready_to_read().await?;
            let span =
                tracing::debug_span!("leasehold.get", table = %name, partition = %pk, row = %rk);
            let row = self.env.read_row(name, pk, rk).instrument(span).await?;
            row.map(|stored| crate::__private::in_row(pk, rk, versioned(stored)))
                .transpose()
        };
        self.env.telemetry.operation("get", read).await
    }
}

impl<E: Entity + ConstantRowKey> Table<E> {
    /// Reads the one entity of partition `partition_key` of a type whose
    /// row key is a constant ([`ConstantRowKey`]).
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
