//! The entity model: the [`Entity`] trait, EDM values and their codecs, and
//! [`Versioned`] (an entity with the ETag it was read at).
//!
//! Users derive [`Entity`] ([`crate::Entity`](macro@crate::Entity)). The
//! service's limits ([`EntityData::MAX_BYTES`], [`EntityData::MAX_PROPERTIES`],
//! [`Value::MAX_BYTES`]) are checked by [`Entity::encode`] before sending.

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

/// Whether leasehold reserves the property name `name` for its own
/// (`_lh…`: the reserved names of `crate::rows`).
pub(crate) fn is_reserved(name: &str) -> bool {
    leasehold_rules::reserved_property_problem(name).is_some()
}

/// Refuses, before any request, a property of a user's write whose name
/// leasehold reserves for its own (`_lh…`): [`Error::Invalid`](crate::Error::Invalid)
/// naming the property as `what(name)` says. With `expiry`, the row's
/// expiry (the one reserved property an entity writes, the derive's
/// `expires_at` / `time_to_live`) passes as an `Edm.DateTime`. Every
/// place that takes properties from a user checks them here.
pub(crate) fn refuse_reserved_properties(
    properties: &Properties,
    expiry: bool,
    what: impl Fn(&str) -> String,
) -> crate::error::Result<()> {
    for (name, value) in properties.iter() {
        let why = if expiry && name == leasehold_rules::EXPIRY_PROPERTY {
            (!matches!(value, Value::DateTime(_))).then(|| {
                "is the row's expiry, an Edm.DateTime (the instant the row expires)".to_owned()
            })
        } else {
            leasehold_rules::reserved_property_problem(name)
        };
        if let Some(why) = why {
            return Err(crate::error::Error::invalid(what(name), why));
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
