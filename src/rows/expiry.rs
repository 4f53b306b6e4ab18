//! Row expiry: the property that says when a row stops existing for
//! every reader.
//!
//! A type declaring an expiry (`#[entity(expires_at)]`,
//! `#[entity(time_to_live = "...")]`) writes [`PROPERTY`] (`Edm.DateTime`).
//! Past it (on [`crate::datetime::now`]) the row reads as absent, as a
//! tombstone does ([`super::tombstone::is_tombstone`]), until the sweep
//! deletes it.

use time::OffsetDateTime;

use crate::entity::{Properties, Value};

/// The property holding the instant a row expires (reserved: entities do
/// not declare it; the derive writes it).
pub(crate) const PROPERTY: &str = leasehold_rules::EXPIRY_PROPERTY;

/// Whether a row with these properties has expired at `now` (one without
/// a date-time expiry never does).
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
