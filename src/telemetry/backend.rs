//! [`Metered`]: the layer that records each backend call as one request;
//! and the task-local count that ties requests to their logical operation.

use std::cell::Cell;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use opentelemetry::KeyValue;

use crate::backend::{Layer, Request, notes};
use crate::error::{Error, Result};

use super::instruments::{Instruments, Outcome};
use super::kind_name;

tokio::task_local! {
    /// The requests of the logical operation running in this task.
    static OPERATION: Cell<u64>;
}

pub(super) fn in_operation() -> bool {
    OPERATION.try_with(|_| ()).is_ok()
}

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
fn error_type(error: &Error) -> String {
    match error {
        Error::Batch { source, .. } => error_type(source),
        other => kind_name(other.kind()),
    }
}

/// The layer that records every request it sees.
#[derive(Debug)]
pub(super) struct Metered {
    pub(super) instruments: Arc<Instruments>,
    /// `db.system.name`: the memory backend's, or Azure Storage's.
    pub(super) system: &'static str,
}

impl Layer for Metered {
    async fn call<T: Send>(
        &self,
        request: &Request<'_>,
        fut: impl Future<Output = Result<T>> + Send,
    ) -> Result<T> {
        let op = request.op();
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
        i.request(self.system, name, outcome.as_ref(), elapsed);
        // `leasehold.retry.reason`: after a transport failure or a busy answer.
        for (reason, n) in [
            ("transport", noted.transport_retries),
            ("throttled", noted.throttle_retries),
        ] {
            if n > 0 {
                i.retries(reason, name, n);
            }
        }
        if noted.throttled > 0 {
            let op = KeyValue::new("db.operation.name", name);
            i.throttled.add(noted.throttled, &[op]);
        }
        result
    }
}
