//! Backoff and retries: the one home of "wait, then try again".
//!
//! Optimistic loops ([`Table::update_with`](crate::table::Table::update_with))
//! retry a [`Conflict`](crate::Error::Conflict) by *re-reading*, never by
//! re-sending the stale write ([`ConflictRetry`]); transient failures are
//! retried inside the Azure backend. Nothing retries a 409 or 412 blindly.
//!
//! Every pause comes from one [`Backoff`]: seedable (tests replay it),
//! jittered (nodes do not retry in lock-step), optionally bounded.
//!
//! The schedule is not the `backon` crate's (1.6) because its jittered
//! pauses may reach twice their cap, its doubling in `f32` seconds drifts
//! (100 ms doubles to 200.000003 ms, which exact schedules' tests see), and
//! its constant pace jitters by up to +100 %, where polls want ±10 %.

use std::future::Future;
use std::time::Duration;

use crate::error::{Error, Result};

/// How [`Table::update_with`](crate::table::Table::update_with) retries after
/// a conflict: jittered exponential backoff, bounded by an attempt count.
/// Configured with [`StoreBuilder::conflict_retry`](crate::StoreBuilder::conflict_retry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConflictRetry {
    max_attempts: u32,
    min_delay: Duration,
    max_delay: Duration,
}

impl Default for ConflictRetry {
    /// 10 attempts, waiting 2 ms doubling up to 200 ms, with jitter.
    fn default() -> Self {
        ConflictRetry {
            max_attempts: 10,
            min_delay: Duration::from_millis(2),
            max_delay: Duration::from_millis(200),
        }
    }
}

impl ConflictRetry {
    /// A policy making at most `max_attempts` attempts (the first included),
    /// waiting between `min_delay` and `max_delay` (doubling, each pause drawn
    /// from `[d, 2d]` and never above `max_delay`).
    ///
    /// # Errors
    /// [`Error::Invalid`] when `max_attempts` is 0 or `min_delay > max_delay`.
    pub fn new(max_attempts: u32, min_delay: Duration, max_delay: Duration) -> Result<Self> {
        if max_attempts == 0 {
            return Err(Error::invalid("retry max_attempts", "must be at least 1"));
        }
        if min_delay > max_delay {
            return Err(Error::invalid(
                "retry delays",
                format!("min_delay {min_delay:?} is above max_delay {max_delay:?}"),
            ));
        }
        Ok(ConflictRetry {
            max_attempts,
            min_delay,
            max_delay,
        })
    }

    /// The most attempts, the first included.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    pub(crate) fn backoff(&self) -> Backoff {
        Backoff::doubling(self.min_delay, self.max_delay, random_seed())
            .with_max_retries(self.max_attempts.saturating_sub(1))
    }
}

#[derive(Debug, Clone, Copy)]
enum Pace {
    /// The same pause each time, ±10 %.
    Fixed(Duration),
    /// Doubling from `next`, each drawn from `[d, 2d]`, never above `cap`.
    Doubling { next: Duration, cap: Duration },
}

/// Jittered, seedable pauses between attempts; an iterator of pauses that
/// ends when its retry or total-delay budget is spent (never, without one).
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    pace: Pace,
    rng: u64,
    retries_left: Option<u32>,
    total_left: Option<Duration>,
    jitter: bool,
}

impl Backoff {
    pub(crate) fn fixed(interval: Duration, seed: u64) -> Self {
        Backoff::new(Pace::Fixed(interval), seed)
    }

    pub(crate) fn doubling(first: Duration, cap: Duration, seed: u64) -> Self {
        Backoff::new(
            Pace::Doubling {
                next: first.min(cap),
                cap,
            },
            seed,
        )
    }

    fn new(pace: Pace, seed: u64) -> Self {
        Backoff {
            pace,
            rng: seed,
            retries_left: None,
            total_left: None,
            jitter: true,
        }
    }

    /// Exact pauses: `interval` each time for a fixed pace, `d` (not a draw
    /// from `[d, 2d]`) for a doubling one. For waits whose timing tests
    /// count on, where no crowd of nodes retries in step.
    pub(crate) fn without_jitter(mut self) -> Self {
        self.jitter = false;
        self
    }

