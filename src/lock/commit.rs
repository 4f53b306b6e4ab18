//! [`Unit::commit`] and the [`Commit`] it runs: the index claims, then
//! "The commit protocol" of the [module docs](super).

use std::collections::BTreeSet;
use std::future::Future;
use std::mem::take;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use tracing::Instrument as _;

use super::decision::{self, CommitOutcome};
use super::env::{AfterCommit, ClaimInput, IndexedType, LockEnv};
use super::report::{CommitReport, FinishedBy};
use super::slot::{Reads, Slot, Staged, read_absent};
use super::unit::Unit;
use crate::backend::{
    Precondition, StoredEntity, TableBackend, TableOp, Version, chunk_batches, validate_batch,
};
use crate::backend::{WriteOptions, deadline};
use crate::entity::Properties;
use crate::error::{Error, ErrorKind, Result};
use crate::key::{ETag, PartitionKey, RowKey, TableName};
use crate::outcome::{self, Locked};
use crate::rows::decision::{self as layout, is_decision_row};
use crate::rows::mark::{Mark, apply_op, slim, strip};
use crate::rows::tombstone::is_tombstone;
use crate::rows::{self, after};
use crate::table::Resolver;

/// A unit's commit, with the reads, staged writes and indexed types taken
/// from the unit.
pub(super) struct Commit<'a> {
    pub(super) unit: &'a Unit,
    pub(super) reads: Reads,
    pub(super) staged: Staged,
    pub(super) indexed: Vec<IndexedType>,
}

/// A commit whose writes are applied, and what is left of it
/// ([`Committed::complete`]).
pub(super) struct Committed {
    env: Arc<LockEnv>,
    report: CommitReport,
    finishing: Option<Finishing>,
    after: Option<Box<dyn AfterCommit>>,
}

/// The staged writes of one (partition, table) group, in row order.
struct Group {
    part: usize,
    table: TableName,
    ops: Vec<TableOp>,
    rows: Vec<(Slot, RowKey)>,
}

/// Steps 3 and 4 of a commit decided in a row: `rounds` finish the marked
/// rows, then `decision_delete` goes unless a row may be left marked
/// (`all_off` false).
struct Finishing {
    rounds: Vec<(TableName, Vec<TableOp>)>,
    txn: String,
    all_off: bool,
    decision_delete: (TableName, TableOp),
    held: Vec<PartitionKey>,
}

/// One entity-group transaction of a commit's round, and which staged
/// write each of its operations stands for (`None`: an after-image row).
struct Send {
    table: TableName,
    ops: Vec<TableOp>,
    of: Vec<Option<(usize, usize)>>,
}

/// A commit decided in a row, planned before anything is sent.
struct Plan {
    txn: String,
    /// The decision row's partition and table (the first group's).
    primary: PartitionKey,
    table: TableName,
    /// The commit point: the first group's writes if they fit there (they
    /// are then not marked), then the decision row.
    commit: Vec<TableOp>,
    marking: Vec<Send>,
}

impl Unit {
    /// Applies every staged write, all or nothing, then gives the locks up.
    ///
    /// # Errors
    /// Nothing is applied for each but [`Error::InDoubt`] ("What the caller
    /// is told" in the [module docs](super)): [`Error::LeaseLost`] (a lease
    /// short of the commit margin, or lost before the commit point);
    /// [`Error::Invalid`] for writes breaking a service limit;
    /// [`Error::Batch`] (with [`Error::Conflict`] or
    /// [`Error::AlreadyExists`] inside) for a row changed since it was read
    /// or existing already; [`Error::ValueTaken`] for a unique value
    /// another entity holds; backend errors.
    pub async fn commit(mut self) -> Result<CommitReport> {
        let telemetry = self.env.telemetry.clone();
        let committing = async move {
            // Whatever happens, the locks are given up.
            let committed = Commit {
                reads: take(&mut self.reads),
                staged: take(&mut self.staged),
                indexed: take(&mut self.indexed),
                unit: &self,
            }
            .run()
            .await;
            match committed {
                Ok(committed) => Ok(committed.complete(self.release_all()).await),
                Err(e) => {
                    self.release_all().await;
                    Err(e)
                }
            }
        };
        telemetry.operation("unit.commit", committing).await
    }
}

