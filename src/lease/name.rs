//! Lease names and their injective encoding into blob names (see
//! [`LeaseName`]).

use std::fmt::Write as _;

use crate::error::{Error, Result};
use crate::key::{BlobName, shorten};

/// The character that starts an escape in an encoded lease name.
const ESCAPE: u8 = b'~';

/// A validated lease name: any non-empty string of at most
/// [`LeaseName::MAX_LEN`] bytes of UTF-8.
///
/// Each name is stored in its own blob ([`LeaseName::blob_name`]), whose name
/// is the lease name with every byte outside a small safe set escaped (the
/// leases of a store with a table prefix put `{prefix}/` in front, see
/// [`StoreBuilder::table_prefix`](crate::StoreBuilder::table_prefix)):
///
/// | input | blob name |
/// |---|---|
/// | ASCII letters `A–Z`, `a–z`, digits `0–9`, `-`, `_` | the character itself |
/// | every other byte of the UTF-8 encoding (including `~`, `.`, `/`, `%`, spaces, non-ASCII) | `~` and two uppercase hex digits |
///
/// So `orders/2024` becomes `orders~2F2024` and `é` becomes `~C3~A9`. The
/// encoding is injective (`~` always starts an escape), keeps case, and
/// always gives a valid blob name: no `/`, never ending in `.`, at most
/// 768 characters.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseName(String);

impl LeaseName {
    /// The longest lease name, in bytes of UTF-8.
    pub const MAX_LEN: usize = 256;

    /// Validates a lease name.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the lease when it is empty or longer than
    /// [`LeaseName::MAX_LEN`] bytes.
    pub fn new(name: impl Into<String>) -> Result<Self> {
        let name = name.into();
        if name.is_empty() {
            return Err(Error::invalid("lease name \"\"", "must not be empty"));
        }
        if name.len() > Self::MAX_LEN {
            return Err(Error::invalid(
                format!("lease name {}", shorten(&name)),
                format!(
                    "is {} bytes of UTF-8; lease names are limited to {}",
                    name.len(),
                    Self::MAX_LEN
                ),
            ));
        }
        Ok(LeaseName(name))
    }

    /// The name as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The encoded form, as used for the blob name.
    pub fn encoded(&self) -> String {
        let mut out = String::with_capacity(self.0.len());
        for &b in self.0.as_bytes() {
            if is_safe(b) {
                out.push(char::from(b));
            } else {
                let _ = write!(out, "{}{b:02X}", char::from(ESCAPE));
            }
        }
        out
    }

    /// The blob that stores this lease.
    ///
    /// # Errors
    /// None in practice: the encoding always yields a valid blob name.
    pub fn blob_name(&self) -> Result<BlobName> {
        BlobName::new(self.encoded())
    }

    /// Decodes a blob name written by [`LeaseName::blob_name`].
    ///
    /// # Errors
    /// [`Error::Invalid`] when `blob` is not the encoding of any lease name.
    pub fn from_blob_name(blob: &str) -> Result<Self> {
        let bad = |why: &str| Error::invalid(format!("encoded lease name {}", shorten(blob)), why);
        let bytes = blob.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while let Some(&b) = bytes.get(i) {
            if is_safe(b) {
                out.push(b);
                i += 1;
            } else if b == ESCAPE {
                let upper_hex =
                    |h: &&str| h.bytes().all(|c| matches!(c, b'0'..=b'9' | b'A'..=b'F'));
                let hex = blob.get(i + 1..i + 3).filter(upper_hex);
                let Some(decoded) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) else {
                    return Err(bad("`~` must be followed by two uppercase hex digits"));
                };
                if is_safe(decoded) {
                    return Err(bad("escapes a character that stands for itself"));
                }
                out.push(decoded);
                i += 3;
            } else {
                return Err(bad("contains a character outside the encoding's alphabet"));
            }
        }
        let name = String::from_utf8(out).map_err(|_| bad("does not decode to UTF-8"))?;
        LeaseName::new(name)
    }
}

/// Bytes that stand for themselves in an encoded name.
fn is_safe(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

impl AsRef<str> for LeaseName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// `TryFrom` the string types, validated by [`LeaseName::new`].
macro_rules! lease_name_from {
    ($($from:ty),*) => {$(
        impl TryFrom<$from> for LeaseName {
            type Error = Error;
            fn try_from(s: $from) -> Result<Self> {
                LeaseName::new(AsRef::<str>::as_ref(&s))
            }
        }
    )*};
}
lease_name_from!(&str, String, &String, &LeaseName);

impl std::str::FromStr for LeaseName {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        LeaseName::new(s)
    }
}

crate::key::shown_as_text!(LeaseName);

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use proptest::prelude::*;

    use super::*;
    use crate::error::ErrorKind;

    fn enc(s: &str) -> String {
        LeaseName::new(s).unwrap().encoded()
    }

    #[test]
    fn safe_characters_stand_for_themselves() {
        assert_eq!(enc("Job-42_a"), "Job-42_a");
        assert_eq!(enc("orders/2024"), "orders~2F2024");
        assert_eq!(enc("a.b"), "a~2Eb");
        assert_eq!(enc("50%"), "50~25");
        assert_eq!(enc("~"), "~7E");
        assert_eq!(enc("é"), "~C3~A9");
        assert_eq!(enc("."), "~2E");
    }

    #[test]
    fn encoding_is_injective_on_tricky_names() {
        let names = [
            "a", "A", "job", "Job", "JOB", "a/b", "a~2Fb", "a%2Fb", "a%2fb", "a_2Fb", "a b", "a+b",
            "a/", "a//b", "/a", "~", "~7E", "%", ".", "..", "a.", "é", "e\u{301}", "\u{0}",
            "\u{7f}", "日本",
        ];
        let mut seen = HashSet::new();
        for n in names {
            let encoded = enc(n);
            assert!(
                seen.insert(encoded.clone()),
                "{n:?} collides as {encoded:?}"
            );
            assert_eq!(LeaseName::from_blob_name(&encoded).unwrap().as_str(), n);
            let blob = LeaseName::new(n).unwrap().blob_name().unwrap();
            assert!(!blob.as_str().contains('/'), "{blob:?}");
        }
    }

    #[test]
    fn names_are_validated() {
        let e = LeaseName::new("").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid);
        assert!(e.to_string().contains("lease name"), "{e}");
        assert!(LeaseName::new("x".repeat(LeaseName::MAX_LEN)).is_ok());
        let e = LeaseName::new("x".repeat(LeaseName::MAX_LEN + 1)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid);
        // The longest name of the widest characters still makes a valid blob name.
        let wide = "\u{10FFFF}".repeat(LeaseName::MAX_LEN / 4);
        assert!(LeaseName::new(wide).unwrap().blob_name().is_ok());
    }

    #[test]
    fn decoding_rejects_non_canonical_forms() {
        for bad in ["a/b", "~2f", "~41", "~", "~4", "~ZZ", "a.b", "~FF", ""] {
            assert!(LeaseName::from_blob_name(bad).is_err(), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn encoding_round_trips_and_is_valid(s in "\\PC{1,60}") {
            let name = LeaseName::new(s.clone()).unwrap();
            let blob = name.blob_name().unwrap();
            prop_assert_eq!(LeaseName::from_blob_name(blob.as_str()).unwrap(), name);
        }

        #[test]
        fn distinct_names_give_distinct_blobs(a in ".{1,12}", b in ".{1,12}") {
            prop_assume!(a != b);
            prop_assert_ne!(
                LeaseName::new(a).unwrap().encoded(),
                LeaseName::new(b).unwrap().encoded()
            );
        }
    }
}
