//! Run-once: exactly one process runs a piece of work; the others wait for
//! its completion marker (`leasehold_once` in the lease blob's metadata,
//! written under the lease: `started` before the work, `done` after it).

use std::future::Future;

use tokio::time::{Instant, sleep, timeout_at};
use tracing::{Instrument, info, info_span, warn};

use crate::backend::notes;
use crate::error::{Error, ErrorKind, Result};

use super::document::{META_ONCE, META_ONCE_ATTEMPTS, OnceState, meta_set};
use super::guard::LeaseStatus;
use super::manager::{AcquireMode, LeaseManager};
use super::name::LeaseName;
use super::outage::{Outage, storage_failed};

/// What [`LeaseManager::do_once`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OnceOutcome<T> {
    /// This caller ran the work, and it succeeded.
    Ran {
        /// What the work returned.
        output: T,
        /// Whether an earlier attempt started and never finished, so the
        /// work may be partly done.
        previous_attempt_unfinished: bool,
    },
    /// The work had already been done (by this or another process).
    AlreadyDone,
}

/// What the run-once work is told.
#[derive(Debug, Clone)]
pub struct OnceContext {
    status: LeaseStatus,
    previous_attempt_unfinished: bool,
    attempt: u64,
}

impl OnceContext {
    /// Whether an earlier attempt never finished.
    pub fn previous_attempt_unfinished(&self) -> bool {
        self.previous_attempt_unfinished
    }

    /// Which attempt this is (1 for the first).
    pub fn attempt(&self) -> u64 {
        self.attempt
    }

    /// The lease held while the work runs.
    pub fn lease(&self) -> &LeaseStatus {
        &self.status
    }
}

impl LeaseManager {
    /// Runs `f` exactly once across all processes sharing the lease `name`;
    /// the others wait for the marker and return [`OnceOutcome::AlreadyDone`].
    /// If `f` fails, or its process dies, the next caller runs it again with
    /// [`OnceContext::previous_attempt_unfinished`]. Waits as long as another
    /// caller works (bound it with `tokio::time::timeout`).
    ///
    /// # Errors
    /// `f`'s error (the marker stays `started`); [`Error::Invalid`] for a bad
    /// name; [`Error::Unavailable`] when storage kept failing (`f` did not
    /// run); [`Error::LeaseLost`] when the lease was lost before the `done`
    /// marker was written; the backend's error when a request fails.
    pub async fn do_once<F, Fut, T, E>(&self, name: &str, f: F) -> Result<OnceOutcome<T>, E>
    where
        F: FnOnce(OnceContext) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: From<Error>,
    {
        let name = LeaseName::new(name)?;
        let span = info_span!("lease.do_once", lease = %name);
        let this = &self.inner;
        async move {
            let mut backoff = this.env.poll_backoff();
            // One failure window for the whole wait, reads and acquires alike.
            let mut outage = Outage::new(&this.env);
            let guard = loop {
                let sent = Instant::now();
                let read = timeout_at(outage.limit(sent), self.once_state(name.as_str())).await;
                let read = read.unwrap_or_else(|_| {
                    Err(Error::Timeout {
                        what: format!("no reply to a read of lease {name}"),
                        after: sent.elapsed(),
                    })
                });
                match read {
                    Ok(OnceState::Done { .. }) => return Ok(OnceOutcome::AlreadyDone),
                    Ok(_) => outage.answered(&this.env),
                    Err(e) if storage_failed(&e) => outage.failed(sent, e, &this.env, false)?,
                    Err(e) => return Err(e.into()),
                }
                if let Some(guard) = this
                    .acquire(name.clone(), AcquireMode::LocalThenTry, &mut outage)
                    .await?
                {
                    break guard;
                }
                sleep(backoff.pause()).await;
            };
            let outcome = async {
                let state = OnceState::from_metadata(&guard.metadata().await?);
                let (attempts, previous_attempt_unfinished) = match state {
                    OnceState::Done { .. } => return Ok(OnceOutcome::AlreadyDone),
                    OnceState::Started { attempts } => (attempts, true),
                    OnceState::NotStarted => (0, false),
                };
                let attempt = attempts.saturating_add(1);
                guard
                    .update_metadata(|m| {
                        meta_set(m, META_ONCE, "started".into());
                        meta_set(m, META_ONCE_ATTEMPTS, attempt.to_string());
                    })
                    .await?;
                if previous_attempt_unfinished {
                    warn!(
                        attempt,
                        "a previous run-once attempt did not finish; running again"
                    );
                }
                let ctx = OnceContext {
                    status: guard.status(),
                    previous_attempt_unfinished,
                    attempt,
                };
                let output = f(ctx).await?;
                guard
                    .update_metadata(|m| meta_set(m, META_ONCE, "done".into()))
                    .await?;
                info!(attempt, "run-once work done");
                Ok(OnceOutcome::Ran {
                    output,
                    previous_attempt_unfinished,
                })
            }
            .await;
            let _ = guard.release().await;
            outcome
        }
        .instrument(span)
        .await
    }

    /// The run-once state of `name`, read without the lease.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad name; the backend's error.
    pub async fn once_state(&self, name: &str) -> Result<OnceState> {
        let env = &self.inner.env;
        let blob = env.settings.blob_of(&LeaseName::new(name)?)?;
        let read = env.backend.blob_properties(&env.settings.container, &blob);
        match notes::expecting(&[ErrorKind::NotFound], read).await {
            Ok(Some(p)) => Ok(OnceState::from_metadata(&p.metadata)),
            Ok(None) | Err(Error::NotFound { .. }) => Ok(OnceState::NotStarted),
            Err(e) => Err(e),
        }
    }
}
