//! Reading an entity's JSON body: [`ParsedEntity`] and [`entity_from_parsed`],
//! the one decoder. It accepts what the service and other clients send: Int64
//! as a string or a number, doubles as numbers or `NaN`, `Infinity`,
//! `-Infinity`, values without an annotation typed as the service infers them;
//! `null` is an absent property.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Deserialize as _;
use serde_json::{Map, Value as Json};
use time::OffsetDateTime;
use uuid::Uuid;

use super::encode::ANNOTATION;
use crate::datetime;
use crate::entity::{EdmType, Properties, Value};
use crate::error::{Error, Result};

/// An entity as read from the wire.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WireEntity {
    pub(crate) partition_key: String,
    pub(crate) row_key: String,
    pub(crate) timestamp: Option<OffsetDateTime>,
    /// `odata.etag`, when the service sent it.
    pub(crate) etag: Option<String>,
    pub(crate) properties: Properties,
}

/// How a decode error shows the JSON found: long strings by their length.
pub(super) fn found_json(v: Option<&Json>) -> String {
    match v {
        None => "absent".into(),
        Some(Json::String(s)) if s.chars().count() > 40 => {
            format!("a {}-character string", s.chars().count())
        }
        Some(v) => v.to_string(),
    }
}

/// An entity body parsed from JSON but not yet checked, read straight into
/// property names and values (no `serde_json::Map`), a later value or
/// annotation of a name replacing an earlier one.
#[derive(Debug, Clone, Default)]
pub(crate) struct ParsedEntity {
    partition_key: Option<Json>,
    row_key: Option<Json>,
    etag: Option<String>,
    /// `Timestamp` and its annotation, kept apart from `entries`: the
    /// service sends it last, after names that sort after it, which would
    /// otherwise cost every reply a sort.
    timestamp: Slot,
    entries: Vec<Entry>,
    /// Annotations that are not a known type name, for errors.
    bad_annotations: Vec<Json>,
    /// Whether `entries` is strictly increasing by name (so every name occurs
    /// once, as in a `serde_json::Map`).
    sorted: bool,
}

/// Kept small (64 bytes): a body's entries fit one small allocation.
#[derive(Debug, Clone)]
struct Entry {
    name: String,
    value: Option<Json>,
    annotation: Ann,
}

/// The value and annotation of a name, the later of each winning.
#[derive(Debug, Clone, Default)]
struct Slot {
    value: Option<Json>,
    annotation: Ann,
}

#[derive(Debug, Clone, Copy, PartialEq, Default)]
enum Ann {
    #[default]
    Absent,
    Known(EdmType),
    /// Index into `ParsedEntity::bad_annotations`.
    Bad(u32),
}

/// An `@odata.type` annotation's value.
#[derive(Debug, Clone)]
pub(super) enum Annotation {
    Known(EdmType),
    /// Anything else (an unknown name or not a string), kept for the error.
    Other(Json),
}

/// What a key of the body is; `N` names a property.
pub(super) enum Key<N> {
    Partition,
    Row,
    Etag,
    Timestamp,
    TimestampAnnotation,
    /// A key that does not bear on the entity (kept only as JSON is).
    Ignored,
    Property(N),
    Annotation(N),
}

impl<N> Key<N> {
    /// What key `k` is, its property name made by `name`: the one rule both
    /// readers of a body follow.
    fn of(k: &str, name: impl FnOnce(&str) -> N) -> Self {
        match k {
            "PartitionKey" => Key::Partition,
            "RowKey" => Key::Row,
            "Timestamp" => Key::Timestamp,
            _ if k.contains('@') => match k.strip_suffix(ANNOTATION) {
                Some("Timestamp") => Key::TimestampAnnotation,
                Some(base) if !base.contains('@') => Key::Annotation(name(base)),
                _ => Key::Ignored,
            },
            "odata.etag" => Key::Etag,
            _ if k.starts_with("odata.") => Key::Ignored,
            _ => Key::Property(name(k)),
        }
    }
}

/// The property name of a key.
pub(super) enum KeyName {
    /// The name of the last entry read (for the one-pass reader: of the
    /// annotation read just before).
    Last,
    New(String),
}

/// Reads a key, comparing its name with the last one read (`last`) rather
/// than copying it.
pub(super) struct KeySeed<'a> {
    pub(super) last: Option<&'a str>,
}

impl<'de> serde::de::DeserializeSeed<'de> for KeySeed<'_> {
    type Value = Key<KeyName>;
    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        d: D,
    ) -> std::result::Result<Key<KeyName>, D::Error> {
        d.deserialize_str(self)
    }
}

