//! Acquiring a lease, the guard that holds it, and writes under it.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::{Mutex as AsyncMutex, MutexGuard, OwnedMutexGuard};
use tokio::time::{Instant, sleep, sleep_until, timeout_at};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use tracing::{Instrument, debug, info_span, warn};

use crate::backend::{BlobConditions, LeaseId, Metadata};
use crate::error::{Error, Result};
use crate::key::{BlobName, ETag};

use super::document::{
    LeaseBlob, LeaseDocument, META_ACQUIRED, META_EPOCH, META_OWNER, epoch_of, meta_set,
};
use super::local::{Ending, LocalSlot, SlotState};
use super::name::LeaseName;
use super::outage::{Outage, storage_failed};
use super::renew::{Failure, LeaseShared, Renewer, classify, retry_transient};
use super::{LeaseEnv, ManagerInner, short_id};

/// How a guard came to hold its lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Acquisition {
    /// The blob lease was acquired for this guard.
    Fresh,
    /// Another task of this process held the blob lease and handed it over
    /// without releasing it: renewal ran throughout, and nobody else can have
    /// written the lease blob in between, so what the previous guard knew of
    /// it (its document, metadata and epoch) is still current.
    HandedOver,
}

/// How long an acquire may wait.
#[derive(Debug, Clone, Copy)]
pub(crate) enum AcquireMode {
    /// Neither locally nor for other processes.
    Try,
    /// Behind local tasks without limit, then one attempt at the blob.
    LocalThenTry,
    /// Both, until `deadline`.
    Until { deadline: Instant },
}

/// How one attempt at a blob lease ended.
enum Attempt {
    /// Taken; the acquire was sent at this instant.
    Acquired(Instant),
    /// Somebody else holds it.
    Held,
    /// No answer before the attempt's deadline; it goes on in the
    /// background and gives back whatever it takes.
    NoReply,
    /// The request failed.
    Failed(Error),
}

/// First pause before retrying an acquire that storage failed.
const FAILURE_RETRY_MIN: Duration = Duration::from_millis(100);
/// Longest pause between acquires that storage failed.
const FAILURE_RETRY_MAX: Duration = Duration::from_secs(2);

/// The process's hold on one blob lease, shared by the guards it is handed
/// through. Dropping the last reference without a release releases in the
/// background.
#[derive(Debug)]
pub(crate) struct LeaseCore {
    pub(crate) shared: Arc<LeaseShared>,
    env: Arc<LeaseEnv>,
    blob: BlobName,
    /// The lease blob as last read or written under this lease; `None` when
    /// unknown (never read, or a write's outcome is uncertain).
    view: AsyncMutex<Option<View>>,
    /// Set once released or abandoned.
    finished: AtomicBool,
}

#[derive(Debug, Clone)]
struct View {
    document: LeaseDocument,
    metadata: Metadata,
    etag: ETag,
    lease: crate::backend::LeaseInfo,
}

impl View {
    fn snapshot(&self) -> LeaseBlob {
        LeaseBlob {
            document: self.document.clone(),
            metadata: self.metadata.clone(),
            etag: self.etag.clone(),
            lease: self.lease,
        }
    }
}

impl LeaseCore {
    /// Starts holding a lease acquired at `sent`: spawns its renewal.
    fn start(
        env: Arc<LeaseEnv>,
        name: LeaseName,
        blob: BlobName,
        id: LeaseId,
        sent: Instant,
        runtime: &Handle,
    ) -> Arc<LeaseCore> {
        let settings = &env.settings;
        let shared = Arc::new(LeaseShared::new(
            name,
            id,
            settings.lease_len,
            settings.drift,
            sent,
        ));
        if settings.lease_len.is_some() {
            runtime.spawn(
                Renewer {
                    shared: shared.clone(),
                    backend: env.backend.clone(),
                    container: settings.container.clone(),
                    blob: blob.clone(),
                    interval: settings.renew_interval,
                }
                .run(),
            );
        }
        Arc::new(LeaseCore {
            shared,
            env,
            blob,
            view: AsyncMutex::new(None),
            finished: AtomicBool::new(false),
        })
    }

    fn conditions(&self) -> BlobConditions {
        BlobConditions::leased(self.shared.id)
    }

