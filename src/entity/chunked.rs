//! `#[entity(chunked)]`: a `String`, `Vec<u8>` or `json` field over the
//! 64 KiB property limit, stored across numbered properties (the layout
//! Orleans' Azure table storage uses), up to the 1 MiB entity limit.
//!
//! The layout of a chunked field stored as `body`:
//!
//! * `body`: the first chunk, an `Edm.String` (for `String` and `json`
//!   fields) or `Edm.Binary` (for `Vec<u8>`);
//! * `body_1`, `body_2`, ...: the following chunks, of the same type;
//! * `body_count`: the number of chunks, an `Edm.Int32` (1 for a value that
//!   fits one property), written with every value.
//!
//! A string chunk holds at most 32 768 UTF-16 units (64 KiB), split between
//! characters; a binary chunk 65 536 bytes. An absent value (`None`, or JSON
//! `null`) stores none of these. A read joins chunks `0..count` in order; a
//! row with `body` and no `body_count` (written before the field was
//! chunked) reads as one chunk.
//!
//! A value that shrinks: a replace stores exactly the new chunks (every
//! `body_<n>` belongs to the field, none is kept as unknown); a merge cannot
//! remove properties, so old chunks past the new `body_count` stay, ignored
//! by reads, until the next replace. A projection returns a chunked field
//! only when it names every chunk and the count.

use super::data::EntityData;
use super::properties::Properties;
use super::value::Value;
use crate::error::{Error, Result};

/// The bytes one chunk holds, the service's limit on one property.
const CHUNK_BYTES: usize = 64 * 1024;

/// The field types `#[entity(chunked)]` applies to (besides `json` fields).
#[diagnostic::on_unimplemented(
    message = "`#[entity(chunked)]` does not apply to `{Self}`",
    label = "not a chunkable field type",
    note = "chunked fields are `String`, `Vec<u8>` (or `Option` of these), or `#[entity(json, chunked)]` fields of any serde type"
)]
pub trait ChunkedField {}
impl ChunkedField for String {}
impl ChunkedField for Vec<u8> {}
impl ChunkedField for Option<String> {}
impl ChunkedField for Option<Vec<u8>> {}

/// Checks, at the field's type, that it can be chunked.
pub fn chunked_field<T: ChunkedField>() {}