impl serde::de::Visitor<'_> for KeySeed<'_> {
    type Value = Key<KeyName>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a property name")
    }
    fn visit_str<E: serde::de::Error>(self, k: &str) -> std::result::Result<Key<KeyName>, E> {
        Ok(Key::of(k, |n| {
            if self.last == Some(n) {
                KeyName::Last
            } else {
                KeyName::New(n.to_owned())
            }
        }))
    }
}

impl<'de> serde::Deserialize<'de> for Annotation {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Ok(match Json::deserialize(d)? {
            Json::String(name) => match EdmType::from_odata_name(&name) {
                Some(t) => Annotation::Known(t),
                None => Annotation::Other(Json::String(name)),
            },
            other => Annotation::Other(other),
        })
    }
}

super::deserialize_by!(ParsedEntity, deserialize_map, ParsedEntityVisitor);

struct ParsedEntityVisitor;

impl<'de> serde::de::Visitor<'de> for ParsedEntityVisitor {
    type Value = ParsedEntity;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an entity (a JSON object)")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<ParsedEntity, A::Error> {
        let mut out = ParsedEntity {
            entries: Vec::with_capacity(map.size_hint().unwrap_or(16)),
            sorted: true,
            ..ParsedEntity::default()
        };
        loop {
            let seed = KeySeed {
                last: out.entries.last().map(|e| e.name.as_str()),
            };
            let Some(key) = map.next_key_seed(seed)? else {
                break;
            };
            match key {
                Key::Partition => out.partition_key = Some(map.next_value()?),
                Key::Row => out.row_key = Some(map.next_value()?),
                Key::Etag => out.etag = map.next_value::<Json>()?.as_str().map(str::to_owned),
                Key::Ignored => {
                    map.next_value::<Json>()?;
                }
                Key::Timestamp => out.timestamp.value = Some(map.next_value()?),
                Key::TimestampAnnotation => {
                    out.timestamp.annotation = out.annotation(map.next_value::<Annotation>()?);
                }
                Key::Property(name) => {
                    let value = map.next_value::<Json>()?;
                    out.place(name, Some(value), Ann::Absent);
                }
                Key::Annotation(name) => {
                    let annotation = out.annotation(map.next_value::<Annotation>()?);
                    out.place(name, None, annotation);
                }
            }
        }
        Ok(out)
    }
}

impl ParsedEntity {
    fn annotation(&mut self, annotation: Annotation) -> Ann {
        match annotation {
            Annotation::Known(t) => Ann::Known(t),
            Annotation::Other(json) => {
                self.bad_annotations.push(json);
                Ann::Bad(u32::try_from(self.bad_annotations.len() - 1).unwrap_or(u32::MAX))
            }
        }
    }

    /// Files a property value or annotation under its name.
    fn place(&mut self, name: KeyName, value: Option<Json>, annotation: Ann) {
        let name = match name {
            KeyName::Last => {
                if let Some(last) = self.entries.last_mut() {
                    let free = (value.is_none() || last.value.is_none())
                        && (annotation == Ann::Absent || last.annotation == Ann::Absent);
                    if free {
                        if value.is_some() {
                            last.value = value;
                        }
                        if annotation != Ann::Absent {
                            last.annotation = annotation;
                        }
                        return;
                    }
                    // The same name again: the last occurrence will count.
                    self.sorted = false;
                    last.name.clone()
                } else {
                    // `Last` implies an entry; keep going regardless.
                    String::new()
                }
            }
            KeyName::New(name) => {
                if self.entries.last().is_some_and(|last| name < last.name) {
                    self.sorted = false;
                }
                name
            }
        };
        self.entries.push(Entry {
            name,
            value,
            annotation,
        });
    }

    /// Sorts the entries by name and merges repeated names, the later value
    /// or annotation winning (as a `serde_json::Map` keeps the last).
    fn normalize(&mut self) {
        if self.sorted {
            return;
        }
        self.entries.sort_by(|a, b| a.name.cmp(&b.name));
        self.entries.dedup_by(|later, earlier| {
            if later.name != earlier.name {
                return false;
            }
            if later.value.is_some() {
                earlier.value = later.value.take();
            }
            if later.annotation != Ann::Absent {
                earlier.annotation = later.annotation;
            }
            true
        });
        self.sorted = true;
    }
}