    /// Reads the blob into the view.
    async fn load(&self, view: &mut Option<View>) -> Result<()> {
        let env = &self.env;
        let read = env
            .backend
            .get_blob(&env.settings.container, &self.blob)
            .await
            .and_then(|b| {
                b.ok_or_else(|| Error::NotFound {
                    what: format!("lease blob of {}", self.shared.name),
                    code: Some("BlobNotFound".into()),
                    table: None,
                    row: None,
                })
            });
        let blob = match read {
            Ok(b) => b,
            Err(e) => {
                self.shared.note_error(&e);
                return Err(e);
            }
        };
        let blob = LeaseBlob::from_blob(&self.shared.name, blob)?;
        *view = Some(View {
            document: blob.document,
            metadata: blob.metadata,
            etag: blob.etag,
            lease: blob.lease,
        });
        Ok(())
    }

    /// The view, read first when unknown.
    async fn view(&self) -> Result<MutexGuard<'_, Option<View>>> {
        let mut view = self.view.lock().await;
        if view.is_none() {
            self.load(&mut view).await?;
        }
        Ok(view)
    }

    async fn read_fresh(&self) -> Result<LeaseBlob> {
        let mut view = self.view.lock().await;
        *view = None;
        self.load(&mut view).await?;
        view.as_ref()
            .map(View::snapshot)
            .ok_or_else(|| self.shared.lost_error())
    }

    async fn snapshot(&self) -> Result<LeaseBlob> {
        let view = self.view().await?;
        view.as_ref()
            .map(View::snapshot)
            .ok_or_else(|| self.shared.lost_error())
    }

    /// Replaces the blob's metadata under the lease with `f` applied to the
    /// current metadata. Returns the new metadata.
    async fn update_metadata(&self, f: impl FnOnce(&mut Metadata)) -> Result<Metadata> {
        // A lease known to be lost sends nothing, not even the read.
        self.ensure_held()?;
        let mut guard = self.view().await?;
        let Some(view) = guard.as_mut() else {
            return Err(self.shared.lost_error());
        };
        let mut metadata = view.metadata.clone();
        f(&mut metadata);
        self.ensure_held()?;
        let env = &self.env;
        let conditions = self.conditions();
        // Retrying is safe: the write replaces the whole metadata and only
        // this lease's holder can write meanwhile.
        let result = retry_transient(&self.shared, || {
            env.backend.set_blob_metadata(
                &env.settings.container,
                &self.blob,
                &metadata,
                &conditions,
            )
        })
        .await;
        match result {
            Ok(etag) => {
                view.metadata = metadata.clone();
                view.etag = etag;
                Ok(metadata)
            }
            Err(e) => {
                self.shared.note_error(&e);
                *guard = None;
                Err(e)
            }
        }
    }

    /// Rewrites the body under the lease with `f` applied to the current
    /// document (metadata kept). Returns `f`'s result.
    async fn update_document<T>(&self, f: impl FnOnce(&mut LeaseDocument) -> T) -> Result<T> {
        // A lease known to be lost sends nothing, not even the read.
        self.ensure_held()?;
        let mut guard = self.view().await?;
        let Some(view) = guard.as_mut() else {
            return Err(self.shared.lost_error());
        };
        let mut document = view.document.clone();
        let out = f(&mut document);
        let body = document.to_bytes()?;
        self.ensure_held()?;
        let env = &self.env;
        let conditions = self.conditions();
        // Retrying is safe: the write replaces the whole blob and only this
        // lease's holder can write meanwhile.
        let result = retry_transient(&self.shared, || {
            env.backend.put_blob(
                &env.settings.container,
                &self.blob,
                body.clone(),
                &view.metadata,
                &conditions,
            )
        })
        .await;
        match result {
            Ok(etag) => {
                view.document = document;
                view.etag = etag;
                Ok(out)
            }
            Err(e) => {
                self.shared.note_error(&e);
                *guard = None;
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

    /// Records who holds the lease.
    async fn write_owner(&self) -> Result<()> {
        let owner = self.env.settings.owner.clone();
        let at = crate::entity::datetime::format(self.env.now_wall());
        self.update_metadata(|m| {
            meta_set(m, META_OWNER, owner);
            meta_set(m, META_ACQUIRED, at);
        })
        .await
        .map(drop)
    }

    /// Releases the blob lease (once). A lost lease is not released: its
    /// loss is returned instead.
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
        let env = &self.env;
        async {
            let mut retried = false;
            let mut delay = Duration::from_millis(100);
            for attempt in 0..3 {
                match env
                    .backend
                    .release_lease(&env.settings.container, &self.blob, self.shared.id)
                    .await
                {
                    Ok(()) => {
                        debug!("released");
                        return Ok(());
                    }
                    // An earlier attempt whose reply was lost did release it.
                    Err(e) if retried && classify(&e) == Failure::Lost => return Ok(()),
                    Err(e) if classify(&e) != Failure::Lost && attempt < 2 => {
                        debug!(error = %e, "release failed; retrying");
                        retried = true;
                        sleep(delay).await;
                        delay *= 2;
                    }
                    Err(e) => {
                        warn!(error = %e, "release failed; the lease will expire on its own");
                        return Err(e);
                    }
                }
            }
            Ok(())
        }
        .instrument(span)
        .await
    }

    /// Stops holding without a request (no runtime to send one on).
    fn abandon(&self) {
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
        if let Ok(runtime) = Handle::try_current() {
            let backend = self.env.backend.clone();
            let container = self.env.settings.container.clone();
            let blob = self.blob.clone();
            let id = self.shared.id;
            runtime.spawn(async move {
                let _ = backend.release_lease(&container, &blob, id).await;
            });
        }
    }
}

/// A held lease. Renewed in the background while it lives; ended by
/// [`LeaseGuard::release`], or by dropping it (a best-effort release in the
/// background; without a Tokio runtime the lease simply expires).
///
/// Every write this guard makes to the lease blob carries the lease id, so
/// the service refuses it once the lease is gone; the guard also refuses to
/// send one when it already knows the lease is lost.
///
/// `Debug` shows the name, acquisition and validity, never the lease id.
#[must_use = "dropping a LeaseGuard releases the lease at once; hold it while you need the lease, then call `release().await`"]
pub struct LeaseGuard {
    core: Arc<LeaseCore>,
    slot: Arc<LocalSlot>,
    /// The local lock; `None` once the guard has ended.
    state: Option<OwnedMutexGuard<SlotState>>,
    /// Cancelled when the lease is lost or this guard ends.
    token: CancellationToken,
    acquisition: Acquisition,
}

impl LeaseGuard {
    fn new(
        core: Arc<LeaseCore>,
        slot: Arc<LocalSlot>,
        state: OwnedMutexGuard<SlotState>,
        acquisition: Acquisition,
    ) -> Self {
        let token = core.shared.lost.child_token();
        LeaseGuard {
            core,
            slot,
            state: Some(state),
            token,
            acquisition,
        }
    }

    /// The lease's name.
    pub fn name(&self) -> &LeaseName {
        &self.core.shared.name
    }

    /// The lease id, for writes made directly to the lease blob
    /// (`BlobConditions::leased(guard.lease_id())`).
    pub fn lease_id(&self) -> LeaseId {
        self.core.shared.id
    }

    /// Whether the blob lease was acquired for this guard or handed over by
    /// another task of this process.
    pub fn acquisition(&self) -> Acquisition {
        self.acquisition
    }

    /// Shorthand for `acquisition() == Acquisition::HandedOver`.
    pub fn is_handed_over(&self) -> bool {
        self.acquisition == Acquisition::HandedOver
    }

    /// A cheap, cloneable view of this guard's validity, to give to tasks
    /// doing the guarded work.
    pub fn status(&self) -> LeaseStatus {
        LeaseStatus {
            shared: self.core.shared.clone(),
            token: self.token.clone(),
        }
    }

    /// How long the lease is surely still held: counted from the send time
    /// of the last successful acquire or renew, minus the drift margin. Zero
    /// once lost; [`Duration::MAX`] for an infinite lease.
    pub fn remaining(&self) -> Duration {
        self.status().remaining()
    }

    /// Whether the lease is lost (the service refused it, or its local
    /// deadline passed without a successful renewal).
    pub fn is_lost(&self) -> bool {
        self.core.shared.is_lost()
    }

    /// Checks that at least `min` of validity remains.
    ///
    /// # Errors
    /// [`Error::LeaseLost`] when the lease is lost or less than `min`
    /// remains.
    pub fn ensure_valid(&self, min: Duration) -> Result<()> {
        self.status().ensure_valid(min)
    }

    /// A future that completes when the lease is lost (or this guard ends).
    /// Owned, so it can be moved into a `select!` or another task.
    pub fn lost(&self) -> WaitForCancellationFutureOwned {
        self.token.clone().cancelled_owned()
    }

    /// A token cancelled when the lease is lost or this guard ends. Cancelling
    /// it yourself affects only your copy's children.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.token.child_token()
    }

    /// Reads the lease blob now (body and metadata), and remembers it for
    /// later writes. This is the "lock-blob read" of a fresh acquire.
    ///
    /// # Errors
    /// The backend's error; [`Error::Invalid`] when the body is not a lease
    /// document.
    pub async fn read(&self) -> Result<LeaseBlob> {
        self.core.read_fresh().await
    }

    /// The lease blob as this process last read or wrote it under this
    /// lease, read first if unknown. After a hand-over nothing is read.
    ///
    /// # Errors
    /// As [`LeaseGuard::read`], when a read is needed.
    pub async fn blob(&self) -> Result<LeaseBlob> {
        self.core.snapshot().await
    }

    /// The document in the lease blob, as [`LeaseGuard::blob`].
    ///
    /// # Errors
    /// As [`LeaseGuard::read`], when a read is needed.
    pub async fn document(&self) -> Result<LeaseDocument> {
        Ok(self.core.snapshot().await?.document)
    }

    /// Rewrites the document in the lease blob, under the lease id, with
    /// `f` applied to the current document; the metadata is kept. Returns
    /// what `f` returned.
    ///
    /// # Errors
    /// [`Error::LeaseLost`] when the lease is lost (nothing is sent when
    /// that was already known); the backend's error otherwise. After an
    /// error whose outcome is unknown, the next call reads the blob first.
    pub async fn update_document<T>(&self, f: impl FnOnce(&mut LeaseDocument) -> T) -> Result<T> {
        self.core.update_document(f).await
    }

    /// Writes (`Some`) or clears (`None`) the partition-lock journal in the
    /// lease blob, under the lease id.
    ///
    /// # Errors
    /// As [`LeaseGuard::update_document`].
    pub async fn set_journal(&self, journal: Option<serde_json::Value>) -> Result<()> {
        self.core.update_document(|d| d.journal = journal).await
    }

    /// The pending journal, as [`LeaseGuard::document`] sees it.
    ///
    /// # Errors
    /// As [`LeaseGuard::read`], when a read is needed.
    pub async fn journal(&self) -> Result<Option<serde_json::Value>> {
        Ok(self.document().await?.journal)
    }

    /// Replaces the blob's metadata under the lease id with `f` applied to
    /// the current metadata. Returns the metadata written. Keep leasehold's
    /// own entries (`leasehold_*`) unless you mean to change them.
    ///
    /// # Errors
    /// As [`LeaseGuard::update_document`].
    pub async fn update_metadata(&self, f: impl FnOnce(&mut Metadata)) -> Result<Metadata> {
        self.core.update_metadata(f).await
    }

    /// The fencing epoch stored with the lease (0 if never advanced).
    ///
    /// # Errors
    /// As [`LeaseGuard::read`], when a read is needed.
    pub async fn epoch(&self) -> Result<u64> {
        Ok(self.core.snapshot().await?.epoch())
    }

    /// Increments the fencing epoch with a metadata write under the lease and
    /// returns the new value. Every holder that advances it gets a number no
    /// earlier holder had.
    ///
    /// # Errors
    /// As [`LeaseGuard::update_document`].
    pub async fn advance_epoch(&self) -> Result<u64> {
        let mut next = 0;
        self.core
            .update_metadata(|m| {
                next = epoch_of(m).saturating_add(1);
                meta_set(m, META_EPOCH, next.to_string());
            })
            .await?;
        Ok(next)
    }

    /// Ends the guard: hands the blob lease to the next local task when one
    /// waits (within the fairness bound), otherwise releases it.
    ///
    /// # Errors
    /// [`Error::LeaseLost`] when the lease had been lost (the work done under
    /// it may not have been exclusive); the backend's error when the release
    /// request failed (the lease then expires on its own).
    pub async fn release(mut self) -> Result<()> {
        let lost = self.core.shared.is_lost();
        match self.end() {
            Some((state, core)) => {
                let result = core.release().await;
                drop(state);
                result
            }
            None if lost => Err(self.core.shared.lost_error()),
            None => Ok(()),
        }
    }

    /// Ends the guard's hold. Returns what must still be released, with the
    /// local lock to keep until then; `None` when the lease was handed over.
    fn end(&mut self) -> Option<(OwnedMutexGuard<SlotState>, Arc<LeaseCore>)> {
        self.token.cancel();
        let mut state = self.state.take()?;
        let settings = &self.core.env.settings;
        let lost = self.core.shared.is_lost();
        match self.slot.ending(
            &mut state,
            lost,
            settings.max_handovers,
            settings.max_hold,
            settings.poll_interval,
        ) {
            Ending::HandOver => {
                debug!(lease = %self.core.shared.name, "handing the lease over locally");
                None
            }
            Ending::Release => {
                let core = state.held.take().unwrap_or_else(|| self.core.clone());
                state.held_since = None;
                state.handovers = 0;
                Some((state, core))
            }
        }
    }
}

