//! [`Versioned`]: an entity with the version it was read or written at.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use time::OffsetDateTime;

use super::entity_type::Entity;
use super::properties::Properties;
use crate::error::Result;
use crate::key::ETag;

/// An entity together with the version it was read or written at.
///
/// Dereferences to the entity, so fields read and change as usual; passing it
/// back to `replace`, `merge` or `delete` sends its ETag, so a write based on a
/// stale copy fails with [`Error::Conflict`](crate::Error::Conflict) instead of
/// overwriting someone else's change.
///
/// A value read or written by leasehold also remembers what was stored at its
/// version, so that a merge can return the entity as stored without reading
/// it again. Two values compare equal when their
/// entities, ETags, Timestamps and write logs are equal.
#[derive(Clone)]
pub struct Versioned<E> {
    entity: E,
    etag: ETag,
    timestamp: OffsetDateTime,
    /// The stored write log (see [`crate::backend::write_log`]), if any.
    write_log: Option<String>,
    /// What is known of the stored properties of this version.
    stored: Stored<E>,
}

/// What a [`Versioned`] knows of the user properties stored at its version
/// (the write log excluded).
///
/// Reads keep no copy of the stored properties while the entity is
/// unchanged: its own encoding is them, plus the stored properties its type
/// does not carry (`extra`, usually none). The encoding is taken when the
/// entity is first borrowed mutably, before the change.
pub(crate) enum Stored<E> {
    /// Not known: a value made by [`Versioned::new`], or read through a
    /// projection.
    Unknown,
    /// The entity's own encoding (by `encode`) plus `extra`.
    Unchanged {
        encode: fn(&E) -> Result<Properties>,
        extra: Option<Arc<Properties>>,
    },
    /// Every stored property.
    Known(Arc<Properties>),
}

impl<E> Clone for Stored<E> {
    fn clone(&self) -> Self {
        match self {
            Stored::Unknown => Stored::Unknown,
            Stored::Unchanged { encode, extra } => Stored::Unchanged {
                encode: *encode,
                extra: extra.clone(),
            },
            Stored::Known(p) => Stored::Known(Arc::clone(p)),
        }
    }
}

impl<E: Entity> Stored<E> {
    /// The state of an entity decoded from (or encoded to) exactly the
    /// stored `properties`' names of `E`, with `extra` stored beside them.
    pub(crate) fn unchanged(extra: Option<Arc<Properties>>) -> Self {
        Stored::Unchanged {
            encode: E::encode_properties,
            extra,
        }
    }
}

impl<E: std::fmt::Debug> std::fmt::Debug for Versioned<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Versioned")
            .field("entity", &self.entity)
            .field("etag", &self.etag)
            .field("timestamp", &self.timestamp)
            .finish_non_exhaustive()
    }
}

impl<E: PartialEq> PartialEq for Versioned<E> {
    fn eq(&self, other: &Self) -> bool {
        self.entity == other.entity
            && self.etag == other.etag
            && self.timestamp == other.timestamp
            && self.write_log == other.write_log
    }
}

impl<E> Versioned<E> {
    /// Pairs an entity with its version.
    ///
    /// Such a value knows nothing of the other properties stored at that
    /// version: merging it may cost a read (see
    /// [`Table::merge`](crate::Table::merge)).
    pub fn new(entity: E, etag: ETag, timestamp: OffsetDateTime) -> Self {
        Versioned {
            entity,
            etag,
            timestamp,
            write_log: None,
            stored: Stored::Unknown,
        }
    }

    /// Records what is known of the properties stored at this version.
    pub(crate) fn with_stored(mut self, stored: Stored<E>) -> Self {
        self.stored = stored;
        self
    }

    /// Every user property stored at this version, when known (a copy is
    /// made only for an unchanged entity with no other record of them).
    pub(crate) fn stored_properties(&self) -> Option<Arc<Properties>> {
        match &self.stored {
            Stored::Unknown => None,
            Stored::Known(p) => Some(Arc::clone(p)),
            Stored::Unchanged { encode, extra } => {
                let mut own = encode(&self.entity).ok()?;
                if let Some(extra) = extra {
                    own.merge_from(extra);
                }
                Some(Arc::new(own))
            }
        }
    }

    /// The stored properties the entity's type does not carry, when known
    /// without a copy of the others.
    pub(crate) fn unchanged_extra(&self) -> Option<Option<&Arc<Properties>>> {
        match &self.stored {
            Stored::Unchanged { extra, .. } => Some(extra.as_ref()),
            _ => None,
        }
    }

    /// The entity, mutably, without taking a record of the stored
    /// properties first: for callers that replace the whole entity next.
    pub(crate) fn entity_mut_for_replace(&mut self) -> &mut E {
        self.stored = Stored::Unknown;
        &mut self.entity
    }

    /// Attaches the write log stored with this version.
    pub(crate) fn with_write_log(mut self, log: Option<String>) -> Self {
        self.write_log = log;
        self
    }

    /// The write log stored with this version, if any.
    pub(crate) fn write_log(&self) -> Option<&str> {
        self.write_log.as_deref()
    }

    /// The ETag the entity was read or written at.
    pub fn etag(&self) -> &ETag {
        &self.etag
    }

    /// The service's Timestamp of that version.
    pub fn timestamp(&self) -> OffsetDateTime {
        self.timestamp
    }

    /// The entity, dropping its version.
    pub fn into_inner(self) -> E {
        self.entity
    }

    /// The entity.
    pub fn entity(&self) -> &E {
        &self.entity
    }
}

impl<E> Deref for Versioned<E> {
    type Target = E;
    fn deref(&self) -> &E {
        &self.entity
    }
}

impl<E> DerefMut for Versioned<E> {
    /// The entity, mutably. The first mutable borrow of an unchanged value
    /// read or written by leasehold first encodes the entity to keep the
    /// properties stored at its version (what a merge needs).
    fn deref_mut(&mut self) -> &mut E {
        if let Stored::Unchanged { .. } = self.stored {
            self.stored = match self.stored_properties() {
                Some(p) => Stored::Known(p),
                None => Stored::Unknown,
            };
        }
        &mut self.entity
    }
}
