//! Writing an entity's JSON body: [`EntityBody`], the one encoder.
//!
//! The body is the JSON object a `serde_json::Map` of the keys and
//! properties would be (keys in that map's order, a later entry of the same
//! name replacing an earlier one), written without building the map
//! whenever the names allow it (all but unusual ones: see
//! `streams_in_map_order`).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::ser::{Error as _, SerializeMap};
use serde_json::{Map, Value as Json};
use uuid::Uuid;

use crate::datetime;
use crate::entity::{Properties, Value};
use crate::error::{Error, Result};

/// What follows a property's name in the key of its type annotation.
pub(super) const ANNOTATION: &str = "@odata.type";

/// An entity's request body: `PartitionKey`, `RowKey` and every property,
/// those the service cannot infer (Int64, Double, DateTime, Guid, Binary)
/// followed by their `name@odata.type` annotation.
///
/// It serializes as the body (pass it to anything that takes `Serialize`,
/// such as the SDK's request builders); [`EntityBody::to_text`] and
/// [`EntityBody::to_map`] give the text and the JSON object.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EntityBody<'a> {
    partition_key: &'a str,
    row_key: &'a str,
    properties: &'a Properties,
}

impl<'a> EntityBody<'a> {
    /// The body for an entity with these keys and properties.
    pub(crate) fn new(
        partition_key: &'a str,
        row_key: &'a str,
        properties: &'a Properties,
    ) -> Self {
        EntityBody {
            partition_key,
            row_key,
            properties,
        }
    }

    /// The body text.
    ///
    /// # Errors
    /// [`Error::Invalid`] if serialization fails (it does not for any bag).
    pub(crate) fn to_text(self) -> Result<String> {
        let fail = |e: &dyn std::fmt::Display| {
            Error::invalid(
                format!("entity ({:?}, {:?})", self.partition_key, self.row_key),
                format!("cannot write its JSON: {e}"),
            )
        };
        let mut out = Vec::with_capacity(self.estimated_len());
        serde_json::to_writer(&mut out, &self).map_err(|e| fail(&e))?;
        String::from_utf8(out).map_err(|e| fail(&e))
    }

    /// The body as a JSON object.
    pub(crate) fn to_map(self) -> Map<String, Json> {
        // Serializing into a `Value` only fails for map keys that are not
        // strings, and every key here is one.
        match serde_json::to_value(InOrder(&self)) {
            Ok(Json::Object(map)) => map,
            _ => Map::new(),
        }
    }

    /// About the length of the body text (more when strings need escapes),
    /// to size the buffer once.
    fn estimated_len(&self) -> usize {
        let value_len = |v: &Value| match v {
            Value::String(s) => s.len() + 2,
            Value::Binary(b) => b.len().div_ceil(3) * 4 + 2,
            _ => 40,
        };
        let props: usize = self
            .properties
            .iter()
            .map(|(name, v)| 2 * name.len() + 4 + value_len(v) + 28)
            .sum();
        40 + self.partition_key.len() + self.row_key.len() + props
    }

    /// Whether writing keys in the order "keys and properties merged by name,
    /// each annotation right after its property" is the order of a
    /// `serde_json::Map` (sorted by whole key) with no key written twice.
    /// False only for unusual names (a name that is a key name, holds `@`,
    /// or continues another annotated name with a character below `@`).
    fn streams_in_map_order(&self) -> bool {
        let fixed = ["PartitionKey", "RowKey"];
        let mut f = 0;
        let mut props = self.properties.iter().peekable();
        while let Some((name, value)) = props.next() {
            if name.contains('@') || fixed.contains(&name) {
                return false;
            }
            while f < fixed.len() && fixed[f] < name {
                f += 1;
            }
            if needs_annotation(value) {
                let next_prop = props.peek().map(|(n, _)| *n);
                let next_fixed = fixed.get(f).copied();
                for next in [next_prop, next_fixed].into_iter().flatten() {
                    if !after_annotation(next, name) {
                        return false;
                    }
                }
            }
        }
        true
    }

    /// Writes the entries: the keys first (`merged`: each where it sorts
    /// among the property names instead), then every property, each
    /// followed by its annotation when it needs one.
    fn write_entries<M: SerializeMap>(&self, map: &mut M, merged: bool) -> Result<(), M::Error> {
        let fixed = [
            ("PartitionKey", self.partition_key),
            ("RowKey", self.row_key),
        ];
        let mut f = 0;
        if !merged {
            for (key, value) in &fixed {
                map.serialize_entry(key, value)?;
            }
            f = fixed.len();
        }
        let mut key_buf = [0u8; 128];
        for (name, value) in self.properties.iter() {
            while f < fixed.len() && fixed[f].0 < name {
                map.serialize_entry(fixed[f].0, fixed[f].1)?;
                f += 1;
            }
            map.serialize_key(name)?;
            map.serialize_value(&ValueText(value))?;
            if needs_annotation(value) {
                let annotation = value.edm_type().odata_name();
                let total = name.len() + ANNOTATION.len();
                match key_buf.get_mut(..total) {
                    Some(buf) => {
                        buf[..name.len()].copy_from_slice(name.as_bytes());
                        buf[name.len()..].copy_from_slice(ANNOTATION.as_bytes());
                        let key = std::str::from_utf8(buf).map_err(M::Error::custom)?;
                        map.serialize_entry(key, annotation)?;
                    }
                    None => map.serialize_entry(&format!("{name}{ANNOTATION}"), annotation)?,
                }
            }
        }
        for (key, value) in &fixed[f..] {
            map.serialize_entry(key, value)?;
        }
        Ok(())
    }
}