impl fmt::Debug for LeaseGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseGuard")
            .field("name", &self.core.shared.name)
            .field("acquisition", &self.acquisition)
            .field("remaining", &self.remaining())
            .field("lost", &self.core.shared.lost.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        let Some((state, core)) = self.end() else {
            return;
        };
        match Handle::try_current() {
            Ok(runtime) => {
                let slot = self.slot.clone();
                runtime.spawn(async move {
                    let _ = core.release().await;
                    drop(state);
                    drop(slot);
                });
            }
            Err(_) => {
                core.abandon();
                drop(state);
            }
        }
    }
}

/// A cloneable view of a guard's validity (see [`LeaseGuard::status`]).
#[derive(Debug, Clone)]
pub struct LeaseStatus {
    shared: Arc<LeaseShared>,
    token: CancellationToken,
}

impl LeaseStatus {
    /// The lease's name.
    pub fn name(&self) -> &LeaseName {
        &self.shared.name
    }

    /// As [`LeaseGuard::remaining`]; zero once the guard has ended.
    pub fn remaining(&self) -> Duration {
        if self.token.is_cancelled() {
            return Duration::ZERO;
        }
        self.shared.remaining()
    }

    /// As [`LeaseGuard::is_lost`].
    pub fn is_lost(&self) -> bool {
        self.shared.is_lost()
    }

