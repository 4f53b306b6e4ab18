//! The Table service's naming rules, in one place for the two crates that
//! check them: `leasehold` at run time (when a [`TableName`], a key or a
//! property name is built) and `leasehold-derive` at compile time (the table
//! name and the stored property names of `#[derive(Entity)]`).
//!
//! Each check says why a name is refused, or `None` when it is accepted; the
//! callers add which name it was. Not meant for use outside leasehold: the
//! runtime crate's validated types (`TableName`, `PartitionKey`, `RowKey`)
//! are the public face of these rules.
//!
//! [`TableName`]: https://docs.rs/leasehold/latest/leasehold/key/struct.TableName.html

#![forbid(unsafe_code)]
#![warn(missing_docs)]

/// Property names the service keeps for itself.
pub const RESERVED_NAMES: [&str; 3] = ["PartitionKey", "RowKey", "Timestamp"];

/// The prefix of the property names leasehold keeps for itself (its
/// write logs, row marks, tombstones, fences); user entities may not
/// store properties named so.
pub const RESERVED_PREFIX: &str = "_lh";

/// The one reserved property an entity writes itself: the instant its
/// row expires (an `Edm.DateTime`), written by a type declaring
/// `#[entity(expires_at)]` or `#[entity(time_to_live = "...")]`. Fields may
/// not be named so.
pub const EXPIRY_PROPERTY: &str = "_lhExpires";

/// The reserved property in which a table opened with a write log keeps
/// the ids of an entity's recent writes (read by the backends that settle
/// a lost reply by it).
pub const WRITE_LOG_PROPERTY: &str = "_lhWriteLog";

/// The time-to-live written as `time_to_live = "..."`, in seconds: a
/// whole number followed by one unit, `s`, `m`, `h` or `d` (`"90s"`,
/// `"15m"`, `"12h"`, `"30d"`), at least one second and at most 36,500
/// days. `Err` says what is wrong.
pub fn time_to_live_seconds(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let Some(unit) = text.chars().last() else {
        return Err("is empty; write a number and a unit, such as \"30d\"".to_owned());
    };
    let per = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3_600,
        'd' => 86_400,
        _ => {
            return Err(format!(
                "{text:?} does not end in a unit; write a number and one of `s`, `m`, `h`, `d`, such as \"30d\""
            ));
        }
    };
    let digits = &text[..text.len() - 1];
    let n: u64 = match digits.parse() {
        Ok(n) if digits.bytes().all(|b| b.is_ascii_digit()) => n,
        _ => {
            return Err(format!(
                "{text:?} is not a whole number followed by a unit; write such as \"90s\", \"15m\", \"12h\" or \"30d\""
            ));
        }
    };
    let seconds = n.saturating_mul(per);
    if seconds == 0 {
        return Err(format!(
            "{text:?} is zero; a row would expire as it is written"
        ));
    }
    if seconds > 36_500 * 86_400 {
        return Err(format!("{text:?} is over 36,500 days (100 years)"));
    }
    Ok(seconds)
}

/// Why `name` cannot be the name of a property of a user entity although
/// the service accepts it (it starts with [`RESERVED_PREFIX`]), or `None`.
pub fn reserved_property_problem(name: &str) -> Option<String> {
    name.starts_with(RESERVED_PREFIX).then(|| {
        format!("starts with `{RESERVED_PREFIX}`, which leasehold reserves for its own properties")
    })
}

/// The longest property name, in characters.
pub const MAX_NAME_CHARS: usize = 255;

/// The most user properties an entity may have (255 minus PartitionKey,
/// RowKey and Timestamp).
pub const MAX_USER_PROPERTIES: usize = 252;

/// The largest partition or row key, in bytes of UTF-16 (the service stores
/// keys as UTF-16).
pub const MAX_KEY_BYTES: usize = 1024;

/// Why `name` is not a valid table name (`^[A-Za-z][A-Za-z0-9]{2,62}$`, not
/// `tables` in any case), or `None` when it is.
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

/// Why `name` cannot be a property name, or `None` when it can.
///
/// Names follow C# identifier rules (a letter or `_`, then letters, digits or
/// `_`), are at most [`MAX_NAME_CHARS`] characters, and are not one of
/// [`RESERVED_NAMES`].
pub fn property_name_problem(name: &str) -> Option<String> {
    let mut chars = name.chars();
    match chars.next() {
        None => return Some("is empty".into()),
        Some(c) if !(c.is_alphabetic() || c == '_') => {
            return Some(format!("must start with a letter or `_`, not {c:?}"));
        }
        _ => {}
    }
    if let Some(c) = chars.find(|&c| !(c.is_alphanumeric() || c == '_')) {
        return Some(format!(
            "may contain only letters, digits and `_`, not {c:?}"
        ));
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Some(format!("is longer than {MAX_NAME_CHARS} characters"));
    }
    if RESERVED_NAMES.contains(&name) {
        return Some("is reserved by the service".into());
    }
    None
}

/// A quick yes for the common case, without allocating: an ASCII identifier
/// of at most [`MAX_NAME_CHARS`] characters that is not reserved. `false`
/// means "ask [`property_name_problem`]", not "invalid".
#[inline]
pub fn is_plain_property_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    match bytes.split_first() {
        Some((first, rest)) => {
            (first.is_ascii_alphabetic() || *first == b'_')
                && rest.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_')
                && bytes.len() <= MAX_NAME_CHARS
                && !RESERVED_NAMES.contains(&name)
        }
        None => false,
    }
}

