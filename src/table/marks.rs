//! Resolving row marks: a reader of a row a commit marked ([`MARK`])
//! finishes or withdraws the commit, so every read sees rows as committed
//! (the protocol: `crate::lock`, "Units and optimistic writes").

use std::time::Duration;

use super::env::TableEnv;
use crate::backend::WriteOptions;
use crate::backend::{QueryPage, QuerySpec, StoredEntity, TableOp};
use crate::entity::Value;
use crate::error::{Error, ErrorKind, Result};
use crate::key::{PartitionKey, RowKey, TableName};
use crate::query::{CmpOp, Filter};
use crate::rows::tombstone::is_tombstone;

use crate::rows::after::{self, AFTER};
use crate::rows::decision::{self, CommitOutcome};
use crate::rows::is_hidden;
pub(crate) use crate::rows::mark::MARK;
use crate::rows::mark::{Mark, strip};

/// Looks at a row that stays marked before giving up.
const RESOLVE_ATTEMPTS: u32 = 12;

/// How long a reader meeting an undecided commit's mark waits for its
/// writer (normally one round trip from its commit point) before it tries
/// the primary's lock.
const WAITS: [Duration; 2] = [Duration::from_millis(20), Duration::from_millis(200)];

/// The first and the longest pause between tries of an undecided commit's
/// primary lock.
const FENCE_FIRST_TRY: Duration = Duration::from_millis(500);
const FENCE_MAX_PAUSE: Duration = Duration::from_secs(6);

/// Who resolves a mark.
pub(crate) struct Resolver<'a> {
    env: &'a TableEnv,
    /// The partitions whose locks the caller holds.
    held: Vec<PartitionKey>,
}

impl<'a> Resolver<'a> {
    pub(crate) fn new(env: &'a TableEnv, held: Vec<PartitionKey>) -> Self {
        Resolver { env, held }
    }

    /// Reads a row, with any mark on it resolved.
    pub(crate) async fn read(
        &self,
        table: &TableName,
        (pk, rk): (&PartitionKey, &RowKey),
    ) -> Result<Option<StoredEntity>> {
        let row = self.env.backend.get(table, pk, rk).await?;
        self.resolve_opt(table, row).await
    }

    /// [`Resolver::resolve`] of a row that may be absent.
    pub(crate) async fn resolve_opt(
        &self,
        table: &TableName,
        row: Option<StoredEntity>,
    ) -> Result<Option<StoredEntity>> {
        match row {
            Some(row) => self.resolve(table, row).await,
            None => Ok(None),
        }
    }

    /// `row` (of `table`) once any mark on it is resolved: its commit
    /// finished or withdrawn. `None`: absent once resolved.
    ///
    /// # Errors
    /// [`Error::Timeout`] when the row stays marked (the primary's lock
    /// stays held); the errors of reading the decision, taking the lock
    /// and writing the row.
    pub(crate) async fn resolve(
        &self,
        table: &TableName,
        row: StoredEntity,
    ) -> Result<Option<StoredEntity>> {
        // Most rows carry no mark: no boxing of the large, recursive future.
        if Mark::of(&row.data.properties).is_none() {
            return Ok(Some(row));
        }
        Box::pin(self.resolve_marked(table, row)).await
    }

