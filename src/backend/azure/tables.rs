//! The Table side of the Azure backend.

use std::sync::atomic::{AtomicBool, Ordering};

use azure_core::Url;
use azure_core::headers::Headers;
use azure_core::prelude::Continuable as _;
use azure_data_tables::IfMatchCondition;
use azure_data_tables::clients::{EntityClient, TableClient};
use azure_storage::clients::ServiceType;
use futures_util::StreamExt as _;
use serde_json::Value as Json;

use super::AzureBackend;
use super::batch;
use super::errors::{Failure, is_transient_status};
use crate::backend::wire;
use crate::backend::{
    Precondition, QueryPage, QuerySpec, StoredEntity, TableOp, Version, validate_batch,
};
use crate::entity::{
    EntityData, Properties, RESERVED_NAMES, datetime, property_name_problem, validate_entity,
};
use crate::error::{Error, Result};
use crate::key::{ETag, PartitionKey, RowKey, TableName, shorten};
use crate::outcome::{self, Verdict};
use crate::query::Continuation;

/// A key as it goes into an entity URL: `'` doubled, as OData string
/// literals require (the 0.21 clients do not do it).
pub(super) fn quote_key(key: &str) -> String {
    key.replace('\'', "''")
}

/// `{base}/{table}`: where inserts go.
pub(super) fn table_url(base: &Url, table: &TableName) -> Result<Url> {
    let mut url = base.clone();
    url.path_segments_mut()
        .map_err(|()| Error::invalid("table endpoint", "cannot carry a path"))?
        .push(table.as_str());
    Ok(url)
}

/// `{base}/{table}(PartitionKey='..',RowKey='..')`, keys quoted and
/// percent-encoded.
pub(super) fn entity_url(
    base: &Url,
    table: &TableName,
    pk: &PartitionKey,
    rk: &RowKey,
) -> Result<Url> {
    let mut url = base.clone();
    url.path_segments_mut()
        .map_err(|()| Error::invalid("table endpoint", "cannot carry a path"))?
        .push(&format!(
            "{}(PartitionKey='{}',RowKey='{}')",
            table.as_str(),
            quote_key(pk.as_str()),
            quote_key(rk.as_str())
        ));
    Ok(url)
}

/// The new version a write reports through its ETag, which embeds the new
/// Timestamp: `W/"datetime'2024-01-02T03%3A04%3A05.1234567Z'"`.
pub(super) fn version_from_etag(table: &TableName, etag: &str) -> Result<Version> {
    let bad = || Error::Decode {
        table: table.to_string(),
        row: None,
        property: "ETag".into(),
        expected: "W/\"datetime'…'\"".into(),
        found: etag.to_owned(),
    };
    let inner = etag
        .strip_prefix("W/\"datetime'")
        .and_then(|s| s.strip_suffix("'\""))
        .ok_or_else(bad)?;
    let timestamp = datetime::parse(&percent_decode(inner).ok_or_else(bad)?).map_err(|_| bad())?;
    Ok(Version {
        etag: ETag::new(etag),
        timestamp,
    })
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// An entity read from the wire, with its ETag (from the header when given,
/// else from `odata.etag`).
fn stored_from_json(
    table: &TableName,
    json: wire::ParsedEntity,
    etag: Option<String>,
) -> Result<StoredEntity> {
    let w = wire::entity_from_parsed(table.as_str(), json)?;
    let decode = |property: &str, expected: &str| Error::Decode {
        table: table.to_string(),
        row: None,
        property: property.into(),
        expected: expected.into(),
        found: "absent".into(),
    };
    let etag = etag
        .or(w.etag)
        .ok_or_else(|| decode("odata.etag", "an ETag"))?;
    let timestamp = w
        .timestamp
        .ok_or_else(|| decode("Timestamp", "Edm.DateTime"))?;
    Ok(StoredEntity {
        data: EntityData {
            partition_key: PartitionKey::new(w.partition_key)?,
            row_key: RowKey::new(w.row_key)?,
            properties: w.properties,
        },
        etag: ETag::new(etag),
        timestamp,
    })
}

/// The properties as the service will store and return them (date-times cut
/// to 100 ns and so on): what a read-back is compared with.
fn stored_form(d: &EntityData) -> Properties {
    let json = wire::entity_to_json(d.partition_key.as_str(), d.row_key.as_str(), &d.properties);
    match wire::entity_from_json("", &json) {
        Ok(w) => w.properties,
        Err(_) => d.properties.clone(),
    }
}

fn entity_body(d: &EntityData) -> wire::EntityBody<'_> {
    wire::EntityBody::new(d.partition_key.as_str(), d.row_key.as_str(), &d.properties)
}

fn if_match(c: &Precondition) -> Option<IfMatchCondition> {
    match c {
        Precondition::IfMatch(etag) => Some(IfMatchCondition::Etag(etag.as_str().into())),
        Precondition::IfExists => Some(IfMatchCondition::Any),
        Precondition::Upsert => None,
    }
}