    pub(crate) fn with_max_retries(mut self, n: u32) -> Self {
        self.retries_left = Some(n);
        self
    }

    /// Ends before the pauses would add up to more than `total`.
    #[cfg(any(test, feature = "azure"))]
    pub(crate) fn with_max_total(mut self, total: Duration) -> Self {
        self.total_left = Some(total);
        self
    }

    /// The next pause of an unbounded backoff (a poll or standby pace); a
    /// bounded one that is spent keeps returning its longest pause.
    pub(crate) fn pause(&mut self) -> Duration {
        let d = self.draw();
        self.retries_left = self.retries_left.map(|n| n.saturating_sub(1));
        d
    }

    fn unit(&mut self) -> f64 {
        self.rng = splitmix(self.rng);
        (self.rng >> 11) as f64 / (1u64 << 53) as f64
    }

    fn draw(&mut self) -> Duration {
        let u = self.jitter.then(|| self.unit());
        match &mut self.pace {
            Pace::Fixed(d) => u.map_or(*d, |u| d.mul_f64(0.9 + 0.2 * u)),
            Pace::Doubling { next, cap } => {
                let d = *next;
                *next = (d * 2).min(*cap);
                u.map_or(d, |u| d.mul_f64(1.0 + u).min(*cap))
            }
        }
    }
}

impl Iterator for Backoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        if self.retries_left == Some(0) {
            return None;
        }
        let d = self.draw();
        if let Some(total) = self.total_left {
            if d > total {
                self.retries_left = Some(0);
                return None;
            }
            self.total_left = Some(total - d);
        }
        self.retries_left = self.retries_left.map(|n| n - 1);
        Some(d)
    }
}

