//! [`LeaseGuard`]: a held lease as user code sees it, built on
//! [`LeaseStatus`], a cloneable view of its validity.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::OwnedMutexGuard;
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use tracing::debug;

use super::fence::Fence;
use crate::backend::{LeaseId, Metadata};
use crate::error::{Error, Result};

use super::core::LeaseCore;
use super::document::{META_EPOCH, epoch_of, meta_set};
use super::local::{Ending, LocalSlot, Pending, SlotState};
use super::name::LeaseName;
use super::renew::LeaseShared;

/// A held lease (see the [module docs](super)); it dereferences to its
/// [`LeaseStatus`]. `Debug` never shows the lease id.
#[must_use = "dropping a LeaseGuard releases the lease at once; hold it while you need the lease, then call `release().await`"]
pub struct LeaseGuard {
    pub(crate) core: Arc<LeaseCore>,
    slot: Arc<LocalSlot>,
    /// `None` once the guard has ended.
    state: Option<OwnedMutexGuard<SlotState>>,
    /// Its token is cancelled when the lease is lost or this guard ends.
    status: LeaseStatus,
    handed_over: bool,
}

impl LeaseGuard {
    pub(crate) fn new(
        core: Arc<LeaseCore>,
        slot: Arc<LocalSlot>,
        state: OwnedMutexGuard<SlotState>,
        handed_over: bool,
    ) -> Self {
        let status = LeaseStatus {
            shared: core.shared.clone(),
            token: core.shared.lost.child_token(),
        };
        LeaseGuard {
            core,
            slot,
            state: Some(state),
            status,
            handed_over,
        }
    }

    /// The lease id, for writes of your own to the lease blob
    /// (`BlobConditions::leased(id)`); the guard does not see them.
    pub fn lease_id(&self) -> LeaseId {
        self.core.shared.id
    }

    /// Whether another task of this process handed the lease over
    /// (`false`: it was acquired for this guard).
    pub fn is_handed_over(&self) -> bool {
        self.handed_over
    }

    /// A cloneable view of this guard's validity.
    pub fn status(&self) -> LeaseStatus {
        self.status.clone()
    }

    /// The lease blob's metadata (see the
    /// [module docs](super#reading-the-lease-blob)).
    ///
    /// # Errors
    /// [`Error::LeaseLost`] when the lease is lost and the blob unknown;
    /// [`Error::Invalid`] for a body that is not a lease document.
    pub async fn metadata(&self) -> Result<Metadata> {
        Ok(self.core.snapshot().await?.metadata)
    }

    /// Replaces the blob's metadata under the lease with `f` applied, and
    /// returns it. Keep leasehold's own entries (`leasehold_*`).
    ///
    /// # Errors
    /// [`Error::LeaseLost`] when the lease is lost (known: nothing sent).
    pub async fn update_metadata(&self, f: impl FnOnce(&mut Metadata)) -> Result<Metadata> {
        self.core.update_metadata(f).await
    }

    /// The fencing epoch stored with the lease (0 if never advanced).
    ///
    /// # Errors
    /// As [`LeaseGuard::metadata`], when a read is needed.
    pub async fn epoch(&self) -> Result<u64> {
        Ok(epoch_of(&self.metadata().await?))
    }

    /// Increments the fencing epoch (a metadata write under the lease) and
    /// returns it: no earlier holder had it.
    ///
    /// # Errors
    /// As [`LeaseGuard::update_metadata`].
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

    /// [`LeaseGuard::advance_epoch`], as a [`Fence`]: call it once per hold
    /// and share the fence (each call fences out the earlier ones).
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let store = leasehold::Store::memory();
    /// let guard = store.leases().acquire("importer", std::time::Duration::from_secs(30)).await?;
    /// let fence = guard.fence().await?;
    /// assert_eq!(fence.epoch(), guard.epoch().await?);
    /// # guard.release().await?;
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// As [`LeaseGuard::advance_epoch`]; [`Error::Invalid`] for a lease
    /// name too long for a fence row.
    pub async fn fence(&self) -> Result<Fence> {
        let epoch = self.advance_epoch().await?;
        Fence::new(self.name().as_str(), epoch)
    }

