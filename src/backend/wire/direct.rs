//! Reading entity bodies in one pass, straight into a [`WireEntity`], when
//! they have the form the service gives them: each property's annotation
//! right before its value, every value of its annotated type, no name twice,
//! no `null`. Anything else makes the reader step aside (`None`) for the one
//! decoder ([`super::entity_from_parsed`]), which reads every form and
//! reports every error; both read these bodies alike (the tests check it).
//! One pass reads values in place rather than through JSON values, and
//! allocates a property's name once.

use std::fmt;

use serde::Deserialize;
use serde::de::{IgnoredAny, MapAccess, Visitor};
use time::OffsetDateTime;

use super::decode::{Annotation, Key, KeyName, KeySeed, Typed, WireEntity};
use crate::datetime;
use crate::entity::{EdmType, Properties};

/// Reads one entity body; `None` when it is not in the service's form.
pub(crate) fn entity(body: &[u8]) -> Option<WireEntity> {
    serde_json::from_slice::<Direct>(body).ok()?.0
}

/// Reads the entities of a query page (`{"value": [...]}`); `None` when any
/// of them is not in the service's form.
pub(crate) fn page(body: &[u8]) -> Option<Vec<WireEntity>> {
    let page = serde_json::from_slice::<DirectPage>(body).ok()?;
    page.value.into_iter().map(|e| e.0).collect()
}

struct Direct(Option<WireEntity>);

super::deserialize_by!(Direct, deserialize_map, EntityVisitor);

/// A query page whose entities are read in one pass (a name twice is an
/// error here, and so not the service's form).
#[derive(Deserialize)]
struct DirectPage {
    #[serde(default)]
    value: Vec<Direct>,
}

struct EntityVisitor;

impl<'de> Visitor<'de> for EntityVisitor {
    type Value = Direct;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an entity (a JSON object)")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Direct, A::Error> {
        let mut read = Read {
            partition_key: None,
            row_key: None,
            etag: None,
            timestamp: None,
            timestamp_annotated: false,
            properties: Properties::with_capacity(map.size_hint().unwrap_or(16)),
            pending: None,
        };
        loop {
            let seed = KeySeed {
                last: read.pending.as_ref().map(|(name, _)| name.as_str()),
            };
            let Some(key) = map.next_key_seed(seed)? else {
                break;
            };
            if read.step(key, &mut map)?.is_none() {
                // Not the service's form: the rest is only consumed.
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                return Ok(Direct(None));
            }
        }
        Ok(Direct(read.finish()))
    }
}

/// An entity being read.
struct Read {
    partition_key: Option<String>,
    row_key: Option<String>,
    etag: Option<String>,
    timestamp: Option<OffsetDateTime>,
    timestamp_annotated: bool,
    properties: Properties,
    /// The annotation read last, waiting for its value.
    pending: Option<(String, EdmType)>,
}

impl Read {
    /// Reads the value of `key`; `Ok(None)` when not in the service's form.
    fn step<'de, A: MapAccess<'de>>(
        &mut self,
        key: Key<KeyName>,
        map: &mut A,
    ) -> Result<Option<()>, A::Error> {
        // Only a property's value may follow its annotation.
        if self.pending.is_some() && !matches!(key, Key::Property(KeyName::Last)) {
            return Ok(None);
        }
        let ok = match key {
            Key::Partition => once(&mut self.partition_key, Some(map.next_value::<String>()?)),
            Key::Row => once(&mut self.row_key, Some(map.next_value::<String>()?)),
            Key::Etag => once(&mut self.etag, Some(map.next_value::<String>()?)),
            Key::Ignored => {
                map.next_value::<IgnoredAny>()?;
                true
            }
            Key::Timestamp => {
                let text = map.next_value::<String>()?;
                let t = datetime::parse(&text).ok();
                t.is_some() && once(&mut self.timestamp, t)
            }
            Key::TimestampAnnotation => {
                let known = matches!(map.next_value()?, Annotation::Known(EdmType::DateTime));
                let first = !self.timestamp_annotated;
                self.timestamp_annotated = true;
                known && first
            }
            Key::Annotation(KeyName::Last) => return Ok(None),
            Key::Annotation(KeyName::New(name)) => match map.next_value::<Annotation>()? {
                // An annotation of a property already read comes after its
                // value: not the service's form.
                Annotation::Known(t) if self.properties.get(&name).is_none() => {
                    self.pending = Some((name, t));
                    true
                }
                _ => false,
            },
            Key::Property(name) => {
                let (name, annotation) = match (name, self.pending.take()) {
                    (KeyName::Last, Some((name, t))) => (name, Some(t)),
                    (KeyName::New(name), None) => (name, None),
                    _ => return Ok(None),
                };
                match map.next_value_seed(Typed(annotation))? {
                    Some(value) if self.properties.get(&name).is_none() => {
                        self.properties.push_in_order(name, value);
                        true
                    }
                    _ => false,
                }
            }
        };
        Ok(ok.then_some(()))
    }

    /// The entity read, once every key was: `None` without keys, or with an
    /// annotation left without its value.
    fn finish(self) -> Option<WireEntity> {
        if self.pending.is_some() {
            return None;
        }
        Some(WireEntity {
            partition_key: self.partition_key?,
            row_key: self.row_key?,
            timestamp: self.timestamp,
            etag: self.etag,
            properties: self.properties,
        })
    }
}

/// Sets `slot` to `value` unless it was set before: a name twice is not the
/// service's form.
fn once<T>(slot: &mut Option<T>, value: Option<T>) -> bool {
    if slot.is_some() || value.is_none() {
        return false;
    }
    *slot = value;
    true
}
