//! [`LeaseEnv`]: what everything a lease manager hands out shares.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use time::OffsetDateTime;
use tokio::time::Instant;

use tokio::runtime::Handle;
use tracing::Instrument as _;

use crate::backend::{BlobBackend, LeaseCalls as _, LeaseId};
use crate::key::BlobName;
use crate::retry::{self, Backoff};
use crate::telemetry::Telemetry;

use super::options::Settings;
use super::seen::SeenBlobs;

#[derive(Debug)]
pub(crate) struct LeaseEnv {
    pub(crate) backend: Arc<dyn BlobBackend>,
    pub(crate) settings: Settings,
    /// The wall-clock time at `mono`: the manager's wall clock follows
    /// `tokio::time` from there.
    wall: OffsetDateTime,
    mono: Instant,
    backoffs: AtomicU64,
    /// The current run of failing requests, shared by waiting calls: (first
    /// request sent, last failure seen).
    pub(crate) recent_failures: Mutex<Option<(Instant, Instant)>>,
    pub(crate) seen: SeenBlobs,
    pub(crate) telemetry: Telemetry,
}

impl LeaseEnv {
    pub(crate) fn new(
        backend: Arc<dyn BlobBackend>,
        settings: Settings,
        telemetry: Telemetry,
    ) -> Self {
        LeaseEnv {
            telemetry,
            backend,
            settings,
            wall: OffsetDateTime::now_utc(),
            mono: Instant::now(),
            backoffs: AtomicU64::new(0),
            recent_failures: Mutex::default(),
            seen: SeenBlobs::default(),
        }
    }

    /// Pauses for waiting on a lease held elsewhere: the poll interval ±10 %.
    pub(crate) fn poll_backoff(&self) -> Backoff {
        Backoff::fixed(self.settings.options.poll_interval, self.next_seed())
    }

    /// Pauses for leader candidates on standby: from 50 ms (or the poll
    /// interval, if shorter), doubling up to 1 s (or the poll interval, if
    /// longer).
    pub(crate) fn standby_backoff(&self) -> Backoff {
        let interval = self.settings.options.poll_interval;
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

    /// Releases the lease `id` on `blob` in the background (a lease an
    /// attempt may have taken with its reply lost, or a hold dropped), when
    /// there is a runtime to send it on.
    pub(crate) fn give_back(&self, blob: &BlobName, id: LeaseId) {
        let (backend, container) = (self.backend.clone(), self.settings.container.clone());
        let blob = blob.clone();
        if let Ok(runtime) = Handle::try_current() {
            let release = async move {
                let _ = backend.release_lease(&container, &blob, id).await;
            };
            runtime.spawn(release.in_current_span());
        }
    }

    /// Wall-clock time for logs and records, following `tokio::time`.
    pub(crate) fn now_wall(&self) -> OffsetDateTime {
        time::Duration::try_from(self.mono.elapsed())
            .ok()
            .and_then(|elapsed| self.wall.checked_add(elapsed))
            .unwrap_or(self.wall)
    }

    /// The wall-clock time (unix milliseconds) of the instant `at` on this
    /// manager's clock: how processes tell each other when they poll.
    pub(crate) fn wall_ms(&self, at: Instant) -> i64 {
        let base = i64::try_from(self.wall.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX);
        let (since, sign) = match at.checked_duration_since(self.mono) {
            Some(d) => (d, 1),
            None => (self.mono.saturating_duration_since(at), -1),
        };
        let since = i64::try_from(since.as_millis()).unwrap_or(i64::MAX);
        base.saturating_add(sign * since)
    }

    /// The instant on this manager's clock of the wall-clock time `ms`
    /// (unix milliseconds), as seen from `now`.
    pub(crate) fn instant_at_ms(&self, ms: i64, now: Instant) -> Instant {
        let ahead = ms.saturating_sub(self.wall_ms(now));
        let by = Duration::from_millis(ahead.unsigned_abs());
        if ahead >= 0 {
            now + by
        } else {
            now.checked_sub(by).unwrap_or(now)
        }
    }
}
