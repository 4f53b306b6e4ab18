//! [`EntityData`]: an entity in its stored form, and the service's limits
//! on it.

use super::properties::Properties;
use crate::key::{PartitionKey, RowKey};

/// An entity in its stored form: keys and user properties.
#[derive(Debug, Clone, PartialEq)]
pub struct EntityData {
    /// The partition key.
    pub partition_key: PartitionKey,
    /// The row key.
    pub row_key: RowKey,
    /// Every user property (not the keys, not the Timestamp).
    pub properties: Properties,
}

impl EntityData {
    /// The largest entity, in the service's accounting (4 bytes, plus both
    /// keys as UTF-16, plus for each property 8 bytes, its name as UTF-16
    /// and its value): 1 MiB.
    pub const MAX_BYTES: usize = 1024 * 1024;

    /// The most user properties an entity may have: 252 (255 minus
    /// PartitionKey, RowKey and Timestamp).
    pub const MAX_PROPERTIES: usize = leasehold_rules::MAX_USER_PROPERTIES;
}
