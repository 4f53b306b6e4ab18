//! [`LockOptions`]: the settings of partition locks.

use std::time::Duration;

/// Settings of partition locks, given to
/// [`StoreBuilder::lock_options`](crate::StoreBuilder::lock_options).
///
/// ```
/// use std::time::Duration;
/// use leasehold::lock::LockOptions;
/// let options = LockOptions::new()
///     .with_acquire_timeout(Duration::from_secs(10))
///     .with_commit_margin(Duration::from_secs(3));
/// assert_eq!(options.acquire_timeout(), Duration::from_secs(10));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockOptions {
    pub(crate) acquire_timeout: Duration,
    pub(crate) commit_margin: Duration,
}

impl LockOptions {
    /// The default container for partition-lock blobs (see
    /// [`StoreBuilder::lock_lease_options`](crate::StoreBuilder::lock_lease_options)).
    pub const DEFAULT_CONTAINER: &str = "leasehold-locks";

    /// The lease duration of partition locks when a store is built without
    /// lease options: the service's minimum, 15 s (renewed every 5 s),
    /// which bounds the wait for a crashed holder.
    pub const DEFAULT_LEASE_DURATION: std::time::Duration = std::time::Duration::from_secs(15);

    /// The default of [`LockOptions::with_acquire_timeout`].
    pub const DEFAULT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(60);

    /// The default of [`LockOptions::with_commit_margin`].
    pub const DEFAULT_COMMIT_MARGIN: Duration = Duration::from_secs(5);

    /// The defaults.
    pub fn new() -> Self {
        LockOptions {
            acquire_timeout: Self::DEFAULT_ACQUIRE_TIMEOUT,
            commit_margin: Self::DEFAULT_COMMIT_MARGIN,
        }
    }

    /// How long [`Store::lock`](crate::Store::lock) waits for the lease
    /// while another holder has it.
    #[must_use = "`with_acquire_timeout` returns the changed options"]
    pub fn with_acquire_timeout(mut self, timeout: Duration) -> Self {
        self.acquire_timeout = timeout;
        self
    }

    /// How much lease validity a commit needs before it sends anything.
    #[must_use = "`with_commit_margin` returns the changed options"]
    pub fn with_commit_margin(mut self, margin: Duration) -> Self {
        self.commit_margin = margin;
        self
    }

    /// See [`LockOptions::with_acquire_timeout`].
    pub fn acquire_timeout(&self) -> Duration {
        self.acquire_timeout
    }

    /// See [`LockOptions::with_commit_margin`].
    pub fn commit_margin(&self) -> Duration {
        self.commit_margin
    }
}

impl Default for LockOptions {
    /// [`LockOptions::new`].
    fn default() -> Self {
        Self::new()
    }
}
