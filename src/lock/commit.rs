//! [`Unit::commit`]: one entity-group transaction when it can be, the
//! journalled protocol otherwise (see "The commit protocol" in the
//! [module docs](super)), and the undo of a journalled commit that
//! something writing without the lock made impossible to finish.

use std::collections::BTreeSet;

use futures_util::future::join_all;
use std::time::Duration;
use tracing::Instrument as _;

use super::journal::{Before, Intent, Journal};
use super::report::CommitReport;
use super::roll_forward::roll_forward;
use super::settle::Unsettled;
use super::unit::{Slot, Unit};
use crate::backend::{TableBackend, TableOp, Version, validate_batch};
use crate::error::{Error, ErrorKind, Result};
use crate::key::{PartitionKey, RowKey, TableName};
use crate::outcome::{self, Locked};

/// Why a commit failed.
#[derive(Debug)]
pub(super) enum Failed {
    /// Before its commit point, or after an undo it finished: nothing of the
    /// commit is applied (or, for [`Error::Inconsistent`], what is kept for
    /// an operator says what is).
    Definite(Error),
    /// After its journal write was sent, without finishing: what storage
    /// holds decides the answer.
    Unsettled(Unsettled),
}

impl From<Error> for Failed {
    fn from(e: Error) -> Self {
        Failed::Definite(e)
    }
}

/// One entity-group transaction of a commit: up to 100 operations on one
/// partition of one table.
struct Batch {
    part: usize,
    table: TableName,
    ops: Vec<TableOp>,
    rows: Vec<(Slot, RowKey)>,
}

impl Unit {
    /// [`Unit::commit`]: stages the index rows, commits, gives the locks up
    /// and, for a commit that could not finish after its journal write was
    /// sent, finds out what storage holds.
    pub(super) async fn commit_and_settle(mut self) -> Result<CommitReport> {
        let span = tracing::debug_span!("leasehold.commit", partition = %self.partition_key(), partitions = self.parts.len(), ops = self.staged.len());
        let result = async {
            self.stage_index_rows().await.map_err(Failed::Definite)?;
            self.commit_inner().await
        }
        .instrument(span.clone())
        .await;
        // Whatever happened, the locks are given up; a journal left by a
        // failed commit is rolled forward (or reported) by the next holder.
        // The caller asked to commit: what was not is not "forgotten".
        self.staged.clear();
        self.release_all().await;
        match result {
            Ok(report) => Ok(report),
            Err(Failed::Definite(e)) => Err(e),
            // After the journal write was sent, the answer is what storage
            // holds: found out with the locks given up, since finishing the
            // journal may mean taking the primary's lock again.
            Err(Failed::Unsettled(unsettled)) => {
                unsettled
                    .settle(&self.store, self.options.acquire_timeout)
                    .instrument(span)
                    .await
            }
        }
    }

