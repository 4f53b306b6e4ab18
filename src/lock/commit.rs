//! [`Unit::commit`]: one entity-group transaction when it can be, the
//! journalled protocol otherwise (see "The commit protocol" in the
//! [module docs](super)), and the undo of a journalled commit that
//! something writing without the lock made impossible to finish.

use std::collections::BTreeSet;

use futures_util::future::join_all;
use std::time::Duration;
use tracing::Instrument as _;

use super::journal::{Before, Journal};
use super::marks::{Mark, Resolver, apply_op, strip};
use super::report::CommitReport;
use super::roll_forward::roll_forward;
use super::settle::Unsettled;
use super::slot::Slot;
use super::unit::Unit;
use crate::backend::WriteOptions;
use crate::backend::{Precondition, StoredEntity, TableBackend, TableOp, Version, validate_batch};
use crate::entity::validate_entity;
use crate::error::{Error, ErrorKind, Result};
use crate::key::{PartitionKey, RowKey, TableName};
use crate::outcome::{self, Locked};
use crate::telemetry::FinishedBy;

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

/// What a commit deciding in a row did ([`Unit::commit_decided`]).
pub(super) enum Decided {
    /// Its rows do not fit a decision row: nothing was sent, and the
    /// commit is journalled in the lock blob instead.
    DoesNotFit,
    /// Committed; what to send with the releases.
    Committed(Option<Cleanup>),
}

/// What a finished commit sends with the locks' releases: the delete of its
/// decision row, once no mark of it is left.
#[derive(Debug, Clone)]
pub(super) struct Cleanup {
    pub(super) table: TableName,
    pub(super) op: TableOp,
}

impl Cleanup {
    /// Sends the clean-up, best effort: a decision row left behind costs
    /// nothing but its storage (queries never return it).
    pub(super) async fn send(&self, backend: &dyn TableBackend) {
        if let Err(e) = backend
            .execute(&self.table, self.op.clone(), &WriteOptions::new())
            .await
        {
            tracing::debug!(table = %self.table, error = %e, "deleting a finished commit's decision row failed; it stays, hidden from queries");
        }
    }
}

/// One entity-group transaction of a commit: up to 100 operations on one
/// partition of one table.
pub(super) struct Batch {
    pub(super) part: usize,
    pub(super) table: TableName,
    pub(super) ops: Vec<TableOp>,
    pub(super) rows: Vec<(Slot, RowKey)>,
}

impl Unit {
    /// [`Unit::commit`]: stages the index rows, commits, gives the locks up
    /// and, for a commit that could not finish after its journal write was
    /// sent, finds out what storage holds.
    pub(super) async fn commit_and_settle(mut self) -> Result<CommitReport> {
        let span = tracing::debug_span!("leasehold.commit", partition = %self.partition_key(), partitions = self.parts.len(), ops = self.staged.len());
        let mut after = None;
        let result = async {
            after = self.claim_indexes().await.map_err(Failed::Definite)?;
            self.commit_inner().await
        }
        .instrument(span.clone())
        .await;
        // Whatever happened, the locks are given up; a journal left by a
        // failed commit is rolled forward (or reported) by the next holder.
        // The caller asked to commit: what was not is not "forgotten".
        self.staged.clear();
        let cleanup = match &result {
            Ok((_, Some(cleanup))) => Some(cleanup.clone()),
            _ => None,
        };
        let backend = self.env.backend().clone();
        let env = self.env.clone();
        let committed = result.is_ok();
        futures_util::future::join(self.release_all(), async {
            if let Some(cleanup) = cleanup {
                cleanup.send(backend.as_ref()).await;
            }
            // The index rows of values the commit freed, now that it holds.
            if let (true, Some(after)) = (committed, after) {
                after.run(&env).await;
            }
        })
        .await;
        match result {
            Ok((report, _)) => Ok(report),
            Err(Failed::Definite(e)) => Err(e),
            // After the journal write was sent, the answer is what storage
            // holds: found out with the locks given up, since finishing the
            // journal may mean taking the primary's lock again.
            Err(Failed::Unsettled(unsettled)) => {
                unsettled
                    .settle(&self.env, self.options.acquire_timeout)
                    .instrument(span)
                    .await
            }
        }
    }

