//! Backoff policies.
//!
//! leasehold retries only what is safe to retry. Optimistic read-modify-write
//! loops ([`Table::update_with`](crate::table::Table::update_with)) retry after
//! a [`Conflict`](crate::Error::Conflict) by *re-reading*, never by re-sending
//! the stale write. Transient transport failures are retried inside the Azure
//! backend. Nothing retries a 409 or 412 blindly.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};

use crate::error::{Error, Result};

/// Jittered exponential backoff, bounded by an attempt count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    max_attempts: u32,
    min_delay: Duration,
    max_delay: Duration,
}

impl Default for RetryPolicy {
    /// 10 attempts, waiting 2 ms doubling up to 200 ms, with full jitter.
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 10,
            min_delay: Duration::from_millis(2),
            max_delay: Duration::from_millis(200),
        }
    }
}

impl RetryPolicy {
    /// A policy making at most `max_attempts` attempts (the first included),
    /// waiting between `min_delay` and `max_delay` (doubling, jittered).
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
        Ok(RetryPolicy {
            max_attempts,
            min_delay,
            max_delay,
        })
    }

    /// The most attempts, the first included.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The delays to wait between attempts: `max_attempts - 1` of them.
    pub fn delays(&self) -> impl Iterator<Item = Duration> + Send + use<> {
        ExponentialBuilder::default()
            .with_min_delay(self.min_delay)
            .with_max_delay(self.max_delay)
            .with_max_times(self.max_attempts.saturating_sub(1) as usize)
            .with_jitter()
            .build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_are_bounded_in_count_and_size() {
        let p = RetryPolicy::new(5, Duration::from_millis(1), Duration::from_millis(8)).unwrap();
        let delays: Vec<_> = p.delays().collect();
        assert_eq!(delays.len(), 4);
        // Jitter adds at most one more unit of the base delay.
        assert!(
            delays.iter().all(|d| *d <= Duration::from_millis(16)),
            "{delays:?}"
        );
        assert!(RetryPolicy::new(0, Duration::ZERO, Duration::ZERO).is_err());
        assert!(RetryPolicy::new(1, Duration::from_secs(2), Duration::from_secs(1)).is_err());
    }
}
