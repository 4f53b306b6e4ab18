//! Blob leases: an auto-renewing lease guard, and the patterns built on it.
//!
//! A [`LeaseManager`] hands out [`LeaseGuard`]s for named leases. Each name is
//! one blob in the manager's container (see [`LeaseName`] for the encoding);
//! the blob is created on first use. A guard:
//!
//! * was acquired with a lease id chosen here ([`LeaseId::new_random`]), so a
//!   retried acquire is idempotent;
//! * is renewed in the background (default: 30 s lease, renewed every 10 s);
//! * counts its validity from the **send time** of the last successful
//!   acquire or renew, minus a drift margin, on `tokio::time`'s clock, and
//!   reports the lease lost when that deadline passes even if a renew request
//!   hangs (see [`LeaseGuard::lost`], [`LeaseGuard::remaining`],
//!   [`LeaseGuard::ensure_valid`]);
//! * carries the lease id on every write it makes to the lease blob, so the
//!   service refuses those writes once the lease is gone;
//! * ends with [`LeaseGuard::release`]; dropping it releases in the
//!   background, best effort.
//!
//! Built on guards: run-once initialisation ([`LeaseManager::do_once`]),
//! leader election ([`LeaseManager::run_as_leader`]), job reservations with a
//! holder log ([`LeaseManager::try_reserve`]), and operator tools
//! ([`LeaseManager::describe`], [`LeaseManager::break_lease`]).
//!
//! # Renewal and loss
//!
//! The renewal task races every request against the guard's local deadline
//! (send time of the last success + duration − drift margin): the service
//! starts a new lease period when it processes a request, never earlier, so
//! the service's expiry cannot come before that deadline. Failures are sorted:
//!
//! * **definitive loss**: the service says the lease is not ours
//!   (`LeaseIdMismatch*`, `LeaseNotPresent*`, `LeaseIsBroken*`,
//!   `LeaseIsBreaking*`, another holder, the blob gone): lost at once;
//! * **transient** ([`Error::Transient`]): retried quickly (250 ms doubling
//!   to 2 s) while the deadline allows;
//! * **ambiguous** (anything else, such as a reply that never came):
//!   verified with a properties read. Still leased: the renew is retried
//!   (only our id can renew it, so a success proves we still hold it); not
//!   leased: lost at once.
//!
//! A loss cancels the guard's token and completes [`LeaseGuard::lost`]; the
//! guard then refuses to send writes under the lease.
//!
//! # Process-local sharing
//!
//! Tasks of one process that want the same lease queue locally instead of
//! polling storage. The process acquires the blob lease once and hands it
//! from guard to guard ([`Acquisition::HandedOver`]) with renewal running
//! throughout, up to a fairness bound ([`LeaseOptions::with_handover_limit`]),
//! then releases it so other processes get their turn. Waiters in other
//! processes poll every [`LeaseOptions::with_poll_interval`] (100 ms by
//! default, jittered). [`LeaseManager::acquire`] waits at most its timeout,
//! even when the service stops answering: an acquire request still in
//! flight then finishes in the background and gives back any lease it took.
//!
//! # Failing storage
//!
//! Waiting for a lease that somebody else holds is bounded by the caller's
//! timeout where the call has one. Storage that keeps failing (transient
//! errors, no reply, an unreachable endpoint) is different: every call that
//! waits for a lease (acquire, run-once, leader campaigns, reservations,
//! partition locks) retries it, and gives up with [`Error::Unavailable`]
//! naming the endpoint once requests have failed without a single answer
//! for [`LeaseOptions::with_unavailable_after`] (30 s by default).
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use leasehold::backend::memory::MemoryBackend;
//! use leasehold::lease::{Acquisition, LeaseManager, LeaseOptions, OnceOutcome};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> leasehold::Result<()> {
//! let backend = Arc::new(MemoryBackend::new());
//! let leases = LeaseManager::new(backend.clone(), LeaseOptions::default())?;
//!
//! // An exclusive section: held (and renewed) until released.
//! let guard = leases.acquire("nightly-report", Duration::from_secs(30)).await?;
//! assert_eq!(guard.acquisition(), Acquisition::Fresh);
//! let epoch = guard.advance_epoch().await?; // a fencing number for this holder
//! guard.ensure_valid(Duration::from_secs(5))?; // before a side effect
//! // ... work; `guard.lost()` completes if the lease is lost ...
//!
//! // Another process (another manager) cannot take it meanwhile.
//! let other = LeaseManager::new(backend, LeaseOptions::default())?;
//! assert!(other.try_acquire("nightly-report").await?.is_none());
//! let seen = other.describe("nightly-report").await?;
//! assert_eq!((seen.owner.as_deref(), seen.epoch), (Some(leases.owner()), epoch));
//! guard.release().await?;
//!
//! // Run-once initialisation, whoever gets there first.
//! let outcome = other
//!     .do_once("schema-v2", |_ctx| async { Ok::<_, leasehold::Error>("migrated") })
//!     .await?;
//! assert!(matches!(outcome, OnceOutcome::Ran { output: "migrated", .. }));
//! let again = leases.do_once("schema-v2", |_| async { Ok::<_, leasehold::Error>("") }).await?;
//! assert_eq!(again, OnceOutcome::AlreadyDone);
//! # Ok(())
//! # }
//! ```

