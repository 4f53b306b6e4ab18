//! Validated names and keys, and the composite-key encoding.
//!
//! Everything that names a row is checked here, once, at the boundary:
//! [`TableName`], [`PartitionKey`] and [`RowKey`] can only hold values the
//! Table service accepts, so code past this point never re-checks them.
//!
//! Keys built from several fields use [`CompositeKey`], an encoding that keeps
//! the tuple order of the parts (so key ranges and sorted scans behave as the
//! tuples would), escapes every character the service forbids, and parses back.
//!
//! The rules themselves (table names, key characters, the key length limit
//! [`PartitionKey::MAX_BYTES`]) are those of the `leasehold-rules` crate,
//! which `#[derive(Entity)]` checks table names with at compile time.

/// `Display` as the bare text and `Debug` as `Name("text")` for a newtype
/// around a validated `String` (`struct Name(String)`).
macro_rules! shown_as_text {
    ($($name:ident),+) => {$(
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}({:?})", stringify!($name), self.0)
            }
        }
    )+};
}
pub(crate) use shown_as_text;

mod blob_names;
mod composite;
mod constant;
mod etag;
mod keys;
pub(crate) mod part;
mod table_name;
mod validate;

pub use blob_names::{BlobName, ContainerName};
pub use composite::CompositeKey;
pub use constant::ConstantRowKey;
pub use etag::ETag;
pub use keys::{PartitionKey, RowKey};
pub(crate) use keys::{compare_keys, shorten};
pub use part::KeyPart;
pub use table_name::TableName;
pub use validate::{IntoPartitionKey, IntoRowKey};