    /// Commits the staged writes; what it answers besides the report is
    /// the clean-up sent with the locks' releases (a decision row no mark
    /// needs any more).
    async fn commit_inner(&mut self) -> Result<(CommitReport, Option<Cleanup>), Failed> {
        let mut report = CommitReport::default();
        if self.staged.is_empty() {
            return Ok((report, None));
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
            self.env.ensure_table(table).await?;
        }
        let backend = self.env.backend().clone();
        if let [batch] = batches.as_slice() {
            let pk = &self.parts[batch.part].pk;
            let mut sent = backend.batch(&batch.table, &batch.ops).await;
            if let Err(e) = &sent
                && self.withdrew_placeholder(batch, e).await?
            {
                // The row an insert met was an undecided commit's
                // placeholder, now gone: the transaction is sent again.
                sent = backend.batch(&batch.table, &batch.ops).await;
            }
            match sent {
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
            return Ok((report, None));
        }
        report.journalled = true;
        if !self.options.row_marks {
            self.commit_journalled_unmarked(&batches, &mut report)
                .await?;
            return Ok((report, None));
        }
        let reads = self.before_images(&batches).await?;
        if self.options.decision_rows
            && let Decided::Committed(cleanup) =
                self.commit_decided(&batches, &reads, &mut report).await?
        {
            return Ok((report, cleanup));
        }
        self.commit_journalled(&batches, &reads, &mut report)
            .await?;
        Ok((report, None))
    }

    /// Whether `refusal` of `batch` (or of its marking transaction) is an
    /// insert meeting a row mark's placeholder that resolving it removed
    /// (the commit it stood for was never decided). Reads the row only for
    /// such a refusal.
    pub(super) async fn withdrew_placeholder(
        &self,
        batch: &Batch,
        refusal: &Error,
    ) -> Result<bool> {
        let Error::Batch { index, source } = refusal else {
            return Ok(false);
        };
        let Some(TableOp::Insert(data)) = batch.ops.get(*index) else {
            return Ok(false);
        };
        if source.kind() != ErrorKind::AlreadyExists {
            return Ok(false);
        }
        let stored = self
            .env
            .backend()
            .get(&batch.table, &data.partition_key, &data.row_key)
            .await?;
        let marked = stored
            .as_ref()
            .is_some_and(|row| Mark::of(&row.data.properties).is_some());
        Ok(marked
            && self
                .resolver()
                .resolve_opt(&batch.table, stored)
                .await?
                .is_none())
    }

    /// The resolver of row marks this unit meets: it holds its partitions.
    pub(crate) fn resolver(&self) -> Resolver<'_> {
        Resolver::new(&self.env, self.parts.iter().map(|p| p.pk.clone()).collect())
    }

    /// Whether this unit still holds the locks of `parts` (by the local
    /// validity deadline, which ends before the service lets anyone else
    /// take a lease). While it does, nobody else can have finished or
    /// undone its journal, so a refused transaction was refused by a
    /// writer without the lock.
    pub(super) fn holds(&self, parts: &[usize]) -> bool {
        parts.iter().all(|&p| {
            self.guard_of(p)
                .and_then(|g| g.ensure_valid(Duration::ZERO))
                .is_ok()
        })
    }

