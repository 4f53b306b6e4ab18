//! Building [`PartitionKey`]s and [`RowKey`]s from strings, checked against
//! the service's key rules, and the conversions that do it
//! ([`IntoPartitionKey`], [`IntoRowKey`], `TryFrom`, `FromStr`).

use super::keys::{PartitionKey, RowKey, shorten};
use crate::error::{Error, Result};

macro_rules! key_validation {
    ($name:ident, $label:literal) => {
        impl $name {
            /// Validates a key: at most [`MAX_BYTES`](Self::MAX_BYTES) as
            /// UTF-16, none of `/ \ # ?` nor control characters.
            ///
            /// # Errors
            /// [`Error::Invalid`] naming the key when it breaks a rule.
            pub fn new(key: impl Into<String>) -> Result<Self> {
                let key = key.into();
                match leasehold_rules::key_problem(&key) {
                    None => Ok($name::from_valid(key)),
                    Some(why) => Err(Error::invalid(format!("{} {}", $label, shorten(&key)), why)),
                }
            }
        }

        impl TryFrom<&str> for $name {
            type Error = Error;
            fn try_from(s: &str) -> Result<Self> {
                $name::new(s)
            }
        }

        impl TryFrom<String> for $name {
            type Error = Error;
            fn try_from(s: String) -> Result<Self> {
                $name::new(s)
            }
        }

        impl std::str::FromStr for $name {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self> {
                $name::new(s)
            }
        }
    };
}

key_validation!(PartitionKey, "partition key");
key_validation!(RowKey, "row key");

/// Anything that names a partition: `&str`, `String`, or a [`PartitionKey`].
///
/// Strings are validated on conversion.
pub trait IntoPartitionKey {
    /// Converts and validates.
    ///
    /// # Errors
    /// [`Error::Invalid`] when the key breaks the service's key rules.
    fn into_partition_key(self) -> Result<PartitionKey>;
}

/// Anything that names a row: `&str`, `String`, or a [`RowKey`].
///
/// Strings are validated on conversion.
pub trait IntoRowKey {
    /// Converts and validates.
    ///
    /// # Errors
    /// [`Error::Invalid`] when the key breaks the service's key rules.
    fn into_row_key(self) -> Result<RowKey>;
}

macro_rules! into_key {
    ($trait:ident, $method:ident, $key:ident) => {
        impl $trait for $key {
            fn $method(self) -> Result<$key> {
                Ok(self)
            }
        }
        impl $trait for &$key {
            fn $method(self) -> Result<$key> {
                Ok(self.clone())
            }
        }
        impl $trait for &str {
            fn $method(self) -> Result<$key> {
                $key::new(self)
            }
        }
        impl $trait for String {
            fn $method(self) -> Result<$key> {
                $key::new(self)
            }
        }
        impl $trait for &String {
            fn $method(self) -> Result<$key> {
                $key::new(self.as_str())
            }
        }
    };
}
into_key!(IntoPartitionKey, into_partition_key, PartitionKey);
into_key!(IntoRowKey, into_row_key, RowKey);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_reject_forbidden_characters_and_length() {
        for bad in [
            "a/b", "a\\b", "a#b", "a?b", "a\u{0}", "a\u{1f}", "\u{7f}", "\u{9f}",
        ] {
            let e = PartitionKey::new(bad).unwrap_err();
            assert!(e.to_string().contains("partition key"), "{e}");
        }
        assert!(RowKey::new("x".repeat(512)).is_ok());
        let e = RowKey::new("x".repeat(513)).unwrap_err();
        assert!(e.to_string().contains("row key"), "{e}");
        assert!(RowKey::new("o'brien %+ é 日本").is_ok());
        assert!(RowKey::new("").is_ok());
        assert_eq!(PartitionKey::MAX_BYTES, 1024);
        assert_eq!(RowKey::MAX_BYTES, 1024);
    }
}
