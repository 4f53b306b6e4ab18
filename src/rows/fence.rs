//! Fence rows: the row a fenced write sends with every transaction to a
//! partition (see `crate::table::fence` for the protocol), one per lease
//! in each partition written: row key [`ROW_PREFIX`] followed by the lease
//! name (`%`, `/`, `\`, `#`, `?` and control characters percent-encoded),
//! properties [`EPOCH`] (`Edm.Int64`) and [`LEASE`] (the lease name, for
//! people reading the table).

use crate::backend::StoredEntity;
use crate::entity::{EntityData, Properties, Value};
use crate::error::{Error, Result};
use crate::key::{PartitionKey, RowKey};

/// The row-key prefix reserved for fence rows: reads through leasehold
/// leave such rows out, and a fenced table refuses to write one as data.
pub(crate) const ROW_PREFIX: &str = "~lhfence~";

/// The fence row's epoch property.
pub(crate) const EPOCH: &str = "_lhFenceEpoch";

/// The fence row's lease-name property.
pub(crate) const LEASE: &str = "_lhFenceLease";

/// Whether `row_key` is a fence row's.
pub(crate) fn is_fence_row(row_key: &str) -> bool {
    row_key.starts_with(ROW_PREFIX)
}

/// The row key of the fence rows of lease `lease`.
///
/// # Errors
/// [`Error::Invalid`] when the lease name is too long for a row key once
/// encoded.
pub(crate) fn row_key(lease: &str) -> Result<RowKey> {
    let mut key = String::from(ROW_PREFIX);
    for c in lease.chars() {
        if matches!(c, '%' | '/' | '\\' | '#' | '?') || c.is_control() {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                key.push_str(&format!("%{b:02X}"));
            }
        } else {
            key.push(c);
        }
    }
    RowKey::new(key).map_err(|e| {
        Error::invalid(
            format!("lease name {lease:?} as a fence row key"),
            e.to_string(),
        )
    })
}

/// The fence row `row_key` of partition `pk` at epoch `epoch` of lease
/// `lease`.
pub(crate) fn data(pk: &PartitionKey, row_key: &RowKey, lease: &str, epoch: i64) -> EntityData {
    let mut properties = Properties::with_capacity(2);
    properties.insert_static(EPOCH, Value::Int64(epoch));
    properties.insert_static(LEASE, Value::String(lease.to_owned()));
    super::row(pk, row_key, properties)
}

/// The epoch a stored fence row carries.
///
/// # Errors
/// [`Error::Inconsistent`] for a row without a valid epoch.
pub(crate) fn epoch_of(stored: &StoredEntity) -> Result<u64> {
    let epoch = match stored.data.properties.get(EPOCH) {
        Some(Value::Int64(epoch)) => u64::try_from(*epoch).ok(),
        _ => None,
    };
    epoch.ok_or_else(|| Error::Inconsistent {
        what: format!(
            "fence row {:?} of partition {:?} has no valid `{EPOCH}`",
            stored.data.row_key.as_str(),
            stored.data.partition_key.as_str()
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fence_row_keys_encode_the_characters_keys_forbid() {
        let key = row_key("jobs/a%b#c?d\\e\u{1}f").unwrap();
        assert_eq!(key.as_str(), "~lhfence~jobs%2Fa%25b%23c%3Fd%5Ce%01f");
        assert!(is_fence_row(key.as_str()));
        assert!(!is_fence_row("lhfence"));
        assert!(row_key(&"/".repeat(256)).is_err());
        assert!(row_key(&"a".repeat(256)).is_ok());
    }
}
