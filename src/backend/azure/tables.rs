//! Table service operations, and what a read-back says about a write
//! whose reply was lost.

use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use azure_core::http::{RawResponse, Request, Url};

use super::AzureBackend;
use super::auth::{Service, header_value};
use super::batch;
use super::errors::{Failure, undecodable};
use super::requests::{
    self, op_what, read_reply, stored_form, stored_from_wire, version_from_etag,
};
use super::retry::Attempt;

use crate::backend::wire;
use crate::backend::{
    Precondition, QueryPage, QuerySpec, StoredEntity, TableBackend, TableCreation, TableOp,
    Version, WriteOptions, validate_batch,
};
use crate::entity::EntityData;
use crate::error::{Error, Result};
use crate::key::{PartitionKey, RowKey, TableName, shorten};
use crate::outcome::{self, Verdict};

/// `op` as the service stores it, for comparing with a read-back.
fn as_stored(op: &TableOp) -> TableOp {
    let mut op = op.clone();
    if let Some(d) = op.data_mut() {
        d.properties = stored_form(d);
    }
    op
}

impl AzureBackend {
    /// Creates or deletes `table`; `answer` reads one attempt's reply.
    async fn on_table<T>(
        &self,
        operation: &'static str,
        table: &TableName,
        request: fn(&Url, &TableName) -> Result<Request>,
        answer: impl Fn(
            std::result::Result<RawResponse, Failure>,
            Attempt,
        ) -> std::result::Result<T, Failure>
        + Sync,
    ) -> Result<T> {
        let answer = &answer;
        self.inner
            .retry
            .run(operation, |earlier| async move {
                let request = request(self.base_url(Service::Table), table)?;
                answer(self.send_raw(Service::Table, request).await, earlier)
            })
            .await
            .map_err(|f| {
                f.into_error(crate::error::what::table(table.as_str()))
                    .for_table(table.as_str())
            })
    }

    async fn get_once(
        &self,
        table: &TableName,
        pk: &PartitionKey,
        rk: &RowKey,
    ) -> std::result::Result<Option<StoredEntity>, Failure> {
        let base = self.base_url(Service::Table);
        match self
            .send_raw(Service::Table, requests::get(base, table, pk, rk)?)
            .await
        {
            Ok(r) => {
                let body = r.body().as_ref();
                let entity = read_reply(
                    body,
                    wire::direct::entity,
                    |json| wire::entity_from_parsed(table.as_str(), json),
                    || format!("entity in the reply from table `{table}`"),
                )?;
                let etag = header_value(r.headers(), "etag").map(str::to_owned);
                Ok(Some(stored_from_wire(table, entity, etag)?))
            }
            Err(f) => match f.status() {
                // A missing entity is not an error; a missing table is.
                Some((404, code)) if code != Some("TableNotFound") => Ok(None),
                _ => Err(f),
            },
        }
    }

    /// An insert whose earlier attempt may have been applied came back 409:
    /// it succeeded if the stored entity is the one written.
    async fn insert_after_lost_reply(
        &self,
        table: &TableName,
        d: &EntityData,
        write_log: Option<&str>,
        what: &str,
    ) -> Result<Option<Version>> {
        let stored = self.get(table, &d.partition_key, &d.row_key).await?;
        let op = as_stored(&TableOp::Insert(d.clone()));
        match stored.and_then(|s| outcome::insert_found(&op, &s, write_log)) {
            Some(version) => {
                tracing::debug!("insert retried after a lost reply: the stored entity is ours");
                Ok(Some(version))
            }
            None => Err(Error::from_service(409, Some("EntityAlreadyExists"), what)),
        }
    }

    async fn execute_once(
        &self,
        table: &TableName,
        op: &TableOp,
    ) -> std::result::Result<Option<Version>, Failure> {
        let base = self.base_url(Service::Table);
        let reply = self
            .send_raw(Service::Table, requests::write(base, table, op)?)
            .await?;
        match op {
            TableOp::Delete { .. } => Ok(None),
            _ => Ok(Some(version_from_etag(
                table,
                header_value(reply.headers(), "etag"),
            )?)),
        }
    }

