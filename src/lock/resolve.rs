//! The operator's way out of a journal that cannot be rolled forward
//! ([`Store::resolve_commit`](crate::Store::resolve_commit)): show, row by
//! row, what the partition holds against what finishing and undoing the
//! commit would leave, then do one of them on an explicit choice.
//!
//! A journal is kept for an operator only when a row it writes was changed
//! by something that did not take the lock, so rolling forward cannot tell
//! whether that change should survive; that happens only to commits
//! without row marks ([`LockOptions::row_marks`](super::LockOptions::row_marks)
//! off, or written by earlier versions). A commit with row marks can only
//! be finished (rolled forward): `Undo` of one is refused. Finishing writes the journal's
//! after-images over whatever the rows hold now; undoing writes the
//! before-images back (for a commit that was undoing, the first operations
//! only: those it had applied). Either way each write is conditioned on the
//! ETag read just before it under the primary partition's lock, so a row
//! changed while the choice is carried out stops it (run it again), and the
//! journal is cleared with its outcome recorded
//! ([`Store::commit_outcome`](crate::Store::commit_outcome)). Intents left in
//! the other participants' lock blobs are stale from then on and are
//! cleared by their next holders.

use super::env::LockEnv;
use crate::backend::WriteOptions;
use crate::backend::{Precondition, StoredEntity, TableBackend, TableOp};
use crate::entity::{EntityData, Properties};
use crate::error::{Error, ErrorKind, Result};
use crate::key::PartitionKey;
use crate::outcome::shows_effect;
use crate::telemetry::FinishedBy;
use std::sync::Arc;

use super::journal::{Journal, JournalOp, LockRecord, PendingWrite};
use super::name::lock_name;

/// What [`Store::resolve_commit`](crate::Store::resolve_commit) does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResolveAction {
    /// Only show the pending commit and its rows; nothing is written and no
    /// lock is taken.
    Show,
    /// Write every after-image, over whatever the rows hold now: the commit
    /// ends applied. Refused for a commit that was undoing
    /// ([`Resolution::undoing`]): its caller was told nothing of it remains.
    /// For a commit with row marks: roll it forward (only rows still
    /// carrying its marks are written).
    Finish,
    /// Write the before-images back (of every operation, or of those a
    /// commit that was undoing had applied): the commit ends undone.
    /// Refused ([`Error::Invalid`]) for a commit with row marks, which is
    /// decided once its journal is stored.
    Undo,
}

/// What a row of a pending commit holds now, against the commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RowShows {
    /// The commit's write is applied to it.
    After,
    /// It is as the unit read it (the write is not applied, or was undone).
    Before,
    /// Neither: something wrote it without the lock. Finishing or undoing
    /// overwrites that write.
    Neither,
}

/// One row of a pending commit, as [`Store::resolve_commit`](crate::Store::resolve_commit)
/// shows it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ResolveRow {
    /// The journalled write (its `properties`: what finishing writes; for a
    /// merge, merged over what the row holds then).
    pub write: PendingWrite,
    /// What the row holds now (`None`: absent).
    pub stored: Option<Properties>,
    /// What undoing leaves (`None`: no row); the row as the unit read it.
    pub before: Option<Properties>,
    /// Which of the two the row shows now.
    pub shows: RowShows,
}

/// A pending commit as [`Store::resolve_commit`](crate::Store::resolve_commit)
/// found it, and what it did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Resolution {
    /// The primary partition, whose lock blob holds the journal.
    pub primary: PartitionKey,
    /// The commit's transaction id (`None`: written by an older leasehold).
    pub transaction: Option<String>,
    /// Whether the commit was undoing (a transaction of it was refused
    /// half-way): rolling it forward then means finishing the undo.
    pub undoing: bool,
    /// Its rows, in the order the commit writes them.
    pub rows: Vec<ResolveRow>,
    /// What was done: [`ResolveAction::Show`] wrote nothing.
    pub done: ResolveAction,
    /// How many rows were written to carry the choice out (rows that
    /// already showed the chosen state are skipped).
    pub written: usize,
}

impl Resolution {
    /// The rows whose current content finishing (`Finish`) or undoing
    /// (`Undo`) would overwrite although the commit never wrote it: those
    /// that [`RowShows::Neither`].
    pub fn overwritten(&self) -> impl Iterator<Item = &ResolveRow> {
        self.rows.iter().filter(|r| r.shows == RowShows::Neither)
    }
}

