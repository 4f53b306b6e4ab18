//! [`CompositeKey`]: several key parts joined into one valid key, keeping
//! tuple order.

/// The composite-key encoding: several parts joined into one valid key.
///
/// [`CompositeKey::join`] escapes every part (so that the result holds no
/// character the service forbids, and no separator) and joins them with a
/// space, [`CompositeKey::SEPARATOR`]; [`CompositeKey::split`] undoes it.
/// The escapes:
///
/// | characters | written as |
/// |---|---|
/// | U+0000–U+0021 (controls, space, `!`) | `!` and two hex digits |
/// | `"`, `#` | `"0`, `"1` |
/// | `.`, `/` | `.0`, `.1` |
/// | `>`, `?` | `>0`, `>1` |
/// | `[`, `\` | `[0`, `[1` |
/// | `~`, U+007F–U+009F | `~` and two hex digits (uppercase) |
///
/// Every other character stands for itself. The characters that start an
/// escape are themselves escaped, so they only ever start one; each escape
/// sorts between the unescaped characters around the characters it hides,
/// and escapes of one family keep their order. So escaping keeps the order
/// of parts, and since the space sorts below every character an escaped
/// part holds, the encoding keeps tuple order: `(a, b) < (a', b')` exactly
/// when `join(a, b) < join(a', b')`, by UTF-16 code unit and by code point
/// alike (escapes are ASCII).
///
/// `#[derive(Entity)]` keys of several fields are this encoding of the
/// fields' [`KeyPart`](crate::key::KeyPart) forms (a one-field key is the
/// form as it is), built by the derive's key builders and prefix filters.
///
/// ```
/// use leasehold::key::CompositeKey;
///
/// let key = CompositeKey::join(["a b", "x/y"]);
/// assert_eq!(key, "a!20b x.1y");
/// assert_eq!(CompositeKey::split(&key).unwrap(), ["a b", "x/y"]);
/// // Tuple order: ("a", "z") < ("a b", "a").
/// assert!(CompositeKey::join(["a", "z"]) < CompositeKey::join(["a b", "a"]));
/// ```
pub struct CompositeKey;

impl CompositeKey {
    /// The separator between parts of a composite key.
    pub const SEPARATOR: char = ' ';

    /// Escapes one part and appends it to `out` (without a separator).
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

    /// Escapes each part (the key forms of the fields, such as
    /// [`KeyPart::to_key`](crate::key::KeyPart::to_key) gives) and joins
    /// them with [`CompositeKey::SEPARATOR`]. A single part is escaped too:
    /// `join(["a b"])` is `"a!20b"`.
    pub fn join<'a>(parts: impl IntoIterator<Item = &'a str>) -> String {
        let mut out = String::new();
        for (i, part) in parts.into_iter().enumerate() {
            if i > 0 {
                out.push(Self::SEPARATOR);
            }
            Self::push_part(&mut out, part);
        }
        out
    }

    /// The key range of the composite keys whose leading parts are `parts`
    /// (each escaped as [`CompositeKey::join`] escapes it): every key from
    /// the first bound (included) to the second (excluded). The range ends
    /// at the separator, so the leading part `"20"` does not take in keys
    /// whose first part is `"2026"`.
    pub(crate) fn prefix_bounds<'a>(parts: impl IntoIterator<Item = &'a str>) -> (String, String) {
        let mut low = Self::join(parts);
        let mut high = low.clone();
        low.push(Self::SEPARATOR);
        // The character just above the separator, which no escaped part
        // holds in its place.
        high.push('!');
        (low, high)
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
                Self::SEPARATOR => parts.push(String::new()),
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
    fn composite_keys_escape_and_split() {
        let parts = ["a b", "#/?\\", "", "~\u{7f}!\"", "日本"];
        let key = CompositeKey::join(parts);
        assert!(leasehold_rules::key_problem(&key).is_none(), "{key:?}");
        assert_eq!(CompositeKey::split(&key).unwrap(), parts);
        assert!(CompositeKey::split("\"9").is_err());
        assert!(CompositeKey::split("!7").is_err());
    }
}
