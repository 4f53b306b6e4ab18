//! # leasehold
//!
//! Azure Table Storage made safe to use from many nodes at once.
//!
//! * **Optimistic concurrency by default.** Typed entities
//!   (`#[derive(Entity)]`) are read with their ETag, and every replace, merge
//!   and delete sends it back: a stale write is [`Error::Conflict`], never a
//!   silent overwrite. Unconditional writes exist only under names that say so.
//! * **Pessimistic units of work when needed.** A blob lease named after the
//!   partition key guards reads and writes across several tables, with a
//!   crash-safe commit.
//!
//! Backends: an embedded in-memory backend with the service's semantics
//! ([`backend::memory`]), and Azure Storage or Azurite (feature `azure`).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod backend;
pub mod entity;
pub mod error;
pub mod key;
pub mod lease;
pub mod query;
pub mod retry;
pub mod store;
pub mod table;
pub mod testing;

pub use entity::{Entity as EntityTrait, EntityData, PropertyCodec, Versioned};
pub use error::{Error, ErrorKind, Result};
pub use key::{ETag, PartitionKey, RowKey, TableName};
pub use retry::RetryPolicy;
pub use store::{Store, StoreBuilder};
pub use table::Table;

/// Derives [`entity::Entity`] for a struct with named fields.
///
/// ```
/// use leasehold::Entity;
///
/// #[derive(Entity, Debug, Clone, PartialEq)]
/// #[entity(table = "Accounts")]
/// struct Account {
///     #[entity(partition_key)]
///     customer: String,
///     #[entity(row_key)]
///     name: String,
///     balance: i64,
///     #[entity(rename = "Owner")]
///     owner: Option<String>,
///     #[entity(json)]
///     tags: Vec<String>,
///     #[entity(skip)]
///     cache: u32,
/// }
/// ```
///
/// Container attribute: `table = "Name"` (checked against the table-name rule
/// at compile time).
///
/// Field attributes:
/// * `partition_key`, `row_key`: the key fields. Mark several fields to compose
///   a key from them (see [`key::CompositeKey`]); key fields implement
///   [`key::KeyPart`].
/// * `rename = "Name"`: the stored property name.
/// * `skip`: not stored; filled with `Default::default()` on read.
/// * `json`: stored as a JSON string through serde.
/// * `default`: a missing property reads as `Default::default()`.
///
/// The derive also generates `T::columns()`, a set of typed [`query::Column`]s
/// for filters.
pub use leasehold_derive::Entity;

#[doc(hidden)]
pub mod __private;
