//! Job reservations (see [`Reservation`]).

use std::sync::{Arc, Weak};
use std::time::Duration;

use time::OffsetDateTime;
use tokio::sync::Mutex as AsyncMutex;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, info_span};

use crate::error::{Error, Result};

use super::document::{RESERVATION_LOG_LEN, ReservationRecord};
use super::guard::LeaseStatus;
use super::manager::{AcquireMode, Entry, LeaseManager, ManagerInner};
use super::name::LeaseName;
use super::outage::Outage;

const MAX_RESERVATION: Duration = Duration::from_secs(366 * 86_400);

/// A handle on a live job reservation: the lease `job`, taken without
/// waiting and held (renewed) by the manager, not the handle, for its
/// duration or until [`LeaseManager::cancel_reservation`]. Each reservation
/// appends a [`ReservationRecord`] to the lease blob's log (see
/// [`LeaseManager::reservation_log`]); a cancellation stamps its record.
#[derive(Debug, Clone)]
pub struct Reservation {
    job: LeaseName,
    entry: Arc<Entry>,
}

impl Reservation {
    /// How many records a job's reservation log keeps (the newest ones).
    pub const LOG_LEN: usize = RESERVATION_LOG_LEN;

    /// The job reserved.
    pub fn job(&self) -> &LeaseName {
        &self.job
    }

    /// This reservation's position in the job's log.
    pub fn seq(&self) -> u64 {
        self.entry.seq
    }

    /// When it was taken.
    pub fn reserved_at(&self) -> OffsetDateTime {
        self.entry.reserved_at
    }

    /// When it ends unless cancelled earlier.
    pub fn until(&self) -> OffsetDateTime {
        self.entry.until
    }

    /// Time left, never more than the lease's validity; zero once ended.
    pub fn remaining(&self) -> Duration {
        (self.entry.status.remaining())
            .min(self.entry.ends.saturating_duration_since(Instant::now()))
    }

    /// Whether it is still held.
    pub fn is_active(&self) -> bool {
        self.entry.is_active()
    }

    /// The lease behind the reservation.
    pub fn lease(&self) -> &LeaseStatus {
        &self.entry.status
    }
}

impl Entry {
    fn is_active(&self) -> bool {
        self.status.is_held() && Instant::now() < self.ends
    }
}

impl LeaseManager {
    /// Reserves `job` for `duration` if nobody (this process included)
    /// holds it now.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad name or a duration that is zero or over
    /// 366 days (before any request); [`Error::Unavailable`] when storage
    /// kept failing; the backend's error (the lease is then released).
    pub async fn try_reserve(&self, job: &str, duration: Duration) -> Result<Option<Reservation>> {
        let job = LeaseName::new(job)?;
        if duration.is_zero() || duration > MAX_RESERVATION {
            return Err(Error::invalid(
                format!("reservation duration {duration:?} for {job}"),
                "must be positive and at most 366 days",
            ));
        }
        let span = info_span!("lease.reserve", lease = %job);
        let this = &self.inner;
        async move {
            let outage = &mut Outage::new(&this.env);
            let Some(guard) = this.acquire(job.clone(), AcquireMode::Try, outage).await? else {
                return Ok(None);
            };
            let ends = Instant::now() + duration;
            let reserved_at = this.env.now_wall();
            let until = time::Duration::try_from(duration)
                .ok()
                .and_then(|d| reserved_at.checked_add(d))
                .unwrap_or(reserved_at);
            let record = ReservationRecord {
                seq: 0,
                holder: this.env.settings.owner.clone(),
                reserved_at,
                until,
                cancelled_at: None,
            };
            let seq = (guard.core)
                .update_document(|doc| doc.push_reservation(record))
                .await;
            let (guard, seq) = guard.or_release(seq).await?;
            let entry = Arc::new(Entry {
                status: guard.status(),
                guard: AsyncMutex::new(Some(guard)),
                cancel: CancellationToken::new(),
                seq,
                reserved_at,
                until,
                ends,
            });
            this.reservations.lock().insert(job.clone(), entry.clone());
            tokio::spawn(expire(Arc::downgrade(this), job.clone(), entry.clone()));
            info!(seq, ?duration, "reserved");
            Ok(Some(Reservation { job, entry }))
        }
        .instrument(span)
        .await
    }

    /// Whether this process holds a live reservation of `job` (no request).
    pub fn has_reservation(&self, job: &str) -> bool {
        let Ok(job) = LeaseName::new(job) else {
            return false;
        };
        self.inner
            .reservations
            .get(&job)
            .is_some_and(|e| e.is_active())
    }

    /// Ends this process's reservation of `job` early, stamping its log
    /// record: `Ok(false)` when it held none.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad name; the backend's error when stamping
    /// the record fails (the lease is released anyway).
    pub async fn cancel_reservation(&self, job: &str) -> Result<bool> {
        let job = LeaseName::new(job)?;
        let Some(entry) = self.inner.reservations.get(&job) else {
            return Ok(false);
        };
        self.inner.reservations.remove(&job, &entry);
        entry.cancel.cancel();
        let Some(guard) = entry.guard.lock().await.take() else {
            return Ok(false);
        };
        let span = info_span!("lease.cancel_reservation", lease = %job);
        let now = self.inner.env.now_wall();
        let seq = entry.seq;
        async move {
            let stamped = guard
                .core
                .update_document(|doc| {
                    if let Some(r) = doc.reservations.iter_mut().find(|r| r.seq == seq) {
                        r.cancelled_at = Some(now);
                    }
                })
                .await;
            let released = guard.release().await;
            info!(seq, "reservation cancelled");
            stamped.and(released).map(|()| true)
        }
        .instrument(span)
        .await
    }

    /// The job's reservation log (the newest [`Reservation::LOG_LEN`]
    /// records, oldest first), read without the lease.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad name or a blob that is not a lease
    /// document; the backend's error when the read fails.
    pub async fn reservation_log(&self, job: &str) -> Result<Vec<ReservationRecord>> {
        let job = LeaseName::new(job)?;
        Ok(self
            .inner
            .read(&job)
            .await?
            .map(|b| b.document.reservations)
            .unwrap_or_default())
    }
}

/// Ends a reservation at its time, or when its lease is lost.
async fn expire(manager: Weak<ManagerInner>, job: LeaseName, entry: Arc<Entry>) {
    let lost = entry.status.lost();
    tokio::select! {
        () = sleep_until(entry.ends) => {}
        () = entry.cancel.cancelled() => return,
        () = lost => {}
    }
    if let Some(manager) = manager.upgrade() {
        manager.reservations.remove(&job, &entry);
    }
    let guard = entry.guard.lock().await.take();
    if let Some(guard) = guard {
        debug!(lease = %job, "reservation ended");
        let _ = guard.release().await;
    }
}