    /// The journalled commit of `batches` (more than one), the rows found
    /// as `reads` before it (see [`Unit::before_images`]).
    async fn commit_journalled(
        &self,
        batches: &[Batch],
        reads: &[Vec<Option<StoredEntity>>],
        report: &mut CommitReport,
    ) -> Result<(), Failed> {
        let backend = self.env.backend().clone();
        let Parties {
            participants,
            primary_part,
            primary,
            txn,
        } = self.parties(batches, report);
        let unsettled =
            |cause: Error, report: &CommitReport| unsettled(&primary, &txn, cause, report);

        // The first round, all at once: the marks on every row written,
        // each conditioned as the write itself is, so a row changed since
        // the unit read it fails the commit here, before anything is
        // applied.
        let prewrites: Vec<Vec<TableOp>> = batches
            .iter()
            .zip(reads)
            .map(|(b, rows)| {
                b.ops
                    .iter()
                    .zip(rows)
                    .map(|(op, read)| {
                        let mark = Mark::new(&txn, &primary, read.is_none());
                        prewrite(op, read.as_ref(), &mark)
                    })
                    .collect()
            })
            .collect();
        for (b, ops) in batches.iter().zip(&prewrites) {
            // A mark adds a property to the row as read: a row at the
            // service's limits cannot take one, and is refused here,
            // before anything is sent.
            validate_batch(b.table.as_str(), ops)?;
            for data in ops.iter().filter_map(TableOp::data) {
                validate_entity(
                    b.table.as_str(),
                    &data.partition_key,
                    &data.row_key,
                    &data.properties,
                )?;
            }
        }
        let etags = self.mark_rows(batches, &prewrites).await?;

        let mut entries: Vec<(TableName, TableOp, Option<Before>)> = Vec::new();
        let applies = match apply_ops(batches, reads, &etags, &mut entries) {
            Ok(applies) => applies,
            Err(e) => {
                // Refused before the journal: nothing is applied.
                self.withdraw(batches, &prewrites, &etags).await;
                return Err(e.into());
            }
        };
        let mut journal = Journal::new(&primary, Some(txn.clone()), &entries);
        journal.marked = true;

        let primary_guard = self.guard_of(primary_part)?;
        // A journal whose write failed is either absent (nothing happened)
        // or present (decided: the next holder rolls it forward); settling
        // reads which. The marks are resolved by whoever meets them.
        if let Err(e) = write_twice(|| journal.write(primary_guard)).await {
            return Err(unsettled(e, report));
        }

        // The commit point: the journal is stored. The transactions touch
        // distinct (partition, table) groups, so they go out together.
        // Each replaces marked rows at the ETags the marks produced: only an
        // unconditional write (or a reader finishing a row of this very
        // journal) can have changed one since.
        let results = join_all(
            batches
                .iter()
                .zip(&applies)
                .map(|(b, ops)| backend.batch(&b.table, ops)),
        )
        .await;
        let mut failure: Option<Error> = None;
        for result in results {
            match result {
                Ok(_) => report.batches += 1,
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        }
        if let Some(e) = failure {
            // A lock lost meanwhile: the next holder may be rolling this
            // very journal forward; settling finds out.
            if !self.holds(&participants) {
                return Err(unsettled(e, report));
            }
            // A refusal (a row already finished by a reader, or overwritten
            // unconditionally) or an unknown outcome: finish row by row,
            // which applies what still carries the mark and skips the rest.
            tracing::debug!(partition = %primary, error = %e, "a transaction after the journal did not go through; rolling the journal forward");
            if let Err(e) = roll_forward(backend.as_ref(), &journal, &BTreeSet::new()).await {
                return Err(unsettled(e, report));
            }
            self.env.telemetry().roll_forward(FinishedBy::Writer);
        }
        // Every mark is off: the journal is done with. A clear that fails
        // leaves it to the next holder, whose roll-forward finds no mark
        // and writes nothing.
        self.clear_records(&[primary_part]).await;
        Ok(())
    }

    /// Every row of `batches` as it was before the commit: as read in the
    /// unit, or read now (an upsert, or a value read elsewhere; inserts
    /// need none). A write the service would refuse for what the row is
    /// (an insert of a row that exists, a conditional write of one that
    /// does not) fails here, before anything is sent.
    pub(super) async fn before_images(
        &self,
        batches: &[Batch],
    ) -> Result<Vec<Vec<Option<StoredEntity>>>, Failed> {
        let backend = self.env.backend().clone();
        let mut reads: Vec<Vec<Option<StoredEntity>>> = Vec::with_capacity(batches.len());
        for b in batches {
            let mut rows = Vec::with_capacity(b.ops.len());
            for (k, (op, row)) in b.ops.iter().zip(&b.rows).enumerate() {
                let read = match (self.reads.get(row), op) {
                    (Some(read), _) => read.clone(),
                    (None, TableOp::Insert(_)) => None,
                    (None, _) => {
                        let stored = backend
                            .get(&b.table, &self.parts[b.part].pk, &row.1)
                            .await?;
                        self.resolver().resolve_opt(&b.table, stored).await?
                    }
                };
                if read.is_some() && matches!(op, TableOp::Insert(_)) {
                    return Err(Error::Batch {
                        index: k,
                        source: Box::new(Error::AlreadyExists {
                            what: format!(
                                "insert of row {:?} of partition {:?}, which exists",
                                row.1.as_str(),
                                self.parts[b.part].pk.as_str()
                            ),
                            code: Some("EntityAlreadyExists".into()),
                            table: Some(b.table.as_str().to_owned()),
                            row: Some(Box::new((self.parts[b.part].pk.clone(), row.1.clone()))),
                        }),
                    }
                    .into());
                }
                if read.is_none() && needs_row(op) {
                    // The service would refuse it: nothing is sent.
                    return Err(Error::Batch {
                        index: k,
                        source: Box::new(Error::NotFound {
                            what: format!(
                                "{} of row {:?} of partition {:?}, which does not exist",
                                op.name(),
                                row.1.as_str(),
                                self.parts[b.part].pk.as_str()
                            ),
                            code: Some("ResourceNotFound".into()),
                            table: Some(b.table.as_str().to_owned()),
                            row: Some(Box::new((self.parts[b.part].pk.clone(), row.1.clone()))),
                        }),
                    }
                    .into());
                }
                rows.push(read);
            }
            reads.push(rows);
        }

        Ok(reads)
    }

    /// The first round of a commit that marks rows, all at once: the
    /// marking transactions `prewrites` (one per batch; an empty one is not
    /// sent). Answers the versions each produced. When one fails, the marks
    /// made are taken off again and the commit fails, nothing applied.
    pub(super) async fn mark_rows(
        &self,
        batches: &[Batch],
        prewrites: &[Vec<TableOp>],
    ) -> Result<Vec<Option<Vec<Option<Version>>>>, Failed> {
        let backend = self.env.backend().clone();
        // An insert meeting an undecided commit's placeholder, which
        // resolving it removed, gets the round sent once more.
        let mut again = true;
        let etags = loop {
            let marked = join_all(batches.iter().zip(prewrites).map(|(b, ops)| async {
                if ops.is_empty() {
                    Ok(Vec::new())
                } else {
                    backend.batch(&b.table, ops).await
                }
            }))
            .await;
            let mut failed: Option<(usize, Error)> = None;
            let mut etags: Vec<Option<Vec<Option<Version>>>> = Vec::with_capacity(batches.len());
            for (j, result) in marked.into_iter().enumerate() {
                match result {
                    Ok(versions) => etags.push(Some(versions)),
                    Err(e) => {
                        etags.push(None);
                        // A refusal says more than a lost reply.
                        if refused(&e) {
                            failed = Some((j, e));
                        } else {
                            failed.get_or_insert((j, e));
                        }
                    }
                }
            }
            let Some((j, e)) = failed else {
                break etags;
            };
            // Nothing is applied: take the marks made off again. A mark
            // left behind (its reply lost, or this clean-up failing) is
            // withdrawn by whoever meets it, since no journal of this
            // transaction can be stored any more.
            self.withdraw(batches, prewrites, &etags).await;
            if again && self.withdrew_placeholder(&batches[j], &e).await? {
                again = false;
                continue;
            }
            return Err(e.into());
        };

        Ok(etags)
    }

    /// Takes the marks of a commit that failed before its journal off the
    /// rows whose prewrite went through (`etags`: the versions each
    /// prewrite transaction produced, `None` for those that failed), all
    /// at once, best effort.
    pub(super) async fn withdraw(
        &self,
        batches: &[Batch],
        prewrites: &[Vec<TableOp>],
        etags: &[Option<Vec<Option<Version>>>],
    ) {
        let backend = self.env.backend().clone();
        let sends = batches
            .iter()
            .zip(prewrites)
            .zip(etags)
            .filter_map(|((b, ops), versions)| {
                let versions = versions.as_ref()?;
                let strips: Vec<TableOp> = ops
                    .iter()
                    .zip(versions)
                    .filter_map(|(op, version)| {
                        let data = op.data()?.clone();
                        let mark = Mark::of(&data.properties)?;
                        let row = StoredEntity {
                            data,
                            etag: version.as_ref()?.etag.clone(),
                            timestamp: time::OffsetDateTime::UNIX_EPOCH,
                        };
                        Some(strip(&row, &mark))
                    })
                    .collect();
                (!strips.is_empty()).then_some((b, strips))
            });
        join_all(sends.map(|(b, ops)| {
            let backend = backend.clone();
            async move {
                if let Err(e) = backend.batch(&b.table, &ops).await {
                    tracing::warn!(table = %b.table, partition = %self.parts[b.part].pk, error = %e, "taking a failed commit's marks off failed; whoever meets them does it");
                }
            }
        }))
        .await;
    }

    /// Clears the lock records (intents, or a journal) of parts `parts`,
    /// all at once, best effort: one left behind is resolved by the next
    /// holder.
    pub(super) async fn clear_records(&self, parts: &[usize]) {
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
}

/// The transactions applying `batches` after the journal: each staged
/// write as a replace or delete at the ETag its row's mark produced
/// (`etags`), recorded in `entries` with the row as read (`reads`).
fn apply_ops(
    batches: &[Batch],
    reads: &[Vec<Option<StoredEntity>>],
    etags: &[Option<Vec<Option<Version>>>],
    entries: &mut Vec<(TableName, TableOp, Option<Before>)>,
) -> Result<Vec<Vec<TableOp>>> {
    let mut applies: Vec<Vec<TableOp>> = Vec::with_capacity(batches.len());
    for ((b, rows), versions) in batches.iter().zip(reads).zip(etags) {
        let versions = versions.as_deref().unwrap_or_default();
        let mut ops = Vec::with_capacity(b.ops.len());
        for (k, (op, read)) in b.ops.iter().zip(rows).enumerate() {
            let Some(marked) = versions.get(k).and_then(Option::as_ref) else {
                return Err(Error::Inconsistent {
                    what: format!(
                        "the transaction marking the rows of `{}` did not answer with the ETag of operation {k}",
                        b.table
                    ),
                });
            };
            let apply = apply_op(op, read.as_ref(), &marked.etag);
            entries.push((
                b.table.clone(),
                apply.clone(),
                Some(Before::of(read.as_ref())),
            ));
            ops.push(apply);
        }
        // A merge is applied as the whole row it leaves: checked again.
        validate_batch(b.table.as_str(), &ops)?;
        applies.push(ops);
    }
    Ok(applies)
}

/// Who takes part in a journalled commit: the written partitions (by
/// index, in canonical order), the primary (the first) and a fresh
/// transaction id.
pub(super) struct Parties {
    pub(super) participants: Vec<usize>,
    pub(super) primary_part: usize,
    pub(super) primary: PartitionKey,
    pub(super) txn: String,
}

/// A failure after the journal write was sent: settled by what storage
/// holds (see `Unsettled::settle`).
pub(super) fn unsettled(
    primary: &PartitionKey,
    txn: &str,
    cause: Error,
    report: &CommitReport,
) -> Failed {
    Failed::Unsettled(Unsettled {
        primary: primary.clone(),
        txn: txn.to_owned(),
        cause,
        report: report.clone(),
    })
}

impl Unit {
    /// The [`Parties`] of a journalled commit of `batches`, its transaction
    /// id recorded in `report`.
    pub(super) fn parties(&self, batches: &[Batch], report: &mut CommitReport) -> Parties {
        let participants: Vec<usize> = batches
            .iter()
            .map(|b| b.part)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let primary_part = batches[0].part;
        let txn = uuid::Uuid::new_v4().simple().to_string();
        report.transaction = Some(txn.clone());
        Parties {
            participants,
            primary_part,
            primary: self.parts[primary_part].pk.clone(),
            txn,
        }
    }
}

/// The prewrite putting `mark` on the row of `op` (found as `read`):
/// conditioned on the ETag the write itself carries, or else on the
/// row as read (an upsert's), or inserting a placeholder where there was
/// no row.
pub(super) fn prewrite(op: &TableOp, read: Option<&StoredEntity>, mark: &Mark) -> TableOp {
    let mut pre = mark.prewrite(op.partition_key(), op.row_key(), read);
    if let (TableOp::Replace(_, condition), Some(Precondition::IfMatch(etag))) =
        (&mut pre, op.condition())
    {
        *condition = Precondition::IfMatch(etag);
    }
    pre
}

/// Whether `op` needs its row to exist (every write but inserts and
/// upserts).
pub(super) fn needs_row(op: &TableOp) -> bool {
    !matches!(op.condition(), None | Some(Precondition::Upsert))
}

/// Runs a lock-blob write, once more after a transient failure (writing the
/// same record again is harmless).
pub(super) async fn write_twice<F, Fut>(mut write: F) -> Result<()>
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
pub(super) async fn verify_batch(
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
pub(super) fn refused(e: &Error) -> bool {
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
