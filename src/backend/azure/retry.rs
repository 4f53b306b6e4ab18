//! The Azure backend's transport retry policy. The SDK's own is off (it
//! reports the 409 of an insert re-sent after a lost reply).

use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::errors::Failure;
use crate::backend::notes;
use crate::retry::{Backoff, random_seed, retry_transient};

/// `with_x(value)` setters, each setting the field `x`.
macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident($field:ident: $ty:ty);)*) => {$(
        $(#[$doc])*
        pub fn $name(mut self, $field: $ty) -> Self {
            self.$field = $field;
            self
        }
    )*};
}

/// How the Azure backend retries transient transport failures (set with
/// [`AzureBackendBuilder::transport_retry`](super::AzureBackendBuilder::transport_retry);
/// conflicts are [`ConflictRetry`](crate::ConflictRetry)'s business).
/// Every request runs under it, with jittered exponential backoff bounded in
/// attempts and in total delay. Retried: 408, 429, 5xx, refused or reset
/// connections, per-attempt timeouts; after the budget,
/// [`Error::Transient`](crate::Error::Transient). Never retried: every other
/// status, and a request the HTTP stack refuses to build (such as a URL
/// over 64 KiB: [`Error::Backend`](crate::Error::Backend) at once).
///
/// After a failure that *may have been applied* (no reply, a timeout, a 5xx
/// other than 503), blindly re-sending a write is not safe:
///
/// | operation | after a possibly-applied failure |
/// |---|---|
/// | reads, lease acquire (same proposed id), renew, break, upserts, `If-Match: *` writes | re-sent as is (idempotent) |
/// | insert | re-sent; a 409 `EntityAlreadyExists` then reads the entity back and counts as success when the stored properties equal the ones written |
/// | replace / merge / delete with `If-Match: <etag>`, batches | verified first: the entities are read; if they hold what was written the write succeeded (with the stored ETag); if they still match the preconditions it is re-sent; otherwise [`Error::Conflict`](crate::Error::Conflict) |
/// | blob put / set metadata with `If-Match` or `If-None-Match: *` | re-sent; a 412 / 409 then reads the blob back and counts as success when body and metadata equal the ones written |
/// | blob delete | re-sent; a 404 then counts as success |
/// | lease release, change | re-sent; release answered `LeaseNotPresent*` / `LeaseIdMismatch*`, or change answered `LeaseIdMismatch*` with the proposed id now current, counts as success |
///
/// Defaults: 5 retries, waits from 100 ms doubling up to 4 s (jittered up
/// to twice the step), 20 s of waiting in all, 30 s per attempt. Waits and
/// timeouts run on `tokio::time`: run the backend on real time (under a
/// paused clock every attempt times out at once).
#[derive(Debug, Clone, PartialEq)]
#[must_use = "a TransportRetry does nothing until given to `AzureBackendBuilder::transport_retry`"]
pub struct TransportRetry {
    max_retries: usize,
    initial_delay: Duration,
    max_delay: Duration,
    max_total_delay: Duration,
    request_timeout: Duration,
    jitter_seed: Option<u64>,
}

impl Default for TransportRetry {
    fn default() -> Self {
        TransportRetry {
            max_retries: 5,
            initial_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(4),
            max_total_delay: Duration::from_secs(20),
            request_timeout: Duration::from_secs(30),
            jitter_seed: None,
        }
    }
}

impl TransportRetry {
    /// The default policy.
    pub fn new() -> Self {
        Self::default()
    }

    /// No retries: every failure is reported at once (a lost reply as
    /// [`Error::Transient`](crate::Error::Transient), unverified).
    pub fn none() -> Self {
        TransportRetry {
            max_retries: 0,
            ..Self::default()
        }
    }

    setters! {
        /// Retries after the first attempt, at most.
        with_max_retries(max_retries: usize);
        /// The first wait.
        with_initial_delay(initial_delay: Duration);
        /// The longest single wait.
        with_max_delay(max_delay: Duration);
        /// The most time spent waiting between attempts, in all.
        with_max_total_delay(max_total_delay: Duration);
        /// How long one attempt may take before it counts as a lost reply.
        with_request_timeout(request_timeout: Duration);
    }

    /// Seeds the jitter, for reproducible tests.
    pub fn with_jitter_seed(mut self, seed: u64) -> Self {
        self.jitter_seed = Some(seed);
        self
    }

    /// Retries after the first attempt, at most.
    pub fn max_retries(&self) -> usize {
        self.max_retries
    }

