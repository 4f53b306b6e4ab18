//! [`Instrumented`]: the store's backend, each call counted and timed as
//! one request, with what the backend noted meanwhile (retries, busy
//! answers, see [`crate::backend::notes`]); and the task-local count that
//! ties requests to the logical operation they belong to.

use std::cell::Cell;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use crate::backend::delegate::{Delegate, Request, delegate_backend};
use crate::backend::{TableBackend, notes};
use crate::error::{Error, Result};

use super::instruments::{Instruments, Outcome};
use super::{RetryReason, kind_name};

tokio::task_local! {
    /// The requests of the logical operation running in this task.
    static OPERATION: Cell<u64>;
}

/// Whether a logical operation is running in this task.
pub(super) fn in_operation() -> bool {
    OPERATION.try_with(|_| ()).is_ok()
}

/// Runs `fut`, counting the requests it makes.
pub(super) async fn counting_requests<F: Future>(fut: F) -> (F::Output, u64) {
    OPERATION
        .scope(Cell::new(0), async move {
            let output = fut.await;
            (output, OPERATION.with(Cell::get))
        })
        .await
}

/// The `error.type` of a failed request: its error's kind, or for a batch
/// the kind of the operation that failed it.
fn error_type(error: &Error) -> &'static str {
    match error {
        Error::Batch { source, .. } => error_type(source),
        other => kind_name(other.kind()),
    }
}

/// A backend whose every call is recorded as one request.
pub(super) struct Instrumented<B> {
    inner: B,
    instruments: Arc<Instruments>,
    /// `db.system.name`: the memory backend's, or Azure Storage's.
    system: &'static str,
}

impl<B: TableBackend> Instrumented<B> {
    pub(super) fn new(inner: B, instruments: Arc<Instruments>) -> Self {
        let system = inner.system_name();
        Instrumented {
            inner,
            instruments,
            system,
        }
    }
}

impl<B: Send + Sync> Delegate for Instrumented<B> {
    async fn call<T: Send>(
        &self,
        request: &Request<'_>,
        fut: impl Future<Output = Result<T>> + Send,
    ) -> Result<T> {
        let op = request.op;
        let _ = OPERATION.try_with(|n| n.set(n.get() + 1));
        let started = Instant::now();
        let (result, noted) = notes::noting(fut).await;
        let elapsed = started.elapsed();
        let name = op.name();
        let i = &self.instruments;
        let outcome = result.as_ref().err().map(|e| Outcome {
            kind: error_type(e),
            expected: notes::is_expected(e),
        });
        i.request(self.system, name, outcome, elapsed);
        if noted.transport_retries > 0 {
            i.retries(
                RetryReason::Transport.as_str(),
                name,
                noted.transport_retries,
            );
        }
        if noted.throttle_retries > 0 {
            i.retries(
                RetryReason::Throttled.as_str(),
                name,
                noted.throttle_retries,
            );
        }
        if noted.throttled > 0 {
            i.throttled(name, noted.throttled);
        }
        result
    }
}

/// As the backend it wraps: instrumenting is not a different backend.
impl<B: std::fmt::Debug> std::fmt::Debug for Instrumented<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

delegate_backend!(Instrumented);
