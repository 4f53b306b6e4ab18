//! `chrono::DateTime<Utc>` fields and key parts (feature `chrono`), stored
//! exactly as [`time::OffsetDateTime`] ones: `Edm.DateTime`, UTC, 100 ns.

use chrono::{DateTime, Utc};
use time::OffsetDateTime;

use super::codec::{DecodeError, EncodeError, PropertyCodec};
use super::value::{EdmType, Value};
use crate::datetime;
use crate::key::KeyPart;

/// The same instant as an `OffsetDateTime`, when `time` can hold it.
fn to_time(t: &DateTime<Utc>) -> Result<OffsetDateTime, String> {
    let nanos = i128::from(t.timestamp()) * 1_000_000_000 + i128::from(t.timestamp_subsec_nanos());
    OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .map_err(|_| format!("{t} is outside the Edm.DateTime range (1601 to 9999)"))
}

/// The same instant as a `DateTime<Utc>` (any Edm.DateTime fits).
fn from_time(t: OffsetDateTime) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(t.unix_timestamp(), t.nanosecond())
}

impl super::expiry::ExpiryInstant for DateTime<Utc> {
    /// `None` (never) for an instant outside what `time` represents.
    fn expiry_instant(&self) -> Option<OffsetDateTime> {
        to_time(self).ok()
    }
}

/// Finer digits than 100 ns are dropped, as the service would.
impl PropertyCodec for DateTime<Utc> {
    const EDM_TYPE: EdmType = EdmType::DateTime;
    fn encode(&self) -> Result<Option<Value>, EncodeError> {
        to_time(self)
            .and_then(datetime::normalize)
            .map(|t| Some(Value::DateTime(t)))
            .map_err(EncodeError)
    }
    fn decode(value: Option<Value>) -> Result<Self, DecodeError> {
        match value {
            Some(Value::DateTime(t)) => from_time(t)
                .ok_or_else(|| DecodeError::mismatch("Edm.DateTime", &Value::DateTime(t))),
            Some(other) => Err(DecodeError::mismatch("Edm.DateTime", &other)),
            None => Err(DecodeError::missing("Edm.DateTime")),
        }
    }
}

/// The same key text as `OffsetDateTime`; an instant outside the
/// Edm.DateTime range is written as the nearest end of the range.
impl KeyPart for DateTime<Utc> {
    fn write_key(&self, out: &mut String) {
        let t = to_time(self)
            .and_then(datetime::normalize)
            .unwrap_or(if self.timestamp() < 0 {
                datetime::MIN
            } else {
                datetime::MAX
            });
        t.write_key(out);
    }
    fn parse_key(s: &str) -> Result<Self, String> {
        let t = OffsetDateTime::parse_key(s)?;
        from_time(t).ok_or_else(|| "outside chrono's range".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_times_are_stored_at_100_ns_in_utc() {
        let t = DateTime::from_timestamp(1_700_000_000, 123_456_789).unwrap();
        let stored = t.encode().unwrap().unwrap();
        let back = DateTime::<Utc>::decode(Some(stored)).unwrap();
        assert_eq!(
            back,
            DateTime::from_timestamp(1_700_000_000, 123_456_700).unwrap()
        );
        assert_eq!(t.to_key(), "2023-11-14T22:13:20.1234567Z");
        assert_eq!(DateTime::<Utc>::parse_key(&t.to_key()).unwrap(), back);
        let far = DateTime::from_timestamp(300_000_000_000, 0).unwrap();
        assert!(far.encode().is_err());
        assert!(DateTime::<Utc>::decode(Some(Value::String("x".into()))).is_err());
    }

    #[test]
    fn key_order_is_time_order() {
        let a = DateTime::from_timestamp(-5, 0).unwrap();
        let b = DateTime::from_timestamp(0, 100).unwrap();
        let c = DateTime::from_timestamp(86_400 * 365, 0).unwrap();
        assert!(a.to_key() < b.to_key() && b.to_key() < c.to_key());
    }
}