    /// How long one attempt may take.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// Runs `attempt` until it succeeds, fails for good, or the budget ends.
    pub(crate) async fn run<T, F, Fut>(
        &self,
        operation: &'static str,
        mut attempt: F,
    ) -> Result<T, Failure>
    where
        F: FnMut(Attempt) -> Fut,
        Fut: Future<Output = Result<T, Failure>>,
    {
        let seed = self.jitter_seed.unwrap_or_else(random_seed);
        let mut backoff = Backoff::doubling(self.initial_delay, self.max_delay, seed)
            .with_max_retries(u32::try_from(self.max_retries).unwrap_or(u32::MAX))
            .with_max_total(self.max_total_delay);
        // Shared by the closures below (a lock, not a cell: the future stays
        // `Send`).
        let state = Mutex::new(State {
            next: Attempt {
                number: 1,
                may_have_applied: false,
            },
            last: None,
        });
        let lock = || state.lock().unwrap_or_else(PoisonError::into_inner);
        let result = retry_transient(
            &mut backoff,
            || {
                let (now, last) = {
                    let mut s = lock();
                    (s.next, s.last.take())
                };
                if let Some((describe, throttled, at)) = last {
                    notes::retry(throttled);
                    tracing::debug!(
                        operation,
                        attempt = now.number,
                        waited = ?at.elapsed(),
                        failure = %describe,
                        "transient failure; retrying"
                    );
                }
                attempt(now)
            },
            |failure: &Failure| {
                // 503 `ServerBusy` and 429 leave a request unapplied.
                let throttled = matches!(failure.status(), Some((503 | 429, _)));
                if throttled {
                    notes::throttled();
                }
                if !failure.is_transient() {
                    return None;
                }
                let mut s = lock();
                s.next = Attempt {
                    number: s.next.number + 1,
                    may_have_applied: s.next.may_have_applied || failure.may_have_applied(),
                };
                s.last = Some((failure.to_string(), throttled, Instant::now()));
                Some(Duration::MAX)
            },
        )
        .await;
        if let Err(failure) = &result
            && failure.is_transient()
        {
            tracing::warn!(
                operation,
                attempts = lock().next.number - 1,
                failure = %failure,
                "transient failure; giving up"
            );
        }
        result
    }
}

/// The next attempt, and the last failure (described, throttled, when).
struct State {
    next: Attempt,
    last: Option<(String, bool, Instant)>,
}

/// What an attempt is told about the attempts before it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Attempt {
    /// From 1.
    pub(crate) number: u32,
    pub(crate) may_have_applied: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `policy` over attempts that fail as `failures` says, in turn
    /// (the last one repeating); returns the final failure and what each
    /// attempt was told.
    async fn run_failing(
        policy: &TransportRetry,
        failures: impl Fn(u32) -> Failure,
    ) -> (Failure, Vec<Attempt>) {
        let mut seen = Vec::new();
        let r: Result<(), Failure> = policy
            .run("test", |a| {
                seen.push(a);
                std::future::ready(Err(failures(a.number)))
            })
            .await;
        (r.unwrap_err(), seen)
    }

    #[tokio::test(start_paused = true)]
    async fn retries_transient_failures_within_budget() {
        let policy = TransportRetry::new()
            .with_max_retries(3)
            .with_jitter_seed(7);
        let (e, seen) = run_failing(&policy, |_| Failure::NotSent("refused".into())).await;
        assert!(matches!(e, Failure::NotSent(_)));
        assert_eq!(seen.len(), 4, "one attempt and three retries");
        assert_eq!(seen.last().map(|a| a.number), Some(4));
        assert!(seen.iter().all(|a| !a.may_have_applied));
    }

    #[tokio::test(start_paused = true)]
    async fn never_retries_conflicts() {
        for status in [409, 412, 404, 400] {
            let (e, seen) = run_failing(&TransportRetry::new(), |_| Failure::Status {
                status,
                code: None,
            })
            .await;
            assert!(matches!(e, Failure::Status { .. }));
            assert_eq!(seen.len(), 1);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn remembers_possibly_applied_attempts() {
        let (_, seen) = run_failing(&TransportRetry::new().with_max_retries(2), |n| {
            if n == 1 {
                Failure::ReplyLost("reset".into())
            } else {
                Failure::NotSent("refused".into())
            }
        })
        .await;
        assert!(!seen[0].may_have_applied);
        assert!(seen[1].may_have_applied && seen[2].may_have_applied);
    }

    #[tokio::test(start_paused = true)]
    async fn succeeds_after_transient_failures() {
        let r = TransportRetry::new()
            .run("test", |a| {
                std::future::ready(if a.number < 3 {
                    Err(Failure::NotSent("refused".into()))
                } else {
                    Ok(a.number)
                })
            })
            .await;
        assert!(matches!(r, Ok(3)));
    }

    #[tokio::test(start_paused = true)]
    async fn total_delay_is_bounded() {
        let policy = TransportRetry::new()
            .with_max_retries(1000)
            .with_initial_delay(Duration::from_secs(1))
            .with_max_delay(Duration::from_secs(1))
            .with_max_total_delay(Duration::from_secs(10));
        let start = tokio::time::Instant::now();
        let (_, seen) = run_failing(&policy, |_| Failure::NotSent("x".into())).await;
        assert!(start.elapsed() <= Duration::from_secs(10));
        assert!(seen.len() < 20);
    }
}
