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