    pub(crate) fn has_local_waiters(&self) -> bool {
        self.slot.has_waiters()
    }

    /// Whether another task of this process waits for this lease.
    #[cfg(any(feature = "conformance", clippy))]
    #[doc(hidden)]
    pub fn queued_locally(&self) -> bool {
        self.has_local_waiters()
    }

    /// Ends the guard: hands the lease to the next local task when one
    /// waits (within the tenure bound), otherwise releases it.
    ///
    /// # Errors
    /// [`Error::LeaseLost`] when the lease had been lost (the work under it
    /// may not have been exclusive); a failed release's error (the lease
    /// then expires on its own).
    pub async fn release(mut self) -> Result<()> {
        let lost = self.core.shared.is_lost();
        match self.end() {
            Some((state, core, ending)) => finish(self.slot.clone(), state, core, ending).await,
            None if lost => Err(self.core.shared.lost_error()),
            None => Ok(()),
        }
    }

    /// `result`'s value with the guard, or its error once the guard has
    /// ended.
    pub(crate) async fn or_release<T>(self, result: Result<T>) -> Result<(Self, T)> {
        match result {
            Ok(value) => Ok((self, value)),
            Err(e) => {
                let _ = self.release().await;
                Err(e)
            }
        }
    }

    /// Ends the guard, deleting its wait queue and the lease blob under the
    /// lease id: `Ok(false)` when another process waits in the queue
    /// (nothing deleted, ended as [`LeaseGuard::release`] ends it).
    pub(crate) async fn delete_blob(self) -> Result<bool> {
        let deleted = async {
            let (queue, own) = self.core.queue()?;
            if !queue.remove_if_idle(&own).await? {
                return Ok(false);
            }
            self.core.delete_blob().await.map(|()| true)
        }
        .await;
        let name = self.core.shared.name.clone();
        if let Err(e) = self.release().await {
            // Nothing was deleted then, and the lease runs out on its own.
            debug!(lease = %name, error = %e, "ending a guard that deleted nothing failed");
        }
        deleted
    }

    /// Ends the guard's hold: what must still be released or passed on,
    /// with the local lock to keep until then; `None` when handed over.
    fn end(&mut self) -> Option<(OwnedMutexGuard<SlotState>, Arc<LeaseCore>, Ending)> {
        self.status.token.cancel();
        let mut state = self.state.take()?;
        let lost = self.core.shared.is_lost();
        let ending = self
            .slot
            .ending(&mut state, lost, &self.core.shared.env.settings);
        match ending {
            Ending::HandOver => {
                debug!(lease = %self.core.shared.name, "handing the lease over locally");
                None
            }
            Ending::Release | Ending::TenureEnd | Ending::Pass(_) | Ending::Linger(_) => {
                let core = state.held.take().unwrap_or_else(|| self.core.clone());
                Some((state, core, ending))
            }
        }
    }
}

/// Finishes a guard's end, with the local lock held until then. A pass
/// that fails ends like a tenure's end with nobody queued.
async fn finish(
    slot: Arc<LocalSlot>,
    mut state: OwnedMutexGuard<SlotState>,
    core: Arc<LeaseCore>,
    mut ending: Ending,
) -> Result<()> {
    if ending == Ending::TenureEnd {
        let head = core.queue_head().await;
        state.contended = head.is_some();
        if let Some((head, read_took)) = head {
            ending = Ending::Pass(head.id);
            // A waiter polling on a schedule is passed the lease just
            // before its next poll; until then the lease stays here.
            if let Some(schedule) = head.schedule {
                let (env, now) = (&core.shared.env, Instant::now());
                let every = Duration::from_millis(schedule.every_ms.unsigned_abs());
                let lead = (read_took + Duration::from_millis(2)).min(every / 2);
                let lead_ms = i64::try_from(lead.as_millis()).unwrap_or(i64::MAX);
                let poll_ms = schedule.next_poll(env.wall_ms(now).saturating_add(lead_ms));
                let poll = env.instant_at_ms(poll_ms, now);
                state.pending = Some(Pending {
                    to: head.id,
                    poll,
                    every,
                    lead,
                });
                ending = slot.pending_ending(&mut state, now).unwrap_or(ending);
            }
        }
    }
    match ending {
        Ending::HandOver => {
            state.held = Some(core);
            return Ok(());
        }
        Ending::Linger(at) => {
            linger(slot, state, core, at);
            return Ok(());
        }
        Ending::Pass(to) if core.pass_to(to).await => {
            state.passed();
            return Ok(());
        }
        Ending::Pass(_) => state.pending = None,
        Ending::Release | Ending::TenureEnd => {}
    }
    if matches!(ending, Ending::TenureEnd | Ending::Pass(_)) {
        // A new tenure on the lease this process keeps.
        (state.held_since, state.handovers) = (Some(Instant::now()), 0);
        if slot.has_waiters() && !core.shared.is_lost() {
            state.held = Some(core);
            return Ok(());
        }
        state.held_since = None;
    }
    let result = core.release().await;
    drop(state);
    result
}