    async fn resolve_marked(
        &self,
        table: &TableName,
        row: StoredEntity,
    ) -> Result<Option<StoredEntity>> {
        let pk = row.data.partition_key.clone();
        let rk = row.data.row_key.clone();
        let backend = self.env.backend.clone();
        let mut current = Some(row);
        let mut waited = 0;
        let started = tokio::time::Instant::now();
        // The transaction whose mark this reader waits for, since when.
        let mut seen: Option<(String, tokio::time::Instant)> = None;
        for _ in 0..RESOLVE_ATTEMPTS {
            let Some(row) = current.take() else {
                return Ok(None);
            };
            let Some(mark) = Mark::of(&row.data.properties) else {
                return Ok(Some(row));
            };
            let since = match &seen {
                Some((txn, at)) if *txn == mark.txn => *at,
                _ => {
                    seen.insert((mark.txn.clone(), tokio::time::Instant::now()))
                        .1
                }
            };
            let Some(decided_in) = mark.decision_table() else {
                return Err(Error::Inconsistent {
                    what: format!(
                        "row {:?} of partition {:?} carries a mark whose transaction id {:?} names no table",
                        rk.as_str(),
                        pk.as_str(),
                        mark.txn
                    ),
                });
            };
            let decided =
                decision::read(backend.as_ref(), &decided_in, &mark.primary, &mark.txn).await?;
            let decision = match decided {
                Some(decision) => decision,
                // A transaction's writer is waited for its time-to-live, as
                // this reader saw its mark, and then withdrawn; whoever
                // holds a unit's primary's lock knows its writer is not
                // live, and withdraws at once.
                None if mark.ttl.is_some_and(|ttl| since.elapsed() < ttl) => {
                    let ttl = mark.ttl.unwrap_or_default();
                    tokio::time::sleep(ttl.saturating_sub(since.elapsed())).await;
                    current = backend.get(table, &pk, &rk).await?;
                    continue;
                }
                None if mark.ttl.is_some() || self.held.contains(&mark.primary) => {
                    decision::withdraw(backend.as_ref(), &decided_in, &mark.primary, &mark.txn)
                        .await?
                }
                None => match WAITS.get(waited) {
                    Some(&pause) => {
                        // A live writer is about to decide: look again.
                        waited += 1;
                        tokio::time::sleep(pause).await;
                        current = backend.get(table, &pk, &rk).await?;
                        continue;
                    }
                    None => {
                        // Once the primary's lock could be taken, the
                        // writer, which held it, has lost it: withdrawn,
                        // unless its commit point got there first.
                        self.fence(&mark.primary).await?;
                        decision::withdraw(backend.as_ref(), &decided_in, &mark.primary, &mark.txn)
                            .await?
                    }
                },
            };
            match decision {
                CommitOutcome::Applied => {
                    tracing::debug!(table = %table, partition = %pk, row = %rk, txn = %mark.txn, "finishing a decided commit's write met on a read");
                    let op = after::write_of(backend.as_ref(), table, &row, &mark.txn).await?;
                    if write(backend.as_ref(), table, &op).await? {
                        self.env.telemetry.roll_forward();
                    }
                }
                CommitOutcome::NotApplied => {
                    tracing::debug!(table = %table, partition = %pk, row = %rk, txn = %mark.txn, "taking off the mark of a withdrawn commit");
                    write(
                        backend.as_ref(),
                        table,
                        &strip(row.data.clone(), row.etag.clone(), &mark),
                    )
                    .await?;
                }
            }
            remove_after_rows(backend.as_ref(), table, &row, &mark).await;
            current = backend.get(table, &pk, &rk).await?;
        }
        Err(Error::Timeout {
            what: format!(
                "row {:?} of partition {:?} in `{table}` stayed marked by a commit in progress",
                rk.as_str(),
                pk.as_str()
            ),
            after: started.elapsed(),
        })
    }

    /// Takes the lock of `primary` and gives it back: whoever held it when
    /// a mark was made has lost it since. Tried at doubling intervals, not
    /// in the lock's queue: waiting out a 15 s lease costs 7 tries.
    ///
    /// # Errors
    /// [`Error::Timeout`] after the lock options' acquire timeout.
    async fn fence(&self, primary: &PartitionKey) -> Result<()> {
        let started = tokio::time::Instant::now();
        let timeout = self.env.lock_timeout;
        let name = super::lock_name::lock_name(&self.env.table_prefix, primary)?;
        let mut pause = FENCE_FIRST_TRY;
        loop {
            if let Some(guard) = self.env.locks.try_acquire(name.as_str()).await? {
                if let Err(e) = guard.release().await {
                    tracing::debug!(partition = %primary, error = %e, "giving back a primary's lock taken to settle its commit failed; it will expire");
                }
                return Ok(());
            }
            let left = timeout.saturating_sub(started.elapsed());
            if left.is_zero() {
                return Err(Error::Timeout {
                    what: format!(
                        "the lock of partition {:?}, the primary of a commit whose marks a read met, stayed held",
                        primary.as_str()
                    ),
                    after: started.elapsed(),
                });
            }
            tokio::time::sleep(pause.min(left)).await;
            pause = (pause * 2).min(FENCE_MAX_PAUSE);
        }
    }
}