/// See [`Store::resolve_commit`](crate::Store::resolve_commit).
pub(crate) async fn resolve_commit(
    env: &Arc<LockEnv>,
    pk: PartitionKey,
    action: ResolveAction,
) -> Result<Option<Resolution>> {
    let primary = match LockRecord::read(env.locks(), &lock_name(env.table_prefix(), &pk)?).await? {
        None => return Ok(None),
        Some(LockRecord::Intent(intent)) => {
            PartitionKey::new(&intent.intent_of).map_err(|e| Error::Inconsistent {
                what: format!(
                    "the intent in the lock of partition {pk:?} names a bad primary: {e}"
                ),
            })?
        }
        Some(LockRecord::Journal(_)) => pk,
    };
    let name = lock_name(env.table_prefix(), &primary)?;
    let backend = env.backend().as_ref();
    if action == ResolveAction::Show {
        let Some(LockRecord::Journal(journal)) = LockRecord::read(env.locks(), &name).await? else {
            return Ok(None);
        };
        return Ok(Some(inspect(backend, &journal, &primary).await?.0));
    }
    let guard = env
        .locks()
        .acquire(name.as_str(), env.lock_options().acquire_timeout)
        .await?;
    let result = async {
        let Some(journal) = Journal::pending(&guard).await? else {
            return Ok(None);
        };
        let finish = action == ResolveAction::Finish;
        if finish && journal.undo.is_some() {
            // Its commit already told its caller that nothing remains.
            return Err(Error::invalid(
                format!("ResolveAction::Finish of the commit pending in partition {:?}", primary.as_str()),
                "that commit was refused half-way and is being undone (its caller was told nothing of it remains); only ResolveAction::Undo ends it",
            ));
        }
        if journal.marked {
            // A commit whose rows were marked is decided by its journal and
            // never stopped by a row changed meanwhile: finishing it is
            // rolling it forward, which writes only the rows still carrying
            // its marks.
            if !finish {
                return Err(Error::invalid(
                    format!("ResolveAction::Undo of the commit pending in partition {:?}", primary.as_str()),
                    "its rows were marked before its journal, so the commit is decided and nothing can stop it; only ResolveAction::Finish (or Store::roll_forward) ends it",
                ));
            }
            let (mut resolution, _) = inspect(backend, &journal, &primary).await?;
            let report = super::roll_forward::roll_forward(
                backend,
                &journal,
                &std::collections::BTreeSet::new(),
            )
            .await?;
            journal.finish(&guard, true).await?;
            env.telemetry().roll_forward(FinishedBy::Operator);
            resolution.written = report.applied;
            resolution.done = action;
            tracing::warn!(partition = %primary, txn = ?journal.txn, action = ?action, written = resolution.written, "an operator resolved a pending commit");
            return Ok(Some(resolution));
        }
        let (mut resolution, stored) = inspect(backend, &journal, &primary).await?;
        // Undo last first, over the operations that were (or may have been)
        // applied; finish in the commit's order.
        let count = match (finish, journal.undo) {
            (true, _) | (false, None) => journal.ops.len(),
            (false, Some(applied)) => applied,
        };
        let mut order: Vec<usize> = (0..count).collect();
        if !finish {
            order.reverse();
        }
        for i in order {
            let entry = &journal.ops[i];
            let (table, op) = entry.to_op(&primary)?;
            let target = if finish {
                forced_after(&op, stored[i].as_ref())
            } else {
                forced_before(entry.before_image(&primary)?, &op, stored[i].as_ref())
            };
            if let Some(write) = target {
                backend.execute(&table, write, &WriteOptions::new()).await.map_err(|e| {
                    if matches!(
                        e.kind(),
                        ErrorKind::Conflict | ErrorKind::AlreadyExists | ErrorKind::NotFound
                    ) {
                        Error::Conflict {
                            what: format!(
                                "row {:?} of `{table}` changed while resolving the commit ({e}); nothing more was written and the journal is kept: look again and resolve again",
                                op.row_key().as_str()
                            ),
                            code: e.code().map(str::to_owned),
                            table: Some(table.as_str().to_owned()),
                            row: Some(Box::new((op.partition_key().clone(), op.row_key().clone()))),
                        }
                    } else {
                        e
                    }
                })?;
                resolution.written += 1;
            }
        }
        journal.finish(&guard, finish).await?;
        if finish {
            env.telemetry().roll_forward(FinishedBy::Operator);
        } else {
            env.telemetry().undo(FinishedBy::Operator);
        }
        resolution.done = action;
        tracing::warn!(partition = %primary, txn = ?journal.txn, action = ?action, written = resolution.written, "an operator resolved a pending commit");
        Ok(Some(resolution))
    }
    .await;
    if let Err(e) = guard.release().await {
        tracing::warn!(partition = %primary, error = %e, "releasing the lock after resolving failed; it will expire");
    }
    result
}

