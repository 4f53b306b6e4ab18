//! The JSON wire form of an entity, as the Table service's REST API speaks it.
//!
//! Int64, DateTime, Guid and Binary values carry an `@odata.type` annotation
//! (the service cannot infer them), Int64 travels as a string (JSON numbers lose
//! precision past 2^53), Binary as base64, and doubles that JSON cannot spell
//! (`NaN`, `Infinity`, `-Infinity`) as annotated strings. Reading accepts what
//! the service and other clients send: Int64 as a string or a number, doubles
//! as numbers or those three strings, and un-annotated values typed the way the
//! service infers them.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map, Number, Value as Json};
use time::OffsetDateTime;
use uuid::Uuid;

use super::datetime;
use super::properties::Properties;
use super::value::{EdmType, Value};
use crate::error::{Error, Result};

const ANNOTATION: &str = "@odata.type";

/// Writes one property (and its annotation, when it needs one) into `out`.
pub fn write_property(out: &mut Map<String, Json>, name: &str, value: &Value) {
    let (json, annotate) = match value {
        Value::String(s) => (Json::String(s.clone()), false),
        Value::Boolean(b) => (Json::Bool(*b), false),
        Value::Int32(i) => (Json::Number((*i).into()), false),
        Value::Int64(i) => (Json::String(i.to_string()), true),
        Value::Double(d) => (
            match Number::from_f64(*d) {
                Some(n) => Json::Number(n),
                None if d.is_nan() => Json::String("NaN".into()),
                None if *d > 0.0 => Json::String("Infinity".into()),
                None => Json::String("-Infinity".into()),
            },
            true,
        ),
        Value::DateTime(t) => (Json::String(datetime::format(*t)), true),
        Value::Guid(g) => (Json::String(g.hyphenated().to_string()), true),
        Value::Binary(b) => (Json::String(BASE64.encode(b)), true),
    };
    out.insert(name.to_owned(), json);
    if annotate {
        out.insert(
            format!("{name}{ANNOTATION}"),
            Json::String(value.edm_type().odata_name().into()),
        );
    }
}

/// The request body for an entity: keys and every property, annotated.
pub fn entity_to_json(partition_key: &str, row_key: &str, props: &Properties) -> Map<String, Json> {
    let mut out = Map::new();
    out.insert("PartitionKey".into(), Json::String(partition_key.into()));
    out.insert("RowKey".into(), Json::String(row_key.into()));
    for (name, value) in props.iter() {
        write_property(&mut out, name, value);
    }
    out
}

/// An entity as read from the wire.
#[derive(Debug, Clone, PartialEq)]
pub struct WireEntity {
    /// `PartitionKey`
    pub partition_key: String,
    /// `RowKey`
    pub row_key: String,
    /// `Timestamp`, when the service sent it.
    pub timestamp: Option<OffsetDateTime>,
    /// `odata.etag`, when the service sent it.
    pub etag: Option<String>,
    /// Every other property.
    pub properties: Properties,
}

/// Reads an entity from a response body.
///
/// # Errors
/// [`Error::Decode`] naming the table and the property that does not parse.
pub fn entity_from_json(table: &str, json: &Map<String, Json>) -> Result<WireEntity> {
    let decode_err = |property: &str, expected: &str, found: String| Error::Decode {
        table: table.to_owned(),
        row: None,
        property: property.to_owned(),
        expected: expected.to_owned(),
        found,
    };
    let key = |name: &str| match json.get(name) {
        Some(Json::String(s)) => Ok(s.clone()),
        other => Err(decode_err(name, "Edm.String", found_json(other))),
    };
    let partition_key = key("PartitionKey")?;
    let row_key = key("RowKey")?;
    let mut timestamp = None;
    let mut etag = None;
    let mut properties = Properties::new();
    for (name, raw) in json {
        if name == "PartitionKey" || name == "RowKey" || name.contains('@') {
            continue;
        }
        if name == "odata.etag" {
            etag = raw.as_str().map(str::to_owned);
            continue;
        }
        if name.starts_with("odata.") {
            continue;
        }
        let annotation = match json.get(&format!("{name}{ANNOTATION}")) {
            None => None,
            Some(Json::String(t)) => Some(EdmType::from_odata_name(t).ok_or_else(|| {
                decode_err(name, "a known Edm type", format!("annotation {t:?}"))
            })?),
            Some(other) => {
                return Err(decode_err(
                    name,
                    "an Edm type annotation",
                    other.to_string(),
                ));
            }
        };
        let value = read_value(annotation, raw)
            .map_err(|expected| decode_err(name, &expected, found_json(Some(raw))))?;
        if name == "Timestamp" {
            timestamp = match value {
                Some(Value::DateTime(t)) => Some(t),
                Some(Value::String(s)) => datetime::parse(&s).ok(),
                _ => None,
            };
            continue;
        }
        if let Some(value) = value {
            properties.insert(name.clone(), value);
        }
    }
    Ok(WireEntity {
        partition_key,
        row_key,
        timestamp,
        etag,
        properties,
    })
}

