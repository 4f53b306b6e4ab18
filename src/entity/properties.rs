//! A property bag and the service's limits on it.

use std::borrow::Cow;
use std::collections::BTreeMap;

use super::value::{Value, utf16_len};
use crate::error::{Error, Result};
use crate::key::{PartitionKey, RowKey};

/// The most user properties an entity may have (255 minus PartitionKey,
/// RowKey and Timestamp).
pub const MAX_USER_PROPERTIES: usize = 252;
/// The largest entity, in the service's accounting.
pub const MAX_ENTITY_BYTES: usize = 1024 * 1024;
/// The largest string (as UTF-16) or binary property value.
pub const MAX_VALUE_BYTES: usize = 64 * 1024;
/// The longest property name.
pub const MAX_NAME_CHARS: usize = 255;
/// Names the service keeps for itself.
pub const RESERVED_NAMES: [&str; 3] = ["PartitionKey", "RowKey", "Timestamp"];

/// The user properties of an entity, by name.
///
/// Keys and the Timestamp are not properties here: they travel beside the bag.
/// A name maps to at most one value; an absent name is an absent property
/// (the service has no null).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Properties(BTreeMap<Cow<'static, str>, Value>);

impl Properties {
    /// An empty bag.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets a property, returning the previous value.
    pub fn insert(&mut self, name: impl Into<String>, value: Value) -> Option<Value> {
        self.0.insert(Cow::Owned(name.into()), value)
    }

    /// Sets a property under a name known at compile time (no copy of the
    /// name is made), returning the previous value.
    pub fn insert_static(&mut self, name: &'static str, value: Value) -> Option<Value> {
        self.0.insert(Cow::Borrowed(name), value)
    }

    /// Looks a property up.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.get(name)
    }

    /// Removes and returns a property.
    pub fn remove(&mut self, name: &str) -> Option<Value> {
        self.0.remove(name)
    }

    /// The number of properties.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the bag is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The properties in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.0.iter().map(|(k, v)| (k.as_ref(), v))
    }

    /// Keeps only the named properties.
    pub fn retain_names(&mut self, names: &[impl AsRef<str>]) {
        self.0
            .retain(|k, _| names.iter().any(|n| n.as_ref() == k.as_ref()));
    }

    /// Merges `other` into this bag: its properties replace same-named ones,
    /// others are kept (the service's Merge semantics).
    pub fn merge_from(&mut self, other: &Properties) {
        for (k, v) in &other.0 {
            self.0.insert(k.clone(), v.clone());
        }
    }
}

impl FromIterator<(String, Value)> for Properties {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Self {
        Properties(iter.into_iter().map(|(k, v)| (Cow::Owned(k), v)).collect())
    }
}