    /// Whether the guard still holds the lease (not lost, not ended).
    pub fn is_held(&self) -> bool {
        !self.token.is_cancelled() && !self.shared.is_lost()
    }

    /// As [`LeaseGuard::ensure_valid`]; also fails once the guard has ended.
    ///
    /// # Errors
    /// [`Error::LeaseLost`] when the lease is lost, the guard has ended, or
    /// less than `min` remains.
    pub fn ensure_valid(&self, min: Duration) -> Result<()> {
        if self.shared.is_lost() {
            return Err(self.shared.lost_error());
        }
        if self.token.is_cancelled() {
            return Err(Error::LeaseLost {
                what: format!("lease {}: the guard has ended", self.shared.name),
                code: None,
            });
        }
        let remaining = self.shared.remaining();
        if remaining < min {
            return Err(Error::LeaseLost {
                what: format!(
                    "lease {}: {remaining:?} of validity left, {min:?} needed",
                    self.shared.name
                ),
                code: None,
            });
        }
        Ok(())
    }

    /// As [`LeaseGuard::lost`].
    pub fn lost(&self) -> WaitForCancellationFutureOwned {
        self.token.clone().cancelled_owned()
    }

    /// As [`LeaseGuard::cancellation_token`].
    pub fn cancellation_token(&self) -> CancellationToken {
        self.token.child_token()
    }
}

