//! [`LockOptions`]: the settings of partition locks.

use std::time::Duration;

/// Settings of partition locks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockOptions {
    /// How long [`Store::lock`](crate::Store::lock) waits for the lease
    /// while another holder has it. Failing storage ends the wait sooner:
    /// after the lock lease options'
    /// [`with_unavailable_after`](crate::lease::LeaseOptions::with_unavailable_after)
    /// (30 s by default), with [`Error::Unavailable`](crate::Error::Unavailable).
    pub acquire_timeout: Duration,
    /// How much lease validity a commit needs before it sends anything.
    pub commit_margin: Duration,
}

impl LockOptions {
    /// The default container for partition-lock blobs (see
    /// [`StoreBuilder::lock_lease_options`](crate::StoreBuilder::lock_lease_options)).
    pub const DEFAULT_CONTAINER: &str = "leasehold-locks";

    /// The lease duration of partition locks when a store is built without
    /// lease options: the service's minimum, 15 s, renewed every 5 s. It
    /// bounds how long a unit waits for the lock of a holder that crashed
    /// (see "Waiting for a crashed holder" in [`crate::lock`]). A held lock
    /// costs one renewal per 5 s, but units hold locks for milliseconds, so
    /// few ever renew; a longer lease would only lengthen the stall.
    pub const DEFAULT_LEASE_DURATION: std::time::Duration = std::time::Duration::from_secs(15);
}

impl Default for LockOptions {
    /// Wait up to 60 s for a lock; commit only with at least 5 s of lease
    /// left.
    fn default() -> Self {
        LockOptions {
            acquire_timeout: Duration::from_secs(60),
            commit_margin: Duration::from_secs(5),
        }
    }
}
