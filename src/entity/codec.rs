//! Codecs between Rust field types and EDM values.

use time::OffsetDateTime;
use uuid::Uuid;

use super::value::{EdmType, Value};
use crate::datetime;

/// Why a field could not be encoded (the caller adds which field).
#[derive(Debug, Clone, PartialEq)]
pub struct EncodeError(pub String);

/// Why a stored value could not be decoded (the caller adds which property).
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeError {
    /// What the field needs, such as `Edm.Int64`.
    pub expected: String,
    /// What was stored, such as `Edm.String "abc"` or `absent`.
    pub found: String,
}

impl DecodeError {
    /// A decode error for a value of the wrong type or out of range.
    pub fn mismatch(expected: impl Into<String>, found: &Value) -> Self {
        DecodeError {
            expected: expected.into(),
            found: describe(found),
        }
    }

    /// A decode error for a missing property.
    pub fn missing(expected: impl Into<String>) -> Self {
        DecodeError {
            expected: expected.into(),
            found: "absent".into(),
        }
    }
}

/// A short description of a stored value for error messages.
pub(crate) fn describe(value: &Value) -> String {
    let shown = match value {
        Value::String(s) if s.chars().count() > 32 => {
            format!("{:?}…", s.chars().take(32).collect::<String>())
        }
        other => other.to_string(),
    };
    format!("{} {shown}", value.edm_type())
}

/// A Rust type that can be stored as one property.
///
/// leasehold implements it for `String`, `bool`, all integers up to 64 bits,
/// `f64`, [`Uuid`], `Vec<u8>`, [`OffsetDateTime`] and `Option<T>`. Implement it
/// for your own types to store them as one of the eight EDM types:
///
/// ```
/// use leasehold::entity::{DecodeError, EdmType, EncodeError, PropertyCodec, Value};
///
/// /// Cents, stored as Edm.Int64.
/// #[derive(Debug, PartialEq)]
/// struct Cents(i64);
///
/// impl PropertyCodec for Cents {
///     const EDM_TYPE: EdmType = EdmType::Int64;
///     fn encode(&self) -> Result<Option<Value>, EncodeError> {
///         Ok(Some(Value::Int64(self.0)))
///     }
///     fn decode(value: Option<Value>) -> Result<Self, DecodeError> {
///         match value {
///             Some(Value::Int64(v)) => Ok(Cents(v)),
///             Some(other) => Err(DecodeError::mismatch("Edm.Int64", &other)),
///             None => Err(DecodeError::missing("Edm.Int64")),
///         }
///     }
/// }
/// assert_eq!(Cents::decode(Cents(5).encode().unwrap()), Ok(Cents(5)));
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be stored as an entity property",
    label = "unsupported field type",
    note = "supported: String, bool, integers, f64, Uuid, Vec<u8>, OffsetDateTime and Option of these",
    note = "a fieldless enum of your own: add `#[derive(leasehold::PropertyCodec)]` to it (stored by variant name, or with `#[entity(int32)]` by discriminant)",
    note = "any other type: mark the field `#[entity(json)]` to store it as JSON through serde, or implement `leasehold::entity::PropertyCodec` for it (a newtype stored as its inner value, say)"
)]
pub trait PropertyCodec: Sized {
    /// The EDM type this field is stored as (and compared as in queries).
    const EDM_TYPE: EdmType;

    /// Encodes the field; `None` means the property is absent.
    ///
    /// # Errors
    /// [`EncodeError`] when the value cannot be stored (out of range).
    fn encode(&self) -> Result<Option<Value>, EncodeError>;

    /// Decodes the field from the stored property, `None` when absent.
    ///
    /// # Errors
    /// [`DecodeError`] when the property is missing or of the wrong type.
    fn decode(value: Option<Value>) -> Result<Self, DecodeError>;
}

fn require(value: Option<Value>, expected: EdmType) -> Result<Value, DecodeError> {
    value.ok_or_else(|| DecodeError::missing(expected.odata_name()))
}

