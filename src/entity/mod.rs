//! The entity model: the [`Entity`] trait, EDM values and their codecs, and
//! [`Versioned`] (an entity with the ETag it was read at).
//!
//! Users normally derive [`Entity`] (see [`crate::Entity`](macro@crate::Entity))
//! rather than implement it.
//!
//! The service's limits are associated constants of what they limit:
//! [`EntityData::MAX_BYTES`], [`EntityData::MAX_PROPERTIES`] and
//! [`Value::MAX_BYTES`]; an entity is checked against them by
//! [`Entity::encode`], before anything is sent.

#[cfg(feature = "chrono")]
mod chrono;
pub(crate) mod chunked;
mod codec;
mod data;
mod dynamic;
pub(crate) mod entity_type;
pub(crate) mod enums;
pub(crate) mod expiry;
mod limits;
mod properties;
mod value;
mod versioned;

pub use codec::{DecodeError, EncodeError, PropertyCodec};
pub(crate) use codec::{decode_json, encode_json, short_type_name};
pub use data::EntityData;
pub use dynamic::DynamicEntity;
pub use entity_type::Entity;
#[cfg(feature = "azure")]
pub(crate) use leasehold_rules::RESERVED_NAMES;
pub(crate) use leasehold_rules::property_name_problem;

/// Refuses, before any request, a user entity's property whose name
/// leasehold reserves for its own (`_lh…`): [`Error::Invalid`](crate::Error::Invalid)
/// naming the property and the entity's type.
pub(crate) fn refuse_reserved_properties(
    properties: &Properties,
    type_name: &str,
) -> crate::error::Result<()> {
    for (name, value) in properties.iter() {
        // The row's expiry is the one reserved property an entity writes
        // (the derive's `expires_at` / `time_to_live`), as a date-time.
        let why = if name == leasehold_rules::EXPIRY_PROPERTY {
            (!matches!(value, Value::DateTime(_))).then(|| {
                "is the row's expiry, an Edm.DateTime (the instant the row expires)".to_owned()
            })
        } else {
            leasehold_rules::reserved_property_problem(name)
        };
        if let Some(why) = why {
            return Err(crate::error::Error::invalid(
                format!("property `{name}` of {type_name}"),
                why,
            ));
        }
    }
    Ok(())
}
pub(crate) use limits::{entity_size, validate_entity};
pub use properties::Properties;
pub use value::{EdmType, Value};
pub(crate) use versioned::Stored;
pub use versioned::Versioned;

// `Edm.DateTime` is read and written by `crate::datetime`; this path stays
// for the modules that name it through the entity model.
pub(crate) use crate::datetime;
