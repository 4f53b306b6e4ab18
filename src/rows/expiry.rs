//! Row expiry: the property that says when a row stops existing for
//! every reader.
//!
//! An entity type that declares an expiry (`#[entity(expires_at)]` or
//! `#[entity(time_to_live = "...")]`, see [`crate::Entity`]'s derive) writes
//! the instant its row expires as [`PROPERTY`], an `Edm.DateTime`, beside
//! its own properties. Any row may carry it: a
//! [`DynamicEntity`](crate::DynamicEntity) may set it too.
//!
//! A row whose expiry is at or before now (on [`crate::datetime::now`],
//! the clock tokio's paused time moves) reads as absent, exactly as a
//! tombstone does: every read path judges both in
//! [`super::tombstone::is_tombstone`]. A write over it behaves as over an
//! absent row (an insert replaces it at the ETag read). The rows are
//! deleted later by the store's expiry sweep (`crate::store::expiry`),
//! which finds them with a filter on [`PROPERTY`] alone, so a tool without
//! the Rust types can find them too.

use time::OffsetDateTime;

use crate::entity::{Properties, Value};

/// The property holding the instant a row expires (reserved: entities do
/// not declare it; the derive writes it).
pub(crate) const PROPERTY: &str = leasehold_rules::EXPIRY_PROPERTY;

/// Whether a row with these properties has expired at `now`: its expiry
/// is at or before `now`. A row without one (or with a value that is not
/// a date-time) never expires.
pub(crate) fn expired_at(properties: &Properties, now: OffsetDateTime) -> bool {
    matches!(properties.get(PROPERTY), Some(Value::DateTime(at)) if *at <= now)
}

/// Whether a row with these properties has expired now.
pub(crate) fn expired(properties: &Properties) -> bool {
    // Most rows carry no expiry: skip reading the clock for them.
    properties.get(PROPERTY).is_some() && expired_at(properties, crate::datetime::now())
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn a_row_expires_at_its_instant_and_not_before() {
        let at = datetime!(2026-11-29 12:00:00 UTC);
        let mut props = Properties::new();
        assert!(!expired_at(&props, at));
        props.insert(PROPERTY, Value::DateTime(at));
        assert!(!expired_at(&props, at - time::Duration::nanoseconds(100)));
        assert!(expired_at(&props, at));
        assert!(expired_at(&props, at + time::Duration::seconds(1)));
        let mut text = Properties::new();
        text.insert(PROPERTY, Value::String("soon".into()));
        assert!(!expired_at(&text, at));
    }
}
