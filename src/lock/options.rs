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
    /// Whether journalled commits mark the rows they write before their
    /// journal (`true`, the default), so that optimistic [`Table`](crate::Table)
    /// writes on those rows never wedge a commit (see "Units and optimistic
    /// writes" in [`crate::lock`]). Turn it off only for a rolling upgrade
    /// while processes running a version that does not resolve row marks
    /// still read or write the same tables: commits then work as those
    /// versions' did, and a row written without its lock between a commit's
    /// journal and its transactions makes the commit undo itself or, if the
    /// undo is refused too, keeps the journal for an operator
    /// ([`Store::resolve_commit`](crate::Store::resolve_commit)).
    pub row_marks: bool,
    /// Whether a commit that marks rows decides in a row of its own (`true`,
    /// the default): its commit point is the transaction of one of its
    /// (partition, table) groups, which also inserts a decision row, so it
    /// writes no journal and sends a request less per group (see "The
    /// commit protocol" in [`crate::lock`]). Off (or where a row with its
    /// mark and after-image would be over the service's limits), the
    /// commit point is a journal in the primary partition's lock blob.
    /// Ignored without [`LockOptions::row_marks`]. Turn it off only while
    /// processes running a version that does not read decision rows still
    /// read or write the same tables.
    pub decision_rows: bool,
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
    /// left; mark the rows of commits over several groups, and decide them
    /// in a row.
    fn default() -> Self {
        LockOptions {
            acquire_timeout: Duration::from_secs(60),
            commit_margin: Duration::from_secs(5),
            row_marks: true,
            decision_rows: true,
        }
    }
}
