//! [`ExpiryInstant`]: the field types that can say when an entity's row
//! expires (`#[entity(expires_at)]`, `#[entity(time_to_live = "...")]`; the
//! row protocol's side is `crate::rows::expiry`).

use time::OffsetDateTime;

/// The instant a field declared `#[entity(expires_at)]` (or the base of
/// `#[entity(time_to_live = "...")]`) holds: `None` for a row that never
/// expires.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot say when a row expires",
    label = "not a date-time",
    note = "`#[entity(expires_at)]` and `#[entity(time_to_live = \"...\")]` take a field of type `time::OffsetDateTime`, `chrono::DateTime<Utc>` (feature `chrono`), or an `Option` of one (`None`: never expires)"
)]
pub trait ExpiryInstant {
    /// The instant, `None` for never.
    fn expiry_instant(&self) -> Option<OffsetDateTime>;
}

impl ExpiryInstant for OffsetDateTime {
    fn expiry_instant(&self) -> Option<OffsetDateTime> {
        Some(*self)
    }
}

impl<T: ExpiryInstant> ExpiryInstant for Option<T> {
    fn expiry_instant(&self) -> Option<OffsetDateTime> {
        self.as_ref().and_then(T::expiry_instant)
    }
}