impl Committed {
    /// Finishes what is left, together with `release` (the unit's locks)
    /// and the index claims' after-commit work.
    pub(super) async fn complete(self, release: impl Future<Output = ()>) -> CommitReport {
        let Committed {
            env,
            mut report,
            finishing,
            after,
        } = self;
        let finished = async { Some(finishing?.run(&env).await) };
        let freed = async {
            if let Some(after) = after {
                after.run(&env).await;
            }
        };
        let (finished, (), ()) = futures_util::future::join3(finished, release, freed).await;
        if let Some((done, recovered)) = finished {
            report.batches += done;
            if recovered {
                report.finished_by = FinishedBy::Recovery;
            }
        }
        report
    }
}

impl Commit<'_> {
    pub(super) async fn run(mut self) -> Result<Committed> {
        let partition = self.unit.parts.first().map_or("", |p| p.pk.as_str());
        let span = tracing::debug_span!("leasehold.commit", partition = %partition, partitions = self.unit.parts.len(), ops = self.staged.len());
        // A unit writing indexed types sends its writes within the claims'
        // window of starting its claims, or not at all (see "How long a
        // claim or tombstone is relied on" in `crate::index`).
        let claims_window = (!self.indexed.is_empty())
            .then(|| tokio::time::Instant::now() + crate::rows::SEND_WINDOW);
        let env = self.unit.env.clone();
        async {
            self.validate_reads();
            let after = self.claim_indexes().await?;
            let (report, finishing) = self.commit_inner(claims_window).await?;
            Ok(Committed {
                env,
                report,
                finishing,
                after,
            })
        }
        .instrument(span)
        .await
        .map_err(|e: Error| match claims_window {
            Some(by) if e.kind() == ErrorKind::LeaseLost && tokio::time::Instant::now() > by => {
                Error::Timeout {
                    what: format!(
                        "the unit's commit was not sent: {:?} had passed since its claims (a write must follow its claims within that time, or a claim or tombstone it relies on may be gone); nothing of it is applied",
                        crate::rows::SEND_WINDOW
                    ),
                    after: crate::rows::SEND_WINDOW,
                }
            }
            _ => e,
        })
    }

    /// A transaction's rows read and not written get a write that changes
    /// nothing, conditioned on the ETag read (or on absence), so their
    /// marks validate them. A unit's locks keep its reads valid.
    fn validate_reads(&mut self) {
        if self.unit.ttl.is_none() {
            return;
        }
        for (key, read) in &self.reads {
            if self.staged.contains_key(key) {
                continue;
            }
            let (pk, rk) = (self.pk(key.0.part), &key.1);
            // A tombstone (read as absent) is kept as it is.
            let op = match read {
                Some(row) => TableOp::Merge(
                    rows::row(pk, rk, Properties::new()),
                    Precondition::IfMatch(row.etag.clone()),
                ),
                None => rows::delete(pk, rk, Precondition::IfExists),
            };
            self.staged.insert(key.clone(), op);
        }
    }

    /// Runs the store's index claims for writes of indexed types; what
    /// they read and the writes they answer join the commit.
    async fn claim_indexes(&mut self) -> Result<Option<Box<dyn AfterCommit>>> {
        if self.indexed.is_empty() {
            return Ok(None);
        }
        let indexed = |slot: &Slot| self.indexed.iter().any(|t| t.table == slot.table);
        let parts: Vec<PartitionKey> = self.unit.parts.iter().map(|p| p.pk.clone()).collect();
        let input = ClaimInput {
            parts: &parts,
            held: &self.unit.held(),
            writes: self
                .staged
                .iter()
                .filter(|(key, _)| indexed(&key.0))
                .collect(),
            reads: &self.reads,
            indexed: &self.indexed,
        };
        let claimed = self.unit.env.claims.claim(&self.unit.env, input).await?;
        self.reads.extend(claimed.read);
        self.staged.extend(claimed.writes);
        Ok(claimed.after)
    }

    fn pk(&self, part: usize) -> &PartitionKey {
        &self.unit.parts[part].pk
    }

    /// Sends the staged writes (by `claims_window` when they rely on
    /// index claims); answers what is left of a commit decided in a row.
    async fn commit_inner(
        &mut self,
        claims_window: Option<tokio::time::Instant>,
    ) -> Result<(CommitReport, Option<Finishing>)> {
        let mut report = CommitReport::default();
        if self.staged.is_empty() {
            return Ok((report, None));
        }
        (self.unit).ensure_held(self.unit.env.options.commit_margin)?;
        let tables: BTreeSet<TableName> = self.staged.keys().map(|k| k.0.table.clone()).collect();
        for table in &tables {
            self.unit.env.ensure_table(table).await?;
        }
        self.read_rows_inserts_may_meet_expired().await?;
        // An insert over a row the unit read as absent but stored (a
        // tombstone, a row past its expiry) replaces it at the ETag read.
        let staged = std::mem::take(&mut self.staged)
            .into_iter()
            .map(|(key, op)| match (op, self.reads.get(&key)) {
                (TableOp::Insert(data), Some(Some(row))) if is_tombstone(&row.data.properties) => {
                    let etag = row.etag.clone();
                    (key, TableOp::Replace(data, Precondition::IfMatch(etag)))
                }
                (op, _) => (key, op),
            });
        let groups = group(staged);
        report.operations = groups.iter().map(|g| g.ops.len()).sum();
        report.tables = tables.len();
        report.partitions = groups.iter().map(|g| g.part).collect::<BTreeSet<_>>().len();
        if let [g] = groups.as_slice()
            && validate_batch(g.table.as_str(), &g.ops).is_ok()
            && !self.checks_absence(g)
        {
            within(claims_window, self.commit_one(g)).await?;
            report.batches = 1;
            return Ok((report, None));
        }
        let finishing = self
            .commit_decided(&groups, &mut report, claims_window)
            .await?;
        Ok((report, finishing))
    }

    /// Reads the unread rows of inserts of a type with an expiry: an
    /// expired row is absent to reads, and the insert replaces it.
    async fn read_rows_inserts_may_meet_expired(&mut self) -> Result<()> {
        let blind: Vec<(Slot, RowKey)> = self
            .staged
            .iter()
            .filter(|(key, op)| {
                matches!(op, TableOp::Insert(d) if d.properties.get(crate::rows::expiry::PROPERTY).is_some())
                    && !self.reads.contains_key(key)
            })
            .map(|(key, _)| key.clone())
            .collect();
        if blind.is_empty() {
            return Ok(());
        }
        let rows = self.unit.fetch(&blind.iter().collect::<Vec<_>>()).await?;
        self.reads.extend(blind.into_iter().zip(rows));
        Ok(())
    }

    /// A commit that is one entity-group transaction.
    async fn commit_one(&self, g: &Group) -> Result<()> {
        let backend = self.unit.env.backend.clone();
        let pk = self.pk(g.part);
        match self.send(&g.table, &g.ops, None).await? {
            Ok(_) => Ok(()),
            Err(e) if is_refusal(&e) => Err(e),
            Err(e) => {
                // Reading is safe without the lease; sending again is not,
                // so only a holder (by the local validity deadline) does it.
                tracing::warn!(partition = %pk, error = %e, "transaction outcome unknown; verifying");
                let lock = self.unit.guard_of(g.part);
                let held = lock.is_ok_and(|l| l.ensure_valid(Duration::ZERO).is_ok());
                verify_batch(backend.as_ref(), pk, &g.table, &g.ops, e, held)
                    .await
                    .map_err(|e| match e.kind() {
                        // The rows could not be read back: applied whole or
                        // not at all, not known which.
                        ErrorKind::Transient | ErrorKind::Unavailable => Error::InDoubt {
                            what: "the transaction's reply was lost and its rows could not be read back".into(),
                            primary: pk.clone(),
                            transaction: None,
                            source: Box::new(e),
                        },
                        _ => e,
                    })
            }
        }
    }

    /// Plans the commit of `groups` (the rows before it: `reads`).
    fn plan(&self, groups: &[Group], reads: &[Vec<Option<StoredEntity>>]) -> Result<Plan> {
        let first = &groups[0];
        let primary = self.pk(first.part).clone();
        let table = first.table.clone();
        let txn = layout::new_txn(&table);
        // The decision row names the groups whose rows are marked.
        let marked_groups = |from: usize| -> Vec<(&TableName, &PartitionKey)> {
            groups[from..]
                .iter()
                .map(|g| (&g.table, self.pk(g.part)))
                .collect()
        };
        let decision_row = layout::insert_committed(&primary, &txn, &marked_groups(1))?;
        // Groups from `marked_from` on are marked.
        let mut marked_from = 0;
        let mut commit = vec![layout::insert_committed(&primary, &txn, &marked_groups(0))?];
        if first.ops.len() < TableOp::MAX_BATCH_OPS && !self.checks_absence(first) {
            let mut ops: Vec<TableOp> = first
                .ops
                .iter()
                .zip(&reads[0])
                .map(|(op, read)| conditioned(op, read.as_ref()))
                .collect();
            ops.push(decision_row);
            if validate_batch(table.as_str(), &ops).is_ok() {
                marked_from = 1;
                commit = ops;
            }
        }
        let mut marking = Vec::new();
        let mut n = 0;
        for (j, (g, rows)) in groups.iter().zip(reads).enumerate().skip(marked_from) {
            let mut ops = Vec::with_capacity(g.ops.len());
            let mut of = Vec::with_capacity(g.ops.len());
            let mut hidden = Vec::new();
            for (k, (op, read)) in g.ops.iter().zip(rows).enumerate() {
                let mark = Mark {
                    txn: txn.clone(),
                    primary: primary.clone(),
                    absent: read.is_none(),
                    ttl: self.unit.ttl,
                };
                let mut pre = prewrite(op, read.as_ref(), &mark);
                let text = after::text(&apply_op(op, read.as_ref(), &ETag::new("*")));
                if let Some(data) = pre.data_mut() {
                    hidden.extend(after::attach(&g.table, &txn, n, data, text)?);
                }
                n += 1;
                ops.push(pre);
                of.push(Some((j, k)));
            }
            of.extend(hidden.iter().map(|_| None));
            ops.extend(hidden);
            marking.extend(sends(&g.table, ops, of)?);
        }
        Ok(Plan {
            txn,
            primary,
            table,
            commit,
            marking,
        })
    }

    /// Marks, then the commit point; a transaction's finishing goes behind
    /// the answer, a unit's is answered (it goes out with the releases).
    async fn commit_decided(
        &self,
        groups: &[Group],
        report: &mut CommitReport,
        claims_window: Option<tokio::time::Instant>,
    ) -> Result<Option<Finishing>> {
        let reads = self.before_images(groups).await?;
        let plan = self.plan(groups, &reads)?;
        let backend = self.unit.env.backend.clone();
        let (txn, primary, marking) = (plan.txn, plan.primary, plan.marking);
        report.transaction = Some(txn.clone());
        let primary_part = groups[0].part;

        // 1. The marking round, all at once.
        let started = tokio::time::Instant::now();
        let versions = within(claims_window, self.mark_rows(&marking)).await?;
        // The commit point goes out only while the primary's lock is held
        // (a transaction's: within its time-to-live).
        let left = match self.unit.ttl {
            Some(ttl) => Ok(ttl.saturating_sub(started.elapsed())).and_then(|left| {
                (!left.is_zero()).then_some(left).ok_or(Error::LeaseLost {
                    what: format!("transaction {txn} took longer than its time-to-live ({ttl:?}) to mark its rows; nothing of it is applied"),
                    code: None,
                })
            }),
            None => (self.unit.guard_of(primary_part)).and_then(|g| g.ensure_valid(Duration::ZERO).map(|()| g.remaining())),
        };
        let deadline = match left {
            Ok(left) => {
                let by = tokio::time::Instant::now() + left.min(Duration::from_secs(86_400));
                claims_window.map_or(by, |window| window.min(by))
            }
            Err(e) => {
                self.withdraw(&marking, &versions).await;
                return Err(e);
            }
        };

        // 2. The commit point.
        match self.send(&plan.table, &plan.commit, Some(deadline)).await? {
            Ok(_) => {}
            Err(e) if is_refusal(&e) => {
                self.withdraw(&marking, &versions).await;
                return Err(refusal(e, plan.commit.len() - 1, &primary, &txn));
            }
            // A lost reply, or a later try refused unsent past the
            // deadline (an earlier one may have landed): the decision
            // row says which.
            Err(e) => {
                tracing::warn!(partition = %primary, txn = %txn, error = %e, "the commit point's reply was lost; reading its decision");
                match decision::settle(backend.as_ref(), &plan.table, &primary, &txn).await {
                    Ok(CommitOutcome::Applied) => {}
                    Ok(CommitOutcome::NotApplied) => {
                        self.withdraw(&marking, &versions).await;
                        return Err(e);
                    }
                    Err(read) => {
                        return Err(Error::InDoubt {
                            what: format!(
                                "the commit point's reply was lost ({e}) and its decision could not be read back"
                            ),
                            primary,
                            transaction: Some(txn),
                            source: Box::new(read),
                        });
                    }
                }
            }
        }
        report.batches = 1;

        // 3. Finish.
        let mut all_off = true;
        let finished = after_marking(&marking, &versions, |pre, of, marked| match (of, marked) {
            (Some((j, k)), Some(marked)) => Some(apply_op(
                &groups[j].ops[k],
                reads[j][k].as_ref(),
                &marked.etag,
            )),
            // No version in the reply: the row is left to its readers,
            // and so is the decision row.
            (Some(_), None) => {
                all_off = false;
                None
            }
            (None, _) => {
                let if_exists = Precondition::IfExists;
                Some(rows::delete(pre.partition_key(), pre.row_key(), if_exists))
            }
        });
        let mut finishing: Vec<(TableName, Vec<TableOp>)> = Vec::new();
        for (table, ops) in finished {
            let sent = sends(table, ops, Vec::new())?;
            finishing.extend(sent.into_iter().map(|s| (s.table, s.ops)));
        }
        let finishing = Finishing {
            decision_delete: (plan.table, layout::delete(&primary, &txn)?),
            rounds: finishing,
            txn,
            all_off,
            held: self.unit.held(),
        };
        if self.unit.ttl.is_some() {
            let env = self.unit.env.clone();
            tokio::spawn(async move { finishing.run(&env).await });
            return Ok(None);
        }
        Ok(Some(finishing))
    }

    /// Every row of `groups` before the commit: as read, or read now
    /// (inserts need none). A write the service would refuse for what the
    /// row is fails here, before anything is sent.
    async fn before_images(&self, groups: &[Group]) -> Result<Vec<Vec<Option<StoredEntity>>>> {
        let mut reads: Vec<Vec<Option<StoredEntity>>> = Vec::with_capacity(groups.len());
        for g in groups {
            let pk = self.pk(g.part);
            let mut rows = Vec::with_capacity(g.ops.len());
            for (k, (op, row)) in g.ops.iter().zip(&g.rows).enumerate() {
                let read = match (self.reads.get(row), op) {
                    (Some(read), _) => read.clone(),
                    (None, TableOp::Insert(_)) => None,
                    (None, _) => self.unit.fetch(&[row]).await?.pop().flatten(),
                };
                // The service would refuse it: nothing is sent.
                let refusal = match (&read, op) {
                    (Some(_), TableOp::Insert(_)) => Some((409, "EntityAlreadyExists")),
                    // (Its mark checks that it still is.)
                    (None, op) if self.checks_absent(op, row) => None,
                    // A write needing its row.
                    (None, op) if !matches!(op.condition(), None | Some(Precondition::Upsert)) => {
                        Some((404, "ResourceNotFound"))
                    }
                    _ => None,
                };
                if let Some((status, code)) = refusal {
                    let table = g.table.as_str();
                    let what = crate::error::what::entity(op.name(), table, pk, &row.1);
                    let source = Error::from_service(status, Some(code), what);
                    return Err(Error::Batch {
                        index: k,
                        source: Box::new(source.for_row(table, pk, &row.1)),
                    });
                }
                rows.push(read);
            }
            reads.push(rows);
        }
        Ok(reads)
    }

    /// The marking round: answers the versions each transaction produced;
    /// on a failure the marks made are taken off.
    async fn mark_rows(&self, marking: &[Send]) -> Result<Vec<Option<Vec<Option<Version>>>>> {
        let backend = self.unit.env.backend.clone();
        // An insert meeting an undecided commit's placeholder, which
        // resolving it removed, gets the round sent once more. Our marks go
        // first, so that a writer resolving them never waits on us.
        let mut again = true;
        let sent: Vec<(&TableName, Vec<_>)> = marking
            .iter()
            .map(|s| (&s.table, s.ops.iter().map(slim).collect()))
            .collect();
        loop {
            let marked = join_all(sent.iter().map(|(table, ops)| backend.batch(table, ops))).await;
            let mut failed: Option<(usize, Error)> = None;
            let mut versions = Vec::with_capacity(marking.len());
            for (j, result) in marked.into_iter().enumerate() {
                match result {
                    Ok(v) => versions.push(Some(v)),
                    Err(e) => {
                        versions.push(None);
                        // A refusal says more than a lost reply.
                        if failed.is_none() || is_refusal(&e) {
                            failed = Some((j, e));
                        }
                    }
                }
            }
            let Some((j, e)) = failed else {
                return Ok(versions);
            };
            self.withdraw(marking, &versions).await;
            if !again
                || !self
                    .withdrew_placeholder(sent[j].0, &marking[j].ops, &e)
                    .await?
            {
                return Err(e);
            }
            again = false;
        }
    }

    /// Takes a failed commit's marks and after-image rows off, where the
    /// marking went through (`versions`); best effort.
    async fn withdraw(&self, marking: &[Send], versions: &[Option<Vec<Option<Version>>>]) {
        let backend = self.unit.env.backend.clone();
        let sends = after_marking(marking, versions, |op, _, version| {
            let data = op.data()?.clone();
            let etag = version?.etag.clone();
            match Mark::of(&data.properties) {
                Some(mark) => Some(strip(data, etag, &mark)),
                // An after-image row.
                None => {
                    let at = Precondition::IfMatch(etag);
                    Some(rows::delete(&data.partition_key, &data.row_key, at))
                }
            }
        });
        join_all(sends.into_iter().map(|(table, ops)| {
            let backend = backend.clone();
            async move {
                if let Err(e) = backend.batch(table, &ops).await {
                    tracing::warn!(table = %table, error = %e, "taking a failed commit's marks off failed; whoever meets them does it");
                }
            }
        }))
        .await;
    }

    /// Sends `ops` (each try by `by`), once more when an insert met an
    /// undecided commit's placeholder that resolving it removed; the outer
    /// error is one reading the row failed with.
    async fn send(
        &self,
        table: &TableName,
        ops: &[TableOp],
        by: Option<tokio::time::Instant>,
    ) -> Result<Result<Vec<Option<Version>>>> {
        let backend = &self.unit.env.backend;
        let send = || within(by, backend.batch(table, ops));
        match send().await {
            Err(e) if self.withdrew_placeholder(table, ops, &e).await? => Ok(send().await),
            sent => Ok(sent),
        }
    }

    /// Whether `refusal` of `ops` is an insert meeting an undecided
    /// commit's placeholder that resolving it removed.
    async fn withdrew_placeholder(
        &self,
        table: &TableName,
        ops: &[TableOp],
        refusal: &Error,
    ) -> Result<bool> {
        let Error::Batch { index, source } = refusal else {
            return Ok(false);
        };
        let Some(TableOp::Insert(data)) = ops.get(*index) else {
            return Ok(false);
        };
        if source.kind() != ErrorKind::AlreadyExists || is_decision_row(&data.row_key) {
            return Ok(false);
        }
        let stored = self
            .unit
            .env
            .backend
            .get(table, &data.partition_key, &data.row_key)
            .await?;
        let resolver = self.unit.resolver();
        let marked = stored
            .as_ref()
            .is_some_and(|row| Mark::of(&row.data.properties).is_some());
        Ok(marked && resolver.resolve_opt(table, stored).await?.is_none())
    }

    /// Whether group `g` checks that a row read as absent still is (only a
    /// mark can).
    fn checks_absence(&self, g: &Group) -> bool {
        (g.ops.iter().zip(&g.rows)).any(|(op, row)| self.checks_absent(op, row))
    }

    /// Whether `op` is a delete of a row read as absent.
    fn checks_absent(&self, op: &TableOp, row: &(Slot, RowKey)) -> bool {
        let deletes = matches!(op.condition(), Some(Precondition::IfExists));
        deletes && matches!(op, TableOp::Delete { .. }) && read_absent(&self.reads, row)
    }
}

