//! [`PartitionKey`] and [`RowKey`]: the key types. Building them from
//! strings, which checks the service's key rules, is in `validate`.

use std::borrow::Borrow;

/// Orders keys (and string values) as the service does: by UTF-16 code unit.
pub(crate) fn compare_keys(a: &str, b: &str) -> std::cmp::Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

macro_rules! key_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $name(String);

        impl $name {
            /// The largest key, in bytes of UTF-16 (the service stores keys
            /// as UTF-16): 1 KiB.
            pub const MAX_BYTES: usize = leasehold_rules::MAX_KEY_BYTES;

            /// Wraps a key that passed `leasehold_rules::key_problem` (or
            /// is known to pass it, as keys of fixed-width parts are).
            pub(crate) fn from_valid(key: String) -> Self {
                $name(key)
            }

            /// The key as a string.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The key as an owned string.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        super::shown_as_text!($name);

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }
    };
}

key_type!(
    /// A validated `PartitionKey`.
    PartitionKey
);
key_type!(
    /// A validated `RowKey`.
    RowKey
);

/// A key as it appears in an error message: long keys are cut.
pub(crate) fn shorten(key: &str) -> String {
    const MAX: usize = 64;
    if key.chars().count() <= MAX {
        format!("{key:?}")
    } else {
        let head: String = key.chars().take(MAX).collect();
        format!("{head:?}… ({} chars)", key.chars().count())
    }
}