impl ManagerInner {
    /// Acquires `name` as `mode` allows: `Ok(None)` when it stayed held.
    /// Storage failures are retried until they have gone on for the
    /// manager's unavailable-after bound.
    pub(crate) async fn acquire(
        self: &Arc<Self>,
        name: LeaseName,
        mode: AcquireMode,
    ) -> Result<Option<LeaseGuard>> {
        let mut outage = Outage::new(&self.env);
        self.acquire_with(name, mode, &mut outage).await
    }

    /// [`Self::acquire`], counting storage failures in `outage`, which the
    /// caller may carry across several acquires.
    pub(crate) async fn acquire_with(
        self: &Arc<Self>,
        name: LeaseName,
        mode: AcquireMode,
        outage: &mut Outage,
    ) -> Result<Option<LeaseGuard>> {
        let blob = name.blob_name()?;
        let runtime = Handle::try_current().map_err(|_| {
            Error::invalid("runtime", "leases need a Tokio runtime with time enabled")
        })?;
        let span = info_span!("lease.acquire", lease = %name);
        async move {
            let slot = self.local.slot(&name);
            let mut state = match mode {
                AcquireMode::Try => match slot.try_lock() {
                    Some(state) => state,
                    None => return Ok(None),
                },
                AcquireMode::LocalThenTry => slot.lock().await,
                AcquireMode::Until { deadline } => match timeout_at(deadline, slot.lock()).await {
                    Ok(state) => state,
                    Err(_) => return Ok(None),
                },
            };
            if let Some(core) = state.held.clone() {
                if !core.shared.is_lost() && !core.finished.load(Ordering::SeqCst) {
                    state.handovers = state.handovers.saturating_add(1);
                    debug!("handed over locally");
                    return Ok(Some(LeaseGuard::new(
                        core,
                        slot.clone(),
                        state,
                        Acquisition::HandedOver,
                    )));
                }
                state.held = None;
            }
            if let (Some(until), AcquireMode::Until { deadline }) = (state.yield_until, mode) {
                state.yield_until = None;
                sleep_until(until.min(deadline)).await;
            } else if matches!(mode, AcquireMode::LocalThenTry) {
                state.yield_until = None;
            }
            let proposed = LeaseId::new_random();
            let Some(sent) = self
                .acquire_blob_loop(&name, &blob, proposed, mode, outage)
                .await?
            else {
                return Ok(None);
            };
            debug!(id = %short_id(proposed), "acquired");
            let core = LeaseCore::start(self.env.clone(), name, blob, proposed, sent, &runtime);
            state.held = Some(core.clone());
            state.handovers = 0;
            state.held_since = Some(Instant::now());
            let guard = LeaseGuard::new(core, slot.clone(), state, Acquisition::Fresh);
            if self.env.settings.owner_metadata {
                if let Err(e) = guard.core.write_owner().await {
                    if guard.core.shared.is_lost() {
                        return Err(e);
                    }
                    warn!(error = %e, "could not record the lease owner");
                }
            }
            Ok(Some(guard))
        }
        .instrument(span)
        .await
    }

