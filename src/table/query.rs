//! Typed queries over a [`Table`].

use std::ops::{Bound, RangeBounds};
use std::sync::{Arc, Mutex};

use futures_core::Stream;
use futures_util::{StreamExt as _, TryStreamExt as _, stream};

use super::fence::is_fence_row;
use super::handle::Table;
use super::stored::versioned_from;
use crate::backend::QuerySpec;
use crate::entity::Value;
use crate::entity::{Entity, Versioned, property_name_problem};
use crate::error::{Error, Result};
use crate::key::IntoPartitionKey;
use crate::query::{
    CmpOp, Continuation, Filter, TypedFilter, key_range_filter, owned_bounds, prefix_range,
};

/// A query over a [`Table`]: partition, row-key range, filter, projection,
/// page size and resume token, then [`Query::stream`], [`Query::page`] or
/// [`Query::all`].
///
/// ```
/// # use leasehold::{Entity, Store};
/// # use futures_util::TryStreamExt;
/// # #[derive(Entity, Clone, Debug)]
/// # #[entity(table = "Accounts")]
/// # struct Account { #[entity(partition_key)] customer: String, #[entity(row_key)] name: String, balance: i64 }
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let accounts = Store::memory().table::<Account>();
/// for (name, balance) in [("checking", 10), ("savings", 500), ("spare", 0)] {
///     accounts.insert(Account { customer: "alice".into(), name: name.into(), balance }).await?;
/// }
/// let c = Account::columns();
/// let rich: Vec<_> = accounts
///     .query()
///     .partition("alice")
///     .row_key_prefix("s")
///     .filter(c.balance.gt(100))
///     .stream()
///     .try_collect()
///     .await?;
/// assert_eq!(rich.len(), 1);
/// assert_eq!(rich[0].name, "savings");
/// # Ok::<(), leasehold::Error>(()) }).unwrap();
/// ```
#[must_use = "a Query does nothing until `stream()`, `page().await` or `all().await`"]
pub struct Query<E> {
    table: Table<E>,
    partition: Option<Result<String>>,
    rows: (Bound<String>, Bound<String>),
    filter: Option<TypedFilter<E>>,
    select: Option<Vec<String>>,
    page_size: Option<u16>,
    resume: Option<String>,
    on_decode_error: OnDecodeError,
}

/// What a [`Query`] does with a row that does not decode into its entity
/// type ([`Error::Decode`]), set with [`Query::on_decode_error`].
///
/// Only decoding into `E` is covered: a reply the backend cannot parse at
/// all still fails its page.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub enum OnDecodeError {
    /// The error is returned, and a stream ends with it (the default).
    #[default]
    Fail,
    /// The row is left out.
    Skip,
    /// The row is left out and its error (naming table, keys and property)
    /// added to the [`DecodeErrors`].
    Collect(DecodeErrors),
}

/// The decode errors of the rows a query left out under
/// [`OnDecodeError::Collect`]. Clones share one list: keep a clone, hand
/// one to the query, read it when the query is done.
#[derive(Debug, Clone, Default)]
pub struct DecodeErrors(Arc<Mutex<Vec<Error>>>);

impl DecodeErrors {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the errors collected so far, oldest first, leaving the list
    /// empty.
    pub fn take(&self) -> Vec<Error> {
        std::mem::take(&mut *self.lock())
    }

    /// The number of errors collected and not yet taken.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no error is waiting to be taken.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Error>> {
        // A panic while pushing leaves a valid vector: the poison is moot.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl OnDecodeError {
    /// Applies the policy to one decoded row: `None` when it is left out.
    fn apply<E>(&self, row: Result<Versioned<E>>) -> Option<Result<Versioned<E>>> {
        match (row, self) {
            (Err(e @ Error::Decode { .. }), OnDecodeError::Skip) => {
                if let Error::Decode {
                    table, property, ..
                } = &e
                {
                    tracing::debug!(%table, %property, "skipping a row that does not decode");
                }
                None
            }
            (Err(e @ Error::Decode { .. }), OnDecodeError::Collect(errors)) => {
                errors.lock().push(e);
                None
            }
            (row, _) => Some(row),
        }
    }
}

impl<E> std::fmt::Debug for Query<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Query")
            .field("rows", &self.rows)
            .field("filter", &self.filter)
            .field("select", &self.select)
            .field("page_size", &self.page_size)
            .finish_non_exhaustive()
    }
}

