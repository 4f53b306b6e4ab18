//! Validated names and keys, and the composite-key encoding.
//!
//! Everything that names a row is checked here, once, at the boundary:
//! [`TableName`], [`PartitionKey`] and [`RowKey`] can only hold values the
//! Table service accepts, so code past this point never re-checks them.
//!
//! Keys built from several fields use [`CompositeKey`], an encoding that keeps
//! the tuple order of the parts (so key ranges and sorted scans behave as the
//! tuples would), escapes every character the service forbids, and parses back.

use std::borrow::Borrow;
use std::fmt;
use std::sync::Arc;

use time::OffsetDateTime;
use uuid::Uuid;

use crate::entity::utf16_len;
use crate::error::{Error, Result};

/// The largest key, in bytes of UTF-16 (the service stores keys as UTF-16).
pub const MAX_KEY_BYTES: usize = 1024;

/// A table name: `^[A-Za-z][A-Za-z0-9]{2,62}$`, not `tables`.
///
/// Table names are case-insensitive in the service; leasehold keeps the
/// spelling it was given and compares case-insensitively.
#[derive(Clone, Eq)]
pub struct TableName(String);

impl TableName {
    /// Validates a table name.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the table when it breaks the service's rule.
    pub fn new(name: impl Into<String>) -> Result<Self> {
        let name = name.into();
        match table_name_problem(&name) {
            None => Ok(TableName(name)),
            Some(why) => Err(Error::invalid(format!("table name {name:?}"), why)),
        }
    }

    /// The name as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Why `name` is not a valid table name, or `None` when it is. Shared with the
/// derive macro's compile-time check through `__private`.
pub fn table_name_problem(name: &str) -> Option<&'static str> {
    let bytes = name.as_bytes();
    if bytes.len() < 3 || bytes.len() > 63 {
        return Some("must be 3 to 63 characters long");
    }
    if !bytes[0].is_ascii_alphabetic() {
        return Some("must start with a letter");
    }
    if !bytes.iter().all(u8::is_ascii_alphanumeric) {
        return Some("may contain only ASCII letters and digits");
    }
    if name.eq_ignore_ascii_case("tables") {
        return Some("`tables` is reserved");
    }
    None
}

impl PartialEq for TableName {
    fn eq(&self, other: &Self) -> bool {
        self.0.eq_ignore_ascii_case(&other.0)
    }
}

impl std::hash::Hash for TableName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // Hashes the lowercase spelling in one write (a valid name is at most
        // 63 ASCII bytes), consistent with the case-insensitive `eq`.
        let mut lower = [0u8; 64];
        let mut len = 0;
        for chunk in self.0.as_bytes().chunks(lower.len()) {
            for (slot, b) in lower.iter_mut().zip(chunk) {
                *slot = b.to_ascii_lowercase();
            }
            state.write(&lower[..chunk.len()]);
            len += chunk.len();
        }
        state.write_usize(len);
    }
}

impl PartialOrd for TableName {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for TableName {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0
            .bytes()
            .map(|b| b.to_ascii_lowercase())
            .cmp(other.0.bytes().map(|b| b.to_ascii_lowercase()))
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TableName({:?})", self.0)
    }
}

impl std::str::FromStr for TableName {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        TableName::new(s)
    }
}

/// Why `key` is not a valid partition or row key, or `None` when it is.
pub fn key_problem(key: &str) -> Option<String> {
    if 2 * utf16_len(key) > MAX_KEY_BYTES {
        return Some(format!(
            "is {} bytes as UTF-16; keys are limited to {MAX_KEY_BYTES}",
            2 * utf16_len(key)
        ));
    }
    if let Some(c) = key.chars().find(|&c| is_forbidden_key_char(c)) {
        return Some(format!("contains the forbidden character {c:?}"));
    }
    None
}

/// Orders keys (and string values) as the service does: by UTF-16 code unit.
pub fn compare_keys(a: &str, b: &str) -> std::cmp::Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// Characters the service forbids in keys: `/ \ # ?` and control characters.
pub fn is_forbidden_key_char(c: char) -> bool {
    matches!(c, '/' | '\\' | '#' | '?' | '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}')
}