impl Finishing {
    /// Steps 3 and 4; a failed transaction's rows are resolved one by one.
    /// Answers how many went through and whether any was refused.
    async fn run(self, env: &Arc<LockEnv>) -> (usize, bool) {
        let (backend, txn) = (&env.backend, &self.txn);
        let sent = (self.rounds.iter()).map(|(table, ops)| backend.batch(table, ops));
        let results = join_all(sent).await;
        let resolver = Resolver::new(&env.tables, self.held);
        let (mut done, mut recovered, mut all_off) = (0, false, true);
        for ((table, ops), result) in self.rounds.iter().zip(results) {
            let e = match result {
                Ok(_) => {
                    done += 1;
                    continue;
                }
                Err(e) => e,
            };
            recovered |= is_refusal(&e);
            tracing::debug!(txn = %txn, error = %e, "finishing a committed transaction's rows one by one");
            for op in ops.iter().filter(|op| !is_decision_row(op.row_key())) {
                let finished = async {
                    let stored = backend.get(table, op.partition_key(), op.row_key()).await?;
                    resolver.resolve_opt(table, stored).await
                }
                .await;
                if let Err(e) = finished {
                    tracing::warn!(partition = %op.partition_key(), txn = %txn, error = %e, "a committed row is left marked; whoever reads it next finishes it");
                    all_off = false;
                }
            }
        }
        if self.all_off && all_off {
            let backend = env.backend.clone();
            let (table, op) = self.decision_delete;
            tokio::spawn(async move {
                if let Err(e) = backend.execute(&table, op, &WriteOptions::new()).await {
                    tracing::debug!(table = %table, error = %e, "deleting a finished commit's decision row failed; it stays, hidden from reads");
                }
            });
        }
        (done, recovered)
    }
}

