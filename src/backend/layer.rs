//! [`Layer`]: what wraps a backend to add to every request, in the spirit
//! of tower's `Layer`.

use std::fmt;
use std::sync::Arc;

use super::Backend;

/// Wraps a backend in another that adds to its requests: counts them,
/// injects faults, traces them, fences writes. A layer receives the backend
/// below it and returns the one above it; the returned backend must
/// implement both traits with the semantics of the one it wraps, apart from
/// what the layer is for.
///
/// # The stack
///
/// A store stacks, from the backend up:
///
/// 1. the layers given to [`StoreBuilder::layer`](crate::StoreBuilder::layer),
///    in the order given;
/// 2. tracing: one debug span per request, named `leasehold.table` or
///    `leasehold.blob`, with OpenTelemetry's database-client attributes
///    (`db.system.name` from [`TableBackend::system_name`](super::TableBackend::system_name),
///    `db.operation.name`, `db.collection.name`, `server.address`) and the
///    request's outcome;
/// 3. the store's metrics (feature `opentelemetry`).
///
/// A table's writes then go through, per table, over the store's stack:
///
/// 4. on [`Table::fenced`](crate::Table::fenced), the
///    [`Fence`](crate::lease::Fence)'s layer: every write as one
///    transaction with the partition's fence row;
/// 5. for a type with indexes, the index layer that
///    [`Store::table`](crate::Store::table) stacks: claims first, then the
///    entity's row through the layers below (see [`crate::index`]). The
///    claims go to the store's stack, so they are not fenced.
///
/// The layers of [`crate::testing`] are the counter and the fault injector:
/// [`RequestCounter`](crate::testing::RequestCounter) and
/// [`FaultInjector`](crate::testing::FaultInjector) are layers.
///
/// # Writing one
///
/// A layer is a value with a `layer` method; the backend it returns
/// implements [`TableBackend`](super::TableBackend) and
/// [`BlobBackend`](super::BlobBackend), usually by handing each request to
/// the backend it wraps. This one refuses deletes of whole tables:
///
/// ```
/// use std::sync::Arc;
/// use leasehold::backend::*;
/// use leasehold::key::{BlobName, ContainerName, ETag, PartitionKey, RowKey, TableName};
/// use leasehold::{Error, Result, Store};
///
/// #[derive(Debug)]
/// struct KeepTables;
///
/// impl Layer for KeepTables {
///     fn layer(&self, inner: Arc<dyn Backend>) -> Arc<dyn Backend> {
///         Arc::new(Kept(inner))
///     }
/// }
///
/// #[derive(Debug)]
/// struct Kept(Arc<dyn Backend>);
///
/// #[async_trait::async_trait]
/// impl TableBackend for Kept {
///     fn system_name(&self) -> &'static str { self.0.system_name() }
///     async fn create_table(&self, t: &TableName) -> Result<TableCreation> { self.0.create_table(t).await }
///     async fn delete_table(&self, t: &TableName) -> Result<bool> {
///         Err(Error::invalid(format!("table {t}"), "this service never deletes tables"))
///     }
///     async fn list_tables(&self) -> Result<Vec<TableName>> { self.0.list_tables().await }
///     async fn get(&self, t: &TableName, pk: &PartitionKey, rk: &RowKey) -> Result<Option<StoredEntity>> {
///         self.0.get(t, pk, rk).await
///     }
///     async fn execute(&self, t: &TableName, op: TableOp, o: &WriteOptions) -> Result<Option<Version>> {
///         self.0.execute(t, op, o).await
///     }
///     async fn batch(&self, t: &TableName, ops: &[TableOp]) -> Result<Vec<Option<Version>>> {
///         self.0.batch(t, ops).await
///     }
///     async fn query(&self, t: &TableName, q: &QuerySpec) -> Result<QueryPage> { self.0.query(t, q).await }
/// }
///
/// #[async_trait::async_trait]
/// impl BlobBackend for Kept {
///     fn endpoint(&self) -> String { self.0.endpoint() }
///     async fn create_container(&self, c: &ContainerName) -> Result<()> { self.0.create_container(c).await }
///     async fn put_blob(&self, c: &ContainerName, b: &BlobName, body: Vec<u8>, m: &Metadata, w: &BlobConditions) -> Result<ETag> {
///         self.0.put_blob(c, b, body, m, w).await
///     }
///     async fn get_blob(&self, c: &ContainerName, b: &BlobName) -> Result<Option<Blob>> { self.0.get_blob(c, b).await }
///     async fn blob_properties(&self, c: &ContainerName, b: &BlobName) -> Result<Option<BlobProperties>> {
///         self.0.blob_properties(c, b).await
///     }
///     async fn set_blob_metadata(&self, c: &ContainerName, b: &BlobName, m: &Metadata, w: &BlobConditions) -> Result<ETag> {
///         self.0.set_blob_metadata(c, b, m, w).await
///     }
///     async fn delete_blob(&self, c: &ContainerName, b: &BlobName, w: &BlobConditions) -> Result<()> {
///         self.0.delete_blob(c, b, w).await
///     }
///     async fn list_blobs(&self, c: &ContainerName, prefix: &str, marker: Option<&str>) -> Result<BlobListPage> {
///         self.0.list_blobs(c, prefix, marker).await
///     }
///     async fn lease(&self, c: &ContainerName, b: &BlobName, a: LeaseAction) -> Result<LeaseReply> {
///         self.0.lease(c, b, a).await
///     }
/// }
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let store = Store::builder(memory::MemoryBackend::new()).layer(KeepTables).build()?;
/// store.create_table("Orders").await?;
/// let refused = store.delete_table("Orders").await.unwrap_err();
/// assert_eq!(refused.kind(), leasehold::ErrorKind::Invalid);
/// # Ok::<(), leasehold::Error>(()) }).unwrap();
/// ```
pub trait Layer: Send + Sync + fmt::Debug + 'static {
    /// `inner`, wrapped.
    fn layer(&self, inner: Arc<dyn Backend>) -> Arc<dyn Backend>;
}

impl<L: Layer + ?Sized> Layer for Arc<L> {
    fn layer(&self, inner: Arc<dyn Backend>) -> Arc<dyn Backend> {
        (**self).layer(inner)
    }
}
