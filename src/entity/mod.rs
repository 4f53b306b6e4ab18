//! The entity model: the [`Entity`] trait, EDM values and their codecs, and
//! [`Versioned`] (an entity with the ETag it was read at).
//!
//! Users normally derive [`Entity`] (see [`crate::Entity`](macro@crate::Entity))
//! rather than implement it.

pub mod codec;
pub mod datetime;
mod properties;
mod value;
pub mod wire;

use std::ops::{Deref, DerefMut};

use time::OffsetDateTime;

pub use codec::{DecodeError, EncodeError, PropertyCodec, decode_json, encode_json};
pub use properties::{
    MAX_ENTITY_BYTES, MAX_USER_PROPERTIES, MAX_VALUE_BYTES, Properties, PropertiesIntoIter,
    RESERVED_NAMES, entity_size, property_name_problem, validate_entity, value_size_problem,
};
pub use value::{EdmType, Value, utf16_len};

use crate::error::Result;
use crate::key::{ETag, PartitionKey, RowKey};

/// An entity in its stored form: keys and user properties.
#[derive(Debug, Clone, PartialEq)]
pub struct EntityData {
    /// The partition key.
    pub partition_key: PartitionKey,
    /// The row key.
    pub row_key: RowKey,
    /// Every user property (not the keys, not the Timestamp).
    pub properties: Properties,
}

/// A Rust type stored as rows of one table.
///
/// Derive it with `#[derive(leasehold::Entity)]`; a hand-written impl must keep
/// `decode(encode(x)) == x`.
pub trait Entity: Sized + Send + Sync + 'static {
    /// The table the entity lives in.
    const TABLE: &'static str;

    /// The stored names of the entity's properties (keys excluded), used for
    /// projections.
    const PROPERTY_NAMES: &'static [&'static str];

    /// The entity's partition key.
    ///
    /// # Errors
    /// [`Error::Invalid`](crate::Error::Invalid) when the key fields do not
    /// make a valid key.
    fn partition_key(&self) -> Result<PartitionKey>;

    /// The entity's row key.
    ///
    /// # Errors
    /// [`Error::Invalid`](crate::Error::Invalid) when the key fields do not
    /// make a valid key.
    fn row_key(&self) -> Result<RowKey>;

    /// The entity's user properties.
    ///
    /// # Errors
    /// [`Error::Invalid`](crate::Error::Invalid) when a field cannot be stored.
    fn encode_properties(&self) -> Result<Properties>;

    /// Rebuilds the entity from its stored form.
    ///
    /// # Errors
    /// [`Error::Decode`](crate::Error::Decode) naming the property that is
    /// missing or of the wrong type.
    fn decode(data: EntityData) -> Result<Self>;

    /// Keys and properties, checked against every service limit.
    ///
    /// # Errors
    /// [`Error::Invalid`](crate::Error::Invalid) naming the culprit.
    fn encode(&self) -> Result<EntityData> {
        let partition_key = self.partition_key()?;
        let row_key = self.row_key()?;
        let properties = self.encode_properties()?;
        validate_entity(Self::TABLE, &partition_key, &row_key, &properties)?;
        Ok(EntityData {
            partition_key,
            row_key,
            properties,
        })
    }
}

/// An entity together with the version it was read or written at.
///
/// Dereferences to the entity, so fields read and change as usual; passing it
/// back to `replace`, `merge` or `delete` sends its ETag, so a write based on a
/// stale copy fails with [`Error::Conflict`](crate::Error::Conflict) instead of
/// overwriting someone else's change.
#[derive(Debug, Clone, PartialEq)]
pub struct Versioned<E> {
    entity: E,
    etag: ETag,
    timestamp: OffsetDateTime,
    /// The stored write log (see [`crate::backend::write_log`]), if any.
    write_log: Option<String>,
}

impl<E> Versioned<E> {
    /// Pairs an entity with its version.
    pub fn new(entity: E, etag: ETag, timestamp: OffsetDateTime) -> Self {
        Versioned {
            entity,
            etag,
            timestamp,
            write_log: None,
        }
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
    fn deref_mut(&mut self) -> &mut E {
        &mut self.entity
    }
}
