//! Writes and reads of single entities and batches on the Table service,
//! under the transport retry policy, and what a read-back says about a write
//! whose reply was lost.

use std::sync::atomic::{AtomicBool, Ordering};

use azure_storage::clients::ServiceType;
use serde_json::Value as Json;

use super::AzureBackend;
use super::batch;
use super::errors::Failure;
use super::requests::{
    entity_body, entity_what, if_match, op_what, stored_form, stored_from_json, validate_op,
    version_from_etag,
};
use crate::backend::write_log::{self, Evidence};
use crate::backend::{Precondition, StoredEntity, TableOp, Version, validate_batch};
use crate::entity::{EntityData, wire};
use crate::error::{Error, Result};
use crate::key::{ETag, PartitionKey, RowKey, TableName, shorten};

/// What a read-back says about a write whose reply was lost.
#[derive(Debug)]
enum Verdict {
    /// The write(s) were applied, with each operation's version (`None` for
    /// a delete; [`ETag::superseded`] when later writes already replaced it).
    Applied(Vec<Option<Version>>),
    /// The stored state still meets the write's precondition: it was not
    /// applied and may be sent again.
    NotApplied,
    /// A write log proves the write was not applied, and someone else has
    /// written since: the write fails as it would have.
    Refused,
    /// The read-back cannot tell. A conditional write whose content is stored
    /// under a new ETag may be another writer's identical write (two
    /// increments of one counter); a stored state that matches neither the
    /// write nor its precondition may be the write built upon, or another
    /// writer's. Reporting either as applied or as refused could lose or
    /// repeat an effect, so the outcome stays unknown.
    Unknown,
}