/// Whether a value is written with an `@odata.type` annotation.
fn needs_annotation(value: &Value) -> bool {
    !matches!(
        value,
        Value::String(_) | Value::Boolean(_) | Value::Int32(_)
    )
}

/// Whether `next` (a key greater than `name`) sorts after `name@odata.type`.
fn after_annotation(next: &str, name: &str) -> bool {
    match next.strip_prefix(name) {
        Some(rest) => rest > ANNOTATION,
        None => true,
    }
}

impl serde::Serialize for EntityBody<'_> {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        if !self.streams_in_map_order() {
            // Unusual names: build the map the entries make, and write it.
            let map = serde_json::to_value(InOrder(self)).map_err(S::Error::custom)?;
            return map.serialize(serializer);
        }
        let mut map = serializer.serialize_map(None)?;
        self.write_entries(&mut map, true)?;
        map.end()
    }
}

/// The entries of a body in the order they are put in the map (keys first),
/// later ones replacing earlier ones of the same name: what a map built from
/// them holds.
struct InOrder<'a, 'b>(&'b EntityBody<'a>);

impl serde::Serialize for InOrder<'_, '_> {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        self.0.write_entries(&mut map, false)?;
        map.end()
    }
}

/// A property value as it is written (without its annotation): Int64 as a
/// decimal string (JSON numbers lose precision past 2^53), doubles JSON
/// cannot spell as `"NaN"`, `"Infinity"`, `"-Infinity"`, date-times as the
/// service writes them, Guids lowercase and hyphenated, Binary as base64.
struct ValueText<'a>(&'a Value);

impl serde::Serialize for ValueText<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self.0 {
            Value::String(v) => s.serialize_str(v),
            Value::Boolean(b) => s.serialize_bool(*b),
            Value::Int32(i) => s.serialize_i32(*i),
            Value::Int64(i) => {
                let mut buf = [0u8; 20];
                s.serialize_str(format_i64(*i, &mut buf).map_err(S::Error::custom)?)
            }
            Value::Double(d) if d.is_finite() => s.serialize_f64(*d),
            Value::Double(d) if d.is_nan() => s.serialize_str("NaN"),
            Value::Double(d) if *d > 0.0 => s.serialize_str("Infinity"),
            Value::Double(_) => s.serialize_str("-Infinity"),
            Value::DateTime(t) => {
                let mut buf = [0u8; 28];
                match datetime::format_into(*t, &mut buf) {
                    Some(text) => s.serialize_str(text),
                    None => s.serialize_str(&datetime::format(*t)),
                }
            }
            Value::Guid(g) => {
                s.serialize_str(g.hyphenated().encode_lower(&mut Uuid::encode_buffer()))
            }
            Value::Binary(b) => {
                let mut buf = [0u8; 344];
                match BASE64.encode_slice(b, &mut buf) {
                    Ok(n) => s.serialize_str(
                        std::str::from_utf8(buf.get(..n).unwrap_or_default())
                            .map_err(S::Error::custom)?,
                    ),
                    Err(_) => s.serialize_str(&BASE64.encode(b)),
                }
            }
        }
    }
}

/// `i` in decimal, as `i.to_string()` writes it, in `buf`.
fn format_i64(i: i64, buf: &mut [u8; 20]) -> std::result::Result<&str, std::str::Utf8Error> {
    let mut n = i.unsigned_abs();
    let mut at = buf.len();
    loop {
        at -= 1;
        // `n % 10` is a digit: the cast cannot truncate.
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if i < 0 {
        at -= 1;
        buf[at] = b'-';
    }
    std::str::from_utf8(&buf[at..])
}

/// The request body of an entity as a JSON object (see [`EntityBody`]).
pub(crate) fn entity_to_json(
    partition_key: &str,
    row_key: &str,
    props: &Properties,
) -> Map<String, Json> {
    EntityBody::new(partition_key, row_key, props).to_map()
}

/// The request body text of an entity (see [`EntityBody`]).
///
/// # Errors
/// [`Error::Invalid`] if serialization fails (it does not for any bag).
pub(crate) fn entity_to_json_string(
    partition_key: &str,
    row_key: &str,
    props: &Properties,
) -> Result<String> {
    EntityBody::new(partition_key, row_key, props).to_text()
}
