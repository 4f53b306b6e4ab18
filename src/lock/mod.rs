//! Partition-locked units of work across tables, with a crash-safe commit.
//!
//! [`Store::lock`](crate::Store::lock) takes the blob lease named after a
//! partition key and returns a [`Unit`]: reads of entities of that partition
//! (in any table) record the ETags they saw; writes are staged; reads see the
//! unit's own staged writes; [`Unit::commit`] applies everything, all or
//! nothing, and dropping the unit without committing sends nothing.
//!
//! # The commit protocol
//!
//! * Writes to **one table** (at most 100 of them) go in one entity-group
//!   transaction, which the service applies atomically.
//! * Writes to **several tables** (or more than 100 in one) are first written
//!   as a *journal* — every operation with its precondition ETag and full
//!   after-image — into the lock blob, under the lease id (so a holder that
//!   lost its lease cannot write it). Then one transaction per table (and per
//!   100 operations) is applied in a fixed order, and the journal is cleared.
//! * Every write carries the ETag read in the unit, or insert-only semantics
//!   (only the explicitly unconditional upserts carry none), so a holder that
//!   lost its lease without noticing fails instead of overwriting.
//! * Before sending anything, commit checks that the lease has enough time
//!   left ([`LockOptions::commit_margin`]); otherwise
//!   [`crate::Error::LeaseLost`] and nothing is sent.
//!
//! Whoever takes the lock next finds a journal left by a process that died
//! half-way and **rolls it forward** before user code sees the partition:
//! an operation whose row still has its precondition is applied; one whose
//! row already shows its after-image is skipped; anything else stops with
//! [`crate::Error::Inconsistent`] and leaves the journal
//! for an operator ([`Store::roll_forward`](crate::Store::roll_forward)).
//!
//! If the first transaction of a journalled commit is refused (a stale ETag,
//! say), nothing was applied: the journal is cleared and the error returned.
//! A later transaction can only be refused if something wrote the partition
//! without taking the lock; the journal is then kept and the commit returns
//! `Error::Inconsistent`.
//!
//! # Who holds a lock
//!
//! The lock blob's metadata names the process holding the lock
//! (`leasehold_owner`: the lock manager's owner identity,
//! [`LeaseOptions::with_owner`](crate::lease::LeaseOptions::with_owner),
//! by default `hostname-pid-random`; `leasehold_acquired`: when that process
//! took the lock over). [`LeaseManager::describe`] on [`Store::locks`]
//! reports it as `owner`, and the operator command shows it as the holder
//! in `locks list` and `locks show` while the lease is held (a process that
//! died holding the lock stays named until the lease expires, and as the
//! last holder after).
//!
//! The holder is recorded when a unit takes the lease from storage: the
//! lock-blob read of that acquire returns the metadata, and only when it
//! names another process (or none) does the unit write its own name, one
//! metadata write under the lease id. So a process taking a lock back that
//! it held last, and every unit handed over inside a process, pays nothing;
//! a lock changing hands between processes pays one request. That is the
//! least storage allows: a lease's id cannot be read back (Get Blob
//! Properties only confirms an id the caller already knows), and the ids
//! stay random per tenure so a stale holder's request can never be taken
//! for the current one's, so naming the holder of a tenure needs a write in
//! that tenure.
//!
//! # Request budget
//!
//! With `R` reads and writes to `T` tables, a unit that takes the lease costs
//! acquire + lock-blob read + `R` + (`T > 1` ? journal + `T` + clear : 1) +
//! release requests, plus one metadata write when the lock comes from
//! another process (see above). A unit handed the lease by another task of
//! the same process (see [`crate::lease`]'s process-local sharing) skips the
//! acquire, the lock-blob read and the release.
//!
//! [`LeaseManager::describe`]: crate::lease::LeaseManager::describe
//! [`Store::locks`]: crate::Store::locks

mod fold;
mod journal;
pub(crate) mod name;
pub(crate) mod options;
mod roll_forward;
mod unit;

pub(crate) use journal::Journal;
pub use journal::{PendingCommit, PendingWrite};
pub use options::LockOptions;
pub use roll_forward::RollForwardReport;
pub use unit::{CommitReport, Unit};
