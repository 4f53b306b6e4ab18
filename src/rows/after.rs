//! After-images: the row a commit leaves, carried by each row it marks in
//! [`AFTER`] as wire-form JSON text (`null` for a delete), or, where that
//! does not fit beside the row, as a reference `@<n>/<m>` to `m`
//! *after-image rows* (`_lhCommit.<id>.a<n>.<i>`) holding the text in
//! binary properties of 64 KiB.

use crate::backend::wire;
use crate::backend::{Precondition, StoredEntity, TableBackend, TableOp};
use crate::entity::{EntityData, Properties, Value, validate_entity};
use crate::error::{Error, Result};
use crate::key::{RowKey, TableName};

use super::decision::ROW_PREFIX;

/// The reserved property holding a marked row's after-image (or the
/// reference to its after-image rows).
pub(crate) const AFTER: &str = "_lhNew";

/// Bytes of after-image text per binary property of an after-image row.
const CHUNK: usize = 64 * 1024;

/// Binary properties per after-image row: 15 of 64 KiB stay under the
/// service's 1 MiB per entity with the keys and names.
const CHUNKS_PER_ROW: usize = 15;

/// The after-image text of `op`, the whole-row replace or delete a commit
/// applies.
pub(crate) fn text(op: &TableOp) -> String {
    match op.data() {
        // The row's properties in the wire form, without its keys.
        Some(data) if !matches!(op, TableOp::Delete { .. }) => {
            let mut json = wire::EntityBody::of(data).to_map();
            json.remove("PartitionKey");
            json.remove("RowKey");
            serde_json::Value::Object(json).to_string()
        }
        _ => "null".to_owned(),
    }
}

/// The row key of after-image row `i` of marked row `n` of transaction
/// `txn`.
fn row_key(txn: &str, n: usize, i: usize) -> Result<RowKey> {
    RowKey::new(format!("{ROW_PREFIX}{}.a{n}.{i}", super::decision::id(txn)))
}

/// Puts the after-image `text` on `data`, a row being marked: inline where
/// it fits, else as a reference to after-image rows, whose inserts are
/// returned (`n`: the marked row's number in its commit).
///
/// # Errors
/// [`Error::Invalid`] when the row cannot even take a reference.
pub(crate) fn attach(
    table: &TableName,
    txn: &str,
    n: usize,
    data: &mut EntityData,
    text: String,
) -> Result<Vec<TableOp>> {
    let fits = |props: &Properties| {
        validate_entity(table.as_str(), &data.partition_key, &data.row_key, props)
    };
    let mut inline = data.properties.clone();
    inline.insert_static(AFTER, Value::String(text.clone()));
    if fits(&inline).is_ok() {
        data.properties = inline;
        return Ok(Vec::new());
    }
    let bytes = text.into_bytes();
    let chunks: Vec<&[u8]> = bytes.chunks(CHUNK).collect();
    let rows: Vec<&[&[u8]]> = chunks.chunks(CHUNKS_PER_ROW).collect();
    data.properties
        .insert_static(AFTER, Value::String(format!("@{n}/{}", rows.len().max(1))));
    fits(&data.properties).map_err(|e| {
        Error::invalid(
            format!(
                "row {:?} of partition {:?} in `{table}`",
                data.row_key.as_str(),
                data.partition_key.as_str()
            ),
            format!("cannot take a commit's mark beside what it holds: {e}"),
        )
    })?;
    let mut inserts = Vec::with_capacity(rows.len().max(1));
    for (i, row) in rows.iter().enumerate() {
        let mut properties = Properties::new();
        for (j, chunk) in row.iter().enumerate() {
            properties.insert(format!("d{j}"), Value::Binary(chunk.to_vec()));
        }
        let row = super::row(&data.partition_key, &row_key(txn, n, i)?, properties);
        inserts.push(TableOp::Insert(row));
    }
    Ok(inserts)
}

/// The after-image rows `marked` refers to, as deletes of any version.
pub(crate) fn rows_of(marked: &StoredEntity, txn: &str) -> Result<Vec<TableOp>> {
    let Some((n, m)) = reference(&marked.data.properties) else {
        return Ok(Vec::new());
    };
    (0..m)
        .map(|i| {
            let (pk, if_exists) = (&marked.data.partition_key, Precondition::IfExists);
            Ok(super::delete(pk, &row_key(txn, n, i)?, if_exists))
        })
        .collect()
}

/// The reference `@<n>/<m>` a row's [`AFTER`] holds, if it holds one.
fn reference(properties: &Properties) -> Option<(usize, usize)> {
    let Some(Value::String(text)) = properties.get(AFTER) else {
        return None;
    };
    let (n, m) = text.strip_prefix('@')?.split_once('/')?;
    Some((n.parse().ok()?, m.parse().ok()?))
}

