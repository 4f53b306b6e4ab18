#![doc = include_str!("../README.md")]
//!
//! ## Backends and features
//!
//! The embedded backend is [`backend::memory::MemoryBackend`]
//! ([`Store::memory`]); the Azure Storage and Azurite backend
//! (`backend::azure`, `Store::connect`, `Store::from_env`) is behind the
//! default feature `azure`. The `leasehold` operator command (see above) is
//! the package `leasehold-cli`.
//!
//! ## Types from other crates
//!
//! Public signatures use a few types of other crates; they are re-exported
//! here, so calling leasehold needs no extra dependency (and no matching of
//! versions):
//!
//! * [`CancellationToken`] (from `tokio-util`): give one to
//!   [`LeaderOptions::with_stop`](lease::LeaderOptions::with_stop); lease
//!   guards and leaders hand one out that is cancelled on loss;
//! * [`time`]: `OffsetDateTime` of entity fields, [`Versioned::timestamp`]
//!   and `Edm.DateTime` values (its `datetime!` macro needs `time` as a
//!   direct dependency, with feature `macros`);
//! * [`uuid`]: `Uuid` of entity fields, `Edm.Guid` values and lease ids;
//! * [`serde_json`]: the JSON values of lease documents and after-images;
//! * [`stream`]: the `Stream` trait [`table::Query::stream`] returns, and
//!   `TryStreamExt` to consume it (`try_next`, `try_collect`, ...).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

// Lets unit tests and the conformance checks (feature `conformance`, written
// against the public API as `leasehold::...`) derive `Entity`, whose
// generated code names `::leasehold`.
#[cfg(any(test, feature = "conformance", clippy))]
extern crate self as leasehold;

pub mod backend;
mod datetime;
pub mod entity;
pub mod error;
pub mod index;
pub mod key;
pub mod lease;
pub mod lock;
mod outcome;
pub mod query;
mod retry;
mod rows;
pub mod store;
pub mod table;
mod telemetry;
#[cfg(any(test, feature = "conformance", clippy))]
pub mod testing;
pub mod txn;

pub use entity::{DynamicEntity, EntityData, PropertyCodec, Versioned};
pub use error::{Error, ErrorKind, Result};
pub use index::IndexReport;
pub use key::{ETag, PartitionKey, RowKey, TableName};
pub use retry::ConflictRetry;
pub use store::{Store, StoreBuilder};
pub use table::Table;

// Re-exports of other crates' items that public signatures use (see the
// crate docs, "Types from other crates").
pub use serde_json;
pub use time;
pub use tokio_util::sync::CancellationToken;
pub use uuid;