fn found_json(v: Option<&Json>) -> String {
    match v {
        None => "absent".into(),
        Some(Json::String(s)) if s.chars().count() > 40 => {
            format!("a {}-character string", s.chars().count())
        }
        Some(v) => v.to_string(),
    }
}

/// Reads one JSON value with its optional annotation. `Ok(None)` for null.
/// The error is the expected type.
fn read_value(
    annotation: Option<EdmType>,
    raw: &Json,
) -> std::result::Result<Option<Value>, String> {
    if raw.is_null() {
        return Ok(None);
    }
    let expected = |t: EdmType| t.odata_name().to_owned();
    let value = match annotation {
        None => match raw {
            Json::String(s) => Value::String(s.clone()),
            Json::Bool(b) => Value::Boolean(*b),
            Json::Number(n) => match n.as_i64() {
                Some(i) => match i32::try_from(i) {
                    Ok(i) => Value::Int32(i),
                    Err(_) => Value::Int64(i),
                },
                None => Value::Double(n.as_f64().ok_or("a number")?),
            },
            _ => return Err("a property value (not an object or array)".into()),
        },
        Some(t @ EdmType::String) => {
            Value::String(raw.as_str().ok_or_else(|| expected(t))?.to_owned())
        }
        Some(t @ EdmType::Boolean) => Value::Boolean(raw.as_bool().ok_or_else(|| expected(t))?),
        Some(t @ EdmType::Int32) => Value::Int32(
            raw.as_i64()
                .and_then(|i| i32::try_from(i).ok())
                .ok_or_else(|| expected(t))?,
        ),
        Some(t @ EdmType::Int64) => Value::Int64(match raw {
            Json::String(s) => s.parse().map_err(|_| expected(t))?,
            Json::Number(n) => n.as_i64().ok_or_else(|| expected(t))?,
            _ => return Err(expected(t)),
        }),
        Some(t @ EdmType::Double) => Value::Double(match raw {
            Json::Number(n) => n.as_f64().ok_or_else(|| expected(t))?,
            Json::String(s) => match s.as_str() {
                "NaN" => f64::NAN,
                "Infinity" => f64::INFINITY,
                "-Infinity" => f64::NEG_INFINITY,
                other => other.parse().map_err(|_| expected(t))?,
            },
            _ => return Err(expected(t)),
        }),
        Some(t @ EdmType::DateTime) => Value::DateTime(
            datetime::parse(raw.as_str().ok_or_else(|| expected(t))?).map_err(|_| expected(t))?,
        ),
        Some(t @ EdmType::Guid) => Value::Guid(
            Uuid::parse_str(raw.as_str().ok_or_else(|| expected(t))?).map_err(|_| expected(t))?,
        ),
        Some(t @ EdmType::Binary) => Value::Binary(
            BASE64
                .decode(raw.as_str().ok_or_else(|| expected(t))?)
                .map_err(|_| expected(t))?,
        ),
    };
    Ok(Some(value))
}

// ---------------------------------------------------------------------------
// The direct path: entity body text straight from and to a property bag,
// without building a `serde_json::Map`. Output and accepted input are exactly
// those of `entity_to_json` and `entity_from_json` above (the tests below pin
// the two paths to each other).
// ---------------------------------------------------------------------------

/// An entity's request body, serializing straight from its parts to the JSON
/// that [`entity_to_json`] builds (same keys, same order, same text), without
/// building a `serde_json::Map`.
///
/// Pass it to anything that takes `Serialize` (the SDK's request builders), or
/// use [`entity_to_json_string`] for the text.
#[derive(Debug, Clone, Copy)]
pub struct EntityBody<'a> {
    partition_key: &'a str,
    row_key: &'a str,
    properties: &'a Properties,
}

impl<'a> EntityBody<'a> {
    /// The body for an entity with these keys and properties.
    pub fn new(partition_key: &'a str, row_key: &'a str, properties: &'a Properties) -> Self {
        EntityBody {
            partition_key,
            row_key,
            properties,
        }
    }

    /// About the length of the body text (more when strings need escapes),
    /// to size the buffer once.
    pub fn estimated_len(&self) -> usize {
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
        use serde::ser::SerializeMap as _;
        if !self.streams_in_map_order() {
            return entity_to_json(self.partition_key, self.row_key, self.properties)
                .serialize(serializer);
        }
        let mut map = serializer.serialize_map(None)?;
        let fixed = [
            ("PartitionKey", self.partition_key),
            ("RowKey", self.row_key),
        ];
        let mut f = 0;
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
                        let key = std::str::from_utf8(buf).map_err(serde::ser::Error::custom)?;
                        map.serialize_entry(key, annotation)?;
                    }
                    None => map.serialize_entry(&format!("{name}{ANNOTATION}"), annotation)?,
                }
            }
        }
        for (key, value) in &fixed[f..] {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// A property value as it is written (without its annotation).
struct ValueText<'a>(&'a Value);

