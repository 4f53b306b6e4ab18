//! Test helpers of the lease module: backends made of a layer over memory.

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::backend::memory::MemoryBackend;
use crate::backend::{BlobBackend as _, BlobConditions, Layer, Layered, Op, Request};
use crate::error::{Error, Result};

/// A backend that refuses everything; for tests that must send nothing.
pub(crate) fn no_backend() -> Layered<Refuse, MemoryBackend> {
    Layered {
        layer: Refuse,
        inner: MemoryBackend::new(),
    }
}

/// Refuses every request.
#[derive(Debug)]
pub(crate) struct Refuse;

impl Layer for Refuse {
    async fn call<T: Send>(
        &self,
        _: &Request<'_>,
        _: impl Future<Output = Result<T>> + Send,
    ) -> Result<T> {
        Err(Error::Backend {
            status: Some(500),
            code: None,
            message: "no backend".into(),
            source: None,
        })
    }
}

/// A memory backend on which every blob write is undone right after it
/// succeeds, the first `times` times: somebody deleting a lease blob
/// between its creation and the acquire that follows (a lock blob being
/// pruned). The lease tests that use it write blobs only to create them.
pub(crate) fn vanishing(times: u32) -> Layered<Vanish, MemoryBackend> {
    let memory = MemoryBackend::new();
    Layered {
        layer: Vanish {
            memory: memory.clone(),
            times: AtomicU32::new(times),
        },
        inner: memory,
    }
}

/// Deletes each blob written, the first `times` times.
#[derive(Debug)]
pub(crate) struct Vanish {
    memory: MemoryBackend,
    times: AtomicU32,
}

impl Layer for Vanish {
    async fn call<T: Send>(
        &self,
        request: &Request<'_>,
        next: impl Future<Output = Result<T>> + Send,
    ) -> Result<T> {
        let answer = next.await?;
        let vanish = request.op() == Op::PutBlob
            && (self.times)
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
        if let (true, Some(c), Some(b)) = (vanish, request.container(), request.blob()) {
            self.memory
                .delete_blob(c, b, &BlobConditions::none())
                .await?;
        }
        Ok(answer)
    }
}
