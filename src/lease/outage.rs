//! How long a wait for a lease rides out [failing storage](super#failing-storage).
//! Calls of one manager join each other's run of failures, so tasks queued
//! behind one that gave up do not each wait the bound again.

use std::sync::{MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;
use tracing::{debug, warn};

use crate::error::Error;

use super::env::LeaseEnv;

/// How close to the last failure of another call a first failure must come
/// to join its run: the longest pause between retries, and some.
const JOIN_WITHIN: Duration = Duration::from_secs(3);

/// The failure window of one waiting call.
#[derive(Debug)]
pub(crate) struct Outage {
    bound: Duration,
    /// When the first request of the current run of failures was sent.
    since: Option<Instant>,
    /// The last failure, kept for the error at the caller's deadline.
    last: Option<Error>,
}

fn recent_failures(env: &LeaseEnv) -> MutexGuard<'_, Option<(Instant, Instant)>> {
    env.recent_failures
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// Whether storage failed (transiently, or with no reply in time) rather
/// than answered.
pub(crate) fn storage_failed(e: &Error) -> bool {
    e.is_transient() || matches!(e, Error::Timeout { .. })
}

impl Outage {
    pub(crate) fn new(env: &LeaseEnv) -> Self {
        Outage {
            bound: env.settings.options.unavailable_after,
            since: None,
            last: None,
        }
    }

    /// Storage answered (whatever it said): the run of failures is over.
    pub(crate) fn answered(&mut self, env: &LeaseEnv) {
        self.since = None;
        self.last = None;
        *recent_failures(env) = None;
    }

    /// When the current run of failures (or, without one, a run starting
    /// with a request sent at `sent`) reaches the bound.
    pub(crate) fn limit(&self, sent: Instant) -> Instant {
        let from = self.since.unwrap_or(sent);
        from.checked_add(self.bound)
            .unwrap_or_else(|| from + Duration::from_secs(86_400))
    }

    /// Records that a request sent at `sent` failed with `error`. Returns
    /// [`Error::Unavailable`] once failures have gone on for the bound, or
    /// when the wait ends now (`end`: the caller's deadline came).
    pub(crate) fn failed(
        &mut self,
        sent: Instant,
        error: Error,
        env: &LeaseEnv,
        end: bool,
    ) -> Result<(), Error> {
        if self.since.is_none() {
            warn!(error = %error, endpoint = %env.backend.endpoint(), "storage request failed; retrying");
        } else {
            debug!(error = %error, "storage request failed again; retrying");
        }
        let now = Instant::now();
        let since = {
            let mut recent = recent_failures(env);
            let since = match (self.since, *recent) {
                (Some(since), _) => since,
                (None, Some((since, last)))
                    if sent.saturating_duration_since(last) <= JOIN_WITHIN =>
                {
                    since
                }
                (None, _) => sent,
            };
            *recent = Some((since, now));
            since
        };
        self.since = Some(since);
        if end || now.saturating_duration_since(since) >= self.bound {
            return Err(self.unavailable(error, env));
        }
        self.last = Some(error);
        Ok(())
    }

    /// The error that ends a wait during a run of failures (the caller's
    /// deadline came first): [`Error::Unavailable`] with the last failure.
    pub(crate) fn give_up(&mut self, env: &LeaseEnv) -> Option<Error> {
        let last = self.last.take()?;
        Some(self.unavailable(last, env))
    }

    fn unavailable(&self, error: Error, env: &LeaseEnv) -> Error {
        let after = self.since.map_or(Duration::ZERO, |since| since.elapsed());
        warn!(endpoint = %env.backend.endpoint(), ?after, "storage unavailable; giving up");
        Error::Unavailable {
            endpoint: env.backend.endpoint(),
            after,
            source: Box::new(error),
        }
    }
}
