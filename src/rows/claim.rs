//! Claims: the index row of a unique value (see `crate::index`, "Storage
//! layout"), in the value's own partition of the index table.

/// The row key of a unique value's index row, its claim: one per value's
/// partition, so the service itself refuses a second. Not empty: Azure
/// Cosmos DB for Table refuses empty keys.
pub(crate) const ROW: &str = "_lhClaim";