/// The properties of a [`Properties`] bag by value, in name order.
#[derive(Debug)]
pub struct PropertiesIntoIter(std::collections::btree_map::IntoIter<Cow<'static, str>, Value>);

impl Iterator for PropertiesIntoIter {
    type Item = (String, Value);
    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(k, v)| (k.into_owned(), v))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl ExactSizeIterator for PropertiesIntoIter {}

impl IntoIterator for Properties {
    type Item = (String, Value);
    type IntoIter = PropertiesIntoIter;
    fn into_iter(self) -> Self::IntoIter {
        PropertiesIntoIter(self.0.into_iter())
    }
}

/// Why `name` cannot be a property name, or `None` when it can.
///
/// Names follow C# identifier rules (a letter or `_`, then letters, digits or
/// `_`), are at most 255 characters, and are not one of [`RESERVED_NAMES`].
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

/// Why a value is too large to store, or `None`.
pub fn value_size_problem(value: &Value) -> Option<String> {
    match value {
        Value::String(s) if 2 * utf16_len(s) > MAX_VALUE_BYTES => Some(format!(
            "string is {} UTF-16 units ({} bytes); the limit is {} bytes",
            utf16_len(s),
            2 * utf16_len(s),
            MAX_VALUE_BYTES
        )),
        Value::Binary(b) if b.len() > MAX_VALUE_BYTES => Some(format!(
            "binary is {} bytes; the limit is {MAX_VALUE_BYTES}",
            b.len()
        )),
        _ => None,
    }
}

/// The size of an entity in the service's accounting: 4 bytes, plus both keys
/// as UTF-16, plus for each property 8 bytes, its name as UTF-16 and its value.
pub fn entity_size(pk: &PartitionKey, rk: &RowKey, props: &Properties) -> usize {
    4 + 2 * utf16_len(pk.as_str())
        + 2 * utf16_len(rk.as_str())
        + props
            .iter()
            .map(|(name, v)| 8 + 2 * utf16_len(name) + v.stored_size())
            .sum::<usize>()
}

/// Checks every rule the service applies to an entity before it is stored:
/// property names, value sizes, property count and entity size.
///
/// # Errors
/// [`Error::Invalid`] naming the table, keys and property at fault.
pub fn validate_entity(
    table: &str,
    pk: &PartitionKey,
    rk: &RowKey,
    props: &Properties,
) -> Result<()> {
    let at = || format!("entity ({pk:?}, {rk:?}) of table `{table}`");
    // One pass: names, value sizes and the entity size (as `entity_size`).
    let mut size = 4 + 2 * utf16_len(pk.as_str()) + 2 * utf16_len(rk.as_str());
    for (name, value) in props.iter() {
        if !is_plain_name(name) {
            if let Some(why) = property_name_problem(name) {
                return Err(Error::invalid(
                    format!("property name {name:?} in {}", at()),
                    why,
                ));
            }
        }
        let value_size = match value {
            Value::String(s) => {
                let units = utf16_len(s);
                if 2 * units > MAX_VALUE_BYTES {
                    return Err(Error::invalid(
                        format!("property `{name}` of {}", at()),
                        format!(
                            "string is {units} UTF-16 units ({} bytes); the limit is {MAX_VALUE_BYTES} bytes",
                            2 * units
                        ),
                    ));
                }
                4 + 2 * units
            }
            other => {
                if let Some(why) = value_size_problem(other) {
                    return Err(Error::invalid(
                        format!("property `{name}` of {}", at()),
                        why,
                    ));
                }
                other.stored_size()
            }
        };
        size += 8 + 2 * utf16_len(name) + value_size;
    }
    if props.len() > MAX_USER_PROPERTIES {
        return Err(Error::invalid(
            at(),
            format!(
                "has {} properties; the limit is {MAX_USER_PROPERTIES} besides PartitionKey, RowKey and Timestamp",
                props.len()
            ),
        ));
    }
    if size > MAX_ENTITY_BYTES {
        return Err(Error::invalid(
            at(),
            format!("is {size} bytes; the limit is {MAX_ENTITY_BYTES}"),
        ));
    }
    Ok(())
}

/// A quick yes for the common case: an ASCII identifier of at most 255
/// characters that is not reserved. `false` means "ask
/// [`property_name_problem`]", not "invalid".
fn is_plain_name(name: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> (PartitionKey, RowKey) {
        (PartitionKey::new("p").unwrap(), RowKey::new("r").unwrap())
    }

    #[test]
    fn property_names() {
        assert!(property_name_problem("balance").is_none());
        assert!(property_name_problem("_x1").is_none());
        assert!(property_name_problem("Größe").is_none());
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
        assert!(property_name_problem(&"a".repeat(255)).is_none());
        assert!(property_name_problem(&"a".repeat(256)).is_some());
    }

    #[test]
    fn string_limit_counts_utf16_units() {
        let (pk, rk) = keys();
        let mut props = Properties::new();
        props.insert("s", Value::String("x".repeat(32 * 1024)));
        assert!(validate_entity("T", &pk, &rk, &props).is_ok());
        props.insert("s", Value::String("x".repeat(32 * 1024 + 1)));
        let e = validate_entity("T", &pk, &rk, &props).unwrap_err();
        assert!(e.to_string().contains("property `s`"), "{e}");
        // One astral character is two UTF-16 units.
        props.insert(
            "s",
            Value::String(format!("{}😀", "x".repeat(32 * 1024 - 1))),
        );
        assert!(validate_entity("T", &pk, &rk, &props).is_err());
    }

    #[test]
    fn count_and_entity_size_limits() {
        let (pk, rk) = keys();
        let mut props: Properties = (0..252)
            .map(|i| (format!("p{i}"), Value::Int32(i)))
            .collect();
        assert!(validate_entity("T", &pk, &rk, &props).is_ok());
        props.insert("one_more", Value::Boolean(true));
        let e = validate_entity("T", &pk, &rk, &props).unwrap_err();
        assert!(e.to_string().contains("253 properties"), "{e}");

        let big: Properties = (0..17)
            .map(|i| (format!("b{i}"), Value::Binary(vec![0; 64 * 1024])))
            .collect();
        let e = validate_entity("T", &pk, &rk, &big).unwrap_err();
        assert!(e.to_string().contains("the limit is 1048576"), "{e}");
    }
}