/// Keeps the lease for a local task that may come back until `at`, then
/// passes it as pending, unless a local task holds it or it was passed.
fn linger(
    slot: Arc<LocalSlot>,
    mut state: OwnedMutexGuard<SlotState>,
    core: Arc<LeaseCore>,
    at: Instant,
) {
    state.held = Some(core.clone());
    drop(state);
    let Ok(runtime) = Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        tokio::time::sleep_until(at).await;
        let Some(mut state) = slot.try_lock() else {
            return;
        };
        let still_held = state
            .held
            .as_ref()
            .is_some_and(|held| Arc::ptr_eq(held, &core));
        let Some(to) = state.pending.map(|p| p.to).filter(|_| still_held) else {
            return;
        };
        state.held = None;
        let _ = finish(slot, state, core, Ending::Pass(to)).await;
    });
}

impl fmt::Debug for LeaseGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseGuard")
            .field("name", &self.core.shared.name)
            .field("handed_over", &self.handed_over)
            .field("remaining", &self.remaining())
            .field("lost", &self.core.shared.lost.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl Deref for LeaseGuard {
    type Target = LeaseStatus;

    fn deref(&self) -> &LeaseStatus {
        &self.status
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        let Some((state, core, ending)) = self.end() else {
            return;
        };
        match Handle::try_current() {
            Ok(runtime) => {
                let slot = self.slot.clone();
                runtime.spawn(async move {
                    let _ = finish(slot, state, core, ending).await;
                });
            }
            Err(_) => {
                core.abandon();
                drop(state);
            }
        }
    }
}

/// A cloneable view of a guard's validity ([`LeaseGuard::status`]).
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

    /// How long the lease is surely still held: zero once lost or ended;
    /// [`Duration::MAX`] for an infinite lease.
    pub fn remaining(&self) -> Duration {
        if self.token.is_cancelled() {
            return Duration::ZERO;
        }
        self.shared.remaining()
    }

    /// Whether the lease is lost.
    pub fn is_lost(&self) -> bool {
        self.shared.is_lost()
    }

    /// Whether the guard still holds the lease (not lost, not ended).
    pub fn is_held(&self) -> bool {
        !self.token.is_cancelled() && !self.shared.is_lost()
    }

    /// Checks that at least `min` of validity remains.
    ///
    /// # Errors
    /// [`Error::LeaseLost`] when the lease is lost, the guard has ended, or
    /// less than `min` remains.
    pub fn ensure_valid(&self, min: Duration) -> Result<()> {
        if self.shared.is_lost() {
            return Err(self.shared.lost_error());
        }
        let remaining = self.shared.remaining();
        let why = if self.token.is_cancelled() {
            "the guard has ended".to_owned()
        } else if remaining < min {
            format!("{remaining:?} of validity left, {min:?} needed")
        } else {
            return Ok(());
        };
        let what = format!("lease {}: {why}", self.shared.name);
        Err(Error::LeaseLost { what, code: None })
    }

    /// A future that completes when the lease is lost or the guard ends.
    pub fn lost(&self) -> WaitForCancellationFutureOwned {
        self.token.clone().cancelled_owned()
    }

    /// A token cancelled when the lease is lost or the guard ends.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.token.child_token()
    }
}