/// The version of a stored entity.
fn version_of(s: &StoredEntity) -> Version {
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

/// `Some(result)` when `stored` is the state `op` leaves behind.
fn applied(op: &TableOp, stored: Option<&StoredEntity>) -> Option<Option<Version>> {
    let not_precondition_etag = |c: &Precondition, s: &StoredEntity| match c {
        Precondition::IfMatch(e) => &s.etag != e,
        _ => true,
    };
    match (op, stored) {
        (TableOp::Delete { .. }, None) => Some(None),
        (TableOp::Delete { .. }, Some(_)) => None,
        (_, None) => None,
        (TableOp::Insert(d), Some(s)) => {
            (s.data.properties == stored_form(d)).then(|| Some(version_of(s)))
        }
        (TableOp::Replace(d, c), Some(s)) => (not_precondition_etag(c, s)
            && s.data.properties == stored_form(d))
        .then(|| Some(version_of(s))),
        (TableOp::Merge(d, c), Some(s)) => {
            let merged = stored_form(d);
            (not_precondition_etag(c, s)
                && merged
                    .iter()
                    .all(|(k, v)| s.data.properties.get(k) == Some(v)))
            .then(|| Some(version_of(s)))
        }
    }
}

/// Whether `stored` still meets `op`'s precondition.
fn precondition_holds(op: &TableOp, stored: Option<&StoredEntity>) -> bool {
    match op {
        TableOp::Insert(_) => stored.is_none(),
        TableOp::Replace(_, c) | TableOp::Merge(_, c) | TableOp::Delete { condition: c, .. } => {
            match c {
                Precondition::IfMatch(e) => stored.is_some_and(|s| &s.etag == e),
                Precondition::IfExists => stored.is_some(),
                Precondition::Upsert => true,
            }
        }
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

/// What `op`'s write log (if it sent one) says, given the stored entity.
fn log_evidence(op: &TableOp, stored: Option<&StoredEntity>) -> Evidence {
    let sent = match op {
        TableOp::Insert(d) | TableOp::Replace(d, _) | TableOp::Merge(d, _) => {
            write_log::of(&d.properties)
        }
        TableOp::Delete { .. } => None,
    };
    match sent {
        Some(sent) => {
            write_log::evidence(sent, stored.and_then(|s| write_log::of(&s.data.properties)))
        }
        None => Evidence::Unknown,
    }
}

fn judge(ops: &[TableOp], stored: &[Option<StoredEntity>]) -> Verdict {
    let evidence: Vec<Evidence> = ops
        .iter()
        .zip(stored)
        .map(|(op, s)| log_evidence(op, s.as_ref()))
        .collect();
    let proven_applied = evidence
        .iter()
        .any(|e| matches!(e, Evidence::AppliedLatest | Evidence::AppliedThenBuiltUpon));
    let proven_not_applied = evidence.contains(&Evidence::NotApplied);
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

fn unknown_outcome(what: &str) -> Error {
    Error::transient(format!(
        "{what}: the reply was lost and the outcome is unknown: the read-back cannot tell whether this write was applied (its content stands under a new ETag, which another writer may have produced from the same version, or the entity has changed since); a table opened with `with_write_log` can tell"
    ))
}

fn refused(what: &str) -> Error {
    Error::Conflict {
        what: format!(
            "{what}: the reply was lost; the entity's write log shows the write was not applied and the entity has changed since it was read"
        ),
        code: None,
        table: None,
        row: None,
    }
}

/// Whether re-sending `op` after a possibly-applied failure needs a check
/// first: conditional writes would fail against their own effect.
fn needs_verification(op: &TableOp) -> bool {
    matches!(
        op,
        TableOp::Replace(_, Precondition::IfMatch(_))
            | TableOp::Merge(_, Precondition::IfMatch(_))
            | TableOp::Delete {
                condition: Precondition::IfMatch(_),
                ..
            }
    )
}

impl AzureBackend {
    pub(super) async fn create_table_impl(&self, table: &TableName) -> Result<()> {
        self.retrying("create_table", |_| async move {
            match self
                .attempt(self.table_client(table).create().into_future())
                .await
            {
                Ok(_) => Ok(()),
                Err(f) if matches!(f.status(), Some((409, Some("TableAlreadyExists")))) => Ok(()),
                Err(f) => Err(f),
            }
        })
        .await
        .map_err(|f| {
            f.into_error(format!("table `{table}`"))
                .for_table(table.as_str())
        })
    }

    pub(super) async fn get_impl(
        &self,
        table: &TableName,
        pk: &PartitionKey,
        rk: &RowKey,
    ) -> Result<Option<StoredEntity>> {
        self.retrying("get", |_| self.get_once(table, pk, rk))
            .await
            .map_err(|f| {
                f.into_error(entity_what(table, pk, rk))
                    .for_row(table.as_str(), pk, rk)
            })
    }

    async fn get_once(
        &self,
        table: &TableName,
        pk: &PartitionKey,
        rk: &RowKey,
    ) -> std::result::Result<Option<StoredEntity>, Failure> {
        let client = self.entity_client(table, pk, rk);
        match self
            .attempt(client.get::<wire::ParsedEntity>().into_future())
            .await
        {
            Ok(r) => Ok(Some(stored_from_json(
                table,
                r.entity,
                Some(r.etag.to_string()),
            )?)),
            Err(f) => match f.status() {
                // A missing entity is not an error; a missing table is.
                Some((404, code)) if code != Some("TableNotFound") => Ok(None),
                _ => Err(f),
            },
        }
    }

    pub(super) async fn execute_impl(
        &self,
        table: &TableName,
        op: &TableOp,
    ) -> Result<Option<Version>> {
        validate_op(table, op)?;
        let what = &op_what(table, op);
        // Whether the next attempt reads the entity first: the last one may
        // have applied a write that cannot simply be sent again.
        let verify_first = &AtomicBool::new(false);
        self.retrying(op.name(), |earlier| async move {
            if verify_first.load(Ordering::Relaxed) {
                // A failed read is retried, and verifies again.
                let stored = self
                    .get_once(table, op.partition_key(), op.row_key())
                    .await?;
                verify_first.store(false, Ordering::Relaxed);
                match judge(std::slice::from_ref(op), &[stored]) {
                    Verdict::Applied(mut v) => {
                        tracing::debug!("lost reply: the write was applied");
                        return Ok(v.pop().flatten());
                    }
                    Verdict::NotApplied => {
                        tracing::debug!("lost reply: the write was not applied; sending again");
                    }
                    Verdict::Refused => return Err(Failure::Fatal(refused(what))),
                    Verdict::Unknown => return Err(Failure::Fatal(unknown_outcome(what))),
                }
            }
            match self.execute_once(table, op).await {
                Ok(v) => Ok(v),
                Err(f) => {
                    if earlier.may_have_applied {
                        match (op, f.status()) {
                            (TableOp::Insert(d), Some((409, Some("EntityAlreadyExists")))) => {
                                return self
                                    .insert_after_lost_reply(table, d, what)
                                    .await
                                    .map_err(Failure::Fatal);
                            }
                            (TableOp::Delete { .. }, Some((404, Some("ResourceNotFound")))) => {
                                return Ok(None);
                            }
                            _ => {}
                        }
                    }
                    verify_first.store(
                        f.may_have_applied() && needs_verification(op),
                        Ordering::Relaxed,
                    );
                    Err(f)
                }
            }
        })
        .await
        .map_err(|f| {
            f.into_error(what)
                .for_row(table.as_str(), op.partition_key(), op.row_key())
        })
    }

    /// An insert whose earlier attempt may have been applied came back 409:
    /// it succeeded if the stored entity is the one written.
    async fn insert_after_lost_reply(
        &self,
        table: &TableName,
        d: &EntityData,
        what: &str,
    ) -> Result<Option<Version>> {
        let stored = self.get_impl(table, &d.partition_key, &d.row_key).await?;
        let op = TableOp::Insert(d.clone());
        match stored {
            Some(s) if s.data.properties == stored_form(d) => {
                tracing::debug!("insert retried after a lost reply: the stored entity is ours");
                Ok(Some(version_of(&s)))
            }
            Some(s) if log_evidence(&op, Some(&s)) == Evidence::AppliedThenBuiltUpon => {
                tracing::debug!("insert retried after a lost reply: applied, then built upon");
                Ok(Some(superseded_version(Some(&s))))
            }
            _ => Err(Error::from_service(409, Some("EntityAlreadyExists"), what)),
        }
    }

    async fn execute_once(
        &self,
        table: &TableName,
        op: &TableOp,
    ) -> std::result::Result<Option<Version>, Failure> {
        let redact = |e| Failure::from_azure(e, &self.inner.redactor);
        let etag = match op {
            TableOp::Insert(d) => {
                let builder = self
                    .table_client(table)
                    .insert::<_, Json>(entity_body(d))
                    .map_err(redact)?
                    .return_entity(false);
                self.attempt(builder.into_future()).await?.etag
            }
            TableOp::Replace(d, c) | TableOp::Merge(d, c) => {
                let client = self.entity_client(table, &d.partition_key, &d.row_key);
                let replace = matches!(op, TableOp::Replace(..));
                let body = entity_body(d);
                let builder = match (if_match(c), replace) {
                    (None, true) => client
                        .insert_or_replace(body)
                        .map_err(redact)?
                        .into_future(),
                    (None, false) => client.insert_or_merge(body).map_err(redact)?.into_future(),
                    (Some(c), true) => client.update(body, c).map_err(redact)?.into_future(),
                    (Some(c), false) => client.merge(body, c).map_err(redact)?.into_future(),
                };
                self.attempt(builder).await?.etag
            }
            TableOp::Delete {
                partition_key,
                row_key,
                condition,
            } => {
                let client = self.entity_client(table, partition_key, row_key);
                let condition = if_match(condition).ok_or_else(|| {
                    Failure::Fatal(Error::invalid(
                        op_what(table, op),
                        "a delete needs a condition",
                    ))
                })?;
                self.attempt(client.delete().if_match(condition).into_future())
                    .await?;
                return Ok(None);
            }
        };
        Ok(Some(version_from_etag(table, etag.as_ref())?))
    }

    pub(super) async fn batch_impl(
        &self,
        table: &TableName,
        ops: &[TableOp],
    ) -> Result<Vec<Option<Version>>> {
        validate_batch(table.as_str(), ops)?;
        for (i, op) in ops.iter().enumerate() {
            validate_op(table, op).map_err(|e| match e {
                Error::Invalid { what, why } => {
                    Error::invalid(format!("batch operation {i}: {what}"), why)
                }
                other => other,
            })?;
        }
        let what = format!(
            "batch of {} operations in partition {} of table `{table}`",
            ops.len(),
            ops.first()
                .map(|o| shorten(o.partition_key().as_str()))
                .unwrap_or_default()
        );
        let base = self
            .base_url(ServiceType::Table)
            .map_err(|f| f.into_error(&what))?;
        let request = &batch::build(&base, table, ops)?;
        let (base, what) = (&base, &what);
        // Whether the next attempt reads the rows first: the last one may
        // have applied the batch.
        let verify_first = &AtomicBool::new(false);
        self.retrying("batch", |_| async move {
            if verify_first.load(Ordering::Relaxed) {
                // A failed read is retried, and verifies again.
                let verdict = self.verify_batch(table, ops).await?;
                verify_first.store(false, Ordering::Relaxed);
                match verdict {
                    Verdict::Applied(versions) => {
                        tracing::debug!("lost reply: the batch was applied");
                        return Ok(versions);
                    }
                    Verdict::NotApplied => {
                        tracing::debug!("lost reply: the batch was not applied; sending again");
                    }
                    Verdict::Refused => return Err(Failure::Fatal(refused(what))),
                    Verdict::Unknown => return Err(Failure::Fatal(unknown_outcome(what))),
                }
            }
            match self.batch_once(table, ops, base, request, what).await {
                Ok(outcome) => outcome.map_err(Failure::Fatal),
                Err(f) => {
                    verify_first.store(f.may_have_applied(), Ordering::Relaxed);
                    Err(f)
                }
            }
        })
        .await
        .map_err(|f| f.into_error(what))
    }

    /// Reads every row a batch writes.
    async fn read_rows(
        &self,
        table: &TableName,
        ops: &[TableOp],
    ) -> std::result::Result<Vec<Option<StoredEntity>>, Failure> {
        let mut stored = Vec::with_capacity(ops.len());
        for op in ops {
            stored.push(
                self.get_once(table, op.partition_key(), op.row_key())
                    .await?,
            );
        }
        Ok(stored)
    }

    async fn verify_batch(
        &self,
        table: &TableName,
        ops: &[TableOp],
    ) -> std::result::Result<Verdict, Failure> {
        let stored = self.read_rows(table, ops).await?;
        Ok(judge(ops, &stored))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entity::Value;

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

    #[test]
    fn lost_reply_verdicts() {
        let ours = data(&[("n", Value::Int64(2))]);
        let old = stored(&[("n", Value::Int64(1))], "e1");
        let new = stored(&[("n", Value::Int64(2))], "e2");
        let other = stored(&[("n", Value::Int64(3))], "e3");
        let replace = TableOp::Replace(ours.clone(), Precondition::IfMatch(ETag::new("e1")));
        let check = |op: &TableOp, s: Option<StoredEntity>| judge(std::slice::from_ref(op), &[s]);
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

        let delete = TableOp::Delete {
            partition_key: ours.partition_key.clone(),
            row_key: ours.row_key.clone(),
            condition: Precondition::IfMatch(ETag::new("e1")),
        };
        assert!(matches!(check(&delete, None), Verdict::Applied(v) if v[0].is_none()));
        assert!(matches!(check(&delete, Some(old)), Verdict::NotApplied));
        assert!(matches!(check(&delete, Some(other)), Verdict::Unknown));

        let insert = TableOp::Insert(ours);
        assert!(matches!(check(&insert, None), Verdict::NotApplied));
        assert!(matches!(check(&insert, Some(new)), Verdict::Applied(v) if v[0].is_some()));
    }

    #[test]
    fn write_logs_settle_lost_replies() {
        let with_log = |n: i64, log: &str| {
            vec![
                ("n", Value::Int64(n)),
                (write_log::PROPERTY, Value::String(log.into())),
            ]
        };
        let base = write_log::extend("base", None);
        let mine = write_log::extend("mine", Some(&base));
        let rival = write_log::extend("rival", Some(&base));
        let later = write_log::extend("later", Some(&mine));
        let ours = data(&with_log(2, &mine));
        let replace = TableOp::Replace(ours.clone(), Precondition::IfMatch(ETag::new("e1")));
        let check = |op: &TableOp, s: Option<StoredEntity>| judge(std::slice::from_ref(op), &[s]);

        // Ours, as written: applied, at the stored version.
        let v = check(&replace, Some(stored(&with_log(2, &mine), "e2")));
        assert!(
            matches!(&v, Verdict::Applied(v) if v[0].as_ref().is_some_and(|v| v.etag.as_str() == "e2"))
        );
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
        let merge = TableOp::Merge(ours, Precondition::IfMatch(ETag::new("e1")));
        assert!(matches!(
            check(&merge, Some(stored(&with_log(2, &rival), "e2"))),
            Verdict::Refused
        ));
    }

    #[test]
    fn read_back_compares_the_stored_form() {
        // 100 ns is the service's resolution: a written 1 ns is read back as 0.
        let t = time::macros::datetime!(2024-01-01 0:00:00.000000001 UTC);
        let ours = data(&[("t", Value::DateTime(t))]);
        let back = stored(
            &[(
                "t",
                Value::DateTime(time::macros::datetime!(2024-01-01 0:00 UTC)),
            )],
            "e",
        );
        assert!(applied(&TableOp::Insert(ours), Some(&back)).is_some());
    }
}