/// Why `key` is not a valid partition or row key, or `None` when it is: at
/// most [`MAX_KEY_BYTES`] as UTF-16, and no character of
/// [`is_forbidden_key_char`].
#[inline]
pub fn key_problem(key: &str) -> Option<String> {
    if 2 * utf16_len(key) > MAX_KEY_BYTES {
        return Some(format!(
            "is {} bytes as UTF-16; keys are limited to {MAX_KEY_BYTES}",
            2 * utf16_len(key)
        ));
    }
    let c = forbidden_key_char_at(key).and_then(|i| key[i..].chars().next())?;
    Some(format!("contains the forbidden character {c:?}"))
}

/// Where the first character [`is_forbidden_key_char`] refuses starts, by a
/// scan of bytes: every forbidden character is ASCII or, for U+0080 to
/// U+009F, the two bytes `C2 80` to `C2 9F` (`C2` is never a continuation
/// byte), so no character needs decoding.
fn forbidden_key_char_at(key: &str) -> Option<usize> {
    let bytes = key.as_bytes();
    bytes.iter().enumerate().position(|(i, &b)| match b {
        b'/' | b'\\' | b'#' | b'?' | 0x00..=0x1f | 0x7f => true,
        0xc2 => matches!(bytes.get(i + 1), Some(0x80..=0x9f)),
        _ => false,
    })
}

/// Characters the service forbids in keys: `/ \ # ?` and control characters
/// (U+0000 to U+001F and U+007F to U+009F).
#[inline]
pub fn is_forbidden_key_char(c: char) -> bool {
    matches!(c, '/' | '\\' | '#' | '?' | '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}')
}

/// The length of a string in UTF-16 code units, as the service measures keys
/// and string values.
#[inline]
pub fn utf16_len(s: &str) -> usize {
    if s.is_ascii() {
        return s.len();
    }
    // One unit per character (every byte but UTF-8 continuation bytes), two
    // for characters outside the BMP (four-byte sequences, lead byte >= 0xF0).
    s.bytes()
        .map(|b| usize::from(b & 0xC0 != 0x80) + usize::from(b >= 0xF0))
        .sum()
}

#[cfg(test)]
mod tests {
    #[test]
    fn time_to_live_is_a_number_and_a_unit() {
        assert_eq!(super::time_to_live_seconds("90s"), Ok(90));
        assert_eq!(super::time_to_live_seconds("15m"), Ok(900));
        assert_eq!(super::time_to_live_seconds("12h"), Ok(43_200));
        assert_eq!(super::time_to_live_seconds("30d"), Ok(2_592_000));
        for bad in ["", "30", "d", "-1d", "+1d", "1.5h", "0s", "1w", "36501d"] {
            assert!(super::time_to_live_seconds(bad).is_err(), "{bad}");
        }
    }

    use super::*;

    #[test]
    fn leasehold_reserves_its_prefix_only() {
        for reserved in ["_lhWriteLog", "_lhGone", "_lh", "_lhAnything"] {
            assert!(reserved_property_problem(reserved).is_some(), "{reserved}");
        }
        for free in ["_l", "_LHGone", "lhGone", "x_lh", "Name"] {
            assert_eq!(reserved_property_problem(free), None, "{free}");
        }
    }

    #[test]
    fn table_names() {
        for good in ["Accounts", "abc", "A12", &"a".repeat(63)] {
            assert_eq!(table_name_problem(good), None, "{good}");
        }
        for bad in [
            "",
            "ab",
            "1abc",
            "ab-c",
            "ab_c",
            "tables",
            "TABLES",
            &"a".repeat(64),
        ] {
            assert!(table_name_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn property_names() {
        for good in ["balance", "_x1", "Größe", &"a".repeat(255)] {
            assert_eq!(property_name_problem(good), None, "{good}");
        }
        for bad in [
            "",
            "1a",
            "a-b",
            "a b",
            "a@odata.type",
            "PartitionKey",
            "RowKey",
            "Timestamp",
        ] {
            assert!(property_name_problem(bad).is_some(), "{bad}");
        }
        assert!(property_name_problem(&"a".repeat(256)).is_some());
    }

    #[test]
    fn plain_names_are_a_subset_of_valid_names() {
        for name in ["a", "_", "a_1", "Z9", "x".repeat(255).as_str()] {
            assert!(is_plain_property_name(name), "{name}");
            assert_eq!(property_name_problem(name), None);
        }
        for name in ["", "1", "Größe", "a-b", "RowKey", "x".repeat(256).as_str()] {
            assert!(!is_plain_property_name(name), "{name}");
        }
    }

    #[test]
    fn keys() {
        for bad in [
            "a/b", "a\\b", "a#b", "a?b", "a\u{0}", "a\u{1f}", "\u{7f}", "\u{9f}",
        ] {
            assert!(key_problem(bad).is_some(), "{bad:?}");
        }
        assert_eq!(key_problem(&"x".repeat(512)), None);
        assert!(key_problem(&"x".repeat(513)).is_some());
        assert_eq!(key_problem("o'brien %+ é 日本"), None);
        assert_eq!(key_problem(""), None);
        // The byte scan finds exactly the characters the predicate refuses.
        for c in ('\u{0}'..='\u{7ff}').chain(['\u{fffd}', '\u{10000}', '\u{10ffff}']) {
            let key = format!("a{c}b");
            assert_eq!(
                key_problem(&key).is_some(),
                is_forbidden_key_char(c),
                "{c:?}"
            );
        }
        assert_eq!(
            key_problem(&"😀".repeat(257)),
            Some("is 1028 bytes as UTF-16; keys are limited to 1024".into())
        );
    }

    #[test]
    fn utf16_lengths() {
        assert_eq!(utf16_len("abc"), 3);
        assert_eq!(utf16_len("é日"), 2);
        assert_eq!(utf16_len("😀"), 2);
        assert_eq!(utf16_len("a😀é"), 4);
    }
}
