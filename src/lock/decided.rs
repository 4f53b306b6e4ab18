//! [`Unit::commit`] deciding in a row: the protocol in
//! [`super::decision`]'s docs, for a unit whose rows fit it.

use std::time::Duration;

use futures_util::future::join_all;

use crate::backend::{Precondition, StoredEntity, TableOp, validate_batch};
use crate::entity::{Value, validate_entity};
use crate::error::{Error, Result};
use crate::key::{ETag, PartitionKey};

use super::commit::{Batch, Cleanup, Decided as Outcome, Failed, prewrite, refused};
use super::decision::{AFTER, Decision, after_text, delete, insert, new_txn, settle};
use super::marks::{Mark, apply_op};
use super::report::{CommitReport, FinishedBy};
use super::unit::Unit;

/// A commit deciding in a row, planned before anything is sent.
struct Decided {
    /// The batch whose transaction is the commit point.
    primary_batch: usize,
    /// The transaction id (see [`new_txn`]).
    txn: String,
    /// Per batch, the marking transaction (empty for the primary batch).
    prewrites: Vec<Vec<TableOp>>,
    /// The primary batch's writes, each conditioned on the row as read,
    /// and the decision row's insert, last.
    commit: Vec<TableOp>,
}

/// The ETag a write of `op` to the row found as `read` is conditioned on:
/// the one the write carries, else the row's as read.
fn condition_of(op: &TableOp, read: Option<&StoredEntity>) -> Option<ETag> {
    match op.condition() {
        Some(Precondition::IfMatch(etag)) => Some(etag),
        _ => read.map(|r| r.etag.clone()),
    }
}

/// The write the commit point sends for `op` on the row found as `read`: the
/// row the commit leaves (a merge computed from the row as read) or a
/// delete, conditioned on the row as read; an insert where it was absent.
fn conditioned(op: &TableOp, read: Option<&StoredEntity>) -> TableOp {
    match condition_of(op, read) {
        Some(etag) => apply_op(op, read, &etag),
        None => match apply_op(op, None, &ETag::new("*")) {
            TableOp::Replace(data, _) => TableOp::Insert(data),
            other => other,
        },
    }
}

impl Decided {
    /// The plan of a commit of `batches` (the rows found as `reads`)
    /// deciding in a row, or `None` where it does not fit — no batch has
    /// room for the decision row, or a row with its mark and after-image
    /// is over the service's limits — and the commit is journalled in the
    /// primary's lock blob instead.
    fn plan(
        unit: &Unit,
        batches: &[Batch],
        reads: &[Vec<Option<StoredEntity>>],
    ) -> Result<Option<Decided>> {
        let Some(primary_batch) = batches
            .iter()
            .position(|b| b.ops.len() < TableOp::MAX_BATCH_OPS)
        else {
            return Ok(None);
        };
        let primary = &unit.parts[batches[primary_batch].part].pk;
        let txn = new_txn(&batches[primary_batch].table);
        let mut prewrites = Vec::with_capacity(batches.len());
        let mut commit = Vec::new();
        for (j, (b, rows)) in batches.iter().zip(reads).enumerate() {
            if j == primary_batch {
                commit = b
                    .ops
                    .iter()
                    .zip(rows)
                    .map(|(op, read)| conditioned(op, read.as_ref()))
                    .collect();
                commit.push(insert(primary, &txn, Decision::Committed)?);
                if validate_batch(b.table.as_str(), &commit).is_err() {
                    return Ok(None);
                }
                prewrites.push(Vec::new());
                continue;
            }
            let mut ops = Vec::with_capacity(b.ops.len());
            for (op, read) in b.ops.iter().zip(rows) {
                let mark = Mark {
                    txn: txn.clone(),
                    primary: primary.clone(),
                    absent: read.is_none(),
                    decided: true,
                };
                let mut pre = prewrite(op, read.as_ref(), &mark);
                let after = after_text(&apply_op(op, read.as_ref(), &ETag::new("*")));
                if let Some(data) = pre.data_mut() {
                    data.properties.insert_static(AFTER, Value::String(after));
                    // The row with its mark and after-image must still be
                    // one the service stores.
                    if validate_entity(
                        b.table.as_str(),
                        &data.partition_key,
                        &data.row_key,
                        &data.properties,
                    )
                    .is_err()
                    {
                        return Ok(None);
                    }
                }
                ops.push(pre);
            }
            if validate_batch(b.table.as_str(), &ops).is_err() {
                return Ok(None);
            }
            prewrites.push(ops);
        }
        Ok(Some(Decided {
            primary_batch,
            txn,
            prewrites,
            commit,
        }))
    }
}

