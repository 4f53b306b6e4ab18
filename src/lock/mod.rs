//! Partition-locked units of work across tables and partitions, with a
//! crash-safe commit.
//!
//! [`Store::lock`](crate::Store::lock) takes the blob lease named after a
//! partition key and returns a [`Unit`];
//! [`Store::lock_many`](crate::Store::lock_many) takes several and returns
//! the same type. Reads of entities of a locked partition (in any table)
//! record the ETags they saw; writes are staged; reads see the unit's own
//! staged writes; [`Unit::commit`] applies everything, all or nothing, and
//! dropping the unit without committing sends nothing.
//!
//! # Taking several locks
//!
//! A unit of several partitions first tries every lock at once, and when
//! it has them all reads their lock blobs at once: two round trips however
//! many partitions. A try never waits, so trying out of order cannot
//! deadlock. When any lock is held (or a try fails), the locks taken are
//! given back and the unit takes them one after the other in one
//! canonical order, by lock blob name
//! ([`Store::lock_lease_name`](crate::Store::lock_lease_name)), waiting on
//! each, so units taking overlapping sets never wait for each other in a
//! cycle. When a lock cannot be had (a timeout, `try_lock_many` meeting a
//! held one, any error), every lock already taken is given back. Each lock
//! goes through the same per-partition acquisition as
//! [`Store::lock`](crate::Store::lock), so process-local hand-over works
//! per partition.
//!
//! # The commit protocol
//!
//! * Writes that fit **one entity-group transaction** (one partition of
//!   one table, at most 100 operations and 4 MiB) go in that transaction,
//!   which the service applies atomically.
//! * Anything else **decides in a row** (code: `commit.rs`, `decision.rs`,
//!   `marks.rs`; the rows' layouts in `crate::rows`). The staged writes form (partition, table)
//!   *groups*, each of any size; the first in canonical order (partition,
//!   then table) is the *primary group*, its partition the *primary*.
//!   1. **Marks**, all at once: every row of every group but the primary
//!      (and of the primary too, when its writes and the decision row do
//!      not fit one transaction) gets a *row mark* (reserved property
//!      `_lhTxn`: a fresh transaction id, which names the primary group's
//!      table, and the primary) and the row the commit leaves (its
//!      *after-image*, `_lhNew`), each row written as read plus the two,
//!      conditioned on the ETag the unit read (a placeholder where the row
//!      was absent). An after-image that does not fit beside its row (a
//!      string property holds 64 KiB, an entity 1 MiB and 255 properties)
//!      goes to *after-image rows* of the row's own partition and table
//!      (row keys `_lhCommit.<id>.a…`), written in the same round; the
//!      mark then refers to them. The round's transactions are chunked to
//!      100 operations and 4 MiB each. A row changed since the unit read it
//!      fails its mark, and the commit fails here, nothing applied (the
//!      marks made are taken off again). A row that cannot take a mark at
//!      all (at the service's limits already) is [`crate::Error::Invalid`],
//!      naming it, before anything is sent.
//!   2. **The commit point**: the insert of the commit's *decision row*
//!      (row key `_lhCommit.<id>`, state `committed`) in the primary group's
//!      table and partition — in one transaction with the primary group's
//!      own writes, each conditioned on the row as the unit read it, when
//!      they fit there. Applied whole or not at all.
//!   3. **Finish**, all at once, together with the locks' releases (once
//!      the commit point holds, whoever takes a lock next finishes a marked
//!      row it meets itself): every marked row replaced by its after-image
//!      (or deleted), at the ETag its mark produced, and the after-image
//!      rows deleted. The unit answers.
//!   4. The decision row deleted, behind the answer, once no mark needs it
//!      (should the process stop first, [`Store::sweep`](crate::Store::sweep)
//!      removes it).
//!
//!   After the unit's reads that is 3 sequential round trips to the
//!   answer, the releases included, whatever the number of rows,
//!   partitions and tables, and no lock-blob write: a lock blob holds the
//!   lease and its wait queue only.
//!
//! **Invariants.** (a) A commit is decided exactly when its decision row
//! is stored, and the decision row is only ever *inserted*: by the commit
//! point as `committed`, or by a reader withdrawing the commit as
//! `withdrawn`. The service lets one insert of a row key win, so exactly
//! one decision is ever stored, whatever the clocks and leases say. (b) A
//! marked row's ETag is known to the commit alone (every read resolves a
//! mark before returning a row), so between its mark and its finish only
//! the commit, or a reader acting on the decision, writes it: each such
//! write is conditioned on the ETag it read, so two of them never both
//! apply. (c) Every mark carries what finishing it needs (the after-image,
//! or the after-image rows it names, removed only once the mark is off),
//! so a committed row can be finished by anyone who reads it. (d) The
//! decision row is deleted only once every mark of its commit is off: no
//! reader can need it after that.
//!
//! A reader meeting a mark reads the decision row: `committed`, it writes
//! the after-image at the row's ETag; `withdrawn`, it takes the mark off
//! (a placeholder is deleted); none, it waits briefly for the writer, then
//! takes the primary's lock — so a live writer, which holds that lock, is
//! never withdrawn — and **inserts** the decision row as `withdrawn`. A
//! writer that wakes after being withdrawn has its commit point refused
//! whole (its decision row's insert fails) and answers
//! [`crate::Error::LeaseLost`], nothing applied. Row keys starting
//! `_lhCommit.` are reserved: reads never return them.
//!
//! # Units and optimistic writes
//!
//! Rows that units write may also be written by plain [`Table`](crate::Table)
//! writes — the same entity types, no declaration — and neither model can
//! break the other:
//!
//! * **Before a commit's marks**, an optimistic write that lands on a row
//!   the unit read makes that row's mark fail (its ETag changed): the
//!   commit takes off the marks it made and fails with the refusal
//!   ([`crate::Error::Conflict`] inside [`crate::Error::Batch`], naming
//!   the row), nothing applied. The caller runs the unit again, as after
//!   any stale read.
//! * **From its marks on**, a marked row's ETag is known only to the
//!   commit: every read — [`Table::get`](crate::Table::get), queries,
//!   [`Table::update_with`](crate::Table::update_with), index lookups, and
//!   the reads of other units — resolves a mark it meets before it returns
//!   the row (see above), so no optimistic writer ever holds a marked
//!   row's ETag, and one holding an older ETag fails with `Conflict` as
//!   usual (and `update_with` reads again). An insert that meets a
//!   placeholder resolves it and is tried again.
//!
//! Unconditional writes ([`Table::upsert`](crate::Table::upsert),
//! `upsert_merge`, `replace_unconditionally`, `delete_unconditionally`)
//! ask for last-writer-wins and get it: one that replaces or deletes a
//! marked row wins over the commit for that row (the commit's finish,
//! conditioned on the mark's ETag, is refused and skipped); a merge keeps
//! the mark, and the commit's write, applied later, replaces the row.
//! Either way the result is that of the two writes one after the other.
//!
//! A reader meeting a mark pays for it: one decision-row read and one
//! write when the commit is decided; a short wait, and when the writer is
//! slow or dead, tries of the primary's lock at growing intervals until its
//! lease runs out (see "Waiting for a crashed holder"). Marks exist only
//! between a commit's first round and its finish, a few round trips,
//! unless its writer dies there. A read inside a unit that holds the
//! primary's lock withdraws an undecided commit at once.
//!
//! # What the caller is told
//!
//! [`Unit::commit`] answers with what storage holds, even when the unit
//! stalled past its leases half-way:
//!
//! * `Ok` means every write is applied. [`CommitReport::finished_by`] says
//!   whether this unit finished every row, or whether readers finished
//!   some first ([`FinishedBy::Recovery`]).
//! * An error other than [`crate::Error::InDoubt`] means nothing of the
//!   commit is applied.
//! * [`crate::Error::InDoubt`] — only when storage could not be asked — means
//!   all or nothing, not known which; it names the primary partition and
//!   the transaction, and [`Store::commit_outcome`](crate::Store::commit_outcome)
//!   answers once storage does.
//!
//! A commit whose commit point's reply is lost reads its decision row;
//! finding none, it withdraws the commit itself (inserting the row as
//! `withdrawn`), so the answer is final either way: `Ok`, or an error with
//! nothing applied. Only when storage cannot be asked is it
//! [`crate::Error::InDoubt`]; [`Store::commit_outcome`](crate::Store::commit_outcome)
//! then reads (or makes) the decision the same way, and `leasehold locks
//! decide` does from the command line. A commit withdrawn by the next
//! holder of the primary's lock, after its own lease ran out, is
//! [`crate::Error::LeaseLost`] with nothing applied.
//!
//! # Readers outside a unit
//!
//! A one-partition, one-table commit (one entity-group transaction) is
//! atomic to every reader. A commit decided in a row is atomic to every
//! reader of single rows: a row read before the commit point shows the
//! state before it (an undecided mark is waited for or withdrawn), one read
//! after shows the commit's write. But two plain
//! [`Table`](crate::Table) reads are two moments: one can come before the
//! commit point and the other after (a transfer's debit without its
//! credit). To read several partitions consistently, read them inside a
//! unit holding their locks ([`Store::lock_many`](crate::Store::lock_many),
//! then [`Unit::get_in`] or [`Unit::query`], then [`Unit::abandon`]):
//! nothing commits to them while it holds them. A read in a unit whose
//! reply arrives when a lock of the unit may have run out (by its local
//! validity deadline: the process paused past the lease, say, while
//! another took the lock and committed) fails with
//! [`crate::Error::LeaseLost`] instead of returning a row of after that
//! commit beside rows read before it: run the unit again.
//!
//! Every filtered query — plain, projected, page by page, or in a unit —
//! also fetches the rows of its key range that carry a mark, resolves
//! them, and applies the filter to each as resolved (the service evaluates
//! it on the row as stored, the before-image): a decided commit is never
//! missed, an undecided after-image never returned.
//!
//! # Waiting for a crashed holder
//!
//! A unit that finds a partition's lock held waits on it (up to
//! [`LockOptions::acquire_timeout`], 60 s by default). When the holder's
//! process died, its lease runs out at most one lease duration after its
//! last acquire or renewal — [`LockOptions::DEFAULT_LEASE_DURATION`], 15 s,
//! for a store built without lease options, or the lock lease options'
//! duration — and the waiter takes it at its next poll (see
//! [`crate::lease`]). What the dead unit left marked is resolved row by
//! row by whoever reads it. A reader waiting on a dead writer's undecided
//! marks tries the primary's lease at growing intervals (500 ms, doubling,
//! at most 6 s apart): 7 tries for a 15 s lease, and at most 20 requests
//! in all until it has withdrawn the commit. An operator who
//! knows the holder is dead ends the wait sooner with `leasehold locks
//! break PK`.
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
//! lock blob as that acquire finds it (read, or known unchanged: see the
//! request budget) holds the metadata, and only when it names another
//! process (or none) does the unit write its own name, one metadata write
//! under the lease id. So a process taking a lock back that it held last,
//! and every unit handed over inside a process, pays nothing; a lock
//! changing hands between processes pays one request. That is the
//! least storage allows: a lease's id cannot be read back (Get Blob
//! Properties only confirms an id the caller already knows), and the ids
//! stay random per tenure so a stale holder's request can never be taken
//! for the current one's, so naming the holder of a tenure needs a write in
//! that tenure.
//!
//! # Request budget
//!
//! With `L` locked partitions, `R` reads, and a commit over `G` groups
//! whose marking round takes `M` transactions (one per 100 rows or 4 MiB
//! of a group outside the commit point, after-image rows included), a unit
//! that takes its leases costs
//!
//! `L` acquires + `L` lock-blob reads + `R` +
//! (one transaction ? 1 : `M` + the commit point + `M` finishing
//! transactions + the decision row's delete) + `L` releases,
//!
//! plus one metadata write per lock that comes from another process (see
//! above), and one read per row the commit writes without having read it
//! (an upsert, say; inserts need none).
//!
//! A lock-blob read is skipped when the acquire's reply shows the blob's
//! ETag unchanged since this process last saw it (see [`crate::lease`]'s
//! "Reading the lease blob"): a process taking back a lock nobody else
//! took since pays neither the read nor the holder write; one taking a
//! lock from another process pays both. Locks handed over by another task
//! of the same process skip their acquire, lock-blob read and release.
//!
//! So one table of one partition costs acquire + lock-blob read + `R` +
//! 1 + release (5 with one read; 4 taken back unchanged; 6 taken from
//! another process, with the holder write), two tables `R` + 7 (`R` + 6
//! taken back unchanged), and a transfer between two customers (an
//! account and a ledger entry each: `G` = 4, `M` = 3, `R` = 2) costs 16:
//! 14 when both locks are taken back unchanged, 18 when both come from
//! another process, and 10 once both locks are handed over (plus the
//! releases of the last unit in the queue). A unit of 1,000 inserts in one
//! partition and table sends 10 marking transactions, the commit point,
//! 10 finishing transactions and the decision row's delete.
//!
//! A commit refused before its commit point (a row changed since it was
//! read) sends its marking transactions (and the refused commit point),
//! then one transaction per marking transaction that went through (taking
//! its marks off).
//!
//! The hand-written equivalent — take both leases, read, write each
//! partition's transaction, release — costs `2L + R + G` (14 for that
//! transfer), but it is neither atomic nor crash-safe: a crash between the
//! transactions leaves money gone from one customer and not arrived at the
//! other, and nothing finishes it; nor does it keep optimistic writers from
//! overwriting what a unit read. The decision row's delete is the price of
//! the decision record, the marking transactions that of atomicity and of
//! living beside optimistic writes.
//!
//! # Rows commits leave behind
//!
//! A commit removes its decision row and after-image rows once every
//! marked row is finished. What a writer that stopped half-way leaves, and
//! the decision rows of withdrawn commits, are removed by
//! [`Store::sweep`](crate::Store::sweep): a committed decision
//! row once it is older than `older_than` and than an hour, and none of
//! the groups it names still holds one of its marks; a withdrawn one once it is older than
//! `older_than` and than 20 minutes, the longest a commit point sent
//! before the withdrawal could take to land: the backend dates and signs
//! the commit point only while the writer's lease is valid (however long
//! its process was stopped before that), the commit is withdrawn only after
//! that lease ran out, and the service refuses a request signed with Shared
//! Key more than 15 minutes after its date; after-image rows with their
//! decision row.
//! A withdrawn decision row removed while marks of its commit remain costs
//! their next reader a withdrawal again, nothing more. A committed one is
//! what [`Store::commit_outcome`](crate::Store::commit_outcome) reads, so
//! it stays an hour whatever `older_than`. A commit's id is a version 7
//! UUID, which carries the time the commit began: `commit_outcome`
//! withdraws a commit it finds undecided only when it began less than 50
//! minutes ago (the hour, less 5 minutes of skew for each of the writer's
//! and the sweeper's clocks against the service's); for an older one whose
//! decision row is gone it answers `NotFound` (the decision may have been
//! a committed one, swept), never a guess.
//! [`Store::list_commits`](crate::Store::list_commits) (`leasehold locks
//! show PK`) lists a partition's commits and the rows they still mark.
//!
//! # Lock blobs
//!
//! A partition's lock blob is created the first time the partition is
//! locked and stays after it, so the lock container holds one blob per
//! partition ever locked. [`Store::sweep`](crate::Store::sweep) deletes
//! those of partitions nobody has locked for `older_than`
//! ([`SweepOptions::with_older_than`](crate::store::SweepOptions::with_older_than)).
//! A lock blob goes when it is
//!
//! * free (no lease on it),
//! * clean (no record in it: a lock blob holds the lease and its wait
//!   queue only, so a record is another program's; counted in
//!   [`SweepReport::lock_blobs_kept_pending`](crate::store::SweepReport::lock_blobs_kept_pending)),
//!   and
//! * old: the last process to take the lock over did so
//!   (`leasehold_acquired`) at least `older_than` ago.
//!
//! `Duration::ZERO` makes every free, clean lock blob old. A lock blob
//! that cannot be dated (no `leasehold_acquired`: the backends expose no
//! last-modified time) is old only then; otherwise it is stamped with the
//! time now and kept, and ages from there. A lock used by one process only
//! keeps the date that process first took it, so it may be deleted between
//! two of its units; its next unit creates it again (two requests more).
//!
//! It is safe against units locking the same partitions meanwhile: each
//! candidate's lease is taken (trying once, as
//! [`Store::try_lock`](crate::Store::try_lock) does), the blob checked
//! again as that acquire read it, and deleted with that lease id (its wait
//! queue first, unless a process waits there: then both are kept). A unit
//! locking the partition at that moment either gets the lock first (the
//! blob is kept) or waits as for any holder and creates the blob again.
//! A dry run takes no lease and deletes nothing; a lock blob that cannot
//! be dated counts as recent there (unless `older_than` is zero).
//!
//! Cost: one listing request per 5000 lock blobs and one read per lock
//! blob; a candidate adds an acquire and a read, then a read of its wait
//! queue and the deletes (the queue's only when it exists), or a release
//! (with a metadata write when it is stamped). The sweep reports the
//! blobs examined, deleted (with their partitions' keys) and kept, per
//! reason, in [`SweepReport`](crate::store::SweepReport).
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
pub(crate) use env::{AfterCommit, ClaimInput, Claimed, CommitClaims, IndexedType, LockEnv};
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