/// The write finishing committed transaction `txn`'s marked `row`: the
/// row its commit leaves, at the row's ETag.
///
/// # Errors
/// [`Error::Inconsistent`] when the after-image is missing or does not
/// parse; backend errors.
pub(crate) async fn write_of(
    backend: &dyn TableBackend,
    table: &TableName,
    row: &StoredEntity,
    txn: &str,
) -> Result<TableOp> {
    let bad = |why: String| Error::Inconsistent {
        what: format!(
            "row {:?} of partition {:?} is marked by a committed transaction but its after-image {why}",
            row.data.row_key.as_str(),
            row.data.partition_key.as_str()
        ),
    };
    let text = match (
        reference(&row.data.properties),
        row.data.properties.get(AFTER),
    ) {
        (Some((n, m)), _) => {
            let mut bytes = Vec::new();
            for i in 0..m {
                let key = row_key(txn, n, i)?;
                let Some(part) = backend.get(table, &row.data.partition_key, &key).await? else {
                    return Err(bad(format!("row {i} of {m} is missing")));
                };
                for j in 0.. {
                    match part.data.properties.get(&format!("d{j}")) {
                        Some(Value::Binary(b)) => bytes.extend_from_slice(b),
                        _ => break,
                    }
                }
            }
            String::from_utf8(bytes).map_err(|e| bad(format!("is not text: {e}")))?
        }
        (None, Some(Value::String(text))) => text.clone(),
        _ => return Err(bad("is missing".into())),
    };
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad(format!("does not parse: {e}")))?;
    let (pk, rk) = (&row.data.partition_key, &row.data.row_key);
    let at = Precondition::IfMatch(row.etag.clone());
    match json {
        serde_json::Value::Null => Ok(super::delete(pk, rk, at)),
        serde_json::Value::Object(mut json) => {
            json.insert("PartitionKey".into(), pk.as_str().into());
            json.insert("RowKey".into(), rk.as_str().into());
            let parsed = wire::entity_from_json(table.as_str(), &json)
                .map_err(|e| bad(format!("does not parse: {e}")))?;
            Ok(TableOp::Replace(super::row(pk, rk, parsed.properties), at))
        }
        _ => Err(bad("is neither a row nor null".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::memory::MemoryBackend;
    use crate::key::{ETag, PartitionKey};

    fn keys() -> (TableName, PartitionKey, RowKey) {
        (
            TableName::new("lhAccounts").unwrap(),
            PartitionKey::new("p").unwrap(),
            RowKey::new("r").unwrap(),
        )
    }

    #[tokio::test]
    async fn an_after_image_round_trips_inline_and_through_after_image_rows() {
        let (table, pk, rk) = keys();
        let backend = MemoryBackend::new();
        backend.create_table(&table).await.unwrap();
        let txn = format!("0f1e.{}", table.as_str());
        for size in [10, 200_000, 900_000] {
            let mut after = Properties::new();
            after.insert("n", Value::Int64(7));
            after.insert("b", Value::Binary(vec![7; size.min(60_000)]));
            for k in 0..size / 60_000 {
                after.insert(format!("c{k}"), Value::Binary(vec![k as u8; 60_000]));
            }
            let replace = TableOp::Replace(
                EntityData {
                    partition_key: pk.clone(),
                    row_key: rk.clone(),
                    properties: after.clone(),
                },
                Precondition::Upsert,
            );
            // The row as read, which the mark goes on.
            let mut before = Properties::new();
            before.insert("n", Value::Int64(6));
            let mut marked = EntityData {
                partition_key: pk.clone(),
                row_key: rk.clone(),
                properties: before,
            };
            let inserts = attach(&table, &txn, 3, &mut marked, text(&replace)).unwrap();
            assert_eq!(inserts.is_empty(), size < 1000, "size {size}");
            // 900 000 bytes, base64 in the JSON text: over one row's 15
            // chunks of 64 KiB.
            assert_eq!(
                inserts.len(),
                [0, 1, 2][[10, 200_000, 900_000]
                    .iter()
                    .position(|&s| s == size)
                    .unwrap()]
            );
            for op in &inserts {
                crate::backend::validate_batch(table.as_str(), std::slice::from_ref(op)).unwrap();
                backend
                    .batch(&table, std::slice::from_ref(op))
                    .await
                    .unwrap();
            }
            let row = StoredEntity {
                data: marked,
                etag: ETag::new("W/\"2\""),
                timestamp: time::OffsetDateTime::UNIX_EPOCH,
            };
            let TableOp::Replace(written, Precondition::IfMatch(_)) =
                write_of(&backend, &table, &row, &txn).await.unwrap()
            else {
                panic!("a replace");
            };
            assert_eq!(written.properties, after, "size {size}");
            assert_eq!(rows_of(&row, &txn).unwrap().len(), inserts.len());
            for op in rows_of(&row, &txn).unwrap() {
                backend.batch(&table, &[op]).await.unwrap();
            }
        }
    }

    #[tokio::test]
    async fn a_delete_round_trips_and_a_bad_after_image_is_inconsistent() {
        let (table, pk, rk) = keys();
        let backend = MemoryBackend::new();
        let delete = TableOp::Delete {
            partition_key: pk.clone(),
            row_key: rk.clone(),
            condition: Precondition::IfExists,
        };
        let mut data = EntityData {
            partition_key: pk,
            row_key: rk,
            properties: Properties::new(),
        };
        attach(&table, "t.x", 0, &mut data, text(&delete)).unwrap();
        let mut row = StoredEntity {
            data,
            etag: ETag::new("W/\"2\""),
            timestamp: time::OffsetDateTime::UNIX_EPOCH,
        };
        assert!(matches!(
            write_of(&backend, &table, &row, "t.x").await.unwrap(),
            TableOp::Delete {
                condition: Precondition::IfMatch(_),
                ..
            }
        ));
        row.data
            .properties
            .insert(AFTER, Value::String("[1]".into()));
        let e = write_of(&backend, &table, &row, "t.x").await.unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Inconsistent);
    }
}
