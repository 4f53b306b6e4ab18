//! A held lease's shared state and its renewal task (see the
//! [module docs](super#renewal-and-loss)).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures_util::StreamExt as _;
use futures_util::future::BoxFuture;
use futures_util::stream::FuturesUnordered;
use tokio::time::{Instant, sleep, sleep_until};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, debug_span, warn};

use crate::backend::{LeaseCalls as _, LeaseId, LeaseState};
use crate::error::{Error, Result};
use crate::key::BlobName;
use crate::retry::{self, Backoff};

use super::env::LeaseEnv;
use super::name::LeaseName;

/// The pauses between retries under a held lease: 250 ms doubling to 2 s,
/// not jittered (one renewer per lease, bounded by its deadline).
fn retry_backoff() -> Backoff {
    Backoff::doubling(Duration::from_millis(250), Duration::from_secs(2), 0).without_jitter()
}

/// The shortest time a renew is waited for before another is sent beside it.
const ATTEMPT_MIN: Duration = Duration::from_secs(1);

/// The most renews of one round waiting for their answers at once.
const MAX_IN_FLIGHT: usize = 3;

/// Until when a renew sent at `sent` is waited for alone.
fn attempt_cutoff(sent: Instant, deadline: Instant) -> Instant {
    let left = deadline.saturating_duration_since(sent);
    (sent + (left / 3).max(ATTEMPT_MIN)).min(deadline)
}

/// What the holders of a lease know of its validity.
#[derive(Debug)]
struct Validity {
    /// When the last successful acquire or renew was sent.
    last_send: Instant,
    /// Until when the lease is surely ours; `None` for an infinite lease.
    valid_until: Option<Instant>,
    /// Why the lease was lost, with the service's code (the first wins).
    loss: Option<(String, Option<String>)>,
}

/// What every holder of one blob lease (the guards, the renewal task, status
/// handles) shares.
pub(crate) struct LeaseShared {
    pub(crate) name: LeaseName,
    pub(crate) id: LeaseId,
    pub(crate) env: Arc<LeaseEnv>,
    pub(crate) blob: BlobName,
    validity: Mutex<Validity>,
    /// Cancelled when the lease is lost (never on a normal release).
    pub(crate) lost: CancellationToken,
    /// Cancelled when the process stops holding the lease: ends renewal.
    pub(crate) stop: CancellationToken,
}

impl LeaseShared {
    pub(crate) fn new(
        name: LeaseName,
        id: LeaseId,
        env: Arc<LeaseEnv>,
        blob: BlobName,
        sent: Instant,
    ) -> Self {
        let options = &env.settings.options;
        let valid_until =
            (options.duration).map(|len| sent + len.saturating_sub(options.drift_margin));
        LeaseShared {
            name,
            id,
            env,
            blob,
            validity: Mutex::new(Validity {
                last_send: sent,
                valid_until,
                loss: None,
            }),
            lost: CancellationToken::new(),
            stop: CancellationToken::new(),
        }
    }

    fn validity(&self) -> MutexGuard<'_, Validity> {
        self.validity.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a successful renew sent at `sent`.
    fn renewed(&self, sent: Instant) {
        let options = &self.env.settings.options;
        if let Some(len) = options.duration {
            let mut t = self.validity();
            let until = sent + len.saturating_sub(options.drift_margin);
            t.last_send = t.last_send.max(sent);
            t.valid_until = Some(t.valid_until.map_or(until, |old| old.max(until)));
        }
    }

    /// The local deadline, `None` for an infinite lease.
    pub(crate) fn valid_until(&self) -> Option<Instant> {
        self.validity().valid_until
    }

    /// How long the lease is surely still ours; zero once lost or released,
    /// [`Duration::MAX`] for a held infinite lease.
    pub(crate) fn remaining(&self) -> Duration {
        if self.lost.is_cancelled() || self.stop.is_cancelled() {
            return Duration::ZERO;
        }
        match self.valid_until() {
            None => Duration::MAX,
            Some(until) => until.saturating_duration_since(Instant::now()),
        }
    }

    /// Whether the lease is lost; a passed deadline is recorded as a loss
    /// even before the renewal task notices.
    pub(crate) fn is_lost(&self) -> bool {
        if self.lost.is_cancelled() {
            return true;
        }
        match self.valid_until() {
            Some(until) if Instant::now() >= until && !self.stop.is_cancelled() => {
                self.mark_lost("its local validity deadline passed", None);
                true
            }
            _ => false,
        }
    }

    /// Records the loss (the first reason wins) and fires `lost`.
    pub(crate) fn mark_lost(&self, why: impl Into<String>, code: Option<String>) {
        {
            let mut validity = self.validity();
            if validity.loss.is_some() {
                return;
            }
            let why = why.into();
            warn!(lease = %self.name, reason = %why, "lease lost");
            validity.loss = Some((why, code));
        }
        self.lost.cancel();
        self.stop.cancel();
    }

    pub(crate) fn lost_error(&self) -> Error {
        let validity = self.validity();
        let (why, code) = (validity.loss.as_ref()).map_or((String::new(), None), |(why, code)| {
            (format!(": {why}"), code.clone())
        });
        Error::LeaseLost {
            what: format!("lease {}{why}", self.name),
            code,
        }
    }

