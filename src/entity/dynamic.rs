//! [`DynamicEntity`]: a row as keys and a property bag, for scans,
//! migrations and rows written by other programs.

use time::OffsetDateTime;
use uuid::Uuid;

use super::codec::{PropertyCodec, describe};
use super::data::EntityData;
use super::entity_type::Entity;
use super::properties::Properties;
use super::value::{EdmType, Value};
use crate::error::{Error, Result};
use crate::key::{PartitionKey, RowKey};

/// Any row of any table: its keys and every property as stored, with no
/// type of its own.
///
/// A `Table<DynamicEntity>` ([`Store::dynamic_table`](crate::Store::dynamic_table))
/// has every operation of a typed table (partition-locked units take typed
/// entities only). Its properties are exactly the bag: a replace writes it
/// as it is, and nothing is kept beside it. [`DynamicEntity::get`] also
/// reads the forms other programs store (64-bit integers as plain numbers,
/// GUIDs and dates as text).
///
/// ```
/// use leasehold::entity::Value;
/// use leasehold::query::Column;
/// use leasehold::{DynamicEntity, PartitionKey, RowKey, Store};
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let store = Store::memory();
/// let rows = store.dynamic_table("Legacy");
/// let mut row = DynamicEntity::new(PartitionKey::new("p")?, RowKey::new("r1")?);
/// row.properties.insert("count", Value::Int32(7)); // an i64 written as a plain number
/// row.properties.insert("id", Value::String("c2b7ae4b-9b7f-4d60-a8c0-50a1bd1c9e38".into()));
/// rows.insert(row).await?;
///
/// let found = rows.query().filter(Column::<DynamicEntity, i32>::new("count").ge(5)).all().await?;
/// assert_eq!(found[0].get::<i64>("count")?, Some(7));
/// assert!(found[0].get::<uuid::Uuid>("id")?.is_some());
/// # Ok::<(), leasehold::Error>(()) }).unwrap();
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct DynamicEntity {
    /// The partition key.
    pub partition_key: PartitionKey,
    /// The row key.
    pub row_key: RowKey,
    /// Every property as stored (not the keys, not the Timestamp).
    pub properties: Properties,
}

impl DynamicEntity {
    /// A row with these keys and no properties.
    pub fn new(partition_key: PartitionKey, row_key: RowKey) -> Self {
        DynamicEntity {
            partition_key,
            row_key,
            properties: Properties::new(),
        }
    }

    /// Reads property `name` as a `T`; `Ok(None)` when it is absent.
    ///
    /// Besides `T`'s own EDM type, it accepts forms that convert without
    /// loss: integers as any integral number or decimal text; doubles as
    /// any number or text; GUIDs, RFC 3339 date-times and booleans as text;
    /// text as a GUID or a date-time.
    ///
    /// # Errors
    /// [`Error::Decode`] naming the property, what `T` needs, what is
    /// stored, and the row, when no form of the value fits `T`.
    pub fn get<T: PropertyCodec>(&self, name: &str) -> Result<Option<T>> {
        let Some(value) = self.properties.get(name) else {
            return Ok(None);
        };
        let converted = convert(value, T::EDM_TYPE).unwrap_or_else(|| value.clone());
        T::decode(Some(converted)).map(Some).map_err(|e| {
            Error::decode(Self::TABLE, name, e.expected, describe(value)).for_row(
                Self::TABLE,
                &self.partition_key,
                &self.row_key,
            )
        })
    }

    /// Sets property `name` to `value` as its [`PropertyCodec`] stores it
    /// (a `None` removes the property).
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the property when `value` cannot be stored.
    pub fn set<T: PropertyCodec>(&mut self, name: &str, value: T) -> Result<()> {
        match value.encode() {
            Ok(Some(v)) => {
                self.properties.insert(name, v);
            }
            Ok(None) => {
                self.properties.remove(name);
            }
            Err(e) => {
                let keys = (self.partition_key.as_str(), self.row_key.as_str());
                return Err(Error::invalid(
                    format!("property `{name}` of {keys:?}"),
                    e.0,
                ));
            }
        }
        Ok(())
    }
}

