//! Partition-locked units of work across tables and partitions, with a
//! crash-safe commit.
//!
//! [`Store::lock`](crate::Store::lock) takes the blob lease named after a
//! partition key and returns a [`Unit`];
//! [`Store::lock_many`](crate::Store::lock_many) takes several.
//!
//! # Taking several locks
//!
//! A unit tries every lock at once, then reads their lock blobs at once
//! (two round trips). When any is held, the locks taken are given back and
//! taken one after the other in canonical order, by lock blob name
//! ([`Store::lock_lease_name`](crate::Store::lock_lease_name)), so
//! overlapping sets never wait in a cycle.
//!
//! # The commit protocol
//!
//! Writes that fit **one entity-group transaction** (one partition of one
//! table, at most 100 operations and 4 MiB) go in it. Anything else
//! **decides in a row** (`commit.rs`, `decision.rs`; row layouts in
//! `crate::rows`). The writes form (partition, table) *groups*; the first
//! in canonical order is the *primary group*, its partition the *primary*.
//!
//! 1. **Marks**, all at once: every row of every group but the primary
//!    (and of the primary too when it does not fit beside the decision
//!    row) is written as read plus a *row mark* (`_lhTxn`: a fresh
//!    transaction id naming the primary's table, and the primary) and the
//!    row the commit leaves (its *after-image*, `_lhNew`; too big for its
//!    row, in *after-image rows* `_lhCommit.<id>.a…` beside it), at the
//!    ETag read (a placeholder where the row was absent), in transactions
//!    of at most 100 operations and 4 MiB. A row changed since it was read
//!    fails its mark: the marks made are taken off, nothing applied. A row
//!    that cannot take a mark is [`crate::Error::Invalid`] before anything
//!    is sent.
//! 2. **The commit point**: the insert of the *decision row*
//!    (`_lhCommit.<id>`, `committed`) in the primary's table and partition,
//!    with the primary group's own writes when they fit.
//! 3. **Finish**, together with the lock releases: every marked row
//!    replaced by its after-image (or deleted) at the ETag its mark
//!    produced, the after-image rows deleted. The unit answers.
//! 4. The decision row deleted behind the answer once no mark needs it
//!    ([`Store::sweep`](crate::Store::sweep) removes it otherwise).
//!
//! After the reads that is 3 round trips to the answer, releases included.
//!
//! **Invariants.** (a) A commit is decided exactly when its decision row is
//! stored, and that row is only ever *inserted* (`committed` by the commit
//! point, `withdrawn` by a reader): one insert wins, so exactly one
//! decision is stored, whatever clocks and leases say. (b) A marked row's
//! ETag is known to the commit alone (every read resolves a mark before
//! returning a row), and every write of it is conditioned on the ETag
//! read, so two never both apply. (c) Every mark carries what finishing it
//! needs, so anyone who reads a committed row can finish it. (d) The
//! decision row is deleted only once every mark of its commit is off.
//!
//! A reader meeting a mark reads the decision row: `committed`, it writes
//! the after-image at the row's ETag; `withdrawn`, it takes the mark off;
//! none, it waits briefly, then takes the primary's lock (a live writer
//! holds it, so is never withdrawn) and **inserts** the decision row as
//! `withdrawn`; the writer's commit point is then refused and it answers
//! [`crate::Error::LeaseLost`], nothing applied. A reader in a unit holding
//! the primary's lock withdraws an undecided commit at once. A transaction
//! ([`crate::txn`]) runs the same protocol without locks: its marks carry a
//! time-to-live instead.
//!
//! # Units and optimistic writes
//!
//! A plain [`Table`](crate::Table) write landing before a commit's marks
//! fails the mark ([`crate::Error::Conflict`] inside
//! [`crate::Error::Batch`], nothing applied). From the marks on, every read
//! (gets, queries, index lookups, other units) resolves a mark before
//! returning the row, so no optimistic writer holds a marked row's ETag; an
//! insert meeting a placeholder resolves it and is tried again.
//! Unconditional writes get last-writer-wins: a replace or delete of a
//! marked row wins (the commit's finish for it is skipped); a merge keeps
//! the mark and the commit's write replaces the row later.
//!
//! # What the caller is told
//!
//! `Ok` from [`Unit::commit`] means every write is applied
//! ([`CommitReport::finished_by`] is [`FinishedBy::Recovery`] when readers
//! finished some rows). Any error but [`crate::Error::InDoubt`] means
//! nothing is applied: a commit point whose reply is lost reads its
//! decision row and, finding none, withdraws the commit itself. Only when
//! storage cannot be asked is it `InDoubt` (naming the primary and the
//! transaction); [`Store::commit_outcome`](crate::Store::commit_outcome)
//! (or `leasehold locks decide`) reads or makes the decision later.
//!
//! # Readers outside a unit
//!
//! A commit decided in a row is atomic to every reader of single rows, but
//! two plain reads are two moments. Read several partitions consistently
//! in a unit holding their locks ([`Store::lock_many`](crate::Store::lock_many),
//! [`Unit::get_in`] or [`Unit::query`], [`Unit::abandon`]). A filtered
//! query also fetches the marked rows of its key range and filters each as
//! resolved.
//!
//! # Waiting for a crashed holder
//!
//! A unit waits for a held lock up to [`LockOptions::acquire_timeout`] (60
//! s); a dead holder's lease runs out
//! [`LockOptions::DEFAULT_LEASE_DURATION`] (15 s) after its last renewal.
//! A reader waiting on a dead writer's marks tries the primary's lease at
//! growing intervals (500 ms, doubling, at most 6 s): at most 20 requests
//! until it has withdrawn the commit. `leasehold locks break PK` ends the
//! wait sooner.
//!
//! # Who holds a lock
//!
//! The lock blob's metadata names the process holding it (`leasehold_owner`,
//! [`LeaseOptions::with_owner`](crate::lease::LeaseOptions::with_owner);
//! `leasehold_acquired`, when it took the lock over), shown by
//! [`LeaseManager::describe`] on [`Store::locks`] and `leasehold locks
//! list`. A unit writes it (one metadata write) only when the blob names
//! another process: a lease id cannot be read back, so naming the holder
//! of a tenure needs a write in that tenure.
//!
//! # Request budget
//!
//! With `L` locked partitions, `R` reads, and a commit whose marking round
//! takes `M` transactions (one per 100 rows or 4 MiB outside the commit
//! point, after-image rows included), a unit costs
//!
//! `L` acquires + `L` lock-blob reads + `R` +
//! (one transaction ? 1 : `M` + the commit point + `M` finishing
//! transactions + the decision row's delete) + `L` releases,
//!
//! plus one metadata write per lock coming from another process, and one
//! read per row written without being read (an upsert; inserts need none).
//! The lock-blob read is skipped when the acquire shows the blob unchanged
//! since this process saw it; locks handed over inside a process skip
//! acquire, read and release. One table of one partition: 5 requests with
//! one read; a transfer between two customers (4 groups, `M` = 3, `R` =
//! 2): 16. A commit refused before its commit point sends one more
//! transaction per marking transaction that went through.
//!
//! # Rows commits leave behind
//!
//! [`Store::sweep`](crate::Store::sweep) removes what a writer that
//! stopped half-way leaves: a committed decision row once no group it
//! names holds one of its marks and it is older than `older_than` and an
//! hour; a withdrawn one, and after-image rows, once older than
//! `older_than` and 20 minutes, the longest a commit point sent before the
//! withdrawal could take to land (it is signed only while the writer's
//! lease is valid, and the service refuses a Shared Key request dated over
//! 15 minutes ago). A commit id is a version 7 UUID: `commit_outcome`
//! withdraws an undecided commit only when it began under 50 minutes ago,
//! and answers `NotFound` for an older one whose decision row is gone.
//!
//! # Lock blobs
//!
//! A lock blob stays after its first lock. [`Store::sweep`](crate::Store::sweep)
//! deletes one when it is free (no lease), clean (no record in it) and old
//! (`leasehold_acquired` at least `older_than` ago; an undated blob is
//! stamped now and kept), under its lease, as lease blobs are pruned. Cost:
//! a listing per 5000 blobs, a read per blob, and per candidate an acquire,
//! a read, then the deletes or a release.
//!
//! [`LeaseManager::describe`]: crate::lease::LeaseManager::describe
//! [`Store::locks`]: crate::Store::locks

mod acquire;
mod commit;
pub(crate) mod decision;
mod env;
mod fold;
mod keys;
mod leftovers;
pub(crate) mod options;
mod query;
mod report;
mod slot;
mod unit;

pub use decision::CommitOutcome;
pub(crate) use decision::outcome as commit_outcome;
pub(crate) use env::{AfterCommit, ClaimInput, Claimed, CommitClaims, LockEnv};
pub use keys::IntoPartitionKeys;
pub use leftovers::CommitSummary;
pub(crate) use leftovers::list as list_commits;
pub(crate) use leftovers::prune as prune_commit_rows;
pub use options::LockOptions;
pub use query::UnitQuery;
pub use report::{CommitReport, FinishedBy};
pub(crate) use slot::Slot;
pub(crate) use unit::STAGED;
pub use unit::Unit;