    /// Attempts at the blob lease with one proposed id: polling while it is
    /// held (as `mode` allows), retrying while storage fails (until
    /// `outage` reaches its bound). `Ok(None)` when it stayed held.
    async fn acquire_blob_loop(
        self: &Arc<Self>,
        name: &LeaseName,
        blob: &BlobName,
        proposed: LeaseId,
        mode: AcquireMode,
        outage: &mut Outage,
    ) -> Result<Option<Instant>> {
        let deadline = match mode {
            AcquireMode::Until { deadline } => Some(deadline),
            AcquireMode::Try | AcquireMode::LocalThenTry => None,
        };
        let mut backoff = self.env.poll_backoff();
        let mut retry_delay = FAILURE_RETRY_MIN;
        // Whether an attempt may have taken the lease without our knowing.
        let mut ambiguous = false;
        loop {
            let started = Instant::now();
            let limit = outage.limit(started);
            let stop_at = deadline.map_or(limit, |d| d.min(limit));
            let error = match self.acquire_blob_until(name, blob, proposed, stop_at).await {
                Attempt::Acquired(sent) => {
                    outage.answered(&self.env);
                    return Ok(Some(sent));
                }
                Attempt::Held => {
                    outage.answered(&self.env);
                    retry_delay = FAILURE_RETRY_MIN;
                    let Some(deadline) = deadline else {
                        return Ok(None);
                    };
                    let now = Instant::now();
                    if now >= deadline {
                        return Ok(None);
                    }
                    sleep(backoff.pause().min(deadline - now)).await;
                    continue;
                }
                // The attempt was left to finish in the background (it gives
                // back whatever it takes), so no further attempt may use
                // this id: give up now.
                Attempt::NoReply => {
                    // Storage was failing already: report its last failure.
                    if let Some(e) = outage.give_up(&self.env) {
                        return Err(e);
                    }
                    let now = Instant::now();
                    if deadline.is_some_and(|d| now >= d) && now < limit {
                        return Ok(None);
                    }
                    let e = Error::Timeout {
                        what: format!("no reply to an acquire of lease {name}"),
                        after: now.saturating_duration_since(started),
                    };
                    return Err(match outage.failed(started, e, &self.env) {
                        Err(unavailable) => unavailable,
                        Ok(()) => outage.give_up(&self.env).unwrap_or_else(|| Error::Timeout {
                            what: format!("acquiring lease {name}"),
                            after: now.saturating_duration_since(started),
                        }),
                    });
                }
                Attempt::Failed(e) => e,
            };
            if !storage_failed(&error) {
                if ambiguous || matches!(error, Error::Backend { .. }) {
                    self.give_back(blob, proposed);
                }
                return Err(error);
            }
            ambiguous = true;
            if let Err(unavailable) = outage.failed(started, error, &self.env) {
                self.give_back(blob, proposed);
                return Err(unavailable);
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                self.give_back(blob, proposed);
                return Err(outage.give_up(&self.env).unwrap_or_else(|| Error::Timeout {
                    what: format!("acquiring lease {name}"),
                    after: Duration::ZERO,
                }));
            }
            // Retry with the same id (an acquire that was applied with its
            // reply lost is then simply repeated), at the latest when the
            // bound or the caller's deadline is reached.
            let until = outage.limit(started);
            let until = deadline.map_or(until, |d| d.min(until));
            sleep(retry_delay.min(until.saturating_duration_since(now))).await;
            retry_delay = (retry_delay * 2).min(FAILURE_RETRY_MAX);
        }
    }

