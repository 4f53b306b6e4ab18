//! [`LeaseManager`]: the entry point of leases (the patterns built on
//! guards add their methods in their own files), and its live reservations.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Mutex as AsyncMutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::backend::{BlobBackend, LeaseDuration, notes};
use crate::error::{Error, ErrorKind, Result};
use crate::key::ContainerName;

use super::document::LeaseBlob;
use super::env::LeaseEnv;
use super::guard::{LeaseGuard, LeaseStatus};
use super::local::LocalLeases;
use super::name::LeaseName;
use super::options::{LeaseOptions, Settings};
use super::outage::Outage;
use crate::telemetry::Telemetry;

/// Hands out lease guards and the patterns built on them (see the
/// [module docs](crate::lease) for an example). Clones share the
/// process-local queues.
#[derive(Debug, Clone)]
pub struct LeaseManager {
    pub(crate) inner: Arc<ManagerInner>,
}

#[derive(Debug)]
pub(crate) struct ManagerInner {
    pub(crate) env: Arc<LeaseEnv>,
    container_ready: tokio::sync::Mutex<bool>,
    pub(crate) local: LocalLeases,
    pub(crate) reservations: Registry,
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

impl LeaseManager {
    /// A manager over `backend` with `options`.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the option when `options` break a rule
    /// (see the [`LeaseOptions`] setters). Nothing is sent.
    pub fn new(backend: Arc<dyn BlobBackend>, options: LeaseOptions) -> Result<Self> {
        Ok(LeaseManager::from_settings(
            backend,
            options.resolve()?,
            Telemetry::global(),
        ))
    }

    pub(crate) fn from_settings(
        backend: Arc<dyn BlobBackend>,
        settings: Settings,
        telemetry: Telemetry,
    ) -> Self {
        LeaseManager {
            inner: Arc::new(ManagerInner {
                env: Arc::new(LeaseEnv::new(backend, settings, telemetry)),
                container_ready: tokio::sync::Mutex::new(false),
                local: LocalLeases::default(),
                reservations: Registry::default(),
            }),
        }
    }

    /// The owner identity this manager records.
    pub fn owner(&self) -> &str {
        &self.inner.env.settings.owner
    }

    /// The container of the lease blobs.
    pub fn container(&self) -> &ContainerName {
        &self.inner.env.settings.container
    }

    /// The lease duration.
    pub fn lease_duration(&self) -> LeaseDuration {
        self.inner.env.settings.duration
    }

    /// Takes the lease if nobody, this process included, holds it now.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad name (before any request);
    /// [`Error::Unavailable`] when storage kept failing (see the
    /// [module docs](super#failing-storage)); the backend's error when a
    /// request fails for another reason than the lease being held.
    pub async fn try_acquire(&self, name: &str) -> Result<Option<LeaseGuard>> {
        let name = LeaseName::new(name)?;
        let outage = &mut Outage::new(&self.inner.env);
        self.inner.acquire(name, AcquireMode::Try, outage).await
    }

    /// Takes the lease, waiting up to `timeout` (even when the service does
    /// not answer), in turn with other tasks and processes.
    ///
    /// # Errors
    /// [`Error::Timeout`] when the lease did not come free in time;
    /// [`Error::Unavailable`] also when storage was failing at the timeout;
    /// otherwise as [`LeaseManager::try_acquire`].
    pub async fn acquire(&self, name: &str, timeout: Duration) -> Result<LeaseGuard> {
        let name = LeaseName::new(name)?;
        let deadline = Instant::now()
            .checked_add(timeout)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365));
        let outage = &mut Outage::new(&self.inner.env);
        let mode = AcquireMode::Until { deadline };
        match self.inner.acquire(name.clone(), mode, outage).await? {
            Some(guard) => Ok(guard),
            None => Err(Error::Timeout {
                what: format!("acquiring lease {name}"),
                after: timeout,
            }),
        }
    }
}

impl ManagerInner {
    /// Creates the container unless this manager already did.
    pub(crate) async fn ensure_container(&self, again: bool) -> Result<()> {
        let mut ready = self.container_ready.lock().await;
        if !*ready || again {
            self.env
                .backend
                .create_container(&self.env.settings.container)
                .await?;
            *ready = true;
        }
        Ok(())
    }