/// Reads an entity from a parsed body, each value typed by its annotation or,
/// without one, as the service infers it; [`Error::Decode`] naming the
/// property that does not parse.
pub(crate) fn entity_from_parsed(table: &str, mut parsed: ParsedEntity) -> Result<WireEntity> {
    let key = |name: &str, raw: Option<Json>| match raw {
        Some(Json::String(s)) => Ok(s),
        other => Err(Error::decode(
            table,
            name,
            "Edm.String",
            found_json(other.as_ref()),
        )),
    };
    let partition_key = key("PartitionKey", parsed.partition_key.take())?;
    let row_key = key("RowKey", parsed.row_key.take())?;
    parsed.normalize();
    let mut bad = std::mem::take(&mut parsed.bad_annotations);
    // `Timestamp` is read where it sorts among the names, so that the first
    // error in name order is the one reported.
    let mut stamp = Some(std::mem::take(&mut parsed.timestamp));
    let mut timestamp = None;
    let mut properties = Properties::with_capacity(parsed.entries.len());
    for Entry {
        name,
        value,
        annotation,
    } in parsed.entries
    {
        if name.as_str() > "Timestamp"
            && let Some(slot) = stamp.take()
        {
            timestamp = read_timestamp(table, slot, &mut bad)?;
        }
        if let Some(value) = read_entry(table, &name, value, annotation, &mut bad)? {
            // Entries are sorted and each name occurs once (`normalize`).
            properties.push_in_order(name, value);
        }
    }
    if let Some(slot) = stamp {
        timestamp = read_timestamp(table, slot, &mut bad)?;
    }
    Ok(WireEntity {
        partition_key,
        row_key,
        timestamp,
        etag: parsed.etag,
        properties,
    })
}

/// The value of entry `name`, read by its annotation (`bad` holds the
/// annotations that are not a known type); `None` for an entry that is only
/// an annotation, or a JSON `null`.
fn read_entry(
    table: &str,
    name: &str,
    value: Option<Json>,
    annotation: Ann,
    bad: &mut [Json],
) -> Result<Option<Value>> {
    let Some(raw) = value else {
        return Ok(None);
    };
    let annotation = match annotation {
        Ann::Absent => None,
        Ann::Known(t) => Some(t),
        Ann::Bad(i) => {
            let found = bad
                .get_mut(i as usize)
                .map(std::mem::take)
                .unwrap_or_default();
            return Err(match found {
                Json::String(t) => {
                    Error::decode(table, name, "a known Edm type", format!("annotation {t:?}"))
                }
                other => Error::decode(table, name, "an Edm type annotation", other.to_string()),
            });
        }
    };
    read_value_owned(annotation, raw)
        .map_err(|(expected, raw)| Error::decode(table, name, expected, found_json(Some(&raw))))
}

/// The `Timestamp` of a body: a date-time, or `None` when it is absent or
/// a string that does not parse as one.
fn read_timestamp(table: &str, slot: Slot, bad: &mut [Json]) -> Result<Option<OffsetDateTime>> {
    Ok(
        match read_entry(table, "Timestamp", slot.value, slot.annotation, bad)? {
            Some(Value::DateTime(t)) => Some(t),
            Some(Value::String(s)) => datetime::parse(&s).ok(),
            _ => None,
        },
    )
}

/// Reads an entity from response body text (property `(body)` of the error
/// for text that is not a JSON object).
pub(crate) fn entity_from_json_str(table: &str, text: &str) -> Result<WireEntity> {
    let parsed = serde_json::from_str(text).map_err(|e| not_an_object(table, &e))?;
    entity_from_parsed(table, parsed)
}

/// Reads one JSON value with its optional annotation, as [`Typed`] does, a
/// string moving into the value; `Ok(None)` for null. The error is the
/// expected type and the JSON given back.
fn read_value_owned(
    annotation: Option<EdmType>,
    raw: Json,
) -> std::result::Result<Option<Value>, (String, Json)> {
    match (annotation, raw) {
        (_, Json::Null) => Ok(None),
        (None | Some(EdmType::String), Json::String(s)) => Ok(Some(Value::String(s))),
        (_, raw) => match serde::de::DeserializeSeed::deserialize(Typed(annotation), &raw) {
            Ok(Some(v)) => Ok(Some(v)),
            _ => {
                let expected = annotation.map_or(
                    "a property value (not an object or array)",
                    EdmType::odata_name,
                );
                Err((expected.to_owned(), raw))
            }
        },
    }
}