    /// Gives back, in the background, a lease an attempt may have taken
    /// with its reply lost, rather than let it run out.
    fn give_back(&self, blob: &BlobName, proposed: LeaseId) {
        let backend = self.env.backend.clone();
        let container = self.env.settings.container.clone();
        let blob = blob.clone();
        tokio::spawn(
            async move {
                let _ = backend.release_lease(&container, &blob, proposed).await;
            }
            .in_current_span(),
        );
    }

    /// [`Self::acquire_blob`], giving up at `deadline` even when the service
    /// has not answered by then ([`Attempt::NoReply`]). The attempt is not
    /// cancelled, since its request may already be on its way: it finishes
    /// in the background, and a lease it takes after all is released at
    /// once, so a late success leaves nothing held (an infinite lease would
    /// otherwise stay held until broken).
    async fn acquire_blob_until(
        self: &Arc<Self>,
        name: &LeaseName,
        blob: &BlobName,
        proposed: LeaseId,
        deadline: Instant,
    ) -> Attempt {
        let inner = Arc::clone(self);
        let (owned_name, owned_blob) = (name.clone(), blob.clone());
        let mut attempt =
            Box::pin(async move { inner.acquire_blob(&owned_name, &owned_blob, proposed).await });
        match timeout_at(deadline, attempt.as_mut()).await {
            Ok(Ok(Some(sent))) => Attempt::Acquired(sent),
            Ok(Ok(None)) => Attempt::Held,
            Ok(Err(e)) => Attempt::Failed(e),
            Err(_) => {
                debug!(id = %short_id(proposed), "deadline passed during an acquire; giving back whatever it takes");
                let backend = self.env.backend.clone();
                let container = self.env.settings.container.clone();
                let blob = blob.clone();
                tokio::spawn(
                    async move {
                        if let Ok(Some(_)) = attempt.await {
                            let _ = backend.release_lease(&container, &blob, proposed).await;
                        }
                    }
                    .in_current_span(),
                );
                Attempt::NoReply
            }
        }
    }

