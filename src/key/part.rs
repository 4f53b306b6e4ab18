//! [`KeyPart`]: the Rust types a key (or a part of a composite key) is
//! made of, written so that key order is value order.

use time::OffsetDateTime;
use uuid::Uuid;

/// A Rust type that can be (part of) a partition or row key.
///
/// Encodings keep order: for two values `a < b`, the encoded strings compare
/// the same way. Integers are written with a fixed width (which is also
/// their [`FixedKeyPart::MAX_KEY_LEN`]); `OffsetDateTime` as UTC with seven
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
    /// A message saying why `s` is not a key form of this type, such as
    /// `not 5 decimal digits` (leasehold adds the type and `s`).
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
                    return Err(format!("not {} decimal digits", $width));
                }
                // Fixed-width digits only fail to parse by being too large.
                s.parse().map_err(|_| format!("above {}", <$t>::MAX))
            }
        }

        impl FixedKeyPart for $t {
            const MAX_KEY_LEN: usize = $width;
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

        impl FixedKeyPart for $t {
            const MAX_KEY_LEN: usize = $width;
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
        use time::format_description::well_known::Rfc3339;
        let t = OffsetDateTime::parse(s, &Rfc3339).map_err(|e| e.to_string())?;
        crate::datetime::normalize(t)
    }
}

/// A [`KeyPart`] whose key form is always valid in a key and never longer
/// than [`FixedKeyPart::MAX_KEY_LEN`]: integers, [`Uuid`], [`OffsetDateTime`]
/// (and `chrono::DateTime<Utc>`). Keys made only of such parts cannot fail
/// to build, so `#[derive(Entity)]` gives their builders without a
/// `Result`. Only leasehold implements it; generated code names it through
/// `__private`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not one of leasehold's fixed-width key parts",
    label = "the key builder takes this type by its name for a key part that cannot fail",
    note = "`#[derive(Entity)]` builds a key without a `Result` when every part is written as an integer type, `Uuid`, `OffsetDateTime` or `DateTime<Utc>`",
    note = "a type of your own with one of these names: write it with its path (`crate::ids::Uuid`) or through a type alias, and the builder returns a `Result`"
)]
pub trait FixedKeyPart: KeyPart {
    /// The longest key form, in characters (all ASCII), as escaped in a
    /// composite key ([`CompositeKey::join`](super::CompositeKey::join)
    /// escapes `.` as two characters).
    const MAX_KEY_LEN: usize;
}

impl FixedKeyPart for Uuid {
    const MAX_KEY_LEN: usize = 36;
}
/// `2024-01-02T03:04:05.1234567Z`; a year outside 0..=9999 takes a sign
/// and up to six digits, and the `.` is escaped in a composite key.
impl FixedKeyPart for OffsetDateTime {
    const MAX_KEY_LEN: usize = 32;
}
#[cfg(feature = "chrono")]
impl FixedKeyPart for chrono::DateTime<chrono::Utc> {
    const MAX_KEY_LEN: usize = <OffsetDateTime as FixedKeyPart>::MAX_KEY_LEN;
}

/// Whether a composite key of parts whose longest forms are `max_lens`
/// always fits the key limit (for `#[derive(Entity)]`'s compile-time check).
pub const fn fixed_parts_fit(max_lens: &[usize]) -> bool {
    let mut total = 0;
    let mut i = 0;
    while i < max_lens.len() {
        // One separator between parts.
        total += max_lens[i] + if i > 0 { 1 } else { 0 };
        i += 1;
    }
    // Every character is ASCII: one UTF-16 unit, two bytes.
    2 * total <= leasehold_rules::MAX_KEY_BYTES
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
        assert_eq!(u32::parse_key("7").unwrap_err(), "not 10 decimal digits");
        assert_eq!(u8::parse_key("999").unwrap_err(), "above 255");
    }

    /// Every form of a fixed part (at the ends of its range, escaped as a
    /// composite part) is a valid key and no longer than `MAX_KEY_LEN`.
    fn assert_fixed<T: FixedKeyPart>(values: &[T]) {
        for v in values {
            let single = v.to_key();
            let escaped = super::super::CompositeKey::join([single.as_str()]);
            for form in [&single, &escaped] {
                assert!(form.is_ascii(), "{form:?}");
                assert!(form.len() <= T::MAX_KEY_LEN, "{form:?}");
                assert!(leasehold_rules::key_problem(form).is_none(), "{form:?}");
            }
        }
    }

    #[test]
    fn fixed_parts_are_valid_keys_within_their_length() {
        assert_fixed(&[u8::MIN, u8::MAX]);
        assert_fixed(&[u16::MIN, u16::MAX]);
        assert_fixed(&[u32::MIN, u32::MAX]);
        assert_fixed(&[u64::MIN, u64::MAX]);
        assert_fixed(&[i8::MIN, i8::MAX]);
        assert_fixed(&[i16::MIN, i16::MAX]);
        assert_fixed(&[i32::MIN, i32::MAX]);
        assert_fixed(&[i64::MIN, i64::MAX]);
        assert_fixed(&[Uuid::nil(), Uuid::max()]);
        let date_time = |d: time::Date| {
            d.with_hms_nano(23, 59, 59, 999_999_999)
                .unwrap()
                .assume_utc()
        };
        assert_fixed(&[
            date_time(time::Date::MIN),
            date_time(time::Date::MAX),
            time::macros::datetime!(2024-02-29 12:34:56.1234567 +05:00),
        ]);
        #[cfg(feature = "chrono")]
        assert_fixed(&[
            chrono::DateTime::<chrono::Utc>::MIN_UTC,
            chrono::DateTime::<chrono::Utc>::MAX_UTC,
        ]);
        // 13 of the longest part fit, 14 do not.
        assert!(fixed_parts_fit(&[36; 13]));
        assert!(!fixed_parts_fit(&[36; 14]));
        assert!(fixed_parts_fit(&[511]) && fixed_parts_fit(&[512]) && !fixed_parts_fit(&[513]));
    }
}