    /// When `verify_first` is set (the last attempt may have applied `ops`),
    /// reads their rows: the versions when the write was applied, `None`
    /// when it was not (send it again), else a conflict or an unknown
    /// outcome. A failed read leaves the flag set.
    async fn read_back(
        &self,
        verify_first: &AtomicBool,
        table: &TableName,
        ops: &[TableOp],
        write_log: Option<&str>,
        what: &(dyn Fn() -> String + Sync),
    ) -> std::result::Result<Option<Vec<Option<Version>>>, Failure> {
        if !verify_first.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let mut stored = Vec::with_capacity(ops.len());
        for op in ops {
            stored.push(
                self.get_once(table, op.partition_key(), op.row_key())
                    .await?,
            );
        }
        verify_first.store(false, Ordering::Relaxed);
        let ops: Vec<TableOp> = ops.iter().map(as_stored).collect();
        match outcome::judge(&ops, &stored, write_log) {
            Verdict::Applied(versions) => {
                tracing::debug!("lost reply: the write was applied");
                Ok(Some(versions))
            }
            Verdict::NotApplied => {
                tracing::debug!("lost reply: the write was not applied; sending again");
                Ok(None)
            }
            Verdict::Refused => Err(Failure::Fatal(Error::Conflict {
                what: format!(
                    "{}: the reply was lost; the entity's write log shows the write was not applied and the entity has changed since it was read",
                    what()
                ),
                code: None,
                table: None,
                row: None,
            })),
            Verdict::Unknown => Err(Failure::Fatal(Error::transient(format!(
                "{}: the reply was lost and the outcome is unknown: the read-back cannot tell whether this write was applied (its content stands under a new ETag, which another writer may have produced from the same version, or the entity has changed since); a table opened with `with_write_log` can tell",
                what()
            )))),
        }
    }
}

