#![doc = include_str!("../README.md")]
//!
//! ## Backends and types from other crates
//!
//! The embedded backend is [`backend::memory::MemoryBackend`]
//! ([`Store::memory`]); the Azure backend (`backend::azure`,
//! `Store::connect`, `Store::from_env`) is behind the default feature
//! `azure`. Other crates' types in public signatures are re-exported, so
//! calling leasehold needs no extra dependency: [`CancellationToken`],
//! [`time`] (the `datetime!` macro needs `time` as a direct dependency),
//! [`uuid`], [`serde_json`] and [`stream`].

#![forbid(unsafe_code)]
#![warn(missing_docs)]

// Lets unit tests and the conformance checks derive `Entity`, whose
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

pub use serde_json;
pub use time;
pub use tokio_util::sync::CancellationToken;
pub use uuid;

/// The `futures` stream traits, to consume [`table::Query::stream`] without
/// depending on `futures`.
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
/// * `table = "Name"` (required; checked at compile time).
/// * `partition_key = "..."`, `row_key = "..."`: a constant key (checked at
///   compile time; a row read with another is an [`Error::Decode`]), for a
///   type with one row per partition or one in all. A constant row key
///   implements [`key::ConstantRowKey`] for [`Table::get_one`].
/// * `drop_unknown_properties`: see [`Versioned`] on properties unknown to
///   the type.
///
/// Field attributes:
/// * `partition_key`, `row_key`: the key fields ([`key::KeyPart`]), stored in
///   the key. Several fields make one key by position (`row_key = 0`,
///   `row_key = 1`, ...), joined with [`key::CompositeKey`], which keeps the
///   tuple order.
/// * `rename = "Name"`: the stored property name (checked at compile time).
/// * `skip`: not stored; `Default::default()` on read.
/// * `json`: stored as a JSON string through serde (JSON `null` as absent).
/// * `default`: a missing property reads as `Default::default()`.
/// * `unique`, `index`: a unique or non-unique index of a [`key::KeyPart`]
///   field (or `Option` of one), kept with every write and looked up with
///   [`Table::get_by`], [`Table::find_by`] and [`Table::find_range`] (see
///   [`index`]).
/// * `chunked`, on a `String`, `Vec<u8>` (or `Option` of these) or `json`
///   field: a value over the 64 KiB property limit is stored across `name`,
///   `name_1`, ... with the count in `name_count`, up to the 1 MiB entity
///   limit (over it: [`Error::Invalid`] before anything is sent). No typed
///   column.
///
/// Every other field is stored under its name with [`PropertyCodec`]; `None`
/// is an absent property. Mistakes (no key, an unsupported type, a reserved
/// name such as one starting with `_lh`, an unknown attribute) are compile
/// errors at the offending field or attribute.
///
/// Key builders: `T::partition_key_from(...)` and `T::row_key_from(...)`
/// take the key fields in position order and build the key. One whose parts
/// are all integers, `Uuid`, `OffsetDateTime` or `DateTime<Utc>` (fixed-width
/// forms, checked at compile time to fit) or constant returns the key itself;
/// one with a `String` (or other) part returns a `Result` ([`Error::Invalid`]
/// for no valid key). For a key of several fields, `T::row_key_prefix_a(a)`,
/// `T::row_key_prefix_a_b(a, b)`, ... (and `partition_key_prefix_...`) are
/// typed filters for the rows whose key starts with those parts.
///
/// `T::columns()` gives a `TColumns` struct of typed [`query::Column`]s, one
/// per stored field that is not `json` (of `T` for an `Option<T>`) and per
/// key of a single `String` field.
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
///     note: Option<String>,
/// }
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let orders = Store::memory().table::<Order>();
/// for (year, number) in [(2025, 7), (2026, 1), (2026, 2)] {
///     orders.insert(Order { shop: "s1".into(), year, number, total: 5, note: None }).await?;
/// }
/// // Integer parts cannot fail: the key itself, no `?`.
/// let rk = Order::row_key_from(2026, 2);
/// assert!(orders.get("s1", rk).await?.is_some());
/// let of_2026 = orders.query().partition("s1").filter(Order::row_key_prefix_year(2026)).all().await?;
/// assert_eq!(of_2026.len(), 2);
///
/// let c = Order::columns();
/// let f = c.shop.eq("s1") & c.total.ge(100) & c.note.ne("gift");
/// assert_eq!(
///     f.to_odata().unwrap(),
///     "((PartitionKey eq 's1') and (total ge 100L)) and (note ne 'gift')"
/// );
/// # Ok::<(), leasehold::Error>(()) }).unwrap();
/// ```
pub use leasehold_derive::Entity;

/// Derives [`PropertyCodec`](trait@PropertyCodec) for a fieldless enum, so
/// it can be an entity field (and a typed column) of its own.
///
/// A variant is stored as an `Edm.String` of its name, changed by
/// `#[entity(rename = "...")]` or the enum's `#[entity(rename_all = "...")]`
/// (as serde spells them); with `#[entity(int32)]`, as its explicit
/// discriminant in an `Edm.Int32`. A stored value no variant stands for is
/// an [`Error::Decode`] naming the property, the value and the row.
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