/// The staged writes (in order) as their (partition, table) groups.
fn group(staged: impl IntoIterator<Item = ((Slot, RowKey), TableOp)>) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for (key, op) in staged {
        match groups.last_mut() {
            Some(g) if g.part == key.0.part && g.table == key.0.table => {
                g.ops.push(op);
                g.rows.push(key);
            }
            _ => groups.push(Group {
                part: key.0.part,
                table: key.0.table.clone(),
                ops: vec![op],
                rows: vec![key],
            }),
        }
    }
    groups
}

/// Per transaction of the marking round that went through (`versions`),
/// the writes `f` makes of its operations, from what each stands for and
/// the version its marking gave it.
fn after_marking<'m>(
    marking: &'m [Send],
    versions: &[Option<Vec<Option<Version>>>],
    mut f: impl FnMut(&TableOp, Option<(usize, usize)>, Option<&Version>) -> Option<TableOp>,
) -> Vec<(&'m TableName, Vec<TableOp>)> {
    let mut out = Vec::new();
    for (send, versions) in marking.iter().zip(versions) {
        let Some(versions) = versions else { continue };
        let ops: Vec<TableOp> = (send.ops.iter().zip(&send.of).enumerate())
            .filter_map(|(i, (op, of))| f(op, *of, versions.get(i).and_then(Option::as_ref)))
            .collect();
        if !ops.is_empty() {
            out.push((&send.table, ops));
        }
    }
    out
}