fn entity_what(table: &TableName, pk: &PartitionKey, rk: &RowKey) -> String {
    format!(
        "entity ({}, {}) in table `{table}`",
        shorten(pk.as_str()),
        shorten(rk.as_str())
    )
}

fn op_what(table: &TableName, op: &TableOp) -> String {
    format!(
        "{} of {}",
        op.name(),
        entity_what(table, op.partition_key(), op.row_key())
    )
}

/// `op` in the form the service stores it: what a read-back is compared
/// with.
fn as_stored(op: &TableOp) -> TableOp {
    let mut op = op.clone();
    if let Some(d) = op.data_mut() {
        d.properties = stored_form(d);
    }
    op
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
    matches!(op.condition(), Some(Precondition::IfMatch(_)))
}

fn validate_op(table: &TableName, op: &TableOp) -> Result<()> {
    if let Some(d) = op.data() {
        validate_entity(table.as_str(), &d.partition_key, &d.row_key, &d.properties)?;
    }
    Ok(())
}

impl AzureBackend {
    fn table_client(&self, table: &TableName) -> TableClient {
        self.inner.tables.table_client(table.as_str())
    }

    fn entity_client(&self, table: &TableName, pk: &PartitionKey, rk: &RowKey) -> EntityClient {
        self.table_client(table)
            .partition_key_client(quote_key(pk.as_str()))
            .entity_client(quote_key(rk.as_str()))
    }

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