/// One page of typed results.
#[derive(Debug, Clone)]
pub struct Page<E> {
    /// The entities of this page, in key order (possibly none even when more
    /// follow).
    pub items: Vec<Versioned<E>>,
    /// The token to pass to [`Query::resume`] for the next page; `None` on
    /// the last page.
    pub continuation: Option<String>,
}

impl<E: Entity> Table<E> {
    /// A query over this table. Fence rows (row keys starting with
    /// `~lhfence~`, see [`Fence`](super::Fence)) are left out.
    pub fn query(&self) -> Query<E> {
        Query::new(self.clone())
    }
}

impl<E: Entity> Query<E> {
    fn new(table: Table<E>) -> Self {
        Query {
            table,
            partition: None,
            rows: (Bound::Unbounded, Bound::Unbounded),
            filter: None,
            select: None,
            page_size: None,
            resume: None,
            on_decode_error: OnDecodeError::Fail,
        }
    }

    /// Only entities of this partition.
    pub fn partition(mut self, partition_key: impl IntoPartitionKey) -> Self {
        self.partition = Some(
            partition_key
                .into_partition_key()
                .map(|pk| pk.into_string()),
        );
        self
    }

    /// Only row keys within `range` (such as `"a".."m"` or `"k"..`).
    pub fn row_keys<R: RangeBounds<S>, S: AsRef<str>>(mut self, range: R) -> Self {
        self.rows = owned_bounds(range);
        self
    }

    /// Only row keys starting with `prefix` (turned into a key range, which
    /// the service serves efficiently).
    pub fn row_key_prefix(mut self, prefix: &str) -> Self {
        self.rows = prefix_range(prefix);
        self
    }

    /// Only entities matching `filter` (combined with `and` when called again).
    pub fn filter(mut self, filter: TypedFilter<E>) -> Self {
        self.filter = Some(match self.filter.take() {
            Some(existing) => existing & filter,
            None => filter,
        });
        self
    }

    /// Returns only these properties (keys and Timestamp always come back).
    /// Fields not selected must tolerate absence (`Option`, `default`, `skip`),
    /// or decoding fails with [`Error::Decode`].
    pub fn select(mut self, properties: &[&str]) -> Self {
        self.select = Some(properties.iter().map(|p| (*p).to_owned()).collect());
        self
    }

    /// Entities per page, 1 to 1000 ([`QuerySpec::MAX_PAGE_SIZE`], the
    /// service's limit and default).
    pub fn page_size(mut self, size: u16) -> Self {
        self.page_size = Some(size);
        self
    }

    /// What to do with a row that does not decode into `E`, such as one
    /// written by another program with a property of another type: fail
    /// (the default), skip it, or skip it and collect its error.
    ///
    /// ```
    /// # use leasehold::{Entity, Store};
    /// use leasehold::table::{DecodeErrors, OnDecodeError};
    /// # #[derive(Entity, Clone, Debug)]
    /// # #[entity(table = "Orders")]
    /// # struct Order { #[entity(partition_key)] shop: String, #[entity(row_key)] id: String, total: i64 }
    /// # #[derive(Entity, Clone, Debug)]
    /// # #[entity(table = "Orders")]
    /// # struct LegacyOrder { #[entity(partition_key)] shop: String, #[entity(row_key)] id: String, total: String }
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let store = Store::memory();
    /// let orders = store.table::<Order>();
    /// orders.insert(Order { shop: "s".into(), id: "1".into(), total: 5 }).await?;
    /// // An older program stored the total as text.
    /// let legacy = LegacyOrder { shop: "s".into(), id: "2".into(), total: "five".into() };
    /// store.table::<LegacyOrder>().insert(legacy).await?;
    ///
    /// let bad = DecodeErrors::new();
    /// let good = orders
    ///     .query()
    ///     .partition("s")
    ///     .on_decode_error(OnDecodeError::Collect(bad.clone()))
    ///     .all()
    ///     .await?;
    /// assert_eq!(good.len(), 1);
    /// let errors = bad.take();
    /// assert_eq!(errors.len(), 1);
    /// assert!(errors[0].to_string().contains(r#"RowKey "2""#));
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    pub fn on_decode_error(mut self, policy: OnDecodeError) -> Self {
        self.on_decode_error = policy;
        self
    }

    /// Resumes from a continuation token returned in a [`Page`].
    pub fn resume(mut self, token: impl Into<String>) -> Self {
        self.resume = Some(token.into());
        self
    }

