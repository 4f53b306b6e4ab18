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
//! * Writes to **one partition of one table** (at most 100 of them) go in
//!   one entity-group transaction, which the service applies atomically.
//! * Anything else writes several (partition, table) *groups*, and by
//!   default **decides in a row** (code: `decided.rs`, `decision.rs`). The
//!   first group in canonical order (partition, then table) with room for
//!   one more operation is the *primary group*; its partition is the
//!   *primary*.
//!   1. Every row of every other group gets a *row mark* naming a fresh
//!      transaction id (which names the primary group's table) and the
//!      primary, and carries the row the commit leaves (its after-image,
//!      reserved property `_lhNew`): one transaction per group and 100
//!      rows, all at once, each row written as read plus the reserved
//!      properties, conditioned on the ETag the unit read (a placeholder
//!      where the row was absent). A row changed since the unit read it
//!      fails its mark, and the commit fails here, nothing applied.
//!   2. **The commit point**: the primary group's own writes, each
//!      conditioned on the row as the unit read it, and the insert of the
//!      commit's *decision row* (row key `_lhCommit.<id>`, state
//!      `committed`), in one entity-group transaction: applied whole or not
//!      at all.
//!   3. Every marked row is replaced by the row the commit leaves, at the
//!      ETag its mark produced, all at once.
//!   4. The decision row is deleted, together with the locks' releases.
//!
//!   After the unit's reads that is 4 sequential round trips, the releases
//!   included, and no lock-blob write. A reader meeting a mark reads the
//!   decision row: `committed`, it writes the row the commit leaves;
//!   `withdrawn`, it takes the mark off; none, it waits briefly for the
//!   writer, then takes the primary's lock (so a live commit is never
//!   withdrawn) and **inserts** the decision row as `withdrawn`. The commit
//!   point inserts the same row, so exactly one of the two is stored, and a
//!   writer that wakes after being withdrawn has its commit point refused
//!   whole: no clock or lease takes part in the decision. Row keys starting
//!   `_lhCommit.` are reserved: queries never return them. A decision row
//!   outlives its commit only when the commit stopped before its marks
//!   were all off (readers still need it) or was withdrawn (a paused writer
//!   may still send its commit point).
//! * Where a row with its mark and after-image would be over the service's
//!   limits (a string property holds 64 KiB, an entity 1 MiB and 255
//!   properties), where no group has room, or with
//!   [`LockOptions::decision_rows`] off, the commit is *journalled* in the
//!   primary's lock blob instead:
//!   1. Every row the commit writes gets a *row mark* naming a fresh
//!      transaction id and the primary: one transaction per partition,
//!      table and 100 rows, all at once, each row written as read plus the
//!      reserved property `_lhTxn`, conditioned on the ETag the unit read
//!      (a placeholder holding only the mark where the row was absent). A
//!      row changed since the unit read it fails its mark, and the commit
//!      fails here, before anything is applied (see "Units and optimistic
//!      writes").
//!   2. The *journal* — the transaction id, and every operation (a whole
//!      replacement or a delete, conditioned on the ETag its row's mark
//!      produced) with the row's before-image — is written into the
//!      primary's lock blob, under its lease (so a holder that lost its
//!      lease cannot write it). **This write is the commit point**: from
//!      here on the commit is finished, by this unit or by whoever takes a
//!      participating lock or reads a marked row next; before it, nothing
//!      is applied.
//!   3. One transaction per (partition, table, 100 operations) is applied;
//!      they touch distinct entity groups, so they all go out at once. Each
//!      replaces the marked rows at the ETags their marks produced, which
//!      takes the marks off.
//!   4. The journal is cleared.
//!
//!   Then the locks are given up, all at once. After the unit's reads, a
//!   journalled commit so takes 4 sequential round trips however many
//!   partitions and tables it writes, and the releases a fifth. The rest of
//!   this page says "journal" for the commit point of either kind where it
//!   makes no difference: for a commit deciding in a row, the decision row
//!   plays the journal's part, and a reader meeting its marks finishes or
//!   withdraws it as described above.
//!
//!   The other partitions' lock blobs are not written: their rows carry the
//!   marks, which every reader resolves through the primary (see "Units and
//!   optimistic writes"), and a roll-forward writes only rows that still
//!   carry its marks, so it never overwrites what a later holder wrote.
//!
//!   Without row marks ([`LockOptions::row_marks`] off, as earlier versions
//!   did), every other written partition's lock blob first gets an
//!   *intent* naming the primary and the transaction, under that lock's
//!   lease (all at once), so that a journal is never rolled forward onto a
//!   partition whose lock blob does not say it takes part; the journal and
//!   the intents are cleared together at the end. The converse makes that
//!   safe: an intent is cleared only once its transactions are applied (or
//!   undone), or by someone who finished the primary's journal first, so a
//!   roll-forward of a journal whose clear failed skips the partitions
//!   whose intent is gone, and an intent left behind is resolved through
//!   its primary.
//! * Every write carries the ETag read in the unit, or insert-only semantics
//!   (only the explicitly unconditional upserts carry none), so a holder that
//!   lost its lease without noticing fails instead of overwriting.
//! * Before sending anything, commit checks that every lease has enough time
//!   left ([`LockOptions::commit_margin`]); otherwise
//!   [`crate::Error::LeaseLost`] and nothing is sent.
//!
//! # Units and optimistic writes
//!
//! Rows that units write may also be written by plain [`Table`](crate::Table)
//! writes — the same entity types, no declaration — and neither model can
//! break the other:
//!
//! * **Before a commit's journal**, an optimistic write that lands on a row
//!   the unit read makes that row's mark fail (its ETag changed): the
//!   commit takes off the marks it made and fails with
//!   the refusal ([`crate::Error::Conflict`] inside
//!   [`crate::Error::Batch`], naming the row), nothing applied. The caller
//!   runs the unit again, as after any stale read.
//! * **From its marks on**, a marked row's ETag is known only to the commit:
//!   every read — [`Table::get`](crate::Table::get), queries,
//!   [`Table::update_with`](crate::Table::update_with), index lookups, and
//!   the reads of other units — resolves a mark it meets before it returns
//!   the row, so no optimistic writer ever holds a marked row's ETag, and
//!   one holding an older ETag fails with `Conflict` as usual (and
//!   `update_with` reads again). Resolving reads the primary's lock blob:
//!   when the journal is stored, the commit is decided and the reader
//!   applies that row's operation (at the row's ETag) itself; when it is
//!   not, the reader waits briefly for the commit's writer, then takes the
//!   primary's lock — which rolls a stored journal forward, and after which
//!   no journal of that transaction can be stored any more — and takes the
//!   mark off (a placeholder is deleted). An insert that meets a
//!   placeholder resolves it and is tried again.
//! * **After the journal**, the commit's transactions replace marked rows at
//!   the ETags the marks produced, so nothing but an unconditional write can
//!   refuse them: a commit is never undone half-way, and rolling a journal
//!   forward applies every operation whose row still carries its mark and
//!   skips the others, so it never stops on a row changed meanwhile. No
//!   journal is kept for an operator, and no partition is left unusable.
//!
//! Unconditional writes ([`Table::upsert`](crate::Table::upsert),
//! `upsert_merge`, `replace_unconditionally`, `delete_unconditionally`)
//! ask for last-writer-wins and get it: one that replaces or deletes a
//! marked row after the journal wins over the commit for that row (the
//! roll-forward skips it); a merge keeps the mark, and the commit's write,
//! applied later, replaces the row. Either way the result is that of the
//! two writes one after the other.
//!
//! A reader meeting a mark pays for it: one lock-blob read and one write
//! when the commit is decided; a short wait, and when the writer is slow
//! or dead, the wait for the primary's lock (at most
//! [`LockOptions::acquire_timeout`]; see "Waiting for a crashed holder").
//! Marks exist only between a commit's first round and its transactions, a
//! few round trips, unless its writer dies there. A read inside a unit that
//! holds the primary's lock takes an undecided mark off at once.
//!
//! [`LockOptions::row_marks`] turns the marks off, for a rolling upgrade
//! while processes of a version that does not resolve them still read the
//! same tables: commits then work as those versions' did (see "Undo").
//!
//! # What the caller is told
//!
//! [`Unit::commit`] answers with what storage holds, even when the unit
//! stalled past its leases half-way:
//!
//! * `Ok` means every write is applied. [`CommitReport::finished_by`] says
//!   whether this unit applied them, or whether the partition's next holder
//!   rolled the journal forward after this unit lost its lease
//!   ([`FinishedBy::Recovery`]).
//! * An error other than [`crate::Error::InDoubt`] means nothing of the
//!   commit is applied (and, for [`crate::Error::Inconsistent`], that a
//!   journal is kept for an operator, as it says).
//! * [`crate::Error::InDoubt`] — only when storage could not be asked — means
//!   all or nothing, not known which; it names the primary partition and
//!   the transaction, and [`Store::commit_outcome`](crate::Store::commit_outcome)
//!   answers once storage does.
//!
//! A commit deciding in a row whose commit point's reply is lost reads its
//! decision row; finding none, it withdraws the commit itself (inserting
//! the row as `withdrawn`), so the answer is final either way: `Ok`, or an
//! error with nothing applied. Only when storage cannot be asked is it
//! [`crate::Error::InDoubt`]; [`Store::commit_outcome`](crate::Store::commit_outcome)
//! then reads (or makes) the decision the same way. A commit withdrawn by
//! the next holder of the primary's lock, after its own lease ran out, is
//! [`crate::Error::LeaseLost`] with nothing applied.
//!
//! A journalled commit that fails after its journal write was sent does
//! not guess: it
//! gives its locks up and reads the primary's lock blob. A journal still
//! there is decided, so it takes the primary's lock again, which rolls the
//! journal forward, and answers `Ok`. A journal finished by someone else
//! left a line in the blob's *outcome record* (the newest 32 transactions
//! finished by a holder other than their own commit): applied, or undone.
//! Neither means the journal was never stored: nothing was applied. These
//! reads happen only on such failures; a commit that goes through sends
//! exactly its budget below.
//!
//! # Readers outside a unit
//!
//! A one-partition, one-table commit (one entity-group transaction) is
//! atomic to every reader. A journalled commit is atomic to units — taking
//! a participating lock first finishes whatever was decided — but not to
//! plain [`Table`](crate::Table) reads and queries: while its transactions
//! are being applied, or before a dead writer's journal is rolled forward,
//! such a reader can see some of its rows written and others not (a
//! transfer's debit without its credit). To read several partitions
//! consistently, read them inside a unit holding their locks
//! ([`Store::lock_many`](crate::Store::lock_many), then [`Unit::get_in`] or
//! [`Unit::query`], then [`Unit::abandon`]): nothing commits to them while
//! it holds them. A read in a unit whose reply arrives when a lock of the
//! unit may have run out (by its local validity deadline: the process
//! paused past the lease, say, while another took the lock and committed)
//! fails with [`crate::Error::LeaseLost`] instead of returning a row of
//! after that commit beside rows read before it: run the unit again.
//!
//! Every filtered query — plain, projected, page by page, or in a unit —
//! also fetches the rows of its key range that carry a mark, resolves
//! them, and applies the filter to each as resolved (the service evaluates
//! it on the row as stored, the before-image): a decided commit is never
//! missed, an undecided after-image never returned.
//!
//! # Recovery
//!
//! Whoever takes a lock next finds what a process that died half-way left
//! behind, and resolves it before user code sees the partition:
//!
//! * a **journal** is rolled forward: an operation whose row still carries
//!   the commit's mark is applied; one whose row does not is skipped
//!   (applied already, by the commit or a reader, or overwritten by an
//!   unconditional write). A journal without marks (written with
//!   [`LockOptions::row_marks`] off, or by an earlier version): an
//!   operation whose row still has its precondition is applied; one whose
//!   row already shows its after-image is skipped; anything else stops with
//!   [`crate::Error::Inconsistent`] and leaves the journal for an
//!   operator, who sees what finishing or
//!   undoing it would overwrite and picks one
//!   ([`Store::resolve_commit`](crate::Store::resolve_commit), or
//!   `leasehold locks resolve PK`); until then every lock of that partition
//!   is refused with that error. Rows of other partitions are written
//!   under the primary's lock alone: their marks (or, without marks, their
//!   intents) keep everyone else out of them meanwhile.
//! * a **row mark** met by a read, in a unit or not, is resolved through
//!   its primary (see "Units and optimistic writes").
//! * an **intent** (of a commit without row marks) is resolved through its
//!   primary. If the unit already
//!   holds the primary (it comes earlier in canonical order), the primary's
//!   journal was rolled forward when it was taken, so the intent is stale and
//!   is cleared. Otherwise the unit gives back every lock it took, takes the
//!   primary alone, rolls its journal forward if there is one, gives it
//!   back, and starts over; the intent it meets again is cleared (the
//!   primary was held after the commit's writer lost it, so no journal of
//!   that transaction can appear any more). Giving everything back keeps
//!   the canonical order, so resolving cannot deadlock against units taking
//!   the same locks.
//!
//! # Waiting for a crashed holder
//!
//! A unit that finds a partition's lock held waits on it (up to
//! [`LockOptions::acquire_timeout`], 60 s by default). When the holder's
//! process died, its lease runs out at most one lease duration after its
//! last acquire or renewal — [`LockOptions::DEFAULT_LEASE_DURATION`], 15 s,
//! for a store built without lease options, or the lock lease options'
//! duration — and the waiter takes it at its next poll (see
//! [`crate::lease`]), then rolls forward what the dead unit decided. So the
//! worst-case stall after a crash is the lock lease duration plus one poll
//! interval and a few round trips. An operator who knows the holder is
//! dead ends it sooner with `leasehold locks roll-forward PK --break-lease`.
//!
//! # Undo
//!
//! A journalled commit whose rows are marked is never undone after its
//! journal: nothing but an unconditional write can refuse its transactions
//! (see "Units and optimistic writes"). A crash is not undone either: a
//! decided commit (its journal written) is rolled forward by the next
//! holder, or row by row by the readers that meet its marks.
//!
//! Without row marks ([`LockOptions::row_marks`] off, and journals written
//! by earlier versions): if the first transaction of a journalled commit is
//! refused (a stale ETag, say) while the unit holds its locks, nothing was
//! applied: the journal and intents are cleared and the error returned. (A
//! refusal after a lock was lost may be the next holder's roll-forward of
//! this very journal: the commit is then settled as above.) A later
//! transaction can only be refused if something wrote a row without taking
//! its lock; the commit then marks the journal as undoing (one more
//! lock-blob write), undoes the transactions already applied, last first,
//! from the before-images, each undo conditioned on the ETag its own write
//! produced (an undone insert is deleted at that ETag, an undone delete
//! inserted back), clears the journal and intents, and returns
//! [`crate::Error::Conflict`] naming the refused row. Only an undo that is
//! itself refused (the row was written again meanwhile) ends in
//! [`crate::Error::Inconsistent`], the journal kept for an operator. A
//! journal marked as undoing is finished the other way by the next holder:
//! it puts back the before-image of every applied operation that still
//! shows its effect, conditioned on the ETag it reads, and skips those that
//! already show their before-image.
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
//! With `L` locked partitions, `P` of them written, `G` transactions (one
//! per partition, table and 100 operations) and `R` reads, a unit that
//! takes its leases costs
//!
//! `L` acquires + `L` lock-blob reads + `R` +
//! (`G = 1` ? 1 : `G` marking transactions + journal + `G` + journal
//! clear) + `L` releases,
//!
//! plus one metadata write per lock that comes from another process (see
//! above), and one read per row a journalled commit writes without having
//! read it (an upsert, say; inserts need none).
//!
//! A lock-blob read is skipped when the acquire's reply shows the blob
//! unchanged since this process last saw it: the reply carries the blob's
//! ETag (taking a lease leaves it as it is), and the lock manager
//! remembers each lock blob as it last read, wrote or created it, with its
//! ETag (see [`crate::lease`]'s "Reading the lease blob"). Any write by
//! anybody else changes the ETag, so the read is skipped only when nobody
//! else wrote the blob since; after a write under the lease whose outcome
//! is unknown, the blob is read again. So a process taking back a lock
//! that nobody else took since pays neither the read nor the holder write,
//! and one taking a lock from another process pays both. Locks handed over
//! by another task of the same process (see [`crate::lease`]'s
//! process-local sharing) skip their acquire, lock-blob read and release.
//!
//! A commit deciding in a row (the default) sends, instead of the journalled
//! part, `G` − 1 marking transactions + the commit point + `G` − 1
//! finishing transactions + the decision row's delete: `2G` requests, and
//! no lock-blob write.
//!
//! So one table of one partition costs acquire + lock-blob read + `R` +
//! 1 + release (5 with one read; 4 taken back unchanged; 6 taken from
//! another process, with the holder write), two tables `R` + 7 (`R` + 6
//! taken back unchanged; journalled, `R` + 9 and `R` + 8), and a transfer
//! between two customers (an account and a ledger entry each: `P` = 2,
//! `G` = 4, `R` = 2) costs 16: 14 when both locks are taken back
//! unchanged, 18 when both come from another process, and 10 once both
//! locks are handed over (plus the releases of the last unit in the
//! queue). Journalled, the same transfer costs 2 more (18, 16, 20, 12).
//!
//! A commit refused before its commit point (a row changed since it was
//! read) sends its marking transactions (and, deciding in a row, the
//! refused commit point), then one transaction per marking transaction
//! that went through (taking its marks off).
//!
//! Without row marks, a journalled commit sends `P` − 1 intents (together,
//! in its first round) instead of the `G` marking transactions, and clears
//! them with its journal: the transfer above costs 16 (14 taken back
//! unchanged). One refused half-way sends its transactions up to the
//! refused one, then one lock-blob write (the journal marked as undoing)
//! and one undo transaction per transaction applied, and clears the journal
//! and intents as usual.
//!
//! The hand-written equivalent — take both leases, read, write each
//! partition's transaction, release — costs `2L + R + G` (14 for that
//! transfer), but it is neither atomic nor crash-safe: a crash between the
//! transactions leaves money gone from one customer and not arrived at the
//! other, and nothing finishes it; nor does it keep optimistic writers from
//! overwriting what a unit read. The decision row's delete (or the
//! journal's write and clear) is the price of the decision record, the
//! marking transactions that of atomicity and of living beside optimistic
//! writes.
//!
//! # Lock blobs
//!
//! A partition's lock blob is created the first time the partition is
//! locked and stays after it, so the lock container holds one blob per
//! partition ever locked. [`Store::prune_locks`](crate::Store::prune_locks)
//! deletes those of partitions nobody has locked for a given time: free,
//! without a pending journal or intent, and without a recent commit outcome
//! recorded, each checked again and deleted under the lock's own lease, so
//! a unit locking the partition at that moment waits for it as for any
//! holder and then creates the blob again. See [`PruneReport`].
//!
//! [`LeaseManager::describe`]: crate::lease::LeaseManager::describe
//! [`Store::locks`]: crate::Store::locks

mod acquire;
pub(crate) mod after;
mod commit;
pub(crate) mod decision;
mod env;
mod fold;
mod indexes;
mod keys;
pub(crate) mod marks;
pub(crate) mod name;
pub(crate) mod options;
mod prune;
mod query;
mod report;
mod slot;
mod unit;

pub use decision::CommitOutcome;
pub(crate) use decision::outcome as commit_outcome;
pub(crate) use env::LockEnv;
pub(crate) use env::{AfterCommit, CommitClaims, CommitView, IndexedType};
pub use keys::IntoPartitionKeys;
pub(crate) use marks::MarkResolve;
pub use options::LockOptions;
pub use prune::PruneReport;
pub(crate) use prune::prune_locks;
pub use query::UnitQuery;
pub use report::{CommitReport, FinishedBy};
pub(crate) use slot::Slot;
pub use unit::Unit;