mod do_once;
mod document;
mod guard;
mod leader;
mod local;
mod name;
mod outage;
mod renew;
mod reservation;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use time::OffsetDateTime;
use tokio::time::Instant;
use tracing::{Instrument, info, info_span};

use crate::backend::{BlobBackend, LeaseDuration, LeaseId, LeaseState, Metadata};
use crate::error::{Error, Result};
use crate::key::ContainerName;
use crate::retry::{self, Backoff};

pub use do_once::{OnceContext, OnceOutcome};
pub(crate) use document::{LOCK_SECTION, META_ACQUIRED, META_OWNER};
pub use document::{OnceState, ReservationRecord};
pub use guard::{Acquisition, LeaseGuard, LeaseStatus};
pub use leader::{LeaderContext, LeaderOptions};
pub use name::LeaseName;
pub use reservation::Reservation;

use document::{LeaseBlob, meta_get};
use guard::AcquireMode;
use local::LocalLeases;

/// Settings of a [`LeaseManager`], checked by [`LeaseManager::new`].
///
/// Defaults: 30 s leases renewed every 10 s (a third of the duration unless
/// set), 1 s drift margin, container [`LeaseOptions::DEFAULT_CONTAINER`], acquire polling
/// every 100 ms, owner identity `hostname-pid-random`, owner metadata
/// written on acquire, local hand-over up to 1000 times or 60 s in a row,
/// waits for a lease ending after 30 s of failing storage.
#[derive(Debug, Clone)]
#[must_use = "LeaseOptions do nothing until given to `StoreBuilder::lease_options` or `LeaseManager::new`"]
pub struct LeaseOptions {
    /// `None` for an infinite lease.
    duration: Option<Duration>,
    renew_interval: Option<Duration>,
    drift_margin: Duration,
    container: Option<ContainerName>,
    poll_interval: Duration,
    owner: Option<String>,
    owner_metadata: bool,
    max_handovers: u32,
    max_hold: Duration,
    jitter_seed: Option<u64>,
    unavailable_after: Duration,
}

impl Default for LeaseOptions {
    fn default() -> Self {
        LeaseOptions {
            duration: Some(Duration::from_secs(30)),
            renew_interval: None,
            drift_margin: Duration::from_secs(1),
            container: None,
            poll_interval: Self::DEFAULT_POLL_INTERVAL,
            owner: None,
            owner_metadata: true,
            max_handovers: 1000,
            max_hold: Duration::from_secs(60),
            jitter_seed: None,
            unavailable_after: Self::DEFAULT_UNAVAILABLE_AFTER,
        }
    }
}

impl LeaseOptions {
    /// The default pause between attempts to take a lease held by another
    /// process (see [`LeaseOptions::with_poll_interval`]).
    pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(100);

    /// How long storage may keep failing before a wait for a lease gives up
    /// (see [`LeaseOptions::with_unavailable_after`]).
    pub const DEFAULT_UNAVAILABLE_AFTER: Duration = Duration::from_secs(30);

    /// The default container for lease blobs.
    pub const DEFAULT_CONTAINER: &str = "leasehold-leases";

    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// The lease duration: whole seconds from 15 to 60.
    pub fn with_duration(mut self, duration: Duration) -> Self {
        self.duration = Some(duration);
        self
    }