    /// One acquire of the blob lease, creating the blob (and the container)
    /// on first use. `Ok(None)` when somebody else holds it. Failures are
    /// the caller's to retry.
    async fn acquire_blob(
        &self,
        name: &LeaseName,
        blob: &BlobName,
        proposed: LeaseId,
    ) -> Result<Option<Instant>> {
        let env = &self.env;
        let container = &env.settings.container;
        let mut created = false;
        loop {
            let sent = Instant::now();
            match env
                .backend
                .acquire_lease(container, blob, env.settings.duration, proposed)
                .await
            {
                Ok(_) => return Ok(Some(sent)),
                Err(Error::LeaseHeld { .. }) => return Ok(None),
                Err(Error::NotFound { .. }) if !created => {
                    self.create_blob(name, blob).await?;
                    created = true;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Creates an empty lease blob (create-only, so an existing one is kept).
    async fn create_blob(&self, name: &LeaseName, blob: &BlobName) -> Result<()> {
        let env = &self.env;
        self.ensure_container(false).await?;
        for again in [false, true] {
            if again {
                self.ensure_container(true).await?;
            }
            match env
                .backend
                .put_blob(
                    &env.settings.container,
                    blob,
                    Vec::new(),
                    &Metadata::new(),
                    &BlobConditions::create_only(),
                )
                .await
            {
                Ok(_) | Err(Error::AlreadyExists { .. }) => {
                    debug!(lease = %name, "created the lease blob");
                    return Ok(());
                }
                // Someone else just created and leased it.
                Err(Error::LeaseHeld { .. }) => return Ok(()),
                Err(Error::NotFound { .. }) if !again => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Duration;

    use async_trait::async_trait;

    use crate::backend::{
        Blob, BlobBackend, BlobConditions, BlobListPage, BlobProperties, LeaseDuration, LeaseId,
        Metadata,
    };
    use crate::error::{Error, Result};
    use crate::key::{BlobName, ContainerName, ETag};

    /// A backend that refuses everything; for tests that must send nothing.
    #[derive(Debug)]
    pub(crate) struct NoBackend;

    fn refuse<T>() -> Result<T> {
        Err(Error::Backend {
            status: Some(500),
            code: None,
            message: "no backend".into(),
            source: None,
        })
    }

    #[async_trait]
    impl BlobBackend for NoBackend {
        async fn create_container(&self, _: &ContainerName) -> Result<()> {
            refuse()
        }
        async fn put_blob(
            &self,
            _: &ContainerName,
            _: &BlobName,
            _: Vec<u8>,
            _: &Metadata,
            _: &BlobConditions,
        ) -> Result<ETag> {
            refuse()
        }
        async fn get_blob(&self, _: &ContainerName, _: &BlobName) -> Result<Option<Blob>> {
            refuse()
        }
        async fn blob_properties(
            &self,
            _: &ContainerName,
            _: &BlobName,
        ) -> Result<Option<BlobProperties>> {
            refuse()
        }
        async fn set_blob_metadata(
            &self,
            _: &ContainerName,
            _: &BlobName,
            _: &Metadata,
            _: &BlobConditions,
        ) -> Result<ETag> {
            refuse()
        }
        async fn delete_blob(
            &self,
            _: &ContainerName,
            _: &BlobName,
            _: &BlobConditions,
        ) -> Result<()> {
            refuse()
        }
        async fn list_blobs(
            &self,
            _: &ContainerName,
            _: &str,
            _: Option<&str>,
        ) -> Result<BlobListPage> {
            refuse()
        }
        async fn acquire_lease(
            &self,
            _: &ContainerName,
            _: &BlobName,
            _: LeaseDuration,
            _: LeaseId,
        ) -> Result<LeaseId> {
            refuse()
        }
        async fn renew_lease(&self, _: &ContainerName, _: &BlobName, _: LeaseId) -> Result<()> {
            refuse()
        }
        async fn change_lease(
            &self,
            _: &ContainerName,
            _: &BlobName,
            _: LeaseId,
            _: LeaseId,
        ) -> Result<LeaseId> {
            refuse()
        }
        async fn release_lease(&self, _: &ContainerName, _: &BlobName, _: LeaseId) -> Result<()> {
            refuse()
        }
        async fn break_lease(
            &self,
            _: &ContainerName,
            _: &BlobName,
            _: Option<Duration>,
        ) -> Result<Duration> {
            refuse()
        }
    }
}
