//! Partition-locked units of work across tables and partitions, with a
//! crash-safe commit.
//!
//! [`Store::lock`](crate::Store::lock) takes the blob lease named after a
//! partition key and returns a [`Unit`];
//! [`Store::lock_many`](crate::Store::lock_many) takes several. Reads in a
//! unit record the ETags they saw and see its staged writes;
//! [`Unit::commit`] applies every write, all or nothing; dropping the unit
//! sends nothing.
//!
//! # Taking several locks
//!
//! A unit first tries every lock at once, then reads their lock blobs at
//! once: two round trips however many partitions (a try never waits, so
//! no deadlock). When any is held, the locks taken are given back and
//! taken one after the other in canonical order, by lock blob name
//! ([`Store::lock_lease_name`](crate::Store::lock_lease_name)), so units
//! taking overlapping sets never wait in a cycle. A lock that cannot be
//! had gives back every lock already taken.
//!
//! # The commit protocol
//!
//! Writes that fit **one entity-group transaction** (one partition of one
//! table, at most 100 operations and 4 MiB) go in it. Anything else
//! **decides in a row** (`commit.rs`, `decision.rs`; the rows' layouts in
//! `crate::rows`). The writes form (partition, table) *groups*; the first
//! in canonical order is the *primary group*, its partition the *primary*.
//!
//! 1. **Marks**, all at once: every row of every group but the primary
//!    (and of the primary too when it does not fit beside the decision
//!    row) is written as read plus a *row mark* (`_lhTxn`: a fresh
//!    transaction id naming the primary's table, and the primary) and the
//!    row the commit leaves (its *after-image*, `_lhNew`), conditioned on
//!    the ETag read (a placeholder where the row was absent). An
//!    after-image too big for its row goes to *after-image rows*
//!    (`_lhCommit.<id>.a…`) of the same partition and table. Transactions
//!    are chunked to 100 operations and 4 MiB. A row changed since it was
//!    read fails its mark: the marks made are taken off, nothing applied.
//!    A row that cannot take a mark is [`crate::Error::Invalid`] before
//!    anything is sent.
//! 2. **The commit point**: the insert of the *decision row*
//!    (`_lhCommit.<id>`, `committed`) in the primary's table and partition,
//!    in one transaction with the primary group's own writes when they fit.
//! 3. **Finish**, together with the lock releases: every marked row
//!    replaced by its after-image (or deleted) at the ETag its mark
//!    produced, the after-image rows deleted. The unit answers.
//! 4. The decision row deleted behind the answer once no mark needs it
//!    ([`Store::sweep`](crate::Store::sweep) removes it otherwise).
//!
//! After the reads that is 3 round trips to the answer, releases included,
//! whatever the number of rows, partitions and tables; a lock blob holds
//! the lease and its wait queue only.
//!
//! **Invariants.** (a) A commit is decided exactly when its decision row is
//! stored, and that row is only ever *inserted* (`committed` by the commit
//! point, `withdrawn` by a reader): the service lets one insert win, so
//! exactly one decision is stored, whatever clocks and leases say. (b) A
//! marked row's ETag is known to the commit alone (every read resolves a
//! mark before returning a row), and every write of it is conditioned on
//! the ETag read, so two never both apply. (c) Every mark carries what
//! finishing it needs, so anyone who reads a committed row can finish it.
//! (d) The decision row is deleted only once every mark of its commit is
//! off.
//!
//! A reader meeting a mark reads the decision row: `committed`, it writes
//! the after-image at the row's ETag; `withdrawn`, it takes the mark off;
//! none, it waits briefly, then takes the primary's lock (a live writer
//! holds it, so is never withdrawn) and **inserts** the decision row as
//! `withdrawn`. A writer withdrawn so has its commit point refused and
//! answers [`crate::Error::LeaseLost`], nothing applied. A transaction
//! ([`crate::txn`]) runs the same protocol without locks: its marks carry a
//! time-to-live instead. Row keys starting `_lhCommit.` are reserved.
//!
//! # Units and optimistic writes
//!
//! Plain [`Table`](crate::Table) writes may touch the rows units write. One
//! landing before a commit's marks fails the mark (the commit fails with
//! [`crate::Error::Conflict`] inside [`crate::Error::Batch`], nothing
//! applied). From the marks on, every read (gets, queries,
//! [`Table::update_with`](crate::Table::update_with), index lookups,
//! other units) resolves a mark before returning the row, so no optimistic
//! writer holds a marked row's ETag; an insert meeting a placeholder
//! resolves it and is tried again. Unconditional writes
//! ([`Table::upsert`](crate::Table::upsert), `upsert_merge`,
//! `replace_unconditionally`, `delete_unconditionally`) get last-writer-wins:
//! a replace or delete of a marked row wins (the commit's finish for it is
//! refused and skipped); a merge keeps the mark and the commit's write
//! replaces the row later.
//!
//! A reader meeting a mark pays one decision-row read and one write when
//! the commit is decided; when its writer is slow or dead, tries of the
//! primary's lock until its lease runs out. A read in a unit holding the
//! primary's lock withdraws an undecided commit at once.
//!
//! # What the caller is told
//!
//! `Ok` from [`Unit::commit`] means every write is applied
//! ([`CommitReport::finished_by`] says whether readers finished some rows,
//! [`FinishedBy::Recovery`]). Any error but [`crate::Error::InDoubt`] means
//! nothing is applied. A commit point whose reply is lost reads its
//! decision row and, finding none, withdraws the commit itself, so the
//! answer is final; only when storage cannot be asked is it `InDoubt`
//! (naming the primary and the transaction), and
//! [`Store::commit_outcome`](crate::Store::commit_outcome) (or `leasehold
//! locks decide`) reads or makes the decision later.
//!
//! # Readers outside a unit
//!
//! A commit decided in a row is atomic to every reader of single rows, but
//! two plain reads are two moments (a transfer's debit without its
//! credit). Read several partitions consistently inside a unit holding
//! their locks ([`Store::lock_many`](crate::Store::lock_many), then
//! [`Unit::get_in`] or [`Unit::query`], then [`Unit::abandon`]). A read in
//! a unit whose reply arrives after a lock may have run out fails with
//! [`crate::Error::LeaseLost`]. Every filtered query also fetches the
//! marked rows of its key range and applies the filter to each as resolved.
//!
//! # Waiting for a crashed holder
//!
//! A unit waits for a held lock up to [`LockOptions::acquire_timeout`] (60
//! s). A dead holder's lease runs out one lease duration
//! ([`LockOptions::DEFAULT_LEASE_DURATION`], 15 s) after its last renewal.
//! A reader waiting on a dead writer's marks tries the primary's lease at
//! growing intervals (500 ms, doubling, at most 6 s): 7 tries for a 15 s
//! lease, at most 20 requests until it has withdrawn the commit.
//! `leasehold locks break PK` ends the wait sooner.
//!
//! # Who holds a lock
//!
//! The lock blob's metadata names the process holding it (`leasehold_owner`,
//! [`LeaseOptions::with_owner`](crate::lease::LeaseOptions::with_owner);
//! `leasehold_acquired`, when it took the lock over), reported by
//! [`LeaseManager::describe`] on [`Store::locks`] and `leasehold locks
//! list`. A unit writes it (one metadata write) only when the lock blob
//! names another process: a lease id cannot be read back, so naming the
//! holder of a tenure needs a write in that tenure.
//!
//! # Request budget
//!
//! With `L` locked partitions, `R` reads, and a commit over `G` groups
//! whose marking round takes `M` transactions (one per 100 rows or 4 MiB
//! outside the commit point, after-image rows included), a unit costs
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
//! one read (4 taken back unchanged, 6 from another process); two tables
//! `R` + 7; a transfer between two customers (`G` = 4, `M` = 3, `R` = 2):
//! 16 (14 taken back, 18 from another process, 10 handed over). 1,000
//! inserts in one partition: 10 marking transactions, the commit point, 10
//! finishing ones and the delete. A commit refused before its commit point
//! sends one more transaction per marking transaction that went through.
//! Taking two leases and writing each partition by hand costs `2L + R + G`
//! but is neither atomic nor crash-safe.
//!
//! # Rows commits leave behind
//!
//! [`Store::sweep`](crate::Store::sweep) removes what a writer that
//! stopped half-way leaves: a committed decision row once no group it
//! names holds one of its marks and it is older than `older_than` and an
//! hour ([`Store::commit_outcome`](crate::Store::commit_outcome) reads it);
//! a withdrawn one, and after-image rows, once older than `older_than` and
//! 20 minutes, the longest a commit point sent before the withdrawal could
//! take to land (it is signed only while the writer's lease is valid, and
//! the service refuses a Shared Key request dated over 15 minutes ago).
//! A commit id is a version 7 UUID: `commit_outcome` withdraws an undecided
//! commit only when it began under 50 minutes ago, and answers `NotFound`
//! for an older one whose decision row is gone.
//! [`Store::list_commits`](crate::Store::list_commits) (`leasehold locks
//! show PK`) lists a partition's commits.
//!
//! # Lock blobs
//!
//! A lock blob stays after its first lock. [`Store::sweep`](crate::Store::sweep)
//! deletes one when it is free (no lease), clean (no record in it, else
//! counted in
//! [`SweepReport::lock_blobs_kept_pending`](crate::store::SweepReport::lock_blobs_kept_pending))
//! and old (`leasehold_acquired` at least
//! [`older_than`](crate::store::SweepOptions::with_older_than) ago; an
//! undated blob is stamped now and kept, unless `older_than` is zero). Each
//! candidate's lease is taken (one try), the blob checked again and deleted
//! with that lease id, wait queue first unless a process waits there; a
//! unit locking it meanwhile either wins (the blob is kept) or creates it
//! again. A dry run takes no lease. Cost: a listing per 5000 blobs, a read
//! per blob, and per candidate an acquire, a read, then the deletes or a
//! release.
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
