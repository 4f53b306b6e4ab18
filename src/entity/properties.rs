//! A property bag and the service's limits on it.

use std::borrow::Cow;

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
#[derive(Clone, Default, PartialEq)]
pub struct Properties(
    /// Sorted by name, each name once (entities are small: a sorted vector
    /// beats a tree for them).
    Vec<(Cow<'static, str>, Value)>,
);

impl std::fmt::Debug for Properties {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        struct Map<'a>(&'a [(Cow<'static, str>, Value)]);
        impl std::fmt::Debug for Map<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_map()
                    .entries(self.0.iter().map(|(k, v)| (k, v)))
                    .finish()
            }
        }
        f.debug_tuple("Properties").field(&Map(&self.0)).finish()
    }
}

impl Properties {
    /// An empty bag.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty bag with room for `n` properties.
    pub fn with_capacity(n: usize) -> Self {
        Properties(Vec::with_capacity(n))
    }

    /// Appends a property whose name the caller expects to sort after every
    /// name in the bag (entries read in order). Out of order, it is inserted
    /// in its place instead.
    pub(crate) fn push_in_order(&mut self, name: String, value: Value) {
        if self
            .0
            .last()
            .is_some_and(|(k, _)| k.as_ref() >= name.as_str())
        {
            self.put(Cow::Owned(name), value);
            return;
        }
        self.0.push((Cow::Owned(name), value));
    }

    fn position(&self, name: &str) -> std::result::Result<usize, usize> {
        // Names usually arrive in order: check the end first.
        match self.0.last() {
            None => Err(0),
            Some((last, _)) if last.as_ref() < name => Err(self.0.len()),
            _ => self.0.binary_search_by(|(k, _)| k.as_ref().cmp(name)),
        }
    }

    fn put(&mut self, name: Cow<'static, str>, value: Value) -> Option<Value> {
        match self.position(&name) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                self.0.insert(i, (name, value));
                None
            }
        }
    }

    /// Sets a property, returning the previous value.
    pub fn insert(&mut self, name: impl Into<String>, value: Value) -> Option<Value> {
        self.put(Cow::Owned(name.into()), value)
    }

    /// Sets a property under a name known at compile time (no copy of the
    /// name is made), returning the previous value.
    pub fn insert_static(&mut self, name: &'static str, value: Value) -> Option<Value> {
        self.put(Cow::Borrowed(name), value)
    }

    /// Looks a property up.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.position(name).ok().map(|i| &self.0[i].1)
    }

    /// Removes and returns a property.
    pub fn remove(&mut self, name: &str) -> Option<Value> {
        if self.0.last().is_some_and(|(k, _)| k == name) {
            return self.0.pop().map(|(_, v)| v);
        }
        let i = self.position(name).ok()?;
        Some(self.0.remove(i).1)
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
            .retain(|(k, _)| names.iter().any(|n| n.as_ref() == k.as_ref()));
    }

    /// Merges `other` into this bag: its properties replace same-named ones,
    /// others are kept (the service's Merge semantics).
    pub fn merge_from(&mut self, other: &Properties) {
        for (k, v) in &other.0 {
            self.put(k.clone(), v.clone());
        }
    }
}

impl FromIterator<(String, Value)> for Properties {
    /// Later values of a repeated name replace earlier ones.
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Self {
        let mut v: Vec<(Cow<'static, str>, Value)> =
            iter.into_iter().map(|(k, v)| (Cow::Owned(k), v)).collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v.dedup_by(|later, earlier| {
            if later.0 == earlier.0 {
                std::mem::swap(&mut later.1, &mut earlier.1);
                true
            } else {
                false
            }
        });
        Properties(v)
    }
}

/// The properties of a [`Properties`] bag by value, in name order.
#[derive(Debug)]
pub struct PropertiesIntoIter(std::vec::IntoIter<(Cow<'static, str>, Value)>);

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
    fn the_bag_keeps_names_sorted_and_unique() {
        let mut p = Properties::new();
        for (i, name) in ["m", "b", "z", "a", "m", "c"].into_iter().enumerate() {
            let i = i32::try_from(i).unwrap();
            p.insert(name, Value::Int32(i));
        }
        p.insert_static("b", Value::Boolean(true));
        let names: Vec<&str> = p.iter().map(|(k, _)| k).collect();
        assert_eq!(names, ["a", "b", "c", "m", "z"]);
        assert_eq!(p.get("m"), Some(&Value::Int32(4)));
        assert_eq!(p.get("b"), Some(&Value::Boolean(true)));
        assert_eq!(p.remove("c"), Some(Value::Int32(5)));
        assert_eq!(p.remove("c"), None);
        assert_eq!(p.get("nope"), None);
        let collected: Properties = [("y", 1), ("x", 2), ("y", 3)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), Value::Int32(v)))
            .collect();
        assert_eq!(
            format!("{collected:?}"),
            "Properties({\"x\": Int32(2), \"y\": Int32(3)})"
        );
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