    /// Marks the lease lost when `error` says it is not ours any more.
    pub(crate) fn note_error(&self, error: &Error) {
        if classify(error) == Failure::Lost {
            self.mark_lost(
                refusal("a request under it", error),
                error.code().map(str::to_owned),
            );
        }
    }
}

/// Leaves the lease id (a capability) out.
impl std::fmt::Debug for LeaseShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("name", &self.name)
            .field("remaining", &self.remaining())
            .field("lost", &self.lost.is_cancelled())
            .field(
                "released",
                &(self.stop.is_cancelled() && !self.lost.is_cancelled()),
            )
            .finish_non_exhaustive()
    }
}

/// Why a lease counts as lost after the service refused `action`.
fn refusal(action: &str, error: &Error) -> String {
    match error {
        Error::NotFound { .. } => format!("the lease blob is gone ({action} found nothing)"),
        Error::LeaseHeld { .. } => format!("another owner holds it ({action} was refused)"),
        _ => format!("the service refused {action}"),
    }
}

/// How a failed lease request is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The lease is definitively not ours any more.
    Lost,
    /// Worth retrying as is.
    Transient,
    /// Unknown outcome: verify before deciding.
    Ambiguous,
}

/// Sorts a failed renew (or write under the lease) into [`Failure`] kinds.
pub(crate) fn classify(error: &Error) -> Failure {
    const LOST_CODE_PREFIXES: [&str; 4] = [
        "LeaseIdMismatch",
        "LeaseNotPresent",
        "LeaseIsBroken",
        "LeaseIsBreaking",
    ];
    if error
        .code()
        .is_some_and(|code| LOST_CODE_PREFIXES.iter().any(|p| code.starts_with(p)))
    {
        return Failure::Lost;
    }
    match error {
        Error::LeaseLost { .. } | Error::LeaseHeld { .. } | Error::NotFound { .. } => Failure::Lost,
        Error::Transient { .. } => Failure::Transient,
        _ => Failure::Ambiguous,
    }
}

/// How one renew round ended.
enum Round {
    Renewed,
    Stopped,
    Lost,
}

/// The background task that keeps a timed lease.
impl LeaseShared {
    /// Renews every interval until stopped or lost.
    pub(crate) async fn renewal(self: Arc<Self>) {
        let span = debug_span!("lease.renew", lease = %self.name);
        async move {
            loop {
                let Some(deadline) = self.valid_until() else {
                    return;
                };
                let next = self.validity().last_send + self.env.settings.renew_interval;
                tokio::select! {
                    biased;
                    () = self.stop.cancelled() => return,
                    () = sleep_until(deadline) => {
                        self.mark_lost("its local validity deadline passed", None);
                        return;
                    }
                    () = sleep_until(next) => {}
                }
                match self.round(deadline).await {
                    Round::Renewed => (self.env.telemetry)
                        .renewal_lag(Instant::now().saturating_duration_since(next)),
                    Round::Stopped | Round::Lost => return,
                }
            }
        }
        .instrument(span)
        .await
    }

    /// Renews once before `deadline`, retrying and verifying as needed.
    async fn round(&self, deadline: Instant) -> Round {
        let mut backoff = retry_backoff();
        loop {
            // Renewing twice is harmless (only our id can renew); the first
            // answer counts.
            let mut in_flight = FuturesUnordered::new();
            let mut newest = Instant::now();
            in_flight.push(self.attempt(newest));
            let (sent, result) = loop {
                let cutoff = attempt_cutoff(newest, deadline);
                tokio::select! {
                    biased;
                    () = self.stop.cancelled() => return Round::Stopped,
                    () = sleep_until(deadline) => return self.deadline_passed(),
                    Some(answer) = in_flight.next() => break answer,
                    () = sleep_until(cutoff), if in_flight.len() < MAX_IN_FLIGHT => {
                        debug!(waited = ?cutoff - newest, "renew unanswered; sending another beside it");
                        newest = Instant::now();
                        in_flight.push(self.attempt(newest));
                    }
                }
            };
            drop(in_flight);
            let error = match result {
                Ok(()) => {
                    self.renewed(sent);
                    debug!("renewed");
                    return Round::Renewed;
                }
                Err(e) => e,
            };
            match classify(&error) {
                Failure::Lost => {
                    self.mark_lost(
                        refusal("its renewal", &error),
                        error.code().map(str::to_owned),
                    );
                    return Round::Lost;
                }
                Failure::Transient => {
                    debug!(error = %error, "renew failed transiently; retrying");
                }
                Failure::Ambiguous => {
                    debug!(error = %error, "renew outcome unknown; verifying");
                    if let Some(end) = self.verify(deadline, &error).await {
                        return end;
                    }
                }
            }
            tokio::select! {
                biased;
                () = self.stop.cancelled() => return Round::Stopped,
                () = sleep_until(deadline) => return self.deadline_passed(),
                () = sleep(backoff.pause()) => {}
            }
        }
    }