/// `PropertyCodec` for types stored as one EDM type as they are: `$variant`
/// holds the value; `$wider` are narrower values read into it (written by
/// another client without a type annotation).
macro_rules! stored_as_is {
    ($($t:ty => $variant:ident $(| $wider:ident)?),*) => {$(
        impl PropertyCodec for $t {
            const EDM_TYPE: EdmType = EdmType::$variant;
            fn encode(&self) -> Result<Option<Value>, EncodeError> {
                Ok(Some(Value::$variant(<$t as Clone>::clone(self))))
            }
            fn decode(value: Option<Value>) -> Result<Self, DecodeError> {
                match require(value, Self::EDM_TYPE)? {
                    Value::$variant(v) => Ok(v),
                    $(Value::$wider(v) => Ok(<$t>::from(v)),)?
                    other => Err(DecodeError::mismatch(concat!("Edm.", stringify!($variant)), &other)),
                }
            }
        }
    )*};
}
stored_as_is!(
    String => String,
    bool => Boolean,
    i32 => Int32,
    i64 => Int64 | Int32,
    f64 => Double | Int32,
    Uuid => Guid
);

// Written out: a field of another `Vec` is told this impl exists, and the
// diagnostic shows it (the compile-fail tests pin a plain impl, not a macro).
impl PropertyCodec for Vec<u8> {
    const EDM_TYPE: EdmType = EdmType::Binary;
    fn encode(&self) -> Result<Option<Value>, EncodeError> {
        Ok(Some(Value::Binary(self.clone())))
    }
    fn decode(value: Option<Value>) -> Result<Self, DecodeError> {
        match require(value, Self::EDM_TYPE)? {
            Value::Binary(v) => Ok(v),
            other => Err(DecodeError::mismatch("Edm.Binary", &other)),
        }
    }
}

// Small integers are widened to Edm.Int32 and narrowed back with a check.
macro_rules! narrow_int32 {
    ($($t:ty),*) => {$(
        impl PropertyCodec for $t {
            const EDM_TYPE: EdmType = EdmType::Int32;
            fn encode(&self) -> Result<Option<Value>, EncodeError> {
                Ok(Some(Value::Int32(i32::from(*self))))
            }
            fn decode(value: Option<Value>) -> Result<Self, DecodeError> {
                let expected = concat!("Edm.Int32 in the range of ", stringify!($t));
                match require(value, Self::EDM_TYPE)? {
                    Value::Int32(v) => <$t>::try_from(v).map_err(|_| DecodeError::mismatch(expected, &Value::Int32(v))),
                    other => Err(DecodeError::mismatch(expected, &other)),
                }
            }
        }
    )*};
}
narrow_int32!(i8, i16, u8, u16);

impl PropertyCodec for u32 {
    const EDM_TYPE: EdmType = EdmType::Int64;
    fn encode(&self) -> Result<Option<Value>, EncodeError> {
        Ok(Some(Value::Int64(i64::from(*self))))
    }
    fn decode(value: Option<Value>) -> Result<Self, DecodeError> {
        int64_in_range(value, "Edm.Int64 in the range of u32")
    }
}

impl PropertyCodec for u64 {
    const EDM_TYPE: EdmType = EdmType::Int64;
    fn encode(&self) -> Result<Option<Value>, EncodeError> {
        i64::try_from(*self)
            .map(|v| Some(Value::Int64(v)))
            .map_err(|_| {
                EncodeError(format!(
                    "{self} does not fit Edm.Int64 (at most {})",
                    i64::MAX
                ))
            })
    }
    fn decode(value: Option<Value>) -> Result<Self, DecodeError> {
        int64_in_range(value, "Edm.Int64 in the range of u64")
    }
}

/// An Edm.Int64 (or Edm.Int32) value that `T` holds.
fn int64_in_range<T: TryFrom<i64>>(value: Option<Value>, expected: &str) -> Result<T, DecodeError> {
    let value = require(value, EdmType::Int64)?;
    let n = match value {
        Value::Int64(n) => Some(n),
        Value::Int32(n) => Some(i64::from(n)),
        _ => None,
    };
    n.and_then(|n| T::try_from(n).ok())
        .ok_or_else(|| DecodeError::mismatch(expected, &value))
}

impl PropertyCodec for OffsetDateTime {
    const EDM_TYPE: EdmType = EdmType::DateTime;
    /// Date-times are stored in UTC with 100 ns resolution: finer digits are
    /// dropped, as the service would.
    fn encode(&self) -> Result<Option<Value>, EncodeError> {
        datetime::normalize(*self)
            .map(|t| Some(Value::DateTime(t)))
            .map_err(EncodeError)
    }
    fn decode(value: Option<Value>) -> Result<Self, DecodeError> {
        match require(value, Self::EDM_TYPE)? {
            Value::DateTime(v) => Ok(v),
            other => Err(DecodeError::mismatch("Edm.DateTime", &other)),
        }
    }
}

