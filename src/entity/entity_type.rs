//! [`Entity`]: a Rust type stored as rows of one table.

use super::data::EntityData;
use super::limits::validate_entity;
use super::properties::Properties;
use crate::error::Result;
use crate::key::{PartitionKey, RowKey};

/// One index of an entity type, as `#[derive(Entity)]` declares it. Not a
/// public API: read by the generated code and the index machinery.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexDef {
    /// The field's name.
    pub field: &'static str,
    /// The stored property.
    pub property: &'static str,
    /// `#[entity(unique)]` rather than `#[entity(index)]`.
    pub unique: bool,
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

    /// The indexes its `#[entity(unique)]` and `#[entity(index)]` fields
    /// declare (see [`crate::Table::get_by`]). Not a public API: written by
    /// the derive.
    #[doc(hidden)]
    const INDEXES: &'static [IndexDef] = &[];

    /// Whether values of this type read from storage keep the stored
    /// properties the type does not know and write them back on replace
    /// (see [`Versioned`](crate::Versioned#properties-unknown-to-the-type)).
    /// `true` unless the type is derived with
    /// `#[entity(drop_unknown_properties)]`.
    const KEEP_UNKNOWN_PROPERTIES: bool = true;

    /// Whether the stored property `name` belongs to this type: one of
    /// [`Entity::PROPERTY_NAMES`], or a chunk of an `#[entity(chunked)]`
    /// field. Properties that do not are the ones a read keeps as unknown.
    fn is_own_property(name: &str) -> bool {
        Self::PROPERTY_NAMES.contains(&name)
    }
}
