//! Journalled commits without row marks, as earlier versions wrote them
//! ([`LockOptions::row_marks`](super::LockOptions::row_marks) off, for a
//! rolling upgrade while processes that do not resolve marks still read
//! the tables): intents, the journal, the transactions at the ETags the
//! unit read, and — when a writer without the lock changed a row after the
//! journal — the undo of the transactions already applied.

use std::collections::BTreeSet;

use futures_util::future::join_all;

use super::commit::{Batch, Failed, Parties, refused, unsettled, verify_batch, write_twice};
use super::journal::{Before, Intent, Journal};
use super::report::CommitReport;
use super::roll_forward::roll_forward;
use super::unit::Unit;
use crate::backend::{TableOp, Version};
use crate::error::{Error, Result};
use crate::key::TableName;
use crate::telemetry::FinishedBy;

impl Unit {
    /// The journalled commit of `batches` (more than one) without row
    /// marks (see [`LockOptions::row_marks`](super::LockOptions::row_marks)).
    pub(super) async fn commit_journalled_unmarked(
        &self,
        batches: &[Batch],
        report: &mut CommitReport,
    ) -> Result<(), Failed> {
        let backend = self.env.backend().clone();
        let Parties {
            participants,
            primary_part,
            primary,
            txn,
        } = self.parties(batches, report);
        let others: Vec<usize> = participants
            .iter()
            .copied()
            .filter(|p| *p != primary_part)
            .collect();
        let unsettled =
            |cause: Error, report: &CommitReport| unsettled(&primary, &txn, cause, report);

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
                self.env.telemetry().roll_forward(FinishedBy::Writer);
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
                let undone = self
                    .undo(&journal, batches, &produced, i, e, &participants)
                    .await;
                if undone.is_ok() {
                    self.env.telemetry().undo(FinishedBy::Writer);
                }
                return Err(undone.map_or_else(|cause| unsettled(cause, report), Failed::Definite));
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
        let backend = self.env.backend().clone();
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