    /// Reads a lease blob without the lease. A missing container reads as a
    /// missing blob.
    pub(crate) async fn read(&self, name: &LeaseName) -> Result<Option<LeaseBlob>> {
        let blob = self.env.settings.blob_of(name)?;
        let read = self
            .env
            .backend
            .get_blob(&self.env.settings.container, &blob);
        match notes::expecting(&[ErrorKind::NotFound], read).await {
            Ok(Some(b)) => LeaseBlob::from_blob(name, b).map(Some),
            Ok(None) | Err(Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// A manager's live [`Reservation`](super::Reservation)s.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    entries: Mutex<HashMap<LeaseName, Arc<Entry>>>,
}

#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) guard: AsyncMutex<Option<LeaseGuard>>,
    /// Cancelled when the reservation ends early.
    pub(crate) cancel: CancellationToken,
    pub(crate) status: LeaseStatus,
    pub(crate) seq: u64,
    pub(crate) reserved_at: time::OffsetDateTime,
    pub(crate) until: time::OffsetDateTime,
    /// `until`, on the Tokio clock.
    pub(crate) ends: Instant,
}

impl Registry {
    pub(crate) fn get(&self, job: &LeaseName) -> Option<Arc<Entry>> {
        self.lock().get(job).cloned()
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, HashMap<LeaseName, Arc<Entry>>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Removes `entry` if it is still the one registered for `job`.
    pub(crate) fn remove(&self, job: &LeaseName, entry: &Arc<Entry>) {
        let mut entries = self.lock();
        if entries.get(job).is_some_and(|e| Arc::ptr_eq(e, entry)) {
            entries.remove(job);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poll_pauses_stay_near_the_interval_and_are_seeded() {
        let backend: Arc<dyn BlobBackend> = Arc::new(crate::lease::test_support::no_backend());
        let options = LeaseOptions::new()
            .with_poll_interval(Duration::from_millis(800))
            .with_jitter_seed(7);
        let a = LeaseManager::new(backend.clone(), options.clone()).unwrap();
        let b = LeaseManager::new(backend, options).unwrap();
        let mut x = a.inner.env.poll_backoff();
        let mut y = b.inner.env.poll_backoff();
        let xs: Vec<Duration> = (0..50).map(|_| x.pause()).collect();
        let ys: Vec<Duration> = (0..50).map(|_| y.pause()).collect();
        assert_eq!(xs, ys);
        assert!(
            xs.iter().all(|d| (720..=880).contains(&d.as_millis())),
            "{xs:?}"
        );
        assert!(xs.windows(2).any(|w| w[0] != w[1]), "jittered: {xs:?}");
        let mean = xs.iter().sum::<Duration>() / 50;
        assert!((760..=840).contains(&mean.as_millis()), "{mean:?}");
    }

    #[test]
    fn standby_pauses_double_up_to_a_second() {
        let backend: Arc<dyn BlobBackend> = Arc::new(crate::lease::test_support::no_backend());
        let manager =
            LeaseManager::new(backend.clone(), LeaseOptions::new().with_jitter_seed(3)).unwrap();
        let mut s = manager.inner.env.standby_backoff();
        let xs: Vec<Duration> = (0..20).map(|_| s.pause()).collect();
        assert!(
            xs[0] >= Duration::from_millis(50) && xs[0] <= Duration::from_millis(100),
            "{xs:?}"
        );
        assert!(xs.iter().all(|d| *d <= Duration::from_secs(1)), "{xs:?}");
        assert!(xs[19] >= Duration::from_millis(500), "{xs:?}");
        // A poll interval above a second raises the cap to it.
        let slow = LeaseManager::new(
            backend,
            LeaseOptions::new().with_poll_interval(Duration::from_secs(3)),
        )
        .unwrap();
        let mut s = slow.inner.env.standby_backoff();
        let last = (0..20).map(|_| s.pause()).last().unwrap();
        assert!(
            last > Duration::from_secs(1) && last <= Duration::from_secs(3),
            "{last:?}"
        );
    }
}
