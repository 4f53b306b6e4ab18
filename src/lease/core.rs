//! [`LeaseCore`]: the process's hold on one blob lease.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::{Mutex as AsyncMutex, MutexGuard};
use tokio::time::Instant;
use tracing::{Instrument, debug, info_span, warn};

use crate::backend::{BlobConditions, LeaseCalls as _, LeaseId, LeaseInfo, LeaseState, Metadata};
use crate::error::{Error, Result};
use crate::key::{BlobName, ETag};

use super::document::{LeaseBlob, LeaseDocument, META_ACQUIRED, META_OWNER, meta_set};
use super::env::LeaseEnv;
use super::name::LeaseName;
use super::queue::{Entry, WaitQueue};
use super::renew::{Failure, LeaseShared, classify, retry_transient};

/// The first pause before retrying a failed release (then twice that).
const RELEASE_RETRY: Duration = Duration::from_millis(100);

/// The process's hold on one blob lease (its renewal, its view of the
/// blob, the writes under it, its release), shared by the guards it is
/// handed through. Dropped without a release, it releases in the background.
#[derive(Debug)]
pub(crate) struct LeaseCore {
    pub(crate) shared: Arc<LeaseShared>,
    /// The lease blob as last read or written; `None` when unknown.
    view: AsyncMutex<Option<LeaseBlob>>,
    pub(crate) finished: AtomicBool,
    /// The id this process was registered under in the wait queue before
    /// it took the lease (its registration may linger).
    registered_as: Option<LeaseId>,
}

/// A blob lease just taken: its id, when its acquire was sent, and the
/// blob's ETag in the reply.
#[derive(Debug, Clone)]
pub(crate) struct Taken {
    pub(crate) id: LeaseId,
    pub(crate) sent: Instant,
    pub(crate) etag: Option<ETag>,
}

impl LeaseCore {
    /// Starts holding a lease just `taken`: spawns its renewal, and takes
    /// the blob as last seen when the ETag matches.
    pub(crate) fn start(
        env: Arc<LeaseEnv>,
        name: LeaseName,
        blob: BlobName,
        taken: Taken,
        runtime: &Handle,
        registered_as: Option<LeaseId>,
    ) -> Arc<LeaseCore> {
        let settings = &env.settings;
        let view = taken
            .etag
            .as_ref()
            .and_then(|etag| env.seen.at(&blob, etag))
            .map(|(document, metadata)| {
                debug!(lease = %name, "the lease blob is as last seen here; not reading it");
                LeaseBlob {
                    document,
                    metadata,
                    lease: LeaseInfo {
                        state: LeaseState::Leased,
                        kind: Some(settings.duration.kind()),
                    },
                }
            });
        let timed = settings.options.duration.is_some();
        let shared = Arc::new(LeaseShared::new(name, taken.id, env, blob, taken.sent));
        if timed {
            runtime.spawn(shared.clone().renewal());
        }
        Arc::new(LeaseCore {
            shared,
            view: AsyncMutex::new(view),
            finished: AtomicBool::new(false),
            registered_as,
        })
    }

