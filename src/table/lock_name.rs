//! The lease name of a partition's lock.

use crate::error::{Error, Result};
use crate::key::PartitionKey;
use crate::lease::LeaseName;
use crate::query::{digest, digest_from};

/// The lease name of the lock of partition `pk` in a store with table prefix
/// `prefix`: `prefix/pk`, or past the lease-name limit the prefix, `#` and
/// a 128-bit hash of the key. Keys contain neither `#` nor `/`, so the two
/// forms and the names of two prefixes never meet; two keys sharing a hash
/// would only share a lock, which stays safe.
pub(crate) fn lock_name(prefix: &str, pk: &PartitionKey) -> Result<LeaseName> {
    let prefix = lock_prefix(prefix);
    let plain = format!("{prefix}{}", pk.as_str());
    if plain.len() <= LeaseName::MAX_LEN {
        return LeaseName::new(plain);
    }
    let key = pk.as_str().as_bytes();
    let (a, b) = (digest(key), digest_from(0x6c62_272e_07bb_0142, key));
    LeaseName::new(format!("{prefix}#{a:016x}{b:016x}"))
        .map_err(|e| Error::invalid(format!("lock for partition key {pk:?}"), e.to_string()))
}

/// What the lock names of a store with table prefix `prefix` start with:
/// `prefix/`, or nothing without a prefix.
pub(crate) fn lock_prefix(prefix: &str) -> String {
    if prefix.is_empty() {
        String::new()
    } else {
        format!("{prefix}/")
    }
}