impl TableEnv {
    /// A row as a reader outside any unit sees it: any mark on it
    /// resolved, a tombstone absent.
    pub(crate) async fn read_row(
        &self,
        table: &TableName,
        pk: &PartitionKey,
        rk: &RowKey,
    ) -> Result<Option<StoredEntity>> {
        let row = Resolver::new(self, Vec::new())
            .read(table, (pk, rk))
            .await?;
        Ok(row.filter(|r| !is_tombstone(&r.data.properties)))
    }

    /// A page of a query of `table` asked as `spec` (sent as
    /// [`query_request`] says) as reads see it: marked rows resolved and
    /// filtered as resolved, hidden rows ([`is_hidden`]) and rows not
    /// matching the filter dropped, rows cut down to the selection.
    ///
    /// # Errors
    /// As [`Resolver::resolve`]; backend errors.
    pub(crate) async fn query_page(
        &self,
        table: &TableName,
        spec: &QuerySpec,
    ) -> Result<QueryPage> {
        // `exact`: every row without a mark that the service returned
        // matches the filter.
        let (sent, exact) = query_request(spec);
        let mut page = self.backend.query(table, &sent).await?;
        if exact
            && spec.select.is_none()
            && !page.entities.iter().any(|row| {
                row.data.properties.get(MARK).is_some()
                    || is_hidden(&row.data.row_key, &row.data.properties)
            })
        {
            return Ok(page);
        }
        let resolver = Resolver::new(self, Vec::new());
        let mut rows = Vec::with_capacity(page.entities.len());
        for row in std::mem::take(&mut page.entities) {
            // A row carrying the mark property may have been returned for
            // it alone (see `query_request`): the filter decides.
            let check = !exact || row.data.properties.get(MARK).is_some();
            let mut row = match Mark::of(&row.data.properties) {
                None => row,
                // A projection without the after-image resolving needs is
                // read whole.
                Some(_) if row.data.properties.get(AFTER).is_none() => {
                    let (pk, rk) = (&row.data.partition_key, &row.data.row_key);
                    let Some(row) = resolver.read(table, (pk, rk)).await? else {
                        continue;
                    };
                    row
                }
                Some(_) => {
                    let Some(row) = resolver.resolve(table, row).await? else {
                        continue;
                    };
                    row
                }
            };
            // A commit's decision row, a fence row: leasehold's, never
            // the caller's.
            if is_hidden(&row.data.row_key, &row.data.properties) {
                continue;
            }
            if check && let Some(filter) = &spec.filter {
                let matches = filter.matches(&crate::query::Row {
                    partition_key: row.data.partition_key.as_str(),
                    row_key: row.data.row_key.as_str(),
                    timestamp: row.timestamp,
                    properties: &row.data.properties,
                });
                if !matches {
                    continue;
                }
            }
            if let Some(names) = &spec.select {
                row.data.properties.retain_names(names);
            }
            rows.push(row);
        }
        page.entities = rows;
        Ok(page)
    }
}

