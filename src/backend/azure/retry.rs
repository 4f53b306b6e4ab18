//! The Azure backend's retry policy: the one place that decides what is
//! retried, how often and how long to wait.
//!
//! The SDK's own retry policy is switched off (it re-sends a POST insert after
//! a lost reply and then reports the 409 of its own first attempt). Instead
//! every operation runs in a loop here, with jittered exponential backoff from
//! `backon`, bounded in attempts and in total delay:
//!
//! | failure | retried? |
//! |---|---|
//! | 408, 429, 5xx, connection refused, connection reset, per-attempt timeout | yes, until the budget is spent; then [`Error::Transient`](crate::Error::Transient) |
//! | 409, 412, 404, 400 and every other status | never |
//! | a request the HTTP stack refuses to build (such as a URL over its 64 KiB limit): never sent | never: [`Error::Backend`](crate::Error::Backend) at once (filters are checked against [`Filter::MAX_LEN`](crate::query::Filter::MAX_LEN) before this point) |
//!
//! What is re-sent after a failure that *may have been applied* (no reply, a
//! timeout, a 5xx other than 503) depends on the operation, because blindly
//! re-sending a write is not safe:
//!
//! | operation | after a possibly-applied failure |
//! |---|---|
//! | reads, lease acquire (same proposed id), renew, break, upserts, `If-Match: *` writes | re-sent as is (idempotent) |
//! | insert | re-sent; a 409 `EntityAlreadyExists` then reads the entity back and counts as success when the stored properties equal the ones written |
//! | replace / merge / delete with `If-Match: <etag>`, batches | verified first: the entities are read; if they hold what was written the write succeeded (with the stored ETag); if they still match the preconditions it is re-sent; otherwise [`Error::Conflict`](crate::Error::Conflict) |
//! | blob put / set metadata with `If-Match` or `If-None-Match: *` | re-sent; a 412 / 409 then reads the blob back and counts as success when body and metadata equal the ones written |
//! | blob delete | re-sent; a 404 then counts as success |
//! | lease release, change | re-sent; release answered `LeaseNotPresent*` / `LeaseIdMismatch*`, or change answered `LeaseIdMismatch*` with the proposed id now current, counts as success |

use std::time::Duration;

use backon::{BackoffBuilder as _, ExponentialBackoff, ExponentialBuilder};

use super::errors::Failure;

/// How the Azure backend retries transient failures (see the
/// [module docs](self) for what is retried and how).
///
/// The defaults: up to 5 retries, starting at 100 ms and doubling up to 4 s
/// per wait, at most 20 s of waiting in all, each wait stretched by a random
/// 0–100 %; each attempt may take at most 30 s.
///
/// Waits and per-attempt timeouts run on `tokio::time`. Under a paused
/// clock (tokio's `test-util`) the clock jumps ahead while a request waits on
/// the network, so every attempt would time out at once: run the Azure
/// backend on real time.
#[derive(Debug, Clone, PartialEq)]
#[must_use = "a RetryPolicy does nothing until given to `AzureBackendBuilder::retry_policy`"]
pub struct RetryPolicy {
    max_retries: usize,
    initial_delay: Duration,
    max_delay: Duration,
    max_total_delay: Duration,
    request_timeout: Duration,
    jitter_seed: Option<u64>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 5,
            initial_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(4),
            max_total_delay: Duration::from_secs(20),
            request_timeout: Duration::from_secs(30),
            jitter_seed: None,
        }
    }
}

impl RetryPolicy {
    /// The default policy.
    pub fn new() -> Self {
        Self::default()
    }

    /// No retries: every failure is reported at once. (A write whose reply
    /// was lost is then reported as
    /// [`Error::Transient`](crate::Error::Transient) without a read-back:
    /// the caller cannot know whether it was applied.)
    pub fn none() -> Self {
        RetryPolicy {
            max_retries: 0,
            ..Self::default()
        }
    }

    /// Retries after the first attempt, at most.
    pub fn with_max_retries(mut self, n: usize) -> Self {
        self.max_retries = n;
        self
    }

    /// The first wait.
    pub fn with_initial_delay(mut self, d: Duration) -> Self {
        self.initial_delay = d;
        self
    }

    /// The longest single wait (before jitter).
    pub fn with_max_delay(mut self, d: Duration) -> Self {
        self.max_delay = d;
        self
    }

