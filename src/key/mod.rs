//! Validated names and keys, and the composite-key encoding.
//!
//! Everything that names a row is checked here, once, at the boundary:
//! [`TableName`], [`PartitionKey`] and [`RowKey`] hold only values the Table
//! service accepts (the rules are the `leasehold-rules` crate's, which the
//! derive also checks with at compile time). Keys of several fields use
//! [`CompositeKey`], which keeps the parts' tuple order.

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