impl serde::Serialize for ValueText<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::Error as _;
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

/// The request body text for an entity: the text of
/// `serde_json::to_string(&entity_to_json(..))` (and of serializing
/// [`EntityBody`]), written straight from the property bag.
///
/// # Errors
/// [`Error::Invalid`] if serialization fails (it does not for any bag).
pub fn entity_to_json_string(
    partition_key: &str,
    row_key: &str,
    props: &Properties,
) -> Result<String> {
    let body = EntityBody::new(partition_key, row_key, props);
    let fail = |e: &dyn std::fmt::Display| {
        Error::invalid(
            format!("entity ({partition_key:?}, {row_key:?})"),
            format!("cannot write its JSON: {e}"),
        )
    };
    if !body.streams_in_map_order() {
        return serde_json::to_string(&body).map_err(|e| fail(&e));
    }
    let mut out = String::with_capacity(body.estimated_len());
    out.push('{');
    let fixed = [("PartitionKey", partition_key), ("RowKey", row_key)];
    let mut f = 0;
    let mut first = true;
    let mut key = |out: &mut String, k: &str| {
        if !first {
            out.push(',');
        }
        first = false;
        write_json_str(out, k);
        out.push(':');
    };
    for (name, value) in props.iter() {
        while f < fixed.len() && fixed[f].0 < name {
            key(&mut out, fixed[f].0);
            write_json_str(&mut out, fixed[f].1);
            f += 1;
        }
        key(&mut out, name);
        write_value(&mut out, value).map_err(|e| fail(&e))?;
        if needs_annotation(value) {
            out.push(',');
            out.push('"');
            write_json_str_body(&mut out, name);
            out.push_str(ANNOTATION);
            out.push_str("\":\"");
            out.push_str(value.edm_type().odata_name());
            out.push('"');
        }
    }
    for (k, v) in &fixed[f..] {
        key(&mut out, k);
        write_json_str(&mut out, v);
    }
    out.push('}');
    Ok(out)
}

/// Writes `s` as a JSON string, escaped as serde_json escapes it.
fn write_json_str(out: &mut String, s: &str) {
    out.push('"');
    write_json_str_body(out, s);
    out.push('"');
}

/// The inside of [`write_json_str`]: serde_json escapes `"`, `\` and the
/// control characters below U+0020 (`\b \t \n \f \r` by name, others as
/// `\u00xx` in lowercase hex) and writes everything else as is.
fn write_json_str_body(out: &mut String, s: &str) {
    let needs_escape = |b: u8| b < 0x20 || b == b'"' || b == b'\\';
    if !s.bytes().any(needs_escape) {
        out.push_str(s);
        return;
    }
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        if !needs_escape(b) {
            continue;
        }
        // Escaped bytes are ASCII, so `start..i` lies on character bounds.
        out.push_str(s.get(start..i).unwrap_or_default());
        start = i + 1;
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x08 => out.push_str("\\b"),
            0x0C => out.push_str("\\f"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            _ => {
                out.push_str("\\u00");
                out.push(char::from(HEX[usize::from(b >> 4)]));
                out.push(char::from(HEX[usize::from(b & 0xF)]));
            }
        }
    }
    out.push_str(s.get(start..).unwrap_or_default());
}

/// Writes a property value (without its annotation) as [`ValueText`]
/// serializes it.
fn write_value(out: &mut String, value: &Value) -> std::result::Result<(), String> {
    match value {
        Value::String(v) => write_json_str(out, v),
        Value::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int32(i) => {
            let mut buf = [0u8; 20];
            out.push_str(format_i64(i64::from(*i), &mut buf).map_err(|e| e.to_string())?);
        }
        Value::Int64(i) => {
            let mut buf = [0u8; 20];
            out.push('"');
            out.push_str(format_i64(*i, &mut buf).map_err(|e| e.to_string())?);
            out.push('"');
        }
        Value::Double(d) if d.is_finite() => {
            // serde_json's own float text (shortest round-trip form).
            let mut buf = [0u8; 40];
            let mut cursor = std::io::Cursor::new(&mut buf[..]);
            serde_json::to_writer(&mut cursor, d).map_err(|e| e.to_string())?;
            let n = usize::try_from(cursor.position()).map_err(|e| e.to_string())?;
            let text = buf.get(..n).unwrap_or_default();
            out.push_str(std::str::from_utf8(text).map_err(|e| e.to_string())?);
        }
        Value::Double(d) if d.is_nan() => out.push_str("\"NaN\""),
        Value::Double(d) if *d > 0.0 => out.push_str("\"Infinity\""),
        Value::Double(_) => out.push_str("\"-Infinity\""),
        Value::DateTime(t) => {
            let mut buf = [0u8; 28];
            match datetime::format_into(*t, &mut buf) {
                Some(text) => write_json_str(out, text),
                None => write_json_str(out, &datetime::format(*t)),
            }
        }
        Value::Guid(g) => {
            write_json_str(out, g.hyphenated().encode_lower(&mut Uuid::encode_buffer()));
        }
        Value::Binary(b) => {
            out.push('"');
            BASE64.encode_string(b, out);
            out.push('"');
        }
    }
    Ok(())
}

