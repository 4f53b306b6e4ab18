//! Was a write applied, and may it still be applied? The one place where a
//! stored row is read against a write.
//!
//! Two callers ask, after a write's outcome went unknown:
//!
//! * the Azure backend, when a reply was lost ([`judge`]): other writers may
//!   have written meanwhile, so content seen under a new ETag proves nothing
//!   unless a write log says whose write it was;
//! * a partition-lock unit whose single transaction lost its reply
//!   ([`judge_locked`]): it holds the partition's lock, so nobody else wrote.
//!
//! Callers pass operations in the form the service stores (date-times cut
//! to 100 ns and so on).
// Only the Azure backend meets lost replies of its own.
#![cfg_attr(not(feature = "azure"), allow(dead_code))]

use crate::backend::write_log::{self, Evidence};
use crate::backend::{Precondition, StoredEntity, TableOp, Version};
use crate::entity::Properties;
use crate::key::ETag;

/// Whether `stored` (`None`: no row) is the state `op` leaves behind: the
/// properties written (at least those merged for a merge) and, for a write
/// conditioned on an ETag, no longer that ETag (every write changes it).
pub(crate) fn shows_effect(op: &TableOp, stored: Option<&StoredEntity>) -> bool {
    let moved_on = |c: &Precondition, s: &StoredEntity| match c {
        Precondition::IfMatch(e) => &s.etag != e,
        Precondition::IfExists | Precondition::Upsert => true,
    };
    match (op, stored) {
        (TableOp::Delete { .. }, stored) => stored.is_none(),
        (_, None) => false,
        (TableOp::Insert(d), Some(s)) => s.data.properties == d.properties,
        (TableOp::Replace(d, c), Some(s)) => moved_on(c, s) && s.data.properties == d.properties,
        (TableOp::Merge(d, c), Some(s)) => {
            moved_on(c, s) && contains(&s.data.properties, &d.properties)
        }
    }
}

fn contains(stored: &Properties, written: &Properties) -> bool {
    written.iter().all(|(k, v)| stored.get(k) == Some(v))
}

/// Whether `op` would be applied to `stored` if sent now.
pub(crate) fn precondition_holds(op: &TableOp, stored: Option<&StoredEntity>) -> bool {
    match op.condition() {
        None => stored.is_none(),
        Some(Precondition::IfMatch(e)) => stored.is_some_and(|s| s.etag == e),
        Some(Precondition::IfExists) => stored.is_some(),
        Some(Precondition::Upsert) => true,
    }
}

/// What a read-back says about a write whose reply was lost.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// The write(s) were applied, with each operation's version (`None` for
    /// a delete; [`ETag::superseded`] when later writes already replaced it).
    Applied(Vec<Option<Version>>),
    /// The stored state still meets the write's precondition: it was not
    /// applied and may be sent again.
    NotApplied,
    /// A write log proves the write was not applied, and someone else has
    /// written since: the write fails as it would have.
    Refused,
    /// The read-back cannot tell (see `crate::backend::write_log` for why
    /// content under a new ETag proves nothing): reporting it as applied or
    /// as refused could lose or repeat an effect.
    Unknown,
}

pub(crate) fn version_of(s: &StoredEntity) -> Version {
    Version {
        etag: s.etag.clone(),
        timestamp: s.timestamp,
    }
}

/// The version reported for a write known to be applied whose own ETag is
/// already gone: one that matches nothing, as the lost one would not.
fn superseded_version(s: Option<&StoredEntity>) -> Version {
    Version {
        etag: ETag::superseded(),
        timestamp: s.map_or(time::OffsetDateTime::UNIX_EPOCH, |s| s.timestamp),
    }
}

/// Whether `op` is conditioned on the ETag it read: its effect seen under a
/// new ETag does not prove it was this write that made it.
fn conditioned_on_etag(op: &TableOp) -> bool {
    matches!(
        op,
        TableOp::Replace(_, Precondition::IfMatch(_)) | TableOp::Merge(_, Precondition::IfMatch(_))
    )
}

