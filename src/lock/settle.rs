//! Settling a journalled commit that could not finish by itself: what the
//! caller of [`Unit::commit`](super::Unit::commit) is told once the journal
//! may be stored, and the record that lets a writer learn, after the fact,
//! that somebody else finished its commit.
//!
//! # The outcome record
//!
//! Whoever finishes a journal *other than the commit that wrote it* — the
//! next holder rolling it forward, or finishing its undo — writes, in the
//! same lock-blob write that clears the journal, one line into the lock
//! blob's outcome record (section [`OUTCOME_SECTION`]): the transaction id
//! and whether it was applied or undone. The record keeps the newest
//! [`OUTCOME_LOG_LEN`] lines. A commit that finishes its own journal writes
//! nothing there: it tells its caller directly.
//!
//! So for a transaction id, the primary partition's lock blob answers (see
//! [`CommitOutcome`]): its journal is still there (decided, not yet
//! finished), the record says how somebody finished it, or neither — the
//! journal was never stored, and nothing of the commit was applied.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::env::LockEnv;
use super::journal::{Journal, LockRecord};
use super::name::lock_name;
use super::report::{CommitReport, FinishedBy};
use crate::error::{Error, Result};
use crate::key::PartitionKey;
use crate::lease::{LeaseGuard, LeaseManager, LeaseName};

/// The lease-document section of the outcome record.
pub(crate) const OUTCOME_SECTION: &str = "commits";

/// How many finished transactions the outcome record keeps.
pub(crate) const OUTCOME_LOG_LEN: usize = 32;

/// What happened to a journalled commit, as its primary partition's lock
/// blob tells it ([`Store::commit_outcome`](crate::Store::commit_outcome)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommitOutcome {
    /// The journal is stored and not finished: the commit is decided and is
    /// applied by whoever takes the partition's lock next
    /// ([`Store::roll_forward`](crate::Store::roll_forward) does it now).
    Pending,
    /// Another holder of the lock finished the commit: every write is
    /// applied.
    Applied,
    /// A transaction of the commit was refused half-way (a write without
    /// the lock changed a row), and another holder finished undoing it:
    /// nothing of the commit remains.
    Undone,
    /// Neither a journal nor a record: the journal was never stored, so
    /// nothing of the commit was applied. (A commit that finished its own
    /// journal told its caller so and leaves no record; the record keeps
    /// the newest 32 transactions finished by others.)
    NotRecorded,
}

/// One line of the outcome record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Line {
    /// The transaction id.
    txn: String,
    /// `true`: applied; `false`: undone.
    applied: bool,
    /// When it was finished, in Unix seconds (by the finisher's clock).
    #[serde(default)]
    at: i64,
}

/// When the newest transaction in the outcome record of `document` was
/// finished (`None`: the record is empty). A lock blob whose record is
/// recent must be kept: a writer that stalled may still come to read it.
pub(crate) fn newest_outcome(
    document: &crate::lease::LeaseDocument,
) -> Option<time::OffsetDateTime> {
    lines(document.section(OUTCOME_SECTION))
        .iter()
        .map(|l| l.at)
        .max()
        .and_then(|at| time::OffsetDateTime::from_unix_timestamp(at).ok())
}

/// The outcome record's lines, oldest first (an unreadable record counts as
/// empty: it only ever adds knowledge).
fn lines(section: Option<&serde_json::Value>) -> Vec<Line> {
    section
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}

impl Journal {
    /// Clears the journal finished by somebody other than its commit,
    /// recording its outcome (`applied`, or undone) in the same write.
    /// A journal without a transaction id (written by an older leasehold)
    /// is cleared without a record.
    ///
    /// # Errors
    /// As [`Journal::clear`].
    pub(crate) async fn finish(&self, guard: &LeaseGuard, applied: bool) -> Result<()> {
        let txn = self.txn.clone();
        let at = time::OffsetDateTime::now_utc().unix_timestamp();
        guard
            .update_document(|d| {
                d.set_section(crate::lease::LOCK_SECTION, None);
                if let Some(txn) = txn {
                    let mut log = lines(d.section(OUTCOME_SECTION));
                    log.retain(|l| l.txn != txn);
                    log.push(Line { txn, applied, at });
                    let excess = log.len().saturating_sub(OUTCOME_LOG_LEN);
                    log.drain(..excess);
                    d.set_section(OUTCOME_SECTION, serde_json::to_value(log).ok());
                }
            })
            .await
    }
}

