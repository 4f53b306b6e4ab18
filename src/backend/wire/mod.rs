//! The JSON form of an entity, as the Table service's REST API speaks it:
//! the bodies the Azure backend sends and reads, the size of a batch
//! operation (`TableOp::payload_size`), and the after-images a commit's row
//! marks carry. Crate-private: it is a storage format, not an API.
//!
//! Int64, Double, DateTime, Guid and Binary values carry an `@odata.type`
//! annotation (the service cannot infer them), Int64 travels as a string
//! (JSON numbers lose precision past 2^53), Binary as base64, and doubles
//! that JSON cannot spell (`NaN`, `Infinity`, `-Infinity`) as annotated
//! strings.

/// `impl Deserialize for $ty`: the deserializer's `$how` driving `$visitor`.
macro_rules! deserialize_by {
    ($ty:ty, $how:ident, $visitor:expr) => {
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(
                d: D,
            ) -> std::result::Result<Self, D::Error> {
                d.$how($visitor)
            }
        }
    };
}
use deserialize_by;

mod decode;
#[cfg(feature = "azure")]
pub(crate) mod direct;
mod encode;

#[cfg(feature = "azure")]
pub(crate) use decode::{ParsedEntity, WireEntity, entity_from_parsed};
pub(crate) use decode::{entity_from_json, entity_from_json_str};
pub(crate) use encode::EntityBody;

#[cfg(test)]
mod tests;
