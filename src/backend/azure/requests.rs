//! Requests to the Table service and what its replies say.

use azure_core::Bytes;
use azure_core::http::{Method, Request, Url};

use super::errors::{Failure, undecodable};
use crate::backend::wire;
use crate::backend::{Precondition, StoredEntity, TableOp, Version};
use crate::entity::{EntityData, Properties, datetime};
use crate::error::{Error, Result};
use crate::key::{ETag, PartitionKey, RowKey, TableName};

/// `{base}/{segment}`, the segment percent-encoded.
pub(super) fn url_with(base: &Url, segment: &str) -> Result<Url> {
    let mut url = base.clone();
    url.path_segments_mut()
        .map_err(|()| Error::invalid("table endpoint", "cannot carry a path"))?
        .push(segment);
    Ok(url)
}

pub(super) fn write_url(base: &Url, table: &TableName, op: &TableOp) -> Result<Url> {
    match op {
        TableOp::Insert(_) => url_with(base, table.as_str()),
        _ => entity_url(base, table, op.partition_key(), op.row_key()),
    }
}

/// `{base}/{table}(PartitionKey='..',RowKey='..')`, `'` doubled in keys
/// (OData literals).
pub(super) fn entity_url(
    base: &Url,
    table: &TableName,
    pk: &PartitionKey,
    rk: &RowKey,
) -> Result<Url> {
    let (pk, rk) = (
        pk.as_str().replace('\'', "''"),
        rk.as_str().replace('\'', "''"),
    );
    url_with(base, &format!("{table}(PartitionKey='{pk}',RowKey='{rk}')"))
}

/// The version a write's ETag reports, which embeds the new Timestamp:
/// `W/"datetime'2024-01-02T03%3A04%3A05.1234567Z'"`.
pub(super) fn version_from_etag(table: &TableName, etag: Option<&str>) -> Result<Version> {
    let bad = || {
        Error::decode(
            table.as_str(),
            "ETag",
            "W/\"datetime'…'\"",
            etag.unwrap_or("absent"),
        )
    };
    let etag = etag.ok_or_else(bad)?;
    let inner = etag
        .strip_prefix("W/\"datetime'")
        .and_then(|s| s.strip_suffix("'\""))
        .ok_or_else(bad)?;
    let timestamp = datetime::parse(
        &percent_encoding::percent_decode_str(inner)
            .decode_utf8()
            .map_err(|_| bad())?,
    )
    .map_err(|_| bad())?;
    Ok(Version {
        etag: ETag::new(etag),
        timestamp,
    })
}

