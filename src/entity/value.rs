//! EDM values: the eight property types of the Table service.

use std::fmt;

use time::OffsetDateTime;
use uuid::Uuid;

/// The Entity Data Model type of a property, as the Table service knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EdmType {
    /// `Edm.String`: UTF-16 text up to 64 KiB.
    String,
    /// `Edm.Boolean`.
    Boolean,
    /// `Edm.Int32`.
    Int32,
    /// `Edm.Int64`: travels as a JSON string with an `@odata.type` annotation.
    Int64,
    /// `Edm.Double`: IEEE 754, including NaN and the infinities.
    Double,
    /// `Edm.DateTime`: UTC, 100 ns resolution, 1601-01-01 to 9999-12-31.
    DateTime,
    /// `Edm.Guid`.
    Guid,
    /// `Edm.Binary`: bytes up to 64 KiB.
    Binary,
}

impl EdmType {
    /// The name used in `@odata.type` annotations, such as `Edm.Int64`.
    pub fn odata_name(self) -> &'static str {
        match self {
            EdmType::String => "Edm.String",
            EdmType::Boolean => "Edm.Boolean",
            EdmType::Int32 => "Edm.Int32",
            EdmType::Int64 => "Edm.Int64",
            EdmType::Double => "Edm.Double",
            EdmType::DateTime => "Edm.DateTime",
            EdmType::Guid => "Edm.Guid",
            EdmType::Binary => "Edm.Binary",
        }
    }

    /// Parses an `@odata.type` annotation.
    pub fn from_odata_name(name: &str) -> Option<Self> {
        Some(match name {
            "Edm.String" => EdmType::String,
            "Edm.Boolean" => EdmType::Boolean,
            "Edm.Int32" => EdmType::Int32,
            "Edm.Int64" => EdmType::Int64,
            "Edm.Double" => EdmType::Double,
            "Edm.DateTime" => EdmType::DateTime,
            "Edm.Guid" => EdmType::Guid,
            "Edm.Binary" => EdmType::Binary,
            _ => return None,
        })
    }
}

impl fmt::Display for EdmType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.odata_name())
    }
}

/// A property value, typed as the Table service types it.
///
/// Equality is *storage* equality: two doubles are equal when their bits are
/// (so a stored NaN equals itself, and `-0.0` differs from `0.0`), which is
/// what comparing an entity with an after-image needs.
#[derive(Debug, Clone)]
pub enum Value {
    /// `Edm.String`
    String(String),
    /// `Edm.Boolean`
    Boolean(bool),
    /// `Edm.Int32`
    Int32(i32),
    /// `Edm.Int64`
    Int64(i64),
    /// `Edm.Double`
    Double(f64),
    /// `Edm.DateTime`, always UTC and truncated to 100 ns.
    DateTime(OffsetDateTime),
    /// `Edm.Guid`
    Guid(Uuid),
    /// `Edm.Binary`
    Binary(Vec<u8>),
}

impl Value {
    /// The largest string (as UTF-16) or binary value: 64 KiB.
    pub const MAX_BYTES: usize = 64 * 1024;

    /// The EDM type of this value.
    pub fn edm_type(&self) -> EdmType {
        match self {
            Value::String(_) => EdmType::String,
            Value::Boolean(_) => EdmType::Boolean,
            Value::Int32(_) => EdmType::Int32,
            Value::Int64(_) => EdmType::Int64,
            Value::Double(_) => EdmType::Double,
            Value::DateTime(_) => EdmType::DateTime,
            Value::Guid(_) => EdmType::Guid,
            Value::Binary(_) => EdmType::Binary,
        }
    }

    /// The number of bytes this value counts for in the service's 1 MiB
    /// entity limit (strings count two bytes per UTF-16 unit).
    pub fn stored_size(&self) -> usize {
        match self {
            Value::String(s) => 4 + 2 * leasehold_rules::utf16_len(s),
            Value::Boolean(_) => 1,
            Value::Int32(_) => 4,
            Value::Int64(_) | Value::Double(_) | Value::DateTime(_) => 8,
            Value::Guid(_) => 16,
            Value::Binary(b) => 4 + b.len(),
        }
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Value::String(a), Value::String(b)) => a == b,
            (Value::Boolean(a), Value::Boolean(b)) => a == b,
            (Value::Int32(a), Value::Int32(b)) => a == b,
            (Value::Int64(a), Value::Int64(b)) => a == b,
            (Value::Double(a), Value::Double(b)) => a.to_bits() == b.to_bits(),
            (Value::DateTime(a), Value::DateTime(b)) => a == b,
            (Value::Guid(a), Value::Guid(b)) => a == b,
            (Value::Binary(a), Value::Binary(b)) => a == b,
            _ => false,
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::String(s) => write!(f, "{s:?}"),
            Value::Boolean(b) => write!(f, "{b}"),
            Value::Int32(i) => write!(f, "{i}"),
            Value::Int64(i) => write!(f, "{i}L"),
            Value::Double(d) => write!(f, "{d}"),
            Value::DateTime(d) => f.write_str(&crate::datetime::format(*d)),
            Value::Guid(g) => write!(f, "{g}"),
            Value::Binary(b) => write!(f, "{} bytes", b.len()),
        }
    }
}