/// The rows of `journal` as stored now, and each row's stored version.
async fn inspect(
    backend: &dyn TableBackend,
    journal: &Journal,
    primary: &PartitionKey,
) -> Result<(Resolution, Vec<Option<StoredEntity>>)> {
    let summary = journal.summary()?;
    let mut rows = Vec::with_capacity(journal.ops.len());
    let mut stored_rows = Vec::with_capacity(journal.ops.len());
    for (entry, write) in journal.ops.iter().zip(summary.writes) {
        let (table, op) = entry.to_op(primary)?;
        let stored = backend
            .get(&table, op.partition_key(), op.row_key())
            .await?;
        let before = before_of(entry, primary)?;
        // A row still carrying the commit's mark is as the unit read it.
        let marked = journal.marked
            && stored.as_ref().is_some_and(|row| {
                super::marks::Mark::of(&row.data.properties)
                    .is_some_and(|m| journal.txn.as_deref() == Some(m.txn.as_str()))
            });
        let shows = if marked {
            RowShows::Before
        } else if shows_effect(&op, stored.as_ref()) {
            RowShows::After
        } else if entry.before.is_some() && entry.shows_before(primary, stored.as_ref())? {
            RowShows::Before
        } else {
            RowShows::Neither
        };
        rows.push(ResolveRow {
            write,
            stored: stored.as_ref().map(|s| s.data.properties.clone()),
            before,
            shows,
        });
        stored_rows.push(stored);
    }
    Ok((
        Resolution {
            primary: primary.clone(),
            transaction: journal.txn.clone(),
            undoing: journal.undo.is_some(),
            rows,
            done: ResolveAction::Show,
            written: 0,
        },
        stored_rows,
    ))
}

/// The before-image's properties (`None`: absent, or not recorded).
fn before_of(entry: &JournalOp, primary: &PartitionKey) -> Result<Option<Properties>> {
    if entry.before.is_none() {
        return Ok(None);
    }
    Ok(entry.before_image(primary)?.map(|d| d.properties))
}

/// The condition that a write lands on exactly the row read.
fn on(stored: &StoredEntity) -> Precondition {
    Precondition::IfMatch(stored.etag.clone())
}

/// The write that makes the row show `op`'s effect, whatever it holds now
/// (`stored`), conditioned on that; `None` when it already does.
fn forced_after(op: &TableOp, stored: Option<&StoredEntity>) -> Option<TableOp> {
    if shows_effect(op, stored) {
        return None;
    }
    Some(match (op, stored) {
        (TableOp::Delete { .. }, None) => return None,
        (
            TableOp::Delete {
                partition_key,
                row_key,
                ..
            },
            Some(s),
        ) => TableOp::Delete {
            partition_key: partition_key.clone(),
            row_key: row_key.clone(),
            if_match: Some(s.etag.clone()),
        },
        (TableOp::Insert(d) | TableOp::Replace(d, _) | TableOp::Merge(d, _), None) => {
            TableOp::Insert(d.clone())
        }
        (TableOp::Insert(d) | TableOp::Replace(d, _), Some(s)) => {
            TableOp::Replace(d.clone(), on(s))
        }
        (TableOp::Merge(d, _), Some(s)) => TableOp::Merge(d.clone(), on(s)),
    })
}

/// The write that puts `before` (`None`: no row) back over what the row of
/// `op` holds now, conditioned on that; `None` when it already shows it.
fn forced_before(
    before: Option<EntityData>,
    op: &TableOp,
    stored: Option<&StoredEntity>,
) -> Option<TableOp> {
    match (before, stored) {
        (None, None) => None,
        (None, Some(s)) => Some(TableOp::Delete {
            partition_key: op.partition_key().clone(),
            row_key: op.row_key().clone(),
            if_match: Some(s.etag.clone()),
        }),
        (Some(d), None) => Some(TableOp::Insert(d)),
        (Some(d), Some(s)) if d.properties == s.data.properties => None,
        (Some(d), Some(s)) => Some(TableOp::Replace(d, on(s))),
    }
}
