//! Tombstones: the row an entity of an indexed type leaves where it was
//! deleted, read as absent (why: invariant 2 in [`crate::index`]); a row
//! past its expiry is judged here too.

use crate::entity::{EntityData, Properties, Value};
use crate::key::{PartitionKey, RowKey};

/// The one property of a tombstone (reserved: entities never carry it).
pub(crate) const PROPERTY: &str = "_lhGone";

/// Whether a row with these properties reads as absent though stored: a
/// tombstone, or a row past its expiry.
pub(crate) fn is_tombstone(properties: &Properties) -> bool {
    properties.get(PROPERTY).is_some() || super::expiry::expired(properties)
}

/// The tombstone of the row `(pk, rk)`; `why` says what left it (shown to
/// someone reading the table with another tool).
pub(crate) fn data(pk: &PartitionKey, rk: &RowKey, why: &str) -> EntityData {
    let mut properties = Properties::with_capacity(1);
    properties.insert_static(PROPERTY, Value::String(why.to_owned()));
    super::row(pk, rk, properties)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tombstone_is_recognised_and_an_entity_is_not() {
        let pk = PartitionKey::new("p").unwrap();
        let rk = RowKey::new("r").unwrap();
        let gone = data(&pk, &rk, "deleted");
        assert!(is_tombstone(&gone.properties));
        assert_eq!((gone.partition_key, gone.row_key), (pk, rk));
        let mut entity = Properties::new();
        entity.insert("name", Value::String("ann".into()));
        assert!(!is_tombstone(&entity));
    }
}