/// An entity body parsed from JSON text but not yet checked: what
/// [`entity_from_parsed`] reads into a [`WireEntity`]. Deserializing it reads
/// the text straight into property names and values, without building a
/// `serde_json::Map`; give it to anything that deserializes a body (the SDK's
/// response types), or use [`entity_from_json_str`].
#[derive(Debug, Clone, Default)]
pub struct ParsedEntity {
    partition_key: Option<Json>,
    row_key: Option<Json>,
    etag: Option<String>,
    /// Properties and annotations by property name.
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

/// An annotation as an entry holds it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Ann {
    Absent,
    Known(EdmType),
    /// Index into `ParsedEntity::bad_annotations`.
    Bad(u32),
}

/// An `@odata.type` annotation's value.
#[derive(Debug, Clone)]
enum Annotation {
    Known(EdmType),
    /// Anything else (an unknown name or not a string), kept for the error.
    Other(Json),
}

/// What a key of the body is.
enum Key {
    Partition,
    Row,
    Etag,
    /// A key that does not bear on the entity (kept only as JSON is).
    Ignored,
    /// A property's value.
    Property(KeyName),
    /// A property's `@odata.type` annotation.
    Annotation(KeyName),
}

/// The property name of a key.
enum KeyName {
    /// The name of the last entry read.
    Last,
    New(String),
}

struct KeySeed<'a> {
    last: Option<&'a str>,
}

impl<'de> serde::de::DeserializeSeed<'de> for KeySeed<'_> {
    type Value = Key;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<Key, D::Error> {
        d.deserialize_str(self)
    }
}

impl serde::de::Visitor<'_> for KeySeed<'_> {
    type Value = Key;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a property name")
    }
    fn visit_str<E: serde::de::Error>(self, k: &str) -> std::result::Result<Key, E> {
        let name = |n: &str| {
            if self.last == Some(n) {
                KeyName::Last
            } else {
                KeyName::New(n.to_owned())
            }
        };
        Ok(match k {
            "PartitionKey" => Key::Partition,
            "RowKey" => Key::Row,
            _ if k.contains('@') => match k.strip_suffix(ANNOTATION) {
                Some(base) if !base.contains('@') => Key::Annotation(name(base)),
                _ => Key::Ignored,
            },
            "odata.etag" => Key::Etag,
            _ if k.starts_with("odata.") => Key::Ignored,
            _ => Key::Property(name(k)),
        })
    }
}

impl<'de> serde::Deserialize<'de> for Annotation {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_any(AnnotationVisitor)
    }
}

struct AnnotationVisitor;

impl<'de> serde::de::Visitor<'de> for AnnotationVisitor {
    type Value = Annotation;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<Annotation, E> {
        Ok(match EdmType::from_odata_name(v) {
            Some(t) => Annotation::Known(t),
            None => Annotation::Other(Json::String(v.to_owned())),
        })
    }
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> std::result::Result<Annotation, E> {
        Ok(Annotation::Other(Json::Bool(v)))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<Annotation, E> {
        Ok(Annotation::Other(Json::Number(v.into())))
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<Annotation, E> {
        Ok(Annotation::Other(Json::Number(v.into())))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> std::result::Result<Annotation, E> {
        Ok(Annotation::Other(
            Number::from_f64(v).map_or(Json::Null, Json::Number),
        ))
    }
    fn visit_unit<E: serde::de::Error>(self) -> std::result::Result<Annotation, E> {
        Ok(Annotation::Other(Json::Null))
    }
    fn visit_none<E: serde::de::Error>(self) -> std::result::Result<Annotation, E> {
        Ok(Annotation::Other(Json::Null))
    }
    fn visit_some<D: serde::Deserializer<'de>>(
        self,
        d: D,
    ) -> std::result::Result<Annotation, D::Error> {
        serde::Deserialize::deserialize(d)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        seq: A,
    ) -> std::result::Result<Annotation, A::Error> {
        let v = serde::Deserialize::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))?;
        Ok(Annotation::Other(v))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        map: A,
    ) -> std::result::Result<Annotation, A::Error> {
        let v = serde::Deserialize::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
        Ok(Annotation::Other(v))
    }
}