    /// The most time spent waiting between attempts, in all.
    pub fn with_max_total_delay(mut self, d: Duration) -> Self {
        self.max_total_delay = d;
        self
    }

    /// How long one attempt may take before it counts as a lost reply.
    pub fn with_request_timeout(mut self, d: Duration) -> Self {
        self.request_timeout = d;
        self
    }

    /// Seeds the jitter, for reproducible tests. Unseeded, each operation
    /// draws a fresh random seed.
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

    pub(crate) fn start(&self, operation: &'static str) -> Retrier {
        let seed = self
            .jitter_seed
            .unwrap_or_else(|| uuid::Uuid::new_v4().as_u64_pair().0);
        let backoff = ExponentialBuilder::default()
            .with_min_delay(self.initial_delay)
            .with_max_delay(self.max_delay)
            .with_factor(2.0)
            .with_max_times(self.max_retries)
            .with_total_delay(Some(self.max_total_delay))
            .with_jitter()
            .with_jitter_seed(seed)
            .build();
        Retrier {
            backoff,
            operation,
            attempt: 1,
            applied_maybe: false,
        }
    }
}

/// The retry state of one operation.
pub(crate) struct Retrier {
    backoff: ExponentialBackoff,
    operation: &'static str,
    attempt: u32,
    applied_maybe: bool,
}

impl Retrier {
    /// Called with the failure of an attempt. Waits and returns `Ok(())` when
    /// the operation should try again; returns the failure when it is not
    /// transient or the budget is spent.
    pub(crate) async fn wait(&mut self, failure: Failure) -> Result<(), Failure> {
        if !failure.is_transient() {
            return Err(failure);
        }
        self.applied_maybe |= failure.may_have_applied();
        match self.backoff.next() {
            Some(delay) => {
                tracing::debug!(
                    operation = self.operation,
                    attempt = self.attempt,
                    ?delay,
                    failure = %failure.describe(),
                    "transient failure; retrying"
                );
                tokio::time::sleep(delay).await;
                self.attempt += 1;
                Ok(())
            }
            None => {
                tracing::warn!(
                    operation = self.operation,
                    attempts = self.attempt,
                    failure = %failure.describe(),
                    "transient failure; giving up"
                );
                Err(failure)
            }
        }
    }

    /// Whether an earlier attempt of this operation failed in a way that may
    /// have applied it (so its effect may already be stored).
    pub(crate) fn may_have_applied(&self) -> bool {
        self.applied_maybe
    }

    /// The number of the current attempt, from 1.
    #[cfg(test)]
    pub(crate) fn attempt(&self) -> u32 {
        self.attempt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn retries_transient_failures_within_budget() {
        let policy = RetryPolicy::new().with_max_retries(3).with_jitter_seed(7);
        let mut r = policy.start("test");
        for _ in 0..3 {
            r.wait(Failure::NotSent("refused".into())).await.unwrap();
        }
        assert!(!r.may_have_applied());
        let e = r
            .wait(Failure::NotSent("refused".into()))
            .await
            .unwrap_err();
        assert!(matches!(e, Failure::NotSent(_)));
        assert_eq!(r.attempt(), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn never_retries_conflicts() {
        let mut r = RetryPolicy::new().start("test");
        for status in [409, 412, 404, 400] {
            let f = Failure::Status { status, code: None };
            assert!(r.wait(f).await.is_err());
        }
        assert_eq!(r.attempt(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn remembers_possibly_applied_attempts() {
        let mut r = RetryPolicy::new().start("test");
        r.wait(Failure::ReplyLost("reset".into())).await.unwrap();
        assert!(r.may_have_applied());
    }

    #[tokio::test(start_paused = true)]
    async fn total_delay_is_bounded() {
        let policy = RetryPolicy::new()
            .with_max_retries(1000)
            .with_initial_delay(Duration::from_secs(1))
            .with_max_delay(Duration::from_secs(1))
            .with_max_total_delay(Duration::from_secs(10));
        let mut r = policy.start("test");
        let start = tokio::time::Instant::now();
        while r.wait(Failure::NotSent("x".into())).await.is_ok() {}
        assert!(start.elapsed() <= Duration::from_secs(10));
        assert!(r.attempt() < 20);
    }
}