/// `ops` of one partition (and what each stands for, `of`) as
/// transactions within the service's limits.
fn sends(
    table: &TableName,
    ops: Vec<TableOp>,
    of: Vec<Option<(usize, usize)>>,
) -> Result<Vec<Send>> {
    let mut of = of.into_iter();
    Ok(chunk_batches(table.as_str(), ops)?
        .into_iter()
        .map(|ops| Send {
            table: table.clone(),
            of: of.by_ref().take(ops.len()).collect(),
            ops,
        })
        .collect())
}

/// The commit point's write for `op`: the row the commit leaves,
/// conditioned on the ETag `op` carries, else the row's as read (an insert
/// where it was absent).
fn conditioned(op: &TableOp, read: Option<&StoredEntity>) -> TableOp {
    let etag = match op.condition() {
        Some(Precondition::IfMatch(etag)) => Some(etag),
        _ => read.map(|r| r.etag.clone()),
    };
    match etag {
        Some(etag) => apply_op(op, read, &etag),
        None => match apply_op(op, None, &ETag::new("*")) {
            TableOp::Replace(data, _) => TableOp::Insert(data),
            other => other,
        },
    }
}

/// The write putting `mark` on the row of `op`, conditioned as
/// [`conditioned`] (a placeholder's insert where there was no row).
fn prewrite(op: &TableOp, read: Option<&StoredEntity>, mark: &Mark) -> TableOp {
    let mut pre = mark.prewrite(op.partition_key(), op.row_key(), read);
    if let (TableOp::Replace(_, condition), Some(Precondition::IfMatch(etag))) =
        (&mut pre, op.condition())
    {
        *condition = Precondition::IfMatch(etag);
    }
    pre
}

/// Runs `f` under [`deadline::send_by`] `by`, if given.
async fn within<F: Future>(by: Option<tokio::time::Instant>, f: F) -> F::Output {
    match by {
        Some(by) => deadline::send_by(by, f).await,
        None => f.await,
    }
}

/// The error of a refused commit point: a refused decision row
/// (`decision_index`) means a reader withdrew the commit.
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

/// Settles a single transaction whose reply was lost, from its rows:
/// applied, or not (sent again once by a `holder`, else
/// [`Error::LeaseLost`]), or contradicted.
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
fn is_refusal(e: &Error) -> bool {
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