/// An entity read from the wire, its ETag from the header or `odata.etag`.
pub(super) fn stored_from_wire(
    table: &TableName,
    w: wire::WireEntity,
    etag: Option<String>,
) -> Result<StoredEntity> {
    let decode = |property, expected| Error::decode(table.as_str(), property, expected, "absent");
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

/// Reads a reply body with the one-pass reader of `wire::direct`, else
/// with the general decoder, which reports every error.
pub(super) fn read_reply<P: serde::de::DeserializeOwned, T>(
    body: &[u8],
    direct: fn(&[u8]) -> Option<T>,
    general: impl FnOnce(P) -> Result<T>,
    what: impl FnOnce() -> String,
) -> std::result::Result<T, Failure> {
    if let Some(read) = direct(body) {
        return Ok(read);
    }
    let parsed = serde_json::from_slice(body).map_err(|e| undecodable(what(), &e))?;
    Ok(general(parsed)?)
}

/// The properties as the service will store them (date-times cut to 100 ns
/// and so on).
pub(super) fn stored_form(d: &EntityData) -> Properties {
    let json = wire::EntityBody::of(d).to_map();
    match wire::entity_from_json("", &json) {
        Ok(w) => w.properties,
        Err(_) => d.properties.clone(),
    }
}

/// Every annotation, so that types and ETags come back with each entity.
const FULL_METADATA: &str = "application/json;odata=fullmetadata";
const JSON: &str = "application/json";

/// The `If-Match` a condition sends.
pub(super) fn if_match(c: &Precondition) -> Option<&str> {
    match c {
        Precondition::IfMatch(etag) => Some(etag.as_str()),
        Precondition::IfExists => Some("*"),
        Precondition::Upsert => None,
    }
}

pub(super) fn create_table(base: &Url, table: &TableName) -> Result<Request> {
    let mut request = Request::new(url_with(base, "Tables")?, Method::Post);
    request.insert_header("accept", FULL_METADATA);
    request.insert_header("content-type", JSON);
    request.insert_header("prefer", "return-content");
    let body = serde_json::json!({ "TableName": table.as_str() }).to_string();
    request.set_body(Bytes::from(body));
    Ok(request)
}

pub(super) fn delete_table(base: &Url, table: &TableName) -> Result<Request> {
    let url = url_with(base, &format!("Tables('{table}')"))?;
    let mut request = Request::new(url, Method::Delete);
    request.insert_header("accept", FULL_METADATA);
    Ok(request)
}

pub(super) fn list_tables(base: &Url, next: Option<&str>) -> Result<Request> {
    let mut url = url_with(base, "Tables")?;
    if let Some(next) = next {
        url.query_pairs_mut().append_pair("NextTableName", next);
    }
    let mut request = Request::new(url, Method::Get);
    request.insert_header("accept", "application/json;odata=nometadata");
    Ok(request)
}

pub(super) fn get(
    base: &Url,
    table: &TableName,
    pk: &PartitionKey,
    rk: &RowKey,
) -> Result<Request> {
    let mut request = Request::new(entity_url(base, table, pk, rk)?, Method::Get);
    request.insert_header("accept", FULL_METADATA);
    Ok(request)
}

/// The request of one single-entity write (a merge is a `PATCH`).
pub(super) fn write(base: &Url, table: &TableName, op: &TableOp) -> Result<Request> {
    let method = match op {
        TableOp::Insert(_) => Method::Post,
        TableOp::Replace(..) => Method::Put,
        TableOp::Merge(..) => Method::Patch,
        TableOp::Delete { .. } => Method::Delete,
    };
    let mut request = Request::new(write_url(base, table, op)?, method);
    let condition = match op {
        TableOp::Insert(_) => {
            request.insert_header("accept", FULL_METADATA);
            request.insert_header("prefer", "return-no-content");
            None
        }
        TableOp::Replace(_, c) | TableOp::Merge(_, c) | TableOp::Delete { condition: c, .. } => {
            if_match(c)
        }
    };
    if let Some(etag) = condition {
        request.insert_header("if-match", etag.to_owned());
    }
    if let Some(d) = op.data() {
        request.insert_header("content-type", JSON);
        // Non-ASCII escaped: see `EntityBody::to_ascii_text`.
        request.set_body(Bytes::from(wire::EntityBody::of(d).to_ascii_text()?));
    }
    Ok(request)
}

pub(super) fn op_what(table: &TableName, op: &TableOp) -> String {
    crate::error::what::entity(op.name(), table.as_str(), op.partition_key(), op.row_key())
}

#[cfg(test)]
mod tests {
    use super::*;
    use azure_core::http::headers::HeaderName;

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
            url_with(&base, table().as_str()).unwrap().as_str(),
            "http://127.0.0.1:10002/devstoreaccount1/Things"
        );
    }

    fn op_request(op: &TableOp) -> (Method, String, Option<String>, bool) {
        let base = Url::parse("http://127.0.0.1:10002/devstoreaccount1").unwrap();
        let r = write(&base, &table(), op).unwrap();
        let if_match = r
            .headers()
            .get_optional_str(&HeaderName::from_static("if-match"))
            .map(str::to_owned);
        (
            r.method(),
            r.url().path().to_owned(),
            if_match,
            r.body().len().unwrap_or(0) > 0,
        )
    }

    /// Each write is one request with the method, URL and condition of
    /// the Tables REST API.
    #[test]
    fn each_write_has_its_method_url_and_condition() {
        let d = EntityData {
            partition_key: PartitionKey::new("p").unwrap(),
            row_key: RowKey::new("r").unwrap(),
            properties: Properties::new(),
        };
        let row = "/devstoreaccount1/Things(PartitionKey='p',RowKey='r')";
        let etag = ETag::new("W/\"x\"");
        let cases = [
            (
                TableOp::Insert(d.clone()),
                Method::Post,
                "/devstoreaccount1/Things",
                None,
            ),
            (
                TableOp::Replace(d.clone(), Precondition::IfMatch(etag.clone())),
                Method::Put,
                row,
                Some("W/\"x\""),
            ),
            (
                TableOp::Replace(d.clone(), Precondition::Upsert),
                Method::Put,
                row,
                None,
            ),
            (
                TableOp::Merge(d.clone(), Precondition::IfExists),
                Method::Patch,
                row,
                Some("*"),
            ),
            (
                TableOp::Merge(d.clone(), Precondition::Upsert),
                Method::Patch,
                row,
                None,
            ),
        ];
        for (op, method, path, condition) in cases {
            let got = op_request(&op);
            assert_eq!(
                got,
                (method, path.to_owned(), condition.map(str::to_owned), true),
                "{}",
                op.name()
            );
        }
        let delete = |condition| TableOp::Delete {
            partition_key: d.partition_key.clone(),
            row_key: d.row_key.clone(),
            condition,
        };
        assert_eq!(
            op_request(&delete(Precondition::IfExists)),
            (Method::Delete, row.to_owned(), Some("*".to_owned()), false)
        );
        assert_eq!(
            op_request(&delete(Precondition::IfMatch(etag))),
            (
                Method::Delete,
                row.to_owned(),
                Some("W/\"x\"".to_owned()),
                false
            )
        );
        let base = Url::parse("http://127.0.0.1:10002/devstoreaccount1").unwrap();
        let r = create_table(&base, &table()).unwrap();
        assert_eq!(
            (r.method(), r.url().path()),
            (Method::Post, "/devstoreaccount1/Tables")
        );
        let r = get(&base, &table(), &d.partition_key, &d.row_key).unwrap();
        assert_eq!((r.method(), r.url().path()), (Method::Get, row));
    }

    #[test]
    fn versions_come_from_etags() {
        let v = version_from_etag(
            &table(),
            Some("W/\"datetime'2026-11-21T04%3A46%3A16.9123456Z'\""),
        )
        .unwrap();
        assert_eq!(
            datetime::format(v.timestamp),
            "2026-11-21T04:46:16.9123456Z"
        );
        let e = version_from_etag(&table(), Some("\"0x8D\"")).unwrap_err();
        assert!(matches!(e, Error::Decode { .. }), "{e}");
    }
}