impl<'de> serde::Deserialize<'de> for ParsedEntity {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_map(ParsedEntityVisitor)
    }
}

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
                Key::Property(name) => {
                    let value = map.next_value::<Json>()?;
                    out.place(name, Some(value), Ann::Absent);
                }
                Key::Annotation(name) => {
                    let annotation = match map.next_value::<Annotation>()? {
                        Annotation::Known(t) => Ann::Known(t),
                        Annotation::Other(json) => {
                            out.bad_annotations.push(json);
                            Ann::Bad(
                                u32::try_from(out.bad_annotations.len() - 1).unwrap_or(u32::MAX),
                            )
                        }
                    };
                    out.place(name, None, annotation);
                }
            }
        }
        Ok(out)
    }
}

impl ParsedEntity {
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

/// Reads an entity from an already parsed body: the same result (entity or
/// error) as [`entity_from_json`] on the same JSON.
///
/// # Errors
/// [`Error::Decode`] naming the table and the property that does not parse.
pub fn entity_from_parsed(table: &str, mut parsed: ParsedEntity) -> Result<WireEntity> {
    let decode_err = |property: &str, expected: &str, found: String| Error::Decode {
        table: table.to_owned(),
        row: None,
        property: property.to_owned(),
        expected: expected.to_owned(),
        found,
    };
    let key = |name: &str, raw: Option<Json>| match raw {
        Some(Json::String(s)) => Ok(s),
        other => Err(decode_err(name, "Edm.String", found_json(other.as_ref()))),
    };
    let partition_key = key("PartitionKey", parsed.partition_key.take())?;
    let row_key = key("RowKey", parsed.row_key.take())?;
    parsed.normalize();
    let mut timestamp = None;
    let mut properties = Properties::with_capacity(parsed.entries.len());
    for Entry {
        name,
        value,
        annotation,
    } in parsed.entries
    {
        // Annotation-only entries (including those of names that are not
        // properties, such as `odata.*` or the keys) stand for nothing.
        let Some(raw) = value else {
            continue;
        };
        let annotation = match annotation {
            Ann::Absent => None,
            Ann::Known(t) => Some(t),
            Ann::Bad(i) => {
                let bad = parsed
                    .bad_annotations
                    .get_mut(i as usize)
                    .map(std::mem::take)
                    .unwrap_or_default();
                return Err(match bad {
                    Json::String(t) => {
                        decode_err(&name, "a known Edm type", format!("annotation {t:?}"))
                    }
                    other => decode_err(&name, "an Edm type annotation", other.to_string()),
                });
            }
        };
        let value = read_value_owned(annotation, raw)
            .map_err(|(expected, raw)| decode_err(&name, &expected, found_json(Some(&raw))))?;
        if name == "Timestamp" {
            timestamp = match value {
                Some(Value::DateTime(t)) => Some(t),
                Some(Value::String(s)) => datetime::parse(&s).ok(),
                _ => None,
            };
            continue;
        }
        if let Some(value) = value {
            // Entries are sorted and each name occurs once (`normalize`).
            properties.push_in_order(name, value);
        }
    }
    Ok(WireEntity {
        partition_key,
        row_key,
        timestamp,
        etag: parsed.etag,
        properties,
    })
}

/// Reads an entity from response body text: the same result as parsing the
/// text into a `serde_json::Map` and calling [`entity_from_json`], without
/// building the map.
///
/// # Errors
/// [`Error::Decode`] naming the table and the property that does not parse,
/// or (property `(body)`) when the text is not a JSON object.
pub fn entity_from_json_str(table: &str, text: &str) -> Result<WireEntity> {
    let parsed: ParsedEntity = serde_json::from_str(text).map_err(|e| Error::Decode {
        table: table.to_owned(),
        row: None,
        property: "(body)".into(),
        expected: "an entity as a JSON object".into(),
        found: e.to_string(),
    })?;
    entity_from_parsed(table, parsed)
}

/// As [`read_value`], taking the JSON by value (strings move into the
/// value). The error is the expected type and the JSON given back.
fn read_value_owned(
    annotation: Option<EdmType>,
    raw: Json,
) -> std::result::Result<Option<Value>, (String, Json)> {
    let fail = |t: EdmType, raw: Json| Err((t.odata_name().to_owned(), raw));
    let value = match (annotation, raw) {
        (_, Json::Null) => return Ok(None),
        (None | Some(EdmType::String), Json::String(s)) => Value::String(s),
        (None | Some(EdmType::Boolean), Json::Bool(b)) => Value::Boolean(b),
        (None, Json::Number(n)) => match n.as_i64() {
            Some(i) => match i32::try_from(i) {
                Ok(i) => Value::Int32(i),
                Err(_) => Value::Int64(i),
            },
            None => match n.as_f64() {
                Some(d) => Value::Double(d),
                None => return Err(("a number".into(), Json::Number(n))),
            },
        },
        (None, raw) => {
            return Err(("a property value (not an object or array)".into(), raw));
        }
        (Some(t), raw) => match read_typed(t, &raw) {
            Some(v) => v,
            None => return fail(t, raw),
        },
    };
    Ok(Some(value))
}

/// A non-null JSON value read as `t` (other than a string as Edm.String or a
/// boolean as Edm.Boolean, which move), or `None` when it is not one.
fn read_typed(t: EdmType, raw: &Json) -> Option<Value> {
    Some(match t {
        EdmType::String | EdmType::Boolean => return None,
        EdmType::Int32 => Value::Int32(raw.as_i64().and_then(|i| i32::try_from(i).ok())?),
        EdmType::Int64 => Value::Int64(match raw {
            Json::String(s) => s.parse().ok()?,
            Json::Number(n) => n.as_i64()?,
            _ => return None,
        }),
        EdmType::Double => Value::Double(match raw {
            Json::Number(n) => n.as_f64()?,
            Json::String(s) => match s.as_str() {
                "NaN" => f64::NAN,
                "Infinity" => f64::INFINITY,
                "-Infinity" => f64::NEG_INFINITY,
                other => other.parse().ok()?,
            },
            _ => return None,
        }),
        EdmType::DateTime => Value::DateTime(datetime::parse(raw.as_str()?).ok()?),
        EdmType::Guid => Value::Guid(Uuid::parse_str(raw.as_str()?).ok()?),
        EdmType::Binary => Value::Binary(BASE64.decode(raw.as_str()?).ok()?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use time::macros::datetime;

    fn old_text(pk: &str, rk: &str, props: &Properties) -> String {
        serde_json::to_string(&entity_to_json(pk, rk, props)).unwrap()
    }

    fn old_read(text: &str) -> std::result::Result<WireEntity, String> {
        let map: Map<String, Json> = serde_json::from_str(text).map_err(|e| e.to_string())?;
        entity_from_json("T", &map).map_err(|e| format!("{e:?}"))
    }

    fn new_read(text: &str) -> std::result::Result<WireEntity, String> {
        entity_from_json_str("T", text).map_err(|e| format!("{e:?}"))
    }

    fn bag(items: Vec<(&str, Value)>) -> Properties {
        let mut p = Properties::new();
        for (k, v) in items {
            p.insert(k, v);
        }
        p
    }

    fn every_type() -> Vec<Value> {
        vec![
            Value::String("plain".into()),
            Value::String("\"\\/\u{0}\u{1f}\u{7f}\u{8}\u{c}\n\r\t é \u{2028} 😀".into()),
            Value::Boolean(false),
            Value::Int32(i32::MIN),
            Value::Int64(i64::MIN),
            Value::Int64(i64::MAX),
            Value::Int64(0),
            Value::Double(0.1),
            Value::Double(-0.0),
            Value::Double(9.095_032_895_894_422e-197),
            Value::Double(1e300),
            Value::Double(f64::NAN),
            Value::Double(f64::INFINITY),
            Value::Double(f64::NEG_INFINITY),
            Value::DateTime(datetime!(2024-02-29 12:34:56.1234567 UTC)),
            Value::DateTime(datetime!(2024-02-29 12:34:56.1234567 +05:30)),
            Value::DateTime(datetime!(0033-01-01 00:00:00 UTC)),
            Value::Guid(Uuid::from_u128(0xABCD_EF01_2345_6789_ABCD_EF01_2345_6789)),
            Value::Binary(vec![]),
            Value::Binary(vec![0, 1, 255]),
            Value::Binary((0..=255).cycle().take(1000).collect()),
        ]
    }

    /// The size cost of sending non-ASCII text as `\uXXXX` escapes instead
    /// of UTF-8 (the README's figures come from here; run with
    /// `cargo test --lib escaping_non_ascii -- --nocapture` to print them).
    /// Bodies stay UTF-8: escaping would cost these factors on every request
    /// to Azure to work around an Azurite-only defect.
    #[test]
    fn escaping_non_ascii_would_cost_up_to_three_times_the_text() {
        fn escaped(text: &str) -> String {
            let mut out = String::with_capacity(text.len());
            for c in text.chars() {
                if c.is_ascii() {
                    out.push(c);
                } else {
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units) {
                        out.push_str(&format!("\\u{u:04x}"));
                    }
                }
            }
            out
        }
        let samples = [
            (
                "English",
                "The quick brown fox jumps over the lazy dog. ",
                1.0,
            ),
            (
                "French",
                "Le cœur déçu mais l'âme plutôt naïve, Louÿs rêva de crapaüter. ",
                1.5,
            ),
            (
                "German",
                "Falsches Üben von Xylophonmusik quält jeden größeren Zwerg. ",
                1.25,
            ),
            (
                "Russian",
                "Съешь же ещё этих мягких французских булок, да выпей чаю. ",
                2.77,
            ),
            ("Greek", "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. ", 2.84),
            (
                "Japanese",
                "いろはにほへとちりぬるをわかよたれそつねならむ",
                2.0,
            ),
            ("Chinese", "我能吞下玻璃而不伤身体。", 1.99),
            ("emoji", "😀🎉👍🚀", 2.97),
        ];
        for (name, sentence, expected) in samples {
            let text = sentence.repeat(200);
            let props = bag(vec![("text", Value::String(text.clone()))]);
            let raw = entity_to_json_string("p", "r", &props).unwrap().len();
            let esc = raw - text.len() + escaped(&text).len();
            let factor = esc as f64 / raw as f64;
            println!("{name:>9}: body {raw} bytes as UTF-8, {esc} escaped: x{factor:.2}");
            assert!((factor - expected).abs() < 0.05, "{name}: x{factor:.2}");
        }
    }

    #[test]
    fn entries_stay_small() {
        assert!(std::mem::size_of::<Entry>() <= 64);
    }

    #[test]
    fn the_body_text_is_the_maps_text() {
        let long = "n".repeat(300);
        let names = [
            "a",
            "a0",
            "a1",
            "a_",
            "aZ",
            "b",
            "Timestamp",
            "PartitionKey",
            "RowKey",
            "Partition",
            "PartitionKeyX",
            "PartitionKey0",
            "Row",
            "x@odata.type",
            "x",
            "y@",
            "é",
            "\u{7f}",
            "odata.etag",
            "",
            "Z",
            long.as_str(),
        ];
        for v in every_type() {
            for n in names {
                for m in names {
                    let props = bag(vec![(n, v.clone()), (m, Value::Int64(5))]);
                    for (pk, rk) in [("p", "r"), ("p\"\n", "r😀"), ("", "")] {
                        let text = entity_to_json_string(pk, rk, &props).unwrap();
                        assert_eq!(text, old_text(pk, rk, &props), "{n:?} {m:?} {v:?}");
                        let serialized =
                            serde_json::to_string(&EntityBody::new(pk, rk, &props)).unwrap();
                        assert_eq!(serialized, text, "{n:?} {m:?} {v:?}");
                    }
                }
            }
        }
        let all: Properties = every_type()
            .into_iter()
            .enumerate()
            .map(|(i, v)| (format!("p{i}"), v))
            .collect();
        assert_eq!(
            entity_to_json_string("p", "r", &all).unwrap(),
            old_text("p", "r", &all)
        );
    }

    #[test]
    fn reading_text_matches_reading_the_map() {
        let all: Properties = every_type()
            .into_iter()
            .enumerate()
            .map(|(i, v)| (format!("p{i}"), v))
            .collect();
        let text = old_text("p", "r", &all);
        assert_eq!(new_read(&text), old_read(&text));
        for text in [
            r#"{"PartitionKey":"p","RowKey":"r"}"#,
            r#"{"RowKey":"r"}"#,
            r#"{"PartitionKey":1,"RowKey":"r"}"#,
            r#"{"PartitionKey":"p","RowKey":"r","PartitionKey":"q"}"#,
            r#"{"PartitionKey":"p","RowKey":"r","a":1,"a":"x"}"#,
            r#"{"PartitionKey":"p","RowKey":"r","a":1,"a@odata.type":"Edm.Int64","a":"x"}"#,
            r#"{"PartitionKey":"p","RowKey":"r","a@odata.type":"Edm.Int64","a":"5"}"#,
            r#"{"PartitionKey":"p","RowKey":"r","a@odata.type":"Edm.Int64","a":5,"a@odata.type":"Edm.String"}"#,
            r#"{"PartitionKey":"p","RowKey":"r","a":"5","b":1,"a@odata.type":"Edm.Int64"}"#,
            r#"{"PartitionKey":"p","RowKey":"r","a":"5","a@odata.type":"Edm.Nope"}"#,
            r#"{"PartitionKey":"p","RowKey":"r","a":"5","a@odata.type":7}"#,
            r#"{"PartitionKey":"p","RowKey":"r","a":null,"a@odata.type":7}"#,
            r#"{"PartitionKey":"p","RowKey":"r","a":1,"a":null}"#,
            r#"{"PartitionKey":"p","RowKey":"r","a":null,"a":1}"#,
            r#"{"PartitionKey":"p","RowKey":"r","b":"x","a":[1,2],"c":{"d":1}}"#,
            r#"{"PartitionKey":"p","RowKey":"r","c":{"d":1},"b":true}"#,
            r#"{"PartitionKey":"p","RowKey":"r","a":1e400}"#,
            r#"{"PartitionKey":"p","RowKey":"r","a":18446744073709551615,"b":-9223372036854775808,"c":2147483648,"d":1.5}"#,
            r#"{"PartitionKey":"p","RowKey":"r","a":"1.5","a@odata.type":"Edm.Double","b":"-Infinity","b@odata.type":"Edm.Double"}"#,
            r#"{"PartitionKey":"p","RowKey":"r","a":1.5,"a@odata.type":"Edm.Int64"}"#,
            r#"{"PartitionKey":"p","RowKey":"r","a":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx","a@odata.type":"Edm.Guid"}"#,
            r#"{"PartitionKey":"p","RowKey":"r","z":"x","z@odata.type":"Edm.Binary","a":"x","a@odata.type":"Edm.Guid"}"#,
            r#"{"odata.metadata":"m","odata.etag":"W/\"1\"","PartitionKey":"p","RowKey":"r","Timestamp":"2024-01-02T03:04:05.1234567Z","x@y":1,"odata.x":2}"#,
            r#"{"odata.etag":1,"PartitionKey":"p","RowKey":"r","Timestamp@odata.type":"Edm.DateTime","Timestamp":"2024-01-02T03:04:05Z"}"#,
            r#"{"PartitionKey":"p","RowKey":"r","Timestamp":"not a date"}"#,
            r#"{"PartitionKey":"p","RowKey":"r","Timestamp":"2024-01-02T03:04:05Z","Timestamp":null}"#,
            r#"{"PartitionKey":"p","RowKey":"r","Timestamp":5,"Timestamp@odata.type":"Edm.DateTime"}"#,
            r#"{"PartitionKey":"p","RowKey":"r","PartitionKey@odata.type":"Edm.Int64","odata.etag@odata.type":"x","@odata.type":"Edm.Int64","":"5"}"#,
            r#"{"PartitionKey":"p","RowKey":"r","a@b@odata.type":"Edm.Int64","a@b":"5"}"#,
            r#"{"PartitionKey":"p","RowKey":"r","b":1,"a":2,"b":"x","a@odata.type":"Edm.Int64"}"#,
            r#"{"PartitionKey":"p\u0041","RowKey":"r","k\u0041":"v\n"}"#,
            r#"{"PartitionKey":"p","RowKey":"r","a":1"#,
            r#"[1]"#,
        ] {
            let (new, old) = (new_read(text), old_read(text));
            match (&new, &old) {
                (Err(_), Err(o)) if o.contains("line") => {} // not JSON: both refuse
                _ => assert_eq!(new, old, "{text}"),
            }
        }
    }

    fn arb_key() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "PartitionKey",
            "RowKey",
            "Timestamp",
            "a",
            "a0",
            "b",
            "odata.etag",
            "odata.x",
            "a@odata.type",
            "a0@odata.type",
            "b@odata.type",
            "Timestamp@odata.type",
            "x@y",
        ])
        .prop_map(str::to_owned)
    }