    /// One write; `write_log` names the property holding its write log,
    /// which settles a lost reply.
    pub(super) async fn execute_impl(
        &self,
        table: &TableName,
        op: &TableOp,
        write_log: Option<&str>,
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
                match outcome::judge(&[as_stored(op)], &[stored], write_log) {
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
                                    .insert_after_lost_reply(table, d, write_log, what)
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
        write_log: Option<&str>,
        what: &str,
    ) -> Result<Option<Version>> {
        let stored = self.get_impl(table, &d.partition_key, &d.row_key).await?;
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
                if_match,
            } => {
                let client = self.entity_client(table, partition_key, row_key);
                let condition = match if_match {
                    Some(etag) => IfMatchCondition::Etag(etag.as_str().into()),
                    None => IfMatchCondition::Any,
                };
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
        let ops: Vec<TableOp> = ops.iter().map(as_stored).collect();
        Ok(outcome::judge(&ops, &stored, None))
    }

    /// Sends the batch once. `Ok(Err(_))` is a final answer (an operation
    /// failed; nothing was applied); `Err(_)` a failure to retry or report.
    async fn batch_once(
        &self,
        table: &TableName,
        ops: &[TableOp],
        base: &Url,
        request: &batch::BatchRequest,
        what: &str,
    ) -> std::result::Result<Result<Vec<Option<Version>>>, Failure> {
        let mut url = base.clone();
        url.path_segments_mut()
            .map_err(|()| Failure::Fatal(Error::invalid("table endpoint", "cannot carry a path")))?
            .push("$batch");
        let mut headers = Headers::new();
        headers.insert("content-type", request.content_type.clone());
        headers.insert("accept", "application/json;odata=minimalmetadata");
        headers.insert("dataserviceversion", "3.0;");
        headers.insert("maxdataserviceversion", "3.0;NetFx");
        let reply = self
            .send_raw(
                ServiceType::Table,
                azure_core::Method::Post,
                url,
                headers,
                Some(request.body.clone().into()),
            )
            .await?;
        let text = String::from_utf8_lossy(reply.body());
        let parts = batch::parse(&text);

        if let Some(part) = parts.iter().find(|p| p.status >= 300 || p.status < 200) {
            let (code, message_index) = part.error_details();
            if is_transient_status(part.status) {
                return Err(Failure::Status {
                    status: part.status,
                    code,
                });
            }
            let index = message_index
                .or_else(|| part.content_index())
                .or((ops.len() == 1).then_some(0))
                .filter(|i| *i < ops.len());
            let source = Error::from_service(
                part.status,
                code.as_deref(),
                match index {
                    Some(i) => op_what(table, &ops[i]),
                    None => what.to_owned(),
                },
            );
            return Ok(Err(match index {
                Some(index) => Error::Batch {
                    index,
                    source: Box::new(source.for_row(
                        table.as_str(),
                        ops[index].partition_key(),
                        ops[index].row_key(),
                    )),
                },
                None => source,
            }));
        }
        if parts.len() != ops.len() {
            return Err(Failure::Fatal(Error::Backend {
                status: Some(202),
                code: None,
                message: format!(
                    "{what}: the reply holds {} operation results for {} operations",
                    parts.len(),
                    ops.len()
                ),
                source: None,
            }));
        }
        // Replies come in request order; Content-ID, when echoed, says so too.
        let mut ordered: Vec<Option<&batch::PartReply>> = vec![None; ops.len()];
        for (i, part) in parts.iter().enumerate() {
            let at = part.content_index().filter(|j| *j < ops.len()).unwrap_or(i);
            ordered[at] = Some(part);
        }
        let mut versions = Vec::with_capacity(ops.len());
        for (op, part) in ops.iter().zip(ordered) {
            match (op, part) {
                (TableOp::Delete { .. }, _) => versions.push(None),
                (_, Some(part)) => {
                    let etag = part.header("etag").ok_or_else(|| {
                        Failure::Fatal(Error::Decode {
                            table: table.to_string(),
                            row: None,
                            property: "ETag".into(),
                            expected: "an ETag header in the batch reply".into(),
                            found: "absent".into(),
                        })
                    })?;
                    versions.push(Some(version_from_etag(table, etag)?));
                }
                (_, None) => {
                    return Err(Failure::Fatal(Error::Backend {
                        status: Some(202),
                        code: None,
                        message: format!("{what}: an operation has no reply"),
                        source: None,
                    }));
                }
            }
        }
        Ok(Ok(versions))
    }

    pub(super) async fn query_impl(
        &self,
        table: &TableName,
        spec: &QuerySpec,
    ) -> Result<QueryPage> {
        spec.validate()?;
        let select = match &spec.select {
            None => None,
            Some(names) => {
                // Keys and Timestamp always come back, so the entity can be
                // rebuilt and versioned.
                let mut list: Vec<&str> = RESERVED_NAMES.to_vec();
                for name in names {
                    if RESERVED_NAMES.contains(&name.as_str()) {
                        continue;
                    }
                    if let Some(why) = property_name_problem(name) {
                        return Err(Error::invalid(format!("selected property {name:?}"), why));
                    }
                    if !list.contains(&name.as_str()) {
                        list.push(name);
                    }
                }
                Some(list.join(","))
            }
        };
        let what = format!("query of table `{table}`");
        self.retrying("query", |_| self.query_once(table, spec, select.clone()))
            .await
            .map_err(|f| f.into_error(&what))
    }

    async fn query_once(
        &self,
        table: &TableName,
        spec: &QuerySpec,
        select: Option<String>,
    ) -> std::result::Result<QueryPage, Failure> {
        let mut builder = self.table_client(table).query();
        if let Some(filter) = &spec.filter {
            builder = builder.filter(filter.to_odata());
        }
        if let Some(select) = select {
            builder = builder.select(select);
        }
        if let Some(top) = spec.top {
            builder = builder.top(u32::from(top));
        }
        if let Some(c) = &spec.continuation {
            builder = builder.initial_partition_key(c.next_partition_key.clone());
            if let Some(rk) = &c.next_row_key {
                builder = builder.initial_row_key(rk.clone());
            }
        }
        let mut pages = builder.into_stream::<wire::ParsedEntity>();
        let mut page = self
            .attempt(async move {
                match pages.next().await {
                    Some(page) => page,
                    None => Err(azure_core::Error::message(
                        azure_core::error::ErrorKind::Other,
                        "the query reply held no page",
                    )),
                }
            })
            .await?;
        let entities = std::mem::take(&mut page.entities)
            .into_iter()
            .map(|json| stored_from_json(table, json, None))
            .collect::<Result<Vec<_>>>()?;
        let continuation = page.continuation().map(|(pk, rk)| Continuation {
            next_partition_key: pk,
            next_row_key: rk,
        });
        Ok(QueryPage {
            entities,
            continuation,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entity::Value;

    fn table() -> TableName {
        TableName::new("Things").unwrap()
    }

    #[test]
    fn quotes_are_doubled_in_entity_urls() {
        let base = Url::parse("http://127.0.0.1:10002/devstoreaccount1").unwrap();
        let url = entity_url(
            &base,
            &table(),
            &PartitionKey::new("o'brien").unwrap(),
            &RowKey::new("a b%").unwrap(),
        )
        .unwrap();
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:10002/devstoreaccount1/Things(PartitionKey='o''brien',RowKey='a%20b%25')"
        );
        assert_eq!(
            table_url(&base, &table()).unwrap().as_str(),
            "http://127.0.0.1:10002/devstoreaccount1/Things"
        );
    }

    #[test]
    fn versions_come_from_etags() {
        let v = version_from_etag(&table(), "W/\"datetime'2026-11-21T04%3A46%3A16.9123456Z'\"")
            .unwrap();
        assert_eq!(
            datetime::format(v.timestamp),
            "2026-11-21T04:46:16.9123456Z"
        );
        let e = version_from_etag(&table(), "\"0x8D\"").unwrap_err();
        assert!(matches!(e, Error::Decode { .. }), "{e}");
    }

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