    /// Infinite leases: never renewed, held until released or broken. A
    /// guard of an infinite lease learns of a loss only when a write under
    /// the lease is refused.
    pub fn with_infinite_duration(mut self) -> Self {
        self.duration = None;
        self
    }

    /// How often a held lease is renewed; must be shorter than the duration
    /// minus the drift margin. Default: a third of the duration.
    pub fn with_renew_interval(mut self, interval: Duration) -> Self {
        self.renew_interval = Some(interval);
        self
    }

    /// How much earlier than the service a guard considers its lease
    /// expired, for clock-rate differences. Less than half the duration.
    pub fn with_drift_margin(mut self, margin: Duration) -> Self {
        self.drift_margin = margin;
        self
    }

    /// The container that holds the lease blobs.
    pub fn with_container(mut self, container: ContainerName) -> Self {
        self.container = Some(container);
        self
    }

    /// How long a task waiting for a lease held by another process pauses
    /// between attempts (each pause drawn within ±10 % of it). From 10 ms to
    /// half the lease duration; default 100 ms.
    ///
    /// A released lease is taken by a waiter half an interval later on
    /// average, at the price of one request per interval per waiting task
    /// (the default: a median hand-over of about 50 ms at just under 10
    /// requests per second per waiter). With many processes waiting on one lease,
    /// a longer interval keeps the blob under the service's request rate
    /// per blob. Leader candidates on standby ([`LeaseManager::run_as_leader`])
    /// poll more slowly: backoff from 50 ms up to 1 s, or to this interval
    /// when it is longer.
    pub fn with_poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// The identity written as owner metadata and into reservation logs:
    /// 1 to 256 printable ASCII characters, no leading or trailing space.
    pub fn with_owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// Whether a fresh acquire records the owner identity in the blob's
    /// metadata (one read and one metadata write after the acquire).
    /// Default: yes. Without it [`LeaseManager::describe`] shows the last
    /// owner that did write it.
    pub fn with_owner_metadata(mut self, write: bool) -> Self {
        self.owner_metadata = write;
        self
    }

    /// The fairness bound of process-local sharing: a blob lease is handed
    /// from guard to guard at most `max_handovers` times in a row and only
    /// within `max_hold` of its acquisition; then it is released.
    pub fn with_handover_limit(mut self, max_handovers: u32, max_hold: Duration) -> Self {
        self.max_handovers = max_handovers;
        self.max_hold = max_hold;
        self
    }

    /// Seeds the jitter of acquire polling (for reproducible tests). Without
    /// a seed each manager draws a random one.
    pub fn with_jitter_seed(mut self, seed: u64) -> Self {
        self.jitter_seed = Some(seed);
        self
    }

    /// How long a call waiting for a lease keeps trying while storage keeps
    /// failing (transient errors, no reply, an unreachable endpoint) before
    /// it gives up with [`Error::Unavailable`] naming the endpoint. From
    /// 1 ms to 24 hours; default 30 s ([`LeaseOptions::DEFAULT_UNAVAILABLE_AFTER`]).
    ///
    /// The bound counts continuous failure: any answer from the service
    /// (even "held by another owner") starts it afresh. The calls of one
    /// manager share the count: a call whose first request fails within a
    /// few seconds of another call's failure joins that run of failures,
    /// so tasks queued behind one another do not each wait the bound
    /// again, and a call right after a give-up fails after one attempt.
    /// A lease held by somebody else is no failure: that wait is bounded by
    /// the caller's timeout, where the call has one. It applies to
    /// [`LeaseManager::acquire`] and [`LeaseManager::try_acquire`],
    /// [`LeaseManager::do_once`], [`LeaseManager::run_as_leader`] (a
    /// campaign returns the error), [`LeaseManager::try_reserve`] and
    /// partition locks ([`crate::Store::lock`], through
    /// [`crate::StoreBuilder::lease_options`]). A held lease is not
    /// affected: its renewal is bounded by the lease's own validity.
    pub fn with_unavailable_after(mut self, bound: Duration) -> Self {
        self.unavailable_after = bound;
        self
    }

