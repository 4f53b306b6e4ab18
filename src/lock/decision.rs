//! Decision rows: the commit point of a unit writing several (partition,
//! table) groups, or more than one entity-group transaction holds, is the
//! insert of the commit's *decision row* (row key `_lhCommit.<id>`, state
//! `committed`) in the primary partition. The protocol is stated in
//! "The commit protocol" of the [module docs](super), the row's layout in
//! `crate::rows::decision`, with the reads and inserts of the race that
//! decides it (which every read meeting a mark takes part in, see
//! `crate::table`'s marks); this file answers an operator's question
//! about a commit's outcome.
//!
//! Whoever meets a marked row reads the decision row: `committed`, it
//! writes the row the commit leaves; `withdrawn`, it takes the mark off;
//! none yet, it waits for the writer, then takes the primary's lock (so a
//! live writer is never withdrawn) and *inserts* the decision row as
//! `withdrawn`. Both the commit point and a withdrawal insert the same row,
//! so exactly one of them is stored: a writer that wakes after it was
//! withdrawn has its commit point refused whole. No clock, lease or lock
//! blob takes part in the decision.

use std::sync::Arc;

use super::env::LockEnv;
use crate::error::{Error, Result};
use crate::key::PartitionKey;
use crate::rows::decision::table_of;
pub(crate) use crate::rows::decision::{Decision, read, settle, withdraw};

/// What happened to a commit, as its decision row tells it
/// ([`Store::commit_outcome`](crate::Store::commit_outcome)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommitOutcome {
    /// The commit point went through: every write is applied (rows still
    /// marked are finished by whoever reads them next).
    Applied,
    /// The commit was withdrawn before its commit point (by its writer, or
    /// by a reader or [`Store::commit_outcome`](crate::Store::commit_outcome)
    /// meeting it undecided): nothing of it is applied, ever.
    NotApplied,
}

/// [`Store::commit_outcome`](crate::Store::commit_outcome): transaction
/// `txn`'s decision, made final — a transaction without one is withdrawn,
/// so that a commit point still on its way is refused.
///
/// A sweep removes a committed decision row once no mark needs it, and not
/// before it is [`DECISIONS_KEPT`](crate::rows::decision::DECISIONS_KEPT) old.
/// So a decision row missing for a transaction begun (by its id) less than
/// that long ago, minus [`CLOCK_SKEW`] for each of the clocks involved (the
/// writer's, the service's, the sweeper's), was never committed, and
/// withdrawing it is the truth; for an older one it may have been swept,
/// and the answer is an error rather than a guess.
///
/// # Errors
/// [`Error::Invalid`] for a transaction id that names no table;
/// [`Error::NotFound`] for a transaction begun too long ago whose decision
/// row is gone; as [`read`].
pub(crate) async fn outcome(
    env: &Arc<LockEnv>,
    primary: &PartitionKey,
    txn: &str,
) -> Result<CommitOutcome> {
    let Some(table) = table_of(txn) else {
        return Err(Error::invalid(
            format!("transaction id {txn:?}"),
            "names no table: a commit's id is `<id>.<table>`, as `CommitReport::transaction` and `Error::InDoubt` give it",
        ));
    };
    let backend = env.backend().as_ref();
    let decision = match read(backend, &table, primary, txn).await? {
        Some(decision) => decision,
        None => {
            let swept_before = time::OffsetDateTime::now_utc()
                - crate::rows::decision::DECISIONS_KEPT
                + CLOCK_SKEW * 2;
            if crate::rows::decision::issued_at(txn).is_some_and(|at| at < swept_before) {
                return Err(Error::NotFound {
                    what: format!(
                        "the decision row of transaction {txn} (partition {:?} of `{table}`): the transaction began more than {} minutes ago, and a sweep may have removed its decision once it was applied and finished; its outcome can no longer be read from storage (read its rows)",
                        primary.as_str(),
                        (crate::rows::decision::DECISIONS_KEPT - CLOCK_SKEW * 2).as_secs() / 60
                    ),
                    code: None,
                    table: Some(table.as_str().to_owned()),
                    row: None,
                });
            }
            withdraw(backend, &table, primary, txn).await?
        }
    };
    Ok(match decision {
        Decision::Committed => CommitOutcome::Applied,
        Decision::Withdrawn => CommitOutcome::NotApplied,
    })
}

/// How far apart the clocks that date a commit may be: the writer's (its
/// id), the service's (its decision row), a sweeper's.
const CLOCK_SKEW: std::time::Duration = std::time::Duration::from_secs(5 * 60);