impl Unit {
    /// The commit of `batches` (the rows found as `reads`) deciding in a
    /// row: marks, commit point, finish (see [`super::decision`]). Answers
    /// the clean-up to send with the releases, or that the rows do not fit
    /// (nothing sent).
    pub(super) async fn commit_decided(
        &self,
        batches: &[Batch],
        reads: &[Vec<Option<StoredEntity>>],
        report: &mut CommitReport,
    ) -> Result<Outcome, Failed> {
        let Some(plan) = Decided::plan(self, batches, reads)? else {
            return Ok(Outcome::DoesNotFit);
        };
        let backend = self.env.backend().clone();
        let Decided {
            primary_batch,
            txn,
            prewrites,
            commit,
        } = plan;
        let primary_part = batches[primary_batch].part;
        let primary = self.parts[primary_part].pk.clone();
        let table = batches[primary_batch].table.clone();
        report.transaction = Some(txn.clone());
        let cleanup = delete(&primary, &txn)?;

        let etags = self.mark_rows(batches, &prewrites).await?;
        // A holder whose lease ran out meanwhile stops here: its marks are
        // withdrawn, by itself now or by whoever meets them.
        if let Err(e) = self
            .guard_of(primary_part)
            .and_then(|g| g.ensure_valid(Duration::ZERO))
        {
            self.withdraw(batches, &prewrites, &etags).await;
            return Err(e.into());
        }

        // The commit point.
        let mut again = true;
        loop {
            match backend.batch(&table, &commit).await {
                Ok(_) => break,
                Err(e) if refused(&e) => {
                    if again
                        && self
                            .withdrew_placeholder(&batches[primary_batch], &e)
                            .await?
                    {
                        again = false;
                        continue;
                    }
                    self.withdraw(batches, &prewrites, &etags).await;
                    return Err(refusal(e, commit.len() - 1, &primary, &txn).into());
                }
                Err(e) => {
                    tracing::warn!(partition = %primary, txn = %txn, error = %e, "the commit point's reply was lost; reading its decision");
                    match settle(backend.as_ref(), &table, &primary, &txn).await {
                        Ok(Decision::Committed) => break,
                        Ok(Decision::Withdrawn) => {
                            self.withdraw(batches, &prewrites, &etags).await;
                            return Err(e.into());
                        }
                        Err(read) => {
                            return Err(Error::InDoubt {
                                what: format!(
                                    "the commit point's reply was lost ({e}) and its decision could not be read back"
                                ),
                                primary,
                                transaction: Some(txn),
                                source: Box::new(read),
                            }
                            .into());
                        }
                    }
                }
            }
        }
        report.batches = 1;

        // Committed: every marked row gets the row the commit leaves, at
        // the ETag its mark produced, all at once.
        let mut all_off = true;
        let mut finishes: Vec<(usize, Vec<TableOp>)> = Vec::new();
        for (j, (b, rows)) in batches.iter().zip(reads).enumerate() {
            if j == primary_batch {
                continue;
            }
            let versions = etags[j].as_deref().unwrap_or_default();
            let mut ops = Vec::with_capacity(b.ops.len());
            for (k, (op, read)) in b.ops.iter().zip(rows).enumerate() {
                match versions.get(k).and_then(Option::as_ref) {
                    Some(marked) => ops.push(apply_op(op, read.as_ref(), &marked.etag)),
                    // No version in the reply: the row is left to its
                    // readers, and so is the decision row.
                    None => all_off = false,
                }
            }
            if !ops.is_empty() {
                finishes.push((j, ops));
            }
        }
        let results = join_all(
            finishes
                .iter()
                .map(|(j, ops)| backend.batch(&batches[*j].table, ops)),
        )
        .await;
        let resolver = self.resolver();
        for ((j, ops), result) in finishes.iter().zip(results) {
            let e = match result {
                Ok(_) => {
                    report.batches += 1;
                    continue;
                }
                Err(e) => e,
            };
            // Refused: a reader finished a row first (or a write without
            // the lock overwrote it); or the reply was lost. Row by row,
            // whatever still carries the mark gets the commit's write.
            if refused(&e) {
                report.finished_by = FinishedBy::Recovery;
            }
            tracing::debug!(partition = %primary, txn = %txn, error = %e, "finishing a committed transaction's rows one by one");
            let b = &batches[*j];
            for op in ops {
                let finished = async {
                    let stored = backend
                        .get(&b.table, op.partition_key(), op.row_key())
                        .await?;
                    resolver.resolve_opt(&b.table, stored).await
                }
                .await;
                if let Err(e) = finished {
                    tracing::warn!(partition = %op.partition_key(), txn = %txn, error = %e, "a committed row is left marked; whoever reads it next finishes it");
                    all_off = false;
                }
            }
        }
        Ok(Outcome::Committed(
            all_off.then_some(Cleanup { table, op: cleanup }),
        ))
    }
}

/// The error of a commit point the service refused (nothing applied): a
/// refused decision row (operation `decision_index`) means the transaction
/// was withdrawn by whoever took the primary's lock after this unit's
/// lease ran out.
fn refusal(e: Error, decision_index: usize, primary: &PartitionKey, txn: &str) -> Error {
    match &e {
        Error::Batch { index, .. } if *index == decision_index => Error::LeaseLost {
            what: format!(
                "transaction {txn} was withdrawn by the next holder of partition {:?} before its commit point, after this unit's lease ran out; nothing of it is applied",
                primary.as_str()
            ),
            code: None,
        },
        _ => e,
    }
}
