//! Rolling a pending journal forward: finishing, row by row, a commit whose
//! writer died half-way.

use std::collections::BTreeSet;

use crate::backend::TableBackend;
use crate::backend::WriteOptions;
use crate::error::{Error, ErrorKind, Result};
use crate::key::PartitionKey;
use crate::lease::LeaseManager;
use crate::outcome::{shows_effect, still_applicable};

use super::journal::{Journal, LockRecord};
use super::marks::{Mark, at_etag};
use super::name::lock_name;

/// The outcome of rolling a journal forward.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RollForwardReport {
    /// Operations applied by the roll-forward.
    pub applied: usize,
    /// Operations found already applied.
    pub already_applied: usize,
}

/// Rolls `journal` forward, one operation at a time: an operation whose row
/// still has its precondition is applied (conditioned on the ETag just read,
/// so nothing written meanwhile is overwritten); one whose row already shows
/// its effect is skipped; anything else stops with [`Error::Inconsistent`].
///
/// Operations of partitions in `done` are counted as already applied
/// without a look: their intents are gone, which the commit's writer does
/// only once every transaction is applied (see [`finished_participants`]).
///
/// Idempotent: running it again after a partial run finishes the job.
///
/// # Errors
/// [`Error::Inconsistent`] naming the row that contradicts the journal; the
/// backend's errors.
pub(crate) async fn roll_forward(
    backend: &dyn TableBackend,
    journal: &Journal,
    done: &BTreeSet<PartitionKey>,
) -> Result<RollForwardReport> {
    if journal.marked {
        return roll_forward_marked(backend, journal, done).await;
    }
    let primary = journal.primary()?;
    let mut report = RollForwardReport::default();
    for (i, entry) in journal.ops.iter().enumerate() {
        let (table, op) = entry.to_op(&primary)?;
        if done.contains(op.partition_key()) {
            report.already_applied += 1;
            continue;
        }
        let stored = backend
            .get(&table, op.partition_key(), op.row_key())
            .await?;
        if shows_effect(&op, stored.as_ref()) {
            report.already_applied += 1;
            continue;
        }
        match still_applicable(&op, stored.as_ref()) {
            Some(now) => match backend.execute(&table, now, &WriteOptions::new()).await {
                Ok(_) => report.applied += 1,
                Err(e) if refused(&e) => {
                    // The journal's own writer, paused past its lease, may
                    // have sent the same write just now: then the row
                    // shows the effect.
                    let again = backend
                        .get(&table, op.partition_key(), op.row_key())
                        .await?;
                    if !shows_effect(&op, again.as_ref()) {
                        // The row and table are named here already: keep
                        // only what the service answered.
                        let answer = e
                            .code()
                            .map_or_else(|| format!("{:?}", e.kind()), str::to_owned);
                        return Err(Error::Inconsistent {
                            what: format!(
                                "journal operation {i} ({} of row {:?} in `{table}`) was overtaken by another write while rolling forward ({answer})",
                                op.name(),
                                op.row_key().as_str()
                            ),
                        });
                    }
                    report.already_applied += 1;
                }
                Err(e) => return Err(e),
            },
            None => {
                return Err(Error::Inconsistent {
                    what: format!(
                        "journal operation {i} ({} of row {:?} in `{table}`): the row neither has the ETag the unit read nor shows the operation's effect, so something wrote it outside the lock; the journal is kept for an operator",
                        op.name(),
                        op.row_key().as_str()
                    ),
                });
            }
        }
    }
    Ok(report)
}

/// [`roll_forward`] of a journal whose rows were marked first: an
/// operation whose row still carries the journal's mark is applied at the
/// row's ETag; one whose row does not is skipped (applied already, or
/// overwritten since by an unconditional write, which then wins). Nothing
/// can contradict such a journal, so it never stops with
/// [`Error::Inconsistent`].
async fn roll_forward_marked(
    backend: &dyn TableBackend,
    journal: &Journal,
    done: &BTreeSet<PartitionKey>,
) -> Result<RollForwardReport> {
    let primary = journal.primary()?;
    let txn = journal.txn.as_deref().unwrap_or_default();
    let mut report = RollForwardReport::default();
    'ops: for entry in &journal.ops {
        let (table, op) = entry.to_op(&primary)?;
        if done.contains(op.partition_key()) {
            report.already_applied += 1;
            continue;
        }
        // A refusal means someone else (a reader finishing the row, the
        // journal's own writer) wrote it first: look again.
        for _ in 0..MARKED_ATTEMPTS {
            let stored = backend
                .get(&table, op.partition_key(), op.row_key())
                .await?;
            let marked = stored
                .as_ref()
                .filter(|row| Mark::of(&row.data.properties).is_some_and(|m| m.txn == txn));
            let Some(row) = marked else {
                report.already_applied += 1;
                continue 'ops;
            };
            match backend
                .execute(&table, at_etag(op.clone(), &row.etag), &WriteOptions::new())
                .await
            {
                Ok(_) => {
                    report.applied += 1;
                    continue 'ops;
                }
                Err(e) if refused(&e) => {}
                Err(e) => return Err(e),
            }
        }
        return Err(Error::Conflict {
            what: format!(
                "row {:?} of `{table}` kept changing while its journalled write was rolled forward; rolling forward again finishes it",
                op.row_key().as_str()
            ),
            code: None,
            table: Some(table.as_str().to_owned()),
            row: Some(Box::new((op.partition_key().clone(), op.row_key().clone()))),
        });
    }
    Ok(report)
}