/// Whether `property` is a property of one of the chunked fields stored as
/// `fields`: its count, or a numbered chunk (even past the count).
pub fn is_chunk_of(property: &str, fields: &[&str]) -> bool {
    fields.iter().any(|field| {
        property
            .strip_prefix(field)
            .and_then(|rest| rest.strip_prefix('_'))
            .is_some_and(|rest| {
                rest == "count" || (!rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
            })
    })
}

/// Splits a whole value into chunks of at most 64 KiB each.
fn split(value: Value) -> Vec<Value> {
    match value {
        Value::String(s) => {
            let mut chunks = Vec::new();
            let mut current = String::new();
            let mut units = 0;
            for c in s.chars() {
                let n = c.len_utf16();
                if 2 * (units + n) > CHUNK_BYTES {
                    chunks.push(Value::String(std::mem::take(&mut current)));
                    units = 0;
                }
                current.push(c);
                units += n;
            }
            chunks.push(Value::String(current));
            chunks
        }
        Value::Binary(b) if b.len() > CHUNK_BYTES => b
            .chunks(CHUNK_BYTES)
            .map(|c| Value::Binary(c.to_vec()))
            .collect(),
        other => vec![other],
    }
}

/// Stores a chunked field's whole value (`None`: absent) as its chunks and
/// count.
///
/// # Errors
/// [`Error::Invalid`] naming the field and the limit when the value alone
/// is over the 1 MiB entity limit.
pub fn put_chunked(
    props: &mut Properties,
    table: &str,
    name: &'static str,
    value: Option<Value>,
) -> Result<()> {
    let Some(value) = value else {
        return Ok(());
    };
    let size = value.stored_size();
    if size > EntityData::MAX_BYTES {
        return Err(Error::invalid(
            format!("chunked field `{name}` of table `{table}`"),
            format!(
                "the value is {size} bytes as stored; a chunked value is stored across properties of 64 KiB, up to the entity limit of {} bytes (1 MiB) for all properties and keys together",
                EntityData::MAX_BYTES
            ),
        ));
    }
    let chunks = split(value);
    let count = chunks.len();
    for (i, chunk) in chunks.into_iter().enumerate() {
        if i == 0 {
            props.insert_static(name, chunk);
        } else {
            props.insert(format!("{name}_{i}"), chunk);
        }
    }
    // At most 1 MiB in chunks of 32 768 units or more: a small count.
    props.insert(
        format!("{name}_count"),
        Value::Int32(i32::try_from(count).unwrap_or(i32::MAX)),
    );
    Ok(())
}

/// Takes a chunked field's chunks out of the bag and joins them into the
/// whole value (`None`: absent).
///
/// # Errors
/// [`Error::Decode`] naming the property when the count is not a positive
/// `Edm.Int32`, a chunk is missing, or the chunks are of different types.
pub fn take_chunked(
    props: &mut Properties,
    table: &str,
    name: &'static str,
) -> Result<Option<Value>> {
    let count_property = format!("{name}_count");
    let count = match props.remove(&count_property) {
        None if props.get(name).is_none() => return Ok(None),
        None => 1,
        Some(Value::Int32(n)) if n >= 1 => n,
        Some(other) => {
            return Err(Error::decode(
                table,
                count_property,
                "the chunk count, a positive Edm.Int32",
                super::codec::describe(&other),
            ));
        }
    };
    let mut whole = props
        .remove(name)
        .ok_or_else(|| Error::decode(table, name, format!("chunk 0 of {count}"), "absent"))?;
    for i in 1..count {
        let chunk_name = format!("{name}_{i}");
        let chunk = props.remove(&chunk_name);
        match (&mut whole, chunk) {
            (Value::String(w), Some(Value::String(c))) => w.push_str(&c),
            (Value::Binary(w), Some(Value::Binary(c))) => w.extend_from_slice(&c),
            (w, chunk) => {
                let found = chunk
                    .as_ref()
                    .map_or_else(|| "absent".to_owned(), super::codec::describe);
                return Err(Error::decode(
                    table,
                    chunk_name,
                    format!("chunk {i} of {count}, an {}", w.edm_type().odata_name()),
                    found,
                ));
            }
        }
    }
    // Chunks past the count (left by a merge of a shorter value) are not
    // part of the value.
    props.retain(|k| !is_chunk_of(k, &[name]));
    Ok(Some(whole))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_split_at_64_kib_and_join_back() {
        let text: String = "é😀a".repeat(20_000); // 80 000 UTF-16 units
        let mut props = Properties::new();
        put_chunked(&mut props, "T", "body", Some(Value::String(text.clone()))).unwrap();
        assert_eq!(props.get("body_count"), Some(&Value::Int32(3)));
        for (k, v) in props.iter() {
            assert!(v.stored_size() <= CHUNK_BYTES + 4, "{k}");
        }
        assert_eq!(
            take_chunked(&mut props, "T", "body").unwrap(),
            Some(Value::String(text))
        );
        assert!(props.is_empty());

        let bytes: Vec<u8> = (0..=255).cycle().take(3 * CHUNK_BYTES + 1).collect();
        put_chunked(&mut props, "T", "b", Some(Value::Binary(bytes.clone()))).unwrap();
        assert_eq!(props.get("b_count"), Some(&Value::Int32(4)));
        assert_eq!(
            take_chunked(&mut props, "T", "b").unwrap(),
            Some(Value::Binary(bytes))
        );
    }

    #[test]
    fn limits_and_broken_layouts_are_named() {
        let mut props = Properties::new();
        let e = put_chunked(
            &mut props,
            "T",
            "body",
            Some(Value::Binary(vec![0; 1 << 20])),
        )
        .unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("`body`") && text.contains("1048576"),
            "{text}"
        );

        props.insert("body", Value::String("a".into()));
        props.insert("body_count", Value::Int32(2));
        let e = take_chunked(&mut props, "T", "body").unwrap_err();
        assert!(e.to_string().contains("body_1"), "{e}");

        // Written before the field was chunked: one chunk.
        let mut props = Properties::new();
        props.insert("body", Value::String("a".into()));
        props.insert("body_7", Value::String("stale".into()));
        assert_eq!(
            take_chunked(&mut props, "T", "body").unwrap(),
            Some(Value::String("a".into()))
        );
        assert!(props.is_empty());
        assert_eq!(take_chunked(&mut props, "T", "body").unwrap(), None);
    }

    #[test]
    fn chunk_names_belong_to_their_field() {
        assert!(is_chunk_of("body_count", &["body"]));
        assert!(is_chunk_of("body_12", &["x", "body"]));
        assert!(!is_chunk_of("body", &["body"]));
        assert!(!is_chunk_of("body_", &["body"]));
        assert!(!is_chunk_of("body_x", &["body"]));
        assert!(!is_chunk_of("bodyx_1", &["body"]));
    }
}