    /// The view, read first when unknown.
    async fn view(&self) -> Result<MutexGuard<'_, Option<LeaseBlob>>> {
        let mut view = self.view.lock().await;
        if view.is_none() {
            let env = &self.shared.env;
            let read = (env
                .backend
                .get_blob(&env.settings.container, &self.shared.blob)
                .await)
                .and_then(|b| {
                    b.ok_or_else(|| Error::NotFound {
                        what: format!("lease blob of {}", self.shared.name),
                        code: Some("BlobNotFound".into()),
                        table: None,
                        row: None,
                    })
                });
            let blob = read.inspect_err(|e| self.shared.note_error(e))?;
            let etag = blob.properties.etag.clone();
            let blob = LeaseBlob::from_blob(&self.shared.name, blob)?;
            (env.seen).remember(&self.shared.blob, etag, &blob.document, &blob.metadata);
            *view = Some(blob);
        }
        Ok(view)
    }

    pub(crate) async fn snapshot(&self) -> Result<LeaseBlob> {
        let view = self.view().await?;
        view.clone().ok_or_else(|| self.shared.lost_error())
    }

    /// Replaces the blob's metadata under the lease with `f` applied.
    pub(crate) async fn update_metadata(&self, f: impl FnOnce(&mut Metadata)) -> Result<Metadata> {
        self.rewrite(false, |_, metadata| {
            f(metadata);
            metadata.clone()
        })
        .await
    }

    /// Rewrites the body under the lease with `f` applied to the document.
    pub(crate) async fn update_document<T>(
        &self,
        f: impl FnOnce(&mut LeaseDocument) -> T,
    ) -> Result<T> {
        self.rewrite(true, |document, _| f(document)).await
    }

    /// Writes the view with `f` applied under the lease: the whole blob
    /// when `body`, otherwise its metadata. Retrying is safe (a whole
    /// replacement, by the only writer); after a failure the view is unknown.
    async fn rewrite<T>(
        &self,
        body: bool,
        f: impl FnOnce(&mut LeaseDocument, &mut Metadata) -> T,
    ) -> Result<T> {
        // A lease known to be lost sends nothing, not even the read.
        self.ensure_held()?;
        let mut guard = self.view().await?;
        let Some(view) = guard.as_mut() else {
            return Err(self.shared.lost_error());
        };
        let (mut document, mut metadata) = (view.document.clone(), view.metadata.clone());
        let out = f(&mut document, &mut metadata);
        let bytes = body.then(|| document.to_bytes()).transpose()?;
        self.ensure_held()?;
        let env = &self.shared.env;
        let conditions = BlobConditions::leased(self.shared.id);
        let container = &env.settings.container;
        let result = retry_transient(&self.shared, || match &bytes {
            Some(bytes) => env.backend.put_blob(
                container,
                &self.shared.blob,
                bytes.clone(),
                &metadata,
                &conditions,
            ),
            None => {
                env.backend
                    .set_blob_metadata(container, &self.shared.blob, &metadata, &conditions)
            }
        })
        .await;
        match result {
            Ok(etag) => {
                (view.document, view.metadata) = (document, metadata);
                env.seen
                    .remember(&self.shared.blob, etag, &view.document, &view.metadata);
                Ok(out)
            }
            Err(e) => {
                self.shared.note_error(&e);
                *guard = None;
                env.seen.forget(&self.shared.blob);
                Err(e)
            }
        }
    }

    fn ensure_held(&self) -> Result<()> {
        if self.shared.is_lost() || self.finished.load(Ordering::SeqCst) {
            return Err(self.shared.lost_error());
        }
        Ok(())
    }

    pub(crate) async fn write_owner(&self) -> Result<()> {
        let owner = self.shared.env.settings.owner.clone();
        let at = crate::entity::datetime::format(self.shared.env.now_wall());
        self.update_metadata(|m| {
            meta_set(m, META_OWNER, owner);
            meta_set(m, META_ACQUIRED, at);
        })
        .await
        .map(drop)
    }

    /// Releases the blob lease (once); a lost lease returns its loss.
    pub(crate) async fn release(&self) -> Result<()> {
        if self.finished.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let was_lost = self.shared.is_lost();
        self.shared.stop.cancel();
        if was_lost {
            return Err(self.shared.lost_error());
        }
        let span = info_span!("lease.release", lease = %self.shared.name);
        let env = &self.shared.env;
        async {
            // Up to three attempts, 100 ms then 200 ms apart.
            let mut pause = RELEASE_RETRY;
            let mut attempt = 0;
            loop {
                attempt += 1;
                let released = (env.backend)
                    .release_lease(&env.settings.container, &self.shared.blob, self.shared.id)
                    .await;
                let Err(e) = released else {
                    debug!("released");
                    return Ok(());
                };
                let lost = classify(&e) == Failure::Lost;
                if lost && attempt > 1 {
                    // An earlier attempt whose reply was lost did release it.
                    return Ok(());
                }
                if lost || attempt == 3 {
                    warn!(error = %e, "release failed; the lease will expire on its own");
                    return Err(e);
                }
                debug!(error = %e, "release failed; retrying");
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
        }
        .instrument(span)
        .await
    }

    /// The lease's wait queue, and the ids of this process's own
    /// registrations in it (which may linger), for a holder.
    pub(crate) fn queue(&self) -> Result<(WaitQueue<'_>, [Option<LeaseId>; 2])> {
        self.ensure_held()?;
        let queue = WaitQueue::of(&self.shared.env, &self.shared.blob)?;
        Ok((queue, [Some(self.shared.id), self.registered_as]))
    }

    /// At a tenure's end: the first fresh registration of another process
    /// in the wait queue, with how long the read took (about a round trip).
    pub(crate) async fn queue_head(&self) -> Option<(Entry, Duration)> {
        let (queue, own) = self.queue().ok()?;
        let sent = Instant::now();
        match queue.head_excluding(&own).await {
            Ok((head, _)) => head.map(|head| (head, sent.elapsed())),
            Err(e) => {
                debug!(error = %e, "could not read the wait queue");
                None
            }
        }
    }

    /// Deletes the lease blob under the lease id. On success the hold ends
    /// without a release and is never handed to another local task; after
    /// an error it goes on.
    pub(crate) async fn delete_blob(&self) -> Result<()> {
        self.ensure_held()?;
        let mut view = self.view.lock().await;
        let env = &self.shared.env;
        let conditions = BlobConditions::leased(self.shared.id);
        let attempts = AtomicU32::new(0);
        // Retrying is safe: only this lease's holder can delete the blob.
        let result = retry_transient(&self.shared, || {
            attempts.fetch_add(1, Ordering::Relaxed);
            env.backend
                .delete_blob(&env.settings.container, &self.shared.blob, &conditions)
        })
        .await;
        env.seen.forget(&self.shared.blob);
        *view = None;
        match result {
            Ok(()) => {}
            // An earlier attempt whose reply was lost did delete it.
            Err(Error::NotFound { .. }) if attempts.load(Ordering::Relaxed) > 1 => {}
            Err(e) => {
                self.shared.note_error(&e);
                return Err(e);
            }
        }
        self.abandon();
        debug!(lease = %self.shared.name, "deleted the lease blob under the lease");
        Ok(())
    }

    /// Passes the lease to the waiter registered as `to` (changes the lease
    /// to that id); `true` when passed.
    pub(crate) async fn pass_to(&self, to: LeaseId) -> bool {
        if self.ensure_held().is_err() {
            return false;
        }
        let env = &self.shared.env;
        match env
            .backend
            .change_lease(
                &env.settings.container,
                &self.shared.blob,
                self.shared.id,
                to,
            )
            .await
        {
            Ok(_) => {
                self.abandon();
                debug!(lease = %self.shared.name, "passed the lease to the next process in the queue");
                true
            }
            Err(e) => {
                debug!(error = %e, "could not pass the lease on");
                false
            }
        }
    }

    /// Stops holding without a request.
    pub(crate) fn abandon(&self) {
        self.finished.store(true, Ordering::SeqCst);
        self.shared.stop.cancel();
    }
}

impl Drop for LeaseCore {
    fn drop(&mut self) {
        if self.finished.swap(true, Ordering::SeqCst) {
            return;
        }
        let was_lost = self.shared.lost.is_cancelled();
        self.shared.stop.cancel();
        if was_lost {
            return;
        }
        self.shared.env.give_back(&self.shared.blob, self.shared.id);
    }
}
