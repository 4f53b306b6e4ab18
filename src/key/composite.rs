//! [`CompositeKey`]: several key parts joined into one valid key, keeping
//! tuple order.

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

impl CompositeKey {
    /// The separator between parts of a composite key.
    pub const SEPARATOR: char = ' ';

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
                out.push(Self::SEPARATOR);
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
