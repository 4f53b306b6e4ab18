//! Typed filters over the columns `#[derive(Entity)]` generates, so a
//! filter names real fields with values of the right type:
//!
//! ```
//! use leasehold::Entity;
//!
//! #[derive(Entity, Debug, Clone, PartialEq)]
//! #[entity(table = "Accounts")]
//! struct Account {
//!     #[entity(partition_key)]
//!     customer: String,
//!     #[entity(row_key)]
//!     name: String,
//!     balance: i64,
//! }
//!
//! // Columns are named after fields; a single `String` key field compares
//! // the key itself, stored as `PartitionKey` or `RowKey`.
//! let c = Account::columns();
//! let f = c.balance.gt(100) & !c.name.eq("savings");
//! assert_eq!(
//!     f.to_odata().unwrap(),
//!     "(balance gt 100L) and (not (RowKey eq 'savings'))"
//! );
//! ```
//!
//! # Key ranges
//!
//! A query's partition key and row-key range travel in its filter, at most
//! [`Filter::MAX_LEN`] (10 KiB) URL-encoded. A UTF-16 unit of a key costs 1
//! to 9 bytes encoded (9 for CJK), so a range of one key (`k..=k`) or with
//! one bound runs for any valid keys; one with two bounds runs when the
//! partition key and both bounds cost at most 10 152 bytes (any bounds in
//! an ASCII partition), and is [`Error::Invalid`] otherwise.

mod filter;
mod token;

use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};

pub(crate) use filter::Row;
pub use filter::{CmpOp, Filter};
pub use token::ContinuationToken;
pub(crate) use token::{digest, digest_from};

use crate::entity::{PropertyCodec, Value};
use crate::error::{Error, Result};

/// A typed column of entity type `E` holding values of type `T`, generated
/// by `#[derive(Entity)]`.
pub struct Column<E, T> {
    name: &'static str,
    _types: PhantomData<fn() -> (E, T)>,
}

impl<E, T> Clone for Column<E, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<E, T> Copy for Column<E, T> {}

impl<E, T> std::fmt::Debug for Column<E, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Column({})", self.name)
    }
}

impl<E, T: PropertyCodec> Column<E, T> {
    /// A column for the stored property `name`.
    pub const fn new(name: &'static str) -> Self {
        Column {
            name,
            _types: PhantomData,
        }
    }

    /// The stored property name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    fn cmp(self, op: CmpOp, value: T) -> TypedFilter<E> {
        TypedFilter::of(
            match value.encode() {
                Ok(Some(value)) => Ok(Filter::compare(self.name, op, value)),
                Ok(None) => {
                    Err("an absent value cannot be compared; the service has no null".into())
                }
                Err(e) => Err(e.0),
            }
            .map_err(|why| (format!("filter literal for `{}`", self.name), why)),
        )
    }

    /// `column eq value`
    pub fn eq(self, value: impl ColumnValue<T>) -> TypedFilter<E> {
        self.cmp(CmpOp::Eq, value.into_column_value())
    }

    /// `column ne value`
    pub fn ne(self, value: impl ColumnValue<T>) -> TypedFilter<E> {
        self.cmp(CmpOp::Ne, value.into_column_value())
    }

    /// `column gt value`
    pub fn gt(self, value: impl ColumnValue<T>) -> TypedFilter<E> {
        self.cmp(CmpOp::Gt, value.into_column_value())
    }

    /// `column ge value`
    pub fn ge(self, value: impl ColumnValue<T>) -> TypedFilter<E> {
        self.cmp(CmpOp::Ge, value.into_column_value())
    }

    /// `column lt value`
    pub fn lt(self, value: impl ColumnValue<T>) -> TypedFilter<E> {
        self.cmp(CmpOp::Lt, value.into_column_value())
    }

    /// `column le value`
    pub fn le(self, value: impl ColumnValue<T>) -> TypedFilter<E> {
        self.cmp(CmpOp::Le, value.into_column_value())
    }
}

/// A value a [`Column`] of type `T` compares with: `T` itself, or a type that
/// converts to `T` without loss (`i32` for `i64`, `f32` for `f64`, `&str`
/// for `String`, `&[u8]` for `Vec<u8>`: the implementors below; a column of
/// an `Option<T>` field is one of `T`). An integer literal beyond the `i32`
/// range needs its type spelled (`c.total.ge(5_000_000_000_i64)`).
///
/// ```compile_fail,E0277
/// # use leasehold::Entity;
/// #[derive(Entity)]
/// #[entity(table = "Orders")]
/// struct Order { #[entity(partition_key)] customer: String, #[entity(row_key)] id: String, total: i64 }
/// let _ = Order::columns().total.ge(true); // a bool is not a number
/// ```
///
/// A [`PropertyCodec`] of your own compares with itself; implement this
/// trait for more widenings.
#[diagnostic::on_unimplemented(
    message = "a column of `{T}` does not compare with `{Self}`",
    label = "not `{T}` nor a lossless widening of it",
    note = "a column compares with its own type and the widenings listed in the docs of `leasehold::query::ColumnValue`"
)]
pub trait ColumnValue<T> {
    /// The value as the column's type.
    fn into_column_value(self) -> T;
}