/// How often a marked journal's row is looked at again after a refusal.
const MARKED_ATTEMPTS: usize = 8;

/// Whether the service refused a write because the row is not as expected.
fn refused(e: &Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::Conflict | ErrorKind::AlreadyExists | ErrorKind::NotFound
    )
}

/// Finishes the undo of a journal whose commit was refused half-way (its
/// first `applied` operations applied; see [`Journal::undo`]), one
/// operation at a time, last first: a row that already shows its
/// before-image is skipped; one that shows the operation's effect gets its
/// before-image back, conditioned on the ETag just read; anything else
/// stops with [`Error::Inconsistent`]. Idempotent, as [`roll_forward`].
/// The report counts undo writes as `applied`.
///
/// # Errors
/// As [`roll_forward`].
pub(crate) async fn roll_back(
    backend: &dyn TableBackend,
    journal: &Journal,
    applied: usize,
    done: &BTreeSet<PartitionKey>,
) -> Result<RollForwardReport> {
    let primary = journal.primary()?;
    let mut report = RollForwardReport::default();
    for (i, entry) in journal.ops.iter().enumerate().take(applied).rev() {
        let (table, op) = entry.to_op(&primary)?;
        if done.contains(op.partition_key()) {
            report.already_applied += 1;
            continue;
        }
        let stored = backend
            .get(&table, op.partition_key(), op.row_key())
            .await?;
        if entry.shows_before(&primary, stored.as_ref())? {
            report.already_applied += 1;
            continue;
        }
        let contradicted = || Error::Inconsistent {
            what: format!(
                "undoing journal operation {i} ({} of row {:?} in `{table}`): the row shows neither the operation's effect nor the state before it, so something wrote it outside the lock; the journal is kept for an operator",
                op.name(),
                op.row_key().as_str()
            ),
        };
        if !shows_effect(&op, stored.as_ref()) {
            return Err(contradicted());
        }
        if let Some(undo) = entry.undo(&primary, stored.as_ref().map(|s| &s.etag))? {
            match backend.execute(&table, undo, &WriteOptions::new()).await {
                Ok(_) => report.applied += 1,
                Err(e) if refused(&e) => {
                    // The undoing writer, paused past its lease, may have
                    // sent the same undo just now.
                    let again = backend
                        .get(&table, op.partition_key(), op.row_key())
                        .await?;
                    if !entry.shows_before(&primary, again.as_ref())? {
                        return Err(contradicted());
                    }
                    report.already_applied += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(report)
}

/// The participants of `journal` (partitions other than its primary) whose
/// lock blobs no longer hold its intent. A commit's writer clears its
/// intents only once every transaction is applied (or undone), and
/// whoever resolves an intent through its primary finishes the primary's
/// journal first, so those partitions are finished: a journal left behind
/// (its clear failed) is not applied onto them again, where a later holder
/// may have written since. Reads the lock blobs without their locks.
///
/// # Errors
/// The backend's errors; [`Error::Inconsistent`] for a record that does not
/// parse.
pub(crate) async fn finished_participants(
    locks: &LeaseManager,
    table_prefix: &str,
    journal: &Journal,
) -> Result<BTreeSet<PartitionKey>> {
    let primary = journal.primary()?;
    let mut participants = BTreeSet::new();
    for entry in &journal.ops {
        let pk = entry.partition(&primary)?;
        if pk != primary {
            participants.insert(pk);
        }
    }
    let mut done = BTreeSet::new();
    let Some(txn) = journal.txn.as_deref() else {
        return Ok(done);
    };
    for pk in participants {
        let record = LockRecord::read(locks, &lock_name(table_prefix, &pk)?).await?;
        let takes_part = matches!(&record, Some(LockRecord::Intent(i)) if i.txn == txn);
        if !takes_part {
            done.insert(pk);
        }
    }
    Ok(done)
}