/// The `futures` stream traits, to consume [`table::Query::stream`] without
/// depending on `futures` directly (`StreamExt`'s adapters are
/// `futures-util`'s).
///
/// ```
/// # use leasehold::{Entity, Store};
/// use leasehold::stream::TryStreamExt as _;
/// # #[derive(Entity, Clone, Debug)]
/// # #[entity(table = "Accounts")]
/// # struct Account { #[entity(partition_key)] customer: String, #[entity(row_key)] name: String }
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let accounts = Store::memory().table::<Account>();
/// accounts.insert(Account { customer: "alice".into(), name: "checking".into() }).await?;
/// let mut rows = Box::pin(accounts.query().partition("alice").stream());
/// while let Some(row) = rows.try_next().await? {
///     assert_eq!(row.name, "checking");
/// }
/// # Ok::<(), leasehold::Error>(()) }).unwrap();
/// ```
pub mod stream {
    pub use futures_core::Stream;
    pub use futures_util::TryStreamExt;
}

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
/// Container attributes:
/// * `table = "Name"` (required; checked against the table-name rule at
///   compile time).
/// * `partition_key = "..."`, `row_key = "..."`: a constant key, for a type
///   with one row per partition (`#[entity(table = "Customers", row_key =
///   "profile")]`) or one row in all; no field is then marked with that
///   key. The constant is checked at compile time, and a row read with
///   another key is an [`Error::Decode`]. A constant row key implements
///   [`key::ConstantRowKey`], so [`Table::get_one`] reads an entity by its
///   partition key alone.
/// * `drop_unknown_properties`: see [`Versioned`] on properties unknown to
///   the type.
///
/// Field attributes:
/// * `partition_key`, `row_key`: the key fields, which implement
///   [`key::KeyPart`] and are stored in the key, not as properties. To compose
///   a key from several fields, give each its position: `row_key = 0`,
///   `row_key = 1`, ... The parts are joined with [`key::CompositeKey`], which
///   escapes every character the service forbids and keeps the tuple order.
/// * `rename = "Name"`: the stored property name (checked at compile time).
/// * `skip`: not stored; filled with `Default::default()` on read.
/// * `json`: stored as a JSON string through serde; JSON `null` (such as
///   `None`) is stored as an absent property.
/// * `default`: a missing property reads as `Default::default()`.
/// * `unique`: no two entities of the type share the field's value;
///   `index`: a non-unique index. Index rows are kept with every write
///   and looked up with [`Table::get_by`], [`Table::find_by`] and
///   [`Table::find_range`] (see [`index`]). The field's type (or the `T`
///   of an `Option<T>`; `None` is not indexed) must implement
///   [`key::KeyPart`]; key, `json` and `skip` fields cannot be indexed.
/// * `chunked`, on a `String`, `Vec<u8>` (or `Option` of these) or `json`
///   field: a value over the 64 KiB property limit is stored across
///   numbered properties `name`, `name_1`, `name_2`, ... with the count in
///   `name_count`, up to the 1 MiB entity limit, and joined on read (the
///   layout Orleans' Azure table storage uses; a replace with a shorter
///   value leaves no stale chunk). A value over the limit is an
///   [`Error::Invalid`] naming the field and the limit, before anything is
///   sent. Chunked fields have no typed column.
///
/// Every other field is stored under its name with [`PropertyCodec`]; an
/// `Option` that is `None` is an absent property. Mistakes (no key, an
/// unsupported type, a reserved or invalid name, an unknown attribute) are
/// compile errors at the offending field or attribute. Names starting with
/// `_lh` are leasehold's own (write logs, row marks, tombstones) and are
/// refused too.
///
/// Key builders, associated functions of the type: `T::partition_key_from(...)`
/// and `T::row_key_from(...)` take the key fields in position order
/// (`String` parts as `impl Into<String>`, others by value; nothing for a
/// constant key) and build the key as the entity's own `partition_key` /
/// `row_key` does. A builder that cannot fail returns the key itself
/// ([`PartitionKey`] / [`RowKey`]): that of a constant key, and that of a key
/// whose every part is written as an integer type (`u8` to `u64`, `i8` to
/// `i64`), `Uuid`, `OffsetDateTime` or `DateTime<Utc>` (alone or behind its
/// crate's path, such as `uuid::Uuid`; a type of your own by one of these
/// names is a compile error unless written with another path, such as
/// `crate::ids::Uuid`), whose key forms have a fixed width
/// and no forbidden character (a compile-time check makes sure their longest
/// forms fit the key limit together). A builder taking a `String` (or any
/// other) part returns a `Result`, an [`Error::Invalid`] when the parts make
/// no valid key: a single `String` part with a character keys forbid, or a
/// key over 1 KiB. For a key of several fields, `T::row_key_prefix_a(a)`,
/// `T::row_key_prefix_a_b(a, b)`, ... (named after the leading fields they
/// take; `partition_key_prefix_...` likewise) are typed filters selecting
/// exactly the rows whose key starts with those parts, as a key range:
///
/// ```
/// # use leasehold::{Entity, Store};
/// #[derive(Entity, Debug, Clone)]
/// #[entity(table = "Orders")]
/// struct Order {
///     #[entity(partition_key)]
///     shop: String,
///     #[entity(row_key = 0)]
///     year: i32,
///     #[entity(row_key = 1)]
///     number: u32,
///     total: i64,
/// }
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let orders = Store::memory().table::<Order>();
/// for (year, number) in [(2025, 7), (2026, 1), (2026, 2)] {
///     orders.insert(Order { shop: "s1".into(), year, number, total: 5 }).await?;
/// }
/// // Integer parts cannot fail: the key itself, no `?`.
/// let rk = Order::row_key_from(2026, 2);
/// assert!(orders.get("s1", rk).await?.is_some());
/// let of_2026 = orders.query().partition("s1").filter(Order::row_key_prefix_year(2026)).all().await?;
/// assert_eq!(of_2026.len(), 2);
/// # Ok::<(), leasehold::Error>(()) }).unwrap();
/// ```
///
/// The derive also generates `T::columns()`, a `TColumns` struct of typed
/// [`query::Column`]s for filters, with the entity's visibility. Each column
/// is named after its field and compares the stored property: one per stored
/// field that is not `json`, comparing values of the field's type (of `T` for
/// an `Option<T>`), and one for each key made of a single `String` field,
/// comparing `PartitionKey` or `RowKey`.
///
/// ```
/// use leasehold::Entity;
///
/// #[derive(Entity)]
/// #[entity(table = "Orders")]
/// struct Order {
///     #[entity(partition_key)]
///     customer: String,
///     #[entity(row_key = 0)]
///     year: u16,
///     #[entity(row_key = 1)]
///     number: u32,
///     total: i64,
///     note: Option<String>,
/// }
///
/// let c = Order::columns();
/// let f = c.customer.eq("c1") & c.total.ge(100) & c.note.ne("gift");
/// assert_eq!(
///     f.to_odata().unwrap(),
///     "((PartitionKey eq 'c1') and (total ge 100L)) and (note ne 'gift')"
/// );
/// ```
pub use leasehold_derive::Entity;

