//! [`Properties`]: the user properties of an entity, by name.

use std::borrow::Cow;

use super::value::Value;

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
        self.retain(|k| names.iter().any(|n| n.as_ref() == k));
    }

    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.0.retain(|(k, _)| keep(k));
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

/// One stored property by value, its name owned.
fn owned((name, value): (Cow<'static, str>, Value)) -> (String, Value) {
    (name.into_owned(), value)
}

/// The properties by value, in name order.
impl IntoIterator for Properties {
    type Item = (String, Value);
    type IntoIter = std::iter::Map<
        std::vec::IntoIter<(Cow<'static, str>, Value)>,
        fn((Cow<'static, str>, Value)) -> (String, Value),
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter().map(owned as fn(_) -> _)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
