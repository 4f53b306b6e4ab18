//! [`KeyPart`]: the Rust types a key (or a part of a composite key) is
//! made of, written so that key order is value order.

use time::OffsetDateTime;
use uuid::Uuid;

/// A Rust type that can be (part of) a partition or row key.
///
/// Encodings keep order: for two values `a < b`, the encoded strings compare
/// the same way, so key ranges over encoded keys are ranges over values.
/// Integers are written with a fixed width; `OffsetDateTime` as UTC with seven
/// fractional digits; `Uuid` as lowercase hyphenated hex.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be part of a partition or row key",
    label = "unsupported key type",
    note = "supported: String, integers, Uuid and OffsetDateTime; or implement `leasehold::key::KeyPart`"
)]
pub trait KeyPart: Sized {
    /// Appends this value's key form.
    fn write_key(&self, out: &mut String);

    /// Parses a value from its key form.
    ///
    /// # Errors
    /// A message saying why `s` is not a key form of this type.
    fn parse_key(s: &str) -> std::result::Result<Self, String>;

    /// This value's key form as a new string.
    fn to_key(&self) -> String {
        let mut s = String::new();
        self.write_key(&mut s);
        s
    }
}

impl KeyPart for String {
    fn write_key(&self, out: &mut String) {
        out.push_str(self);
    }
    fn parse_key(s: &str) -> std::result::Result<Self, String> {
        Ok(s.to_owned())
    }
}

macro_rules! unsigned_key_part {
    ($($t:ty => $width:expr),*) => {$(
        impl KeyPart for $t {
            fn write_key(&self, out: &mut String) {
                use std::fmt::Write;
                let _ = write!(out, "{:0width$}", self, width = $width);
            }
            fn parse_key(s: &str) -> std::result::Result<Self, String> {
                if s.len() != $width || !s.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(format!("expected {} decimal digits, found {s:?}", $width));
                }
                s.parse().map_err(|e| format!("{e}"))
            }
        }
    )*};
}
unsigned_key_part!(u8 => 3, u16 => 5, u32 => 10, u64 => 20);

macro_rules! signed_key_part {
    ($($t:ty as $u:ty => $width:expr),*) => {$(
        impl KeyPart for $t {
            fn write_key(&self, out: &mut String) {
                // Flip the sign bit so that the unsigned order is the signed order.
                let biased = (*self as $u) ^ (1 << (<$u>::BITS - 1));
                biased.write_key(out);
            }
            fn parse_key(s: &str) -> std::result::Result<Self, String> {
                let biased = <$u>::parse_key(s)?;
                Ok((biased ^ (1 << (<$u>::BITS - 1))) as $t)
            }
        }
    )*};
}
signed_key_part!(i8 as u8 => 3, i16 as u16 => 5, i32 as u32 => 10, i64 as u64 => 20);

impl KeyPart for Uuid {
    fn write_key(&self, out: &mut String) {
        out.push_str(&self.hyphenated().to_string());
    }
    fn parse_key(s: &str) -> std::result::Result<Self, String> {
        Uuid::parse_str(s).map_err(|e| format!("{e}"))
    }
}

impl KeyPart for OffsetDateTime {
    fn write_key(&self, out: &mut String) {
        out.push_str(&crate::datetime::format(*self));
    }
    fn parse_key(s: &str) -> std::result::Result<Self, String> {
        crate::datetime::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_key_parts_keep_order() {
        let values = [i64::MIN, -5, -1, 0, 1, 42, i64::MAX];
        let keys: Vec<String> = values.iter().map(KeyPart::to_key).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:?}");
        for (v, k) in values.iter().zip(&keys) {
            assert_eq!(i64::parse_key(k).unwrap(), *v);
        }
        assert_eq!(7u32.to_key(), "0000000007");
        assert!(u32::parse_key("7").is_err());
    }
}
