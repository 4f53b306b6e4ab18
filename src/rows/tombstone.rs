//! Tombstones: the row an entity of an indexed type leaves where it was
//! deleted (see [`crate::index`]'s "Writes").
//!
//! A claim on a unique value is made good by a conditional write of the
//! entity's row. A writer taking over a claim whose owner does not hold
//! the value first makes the owner's pending write impossible, by a
//! conditional write at the owner's row. For that to last, the row of an
//! entity that has been written must never become absent again: an insert
//! stalled since before it existed would then land. So a delete of such an
//! entity replaces its row with a tombstone, and an insert over a
//! tombstone replaces it at its ETag.
//!
//! Every read through leasehold ([`Table`](crate::Table) reads and queries,
//! index lookups, the reads of units) sees a tombstone as an absent row;
//! index verification skips them. A row past its expiry
//! ([`super::expiry`]) is judged here too, so it reads and is written over
//! as a tombstone is, on every path at once.

use crate::entity::{EntityData, Properties, Value};
use crate::key::{PartitionKey, RowKey};

/// The one property of a tombstone (reserved: entities never carry it).
pub(crate) const PROPERTY: &str = "_lhGone";

/// Whether a row with these properties reads as absent though stored: a
/// tombstone, or a row whose expiry is at or before now
/// ([`super::expiry::expired`]). Every read path hides such a row and an
/// insert replaces it at its ETag.
pub(crate) fn is_tombstone(properties: &Properties) -> bool {
    properties.get(PROPERTY).is_some() || super::expiry::expired(properties)
}

/// The tombstone of the row `(pk, rk)`; `why` says what left it (shown to
/// someone reading the table with another tool).
pub(crate) fn data(pk: &PartitionKey, rk: &RowKey, why: &str) -> EntityData {
    let mut properties = Properties::with_capacity(1);
    properties.insert_static(PROPERTY, Value::String(why.to_owned()));
    EntityData {
        partition_key: pk.clone(),
        row_key: rk.clone(),
        properties,
    }
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
