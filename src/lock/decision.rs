//! A commit's outcome, from its decision row (see "The commit protocol"
//! in the [module docs](super); the row's layout and the race that decides
//! it are in `crate::rows::decision`).

use std::sync::Arc;

use super::env::LockEnv;
use crate::error::{Error, Result};
use crate::key::PartitionKey;
pub use crate::rows::decision::CommitOutcome;
use crate::rows::decision::{DECISIONS_KEPT, issued_at, table_of};
pub(crate) use crate::rows::decision::{read, settle, withdraw};

/// [`Store::commit_outcome`](crate::Store::commit_outcome): a decision row
/// missing for a commit begun (by its id) less than
/// [`DECISIONS_KEPT`] less two
/// [`CLOCK_SKEW`]s ago was never committed (the sweep keeps committed ones
/// that long), so it is withdrawn; an older one may have been swept.
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
    let backend = env.backend.as_ref();
    Ok(match read(backend, &table, primary, txn).await? {
        Some(decision) => decision,
        None => {
            let swept_before = time::OffsetDateTime::now_utc() - DECISIONS_KEPT + CLOCK_SKEW * 2;
            if issued_at(txn).is_some_and(|at| at < swept_before) {
                return Err(Error::NotFound {
                    what: format!(
                        "the decision row of transaction {txn} (partition {:?} of `{table}`): the transaction began more than {} minutes ago, and a sweep may have removed its decision once it was applied and finished; its outcome can no longer be read from storage (read its rows)",
                        primary.as_str(),
                        (DECISIONS_KEPT - CLOCK_SKEW * 2).as_secs() / 60
                    ),
                    code: None,
                    table: Some(table.as_str().to_owned()),
                    row: None,
                });
            }
            withdraw(backend, &table, primary, txn).await?
        }
    })
}

/// How far apart the clocks that date a commit may be: the writer's (its
/// id), the service's (its decision row), a sweeper's.
const CLOCK_SKEW: std::time::Duration = std::time::Duration::from_secs(5 * 60);
