//! Requests to the Table service and what its replies say, for one entity:
//! URLs (with keys quoted as the 0.21 clients do not), request bodies and
//! conditions, ETags and entities read back, and how errors name a row.

use azure_core::Url;
use azure_data_tables::IfMatchCondition;
use azure_data_tables::clients::{EntityClient, TableClient};
use serde_json::value::RawValue;

use super::AzureBackend;
use crate::backend::wire;
use crate::backend::{Precondition, StoredEntity, TableOp, Version};
use crate::entity::{EntityData, Properties, datetime, validate_entity};
use crate::error::{Error, Result};
use crate::key::{ETag, PartitionKey, RowKey, TableName, shorten};

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
pub(super) fn stored_from_json(
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
pub(super) fn stored_form(d: &EntityData) -> Properties {
    let json = wire::entity_to_json(d.partition_key.as_str(), d.row_key.as_str(), &d.properties);
    match wire::entity_from_json("", &json) {
        Ok(w) => w.properties,
        Err(_) => d.properties.clone(),
    }
}

/// The body of a single-entity write: the entity's JSON with non-ASCII
/// characters escaped (see `wire::EntityBody::to_ascii_text`: Azurite
/// mangles a multi-byte character split between two chunks of a body it
/// reads as it arrives), handed to the client as raw JSON so it is sent as
/// written.
pub(super) fn entity_body(d: &EntityData) -> Result<Box<RawValue>> {
    let text = wire::EntityBody::new(d.partition_key.as_str(), d.row_key.as_str(), &d.properties)
        .to_ascii_text()?;
    RawValue::from_string(text).map_err(|e| {
        Error::invalid(
            format!(
                "entity ({:?}, {:?})",
                d.partition_key.as_str(),
                d.row_key.as_str()
            ),
            format!("cannot write its JSON: {e}"),
        )
    })
}

pub(super) fn if_match(c: &Precondition) -> Option<IfMatchCondition> {
    match c {
        Precondition::IfMatch(etag) => Some(IfMatchCondition::Etag(etag.as_str().into())),
        Precondition::IfExists => Some(IfMatchCondition::Any),
        Precondition::Upsert => None,
    }
}

pub(super) fn entity_what(table: &TableName, pk: &PartitionKey, rk: &RowKey) -> String {
    format!(
        "entity ({}, {}) in table `{table}`",
        shorten(pk.as_str()),
        shorten(rk.as_str())
    )
}

pub(super) fn op_what(table: &TableName, op: &TableOp) -> String {
    format!(
        "{} of {}",
        op.name(),
        entity_what(table, op.partition_key(), op.row_key())
    )
}

pub(super) fn validate_op(table: &TableName, op: &TableOp) -> Result<()> {
    if let Some(d) = op.data() {
        validate_entity(table.as_str(), &d.partition_key, &d.row_key, &d.properties)?;
    }
    Ok(())
}

impl AzureBackend {
    pub(super) fn table_client(&self, table: &TableName) -> TableClient {
        self.inner.tables.table_client(table.as_str())
    }

    pub(super) fn entity_client(
        &self,
        table: &TableName,
        pk: &PartitionKey,
        rk: &RowKey,
    ) -> EntityClient {
        self.table_client(table)
            .partition_key_client(quote_key(pk.as_str()))
            .entity_client(quote_key(rk.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