/// What `op`'s write log says, given the stored entity: the log is the
/// string in property `write_log` of the entity written and of the one
/// stored.
fn log_evidence(op: &TableOp, stored: Option<&StoredEntity>, write_log: Option<&str>) -> Evidence {
    let (Some(property), Some(written)) = (write_log, op.data()) else {
        return Evidence::Unknown;
    };
    match write_log::of(&written.properties, property) {
        Some(sent) => write_log::evidence(
            sent,
            stored.and_then(|s| write_log::of(&s.data.properties, property)),
        ),
        None => Evidence::Unknown,
    }
}

/// Settles writes whose reply was lost while other writers may have
/// written: `ops` (one, or an atomic entity-group transaction) against the
/// rows as read back, `stored[i]` for `ops[i]`.
pub(crate) fn judge(
    ops: &[TableOp],
    stored: &[Option<StoredEntity>],
    write_log: Option<&str>,
) -> Verdict {
    let evidence: Vec<Evidence> = ops
        .iter()
        .zip(stored)
        .map(|(op, s)| log_evidence(op, s.as_ref(), write_log))
        .collect();
    let proven_applied = evidence
        .iter()
        .any(|e| matches!(e, Evidence::AppliedLatest | Evidence::AppliedThenBuiltUpon));
    let proven_not_applied = evidence.contains(&Evidence::NotApplied);
    let applied = |op: &TableOp, s: Option<&StoredEntity>| {
        shows_effect(op, s).then(|| op.data().and(s).map(version_of))
    };
    if proven_applied && !proven_not_applied {
        // A batch is atomic: one operation proven applied proves them all.
        // Each reports its stored version only where that version is
        // provably its own.
        let versions = ops
            .iter()
            .zip(stored)
            .zip(&evidence)
            .map(|((op, s), e)| {
                if let TableOp::Delete { .. } = op {
                    return None;
                }
                let own = match e {
                    Evidence::AppliedLatest => true,
                    Evidence::Unknown => !conditioned_on_etag(op),
                    _ => false,
                };
                match applied(op, s.as_ref()) {
                    Some(version) if own => version,
                    _ => Some(superseded_version(s.as_ref())),
                }
            })
            .collect();
        return Verdict::Applied(versions);
    }
    if !ops.iter().any(conditioned_on_etag) {
        let results: Option<Vec<Option<Version>>> = ops
            .iter()
            .zip(stored)
            .map(|(op, s)| applied(op, s.as_ref()))
            .collect();
        if let Some(results) = results {
            return Verdict::Applied(results);
        }
    }
    if ops
        .iter()
        .zip(stored)
        .all(|(op, s)| precondition_holds(op, s.as_ref()))
    {
        Verdict::NotApplied
    } else if proven_not_applied && !proven_applied {
        Verdict::Refused
    } else {
        Verdict::Unknown
    }
}

/// An insert whose earlier attempt's reply was lost found its row: the
/// version it produced when the row is its own write (or was built upon
/// since, by its write log); `None` when the row is somebody else's.
pub(crate) fn insert_found(
    op: &TableOp,
    stored: &StoredEntity,
    write_log: Option<&str>,
) -> Option<Version> {
    if shows_effect(op, Some(stored)) {
        return Some(version_of(stored));
    }
    (log_evidence(op, Some(stored), write_log) == Evidence::AppliedThenBuiltUpon)
        .then(|| superseded_version(Some(stored)))
}

/// What the rows say about a transaction whose reply was lost, written
/// under a partition lock (nobody else writes the partition).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Locked {
    /// Every row shows its write: the transaction was applied.
    Applied,
    /// Every row still meets its precondition: it was not applied.
    NotApplied,
    /// Neither: something wrote the partition without the lock. `applied`
    /// rows show their write.
    Contradicted {
        /// How many rows show their write.
        applied: usize,
    },
}