    async fn commit_inner(&mut self) -> Result<CommitReport, Failed> {
        let mut report = CommitReport::default();
        if self.staged.is_empty() {
            return Ok(report);
        }
        let staged = std::mem::take(&mut self.staged);
        for i in 0..self.parts.len() {
            self.guard_of(i)?.ensure_valid(self.options.commit_margin)?;
        }
        // Staged writes are ordered by partition (canonical order), table
        // and row: consecutive runs are the (partition, table) groups.
        let mut groups: Vec<Batch> = Vec::new();
        for (key, op) in staged {
            match groups.last_mut() {
                Some(g) if g.part == key.0.part && g.table == key.0.table => {
                    g.ops.push(op);
                    g.rows.push(key);
                }
                _ => groups.push(Batch {
                    part: key.0.part,
                    table: key.0.table.clone(),
                    ops: vec![op],
                    rows: vec![key],
                }),
            }
        }
        report.operations = groups.iter().map(|g| g.ops.len()).sum();
        report.tables = groups
            .iter()
            .map(|g| &g.table)
            .collect::<BTreeSet<_>>()
            .len();
        report.partitions = groups.iter().map(|g| g.part).collect::<BTreeSet<_>>().len();
        let mut batches: Vec<Batch> = Vec::new();
        for g in groups {
            for (ops, rows) in g
                .ops
                .chunks(TableOp::MAX_BATCH_OPS)
                .zip(g.rows.chunks(TableOp::MAX_BATCH_OPS))
            {
                validate_batch(g.table.as_str(), ops)?;
                batches.push(Batch {
                    part: g.part,
                    table: g.table.clone(),
                    ops: ops.to_vec(),
                    rows: rows.to_vec(),
                });
            }
        }
        let tables: BTreeSet<&TableName> = batches.iter().map(|b| &b.table).collect();
        for table in tables {
            self.store.ensure_table(table).await?;
        }
        let backend = self.store.backend().clone();
        if let [batch] = batches.as_slice() {
            let pk = &self.parts[batch.part].pk;
            match backend.batch(&batch.table, &batch.ops).await {
                Ok(_) => {}
                Err(e) if refused(&e) => return Err(e.into()),
                Err(e) => {
                    // Reading is safe without the lease; sending again is
                    // not, so only a holder does it.
                    tracing::warn!(partition = %pk, error = %e, "transaction outcome unknown; verifying");
                    let held = self.holds(&[batch.part]);
                    verify_batch(backend.as_ref(), pk, &batch.table, &batch.ops, e, held)
                        .await
                        .map_err(|e| match e.kind() {
                            // The rows could not be read back: applied
                            // whole or not at all, not known which.
                            ErrorKind::Transient | ErrorKind::Unavailable => Error::InDoubt {
                                what: "the transaction's reply was lost and its rows could not be read back".into(),
                                primary: pk.clone(),
                                transaction: None,
                                source: Box::new(e),
                            },
                            _ => e,
                        })?;
                }
            }
            report.batches = 1;
            return Ok(report);
        }
        report.journalled = true;
        self.commit_journalled(&batches, &mut report).await?;
        Ok(report)
    }

    /// Whether this unit still holds the locks of `parts` (by the local
    /// validity deadline, which ends before the service lets anyone else
    /// take a lease). While it does, nobody else can have finished or
    /// undone its journal, so a refused transaction was refused by a
    /// writer without the lock.
    fn holds(&self, parts: &[usize]) -> bool {
        parts.iter().all(|&p| {
            self.guard_of(p)
                .and_then(|g| g.ensure_valid(Duration::ZERO))
                .is_ok()
        })
    }

