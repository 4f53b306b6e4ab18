//! Pruning the lock blobs nobody uses any more (by
//! [`Store::sweep`](crate::Store::sweep)): a blob is deleted when it is
//! **free** (no lease), **clean** (its document holds no record: one there
//! is another program's or a newer leasehold's) and **old** (its
//! `leasehold_acquired`, written when a process takes the lease, is older
//! than `older_than`, on this process's wall clock, the records' clock).
//!
//! Each blob is first read without the lease, so held, pending or recent
//! ones are not disturbed; a candidate's lease is then taken (trying once),
//! the checks are made again, and its wait queue (unless somebody waits
//! there) and the blob are deleted *under the lease id*, which the service
//! refuses if the lease was lost meanwhile. An acquire that finds the blob
//! missing creates it again. A blob without the entry cannot be dated: it
//! is old only for `older_than` zero; otherwise it is stamped and kept.

use std::time::Duration;

use time::OffsetDateTime;
use tracing::Instrument as _;

use super::{LeaseDocument, LeaseGuard, LeaseManager, LeaseName, META_ACQUIRED};
use crate::error::{Error, ErrorKind, Result};

/// What became of one lease blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Deleted,
    Held,
    Pending,
    Recent,
    /// Gone before it could be examined.
    Gone,
}

/// When locks count as recent: after `cutoff` (`None`: nothing is recent).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Age {
    pub(crate) cutoff: Option<OffsetDateTime>,
}

impl Age {
    pub(crate) fn new(older_than: Duration) -> Result<Self> {
        // The records are written with the system's wall clock (not the
        // Tokio clock), so they are compared with it.
        let cutoff = time::Duration::try_from(older_than)
            .ok()
            .and_then(|d| OffsetDateTime::now_utc().checked_sub(d))
            .ok_or_else(|| {
                Error::invalid(
                    format!("older_than {older_than:?}"),
                    "reaches back before any date leasehold represents",
                )
            })?;
        Ok(Age {
            cutoff: (!older_than.is_zero()).then_some(cutoff),
        })
    }

    fn is_recent(self, t: OffsetDateTime) -> bool {
        self.cutoff.is_some_and(|cutoff| t > cutoff)
    }
}

/// Why a lock blob's document keeps it, if it does: any record in it, or
/// reservations, are not the lock's.
fn kept_for(document: &LeaseDocument) -> Option<Verdict> {
    (document.section_names().next().is_some() || !document.reservations.is_empty())
        .then_some(Verdict::Pending)
}

/// Examines one lease blob (see the module docs).
pub(crate) async fn examine(
    locks: &LeaseManager,
    name: &LeaseName,
    age: Age,
    dry_run: bool,
) -> Result<Verdict> {
    let span = tracing::debug_span!("leasehold.prune_lock", lock = %name);
    async {
        let seen = match locks.inner.read(name).await {
            Ok(Some(blob)) => blob,
            Ok(None) => return Ok(Verdict::Gone),
            Err(e) if e.kind() == ErrorKind::Invalid => {
                tracing::warn!(error = %e, "keeping a lock blob this leasehold cannot read");
                return Ok(Verdict::Pending);
            }
            Err(e) => return Err(e),
        };
        if seen.lease.is_locked() {
            return Ok(Verdict::Held);
        }
        if let Some(verdict) = kept_for(&seen.document) {
            return Ok(verdict);
        }
        let seen_acquired = seen.acquired_at();
        match seen_acquired {
            Some(t) if age.is_recent(t) => return Ok(Verdict::Recent),
            // Undated: old only for `older_than` zero; a real run takes the
            // lease to stamp it.
            None if dry_run && age.cutoff.is_some() => return Ok(Verdict::Recent),
            _ => {}
        }
        if dry_run {
            return Ok(Verdict::Deleted);
        }
        let Some(guard) = locks.try_acquire(name.as_str()).await? else {
            return Ok(Verdict::Held);
        };
        let keep = recheck(locks, &guard, seen_acquired, age).await;
        let (guard, keep) = guard.or_release(keep).await?;
        if let Some(verdict) = keep {
            if let Err(e) = guard.release().await {
                tracing::warn!(error = %e, "releasing a lock kept by pruning failed; it will expire");
            }
            return Ok(verdict);
        }
        match guard.delete_blob().await {
            Ok(true) => {
                tracing::debug!("deleted the lock blob");
                Ok(Verdict::Deleted)
            }
            // A process registered in the wait queue meanwhile.
            Ok(false) => Ok(Verdict::Held),
            // The lease ran out and somebody else took the lock (or removed
            // its blob): nothing of theirs was touched.
            Err(e) if e.kind() == ErrorKind::LeaseLost => Ok(Verdict::Held),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(Verdict::Gone),
            Err(e) => Err(e),
        }
    }
    .instrument(span)
    .await
}

