//! [`IndexDef`]: one index as the derive declares it.

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
