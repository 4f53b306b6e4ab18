//! The rows and properties leasehold writes beside an application's own:
//! every reserved name of the row protocol and the layout of each row, in
//! one place below [`crate::table`], so that the tables, the units and the
//! indexes read and write them alike.
//!
//! | what | where | name |
//! |---|---|---|
//! | a commit's row mark ([`mark`]) | property of a marked row | `_lhTxn` |
//! | a marked row's after-image ([`after`]) | property of a marked row | `_lhNew` |
//! | after-image rows ([`after`]) | rows of the marked row's partition | `_lhCommit.<id>.a<n>.<i>` |
//! | a commit's decision row ([`decision`]) | row of the primary partition | `_lhCommit.<id>`, properties `_lhDecision`, `_lhGroups` |
//! | a deleted indexed entity's tombstone ([`tombstone`]) | the entity's row | `_lhGone` |
//! | the instant a row expires ([`expiry`]) | property of an entity row | `_lhExpires` |
//!
//! Reads through leasehold never return a decision row or an after-image
//! row (their row keys start with [`decision::ROW_PREFIX`]), a tombstone
//! nor a row past its expiry (the last two judged in one place,
//! [`tombstone::is_tombstone`]), and resolve a mark before returning its
//! row. The index rows'
//! claims (`crate::index`), the fence rows of fenced writes
//! (`crate::lease::fence`) and the write log of lost-reply checks
//! (`crate::backend::write_log`) keep their reserved names beside their
//! code; entity types may not use any name starting with `_lh`.

pub(crate) mod after;
pub(crate) mod decision;
pub(crate) mod expiry;
pub(crate) mod mark;
pub(crate) mod tombstone;

/// How long after starting its claims an indexed write (a `Table` write, a
/// unit's or a transaction's commit) may send the writes that rely on them
/// (see "How long a claim or tombstone is relied on" in [`crate::index`]).
pub(crate) const SEND_WINDOW: std::time::Duration = std::time::Duration::from_secs(5 * 60);