#[async_trait]
impl TableBackend for AzureBackend {
    fn system_name(&self) -> &'static str {
        "azure.storage"
    }

    fn server_address(&self) -> Option<String> {
        (self.inner.settings.table_endpoint.host_str()).map(str::to_owned)
    }

    async fn create_table(&self, table: &TableName) -> Result<TableCreation> {
        let create = requests::create_table;
        self.on_table("create_table", table, create, |reply, _| match reply {
            Ok(_) => Ok(TableCreation::Created),
            // After a lost reply the earlier attempt may be what created
            // it; "already there" is what can be said.
            Err(f) if matches!(f.status(), Some((409, Some("TableAlreadyExists")))) => {
                Ok(TableCreation::AlreadyExisted)
            }
            Err(f) => Err(f),
        })
        .await
    }

    async fn delete_table(&self, table: &TableName) -> Result<bool> {
        let delete = requests::delete_table;
        self.on_table(
            "delete_table",
            table,
            delete,
            |reply, earlier| match reply {
                Ok(_) => Ok(true),
                // A retry after a lost reply finds the table gone by the
                // attempt before: it was deleted by this call.
                Err(f) if matches!(f.status(), Some((404, _))) => Ok(earlier.may_have_applied),
                Err(f) => Err(f),
            },
        )
        .await
    }

    async fn list_tables(&self) -> Result<Vec<TableName>> {
        #[derive(serde::Deserialize)]
        struct Listed {
            #[serde(rename = "TableName")]
            name: String,
        }
        #[derive(serde::Deserialize)]
        struct Page {
            #[serde(default)]
            value: Vec<Listed>,
        }
        let mut names = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let (page, continuation) = self
                .inner
                .retry
                .run("list_tables", |_| {
                    let next = next.as_deref();
                    async move {
                        let base = self.base_url(Service::Table);
                        let reply = self
                            .send_raw(Service::Table, requests::list_tables(base, next)?)
                            .await?;
                        let page: Page = serde_json::from_slice(reply.body().as_ref())
                            .map_err(|e| undecodable("table listing in the reply", &e))?;
                        let continuation =
                            header_value(reply.headers(), "x-ms-continuation-nexttablename")
                                .map(str::to_owned);
                        Ok((page, continuation))
                    }
                })
                .await
                .map_err(|f| f.into_error("the table listing".to_owned()))?;
            for listed in page.value {
                names.push(TableName::new(listed.name)?);
            }
            match continuation {
                Some(c) if !c.is_empty() => next = Some(c),
                _ => return Ok(names),
            }
        }
    }

    async fn get(
        &self,
        table: &TableName,
        pk: &PartitionKey,
        rk: &RowKey,
    ) -> Result<Option<StoredEntity>> {
        self.inner
            .retry
            .run("get", |_| self.get_once(table, pk, rk))
            .await
            .map_err(|f| {
                f.into_error(crate::error::what::entity("get", table.as_str(), pk, rk))
                    .for_row(table.as_str(), pk, rk)
            })
    }

    async fn execute(
        &self,
        table: &TableName,
        op: TableOp,
        options: &WriteOptions,
    ) -> Result<Option<Version>> {
        let (op, write_log) = (&op, options.write_log());
        op.validate(table.as_str())?;
        // Formatted only when something fails.
        let what = &|| op_what(table, op);
        // Whether the next attempt reads the entity first: the last one may
        // have applied a write that cannot simply be sent again.
        let verify_first = &AtomicBool::new(false);
        self.inner
            .retry
            .run(op.name(), |earlier| async move {
                let ops = std::slice::from_ref(op);
                if let Some(mut v) = self
                    .read_back(verify_first, table, ops, write_log, what)
                    .await?
                {
                    return Ok(v.pop().flatten());
                }
                match self.execute_once(table, op).await {
                    Ok(v) => Ok(v),
                    Err(f) => {
                        if earlier.may_have_applied {
                            match (op, f.status()) {
                                (TableOp::Insert(d), Some((409, Some("EntityAlreadyExists")))) => {
                                    return self
                                        .insert_after_lost_reply(table, d, write_log, &what())
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
                            // Conditional writes would fail against their own effect.
                            f.may_have_applied()
                                && matches!(op.condition(), Some(Precondition::IfMatch(_))),
                            Ordering::Relaxed,
                        );
                        Err(f)
                    }
                }
            })
            .await
            .map_err(|f| {
                f.into_error(what())
                    .for_row(table.as_str(), op.partition_key(), op.row_key())
            })
    }

    async fn batch(&self, table: &TableName, ops: &[TableOp]) -> Result<Vec<Option<Version>>> {
        validate_batch(table.as_str(), ops)?;
        for (i, op) in ops.iter().enumerate() {
            op.validate(table.as_str()).map_err(|e| match e {
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
        let base = self.base_url(Service::Table);
        let request = &batch::build(base, table, ops)?;
        let what = &what;
        let whole = &|| what.clone();
        let verify_first = &AtomicBool::new(false);
        self.inner
            .retry
            .run("batch", |_| async move {
                if let Some(versions) = self
                    .read_back(verify_first, table, ops, None, whole)
                    .await?
                {
                    return Ok(versions);
                }
                let sent = self.batch_once(table, ops, base, request, what).await;
                sent.inspect_err(|f| verify_first.store(f.may_have_applied(), Ordering::Relaxed))
            })
            .await
            .map_err(|f| f.into_error(what))
    }

    async fn query(&self, table: &TableName, query: &QuerySpec) -> Result<QueryPage> {
        self.query_page(table, query).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entity::Value;
    use crate::key::ETag;

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
        assert!(outcome::shows_effect(
            &as_stored(&TableOp::Insert(ours)),
            Some(&back)
        ));
    }
}
