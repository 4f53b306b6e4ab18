//! [`Layer`]: what sees every request of a backend, in the spirit of
//! tower's `Service`.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use super::delegate::delegate_backend;
use super::{Backend, Request};
use crate::error::Result;

/// What sees every request of a backend on its way: counts it, injects
/// faults, traces it, times it, refuses it. Given to
/// [`StoreBuilder::layer`](crate::StoreBuilder::layer), it answers every
/// request of both backend traits through [`Layer::call`].
///
/// # The stack
///
/// A store stacks, from the backend up: the layers given to
/// [`StoreBuilder::layer`](crate::StoreBuilder::layer), in order; tracing (a
/// debug span per request, `leasehold.table` or `leasehold.blob`, with
/// OpenTelemetry's database-client attributes); the store's metrics (feature
/// `opentelemetry`). A table's writes then go, over the store's stack, through
/// the [`Fence`](crate::lease::Fence)'s layer on
/// [`Table::fenced`](crate::Table::fenced), and for a type with indexes through
/// the index write path (claims first, to the store's stack, unfenced; see
/// [`crate::index`]). The test kit's counter and fault injector are layers too.
///
/// # Writing one
///
/// This one refuses deletes of whole tables:
///
/// ```
/// use std::future::Future;
/// use leasehold::backend::{Layer, Op, Request, memory::MemoryBackend};
/// use leasehold::{Error, Result, Store};
///
/// #[derive(Debug)]
/// struct KeepTables;
///
/// impl Layer for KeepTables {
///     async fn call<T: Send>(&self, request: &Request<'_>, next: impl Future<Output = Result<T>> + Send) -> Result<T> {
///         match (request.op(), request.table()) {
///             (Op::DeleteTable, Some(t)) => Err(Error::invalid(format!("table {t}"), "this service keeps its tables")),
///             _ => next.await,
///         }
///     }
/// }
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let store = Store::builder(MemoryBackend::new()).layer(KeepTables).build()?;
/// store.create_table("Orders").await?;
/// assert_eq!(store.delete_table("Orders").await.unwrap_err().kind(), leasehold::ErrorKind::Invalid);
/// # Ok::<(), leasehold::Error>(()) }).unwrap();
/// ```
///
/// A layer cannot change what a request sends or what its answer holds; it
/// can wait, count, refuse, fail, or send requests of its own.
pub trait Layer: Send + Sync + fmt::Debug + 'static {
    /// Answers `request` (its [`Op`](super::Op), table or blob, keys) in
    /// place of `next`, the backend below's answer to it, not yet started.
    fn call<T: Send>(
        &self,
        request: &Request<'_>,
        next: impl Future<Output = Result<T>> + Send,
    ) -> impl Future<Output = Result<T>> + Send;
}

impl<L: Layer> Layer for Arc<L> {
    fn call<T: Send>(
        &self,
        request: &Request<'_>,
        next: impl Future<Output = Result<T>> + Send,
    ) -> impl Future<Output = Result<T>> + Send {
        (**self).call(request, next)
    }
}

/// A layer as a store stacks it: given the backend below, the backend
/// above. A [`Layer`] makes a [`Layered`]; the fence, which changes what a
/// write sends, makes its own backend.
pub(crate) trait Wrap: Send + Sync + fmt::Debug + 'static {
    /// `inner`, wrapped.
    fn layer(&self, inner: Arc<dyn Backend>) -> Arc<dyn Backend>;
}

impl<L: Layer> Wrap for Arc<L> {
    fn layer(&self, inner: Arc<dyn Backend>) -> Arc<dyn Backend> {
        Arc::new(Layered {
            layer: Arc::clone(self),
            inner,
        })
    }
}

/// A backend with every request through a [`Layer`].
pub(crate) struct Layered<L, B> {
    pub(crate) layer: L,
    pub(crate) inner: B,
}

/// As the backend it wraps: a layer is not a different backend.
impl<L, B: fmt::Debug> fmt::Debug for Layered<L, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

delegate_backend!(Layered);