    /// Checks the options and fills in the defaults that depend on others.
    fn resolve(&self) -> Result<Settings> {
        let (duration, lease_len) = match self.duration {
            None => (LeaseDuration::Infinite, None),
            Some(d) => (LeaseDuration::timed(d)?, Some(d)),
        };
        if let Some(len) = lease_len {
            if self.drift_margin >= len / 2 {
                return Err(Error::invalid(
                    format!("drift margin {:?}", self.drift_margin),
                    format!("must be less than half the lease duration ({len:?})"),
                ));
            }
        }
        let renew_interval = match (self.renew_interval, lease_len) {
            (Some(i), Some(len)) => {
                let limit = len - self.drift_margin;
                if i.is_zero() || i >= limit {
                    return Err(Error::invalid(
                        format!("renew interval {i:?}"),
                        format!(
                            "must be positive and shorter than the lease duration ({len:?}) \
                             minus the drift margin ({:?})",
                            self.drift_margin
                        ),
                    ));
                }
                i
            }
            (None, Some(len)) => len / 3,
            (_, None) => Duration::MAX,
        };
        let poll_limit = lease_len.map_or(Duration::from_secs(30), |len| len / 2);
        if self.poll_interval < Duration::from_millis(10) || self.poll_interval > poll_limit {
            return Err(Error::invalid(
                format!("poll interval {:?}", self.poll_interval),
                format!("must be from 10ms to {poll_limit:?} (half the lease duration)"),
            ));
        }
        if self.unavailable_after < Duration::from_millis(1)
            || self.unavailable_after > Duration::from_secs(86_400)
        {
            return Err(Error::invalid(
                format!("unavailable-after bound {:?}", self.unavailable_after),
                "must be from 1ms to 24h",
            ));
        }
        let owner = match &self.owner {
            Some(owner) => {
                check_owner(owner)?;
                owner.clone()
            }
            None => default_owner(),
        };
        let container = match &self.container {
            Some(c) => c.clone(),
            None => ContainerName::new(Self::DEFAULT_CONTAINER)?,
        };
        Ok(Settings {
            duration,
            lease_len,
            renew_interval,
            drift: self.drift_margin,
            container,
            poll_interval: self.poll_interval,
            owner,
            owner_metadata: self.owner_metadata,
            max_handovers: self.max_handovers,
            max_hold: self.max_hold,
            unavailable_after: self.unavailable_after,
            seed: self.jitter_seed.unwrap_or_else(retry::random_seed),
        })
    }
}

fn check_owner(owner: &str) -> Result<()> {
    let why = if owner.is_empty() || owner.len() > 256 {
        Some("must be 1 to 256 characters long")
    } else if !owner.bytes().all(|b| (b' '..=b'~').contains(&b)) {
        Some("may contain only printable ASCII characters")
    } else if owner.starts_with(' ') || owner.ends_with(' ') {
        Some("must not start or end with a space")
    } else {
        None
    };
    match why {
        Some(why) => Err(Error::invalid(format!("owner identity {owner:?}"), why)),
        None => Ok(()),
    }
}

/// `hostname-pid-random`, with the host name cut to safe ASCII.
fn default_owner() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .unwrap_or_default();
    let host: String = host
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        .take(200)
        .collect();
    let host = if host.is_empty() {
        "host".to_owned()
    } else {
        host
    };
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}-{}-{}", std::process::id(), &random[..8])
}

/// Validated settings, shared by everything a manager hands out.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) duration: LeaseDuration,
    pub(crate) lease_len: Option<Duration>,
    pub(crate) renew_interval: Duration,
    pub(crate) drift: Duration,
    pub(crate) container: ContainerName,
    pub(crate) poll_interval: Duration,
    pub(crate) owner: String,
    pub(crate) owner_metadata: bool,
    pub(crate) max_handovers: u32,
    pub(crate) max_hold: Duration,
    pub(crate) unavailable_after: Duration,
    seed: u64,
}

/// What guards need from their manager: the backend, the settings, a clock.
#[derive(Debug)]
pub(crate) struct LeaseEnv {
    pub(crate) backend: Arc<dyn BlobBackend>,
    pub(crate) settings: Settings,
    clock: WallClock,
    backoffs: AtomicU64,
    /// The current run of failing requests, shared by waiting calls.
    pub(crate) recent_failures: outage::RecentFailures,
}

impl LeaseEnv {
    /// A fresh pause generator for waiting on a lease held elsewhere: the
    /// poll interval, each pause drawn within ±10 % of it.
    pub(crate) fn poll_backoff(&self) -> Backoff {
        Backoff::fixed(self.settings.poll_interval, self.next_seed())
    }