    fn arb_json() -> impl Strategy<Value = Json> {
        prop::sample::select(vec![
            Json::Null,
            Json::Bool(true),
            Json::from(1),
            Json::from(-1),
            Json::from(3_000_000_000_i64),
            Json::from(u64::MAX),
            Json::from(1.5),
            Json::from("x"),
            Json::from("5"),
            Json::from("NaN"),
            Json::from("AAH/"),
            Json::from("2024-01-02T03:04:05Z"),
            Json::from("01234567-89ab-cdef-0123-456789abcdef"),
            Json::from("Edm.Int64"),
            Json::from("Edm.Double"),
            Json::from("Edm.DateTime"),
            Json::from("Edm.Binary"),
            Json::from("Edm.Guid"),
            Json::from("Edm.String"),
            Json::from("Edm.Boolean"),
            Json::from("Edm.Int32"),
            Json::from("Edm.What"),
            serde_json::json!([1]),
            serde_json::json!({"k": 1}),
        ])
    }

    proptest! {
        #[test]
        fn arbitrary_objects_read_the_same(
            pairs in prop::collection::vec((arb_key(), arb_json()), 0..12),
            keys in any::<bool>(),
        ) {
            let mut text = String::from("{");
            if keys {
                text.push_str(r#""PartitionKey":"p","RowKey":"r","#);
            }
            for (k, v) in &pairs {
                text.push_str(&format!("{}:{},", Json::from(k.as_str()), v));
            }
            if text.ends_with(',') {
                text.pop();
            }
            text.push('}');
            prop_assert_eq!(new_read(&text), old_read(&text), "{}", text);
        }
    }
}