/// Runs `op` until it succeeds, fails in a way `retry_within` refuses, or
/// `backoff` is spent; then returns the last result.
///
/// After each failure, `retry_within(&error)` says whether to try again:
/// `None` stops with that error, `Some(limit)` pauses for the next backoff
/// delay, but never longer than `limit` (a caller bound by a deadline passes
/// the time it has left).
pub(crate) async fn retry_transient<T, E, F, Fut>(
    backoff: &mut Backoff,
    mut op: F,
    mut retry_within: impl FnMut(&E) -> Option<Duration>,
) -> std::result::Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = std::result::Result<T, E>>,
{
    loop {
        let error = match op().await {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        match retry_within(&error).and_then(|limit| Some(backoff.next()?.min(limit))) {
            Some(delay) => tokio::time::sleep(delay).await,
            None => return Err(error),
        }
    }
}

/// A seed for a backoff nobody asked to replay.
pub(crate) fn random_seed() -> u64 {
    // One draw from the system per process (a system call, where every
    // operation asks for a seed), then seeds derived from it and a counter.
    static BASE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    static DRAWN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let base = *BASE.get_or_init(|| {
        let (hi, lo) = uuid::Uuid::new_v4().as_u64_pair();
        hi ^ lo
    });
    derive_seed(
        base,
        DRAWN.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
    )
}

/// A fresh seed derived from `seed` and a counter, so many backoffs from one
/// seeded source differ from each other but replay together.
pub(crate) fn derive_seed(seed: u64, n: u64) -> u64 {
    splitmix(seed ^ n.wrapping_mul(0x9E37_79B9))
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflict_retry_delays_are_bounded_in_count_and_size() {
        let p = ConflictRetry::new(5, Duration::from_millis(1), Duration::from_millis(8)).unwrap();
        let delays: Vec<_> = p.backoff().collect();
        assert_eq!(delays.len(), 4);
        assert!(
            delays.iter().all(|d| *d <= Duration::from_millis(8)),
            "{delays:?}"
        );
        assert!(ConflictRetry::new(0, Duration::ZERO, Duration::ZERO).is_err());
        assert!(ConflictRetry::new(1, Duration::from_secs(2), Duration::from_secs(1)).is_err());
    }

    #[test]
    fn the_same_seed_replays_the_same_pauses() {
        let a: Vec<_> = Backoff::doubling(Duration::from_millis(10), Duration::from_secs(1), 9)
            .take(20)
            .collect();
        let b: Vec<_> = Backoff::doubling(Duration::from_millis(10), Duration::from_secs(1), 9)
            .take(20)
            .collect();
        let c: Vec<_> = Backoff::doubling(Duration::from_millis(10), Duration::from_secs(1), 10)
            .take(20)
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn doubling_pauses_are_drawn_between_d_and_2d_under_the_cap() {
        let xs: Vec<_> =
            Backoff::doubling(Duration::from_millis(10), Duration::from_millis(100), 1)
                .take(10)
                .collect();
        let mut d = Duration::from_millis(10);
        for x in &xs {
            assert!(
                *x >= d && *x <= (d * 2).min(Duration::from_millis(100)),
                "{xs:?}"
            );
            d = (d * 2).min(Duration::from_millis(100));
        }
    }

    #[test]
    fn pauses_without_jitter_are_exact() {
        let xs: Vec<_> = Backoff::doubling(Duration::from_millis(250), Duration::from_secs(2), 1)
            .without_jitter()
            .take(6)
            .collect();
        let ms: Vec<u128> = xs.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, [250, 500, 1000, 2000, 2000, 2000]);
        let mut fixed = Backoff::fixed(Duration::from_millis(80), 1).without_jitter();
        assert_eq!(fixed.pause(), Duration::from_millis(80));
        assert_eq!(fixed.pause(), Duration::from_millis(80));
    }

    #[test]
    fn budgets_end_the_pauses() {
        let n = Backoff::fixed(Duration::from_millis(10), 1)
            .with_max_retries(3)
            .count();
        assert_eq!(n, 3);
        // About 10 ms each: a 35 ms budget holds three pauses, not four.
        let xs: Vec<_> = Backoff::fixed(Duration::from_millis(10), 1)
            .with_max_total(Duration::from_millis(35))
            .collect();
        assert_eq!(xs.len(), 3, "{xs:?}");
        assert!(xs.iter().sum::<Duration>() <= Duration::from_millis(35));
    }

    #[tokio::test(start_paused = true)]
    async fn retry_transient_stops_when_told_or_spent() {
        let mut calls = 0;
        let mut backoff = Backoff::fixed(Duration::from_millis(10), 1).with_max_retries(2);
        let r: std::result::Result<(), u32> = retry_transient(
            &mut backoff,
            || {
                calls += 1;
                std::future::ready(Err(calls))
            },
            |_| Some(Duration::MAX),
        )
        .await;
        assert_eq!(r, Err(3), "one attempt and two retries");

        let mut calls = 0;
        let mut backoff = Backoff::fixed(Duration::from_millis(10), 1);
        let r: std::result::Result<(), u32> = retry_transient(
            &mut backoff,
            || {
                calls += 1;
                std::future::ready(Err(calls))
            },
            |e| (*e < 2).then_some(Duration::MAX),
        )
        .await;
        assert_eq!(r, Err(2), "the second failure is not retried");

        let mut calls = 0;
        let mut backoff = Backoff::fixed(Duration::from_millis(10), 1);
        let r = retry_transient(
            &mut backoff,
            || {
                calls += 1;
                std::future::ready(if calls < 3 { Err(()) } else { Ok(calls) })
            },
            |_| Some(Duration::MAX),
        )
        .await;
        assert_eq!(r, Ok(3));
    }

    #[tokio::test(start_paused = true)]
    async fn a_limit_shortens_the_pause() {
        let started = tokio::time::Instant::now();
        let mut backoff = Backoff::fixed(Duration::from_secs(10), 1).with_max_retries(1);
        let _: std::result::Result<(), ()> = retry_transient(
            &mut backoff,
            || std::future::ready(Err(())),
            |_| Some(Duration::from_millis(5)),
        )
        .await;
        assert_eq!(started.elapsed(), Duration::from_millis(5));
    }
}