impl<T: PropertyCodec> ColumnValue<T> for T {
    fn into_column_value(self) -> T {
        self
    }
}

/// A column of `Option<T>` (built by hand; derived columns strip the
/// `Option`) compares with a plain `T`.
impl<T: PropertyCodec> ColumnValue<Option<T>> for T {
    fn into_column_value(self) -> Option<T> {
        Some(self)
    }
}

// Lossless widenings, each also accepted by a column of `Option<column type>`.
macro_rules! widen {
    ($column:ty: $($from:ty),*) => {$(
        impl ColumnValue<$column> for $from {
            fn into_column_value(self) -> $column {
                <$column>::from(self)
            }
        }
        impl ColumnValue<Option<$column>> for $from {
            fn into_column_value(self) -> Option<$column> {
                Some(<$column>::from(self))
            }
        }
    )*};
}
widen!(i64: i8, i16, i32, u8, u16, u32);
widen!(i32: i8, i16, u8, u16);
widen!(i16: i8, u8);
widen!(u64: u8, u16, u32);
widen!(u32: u8, u16);
widen!(u16: u8);
widen!(f64: f32, i8, i16, i32, u8, u16, u32);

// Borrowed and boxed forms of strings and byte strings.
macro_rules! borrowed {
    ($column:ty: $([$($generics:tt)*] $from:ty => |$v:ident| $convert:expr),* $(,)?) => {$(
        impl<$($generics)*> ColumnValue<$column> for $from {
            fn into_column_value(self) -> $column {
                let $v = self;
                $convert
            }
        }
        impl<$($generics)*> ColumnValue<Option<$column>> for $from {
            fn into_column_value(self) -> Option<$column> {
                let $v = self;
                Some($convert)
            }
        }
    )*};
}
borrowed!(String:
    ['a] &'a str => |s| s.to_owned(),
    ['a] &'a String => |s| s.clone(),
    [] Box<str> => |s| s.into_string(),
    ['a] std::borrow::Cow<'a, str> => |s| s.into_owned(),
);
borrowed!(Vec<u8>:
    ['a] &'a [u8] => |b| b.to_vec(),
    ['a] &'a Vec<u8> => |b| b.clone(),
    [const N: usize] [u8; N] => |b| b.to_vec(),
    ['a, const N: usize] &'a [u8; N] => |b| b.to_vec(),
);

/// A filter over entities of type `E`, combined with `&`, `|` and `!`. A
/// literal that cannot be stored (a `u64` above `i64::MAX`) is reported
/// when the query runs, before any request.
#[must_use = "a filter does nothing until given to `Query::filter`"]
pub struct TypedFilter<E> {
    inner: std::result::Result<Filter, (String, String)>,
    _entity: PhantomData<fn() -> E>,
}

impl<E> Clone for TypedFilter<E> {
    fn clone(&self) -> Self {
        TypedFilter::of(self.inner.clone())
    }
}

impl<E> std::fmt::Debug for TypedFilter<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.inner {
            Ok(filter) => write!(f, "TypedFilter({})", filter.to_odata()),
            Err((what, why)) => write!(f, "TypedFilter(invalid {what}: {why})"),
        }
    }
}

impl<E> TypedFilter<E> {
    fn of(inner: std::result::Result<Filter, (String, String)>) -> Self {
        TypedFilter {
            inner,
            _entity: PhantomData,
        }
    }

    /// Wraps an untyped filter (for properties the derive does not know).
    pub fn raw(filter: Filter) -> Self {
        TypedFilter::of(Ok(filter))
    }

    /// The same filter over a projection's type.
    pub(crate) fn view<V>(self) -> TypedFilter<V> {
        TypedFilter::of(self.inner)
    }

    /// The untyped filter, checked by [`Filter::validate`].
    ///
    /// # Errors
    /// As [`Filter::validate`]; [`Error::Invalid`] for a literal that
    /// cannot be stored.
    pub fn into_filter(self) -> Result<Filter> {
        let filter = self
            .inner
            .map_err(|(what, why)| Error::invalid(what, why))?;
        filter.validate()?;
        Ok(filter)
    }

    /// The OData text of this filter.
    ///
    /// # Errors
    /// As [`TypedFilter::into_filter`].
    pub fn to_odata(&self) -> Result<String> {
        Ok(self.clone().into_filter()?.to_odata())
    }

    fn combine(self, other: Self, f: impl FnOnce(Filter, Filter) -> Filter) -> Self {
        TypedFilter::of(match (self.inner, other.inner) {
            (Ok(a), Ok(b)) => Ok(f(a, b)),
            (Err(e), _) | (_, Err(e)) => Err(e),
        })
    }

    /// Both hold.
    pub fn and(self, other: Self) -> Self {
        self.combine(other, Filter::and)
    }

    /// Either holds.
    pub fn or(self, other: Self) -> Self {
        self.combine(other, Filter::or)
    }
}

impl<E> std::ops::BitAnd for TypedFilter<E> {
    type Output = Self;
    fn bitand(self, rhs: Self) -> Self {
        self.and(rhs)
    }
}

impl<E> std::ops::BitOr for TypedFilter<E> {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        self.or(rhs)
    }
}

impl<E> std::ops::Not for TypedFilter<E> {
    type Output = Self;
    fn not(self) -> Self {
        TypedFilter::of(self.inner.map(Filter::not))
    }
}

/// Where a query resumes: the service's `NextPartitionKey` / `NextRowKey`,
/// as backends pass it (a typed query's is in a [`ContinuationToken`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Continuation {
    /// `NextPartitionKey`
    #[serde(rename = "p")]
    pub next_partition_key: String,
    /// `NextRowKey`
    #[serde(rename = "r", default, skip_serializing_if = "Option::is_none")]
    pub next_row_key: Option<String>,
}

/// A key range as a filter (a range of one key: one `eq` comparison).
pub(crate) fn key_range_filter(
    property: &'static str,
    range: (Bound<String>, Bound<String>),
) -> Option<Filter> {
    if let (Bound::Included(low), Bound::Included(high)) = &range
        && low == high
    {
        return Some(Filter::compare(
            property,
            CmpOp::Eq,
            Value::String(low.clone()),
        ));
    }
    let bound = |b: Bound<String>, inclusive, exclusive| match b {
        Bound::Included(s) => Some(Filter::compare(property, inclusive, Value::String(s))),
        Bound::Excluded(s) => Some(Filter::compare(property, exclusive, Value::String(s))),
        Bound::Unbounded => None,
    };
    let lower = bound(range.0, CmpOp::Ge, CmpOp::Gt);
    let upper = bound(range.1, CmpOp::Le, CmpOp::Lt);
    lower.into_iter().chain(upper).reduce(Filter::and)
}

/// The filter of a query over `partition`, `rows` and `filter`, all
/// joined by `and`; `None` when nothing is asked.
pub(crate) fn scope_filter(
    partition: Option<&str>,
    rows: &(Bound<String>, Bound<String>),
    filter: Option<Filter>,
) -> Option<Filter> {
    let partition = partition
        .map(|pk| Filter::compare("PartitionKey", CmpOp::Eq, Value::String(pk.to_owned())));
    partition
        .into_iter()
        .chain(key_range_filter("RowKey", rows.clone()))
        .chain(filter)
        .reduce(Filter::and)
}

/// The builder methods a typed query shares with a unit's query, over the
/// fields `partition`, `rows` and `filter`.
macro_rules! scope_builders {
    ($partition:literal) => {
        #[doc = $partition]
        pub fn partition(mut self, partition_key: impl $crate::key::IntoPartitionKey) -> Self {
            self.partition = Some(partition_key.into_partition_key());
            self
        }

        /// Only row keys within `range` (such as `"a".."m"` or `"k"..`).
        pub fn row_keys<R: std::ops::RangeBounds<S>, S: AsRef<str>>(mut self, range: R) -> Self {
            self.rows = $crate::query::owned_bounds(range);
            self
        }

        /// Only row keys starting with `prefix` (a key range).
        pub fn row_key_prefix(mut self, prefix: &str) -> Self {
            self.rows = $crate::query::prefix_range(prefix);
            self
        }

        /// Only entities matching `filter` (and-ed with earlier ones).
        pub fn filter(mut self, filter: $crate::query::TypedFilter<E>) -> Self {
            self.filter = Some(match self.filter.take() {
                Some(existing) => existing & filter,
                None => filter,
            });
            self
        }
    };
}
pub(crate) use scope_builders;

/// The key range holding exactly the keys that start with `prefix`.
pub(crate) fn prefix_range(prefix: &str) -> (Bound<String>, Bound<String>) {
    if prefix.is_empty() {
        return (Bound::Unbounded, Bound::Unbounded);
    }
    // The smallest string above every string with this prefix: bump the last
    // UTF-16 unit that can be bumped, dropping what follows it.
    let mut units: Vec<u16> = prefix.encode_utf16().collect();
    while let Some(last) = units.pop() {
        if last < u16::MAX {
            units.push(last + 1);
            return match String::from_utf16(&units) {
                Ok(upper) => (Bound::Included(prefix.to_owned()), Bound::Excluded(upper)),
                // Bumping into a surrogate: no string bound to stop at.
                Err(_) => (Bound::Included(prefix.to_owned()), Bound::Unbounded),
            };
        }
    }
    (Bound::Included(prefix.to_owned()), Bound::Unbounded)
}

pub(crate) fn owned_bounds<R: RangeBounds<S>, S: AsRef<str>>(
    range: R,
) -> (Bound<String>, Bound<String>) {
    let own = |b: Bound<&S>| b.map(|s| s.as_ref().to_owned());
    (own(range.start_bound()), own(range.end_bound()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continuation_tokens_round_trip_and_reject_garbage() {
        let c = Continuation {
            next_partition_key: "p'1".into(),
            next_row_key: Some("r 2".into()),
        };
        let token = ContinuationToken::new(c.clone(), 7);
        let read: ContinuationToken = token.to_string().parse().unwrap();
        assert_eq!((read.at, read.query), (c, 7));
        assert!("not a token".parse::<ContinuationToken>().is_err());
    }

    /// The filter a query over `partition` and `rows` sends.
    fn query_filter(partition: &str, rows: (Bound<String>, Bound<String>)) -> Filter {
        scope_filter(Some(partition), &rows, None).unwrap()
    }

    #[test]
    fn a_range_of_one_key_is_one_comparison() {
        let k = "日".repeat(512);
        let f = key_range_filter("RowKey", owned_bounds(k.clone()..=k.clone())).unwrap();
        assert_eq!(f, Filter::compare("RowKey", CmpOp::Eq, Value::String(k)));
        // Unequal or half-open bounds stay a range.
        let f = key_range_filter("RowKey", owned_bounds("a".."a")).unwrap();
        assert_eq!(f.comparisons(), 2);
        let f = key_range_filter("RowKey", owned_bounds("a"..="b")).unwrap();
        assert_eq!(f.to_odata(), "(RowKey ge 'a') and (RowKey le 'b')");
    }

    /// What the module docs promise about which key ranges fit
    /// `Filter::MAX_LEN`, with the costliest valid keys: 512 UTF-16 units of
    /// three-byte characters (9 bytes each once encoded).
    #[test]
    fn key_ranges_over_the_longest_keys_fit_as_documented() {
        let cjk = |last: char| format!("{}{last}", "日".repeat(511));
        let (low, high) = (cjk('a'), cjk('c'));
        let long_pk = "日".repeat(512);
        let fits = |f: Filter| f.validate().map(|()| f.encoded_len());
        // One key, in the costliest partition.
        assert!(
            fits(query_filter(
                &long_pk,
                owned_bounds(low.clone()..=low.clone())
            ))
            .is_ok()
        );
        // One bound, in the costliest partition.
        assert!(fits(query_filter(&long_pk, owned_bounds(low.clone()..))).is_ok());
        assert!(fits(query_filter(&long_pk, owned_bounds(..=high.clone()))).is_ok());
        // Two bounds, in the longest ASCII partition.
        let len = fits(query_filter(
            &"p".repeat(512),
            owned_bounds(low.clone()..=high.clone()),
        ));
        assert!(len.is_ok(), "{len:?}");
        // The 88 bytes around the three keys.
        let around = query_filter("p", owned_bounds("a"..="b")).encoded_len() - 3;
        assert_eq!(around, 88);
        // Two bounds in the costliest partition: over the limit, named.
        match query_filter(&long_pk, owned_bounds(low..=high)).validate() {
            Err(Error::Invalid { what, why }) => {
                assert_eq!(what, "filter on `PartitionKey`, `RowKey`");
                assert!(why.contains(&Filter::MAX_LEN.to_string()), "{why}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn prefix_ranges() {
        assert_eq!(
            prefix_range("ab"),
            (Bound::Included("ab".into()), Bound::Excluded("ac".into()))
        );
        assert_eq!(prefix_range(""), (Bound::Unbounded, Bound::Unbounded));
    }
}