/// Settles a transaction whose reply was lost, under the partition's lock.
pub(crate) fn judge_locked(ops: &[TableOp], stored: &[Option<StoredEntity>]) -> Locked {
    let mut applied = 0;
    let mut pending = 0;
    for (op, s) in ops.iter().zip(stored) {
        if shows_effect(op, s.as_ref()) {
            applied += 1;
        } else if precondition_holds(op, s.as_ref()) {
            pending += 1;
        }
    }
    if applied == ops.len() {
        Locked::Applied
    } else if pending == ops.len() {
        Locked::NotApplied
    } else {
        Locked::Contradicted { applied }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entity::{EntityData, Value};
    use crate::key::{PartitionKey, RowKey};

    fn data(props: &[(&str, Value)]) -> EntityData {
        EntityData {
            partition_key: PartitionKey::new("p").unwrap(),
            row_key: RowKey::new("r").unwrap(),
            properties: props
                .iter()
                .cloned()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
        }
    }

    fn stored(props: &[(&str, Value)], etag: &str) -> StoredEntity {
        StoredEntity {
            data: data(props),
            etag: ETag::new(etag),
            timestamp: time::OffsetDateTime::UNIX_EPOCH,
        }
    }

    fn delete(if_match: Option<&str>) -> TableOp {
        TableOp::Delete {
            partition_key: PartitionKey::new("p").unwrap(),
            row_key: RowKey::new("r").unwrap(),
            condition: if_match.map_or(Precondition::IfExists, |e| {
                Precondition::IfMatch(ETag::new(e))
            }),
        }
    }

    #[test]
    fn lost_reply_verdicts() {
        let ours = data(&[("n", Value::Int64(2))]);
        let old = stored(&[("n", Value::Int64(1))], "e1");
        let new = stored(&[("n", Value::Int64(2))], "e2");
        let other = stored(&[("n", Value::Int64(3))], "e3");
        let replace = TableOp::Replace(ours.clone(), Precondition::IfMatch(ETag::new("e1")));
        let check =
            |op: &TableOp, s: Option<StoredEntity>| judge(std::slice::from_ref(op), &[s], None);
        // The written content under a new ETag may be another writer's
        // identical write: unknown, never "applied".
        assert!(matches!(
            check(&replace, Some(new.clone())),
            Verdict::Unknown
        ));
        let upsert = TableOp::Replace(ours.clone(), Precondition::Upsert);
        assert!(matches!(check(&upsert, Some(new.clone())), Verdict::Applied(v) if v[0].is_some()));
        assert!(matches!(
            check(&replace, Some(old.clone())),
            Verdict::NotApplied
        ));
        // Neither the write nor its precondition: built upon, or refused?
        assert!(matches!(
            check(&replace, Some(other.clone())),
            Verdict::Unknown
        ));
        assert!(matches!(check(&replace, None), Verdict::Unknown));

        let merge = TableOp::Merge(ours.clone(), Precondition::IfMatch(ETag::new("e1")));
        let wider = stored(&[("n", Value::Int64(2)), ("m", Value::Boolean(true))], "e4");
        assert!(matches!(check(&merge, Some(wider)), Verdict::Unknown));

        let delete = delete(Some("e1"));
        assert!(matches!(check(&delete, None), Verdict::Applied(v) if v[0].is_none()));
        assert!(matches!(check(&delete, Some(old)), Verdict::NotApplied));
        assert!(matches!(check(&delete, Some(other)), Verdict::Unknown));

        let insert = TableOp::Insert(ours);
        assert!(matches!(check(&insert, None), Verdict::NotApplied));
        assert!(matches!(check(&insert, Some(new)), Verdict::Applied(v) if v[0].is_some()));
    }

    #[test]
    fn write_logs_settle_lost_replies_only_where_the_caller_says() {
        let with_log =
            |n: i64, log: &str| vec![("n", Value::Int64(n)), ("log", Value::String(log.into()))];
        let base = write_log::extend("base", None);
        let mine = write_log::extend("mine", Some(&base));
        let rival = write_log::extend("rival", Some(&base));
        let later = write_log::extend("later", Some(&mine));
        let ours = data(&with_log(2, &mine));
        let replace = TableOp::Replace(ours.clone(), Precondition::IfMatch(ETag::new("e1")));
        let check = |op: &TableOp, s: Option<StoredEntity>| {
            judge(std::slice::from_ref(op), &[s], Some("log"))
        };

        // Ours, as written: applied, at the stored version.
        let v = check(&replace, Some(stored(&with_log(2, &mine), "e2")));
        assert!(
            matches!(&v, Verdict::Applied(v) if v[0].as_ref().is_some_and(|v| v.etag.as_str() == "e2"))
        );
        // Without being told where the log is, the same read-back cannot
        // tell: the property is just content.
        assert!(matches!(
            judge(
                std::slice::from_ref(&replace),
                &[Some(stored(&with_log(2, &mine), "e2"))],
                None
            ),
            Verdict::Unknown
        ));
        // A rival's identical content from the same version: not ours, and
        // the entity moved on, so the write fails as it would have.
        assert!(matches!(
            check(&replace, Some(stored(&with_log(2, &rival), "e2"))),
            Verdict::Refused
        ));
        // Ours, then built upon: applied, with a version that matches nothing.
        let v = check(&replace, Some(stored(&with_log(3, &later), "e3")));
        assert!(
            matches!(&v, Verdict::Applied(v) if v[0].as_ref().is_some_and(|v| v.etag.is_superseded()))
        );
        // Unchanged: send again.
        assert!(matches!(
            check(&replace, Some(stored(&with_log(1, &base), "e1"))),
            Verdict::NotApplied
        ));
        // Log rewritten by a writer that does not keep it: unknown.
        assert!(matches!(
            check(&replace, Some(stored(&[("n", Value::Int64(9))], "e9"))),
            Verdict::Unknown
        ));
        // A merge is judged the same way.
        let merge = TableOp::Merge(ours.clone(), Precondition::IfMatch(ETag::new("e1")));
        assert!(matches!(
            check(&merge, Some(stored(&with_log(2, &rival), "e2"))),
            Verdict::Refused
        ));
        // An insert that finds its row: ours, built upon, or somebody else's.
        let insert = TableOp::Insert(ours);
        let found = |s: StoredEntity| insert_found(&insert, &s, Some("log"));
        assert_eq!(
            found(stored(&with_log(2, &mine), "e2"))
                .unwrap()
                .etag
                .as_str(),
            "e2"
        );
        assert!(
            found(stored(&with_log(3, &later), "e3"))
                .unwrap()
                .etag
                .is_superseded()
        );
        assert!(found(stored(&with_log(2, &rival), "e2")).is_none());
    }

    #[test]
    fn a_write_conditioned_on_the_etag_still_stored_was_not_applied() {
        let ours = data(&[("n", Value::Int64(1))]);
        let same = stored(&[("n", Value::Int64(1))], "e1");
        let replace = TableOp::Replace(ours.clone(), Precondition::IfMatch(ETag::new("e1")));
        assert!(!shows_effect(&replace, Some(&same)));
        assert!(precondition_holds(&replace, Some(&same)));
        let upsert = TableOp::Replace(ours, Precondition::Upsert);
        assert!(shows_effect(&upsert, Some(&same)));
    }

    #[test]
    fn locked_transactions_are_applied_pending_or_contradicted() {
        let a = data(&[("n", Value::Int64(2))]);
        let ops = [
            TableOp::Replace(a.clone(), Precondition::IfMatch(ETag::new("e1"))),
            TableOp::Insert(EntityData {
                row_key: RowKey::new("s").unwrap(),
                ..a.clone()
            }),
        ];
        let before = [Some(stored(&[("n", Value::Int64(1))], "e1")), None];
        let after = [
            Some(stored(&[("n", Value::Int64(2))], "e2")),
            Some(stored(&[("n", Value::Int64(2))], "e2")),
        ];
        assert_eq!(judge_locked(&ops, &before), Locked::NotApplied);
        assert_eq!(judge_locked(&ops, &after), Locked::Applied);
        let mixed = [before[0].clone(), after[1].clone()];
        assert_eq!(
            judge_locked(&ops, &mixed),
            Locked::Contradicted { applied: 1 }
        );
    }
}