/// A string value read as `t`, by both readers of a body; `None` when it is
/// not one (an Int32 or a Boolean is never a string).
pub(super) fn typed_from_str(t: EdmType, s: &str) -> Option<Value> {
    Some(match t {
        EdmType::String => Value::String(s.to_owned()),
        EdmType::Int64 => Value::Int64(s.parse().ok()?),
        EdmType::Double => Value::Double(match s {
            "NaN" => f64::NAN,
            "Infinity" => f64::INFINITY,
            "-Infinity" => f64::NEG_INFINITY,
            other => other.parse().ok()?,
        }),
        EdmType::DateTime => Value::DateTime(datetime::parse(s).ok()?),
        EdmType::Guid => Value::Guid(Uuid::parse_str(s).ok()?),
        EdmType::Binary => Value::Binary(BASE64.decode(s).ok()?),
        EdmType::Int32 | EdmType::Boolean => return None,
    })
}

/// Reads an entity from a body already parsed into a JSON object.
pub(crate) fn entity_from_json(table: &str, json: &Map<String, Json>) -> Result<WireEntity> {
    let parsed = ParsedEntity::deserialize(json).map_err(|e| not_an_object(table, &e))?;
    entity_from_parsed(table, parsed)
}

fn not_an_object(table: &str, e: &serde_json::Error) -> Error {
    Error::decode(table, "(body)", "an entity as a JSON object", e.to_string())
}

/// A property's value read as its annotation (or, without one, as the
/// service infers it) says: `None` for `null` or a value of another type.
pub(super) struct Typed(pub(super) Option<EdmType>);

impl<'de> serde::de::DeserializeSeed<'de> for Typed {
    type Value = Option<Value>;
    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        d: D,
    ) -> std::result::Result<Option<Value>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Typed {
    type Value = Option<Value>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a property value")
    }
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> std::result::Result<Option<Value>, E> {
        Ok(matches!(self.0, None | Some(EdmType::Boolean)).then_some(Value::Boolean(v)))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<Option<Value>, E> {
        Ok(match self.0 {
            None => Some(i32::try_from(v).map_or(Value::Int64(v), Value::Int32)),
            Some(EdmType::Int32) => i32::try_from(v).ok().map(Value::Int32),
            Some(EdmType::Int64) => Some(Value::Int64(v)),
            // As JSON numbers read as doubles.
            #[allow(clippy::cast_precision_loss)]
            Some(EdmType::Double) => Some(Value::Double(v as f64)),
            Some(_) => None,
        })
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<Option<Value>, E> {
        match i64::try_from(v) {
            Ok(v) => self.visit_i64(v),
            // Past i64: a double, as a JSON number reads.
            #[allow(clippy::cast_precision_loss)]
            Err(_) => {
                Ok(matches!(self.0, None | Some(EdmType::Double))
                    .then_some(Value::Double(v as f64)))
            }
        }
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> std::result::Result<Option<Value>, E> {
        Ok(matches!(self.0, None | Some(EdmType::Double)).then_some(Value::Double(v)))
    }
    fn visit_str<E: serde::de::Error>(self, s: &str) -> std::result::Result<Option<Value>, E> {
        Ok(typed_from_str(self.0.unwrap_or(EdmType::String), s))
    }
    fn visit_string<E: serde::de::Error>(self, s: String) -> std::result::Result<Option<Value>, E> {
        match self.0 {
            None | Some(EdmType::String) => Ok(Some(Value::String(s))),
            _ => self.visit_str(&s),
        }
    }
    fn visit_unit<E: serde::de::Error>(self) -> std::result::Result<Option<Value>, E> {
        Ok(None)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<Option<Value>, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<Option<Value>, A::Error> {
        while map
            .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
            .is_some()
        {}
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_in_the_services_order_needs_no_sort() {
        // As the service sends an entity: keys, then the properties by
        // name, then `Timestamp` (which sorts before lowercase names).
        let body = r#"{"odata.etag":"W/\"1\"","PartitionKey":"p","RowKey":"r","active":true,"big@odata.type":"Edm.Int64","big":"5","name":"n","Timestamp@odata.type":"Edm.DateTime","Timestamp":"2024-01-02T03:04:05Z"}"#;
        let parsed: ParsedEntity = serde_json::from_str(body).unwrap();
        assert!(parsed.sorted, "{parsed:?}");
        let read = entity_from_parsed("t", parsed).unwrap();
        assert_eq!(
            read.timestamp,
            Some(time::macros::datetime!(2024-01-02 03:04:05 UTC))
        );
        let names: Vec<&str> = read.properties.iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["active", "big", "name"]);
    }

    #[test]
    fn entries_stay_small() {
        assert!(std::mem::size_of::<Entry>() <= 64);
    }
}