/// The outcome of transaction `txn` whose primary partition's lock blob is
/// `name`, read without the lock.
pub(crate) async fn outcome(
    locks: &LeaseManager,
    name: &LeaseName,
    txn: &str,
) -> Result<CommitOutcome> {
    let Some(blob) = locks.read_blob(name).await? else {
        return Ok(CommitOutcome::NotRecorded);
    };
    if let Some(record) = blob.document.section(crate::lease::LOCK_SECTION)
        && let LockRecord::Journal(j) = LockRecord::from_value(record.clone())?
        && j.txn.as_deref() == Some(txn)
    {
        return Ok(CommitOutcome::Pending);
    }
    Ok(
        match lines(blob.document.section(OUTCOME_SECTION))
            .iter()
            .find(|l| l.txn == txn)
        {
            Some(l) if l.applied => CommitOutcome::Applied,
            Some(_) => CommitOutcome::Undone,
            None => CommitOutcome::NotRecorded,
        },
    )
}

/// A journalled commit that could not finish by itself after its journal
/// write was sent: the journal may be stored, so the commit may be decided.
#[derive(Debug)]
pub(super) struct Unsettled {
    /// The primary partition.
    pub(super) primary: PartitionKey,
    /// The transaction id.
    pub(super) txn: String,
    /// Why the commit could not finish.
    pub(super) cause: Error,
    /// The report so far.
    pub(super) report: CommitReport,
}

/// How often settling looks again at a journal that another holder is
/// finishing.
const SETTLE_ROUNDS: usize = 3;

impl Unsettled {
    /// Finds out what became of the commit, once this unit has given its
    /// locks up: applied by somebody else (`Ok`, [`FinishedBy::Recovery`]);
    /// still pending (this process takes the primary's lock, which rolls
    /// the journal forward, and looks again); undone, or never stored (the
    /// error, saying nothing was applied). When storage cannot be asked,
    /// [`Error::InDoubt`].
    pub(super) async fn settle(self, env: &Arc<LockEnv>, wait: Duration) -> Result<CommitReport> {
        let Unsettled {
            primary,
            txn,
            cause,
            mut report,
        } = self;
        let in_doubt = |source: Error| Error::InDoubt {
            what: format!(
                "the commit could not finish ({cause}) and its outcome could not be read back"
            ),
            primary: primary.clone(),
            transaction: Some(txn.clone()),
            source: Box::new(source),
        };
        let name = match lock_name(env.table_prefix(), &primary) {
            Ok(name) => name,
            Err(e) => return Err(in_doubt(e)),
        };
        for _ in 0..SETTLE_ROUNDS {
            let found = match outcome(env.locks(), &name, &txn).await {
                Ok(found) => found,
                Err(e) => return Err(in_doubt(e)),
            };
            tracing::info!(partition = %primary, txn = %txn, outcome = ?found, cause = %cause, "settling a commit that could not finish by itself");
            match found {
                CommitOutcome::Applied => {
                    report.finished_by = FinishedBy::Recovery;
                    return Ok(report);
                }
                CommitOutcome::Undone => {
                    return Err(Error::Conflict {
                        what: format!(
                            "transaction {txn} (primary partition {:?}) was refused half-way ({cause}) and undone; nothing of the commit remains",
                            primary.as_str()
                        ),
                        code: cause.code().map(str::to_owned),
                        table: cause.table().map(str::to_owned),
                        row: cause.row().map(|(p, r)| Box::new((p.clone(), r.clone()))),
                    });
                }
                CommitOutcome::NotRecorded => return Err(not_applied(cause)),
                CommitOutcome::Pending => {
                    // Decided but not finished: taking the lock rolls the
                    // journal forward (and records it), then look again.
                    match env.lock_with_timeout(primary.clone(), wait).await {
                        Ok(unit) => {
                            if let Err(e) = unit.abandon().await {
                                tracing::warn!(partition = %primary, error = %e, "releasing the primary's lock after settling failed; it will expire");
                            }
                        }
                        Err(e @ Error::Inconsistent { .. }) => {
                            return Err(Error::Inconsistent {
                                what: format!(
                                    "transaction {txn} is decided (its journal is stored in the lock of partition {:?}) but cannot be finished: {e}; see Store::resolve_commit",
                                    primary.as_str()
                                ),
                            });
                        }
                        Err(e) => return Err(in_doubt(e)),
                    }
                }
            }
        }
        Err(in_doubt(Error::Timeout {
            what: "the journal to be finished by the partition's holder".into(),
            after: wait,
        }))
    }
}

/// The error of a commit whose journal was never stored: nothing of it was
/// applied. A lease loss says so in its text.
fn not_applied(cause: Error) -> Error {
    match cause {
        Error::LeaseLost { what, code } => Error::LeaseLost {
            what: format!(
                "{what}; the commit's journal was not stored, so nothing of it was applied"
            ),
            code,
        },
        other => other,
    }
}