impl<T: PropertyCodec> PropertyCodec for Option<T> {
    const EDM_TYPE: EdmType = T::EDM_TYPE;
    fn encode(&self) -> Result<Option<Value>, EncodeError> {
        match self {
            Some(v) => v.encode(),
            None => Ok(None),
        }
    }
    fn decode(value: Option<Value>) -> Result<Self, DecodeError> {
        match value {
            None => Ok(None),
            some => T::decode(some).map(Some),
        }
    }
}

/// Encodes any serde value as a JSON string property (`#[entity(json)]`).
///
/// # Errors
/// [`EncodeError`] when serde_json cannot serialize the value.
pub(crate) fn encode_json<T: serde::Serialize>(value: &T) -> Result<Option<Value>, EncodeError> {
    serde_json::to_string(value)
        .map(|s| Some(Value::String(s)))
        .map_err(|e| EncodeError(format!("cannot serialize as JSON: {e}")))
}

/// `T`'s name as written in code, without module paths: `Vec<String>` for
/// `alloc::vec::Vec<alloc::string::String>`.
pub(crate) fn short_type_name<T: ?Sized>() -> String {
    let full = std::any::type_name::<T>();
    let mut out = String::with_capacity(full.len());
    let mut word = String::new();
    let mut chars = full.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
        } else if c == ':' && chars.peek() == Some(&':') && !word.is_empty() {
            // `path::` before the last segment: dropped.
            chars.next();
            word.clear();
        } else {
            out.push_str(&word);
            word.clear();
            out.push(c);
        }
    }
    out.push_str(&word);
    out
}

/// Decodes a JSON string property into any serde value (`#[entity(json)]`).
/// An absent property decodes as JSON `null`, so `Option` fields may be absent.
///
/// # Errors
/// [`DecodeError`] when the property is not a string of valid JSON for `T`.
pub(crate) fn decode_json<T: serde::de::DeserializeOwned>(
    value: Option<Value>,
) -> Result<T, DecodeError> {
    let expected = || format!("Edm.String holding JSON for {}", short_type_name::<T>());
    match value {
        None => serde_json::from_str("null").map_err(|_| DecodeError::missing(expected())),
        Some(Value::String(s)) => serde_json::from_str(&s).map_err(|e| DecodeError {
            expected: expected(),
            found: format!("Edm.String that does not parse: {e}"),
        }),
        Some(other) => Err(DecodeError::mismatch(expected(), &other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<T: PropertyCodec + PartialEq + std::fmt::Debug>(v: T) {
        let encoded = v.encode().unwrap();
        assert_eq!(T::decode(encoded).unwrap(), v);
    }

    #[test]
    fn short_type_names_drop_module_paths() {
        assert_eq!(short_type_name::<Vec<String>>(), "Vec<String>");
        assert_eq!(
            short_type_name::<std::collections::HashMap<String, Option<u8>>>(),
            "HashMap<String, Option<u8>>"
        );
        assert_eq!(short_type_name::<(u8, &str)>(), "(u8, &str)");
        assert_eq!(short_type_name::<[u8; 4]>(), "[u8; 4]");
    }

    #[test]
    fn integers_widen_and_narrow_with_checks() {
        round_trip(u8::MAX);
        round_trip(i16::MIN);
        round_trip(u32::MAX);
        round_trip(i64::MIN);
        round_trip(i64::MAX);
        round_trip((1u64 << 53) + 1);
        assert!(u64::MAX.encode().is_err());
        let e = u8::decode(Some(Value::Int32(300))).unwrap_err();
        assert_eq!(e.found, "Edm.Int32 300");
        assert_eq!(i64::decode(Some(Value::Int32(7))).unwrap(), 7);
        assert!(i32::decode(Some(Value::Int64(7))).is_err());
    }

    #[test]
    fn option_means_absent() {
        assert_eq!(None::<i32>.encode().unwrap(), None);
        assert_eq!(Option::<i32>::decode(None).unwrap(), None);
        assert_eq!(i32::decode(None).unwrap_err().found, "absent");
    }

    #[test]
    fn json_fields() {
        let v = vec!["a".to_string(), "b".to_string()];
        let enc = encode_json(&v).unwrap();
        assert_eq!(enc, Some(Value::String(r#"["a","b"]"#.into())));
        assert_eq!(decode_json::<Vec<String>>(enc).unwrap(), v);
        assert_eq!(decode_json::<Option<u8>>(None).unwrap(), None);
        assert!(decode_json::<Vec<String>>(None).is_err());
        assert!(decode_json::<Vec<String>>(Some(Value::String("{".into()))).is_err());
    }
}