    /// A fresh pause generator for leader candidates on standby: from 50 ms
    /// (or the poll interval, if shorter), doubling up to 1 s (or the poll
    /// interval, if longer), each pause drawn from `[d, 2d]` under the cap.
    pub(crate) fn standby_backoff(&self) -> Backoff {
        let interval = self.settings.poll_interval;
        let cap = interval.max(Duration::from_secs(1));
        Backoff::doubling(
            Duration::from_millis(50).min(interval),
            cap,
            self.next_seed(),
        )
    }

    fn next_seed(&self) -> u64 {
        let n = self.backoffs.fetch_add(1, Ordering::Relaxed);
        retry::derive_seed(self.settings.seed, n)
    }

    /// Wall-clock time for logs and records, derived from `tokio::time` so
    /// it follows paused time in tests.
    pub(crate) fn now_wall(&self) -> OffsetDateTime {
        self.clock.now()
    }
}

/// Wall-clock time as `tokio::time` sees it: the wall time at the manager's
/// creation plus monotonic time elapsed since.
#[derive(Debug)]
struct WallClock {
    wall: OffsetDateTime,
    mono: Instant,
}

impl WallClock {
    fn new() -> Self {
        WallClock {
            wall: OffsetDateTime::now_utc(),
            mono: Instant::now(),
        }
    }

    fn now(&self) -> OffsetDateTime {
        time::Duration::try_from(self.mono.elapsed())
            .ok()
            .and_then(|elapsed| self.wall.checked_add(elapsed))
            .unwrap_or(self.wall)
    }
}

/// Hands out lease guards and the patterns built on them. Cheap to clone;
/// clones share the process-local queues.
///
/// See the [module docs](self) for the lease model and an example.
#[derive(Debug, Clone)]
pub struct LeaseManager {
    inner: Arc<ManagerInner>,
}

#[derive(Debug)]
pub(crate) struct ManagerInner {
    pub(crate) env: Arc<LeaseEnv>,
    /// Whether this manager has created its container.
    container_ready: tokio::sync::Mutex<bool>,
    pub(crate) local: LocalLeases,
    pub(crate) reservations: reservation::Registry,
}

/// What [`LeaseManager::describe`] reports about a lease.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LeaseDescription {
    /// The lease.
    pub name: LeaseName,
    /// Whether the lease blob exists (it is created on first acquire).
    pub exists: bool,
    /// The lease state ([`LeaseState::Available`] when the blob is missing).
    pub state: LeaseState,
    /// The owner identity written by the last acquire that recorded one:
    /// the current holder while `state` is leased or breaking (if the holder
    /// writes owner metadata; partition locks always name their holder, see
    /// [`crate::lock`]).
    pub owner: Option<String>,
    /// When that owner acquired the lease, as it recorded (RFC 3339).
    pub acquired_at: Option<String>,
    /// The fencing epoch.
    pub epoch: u64,
    /// The blob's metadata: leasehold's own entries (`leasehold_*`, shown
    /// above) and any written with [`LeaseGuard::update_metadata`]. Empty
    /// when the blob is missing.
    pub metadata: Metadata,
    /// Whether a partition lock's commit is pending in the lease blob (see
    /// [`crate::Store::pending_commit`]).
    pub journal_pending: bool,
    /// The run-once marker.
    pub once: OnceState,
    /// How many reservation records the blob's log holds.
    pub reservation_records: usize,
}

impl LeaseDescription {
    /// Whether somebody holds the lease (leased, or breaking but not yet
    /// broken).
    pub fn is_held(&self) -> bool {
        matches!(self.state, LeaseState::Leased | LeaseState::Breaking)
    }
}