/// Derives [`PropertyCodec`](trait@PropertyCodec) for a fieldless enum, so
/// it can be an entity field (and a typed column) of its own.
///
/// By default a variant is stored as an `Edm.String` holding its name; a
/// variant's `#[entity(rename = "...")]` or the enum's
/// `#[entity(rename_all = "...")]` changes it, spelled as serde spells them
/// (`lowercase`, `UPPERCASE`, `PascalCase`, `camelCase`, `snake_case`,
/// `SCREAMING_SNAKE_CASE`, `kebab-case`, `SCREAMING-KEBAB-CASE`). With
/// `#[entity(int32)]` on the enum, every variant needs an explicit integer
/// discriminant, and is stored as that `Edm.Int32` (which keeps the stored
/// value when a variant is renamed, and orders as the numbers do).
///
/// A stored value no variant stands for (written by a newer program, or by
/// hand) is an [`Error::Decode`] naming the property, the value and the row.
///
/// ```
/// use leasehold::{Entity, PropertyCodec};
///
/// #[derive(PropertyCodec, Debug, Clone, Copy, PartialEq)]
/// #[entity(rename_all = "snake_case")]
/// enum Status {
///     Pending,
///     OutForDelivery,
///     #[entity(rename = "done")]
///     Shipped,
/// }
///
/// #[derive(PropertyCodec, Debug, Clone, Copy, PartialEq)]
/// #[entity(int32)]
/// enum Priority {
///     Low = 1,
///     High = 10,
/// }
///
/// #[derive(Entity)]
/// #[entity(table = "Orders")]
/// struct Order {
///     #[entity(partition_key)]
///     shop: String,
///     #[entity(row_key)]
///     id: String,
///     status: Status,
///     priority: Option<Priority>,
/// }
///
/// let c = Order::columns();
/// let f = c.status.eq(Status::Shipped) & c.priority.ge(Priority::High);
/// assert_eq!(f.to_odata().unwrap(), "(status eq 'done') and (priority ge 10)");
/// ```
pub use leasehold_derive::PropertyCodec;

#[doc(hidden)]
pub mod __private;