/// Checks the lock blob `guard` holds again (`seen_acquired`: as read
/// before): `None` to delete it, otherwise why it is kept.
async fn recheck(
    locks: &LeaseManager,
    guard: &LeaseGuard,
    seen_acquired: Option<OffsetDateTime>,
    age: Age,
) -> Result<Option<Verdict>> {
    let held = match guard.core.snapshot().await {
        Ok(blob) => blob,
        Err(e) if e.kind() == ErrorKind::Invalid => {
            tracing::warn!(error = %e, "keeping a lock blob this leasehold cannot read");
            return Ok(Some(Verdict::Pending));
        }
        Err(e) => return Err(e),
    };
    if let Some(verdict) = kept_for(&held.document) {
        return Ok(Some(verdict));
    }
    // A manager that records owners on acquire has just written its own
    // entry: what was there before is what the first read saw. Otherwise
    // the acquire's read shows a process that took the lock over since.
    let records_owner = locks.inner.env.settings.options.owner_metadata;
    let acquired = if records_owner {
        seen_acquired
    } else {
        held.acquired_at().or(seen_acquired)
    };
    match acquired {
        Some(t) if age.is_recent(t) => Ok(Some(Verdict::Recent)),
        Some(_) => Ok(None),
        None if age.cutoff.is_none() => Ok(None),
        None => {
            if !records_owner {
                let at = crate::datetime::format(OffsetDateTime::now_utc());
                let stamped = guard
                    .update_metadata(|m| super::document::meta_set(m, META_ACQUIRED, at))
                    .await;
                // Unstamped, it is simply looked at again next time.
                match stamped {
                    Ok(_) => tracing::debug!("stamped an undated lock blob; it ages from now"),
                    Err(e) => tracing::warn!(error = %e, "could not stamp an undated lock blob"),
                }
            }
            Ok(Some(Verdict::Recent))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_documents_without_records_can_go() {
        let name = LeaseName::new("t/x").unwrap();
        let doc = |json: &str| LeaseDocument::from_bytes(&name, json.as_bytes()).unwrap();
        assert_eq!(kept_for(&doc("")), None);
        assert_eq!(kept_for(&doc(r#"{"v":1}"#)), None);
        assert_eq!(
            kept_for(&doc(r#"{"v":1,"newer":{"x":1}}"#)),
            Some(Verdict::Pending),
            "a record this leasehold does not write"
        );
    }

    #[test]
    fn ages_beyond_any_date_are_invalid_and_zero_makes_nothing_recent() {
        let e = Age::new(Duration::from_secs(u64::MAX)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
        assert!(e.to_string().contains("older_than"), "{e}");
        let zero = Age::new(Duration::ZERO).unwrap();
        let future = OffsetDateTime::now_utc() + time::Duration::hours(1);
        assert!(!zero.is_recent(future), "clock skew does not keep a lock");
        let hour = Age::new(Duration::from_secs(3600)).unwrap();
        assert!(hour.is_recent(OffsetDateTime::now_utc()));
        assert!(!hour.is_recent(OffsetDateTime::now_utc() - time::Duration::hours(2)));
    }
}