impl LeaseManager {
    /// A manager over `backend` with `options`.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the option when `options` break a rule
    /// (lease duration outside 15–60 s, renew interval not below the duration
    /// minus the drift margin, drift margin of half the duration or more,
    /// poll interval out of range, bad owner identity). Nothing is sent.
    pub fn new(backend: Arc<dyn BlobBackend>, options: LeaseOptions) -> Result<Self> {
        let settings = options.resolve()?;
        Ok(LeaseManager {
            inner: Arc::new(ManagerInner {
                env: Arc::new(LeaseEnv {
                    backend,
                    settings,
                    clock: WallClock::new(),
                    backoffs: AtomicU64::new(0),
                    recent_failures: outage::RecentFailures::default(),
                }),
                container_ready: tokio::sync::Mutex::new(false),
                local: LocalLeases::default(),
                reservations: reservation::Registry::default(),
            }),
        })
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

    /// Takes the lease if it is free now; `Ok(None)` when another process,
    /// or another task of this one, holds it. Failing storage is retried
    /// for up to [`LeaseOptions::with_unavailable_after`].
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad name (before any request);
    /// [`Error::Unavailable`] naming the endpoint when storage kept failing
    /// for the bound; the backend's error when a request fails for another
    /// reason than the lease being held.
    pub async fn try_acquire(&self, name: &str) -> Result<Option<LeaseGuard>> {
        let name = LeaseName::new(name)?;
        self.inner.acquire(name, AcquireMode::Try).await
    }

    /// Takes the lease, waiting up to `timeout`: behind other tasks of this
    /// process on a local queue, and for other processes by polling every
    /// poll interval ([`LeaseOptions::with_poll_interval`]).
    ///
    /// The timeout also bounds a service that does not answer: an acquire
    /// request still in flight at the deadline is left to finish in the
    /// background, and a lease it takes after all is released at once.
    /// Failing storage (transient errors, an unreachable endpoint) is
    /// retried, but for no longer than
    /// [`LeaseOptions::with_unavailable_after`] (30 s by default), even
    /// when `timeout` is longer.
    ///
    /// # Errors
    /// [`Error::Timeout`] when the lease did not come free in time;
    /// [`Error::Unavailable`] naming the endpoint when storage kept failing
    /// for the bound, or was failing when the timeout came;
    /// [`Error::Invalid`] for a bad name (before any request); the backend's
    /// error when a request fails for another reason than the lease being
    /// held.
    pub async fn acquire(&self, name: &str, timeout: Duration) -> Result<LeaseGuard> {
        let name = LeaseName::new(name)?;
        let deadline = Instant::now()
            .checked_add(timeout)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365));
        match self
            .inner
            .acquire(name.clone(), AcquireMode::Until { deadline })
            .await?
        {
            Some(guard) => Ok(guard),
            None => Err(Error::Timeout {
                what: format!("acquiring lease {name}"),
                after: timeout,
            }),
        }
    }

    /// Who holds a lease, its state, epoch, metadata, and whether a
    /// partition lock's commit is pending, without acquiring it (one read).
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad name or a body that is not a lease
    /// document; the backend's error when the read fails.
    pub async fn describe(&self, name: &str) -> Result<LeaseDescription> {
        let name = LeaseName::new(name)?;
        let blob = self.inner.read(&name).await?;
        Ok(match blob {
            None => LeaseDescription {
                name,
                exists: false,
                state: LeaseState::Available,
                owner: None,
                acquired_at: None,
                epoch: 0,
                metadata: Metadata::new(),
                journal_pending: false,
                once: OnceState::NotStarted,
                reservation_records: 0,
            },
            Some(blob) => LeaseDescription {
                name,
                exists: true,
                state: blob.lease.state,
                owner: blob.owner().map(str::to_owned),
                acquired_at: meta_get(&blob.metadata, META_ACQUIRED).map(str::to_owned),
                epoch: blob.epoch(),
                journal_pending: blob.document.section(LOCK_SECTION).is_some(),
                once: blob.once_state(),
                reservation_records: blob.document.reservations.len(),
                metadata: blob.metadata,
            },
        })
    }

    /// For operators: the names of the leases in this manager's container
    /// that start with `prefix` (all of them for `""`), in blob-name order.
    /// Blobs whose names are not lease-name encodings (written by something
    /// else) are skipped; a missing container lists as empty. One listing
    /// request per page of up to 5000 blobs; nothing is acquired.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a prefix longer than [`LeaseName::MAX_LEN`];
    /// the backend's error when a listing request fails.
    pub async fn list(&self, prefix: &str) -> Result<Vec<LeaseName>> {
        // The encoding is byte by byte, so the names starting with `prefix`
        // are exactly the blobs starting with its encoding.
        let blob_prefix = if prefix.is_empty() {
            String::new()
        } else {
            LeaseName::new(prefix)?.encoded()
        };
        let env = &self.inner.env;
        let mut names = Vec::new();
        let mut marker: Option<String> = None;
        loop {
            let page = match env
                .backend
                .list_blobs(&env.settings.container, &blob_prefix, marker.as_deref())
                .await
            {
                Ok(page) => page,
                Err(Error::NotFound { .. }) => break,
                Err(e) => return Err(e),
            };
            names.extend(
                page.items
                    .iter()
                    .filter_map(|item| LeaseName::from_blob_name(&item.name).ok()),
            );
            match page.next_marker {
                Some(next) => marker = Some(next),
                None => break,
            }
        }
        Ok(names)
    }

    /// Breaks a lease for operators, whoever holds it. The holder keeps it
    /// for `period` (0–60 whole seconds); `None` lets a timed lease run out
    /// and breaks an infinite one at once. The holder's guard reports the
    /// loss at its next renewal or write.
    ///
    /// Returns [`BreakOutcome::Broken`] with the time until the lease is
    /// broken, or [`BreakOutcome::NotHeld`] when nobody held it (the
    /// service had no lease to break; nothing changed).
    ///
    /// ```
    /// # use std::{sync::Arc, time::Duration};
    /// # use leasehold::backend::memory::MemoryBackend;
    /// use leasehold::lease::{BreakOutcome, LeaseManager, LeaseOptions};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> leasehold::Result<()> {
    /// let leases = LeaseManager::new(Arc::new(MemoryBackend::new()), LeaseOptions::default())?;
    /// let guard = leases.acquire("job", Duration::from_secs(5)).await?;
    /// let outcome = leases.break_lease("job", Some(Duration::ZERO)).await?;
    /// assert_eq!(outcome, BreakOutcome::Broken { left: Duration::ZERO });
    /// drop(guard);
    ///
    /// let free = leases.try_acquire("other").await?.expect("free");
    /// free.release().await?;
    /// assert_eq!(leases.break_lease("other", None).await?, BreakOutcome::NotHeld);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad name or period (before any request);
    /// [`Error::NotFound`] when the lease blob does not exist; the backend's
    /// error otherwise.
    pub async fn break_lease(&self, name: &str, period: Option<Duration>) -> Result<BreakOutcome> {
        let name = LeaseName::new(name)?;
        if let Some(p) = period {
            if p > LeaseDuration::MAX || p.subsec_nanos() != 0 {
                return Err(Error::invalid(
                    format!("break period {p:?}"),
                    "must be whole seconds from 0 to 60",
                ));
            }
        }
        let env = &self.inner.env;
        let blob = name.blob_name()?;
        let span = info_span!("lease.break", lease = %name);
        async {
            match env
                .backend
                .break_lease(&env.settings.container, &blob, period)
                .await
            {
                Ok(left) => {
                    info!(?left, "lease broken by operator");
                    Ok(BreakOutcome::Broken { left })
                }
                // The service's answer to a break when no lease is present.
                Err(Error::LeaseLost {
                    code: Some(code), ..
                }) if code == "LeaseNotPresentWithLeaseOperation" => {
                    info!("lease not held; nothing to break");
                    Ok(BreakOutcome::NotHeld)
                }
                Err(e) => Err(e),
            }
        }
        .instrument(span)
        .await
    }
}