macro_rules! key_type {
    ($(#[$doc:meta])* $name:ident, $label:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $name(String);

        impl $name {
            /// Validates a key: at most 1 KiB as UTF-16, none of `/ \ # ?`
            /// nor control characters.
            ///
            /// # Errors
            /// [`Error::Invalid`] naming the key when it breaks a rule.
            pub fn new(key: impl Into<String>) -> Result<Self> {
                let key = key.into();
                match key_problem(&key) {
                    None => Ok($name(key)),
                    Some(why) => Err(Error::invalid(format!("{} {}", $label, shorten(&key)), why)),
                }
            }

            /// The key as a string.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The key as an owned string.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
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

key_type!(
    /// A validated `PartitionKey`.
    PartitionKey,
    "partition key"
);
key_type!(
    /// A validated `RowKey`.
    RowKey,
    "row key"
);

/// A key as it appears in an error message: long keys are cut.
pub(crate) fn shorten(key: &str) -> String {
    const MAX: usize = 64;
    if key.chars().count() <= MAX {
        format!("{key:?}")
    } else {
        let head: String = key.chars().take(MAX).collect();
        format!("{head:?}… ({} chars)", key.chars().count())
    }
}

/// An entity tag: the version of an entity or blob, as the service gave it.
///
/// Opaque: compare it, send it back, never parse it. Cheap to clone (the
/// text is shared).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ETag(Arc<str>);

/// See [`ETag::superseded`]: the service's shape, at a time no write of
/// the service ever carries.
const SUPERSEDED_ETAG: &str = "W/\"datetime'1601-01-01T00%3A00%3A00.0000000Z'\"";

impl ETag {
    /// Wraps an ETag received from the service.
    pub fn new(tag: impl Into<String>) -> Self {
        ETag(Arc::from(tag.into()))
    }

    /// The ETag reported for a write known to have been applied whose own
    /// ETag could not be learnt because its reply was lost and later writes
    /// have replaced it since. It matches no stored entity, as the lost one
    /// no longer would: a conditional write based on it fails with
    /// [`Error::Conflict`].
    pub fn superseded() -> Self {
        ETag(SUPERSEDED_ETAG.into())
    }

    /// Whether this is [`ETag::superseded`].
    pub fn is_superseded(&self) -> bool {
        &*self.0 == SUPERSEDED_ETAG
    }

    /// The ETag as sent in `If-Match`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ETag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ETag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ETag({})", self.0)
    }
}

/// A blob container name: 3 to 63 lowercase letters, digits and single
/// hyphens, starting and ending with a letter or digit.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContainerName(String);

impl ContainerName {
    /// Validates a container name.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the container when it breaks the rule.
    pub fn new(name: impl Into<String>) -> Result<Self> {
        let name = name.into();
        let b = name.as_bytes();
        let why = if b.len() < 3 || b.len() > 63 {
            Some("must be 3 to 63 characters long")
        } else if !b
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        {
            Some("may contain only lowercase letters, digits and hyphens")
        } else if b[0] == b'-' || b[b.len() - 1] == b'-' {
            Some("must start and end with a letter or digit")
        } else if name.contains("--") {
            Some("must not contain two hyphens in a row")
        } else {
            None
        };
        match why {
            None => Ok(ContainerName(name)),
            Some(why) => Err(Error::invalid(format!("container name {name:?}"), why)),
        }
    }

    /// A name leasehold itself spells out (its default containers), which
    /// follows the rule: a unit test beside each such name checks it with
    /// [`ContainerName::new`].
    pub(crate) fn from_static(name: &'static str) -> Self {
        ContainerName(name.to_owned())
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ContainerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ContainerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ContainerName({:?})", self.0)
    }
}

/// A blob name: 1 to 1024 characters, no control characters, not ending in
/// `.` or `/`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlobName(String);

impl BlobName {
    /// Validates a blob name.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the blob when it breaks the rule.
    pub fn new(name: impl Into<String>) -> Result<Self> {
        let name = name.into();
        let len = name.chars().count();
        let why = if len == 0 || len > 1024 {
            Some("must be 1 to 1024 characters long")
        } else if name.chars().any(char::is_control) {
            Some("must not contain control characters")
        } else if name.ends_with('.') || name.ends_with('/') {
            Some("must not end with `.` or `/`")
        } else {
            None
        };
        match why {
            None => Ok(BlobName(name)),
            Some(why) => Err(Error::invalid(format!("blob name {}", shorten(&name)), why)),
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for BlobName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for BlobName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BlobName({:?})", self.0)
    }
}

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

// ---------------------------------------------------------------------------
// Key parts and composite keys
// ---------------------------------------------------------------------------

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
        out.push_str(&crate::entity::datetime::format(*self));
    }
    fn parse_key(s: &str) -> std::result::Result<Self, String> {
        crate::entity::datetime::parse(s)
    }
}

/// The composite-key encoding: several parts joined into one valid key.
///
/// Each part is escaped so that the result holds no character the service
/// forbids, then parts are joined with a space. Space sorts below every
/// character an escaped part can start with, so the encoding keeps tuple
/// order: `(a, b) < (a', b')` exactly when `encode(a, b) < encode(a', b')`
/// (comparing by code point). The escapes:
///
/// | characters | written as |
/// |---|---|
/// | U+0000–U+0021 (controls, space, `!`) | `!` and two hex digits |
/// | `"`, `#` | `"0`, `"1` |
/// | `.`, `/` | `.0`, `.1` |
/// | `>`, `?` | `>0`, `>1` |
/// | `[`, `\` | `[0`, `[1` |
/// | `~`, U+007F–U+009F | `~` and two hex digits |
///
/// Every other character stands for itself. Each escape starts with the
/// character just below the one it hides, so order is preserved.
pub struct CompositeKey;

/// The separator between parts of a composite key.
pub const COMPOSITE_SEPARATOR: char = ' ';

impl CompositeKey {
    /// Escapes one part and appends it to `out`.
    pub fn push_part(out: &mut String, part: &str) {
        use std::fmt::Write;
        for c in part.chars() {
            match c {
                '\u{0}'..='!' => {
                    let _ = write!(out, "!{:02X}", c as u32);
                }
                '"' => out.push_str("\"0"),
                '#' => out.push_str("\"1"),
                '.' => out.push_str(".0"),
                '/' => out.push_str(".1"),
                '>' => out.push_str(">0"),
                '?' => out.push_str(">1"),
                '[' => out.push_str("[0"),
                '\\' => out.push_str("[1"),
                '~'..='\u{9f}' => {
                    let _ = write!(out, "~{:02X}", c as u32);
                }
                c => out.push(c),
            }
        }
    }

    /// Joins already-rendered parts into one key string.
    pub fn join<'a>(parts: impl IntoIterator<Item = &'a str>) -> String {
        let mut out = String::new();
        for (i, part) in parts.into_iter().enumerate() {
            if i > 0 {
                out.push(COMPOSITE_SEPARATOR);
            }
            Self::push_part(&mut out, part);
        }
        out
    }

    /// Splits a composite key into its unescaped parts.
    ///
    /// # Errors
    /// A message when `key` is not an encoding produced by [`CompositeKey::join`].
    pub fn split(key: &str) -> std::result::Result<Vec<String>, String> {
        let mut parts = vec![String::new()];
        let mut chars = key.chars();
        while let Some(c) = chars.next() {
            let current = parts.last_mut().ok_or("empty")?;
            match c {
                COMPOSITE_SEPARATOR => parts.push(String::new()),
                '!' | '~' => {
                    let hex: String = chars.by_ref().take(2).collect();
                    let code = u32::from_str_radix(&hex, 16)
                        .ok()
                        .filter(|_| hex.len() == 2)
                        .and_then(char::from_u32)
                        .ok_or_else(|| format!("bad escape {c}{hex:?} in composite key"))?;
                    let valid = if c == '!' {
                        code <= '!'
                    } else {
                        ('~'..='\u{9f}').contains(&code)
                    };
                    if !valid {
                        return Err(format!("bad escape {c}{hex} in composite key"));
                    }
                    current.push(code);
                }
                '"' | '.' | '>' | '[' => {
                    let decoded = match (c, chars.next()) {
                        ('"', Some('0')) => '"',
                        ('"', Some('1')) => '#',
                        ('.', Some('0')) => '.',
                        ('.', Some('1')) => '/',
                        ('>', Some('0')) => '>',
                        ('>', Some('1')) => '?',
                        ('[', Some('0')) => '[',
                        ('[', Some('1')) => '\\',
                        (c, next) => {
                            return Err(format!("bad escape {c}{next:?} in composite key"));
                        }
                    };
                    current.push(decoded);
                }
                c => current.push(c),
            }
        }
        Ok(parts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_follow_the_service_rule() {
        assert!(TableName::new("Accounts").is_ok());
        assert!(TableName::new("abc").is_ok());
        assert!(TableName::new("a".repeat(63)).is_ok());
        for bad in ["ab", "1abc", "ab-c", "ab_c", "tables", "Tables", ""] {
            let e = TableName::new(bad).unwrap_err();
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        }
        assert!(TableName::new("a".repeat(64)).is_err());
        assert_eq!(
            TableName::new("Accounts").unwrap(),
            TableName::new("ACCOUNTS").unwrap()
        );
    }

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
    }

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

    #[test]
    fn composite_keys_escape_and_split() {
        let parts = ["a b", "#/?\\", "", "~\u{7f}!\"", "日本"];
        let key = CompositeKey::join(parts);
        assert!(key_problem(&key).is_none(), "{key:?}");
        assert_eq!(CompositeKey::split(&key).unwrap(), parts);
        assert!(CompositeKey::split("\"9").is_err());
        assert!(CompositeKey::split("!7").is_err());
    }
}