/// `value` in the form `target` needs, when it converts without loss; `None`
/// when it does not (it is then decoded as it is, and fails).
fn convert(value: &Value, target: EdmType) -> Option<Value> {
    if value.edm_type() == target {
        return None;
    }
    let integral = |d: f64| -> Option<i64> {
        // Exactly integral and within i64 (2^63 as a double is out).
        (d.fract() == 0.0
            && (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&d))
        .then_some(d as i64)
    };
    let as_i64 = || -> Option<i64> {
        match value {
            Value::Int32(v) => Some(i64::from(*v)),
            Value::Int64(v) => Some(*v),
            Value::Double(d) => integral(*d),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
    };
    match target {
        EdmType::Int64 => as_i64().map(Value::Int64),
        EdmType::Int32 => as_i64()
            .and_then(|v| i32::try_from(v).ok())
            .map(Value::Int32),
        EdmType::Double => match value {
            Value::Int32(v) => Some(Value::Double(f64::from(*v))),
            Value::Int64(v) => {
                let d = *v as f64;
                // Only when the double holds the integer exactly.
                (integral(d) == Some(*v)).then_some(Value::Double(d))
            }
            Value::String(s) => s.trim().parse().ok().map(Value::Double),
            _ => None,
        },
        EdmType::Guid => match value {
            Value::String(s) => Uuid::parse_str(s.trim()).ok().map(Value::Guid),
            _ => None,
        },
        EdmType::DateTime => match value {
            Value::String(s) => parse_datetime(s.trim()).map(Value::DateTime),
            _ => None,
        },
        EdmType::Boolean => match value {
            Value::String(s) if s.eq_ignore_ascii_case("true") => Some(Value::Boolean(true)),
            Value::String(s) if s.eq_ignore_ascii_case("false") => Some(Value::Boolean(false)),
            _ => None,
        },
        EdmType::String => match value {
            Value::Guid(g) => Some(Value::String(g.hyphenated().to_string())),
            Value::DateTime(t) => Some(Value::String(crate::datetime::format(*t))),
            _ => None,
        },
        EdmType::Binary => None,
    }
}

/// An RFC 3339 date-time (any offset, any number of fractional digits),
/// normalised as leasehold stores date-times (UTC, 100 ns).
fn parse_datetime(s: &str) -> Option<OffsetDateTime> {
    let t = crate::datetime::parse(s).ok().or_else(|| {
        OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()
    })?;
    crate::datetime::normalize(t).ok()
}

impl Entity for DynamicEntity {
    /// Not a table name: a `Table<DynamicEntity>` is opened by name with
    /// [`Store::dynamic_table`](crate::Store::dynamic_table) (opened with
    /// `Store::table`, its operations fail with this invalid name).
    const TABLE: &'static str = "(dynamic)";

    /// None: every stored property is in the bag.
    const PROPERTY_NAMES: &'static [&'static str] = &[];

    fn partition_key(&self) -> Result<PartitionKey> {
        Ok(self.partition_key.clone())
    }

    fn row_key(&self) -> Result<RowKey> {
        Ok(self.row_key.clone())
    }

    /// # Errors
    /// [`Error::Invalid`] naming a property whose name starts with `_lh`,
    /// which leasehold reserves for its own properties.
    fn encode_properties(&self) -> Result<Properties> {
        super::refuse_reserved_properties(&self.properties, true, |name| {
            format!("property `{name}` of a DynamicEntity")
        })?;
        Ok(self.properties.clone())
    }

    fn decode(data: EntityData) -> Result<Self> {
        Ok(DynamicEntity {
            partition_key: data.partition_key,
            row_key: data.row_key,
            properties: data.properties,
        })
    }

    /// The bag is every property: nothing is kept beside it.
    const KEEP_UNKNOWN_PROPERTIES: bool = false;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, value: Value) -> DynamicEntity {
        let mut d = DynamicEntity::new(PartitionKey::new("p").unwrap(), RowKey::new("r").unwrap());
        d.properties.insert(name, value);
        d
    }

    #[test]
    fn other_programs_forms_are_read() {
        assert_eq!(row("n", Value::Int32(7)).get::<i64>("n").unwrap(), Some(7));
        assert_eq!(
            row("n", Value::Double(7.0)).get::<i64>("n").unwrap(),
            Some(7)
        );
        assert_eq!(
            row("n", Value::String("-7".into()))
                .get::<i64>("n")
                .unwrap(),
            Some(-7)
        );
        assert_eq!(row("n", Value::Int64(7)).get::<i32>("n").unwrap(), Some(7));
        assert_eq!(
            row("n", Value::Int64(7)).get::<f64>("n").unwrap(),
            Some(7.0)
        );
        let g = "c2b7ae4b-9b7f-4d60-a8c0-50a1bd1c9e38";
        assert_eq!(
            row("g", Value::String(g.into())).get::<Uuid>("g").unwrap(),
            Some(Uuid::parse_str(g).unwrap())
        );
        let t = row(
            "t",
            Value::String("2024-05-06T07:08:09.123456789+02:00".into()),
        )
        .get::<OffsetDateTime>("t")
        .unwrap()
        .unwrap();
        assert_eq!(crate::datetime::format(t), "2024-05-06T05:08:09.1234567Z");
        assert_eq!(
            row("b", Value::String("True".into()))
                .get::<bool>("b")
                .unwrap(),
            Some(true)
        );
        assert_eq!(
            row("s", Value::Guid(Uuid::nil()))
                .get::<String>("s")
                .unwrap()
                .as_deref(),
            Some("00000000-0000-0000-0000-000000000000")
        );
        assert_eq!(
            row("x", Value::Int32(1)).get::<i64>("absent").unwrap(),
            None
        );
    }

    #[test]
    fn lossy_or_foreign_forms_are_decode_errors_naming_the_row() {
        for (value, ty) in [
            (Value::Double(7.5), "i64"),
            (Value::Double(1e300), "i64"),
            (Value::Int64(i64::MAX), "i32"),
            (Value::Int64((1 << 53) + 1), "f64"),
            (Value::String("seven".into()), "i64"),
        ] {
            let d = row("n", value.clone());
            let e = match ty {
                "i64" => d.get::<i64>("n").map(|_| ()),
                "i32" => d.get::<i32>("n").map(|_| ()),
                _ => d.get::<f64>("n").map(|_| ()),
            }
            .unwrap_err();
            let Error::Decode {
                property,
                found,
                row,
                ..
            } = &e
            else {
                panic!("{e:?}");
            };
            assert_eq!(property, "n");
            assert_eq!(found, &describe(&value));
            assert!(row.is_some());
        }
    }

    #[test]
    fn set_stores_as_the_codec_does() {
        let mut d = row("x", Value::Int32(1));
        d.set("n", 5i64).unwrap();
        assert_eq!(d.properties.get("n"), Some(&Value::Int64(5)));
        d.set("x", None::<i32>).unwrap();
        assert_eq!(d.properties.get("x"), None);
        assert!(d.set("big", u64::MAX).is_err());
    }
}