/// What [`LeaseManager::break_lease`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakOutcome {
    /// The lease was held (or already breaking): it is broken once `left`
    /// has passed (at once when zero), and its holder keeps it until then.
    Broken {
        /// The time until the lease is broken.
        left: Duration,
    },
    /// Nobody held the lease: the service had no lease to break, and
    /// nothing changed.
    NotHeld,
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
        let blob = name.blob_name()?;
        match self
            .env
            .backend
            .get_blob(&self.env.settings.container, &blob)
            .await
        {
            Ok(Some(b)) => LeaseBlob::from_blob(name, b).map(Some),
            Ok(None) | Err(Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

impl LeaseManager {
    /// The section `key` of the document in lease blob `name`, read without
    /// the lease; `None` when the blob or the section is missing.
    pub(crate) async fn read_section(
        &self,
        name: &LeaseName,
        key: &str,
    ) -> Result<Option<serde_json::Value>> {
        Ok(self
            .inner
            .read(name)
            .await?
            .and_then(|blob| blob.document.section(key).cloned()))
    }
}

/// A lease id as it may appear in logs: never at info level, and only its
/// first characters.
pub(crate) fn short_id(id: LeaseId) -> String {
    id.to_string().chars().take(8).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn check(o: LeaseOptions) -> Result<Settings> {
        o.resolve()
    }

    #[test]
    fn defaults_are_thirty_second_leases_renewed_every_ten() {
        let s = check(LeaseOptions::default()).unwrap();
        assert_eq!(s.duration, LeaseDuration::Seconds(30));
        assert_eq!(s.renew_interval, Duration::from_secs(10));
        assert_eq!(s.container.as_str(), LeaseOptions::DEFAULT_CONTAINER);
        assert!(
            s.owner.contains(&format!("-{}-", std::process::id())),
            "{}",
            s.owner
        );
        check_owner(&s.owner).unwrap();
    }

    #[test]
    fn bad_options_are_invalid_and_name_the_option() {
        let cases = [
            (
                LeaseOptions::new().with_duration(Duration::from_secs(14)),
                "lease duration",
            ),
            (
                LeaseOptions::new().with_duration(Duration::from_secs(61)),
                "lease duration",
            ),
            (
                LeaseOptions::new().with_duration(Duration::from_millis(15_500)),
                "lease duration",
            ),
            (
                LeaseOptions::new().with_renew_interval(Duration::from_secs(30)),
                "renew interval",
            ),
            (
                LeaseOptions::new().with_renew_interval(Duration::from_secs(29)),
                "renew interval",
            ),
            (
                LeaseOptions::new().with_renew_interval(Duration::ZERO),
                "renew interval",
            ),
            (
                LeaseOptions::new().with_drift_margin(Duration::from_secs(15)),
                "drift margin",
            ),
            (
                LeaseOptions::new().with_poll_interval(Duration::from_secs(16)),
                "poll interval",
            ),
            (
                LeaseOptions::new().with_poll_interval(Duration::from_millis(1)),
                "poll interval",
            ),
            (LeaseOptions::new().with_owner(""), "owner identity"),
            (LeaseOptions::new().with_owner("é"), "owner identity"),
            (LeaseOptions::new().with_owner(" x"), "owner identity"),
        ];
        for (o, what) in cases {
            let e = check(o).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Invalid);
            assert!(e.to_string().contains(what), "{e} should name {what}");
        }
        let ok = LeaseOptions::new()
            .with_duration(Duration::from_secs(15))
            .with_renew_interval(Duration::from_secs(5))
            .with_owner("node a");
        assert!(check(ok).is_ok());
        assert!(check(LeaseOptions::new().with_infinite_duration()).is_ok());
    }

    #[tokio::test]
    async fn list_finds_leases_by_prefix_and_skips_foreign_blobs() {
        use crate::backend::BlobConditions;
        use crate::backend::memory::MemoryBackend;
        use crate::key::BlobName;

        let backend = Arc::new(MemoryBackend::new());
        let leases = LeaseManager::new(backend.clone(), LeaseOptions::default()).unwrap();
        assert!(
            leases.list("").await.unwrap().is_empty(),
            "no container yet"
        );
        for name in ["jobs/a", "jobs/b", "jobs2", "other é"] {
            leases
                .try_acquire(name)
                .await
                .unwrap()
                .unwrap()
                .release()
                .await
                .unwrap();
        }
        backend
            .put_blob(
                leases.container(),
                &BlobName::new("not.a~lease").unwrap(),
                b"x".to_vec(),
                &Default::default(),
                &BlobConditions::none(),
            )
            .await
            .unwrap();
        let names = |v: Vec<LeaseName>| v.iter().map(|n| n.as_str().to_owned()).collect::<Vec<_>>();
        assert_eq!(
            names(leases.list("jobs/").await.unwrap()),
            ["jobs/a", "jobs/b"]
        );
        assert_eq!(names(leases.list("jobs").await.unwrap()).len(), 3);
        assert_eq!(names(leases.list("").await.unwrap()).len(), 4);
        assert!(leases.list(&"x".repeat(300)).await.is_err());
    }

    #[test]
    fn poll_pauses_stay_near_the_interval_and_are_seeded() {
        let backend: Arc<dyn BlobBackend> = Arc::new(crate::lease::guard::tests::NoBackend);
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
        let backend: Arc<dyn BlobBackend> = Arc::new(crate::lease::guard::tests::NoBackend);
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