    /// The request this query sends first, validated.
    fn spec(&self) -> Result<QuerySpec> {
        let mut filter: Option<Filter> = None;
        let mut push = |f: Filter| {
            filter = Some(match filter.take() {
                Some(existing) => existing.and(f),
                None => f,
            })
        };
        if let Some(pk) = &self.partition {
            let pk = pk.as_ref().map_err(clone_invalid)?;
            push(Filter::compare(
                "PartitionKey",
                CmpOp::Eq,
                Value::String(pk.clone()),
            ));
        }
        if let Some(rows) = key_range_filter("RowKey", self.rows.clone()) {
            push(rows);
        }
        if let Some(user) = &self.filter {
            push(user.clone().into_filter()?);
        }
        if let Some(select) = &self.select {
            for name in select {
                if let Some(why) = property_name_problem(name) {
                    return Err(Error::invalid(format!("selected property {name:?}"), why));
                }
            }
        }
        if let Some(size) = self.page_size
            && (size == 0 || size > QuerySpec::MAX_PAGE_SIZE)
        {
            return Err(Error::invalid(
                "page size",
                format!("{size} is outside 1..={}", QuerySpec::MAX_PAGE_SIZE),
            ));
        }
        let continuation = self
            .resume
            .as_deref()
            .map(Continuation::from_token)
            .transpose()?;
        let spec = QuerySpec {
            filter,
            // A projection asks for the row mark too, so that a marked row
            // is seen as such (see `crate::lock`'s "Units and optimistic
            // writes").
            select: self.select.clone().map(|mut names| {
                names.push(crate::lock::marks::MARK.to_owned());
                names
            }),
            top: self.page_size,
            continuation,
        };
        spec.validate()?;
        Ok(spec)
    }

    /// Reads one page.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad filter, page size or token (before any
    /// request); [`Error::Decode`] for a row that does not decode, unless
    /// [`Query::on_decode_error`] says otherwise; backend errors.
    pub async fn page(self) -> Result<Page<E>> {
        let spec = self.spec()?;
        let name = self.table.ready().await?;
        let page = self.table.env.backend().query(name, &spec).await?;
        let page = match &self.table.store {
            Some(store) => store.resolve_page(name, &spec, page).await?,
            None => page,
        };
        let complete = spec.select.is_none();
        Ok(Page {
            items: page
                .entities
                .into_iter()
                .filter(|row| !is_fence_row(row.data.row_key.as_str()))
                .filter_map(|row| self.on_decode_error.apply(versioned_from(row, complete)))
                .collect::<Result<_>>()?,
            continuation: page.continuation.map(|c| c.to_token()),
        })
    }

    /// Every matching entity, page after page, as a stream.
    ///
    /// # Errors
    /// Errors come through the stream, which ends after the first one:
    /// [`Error::Invalid`](crate::Error::Invalid) for a query that cannot be
    /// rendered, [`Error::Decode`](crate::Error::Decode) for an entity that
    /// does not decode (unless [`Query::on_decode_error`] skips it), and the
    /// backend's error when a page request fails.
    pub fn stream(self) -> impl Stream<Item = Result<Versioned<E>>> + Send + 'static {
        let policy = self.on_decode_error.clone();
        let start = self.spec().map(|spec| (self.table, spec, policy));
        stream::try_unfold(Some(start), |state| async move {
            let Some(start) = state else {
                return Ok(None);
            };
            let (table, mut spec, policy) = start?;
            let name = table.ready().await?.clone();
            let page = table.env.backend().query(&name, &spec).await?;
            let page = match &table.store {
                Some(store) => store.resolve_page(&name, &spec, page).await?,
                None => page,
            };
            let complete = spec.select.is_none();
            let mut items: Vec<Result<Versioned<E>>> = page
                .entities
                .into_iter()
                .filter(|row| !is_fence_row(row.data.row_key.as_str()))
                .filter_map(|row| policy.apply(versioned_from(row, complete)))
                .collect();
            // The stream ends with its first error.
            if let Some(failed) = items.iter().position(Result::is_err) {
                items.truncate(failed + 1);
                return Ok(Some((stream::iter(items), None)));
            }
            let next = page.continuation.map(|c| {
                spec.continuation = Some(c);
                Ok((table, spec, policy))
            });
            Ok(Some((stream::iter(items), next)))
        })
        .try_flatten()
        .boxed()
    }

    /// Every matching entity, collected.
    ///
    /// # Errors
    /// As [`Query::page`].
    pub async fn all(self) -> Result<Vec<Versioned<E>>> {
        self.stream().try_collect().await
    }
}

fn clone_invalid(e: &Error) -> Error {
    match e {
        Error::Invalid { what, why } => Error::invalid(what.clone(), why.clone()),
        other => Error::invalid("partition key", other.to_string()),
    }
}