    /// The journalled commit of `batches` (more than one).
    async fn commit_journalled(
        &self,
        batches: &[Batch],
        report: &mut CommitReport,
    ) -> Result<(), Failed> {
        let backend = self.store.backend().clone();
        let participants: Vec<usize> = batches
            .iter()
            .map(|b| b.part)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let primary_part = batches[0].part;
        let primary = self.parts[primary_part].pk.clone();
        let others: Vec<usize> = participants
            .iter()
            .copied()
            .filter(|p| *p != primary_part)
            .collect();
        let txn = uuid::Uuid::new_v4().simple().to_string();
        report.transaction = Some(txn.clone());
        // After the journal write is sent, a failure is settled by what
        // storage holds (see `Unsettled::settle`).
        let unsettled = |cause: Error, report: &CommitReport| {
            Failed::Unsettled(Unsettled {
                primary: primary.clone(),
                txn: txn.clone(),
                cause,
                report: report.clone(),
            })
        };

        let mut entries: Vec<(TableName, TableOp, Option<Before>)> = Vec::new();
        for b in batches {
            for (op, row) in b.ops.iter().zip(&b.rows) {
                let before = match (self.reads.get(row), op) {
                    (Some(read), _) => Before::of(read.as_ref()),
                    (None, TableOp::Insert(_)) => Before::Absent,
                    // A row written without being read in the unit (an
                    // upsert, or a value read elsewhere): read it now, for
                    // the before-image an undo would need.
                    (None, _) => Before::of(
                        backend
                            .get(&b.table, &self.parts[b.part].pk, &row.1)
                            .await?
                            .as_ref(),
                    ),
                };
                entries.push((b.table.clone(), op.clone(), Some(before)));
            }
        }
        let journal = Journal::new(&primary, Some(txn.clone()), &entries);

        // Intents first: a participant's lock blob points at the primary
        // before the journal exists, so a journal is never rolled forward
        // onto a partition that does not know it takes part. They go out
        // together.
        let intent = &Intent::new(&primary, &txn);
        let written = join_all(others.iter().map(|&p| async move {
            let guard = self.guard_of(p)?;
            write_twice(|| intent.write(guard)).await
        }))
        .await;
        let mut failed = None;
        let mut taken = Vec::with_capacity(others.len());
        for (&p, result) in others.iter().zip(written) {
            match result {
                Ok(()) => taken.push(p),
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        if let Some(e) = failed {
            self.clear_records(&taken).await;
            return Err(e.into());
        }
        let primary_guard = self.guard_of(primary_part)?;
        // A journal whose write failed is either absent (nothing happened)
        // or present (decided: the next holder rolls it forward); settling
        // reads which. The intents are cleared by whoever resolves them
        // through the primary.
        if let Err(e) = write_twice(|| journal.write(primary_guard)).await {
            return Err(unsettled(e, report));
        }

        // The commit point: the journal is stored. The transactions touch
        // distinct (partition, table) groups, so they go out together.
        let results = join_all(batches.iter().map(|b| backend.batch(&b.table, &b.ops))).await;
        let mut produced: Vec<Option<Vec<Option<Version>>>> = Vec::with_capacity(batches.len());
        let mut refusal: Option<(usize, Error)> = None;
        let mut unknown: Option<Error> = None;
        for (i, result) in results.into_iter().enumerate() {
            match result {
                Ok(versions) => {
                    produced.push(Some(versions));
                    report.batches += 1;
                }
                Err(e) => {
                    produced.push(None);
                    if refused(&e) {
                        refusal.get_or_insert((i, e));
                    } else {
                        unknown.get_or_insert(e);
                    }
                }
            }
        }
        match (refusal, unknown) {
            (None, None) => {}
            // A lock lost meanwhile: a refusal may be the next holder's
            // roll-forward of this very journal.
            (Some((_, e)), _) | (None, Some(e)) if !self.holds(&participants) => {
                return Err(unsettled(e, report));
            }
            // Some outcomes are unknown (a lost reply, a timeout): finish by
            // rolling the journal forward, which checks every row before
            // writing it.
            (_, Some(e)) => {
                tracing::warn!(partition = %primary, error = %e, "transaction outcome unknown; rolling the journal forward");
                if let Err(e) = roll_forward(backend.as_ref(), &journal, &BTreeSet::new()).await {
                    return Err(unsettled(e, report));
                }
            }
            (Some((_, e)), None) if produced.iter().all(Option::is_none) => {
                // Nothing of this commit was applied: withdraw it.
                if let Err(clear) = Journal::clear(primary_guard).await {
                    tracing::warn!(partition = %primary, error = %clear, "withdrawing a refused commit's journal failed");
                    return Err(unsettled(e, report));
                }
                self.clear_records(&others).await;
                return Err(e.into());
            }
            (Some((i, e)), None) => {
                return Err(self
                    .undo(&journal, batches, &produced, i, e, &participants)
                    .await
                    .map_or_else(|cause| unsettled(cause, report), Failed::Definite));
            }
        }
        // The journal and the intents are cleared together: a roll-forward
        // of a journal left behind skips the partitions whose intent is
        // gone (their transactions were applied before it was cleared).
        let mut all = vec![primary_part];
        all.extend(&others);
        self.clear_records(&all).await;
        Ok(())
    }

    /// Clears the lock records (intents, or a journal) of parts `parts`,
    /// all at once, best effort: one left behind is resolved by the next
    /// holder.
    async fn clear_records(&self, parts: &[usize]) {
        join_all(parts.iter().map(|&p| async move {
            let cleared = match self.guard_of(p) {
                Ok(guard) => Journal::clear(guard).await,
                Err(e) => Err(e),
            };
            if let Err(e) = cleared {
                tracing::warn!(partition = %self.parts[p].pk, error = %e, "clearing a lock record failed; the next holder resolves it");
            }
        }))
        .await;
    }

    /// Transaction `failed` of a journalled commit was refused by `cause`
    /// while others applied (`produced`: the versions each applied
    /// transaction's writes produced, `None` for those not applied), and
    /// this unit held every lock. Marks the journal as undoing (keeping only
    /// the operations applied), undoes those transactions together, each
    /// write conditioned on the ETag its own write produced, then clears
    /// the journal and the intents. Returns the error the commit returns:
    /// [`Error::Conflict`] naming the refused row, or
    /// [`Error::Inconsistent`] when an undo was refused while the unit held
    /// its locks (the journal is then kept); `Err` with the cause when the
    /// undo could not go on (a lock lost, storage failing), to be settled.
    async fn undo(
        &self,
        journal: &Journal,
        batches: &[Batch],
        produced: &[Option<Vec<Option<Version>>>],
        failed: usize,
        cause: Error,
        participants: &[usize],
    ) -> Result<Error, Error> {
        let backend = self.store.backend().clone();
        let primary = &self.parts[batches[0].part].pk;
        // The journal's operations of the transactions applied, each with
        // the ETag its write produced.
        let mut applied_ops = Vec::new();
        let mut undo_batches: Vec<(usize, Vec<usize>)> = Vec::new();
        let mut offset = 0;
        for (j, b) in batches.iter().enumerate() {
            if let Some(versions) = &produced[j] {
                let mut rows = Vec::with_capacity(b.ops.len());
                for k in 0..b.ops.len() {
                    rows.push(applied_ops.len());
                    let etag = versions
                        .get(k)
                        .and_then(Option::as_ref)
                        .map(|v| v.etag.clone());
                    applied_ops.push((journal.ops[offset + k].clone(), etag));
                }
                undo_batches.push((j, rows));
            }
            offset += b.ops.len();
        }
        // Mark the journal as undoing first: a crash from here on is
        // finished by undoing what was applied, not by rolling forward onto
        // the row that refused.
        let marked = Journal {
            ops: applied_ops.iter().map(|(op, _)| op.clone()).collect(),
            undo: Some(applied_ops.len()),
            ..journal.clone()
        };
        let guard = self.guard_of(batches[0].part)?;
        if let Err(e) = write_twice(|| marked.write(guard)).await {
            tracing::warn!(partition = %primary, error = %e, "marking the journal as undoing failed");
            return Err(cause);
        }
        let mut sends = Vec::with_capacity(undo_batches.len());
        for (j, rows) in &undo_batches {
            let b = &batches[*j];
            let mut ops = Vec::with_capacity(rows.len());
            for &r in rows {
                let (entry, etag) = &applied_ops[r];
                match entry.undo(primary, etag.as_ref()) {
                    Ok(Some(op)) => ops.push(op),
                    Ok(None) => {}
                    Err(e) => return Ok(undo_failed(*j, batches.len(), &cause, &e)),
                }
            }
            if !ops.is_empty() {
                sends.push((*j, b, ops));
            }
        }
        let undone = join_all(sends.iter().map(|(_, b, ops)| {
            let backend = backend.clone();
            async move {
                let pk = &self.parts[b.part].pk;
                match backend.batch(&b.table, ops).await {
                    Ok(_) => Ok(()),
                    Err(e) if refused(&e) => Err(e),
                    Err(e) => verify_batch(backend.as_ref(), pk, &b.table, ops, e, true).await,
                }
            }
        }))
        .await;
        for ((j, b, _), result) in sends.iter().zip(undone) {
            if let Err(e) = result {
                if !self.holds(participants) || e.is_transient() {
                    // The journal is marked: whoever takes the lock next
                    // finishes the undo, and settling finds out.
                    tracing::warn!(partition = %self.parts[b.part].pk, error = %e, "an undo transaction failed; the next holder finishes the undo");
                    return Err(cause);
                }
                return Ok(undo_failed(*j, batches.len(), &cause, &e));
            }
        }
        self.clear_records(participants).await;
        let b = &batches[failed];
        let (index, source) = match &cause {
            Error::Batch { index, source } => (*index, source.as_ref()),
            other => (0, other),
        };
        let row = b.ops.get(index).unwrap_or(&b.ops[0]);
        Ok(Error::Conflict {
            what: format!(
                "row {:?} of partition {:?} in `{}` changed without its lock, so transaction {} of {} of a journalled commit was refused ({source}); the {} applied were undone and nothing of the commit remains",
                row.row_key().as_str(),
                row.partition_key().as_str(),
                b.table,
                failed + 1,
                batches.len(),
                undo_batches.len(),
            ),
            code: source.code().map(str::to_owned),
            table: Some(b.table.as_str().to_owned()),
            row: Some(Box::new((
                row.partition_key().clone(),
                row.row_key().clone(),
            ))),
        })
    }
}

fn undo_failed(j: usize, n: usize, cause: &Error, e: &Error) -> Error {
    Error::Inconsistent {
        what: format!(
            "a journalled commit was refused ({cause}) after earlier transactions applied, and undoing transaction {} of {n} was refused too ({e}); something writes the partitions without their locks. The journal is kept for an operator",
            j + 1
        ),
    }
}

/// Runs a lock-blob write, once more after a transient failure (writing the
/// same record again is harmless).
async fn write_twice<F, Fut>(mut write: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    match write().await {
        Err(e) if e.is_transient() => write().await,
        other => other,
    }
}

/// Settles a single transaction whose reply was lost: the service applies it
/// whole or not at all, so either every row shows its write (done), or every
/// row still has the state the unit read (sent again, once, by a `holder`
/// of the lock; otherwise [`Error::LeaseLost`], nothing applied), or
/// something else wrote the partition meanwhile.
async fn verify_batch(
    backend: &dyn TableBackend,
    pk: &PartitionKey,
    table: &TableName,
    ops: &[TableOp],
    cause: Error,
    holder: bool,
) -> Result<()> {
    let mut stored = Vec::with_capacity(ops.len());
    for op in ops {
        stored.push(backend.get(table, pk, op.row_key()).await?);
    }
    let applied = match outcome::judge_locked(ops, &stored) {
        Locked::Applied => return Ok(()),
        Locked::NotApplied if holder => return backend.batch(table, ops).await.map(|_| ()),
        Locked::NotApplied => {
            return Err(Error::LeaseLost {
                what: format!(
                    "the lock of partition {:?} ran out while its transaction's reply was lost ({cause}); the rows show it was not applied, and it is not sent again",
                    pk.as_str()
                ),
                code: None,
            });
        }
        Locked::Contradicted { applied } => applied,
    };
    Err(Error::Inconsistent {
        what: format!(
            "a transaction on partition {:?} of `{table}` lost its reply ({cause}) and its rows now match neither the state read nor the state written ({applied} of {} show the write); something wrote the partition without its lock",
            pk.as_str(),
            ops.len(),
        ),
    })
}

/// Whether the service refused the request, so it was not applied.
fn refused(e: &Error) -> bool {
    let kind = match e {
        Error::Batch { source, .. } => source.kind(),
        other => other.kind(),
    };
    matches!(
        kind,
        ErrorKind::Conflict
            | ErrorKind::AlreadyExists
            | ErrorKind::NotFound
            | ErrorKind::Invalid
            | ErrorKind::Backend
    )
}