    /// One renew request sent at `sent`, answered with that instant.
    fn attempt(&self, sent: Instant) -> BoxFuture<'_, (Instant, Result<()>)> {
        Box::pin(async move {
            let env = &self.env;
            let r = (env.backend)
                .renew_lease(&env.settings.container, &self.blob, self.id)
                .await;
            (sent, r)
        })
    }

    fn deadline_passed(&self) -> Round {
        self.mark_lost(
            "its local validity deadline passed before a renewal succeeded",
            None,
        );
        Round::Lost
    }

    /// Reads the blob's lease state after an ambiguous renew: `None` to
    /// retry (still leased, or unknown), otherwise how the round ends.
    async fn verify(&self, deadline: Instant, error: &Error) -> Option<Round> {
        let read = tokio::select! {
            biased;
            () = self.stop.cancelled() => return Some(Round::Stopped),
            () = sleep_until(deadline) => return Some(self.deadline_passed()),
            r = self.env.backend.blob_properties(&self.env.settings.container, &self.blob) => r,
        };
        let why = match read {
            Ok(Some(p)) if p.lease.state == LeaseState::Leased => return None,
            Ok(Some(p)) => format!("renewal failed and the blob's lease is {:?}", p.lease.state),
            Ok(None) => "the lease blob is gone".to_owned(),
            Err(e) if classify(&e) == Failure::Lost => {
                format!(
                    "renewal failed and {}",
                    refusal("a read of the lease blob", &e)
                )
            }
            Err(_) => {
                debug!("verification failed too; retrying");
                return None;
            }
        };
        self.mark_lost(why, error.code().map(str::to_owned));
        Some(Round::Lost)
    }
}

/// Retries `op` (safe to repeat) on transient failures while `shared` is
/// valid: three retries, each pause at most half the validity left.
pub(crate) async fn retry_transient<T, F, Fut>(shared: &LeaseShared, op: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let mut backoff = retry_backoff().with_max_retries(3);
    retry::retry_transient(&mut backoff, op, |e: &Error| {
        (e.is_transient() && !shared.is_lost()).then(|| shared.remaining() / 2)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewal_failures_are_classified() {
        let lost = [
            Error::from_service(409, Some("LeaseIdMismatchWithLeaseOperation"), "x"),
            Error::from_service(409, Some("LeaseNotPresentWithLeaseOperation"), "x"),
            Error::from_service(409, Some("LeaseIsBrokenAndCannotBeRenewed"), "x"),
            Error::from_service(409, Some("LeaseIsBreakingAndCannotBeRenewed"), "x"),
            Error::from_service(412, Some("LeaseNotPresentWithBlobOperation"), "x"),
            Error::from_service(404, Some("BlobNotFound"), "x"),
        ];
        for e in &lost {
            assert_eq!(classify(e), Failure::Lost, "{e}");
        }
        let transient = Error::from_service(503, Some("ServerBusy"), "x");
        assert_eq!(classify(&transient), Failure::Transient);
        let ambiguous = [
            Error::Timeout {
                what: "renew".into(),
                after: Duration::from_secs(5),
            },
            Error::from_service(400, Some("InvalidHeaderValue"), "x"),
        ];
        for e in &ambiguous {
            assert_eq!(classify(e), Failure::Ambiguous, "{e}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_renew_gets_a_third_of_the_validity_left_and_at_least_a_second() {
        let now = Instant::now();
        let secs = Duration::from_secs;
        assert_eq!(attempt_cutoff(now, now + secs(9)), now + secs(3));
        assert_eq!(attempt_cutoff(now, now + secs(2)), now + secs(1));
        // Never past the deadline.
        let close = now + Duration::from_millis(400);
        assert_eq!(attempt_cutoff(now, close), close);
        assert_eq!(attempt_cutoff(now, now), now);
    }

    #[tokio::test(start_paused = true)]
    async fn validity_counts_from_send_time_minus_drift() {
        let sent = Instant::now();
        let options = (crate::lease::LeaseOptions::new())
            .with_duration(Duration::from_secs(30))
            .with_drift_margin(Duration::from_secs(2));
        let backend = Arc::new(crate::backend::memory::MemoryBackend::new());
        let env = LeaseEnv::new(backend, options.resolve().unwrap(), Default::default());
        let shared = LeaseShared::new(
            LeaseName::new("v").unwrap(),
            LeaseId::new_random(),
            Arc::new(env),
            BlobName::new("v").unwrap(),
            sent,
        );
        assert_eq!(shared.remaining(), Duration::from_secs(28));
        tokio::time::advance(Duration::from_secs(10)).await;
        shared.renewed(sent + Duration::from_secs(5));
        assert_eq!(shared.remaining(), Duration::from_secs(23));
        // An older send never shortens validity.
        shared.renewed(sent);
        assert_eq!(shared.remaining(), Duration::from_secs(23));
        tokio::time::advance(Duration::from_secs(23)).await;
        assert!(shared.is_lost());
        assert!(shared.lost.is_cancelled());
        assert_eq!(
            shared.lost_error().kind(),
            crate::error::ErrorKind::LeaseLost
        );
    }
}