/// The request a query asked as `asked` sends, and whether the service
/// checks its whole filter on the unmarked rows it returns.
///
/// The service filters a marked row by its before-image, so the request
/// also returns the key range's marked rows (`keys and (rest or _lhTxn ge
/// '')`), which [`TableEnv::query_page`] filters as resolved; over the
/// service's limits only the key range is sent. A projection also asks for
/// the reserved properties and those the filter compares.
pub(crate) fn query_request(asked: &QuerySpec) -> (QuerySpec, bool) {
    let mut sent = asked.clone();
    let mut exact = true;
    let mut compared: Vec<String> = Vec::new();
    if let Some(filter) = &asked.filter {
        let (keys, rest) = filter.split_keys();
        if let Some(rest) = rest {
            compared = rest
                .user_properties()
                .into_iter()
                .map(str::to_owned)
                .collect();
            let marked = Filter::compare(MARK, CmpOp::Ge, Value::String(String::new()));
            let widened = match keys.clone() {
                Some(keys) => keys.and(rest.or(marked)),
                None => rest.or(marked),
            };
            if widened.validate().is_ok() {
                sent.filter = Some(widened);
            } else {
                sent.filter = keys;
                exact = false;
            }
        }
    }
    if let Some(names) = &mut sent.select {
        let reserved = [
            MARK,
            AFTER,
            crate::rows::tombstone::PROPERTY,
            crate::rows::expiry::PROPERTY,
        ];
        for name in compared.iter().map(String::as_str).chain(reserved) {
            if !names.iter().any(|n| n == name) {
                names.push(name.to_owned());
            }
        }
    }
    (sent, exact)
}

/// Sends a resolving write; `false` when someone else resolved or wrote
/// the row first.
async fn write(
    backend: &dyn crate::backend::TableBackend,
    table: &TableName,
    op: &TableOp,
) -> Result<bool> {
    match backend
        .execute(table, op.clone(), &WriteOptions::new())
        .await
    {
        Ok(_) => Ok(true),
        Err(e) if lost_race(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether `e` says a conditional write lost a race.
pub(crate) fn lost_race(e: &Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::Conflict | ErrorKind::NotFound | ErrorKind::AlreadyExists
    )
}

/// Removes the after-image rows of a resolved mark, best effort (one left
/// behind is hidden from every read).
async fn remove_after_rows(
    backend: &dyn crate::backend::TableBackend,
    table: &TableName,
    row: &StoredEntity,
    mark: &Mark,
) {
    let Ok(deletes) = after::rows_of(row, &mark.txn) else {
        return;
    };
    for op in deletes {
        if let Err(e) = backend.execute(table, op, &WriteOptions::new()).await
            && e.kind() != ErrorKind::NotFound
        {
            tracing::debug!(table = %table, error = %e, "removing an after-image row failed; it stays, hidden from reads");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filtered_query_also_asks_for_the_marked_rows_of_its_key_range() {
        let pk = Filter::compare("PartitionKey", CmpOp::Eq, Value::String("p".into()));
        let n = |v: i64| Filter::compare("n", CmpOp::Eq, Value::Int64(v));
        let asked = QuerySpec {
            filter: Some(pk.clone().and(n(1))),
            select: Some(vec!["m".into()]),
            ..QuerySpec::default()
        };
        let (sent, exact) = query_request(&asked);
        assert!(exact);
        assert_eq!(
            sent.filter.unwrap().to_odata(),
            "(PartitionKey eq 'p') and ((n eq 1L) or (_lhTxn ge ''))"
        );
        assert_eq!(
            sent.select.unwrap(),
            [
                "m",
                "n",
                MARK,
                AFTER,
                crate::rows::tombstone::PROPERTY,
                crate::rows::expiry::PROPERTY
            ]
        );
        // Keys alone: sent as asked.
        let keys = QuerySpec {
            filter: Some(pk.clone()),
            ..QuerySpec::default()
        };
        assert_eq!(query_request(&keys), (keys, true));
        // At the service's 15 comparisons: the key range alone.
        let mut many = n(0);
        for v in 1..14 {
            many = many.or(n(v));
        }
        let full = QuerySpec {
            filter: Some(pk.clone().and(many)),
            ..QuerySpec::default()
        };
        assert_eq!(full.filter.as_ref().unwrap().comparisons(), 15);
        let (sent, exact) = query_request(&full);
        assert!(!exact);
        assert_eq!(sent.filter, Some(pk));
    }
}
