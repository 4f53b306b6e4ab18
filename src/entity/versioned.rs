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
/// Dereferences to the entity; passing it back to `replace`, `merge` or
/// `delete` sends its ETag, so a write based on a stale copy fails with
/// [`Error::Conflict`](crate::Error::Conflict). A value read or written by
/// leasehold also remembers what was stored, so a merge can return the
/// entity as stored without reading it again.
///
/// # Properties unknown to the type
///
/// A value read from storage keeps the row's properties its type does not
/// know (a newer binary's fields) and a `replace` writes them back, so an
/// older binary in a rolling upgrade deletes nothing. Values made with
/// [`Versioned::new`] or read through a projection keep none; writes of a
/// fresh entity (`insert`, `upsert`) store exactly its properties.
/// [`Versioned::take_unknown_properties`] drops them from one value,
/// `#[entity(drop_unknown_properties)]` from every value of a type.
#[derive(Clone)]
pub struct Versioned<E> {
    entity: E,
    etag: ETag,
    timestamp: OffsetDateTime,
    write_log: Option<String>,
    /// What is known of the stored properties of this version.
    stored: Stored<E>,
    /// See "Properties unknown to the type" above.
    unknown: Option<Arc<Properties>>,
    /// Read through a projection (or merged from such a value): the row
    /// holds properties this value never saw, so it must not replace it.
    projection: bool,
}

/// What a [`Versioned`] knows of the user properties stored at its version.
/// While the entity is unchanged, its own encoding plus `extra` is them: the
/// copy is taken at the first mutable borrow.
#[derive(Clone)]
pub(crate) enum Stored<E> {
    Unknown,
    Unchanged {
        encode: fn(&E) -> Result<Properties>,
        extra: Option<Arc<Properties>>,
    },
    Known(Arc<Properties>),
}

impl<E: Entity> Versioned<E> {
    /// Records what is known of the stored properties, and from it the
    /// unknown ones (unless the type opts out of keeping them).
    pub(crate) fn with_stored(mut self, stored: Stored<E>) -> Self {
        self.unknown = if E::KEEP_UNKNOWN_PROPERTIES {
            match &stored {
                Stored::Unknown => None,
                Stored::Unchanged { extra, .. } => extra.clone(),
                Stored::Known(all) => unknown_of::<E>(all),
            }
        } else {
            None
        };
        self.stored = stored;
        self
    }
}

/// The properties of `all` that `E` does not know; `None` when none.
pub(crate) fn unknown_of<E: Entity>(all: &Properties) -> Option<Arc<Properties>> {
    let unknown: Properties = all
        .iter()
        .filter(|(name, _)| !E::is_own_property(name))
        .map(|(name, value)| (name.to_owned(), value.clone()))
        .collect();
    (!unknown.is_empty()).then(|| Arc::new(unknown))
}

impl<E: Entity> Stored<E> {
    /// An entity as decoded from (or encoded to) storage, `extra` beside it.
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
    /// Pairs an entity with its version. Such a value knows nothing else of
    /// the row: merging it may cost a read.
    pub fn new(entity: E, etag: ETag, timestamp: OffsetDateTime) -> Self {
        Versioned {
            entity,
            etag,
            timestamp,
            write_log: None,
            stored: Stored::Unknown,
            unknown: None,
            projection: false,
        }
    }

    pub(crate) fn with_projection(mut self, projection: bool) -> Self {
        self.projection = projection;
        self
    }

    /// Whether this value was read through a projection
    /// ([`Query::select`](crate::table::Query::select),
    /// [`Table::get_as`](crate::Table::get_as)) or merged from one: it holds
    /// only some properties, so `replace` refuses it; `merge` keeps the rest.
    pub fn is_projection(&self) -> bool {
        self.projection
    }

    /// The stored properties the entity's type does not know, which a
    /// replace writes back; `None` when there are none or they are unknown.
    ///
    /// ```
    /// # use leasehold::{Entity, Store};
    /// #[derive(Entity, Debug, Clone)]
    /// #[entity(table = "Customers")]
    /// struct CustomerV2 {
    ///     #[entity(partition_key)] id: String,
    ///     #[entity(row_key)] kind: String,
    ///     name: String,
    ///     email: String,
    /// }
    /// #[derive(Entity, Debug, Clone)]
    /// #[entity(table = "Customers")]
    /// struct CustomerV1 {
    ///     #[entity(partition_key)] id: String,
    ///     #[entity(row_key)] kind: String,
    ///     name: String,
    /// }
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let store = Store::memory();
    /// let c = CustomerV2 { id: "c1".into(), kind: "profile".into(), name: "Ann".into(), email: "a@x".into() };
    /// store.table::<CustomerV2>().insert(c).await?;
    ///
    /// // An older binary renames the customer...
    /// let old = store.table::<CustomerV1>();
    /// let mut v1 = old.get("c1", "profile").await?.unwrap();
    /// assert!(v1.unknown_properties().unwrap().get("email").is_some());
    /// v1.name = "Anna".into();
    /// old.replace(&v1).await?;
    ///
    /// // ...and the newer binary's email is still there.
    /// let v2 = store.table::<CustomerV2>().get("c1", "profile").await?.unwrap();
    /// assert_eq!((v2.name.as_str(), v2.email.as_str()), ("Anna", "a@x"));
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    pub fn unknown_properties(&self) -> Option<&Properties> {
        self.unknown.as_deref()
    }

    /// Takes the unknown properties from this value, so that a `replace`
    /// removes them from the row.
    pub fn take_unknown_properties(&mut self) -> Option<Properties> {
        self.unknown.take().map(Arc::unwrap_or_clone)
    }

    pub(crate) fn unknown_shared(&self) -> Option<Arc<Properties>> {
        self.unknown.clone()
    }

    /// Every user property stored at this version, when known.
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

    /// The unknown properties, when known without a copy of the others.
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

    pub(crate) fn with_write_log(mut self, log: Option<String>) -> Self {
        self.write_log = log;
        self
    }

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
    /// The entity, mutably; the first borrow of an unchanged value keeps its
    /// stored properties first (what a merge needs).
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
